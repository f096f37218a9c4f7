#pragma once
// Lemma IV.1 of "The Attention Within" (arXiv 2609.17997): the positive bias of the SiLU
// kernel, by Monte Carlo over random S_B, S_C and by Gauss-Kronrod quadrature of the moments.
#include <cstdint>
#include <utility>

#include "tokdyn/core/tokens.hpp"

namespace tokdyn {

// =============================================================================================
// Lemma IV.1: positive bias of the SiLU kernel

enum class RandomEntries { Normal, Uniform };
struct SiluBiasEstimate {
  long draws = 0;
  double bilinear_mean = 0, bilinear_se = 0;  ///< z_i^T S_C^T S_B z_j
  double silu_mean = 0, silu_se = 0;          ///< silu(S_C z_i)^T silu(S_B z_j)
};
/// Monte Carlo over independent S_B, S_C (m x n) with iid zero-mean entries of standard
/// deviation `scale` (normal, or uniform on [-sqrt 3 scale, sqrt 3 scale]); seeded per draw.
SiluBiasEstimate silu_bias_monte_carlo(int m, int n, const Vec& zi, const Vec& zj, long draws, RandomEntries dist,
                                       double scale, std::uint64_t seed);
/// E[silu(X)] and E[silu(X)^2] for X ~ N(0, s^2), by Gauss-Kronrod quadrature. With unit z and
/// iid N(0, s^2) entries, E[silu(S_C z_i)^T silu(S_B z_j)] = m E[silu(X)]^2 (Lemma IV.1).
std::pair<double, double> silu_gaussian_moments(double s = 1.0);

}  // namespace tokdyn
