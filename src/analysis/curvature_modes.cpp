// Slow-mode / fast-mode blocks of generator perturbations (analysis/curvature_modes.hpp).
#include "tokdyn/analysis/curvature_modes.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include <Eigen/Eigenvalues>

namespace tokdyn::cocycle {

/// ||M||_2 as sqrt(lambda_max(M^T M)) (a symmetric eigensolver: much faster than a Jacobi SVD at the
/// sizes of a model's state, hundreds; accurate to round-off relative to ||M||_2).
double curvature_modes_norm2(const Matrix& M) {
  if (M.size() == 0) return 0.0;
  const Matrix G = M.transpose() * M;
  const Eigen::SelfAdjointEigenSolver<Matrix> es(G, Eigen::EigenvaluesOnly);
  return std::sqrt(std::max(0.0, es.eigenvalues().maxCoeff()));
}

Matrix ones_complement(long tokens, long d) {
  if (tokens < 1 || d < 2) throw std::invalid_argument(fmt::format("ones_complement: tokens = {}, d = {}; expected >= 1, >= 2", tokens, d));
  // Householder reflection H = I - 2 w w^T / (w^T w) with w = 1/sqrt(d) - e_0 maps e_0 to 1/sqrt(d):
  // its columns 1..d-1 are orthonormal and orthogonal to 1_d.
  Eigen::VectorXd w = Eigen::VectorXd::Constant(d, 1.0 / std::sqrt(static_cast<double>(d)));
  w(0) -= 1.0;
  const Matrix H = Matrix::Identity(d, d) - 2.0 * w * w.transpose() / w.squaredNorm();
  const Matrix C = H.rightCols(d - 1);
  Matrix Q = Matrix::Zero(tokens * d, tokens * (d - 1));
  for (long t = 0; t < tokens; ++t) Q.block(t * d, t * (d - 1), d, d - 1) = C;
  return Q;
}

double ones_kernel_residual(const std::vector<Matrix>& A, long tokens, long d) {
  double worst = 0.0;
  const double u = 1.0 / std::sqrt(static_cast<double>(d));
  for (const Matrix& M : A) {
    if (M.rows() != tokens * d || M.cols() != tokens * d)
      throw std::invalid_argument(fmt::format("ones_kernel_residual: a {} x {} generator; expected {} x {}", M.rows(), M.cols(), tokens * d, tokens * d));
    const double scale = std::max(M.norm(), std::numeric_limits<double>::min());
    for (long t = 0; t < tokens; ++t) worst = std::max(worst, (M.middleCols(t * d, d).rowwise().sum() * u).norm() / scale);
  }
  return worst;
}

BlockSplit split_blocks(const std::vector<Matrix>& dA, const std::vector<Matrix>& P_plus) {
  if (dA.empty() || P_plus.size() != dA.size() + 1)
    throw std::invalid_argument(fmt::format("split_blocks: {} perturbations and {} projectors; expected L >= 1 and L + 1", dA.size(), P_plus.size()));
  BlockSplit s;
  const long n = dA[0].rows();
  for (std::size_t l = 0; l < dA.size(); ++l) {
    const Matrix& E = dA[l];
    const Matrix& Pin = P_plus[l];
    const Matrix& Pout = P_plus[l + 1];
    if (E.rows() != n || E.cols() != n || Pin.rows() != n || Pin.cols() != n || Pout.rows() != n || Pout.cols() != n)
      throw std::invalid_argument("split_blocks: every perturbation and projector must be n x n");
    const Matrix Ep = E * Pin, Em = E - Ep;       // dA P_+(l), dA P_-(l)
    const Matrix PpEp = Pout * Ep, PpEm = Pout * Em;
    s.pp += PpEp.squaredNorm();
    s.pm += PpEm.squaredNorm();
    s.mp += (Ep - PpEp).squaredNorm();
    s.mm += (Em - PpEm).squaredNorm();
    s.fast_range += (E - Pout * E).squaredNorm();
    s.total += E.squaredNorm();
  }
  if (!(s.total > 0.0)) throw std::invalid_argument("split_blocks: the perturbation is zero on the window");
  return s;
}

ProjectorResiduals projector_residuals(const Cocycle& c, const Bundles& b) {
  ProjectorResiduals r;
  const long n = c.dim();
  const Matrix I = Matrix::Identity(n, n);
  for (std::size_t j = 0; j < b.P_plus.size(); ++j) {
    const Matrix& P = b.P_plus[j];
    const Matrix M = I - P;
    const double np = curvature_modes_norm2(P);
    r.p_plus_norm.push_back(np);
    const double scale = std::max(np, std::numeric_limits<double>::min());
    const double idem = b.k == 0 ? 0.0 : curvature_modes_norm2(P * P - P) / scale;
    r.idempotence_l.push_back(idem);
    r.idempotence = std::max(r.idempotence, idem);
    if (b.k > 0) r.complement = std::max(r.complement, (curvature_modes_norm2(P * M) + curvature_modes_norm2(M * P)) / scale);
    r.sum = std::max(r.sum, curvature_modes_norm2(P + M - I));
    r.trace = std::max(r.trace, std::abs(P.trace() - static_cast<double>(b.k)));
    // invariance over the layers of the window the projectors cover
    const long l = b.first + static_cast<long>(j);
    if (j + 1 < b.P_plus.size() && l >= 0 && l < c.length()) {
      const Matrix B = c.matrix(l);
      const double inv = b.k == 0 ? 0.0 : curvature_modes_norm2(b.P_plus[j + 1] * B - B * P) / (curvature_modes_norm2(B) * scale);
      r.invariance_l.push_back(inv);
      r.invariance = std::max(r.invariance, inv);
    }
  }
  return r;
}

}  // namespace tokdyn::cocycle
