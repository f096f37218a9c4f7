// Reference trajectory and exact linearisation of the Transformer block (coupling paper Lemma 2,
// eqs. (7)-(9), Thm 3; flag F1 for the exact Jacobian).
#include "tokdyn/analysis/transformer_reference.hpp"

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/norms.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

namespace tokdyn::tf {

Mat homogeneous(const Vec& x, int T) { return Vec::Ones(T) * x.transpose(); }

LayerGenerators layer_generators(const Transformer& tf, long r, const Vec& x) {
  const Config& c = tf.config();
  if (c.placement != Placement::PreLN)
    throw std::invalid_argument("layer_generators: the generators V, M of eq. (7) are defined for Pre-LN; got Post-LN");
  if (x.size() != c.d) throw std::invalid_argument(fmt::format("layer_generators: x has length {}, expected d = {}", x.size(), c.d));
  const LayerWeights& W = tf.weights(r + 1);
  LayerGenerators g;
  g.r = r;
  g.x = x;
  Mat z1, zh, zx;
  apply_norm(c, W.g_attn, W.beta_attn, x.transpose(), z1);
  g.x_h = x + W.W_V * z1.row(0).transpose();
  apply_norm(c, W.g_mlp, W.beta_mlp, g.x_h.transpose(), zh);
  apply_norm(c, W.g_mlp, W.beta_mlp, x.transpose(), zx);
  g.DS_x = norm_jacobian(c, W.g_attn, x);
  g.DS_h = norm_jacobian(c, W.g_mlp, g.x_h);
  g.V = W.W_V * g.DS_x;
  auto dphi = [&](const Mat& z) {
    Vec pre = W.W_1 * z.row(0).transpose() + W.b_1;
    for (Eigen::Index i = 0; i < pre.size(); ++i) pre(i) = activation_derivative(c.phi, pre(i));
    return pre;
  };
  g.M_tilde = W.W_2 * dphi(zh).asDiagonal() * W.W_1 * g.DS_h;
  // eq. (7) as printed: DS and Dphi at x* (DS of the MLP's norm S_2, which is S for equal gains).
  g.M_paper = W.W_2 * dphi(zx).asDiagonal() * W.W_1 * norm_jacobian(c, W.g_mlp, x);
  g.A_exact = g.M_tilde + g.V + g.M_tilde * g.V;
  g.A_paper = g.M_paper + g.V;
  return g;
}

std::vector<Vec> reference_states(const Transformer& tf, const Vec& x0, int L) {
  if (L < 0) throw std::invalid_argument(fmt::format("reference: depth L = {}, expected >= 0", L));
  std::vector<Vec> xs{x0};
  for (int r = 0; r < L; ++r) {
    xs.push_back(tf.reduced_map(r + 1, xs.back()));
    if (!xs.back().allFinite())
      throw NonFiniteError(fmt::format("the reference state became non-finite (NaN or Inf) at layer {}: the dynamics "
                                       "overflowed; check the weights, the temperature and the norm. No result was written", r + 1));
  }
  return xs;
}

Reference reference_trajectory(const Transformer& tf, const Vec& x0, int L) {
  Reference ref;
  ref.x = reference_states(tf, x0, L);
  for (int r = 0; r < L; ++r) ref.layers.push_back(layer_generators(tf, r, ref.x[static_cast<std::size_t>(r)]));
  return ref;
}

Mat sector_map(const LayerGenerators& g, double lambda, Form form) {
  const Mat I = Mat::Identity(g.V.rows(), g.V.cols());
  if (form == Form::Exact) return (I + g.M_tilde) * (I + lambda * g.V);
  return I + g.M_paper + lambda * g.V;
}

std::vector<Mat> tangent_sequence(const Reference& ref, Form form) {
  std::vector<Mat> out;
  for (const auto& g : ref.layers) out.push_back(sector_map(g, 1.0, form));
  return out;
}

Mat kron_sum(const Mat& alpha, const Mat& B, const Mat& C) {
  const Eigen::Index T = alpha.rows(), d = B.rows();
  Mat J = Mat::Zero(T * d, T * d);
  for (Eigen::Index t = 0; t < T; ++t) {
    J.block(t * d, t * d, d, d) += B;
    for (Eigen::Index s = 0; s < T; ++s)
      if (alpha(t, s) != 0.0) J.block(t * d, s * d, d, d) += alpha(t, s) * C;
  }
  return J;
}

Mat jacobian_from_generators(const LayerGenerators& g, const Mat& alpha, Form form) {
  const Mat I = Mat::Identity(g.V.rows(), g.V.cols());
  if (form == Form::Exact) return kron_sum(alpha, I + g.M_tilde, (I + g.M_tilde) * g.V);
  return kron_sum(alpha, I + g.M_paper, g.V);
}

Mat block_jacobian(const Transformer& tf, long k, const Mat& X) {
  const Eigen::Index T = X.rows(), d = X.cols(), n = T * d;
  // All n unit tangents at once: n runs of the same state (runs are independent in jvp).
  Batch Z;
  Z.runs = static_cast<int>(n);
  Z.len = static_cast<int>(T);
  Z.Z = X.replicate(n, 1);
  Tokens V = Tokens::Zero(n * T, d), out;
  for (Eigen::Index j = 0; j < n; ++j) V(j * T + j / d, j % d) = 1.0;
  tf.jvp(k, Z, V, out);
  Mat J(n, n);
  for (Eigen::Index j = 0; j < n; ++j)
    J.col(j) = Eigen::Map<const Vec>(out.middleRows(j * T, T).data(), n);  // row-major block = vec_r
  return J;
}

Mat block_jacobian_fd(const Transformer& tf, long k, const Mat& X, double h) {
  const Eigen::Index T = X.rows(), d = X.cols(), n = T * d;
  Mat J(n, n);
  for (Eigen::Index j = 0; j < n; ++j) {
    Batch P, M;
    P.len = M.len = static_cast<int>(T);
    P.Z = X;
    M.Z = X;
    const double hj = h * std::max(1.0, std::abs(X(j / d, j % d)));
    P.Z(j / d, j % d) += hj;
    M.Z(j / d, j % d) -= hj;
    tf.apply(k, P);
    tf.apply(k, M);
    const Mat D = (P.Z - M.Z) / (2.0 * hj);
    J.col(j) = Eigen::Map<const Vec>(D.data(), n);
  }
  return J;
}

Mat reduced_jacobian(const Transformer& tf, long k, const Vec& x) { return block_jacobian(tf, k, x.transpose()); }

Mat reduced_jacobian_fd(const Transformer& tf, long k, const Vec& x, double h) {
  const Eigen::Index d = x.size();
  Mat J(d, d);
  for (Eigen::Index j = 0; j < d; ++j) {
    const double hj = h * std::max(1.0, std::abs(x(j)));
    Vec p = x, m = x;
    p(j) += hj;
    m(j) -= hj;
    J.col(j) = (tf.reduced_map(k, p) - tf.reduced_map(k, m)) / (2.0 * hj);
  }
  return J;
}

}  // namespace tokdyn::tf

namespace tokdyn::tf {

namespace {
}  // namespace

double step_bound(const Config& c, const LayerWeights& W) {
  const double sd = std::sqrt(static_cast<double>(c.d));
  auto s = [&](const Vec& g, const Vec& beta) {
    if (c.norm == Norm::None)
      throw std::invalid_argument("step_bound: Prop 1 needs a norm S (rms or layer); got none (the step is unbounded)");
    return g.cwiseAbs().maxCoeff() * sd + (c.norm == Norm::Layer ? beta.norm() : 0.0);
  };
  const double phi0 = std::abs(activation(c.phi, 0.0)) * std::sqrt(static_cast<double>(c.d_ff));
  return spectral_norm(W.W_V) * s(W.g_attn, W.beta_attn) +
         spectral_norm(W.W_2) * (activation_lipschitz(c.phi) * (spectral_norm(W.W_1) * s(W.g_mlp, W.beta_mlp) + W.b_1.norm()) + phi0) +
         W.b_2.norm();
}

Vec postln_singular_point(const Config& c, const LayerWeights& W, const Vec& x0, double& residual) {
  Vec x = x0;
  auto y_of = [&](const Vec& v, Mat* J) {
    Vec pre = W.W_1 * v + W.b_1, a(pre.size()), da(pre.size());
    for (Eigen::Index i = 0; i < pre.size(); ++i) {
      a(i) = activation(c.phi, pre(i));
      da(i) = activation_derivative(c.phi, pre(i));
    }
    if (J) *J = Mat::Identity(v.size(), v.size()) + W.W_2 * da.asDiagonal() * W.W_1;
    return Vec(v + W.W_2 * a + W.b_2);
  };
  for (int it = 0; it < 200; ++it) {
    Mat J;
    const Vec y = y_of(x, &J);
    residual = y.norm();
    if (residual < 1e-13 * std::max(1.0, x.norm())) return x;
    const Vec step = J.fullPivLu().solve(y);
    // Damped Newton: halve the step until |y| decreases.
    double t = 1.0;
    for (int b = 0; b < 40; ++b, t *= 0.5)
      if (y_of(x - t * step, nullptr).norm() < residual) break;
    x -= t * step;
  }
  residual = y_of(x, nullptr).norm();
  if (!(residual < 1e-10 * std::max(1.0, x.norm())))
    throw ConvergenceError(fmt::format("postln_singular_point: Newton did not converge (|y| = {:.3g})", residual));
  return x;
}

}  // namespace tokdyn::tf
