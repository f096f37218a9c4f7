#include "tokdyn/core/sphere.hpp"

#include <algorithm>
#include <cmath>

namespace tokdyn {

void project_rows(Eigen::Ref<Tokens> Z) {
  for (Eigen::Index i = 0; i < Z.rows(); ++i) {
    const double nrm = Z.row(i).norm();
    if (nrm > 0.0) Z.row(i) /= nrm;
  }
}

Vec tangent_map(const Vec& x, const Vec& X) {
  const double n2 = x.squaredNorm();
  const double nrm = std::sqrt(n2);
  return (X - x * (x.dot(X) / n2)) / nrm;
}

void tangent_project_rows(const Tokens& Z, Tokens& V) {
  for (Eigen::Index i = 0; i < Z.rows(); ++i) V.row(i) -= Z.row(i).dot(V.row(i)) * Z.row(i);
}

void retraction_derivative_rows(const Tokens& U, Tokens& W) {
  const Eigen::Index n = U.rows();
  for (Eigen::Index i = 0; i < n; ++i) {
    const double nu = U.row(i).norm();
    if (nu == 0.0) continue;
    const RowVec pi = U.row(i) / nu;
    for (Eigen::Index q = i; q < W.rows(); q += n) retraction_derivative(pi, nu, W.row(q));
  }
}

// d_g(x, y) = arccos<x, y> = atan2(|x - <x, y> y|, <x, y>) on S^{d-1}: The Attention Within §II-D, RoPE paper Cor. 6.5.
double geodesic(const Eigen::Ref<const RowVec>& x, const Eigen::Ref<const RowVec>& y) {
  const double c = x.dot(y);
  const double s = (x - c * y).norm();
  return std::atan2(s, c);
}

double geodesic_distance(const Tokens& A, const Tokens& B) {
  double s = 0.0;
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    const double th = geodesic(A.row(i), B.row(i));
    s += th * th;
  }
  return std::sqrt(s);
}

double max_norm_deviation(const Tokens& Z) {
  double m = 0.0;
  for (Eigen::Index i = 0; i < Z.rows(); ++i) m = std::max(m, std::abs(Z.row(i).norm() - 1.0));
  return m;
}

}  // namespace tokdyn
