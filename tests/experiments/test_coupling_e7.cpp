// The preset coupling-e7 at small sizes: every check that applies passes and checks.csv names its
// references; the tables have one row per (ensemble, noise[, index]); the same bytes at 1 and 2
// threads; bad input (an ensemble below k, a negative noise level, size 0, burn_in >= depth, a
// linear growth scale of 1) exits 2 with one line and leaves nothing behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_checks.hpp"
#include "preset_run.hpp"
#include "test_util.hpp"
#include "tokdyn/runtime/experiment.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::lines_of;
using tokdyn::testing::run_cli;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;

namespace {

using tokdyn::testing::Sets;

const Sets kSmall = {{"depth", "12"}, {"k", "3"}, {"tokens", "3"}, {"ensembles", "3,6,24"}, {"noise", "0,1e-7,1e-4"},
                     {"linear_depth", "16"}};

fs::path run_small(const TempDir& tmp, const std::string& name, int threads, const Sets& extra = {}) {
  return tokdyn::testing::run_preset(tmp.path(), "coupling-e7", name, threads, tokdyn::testing::merged_sets(kSmall, extra));
}

}  // namespace

TEST(CouplingE7, EveryApplicableCheckPassesAtSmallSize) {
  TempDir tmp;
  const fs::path out = run_small(tmp, "a", 2);
  const auto rows = lines_of(out / "checks.csv");
  ASSERT_GE(rows.size(), 9u);
  EXPECT_EQ(rows[0], "check,statement,quantity,value,expected,reference_kind,reference,pass");
  int passed = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const std::string verdict = rows[i].substr(rows[i].rfind(',') + 1);
    EXPECT_NE(verdict, "false") << rows[i];
    passed += verdict == "true";
  }
  EXPECT_GE(passed, 7);
  for (const char* id : {"E7 linear fit", "E7 linear exponents", "E7 exponents", "E7 noise"}) {
    const bool found = std::any_of(rows.begin(), rows.end(), [&](const std::string& r) { return r.rfind(id, 0) == 0; });
    EXPECT_TRUE(found) << id;
  }
  EXPECT_EQ(lines_of(out / "error.csv").size(), 1u + 3u * 3u);         // (ensemble, noise)
  EXPECT_EQ(lines_of(out / "spectra.csv").size(), 1u + 3u * 3u * 3u);  // and k = 3 exponents
  EXPECT_EQ(lines_of(out / "linear.csv").size(), 1u + 4u);
  EXPECT_TRUE(fs::exists(out / "dichotomy.csv"));  // n = 3 x 4 = 12 <= 256: the dense reference
}

TEST(CouplingE7, SameBytesAtOneAndTwoThreads) {
  TempDir tmp;
  const fs::path a = run_small(tmp, "t1", 1), b = run_small(tmp, "t2", 2);
  for (const char* f : {"checks.csv", "error.csv", "spectra.csv", "intervals.csv", "dichotomy.csv", "linear.csv", "summary.csv"})
    EXPECT_EQ(slurp(a / f), slurp(b / f)) << f;
}

TEST(CouplingE7, BadInputExitsTwoWithOneLine) {
  TempDir tmp;
  const std::vector<std::vector<std::string>> cases = {
      {"--set", "ensembles=0"},           {"--set", "ensembles=2,8", "--set", "k=4"}, {"--set", "noise=0,-1e-6"},
      {"--set", "burn_in=24"},            {"--set", "linear_sigma=0.2,0"},           {"--set", "amplitude=0"},
      {"--set", "H=100"},                 {"--set", "k=20", "--set", "ensembles=32"}};
  for (const auto& sets : cases) {
    std::vector<std::string> args = {"run", "coupling-e7", "--out", "res", "--no-figures"};
    args.insert(args.end(), sets.begin(), sets.end());
    const auto r = run_cli(tmp.path(), args);
    std::string what;
    for (const auto& s : sets) what += s + " ";
    EXPECT_EQ(r.code, 2) << what << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": " << r.err;
    EXPECT_FALSE(fs::exists(tmp.path() / "res")) << what;
  }
}
