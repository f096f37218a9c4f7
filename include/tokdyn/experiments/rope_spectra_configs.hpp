#pragma once
// The fixed configuration grids of the RoPE paper's spectral experiments (App. D.2, D.5; the
// counts reconcile with the paper's §8 totals): the 144 resonant rings, the 12 rate-fit triples,
// the 9 three-way comparisons and the 320 PSD stress configurations. Parameter sets only; their
// evaluations are in analysis/rope_spectra.hpp.
#include <cstdint>
#include <vector>

#include "tokdyn/analysis/rope_spectra.hpp"

namespace tokdyn::rope {

/// The 144 resonant configurations: n in {8,16,32,64,128} x beta in {0.5,1,2,4,8,16} x the distinct
/// modes among {0, 1, 2, n/4, n/2} (in that order of first appearance).
std::vector<RingConfig> resonant_grid();
/// The 12 nonlinear rate-fit triples (n, m, beta) of App. D.2.
std::vector<RingConfig> rate_fit_triples();

/// Theory rows for the rate-fit schedule: gap from Bessel (22) and from (B-3).
struct RateTheoryRow {
  RingConfig cfg;
  int g = 0, L = 0;
  double gap_bessel = 0, gap_lgrid = 0;
};
std::vector<RateTheoryRow> rate_fit_theory();

/// The paper's standard two-plane frequencies (1, 0.01).
std::vector<double> standard_two_plane_freqs();
/// The 9 three-way comparisons: n in {128,256,384} x a in {0, 1/2, 1} (a = energy in omega = 1), beta = 4.
std::vector<MultiFreqConfig> three_way_grid();
/// Default seed of the PSD stress grid.
inline constexpr std::uint64_t kPsdStressSeed = 20260727;
/// The 320 PSD stress configurations: n in {8,16,32,64} x beta in {0,1,4,16} x 20 allocations.
/// Decision (the paper says only "20 fixed seeded energy allocations", D.5 fixes the frequencies
/// (1, 0.01) for all multi-frequency calculations): frequencies (1, 0.01), energies (u, 1 - u)
/// with u ~ U[0,1) drawn from Rng(seed, {n, beta index, allocation index}).
std::vector<MultiFreqConfig> psd_stress_grid(std::uint64_t seed = kPsdStressSeed);

}  // namespace tokdyn::rope
