// The BPE model of a tokenizer.json: a word (one pre-tokenized piece) split into characters, each
// looked up in the vocabulary (with byte fallback or the unknown token when it is missing), then
// merged pair by pair. The merge order is Hugging Face's: a queue of candidate pairs by (rank,
// position), the lowest first; an entry whose pair has changed since it was queued is skipped
// unless the pair now there merges to the same token.
#include <algorithm>
#include <queue>

#include <fmt/format.h>

#include "tokenizer_internal.hpp"
#include "tokdyn/core/error.hpp"

namespace tokdyn::tok {

namespace {

struct Symbol {
  std::int32_t id;
  std::int32_t prev, next;
  std::size_t len;  ///< bytes of the word it covers; 0: merged into its left neighbour
};

struct QueuedMerge {
  std::int32_t rank;
  std::int32_t pos;
  std::int32_t new_id;
  bool operator<(const QueuedMerge& o) const {  // std::priority_queue pops the largest: invert
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

inline std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

}  // namespace

void Bpe::merge_word(std::string_view w, std::vector<std::int32_t>& out, std::vector<std::string>& unknown) const {
  std::vector<Symbol> sym;
  sym.reserve(w.size());
  auto add = [&](std::int64_t id, std::size_t len) {
    const auto n = static_cast<std::int32_t>(sym.size());
    if (n > 0) sym.back().next = n;
    sym.push_back({static_cast<std::int32_t>(id), n - 1, -1, len});
  };
  // The pending unknown span: (start byte, length), fused with the next when fuse_unk.
  // Its text is kept apart: byte-fallback tokens may come between two fused characters (as in
  // Hugging Face, they do not close the span), so the span is not one substring of the word.
  bool unk_open = false;
  std::size_t unk_len = 0;
  std::string unk_text;
  auto close_unk = [&]() {
    if (!unk_open) return;
    add(unk_id, unk_len);
    unknown.push_back(std::move(unk_text));
    unk_text.clear();
    unk_open = false;
  };
  std::string s;
  for (std::size_t i = 0; i < w.size();) {
    const std::size_t start = i;
    const std::size_t end = i + char_len(static_cast<unsigned char>(w[i]));
    const bool first = start == 0, last = end >= w.size();
    std::string_view piece = w.substr(start, end - start);
    std::int64_t id = -1;
    if ((!has_prefix || first || prefix.empty()) && (!has_suffix || !last || suffix.empty())) {
      const auto it = vocab.find(piece);
      if (it != vocab.end()) id = it->second;
    } else {
      s.clear();
      if (has_prefix && !first) s += prefix;
      s += piece;
      if (has_suffix && last) s += suffix;
      const auto it = vocab.find(std::string_view(s));
      if (it != vocab.end()) id = it->second;
      piece = s;
    }
    i = end;
    if (id >= 0) {
      close_unk();
      add(id, end - start);
      continue;
    }
    if (byte_fallback) {
      bool all = true;
      for (unsigned char b : piece) all = all && byte_ids[b] >= 0;
      if (all) {
        // Hugging Face adds the byte tokens without closing a pending unknown span first.
        for (unsigned char b : piece) add(byte_ids[b], 1);
        continue;
      }
    }
    if (!unk_token.empty() && unk_id < 0)
      throw InputError(fmt::format("tokenizer: the unknown token '{}' is not in the vocabulary", unk_token));
    if (unk_id >= 0) {
      if (unk_open && fuse_unk) {
        unk_len += end - start;
        unk_text.append(w.substr(start, end - start));
      } else {
        close_unk();
        unk_open = true;
        unk_len = end - start;
        unk_text.assign(w.substr(start, end - start));
      }
    } else {
      unknown.emplace_back(w.substr(start, end - start));  // dropped: no unknown token
    }
  }
  close_unk();

  // Merges.
  std::priority_queue<QueuedMerge> queue;
  for (std::size_t k = 0; k + 1 < sym.size(); ++k) {
    const auto it = merges.find(pair_key(sym[k].id, sym[k + 1].id));
    if (it != merges.end()) queue.push({it->second.first, static_cast<std::int32_t>(k), it->second.second});
  }
  while (!queue.empty()) {
    const QueuedMerge top = queue.top();
    queue.pop();
    Symbol& cur = sym[static_cast<std::size_t>(top.pos)];
    if (cur.len == 0 || cur.next < 0) continue;
    const Symbol right = sym[static_cast<std::size_t>(cur.next)];
    const auto it = merges.find(pair_key(cur.id, right.id));
    if (it == merges.end() || it->second.second != top.new_id) continue;
    cur.id = top.new_id;
    cur.len += right.len;
    sym[static_cast<std::size_t>(cur.next)].len = 0;
    cur.next = right.next;
    if (right.next >= 0) sym[static_cast<std::size_t>(right.next)].prev = top.pos;
    if (cur.prev >= 0) {
      const auto p = merges.find(pair_key(sym[static_cast<std::size_t>(cur.prev)].id, cur.id));
      if (p != merges.end()) queue.push({p->second.first, cur.prev, p->second.second});
    }
    if (cur.next >= 0) {
      const auto q = merges.find(pair_key(cur.id, sym[static_cast<std::size_t>(cur.next)].id));
      if (q != merges.end()) queue.push({q->second.first, top.pos, q->second.second});
    }
  }
  for (const Symbol& x : sym)
    if (x.len != 0) out.push_back(x.id);
}

void Bpe::tokenize(std::string_view word, std::vector<std::int64_t>& ids, std::vector<std::string>& unknown, Cache* cache) const {
  if (word.empty()) return;
  if (ignore_merges) {
    const auto it = vocab.find(word);
    if (it != vocab.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  // Words without unknown spans are cached (the cache holds only what merge_word alone decides).
  const bool cacheable = cache != nullptr && word.size() < 256;
  if (cacheable) {
    const auto it = cache->find(word);
    if (it != cache->end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::int32_t> out;
  const std::size_t before = unknown.size();
  merge_word(word, out, unknown);
  ids.insert(ids.end(), out.begin(), out.end());
  if (cacheable && unknown.size() == before) {
    if (cache->size() >= 10000) cache->clear();
    cache->emplace(std::string(word), std::move(out));
  }
}

}  // namespace tokdyn::tok
