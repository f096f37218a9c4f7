// The theory of "The Attention Within" checked numerically, part 1 (with
// test_ssm_theory_certificates.cpp and test_ssm_theory_field.cpp; trajectories of the flow in
// test_ssm_theory_flows.cpp): the designs (spec ssm-consensus.md §2.2), the certified bounds of
// Lemma III.1 and Assumption III.1 (T7), the cap minimum q_min (§2.1), and the projected variables
// and per-layer diagnostics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "ssm_fixtures.hpp"
#include "tokdyn/analysis/ssm_bounds.hpp"
#include "tokdyn/analysis/ssm_pe_certificate.hpp"
#include "tokdyn/analysis/ssm_trajectory.hpp"
#include "tokdyn/models/ssm/designs.hpp"
#include "tokdyn/core/rng.hpp"

using namespace tokdyn;

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
