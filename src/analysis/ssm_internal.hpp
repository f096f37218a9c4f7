#pragma once
// Helpers shared by the "The Attention Within" (arXiv 2609.17997) analyses in src/analysis/ssm_*.cpp:
// the principal-channel range check and the symmetric eigensolver behind Lemma III.1's caps
// (Assumption IV.1) and Assumption V.1's lambda_min. Internal to src/analysis (not installed);
// internal linkage, one copy per translation unit, as when they lived in one file.
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokdyn/core/tokens.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/core/symmetric_eigen.hpp"

namespace tokdyn {

namespace {

using tokdyn::kInf;
using tokdyn::kNaN;
[[maybe_unused]] void check_mu(int mu, int n, const char* who) {
  if (mu < 0 || mu >= n) throw std::invalid_argument(std::string(who) + ": principal channel out of range");
}

[[maybe_unused]] Mat symmetric_part(const Mat& S) { return 0.5 * (S + S.transpose()); }

/// Eigen-decomposition of a symmetric matrix, eigenvalues ascending: LAPACK (symmetric_eigen.hpp)
/// above n = 48; small matrices (n <= 48) by
/// cyclic Jacobi rotations: Eigen's tridiagonalisation calls BLAS dsymv under EIGEN_USE_BLAS, and
/// the OpenMP build of OpenBLAS forks a thread team for every call, even for 4 x 4 matrices
/// (tens to hundreds of microseconds per solve, more under load).
[[maybe_unused]] void symmetric_eigen(const Mat& S, Vec& lam, Mat& V, bool vectors = true) {
  const Eigen::Index n = S.rows();
  if (n > 48) {
    if (vectors) {
      SymmetricEigen es = lapack_symmetric_eigen(S);
      lam = es.values;
      V = es.vectors;
    } else {
      lam = lapack_symmetric_eigenvalues(S);
    }
    return;
  }
  Eigen::MatrixXd A = S;
  Eigen::MatrixXd Q = Eigen::MatrixXd::Identity(n, n);
  const double scale = std::max(A.norm(), std::numeric_limits<double>::min());
  for (int sweep = 0; sweep < 64; ++sweep) {
    double off = 0.0;
    for (Eigen::Index p = 0; p < n; ++p)
      for (Eigen::Index q = p + 1; q < n; ++q) off += A(p, q) * A(p, q);
    if (std::sqrt(off) <= 1e-17 * scale) break;
    for (Eigen::Index p = 0; p < n; ++p)
      for (Eigen::Index q = p + 1; q < n; ++q) {
        const double apq = A(p, q);
        if (apq == 0.0) continue;
        const double theta = (A(q, q) - A(p, p)) / (2.0 * apq);
        const double t = (theta >= 0.0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        for (Eigen::Index k = 0; k < n; ++k) {  // A <- J^T A J, rotation in the (p, q) plane
          const double akp = A(k, p), akq = A(k, q);
          A(k, p) = c * akp - s * akq;
          A(k, q) = s * akp + c * akq;
        }
        for (Eigen::Index k = 0; k < n; ++k) {
          const double apk = A(p, k), aqk = A(q, k);
          A(p, k) = c * apk - s * aqk;
          A(q, k) = s * apk + c * aqk;
        }
        A(p, q) = A(q, p) = 0.0;
        for (Eigen::Index k = 0; k < n; ++k) {
          const double qkp = Q(k, p), qkq = Q(k, q);
          Q(k, p) = c * qkp - s * qkq;
          Q(k, q) = s * qkp + c * qkq;
        }
      }
  }
  std::vector<Eigen::Index> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](Eigen::Index a, Eigen::Index b) { return A(a, a) < A(b, b); });
  lam.resize(n);
  if (vectors) V.resize(n, n);
  for (Eigen::Index k = 0; k < n; ++k) {
    lam[k] = A(idx[static_cast<std::size_t>(k)], idx[static_cast<std::size_t>(k)]);
    if (vectors) V.col(k) = Q.col(idx[static_cast<std::size_t>(k)]);
  }
}

}  // namespace

}  // namespace tokdyn
