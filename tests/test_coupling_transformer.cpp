// Coupling paper, part 1: the Transformer block (§2, eqs. (1)-(5)), its exact JVP, Lemma 2 (H
// invariance), Thm 3 (frozen kernel, Kronecker/sector structure, flag F1), Prop 8 (QK invisibility),
// flag F19 (LayerNorm neutral direction), Prop 1 (bounded step) and Lemmas 15/16 (singular sets).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <omp.h>
#include <vector>

#include "tokdyn/analysis/frozen_kernel.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/models/transformer.hpp"
#include "tokdyn/nn.hpp"
#include "tokdyn/rng.hpp"

namespace tokdyn::tf {
namespace {

Transformer make(Config c, int L, std::uint64_t seed, double sigma_w = 1.0, double sigma_b = 0.3, Tying tying = Tying::Untied) {
  std::vector<LayerWeights> ws;
  for (int r = 0; r < L; ++r) {
    LayerWeights W = random_weights(c, r, sigma_w, sigma_b, seed);
    // Non-trivial gains and LayerNorm biases, so every derivative term is exercised.
    Rng g(seed, {99, static_cast<std::uint64_t>(r)});
    for (Vec* v : {&W.g_attn, &W.g_mlp}) {
      g.fill_uniform(*v, 0.5, 1.5);
    }
    for (Vec* v : {&W.beta_attn, &W.beta_mlp}) g.fill_normal(*v, 0.2);
    ws.push_back(W);
  }
  return Transformer(c, ws, tying);
}

Mat random_mat(int r, int c, std::uint64_t seed, double s = 1.0) {
  Mat M(r, c);
  Rng(seed, {7}).fill_normal(M, s);
  return M;
}

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

struct Combo {
  Norm norm;
  Placement pl;
  Activation phi;
  Mask mask;
  Positional pos;
};

std::vector<Combo> all_combos() {
  std::vector<Combo> out;
  for (Norm n : {Norm::RMS, Norm::Layer, Norm::None})
    for (Placement p : {Placement::PreLN, Placement::PostLN})
      for (Activation a : {Activation::GeluExact, Activation::GeluTanh, Activation::Silu, Activation::Tanh})
        for (Mask m : {Mask::Causal, Mask::Bidirectional, Mask::BlockLocal, Mask::Sliding, Mask::Leaky})
          for (Positional q : {Positional::None, Positional::Rope, Positional::Alibi}) out.push_back({n, p, a, m, q});
  return out;
}

Config config_of(const Combo& k, int d = 4, int d_ff = 6) {
  Config c;
  c.d = d;
  c.d_ff = d_ff;
  c.norm = k.norm;
  c.placement = k.pl;
  c.phi = k.phi;
  c.mask = k.mask;
  c.pos = k.pos;
  c.block = 2;
  c.window = 2;
  c.eps_leak = 0.05;
  c.temperature = 0.7;
  c.eps = 1e-5;
  return c;
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

// R4 (Lemma 2): H is invariant for every mask, temperature, positional scheme, norm and placement,
// and the common token follows the reduced map.
TEST(CouplingTransformer, HomogeneousManifoldInvariant) {
  int idx = 0;
  for (const Combo& k : all_combos()) {
    if (k.phi != Activation::GeluExact && k.phi != Activation::Silu) continue;
    Config c = config_of(k, 6, 10);
    for (double tau : {0.05, 1.0, 30.0}) {
      c.temperature = tau;
      const Transformer tf = make(c, 1, 400 + idx, 1.0, 0.3);
      Vec x(c.d);
      Rng(500 + idx, {}).fill_normal(x, 2.0);
      Batch Z;
      Z.len = 7;
      Z.Z = homogeneous(x, 7);
      tf.apply(1, Z);
      const Vec x1 = tf.reduced_map(1, x);
      const double scale = std::max(1.0, x1.norm());
      for (int t = 0; t < 7; ++t) EXPECT_LT((Z.Z.row(t).transpose() - x1).norm(), 1e-14 * scale) << idx << " t=" << t;
    }
    ++idx;
  }
}

// R4, block version: with block-local attention (C1), X constant on each block of P tokens (H_P)
// stays in H_P, each block following the reduced map; an injection constant per block (the hook for
// (C2)) keeps H_P and adds itself; with the hook returning 0 the output is bit for bit the plain block.
TEST(CouplingTransformer, BlockHomogeneousInvariantWithInjection) {
  for (Placement pl : {Placement::PreLN, Placement::PostLN}) {
    Config c;
    c.d = 5;
    c.d_ff = 9;
    c.mask = Mask::BlockLocal;
    c.block = 3;
    c.placement = pl;
    Transformer tf = make(c, 1, 33);
    const int T = 8, K = 3;  // blocks of 3, 3, 2 tokens
    Mat xs(K, 5);
    Rng(34, {}).fill_normal(xs, 1.0);
    Batch Z;
    Z.len = T;
    Z.Z.resize(T, 5);
    for (int t = 0; t < T; ++t) Z.Z.row(t) = xs.row(t / 3);
    Batch plain = Z;
    tf.apply(1, plain);
    for (int t = 0; t < T; ++t)
      EXPECT_LT((plain.Z.row(t).transpose() - tf.reduced_map(1, xs.row(t / 3).transpose())).norm(), 1e-14 * plain.Z.row(t).norm());
    Batch zero = Z;
    tf.set_injection([](long, const Batch&, Tokens&) {});
    tf.apply(1, zero);
    EXPECT_EQ(zero.Z, plain.Z);
    Mat inj(K, 5);
    Rng(35, {}).fill_normal(inj, 0.3);
    tf.set_injection([&](long, const Batch& in, Tokens& add) {
      for (int t = 0; t < in.len; ++t) add.row(t) = inj.row(t / 3);
    });
    Batch withinj = Z;
    tf.apply(1, withinj);
    for (int t = 0; t < T; ++t) EXPECT_LT((withinj.Z.row(t) - plain.Z.row(t) - inj.row(t / 3)).norm(), 1e-14 * std::max(1.0, plain.Z.row(t).norm()));
  }
}

// The reduced map of Lemma 2 written out (Pre-LN): x' = x_h + W_2 phi(W_1 S(x_h) + b_1) + b_2.
TEST(CouplingTransformer, ReducedMapFormula) {
  Config c;
  c.d = 5;
  c.d_ff = 9;
  c.norm = Norm::Layer;
  const Transformer tf = make(c, 1, 8);
  const LayerWeights& W = tf.weights(1);
  Vec x(5);
  Rng(1, {}).fill_normal(x, 1.0);
  Mat z;
  apply_norm(c, W.g_attn, W.beta_attn, x.transpose(), z);
  const Vec xh = x + W.W_V * z.row(0).transpose();
  apply_norm(c, W.g_mlp, W.beta_mlp, xh.transpose(), z);
  Vec pre = W.W_1 * z.row(0).transpose() + W.b_1;
  for (Eigen::Index i = 0; i < pre.size(); ++i) pre(i) = activation(c.phi, pre(i));
  const Vec expect = xh + W.W_2 * pre + W.b_2;
  EXPECT_LT((tf.reduced_map(1, x) - expect).norm(), 1e-14 * expect.norm());
}

// R5 (Thm 3(1)): alpha(X*) = alpha*_ts = 1/t for any W_Q, W_K scale and temperature (block-local:
// I_K ⊗ alpha*_P); the kernel variation has zero row sums; RoPE/ALiBi are negative controls.
TEST(CouplingTransformer, FrozenKernel) {
  for (double scale : {1e-3, 1.0, 30.0})
    for (double tau : {0.01, 1.0, 100.0})
      for (Mask m : {Mask::Causal, Mask::BlockLocal}) {
        Config c;
        c.d = 4;
        c.d_ff = 8;
        c.temperature = tau;
        c.mask = m;
        c.block = 3;
        Transformer tf = make(c, 1, 21);
        tf.mutable_weights(0).W_Q *= scale;
        tf.mutable_weights(0).W_K *= scale;
        Vec x(4);
        Rng(2, {}).fill_normal(x, 3.0);
        Batch Z;
        Z.len = 8;
        Z.Z = homogeneous(x, 8);
        const Mat a = tf.attention(1, Z)[0];
        const Mat expect = m == Mask::Causal ? fk::alpha_star(8) : fk::alpha_star_block(8, 3);
        EXPECT_LT((a - expect).cwiseAbs().maxCoeff(), 1e-15) << scale << " " << tau;
        // Kernel variation along a random dX: nonzero, rows sum to 0.
        const Mat dX = random_mat(8, 4, 3);
        const double h = 1e-6;
        Batch P = Z, Mn = Z;
        P.Z += h * dX;
        Mn.Z -= h * dX;
        const Mat da = (tf.attention(1, P)[0] - tf.attention(1, Mn)[0]) / (2 * h);
        if (scale >= 1.0 && tau <= 1.0) {
          EXPECT_GT(da.norm(), 1e-3);
        }
        EXPECT_LT(da.rowwise().sum().cwiseAbs().maxCoeff(), 1e-8 * std::max(1.0, da.norm()));
      }
  // Negative control: with RoPE or ALiBi, alpha(X*) is not 1/t; with RoPE it depends on the layer.
  for (Positional p : {Positional::Rope, Positional::Alibi}) {
    Config c;
    c.d = 4;
    c.d_ff = 8;
    c.pos = p;
    c.rope_base = 2.0;
    c.temperature = 0.5;
    const Transformer tf = make(c, 2, 23, 2.0);
    Vec x(4);
    Rng(4, {}).fill_normal(x, 1.0);
    Batch Z;
    Z.len = 6;
    Z.Z = homogeneous(x, 6);
    const Mat a1 = tf.attention(1, Z)[0], a2 = tf.attention(2, Z)[0];
    EXPECT_GT((a1 - fk::alpha_star(6)).cwiseAbs().maxCoeff(), 1e-3);
    if (p == Positional::Rope) {
      EXPECT_GT((a1 - a2).cwiseAbs().maxCoeff(), 1e-3);
    }
  }
}

// R6 (Thm 3(2)(3), flag F1): the Jacobian at X* is I ⊗ (I + M~) + alpha* ⊗ (I + M~) V: analytic
// (jvp columns) to 1e-12, central differences to 1e-8; the paper's (8) differs by O(1).
TEST(CouplingTransformer, ExactKroneckerJacobian) {
  for (Norm n : {Norm::RMS, Norm::Layer}) {
    Config c;
    c.d = 3;
    c.d_ff = 5;
    c.norm = n;
    const Transformer tf = make(c, 1, 31, 1.5, 0.5);
    Vec x(3);
    Rng(5, {}).fill_normal(x, 1.0);
    const Mat X = homogeneous(x, 4);
    const LayerGenerators g = layer_generators(tf, 0, x);
    const Mat Jex = jacobian_from_generators(g, fk::alpha_star(4), Form::Exact);
    const Mat Jp = jacobian_from_generators(g, fk::alpha_star(4), Form::Paper);
    const Mat Ja = block_jacobian(tf, 1, X), Jfd = block_jacobian_fd(tf, 1, X, 1e-5);
    EXPECT_LT((Ja - Jex).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_LT((Jfd - Jex).cwiseAbs().maxCoeff(), 1e-8);
    EXPECT_GT((Jfd - Jp).cwiseAbs().maxCoeff(), 1e-2);  // F1: (8) is not the Jacobian
    // Tangent: the Jacobian of the reduced map is (I + M~)(I + V) = I + A^ex.
    const Mat Jr = reduced_jacobian_fd(tf, 1, x, 1e-5);
    EXPECT_LT((Jr - sector_map(g, 1.0, Form::Exact)).cwiseAbs().maxCoeff(), 1e-8);
    EXPECT_LT((Mat::Identity(3, 3) + g.A_exact - sector_map(g, 1.0, Form::Exact)).cwiseAbs().maxCoeff(), 1e-14);
  }
}

// R6 sector invariance: J (w_j u^T) = w_j ((I + M~)(I + lambda_j V) u)^T, w_j the Pascal columns, T = 16.
TEST(CouplingTransformer, SectorInvariance) {
  Config c;
  c.d = 4;
  c.d_ff = 8;
  const Transformer tf = make(c, 1, 41);
  Vec x(4);
  Rng(6, {}).fill_normal(x, 1.0);
  const int T = 16;
  const LayerGenerators g = layer_generators(tf, 0, x);
  const Mat W = fk::pascal_matrix(T);
  Batch Z;
  Z.runs = T;
  Z.len = T;
  Z.Z = homogeneous(x, T).replicate(T, 1);
  Tokens V(T * T, 4), out;
  std::vector<Vec> us;
  for (int j = 0; j < T; ++j) {
    Vec u(4);
    Rng(7, {static_cast<std::uint64_t>(j)}).fill_normal(u, 1.0);
    us.push_back(u);
    V.middleRows(j * T, T) = W.col(j) * u.transpose();
  }
  tf.jvp(1, Z, V, out);
  for (int j = 0; j < T; ++j) {
    const Mat expect = W.col(j) * (sector_map(g, 1.0 / (j + 1), Form::Exact) * us[static_cast<std::size_t>(j)]).transpose();
    const Mat got = out.middleRows(j * T, T);
    EXPECT_LT((got - expect).cwiseAbs().maxCoeff(), 1e-12 * std::max(1.0, expect.cwiseAbs().maxCoeff())) << "sector " << j + 1;
  }
}

// R6 spectra: the spectrum of the Td x Td Jacobian is the union of the T sector spectra.
TEST(CouplingTransformer, FullSpectrumIsUnionOfSectors) {
  Config c;
  c.d = 3;
  c.d_ff = 6;
  const Transformer tf = make(c, 1, 51);
  Vec x(3);
  Rng(8, {}).fill_normal(x, 1.0);
  const int T = 5;
  const LayerGenerators g = layer_generators(tf, 0, x);
  const Mat J = block_jacobian(tf, 1, homogeneous(x, T));
  Eigen::EigenSolver<Eigen::MatrixXd> full(J);
  std::vector<std::complex<double>> sectors;
  for (int j = 1; j <= T; ++j) {
    Eigen::EigenSolver<Eigen::MatrixXd> es(sector_map(g, 1.0 / j, Form::Exact));
    for (int i = 0; i < 3; ++i) sectors.push_back(es.eigenvalues()(i));
  }
  std::vector<bool> used(sectors.size(), false);
  for (int i = 0; i < J.rows(); ++i) {
    double best = 1e300;
    std::size_t bi = 0;
    for (std::size_t s = 0; s < sectors.size(); ++s)
      if (!used[s] && std::abs(full.eigenvalues()(i) - sectors[s]) < best) {
        best = std::abs(full.eigenvalues()(i) - sectors[s]);
        bi = s;
      }
    used[bi] = true;
    EXPECT_LT(best, 1e-8);
  }
}

// R7 (Prop 8): x*(l), A(l) and J(l) do not depend on W_Q, W_K at all (bit for bit); only the
// second-order dependence in fluctuation directions changes.
TEST(CouplingTransformer, QkInvisibility) {
  Config c;
  c.d = 4;
  c.d_ff = 8;
  const int L = 6;
  Transformer a = make(c, L, 61), b = make(c, L, 61);
  for (std::size_t r = 0; r < b.weight_sets(); ++r) {
    b.mutable_weights(r).W_Q = random_mat(4, 4, 1000 + r, 5.0);
    b.mutable_weights(r).W_K = random_mat(4, 4, 2000 + r, 0.1);
  }
  Vec x0(4);
  Rng(9, {}).fill_normal(x0, 1.0);
  const Reference ra = reference_trajectory(a, x0, L), rb = reference_trajectory(b, x0, L);
  for (int l = 0; l <= L; ++l) EXPECT_EQ(ra.x[static_cast<std::size_t>(l)], rb.x[static_cast<std::size_t>(l)]);
  const int T = 4;
  for (int l = 0; l < L; ++l) {
    const auto& ga = ra.layers[static_cast<std::size_t>(l)];
    const auto& gb = rb.layers[static_cast<std::size_t>(l)];
    EXPECT_EQ(ga.A_exact, gb.A_exact);
    EXPECT_EQ(ga.A_paper, gb.A_paper);
    EXPECT_EQ(jacobian_from_generators(ga, fk::alpha_star(T), Form::Exact), jacobian_from_generators(gb, fk::alpha_star(T), Form::Exact));
    // The nonlinear block's own Jacobian at X*: equal up to round-off of the uniform softmax rows.
    const Mat X = homogeneous(ra.x[static_cast<std::size_t>(l)], T);
    EXPECT_LT((block_jacobian(a, l + 1, X) - block_jacobian(b, l + 1, X)).cwiseAbs().maxCoeff(), 1e-13);
  }
  // Second order: J at X* + s dX_perp differs between the two.
  const Mat X = homogeneous(ra.x[0], T);
  const Mat dX = fk::fluctuation(random_mat(T, 4, 77), T);
  const double s = 1e-3;
  const Mat diff = (block_jacobian(a, 1, X + s * dX) - block_jacobian(a, 1, X)) - (block_jacobian(b, 1, X + s * dX) - block_jacobian(b, 1, X));
  EXPECT_GT(diff.cwiseAbs().maxCoeff() / s, 1e-2);
}

// Flag F19: with LayerNorm, F(x + c 1) = F(x) + c 1 and (I + A) 1 = 1 (exact and paper form).
TEST(CouplingTransformer, LayerNormNeutralDirection) {
  Config c;
  c.d = 5;
  c.d_ff = 7;
  c.norm = Norm::Layer;
  const Transformer tf = make(c, 3, 71);
  Batch Z;
  Z.len = 4;
  Z.Z = random_mat(4, 5, 72);
  Batch Zc = Z;
  Zc.Z.array() += 0.75;
  tf.apply(2, Z);
  tf.apply(2, Zc);
  EXPECT_LT((Zc.Z.array() - 0.75 - Z.Z.array()).abs().maxCoeff(), 1e-13);
  Vec x0(5);
  Rng(10, {}).fill_normal(x0, 1.0);
  const Reference ref = reference_trajectory(tf, x0, 3);
  const Vec one = Vec::Ones(5);
  for (Form f : {Form::Exact, Form::Paper})
    for (const Mat& M : tangent_sequence(ref, f)) EXPECT_LT((M * one - one).cwiseAbs().maxCoeff(), 1e-13);
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
  EXPECT_THROW((void)untied.weights(3), std::out_of_range);
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
