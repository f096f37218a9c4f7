#pragma once
// Matrix norms and fits used across the analyses and presets, defined once (src/core/norms.cpp): core, so that models (the hierarchical one) may use them too.
#include <Eigen/Core>
#include <vector>

namespace tokdyn {

/// Spectral norm ||A||_2 (largest singular value: Eigen's two-sided Jacobi SVD, its divide-and-conquer SVD
/// from 64 rows and columns on); 0 for an empty matrix.
double spectral_norm(const Eigen::MatrixXd& A);

/// Least-squares slope of log y against log x over all entries (x, y > 0 expected; NaN when fewer
/// than two points or all x equal).
double loglog_slope(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace tokdyn
