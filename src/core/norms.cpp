#include "tokdyn/core/norms.hpp"

#include <Eigen/SVD>
#include <cmath>
#include <limits>

namespace tokdyn {

double spectral_norm(const Eigen::MatrixXd& A) {
  if (A.size() == 0) return 0.0;
  return Eigen::JacobiSVD<Eigen::MatrixXd>(A).singularValues()(0);
}

double loglog_slope(const std::vector<double>& x, const std::vector<double>& y) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double lx = std::log(x[i]), ly = std::log(y[i]);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  const double den = n * sxx - sx * sx;
  if (x.size() < 2 || !(den != 0)) return std::numeric_limits<double>::quiet_NaN();
  return (n * sxy - sx * sy) / den;
}

}  // namespace tokdyn
