// Byte-level BPE training (bpe_trainer.hpp): words counted in fixed blocks of texts, then merges
// chosen from a max-heap of pair counts kept lazily up to date.
#include <omp.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tokdyn/io/bpe_trainer.hpp"
#include "tokdyn/io/tokenizer.hpp"
#include "tokenizer_internal.hpp"

namespace tokdyn {
namespace bpe_train_detail {

using WordCounts = std::unordered_map<std::string, std::int64_t>;

/// GPT-2's ByteLevel pre-tokenizer: the words of one text, in byte-level characters.
void count_words(const tok::PreTokenizer& pre, const std::string& text, WordCounts& counts) {
  std::vector<tok::Piece> pieces{{text, true, -1}};
  pre.apply(pieces);
  for (auto& p : pieces) ++counts[p.text];
}

/// The byte-level characters of a word as symbol ids (id = byte value).
std::vector<std::int32_t> word_symbols(const std::string& word) {
  std::vector<std::int32_t> s;
  std::size_t i = 0;
  while (i < word.size()) {
    const char32_t c = tok::next_char(word, i);
    const int b = tok::char_byte(c);
    if (b < 0) throw std::logic_error("bpe trainer: a pre-tokenized word holds a character that is not byte-level");
    s.push_back(b);
  }
  return s;
}

inline std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

struct HeapEntry {
  std::int64_t count;
  std::int32_t a, b;
  // std::priority_queue pops the largest: larger count first, then the smaller (a, b).
  bool operator<(const HeapEntry& o) const {
    if (count != o.count) return count < o.count;
    return std::tie(a, b) > std::tie(o.a, o.b);
  }
};

}  // namespace bpe_train_detail

BpeTrainResult train_bpe(const std::vector<std::string>& texts, const BpeTrainOptions& opt) {
  using namespace bpe_train_detail;
  const std::int64_t n_special = static_cast<std::int64_t>(opt.special_tokens.size());
  if (opt.vocab_size < 257 + n_special || opt.vocab_size > (std::int64_t{1} << 30))
    throw std::invalid_argument("vocab_size: expected an integer in [" + std::to_string(257 + n_special) +
                                ", 2^30] (the 256 bytes, one merge and the special tokens), got " +
                                std::to_string(opt.vocab_size));
  if (opt.min_frequency < 1)
    throw std::invalid_argument("min_frequency: expected an integer >= 1, got " + std::to_string(opt.min_frequency));
  {
    std::unordered_set<std::string> seen;
    for (const auto& s : opt.special_tokens) {
      if (s.empty()) throw std::invalid_argument("special token: expected a non-empty string");
      require_utf8(s, "special token");
      if (!seen.insert(s).second) throw std::invalid_argument("special token '" + s + "' given twice");
    }
  }
  BpeTrainResult res;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    require_utf8(texts[i], "text " + std::to_string(i + 1));
    res.bytes += texts[i].size();
  }

  // 1. Words, counted in fixed blocks of texts (the blocks do not depend on the thread count).
  tok::PreTokenizer pre;
  pre.kind = tok::PreTokenizer::Kind::ByteLevel;
  pre.add_prefix_space = false;
  pre.use_regex = true;
  const long n_texts = static_cast<long>(texts.size());
  const long n_blocks = std::min<long>(n_texts, 256);
  std::vector<WordCounts> block_counts(static_cast<std::size_t>(std::max<long>(n_blocks, 0)));
  const int threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (long blk = 0; blk < n_blocks; ++blk) {
    const long lo = n_texts * blk / n_blocks, hi = n_texts * (blk + 1) / n_blocks;
    for (long t = lo; t < hi; ++t) count_words(pre, texts[static_cast<std::size_t>(t)], block_counts[static_cast<std::size_t>(blk)]);
  }
  std::map<std::string, std::int64_t> counts;  // sorted: word indices are fixed by the words alone
  for (auto& bc : block_counts)
    for (auto& [w, c] : bc) counts[w] += c;
  block_counts.clear();

  std::vector<std::vector<std::int32_t>> words;
  std::vector<std::int64_t> freq;
  words.reserve(counts.size());
  for (auto& [w, c] : counts) {
    res.words += c;
    words.push_back(word_symbols(w));
    freq.push_back(c);
  }
  res.unique_words = static_cast<std::int64_t>(words.size());

  // 2. The alphabet: the 256 byte characters.
  std::vector<std::string> id_to_token;
  std::unordered_map<std::string, std::int32_t> token_to_id;
  for (int b = 0; b < 256; ++b) {
    id_to_token.push_back(tok::byte_char(static_cast<unsigned char>(b)));
    token_to_id.emplace(id_to_token.back(), b);
  }

  // 3. Pair counts, the words each pair occurs in, and the heap.
  std::unordered_map<std::uint64_t, std::int64_t> pair_count;
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> pair_where;
  std::priority_queue<HeapEntry> heap;
  auto add_pairs = [&](std::size_t w, std::int64_t sign, bool record) {
    const auto& s = words[w];
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      const auto key = bpe_train_detail::pair_key(s[i], s[i + 1]);
      pair_count[key] += sign * freq[w];
      if (record) pair_where[key].push_back(static_cast<std::int32_t>(w));
    }
  };
  for (std::size_t w = 0; w < words.size(); ++w) add_pairs(w, +1, true);
  for (auto& [key, c] : pair_count)
    heap.push({c, static_cast<std::int32_t>(key >> 32), static_cast<std::int32_t>(key & 0xffffffffu)});

  std::vector<std::int64_t> last_visit(words.size(), -1);
  const std::int64_t target = opt.vocab_size - n_special;
  std::int64_t merge_no = 0;
  while (static_cast<std::int64_t>(id_to_token.size()) < target && !heap.empty()) {
    const HeapEntry top = heap.top();
    heap.pop();
    const auto key = bpe_train_detail::pair_key(top.a, top.b);
    const auto it = pair_count.find(key);
    const std::int64_t now = it == pair_count.end() ? 0 : it->second;
    if (now != top.count) {  // stale: counts only fall between pushes of the same pair
      if (now > 0) heap.push({now, top.a, top.b});
      continue;
    }
    if (now < opt.min_frequency) break;
    const std::string merged = id_to_token[static_cast<std::size_t>(top.a)] + id_to_token[static_cast<std::size_t>(top.b)];
    std::int32_t id;
    if (auto f = token_to_id.find(merged); f != token_to_id.end()) {
      id = f->second;  // the same string reached through another pair: the same token
    } else {
      id = static_cast<std::int32_t>(id_to_token.size());
      id_to_token.push_back(merged);
      token_to_id.emplace(merged, id);
    }
    res.merges.push_back(id_to_token[static_cast<std::size_t>(top.a)] + " " + id_to_token[static_cast<std::size_t>(top.b)]);
    // Every word holding the pair: its pairs out, the merge (left to right, non-overlapping), its pairs in.
    std::vector<std::int32_t> where = std::move(pair_where[key]);
    pair_where.erase(key);
    std::unordered_map<std::uint64_t, std::int64_t> before;
    for (const std::int32_t w : where) {
      if (last_visit[static_cast<std::size_t>(w)] == merge_no) continue;
      last_visit[static_cast<std::size_t>(w)] = merge_no;
      auto& s = words[static_cast<std::size_t>(w)];
      bool has = false;
      for (std::size_t i = 0; i + 1 < s.size(); ++i) has = has || (s[i] == top.a && s[i + 1] == top.b);
      if (!has) continue;
      for (std::size_t i = 0; i + 1 < s.size(); ++i) {
        const auto k2 = bpe_train_detail::pair_key(s[i], s[i + 1]);
        if (!before.count(k2)) before[k2] = pair_count[k2];
      }
      add_pairs(static_cast<std::size_t>(w), -1, false);
      std::vector<std::int32_t> out;
      out.reserve(s.size());
      for (std::size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == top.a && s[i + 1] == top.b) {
          out.push_back(id);
          i += 2;
        } else {
          out.push_back(s[i++]);
        }
      }
      s = std::move(out);
      for (std::size_t i = 0; i + 1 < s.size(); ++i) {
        const auto k2 = bpe_train_detail::pair_key(s[i], s[i + 1]);
        if (!before.count(k2)) before[k2] = pair_count[k2];
        auto& wl = pair_where[k2];
        if (wl.empty() || wl.back() != w) wl.push_back(w);
      }
      add_pairs(static_cast<std::size_t>(w), +1, false);
    }
    // Pairs whose count rose get a fresh heap entry (ones that fell are corrected when popped).
    std::vector<std::uint64_t> risen;
    for (auto& [k2, old] : before)
      if (pair_count[k2] > old) risen.push_back(k2);
    std::sort(risen.begin(), risen.end());
    for (auto k2 : risen)
      heap.push({pair_count[k2], static_cast<std::int32_t>(k2 >> 32), static_cast<std::int32_t>(k2 & 0xffffffffu)});
    for (auto& [k2, old] : before)
      if (pair_count[k2] == 0) pair_count.erase(k2);
    ++merge_no;
  }

  // 4. The tokenizer.json: GPT-2's pipeline.
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < id_to_token.size(); ++i) vocab[id_to_token[i]] = static_cast<std::int64_t>(i);
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (std::int64_t k = 0; k < n_special; ++k)
    added.push_back({{"id", static_cast<std::int64_t>(id_to_token.size()) + k},
                     {"content", opt.special_tokens[static_cast<std::size_t>(k)]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", true},
                     {"special", true}});
  const auto byte_level = [](bool prefix, bool trim) {
    return nlohmann::ordered_json{{"type", "ByteLevel"}, {"add_prefix_space", prefix}, {"trim_offsets", trim}, {"use_regex", true}};
  };
  nlohmann::ordered_json j{{"version", "1.0"},
                           {"truncation", nullptr},
                           {"padding", nullptr},
                           {"added_tokens", added},
                           {"normalizer", nullptr},
                           {"pre_tokenizer", byte_level(false, true)},
                           {"post_processor", byte_level(true, false)},
                           {"decoder", byte_level(true, true)},
                           {"model",
                            {{"type", "BPE"},
                             {"dropout", nullptr},
                             {"unk_token", nullptr},
                             {"continuing_subword_prefix", ""},
                             {"end_of_word_suffix", ""},
                             {"fuse_unk", false},
                             {"byte_fallback", false},
                             {"ignore_merges", false},
                             {"vocab", vocab},
                             {"merges", res.merges}}}};
  res.vocab_size = static_cast<std::int64_t>(id_to_token.size()) + n_special;
  res.json = j.dump(1) + "\n";
  return res;
}

}  // namespace tokdyn
