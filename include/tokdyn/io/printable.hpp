#pragma once
// Bytes of a file made printable on one line, for error messages that quote what was read
// (json_strict, npy). Header-only, standard library only (the fuzz targets build json_strict
// standalone).
#include <string>
#include <string_view>

namespace tokdyn {

/// s with control bytes (< 0x20) and DEL written as \xNN; with non_ascii also every byte >= 0x80
/// (binary headers, where such a byte is not part of UTF-8 text), else those pass unchanged.
inline std::string escape_bytes(std::string_view s, bool non_ascii) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f || (non_ascii && c > 0x7f)) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace tokdyn
