// Safetensors reader/writer: conversions, round trips, writer layout, sharded checkpoints and every
// header validation (each must be one InputError line naming the file).
#include "tokdyn/io/safetensors.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "tokdyn/error.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;

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

// A file from raw parts: 8-byte little-endian length of `header`, `header`, `data`.
std::string raw_file(const std::string& header, const std::string& data = "") {
  std::string s(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s + header + data;
}

void put(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

// Writes `bytes` to dir/<name>, opens it, and checks the InputError: names the file, one line,
// contains `needle` and the word "expected".
void expect_bad(const fs::path& dir, const std::string& name, const std::string& bytes, const std::string& needle) {
  const fs::path p = dir / name;
  put(p, bytes);
  try {
    st::File f(p);
    ADD_FAILURE() << name << ": no error";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << name << ": " << msg;
    EXPECT_NE(msg.find("expected"), std::string::npos) << msg;
  }
}

// A valid one-tensor header (F32 [2], 8 bytes) with `entry` substituted for the entry.
std::string one(const std::string& entry) { return "{\"t\":" + entry + "}"; }

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
// Round trips and layout

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

TEST(SafetensorsWriter, ReferenceLayout) {
  TempDir tmp;
  const fs::path p = tmp.path() / "layout.safetensors";
  std::vector<float> v(12, 1.0f);
  st::write_file(p,
                 {{"b", st::DType::F16, {3}, v.data()},
                  {"zz", st::DType::F32, {2}, v.data()},
                  {"c", st::DType::F32, {1}, v.data()},
                  {"a", st::DType::BF16, {2, 2}, v.data()},
                  {"e", st::DType::F16, {}, v.data()}},
                 {{"format", "pt"}});
  const std::string bytes = slurp(p);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  const std::string hdr = bytes.substr(8, n);
  EXPECT_EQ(hdr.front(), '{');
  const auto close = hdr.find_last_not_of(' ');
  EXPECT_EQ(hdr[close], '}');
  EXPECT_LT(hdr.size() - close - 1, 8u);  // only padding spaces after the JSON
  EXPECT_EQ(hdr.rfind("{\"__metadata__\":{\"format\":\"pt\"},", 0), 0u) << hdr;
  // Order: F32 (align 4) by name, then the 2-byte dtypes by name.
  std::vector<std::string> expect = {"c", "zz", "a", "b", "e"};
  std::size_t last = 0;
  for (const auto& name : expect) {
    const auto pos = hdr.find("\"" + name + "\":{\"dtype\"");
    ASSERT_NE(pos, std::string::npos) << name;
    EXPECT_GT(pos, last) << name;
    last = pos;
  }
  EXPECT_NE(hdr.find("\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"), std::string::npos) << hdr;
  st::File f(p);
  std::uint64_t pos = 0;
  ASSERT_EQ(f.header().tensors.size(), expect.size());
  for (std::size_t i = 0; i < expect.size(); ++i) {
    const auto& t = f.header().tensors[i];
    EXPECT_EQ(t.name, expect[i]);
    EXPECT_EQ(t.begin, pos);
    EXPECT_EQ((f.header().data_start + t.begin) % (t.dtype == st::DType::F32 ? 4 : 2), 0u);  // natural alignment
    pos = t.end;
  }
  EXPECT_EQ(8 + n + pos, bytes.size());
  EXPECT_EQ(f.header().find("a")->dtype_name, "BF16");
}

TEST(SafetensorsWriter, MetadataRoundTrip) {
  TempDir tmp;
  const fs::path p = tmp.path() / "meta.safetensors";
  const std::map<std::string, std::string> md = {
      {"format", "pt"}, {"lm_head.weight", "backbone.embedding.weight"}, {"odd", "quote\" back\\ nl\n \xc3\xa9"}};
  float x = 2.0f;
  st::write_file(p, {{"x", st::DType::F32, {1}, &x}}, md);
  EXPECT_EQ(st::File(p).header().metadata, md);
  EXPECT_EQ(st::Tensors(p).metadata(), md);
}

TEST(SafetensorsWriter, LeavesNothingBehindOnFailure) {
  TempDir tmp;
  std::vector<float> v(4, 1.0f);
  // Target directory does not exist.
  const fs::path missing = tmp.path() / "no-such-dir" / "m.safetensors";
  EXPECT_THROW(st::write_file(missing, {{"x", st::DType::F32, {4}, v.data()}}), std::runtime_error);
  EXPECT_FALSE(fs::exists(tmp.path() / "no-such-dir"));
  // Null data for a non-empty tensor: detected while writing; the old file is untouched, no temp file.
  const fs::path p = tmp.path() / "keep.safetensors";
  st::write_file(p, {{"x", st::DType::F32, {4}, v.data()}});
  const std::string before = slurp(p);
  EXPECT_THROW(st::write_file(p, {{"x", st::DType::F32, {4}, v.data()}, {"y", st::DType::F16, {8}, nullptr}}),
               std::invalid_argument);
  EXPECT_THROW(st::write_file(p, {{"x", st::DType::F32, {4}, v.data()}, {"x", st::DType::F32, {1}, v.data()}}),
               std::invalid_argument);
  EXPECT_THROW(st::write_file(p, {{"x", st::DType::I32, {4}, v.data()}}), std::invalid_argument);
  EXPECT_THROW(st::write_file(p, {{"__metadata__", st::DType::F32, {4}, v.data()}}), std::invalid_argument);
  EXPECT_THROW(st::write_file(p, {{"bad\xff", st::DType::F32, {4}, v.data()}}), std::invalid_argument);
  EXPECT_EQ(slurp(p), before);
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(tmp.path())) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "keep.safetensors");
  }
  EXPECT_EQ(entries, 1u);
}

// ----------------------------------------------------------------------------------------------
// Sharded checkpoints

namespace {
struct Shards {
  TempDir tmp;
  std::vector<float> a{1, 2, 3, 4}, b{5, 6}, c{7, 8, 9};
  const std::string s1 = "model-00001-of-00002.safetensors", s2 = "model-00002-of-00002.safetensors";
  Shards() {
    st::write_file(tmp.path() / s1, {{"a", st::DType::F32, {2, 2}, a.data()}, {"b", st::DType::F16, {2}, b.data()}},
                   {{"format", "pt"}});
    st::write_file(tmp.path() / s2, {{"c", st::DType::BF16, {3}, c.data()}});
  }
  nlohmann::json index() const {
    return {{"metadata", {{"total_size", 30}, {"note", "x"}}}, {"weight_map", {{"a", s1}, {"b", s1}, {"c", s2}}}};
  }
  void write_index(const std::string& text) const { put(tmp.path() / "model.safetensors.index.json", text); }
  void expect_error(const std::string& needle) const {
    try {
      st::Tensors t(tmp.path());
      ADD_FAILURE() << "no error for " << needle;
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
      EXPECT_NE(msg.find("expected"), std::string::npos) << msg;
    }
  }
};
}  // namespace

TEST(SafetensorsSharded, ReadsThroughIndex) {
  Shards s;
  s.write_index(s.index().dump(2));
  st::Tensors t(s.tmp.path());
  EXPECT_EQ(t.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(t.read_float("a"), s.a);
  EXPECT_EQ(t.read_float("b"), s.b);
  EXPECT_EQ(t.read_float("c"), s.c);
  ASSERT_NE(t.find("c"), nullptr);
  EXPECT_EQ(t.find("c")->dtype, st::DType::BF16);
  EXPECT_EQ(t.find("zzz"), nullptr);
  EXPECT_EQ(t.file_of("c")->path().filename(), s.s2);
  const auto md = t.metadata();
  EXPECT_EQ(md.at("total_size"), "30");
  EXPECT_EQ(md.at("note"), "x");
  EXPECT_EQ(md.at("format"), "pt");
  EXPECT_THROW(t.read_float("zzz"), InputError);
  // The index file itself can be given too.
  EXPECT_EQ(st::Tensors(s.tmp.path() / "model.safetensors.index.json").names().size(), 3u);
}

TEST(SafetensorsSharded, SingleFileDirectoryAndErrors) {
  TempDir tmp;
  float x = 4.0f;
  st::write_file(tmp.path() / "model.safetensors", {{"x", st::DType::F32, {1}, &x}});
  st::Tensors dir(tmp.path());
  EXPECT_EQ(dir.names(), std::vector<std::string>{"x"});
  EXPECT_EQ(dir.read_float("x"), std::vector<float>{4.0f});
  st::Tensors file(tmp.path() / "model.safetensors");
  EXPECT_EQ(file.read_float("x"), std::vector<float>{4.0f});
  try {
    st::Tensors none(tmp.path() / "nothing-here");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nothing-here"), std::string::npos);
  }
  fs::create_directory(tmp.path() / "empty-dir");
  EXPECT_THROW(st::Tensors(tmp.path() / "empty-dir"), InputError);
  try {
    st::File d(tmp.path() / "empty-dir");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a regular file, got a directory"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsSharded, IndexNotJson) {
  Shards s;
  s.write_index("{\"weight_map\": {\"a\": ");
  s.expect_error("not valid JSON");
}

TEST(SafetensorsSharded, WeightMapMissingOrNotObject) {
  Shards s;
  s.write_index("{\"metadata\": {}}");
  s.expect_error("no \"weight_map\"");
  s.write_index("{\"weight_map\": [1, 2]}");
  s.expect_error("\"weight_map\" is not an object");
}

TEST(SafetensorsSharded, ShardMissing) {
  Shards s;
  auto j = s.index();
  j["weight_map"]["c"] = "model-00003-of-00003.safetensors";
  s.write_index(j.dump());
  s.expect_error("does not exist");
}

TEST(SafetensorsSharded, IndexedTensorAbsentFromShard) {
  Shards s;
  auto j = s.index();
  j["weight_map"]["ghost"] = s.s2;
  s.write_index(j.dump());
  s.expect_error("absent from shard");
}

TEST(SafetensorsSharded, ShardTensorNotInIndex) {
  Shards s;
  auto j = s.index();
  j["weight_map"].erase("b");
  s.write_index(j.dump());
  s.expect_error("not in the weight_map");
}

TEST(SafetensorsSharded, TensorInTwoShards) {
  Shards s;
  st::write_file(s.tmp.path() / s.s2, {{"c", st::DType::BF16, {3}, s.c.data()}, {"a", st::DType::F32, {1}, s.c.data()}});
  s.write_index(s.index().dump());
  s.expect_error("in two shards");
}

// ----------------------------------------------------------------------------------------------
// Header validation: every rule yields one InputError line naming the file.

namespace {
const std::string kT8 = "\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]";
const std::string kData8(8, '\0');
}  // namespace

TEST(SafetensorsValidation, PyTorchCheckpointsAreRecognised) {
  TempDir tmp;
  std::string zip = "PK\x03\x04\x14\x00\x00\x00\x08\x00";
  zip += std::string(100, 'z');
  expect_bad(tmp.path(), "pytorch_model.bin", zip, "PyTorch zip checkpoint (pytorch_model.bin)");
  expect_bad(tmp.path(), "zip2.bin", zip, "convert it to model.safetensors first: see README 'Converting a PyTorch checkpoint'");
  std::string pickle = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.";
  pickle += std::string(50, 'p');
  expect_bad(tmp.path(), "legacy.pt", pickle, "legacy PyTorch pickle");
  expect_bad(tmp.path(), "legacy2.pt", pickle, "see README 'Converting a PyTorch checkpoint'");
  expect_bad(tmp.path(), "tiny-zip.bin", "PK\x03\x04", "PyTorch zip");
  // A genuine safetensors file whose header length starts with byte 0x80 (N = 128) is not a pickle.
  std::string hdr = "{\"t\":{" + kT8 + "}}";
  hdr.resize(128, ' ');
  put(tmp.path() / "n128.safetensors", raw_file(hdr, kData8));
  EXPECT_EQ(st::File(tmp.path() / "n128.safetensors").header().header_len, 128u);
}

TEST(SafetensorsValidation, TooShortAndBadLength) {
  TempDir tmp;
  expect_bad(tmp.path(), "empty.safetensors", "", "only 0 bytes");
  expect_bad(tmp.path(), "short.safetensors", "abc", "only 3 bytes");
  std::string big(16, '\0');
  big[0] = '\x01';
  big[4] = '\x01';  // N = 2^32 + 1 > 1e8
  expect_bad(tmp.path(), "big.safetensors", big, "exceeds the maximum 100000000");
  expect_bad(tmp.path(), "past.safetensors", raw_file("{}").substr(0, 9), "runs past the end of the file");
  expect_bad(tmp.path(), "zero.safetensors", raw_file(""), "header is empty");
  expect_bad(tmp.path(), "brace.safetensors", raw_file(" {}      "), "does not start with '{'");
  // parse_header directly, with fewer bytes than the header needs.
  const std::string ok = raw_file("{}      ");
  try {
    st::parse_header(reinterpret_cast<const std::uint8_t*>(ok.data()), 9, ok.size(), "prefix.safetensors");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("prefix.safetensors: only 9 bytes"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsValidation, BadJson) {
  TempDir tmp;
  expect_bad(tmp.path(), "json.safetensors", raw_file("{\"t\":{" + kT8 + "}"), "not valid JSON");
  expect_bad(tmp.path(), "trail.safetensors", raw_file("{} x"), "not valid JSON");
  expect_bad(tmp.path(), "utf8.safetensors", raw_file("{\"t\xff\":{" + kT8 + "}}", kData8), "not valid JSON");
  expect_bad(tmp.path(), "surrogate.safetensors", raw_file("{\"\\ud800\":{" + kT8 + "}}", kData8), "not valid JSON");
  expect_bad(tmp.path(), "deep.safetensors", raw_file("{\"t\":" + std::string(100, '[') + std::string(100, ']') + "}"),
             "nests deeper than 64 levels");
  // Whitespace other than the writer's space padding is still JSON whitespace and accepted.
  put(tmp.path() / "ws.safetensors", raw_file("{\"t\":{" + kT8 + "}}\n\t ", kData8));
  EXPECT_EQ(st::File(tmp.path() / "ws.safetensors").header().tensors.size(), 1u);
}

TEST(SafetensorsValidation, DuplicateKeys) {
  TempDir tmp;
  expect_bad(tmp.path(), "dup.safetensors",
             raw_file("{\"t\":{" + kT8 + "},\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                      kData8 + kData8),
             "duplicate key 't' in the header");
  expect_bad(tmp.path(), "dupfield.safetensors", raw_file("{\"t\":{" + kT8 + ",\"dtype\":\"F32\"}}", kData8),
             "duplicate key 'dtype'");
  expect_bad(tmp.path(), "dupmeta.safetensors", raw_file("{\"__metadata__\":{},\"__metadata__\":{}}"),
             "duplicate key '__metadata__'");
}

TEST(SafetensorsValidation, EntryShape) {
  TempDir tmp;
  auto bad = [&](const std::string& name, const std::string& entry, const std::string& needle) {
    expect_bad(tmp.path(), name, raw_file(one(entry), kData8), needle);
  };
  bad("notobj.safetensors", "[1,2]", "entry 't' is not an object");
  bad("nodtype.safetensors", "{\"shape\":[2],\"data_offsets\":[0,8]}", "has no \"dtype\" field");
  bad("noshape.safetensors", "{\"dtype\":\"F32\",\"data_offsets\":[0,8]}", "has no \"shape\" field");
  bad("nooffs.safetensors", "{\"dtype\":\"F32\",\"shape\":[2]}", "has no \"data_offsets\" field");
  bad("extra.safetensors", "{" + kT8 + ",\"stride\":[1]}", "unexpected field 'stride'");
  bad("dtypenum.safetensors", "{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}", "dtype is not a string");
  bad("dtypeunk.safetensors", "{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}", "unknown dtype 'F33'");
  bad("shapeobj.safetensors", "{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,8]}", "shape is not an array");
  bad("shapeneg.safetensors", "{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}", "not a non-negative integer");
  bad("shapeflt.safetensors", "{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}", "not a non-negative integer");
  bad("shapestr.safetensors", "{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}", "not a non-negative integer");
  bad("offs3.safetensors", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}", "data_offsets is not two");
  bad("offsneg.safetensors", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-1,8]}", "data_offsets is not two");
  bad("offsobj.safetensors", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":{}}", "data_offsets is not two");
  bad("offsorder.safetensors", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}", "has begin > end");
}

TEST(SafetensorsValidation, Metadata) {
  TempDir tmp;
  expect_bad(tmp.path(), "metaarr.safetensors", raw_file("{\"__metadata__\":[\"a\"]}"), "\"__metadata__\" is not an object");
  expect_bad(tmp.path(), "metanum.safetensors", raw_file("{\"__metadata__\":{\"a\":1}}"), "value for key 'a' is not a string");
  put(tmp.path() / "meta-ok.safetensors", raw_file("{\"__metadata__\":{\"a\":\"b\"}}"));
  EXPECT_EQ(st::File(tmp.path() / "meta-ok.safetensors").header().metadata.at("a"), "b");
}

TEST(SafetensorsValidation, DataLayout) {
  TempDir tmp;
  const std::string e = "\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":";
  auto two = [&](const std::string& o1, const std::string& o2) {
    return "{\"a\":{" + e + o1 + "},\"b\":{" + e + o2 + "}}";
  };
  expect_bad(tmp.path(), "start.safetensors", raw_file(one("{" + e + "[4,12]}"), std::string(12, '\0')),
             "begins at data offset 4");
  expect_bad(tmp.path(), "hole.safetensors", raw_file(two("[0,8]", "[12,20]"), std::string(20, '\0')), "hole in the data");
  expect_bad(tmp.path(), "overlap.safetensors", raw_file(two("[0,8]", "[4,12]"), std::string(12, '\0')),
             "overlapping data");
  expect_bad(tmp.path(), "nbytes.safetensors",
             raw_file(one("{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}"), kData8),
             "has 8 bytes of data for shape [2] of dtype F16");
  expect_bad(tmp.path(), "trailing.safetensors", raw_file(one("{" + kT8 + "}"), kData8 + "x"), "data buffer is 9 bytes");
  expect_bad(tmp.path(), "truncated.safetensors", raw_file(one("{" + kT8 + "}"), "1234"), "data buffer is 4 bytes");
  expect_bad(tmp.path(), "f4odd.safetensors", raw_file(one("{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}"), "ab"),
             "not a whole number of bytes");
  expect_bad(tmp.path(), "overflow.safetensors",
             raw_file(one("{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}"), kData8),
             "too large");
  expect_bad(tmp.path(), "overflow2.safetensors",
             raw_file(one("{\"dtype\":\"F64\",\"shape\":[18446744073709551615,2],\"data_offsets\":[0,8]}"), kData8),
             "too large");
  // F4 with an even count, F8, and a 0 dimension next to a huge one are fine (parsed, not converted).
  put(tmp.path() / "f4.safetensors",
      raw_file("{\"q\":{\"dtype\":\"F4\",\"shape\":[4],\"data_offsets\":[0,2]},"
               "\"r\":{\"dtype\":\"F8_E4M3\",\"shape\":[3],\"data_offsets\":[2,5]},"
               "\"z\":{\"dtype\":\"F16\",\"shape\":[18446744073709551615,0],\"data_offsets\":[5,5]}}",
               "abcde"));
  st::File f(tmp.path() / "f4.safetensors");
  EXPECT_EQ(f.header().find("r")->dtype, st::DType::Other);
  EXPECT_EQ(f.header().find("z")->numel(), 0u);
  try {
    f.read_float("r");
    ADD_FAILURE();
  } catch (const InputError& err) {
    const std::string msg = err.what();
    EXPECT_NE(msg.find("f4.safetensors"), std::string::npos);
    EXPECT_NE(msg.find("'r' has dtype F8_E4M3"), std::string::npos) << msg;
  }
  try {
    f.read_float("absent");
    ADD_FAILURE();
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what()).find("no tensor named 'absent'"), std::string::npos) << err.what();
  }
}

TEST(SafetensorsValidation, MessagesStayOneLine) {
  TempDir tmp;
  // A tensor name with an escaped newline, and a file name with a newline in it.
  expect_bad(tmp.path(), "nl.safetensors",
             raw_file("{\"a\\nb\":{\"dtype\":\"X\\n\",\"shape\":[2],\"data_offsets\":[0,8]}}", kData8), "unknown dtype");
  const fs::path odd = tmp.path() / "odd\nname.safetensors";
  put(odd, "xx");
  try {
    st::File f(odd);
    ADD_FAILURE();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find("name.safetensors"), std::string::npos) << msg;
  }
  try {
    st::File f(tmp.path() / "missing.safetensors");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.safetensors: cannot open"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsFile, MoveKeepsMapping) {
  TempDir tmp;
  std::vector<float> v{1, 2, 3};
  st::write_file(tmp.path() / "m.safetensors", {{"v", st::DType::F32, {3}, v.data()}});
  st::File a(tmp.path() / "m.safetensors");
  st::File b(std::move(a));
  EXPECT_EQ(b.read_float("v"), v);
  st::File c(tmp.path() / "m.safetensors");
  c = std::move(b);
  EXPECT_EQ(c.read_float("v"), v);
  EXPECT_EQ(c.path().filename(), "m.safetensors");
}
