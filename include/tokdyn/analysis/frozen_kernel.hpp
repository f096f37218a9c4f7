#pragma once
// The frozen attention kernel of Thm 3(1) of the coupling paper: at a homogeneous state X* = 1 x*^T
// every causal score row is constant, so alpha*_ts = 1/t (s <= t), for any W_Q, W_K, x* and
// temperature. Block-local (C1): alpha*_blk = I_K ⊗ alpha*_P (last block possibly partial).
//
// Eigen-structure in closed form (no eigensolver, never a float eigen-decomposition):
//   eigenvalues 1/j; right eigenvectors w_j(t) = binom(t-1, j-1): W is the lower Pascal matrix;
//   W^{-1}_tj = (-1)^{t-j} binom(t-1, j-1); pi_1 = e_1 (Remark 2: the head token).
// Head/difference coordinates: the sector-1 coefficient of dX is its head token dx_1; the
// fluctuation is dX - 1 dx_1^T; the differences D_t = dx_t - dx_1 (t = 2..n) evolve under the kernel
// alpha^_ts = 1/t for 2 <= s <= t (eigenvalues 1/2..1/n).
#include <cstdint>
#include <vector>

#include "tokdyn/core/tokens.hpp"

namespace tokdyn::fk {

/// Largest n for the exact int64 Pascal basis (binom(63, 31) < 2^63); larger n: std::invalid_argument.
inline constexpr int kMaxExactN = 64;

/// alpha*_n: (alpha*)_ts = 1/t for s <= t (1-based), else 0.
Mat alpha_star(int n);
/// I_K ⊗ alpha*_P on T tokens, K = ceil(T/P), the last block of length T - (K-1)P.
Mat alpha_star_block(int T, int P);
/// Exact Pascal eigenbasis W_tj = binom(t-1, j-1) (row-major n x n, int64) and its inverse.
std::vector<std::int64_t> pascal(int n);
std::vector<std::int64_t> pascal_inverse(int n);
/// The same as doubles (exact while the entries are below 2^53, i.e. n <= 57).
Mat pascal_matrix(int n);
Mat pascal_inverse_matrix(int n);
/// kappa_alpha = ||W_n||_2 ||W_n^{-1}||_2 for the column-normalised W_n = W diag(1/|w_j|); the inverse
/// is taken exactly from the integers (diag(|w_j|) W^{-1}), so no ill-conditioned solve is done.
double kappa_alpha(int n);
/// ||(alpha*_n)^m - 1 e_1^T||_2 (mixing towards the head token).
double mixing_distance(int n, int m);
/// The asymptotic constant ||w_2|| ||pi_2|| = sqrt(n(n-1)(2n-1)/3): the distance is ~ 2^{-m} times it.
double mixing_constant(int n);
/// Head token (sector-1 coefficient) and fluctuation dX - 1 dx_1^T of each block of length P.
Mat head_tokens(const Mat& dX, int P);
Mat fluctuation(const Mat& dX, int P);
/// alpha^ of the difference dynamics: (n-1) x (n-1), rows/columns t, s = 2..n, entries 1/t for s <= t.
Mat difference_kernel(int n);

}  // namespace tokdyn::fk
