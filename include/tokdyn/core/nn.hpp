#pragma once
// The pointwise maps and normalisations of neural blocks, each written once: SiLU and its
// derivative, the logistic sigmoid, softplus (exact, and PyTorch's thresholded form that Mamba-2's
// dt uses), softmax rows (masked with -inf, and temperature-scaled), and the RMS normaliser with
// its derivative. Every model (SSM, Mamba-2 float engine and double tangents, Transformer, RoPE
// attention) takes them from here; the independent references (analysis/transformer_reference.cpp,
// python/ref_mamba2.py) deliberately do not.
#include <cmath>

#include <Eigen/Core>

#include "tokdyn/core/tokens.hpp"

namespace tokdyn::nn {

/// The logistic function s(x) = 1/(1 + e^{-x}), in the form that does not overflow for either sign.
inline double sigmoid(double x) { return x >= 0.0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }

/// SiLU(x) = x s(x), computed as x / (1 + e^{-x}) (-0 for x -> -inf, never NaN).
inline double silu(double x) { return x / (1.0 + std::exp(-x)); }

/// SiLU of every entry of an Eigen array expression, x / (1 + e^{-x}), with Eigen's vectorised exp
/// (float or double): the forward maps of the SSM and of the fp32 Mamba-2 engine.
template <class A>
auto silu(const Eigen::ArrayBase<A>& x) {
  using S = typename A::Scalar;
  return x.derived() / (S(1) + (-x.derived()).exp());
}

/// SiLU'(x) = s(x) (1 + x (1 - s(x))).
inline double silu_derivative(double x) {
  const double s = sigmoid(x);
  return s * (1.0 + x * (1.0 - s));
}

/// softplus(x) = ln(1 + e^x), exactly and without overflow: max(x, 0) + ln(1 + e^{-|x|}).
inline double softplus(double x) { return x > 0.0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

/// ln(1 + u) of every entry of an Eigen array expression with u >= 0, vectorised (Eigen has no
/// vectorised log1p for double and falls back to libm entry by entry): with w = fl(1 + u),
/// ln(1 + u) = ln w + (u - (w - 1)) / w, the second term the first-order correction for the rounding
/// of 1 + u (w - 1 is exact for u <= 1, Sterbenz); u = 0 or below the rounding of 1 + u gives u.
/// Within 3 ulp of libm's log1p on u in [0, 1] (test).
template <class A>
auto log1p_nonneg(const Eigen::ArrayBase<A>& u) {
  using S = typename A::Scalar;
  const auto w = u.derived() + S(1);
  return w.log() + (u.derived() - (w - S(1))) / w;
}

/// softplus of every entry of an Eigen array expression, in the same overflow-free form with
/// Eigen's vectorised exp and log1p_nonneg (within 3 ulp of the scalar softplus; below
/// x = -708 Eigen's exp stops at its smallest normal result, so softplus(x) <= 2.3e-308 there
/// instead of the subnormal or zero).
template <class A>
auto softplus(const Eigen::ArrayBase<A>& x) {
  using S = typename A::Scalar;
  return x.derived().max(S(0)) + log1p_nonneg((-x.derived().abs()).exp());
}

/// PyTorch's softplus with threshold 20 (Mamba-2's dt = softplus(dt_raw + dt_bias)): x above 20,
/// ln(1 + e^x) below. In float for the fp32 engine, in double for the tangents.
template <class T>
T softplus_thresholded(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}

/// Its derivative: 1 above the threshold, s(x) below.
inline double softplus_thresholded_derivative(double x) { return x > 20.0 ? 1.0 : sigmoid(x); }

/// One softmax row over scores u whose masked entries are -inf (their weight is exactly 0): the row
/// maximum is subtracted first (no overflow), each entry through std::exp. p may alias u.
inline void masked_softmax_row(const Eigen::Ref<const RowVec>& u, Eigen::Ref<RowVec> p) {
  const double m = u.maxCoeff();
  double sum = 0.0;
  for (Eigen::Index s = 0; s < u.size(); ++s) {
    p(s) = std::isinf(u(s)) && u(s) < 0 ? 0.0 : std::exp(u(s) - m);
    sum += p(s);
  }
  p /= sum;
}

/// softmax(beta s) of a row of finite scores (the masked entries already left out), as beta (s - max s)
/// through Eigen's vectorised exp: exact as beta -> infinity, no overflow. `a` may be `s` itself.
template <class In, class Out>
void scaled_softmax_row(double beta, const In& s, Out&& a) {
  const double m = s.maxCoeff();
  a = (beta * (s.array() - m)).exp().matrix();
  a /= a.sum();
}

/// The RMS normaliser r = (|x|^2/n + eps)^{-1/2} of a vector x of n entries: RMSNorm(x) = x r w
/// (PyTorch's x * rsqrt(mean(x^2) + eps)); LayerNorm is the same of the centred x.
template <class V>
double rms_inverse(const Eigen::MatrixBase<V>& x, double eps) {
  return 1.0 / std::sqrt(x.squaredNorm() / static_cast<double>(x.size()) + eps);
}

/// Its derivative along dx, given r = rms_inverse(x, eps): dr = -r^3 <x, dx>/n, so that
/// d(x r) = dx r + x dr.
template <class V, class W>
double rms_inverse_derivative(double r, const Eigen::MatrixBase<V>& x, const Eigen::MatrixBase<W>& dx) {
  return -r * r * r * x.dot(dx) / static_cast<double>(x.size());
}

}  // namespace tokdyn::nn
