// The ssm-random-silu preset end to end at small sizes: determinism across thread counts,
// agreement of the two exact forms, and the paper's qualitative Fig. 3 separation.
#include <algorithm>
#include <gtest/gtest.h>

#include "tokdyn/analysis/pe_window.hpp"
#include "tokdyn/experiments/attention_within_checks.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "test_util.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/core/linalg.hpp"

#include "preset_run.hpp"
#include "test_util.hpp"
#include "thread_util.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::slurp;
using namespace tokdyn;

namespace {

fs::path run_small(const std::string& tag, int threads, const tokdyn::testing::Sets& extra = {}) {
  const tokdyn::testing::Sets small{{"runs", "4"}, {"depth", "60"}, {"tokens", "12"}, {"n", "48"}, {"m", "16"}, {"seed", "3"}};
  return tokdyn::testing::run_preset(fs::temp_directory_path(), "ssm-random-silu", "tokdyn_test_rs_" + tag + "_" + std::to_string(::getpid()),
                                     threads, tokdyn::testing::merged_sets(small, extra));
}

/// metrics.csv as variant -> layer -> (lambda1_mean, pr_mean).
std::map<std::string, std::vector<std::pair<double, double>>> metrics(const fs::path& dir) {
  std::ifstream in(dir / "metrics.csv");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> head;
  {
    std::stringstream hs(line);
    for (std::string c; std::getline(hs, c, ',');) head.push_back(c);
  }
  const auto col = [&](const char* name) {
    return static_cast<std::size_t>(std::find(head.begin(), head.end(), name) - head.begin());
  };
  const std::size_t il1 = col("lambda1_mean"), ipr = col("pr_mean");
  EXPECT_LT(ipr, head.size()) << "metrics.csv: " << line;
  std::map<std::string, std::vector<std::pair<double, double>>> out;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::vector<std::string> cells;
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    out[cells.at(0)].emplace_back(std::stod(cells.at(il1)), std::stod(cells.at(ipr)));
  }
  return out;
}

}  // namespace

// Every result file has the same bytes on 1, 2, 3 and 4 threads. At 8 runs x 50 tokens, n = 128,
// m = 48 the branch products are several tiles of the blocked GEMM spread over threads, and the
// branch rows, the per-run readouts, the Gram metrics and the per-layer diagnostics go parallel.
TEST(SsmRandomSilu, SameBitsOnOneToFourThreads) {
  const int runs = 8, tokens = 50, n = 128, m = 48;
  const Eigen::Index N = static_cast<Eigen::Index>(runs) * tokens;
  for (const Eigen::Index cols : {n, m}) {
    const GemmTiling t = gemm_tiling(N, cols, n);
    EXPECT_TRUE(t.parallel && t.tiles() >= 4) << "the branch products must be several tiles spread over threads";
  }
  EXPECT_GE(static_cast<double>(N) * (n + 2 * m), 65536.0) << "the branch row loop must go parallel";
  const std::vector<std::pair<std::string, std::string>> sizes{
      {"runs", std::to_string(runs)}, {"tokens", std::to_string(tokens)}, {"n", std::to_string(n)}, {"m", std::to_string(m)},
      {"depth", "20"}};
  const fs::path ref = run_small("t1", 1, sizes);
  const auto files = tokdyn::testing::files_under(ref);
  EXPECT_GE(files.size(), 6u);
  for (int th : tokdyn::testing::kThreadCounts) {
    const fs::path b = run_small(std::to_string(th) + "threads", th, sizes);
    EXPECT_EQ(tokdyn::testing::files_under(b), files);
    for (const std::string& f : files)
      if (f != "manifest.json") {
        EXPECT_EQ(slurp(ref / f), slurp(b / f)) << f << ", " << th << " threads";
      }
    fs::remove_all(b);
  }
  fs::remove_all(ref);
}

TEST(SsmRandomSilu, RecurrenceAndInputOutputFormsAgree) {
  const fs::path a = run_small("io", 2), b = run_small("rec", 2, {{"form", "recurrence"}});
  const auto ma = metrics(a), mb = metrics(b);
  for (const auto& [v, rows] : ma)
    for (std::size_t k = 0; k < rows.size(); ++k) {
      EXPECT_NEAR(rows[k].first, mb.at(v)[k].first, 1e-9) << v << " layer " << k;
      EXPECT_NEAR(rows[k].second, mb.at(v)[k].second, 1e-8) << v << " layer " << k;
    }
  fs::remove_all(a);
  fs::remove_all(b);
}

// Fig. 3's claim: with SiLU the tokens cluster (lambda_bar_1 up, r down); without it they do not.
TEST(SsmRandomSilu, SiluClustersAndNoSiluDoesNot) {
  const fs::path a = run_small("sep", 2, {{"depth", "200"}, {"n", "128"}, {"m", "48"}});
  const auto m = metrics(a);
  const auto& s = m.at("silu");
  const auto& ns = m.at("no_silu");
  EXPECT_GT(s.back().first, 0.6);
  EXPECT_LT(s.back().second, 2.0);
  EXPECT_LT(ns.back().first, 0.5 * s.back().first);
  EXPECT_GT(ns.back().second, 2.0 * s.back().second);
  // The verdict rows (paper's Fig. 3 numbers): computed from the same metrics the table shows.
  const auto rows = tokdyn::testing::read_csv_rows(a / "checks.csv");
  const auto sep = tokdyn::testing::check_row(rows, "Fig3 separation");
  ASSERT_FALSE(sep.empty());
  EXPECT_NEAR(std::stod(sep.at("value")), s.back().first - ns.back().first, 1e-12);
  const auto l = tokdyn::testing::check_row(rows, "Fig3 silu lambda_bar_1");
  ASSERT_FALSE(l.empty());
  EXPECT_EQ(l.at("reference_kind"), "paper");
  EXPECT_NE(l.at("reference").find("0.88"), std::string::npos);
  EXPECT_NEAR(std::stod(l.at("value")), s.back().first, 1e-12);
  for (const char* id : {"Fig3 no_silu r", "Fig5 T*", "Fig6 random_silu T*", "Fig6 random_no_silu T*"})
    EXPECT_FALSE(tokdyn::testing::check_row(rows, id).empty()) << id;
  fs::remove_all(a);
  // Shorter than the paper's 200 layers: every paper row is n/a, saying why.
  const fs::path b = run_small("short", 2);
  for (const auto& r : tokdyn::testing::read_csv_rows(b / "checks.csv")) {
    EXPECT_EQ(r.at("pass"), "n/a") << r.at("check");
    EXPECT_NE(r.at("expected").find("depth 200"), std::string::npos) << r.at("expected");
  }
  fs::remove_all(b);
}

// The PE rows: the paper's T* of "one run" it does not identify must lie in the spread of T* over
// our runs; "no admissible window" is read off the envelope. On constructed q records with known
// T* (spec T27: q = (-1, -1, 3) repeated has T* = 3).
TEST(AttentionWithinChecks, PeRowsOnConstructedRecords) {
  tokdyn::testing::TempDir d;
  auto series = [](std::vector<double> pattern, int len) {
    std::vector<double> q;
    for (int k = 0; k < len; ++k) q.push_back(pattern[static_cast<std::size_t>(k) % pattern.size()]);
    return q;
  };
  // Run 0: T* = 3; run 1: q = -1 for 9 layers then +10: T* = 10 (W(T) > 0 first at T = 10).
  std::vector<double> late(9, -1.0);
  for (int k = 0; k < 21; ++k) late.push_back(10.0);
  const QRecord two{{series({-1, -1, 3}, 30)}, {late}};
  ASSERT_EQ(*smallest_admissible_window(worst_window_average(two[1][0])), 10);
  const QRecord one{{series({-1, -1, 3}, 30)}};
  const QRecord negative{{series({-1.0}, 30)}, {series({-1, 0.5}, 30)}};
  {
    CheckTable t(d.path() / "checks.csv");
    attention_within::fig45_checks(t, two, 0, 1, false, "");  // Fig. 4: 8 in [3, 10]
    attention_within::fig45_checks(t, one, 0, 1, true, "");   // Fig. 5: 34 vs [3, 3]: 31 away
    attention_within::fig6_checks(t, "random_no_silu", negative, 0, "");
    attention_within::fig6_checks(t, "random_silu", negative, 0, "");  // none: fails without a value
  }
  const auto rows = tokdyn::testing::read_csv_rows(d.path() / "checks.csv");
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].at("check"), "Fig4 T*");
  EXPECT_EQ(std::stod(rows[0].at("value")), 0.0);
  EXPECT_EQ(rows[0].at("pass"), "true");
  EXPECT_EQ(rows[1].at("check"), "Fig4 sign changes");
  EXPECT_EQ(std::stod(rows[1].at("value")), 19.0);  // (-1,-1,3) x 10: a change into and out of every 3, but the first
  EXPECT_EQ(rows[2].at("check"), "Fig5 T*");
  EXPECT_EQ(std::stod(rows[2].at("value")), 31.0);
  EXPECT_EQ(rows[2].at("pass"), "false");
  EXPECT_EQ(rows[3].at("check"), "Fig6 random_no_silu T*");
  EXPECT_LE(std::stod(rows[3].at("value")), 0.0);
  EXPECT_EQ(rows[3].at("pass"), "true");
  EXPECT_EQ(rows[4].at("value"), "");
  EXPECT_EQ(rows[4].at("pass"), "false");
}
