// The theory of "The Attention Within" checked numerically, part 1 (with
// test_ssm_theory_constants.cpp and test_ssm_theory_certificates.cpp; trajectories of the flow in
// test_ssm_theory_flows.cpp): the field (5) at random states against the decomposition (24)-(28)
// (T6), Prop IV.1 (T10, T11), Section V (T18, T26) and the linearisation at consensus (T15).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numbers>
#include <utility>
#include <vector>

#include "ssm_fixtures.hpp"
#include "tokdyn/analysis/ssm_bounds.hpp"
#include "tokdyn/analysis/ssm_pe_certificate.hpp"
#include "tokdyn/analysis/ssm_section5.hpp"
#include "tokdyn/analysis/ssm_trajectory.hpp"
#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/models/ssm/designs.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/engine/schedule.hpp"
#include "tokdyn/core/sphere.hpp"

using namespace tokdyn;

namespace {

/// The field (5) of one sequence Z (len x n) for constant parameters p (IO form).
Tokens field(const SsmParams& p, const Tokens& Z, bool silu = false) {
  SsmOptions o;
  o.silu_bc = silu;
  SsmBranches br;
  ssm_branches(p, o, Z, br);
  Tokens R(Z.rows(), Z.cols());
  ssm_readout(SsmForm::InputOutput, p, br, Z, 0, static_cast<int>(Z.rows()), R);
  tangent_project_rows(Z, R);
  return R;
}

/// A unit token with V = 1 - b and sign sigma, random tangential direction.
RowVec token_near_pole(Rng& rng, int n, int mu, double V, int sigma) {
  RowVec w(n);
  for (int k = 0; k < n; ++k) w[k] = rng.normal();
  return token_with_V(V, w, mu, sigma);
}

int random_sign(Rng& rng) { return rng.uniform() < 0.5 ? -1 : 1; }

SsmParams g1_with_kernel(const Mat& S) {
  SsmParams p = design_g1();
  set_interaction_kernel(p, S);
  return p;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The decomposition (24)-(28) (T6)

TEST(SsmTheory, BdotDecompositionEqualsField) {
  const SsmParams p = tokdyn::testing::random_ssm(31, 8, 16);
  Rng rng(32);
  for (int rep = 0; rep < 5; ++rep) {
    const Tokens Z = rng.sphere_tokens(12, 8);
    std::vector<int> Sigma(12);
    for (int& s : Sigma) s = random_sign(rng);
    const int mu = rep % 8;
    const Tokens F = field(p, Z);
    for (int i = 0; i < 12; ++i) {
      const BdotDecomposition d = bdot_decomposition(p, Z, i, mu, Sigma);
      EXPECT_NEAR(d.sum(), Sigma[i] * F(i, mu), 1e-12) << "token " << i << " mu " << mu;
      EXPECT_NEAR(bdot(p, Z, i, mu, Sigma[i]), Sigma[i] * F(i, mu), 1e-13);
      if (i == 0) {
        EXPECT_EQ(d.t25 + d.t26 + d.t27 + d.t28, 0.0);  // the first token has no cross terms
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Prop IV.1 (T10, T11)

TEST(SsmTheory, PropIV1FirstTokenBoundHolds) {
  const SsmParams p = g1_with_kernel(Vec((Vec(4) << 1.0, -0.5, -0.5, -0.5).finished()).asDiagonal());
  const SpectralConstants k = spectral_constants(p, 5);
  const double c = 0.3;
  Rng rng(50);
  const int N = 100000;
  Tokens Z(N, 4);
  std::vector<int> sig(N);
  for (int a = 0; a < N;) {  // z_1 uniform on the sphere, conditioned on |z^1| > c
    const RowVec z = rng.sphere_tokens(1, 4).row(0);
    if (std::abs(z[0]) <= c) continue;
    Z.row(a) = z;
    sig[a++] = z[0] > 0 ? 1 : -1;
  }
  Batch B{Z, N, 1};
  Tokens F;
  SsmFlow(std::make_shared<ConstantSchedule<SsmParams>>(p), SsmOptions{}).eval(0.0, B, F);
  double worst = 1.0;
  long negative_q = 0;
  for (int a = 0; a < N; ++a) {
    const double q = Z.row(a).dot(p.S_BC() * Z.row(a).transpose());
    negative_q += q < 0;
    const double bdot1 = sig[a] * F(a, 0);
    worst = std::min(worst, bdot1 - a_c(q, c, k) * lyapunov_V(Z.row(a), 0, sig[a]));
  }
  EXPECT_GE(worst, -1e-12);
  EXPECT_GT(negative_q, 1000);  // both branches of (6) are exercised
}

TEST(SsmTheory, PropIV1CascadeBoundHoldsNearConsensus) {
  const SsmParams p = g1_with_kernel(Vec((Vec(4) << 1.0, -0.5, -0.5, -0.5).finished()).asDiagonal());
  const int len = 5;
  const SpectralConstants k = spectral_constants(p, len);
  const double c = 0.3, eps = 0.1;
  const double d_eps = prop_iv1_d_eps(c, eps, k.Lambda, p.S_BC().norm());
  const double M = prop_iv1_M(1.0, k.D_norm_max);  // ||diag(1,-.5,-.5,-.5)||_2 = 1
  EXPECT_NEAR(d_eps, 0.01 / (8 * k.Lambda * k.Lambda * 1.75), 1e-15);
  Rng rng(51);
  double worst = 1.0;
  for (int a = 0; a < 100000; ++a) {
    Tokens Z(len, 4);
    std::vector<int> sig(len);
    for (int i = 0; i < len; ++i) {
      sig[i] = random_sign(rng);
      Z.row(i) = token_near_pole(rng, 4, 0, rng.uniform(0.0, d_eps), sig[i]);
    }
    const Tokens F = field(p, Z);
    double esum = 0.0;
    for (int i = 0; i < len; ++i) {
      const double V = lyapunov_V(Z.row(i), 0, sig[i]);
      const double q = Z.row(i).dot(p.S_BC() * Z.row(i).transpose());
      const double rhs = i == 0 ? a_c(q, c, k) * V : (a_c(q, c, k) - eps) * V - M * esum;
      worst = std::min(worst, sig[i] * F(i, 0) - rhs);
      esum += error_norm(Z.row(i), 0, sig[i]);
    }
  }
  EXPECT_GE(worst, -1e-12);
}

// ---------------------------------------------------------------------------------------------
// Section V (T18, T26)

TEST(SsmTheory, EffectiveThresholdExampleShowsErratumE1) {
  EXPECT_NEAR(c_eff_paper(1, 1, 1, 1, 3), 0.2773501, 1e-7);
  EXPECT_NEAR(c_eff_proof(1, 1, 1, 1, 3), 0.5547002, 1e-7);
  EXPECT_NEAR(prop_v1_beta(0.3, 1, 1, 1, 1, 3), -1.0078784, 1e-7);  // c > c_eff yet beta_3 < 0
  EXPECT_GT(prop_v1_beta(0.56, 1, 1, 1, 1, 3), 0.0);                // c > c_eff^proof: beta_3 > 0
  EXPECT_NEAR(c_eff_paper(1.7, 1.3, 1.3, 1.0, 2), c_eff_proof(1.7, 1.3, 1.3, 1.0, 2), 1e-15);  // equal for l = 2
  double prev = -1.0;
  for (double cs : {0.0, 0.1, 1.0, 10.0, 100.0}) {  // monotone increasing in c_star
    const double ce = c_eff_paper(cs, 1.3, 1.3, 1.0, 5);
    EXPECT_GT(ce, prev);
    EXPECT_LT(ce, 1.0);
    prev = ce;
  }
}

TEST(SsmTheory, AnisotropyOfIsotropicAndAni2Designs) {
  {
    const auto samples = sample_times(*design_s_iso(), time_grid(0.0, 2 * std::numbers::pi, 2001));
    const SpectralConstants k = spectral_constants(samples, 5);
    const AnisotropyConstants a = anisotropy(samples, k);
    EXPECT_EQ(a.c_star, 0.0);
    EXPECT_EQ(a.c_eff, 0.0);
    EXPECT_EQ(a.c_eff_proof, 0.0);
    EXPECT_NEAR(a.alpha_pd, 0.5, 1e-6);
  }
  const SsmParams p = design_ani2();
  const SpectralConstants k = spectral_constants(p, 2);
  EXPECT_NEAR(k.gamma, 1.0, 1e-12);
  const AnisotropyConstants a = anisotropy({p}, k);
  EXPECT_NEAR(a.alpha_pd, 1.0, 1e-12);
  EXPECT_NEAR(a.c_star, 28.6006993, 1e-7);
  EXPECT_NEAR(a.c_eff, 0.9981088, 1e-7);
  EXPECT_NEAR(a.c_eff_proof, a.c_eff, 1e-15);
  const AnisotropyConstants col = anisotropy({p}, k, CstarNorm::Column);
  EXPECT_NEAR(col.c_star, 11.0, 1e-12);  // ||P_perp S e^1|| = 11
  EXPECT_LE(anisotropy({p}, k, CstarNorm::Spectral).c_star, a.c_star);
}

// V_i' <= -kappa_i V_i + M sum_{j<i} |e_j| on b_i in [c, 1] (Prop V.1, T18).
TEST(SsmTheory, PropV1BoundHoldsForIsotropicKernel) {
  const int len = 5;
  const double c = 0.5, alpha_pd = 0.5;
  const SpectralConstants k = spectral_constants(design_g1(), len);
  const double M = 8 * 1.5 * k.lambda_max;
  std::vector<double> kappa(len);
  for (int i = 1; i <= len; ++i) {
    const double beta = prop_v1_beta(c, 0.0, k.gamma, k.lambda_min, k.lambda_max, i);
    EXPECT_NEAR(beta, c * (k.gamma + (i - 1) * k.lambda_min), 1e-15);
    kappa[i - 1] = prop_v1_kappa(alpha_pd, beta, c);
  }
  Rng rng(80);
  double worst = 1.0;
  for (int a = 0; a < 100000; ++a) {
    const double g = rng.uniform(0.5, 1.5);
    const SsmParams p = g1_with_kernel(g * Mat::Identity(4, 4));
    Tokens Z(len, 4);
    std::vector<int> sig(len);
    for (int i = 0; i < len; ++i) {
      sig[i] = random_sign(rng);
      Z.row(i) = token_near_pole(rng, 4, 0, 1.0 - rng.uniform(c, 1.0), sig[i]);
    }
    const Tokens F = field(p, Z);
    double esum = 0.0;
    for (int i = 0; i < len; ++i) {
      const double V = lyapunov_V(Z.row(i), 0, sig[i]);
      worst = std::min(worst, -kappa[i] * V + M * esum - (-sig[i] * F(i, 0)));
      esum += error_norm(Z.row(i), 0, sig[i]);
    }
  }
  EXPECT_GE(worst, -1e-12);
}

// ---------------------------------------------------------------------------------------------
// §2.6 linearisation (T15a, T15b)

namespace {

/// Finite-difference Jacobian of (5) at Z (len x n) in tangent coordinates (channels != mu).
Mat tangent_jacobian(const SsmParams& p, const Tokens& Z, int mu, bool silu, double h = 1e-6) {
  const int len = static_cast<int>(Z.rows()), n = p.n();
  std::vector<std::pair<int, int>> coords;
  for (int i = 0; i < len; ++i)
    for (int nu = 0; nu < n; ++nu)
      if (nu != mu) coords.emplace_back(i, nu);
  const int N = static_cast<int>(coords.size());
  Mat J(N, N);
  for (int b = 0; b < N; ++b) {
    Tokens Zp = Z, Zm = Z;
    Zp(coords[b].first, coords[b].second) += h;
    Zm(coords[b].first, coords[b].second) -= h;
    project_rows(Zp);
    project_rows(Zm);
    const Tokens Fp = field(p, Zp, silu), Fm = field(p, Zm, silu);
    for (int a = 0; a < N; ++a)
      J(a, b) = (Fp(coords[a].first, coords[a].second) - Fm(coords[a].first, coords[a].second)) / (2 * h);
  }
  return J;
}

SsmParams t15_design(std::uint64_t seed) {
  Rng rng(seed);
  SsmParams p;
  p.alpha.resize(4);
  rng.fill_uniform(p.alpha, 0.1, 2.0);
  p.W_delta.resize(4, 4);
  rng.fill_normal(p.W_delta, 0.3);  // W_Delta ~ N(0, 0.09)
  p.b_delta.resize(4);
  rng.fill_normal(p.b_delta, 1.0);
  Mat S(4, 4);
  rng.fill_normal(S, 0.5);
  S(0, 0) = 1.5;  // S_mu~mu~ = 1.5
  set_interaction_kernel(p, S);
  return p;
}

void check_linearisation(bool silu) {
  const SsmParams p = t15_design(90);
  const std::vector<int> Sigma = {1, -1, 1};
  const Tokens Zs = consensus_point(4, 0, Sigma);
  const Mat J = tangent_jacobian(p, Zs, 0, silu);
  const Mat D = consensus_linearisation_diagonal(p, 3, 0, Sigma, silu);
  for (int a = 0; a < 9; ++a)
    for (int b = 0; b < 9; ++b) {
      const int ta = a / 3, tb = b / 3;
      if (a == b) {
        const double pred = D(ta, 1 + a % 3);
        EXPECT_NEAR(J(a, b), pred, 1e-6 * std::abs(pred)) << "diag " << a;
      } else if (tb > ta || ta == tb) {
        EXPECT_NEAR(J(a, b), 0.0, 1e-9) << a << "," << b;  // upper blocks and the block's off-diagonal vanish
      }
    }
  // The lower blocks are not zero: the cascade couples token i to the earlier tokens.
  EXPECT_GT(J.block(3, 0, 3, 3).cwiseAbs().maxCoeff(), 1e-3);
}

}  // namespace

TEST(SsmTheory, JacobianAtConsensusIsBlockTriangularWithPredictedDiagonal) { check_linearisation(false); }

TEST(SsmTheory, SiluJacobianDiagonalMatchesSiluPrediction) { check_linearisation(true); }

TEST(SsmTheory, G1TokenOneRatesMatchSpec) {
  const Mat D = consensus_linearisation_diagonal(design_g1(), 5, 0, {1, -1, 1, 1, -1});
  EXPECT_NEAR(D(0, 1), -1.0, 1e-12);
  EXPECT_NEAR(D(0, 2), -1.1118484, 1e-7);
  EXPECT_NEAR(D(0, 3), -1.1863337, 1e-7);
  EXPECT_NEAR(D(1, 1), -2.3132617, 1e-7);  // token 2's own rate (§2.6: 2.3133)
  const std::vector<double> r = predicted_V_rates(D, 0);
  for (double v : r) EXPECT_NEAR(v, 2.0, 1e-12);  // later tokens inherit token 1's slowest rate
}


// Assumption V.1's margin lambda_min((S + S^T)/2) of S = S_C^T S_B from the low-rank factors
// (2m x 2m eigenproblem) against the dense n x n symmetric eigensolve of the same matrix: an
// independent route (closed-form reduction vs LAPACK on the full matrix), at m < n/2 (low-rank
// route), at 2m >= n (falls back to dense: identical), and for a positive semidefinite S_BC (S_B = S_C,
// where the zero eigenvalues make lambda_min exactly 0 on the complement).
TEST(SsmTheory, LowRankKernelLambdaMinEqualsDense) {
  for (const auto& [n, m] : {std::pair{40, 6}, std::pair{97, 16}, std::pair{20, 12}}) {
    Rng rng(7, {static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(m)});
    SsmParams p;
    p.S_B.resize(m, n);
    p.S_C.resize(m, n);
    rng.fill_normal(p.S_B);
    rng.fill_normal(p.S_C);
    const double dense = kernel_lambda_min(p.S_BC()), low = kernel_lambda_min(p);
    EXPECT_NEAR(low, dense, 1e-12 * p.S_BC().norm()) << "n = " << n << ", m = " << m;
    EXPECT_LT(low, 0.0);  // S_C^T S_B with independent factors is indefinite
    p.S_C = p.S_B;        // S_BC = S_B^T S_B: PSD of rank m < n, lambda_min = 0
    const double psd = kernel_lambda_min(p);
    EXPECT_NEAR(psd, 0.0, 1e-12 * p.S_BC().norm());
    EXPECT_NEAR(psd, kernel_lambda_min(p.S_BC()), 1e-12 * p.S_BC().norm());
  }
}
