// Coupling paper Thm 3(1), Remark 2: the frozen kernel alpha* = 1/t, its exact Pascal eigenbasis,
// kappa_alpha (flag F16), the mixing constant, and the head/difference coordinates.
#include <gtest/gtest.h>

#include <cmath>

#include "tokdyn/analysis/frozen_kernel.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn::fk {
namespace {

__extension__ typedef __int128 i128;

// W W^{-1} = I exactly in integer arithmetic for every n up to the int64 limit; beyond it: refused.
TEST(CouplingFrozenKernel, PascalInverseExact) {
  for (int n = 1; n <= kMaxExactN; ++n) {
    const auto W = pascal(n), Wi = pascal_inverse(n);
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < n; ++j) {
        i128 s = 0;
        for (int k = 0; k < n; ++k) s += static_cast<i128>(W[static_cast<std::size_t>(t) * n + k]) * Wi[static_cast<std::size_t>(k) * n + j];
        ASSERT_TRUE(s == (t == j ? 1 : 0)) << "n=" << n << " (" << t << "," << j << ")";
      }
  }
  EXPECT_EQ(pascal(64)[63 * 64 + 31], 916312070471295267LL);  // binom(63, 31)
  EXPECT_THROW(pascal(kMaxExactN + 1), std::invalid_argument);
}

// alpha* = W diag(1, 1/2, ..., 1/n) W^{-1}, pi_1 = e_1 (Remark 2), block-local I_K ⊗ alpha*_P.
TEST(CouplingFrozenKernel, EigenDecomposition) {
  for (int n : {1, 2, 5, 12}) {
    const Mat W = pascal_matrix(n), Wi = pascal_inverse_matrix(n);
    Vec lam(n);
    for (int j = 0; j < n; ++j) lam(j) = 1.0 / (j + 1);
    EXPECT_LT((W * lam.asDiagonal() * Wi - alpha_star(n)).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_EQ(Wi.row(0), RowVec::Unit(n, 0));
  }
  const Mat B = alpha_star_block(7, 3);
  EXPECT_EQ(B.block(3, 3, 3, 3), alpha_star(3));
  EXPECT_EQ(B.block(6, 6, 1, 1), alpha_star(1));
  EXPECT_EQ(B.block(3, 0, 3, 3), Mat::Zero(3, 3));
}

// kappa_alpha against the table of the analysis (3 significant digits).
TEST(CouplingFrozenKernel, KappaTable) {
  const int ns[] = {2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
  const double kap[] = {2.41, 6.39, 18.2, 156, 1.38e3, 1.10e5, 8.82e6, 5.74e10, 3.75e14, 1.61e22, 6.90e29};
  for (int i = 0; i < 11; ++i) EXPECT_NEAR(kappa_alpha(ns[i]) / kap[i], 1.0, 5e-3) << "n=" << ns[i];
}

// ||(alpha*)^m - 1 e_1^T||: measured values and the 2^{-m} sqrt(n(n-1)(2n-1)/3) asymptote.
TEST(CouplingFrozenKernel, Mixing) {
  EXPECT_NEAR(mixing_distance(8, 1), 2.21, 0.005);
  EXPECT_NEAR(mixing_distance(8, 10) / 1.55e-2, 1.0, 5e-3);
  EXPECT_NEAR(mixing_distance(8, 40) / 1.52e-11, 1.0, 5e-3);
  EXPECT_NEAR(mixing_distance(32, 1), 5.18, 0.005);
  EXPECT_NEAR(mixing_distance(32, 10) / 1.14e-1, 1.0, 5e-3);
  EXPECT_NEAR(mixing_distance(32, 40) / 1.31e-10, 1.0, 5e-3);
  for (int n : {4, 8, 16, 32}) EXPECT_NEAR(mixing_distance(n, 40) * std::pow(2.0, 40) / mixing_constant(n), 1.0, 1e-3);
  EXPECT_NEAR(mixing_constant(4), 5.29, 0.01);
  EXPECT_NEAR(mixing_constant(16), 49.8, 0.05);
}

// Head/difference coordinates: the differences D_t = dx_t - dx_1 of J dX equal the difference
// dynamics I ⊗ (I + M~) + alpha^ ⊗ (I + M~) V applied to D; the head token follows I + A^ex.
TEST(CouplingFrozenKernel, DifferenceDynamics) {
  tf::Config c;
  c.d = 4;
  c.d_ff = 8;
  const tf::Transformer model(c, {tf::random_weights(c, 0, 1.0, 0.3, 5)});
  Vec x(4);
  Rng(1, {}).fill_normal(x, 1.0);
  const int T = 6;
  const tf::LayerGenerators g = tf::layer_generators(model, 0, x);
  Mat dX(T, 4);
  Rng(2, {}).fill_normal(dX, 1.0);
  const Mat J = tf::block_jacobian(model, 1, tf::homogeneous(x, T));
  Mat vec_in = dX;  // row-major: vec_r
  const Vec out = J * Eigen::Map<const Vec>(vec_in.data(), T * 4);
  const Mat dY = Eigen::Map<const Mat>(out.data(), T, 4);
  const Mat I = Mat::Identity(4, 4);
  // Head token: (I + M~)(I + V) dx_1.
  EXPECT_LT((head_tokens(dY, T).row(0).transpose() - tf::sector_map(g, 1.0, tf::Form::Exact) * dX.row(0).transpose()).norm(), 1e-12);
  const Mat D = fluctuation(dX, T).bottomRows(T - 1), Dy = fluctuation(dY, T).bottomRows(T - 1);
  const Mat Jd = tf::kron_sum(difference_kernel(T), I + g.M_tilde, (I + g.M_tilde) * g.V);
  const Vec dout = Jd * Eigen::Map<const Vec>(Mat(D).data(), (T - 1) * 4);
  EXPECT_LT((Eigen::Map<const Mat>(dout.data(), T - 1, 4) - Dy).cwiseAbs().maxCoeff(), 1e-12);
  const Vec ev = difference_kernel(T).diagonal();
  for (int i = 0; i < T - 1; ++i) EXPECT_DOUBLE_EQ(ev(i), 1.0 / (i + 2));
}

}  // namespace
}  // namespace tokdyn::fk
