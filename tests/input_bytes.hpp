#pragma once
// Bytes of test input files, shared by test_input_readers.cpp and test_input_readers_cli.cpp:
// write a file, a .npy preamble + header dict, a little-endian int64.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

inline void put(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t n = dict.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>((n >> 24) & 0xff);
  }
  return out + dict + data;
}

inline std::string le64(std::int64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
  return s;
}
