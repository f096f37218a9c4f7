// Safetensors header validation: PyTorch checkpoints recognised, lengths, JSON, duplicate keys,
// entry fields, metadata and data layout; every rule must yield one InputError line naming the file.
#include "tokdyn/io/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "safetensors_fixtures.hpp"
#include "test_util.hpp"
#include "tokdyn/core/error.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::TempDir;
using tokdyn::testing::safetensors_fixtures::put;
using tokdyn::testing::safetensors_fixtures::raw_file;

namespace {

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
