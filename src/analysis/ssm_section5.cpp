#include "tokdyn/analysis/ssm_section5.hpp"

#include <Eigen/QR>
#include <Eigen/SVD>
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "ssm_internal.hpp"

namespace tokdyn {

// =============================================================================================
// Section V

double anisotropy_numerator(const Mat& S_BC, int mu, CstarNorm norm) {
  const int n = static_cast<int>(S_BC.rows());
  check_mu(mu, n, "anisotropy_numerator");
  if (norm == CstarNorm::Column) {
    Vec col = S_BC.col(mu);  // ||P_perp S_BC e^mu~||: all that Prop V.1's proof uses
    col[mu] = 0.0;
    return col.norm();
  }
  const Mat A = S_BC - S_BC(mu, mu) * Mat::Identity(n, n);  // S_BC - ((e^mu~)^T S_BC e^mu~) I_n
  if (norm == CstarNorm::Frobenius) return A.norm();
  Eigen::JacobiSVD<Mat> svd(A);
  return svd.singularValues()(0);
}

double kernel_lambda_min(const Mat& S_BC) {
  Vec lam;
  Mat V;
  symmetric_eigen(symmetric_part(S_BC), lam, V, false);
  return lam[0];
}

double kernel_lambda_min(const SsmParams& p) {
  const Eigen::Index n = p.S_B.cols(), m = p.S_B.rows();
  if (2 * m >= n) return kernel_lambda_min(p.S_BC());
  Mat W(n, 2 * m);
  W << p.S_C.transpose(), p.S_B.transpose();
  const Eigen::HouseholderQR<Mat> qr(W);
  const Mat R = qr.matrixQR().topRows(2 * m).triangularView<Eigen::Upper>();
  // R J: J swaps the two column halves and halves them.
  Mat RJ(2 * m, 2 * m);
  RJ.leftCols(m) = 0.5 * R.rightCols(m);
  RJ.rightCols(m) = 0.5 * R.leftCols(m);
  const Mat K = RJ * R.transpose();
  Vec lam;
  Mat V;
  symmetric_eigen(symmetric_part(K), lam, V, false);
  return std::min(lam[0], 0.0);  // and the n - 2m zero eigenvalues on the complement of W's range
}

double c_eff_paper(double c_star, double lambda_max, double lambda_min, double gamma, int len) {
  const double l1 = len - 1.0;
  if (std::isinf(c_star)) return len >= 2 ? 1.0 / l1 : kInf;
  // §V item 4: c_star lambda_max / sqrt((gamma + (l-1) lambda_min)^2 + c_star^2 lambda_max^2 (l-1)^2)
  const double a = gamma + l1 * lambda_min, b = c_star * lambda_max * l1;
  return c_star * lambda_max / std::sqrt(a * a + b * b);
}

double c_eff_proof(double c_star, double lambda_max, double lambda_min, double gamma, int len) {
  if (std::isinf(c_star)) return len >= 2 ? 1.0 : kInf;
  return (len - 1.0) * c_eff_paper(c_star, lambda_max, lambda_min, gamma, len);  // erratum E1
}

double prop_v1_beta(double c, double c_star, double gamma, double lambda_min, double lambda_max, int i) {
  // Prop V.1 (35): beta = c (gamma + (i-1) lambda_min) - c_star lambda_max (i-1) sqrt(1 - c^2)
  return c * (gamma + (i - 1.0) * lambda_min) - c_star * lambda_max * (i - 1.0) * std::sqrt((1.0 - c) * (1.0 + c));
}

double prop_v1_kappa(double alpha_pd, double beta, double c) { return alpha_pd * beta * (1.0 + c); }  // kappa = alpha beta (1+c)

AnisotropyConstants anisotropy(const std::vector<SsmParams>& samples, const SpectralConstants& k, CstarNorm norm) {
  if (samples.empty()) throw std::invalid_argument("anisotropy: no samples");
  AnisotropyConstants a;
  a.alpha_pd = kInf;
  for (const auto& p : samples) {
    const Mat S = p.S_BC();
    a.numerator = std::max(a.numerator, anisotropy_numerator(S, k.mu_tilde, norm));
    a.alpha_pd = std::min(a.alpha_pd, kernel_lambda_min(S));
  }
  // c_star = sup_t ||S_BC - S_ee I|| / inf_{t,z} z^T S_BC z (§V item 1); +inf when V.1 fails.
  a.c_star = a.alpha_pd > 0.0 ? a.numerator / a.alpha_pd : kInf;
  a.c_eff = c_eff_paper(a.c_star, k.lambda_max, k.lambda_min, k.gamma, k.len);
  a.c_eff_proof = c_eff_proof(a.c_star, k.lambda_max, k.lambda_min, k.gamma, k.len);
  return a;
}

}  // namespace tokdyn
