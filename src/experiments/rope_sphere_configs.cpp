// The RoPE paper's sphere configurations (see include/tokdyn/experiments/rope_sphere_configs.hpp).
#include "tokdyn/experiments/rope_sphere_configs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/parallel.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn::rope {

// ---- Grids ----

namespace {

AttentionParams grid_params(int d, double beta) {
  AttentionParams P;
  P.d = d;
  P.beta = beta;
  return P;  // positions 0..n-1, standard frequencies
}

const int kGridN[] = {2, 5, 10};
const int kGridD[] = {2, 4, 8};
const double kGridBeta[] = {0.0, 0.5, 2.0, 4.0, 8.0};
constexpr int kGridConfigs = 40;

void finish(DiniGrid& g) {
  g.count = static_cast<long>(g.rows.size());
  g.min_residual = std::numeric_limits<double>::infinity();
  g.active_mismatches = 0;
  for (const auto& r : g.rows) {
    g.min_residual = std::min({g.min_residual, r.residual_formula, r.residual_direct});
    if (r.expected_active >= 0 && r.active != r.expected_active) ++g.active_mismatches;
  }
}

}  // namespace

namespace {

// The App. D.3 grid of the non-obtuse and hemisphere families: n x d x beta x config, each state
// from the stream (seed, family, n, d, beta index, config); row = f(n, d, P, cfg, rng) per point,
// the points evaluated on every core (parallel_map: the same bits at any thread count), in order.
template <class F>
std::vector<DiniRow> grid_rows(std::uint64_t seed, std::uint64_t family, F&& f) {
  constexpr long per_n = 3L * 5 * kGridConfigs, total = 3 * per_n;
  return parallel_map(total, [&](long i) {
    const int ni = static_cast<int>(i / per_n), di = static_cast<int>(i / (5L * kGridConfigs) % 3),
              bi = static_cast<int>(i / kGridConfigs % 5), cfg = static_cast<int>(i % kGridConfigs);
    const int n = kGridN[ni], d = kGridD[di];
    const AttentionParams P = grid_params(d, kGridBeta[bi]);
    Rng rng(seed, {family, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(d), static_cast<std::uint64_t>(bi),
                   static_cast<std::uint64_t>(cfg)});
    return f(n, d, P, cfg, rng);
  });
}

// One grid row from the formula (f) and direct (r) Dini values at c0 = f.value.
DiniRow grid_row(const char* family, int n, int d, const AttentionParams& P, int cfg, const DiniValue& f,
                 const DiniValue& r) {
  DiniRow row;
  row.family = family;
  row.n = n;
  row.d = d;
  row.beta = P.beta;
  row.config = cfg;
  row.c0 = row.value = f.value;
  row.residual_formula = f.residual;
  row.residual_direct = r.residual;
  row.active = f.active;
  return row;
}

}  // namespace

DiniGrid nonobtuse_grid(std::uint64_t seed) {
  DiniGrid g;
  g.rows = grid_rows(seed, 1, [&](int n, int d, const AttentionParams& P, int cfg, Rng& rng) {
    const Tokens X = acute_state(rng, n, d);
    const DiniValue f = nonobtuse_dini_c5(P, X, 0.0), r = nonobtuse_dini_direct(P, X, 0.0);
    return grid_row("nonobtuse", n, d, P, cfg, f, r);
  });
  finish(g);
  return g;
}

DiniGrid hemisphere_grid(std::uint64_t seed) {
  DiniGrid g;
  g.rows = grid_rows(seed, 2, [&](int n, int d, const AttentionParams& P, int cfg, Rng& rng) {
    const bool boundary = cfg % 2 == 1;
    const HemisphereState s = hemisphere_state(rng, n, d, boundary);
    // Exact ties only (the boundary token's h = 0 is exact): tol = 0.
    const DiniValue f = hemisphere_dini_c3(P, s.X, s.w, 0.0), r = hemisphere_dini_direct(P, s.X, s.w, 0.0);
    DiniRow row = grid_row("hemisphere", n, d, P, cfg, f, r);
    row.variant = boundary ? "boundary" : "interior";
    row.expected_active = boundary ? 1 : -1;
    return row;
  });
  finish(g);
  return g;
}

DiniGrid equiangular_grid(std::uint64_t seed) {
  const int ns[] = {3, 5, 7};
  const double c0s[] = {0.0, 1e-12, 1e-6, 0.1, 0.5};
  const double betas[] = {0.0, 2.0, 8.0, 16.0};
  DiniGrid g;
  g.rows = parallel_map(3L * 2 * 5 * 4, [&](long i) {
    const int n = ns[i / 40], orient = static_cast<int>(i / 20 % 2), ci = static_cast<int>(i / 4 % 5);
    const double beta = betas[i % 4];
    const int d = n + 1;
    const AttentionParams P = grid_params(d, beta);
    const bool rotated = orient == 1;
    const Tokens X = rotated ? equiangular_rotated(n, c0s[ci], seed) : equiangular_state(n, c0s[ci]);
    // Plane-aligned: every Gram entry is the same bits (exact tie, tol = 0). Rotated: the tie
    // is exact in real arithmetic only and rounding spreads it over a few ulp.
    const double tol = rotated ? kNearTieTol : 0.0;
    const DiniValue f = nonobtuse_dini_c5(P, X, tol), r = nonobtuse_dini_direct(P, X, tol);
    DiniRow row;
    row.family = "equiangular";
    row.variant = rotated ? "rotated" : "plane-aligned";
    row.n = n;
    row.d = d;
    row.beta = beta;
    row.config = ci;
    row.c0 = c0s[ci];
    row.value = f.value;
    row.residual_formula = f.residual;
    row.residual_direct = r.residual;
    row.active = std::min(f.active, r.active);
    row.expected_active = n * (n - 1) / 2;
    row.tol = tol;
    return row;
  });
  finish(g);
  return g;
}

DiniGrid sphere_dini_grids(std::uint64_t seed) {
  DiniGrid g;
  for (DiniGrid part : {nonobtuse_grid(seed), hemisphere_grid(seed), equiangular_grid(seed)})
    g.rows.insert(g.rows.end(), part.rows.begin(), part.rows.end());
  finish(g);
  return g;
}

// ---- Fig. 4d ----

std::vector<SlowModeFit> multifrequency_rate_fits(const SlowModeOptions& opt, const std::vector<int>& which) {
  const double energies[] = {0.0, 0.25, 0.5, 0.75, 1.0};
  std::vector<int> idx = which;
  if (idx.empty()) idx = {0, 1, 2, 3, 4};
  AttentionParams P;
  P.d = 4;
  P.beta = 4.0;
  P.freqs = {1.0, 0.01};
  for (int k : idx)
    if (k < 0 || k > 4) throw InputError(fmt::format("multifrequency_rate_fits: index {}; expected 0..4", k));
  // The fits are independent: on every core, one fit per thread (the same bits at any thread count).
  return parallel_map(static_cast<long>(idx.size()), [&](long i) {
    const double a = energies[idx[static_cast<std::size_t>(i)]];
    SlowModeFit f = slow_mode_fit(P, 16, consensus_point({a, 1.0 - a}), opt);
    f.energy_high = a;
    return f;
  });
}

}  // namespace tokdyn::rope
