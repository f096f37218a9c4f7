// Reliability of runs (docs/reliability.md), the output folder: --out never deletes what it points
// at (the working directory and its ancestors, user folders, symlinks, fake results are refused and
// untouched), results are replaced exactly and only with --overwrite, stale temporary folders of
// dead processes are removed; make-checkpoint follows the same rules.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reliability_fixtures.hpp"
#include "test_util.hpp"
#include "tokdyn/runtime/output_folder.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::entries;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;
using tokdyn::testing::reliability::expect_one_line;
using tokdyn::testing::reliability::kQuick;
using tokdyn::testing::reliability::Result;
using tokdyn::testing::reliability::run_in;
using tokdyn::testing::reliability::write_file;

// ------------------------------------------------------------------------------------------------
// 1. --out never deletes what it points at

TEST(OutputFolder, DotIsRefusedAndTheFolderIsUntouched) {
  TempDir d;
  write_file(d.path() / "thesis.tex", "precious");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", ".", "--no-figures"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("working directory"), std::string::npos) << r.err;
  EXPECT_EQ(entries(d.path()), std::vector<std::string>{"thesis.tex"});
  EXPECT_EQ(slurp(d.path() / "thesis.tex"), "precious");
}

TEST(OutputFolder, ParentAndAncestorsOfTheWorkingDirectoryAreRefused) {
  TempDir d;
  fs::create_directories(d.path() / "a" / "b");
  write_file(d.path() / "a" / "notes.txt", "mine");
  for (const std::string& out : std::vector<std::string>{"..", "../", "../../a", (d.path() / "a").string()}) {
    const Result r = run_in(d.path() / "a" / "b", {"run", kQuick, "--out", out, "--no-figures"});
    EXPECT_EQ(r.code, 2) << out << ": " << r.err;
    expect_one_line(r.err);
  }
  EXPECT_EQ(slurp(d.path() / "a" / "notes.txt"), "mine");
  EXPECT_TRUE(fs::is_directory(d.path() / "a" / "b"));
}

TEST(OutputFolder, NonEmptyUserFolderIsRefusedAndUntouched) {
  TempDir d;
  fs::create_directories(d.path() / "thesis" / "ch1");
  write_file(d.path() / "thesis" / "main.tex", "text");
  write_file(d.path() / "thesis" / "ch1" / "a.tex", "more");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "thesis", "--no-figures", "--overwrite"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("only replaces its own results"), std::string::npos) << r.err;
  EXPECT_EQ(entries(d.path() / "thesis"), (std::vector<std::string>{"ch1", "main.tex"}));
  EXPECT_EQ(slurp(d.path() / "thesis" / "ch1" / "a.tex"), "more");
  EXPECT_EQ(entries(d.path()), std::vector<std::string>{"thesis"});  // no temporary folder left
}

TEST(OutputFolder, FolderWithAFakeManifestIsNotAResult) {
  TempDir d;
  fs::create_directories(d.path() / "r");
  write_file(d.path() / "r" / "manifest.json", R"({"preset": "x", "version": "1", "files": ["a.csv"]})");
  write_file(d.path() / "r" / "a.csv", "1\n");
  write_file(d.path() / "r" / "data.bin", "user data");  // not listed: not a tokdyn result
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures", "--overwrite"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("data.bin"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(d.path() / "r" / "data.bin"), "user data");
}

TEST(OutputFolder, SymlinkIsRefusedAndItsTargetUntouched) {
  TempDir d;
  fs::create_directories(d.path() / "elsewhere");
  write_file(d.path() / "elsewhere" / "keep.txt", "keep");
  fs::create_directory_symlink(d.path() / "elsewhere", d.path() / "link");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "link", "--no-figures", "--overwrite"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("symbolic link"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_symlink(d.path() / "link"));
  EXPECT_EQ(entries(d.path() / "elsewhere"), std::vector<std::string>{"keep.txt"});
}

TEST(OutputFolder, EmptyFolderIsUsed) {
  TempDir d;
  fs::create_directories(d.path() / "r");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(d.path() / "r" / "manifest.json"));
}

TEST(OutputFolder, RerunNeedsOverwriteThenReplacesExactly) {
  TempDir d;
  Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("--overwrite"), std::string::npos) << r.err;
  r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures", "--overwrite", "--set", "n=12"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("replaced the previous result"), std::string::npos) << r.out;
  const auto m = nlohmann::json::parse(slurp(d.path() / "r" / "manifest.json"));
  EXPECT_EQ(m["params"]["n"], 12);
  EXPECT_EQ(entries(d.path()), std::vector<std::string>{"r"});  // no .tmp, .old or lock left
}

TEST(OutputFolder, ResultWithAUserFileAddedIsNotReplaced) {
  TempDir d;
  ASSERT_EQ(run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"}).code, 0);
  write_file(d.path() / "r" / "my_notes.md", "notes");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures", "--overwrite"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("my_notes.md"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(d.path() / "r" / "my_notes.md"), "notes");
}

TEST(OutputFolder, PathThatIsAFileIsRefused) {
  TempDir d;
  write_file(d.path() / "f", "x");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "f", "--no-figures", "--overwrite"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(slurp(d.path() / "f"), "x");
}

TEST(OutputFolder, ClassifyRecognisesOnlyExactResults) {
  TempDir d;
  EXPECT_EQ(tokdyn::classify_folder(d.path() / "none"), tokdyn::FolderKind::Missing);
  fs::create_directories(d.path() / "e");
  EXPECT_EQ(tokdyn::classify_folder(d.path() / "e"), tokdyn::FolderKind::EmptyDir);
  fs::create_directories(d.path() / "r" / "sub");
  write_file(d.path() / "r" / "manifest.json", R"({"preset": "p", "version": "v", "files": ["a.csv", "sub/b.npy"]})");
  write_file(d.path() / "r" / "a.csv", "");
  write_file(d.path() / "r" / "sub" / "b.npy", "");
  EXPECT_EQ(tokdyn::classify_folder(d.path() / "r"), tokdyn::FolderKind::TokdynResult);
  fs::remove(d.path() / "r" / "sub" / "b.npy");  // a listed file missing: not intact
  EXPECT_EQ(tokdyn::classify_folder(d.path() / "r"), tokdyn::FolderKind::Other);
}

TEST(OutputFolder, StaleTemporaryFoldersOfDeadProcessesAreRemoved) {
  TempDir d;
  // A pid that is not running (pid_max is at most 2^22).
  const long dead = 4194304 + 17;
  fs::create_directories(d.path() / ("r.tmp-" + std::to_string(dead)) / "x");
  write_file(d.path() / ("r.tmp-" + std::to_string(dead)) / ".tokdyn-temporary", "\n");
  const std::string users = "r.tmp-" + std::to_string(dead + 1) + "-mine";  // same shape, not ours
  fs::create_directories(d.path() / users);
  write_file(d.path() / users / "keep.txt", "keep");
  const std::string live = "r.tmp-" + std::to_string(static_cast<long>(getpid()));
  fs::create_directories(d.path() / live);
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"});
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::string> want{"r", live, users};
  std::sort(want.begin(), want.end());  // entries() is sorted; the order of live and users depends on the pid
  EXPECT_EQ(entries(d.path()), want);
  EXPECT_EQ(slurp(d.path() / users / "keep.txt"), "keep");
  EXPECT_FALSE(fs::exists(d.path() / "r" / ".tokdyn-temporary"));
}

TEST(MakeCheckpoint, FollowsTheOutputFolderRules) {
  TempDir d;
  fs::create_directories(d.path() / "ck");
  write_file(d.path() / "ck" / "mine.txt", "x");
  Result r = run_in(d.path(), {"make-checkpoint", "--size", "tiny", "--out", "ck"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(slurp(d.path() / "ck" / "mine.txt"), "x");
  r = run_in(d.path(), {"make-checkpoint", "--size", "tiny", "--out", "."});
  EXPECT_EQ(r.code, 2) << r.err;
  r = run_in(d.path(), {"make-checkpoint", "--size", "tiny", "--out", "new"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(entries(d.path() / "new"), (std::vector<std::string>{"config.json", "model.safetensors"}));
  EXPECT_EQ(entries(d.path()), (std::vector<std::string>{"ck", "new"}));
}
