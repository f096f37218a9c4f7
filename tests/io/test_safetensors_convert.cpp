// Safetensors dtype conversions and round trips: F16 and BF16 rounding (nearest even, specials),
// F32/F16/BF16 files written and read back, scalars, empty tensors, and an older writer's
// unaligned offsets with F64.
#include "tokdyn/io/safetensors.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "safetensors_fixtures.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::TempDir;
using tokdyn::testing::safetensors_fixtures::put;
using tokdyn::testing::safetensors_fixtures::raw_file;

namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

// ----------------------------------------------------------------------------------------------
// Conversions

TEST(SafetensorsConvert, HalfExhaustiveRoundTrip) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = st::half_to_float(static_cast<std::uint16_t>(h));
    const bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_EQ(st::float_to_half(f) & 0xfe00u, (h & 0x8000u) | 0x7e00u);  // quiet NaN, sign kept
      continue;
    }
    ASSERT_EQ(st::float_to_half(f), h) << std::hex << h;
  }
}

TEST(SafetensorsConvert, HalfKnownValues) {
  EXPECT_EQ(st::half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(st::half_to_float(0xc000), -2.0f);
  EXPECT_EQ(st::half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(st::half_to_float(0x0001), std::ldexp(1.0f, -24));   // smallest subnormal
  EXPECT_EQ(st::half_to_float(0x03ff), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(st::half_to_float(0x0400), std::ldexp(1.0f, -14));   // smallest normal
  EXPECT_EQ(st::half_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(st::half_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(st::half_to_float(0x8000)));
  EXPECT_EQ(st::float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(st::float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(st::float_to_half(65520.0f), 0x7c00);  // tie with odd 65504 -> inf
  EXPECT_EQ(st::float_to_half(1e10f), 0x7c00);
  EXPECT_EQ(st::float_to_half(-1e10f), 0xfc00);
  EXPECT_EQ(st::float_to_half(std::ldexp(1.0f, -25)), 0x0000);          // tie -> even (0)
  EXPECT_EQ(st::float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(st::float_to_half(std::ldexp(1.5f, -24)), 0x0002);          // tie 1.5 -> 2
  EXPECT_EQ(st::float_to_half(std::ldexp(2.5f, -24)), 0x0002);          // tie 2.5 -> 2
  EXPECT_EQ(st::float_to_half(std::ldexp(1023.5f, -24)), 0x0400);       // subnormal rounds up to normal
  EXPECT_EQ(st::float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);   // tie -> even
  EXPECT_EQ(st::float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(st::float_to_half(1e-30f), 0x0000);
  EXPECT_EQ(st::float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(st::float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(st::half_to_float(st::float_to_half(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(SafetensorsConvert, HalfIsNearestEvenForRandomFloats) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-27, 16);
  for (int i = 0; i < 50000; ++i) {
    float f = std::ldexp(mant(rng), ex(rng));
    if (i % 2) f = -f;
    const std::uint16_t h = st::float_to_half(f);
    const double x = f, v = st::half_to_float(h);
    if (std::fabs(x) >= 65520.0) {
      EXPECT_TRUE(std::isinf(v));
      continue;
    }
    const double err = std::fabs(v - x);
    // No neighbour (same sign side) is closer; on a tie the chosen one is even.
    for (int d : {-1, 1}) {
      const int hn = (h & 0x7fff) + d;
      if (hn < 0 || hn > 0x7bff) continue;
      const double vn = std::copysign(static_cast<double>(st::half_to_float(static_cast<std::uint16_t>(hn))), x);
      const double errn = std::fabs(vn - x);
      ASSERT_LE(err, errn) << f;
      if (err == errn) {
        ASSERT_EQ(h & 1, 0) << f;
      }
    }
    if (std::fabs(x) >= std::ldexp(1.0, -14)) {
      ASSERT_LE(err / std::fabs(x), std::ldexp(1.0, -11)) << f;
    }
  }
}

TEST(SafetensorsConvert, Bf16) {
  EXPECT_EQ(st::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(st::bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(st::bf16_to_float(0xc040), -3.0f);
  EXPECT_EQ(st::float_to_bf16(float_of(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(st::float_to_bf16(float_of(0x3f818000u)), 0x3f82);  // tie, odd below -> up
  EXPECT_EQ(st::float_to_bf16(float_of(0x3f808001u)), 0x3f81);
  EXPECT_EQ(st::float_to_bf16(float_of(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(st::float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(st::float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  const std::uint16_t n = st::float_to_bf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(st::bf16_to_float(n)));
  EXPECT_TRUE(std::isnan(st::bf16_to_float(st::float_to_bf16(float_of(0x7f800001u)))));  // payload in low bits
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = st::bf16_to_float(static_cast<std::uint16_t>(b));
    if (!std::isnan(f)) {
      ASSERT_EQ(st::float_to_bf16(f), b);
    }
  }
}

// ----------------------------------------------------------------------------------------------
// Round trips

TEST(SafetensorsRoundTrip, F32F16Bf16) {
  TempDir tmp;
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 3.0f);
  std::vector<float> a(6 * 7), b(1000), c(5), d(3);
  for (auto& x : a) x = g(rng);
  for (auto& x : b) x = g(rng);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  a[0] = inf;
  a[1] = -0.0f;
  a[2] = nan;
  a[3] = std::numeric_limits<float>::denorm_min();
  c = {std::ldexp(1.0f, -24), std::ldexp(37.0f, -24), inf, -inf, nan};  // subnormal halves, specials
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = st::bf16_to_float(st::float_to_bf16(g(rng)));
  const fs::path p = tmp.path() / "rt.safetensors";
  st::write_file(p, {{"a32", st::DType::F32, {6, 7}, a.data()},
                     {"b16", st::DType::F16, {10, 100}, b.data()},
                     {"c16", st::DType::F16, {5}, c.data()},
                     {"dbf", st::DType::BF16, {3}, d.data()}});
  st::File f(p);
  ASSERT_EQ(f.header().tensors.size(), 4u);
  const auto ra = f.read_float("a32");
  ASSERT_EQ(ra.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) EXPECT_TRUE(std::isnan(ra[i]));
    else EXPECT_EQ(bits_of(ra[i]), bits_of(a[i])) << i;
  }
  const auto rb = f.read_float("b16");
  double max_rel = 0;
  for (std::size_t i = 0; i < b.size(); ++i)
    if (std::fabs(b[i]) >= std::ldexp(1.0f, -14)) max_rel = std::max(max_rel, std::fabs((rb[i] - b[i]) / double(b[i])));
  EXPECT_LE(max_rel, std::ldexp(1.0, -11));
  EXPECT_GT(max_rel, 0.0);
  const auto rc = f.read_float("c16");
  EXPECT_EQ(rc[0], c[0]);
  EXPECT_EQ(rc[1], c[1]);
  EXPECT_EQ(rc[2], inf);
  EXPECT_EQ(rc[3], -inf);
  EXPECT_TRUE(std::isnan(rc[4]));
  EXPECT_EQ(f.read_float("dbf"), d);
  // Values exactly representable in F16 come back exactly.
  std::vector<float> exact = {0.5f, -1.25f, 2048.0f, 65504.0f, std::ldexp(3.0f, -20), -0.0f};
  st::write_file(p, {{"e", st::DType::F16, {exact.size()}, exact.data()}});
  EXPECT_EQ(st::File(p).read_float("e"), exact);
}

TEST(SafetensorsRoundTrip, ScalarsEmptyTensorsAndNoTensors) {
  TempDir tmp;
  const fs::path p = tmp.path() / "s.safetensors";
  const float one = 1.5f;
  st::write_file(p, {{"scalar", st::DType::F32, {}, &one}, {"empty", st::DType::F16, {0, 5}, nullptr}});
  st::File f(p);
  ASSERT_NE(f.header().find("scalar"), nullptr);
  EXPECT_EQ(f.header().find("scalar")->numel(), 1u);
  EXPECT_EQ(f.read_float("scalar"), std::vector<float>{1.5f});
  EXPECT_TRUE(f.read_float("empty").empty());
  EXPECT_EQ(f.header().find("missing"), nullptr);

  const fs::path q = tmp.path() / "none.safetensors";
  st::write_file(q, {});
  st::File g(q);
  EXPECT_TRUE(g.header().tensors.empty());
  EXPECT_EQ(fs::file_size(q), 16u);  // "{}" padded to 8
}

TEST(SafetensorsRoundTrip, UnalignedOffsetsAndF64) {
  // An older-writer file: header length 61 (odd), tensors unaligned in the file and in the buffer.
  TempDir tmp;
  std::string hdr = "{\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                    "\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[6,14]},"
                    "\"d\":{\"dtype\":\"F64\",\"shape\":[1,2],\"data_offsets\":[14,30]},"
                    "\"b\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[30,32]}}";
  if (hdr.size() % 2 == 0) hdr += ' ';
  std::string data;
  for (std::uint16_t h : {0x3c00, 0xc000, 0x3555}) data += {char(h & 0xff), char(h >> 8)};
  for (float v : {3.25f, -7.5f}) data.append(reinterpret_cast<const char*>(&v), 4);
  for (double v : {0.1, 1e300}) data.append(reinterpret_cast<const char*>(&v), 8);
  data += {char(0x80), char(0x3f)};
  const fs::path p = tmp.path() / "old.safetensors";
  put(p, raw_file(hdr, data));
  st::File f(p);
  EXPECT_EQ(f.header().header_len, hdr.size());
  EXPECT_EQ(f.header().data_start % 2, 1u);
  ASSERT_EQ(f.header().tensors.size(), 4u);
  EXPECT_EQ(f.header().tensors[0].name, "h");  // file order of data_offsets
  EXPECT_EQ(f.header().tensors[3].name, "b");
  EXPECT_EQ(f.read_float("h"), (std::vector<float>{1.0f, -2.0f, st::half_to_float(0x3555)}));
  EXPECT_EQ(f.read_float("f"), (std::vector<float>{3.25f, -7.5f}));
  const auto d = f.read_float("d");
  EXPECT_EQ(d[0], 0.1f);
  EXPECT_EQ(d[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(f.read_float("b"), std::vector<float>{1.0f});
  EXPECT_EQ(f.bytes(*f.header().find("f")).size(), 8u);
}
