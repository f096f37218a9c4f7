// The preset coupling-dichotomy at small sizes: every check of R10 (a)-(e), R11 and F17 passes and is
// written to checks.csv; the window diagnostics have their columns; the same bits at 1 and 2 threads;
// bad input (Steklov window longer than the depth window, a non-hyperbolic sigma, lo >= hi) exits 2
// with one line and leaves nothing behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_checks.hpp"
#include "preset_run.hpp"
#include "test_util.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::run_cli;
using tokdyn::testing::slurp;
using tokdyn::testing::lines_of;
using tokdyn::testing::TempDir;

namespace {

using tokdyn::testing::Sets;

const Sets kSmall = {{"depth", "120"},        {"R11_window", "60"}, {"H", "5,20"},
                     {"green_L", "40"},   {"switch_L", "500"},  {"sectors", "3"}};

fs::path run_small(const TempDir& tmp, const std::string& name, int threads, const Sets& extra = {}) {
  return tokdyn::testing::run_preset(tmp.path(), "coupling-dichotomy", name, threads, tokdyn::testing::merged_sets(kSmall, extra));
}

}  // namespace

TEST(CouplingDichotomy, EveryCheckPassesAtSmallSize) {
  TempDir tmp;
  const fs::path out = run_small(tmp, "a", 2);
  const auto rows = lines_of(out / "checks.csv");
  ASSERT_GE(rows.size(), 14u);
  EXPECT_EQ(rows[0], "check,statement,quantity,value,expected,reference_kind,reference,pass");
  int r10[5] = {0, 0, 0, 0, 0};
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].substr(rows[i].rfind(',') + 1), "true") << rows[i];
    if (rows[i].rfind("R10", 0) == 0) ++r10[rows[i][3] - 'a'];
  }
  for (int k = 0; k < 5; ++k) EXPECT_GT(r10[k], 0) << "no R10(" << static_cast<char>('a' + k) << ") check";
  const auto win = lines_of(out / "windows.csv");
  ASSERT_EQ(win.size(), 3u);  // two windows of 60 layers
  EXPECT_EQ(win[0].rfind("first,last,H,r_minus,r_plus_min,r_plus_max,k_plus,k_neutral,hyperbolic,hyperbolic_margin,hyperbolic_tolerance,C,", 0), 0u);
  EXPECT_EQ(lines_of(out / "reference.csv").size(), 121u);
  EXPECT_EQ(lines_of(out / "lyapunov.csv").size(), 9u);  // d = 8 exponents
}

TEST(CouplingDichotomy, SameBitsAtOneAndTwoThreads) {
  TempDir tmp;
  const fs::path a = run_small(tmp, "t1", 1), b = run_small(tmp, "t2", 2);
  for (const char* f : {"checks.csv", "windows.csv", "intervals.csv", "green.csv", "lyapunov.csv", "reference.csv"})
    EXPECT_EQ(slurp(a / f), slurp(b / f)) << f;
}

TEST(CouplingDichotomy, BadInputExitsTwoWithOneLine) {
  TempDir tmp;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--set", "H=80", "--set", "R11_window=60", "--set", "depth=120"}, "H"},
      {{"--set", "sigma=0.2,0,-0.5"}, "sigma"},
      {{"--set", "sigma=0.2,-2"}, "sigma"},
      {{"--set", "switch_lo=1.3"}, "switch_lo"},
      {{"--set", "R11_window=200", "--set", "depth=100"}, "R11_window"},
      {{"--set", "sigma=0.2,abc"}, "sigma"},
  };
  for (const auto& [sets, key] : cases) {
    std::vector<std::string> args = {"run", "coupling-dichotomy", "--out", "res", "--no-figures"};
    args.insert(args.end(), sets.begin(), sets.end());
    const auto r = run_cli(tmp.path(), args);
    EXPECT_EQ(r.code, 2) << key << ": " << r.err;
    EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(tmp.path() / "res")) << key;
  }
}
