// The depth–coarse-grain duality (coupling paper Thm 6, Remark 6; checks R12, R13) and Thm 9 (R16):
// the sector-structured full flow against its dense Kronecker form (Thm 3), C_sharp against the dense
// restriction, Remark 6's one-shot head error equal to Thm 6's E_l, and the presets coupling-duality and
// coupling-thm9 at small sizes: every check passes, the same bits at 1 and 2 threads, bad input exits 2
// with one line and leaves nothing behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_checks.hpp"
#include "preset_run.hpp"
#include "test_util.hpp"
#include "tokdyn/analysis/duality.hpp"
#include "tokdyn/analysis/frozen_kernel.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/core/rng.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::run_cli;
using tokdyn::testing::slurp;
using tokdyn::testing::lines_of;
using tokdyn::testing::TempDir;

namespace {

const std::vector<double> kM = {-0.8, -0.8, -0.5, -0.5}, kV = {1.0, 1.0, 0.2, 0.2};

using Sets = std::vector<std::pair<std::string, std::string>>;

fs::path run_small(const TempDir& tmp, const std::string& preset, const std::string& name, int threads, const Sets& sets) {
  return tokdyn::testing::run_preset(tmp.path(), preset, name, threads, sets);
}

const Sets kDual = {{"g4_L", "40"}, {"depth", "16"}, {"remark6_L", "24"}, {"probes", "2"}};
const Sets kThm9 = {{"g4_L", "40"}, {"probes", "2"}};

}  // namespace

TEST(CouplingDuality, FullStepIsTheKroneckerJacobian) {
  const duality::SectorFlow f = duality::from_g4(3, kM, kV, 0.05, 1);
  const int T = 7, P = 3;
  Mat dX(T, 4);
  Rng(1, {1}).fill_normal(dX, 1.0);
  const Mat Y = duality::full_step(f, 1, P, dX);
  const Mat J = tf::kron_sum(fk::alpha_star_block(T, P), f.B0[1], f.B1[1]);  // I ⊗ B0 + alpha*_blk ⊗ B1
  const Eigen::VectorXd y = J * Eigen::Map<const Eigen::VectorXd>(dX.data(), dX.size());
  EXPECT_LT((Eigen::Map<const Eigen::VectorXd>(Y.data(), Y.size()) - y).norm(), 1e-14 * y.norm());
  // Sector invariance (Thm 3(2)): w_j u^T maps to w_j ((B0 + B1 / j) u)^T.
  const Mat W = fk::pascal_matrix(P);
  const Vec u = Vec::LinSpaced(4, -1.0, 2.0);
  for (int j = 1; j <= P; ++j) {
    Mat X(P, 4);
    X = W.col(j - 1) * u.transpose();
    const Mat want = W.col(j - 1) * (f.sector(0, 1.0 / j) * u).transpose();
    EXPECT_LT((duality::full_step(f, 0, P, X) - want).norm(), 1e-14 * want.norm()) << j;
  }
}

TEST(CouplingDuality, SharpConstantIsTheDenseRestriction) {
  const duality::SectorFlow f = duality::from_g4(12, kM, kV, 0.05, 2);
  const int P = 4;
  const std::vector<double> c = duality::sharp_constant(f, 8, P);
  ASSERT_EQ(c.size(), 13u);
  EXPECT_DOUBLE_EQ(c[0], 1.0);
  for (long l : {1L, 5L, 12L}) {
    const duality::Matrix M = duality::full_matrix(f, P, 0, l);
    const double dense = Eigen::JacobiSVD<duality::Matrix>(M.rightCols(3 * 4)).singularValues()(0);
    EXPECT_NEAR(c[static_cast<std::size_t>(l)], dense, 1e-12 * dense) << l;
  }
  // Remark 6 with the spectral compression Pi~ (head) at l0 = 0 is exactly Thm 6's off-manifold map:
  // Phi^full_l - iota Phi(l, 0) Pi~ = Phi^full_l (I - iota Pi~), whose norm is at least C_sharp(l).
  hier::Compression head;
  head.kind = hier::PiKind::Head;
  const double e = duality::remark6_error(f, head, P, 12, 0);
  EXPECT_GE(e, c[12] * (1 - 1e-12));
  EXPECT_LE(e, c[12] * std::sqrt(static_cast<double>(P)) * (1 + 1e-12));  // |I - iota Pi~| = sqrt(P)
  // The head compression after mixing (l0 = 6) gives the same map (Pi~ is exact on the sector-1 part).
  EXPECT_NEAR(duality::remark6_error(f, head, P, 12, 6), e, 1e-12 * e);
}

TEST(CouplingDuality, PresetEveryCheckPasses) {
  TempDir tmp;
  const fs::path out = run_small(tmp, "coupling-duality", "a", 2, kDual);
  const auto rows = lines_of(out / "checks.csv");
  ASSERT_GE(rows.size(), 18u);
  int r12 = 0, r13 = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].substr(rows[i].rfind(',') + 1), "true") << rows[i];
    r12 += rows[i].rfind("R12", 0) == 0;
    r13 += rows[i].rfind("R13", 0) == 0;
  }
  EXPECT_GE(r12, 12);
  EXPECT_GE(r13, 5);
  EXPECT_EQ(lines_of(out / "duality.csv").size(), 1u + 41u + 17u);   // l = 0..40 (g4), 0..16 (transformer)
  EXPECT_EQ(lines_of(out / "families.csv").size(), 3u);
}

TEST(CouplingDuality, Thm9PresetEveryCheckPasses) {
  TempDir tmp;
  const fs::path out = run_small(tmp, "coupling-thm9", "a", 2, kThm9);
  const auto rows = lines_of(out / "checks.csv");
  ASSERT_GE(rows.size(), 6u);
  for (std::size_t i = 1; i < rows.size(); ++i) EXPECT_EQ(rows[i].substr(rows[i].rfind(',') + 1), "true") << rows[i];
  EXPECT_EQ(lines_of(out / "thm9.csv").size(), 1u + 2u * 2u * 41u);  // probes x blocks x (L + 1)
}

TEST(CouplingDuality, SameBitsAtOneAndTwoThreads) {
  TempDir tmp;
  const fs::path a = run_small(tmp, "coupling-duality", "t1", 1, kDual), b = run_small(tmp, "coupling-duality", "t2", 2, kDual);
  for (const char* f : {"checks.csv", "duality.csv", "remark6.csv", "slow_tick.csv", "families.csv", "summary.csv"})
    EXPECT_EQ(slurp(a / f), slurp(b / f)) << f;
}

TEST(CouplingDuality, BadInputExitsTwoWithOneLine) {
  TempDir tmp;
  const std::vector<std::tuple<std::string, std::vector<std::string>, std::string>> cases = {
      {"coupling-duality", {"--set", "block=12", "--set", "tokens=8"}, "block"},
      {"coupling-duality", {"--set", "levels=3,2"}, "levels"},
      {"coupling-duality", {"--set", "g4_m=-0.8,-0.5", "--set", "g4_v=1,1,1"}, "g4_m"},
      {"coupling-duality", {"--set", "g4_v=1,nan,1,1"}, "g4_v"},
      {"coupling-duality", {"--set", "refresh_every=100"}, "refresh_every"},
      {"coupling-thm9", {"--set", "block=9"}, "block"},
      {"coupling-thm9", {"--set", "g4_m=-0.5,-0.5,-0.5,-0.5", "--set", "g4_v=0.5,0.5,0.5,0.5"}, "dichotomy"},
  };
  for (const auto& [preset, sets, key] : cases) {
    std::vector<std::string> args = {"run", preset, "--out", "res", "--no-figures"};
    args.insert(args.end(), sets.begin(), sets.end());
    const auto r = run_cli(tmp.path(), args);
    EXPECT_EQ(r.code, 2) << key << ": " << r.err;
    EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(tmp.path() / "res")) << key;
  }
}
