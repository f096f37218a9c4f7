// Prompts in runs (runtime/prompts.hpp) through the CLI: a prompt's ids are the tokenizer's, its
// text and pieces are in the manifest; every refusal (different lengths, text the vocabulary cannot
// produce, no tokenizer, a tokenizer that does not belong to the model, `tokens` beside a prompt,
// `tokenizer` without one) is one line, exit 2, nothing written. The tokenizer is a small byte-level
// BPE written here; its expected ids are worked out by hand (printable ASCII byte b has id b - 33).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tokdyn/io/npy.hpp"
#include "tokdyn/io/tokenizer.hpp"

#include "test_util.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::CliResult;
using tokdyn::testing::run_cli;
using tokdyn::testing::TempDir;
using nlohmann::json;

namespace {

/// A byte-level BPE over printable ASCII and the space (id 94), merges "h e" -> "he" (95) and
/// "Ġ w" -> "Ġw" (96); `extra_added`: an added token with that id.
void write_tokenizer(const fs::path& file, long extra_added = -1) {
  json v = json::object();
  int id = 0;
  for (int b = 33; b <= 126; ++b) v[std::string(1, static_cast<char>(b))] = id++;
  v["\u0120"] = id++;
  v["he"] = 95;
  v["\u0120w"] = 96;
  json added = json::array();
  if (extra_added >= 0) added.push_back({{"id", extra_added}, {"content", "<big>"}, {"special", true}, {"normalized", false}});
  const json j = {{"added_tokens", added},
                  {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                  {"decoder", {{"type", "ByteLevel"}}},
                  {"model", {{"type", "BPE"}, {"vocab", v}, {"merges", json::array({"h e", "\u0120 w"})}}}};
  std::ofstream(file) << j.dump();
}

json manifest_of(const fs::path& dir) {
  std::ifstream f(dir / "manifest.json");
  return json::parse(f);
}

}  // namespace

TEST(Prompts, APromptsIdsAreTheTokenizersAndItsPiecesAreInTheManifest) {
  TempDir d;
  write_tokenizer(d.path() / "tok.json");
  const CliResult r = run_cli(d.path(), {"run", "prompt-trajectories", "--out", "r", "--no-figures", "--quiet", "--set", "depth=2",
                                         "--set", "prompt=hey we", "--set", "tokenizer=tok.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  // "hey we" -> pieces "he" "y" "Ġw" "e": ids 95, 'y' - 33, 96, 'e' - 33.
  std::vector<std::size_t> shape;
  const std::vector<std::int64_t> ids = tokdyn::read_npy_int((d.path() / "r" / "token_ids.npy").string(), shape, 1000);
  EXPECT_EQ(shape, (std::vector<std::size_t>{1, 4}));
  EXPECT_EQ(ids, (std::vector<std::int64_t>{95, 'y' - 33, 96, 'e' - 33}));
  const json m = manifest_of(d.path() / "r");
  const json& p = m["notes"]["text"]["prompts"][0];
  EXPECT_EQ(p["text"], "hey we");
  EXPECT_EQ(p["pieces"], json({"he", "y", "\u0120w", "e"}));
  EXPECT_EQ(p["labels"], json({"he", "y", " w", "e"}));
  EXPECT_EQ(m["notes"]["text"]["tokenizer"]["sha256"].get<std::string>().size(), 64u);
  // Two prompts of equal length: two runs.
  std::ofstream(d.path() / "two.txt") << "hey we\nhe y we\n";  // 4 and 5 tokens
  std::ofstream(d.path() / "same.txt") << "hey we\nwe he\r\n";  // 4 and 4 ("we" "Ġhe": w e Ġ he)
  const CliResult t = run_cli(d.path(), {"run", "prompt-trajectories", "--out", "s", "--no-figures", "--quiet", "--set", "depth=1",
                                         "--set", "prompts=same.txt", "--set", "tokenizer=tok.json"});
  ASSERT_EQ(t.code, 0) << t.err;
  tokdyn::read_npy_int((d.path() / "s" / "token_ids.npy").string(), shape, 1000);
  EXPECT_EQ(shape, (std::vector<std::size_t>{2, 4}));
}

TEST(Prompts, EveryRefusalIsOneLineExit2AndNothingWritten) {
  TempDir d;
  write_tokenizer(d.path() / "tok.json");
  write_tokenizer(d.path() / "big.json", 1000000);
  std::ofstream(d.path() / "two.txt") << "hey we\nhe y we\n";
  std::ofstream(d.path() / "empty_line.txt") << "hey\n\nwe\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"prompts=two.txt", "tokenizer=tok.json"}, "encode to different numbers of tokens (line 1: 4, line 2: 5)"},
      {{"prompts=empty_line.txt", "tokenizer=tok.json"}, "line 2 is empty"},
      {{"prompt=caf\xc3\xa9", "tokenizer=tok.json"}, "cannot produce"},
      {{"prompt=hey"}, "no tokenizer to encode it"},
      {{"prompt=hey <big>", "tokenizer=big.json"}, "outside the model's"},
      {{"prompt=hey", "tokenizer=tok.json", "tokens=4"}, "parameter 'tokens' does not apply with prompt"},
      {{"tokenizer=tok.json"}, "parameter 'tokenizer' does not apply without a prompt"},
      {{"prompt=hey", "token_ids=x.npy"}, "token_ids"},
      {{"prompt=hey", "tokenizer=nowhere.json"}, "nowhere.json"},
  };
  for (const auto& [sets, want] : cases) {
    std::vector<std::string> args = {"run", "prompt-trajectories", "--out", "r", "--no-figures", "--quiet", "--set", "depth=1"};
    for (const std::string& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    const CliResult r = run_cli(d.path(), args);
    EXPECT_EQ(r.code, 2) << want << "\n" << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(d.path() / "r")) << want;
  }
}

TEST(Prompts, TokenizeCommandPrintsIdsAndRefusesBadInput) {
  TempDir d;
  write_tokenizer(d.path() / "tok.json");
  CliResult r = run_cli(d.path(), {"tokenize", "tok.json", "hey we", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["ids"], json({95, 'y' - 33, 96, 'e' - 33}));
  EXPECT_EQ(j["decoded"], "hey we");
  r = run_cli(d.path(), {"tokenize", "tok.json", "--decode", "95,88"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "hey\n");
  std::ofstream(d.path() / "bad.json") << "{\"model\": {\"type\": \"Unigram\"}}";
  r = run_cli(d.path(), {"tokenize", "bad.json", "x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("model type \"Unigram\" is not supported"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  r = run_cli(d.path(), {"tokenize", "tok.json", "a\xff"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("invalid UTF-8"), std::string::npos) << r.err;
  r = run_cli(d.path(), {"tokenize", "tok.json", "--decode", "5000000"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not in the vocabulary"), std::string::npos) << r.err;
}
