// The closed loop of the coupling paper (Thm 10, Prop 11, Thm 12, Remark 5): checks R18-R21 at
// G-level sizes (d = 4, L ~ 100), the injection family, Newton's convergence, continuation against
// direct solves, fold detection, and the presets' bad input (exit 2, one line).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tokdyn/analysis/closed_loop.hpp"
#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/core/rng.hpp"

#include "cli_checks.hpp"
#include "test_util.hpp"
#include "thread_util.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::CliResult;
using tokdyn::testing::expect_bad_runs;
using tokdyn::testing::run_cli;
using tokdyn::testing::TempDir;
using namespace tokdyn;
namespace cl = tokdyn::closed_loop;
using cl::Matrix;
using cl::Seq;
using cl::Vector;

namespace {

constexpr long kL = 100;
const std::vector<double> kSigma = {0.2, 0.1, -0.3, -0.5};

double sup(const Seq& u, long ex = 0) {
  return u.middleCols(ex, u.cols() - 2 * ex).colwise().norm().maxCoeff();
}

double slope(const std::vector<double>& x, const std::vector<double>& y) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    sx += std::log(x[i]);
    sy += std::log(y[i]);
    sxx += std::log(x[i]) * std::log(x[i]);
    sxy += std::log(x[i]) * std::log(y[i]);
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

struct Fixture {
  std::vector<Matrix> B;
  cl::OpenLoop ol;
  cl::InjectionPtr psi;
  cl::Problem prob;
  double rho0 = 0;
};

/// Rotating sectors (G4, non-autonomous) with a tanh-MLP psi, or weight-tied G1 with an affine psi.
Fixture make_setup(bool g4, const std::string& kind = "tanh-mlp", double scale = 0.5, double offset = 1.0) {
  Fixture s;
  s.B = g4 ? cocycle::family_g4(kL, {-0.6, -0.6, -0.5, -0.5}, {0.8, 0.8, 0.2, 0.2}, 1.0, 0.03, 3)
           : cocycle::family_g1(kL, kSigma, 3.0, 3);
  s.ol = cl::open_loop(s.B, kL / 4, 5);
  s.psi = cl::random_injection(kind, 4, scale, offset, 11, &s.ol.bundles);
  s.prob = cl::make_problem(s.B, s.psi);
  s.rho0 = 1.0 / (2.0 * s.ol.K * s.psi->lipschitz());
  return s;
}

TEST(CouplingClosedLoop, InjectionJacobiansAndAlignment) {
  const Fixture s = make_setup(true);
  Rng rng(5, {1});
  for (const std::string kind : {"identity", "linear", "affine", "tanh-mlp", "same-index", "intertwining"}) {
    const cl::InjectionPtr psi = cl::random_injection(kind, 4, 0.7, 0.3, 2, &s.ol.bundles);
    for (long l : {0L, 37L, kL - 1}) {
      Vec u(4);
      rng.fill_normal(u);
      const Matrix J = psi->jacobian(l, u);
      Matrix fd(4, 4);
      for (int j = 0; j < 4; ++j) {
        Vector e = Vector::Zero(4);
        e(j) = 1e-6;
        fd.col(j) = (psi->value(l, u + e) - psi->value(l, u - e)) / 2e-6;
      }
      EXPECT_LE((J - fd).norm(), 1e-8) << kind;
      EXPECT_LE(Eigen::JacobiSVD<Matrix>(J).singularValues()(0), psi->lipschitz() * (1 + 1e-12)) << kind;
    }
    EXPECT_NEAR((psi->value(0, Vector::Zero(4))).norm(), kind == "linear" ? 0.0 : 0.3, 1e-12) << kind;
  }
  // Same-index: commutes with P_+(l); intertwining: P_+(l+1) B(l) = B(l) P_+(l) (flag F4).
  const auto si = cl::random_injection("same-index", 4, 1.0, 0.0, 2, &s.ol.bundles);
  const auto it = cl::random_injection("intertwining", 4, 1.0, 0.0, 2, &s.ol.bundles);
  const Vector z = Vector::Zero(4);
  double comm = 0, inter = 0, si_inter = 0;
  for (long l = 0; l + 1 < kL; ++l) {
    const Matrix& P = s.ol.bundles.P_plus[static_cast<std::size_t>(l)];
    const Matrix& Pn = s.ol.bundles.P_plus[static_cast<std::size_t>(l + 1)];
    comm = std::max(comm, (P * si->jacobian(l, z) - si->jacobian(l, z) * P).norm());
    inter = std::max(inter, (Pn * it->jacobian(l, z) - it->jacobian(l, z) * P).norm());
    si_inter = std::max(si_inter, (Pn * si->jacobian(l, z) - si->jacobian(l, z) * P).norm());
  }
  EXPECT_LE(comm, 1e-12);
  EXPECT_LE(inter, 1e-12);
  EXPECT_GE(si_inter, 1e-3);  // rotating bundles: same-index alignment does not intertwine
}

TEST(CouplingClosedLoop, PicardRatioAndNewtonAgree) {  // R18 (a)
  const Fixture s = make_setup(true);
  const double rho = 0.5 * s.rho0;
  const cl::Solution pic = cl::picard(s.prob, rho);
  const cl::Solution nwt = cl::newton(s.prob, rho);
  ASSERT_TRUE(pic.converged);
  ASSERT_TRUE(nwt.converged);
  const double bound = s.ol.K * rho * s.psi->lipschitz();
  double ratio = 0;
  for (std::size_t i = 1; i < pic.history.size(); ++i)
    if (pic.history[i] > 1e-12) ratio = std::max(ratio, pic.history[i] / pic.history[i - 1]);
  EXPECT_GT(ratio, 0.0);
  EXPECT_LE(ratio, bound);
  EXPECT_LE(sup(pic.u - nwt.u), 1e-10);
  // The fixed point solves (15) on the window: the residual of the recursion is round-off.
  EXPECT_LE(sup(cl::residual(s.prob, rho, nwt.u)), 1e-13);
  // Uniqueness: Newton from a start perturbed inside the ball returns to it.
  Seq start = nwt.u;
  start.array() += 0.3 * 2 * s.ol.K * rho * s.psi->value(0, Vector::Zero(4)).norm();
  const cl::Solution other = cl::newton(s.prob, rho, start);
  EXPECT_TRUE(other.converged);
  EXPECT_LE(sup(other.u - nwt.u), 1e-10);
}

TEST(CouplingClosedLoop, NewtonQuadratic) {
  const Fixture s = make_setup(true);
  const cl::Solution nwt = cl::newton(s.prob, 0.9 * s.rho0);
  ASSERT_TRUE(nwt.converged);
  EXPECT_LE(nwt.iterations, 6);
  const auto& h = nwt.history;
  ASSERT_GE(h.size(), 4u);
  // Quadratic: log r_{n+1} / log r_n ratios ~ 2 above the round-off floor (linear would give ~1).
  const double order = std::log(h[2] / h[1]) / std::log(h[1] / h[0]);
  EXPECT_GE(order, 1.5);
  EXPECT_LE(h.back(), 1e-14);
}

TEST(CouplingClosedLoop, WeightTiedAffineExact) {  // R18 exact: u* = -rho (A + rho B)^{-1} c
  const Fixture s = make_setup(false, "affine", 0.8, 0.6);
  const Matrix A = s.B[0] - Matrix::Identity(4, 4);
  const Vector c = s.psi->value(0, Vector::Zero(4));
  const Matrix Bm = s.psi->jacobian(0, Vector::Zero(4));
  for (double f : {0.2, 0.9}) {
    const double rho = f * s.rho0;
    const Vector exact = -rho * (A + rho * Bm).partialPivLu().solve(c);
    const cl::Solution sol = cl::newton(s.prob, rho);
    ASSERT_TRUE(sol.converged);
    EXPECT_LE((sol.u.colwise() - exact).colwise().norm().maxCoeff(), 1e-12 * exact.norm());
  }
  // Prop 11 weight-tied: G psi(0) = -A^{-1} psi(0); d_+ = 0 iff P_+ psi(0) = 0.
  const Vector w = -A.partialPivLu().solve(c);
  EXPECT_LE((cl::first_order(s.prob).colwise() - w).colwise().norm().maxCoeff(), 1e-12 * w.norm());
  const Matrix& P = s.ol.bundles.P_plus[0];
  const cl::Solution perp = cl::newton(cl::make_problem(s.B, cl::affine(c - P * c, Matrix::Zero(4, 4))), 0.01);
  const cl::Solution gen = cl::newton(cl::make_problem(s.B, cl::affine(c, Matrix::Zero(4, 4))), 0.01);
  double dp_perp = 0, dp_gen = 0;
  for (long l = 0; l <= kL; ++l) {
    dp_perp = std::max(dp_perp, (s.ol.bundles.P_plus[static_cast<std::size_t>(l)] * perp.u.col(l)).norm());
    dp_gen = std::max(dp_gen, (s.ol.bundles.P_plus[static_cast<std::size_t>(l)] * gen.u.col(l)).norm());
  }
  EXPECT_LE(dp_perp, 1e-12 * sup(perp.u));
  EXPECT_GE(dp_gen, 1e-3 * sup(gen.u));
}

TEST(CouplingClosedLoop, FirstOrderSlopeAndBounds) {  // R18 (b), (c), (d); R19
  const Fixture s = make_setup(true);
  const Seq G = cl::first_order(s.prob);
  const long ex = 20;
  const Vector psi0 = s.psi->value(0, Vector::Zero(4));
  std::vector<double> rs, rem, cd, dpd;
  double S = 0;
  for (long l = ex; l <= kL - ex; ++l) S = std::max(S, (s.ol.bundles.P_plus[static_cast<std::size_t>(l)] * G.col(l)).norm());
  for (double f : {0.002, 0.005, 0.01, 0.02, 0.05, 0.1}) {  // 1.7 decades
    const double rho = f * s.rho0;
    const cl::Solution p = cl::newton(s.prob, rho), m = cl::newton(s.prob, -rho);
    ASSERT_TRUE(p.converged && m.converged);
    EXPECT_LE(sup(p.u), 2 * s.ol.K * rho * psi0.norm());  // (C.1)
    rs.push_back(rho);
    rem.push_back(sup(p.u - rho * G, ex));
    cd.push_back(sup((p.u - m.u) / (2 * rho) - G, ex));
    double dp = 0;
    for (long l = ex; l <= kL - ex; ++l) dp = std::max(dp, (s.ol.bundles.P_plus[static_cast<std::size_t>(l)] * p.u.col(l)).norm());
    dpd.push_back(std::abs(dp / rho - S));
  }
  EXPECT_NEAR(slope(rs, rem), 2.0, 0.15);
  EXPECT_NEAR(slope(rs, cd), 2.0, 0.15);
  EXPECT_NEAR(slope(rs, dpd), 1.0, 0.2);
  EXPECT_LE(cd.front(), 1e-4 * sup(G, ex));  // d/drho u*|_0 = G psi(0)
}

TEST(CouplingClosedLoop, CrossBlockChain) {  // R19, flag F8
  const Fixture s = make_setup(true);
  const double rho = 0.4 * s.rho0;
  const cl::Solution nwt = cl::newton(s.prob, rho);
  const std::vector<double> dist = cl::cross_block_chain(s.prob, rho, 25, nwt.u);
  const double bound = s.ol.K * rho * s.psi->lipschitz();
  double ratio = 0;
  for (std::size_t i = 1; i < dist.size(); ++i)
    if (dist[i] > 1e-12) ratio = std::max(ratio, dist[i] / dist[i - 1]);
  EXPECT_GT(ratio, 0.0);
  EXPECT_LE(ratio, bound);
  EXPECT_LE(dist.back(), 1e-12);
}

TEST(CouplingClosedLoop, ContinuationReproducesNewton) {
  const Fixture s = make_setup(true);
  cl::ContinuationOptions o;
  o.rho_end = 1.5 * s.rho0;
  o.ds0 = 0.2 * s.rho0;
  o.ds_max = 0.3 * s.rho0;
  o.diagnose = false;
  const cl::ContinuationResult r = cl::continue_in_rho(s.prob, o);
  EXPECT_EQ(r.stop_reason, "rho_end");
  ASSERT_GE(r.points.size(), 5u);
  for (std::size_t i = 1; i < r.points.size(); i += 2) {
    const cl::Solution d = cl::newton(s.prob, r.points[i].rho);
    ASSERT_TRUE(d.converged);
    EXPECT_LE(sup(d.u - r.points[i].u), 1e-10) << "rho = " << r.points[i].rho;
  }
}

TEST(CouplingClosedLoop, MarginWeightTiedAndBounds) {  // R20
  const Fixture s = make_setup(false, "affine", 1.0, 0.5);
  const double Lpsi = s.psi->lipschitz();
  const cl::Bounds bd = cl::bounds(s.ol.K, s.ol.C, s.ol.r_minus, s.ol.r_plus, Lpsi);
  cl::ContinuationOptions o;
  o.direction = -1.0;
  o.rho_end = -3.0;
  o.ds_max = 0.05;
  o.open = &s.ol.bundles;
  o.exclude = 20;
  const cl::ContinuationResult r = cl::continue_in_rho(s.prob, o);
  ASSERT_TRUE(std::isfinite(r.rho_crit)) << r.stop_reason;
  // Exact: the first rho where an eigenvalue of I + A + rho B reaches the unit circle.
  const Matrix Bp = s.psi->jacobian(0, Vector::Zero(4));
  double good = 0, bad = std::abs(r.rho_crit) * 1.5;
  auto kof = [&](double rho) {
    const Eigen::VectorXd m = Eigen::EigenSolver<Matrix>(s.B[0] - rho * Bp, false).eigenvalues().cwiseAbs();
    return (m.array() > 1.0).count();
  };
  for (double x = 0.001; x < bad; x += 0.001)
    if (kof(x) != s.ol.k) {
      bad = x;
      break;
    } else {
      good = x;
    }
  for (int i = 0; i < 60; ++i) ((kof(0.5 * (good + bad)) != s.ol.k) ? bad : good) = 0.5 * (good + bad);
  // Near rho_crit u* grows like 1/distance and Newton's attainable residual with it, so where the
  // bisection stops depends on the arithmetic (FMA or SSE2) at the 1e-6 level.
  EXPECT_NEAR(std::abs(r.rho_crit), bad, 1e-5 * bad);
  EXPECT_LE(bd.rho_C2, std::abs(r.rho_crit));
  EXPECT_LE(bd.rho_C2_sharp, std::abs(r.rho_crit));
  EXPECT_LE(bd.rho_0, std::abs(r.rho_crit));
  EXPECT_LE(s.ol.K, bd.K_bound);                       // Lemma 17: ||G|| <= C (1/m_- + 1/m_+) <= 2C/mu
  EXPECT_LE(bd.rho_C2, bd.rho_C2_sharp * (1 + 1e-12));  // so the K-free C.2 form is the smaller one
  // Below rho_crit: the dimensions are kept and the projectors move by O(C^2 |rho| L_psi / mu).
  for (std::size_t i = 1; i + 1 < r.points.size(); ++i) {
    const auto& g = r.points[i].diag;
    EXPECT_EQ(g.k_minus, s.ol.k);
    EXPECT_EQ(g.k_bundles, s.ol.k);
    EXPECT_LE(g.projector_deviation, s.ol.C * s.ol.C * std::abs(r.points[i].rho) * Lpsi / bd.mu);
  }
}

TEST(CouplingClosedLoop, IntertwiningKeepsProjectors) {  // R20 under (A7), flag F4
  const Fixture s = make_setup(true);
  for (const std::string kind : {"intertwining", "same-index"}) {
    const auto psi = cl::random_injection(kind, 4, 1.0, 0.0, 9, &s.ol.bundles);
    const cl::Problem p = cl::make_problem(s.B, psi);
    const double rho = 0.3 / (2.0 * s.ol.K * psi->lipschitz());
    const cl::Solution sol = cl::newton(p, rho);
    const cl::Diagnostics g = cl::diagnose(p, rho, sol.u, cl::end_equilibria(p, rho), &s.ol.bundles, 25);
    if (kind == "intertwining") {
      EXPECT_LE(g.projector_deviation, 1e-9);
    } else {
      EXPECT_GE(g.projector_deviation, 1e-4);
    }
  }
}

TEST(CouplingClosedLoop, Remark5ScalarThresholds) {  // R21, flag F18
  for (double sigma : {-0.3, -0.8, -1.2, -1.7})
    for (double c : {1.0, -0.5}) {
      const double expected = cl::remark5_threshold(sigma, c);
      EXPECT_DOUBLE_EQ(expected, std::min(-sigma, 2 + sigma) / std::abs(c));
      const cl::Problem p = cl::make_problem(std::vector<Matrix>(30, Matrix::Constant(1, 1, 1 + sigma)), cl::linear(Matrix::Constant(1, 1, c)));
      double found = 1e300;
      for (double dir : {1.0, -1.0}) {
        cl::ContinuationOptions o;
        o.direction = dir;
        o.rho_end = dir * 5.0;
        o.ds_max = 0.05;
        o.refine_steps = 60;
        const auto r = cl::continue_in_rho(p, o);
        if (std::isfinite(r.rho_crit)) found = std::min(found, std::abs(r.rho_crit));
      }
      EXPECT_NEAR(found, expected, 1e-8) << sigma << " " << c;
      if (sigma < -1) {
        EXPECT_GT(std::abs(sigma) / std::abs(c) - expected, 0.1);  // the continuous-time reading misses the flip
      }
    }
  EXPECT_THROW(cl::remark5_threshold(0.1, 1.0), std::invalid_argument);
  EXPECT_THROW(cl::remark5_threshold(-0.5, 0.0), std::invalid_argument);
}

TEST(CouplingClosedLoop, FoldDetected) {
  // Scalar 1 + sigma = 0.5, psi(u) = 1 + tanh(u - 2): the branch rho(u) = 0.5 u / psi(u) has a
  // local maximum (a fold) at which 1 + sigma + rho psi'(u) = 1.
  const cl::Problem p = cl::make_problem(std::vector<Matrix>(30, Matrix::Constant(1, 1, 0.5)),
                                         cl::tanh_mlp(Vector::Ones(1), Matrix::Ones(1, 1), Vector::Constant(1, -2.0), Matrix::Ones(1, 1)));
  double fold = 0;
  for (double u = 0; u < 3; u += 1e-5) fold = std::max(fold, 0.5 * u / (1 + std::tanh(u - 2)));
  cl::ContinuationOptions o;
  o.rho_end = 10;
  o.ds_max = 0.02;
  const auto r = cl::continue_in_rho(p, o);
  EXPECT_EQ(r.stop_reason, "fold");
  EXPECT_NEAR(r.rho_crit, fold, 0.02);
}

TEST(CouplingClosedLoop, BadInput) {
  const Fixture s = make_setup(false, "affine");
  EXPECT_THROW(cl::make_problem(s.B, cl::linear(Matrix::Identity(3, 3))), std::invalid_argument);
  EXPECT_THROW(cl::make_problem({}, s.psi), std::invalid_argument);
  std::vector<Matrix> flat(10, Matrix::Identity(4, 4));  // growth scale 1: not hyperbolic
  EXPECT_THROW(cl::make_problem(flat, s.psi), std::domain_error);
  EXPECT_THROW(cl::random_injection("quadratic", 4, 1, 1, 0), std::invalid_argument);
  EXPECT_THROW(cl::newton(s.prob, std::nan("")), std::invalid_argument);

  TempDir d;
  const std::vector<std::vector<std::string>> bad = {
      {"coupling-trajectory", "rho_grid="},
      {"coupling-trajectory", "rho_grid=0.01,nan,0.1"},
      {"coupling-trajectory", "rho_grid=0.01,0.02"},
      {"coupling-trajectory", "family=g1", "sigma=0,-0.5"},
      {"coupling-trajectory", "g4_m=-0.6,-0.6", "g4_v=0.8"},
      {"coupling-trajectory", "exclude=150"},
      {"coupling-margin", "sigma=0.2,-2.0"},
      {"coupling-margin", "r21_sigma=0.5"},
      {"coupling-margin", "r21_c=0"},
      {"coupling-margin", "rho_end=inf"},
      {"coupling-margin", "bench_generators=missing.npy", "bench_psi=missing.npy"}};
  expect_bad_runs(d.path(), bad);
}

TEST(CouplingClosedLoop, PresetsRunSmall) {
  TempDir d;
  for (const std::string name : {"coupling-trajectory", "coupling-margin"}) {
    const CliResult r = run_cli(d.path(), {"run", name, "--out", name, "--no-figures", "--quiet", "--set", "depth=80", "--set", "exclude=15"});
    ASSERT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_TRUE(fs::exists(d.path() / name / "checks.csv"));
    EXPECT_EQ(r.err.find("failed"), std::string::npos) << name << ": " << r.err;
  }
  EXPECT_TRUE(fs::exists(d.path() / "coupling-trajectory" / "trajectory.csv"));
  EXPECT_TRUE(fs::exists(d.path() / "coupling-margin" / "rho_sweep.csv"));
  // R20's thresholds and constants are scalar summaries (summary.csv: quantity, value, paper).
  EXPECT_FALSE(fs::exists(d.path() / "coupling-margin" / "thresholds.csv"));
  std::map<std::string, std::string> th;
  for (const auto& row : tokdyn::testing::read_csv_rows(d.path() / "coupling-margin" / "summary.csv")) th[row.at("quantity")] = row.at("value");
  for (const char* q : {"rho_0", "rho_max_C2", "rho_crit", "rho_crit_exact_weight_tied", "K", "L_psi"}) {
    ASSERT_EQ(th.count(q), 1u) << q;
    EXPECT_FALSE(th[q].empty()) << q;
  }
  EXPECT_LE(std::stod(th["rho_max_C2"]), std::stod(th["rho_crit"]));
}

// Issue 38: kappa = 1e8, the top of its declared range, was a segmentation fault (a Newton that
// stopped before its first iterate returned an empty u, which the weight-tied checks indexed).
// Every kappa of the range runs; a check that cannot be made is n/a with the reason, a Solution's
// u always has its shape, and the exact checks' tolerance follows what kappa leaves of double
// precision (100 kappa^2 eps).
TEST(CouplingClosedLoop, TrajectoryRunsAcrossKappasDeclaredRange) {
  TempDir d;
  for (const std::string kappa : {"1", "1e3", "1e5", "1e8"}) {
    const std::string out = "k" + kappa;
    const CliResult r = run_cli(d.path(), {"run", "coupling-trajectory", "--out", out, "--no-figures", "--quiet", "--set", "depth=80",
                                           "--set", "exclude=15", "--set", "kappa=" + kappa});
    ASSERT_EQ(r.code, 0) << "kappa " << kappa << ": " << r.err;
    const auto rows = tokdyn::testing::read_csv_rows(d.path() / out / "checks.csv");
    int weight_tied = 0;
    for (const auto& row : rows) {
      if (row.at("check").find("weight-tied") == std::string::npos && row.at("check").find("genericity") == std::string::npos) continue;
      ++weight_tied;
      if (row.at("pass") == "n/a") {
        EXPECT_TRUE(row.at("expected").find("Newton did not converge") != std::string::npos ||
                    row.at("expected").find("double precision") != std::string::npos)
            << "kappa " << kappa << ": " << row.at("check") << ": " << row.at("expected");
      } else {
        EXPECT_EQ(row.at("pass"), "true") << "kappa " << kappa << ": " << row.at("check") << " = " << row.at("value");
      }
    }
    EXPECT_EQ(weight_tied, 4) << "kappa " << kappa;
    if (kappa == "1e8") {
      for (const auto& row : rows) {
        if (row.at("check") == "R19 weight-tied") {
          EXPECT_EQ(row.at("pass"), "n/a") << "kappa 1e8 leaves nothing to compare";
        }
      }
    }
  }
}

TEST(CouplingClosedLoop, NewtonWithoutEndEquilibriaKeepsTheSolutionsShape) {
  // A + rho B singular at the ends (A = -B, rho = 1): no end equilibrium, so no iterate; u is NaN of shape d x (L + 1).
  const long dd = 2, L = 6;
  std::vector<Matrix> B(static_cast<std::size_t>(L), Matrix::Identity(dd, dd) * 0.5);
  const cl::Problem prob = cl::make_problem(B, cl::affine(Vector::Ones(dd), Matrix::Identity(dd, dd) * 0.5));
  const cl::Solution s = cl::newton(prob, 1.0);
  EXPECT_FALSE(s.converged);
  EXPECT_FALSE(s.why_not.empty());
  ASSERT_EQ(s.u.rows(), dd);
  ASSERT_EQ(s.u.cols(), L + 1);
  EXPECT_TRUE(s.u.array().isNaN().all());
}

}  // namespace

// The residual and the closed-loop maps run their layers on every core (one layer per thread):
// Newton's solution has the same bits on 1, 2, 3 and 4 threads (a size where the loops do split).
TEST(CouplingClosedLoop, NewtonSameBitsOnOneToFourThreads) {
  constexpr long L = 300;
  std::vector<double> sigma;
  for (int i = 0; i < 16; ++i) sigma.push_back(i < 8 ? 0.1 + 0.02 * i : -0.1 - 0.02 * i);
  const std::vector<Matrix> B = cocycle::family_g1(L, sigma, 3.0, 5);
  const cl::OpenLoop ol = cl::open_loop(B, L / 4, 5);
  const cl::InjectionPtr psi = cl::random_injection("tanh-mlp", 16, 0.5, 1.0, 11, &ol.bundles);
  const cl::Problem prob = cl::make_problem(B, psi);
  ASSERT_GE(prob.L * prob.d * prob.d, 65536);  // the loops' threshold: they do run in parallel
  const double rho = 1.0 / (2.0 * ol.K * psi->lipschitz());
  tokdyn::testing::ThreadCountGuard guard;
  Seq ref;
  for (int t : tokdyn::testing::kThreadCounts) {
    tokdyn::testing::set_threads(t);
    const cl::Solution s = cl::newton(prob, rho);
    ASSERT_TRUE(s.converged) << t << " threads";
    if (ref.size() == 0) ref = s.u;
    else EXPECT_TRUE((s.u.array() == ref.array()).all()) << t << " threads";
  }
}
