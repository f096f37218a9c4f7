// The theory of "The Attention Within" checked numerically, part 1 (with
// test_ssm_theory_constants.cpp and test_ssm_theory_field.cpp; trajectories of the flow in
// test_ssm_theory_flows.cpp): Lemma IV.1 (T9), the constants of Assumption IV.1 and Lemma IV.2
// (T12, T13a), the Theorem IV.1 certificate and Lemmas A.1, A.2 (T16 constants, T23, T24).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokdyn/analysis/ssm_bounds.hpp"
#include "tokdyn/analysis/ssm_lemma_iv1.hpp"
#include "tokdyn/analysis/ssm_pe_certificate.hpp"
#include "tokdyn/models/ssm/designs.hpp"
#include "tokdyn/core/rng.hpp"

using namespace tokdyn;

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

