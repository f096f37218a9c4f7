// Scaled Bessel functions, resonant-ring Bessel-aliasing spectra and the asymptotics of the ring
// gap (RoPE paper T5.1, T5.3; App. D.2, D.5; spec §3.2–3.6, §6).
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/math/special_functions/bessel.hpp>
#include <cmath>
#include <functional>
#include <iostream>
#include <numbers>
#include <utility>
#include <vector>

#include "rope_spectra_fixtures.hpp"
#include "tokdyn/analysis/rope_spectra.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/experiments/rope_spectra_configs.hpp"

namespace tr = tokdyn::rope;
using tokdyn::Vec;
using tokdyn::testing::iota_positions;

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
