#pragma once
// Shared by the safetensors tests (test_safetensors_*.cpp): raw file bytes and writing them.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace tokdyn::testing::safetensors_fixtures {

// A file from raw parts: 8-byte little-endian length of `header`, `header`, `data`.
inline std::string raw_file(const std::string& header, const std::string& data = "") {
  std::string s(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s + header + data;
}

inline void put(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

}  // namespace tokdyn::testing::safetensors_fixtures
