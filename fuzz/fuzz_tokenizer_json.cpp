// libFuzzer target for the tokenizer: the tokenizer.json parser (Tokenizer::from_json) and, when
// the file is accepted, the encoder and decoder. The input is the file's bytes, optionally followed
// by "\n\001\n" and a text of the fuzzer's own, encoded too when it is valid UTF-8.
//
// A refusal is InputError, one line, starting with the source name; any other exception, a crash, a
// sanitizer report or a leak is a bug. An accepted file must encode every text (fixed texts: ASCII,
// CJK, emoji, spaces, special-token spellings; the vocabulary's own first and last tokens in a
// sentence; the fuzzer's text) into ids, pieces and special flags of one length, the same with
// encode_batch; decode and piece_text may refuse an id only with InputError (a template's id outside
// the vocabulary), and what they return is valid UTF-8 (the Python package hands it out as str).
// Built by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/tokenizer.hpp"

namespace {

constexpr std::string_view kName = "fuzz-input";
constexpr std::string_view kMarker = "\n\001\n";

[[noreturn]] void bug(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "invariant violated: %s%s%s\n", what, detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}

bool valid_utf8(std::string_view s) {
  try {
    tokdyn::require_utf8(s, "s");
    return true;
  } catch (const tokdyn::InputError&) {
    return false;
  }
}

void check_refusal(const tokdyn::InputError& e, const char* where) {
  const std::string msg = e.what();
  if (msg.empty()) bug("empty InputError message", where);
  if (msg.find('\n') != std::string::npos) bug("InputError message has a newline", msg);
}

/// decode / piece_text: a string of valid UTF-8, or InputError.
template <class F>
void decoded(F f, const char* what) {
  std::string s;
  try {
    s = f();
  } catch (const tokdyn::InputError& e) {
    check_refusal(e, what);
    return;
  }
  if (!valid_utf8(s)) bug("decoded text is not valid UTF-8", what);
}

void check_encoding(const tokdyn::Encoding& e) {
  if (e.ids.size() != e.pieces.size() || e.ids.size() != e.special.size()) bug("ids, pieces and special differ in length");
  for (const std::string& p : e.pieces)
    if (!valid_utf8(p)) bug("a piece is not valid UTF-8");
  for (const std::string& u : e.unknown)
    if (u.empty() || !valid_utf8(u)) bug("an unknown span is empty or not valid UTF-8");
}

bool same(const tokdyn::Encoding& a, const tokdyn::Encoding& b) {
  return a.ids == b.ids && a.pieces == b.pieces && a.special == b.special && a.unknown == b.unknown;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tokdyn;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = all.find(kMarker);
  const std::string_view json = all.substr(0, cut);
  std::optional<std::string> own_text;
  if (cut != std::string_view::npos) {
    const std::string_view t = all.substr(cut + kMarker.size());
    if (valid_utf8(t)) own_text.emplace(t);
  }

  std::optional<Tokenizer> T;
  try {
    T.emplace(Tokenizer::from_json(json, std::string(kName)));
  } catch (const InputError& e) {
    check_refusal(e, "from_json");
    if (std::string_view(e.what()).substr(0, kName.size()) != kName) bug("from_json's message does not start with the source", e.what());
    return 0;
  } catch (const std::exception& e) {
    bug("from_json threw something other than InputError", e.what());
  }

  try {
    if (T->vocab_size() < 0) bug("negative vocab_size");
    if (T->sha256().size() != 64) bug("sha256 is not 64 hex digits");
    if (T->summary().rfind("BPE (", 0) != 0 || !valid_utf8(T->summary())) bug("summary", T->summary());

    std::vector<std::string> texts = {"Hello world",
                                      "  leading,  double  spaces and trailing  ",
                                      "tabs\tand\nnew lines\r\n",
                                      "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c",  // 你好，世界
                                      "emoji \xf0\x9f\x99\x82\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd!",      // 🙂👍🏽
                                      "caf\xc3\xa9 cafe\xcc\x81 \xef\xac\x81",                          // NFC / NFD / NFKC
                                      "digits 1234567 and 3.14, it's we're I'll",
                                      "<s> <|endoftext|> [CLS] <unk></s>",
                                      "",
                                      " "};
    // The vocabulary's first and last tokens spelled in a sentence (added special tokens among them).
    const std::int64_t n = T->vocab_size();
    for (std::int64_t id : {std::int64_t{0}, std::int64_t{1}, n - 2, n - 1}) {
      if (id < 0 || id >= n) continue;
      try {
        const std::string tok = T->id_to_token(id);
        if (!valid_utf8(tok)) bug("id_to_token is not valid UTF-8");
        if (!T->token_to_id(tok)) bug("token_to_id misses id_to_token's token", tok);
        texts.push_back("a" + tok + " b" + tok);
      } catch (const InputError& e) {
        check_refusal(e, "id_to_token");  // a hole in the ids
      }
    }
    if (own_text) texts.push_back(*own_text);

    // encode may refuse a text with InputError (an unk_token missing from the vocabulary, a regular
    // expression over Oniguruma's retry limit); encode_batch then refuses the batch.
    std::vector<Encoding> one;
    bool refused = false;
    for (const std::string& t : texts) {
      for (bool special : {true, false}) {
        Encoding e;
        try {
          e = T->encode(t, special);
        } catch (const InputError& x) {
          check_refusal(x, "encode");
          refused = true;
          break;
        }
        check_encoding(e);
        decoded([&] { return T->decode(e.ids, false); }, "decode");
        decoded([&] { return T->decode(e.ids, true); }, "decode(skip_special_tokens)");
        for (std::size_t k = 0; k < e.ids.size() && k < 64; ++k) decoded([&] { return T->piece_text(e.ids[k]); }, "piece_text");
        if (special) one.push_back(e);
      }
    }
    if (!refused) {
      const std::vector<Encoding> batch = T->encode_batch(texts, true, 1);
      if (batch.size() != one.size()) bug("encode_batch returned a different number of encodings");
      for (std::size_t k = 0; k < one.size(); ++k)
        if (!same(batch[k], one[k])) bug("encode_batch differs from encode", texts[k]);
    }
    // Ids the vocabulary may not hold.
    const std::int64_t odd[] = {-1, n, n + 1000};
    for (std::int64_t id : odd) decoded([&] { return T->decode(std::vector<std::int64_t>{0, id}, false); }, "decode(bad id)");
  } catch (const InputError& e) {
    bug("an unexpected InputError", e.what());
  } catch (const std::exception& e) {
    bug("the encoder or decoder threw something other than InputError", e.what());
  }
  return 0;
}
