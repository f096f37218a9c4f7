// Unicode for the tokenizer: UTF-8, character properties and normalisation (ICU), regular
// expressions (Oniguruma, the engine Hugging Face's tokenizers uses, with its default syntax).
#include <mutex>

#include <fmt/format.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
// oniguruma.h would otherwise #define UChar, ICU's UTF-16 code unit type.
#define ONIG_ESCAPE_UCHAR_COLLISION 1
#include <oniguruma.h>

#include "tokenizer_internal.hpp"
#include "tokdyn/core/error.hpp"

namespace tokdyn::tok {

std::size_t char_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xe) return 3;
  return 4;
}

char32_t next_char(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const std::size_t n = char_len(b0);
  char32_t c = n == 1 ? b0 : n == 2 ? (b0 & 0x1f) : n == 3 ? (b0 & 0x0f) : (b0 & 0x07);
  for (std::size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  i += n;
  return c;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

namespace {

/// The length of the valid UTF-8 sequence at s[i], or 0 with `bad` = the length of its maximal
/// invalid prefix (at least 1), following the Unicode standard's "maximal subpart" rule (what
/// Rust's from_utf8_lossy replaces by one U+FFFD each).
std::size_t valid_at(std::string_view s, std::size_t i, std::size_t& bad) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3;
    if (b0 == 0xe0) lo = 0xa0;
    if (b0 == 0xed) hi = 0x9f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
    if (b0 == 0xf0) lo = 0x90;
    if (b0 == 0xf4) hi = 0x8f;
  } else {
    bad = 1;
    return 0;
  }
  for (std::size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) {
      bad = k;
      return 0;
    }
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xbf;
    if (b < l || b > h) {
      bad = k;
      return 0;
    }
  }
  return n;
}

}  // namespace

std::size_t invalid_utf8_at(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    std::size_t bad = 0;
    const std::size_t n = valid_at(s, i, bad);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::size_t bad = 0;
    const std::size_t n = valid_at(s, i, bad);
    if (n == 0) {
      out += "\xef\xbf\xbd";
      i += bad;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0d);
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const std::int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool is_alphanumeric(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC) || is_numeric(c);
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (c == 0x200c || c == 0x200d) return true;  // Join_Control
  const std::int8_t t = u_charType(static_cast<UChar32>(c));
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC) || t == U_NON_SPACING_MARK ||
         t == U_COMBINING_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION;
}

std::string normalize(std::string_view s, NormalForm f) {
  UErrorCode st = U_ZERO_ERROR;
  const icu::Normalizer2* n = f == NormalForm::NFC    ? icu::Normalizer2::getNFCInstance(st)
                              : f == NormalForm::NFD  ? icu::Normalizer2::getNFDInstance(st)
                              : f == NormalForm::NFKC ? icu::Normalizer2::getNFKCInstance(st)
                                                      : icu::Normalizer2::getNFKDInstance(st);
  if (U_FAILURE(st)) throw std::runtime_error(fmt::format("ICU normalizer unavailable: {}", u_errorName(st)));
  std::string out;
  out.reserve(s.size());
  icu::StringByteSink<std::string> sink(&out);
  n->normalizeUTF8(0, icu::StringPiece(s.data(), static_cast<std::int32_t>(s.size())), sink, nullptr, st);
  if (U_FAILURE(st)) throw std::runtime_error(fmt::format("ICU normalisation failed: {}", u_errorName(st)));
  return out;
}

// ---- Oniguruma ----

namespace {
void onig_once() {
  static std::once_flag flag;
  std::call_once(flag, [] {
    OnigEncoding use[] = {ONIG_ENCODING_UTF8};
    onig_initialize(use, 1);
  });
}
}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) {
  onig_once();
  OnigErrorInfo info;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int r = onig_new(&re_, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &info);
  if (r != ONIG_NORMAL) {
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, r, &info);
    re_ = nullptr;
    throw InputError(fmt::format("{}: regular expression /{}/ is invalid ({})", where, pattern, reinterpret_cast<const char*>(msg)));
  }
}

Regex::~Regex() {
  if (re_) onig_free(re_);
}

void Regex::find_all(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const {
  out.clear();
  OnigRegion* region = onig_region_new();
  const auto* s = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = s + text.size();
  std::size_t last_end = 0;
  bool have_last = false;
  std::size_t last_match_end = 0;
  while (last_end <= text.size()) {
    const int r = onig_search(re_, s, end, s + last_end, end, region, ONIG_OPTION_NONE);
    if (r == ONIG_MISMATCH) break;
    if (r < 0) {
      onig_region_free(region, 1);
      OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
      onig_error_code_to_str(msg, r);
      throw InputError(fmt::format("regular expression search failed ({})", reinterpret_cast<const char*>(msg)));
    }
    const auto b = static_cast<std::size_t>(region->beg[0]);
    const auto e = static_cast<std::size_t>(region->end[0]);
    if (b == e && have_last && last_match_end == e) {
      // An empty match right after the previous one: move on by one character.
      last_end += last_end < text.size() ? char_len(static_cast<unsigned char>(text[last_end])) : 1;
      continue;
    }
    last_end = e;
    have_last = true;
    last_match_end = e;
    out.emplace_back(b, e);
    if (b == e && e == text.size()) break;
  }
  onig_region_free(region, 1);
}

// ---- the byte-level alphabet (GPT-2's bytes_to_unicode) ----

namespace {
struct ByteAlphabet {
  std::string chars[256];
  std::unordered_map<char32_t, int> back;
  ByteAlphabet() {
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      append_utf8(chars[b], c);
      back[c] = b;
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}
}  // namespace

const std::string& byte_char(unsigned char b) { return alphabet().chars[b]; }

int char_byte(char32_t c) {
  const auto& m = alphabet().back;
  const auto it = m.find(c);
  return it == m.end() ? -1 : it->second;
}

}  // namespace tokdyn::tok
