// Checks R15 and R24 of the coupling paper (Thm 7, §4.2, §4.2.1, flag F7) at the library level,
// and the presets coupling-green / coupling-fast-slow through the CLI (every check passing at a
// small size; bad input of each kind exits 2 with one line and leaves nothing behind).
//   F7: a fast-mode perturbation dA(l) = eta P_-(l+1) E(l) leaves P_+ G h EXACTLY unchanged (frozen
//   forcing, two-sided extension, end conditions of A), not O(eta^2) as Thm 7 states; the P_-
//   change is linear in eta. A slow-mode one (eta P_+(l+1) E(l) P_+(l)) leaves P_- G h exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/green.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/core/rng.hpp"

#include "cli_checks.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using green::Matrix;
using green::Seq;
using tokdyn::testing::CliResult;
using tokdyn::testing::expect_bad_runs;
using tokdyn::testing::run_cli;
using tokdyn::testing::TempDir;

namespace {

struct Split {
  double plus = 0, minus = 0;
};
Split split_sup(const Seq& v, const cocycle::Bundles& b) {
  Split s;
  for (long l = 0; l < v.cols(); ++l) {
    const Eigen::VectorXd p = b.P_plus[static_cast<std::size_t>(l)] * v.col(l);
    s.plus = std::max(s.plus, p.norm());
    s.minus = std::max(s.minus, (v.col(l) - p).norm());
  }
  return s;
}

}  // namespace

TEST(CouplingFastSlow, FastModeIsExactlyInvisibleSlowModeKeepsTheDecayingPart) {
  const long L = 60, d = 4;
  for (const char* fam : {"g4", "g3"}) {  // rotating sectors; triangular non-normal
    const auto B = green::saddle_family(fam, d, L, std::string(fam) == "g4" ? 0.05 : 1.5, 3);
    const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(B);
    const cocycle::Bundles b = cocycle::two_sided_bundles(c);
    const green::Ends ends = green::make_ends(B.front(), B.back());
    Eigen::VectorXd psi(d);
    psi << 0.3, -0.7, 0.5, 0.2;
    const Seq H = (0.1 * psi).replicate(1, L);
    const Seq ustar = green::Bvp(B, ends).solve(H);
    const double us = green::sup_norm(ustar);
    std::vector<Matrix> E;
    Rng rng(4, {1});
    for (long l = 0; l < L; ++l) {
      Matrix El(d, d);
      for (long j = 0; j < d; ++j)
        for (long i = 0; i < d; ++i) El(i, j) = rng.normal() / 2;
      E.push_back(El);
    }
    const Matrix I = Matrix::Identity(d, d);
    std::vector<double> fast_minus, slow_plus;
    const std::vector<double> etas = {1e-3, 1e-2, 1e-1};
    for (double eta : etas) {
      std::vector<Matrix> Bf = B, Bs = B;
      for (long l = 0; l < L; ++l) {
        const Matrix& P0 = b.P_plus[static_cast<std::size_t>(l)];
        const Matrix& P1 = b.P_plus[static_cast<std::size_t>(l + 1)];
        Bf[static_cast<std::size_t>(l)] += eta * (I - P1) * E[static_cast<std::size_t>(l)];
        Bs[static_cast<std::size_t>(l)] += eta * P1 * E[static_cast<std::size_t>(l)] * P0;
      }
      const Split f = split_sup(green::Bvp(Bf, ends).solve(H) - ustar, b);
      const Split s = split_sup(green::Bvp(Bs, ends).solve(H) - ustar, b);
      EXPECT_LE(f.plus, 1e-10 * us) << fam << " eta " << eta;   // F7: exact, not O(eta^2)
      EXPECT_GT(f.minus, 1e-3 * eta * us) << fam << " eta " << eta;
      EXPECT_LE(s.minus, 1e-10 * us) << fam << " eta " << eta;
      EXPECT_GT(s.plus, 1e-3 * eta * us) << fam << " eta " << eta;
      fast_minus.push_back(f.minus);
      slow_plus.push_back(s.plus);
    }
    // ~linear in eta: two decades give a factor ~100 (slope 1 within 0.15).
    const double slope_f = std::log(fast_minus.back() / fast_minus.front()) / std::log(100.0);
    const double slope_s = std::log(slow_plus.back() / slow_plus.front()) / std::log(100.0);
    EXPECT_NEAR(slope_f, 1.0, 0.15) << fam;
    EXPECT_NEAR(slope_s, 1.0, 0.15) << fam;
  }
}

TEST(CouplingFastSlow, PresetsRunAndEveryCheckPasses) {
  TempDir d;
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"coupling-green", {"--set", "depth=60", "--set", "family=g3"}},
      {"coupling-green", {"--set", "depth=40", "--set", "family=g1", "--set", "d=3"}},
      {"coupling-fast-slow", {"--set", "depth=40"}}};
  int i = 0;
  for (const auto& [name, sets] : runs) {
    const std::string out = "out" + std::to_string(i++);
    std::vector<std::string> a = {"run", name, "--out", out, "--no-figures", "--quiet"};
    a.insert(a.end(), sets.begin(), sets.end());
    const CliResult r = run_cli(d.path(), a);
    ASSERT_EQ(r.code, 0) << name << ": " << r.err;
    std::ifstream in(d.path() / out / "checks.csv");
    std::string line;
    int rows = 0;
    std::getline(in, line);
    while (std::getline(in, line)) {
      ++rows;
      EXPECT_EQ(line.substr(line.size() - 4), "true") << name << ": " << line;
    }
    EXPECT_GE(rows, 6) << name;
  }
  EXPECT_TRUE(fs::exists(d.path() / "out0" / "green.csv"));
  EXPECT_TRUE(fs::exists(d.path() / "out0" / "norms.csv"));
  EXPECT_TRUE(fs::exists(d.path() / "out2" / "identification.csv"));
  EXPECT_TRUE(fs::exists(d.path() / "out2" / "fast_slow.csv"));
}

TEST(CouplingFastSlow, BadInputExitsTwo) {
  TempDir d;
  // Non-hyperbolic ends (an eigenvalue on the unit circle) and inconsistent / empty sizes.
  std::vector<double> gen = {1.0, 0.3, 0.0, 0.5, 1.0, 0.3, 0.0, 0.5};  // two layers [[1, .3], [0, .5]]
  write_npy(d.path() / "nonhyp.npy", gen.data(), {2, 2, 2});
  std::vector<double> rect(12, 0.5);
  write_npy(d.path() / "rect.npy", rect.data(), {2, 2, 3});
  std::vector<double> ok = {2.0, 0.0, 0.0, 0.5, 2.0, 0.0, 0.0, 0.5};
  write_npy(d.path() / "ok.npy", ok.data(), {2, 2, 2});
  std::vector<double> h3(6, 1.0);
  write_npy(d.path() / "h3.npy", h3.data(), {2, 3});
  write_npy(d.path() / "empty.npy", ok.data(), {0, 2, 2});
  const std::string p = d.path().string();
  const std::vector<std::vector<std::string>> bad = {
      {"coupling-green", "generators=" + p + "/nonhyp.npy"},
      {"coupling-green", "generators=" + p + "/rect.npy"},
      {"coupling-green", "generators=" + p + "/empty.npy"},
      {"coupling-green", "generators=" + p + "/ok.npy", "forcing=" + p + "/h3.npy"},
      {"coupling-green", "forcing=" + p + "/h3.npy"},
      {"coupling-green", "family=g1", "knob=0.5"},
      {"coupling-green", "depth=0"},
      {"coupling-fast-slow", "etas=0.1"},
      {"coupling-fast-slow", "etas=0.1,abc"},
      {"coupling-fast-slow", "etas=0.01,2"},
      {"coupling-fast-slow", "d=1"}};
  expect_bad_runs(d.path(), bad);
}

TEST(CouplingFastSlow, SameBitsAtOneAndTwoThreads) {
  TempDir d;
  for (const std::string name : {"coupling-green", "coupling-fast-slow"}) {
    for (const std::string t : {"1", "2"}) {
      const CliResult r = run_cli(d.path(), {"run", name, "--out", name + t, "--no-figures", "--quiet", "--threads", t, "--set", "depth=40"});
      ASSERT_EQ(r.code, 0) << name << ": " << r.err;
    }
    for (const std::string f : {"checks.csv", name == "coupling-green" ? "green.csv" : "fast_slow.csv"}) {
      std::ifstream a(d.path() / (name + "1") / f), b(d.path() / (name + "2") / f);
      const std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
      EXPECT_FALSE(sa.empty()) << name << " " << f;
      EXPECT_EQ(sa, sb) << name << " " << f;
    }
  }
}
