// The `taps` parameter (experiments/taps.hpp): layer selections "all", "a:b[:s]", "k", joined by commas.
#include "tokdyn/experiments/taps.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

#include "tokdyn/core/error.hpp"

namespace tokdyn {

namespace {

long taps_number(const std::string& s, const std::string& key, const std::string& item) {
  long v = 0;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  const auto [p, ec] = std::from_chars(b, e, v);
  if (s.empty() || ec != std::errc() || p != e)
    throw InputError(fmt::format("parameter '{}': '{}' is not a layer selection; expected all, a layer K, a range A:B or "
                                 "A:B:STEP, or several joined by commas (e.g. 0,10:200:10)",
                                 key, one_line(item)));
  return v;
}

}  // namespace

std::vector<long> parse_taps(const std::string& text, long depth, const std::string& key) {
  std::vector<long> out;
  if (text.empty()) return out;
  if (text == "all") {
    for (long k = 0; k <= depth; ++k) out.push_back(k);
    return out;
  }
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    std::vector<std::string> parts;
    for (std::size_t q = 0;;) {
      const std::size_t c = item.find(':', q);
      parts.push_back(item.substr(q, c == std::string::npos ? std::string::npos : c - q));
      if (c == std::string::npos) break;
      q = c + 1;
    }
    if (parts.size() > 3) taps_number("", key, item);  // the syntax message
    const long a = taps_number(parts[0], key, item);
    const long b = parts.size() > 1 ? taps_number(parts[1], key, item) : a;
    const long s = parts.size() > 2 ? taps_number(parts[2], key, item) : 1;
    if (s < 1) throw InputError(fmt::format("parameter '{}': '{}' has step {}; expected a step >= 1", key, one_line(item), s));
    if (b < a) throw InputError(fmt::format("parameter '{}': '{}' ends before it starts; expected A <= B", key, one_line(item)));
    if (a < 0 || b > depth)
      throw InputError(fmt::format("parameter '{}': '{}' reaches outside the layers 0..depth = {}; expected layers in [0, {}]", key,
                                   one_line(item), depth, depth));
    for (long k = a; k <= b; k += s) out.push_back(k);
    pos = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

ParamSpec taps_param(const std::string& what) {
  return p_string("taps", "",
                  fmt::format("layers whose state is written to taps/<variant>/layer_K.npy {} (layer 0: the start): all, K, "
                              "A:B, A:B:STEP, or several joined by commas, e.g. 0,10:200:10",
                              what));
}

}  // namespace tokdyn
