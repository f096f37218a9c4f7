// `tokdyn train-tokenizer` through the CLI: a corpus file or folder in, a tokenizer.json out that
// `tokdyn tokenize` reads; refusals (missing corpus, existing --out, vocabulary too small, a file
// that is not UTF-8) are one line, exit 2, nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_util.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::run_cli;
using tokdyn::testing::TempDir;

namespace {

void write(const fs::path& f, const std::string& text) {
  fs::create_directories(f.parent_path());
  std::ofstream(f, std::ios::binary) << text;
}

std::string corpus_text() {
  std::string s;
  for (int i = 0; i < 300; ++i) s += "And God said, Let there be light: and there was light. " + std::to_string(i % 17) + "\n";
  return s;
}

TEST(TrainTokenizerCli, AFolderCorpusGivesATokenizerTheCliReads) {
  TempDir d;
  write(d.path() / "corpus" / "b.txt", corpus_text());
  write(d.path() / "corpus" / "sub" / "a.txt", "light light light\n");
  write(d.path() / "corpus" / ".hidden", std::string("\xff\xfe"));  // skipped: a hidden name
  const auto r = run_cli(d.path(), {"train-tokenizer", "--corpus", "corpus", "--vocab-size", "300", "--out", "tok.json", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["vocab_size"], 300);
  EXPECT_EQ(j["files"], 2);
  EXPECT_EQ(j["merges"], 300 - 256 - 1);
  EXPECT_EQ(j["corpus_sha256"].get<std::string>().size(), 64u);
  const auto t = run_cli(d.path(), {"tokenize", "tok.json", "Let there be light", "--json"});
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_LE(nlohmann::json::parse(t.out)["ids"].size(), 5u);
  // The same corpus gives the same bytes.
  ASSERT_EQ(run_cli(d.path(), {"train-tokenizer", "--corpus", "corpus", "--vocab-size", "300", "--out", "tok2.json"}).code, 0);
  EXPECT_EQ(tokdyn::testing::slurp((d.path() / "tok.json").string()), tokdyn::testing::slurp((d.path() / "tok2.json").string()));
}

TEST(TrainTokenizerCli, Refusals) {
  TempDir d;
  write(d.path() / "c.txt", corpus_text());
  write(d.path() / "bad.txt", std::string("ok\n\xc3("));
  write(d.path() / "exists.json", "keep me");
  fs::create_directories(d.path() / "empty");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases{
      {{"--corpus", "missing.txt", "--out", "t.json"}, "--corpus: 'missing.txt' does not exist"},
      {{"--corpus", "empty", "--out", "t.json"}, "holds no files"},
      {{"--corpus", "bad.txt", "--out", "t.json"}, "invalid UTF-8"},
      {{"--corpus", "c.txt", "--out", "exists.json"}, "exists; expected a new file"},
      {{"--corpus", "c.txt", "--out", "t.json", "--vocab-size", "100"}, "vocab_size: expected an integer in [258"},
      {{"--corpus", "c.txt", "--out", "t.json", "--min-frequency", "0"}, "min_frequency"},
      {{"--corpus", "c.txt", "--out", "nodir/t.json"}, "does not exist"},
      {{"--corpus", "c.txt", "--out", "t.json", "extra"}, "unexpected argument"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"train-tokenizer"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = run_cli(d.path(), args);
    EXPECT_EQ(r.code, 2) << c.says << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty());
    EXPECT_FALSE(fs::exists(d.path() / "t.json"));
  }
  EXPECT_EQ(tokdyn::testing::slurp((d.path() / "exists.json").string()), "keep me");
  for (const auto& e : fs::directory_iterator(d.path())) EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos);
}

}  // namespace
