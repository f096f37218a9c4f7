// The theory of "The Attention Within" checked numerically, part 2: trajectories of the flow (5)
// under the designs of spec ssm-consensus.md §2.2 (acceptance tests T12-T17, T19-T22, T25).
// Sample counts, horizons and RK4 steps are reduced from the spec where noted, keeping the
// tolerances; every run integrates with the retracted RK4 driver.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <numbers>

#include "tokdyn/analysis/ssm_bounds.hpp"
#include "tokdyn/analysis/ssm_pe_certificate.hpp"
#include "tokdyn/analysis/ssm_section5.hpp"
#include "tokdyn/analysis/ssm_trajectory.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/models/ssm/designs.hpp"
#include "tokdyn/core/constants.hpp"

using namespace tokdyn;

namespace {

using tokdyn::kPi;
int random_sign(Rng& rng) { return rng.uniform() < 0.5 ? -1 : 1; }

std::string str(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

/// runs x len tokens, token i of run r with V_i = 1 - b_i drawn uniformly in [Vlo, Vhi], random
/// sign and tangential direction; the signs are returned per run.
Batch near_consensus(Rng& rng, int runs, int len, int n, int mu, double Vlo, double Vhi,
                     std::vector<std::vector<int>>& signs) {
  Batch B{Tokens(runs * len, n), runs, len};
  signs.assign(runs, std::vector<int>(len));
  RowVec w(n);
  for (int r = 0; r < runs; ++r)
    for (int i = 0; i < len; ++i) {
      for (int k = 0; k < n; ++k) w[k] = rng.normal();
      signs[r][i] = random_sign(rng);
      B.Z.row(r * len + i) = token_with_V(rng.uniform(Vlo, Vhi), w, mu, signs[r][i]);
    }
  return B;
}

double run_max_V(const Batch& B, int r, int mu, const std::vector<int>& signs) {
  double m = 0.0;
  for (int i = 0; i < B.len; ++i) m = std::max(m, lyapunov_V(B.Z.row(r * B.len + i), mu, signs[i]));
  return m;
}

Rk4Options rk4(double h) {
  Rk4Options o;
  o.h = h;
  return o;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Lemma IV.2 along trajectories (T12; RK4 h = 4e-3 instead of 1e-3)

TEST(SsmTheoryFlows, FirstTokenStaysInCapAndDecaysAtCertifiedRate) {
  const SsmSchedulePtr s = design_s_pe();
  const SpectralConstants k = spectral_constants(design_g1(), 5);
  PeOptions o;
  o.c = 0.5;
  o.T = 1.0;
  const PeResult pe = pe_evaluate(*s, k, o);
  ASSERT_NEAR(pe.rho, 0.448851, 1e-5);
  Rng rng(101);
  std::vector<std::vector<int>> sig;
  const int runs = 200;
  Batch B = near_consensus(rng, runs, 1, 4, 0, 1e-6, 1.0 - pe.c1, sig);
  std::vector<double> V0(runs), Vprev(runs);
  for (int r = 0; r < runs; ++r) V0[r] = Vprev[r] = lyapunov_V(B.Z.row(r), 0, sig[r][0]);
  double worst_cap = 1.0, worst_bound = -1.0, worst_10 = -1.0, tprev = 0.0;
  long obs = 0;
  CallbackObserver check([&](double t, const Batch& Z) {
    for (int r = 0; r < runs; ++r) {
      const double V = lyapunov_V(Z.Z.row(r), 0, sig[r][0]);
      worst_cap = std::min(worst_cap, sig[r][0] * Z.Z(r, 0) - o.c);                     // z_1 never leaves Omega_c
      worst_bound = std::max(worst_bound, V / (pe.M1 * std::exp(-pe.rho * t) * V0[r]) - 1.0);  // V1 <= M1 e^{-rho t} V1(0)
      if (t > 0) worst_10 = std::max(worst_10, V / (std::exp(-pe.eta0 * (t - tprev)) * Vprev[r]) - 1.0);  // (10)
      Vprev[r] = V;
    }
    tprev = t;
    ++obs;
  });
  integrate_rk4(SsmFlow(s, SsmOptions{}), B, 0.0, 20.0, rk4(4e-3), {&check}, 0.02);
  RecordProperty("worst_V_over_M1_bound", str(worst_bound + 1.0));
  EXPECT_EQ(obs, 1001);
  EXPECT_GT(worst_cap, 0.0);
  EXPECT_LE(worst_bound, 1e-9);
  EXPECT_LE(worst_10, 1e-9);
  for (int r = 0; r < runs; ++r) EXPECT_LT(lyapunov_V(B.Z.row(r), 0, sig[r][0]), 1e-12);
}

// ---------------------------------------------------------------------------------------------
// PE is sufficient, not necessary; the exact time change (T13; h = 5e-3 for part a)

TEST(SsmTheoryFlows, FailingPeStillConvergesWhenMeanKernelIsPositive) {
  Rng rng(111);
  const int runs = 20, len = 5;
  Batch B{rng.sphere_tokens(runs * len, 4), runs, len};
  integrate_rk4(SsmFlow(design_s_pef(), SsmOptions{}), B, 0.0, 30.0, rk4(5e-3));
  for (int r = 0; r < runs; ++r) {
    const TrajectoryClass c = classify_trajectory(B.run(r), 0, 1e-8);
    EXPECT_TRUE(c.converged) << "run " << r << " max V " << c.max_V;
  }
}

TEST(SsmTheoryFlows, ScalarModulationIsAnExactTimeChange) {
  Rng rng(112);
  const int runs = 3, len = 5;
  const Batch Z0{rng.sphere_tokens(runs * len, 4), runs, len};
  Batch pef = Z0;
  std::vector<Tokens> states;
  std::vector<double> times;
  CallbackObserver rec([&](double t, const Batch& Z) {
    times.push_back(t);
    states.push_back(Z.Z);
  });
  integrate_rk4(SsmFlow(design_s_pef(), SsmOptions{}), pef, 0.0, 2.0, rk4(1e-3), {&rec}, 0.1);
  ASSERT_EQ(states.size(), 21u);
  const SsmFlow autonomous(design_s_iso(design_g1(), [](double) { return 1.0; }), SsmOptions{});
  double worst = 0.0, moved = 0.0;
  for (std::size_t a = 1; a < states.size(); ++a) {
    Batch Za = Z0;  // Z_pef(t) = Z_auto(G(t)), G(t) = t + (1/pi)(1 - cos 2 pi t) (§2.6)
    integrate_rk4(autonomous, Za, 0.0, G_pef(times[a]), rk4(1e-3));
    worst = std::max(worst, (Za.Z - states[a]).cwiseAbs().maxCoeff());
    moved = std::max(moved, (states[a] - Z0.Z).cwiseAbs().maxCoeff());
  }
  EXPECT_LT(worst, 1e-9);
  EXPECT_GT(moved, 0.1);
}

// ---------------------------------------------------------------------------------------------
// Theorem IV.1: every sign pattern is locally exponentially stable (T14; h = 1e-2)

TEST(SsmTheoryFlows, EverySignPatternIsLocallyStableUnderPe) {
  Rng rng(121);
  const KernelRealisation real{4, random_skew(rng, 4, 1.0)};
  const SsmSchedulePtr s = design_s_pe(design_g1(), real);  // S_C = Q(t), S_B = g(t) Q(t)
  EXPECT_GT((s->at_time(0.0)->S_B - s->at_time(0.25)->S_B / g_pe(0.25)).norm(), 0.1);
  std::vector<std::vector<int>> sig;
  const int runs = 100;
  Batch B = near_consensus(rng, runs, 5, 4, 0, 0.0, 0.1, sig);
  integrate_rk4(SsmFlow(s, SsmOptions{}), B, 0.0, 30.0, rk4(1e-2));
  for (int r = 0; r < runs; ++r) {
    const TrajectoryClass c = classify_trajectory(B.run(r), 0, 1e-10);
    EXPECT_TRUE(c.converged) << "run " << r;
    EXPECT_EQ(c.signs, sig[r]) << "run " << r;  // converged to its own Z*_Sigma
    EXPECT_LT(run_max_V(B, r, 0, sig[r]), 1e-10);
  }
}

// ---------------------------------------------------------------------------------------------
// §2.6 token-1 rates (T15b)

TEST(SsmTheoryFlows, ComponentDecayRatesMatchLinearisation) {
  const double expect[3] = {-1.0, -1.1118484, -1.1863337};
  const Mat D = consensus_linearisation_diagonal(design_g1(), 3, 0, {1, 1, 1});
  for (int mu = 1; mu < 4; ++mu) EXPECT_NEAR(D(0, mu), expect[mu - 1], 1e-7);
  for (const SsmSchedulePtr& s : {design_s_iso(design_g1(), [](double) { return 1.0; }), design_s_pe()}) {
    Rng rng(131);
    std::vector<std::vector<int>> sig;
    Batch B = near_consensus(rng, 1, 3, 4, 0, 0.02, 0.1, sig);
    std::vector<Tokens> at;
    CallbackObserver rec([&](double t, const Batch& Z) {
      if (std::abs(t - 8.0) < 1e-9 || std::abs(t - 12.0) < 1e-9) at.push_back(Z.Z);
    });
    integrate_rk4(SsmFlow(s, SsmOptions{}), B, 0.0, 12.0, rk4(5e-3), {&rec}, 4.0);
    ASSERT_EQ(at.size(), 2u);
    for (int i = 0; i < 3; ++i)
      for (int mu = 1; mu < 4; ++mu) {
        const double slope = (std::log(std::abs(at[1](i, mu))) - std::log(std::abs(at[0](i, mu)))) / 4.0;
        const double tol = (i == 0 ? 1e-6 : 1e-3) * std::abs(D(0, mu));
        EXPECT_NEAR(slope, D(0, mu), tol) << "token " << i + 1 << " mu " << mu + 1;
        if (i == 0) RecordProperty("slope_mu" + std::to_string(mu + 1), str(slope));
      }
  }
}

// ---------------------------------------------------------------------------------------------
// Claim IV.1 and the certificate of Theorem IV.1 along trajectories (T16, l = 3)

TEST(SsmTheoryFlows, CertifiedCapsContractAsClaimIV1States) {
  const int len = 3;
  const SsmSchedulePtr s = design_s_pe();
  const auto samples = sample_times(*s, time_grid(0.0, 1.0, 401));
  const SpectralConstants k = spectral_constants(samples, len);
  const PeResult pe = pe_evaluate(*s, k, PeOptions{});
  const TheoremIV1Certificate cert =
      theorem_iv1_certificate(k, pe, sup_kernel_norm_fro(samples), sup_kernel_norm_2(samples), len);
  ASSERT_TRUE(cert.d.valid());
  std::vector<double> d(len);
  for (int i = 0; i < len; ++i) d[i] = std::exp(cert.d.log_d[i]);
  ASSERT_GT(d[0], 0.0);  // representable for l = 3
  Rng rng(141);
  const int runs = 8;
  Batch B{Tokens(runs * len, 4), runs, len};
  std::vector<std::vector<int>> sig(runs, std::vector<int>(len));
  RowVec w(4);
  for (int r = 0; r < runs; ++r)
    for (int i = 0; i < len; ++i) {
      for (int a = 0; a < 4; ++a) w[a] = rng.normal();
      sig[r][i] = random_sign(rng);
      B.Z.row(r * len + i) = token_with_V(d[i] / 2, w, 0, sig[r][i]);  // V_i(0) = d_i / 2
    }
  const double T = cert.T;
  std::vector<std::vector<double>> Vstart(runs, std::vector<double>(len));
  for (int r = 0; r < runs; ++r)
    for (int i = 0; i < len; ++i) Vstart[r][i] = d[i] / 2;
  double worst1 = -1.0, worst2 = -1.0, worst3 = -1.0, worst_env = -1.0;
  long windows = 0;
  CallbackObserver check([&](double t, const Batch& Z) {
    const double kk = std::round(t / T);
    const bool boundary = std::abs(t - kk * T) < 1e-9 && kk >= 1;
    for (int r = 0; r < runs; ++r)
      for (int i = 0; i < len; ++i) {
        const double V = lyapunov_V(Z.Z.row(r * len + i), 0, sig[r][i]);
        worst_env = std::max(worst_env, V / (cert.M_i[i] * d[i] * std::exp(-cert.rho_i[i] * t)) - 1.0);
        if (i == 0) continue;
        worst1 = std::max(worst1, V / (cert.R * d[i]) - 1.0);  // item 1: V_i < R d_i
        if (boundary) {
          double K = 0.0;  // K = sum_{j<i} M sqrt(2 M_j d_j) exp(-rho_j (k-1) T / 2)
          for (int j = 0; j < i; ++j)
            K += cert.M * std::sqrt(2 * cert.M_i[j] * d[j]) * std::exp(-cert.rho_i[j] * (kk - 1) * T / 2);
          const double bound2 = cert.theta * Vstart[r][i] + K * T * std::exp(-cert.eta_eps * T);
          worst2 = std::max(worst2, V / bound2 - 1.0);  // item 2
          worst3 = std::max(worst3, V / d[i] - 1.0);    // item 3: V_i(kT) < d_i
          Vstart[r][i] = V;
        }
      }
    windows += boundary;
  });
  integrate_rk4(SsmFlow(s, SsmOptions{}), B, 0.0, 12.0, rk4(1e-2), {&check}, 0.05);
  EXPECT_EQ(windows, 12);
  RecordProperty("log10_d", str(cert.d.log_d[0] / std::log(10.0)) + " " +
                                str(cert.d.log_d[1] / std::log(10.0)) + " " +
                                str(cert.d.log_d[2] / std::log(10.0)));
  RecordProperty("worst_ratios", str(worst1) + " " + str(worst2) + " " +
                                     str(worst3) + " " + str(worst_env));
  EXPECT_LT(worst1, 1e-9);
  EXPECT_LT(worst2, 1e-9);
  EXPECT_LT(worst3, 1e-9);
  EXPECT_LT(worst_env, 1e-9);
}

// ---------------------------------------------------------------------------------------------
// Corollary IV.1: positivity on a cap only (T17; h = 0.02 / 0.04, t_end = 40)

TEST(SsmTheoryFlows, CapPositivityGivesLocalConvergenceForAllSignPatterns) {
  Rng rng(151);
  std::vector<std::vector<int>> sig;
  const int runs = 100;
  Batch B = near_consensus(rng, runs, 5, 4, 0, 0.0, 0.05, sig);  // b_i(0) >= 0.95
  integrate_rk4(SsmFlow(design_s_cap(), SsmOptions{}), B, 0.0, 40.0, rk4(2e-2));
  for (int r = 0; r < runs; ++r) EXPECT_LT(run_max_V(B, r, 0, sig[r]), 1e-10) << "run " << r;
}

TEST(SsmTheoryFlows, CapDesignFirstTokenBasinIsExactlyTheCap) {
  Rng rng(152);
  const int N = 2000;
  Batch B{rng.sphere_tokens(N, 4), N, 1};
  const Tokens Z0 = B.Z;
  integrate_rk4(SsmFlow(design_s_cap(), SsmOptions{}), B, 0.0, 40.0, rk4(4e-2));
  const double edge = 1.0 / std::sqrt(3.0);
  long inside = 0, converged = 0, misclassified = 0;
  for (int r = 0; r < N; ++r) {
    const double a0 = std::abs(Z0(r, 0));
    const int s0 = Z0(r, 0) > 0 ? 1 : -1;
    const bool conv = lyapunov_V(B.Z.row(r), 0, s0) < 1e-8;  // -> sign(z^1(0)) e^1
    const bool equator = std::abs(B.Z(r, 0)) < 1e-4;
    inside += a0 > edge;
    converged += conv;
    if (std::abs(a0 - edge) >= 1e-3 && (conv != (a0 > edge) || conv == equator)) ++misclassified;
  }
  EXPECT_EQ(misclassified, 0);
  RecordProperty("basin_fraction", str(double(converged) / N));
  const double p = 0.3080680, se = std::sqrt(p * (1 - p) / N);
  EXPECT_NEAR(double(converged) / N, p, 4 * se);
  EXPECT_NEAR(converged, inside, 2);
}

// ---------------------------------------------------------------------------------------------
// Lemma V.1: first token under positive definiteness (T19; 1000 draws, h = 0.02)

TEST(SsmTheoryFlows, FirstTokenConvergesMonotonicallyToItsHemispherePole) {
  Rng rng(161);
  const int N = 1001;
  Batch B{rng.sphere_tokens(N, 4), N, 1};
  B.Z(N - 1, 0) = 0.0;  // one start on the equator
  B.Z.row(N - 1).normalize();
  const Tokens Z0 = B.Z;
  const SsmFlow f(design_s_iso(), SsmOptions{});
  const double alpha_pd = 0.5, gamma = 1.0;
  std::vector<double> bprev(N, -2.0);
  double worst_rate = 1.0, worst_mono = 1.0, equator = 0.0;
  Tokens F;
  CallbackObserver check([&](double t, const Batch& Z) {
    f.eval(t, Z, F);
    for (int r = 0; r < N; ++r) {
      const int s = Z0(r, 0) >= 0 ? 1 : -1;
      const double b = s * Z.Z(r, 0);
      if (r == N - 1) {
        equator = std::max(equator, std::abs(Z.Z(r, 0)));
        continue;
      }
      const double one_minus_b2 = lyapunov_V(Z.Z.row(r), 0, s) * (1.0 + b);
      worst_rate = std::min(worst_rate, s * F(r, 0) - alpha_pd * gamma * one_minus_b2 * b);  // b' >= a g (1-b^2) b
      worst_mono = std::min(worst_mono, b - bprev[r]);
      bprev[r] = b;
    }
  });
  integrate_rk4(f, B, 0.0, 40.0, rk4(2e-2), {&check}, 0.1);
  EXPECT_GE(worst_rate, -1e-14);
  EXPECT_GE(worst_mono, -1e-14);
  EXPECT_LE(equator, 1e-14);  // the equator is invariant
  for (int r = 0; r + 1 < N; ++r) EXPECT_LT(lyapunov_V(B.Z.row(r), 0, Z0(r, 0) >= 0 ? 1 : -1), 1e-10) << r;
}

// ---------------------------------------------------------------------------------------------
// Remarks III.1 / IV.2 (T20)

TEST(SsmTheoryFlows, TiedPrincipalEigenvalueGivesGreatCircle) {
  Rng rng(171);
  const int runs = 20, len = 5;
  Batch B{rng.sphere_tokens(runs * len, 4), runs, len};
  integrate_rk4(SsmFlow(design_s_tie(), SsmOptions{}), B, 0.0, 40.0, rk4(2e-2));
  double worst = 0.0, spread = 0.0;
  for (Eigen::Index a = 0; a < B.Z.rows(); ++a) {
    worst = std::max(worst, B.Z(a, 2) * B.Z(a, 2) + B.Z(a, 3) * B.Z(a, 3));  // 1 - (z^1)^2 - (z^2)^2
    spread = std::max(spread, std::min(std::abs(B.Z(a, 0)), std::abs(B.Z(a, 1))));
  }
  EXPECT_LT(worst, 1e-8);
  EXPECT_GT(spread, 0.1);  // not at a pole: the limit set is the great circle
}

TEST(SsmTheoryFlows, SwitchingPrincipalChannelRealignsTokens) {
  Rng rng(172);
  const int runs = 20, len = 5;
  Batch B{rng.sphere_tokens(runs * len, 4), runs, len};
  const SsmFlow f(design_s_sw(5.0), SsmOptions{});
  double near_e1 = 1.0;
  CallbackObserver before([&](double t, const Batch& Z) {
    if (std::abs(t - 5.0) < 1e-9)
      for (int r = 0; r < runs; ++r) near_e1 = std::min(near_e1, std::abs(Z.Z(r * len, 0)));
  });
  integrate_rk4(f, B, 0.0, 40.0, rk4(2e-2), {&before}, 5.0);
  EXPECT_GT(near_e1, 0.99);  // token 1 first approaches ±e^1
  for (int r = 0; r < runs; ++r) {
    const TrajectoryClass c = classify_trajectory(B.run(r), 1, 1e-8);  // then realigns to ±e^2
    EXPECT_TRUE(c.converged) << "run " << r << " max V " << c.max_V;
  }
}

// ---------------------------------------------------------------------------------------------
// Theorem V.1, isotropic case: co-null domain of attraction (T21; 100 runs l = 5, 40 runs l = 10)

TEST(SsmTheoryFlows, IsotropicKernelConvergesFromRandomStarts) {
  Rng rng(181);
  const KernelRealisation real{4, random_skew(rng, 4, 1.0)};
  const SsmSchedulePtr s = design_s_iso(design_g1(), g_iso, real);
  const auto samples = sample_times(*s, time_grid(0.0, 2 * kPi, 401));
  EXPECT_GT(kernel_lambda_min(samples[100].S_BC()), 0.49);
  for (int len : {5, 10}) {
    const SpectralConstants k = spectral_constants(samples, len);
    const AnisotropyConstants a = anisotropy(samples, k);
    EXPECT_LT(a.c_star, 1e-12);
    EXPECT_LT(a.c_eff, 1e-12);
    EXPECT_LT(a.c_eff_proof, 1e-12);
    const int runs = len == 5 ? 100 : 40;
    Batch B{rng.sphere_tokens(runs * len, 4), runs, len};
    TailObserver tail(0, 32.0);
    integrate_rk4(SsmFlow(s, SsmOptions{}), B, 0.0, 40.0, rk4(2e-2), {&tail}, 0.5);
    long failures = 0;
    for (int r = 0; r < runs; ++r) {
      const TrajectoryClass c = classify_trajectory(B.run(r), 0, 1e-10, tail.limsup(r));
      failures += !c.converged || c.trapped(a.c_eff);
    }
    EXPECT_EQ(failures, 0) << "l = " << len;
  }
}

// ---------------------------------------------------------------------------------------------
// Anisotropic trapping, S-ANI2 (T22; 1000 draws)

namespace {

/// theta' of token 2 at angle theta with token 1 pinned at +e^1 (from the field (5)).
double ani2_theta_dot(const SsmFlow& f, double theta) {
  Batch Z{Tokens(2, 2), 1, 2};
  Z.Z << 1.0, 0.0, std::cos(theta), std::sin(theta);
  Tokens F;
  f.eval(0.0, Z, F);
  return -std::sin(theta) * F(1, 0) + std::cos(theta) * F(1, 1);
}

double bisect(const std::function<double(double)>& g, double a, double b) {
  double fa = g(a);
  for (int it = 0; it < 200 && b - a > 1e-15; ++it) {
    const double m = 0.5 * (a + b), fm = g(m);
    if ((fm > 0) == (fa > 0)) {
      a = m;
      fa = fm;
    } else {
      b = m;
    }
  }
  return 0.5 * (a + b);
}

}  // namespace

TEST(SsmTheoryFlows, AnisotropicKernelTrapsAPositiveMeasureSet) {
  const SsmSchedulePtr s = design_s_ani2();
  const SsmFlow f(s, SsmOptions{});
  const SpectralConstants k = spectral_constants(*s->at_time(0.0), 2);
  const AnisotropyConstants a = anisotropy({*s->at_time(0.0)}, k);
  EXPECT_NEAR(a.c_star, 28.6006993, 1e-7);
  EXPECT_NEAR(a.c_eff, 0.9981088, 1e-7);
  // Equilibria of token 2 in ]0, pi[: sign changes of theta' (zeros of B(theta)).
  std::vector<double> zeros;
  const auto g = [&](double th) { return ani2_theta_dot(f, th); };
  const int grid = 3000;
  for (int q = 1; q < grid; ++q) {
    const double t0 = kPi * q / grid, t1 = kPi * (q + 1) / grid;
    if (q + 1 < grid && (g(t0) > 0) != (g(t1) > 0)) zeros.push_back(bisect(g, t0, t1));
  }
  ASSERT_EQ(zeros.size(), 3u);
  EXPECT_NEAR(zeros[0], 0.2773502, 1e-6);
  EXPECT_NEAR(zeros[1], 0.5412853, 1e-6);
  EXPECT_NEAR(zeros[2], 0.7521609, 1e-6);
  EXPECT_NEAR(std::cos(zeros[1]), 0.8570472, 1e-6);
  EXPECT_LE(std::cos(zeros[1]), a.c_eff);  // trapped runs sit inside the trapping set (Thm V.1)
  // Monte Carlo: token 1 at +e^1, token 2 at theta0 ~ U[-pi, pi).
  Rng rng(191);
  const int N = 1000;
  Batch B{Tokens(2 * N, 2), N, 2};
  std::vector<double> th0(N);
  for (int r = 0; r < N; ++r) {
    th0[r] = rng.uniform(-kPi, kPi);
    B.Z.row(2 * r) << 1.0, 0.0;
    B.Z.row(2 * r + 1) << std::cos(th0[r]), std::sin(th0[r]);
  }
  integrate_rk4(f, B, 0.0, 40.0, rk4(2e-2));
  long trapped = 0, wrong_basin = 0, off_equilibrium = 0;
  for (int r = 0; r < N; ++r) {
    const double th = std::atan2(B.Z(2 * r + 1, 1), B.Z(2 * r + 1, 0));
    const bool is_trapped = std::abs(std::sin(th)) > 0.1;
    const double m = std::fmod(th0[r] + 2 * kPi, kPi);  // the dynamics is pi-periodic
    const bool in_basin = m > zeros[0] && m < zeros[2];
    if (std::min(std::abs(m - zeros[0]), std::abs(m - zeros[2])) > 1e-3) wrong_basin += is_trapped != in_basin;
    if (is_trapped) {
      ++trapped;
      const double end = std::fmod(th + 2 * kPi, kPi);
      off_equilibrium += std::abs(end - zeros[1]) > 1e-6;
      EXPECT_NEAR(std::abs(B.Z(2 * r + 1, 0)), 0.8570472, 1e-6);
    }
  }
  EXPECT_EQ(wrong_basin, 0);
  EXPECT_EQ(off_equilibrium, 0);
  RecordProperty("trapped_fraction", str(double(trapped) / N));
  const double p = 0.1511369, se = std::sqrt(p * (1 - p) / N);
  EXPECT_NEAR(double(trapped) / N, p, 4 * se);
  EXPECT_NEAR((zeros[2] - zeros[0]) / kPi, p, 1e-6);  // basin measure
}

// ---------------------------------------------------------------------------------------------
// Lemma A.3 (T25)

TEST(SsmTheoryFlows, ScalarIssComparisonConvergesToOne) {
  const auto f = [](double t, double b) { return 0.5 * (1 - b) - 0.4 / (1 + t); };
  double b = -1.0, t = 0.0, worst_range = 0.0;
  bool increasing = true;
  const double h = 0.01;
  for (int k = 0; k < 20000; ++k) {
    const double k1 = f(t, b), k2 = f(t + h / 2, b + h / 2 * k1), k3 = f(t + h / 2, b + h / 2 * k2), k4 = f(t + h, b + h * k3);
    const double nb = b + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4);
    increasing = increasing && nb >= b;
    b = nb;
    t += h;
    worst_range = std::max(worst_range, std::abs(b) - 1.0);
  }
  EXPECT_TRUE(increasing);
  EXPECT_LE(worst_range, 0.0);
  EXPECT_LE(1.0 - b, 0.005);
  EXPECT_NEAR(1.0 - b, 0.00402, 2e-5);
}
