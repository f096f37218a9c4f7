// Frozen kernel utilities (coupling paper Thm 3(1), Remark 2; the Pascal eigenbasis in integers).
#include "tokdyn/analysis/frozen_kernel.hpp"
#include "tokdyn/core/norms.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

namespace tokdyn::fk {

namespace {

void check_n(int n, int max_n, const char* what) {
  if (n < 1 || n > max_n) throw std::invalid_argument(fmt::format("{}: n = {}, expected 1 <= n <= {}", what, n, max_n));
}

}  // namespace

Mat alpha_star(int n) {
  check_n(n, 1 << 20, "alpha_star");
  Mat A = Mat::Zero(n, n);
  for (int t = 0; t < n; ++t) A.row(t).head(t + 1).setConstant(1.0 / (t + 1));
  return A;
}

Mat alpha_star_block(int T, int P) {
  if (T < 1 || P < 1) throw std::invalid_argument(fmt::format("alpha_star_block: T = {}, P = {}; expected both >= 1", T, P));
  Mat A = Mat::Zero(T, T);
  for (int b = 0; b < T; b += P) {
    const int n = std::min(P, T - b);
    A.block(b, b, n, n) = alpha_star(n);
  }
  return A;
}

std::vector<std::int64_t> pascal(int n) {
  check_n(n, kMaxExactN, "pascal (exact int64 basis)");
  std::vector<std::int64_t> W(static_cast<std::size_t>(n) * n, 0);
  auto at = [&](int t, int j) -> std::int64_t& { return W[static_cast<std::size_t>(t) * n + j]; };
  for (int t = 0; t < n; ++t) {
    at(t, 0) = 1;
    for (int j = 1; j <= t; ++j) at(t, j) = at(t - 1, j - 1) + (j <= t - 1 ? at(t - 1, j) : 0);  // Pascal's rule
  }
  return W;
}

std::vector<std::int64_t> pascal_inverse(int n) {
  std::vector<std::int64_t> W = pascal(n);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j <= t; ++j)
      if ((t - j) % 2) W[static_cast<std::size_t>(t) * n + j] = -W[static_cast<std::size_t>(t) * n + j];
  return W;
}

Mat pascal_matrix(int n) {
  const auto W = pascal(n);
  Mat M(n, n);
  for (std::size_t i = 0; i < W.size(); ++i) M.data()[i] = static_cast<double>(W[i]);
  return M;
}

Mat pascal_inverse_matrix(int n) {
  const auto W = pascal_inverse(n);
  Mat M(n, n);
  for (std::size_t i = 0; i < W.size(); ++i) M.data()[i] = static_cast<double>(W[i]);
  return M;
}

double kappa_alpha(int n) {
  const Mat W = pascal_matrix(n), Wi = pascal_inverse_matrix(n);
  const Vec c = W.colwise().norm().transpose();
  const Mat Wn = W * c.cwiseInverse().asDiagonal();
  const Mat Wni = c.asDiagonal() * Wi;  // (W diag(1/c))^{-1} = diag(c) W^{-1}
  return spectral_norm(Wn) * spectral_norm(Wni);
}

double mixing_distance(int n, int m) {
  if (m < 0) throw std::invalid_argument(fmt::format("mixing_distance: m = {}, expected >= 0", m));
  const Mat A = alpha_star(n);
  Mat P = Mat::Identity(n, n);
  for (int i = 0; i < m; ++i) P = (A * P).eval();
  P.col(0).array() -= 1.0;
  return spectral_norm(P);
}

double mixing_constant(int n) {
  const double x = static_cast<double>(n);
  return std::sqrt(x * (x - 1.0) * (2.0 * x - 1.0) / 3.0);
}

Mat head_tokens(const Mat& dX, int P) {
  if (P < 1) throw std::invalid_argument(fmt::format("head_tokens: P = {}, expected >= 1", P));
  const int T = static_cast<int>(dX.rows()), K = (T + P - 1) / P;
  Mat H(K, dX.cols());
  for (int k = 0; k < K; ++k) H.row(k) = dX.row(static_cast<Eigen::Index>(k) * P);
  return H;
}

Mat fluctuation(const Mat& dX, int P) {
  if (P < 1) throw std::invalid_argument(fmt::format("fluctuation: P = {}, expected >= 1", P));
  Mat F = dX;
  for (Eigen::Index t = 0; t < dX.rows(); ++t) F.row(t) -= dX.row((t / P) * P);
  return F;
}

Mat difference_kernel(int n) {
  check_n(n, 1 << 20, "difference_kernel");
  Mat A = Mat::Zero(n - 1, n - 1);
  for (int i = 0; i < n - 1; ++i) A.row(i).head(i + 1).setConstant(1.0 / (i + 2));  // row t = i + 2
  return A;
}

}  // namespace tokdyn::fk
