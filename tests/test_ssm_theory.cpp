// The theory of "The Attention Within" checked numerically, part 1: constants, bounds and
// identities at random states (spec ssm-consensus.md §2, acceptance tests T6-T11, T12 and T16
// constants, T15, T18, T23, T24, T26, plus the designs and the cap minimum).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "ssm_fixtures.hpp"
#include "tokdyn/analysis/ssm_bounds.hpp"
#include "tokdyn/analysis/ssm_lemma_iv1.hpp"
#include "tokdyn/analysis/ssm_pe_certificate.hpp"
#include "tokdyn/analysis/ssm_section5.hpp"
#include "tokdyn/analysis/ssm_trajectory.hpp"
#include "tokdyn/models/ssm_designs.hpp"
#include "tokdyn/sphere.hpp"

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
// Designs (§2.2)

TEST(SsmDesigns, G1StepSizesMatchSpec) {
  const SsmParams p = design_g1();
  const Vec d = step_sizes(p, RowVec::Zero(4));
  const double expect[4] = {1.3132616875, 0.3132616875, 0.2014132780, 0.1269280110};
  for (int mu = 0; mu < 4; ++mu) EXPECT_NEAR(d[mu], expect[mu], 1e-10);
}

// S_C = Q[I;0], S_B = Q[S_BC;0] with Q = exp(t K0): S_B and S_C move, S_C^T S_B does not.
TEST(SsmDesigns, FactorisedKernelStaysPrescribedWhileFactorsRotate) {
  Rng rng(3);
  KernelRealisation r{6, random_skew(rng, 6, 1.0)};
  const auto s = design_s_pe(design_g1(), r);
  for (double t : {0.0, 0.3, 1.7, 25.1}) {
    const auto p = s->at_time(t);
    EXPECT_EQ(p->m(), 6);
    EXPECT_LT((p->S_BC() - g_pe(t) * Mat::Identity(4, 4)).cwiseAbs().maxCoeff(), 1e-13) << t;
    EXPECT_LT((p->S_C.transpose() * p->S_C - Mat::Identity(4, 4)).cwiseAbs().maxCoeff(), 1e-13);
  }
  EXPECT_GT((s->at_time(0.3)->S_C - s->at_time(1.7)->S_C).norm(), 0.1);  // the factors really move
  const SkewRotation Q(r.K0);
  EXPECT_LT((Q.at(1e-6) - Mat::Identity(6, 6) - 1e-6 * r.K0).cwiseAbs().maxCoeff(), 1e-11);
  EXPECT_LT((Q.at(0.7) * Q.at(0.5) - Q.at(1.2)).cwiseAbs().maxCoeff(), 1e-13);  // a one-parameter group
}

TEST(SsmDesigns, RealisationNeedsEnoughHiddenDimensions) {
  SsmParams p = design_g1();
  EXPECT_THROW(set_interaction_kernel(p, Mat::Identity(4, 4), 3), std::invalid_argument);
  EXPECT_THROW(design_by_name("s-nope"), std::invalid_argument);
}

TEST(SsmDesigns, SwitchingDesignSwapsPrincipalChannelAtTs) {
  const auto s = design_s_sw(5.0);
  EXPECT_EQ(s->switching_times(0.0, 10.0), std::vector<double>{5.0});
  EXPECT_TRUE(s->switching_times(5.0, 10.0).empty());
  EXPECT_EQ(spectral_constants(*s->at_time(4.999), 5).mu_tilde, 0);
  EXPECT_EQ(spectral_constants(*s->at_time(5.0), 5).mu_tilde, 1);
  EXPECT_NEAR(spectral_constants(*s->at_time(5.0), 5).gamma, 1.0, 1e-12);
}

TEST(SsmDesigns, TiedDesignHasNoCertifiedGap) {
  const SpectralConstants k = spectral_constants(design_tie_channels(), 5, 0);
  EXPECT_FALSE(k.principal);
  EXPECT_NEAR(k.gamma, 0.0, 1e-15);
}

// ---------------------------------------------------------------------------------------------
// Lemma III.1, Assumption III.1: certified bounds (T7)

TEST(SsmTheory, G1CertifiedConstantsMatchSpec) {
  const SpectralConstants k = spectral_constants(design_g1(), 5);
  EXPECT_EQ(k.mu_tilde, 0);
  EXPECT_TRUE(k.principal);
  EXPECT_NEAR(k.gamma, 1.0, 1e-12);
  EXPECT_NEAR(k.Gamma, 1.2147904932, 1e-9);
  EXPECT_NEAR(k.Lambda, 5.2530467501, 1e-9);
  EXPECT_NEAR(k.lambda_max, 1.3132616875, 1e-9);
  EXPECT_NEAR(k.lambda_min, 1.3132616875, 1e-9);
  // Without W_Delta the bounds are attained: the sampled spectrum equals the certified one.
  const SampledSpectrum s = sampled_spectrum(design_g1(), 5, 0, 50, 1);
  EXPECT_NEAR(s.gamma, k.gamma, 1e-12);
  EXPECT_NEAR(s.Gamma, k.Gamma, 1e-12);
  EXPECT_NEAR(s.Lambda, k.Lambda, 1e-12);
  EXPECT_EQ(s.argmax_violations, 0);
  // The alpha^mu~ = 0.05 variant stays principal.
  EXPECT_TRUE(spectral_constants(design_g1_decay(0.05), 5, 0).principal);
}

TEST(SsmTheory, SampledEigenvaluesLieInsideCertifiedBounds) {
  Rng wr(21);
  for (const SsmParams& p : {design_g1(), design_g1_perturbed(wr, 0.1)}) {
    const int len = 5, n = p.n();
    const ChannelBounds cb = channel_bounds(p, len);
    Rng rng(22);
    long outside = 0;
    for (int a = 0; a < 100000; ++a) {
      const auto L = io_lambdas(p, rng.sphere_tokens(len, n));
      for (int i = 0; i < len; ++i)
        for (int j = 0; j <= i; ++j)
          for (int mu = 0; mu < n; ++mu) {
            const double l = L[i][j][mu];
            if (l < cb.lambda_lo(mu, i - j) - 1e-12 || l > cb.lambda_hi(mu, i - j) + 1e-12) ++outside;
          }
    }
    EXPECT_EQ(outside, 0);
    const SpectralConstants k = spectral_constants(p, len, 0);
    const SampledSpectrum s = sampled_spectrum(p, len, 0, 2000, 5);
    EXPECT_TRUE(k.principal);
    EXPECT_GE(s.gamma, k.gamma - 1e-12);  // certified values bound the attained ones
    EXPECT_LE(s.Gamma, k.Gamma + 1e-12);
    EXPECT_LE(s.Lambda, k.Lambda + 1e-12);
    EXPECT_LE(s.lambda_max, k.lambda_max + 1e-12);
    EXPECT_GE(s.lambda_min, k.lambda_min - 1e-12);
  }
}

TEST(SsmTheory, ParameterBoundsOfAssumptionIII1) {
  const auto samples = sample_times(*design_s_pe(), time_grid(0.0, 1.0, 401));
  const ParameterBounds b = parameter_bounds(samples);
  EXPECT_TRUE(b.hold());
  EXPECT_DOUBLE_EQ(b.alpha_max, 0.5);
  EXPECT_DOUBLE_EQ(b.W_max, 0.0);
  EXPECT_DOUBLE_EQ(b.b_max, 2.0);
  EXPECT_DOUBLE_EQ(b.b_min, 1.0);
  EXPECT_NEAR(b.S_BC_max, 4.4, 1e-6);
  SsmParams p = design_g1();
  p.b_delta[2] = 0.0;  // item 6 fails: |b_Delta| not bounded away from 0
  EXPECT_FALSE(parameter_bounds({p}).hold());
}

// γ(1 − b²) ≤ λ_ii^μ̃ − z^T D_ii z ≤ Γ(1 − b²) (T8, proof of Prop IV.1).
TEST(SsmTheory, GapSandwichHoldsAtRandomTokens) {
  const SsmParams p = design_g1();
  const SpectralConstants k = spectral_constants(p, 5);
  Rng rng(8);
  double worst_lo = 1.0, worst_hi = 1.0;
  for (int a = 0; a < 10000; ++a) {
    const Tokens z = rng.sphere_tokens(1, 4);
    const Vec l = io_lambdas(p, z)[0][0];
    const double gap = l[0] - z.row(0).cwiseProduct(z.row(0)).dot(l.transpose());
    const double v = 1.0 - z(0, 0) * z(0, 0);
    worst_lo = std::min(worst_lo, gap - k.gamma * v);
    worst_hi = std::min(worst_hi, k.Gamma * v - gap);
  }
  EXPECT_GE(worst_lo, -1e-14);
  EXPECT_GE(worst_hi, -1e-14);
}

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
// Lemma IV.1 (T9)

TEST(SsmTheory, SiluGaussianMomentsMatchClosedForm) {
  const auto [m1, m2] = silu_gaussian_moments(1.0);
  EXPECT_NEAR(m1, 0.2066209641, 1e-9);
  EXPECT_NEAR(m2, 0.3557755198, 1e-9);
  EXPECT_NEAR(m2 * m2 - m1 * m1 * m1 * m1, 0.1247535946, 1e-9);
  EXPECT_NEAR(64 * m1 * m1, 2.7323022607, 1e-9);
}

// E[z_i^T S_C^T S_B z_j] = 0 while E[silu(S_C z_i)^T silu(S_B z_j)] > 0 (Lemma IV.1). 2·10^4
// draws (spec: 2·10^5): SE ≈ 0.0566 (bilinear), 0.0200 (SiLU); the SiLU z-score stays > 100.
TEST(SsmTheory, SiluBiasesInteractionTermPositiveButBilinearIsCentred) {
  const int m = 64, n = 16;
  Rng rng(40);
  const Vec zi = rng.sphere_tokens(1, n).row(0).transpose();
  const Vec zj = rng.sphere_tokens(1, n).row(0).transpose();
  const long draws = 20000;
  for (const Vec* zb : {&zj, &zi}) {  // z_i != z_j, and z_i = z_j
    const SiluBiasEstimate e = silu_bias_monte_carlo(m, n, zi, *zb, draws, RandomEntries::Normal, 1.0, 41);
    EXPECT_NEAR(e.bilinear_se, std::sqrt(64.0 / draws), 0.1 * std::sqrt(64.0 / draws));
    EXPECT_LE(std::abs(e.bilinear_mean), 4.0 * e.bilinear_se);
    EXPECT_NEAR(e.silu_se, 2.8256379908 / std::sqrt(double(draws)), 0.1 * 2.8256379908 / std::sqrt(double(draws)));
    EXPECT_LE(std::abs(e.silu_mean - 2.7323022607), 4.0 * e.silu_se);
    EXPECT_GT(e.silu_mean / e.silu_se, 100.0);
  }
  const SiluBiasEstimate u = silu_bias_monte_carlo(m, n, zi, zj, draws, RandomEntries::Uniform, 1.0, 42);
  const SiluBiasEstimate e = silu_bias_monte_carlo(m, n, zi, zj, draws, RandomEntries::Normal, 1.0, 41);
  RecordProperty("normal", std::to_string(e.bilinear_mean) + " +- " + std::to_string(e.bilinear_se) + " ; " +
                               std::to_string(e.silu_mean) + " +- " + std::to_string(e.silu_se));
  RecordProperty("uniform", std::to_string(u.bilinear_mean) + " +- " + std::to_string(u.bilinear_se) + " ; " +
                                std::to_string(u.silu_mean) + " +- " + std::to_string(u.silu_se));
  EXPECT_LE(std::abs(u.bilinear_mean), 4.0 * u.bilinear_se);
  EXPECT_GT(u.silu_mean, 10.0 * u.silu_se);
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
// The cap minimum q_min (§2.1)

TEST(SsmTheory, CapMinimumAgreesWithDenseSampling) {
  Rng rng(60);
  int interior = 0, boundary = 0;
  for (int rep = 0; rep < 40; ++rep) {
    const int n = 2 + rep % 5;
    Mat A(n, n);
    rng.fill_normal(A, 1.0);
    const double c = rng.uniform(0.05, 0.95);
    const int mu = rep % n;
    const CapMinimum cm = cap_minimum(A, mu, c);
    (cm.interior ? interior : boundary)++;
    EXPECT_NEAR(cm.z.norm(), 1.0, 1e-12);
    EXPECT_GE(cm.z[mu], c - 1e-12);
    EXPECT_NEAR(cm.z.dot(0.5 * (A + A.transpose()) * cm.z), cm.q_min, 1e-12);
    const double sampled = cap_minimum_sampled(A, mu, c, 20000, 61 + rep);
    EXPECT_GE(sampled, cm.q_min - 1e-12) << "rep " << rep;       // no cap point below q_min
    EXPECT_LT(sampled - cm.q_min, 0.05 * (1.0 + std::abs(cm.q_min))) << "rep " << rep;  // and q_min is approached
  }
  EXPECT_GT(interior, 3);
  EXPECT_GT(boundary, 3);
}

TEST(SsmTheory, CapMinimumHandlesHardCase) {
  // S-CAP's symmetric part diag(1, -.5, -.5, -.5): boundary, p = 0, P = -0.5 I: hard case,
  // q_min = 1.5 c^2 - 0.5 (spec: 0.235 at c = 0.7).
  const CapMinimum cm = cap_minimum(s_cap_kernel(0.4), 0, 0.7);
  EXPECT_TRUE(cm.hard_case);
  EXPECT_NEAR(cm.q_min, 0.235, 1e-14);
  // A hard case with p != 0 orthogonal to the bottom eigenvector of P and |w(a_1)| < 1.
  Mat S = Mat::Zero(3, 3);
  S << 2.0, 0.3, 0.0, 0.3, 1.0, 0.0, 0.0, 0.0, -1.0;
  const double c = 0.5;
  const CapMinimum h = cap_minimum(S, 0, c);
  EXPECT_TRUE(h.hard_case);
  EXPECT_GE(cap_minimum_sampled(S, 0, c, 50000, 3), h.q_min - 1e-12);
  EXPECT_LT(cap_minimum_sampled(S, 0, c, 50000, 3) - h.q_min, 1e-2);
  // Interior: bottom eigenvector inside the cap.
  const CapMinimum in = cap_minimum(Vec((Vec(3) << -2.0, 1.0, 0.5).finished()).asDiagonal(), 0, 0.9);
  EXPECT_TRUE(in.interior);
  EXPECT_DOUBLE_EQ(in.q_min, -2.0);
}

// ---------------------------------------------------------------------------------------------
// Assumption IV.1 and Lemma IV.2 constants (T12, T13a)

TEST(SsmTheory, PeEvaluatorReproducesSPeConstants) {
  const SpectralConstants k = spectral_constants(design_g1(), 5);
  EXPECT_NEAR(a_c(1.0, 0.5, k), 0.75, 1e-15);
  EXPECT_NEAR(a_c(-1.0, 0.5, k), -12.935674487, 1e-8);
  Rng rng(70);
  for (const KernelRealisation& r : {KernelRealisation{}, KernelRealisation{4, random_skew(rng, 4, 0.7)}}) {
    PeOptions o;
    o.c = 0.5;
    o.T = 1.0;
    const PeResult pe = pe_evaluate(*design_s_pe(design_g1(), r), k, o);
    EXPECT_NEAR(pe.rho, 0.448851, 1e-5);
    EXPECT_NEAR(pe.eta0, -2.587135, 1e-5);
    EXPECT_NEAR(pe.c1, 0.962382, 1e-5);
    EXPECT_NEAR(pe.M1, 20.8215, 1e-4);
  }
}

TEST(SsmTheory, PeEvaluatorReportsFailureForSPef) {
  const SpectralConstants k = spectral_constants(design_g1(), 5);
  PeOptions o;
  o.c = 0.5;
  const PeResult pe = pe_evaluate(*design_s_pef(), k, o);
  EXPECT_NEAR(pe.rho, -1.906423, 1e-5);
  EXPECT_THROW(theorem_iv1_certificate(k, pe, 2.0, 3.0, 5), std::invalid_argument);
}

// Cor IV.1: positivity on a cap gives PE with alpha_c constant (S-CAP, c = 0.7).
TEST(SsmTheory, CapDesignSatisfiesPeOnTheCapOnly) {
  const SpectralConstants k = spectral_constants(design_g1(), 5);
  PeOptions o;
  o.c = 0.7;
  o.T = 2.0 * std::numbers::pi;
  o.starts = 2.0 * std::numbers::pi;
  o.steps_per_T = 2000;
  const PeResult pe = pe_evaluate(*design_s_cap(), k, o);
  EXPECT_NEAR(pe.rho, a_c(0.235, 0.7, k), 1e-12);
  o.c = 0.5;  // below 1/sqrt 3 the cap contains negative q: PE fails
  EXPECT_LT(pe_evaluate(*design_s_cap(), k, o).rho, 0.0);
}

// ---------------------------------------------------------------------------------------------
// Theorem IV.1 certificate and Lemmas A.1, A.2 (T16 constants, T23, T24)

TEST(SsmTheory, TheoremIV1CertificateForThreeTokens) {
  const SsmSchedulePtr s = design_s_pe();
  const auto samples = sample_times(*s, time_grid(0.0, 1.0, 401));
  const SpectralConstants k = spectral_constants(samples, 3);
  PeOptions o;
  const PeResult pe = pe_evaluate(*s, k, o);
  ASSERT_GT(pe.rho, 0.0);
  const double fro = sup_kernel_norm_fro(samples), two = sup_kernel_norm_2(samples);
  EXPECT_NEAR(two, 2.2, 1e-6);
  EXPECT_NEAR(fro, 4.4, 1e-6);
  const TheoremIV1Certificate cert = theorem_iv1_certificate(k, pe, fro, two, 3);
  EXPECT_NEAR(cert.eps, pe.rho / 2, 1e-15);
  EXPECT_NEAR(cert.rho_i[0], pe.rho, 1e-15);
  EXPECT_NEAR(cert.rho_i[1], pe.rho / 4, 1e-14);   // rho_i = rho / 4^{i-1} for eps = rho/2
  EXPECT_NEAR(cert.rho_i[2], pe.rho / 16, 1e-14);
  EXPECT_NEAR(cert.M, 8 * 2.2 * k.lambda_max, 1e-6);
  for (int i = 1; i < 3; ++i) {
    EXPECT_GE(cert.C_i[i], 1.0);
    EXPECT_GE(cert.M_i[i], std::max(1.0, std::exp(cert.rho_i[i]) * (cert.C_i[i] * cert.r + 1 - cert.theta)) - 1e-12);
  }
  EXPECT_TRUE(cert.d.valid());
  EXPECT_LT(cert.d.log_d[0], std::log(1e-16));  // d_1 is far below 1e-16
  EXPECT_LE(cert.d.log_d[0], std::log(1.0 - pe.c1));
}

TEST(SsmTheory, LemmaA1SequenceIsValidAndShrinksDoublyExponentially) {
  std::vector<double> log10_d1;
  for (int len = 2; len <= 8; ++len) {
    const DSequence d = lemma_a1_sequence(0.01, 2.0, std::vector<double>(len, 3.0), 0.5, 1.5, 3.0, len);
    ASSERT_TRUE(d.valid()) << len;
    EXPECT_NEAR(d.mu_L, 0.5, 1e-15);
    for (int i = 1; i < len; ++i) {
      // d_i = 2 d_{i-1} + (2H/mu) sum_{j<i} sqrt(2 M_j d_j) > d_i^min
      double s = 0.0;
      for (int j = 0; j < i; ++j) s += std::sqrt(2 * 3.0 * std::exp(d.log_d[j]));
      if (d.log_d[i - 1] > -700) {
        EXPECT_NEAR(std::exp(d.log_d[i]), 2 * std::exp(d.log_d[i - 1]) + 8.0 * s, 1e-12 * std::exp(d.log_d[i]));
      }
    }
    log10_d1.push_back(d.log_d[0] / std::log(10.0));
    RecordProperty("log10_d1_len" + std::to_string(len), std::to_string(log10_d1.back()));
  }
  for (std::size_t a = 2; a < log10_d1.size(); ++a) {
    const double ratio = log10_d1[a] / log10_d1[a - 1];  // ~2 per added token: -2^{l-1} shrinkage
    EXPECT_GT(ratio, 1.6) << a;
    EXPECT_LT(ratio, 2.4) << a;
  }
  EXPECT_LT(log10_d1.back(), -300.0);  // representable only in the log domain
}

TEST(SsmTheory, LemmaA2BoundsEqualitySequences) {
  EXPECT_NEAR(discrete_iss_rate(0.5, 0.4, 1.0), 0.2, 1e-15);
  EXPECT_NEAR(discrete_iss_constant(1.0, 0.5, 0.2), 1.5687221743, 1e-10);
  for (double theta : {0.1, 0.5, 0.9, 0.99})
    for (double nu : {0.01, 0.1, 1.0})
      for (double T : {0.5, 1.0, 5.0}) {
        const double rho = discrete_iss_rate(theta, nu, T), C = discrete_iss_constant(T, theta, rho);
        ASSERT_GE(C, 1.0);
        for (double y0 : {0.0, 0.5, 0.999}) {
          // u_k = y_k e^{rho k T} of y_k = theta y_{k-1} + (1 - theta) d e^{-nu (k-1) T}, d = 1.
          double u = y0, worst = 0.0;
          for (int kk = 1; kk <= 10000; ++kk) {
            u = theta * std::exp(rho * T) * u + (1 - theta) * std::exp(-nu * (kk - 1) * T + rho * kk * T);
            worst = std::max(worst, u - C);
          }
          EXPECT_LE(worst, 1e-12 * C) << theta << " " << nu << " " << T << " " << y0;
        }
      }
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

// ---------------------------------------------------------------------------------------------
// Projected variables, diagnostics

TEST(SsmTheory, StableLyapunovKeepsTinyValues) {
  const RowVec w = (RowVec(4) << 0.0, 0.3, -0.4, 1.2).finished();
  for (double V : {0.3, 1e-8, 1e-20, 1e-40, 1e-200}) {
    const RowVec z = token_with_V(V, w, 0, -1);
    EXPECT_NEAR(z.norm(), 1.0, 1e-15);
    EXPECT_NEAR(lyapunov_V(z, 0, -1), V, 1e-14 * V);
    EXPECT_NEAR(error_norm(z, 0, -1), (z - RowVec::Unit(4, 0) * -1.0).norm(), 1e-12 * std::sqrt(V) + 1e-15);
  }
  EXPECT_NEAR(lyapunov_V(token_with_V(0.25, w, 0, 1), 0, -1), 1.75, 1e-15);  // the far pole: 1 - b
}

TEST(SsmTheory, AssumptionDiagnosticsFindPrincipalChannelPerLayer) {
  const AssumptionDiagnostics g = assumption_diagnostics(*design_s_sw(5.0), 10, 5, 20, 1);
  ASSERT_EQ(g.layers.size(), 10u);
  EXPECT_EQ(g.certified_layers, 10);
  EXPECT_EQ(g.principal_switches, 1);  // S-SW: mu~ changes once (Remark III.1)
  EXPECT_FALSE(g.constant_principal);
  EXPECT_EQ(g.layers[4].mu_tilde, 0);  // layer 5 acts at t = 4
  EXPECT_EQ(g.layers[5].mu_tilde, 1);
  EXPECT_EQ(g.layers[5].mu_attained, 1);
  EXPECT_NEAR(g.layers[0].gamma, 1.0, 1e-12);
  EXPECT_NEAR(g.layers[0].gamma_sampled, 1.0, 1e-12);
  // Random weights (S-RND with the paper's random channels): per-layer diagnosis, any outcome.
  SsmParams base = tokdyn::testing::random_ssm(5, 8, 16);
  const AssumptionDiagnostics r = assumption_diagnostics(*design_s_rnd(base, 16, 0.35, 7), 6, 12, 5, 2);
  ASSERT_EQ(r.layers.size(), 6u);
  for (const auto& l : r.layers) {
    EXPECT_EQ(l.mu_tilde, r.layers[0].mu_tilde);  // channels are fixed, only S_B, S_C are redrawn
    if (l.mu_attained == l.mu_tilde) {
      EXPECT_GE(l.gamma_sampled, l.gamma - 1e-12);  // attained >= certified
    }
  }
  EXPECT_NE(r.layers[0].S_principal, r.layers[1].S_principal);
}

TEST(SsmTheory, SampledPeOnARecord) {
  std::vector<double> q;
  for (int s = 0; s < 30; ++s) q.push_back(s % 3 == 2 ? 3.0 : -1.0);  // (-1,-1,3) repeated
  const SampledPe a = sampled_pe(q, 3);
  EXPECT_TRUE(a.holds);
  EXPECT_NEAR(a.worst_average, 1.0 / 3.0, 1e-15);
  ASSERT_TRUE(a.T_star.has_value());
  EXPECT_EQ(*a.T_star, 3);
  EXPECT_FALSE(sampled_pe(q, 2).holds);
  EXPECT_FALSE(sampled_pe(q, 3, 0.5).holds);  // W(3) = 1/3 < rho = 0.5
}

TEST(SsmTheory, TrajectoryClassificationUsesFinalSignsAndTail) {
  Tokens Z(2, 3);
  Z << -1.0, 1e-9, 0.0, 0.6, 0.8, 0.0;
  const TrajectoryClass c = classify_trajectory(Z, 0, 1e-10, {0.99, 0.6});
  EXPECT_EQ(c.signs, (std::vector<int>{-1, 1}));
  EXPECT_FALSE(c.converged);
  EXPECT_NEAR(c.max_V, 0.4, 1e-15);
  EXPECT_TRUE(c.trapped(0.7));
  EXPECT_FALSE(c.trapped(0.5));
}
