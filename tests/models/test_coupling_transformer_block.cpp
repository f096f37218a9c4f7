// Coupling paper, part 1: the Transformer block (§2, eqs. (1)-(5)) and its exact JVP: R1 (the
// softmax variational identity), the JVP against central differences for every option, multi-head,
// batched runs and threads; tying modes and refused configs; Prop 1 (bounded step) and Lemmas 15/16
// (singular sets). The homogeneous manifold and the frozen kernel: test_coupling_transformer_kernel.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <omp.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "coupling_transformer_fixtures.hpp"
#include "tokdyn/analysis/frozen_kernel.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/models/transformer/transformer.hpp"
#include "tokdyn/core/nn.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn::tf {
namespace {

using coupling_fixtures::all_combos;
using coupling_fixtures::Combo;
using coupling_fixtures::config_of;
using coupling_fixtures::make;
using coupling_fixtures::random_mat;

// R1 (§2): <p,u> + H(p) = LSE(u) - KL(p || softmax(u)); the maximum LSE(u) is attained at softmax(u).
TEST(CouplingSoftmax, VariationalIdentity) {
  Rng rng(3, {1});
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 2 + trial % 9;
    RowVec u(n), p(n), q(n);
    for (int i = 0; i < n; ++i) u(i) = 3.0 * rng.normal();
    nn::masked_softmax_row(u, p);
    const double m = u.maxCoeff();
    const double lse = m + std::log((u.array() - m).exp().sum());
    auto F = [&](const RowVec& x) {
      double h = 0.0;
      for (int i = 0; i < n; ++i) h -= x(i) > 0 ? x(i) * std::log(x(i)) : 0.0;
      return x.dot(u) + h;
    };
    EXPECT_NEAR(F(p), lse, 1e-12);
    for (int i = 0; i < n; ++i) q(i) = rng.uniform(0.01, 1.0);
    q /= q.sum();
    double kl = 0.0;
    for (int i = 0; i < n; ++i) kl += q(i) * std::log(q(i) / p(i));
    EXPECT_NEAR(F(q), lse - kl, 1e-12);
    EXPECT_LT(F(q), F(p));
  }
}

// The exact JVP against central differences, every option combination (2 runs of T = 5 tokens).
TEST(CouplingTransformer, JvpMatchesFiniteDifferencesEveryOption) {
  int idx = 0;
  for (const Combo& k : all_combos()) {
    const Config c = config_of(k);
    const Transformer tf = make(c, 1, 100 + idx, 1.0, 0.3);
    Batch Z;
    Z.runs = 2;
    Z.len = 5;
    Z.Z = random_mat(10, c.d, 200 + idx, 1.5);
    const Tokens V = random_mat(10, c.d, 300 + idx);
    Tokens JV;
    tf.jvp(1, Z, V, JV);
    const double h = 1e-5;
    Batch P = Z, M = Z;
    P.Z += h * V;
    M.Z -= h * V;
    tf.apply(1, P);
    tf.apply(1, M);
    const Tokens fd = (P.Z - M.Z) / (2 * h);
    EXPECT_LT((fd - JV).norm(), 1e-7 * std::max(1.0, JV.norm())) << "combo " << idx;
    ++idx;
  }
}

// Multi-head extension: exact JVP against central differences, H invariance and the frozen kernel.
TEST(CouplingTransformer, MultiHead) {
  for (Positional pos : {Positional::None, Positional::Rope, Positional::Alibi})
    for (Placement pl : {Placement::PreLN, Placement::PostLN}) {
      Config c;
      c.d = 8;
      c.d_ff = 12;
      c.heads = 2;
      c.pos = pos;
      c.placement = pl;
      const Transformer tf = make(c, 1, 17);
      Batch Z;
      Z.runs = 2;
      Z.len = 5;
      Z.Z = random_mat(10, 8, 18, 1.5);
      const Tokens V = random_mat(10, 8, 19);
      Tokens JV;
      tf.jvp(1, Z, V, JV);
      const double h = 1e-5;
      Batch P = Z, M = Z;
      P.Z += h * V;
      M.Z -= h * V;
      tf.apply(1, P);
      tf.apply(1, M);
      EXPECT_LT(((P.Z - M.Z) / (2 * h) - JV).norm(), 1e-7 * std::max(1.0, JV.norm()));
      Vec x(8);
      Rng(20, {}).fill_normal(x, 1.0);
      Batch Zh;
      Zh.len = 6;
      Zh.Z = homogeneous(x, 6);
      if (pos == Positional::None) {
        EXPECT_LT((tf.attention(1, Zh)[0] - fk::alpha_star(6)).cwiseAbs().maxCoeff(), 1e-15);
      }
      tf.apply(1, Zh);
      const Vec x1 = tf.reduced_map(1, x);
      for (int t = 0; t < 6; ++t) EXPECT_LT((Zh.Z.row(t).transpose() - x1).norm(), 1e-14 * std::max(1.0, x1.norm()));
    }
  Config c;
  c.d = 6;
  c.heads = 4;
  EXPECT_THROW(c.validate(), std::invalid_argument);
}

// The tap "attention" (dynamics.hpp TapObserver): the weights of every head of layer k at the
// state entering it, [runs, heads, tokens, tokens], equal to attention_heads(k, Z); only the layers
// asked for; the step itself is unchanged by watching.
TEST(CouplingTransformer, AttentionTapHandsEveryHeadOfTheLayersAskedFor) {
  Config c;
  c.d = 8;
  c.d_ff = 12;
  c.heads = 2;
  Transformer tf = make(c, 3, 21);
  Batch Z;
  Z.runs = 2;
  Z.len = 5;
  Z.Z = random_mat(10, 8, 22);
  const Batch Z0 = Z;
  std::vector<long> seen;
  std::vector<double> got;
  std::vector<std::size_t> shape;
  struct Layer2 final : TapObserver {
    std::vector<long>* seen;
    std::vector<double>* got;
    std::vector<std::size_t>* shape;
    bool wants(const std::string& name, long k) const override { return name == "attention" && k == 2; }
    void tap(const std::string&, long k, const double* data, const std::vector<std::size_t>& s) override {
      seen->push_back(k);
      *shape = s;
      got->assign(data, data + s[0] * s[1] * s[2] * s[3]);
    }
    using TapObserver::tap;
  } obs;
  obs.seen = &seen, obs.got = &got, obs.shape = &shape;
  tf.watch(&obs);
  Batch before2 = Z;
  tf.apply(1, Z);
  before2 = Z;
  tf.apply(2, Z);
  tf.apply(3, Z);
  ASSERT_EQ(seen, std::vector<long>{2});
  ASSERT_EQ(shape, (std::vector<std::size_t>{2, 2, 5, 5}));
  const std::vector<Mat> A = tf.attention_heads(2, before2);
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t t = 0; t < 5; ++t)
        for (std::size_t s = 0; s < 5; ++s)
          EXPECT_EQ(got[((r * 2 + h) * 5 + t) * 5 + s], A[r](static_cast<Eigen::Index>(t), static_cast<Eigen::Index>(h * 5 + s)));
  // Watching does not change the step.
  const Transformer plain = make(c, 3, 21);
  Batch W = Z0;
  for (long k = 1; k <= 3; ++k) plain.apply(k, W);
  EXPECT_EQ(W.Z, Z.Z);
}

// The tap "residual_mid": the residual stream between the sublayers of layer k, [runs, tokens, d].
// Pre-LN: x + sum_h A_h (norm(x) W_V^T)_h, eq. (4) first line, rebuilt here from the attention
// weights and W_V; the state taps before and after the layer complete the residual stream.
TEST(CouplingTransformer, ResidualMidTapIsTheStreamBetweenTheSublayers) {
  Config c;
  c.d = 8;
  c.d_ff = 12;
  c.heads = 2;
  c.placement = Placement::PreLN;
  const Transformer tf0 = make(c, 2, 31);
  Transformer tf = make(c, 2, 31);
  Batch Z{random_mat(10, 8, 32), 2, 5};
  std::vector<double> mid;
  std::vector<std::size_t> shape;
  struct Mid final : TapObserver {
    std::vector<double>* mid;
    std::vector<std::size_t>* shape;
    bool wants(const std::string& name, long k) const override { return name == "residual_mid" && k == 2; }
    void tap(const std::string&, long, const double* data, const std::vector<std::size_t>& s) override {
      *shape = s;
      mid->assign(data, data + s[0] * s[1] * s[2]);
    }
    using TapObserver::tap;
  } obs;
  obs.mid = &mid, obs.shape = &shape;
  tf.watch(&obs);
  tf.apply(1, Z);
  const Batch X = Z;
  tf.apply(2, Z);
  ASSERT_EQ(shape, (std::vector<std::size_t>{2, 5, 8}));
  const LayerWeights& W = tf0.weights(2);
  const std::vector<Mat> A = tf0.attention_heads(2, X);
  for (int r = 0; r < 2; ++r) {
    Mat N;
    apply_norm(c, W.g_attn, W.beta_attn, X.run(r), N);
    const Mat V = N * W.W_V.transpose();
    Mat want = X.run(r);
    for (int h = 0; h < 2; ++h) want.middleCols(h * 4, 4) += A[static_cast<std::size_t>(r)].middleCols(h * 5, 5) * V.middleCols(h * 4, 4);
    for (int t = 0; t < 5; ++t)
      for (int j = 0; j < 8; ++j)
        EXPECT_NEAR(mid[static_cast<std::size_t>((r * 5 + t) * 8 + j)], want(t, j), 1e-13) << r << " " << t << " " << j;
  }
  // Watching does not change the step.
  Batch P{random_mat(10, 8, 32), 2, 5};
  tf0.apply(1, P);
  tf0.apply(2, P);
  EXPECT_EQ(P.Z, Z.Z);
}

// Runs are independent in jvp (k tangents batched as k runs).
TEST(CouplingTransformer, JvpRunsIndependent) {
  Config c;
  c.d = 6;
  c.d_ff = 12;
  const Transformer tf = make(c, 1, 5);
  Batch Z;
  Z.runs = 3;
  Z.len = 4;
  Z.Z = random_mat(12, 6, 11);
  Tokens V = random_mat(12, 6, 12), out, out1;
  tf.jvp(1, Z, V, out);
  Batch Z1;
  Z1.len = 4;
  Z1.Z = Z.run(1);
  tf.jvp(1, Z1, V.middleRows(4, 4), out1);
  EXPECT_EQ(out.middleRows(4, 4), out1);
}

// k tangents of one state batched as k runs (the Lyapunov use): the shared forward pass and products
// give the same bits on 1 and 2 threads (chunks of 32 runs fixed by the data), and the separate
// calls' values to round-off.
TEST(CouplingTransformer, JvpSharedStateSameBits) {
  Config c;
  c.d = 16;
  c.d_ff = 64;
  const Transformer tf = make(c, 1, 6);
  const int T = 16, k = 40;
  Batch Z;
  Z.runs = k;
  Z.len = T;
  Z.Z = random_mat(T, 16, 13).replicate(k, 1);
  const Tokens V = random_mat(k * T, 16, 14);
  Tokens out1, out2;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  tf.jvp(1, Z, V, out1);
  omp_set_num_threads(2);
  tf.jvp(1, Z, V, out2);
  omp_set_num_threads(saved);
  EXPECT_EQ(out1, out2);
  Batch Z1;
  Z1.len = T;
  Z1.Z = Z.run(0);
  for (int r = 0; r < k; ++r) {
    Tokens o;
    tf.jvp(1, Z1, V.middleRows(r * T, T), o);
    EXPECT_LT((o - out1.middleRows(r * T, T)).cwiseAbs().maxCoeff(), 1e-13 * o.cwiseAbs().maxCoeff()) << r;
  }
}

// Tied and looped stacks pick the right weights.
TEST(CouplingTransformer, TyingModes) {
  Config c;
  c.d = 3;
  c.d_ff = 4;
  const Transformer tied = make(c, 2, 81, 1.0, 0.3, Tying::Tied), looped = make(c, 2, 81, 1.0, 0.3, Tying::Looped),
                    untied = make(c, 2, 81);
  EXPECT_EQ(&tied.weights(5), &tied.weights(1));
  EXPECT_EQ(looped.weights(3).W_V, looped.weights(1).W_V);
  EXPECT_EQ(looped.weights(4).W_V, untied.weights(2).W_V);
  EXPECT_THROW((void)untied.weights(3), std::invalid_argument);
}

// Bad model values are refused with std::invalid_argument.
TEST(CouplingTransformer, RefusesBadConfig) {
  Config c;
  c.d = 3;
  c.pos = Positional::Rope;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = Config{};
  c.eps_leak = 0.0;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = Config{};
  c.eps = -1;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  EXPECT_THROW(parse_mask("diagonal"), std::invalid_argument);
  c = Config{};
  c.phi = Activation::Relu;
  EXPECT_FALSE(c.warnings().empty());
}

// R2 (Prop 1): max_t |N_t(X)| <= C_N for X at scales 1e-3..1e6; the stream grows at most linearly;
// Post-LN keeps |x| <= |g|_inf sqrt(d).
TEST(CouplingTransformer, BoundedStep) {
  for (Norm n : {Norm::RMS, Norm::Layer}) {
    Config c;
    c.d = 6;
    c.d_ff = 12;
    c.norm = n;
    const int L = 8;
    const Transformer tf = make(c, L, 91, 1.0, 0.5);
    for (int k = 1; k <= L; ++k) {
      const double CN = step_bound(c, tf.weights(k));
      for (double scale : {1e-3, 1e-1, 1.0, 1e2, 1e6}) {
        Batch Z;
        Z.len = 6;
        Z.Z = random_mat(6, 6, 92 + k) * scale;
        Tokens N;
        tf.step_update(k, Z, N);
        EXPECT_LE(N.rowwise().norm().maxCoeff(), CN) << k << " " << scale;
      }
    }
    Batch Z;
    Z.len = 5;
    Z.Z = random_mat(5, 6, 93);
    const Vec x0 = Z.Z.rowwise().norm();
    double sum = 0.0;
    for (int k = 1; k <= L; ++k) {
      sum += step_bound(c, tf.weights(k));
      tf.apply(k, Z);
      for (int t = 0; t < 5; ++t) EXPECT_LE(Z.Z.row(t).norm(), x0(t) + sum);
    }
  }
  Config c;
  c.d = 6;
  c.d_ff = 12;
  c.placement = Placement::PostLN;
  std::vector<LayerWeights> ws;
  for (int r = 0; r < 10; ++r) ws.push_back(random_weights(c, r, 1.0, 0.5, 94));
  const Transformer post(c, ws);
  Batch Z;
  Z.len = 5;
  Z.Z = random_mat(5, 6, 95) * 100.0;
  for (int k = 1; k <= 10; ++k) {
    post.apply(k, Z);
    EXPECT_LE(Z.Z.rowwise().norm().maxCoeff(), std::sqrt(6.0) * (1 + 1e-12));
  }
}

// R3 (Lemmas 15/16) with eps_S = 0: the Pre-LN Jacobian blows up only near x = 0; the Post-LN
// singular set {x : x + Sublayer(x) = 0} moves with the weights.
TEST(CouplingTransformer, SingularSets) {
  Config c;
  c.d = 4;
  c.d_ff = 8;
  c.eps = 0.0;
  const Transformer pre = make(c, 1, 101, 1.0, 0.5);
  Vec u(4);
  Rng(11, {}).fill_normal(u, 1.0);
  u.normalize();
  const double j_far = reduced_jacobian(pre, 1, u).norm(), j_near = reduced_jacobian(pre, 1, 1e-6 * u).norm();
  EXPECT_GT(j_near, 1e4 * j_far);
  Vec roots[2];
  for (int draw = 0; draw < 2; ++draw) {
    const LayerWeights W = random_weights(c, 0, 1.0, 0.5, 200 + draw);
    double res = 0;
    roots[draw] = postln_singular_point(c, W, Vec::Zero(4), res);
    EXPECT_LT(res, 1e-10);
    EXPECT_GT(roots[draw].norm(), 1e-3);  // not at the origin: the set depends on the weights
  }
  EXPECT_GT((roots[0] - roots[1]).norm(), 1e-2);
}

}  // namespace
}  // namespace tokdyn::tf
