// The RoPE paper's spectral configuration grids (see include/tokdyn/experiments/rope_spectra_configs.hpp).
#include "tokdyn/experiments/rope_spectra_configs.hpp"

#include <algorithm>

#include "tokdyn/core/rng.hpp"

namespace tokdyn::rope {

std::vector<RingConfig> resonant_grid() {
  std::vector<RingConfig> out;
  for (int n : {8, 16, 32, 64, 128}) {
    std::vector<int> modes;
    for (int m : {0, 1, 2, n / 4, n / 2})
      if (std::find(modes.begin(), modes.end(), m) == modes.end()) modes.push_back(m);
    for (double beta : {0.5, 1.0, 2.0, 4.0, 8.0, 16.0})
      for (int m : modes) out.push_back({n, m, beta});
  }
  return out;
}

std::vector<RingConfig> rate_fit_triples() {
  return {{8, 0, 2},   {8, 1, 2},   {8, 2, 2},   {8, 4, 2},    {16, 1, 1},  {16, 4, 4},
          {16, 8, 4},  {32, 2, 2},  {32, 8, 2},  {32, 16, 2},  {64, 16, 1}, {128, 64, 1}};
}

std::vector<RateTheoryRow> rate_fit_theory() {
  std::vector<RateTheoryRow> out;
  for (const RingConfig& c : rate_fit_triples()) {
    RateTheoryRow r;
    r.cfg = c;
    r.g = ring_gcd(c.n, c.m);
    r.L = c.n / r.g;
    r.gap_bessel = ring_gap(c.n, c.m, c.beta);
    r.gap_lgrid = lgrid_gap(r.L, c.beta);
    out.push_back(r);
  }
  return out;
}

std::vector<double> standard_two_plane_freqs() { return {1.0, 0.01}; }

std::vector<MultiFreqConfig> three_way_grid() {
  std::vector<MultiFreqConfig> out;
  for (int n : {128, 256, 384})
    for (double a : {0.0, 0.5, 1.0}) out.push_back({n, 4.0, standard_two_plane_freqs(), {a, 1.0 - a}});
  return out;
}

std::vector<MultiFreqConfig> psd_stress_grid(std::uint64_t seed) {
  std::vector<MultiFreqConfig> out;
  const double betas[] = {0.0, 1.0, 4.0, 16.0};
  for (int n : {8, 16, 32, 64})
    for (std::uint64_t bi = 0; bi < 4; ++bi)
      for (std::uint64_t j = 0; j < 20; ++j) {
        Rng rng(seed, {static_cast<std::uint64_t>(n), bi, j});
        const double u = rng.uniform();
        out.push_back({n, betas[bi], standard_two_plane_freqs(), {u, 1.0 - u}});
      }
  return out;
}

}  // namespace tokdyn::rope
