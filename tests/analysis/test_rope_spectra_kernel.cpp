// General consensus kernels, the analytic cases (45)–(48), and the one-line refusal of bad input
// by the RoPE spectra functions (RoPE paper T5.2, R6.L, T7.3, P7.4, P7.5; spec §4.5–4.8).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "rope_spectra_fixtures.hpp"
#include "tokdyn/analysis/rope_spectra.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/experiments/rope_spectra_configs.hpp"
#include "tokdyn/core/rng.hpp"

namespace tr = tokdyn::rope;
using tokdyn::Mat;
using tokdyn::testing::iota_positions;

namespace {

using tokdyn::kPi;

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
