// Consensus kernels, resonant-ring Bessel-aliasing spectra and scaled Bessel functions
// (RoPE paper T5.1–T5.3, R6.L, T7.3, P7.4, P7.5; App. D.2, D.5; spec §3.2–3.6, §4.5–4.8, §6).
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/math/special_functions/bessel.hpp>
#include <cmath>
#include <functional>
#include <iostream>
#include <numbers>
#include <string>
#include <vector>

#include "tokdyn/analysis/rope_spectra.hpp"
#include "tokdyn/error.hpp"
#include "tokdyn/experiments/rope_spectra_configs.hpp"
#include "tokdyn/rng.hpp"
#include "tokdyn/constants.hpp"

namespace tr = tokdyn::rope;
using tokdyn::Mat;
using tokdyn::Vec;

namespace {

using tokdyn::kPi;
double rel_err(double x, double ref) { return std::abs(x - ref) / std::abs(ref); }

// e^{-b} sum_j (b/2)^{2j+k} / (j! (j+k)!) in long double (positive terms only).
double series_scaled(int k, double b) {
  const long double h = static_cast<long double>(b) / 2.0L;
  long double term = 1.0L;
  for (int i = 1; i <= k; ++i) term *= h / i;
  long double s = 0.0L;
  for (int j = 0; j < 500; ++j) {
    s += term;
    term *= h * h / (static_cast<long double>(j + 1) * (j + 1 + k));
    if (term < s * 1e-22L) break;
  }
  return static_cast<double>(s * std::exp(-static_cast<long double>(b)));
}

// Hankel expansion (DLMF 10.40.1): e^{-z} I_k(z) ~ (2 pi z)^{-1/2} sum_j (-1)^j a_j(k) / z^j.
double hankel_scaled(int k, double z) {
  const long double mu = 4.0L * k * k, zl = z;
  long double term = 1.0L, s = 1.0L;
  for (int j = 1; j < 60; ++j) {
    term *= -(mu - static_cast<long double>(2 * j - 1) * (2 * j - 1)) / (8.0L * j * zl);
    s += term;
    if (std::abs(term) < 1e-22L) break;
  }
  return static_cast<double>(s / std::sqrt(2.0L * std::numbers::pi_v<long double> * zl));
}

std::vector<double> iota_positions(int n) {
  std::vector<double> p(n);
  for (int i = 0; i < n; ++i) p[i] = i;
  return p;
}

void expect_one_line_input_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected InputError mentioning '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Scaled Bessel functions

TEST(RopeBessel, SmallBetaSeries) {
  double worst = 0.0;
  for (double b : {1e-300, 1e-8, 1e-3, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0}) {
    const std::vector<double> all = tr::bessel_i_scaled_all(40, b);
    for (int k = 0; k <= 40; ++k) {
      const double ref = series_scaled(k, b);
      if (ref < 1e-290) {
        EXPECT_LE(all[k], 1e-290);
        continue;
      }
      worst = std::max(worst, rel_err(all[k], ref));
      EXPECT_LE(rel_err(all[k], ref), 2e-15) << "k=" << k << " beta=" << b;
    }
  }
  std::cout << "[bessel] max rel error vs long-double power series: " << worst << "\n";
}

TEST(RopeBessel, AgainstBoostAndStd) {
  double worst = 0.0;
  for (double b : {0.05, 0.7, 3.0, 12.5, 30.0, 50.0})
    for (int k = 0; k <= 50; ++k) {
      const double v = tr::bessel_i_scaled(k, b);
      const double ref_b = boost::math::cyl_bessel_i(k, b) * std::exp(-b);
      const double ref_s = std::cyl_bessel_i(static_cast<double>(k), b) * std::exp(-b);
      if (ref_b < 1e-290) continue;
      worst = std::max(worst, rel_err(v, ref_b));
      EXPECT_LE(rel_err(v, ref_b), 1e-13) << "k=" << k << " beta=" << b;
      EXPECT_LE(rel_err(v, ref_s), 1e-13) << "k=" << k << " beta=" << b;
    }
  std::cout << "[bessel] max rel error vs Boost cyl_bessel_i * e^-beta (k<=50, beta<=50): " << worst << "\n";
}

TEST(RopeBessel, LargeBetaHankelAsymptotics) {
  double worst = 0.0;
  for (double b : {1e3, 2.5e3, 1e4, 1e5, 1e8})
    for (int k = 0; k <= 20; ++k) {
      const double v = tr::bessel_i_scaled(k, b);
      ASSERT_TRUE(std::isfinite(v));
      ASSERT_GT(v, 0.0);
      worst = std::max(worst, rel_err(v, hankel_scaled(k, b)));
      EXPECT_LE(rel_err(v, hankel_scaled(k, b)), 1e-14) << "k=" << k << " beta=" << b;
    }
  std::cout << "[bessel] max rel error vs Hankel expansion (beta 1e3..1e8, k<=20): " << worst << "\n";
  // beta = 1e3 and 1e4: whole ladders finite, decreasing, and underflowing to exact zeros.
  for (double b : {1e3, 1e4}) {
    const std::vector<double> all = tr::bessel_i_scaled_all(20000, b);
    for (std::size_t k = 0; k < all.size(); ++k) {
      ASSERT_TRUE(std::isfinite(all[k]));
      ASSERT_GE(all[k], 0.0);
      if (k > 0) {
        ASSERT_LE(all[k], all[k - 1]);
      }
    }
    EXPECT_EQ(all.back(), 0.0);
  }
}

TEST(RopeBessel, RecurrenceAndIdentities) {
  EXPECT_EQ(tr::bessel_i_scaled(0, 0.0), 1.0);
  EXPECT_EQ(tr::bessel_i_scaled(3, 0.0), 0.0);
  EXPECT_EQ(tr::bessel_i_scaled(-3, 0.0), 0.0);
  for (double b : {1e-6, 0.1, 1.0, 7.5, 100.0, 1e3, 1e4}) {
    const int kmax = 4000;
    const std::vector<double> I = tr::bessel_i_scaled_all(kmax, b);
    // Integer-order recurrence I_{k-1} - I_{k+1} = (2k/b) I_k, relative to I_{k-1}.
    for (int k = 1; k < kmax && I[k + 1] > 1e-290; ++k)
      EXPECT_LE(std::abs(I[k - 1] - I[k + 1] - 2.0 * k / b * I[k]), 1e-14 * I[k - 1]) << "k=" << k << " beta=" << b;
    // Sum identities: sum_{k in Z} I_k = e^b, sum (-1)^k I_k = e^{-b}, sum k^2 I_k = b e^b.
    long double s = 0, alt = 0, sec = 0;
    for (int k = kmax; k >= 1; --k) {
      s += I[k];
      alt += (k % 2 ? -1.0L : 1.0L) * I[k];
      sec += static_cast<long double>(k) * k * I[k];
    }
    EXPECT_NEAR(static_cast<double>(I[0] + 2 * s), 1.0, 2e-15) << b;
    EXPECT_NEAR(static_cast<double>(I[0] + 2 * alt), std::exp(-2.0 * b), 2e-15) << b;
    EXPECT_LE(rel_err(static_cast<double>(2 * sec), b), 1e-14) << b;
    // Single-order entry point, negative orders and consistency.
    for (int k : {0, 1, 5, 50, 300}) {
      EXPECT_EQ(tr::bessel_i_scaled(k, b), I[k]);
      EXPECT_EQ(tr::bessel_i_scaled(-k, b), I[k]);
    }
  }
  // Far-underflow orders return exact zeros (no overflow, no NaN).
  EXPECT_EQ(tr::bessel_i_scaled(100000000, 1.0), 0.0);
  EXPECT_EQ(tr::bessel_i_scaled(100000000, 1e4), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Resonant ring (T5.1)

TEST(RopeRing, Fig1aCase) {
  const int n = 16, m = 4;
  const double beta = 2.0;
  EXPECT_EQ(tr::ring_gcd(n, m), 4);
  EXPECT_EQ(tr::ring_period(n, m), 4);
  const std::vector<tr::RingMode> bes = tr::ring_spectrum_bessel(n, m, beta);
  const std::vector<double> dft = tr::ring_spectrum_dft(n, m, beta);
  int unreachable = 0;
  double err = 0.0;
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(bes[q].q, q);
    EXPECT_EQ(bes[q].reachable, q % 4 == 0);
    if (!bes[q].reachable) {
      ++unreachable;
      EXPECT_EQ(bes[q].lambda, 0.0);  // exact structural zero
    } else {
      EXPECT_GT(bes[q].lambda, 0.0);
    }
    err = std::max(err, std::abs(bes[q].lambda - dft[q]));
  }
  EXPECT_EQ(unreachable, 12);
  EXPECT_LE(err, 1e-14);
  std::cout << "[ring] n=16 m=4 beta=2: Bessel vs DFT max error " << err << " (paper 5.6e-16)\n";
  // Closed form: {1, tanh 1 (x2), tanh^2 1, 0 (x12)}.
  const double t = std::tanh(1.0);
  EXPECT_NEAR(bes[0].lambda, 1.0, 1e-15);
  EXPECT_NEAR(bes[4].lambda, t, 1e-15);
  EXPECT_NEAR(bes[12].lambda, t, 1e-15);
  EXPECT_NEAR(bes[8].lambda, t * t, 1e-15);
  EXPECT_NEAR(tr::ring_gap(n, m, beta), 1.0 - t, 1e-15);
  // The general kernel with literal differences p_i - p_j: A symmetric, doubly stochastic,
  // circulant, and its spectrum equals the sorted Bessel spectrum.
  const auto k = tr::consensus_kernel(iota_positions(n), {2 * kPi * m / n}, {1.0}, beta);
  EXPECT_LE((k.A - k.A.transpose()).cwiseAbs().maxCoeff(), 1e-15);
  EXPECT_LE((k.A.colwise().sum().array() - 1.0).abs().maxCoeff(), 1e-15);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) EXPECT_NEAR(k.A(i, j), k.A(0, (j - i + n) % n), 1e-15);
  std::vector<double> sorted;
  for (const auto& md : bes) sorted.push_back(md.lambda);
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  const Vec ev = tr::consensus_spectrum(k).eigenvalues;
  const std::vector<double> dir = tr::ring_spectrum_direct(n, m, beta);
  for (int q = 0; q < n; ++q) {
    EXPECT_NEAR(ev(q), sorted[q], 1e-14);
    EXPECT_NEAR(dir[q], sorted[q], 1e-14);
  }
}

TEST(RopeRing, BetaZeroSpectrum) {
  for (auto [n, m] : std::vector<std::pair<int, int>>{{8, 1}, {16, 4}, {12, 0}, {9, -2}}) {
    const auto bes = tr::ring_spectrum_bessel(n, m, 0.0);
    const auto dir = tr::ring_spectrum_direct(n, m, 0.0);
    EXPECT_EQ(bes[0].lambda, 1.0);
    for (int q = 1; q < n; ++q) EXPECT_EQ(bes[q].lambda, 0.0);
    EXPECT_NEAR(dir[0], 1.0, 1e-15);
    for (int q = 1; q < n; ++q) EXPECT_NEAR(dir[q], 0.0, 1e-15);
    EXPECT_EQ(tr::ring_gap(n, m, 0.0), 1.0);
  }
  // gcd conventions: m = 0 -> g = n, L = 1; negative m reduced mod n.
  EXPECT_EQ(tr::ring_gcd(12, 0), 12);
  EXPECT_EQ(tr::ring_period(12, 0), 1);
  EXPECT_EQ(tr::ring_gcd(12, -8), 4);
  EXPECT_EQ(tr::ring_period(12, 24), 1);
}

TEST(RopeRing, ResonantGrid144) {
  const auto grid = tr::resonant_grid();
  ASSERT_EQ(grid.size(), 144u);
  int n8 = 0;
  for (const auto& c : grid) n8 += c.n == 8;
  EXPECT_EQ(n8, 24);
  const tr::ResonantSummary s = tr::evaluate_resonant_grid(grid);
  EXPECT_EQ(s.count, 144);
  EXPECT_TRUE(s.counts_ok);
  for (const auto& r : s.rows) {
    EXPECT_EQ(r.reachable, r.L);
    EXPECT_EQ(r.structural_zeros, r.cfg.n - r.L);
    EXPECT_EQ(r.positive, r.L) << "n=" << r.cfg.n << " m=" << r.cfg.m << " beta=" << r.cfg.beta;
    // (38) on the ring, with the cancellation-free gap.
    EXPECT_GE(r.gap_lgrid, tr::local_gap_lower_bound(r.cfg.n, r.cfg.beta));
  }
  EXPECT_LE(s.max_spectrum_error, 1e-13);
  EXPECT_LE(s.max_gap_error, 1e-13);
  EXPECT_LE(s.max_dft_error, 1e-13);
  std::cout << "[ring] 144 grid: full-spectrum error " << s.max_spectrum_error << " (paper 1.554e-15), Bessel-Fourier gap error "
            << s.max_gap_error << " (paper 6.051e-15), Bessel vs DFT " << s.max_dft_error << "\n";
}

TEST(RopeRing, RateFitSchedule) {
  const auto t = tr::rate_fit_triples();
  ASSERT_EQ(t.size(), 12u);
  EXPECT_EQ(t.front().n, 8);
  EXPECT_EQ(t.back().n, 128);
  EXPECT_EQ(t.back().m, 64);
  for (const auto& r : tr::rate_fit_theory()) {
    EXPECT_NEAR(r.gap_bessel, r.gap_lgrid, 1e-13);
    EXPECT_GT(r.gap_lgrid, 0.0);
    EXPECT_LE(r.gap_lgrid, 1.0);
  }
  EXPECT_EQ(tr::rate_fit_theory()[0].gap_lgrid, 1.0);  // (8, 0, 2): invisible, L = 1
}

// ---------------------------------------------------------------------------------------------
// T5.3 asymptotics

TEST(RopeAsymptotics, ClosedFormsAndRatios) {
  for (double b : {0.0, 0.3, 1.0, 4.0, 16.0, 40.0}) {
    EXPECT_EQ(tr::lgrid_gap(1, b), 1.0);
    EXPECT_EQ(tr::gap_asymptotic(1, b), 1.0);
    const double l2 = 2.0 * std::exp(-2.0 * b) / (1.0 + std::exp(-2.0 * b));
    EXPECT_LE(rel_err(tr::lgrid_gap(2, b), l2), 1e-14) << b;
    EXPECT_LE(rel_err(tr::gap_asymptotic(2, b), l2), 1e-15) << b;
    if (b > 0 && b < 10) {
      EXPECT_LE(rel_err(tr::lgrid_gap(2, b), 1.0 - std::tanh(b)), 1e-9);
    }
  }
  // The ring with L = 2 matches (26).
  EXPECT_NEAR(tr::ring_gap(16, 8, 3.0), tr::gap_asymptotic(2, 3.0), 1e-15);
  // L = 3 closed form: b = (1, e^{-3b/2} x2), gamma = 3 e^{-3b/2} / (1 + 2 e^{-3b/2}).
  for (double b : {0.5, 2.0, 9.0}) {
    const double e = std::exp(-1.5 * b);
    EXPECT_LE(rel_err(tr::lgrid_gap(3, b), 3.0 * e / (1.0 + 2.0 * e)), 1e-14);
  }
  // (27): ratio -> 1 for L >= 3, and -> 1/2 against (27)'s form for L = 2.
  for (int L : {3, 4, 5, 8, 16, 32}) {
    const double dL = 1.0 - std::cos(2.0 * kPi / L);
    double prev = 0.0;
    for (double x : {2.5, 5.0, 10.0, 20.0, 40.0}) {
      const double r = tr::asymptotic_ratio(L, x / dL);
      EXPECT_GT(r, 0.5);
      EXPECT_LE(r, 1.0 + 1e-12);
      EXPECT_GE(r, prev - 1e-12);  // increasing towards the limit
      prev = r;
      if (x <= 20.0) {
        EXPECT_LE(rel_err(r, tr::lgrid_gap(L, x / dL) / tr::gap_asymptotic(L, x / dL)), 1e-12);
      }
    }
    EXPECT_NEAR(prev, 1.0, 1e-6) << "L=" << L;
    EXPECT_NEAR(tr::asymptotic_ratio(L, 1e6), 1.0, 1e-12) << "L=" << L;  // no 0 * inf
  }
  for (double b : {5.0, 10.0, 20.0}) {
    const double r2 = 2.0 * (1.0 - std::cos(kPi)) * std::exp(-2.0 * b);  // (27)'s form at L = 2
    EXPECT_NEAR(tr::lgrid_gap(2, b) / r2, 0.5 / (1.0 + std::exp(-2.0 * b)), 1e-15);
    EXPECT_NEAR(tr::lgrid_gap(2, b) * std::exp(2.0 * b) / 2.0, 1.0, 1e-4);  // gamma e^{2 beta} / 2 -> 1
  }
  EXPECT_NEAR(tr::lgrid_gap(2, 20.0) / (4.0 * std::exp(-40.0)), 0.5, 1e-15);
  EXPECT_NEAR(tr::asymptotic_ratio(2, 30.0), 0.5, 1e-15);
  // Continuum reference curve (not a theorem): 1 at beta = 0, ~ 1/(2 beta).
  EXPECT_EQ(tr::continuum_gap(0.0), 1.0);
  EXPECT_NEAR(tr::continuum_gap(1e4) * 2e4, 1.0, 1e-4);
}

// ---------------------------------------------------------------------------------------------
// General consensus kernel (T5.2, R6.L, T7.3)

TEST(RopeKernel, PositiveSpectrumAndLowerBound) {
  tokdyn::Rng rng(12345, {1});
  double worst_low = 0.0;
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 2 + static_cast<int>(rng.below(20));
    const int r = 1 + static_cast<int>(rng.below(4));
    std::vector<double> p(n), w(r), a(r);
    for (double& x : p) x = rng.uniform(-10.0, 10.0);
    double s = 0.0;
    for (int l = 0; l < r; ++l) {
      w[l] = rng.uniform(-4.0, 4.0);
      a[l] = rng.uniform();
      s += a[l];
    }
    for (double& x : a) x /= s;
    const double beta = rng.uniform(0.0, 8.0);
    const auto k = tr::consensus_kernel(p, w, a, beta);
    // K = Phi Phi^T with Gram features.
    Mat Phi(n, 2 * r);
    for (int i = 0; i < n; ++i)
      for (int l = 0; l < r; ++l) {
        Phi(i, 2 * l) = std::sqrt(a[l]) * std::cos(w[l] * p[i]);
        Phi(i, 2 * l + 1) = std::sqrt(a[l]) * std::sin(w[l] * p[i]);
      }
    EXPECT_LE((k.K - Phi * Phi.transpose()).cwiseAbs().maxCoeff(), 1e-14);
    EXPECT_LE((k.A.rowwise().sum().array() - 1.0).abs().maxCoeff(), 1e-14);
    const auto sp = tr::consensus_spectrum(k);
    EXPECT_NEAR(sp.eigenvalues(0), 1.0, 1e-14);
    EXPECT_GE(sp.eigenvalues(n - 1), -1e-13);
    EXPECT_GT(sp.gap, 0.0);
    EXPECT_LE(sp.gap, 1.0 + 1e-13);
    const double na = tr::local_gap_lower_bound(n, beta);
    worst_low = std::min(worst_low, sp.gap - na);
    EXPECT_GE(sp.gap, na - 1e-13);
    // (38): B = (A - a 11^T)/(1 - n a) is entrywise >= 0 and row-stochastic; non-Perron |lambda| <= 1 - n a.
    if (beta > 0) {
      const double af = na / n;
      const Mat B = (k.A.array() - af) / (1.0 - na);
      EXPECT_GE(B.minCoeff(), -1e-14);
      EXPECT_LE((B.rowwise().sum().array() - 1.0).abs().maxCoeff(), 1e-12);
      EXPECT_LE(sp.eigenvalues.tail(n - 1).cwiseAbs().maxCoeff(), 1.0 - na + 1e-13);
    }
  }
  EXPECT_GE(worst_low, -1e-13);
  // beta = 0: gamma = n a = 1.
  const auto k0 = tr::consensus_kernel(iota_positions(6), {0.7}, {1.0}, 0.0);
  EXPECT_NEAR(tr::consensus_spectrum(k0).gap, 1.0, 1e-14);
  EXPECT_EQ(tr::local_gap_lower_bound(6, 0.0), 1.0);
}

TEST(RopeKernel, InvisibilityCharacterisesUnitGap) {
  const auto p = iota_positions(10);
  const double beta = 3.0;
  auto gap = [&](std::vector<double> w, std::vector<double> a) {
    return tr::consensus_spectrum(tr::consensus_kernel(p, w, a, beta)).gap;
  };
  EXPECT_NEAR(gap({2 * kPi}, {1.0}), 1.0, 1e-13);               // nonzero 2 pi frequency is invisible
  EXPECT_NEAR(gap({0.0}, {1.0}), 1.0, 1e-13);                   // omega = 0
  EXPECT_NEAR(gap({0.0, 4 * kPi, -2 * kPi}, {0.2, 0.5, 0.3}), 1.0, 1e-13);
  EXPECT_NEAR(gap({1.0, 2 * kPi}, {0.0, 1.0}), 1.0, 1e-13);     // visible plane inactive
  EXPECT_LT(gap({1.0}, {1.0}), 1.0 - 1e-3);                     // visible active plane
  EXPECT_LT(gap({1.0, 2 * kPi}, {0.01, 0.99}), 1.0 - 1e-6);     // small visible energy
  EXPECT_LT(gap({kPi}, {1.0}), 1.0 - 1e-3);                     // pi is visible on integers
}

TEST(RopeKernel, AliasingAndBlockPermutation) {
  const auto p = iota_positions(24);
  const double beta = 2.5;
  const std::vector<double> w = {0.9, 0.013, 2.4}, a = {0.5, 0.3, 0.2};
  const auto k0 = tr::consensus_kernel(p, w, a, beta);
  const auto s0 = tr::consensus_spectrum(k0);
  const std::vector<std::vector<double>> variants = {
      {0.9 + 2 * kPi, 0.013, 2.4}, {-0.9, 0.013, 2.4}, {-0.9 + 4 * kPi, 0.013 - 2 * kPi, -2.4}};
  for (const auto& v : variants) {
    const auto k = tr::consensus_kernel(p, v, a, beta);
    EXPECT_LE((k.W - k0.W).cwiseAbs().maxCoeff(), 1e-14);
    EXPECT_LE((tr::consensus_spectrum(k).eigenvalues - s0.eigenvalues).cwiseAbs().maxCoeff(), 1e-14);
  }
  const auto kp = tr::consensus_kernel(p, {2.4, 0.9, 0.013}, {0.2, 0.5, 0.3}, beta);
  EXPECT_LE((kp.W - k0.W).cwiseAbs().maxCoeff(), 1e-15);
  EXPECT_LE((tr::consensus_spectrum(kp).eigenvalues - s0.eigenvalues).cwiseAbs().maxCoeff(), 1e-14);
}

TEST(RopeKernel, ThreeWayGapComparisons) {
  const auto grid = tr::three_way_grid();
  ASSERT_EQ(grid.size(), 9u);
  const tr::ThreeWaySummary s = tr::evaluate_three_way_grid(grid);
  EXPECT_EQ(s.count, 9);
  EXPECT_LE(s.max_disagreement, 1e-13);
  for (const auto& r : s.rows) {
    EXPECT_GT(r.gap_similarity, 0.0);
    EXPECT_LT(r.gap_similarity, 1.0);
  }
  std::cout << "[kernel] 9 three-way comparisons: max gap disagreement " << s.max_disagreement << " (paper 1.527e-15)\n";
}

TEST(RopeKernel, PsdStress320) {
  const auto grid = tr::psd_stress_grid();
  ASSERT_EQ(grid.size(), 320u);
  const auto again = tr::psd_stress_grid();
  for (std::size_t i = 0; i < grid.size(); ++i) {
    EXPECT_EQ(grid[i].energies, again[i].energies);
    EXPECT_GE(grid[i].energies[0], 0.0);
    EXPECT_LE(grid[i].energies[0], 1.0);
  }
  EXPECT_NE(grid[0].energies[0], tr::psd_stress_grid(1)[0].energies[0]);
  const tr::PsdSummary s = tr::evaluate_psd_grid(grid);
  EXPECT_EQ(s.count, 320);
  EXPECT_GE(s.min_lambda_W, -1e-13);
  EXPECT_GE(s.min_lambda_S, -1e-13);
  EXPECT_LE(s.max_lambda_S_error, 1e-13);
  std::cout << "[kernel] 320 PSD stress: min lambda(W) " << s.min_lambda_W << ", min lambda(S) " << s.min_lambda_S
            << ", max |lambda_1(S) - 1| " << s.max_lambda_S_error << "\n";
}

// ---------------------------------------------------------------------------------------------
// Analytic cases (45)–(48)

TEST(RopeAnalytic, Prop74NonMonotoneGap) {
  const double g0 = (35.0 * std::sqrt(2.0) - 32.0) / 31.0;
  EXPECT_NEAR(g0, 0.564434667195430, 1e-15);
  EXPECT_NEAR(tr::prop74_gap(0.0), g0, 1e-14);
  EXPECT_NEAR(tr::prop74_gap(0.0), 0.564434667195430, 1e-14);
  EXPECT_NEAR(tr::prop74_gap(2.0 / 3.0), 0.75, 1e-14);
  const double u = std::pow(2.0, -0.75);
  EXPECT_NEAR(tr::prop74_gap(1.0), u * (1 + 2 * u) / (1 + u + u * u), 1e-14);
  EXPECT_NEAR(tr::prop74_gap(1.0), 0.668175292530218, 1e-14);
  const auto mid = tr::prop74_spectrum(2.0 / 3.0);
  EXPECT_NEAR(mid.lambda_minus, 0.25, 1e-15);
  EXPECT_NEAR(mid.lambda_plus, 0.25, 1e-15);
  EXPECT_GT(tr::prop74_gap(2.0 / 3.0), std::max(tr::prop74_gap(0.0), tr::prop74_gap(1.0)));
  // Against a direct 3 x 3 eigensolve of the consensus kernel.
  const std::vector<std::pair<double, std::vector<double>>> table = {
      {0.0, {1.0, 0.435565332804570, 0.0}},
      {2.0 / 3.0, {1.0, 0.25, 0.25}},
      {1.0, {1.0, 0.331824707469782, 0.151573007960633}}};
  for (const auto& [a, ev] : table) {
    const auto k = tr::consensus_kernel({0, 1, 2}, {kPi / 2, kPi}, {a, 1.0 - a}, tr::prop74_beta());
    const auto sp = tr::consensus_spectrum(k);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(sp.eigenvalues(i), ev[i], 1e-14) << "a=" << a;
    EXPECT_NEAR(sp.gap, tr::prop74_gap(a), 1e-14);
  }
  for (double a : {0.1, 0.37, 0.9}) {
    const auto k = tr::consensus_kernel({0, 1, 2}, {kPi / 2, kPi}, {a, 1.0 - a}, tr::prop74_beta());
    EXPECT_NEAR(tr::consensus_spectrum(k).gap, tr::prop74_gap(a), 1e-14);
  }
}

TEST(RopeAnalytic, TwoTokenOrderingReversal) {
  for (double beta : {0.1, 0.5, 1.0, 2.0, 4.0}) {
    // Delta = 1: high frequency slower; Delta = 2: high frequency invisible (gap 1), faster.
    EXPECT_LT(tr::two_token_gap(beta, kPi, 1.0), tr::two_token_gap(beta, kPi / 2, 1.0));
    EXPECT_NEAR(tr::two_token_gap(beta, kPi, 2.0), 1.0, 1e-15);
    EXPECT_GT(tr::two_token_gap(beta, kPi, 2.0), tr::two_token_gap(beta, kPi / 2, 2.0));
    const double q = std::exp(-beta);
    EXPECT_NEAR(tr::two_token_gap(beta, kPi / 2, 1.0), 2 * q / (1 + q), 1e-15);
    for (double delta : {1.0, 2.0})
      for (double w : {kPi / 2, kPi}) {
        const auto k = tr::consensus_kernel({0.0, delta}, {w}, {1.0}, beta);
        EXPECT_NEAR(tr::consensus_spectrum(k).gap, tr::two_token_gap(beta, w, delta), 1e-14);
      }
  }
}

TEST(RopeAnalytic, FiniteContextObservation48) {
  const auto f = tr::standard_two_plane_freqs();
  auto gap = [&](int n, double a_high) {
    return tr::consensus_spectrum(tr::consensus_kernel(iota_positions(n), f, {a_high, 1.0 - a_high}, 4.0)).gap;
  };
  const double l256 = gap(256, 0.0), h256 = gap(256, 1.0), l384 = gap(384, 0.0), h384 = gap(384, 1.0), m384 = gap(384, 0.5);
  EXPECT_NEAR(l256, 0.240298, 5e-7);
  EXPECT_NEAR(h256, 0.134730, 5e-7);
  EXPECT_NEAR(l384, 0.112756, 5e-7);
  EXPECT_NEAR(h384, 0.135707, 5e-7);
  EXPECT_NEAR(m384, 0.263105, 5e-7);
  EXPECT_GT(m384, std::max(l384, h384));
  std::cout.precision(9);
  std::cout << "[kernel] (48): n=256 low " << l256 << " high " << h256 << "; n=384 low " << l384 << " high " << h384
            << " mix " << m384 << "\n";
}

// ---------------------------------------------------------------------------------------------
// Bad input

TEST(RopeSpectraInput, BadInputRaisesOneLineInputError) {
  const auto p = iota_positions(4);
  expect_one_line_input_error([&] { tr::consensus_kernel({0.0}, {1.0}, {1.0}, 1.0); }, "positions");
  expect_one_line_input_error([&] { tr::consensus_kernel(p, {}, {}, 1.0); }, "freqs");
  expect_one_line_input_error([&] { tr::consensus_kernel(p, {1.0, 2.0}, {1.0}, 1.0); }, "energies");
  expect_one_line_input_error([&] { tr::consensus_kernel(p, {1.0, 2.0}, {1.2, -0.2}, 1.0); }, "energies[1]");
  expect_one_line_input_error([&] { tr::consensus_kernel(p, {1.0, 2.0}, {0.5, 0.4}, 1.0); }, "sum to 1");
  expect_one_line_input_error([&] { tr::consensus_kernel(p, {NAN}, {1.0}, 1.0); }, "freqs[0]");
  expect_one_line_input_error([&] { tr::consensus_kernel({0.0, INFINITY}, {1.0}, {1.0}, 1.0); }, "positions[1]");
  expect_one_line_input_error([&] { tr::consensus_kernel(p, {1.0}, {1.0}, -0.5); }, "beta");
  expect_one_line_input_error([&] { tr::consensus_kernel(p, {1.0}, {1.0}, INFINITY); }, "beta");
  expect_one_line_input_error([&] { tr::bessel_i_scaled(2, -1.0); }, "beta");
  expect_one_line_input_error([&] { tr::bessel_i_scaled(2, NAN); }, "beta");
  expect_one_line_input_error([&] { tr::bessel_i_scaled_all(-1, 1.0); }, "kmax");
  expect_one_line_input_error([&] { tr::bessel_i_scaled(0, 1e13); }, "beta must be <=");
  expect_one_line_input_error([&] { tr::ring_spectrum_bessel(1, 0, 1.0); }, "n must be >= 2");
  expect_one_line_input_error([&] { tr::ring_spectrum_dft(8, 1, -1.0); }, "beta");
  expect_one_line_input_error([&] { tr::ring_spectrum_direct(0, 1, 1.0); }, "n");
  expect_one_line_input_error([&] { tr::lgrid_gap(0, 1.0); }, "L");
  expect_one_line_input_error([&] { tr::asymptotic_ratio(1, 1.0); }, "L");
  expect_one_line_input_error([&] { tr::prop74_gap(1.5); }, "a (energy");
  expect_one_line_input_error([&] { tr::two_token_gap(1.0, NAN, 1.0); }, "omega");
  expect_one_line_input_error([&] { tr::local_gap_lower_bound(1, 1.0); }, "n");
}
