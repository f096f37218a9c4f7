// "Did you mean" (suggest.hpp).
#include "tokdyn/core/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <limits>

namespace tokdyn {

namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

}  // namespace

std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  // Three rows of the dynamic programme: i - 2, i - 1, i.
  std::vector<std::size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (std::size_t j = 0; j <= m; ++j) prev[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const bool same = lower(a[i - 1]) == lower(b[j - 1]);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    prev2.swap(prev);
    prev.swap(cur);
  }
  return prev[m];
}

std::string closest_name(const std::string& word, const std::vector<std::string>& candidates) {
  if (word.empty()) return {};
  const std::size_t allowed = word.size() <= 2 ? 0 : word.size() <= 4 ? 1 : word.size() <= 8 ? 2 : 3;
  std::size_t best = std::numeric_limits<std::size_t>::max();
  std::string out;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best) {
      best = d;
      out = c;
    }
  }
  if (best >= 1 && best <= allowed) return out;
  if (word.size() >= 3) {
    std::string prefixed;
    int count = 0;
    for (const std::string& c : candidates)
      if (c.size() > word.size() && std::equal(word.begin(), word.end(), c.begin(), [](char x, char y) { return lower(x) == lower(y); })) {
        prefixed = c;
        ++count;
      }
    if (count == 1) return prefixed;
  }
  return {};
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string c = closest_name(word, candidates);
  return c.empty() ? std::string() : "; did you mean '" + c + "'?";
}

}  // namespace tokdyn
