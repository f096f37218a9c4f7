#pragma once
// Synthetic generator families for cocycle tests and presets (coupling paper, Thm 5 and (A4)/(A5)
// at the G-level; the families themselves are tokdyn's, the paper has no experiments). Every
// family returns the layer maps B(l) = I + A(l), l = 0..L-1, as dense d x d matrices; random
// objects come from tokdyn::Rng streams named (seed, family tag, ...).
#include <cstdint>
#include <string>
#include <vector>

#include "tokdyn/analysis/cocycle.hpp"

namespace tokdyn::cocycle {

/// G1 weight-tied: A = S diag(sigma) S^{-1}, S = Q1 diag(s) Q2 with random orthogonal Q1, Q2 and
/// singular values s geometric from 1 to 1/kappa (kappa(S) = kappa). Spectrum {|1 + sigma_i|}.
std::vector<Matrix> family_g1(long L, const std::vector<double>& sigma, double kappa, std::uint64_t seed);
/// The matrix S of family_g1 (same seed and kappa), for spectral projector norms.
Matrix family_g1_basis(long d, double kappa, std::uint64_t seed);

/// G2 looped LTI (§2.4, C.1): I + A = Abar = diag(exp(-exp(a_i))), a_i uniform in [a_lo, a_hi].
std::vector<Matrix> family_g2(long L, long d, double a_lo, double a_hi, std::uint64_t seed);
/// The diagonal of Abar used by family_g2.
Eigen::VectorXd family_g2_diagonal(long d, double a_lo, double a_hi, std::uint64_t seed);

/// G3 upper-triangular non-autonomous: diagonal i takes the levels lo_i = base_i (1 - amp) and
/// hi_i = base_i (1 + amp) in mode "constant" (base_i), "periodic" (period/2 layers of each) or
/// "switching" (runs of length run0, 2 run0, 4 run0, ... alternating hi, lo); strictly upper
/// entries uniform in [-b, b] (non-normal coupling). The dichotomy spectrum is the union of the
/// scalar Bohl intervals of the diagonals (known exactly).
std::vector<Matrix> family_g3(long L, const std::vector<double>& base, const std::string& mode, double amp, long period,
                              long run0, double b, std::uint64_t seed);

/// G4 sector-structured, paper form: B(l) = I + M(l) + lambda V(l), M(l) = R(l) diag(m) R(l)^T,
/// V(l) = R(l) diag(v) R(l)^T, R(l) = exp(omega l K) with K a random skew-symmetric matrix of
/// unit 2-norm (a slow rotation; omega = 0: constant).
std::vector<Matrix> family_g4(long L, const std::vector<double>& m, const std::vector<double>& v, double lambda,
                              double omega, std::uint64_t seed);

/// G5 random depth-varying: A(l) = A_0 + delta E(l), A_0 = scale G / sqrt(d) (G Gaussian), E(l)
/// Gaussian / sqrt(d), i.i.d. per layer (smooth = 0) or piecewise-linear between i.i.d. draws
/// every `smooth` layers.
std::vector<Matrix> family_g5(long L, long d, double scale, double delta, long smooth, std::uint64_t seed);

/// R9 non-normal pair: B1 = [[0.5, 2], [0, 0.5]] and B2 = [[0.5, 0], [2, 0.5]] alternating
/// (layer 0 is B1). Each has spectral radius 0.5; the cocycle's growth scale is sqrt(rho(B2 B1)).
std::vector<Matrix> nonnormal_pair(long L);

/// R10(c) scalar switching: a(l) = hi on runs of length run0, lo on 2 run0, hi on 4 run0, ...
/// (1 x 1 matrices). The Sacker–Sell spectrum of the infinite sequence is [lo, hi].
std::vector<Matrix> switching_scalar(long L, double lo, double hi, long run0);


}  // namespace tokdyn::cocycle
