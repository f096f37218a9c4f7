// Safetensors writer and checkpoints: the writer's reference layout, metadata round trip and
// failures (nothing left behind), sharded checkpoints read through model.safetensors.index.json
// (each index error is one InputError line naming the index), and moving an open File.
#include "tokdyn/io/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "safetensors_fixtures.hpp"
#include "test_util.hpp"
#include "tokdyn/core/error.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;
using tokdyn::testing::safetensors_fixtures::put;

// ----------------------------------------------------------------------------------------------
// Writer layout

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
// File handles

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
