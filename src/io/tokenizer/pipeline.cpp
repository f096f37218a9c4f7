// The tokenizer's pipeline, in Hugging Face's order: added tokens split out of the raw text (those
// matched before normalisation), each remaining segment normalised on its own and split on the
// normalised added tokens, the pre-tokenizer's pieces, the model's ids, the post-processor's
// template. Decoding maps ids to their strings and runs the decoder chain.
#include <algorithm>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "tokenizer_internal.hpp"
#include "tokdyn/core/error.hpp"

namespace tokdyn::tok {

using Matches = std::vector<std::pair<std::pair<std::size_t, std::size_t>, bool>>;

void Pattern::find_matches(std::string_view s, Matches& out) const {
  out.clear();
  if (s.empty()) {
    out.push_back({{0, 0}, false});
    return;
  }
  std::size_t prev = 0;
  auto push = [&](std::size_t b, std::size_t e) {
    if (prev != b) out.push_back({{prev, b}, false});
    out.push_back({{b, e}, true});
    prev = e;
  };
  if (regex) {
    std::vector<std::pair<std::size_t, std::size_t>> m;
    regex->find_all(s, m);
    for (auto [b, e] : m) push(b, e);
  } else {
    for (std::size_t at = s.find(literal); at != std::string_view::npos; at = s.find(literal, at + literal.size()))
      push(at, at + literal.size());
  }
  if (prev != s.size()) out.push_back({{prev, s.size()}, false});
}

namespace {

/// Matches of a character predicate: each matching character alone, the runs between them.
template <class F>
void char_matches(std::string_view s, F pred, Matches& out) {
  out.clear();
  if (s.empty()) {
    out.push_back({{0, 0}, false});
    return;
  }
  std::size_t last = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t b = i;
    const char32_t c = next_char(s, i);
    if (pred(c)) {
      if (last < b) out.push_back({{last, b}, false});
      out.push_back({{b, i}, true});
      last = i;
    }
  }
  if (last < s.size()) out.push_back({{last, s.size()}, false});
}

/// Hugging Face's NormalizedString::split: the matches merged by `behavior` into the pieces kept
/// (empty pieces dropped), appended to `out`; the first keeps `at_start`.
void split_by(const Piece& p, Matches m, SplitBehavior behavior, bool invert, std::vector<Piece>& out) {
  if (invert)
    for (auto& x : m) x.second = !x.second;
  Matches kept;  // (offsets, remove)
  bool prev_match = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (auto& x : m) kept.push_back({x.first, false});
      break;
    case SplitBehavior::Removed:
      kept = m;
      break;
    case SplitBehavior::MergedWithPrevious:
      for (auto& x : m) {
        if (x.second && !prev_match && !kept.empty())
          kept.back().first.second = x.first.second;
        else
          kept.push_back({x.first, false});
        prev_match = x.second;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (auto it = m.rbegin(); it != m.rend(); ++it) {
        if (it->second && !prev_match && !kept.empty())
          kept.back().first.first = it->first.first;
        else
          kept.push_back({it->first, false});
        prev_match = it->second;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    case SplitBehavior::Contiguous:
      for (auto& x : m) {
        if (x.second == prev_match && !kept.empty())
          kept.back().first.second = x.first.second;
        else
          kept.push_back({x.first, false});
        prev_match = x.second;
      }
      break;
  }
  for (auto& [off, remove] : kept) {
    if (remove || off.first == off.second) continue;
    out.push_back({p.text.substr(off.first, off.second - off.first), p.at_start && off.first == 0, -1});
  }
}

/// A piece split by a per-piece function (pieces holding an added token pass through).
template <class F>
void each_piece(std::vector<Piece>& pieces, F f) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  for (Piece& p : pieces) {
    if (p.id >= 0) {
      out.push_back(std::move(p));
      continue;
    }
    f(p, out);
  }
  pieces = std::move(out);
}

void replace_all(std::string& s, const Pattern& pat, const std::string& content) {
  Matches m;
  pat.find_matches(s, m);
  std::string r;
  r.reserve(s.size());
  for (auto& [off, is_match] : m) {
    if (is_match)
      r += content;
    else
      r.append(s, off.first, off.second - off.first);
  }
  s = std::move(r);
}

const Regex& byte_level_regex() {
  static const Regex re(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", "ByteLevel");
  return re;
}

}  // namespace

// ---- normalizers ----

void Normalizer::apply(std::string& s) const {
  switch (kind) {
    case Kind::Sequence:
      for (const Normalizer& n : seq) n.apply(s);
      break;
    case Kind::Form:
      s = normalize(s, form);
      break;
    case Kind::Strip: {
      std::size_t b = 0, e = s.size();
      if (left) {
        while (b < s.size()) {
          std::size_t j = b;
          if (!is_whitespace(next_char(s, j))) break;
          b = j;
        }
      }
      if (right) {
        std::size_t i = b;
        e = b;
        while (i < s.size())
          if (!is_whitespace(next_char(s, i))) e = i;
      }
      s = s.substr(b, e - b);
      break;
    }
    case Kind::Prepend:
      if (!s.empty()) s.insert(0, text);
      break;
    case Kind::Replace:
      replace_all(s, pattern, text);
      break;
  }
}

// ---- pre-tokenizers ----

void PreTokenizer::apply(std::vector<Piece>& pieces) const {
  Matches m;
  switch (kind) {
    case Kind::Sequence:
      for (const PreTokenizer& p : seq) p.apply(pieces);
      return;
    case Kind::ByteLevel: {
      std::vector<std::pair<std::size_t, std::size_t>> found;
      each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
        if (add_prefix_space && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
        const std::size_t first = out.size();
        if (use_regex) {
          // Isolated: every match and every gap a piece of its own.
          byte_level_regex().find_all(p.text, found);
          std::size_t prev = 0;
          auto emit = [&](std::size_t b, std::size_t e) {
            if (b < e) out.push_back({p.text.substr(b, e - b), p.at_start && b == 0, -1});
          };
          for (auto [b, e] : found) {
            emit(prev, b);
            emit(b, e);
            prev = e;
          }
          emit(prev, p.text.size());
        } else if (!p.text.empty()) {
          out.push_back(std::move(p));
        }
        for (std::size_t k = first; k < out.size(); ++k) {
          std::string mapped;
          mapped.reserve(out[k].text.size() * 2);
          for (unsigned char b : out[k].text) mapped += byte_char(b);
          out[k].text = std::move(mapped);
        }
      });
      return;
    }
    case Kind::Split:
    case Kind::Whitespace:
      each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
        pattern.find_matches(p.text, m);
        split_by(p, m, behavior, invert, out);
      });
      return;
    case Kind::WhitespaceSplit:
      each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
        char_matches(p.text, is_whitespace, m);
        split_by(p, m, SplitBehavior::Removed, false, out);
      });
      return;
    case Kind::Digits:
      each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
        char_matches(p.text, is_numeric, m);
        split_by(p, m, individual_digits ? SplitBehavior::Isolated : SplitBehavior::Contiguous, false, out);
      });
      return;
    case Kind::Metaspace: {
      std::size_t i0 = 0;
      const char32_t rc = next_char(replacement, i0);
      each_piece(pieces, [&](Piece& p, std::vector<Piece>& out) {
        Pattern space;
        space.literal = " ";
        replace_all(p.text, space, replacement);
        const bool starts = p.text.compare(0, replacement.size(), replacement) == 0;
        if (!starts && (prepend == Prepend::Always || (prepend == Prepend::First && p.at_start))) p.text.insert(0, replacement);
        if (split) {
          char_matches(p.text, [rc](char32_t c) { return c == rc; }, m);
          split_by(p, m, SplitBehavior::MergedWithNext, false, out);
        } else if (!p.text.empty()) {
          out.push_back(std::move(p));
        }
      });
      return;
    }
  }
}

// ---- post-processors ----

void PostProcessor::apply(Encoding& e) const {
  switch (kind) {
    case Kind::Sequence:
      for (const PostProcessor& p : seq) p.apply(e);
      return;
    case Kind::ByteLevel:
      return;  // trims offsets only; the ids are unchanged
    case Kind::Template:
    case Kind::Bert: {
      Encoding r;
      r.unknown = std::move(e.unknown);
      for (const auto& [is_seq, name] : single) {
        if (is_seq) {
          r.ids.insert(r.ids.end(), e.ids.begin(), e.ids.end());
          r.pieces.insert(r.pieces.end(), e.pieces.begin(), e.pieces.end());
          r.special.insert(r.special.end(), e.special.begin(), e.special.end());
        } else {
          const auto& sp = specials.at(name);
          r.ids.insert(r.ids.end(), sp.first.begin(), sp.first.end());
          r.pieces.insert(r.pieces.end(), sp.second.begin(), sp.second.end());
          r.special.insert(r.special.end(), sp.first.size(), 1);
        }
      }
      e = std::move(r);
      return;
    }
  }
}

// ---- decoders ----

void Decoder::apply(std::vector<std::string>& t) const {
  switch (kind) {
    case Kind::Sequence:
      for (const Decoder& d : seq) d.apply(t);
      return;
    case Kind::ByteLevel: {
      std::string bytes;
      for (const std::string& s : t) {
        std::string mine;
        bool all = true;
        for (std::size_t i = 0; i < s.size() && all;) {
          const int b = char_byte(next_char(s, i));
          if (b < 0)
            all = false;
          else
            mine.push_back(static_cast<char>(b));
        }
        bytes += all ? mine : s;
      }
      t.assign(1, utf8_lossy(bytes));
      return;
    }
    case Kind::Replace:
      for (std::string& s : t) replace_all(s, pattern, content);
      return;
    case Kind::ByteFallback: {
      std::vector<std::string> out;
      std::string pending;
      auto hexval = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      auto flush = [&]() {
        if (pending.empty()) return;
        if (invalid_utf8_at(pending) == std::string::npos)
          out.push_back(pending);
        else
          for (std::size_t k = 0; k < pending.size(); ++k) out.emplace_back("\xef\xbf\xbd");
        pending.clear();
      };
      for (std::string& s : t) {
        int v = -1;
        if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>') {
          // u8::from_str_radix(s[3..5], 16): two hex digits, or '+' and one
          const int a = hexval(s[3]), b = hexval(s[4]);
          if (a >= 0 && b >= 0)
            v = a * 16 + b;
          else if (s[3] == '+' && b >= 0)
            v = b;
        }
        if (v >= 0) {
          pending.push_back(static_cast<char>(v));
        } else {
          flush();
          out.push_back(std::move(s));
        }
      }
      flush();
      t = std::move(out);
      return;
    }
    case Kind::Fuse: {
      std::string all;
      for (const std::string& s : t) all += s;
      t.assign(1, all);
      return;
    }
    case Kind::Strip:
      for (std::string& s : t) {
        std::vector<std::pair<std::size_t, char32_t>> cs;  // (byte offset, char)
        for (std::size_t i = 0; i < s.size();) {
          const std::size_t b = i;
          cs.push_back({b, next_char(s, i)});
        }
        std::size_t a = 0, z = 0;
        while (a < start && a < cs.size() && cs[a].second == strip_char) ++a;
        while (z < stop && z < cs.size() && cs[cs.size() - 1 - z].second == strip_char) ++z;
        if (a + z >= cs.size()) {
          s.clear();
        } else {
          const std::size_t from = cs[a].first;
          const std::size_t to = z == 0 ? s.size() : cs[cs.size() - z].first;
          s = s.substr(from, to - from);
        }
      }
      return;
    case Kind::Metaspace: {
      Pattern p;
      p.literal = replacement;
      for (std::size_t k = 0; k < t.size(); ++k) {
        replace_all(t[k], p, " ");
        if (k == 0 && prepend != Prepend::Never && !t[k].empty() && t[k][0] == ' ') t[k].erase(0, 1);
      }
      return;
    }
    case Kind::BPE: {
      Pattern p;
      p.literal = content;
      for (std::size_t k = 0; k < t.size(); ++k) replace_all(t[k], p, k + 1 == t.size() ? "" : " ");
      return;
    }
  }
}

}  // namespace tokdyn::tok

namespace tokdyn {

using namespace tok;

namespace {

/// Splits `text` on the added tokens `which` (leftmost-longest, non-overlapping, as the
/// reference's Aho-Corasick), applying single_word, lstrip and rstrip; appends to `out`.
void split_added(const Tokenizer::Impl& T, const std::string& text, bool at_start, const std::vector<std::size_t>& which,
                 const std::vector<std::string>& contents, std::vector<Piece>& out) {
  std::size_t start_offset = 0;
  auto push_text = [&](std::size_t b, std::size_t e) {
    if (b < e) out.push_back({text.substr(b, e - b), at_start && b == 0, -1});
  };
  if (!which.empty()) {
    for (std::size_t i = 0; i < text.size();) {
      std::size_t best = which.size(), best_len = 0;
      for (std::size_t k = 0; k < which.size(); ++k) {
        const std::string& c = contents[k];
        if (c.size() > best_len && c.size() <= text.size() - i && text.compare(i, c.size(), c) == 0) {
          best = k;
          best_len = c.size();
        }
      }
      if (best == which.size()) {
        ++i;
        continue;
      }
      const AddedToken& a = T.added[which[best]];
      std::size_t start = i, stop = i + best_len;
      i = stop;
      if (a.single_word) {
        bool start_space = true, stop_space = true;
        if (start > 0) {
          std::size_t j = start - 1;
          while (j > 0 && (static_cast<unsigned char>(text[j]) & 0xc0) == 0x80) --j;
          std::size_t jj = j;
          start_space = !is_word_char(next_char(text, jj));
        }
        if (stop < text.size()) {
          std::size_t jj = stop;
          stop_space = !is_word_char(next_char(text, jj));
        }
        if (!start_space || !stop_space) continue;
      }
      if (a.lstrip) {
        std::size_t ns = start;
        while (ns > 0) {
          std::size_t j = ns - 1;
          while (j > 0 && (static_cast<unsigned char>(text[j]) & 0xc0) == 0x80) --j;
          std::size_t jj = j;
          if (!is_whitespace(next_char(text, jj))) break;
          ns = j;
        }
        start = std::max(ns, start_offset);
      }
      if (a.rstrip) {
        std::size_t jj = stop;
        while (jj < text.size()) {
          const std::size_t before = jj;
          if (!is_whitespace(next_char(text, jj))) {
            jj = before;
            break;
          }
        }
        stop = jj;
      }
      if (start_offset < start) push_text(start_offset, start);
      out.push_back({a.content, at_start && start == 0, a.id});
      start_offset = stop;
    }
  }
  push_text(start_offset, text.size());
}

}  // namespace

std::string Tokenizer::Impl::token_of(std::int64_t id) const {
  const auto it = added_by_id.find(id);
  if (it != added_by_id.end()) return added[it->second].content;
  if (id >= 0 && static_cast<std::size_t>(id) < bpe.vocab_r.size() && bpe.present[static_cast<std::size_t>(id)])
    return bpe.vocab_r[static_cast<std::size_t>(id)];
  return {};
}

Encoding Tokenizer::Impl::encode(std::string_view text, bool add_special, Bpe::Cache& cache) const {
  require_utf8(text, "text");
  std::vector<Piece> segs;
  if (!text.empty()) {
    std::vector<std::string> raw;
    for (std::size_t k : raw_tokens) raw.push_back(added[k].content);
    split_added(*this, std::string(text), true, raw_tokens, raw, segs);
  }
  std::vector<Piece> pieces;
  for (Piece& s : segs) {
    if (s.id >= 0) {
      pieces.push_back(std::move(s));
      continue;
    }
    if (normalizer) normalizer->apply(s.text);
    if (s.text.empty()) continue;
    split_added(*this, s.text, s.at_start, normalized_tokens, normalized_content, pieces);
  }
  if (pre) pre->apply(pieces);
  Encoding e;
  for (const Piece& p : pieces) {
    const std::size_t before = e.ids.size();
    if (p.id >= 0) {
      e.ids.push_back(p.id);
      e.pieces.push_back(p.text);
      e.special.push_back(added[added_by_id.at(p.id)].special ? 1 : 0);
      continue;
    }
    bpe.tokenize(p.text, e.ids, e.unknown, &cache);
    for (std::size_t k = before; k < e.ids.size(); ++k) {
      e.pieces.push_back(token_of(e.ids[k]));
      e.special.push_back(0);
    }
  }
  if (add_special && post) post->apply(e);
  return e;
}

Encoding Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  Bpe::Cache cache;
  return impl_->encode(text, add_special_tokens, cache);
}

std::vector<Encoding> Tokenizer::encode_batch(const std::vector<std::string>& texts, bool add_special_tokens, int threads) const {
  std::vector<Encoding> out(texts.size());
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int nt = std::max(1, std::min<int>(threads > 0 ? threads : hw, static_cast<int>(texts.size())));
  if (nt <= 1) {
    Bpe::Cache cache;
    for (std::size_t i = 0; i < texts.size(); ++i) out[i] = impl_->encode(texts[i], add_special_tokens, cache);
    return out;
  }
  // Fixed contiguous blocks per thread; each text is encoded alone, so the result does not
  // depend on the partition. The first error (by text index) is rethrown.
  std::vector<std::exception_ptr> err(static_cast<std::size_t>(nt));
  std::vector<std::size_t> err_at(static_cast<std::size_t>(nt), texts.size());
  std::vector<std::thread> pool;
  for (int t = 0; t < nt; ++t) {
    pool.emplace_back([&, t]() {
      const std::size_t b = texts.size() * static_cast<std::size_t>(t) / static_cast<std::size_t>(nt);
      const std::size_t e = texts.size() * static_cast<std::size_t>(t + 1) / static_cast<std::size_t>(nt);
      Bpe::Cache cache;
      for (std::size_t i = b; i < e; ++i) {
        try {
          out[i] = impl_->encode(texts[i], add_special_tokens, cache);
        } catch (...) {
          err[static_cast<std::size_t>(t)] = std::current_exception();
          err_at[static_cast<std::size_t>(t)] = i;
          return;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < nt; ++t)
    if (err[static_cast<std::size_t>(t)]) std::rethrow_exception(err[static_cast<std::size_t>(t)]);
  return out;
}

std::string Tokenizer::decode(std::span<const std::int64_t> ids, bool skip_special_tokens) const {
  const Impl& T = *impl_;
  std::vector<std::string> toks;
  toks.reserve(ids.size());
  for (std::int64_t id : ids) {
    const auto it = T.added_by_id.find(id);
    if (it != T.added_by_id.end()) {
      if (skip_special_tokens && T.added[it->second].special) continue;
      toks.push_back(T.added[it->second].content);
      continue;
    }
    std::string t = T.token_of(id);
    if (t.empty() && !(id >= 0 && static_cast<std::size_t>(id) < T.bpe.present.size() && T.bpe.present[static_cast<std::size_t>(id)]))
      throw InputError(fmt::format("{}: token id {} is not in the vocabulary (ids 0..{})", T.source, id, T.vocab_size - 1));
    toks.push_back(std::move(t));
  }
  if (!T.decoder) {
    std::string r;
    for (std::size_t k = 0; k < toks.size(); ++k) r += (k ? " " : "") + toks[k];
    return r;
  }
  T.decoder->apply(toks);
  std::string r;
  for (const std::string& s : toks) r += s;
  return r;
}

std::string Tokenizer::piece_text(std::int64_t id) const {
  const std::int64_t one[1] = {id};
  return decode(std::span<const std::int64_t>(one, 1), false);
}

std::optional<std::int64_t> Tokenizer::token_to_id(std::string_view token) const {
  const auto a = impl_->added_by_content.find(token);
  if (a != impl_->added_by_content.end()) return a->second;
  const auto it = impl_->bpe.vocab.find(token);
  if (it != impl_->bpe.vocab.end()) return it->second;
  return std::nullopt;
}

std::string Tokenizer::id_to_token(std::int64_t id) const {
  std::string t = impl_->token_of(id);
  if (t.empty() && !(id >= 0 && static_cast<std::size_t>(id) < impl_->bpe.present.size() && impl_->bpe.present[static_cast<std::size_t>(id)]))
    throw InputError(fmt::format("{}: token id {} is not in the vocabulary", impl_->source, id));
  return t;
}

std::int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

bool Tokenizer::is_special(std::int64_t id) const {
  const auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

const std::string& Tokenizer::source() const { return impl_->source; }
const std::string& Tokenizer::sha256() const { return impl_->sha; }

void require_utf8(std::string_view text, const std::string& what) {
  const std::size_t at = invalid_utf8_at(text);
  if (at == std::string_view::npos) return;
  throw InputError(fmt::format("{}: invalid UTF-8 at byte {} (byte 0x{:02x}); expected UTF-8 text", what, at,
                               static_cast<unsigned char>(text[at])));
}

}  // namespace tokdyn
