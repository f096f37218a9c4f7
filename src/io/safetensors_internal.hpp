#pragma once
// Message helpers shared by the safetensors reader (safetensors.cpp) and writer
// (safetensors_writer.cpp). Internal to src/io; internal linkage, one copy per translation unit.
// Standard library and json_strict only (the fuzz target builds the reader standalone).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tokdyn/io/json_strict.hpp"

namespace tokdyn::st {

namespace {

[[maybe_unused]] std::string one_line(const std::string& s) { return json_strict::one_line(s); }

// A user-supplied string (tensor name, dtype ...) in quotes, shortened if very long.
[[maybe_unused]] std::string quote(const std::string& s) {
  // Appended piece by piece: GCC 12 reports a false -Wrestrict on "'" + std::string&& when inlined.
  constexpr std::size_t kMax = 120;
  std::size_t cut = s.size();
  if (cut > kMax) {
    cut = kMax;  // do not split a UTF-8 sequence
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
  }
  std::string q;
  q.reserve(cut + 5);
  q.push_back('\'');
  q.append(s, 0, cut);
  if (cut < s.size()) q.append("...");
  q.push_back('\'');
  return q;
}

[[maybe_unused]] std::string shape_str(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    if (i == 8) {
      s += "... (" + std::to_string(shape.size()) + " dims)";
      break;
    }
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// numel of a shape, false on overflow (a 0 dimension makes the product 0 whatever the others are).
[[maybe_unused]] bool checked_numel(const std::vector<std::uint64_t>& shape, std::uint64_t& out) {
  for (auto d : shape)
    if (d == 0) {
      out = 0;
      return true;
    }
  std::uint64_t n = 1;
  for (auto d : shape) {
    if (n > std::numeric_limits<std::uint64_t>::max() / d) return false;
    n *= d;
  }
  out = n;
  return true;
}

}  // namespace

}  // namespace tokdyn::st
