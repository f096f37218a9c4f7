#pragma once
// The unit sphere S^{d-1}: projection pi, tangent projection, product geodesic distance.
// (The Attention Within, §II-D: pi(x) = x/|x|, T_x pi X = |x|^{-1}(I - x x^T/|x|^2) X.)
#include "tokdyn/core/tokens.hpp"

namespace tokdyn {

/// pi applied to every row of Z (rows of norm zero are left unchanged).
void project_rows(Eigen::Ref<Tokens> Z);

/// T_x pi . X = |x|^{-1} (I - x x^T |x|^{-2}) X, for any non-zero x.
Vec tangent_map(const Vec& x, const Vec& X);

/// Projects each row of V onto the tangent space at the matching (unit) row of Z:
/// V_i <- (I - z_i z_i^T) V_i.
void tangent_project_rows(const Tokens& Z, Tokens& V);

/// The derivative of the retraction pi(u) = u/|u| applied to w, in place:
/// Dpi(u)[w] = (w - pi <pi, w>)/|u|, given pi = u/|u| and nu = |u| > 0.
inline void retraction_derivative(const Eigen::Ref<const RowVec>& pi, double nu, Eigen::Ref<RowVec> w) {
  w = (w - pi.dot(w) * pi) / nu;
}

/// Dpi(u)[w] row by row, in place: row q of W is taken at row q mod U.rows() of U (the state before
/// the retraction; W may hold several tangents per state row). Rows of U of norm 0 leave W's rows
/// as they are (project_rows leaves a zero row unchanged, so its derivative there is the identity).
void retraction_derivative_rows(const Tokens& U, Tokens& W);

/// Geodesic distance arccos<x, y> between unit vectors, in the atan2 form (accurate for nearly
/// equal and nearly antipodal points alike).
double geodesic(const Eigen::Ref<const RowVec>& x, const Eigen::Ref<const RowVec>& y);

/// Product-metric geodesic distance on (S^{d-1})^n: sqrt(sum_i arccos(<z_i, z'_i>)^2).
double geodesic_distance(const Tokens& A, const Tokens& B);

/// Largest deviation | |z_i| - 1 | over the rows.
double max_norm_deviation(const Tokens& Z);

}  // namespace tokdyn
