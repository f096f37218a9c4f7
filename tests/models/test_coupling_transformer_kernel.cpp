// Coupling paper, part 1: the homogeneous manifold and the frozen kernel of the Transformer block:
// Lemma 2 (H invariance, its block version with an injection, the reduced map), Thm 3 (frozen
// kernel, Kronecker/sector structure, flag F1), Prop 8 (QK invisibility) and flag F19 (LayerNorm
// neutral direction). The block itself and its JVP: test_coupling_transformer_block.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <complex>
#include <cstdint>
#include <vector>

#include "coupling_transformer_fixtures.hpp"
#include "tokdyn/analysis/frozen_kernel.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/models/transformer/transformer.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn::tf {
namespace {

using coupling_fixtures::all_combos;
using coupling_fixtures::Combo;
using coupling_fixtures::config_of;
using coupling_fixtures::make;
using coupling_fixtures::random_mat;

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

}  // namespace
}  // namespace tokdyn::tf
