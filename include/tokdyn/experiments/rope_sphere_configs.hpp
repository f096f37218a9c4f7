#pragma once
// The fixed configurations of the RoPE paper's sphere experiments: the App. D.3 Dini grids
// (non-obtuse, hemisphere, equiangular; 3720 rows) and the five multi-frequency slow-mode fits of
// Fig. 4d (T7.3, App. D.5). Parameter sets and recipes only; the analyses they run are in
// analysis/rope_sphere.hpp.
#include <cstdint>
#include <string>
#include <vector>

#include "tokdyn/analysis/rope_sphere.hpp"

namespace tokdyn::rope {

/// Seed of the App. D.3 grids.
inline constexpr std::uint64_t kGridSeed = 0x5eed'd3'0000ULL;

// ---------------------------------------------------------------------------------------------
// App. D.3 Dini grids (positions 0..n-1, standard frequencies 10000^{-2l/d}).

struct DiniRow {
  std::string family;   ///< "nonobtuse" | "hemisphere" | "equiangular"
  std::string variant;  ///< hemisphere: "interior" | "boundary"; equiangular: "plane-aligned" | "rotated"; else ""
  int n = 0, d = 0;
  double beta = 0.0;
  int config = 0;                 ///< seeded configuration 0..39 (equiangular: index of c0)
  double c0 = 0.0;                ///< equiangular c0 (else the state's value c or m)
  double value = 0.0;             ///< c (pairwise) or m (hemisphere)
  double residual_formula = 0.0;  ///< via (C-5) (pairwise) or (C-3) (hemisphere)
  double residual_direct = 0.0;   ///< via the vector field
  int active = 0;                 ///< active-set size (formula)
  int expected_active = -1;       ///< n(n-1)/2 for equiangular, 1 for a boundary token, else -1
  double tol = 0.0;               ///< tie tolerance used
};

struct DiniGrid {
  std::vector<DiniRow> rows;
  long count = 0;               ///< rows.size()
  double min_residual = 0.0;    ///< over both residuals of every row
  int active_mismatches = 0;    ///< rows whose active count differs from expected_active
};

DiniGrid nonobtuse_grid(std::uint64_t seed = kGridSeed);    ///< 3 n x 3 d x 5 beta x 40 = 1800
DiniGrid hemisphere_grid(std::uint64_t seed = kGridSeed);   ///< 1800, odd configs with a boundary token
DiniGrid equiangular_grid(std::uint64_t seed = kGridSeed);  ///< 3 n x 2 orientations x 5 c0 x 4 beta = 120
DiniGrid sphere_dini_grids(std::uint64_t seed = kGridSeed); ///< the three, 3720 rows

// ---------------------------------------------------------------------------------------------
// The multi-frequency slow-mode fits of Fig. 4d (T7.3, App. D.5).

/// The paper's five fits (Fig. 4d): n = 16, beta = 4, d = 4, freqs (1, 0.01), energy a in the
/// omega = 1 plane, a in {0, 1/4, 1/2, 3/4, 1}. `which`: indices into that list (empty: all).
std::vector<SlowModeFit> multifrequency_rate_fits(const SlowModeOptions& opt = {}, const std::vector<int>& which = {});

}  // namespace tokdyn::rope
