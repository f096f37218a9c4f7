#pragma once
// The attention templates of parts.hpp (header-only: they take Eigen block views).
#include <algorithm>
#include <cmath>
#include <limits>

#include <unsupported/Eigen/SpecialFunctions>

namespace tokdyn::parts {

template <class S, class DU, class DG>
void act_block(Act a, const Eigen::ArrayBase<DU>& U, Eigen::ArrayBase<DG> const& G_) {
  auto& G = const_cast<Eigen::ArrayBase<DG>&>(G_);
  switch (a) {
    case Act::Gelu:
      G = S(0.5) * U * (S(1) + (U * S(0.70710678118654752440)).erf());
      return;
    case Act::GeluTanh:
      G = S(0.5) * U * (S(1) + (S(0.79788456080286535588) * (U + S(0.044715) * U.cube())).tanh());
      return;
    case Act::Silu:
      G = U / (S(1) + (-U).exp());
      return;
    case Act::Relu:
      G = U.max(S(0));
      return;
    case Act::Tanh:
      G = U.tanh();
      return;
  }
}

template <class DP, class DS>
void softmax_tangent_rows(const Eigen::MatrixBase<DP>& P, Eigen::MatrixBase<DS> const& dS_, double scale, bool causal) {
  auto& dS = const_cast<Eigen::MatrixBase<DS>&>(dS_);
  const Eigen::Index T = P.rows(), C = P.cols();
  for (Eigen::Index i = 0; i < T; ++i) {
    const Eigen::Index n = causal ? std::min(i + 1, C) : C;
    const auto p = P.row(i).head(n).array();
    auto ds = dS.row(i).head(n).array();
    const double m = (p * ds).sum();
    ds = scale * p * (ds - m);
    dS.row(i).tail(C - n).setZero();
  }
}

template <class S, class DQ, class DK, class DV, class DO>
void attention_head(const Eigen::MatrixBase<DQ>& Q, const Eigen::MatrixBase<DK>& K, const Eigen::MatrixBase<DV>& V, double scale,
                    bool causal, MatT<S>& P, Eigen::MatrixBase<DO> const& O_) {
  auto& O = const_cast<Eigen::MatrixBase<DO>&>(O_);
  const Eigen::Index T = Q.rows();
  P.noalias() = Q * K.transpose();
  const S sc = static_cast<S>(scale);
  for (Eigen::Index i = 0; i < T; ++i) {
    const Eigen::Index n = causal ? i + 1 : T;
    auto row = P.row(i).head(n).array();
    const S mx = row.maxCoeff() * sc;  // sc >= 0 (beta >= 0)
    row = (row * sc - mx).exp();       // vectorised exp
    row *= S(1) / row.sum();
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
  softmax_tangent_rows(P, dS, scale, causal);
  dO.noalias() = dS * V;
  dO.noalias() += P * dV;
}

}  // namespace tokdyn::parts
