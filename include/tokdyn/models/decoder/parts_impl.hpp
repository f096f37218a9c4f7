#pragma once
// The attention templates of parts.hpp (header-only: they take Eigen block views).
#include <algorithm>
#include <cmath>
#include <limits>

namespace tokdyn::decoder {

template <class S, class DQ, class DK, class DV, class DO>
void attention_head(const Eigen::MatrixBase<DQ>& Q, const Eigen::MatrixBase<DK>& K, const Eigen::MatrixBase<DV>& V, double scale,
                    bool causal, MatT<S>& P, Eigen::MatrixBase<DO> const& O_) {
  auto& O = const_cast<Eigen::MatrixBase<DO>&>(O_);
  const Eigen::Index T = Q.rows();
  P.noalias() = Q * K.transpose();
  const S sc = static_cast<S>(scale);
  for (Eigen::Index i = 0; i < T; ++i) {
    const Eigen::Index n = causal ? i + 1 : T;
    S mx = -std::numeric_limits<S>::infinity();
    for (Eigen::Index j = 0; j < n; ++j) mx = std::max(mx, P(i, j) * sc);
    S sum = 0;
    for (Eigen::Index j = 0; j < n; ++j) {
      const S e = std::exp(P(i, j) * sc - mx);
      P(i, j) = e;
      sum += e;
    }
    const S inv = S(1) / sum;
    for (Eigen::Index j = 0; j < n; ++j) P(i, j) *= inv;
    for (Eigen::Index j = n; j < T; ++j) P(i, j) = 0;
  }
  O.noalias() = P * V;
}

template <class DQ, class DK, class DV, class DdQ, class DdK, class DdV, class DO>
void attention_head_tangent(const Eigen::MatrixBase<DQ>& Q, const Eigen::MatrixBase<DK>& K, const Eigen::MatrixBase<DV>& V,
                            const Mat& P, const Eigen::MatrixBase<DdQ>& dQ, const Eigen::MatrixBase<DdK>& dK,
                            const Eigen::MatrixBase<DdV>& dV, double scale, bool causal, Eigen::MatrixBase<DO> const& dO_) {
  auto& dO = const_cast<Eigen::MatrixBase<DO>&>(dO_);
  const Eigen::Index T = Q.rows();
  Mat dS(T, T);
  dS.noalias() = dQ * K.transpose();
  dS.noalias() += Q * dK.transpose();
  for (Eigen::Index i = 0; i < T; ++i) {
    const Eigen::Index n = causal ? i + 1 : T;
    double m = 0;
    for (Eigen::Index j = 0; j < n; ++j) m += P(i, j) * dS(i, j);
    for (Eigen::Index j = 0; j < n; ++j) dS(i, j) = scale * P(i, j) * (dS(i, j) - m);
    for (Eigen::Index j = n; j < T; ++j) dS(i, j) = 0;
  }
  dO.noalias() = dS * V;
  dO.noalias() += P * dV;
}

}  // namespace tokdyn::decoder
