#pragma once
// SHA-256 (FIPS 180-4) of a byte string, as lower-case hex: the fingerprint of inputs in manifests.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokdyn {

/// Incremental SHA-256: update() with the bytes in order, then hex() (does not change the state).
class Sha256 {
 public:
  Sha256();
  void update(std::string_view bytes);
  std::string hex();

 private:
  std::array<std::uint32_t, 8> h_;
  std::array<unsigned char, 64> buf_{};
  std::size_t fill_ = 0;
  std::uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view bytes);

}  // namespace tokdyn
