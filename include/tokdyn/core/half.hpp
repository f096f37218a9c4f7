#pragma once
// 16-bit floating-point formats: IEEE binary16 (F16) and bfloat16 (BF16), to and from float. The
// checkpoint reader and writer (io/safetensors) and the Mamba-2 model's half-precision weight
// rounding both use these; they are core because they carry no file format.
#include <cstdint>
#include <cstring>

namespace tokdyn {

namespace detail {
inline std::uint32_t f2u(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float u2f(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace detail

/// IEEE binary16 -> float (exact: subnormals, inf, NaN with its payload).
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu;
  const std::uint32_t m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * 0x1p-24f;  // exact: m < 2^10
    return sign ? -v : v;
  }
  if (e == 31) return detail::u2f(sign | 0x7f800000u | (m << 13));
  return detail::u2f(sign | ((e + 112u) << 23) | (m << 13));
}

/// float -> IEEE binary16, round to nearest even (subnormals, overflow to inf, quiet NaN).
inline std::uint16_t float_to_half(float f) {
  const std::uint32_t x = detail::f2u(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {
    if (ax > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // quiet NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax >= 0x38800000u) {                                                  // normal half
    std::uint32_t h = ((ax >> 23) - 112u) << 10 | ((ax & 0x7fffffu) >> 13);
    const std::uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rolls into the exponent correctly
    return static_cast<std::uint16_t>(sign | h);
  }
  if (ax <= 0x33000000u) return sign;  // <= 2^-25: rounds to (signed) zero, the tie going to even
  // Subnormal half: value = m * 2^(e-150), in units of 2^-24 that is m >> (126 - e).
  const std::uint32_t e = ax >> 23;  // 102..112
  const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - e;  // 14..24
  std::uint32_t h = m >> shift;
  const std::uint32_t rem = m & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

/// bfloat16 -> float (exact).
inline float bf16_to_float(std::uint16_t b) { return detail::u2f(static_cast<std::uint32_t>(b) << 16); }

/// float -> bfloat16, round to nearest even (quiet NaN).
inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = detail::f2u(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace tokdyn
