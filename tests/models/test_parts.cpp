// The shared transformer parts (models/parts/parts.hpp), each against something that does not share
// its code: closed forms, central differences, the definition written out entry by entry.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tokdyn/core/rng.hpp"
#include "tokdyn/models/parts/parts.hpp"

namespace tokdyn {
namespace {

using parts::Act;

TEST(Parts, ActivationsMatchTheirClosedFormsAndDerivatives) {
  const double c = std::sqrt(2.0 / M_PI);
  for (double u : {-6.0, -1.3, -0.2, 0.0, 0.4, 1.7, 5.0}) {
    // GELU: u Phi(u) with Phi the normal CDF written as 1/2 (1 + erf(u / sqrt 2)).
    EXPECT_NEAR(parts::act_value<double>(Act::Gelu, u), 0.5 * u * (1.0 + std::erf(u / std::sqrt(2.0))), 1e-15);
    EXPECT_NEAR(parts::act_value<double>(Act::GeluTanh, u), 0.5 * u * (1.0 + std::tanh(c * (u + 0.044715 * u * u * u))), 1e-15);
    EXPECT_NEAR(parts::act_value<double>(Act::Silu, u), u / (1.0 + std::exp(-u)), 1e-15);
    EXPECT_EQ(parts::act_value<double>(Act::Relu, u), std::max(u, 0.0));
    EXPECT_EQ(parts::act_value<double>(Act::Tanh, u), std::tanh(u));
    for (Act a : {Act::Gelu, Act::GeluTanh, Act::Silu, Act::Tanh}) {
      const double h = 1e-5;
      const double fd = (parts::act_value<double>(a, u + h) - parts::act_value<double>(a, u - h)) / (2 * h);
      EXPECT_NEAR(parts::act_derivative<double>(a, u), fd, 1e-9) << static_cast<int>(a) << " at " << u;
    }
  }
  // Far in the negative tail GELU is u Phi(u) ~ -phi(u) (1 - 1/u^2): the erfc form keeps its digits.
  const double u = -30.0, phi = std::exp(-0.5 * u * u) / std::sqrt(2.0 * M_PI);
  EXPECT_NEAR(parts::act_value<double>(Act::Gelu, u) / (-phi * (1.0 - 1.0 / (u * u) + 3.0 / (u * u * u * u))), 1.0, 1e-5);
  // The vectorised block is the scalar function to a few ulp.
  Mat Um(3, 5);
  Rng(7, {1}).fill_normal(Um, 2.0);
  const Eigen::ArrayXXd U = Um.array();
  Eigen::ArrayXXd G(3, 5);
  parts::act_block<double>(Act::Tanh, U, G);
  for (Eigen::Index i = 0; i < U.size(); ++i) EXPECT_NEAR(G(i), std::tanh(U(i)), 1e-15);
}

TEST(Parts, SoftmaxTangentIsTheDerivativeOfSoftmaxRowsAndItsOwnTranspose) {
  const int T = 6;
  Mat S(T, T), dS(T, T);
  Rng(3, {2}).fill_normal(S, 1.5);
  Rng(3, {3}).fill_normal(dS, 1.0);
  const double beta = 0.7;
  for (bool causal : {false, true}) {
    auto softmax = [&](const Mat& X) {
      Mat P = Mat::Zero(T, T);
      for (int i = 0; i < T; ++i) {
        const int n = causal ? i + 1 : T;
        double z = 0;
        for (int j = 0; j < n; ++j) z += std::exp(beta * X(i, j));
        for (int j = 0; j < n; ++j) P(i, j) = std::exp(beta * X(i, j)) / z;
      }
      return P;
    };
    const Mat P = softmax(S);
    Mat J = dS;
    parts::softmax_tangent_rows(P, J, beta, causal);
    const double h = 1e-6;
    const Mat fd = (softmax(S + h * dS) - softmax(S - h * dS)) / (2 * h);
    EXPECT_LT((J - fd).cwiseAbs().maxCoeff(), 1e-9) << "causal " << causal;
    // Symmetric Jacobian: <G, J dS> = <J G, dS> row by row.
    Mat G(T, T);
    Rng(3, {4}).fill_normal(G, 1.0);
    Mat JG = G;
    parts::softmax_tangent_rows(P, JG, beta, causal);
    for (int i = 0; i < T; ++i) {
      const int n = causal ? i + 1 : T;
      EXPECT_NEAR(G.row(i).head(n).dot(J.row(i).head(n)), JG.row(i).head(n).dot(dS.row(i).head(n)), 1e-12);
    }
  }
}

TEST(Parts, ScoreBiasMasksAsDefined) {
  const int T = 7;
  const double ninf = -std::numeric_limits<double>::infinity();
  parts::MaskSpec m;
  m.kind = parts::MaskKind::Block;
  m.block = 3;
  Mat B = parts::score_bias(m, T);
  for (int t = 0; t < T; ++t)
    for (int s = 0; s < T; ++s) EXPECT_EQ(B(t, s), (s <= t && s / 3 == t / 3) ? 0.0 : ninf) << t << "," << s;
  m.kind = parts::MaskKind::Sliding;
  m.window = 2;
  B = parts::score_bias(m, T);
  EXPECT_EQ(B(4, 3), 0.0);
  EXPECT_EQ(B(4, 2), ninf);
  EXPECT_EQ(B(4, 5), ninf);
  m.kind = parts::MaskKind::Leaky;
  m.eps_leak = 0.01;
  B = parts::score_bias(m, T);
  EXPECT_EQ(B(2, 2), 0.0);
  EXPECT_DOUBLE_EQ(B(2, 5), std::log(0.01));
  m.kind = parts::MaskKind::Bidirectional;
  m.alibi_slope = 0.25;
  B = parts::score_bias(m, T);
  EXPECT_DOUBLE_EQ(B(1, 6), -1.25);
  EXPECT_DOUBLE_EQ(B(6, 1), -1.25);
  m.kind = parts::MaskKind::Causal;
  B = parts::score_bias(m, T);
  EXPECT_DOUBLE_EQ(B(6, 1), -1.25);
  EXPECT_EQ(B(1, 6), ninf);
}

TEST(Parts, RotaryAtGivenPositionsIsTheRotationAndItsInverse) {
  const int T = 5, heads = 2, hd = 6;
  const std::vector<double> f = parts::rotary_frequencies(4, 10000.0);  // partial: the first 4 of 6 dimensions
  ASSERT_EQ(f.size(), 2u);
  EXPECT_DOUBLE_EQ(f[1], std::pow(10000.0, -0.5));
  const std::vector<double> pos{0.0, 1.0, 2.0, 3.0, 4.0};
  for (bool inter : {false, true}) {
    const parts::RotaryTable a(f, T, inter), b(f, pos, inter);
    EXPECT_EQ(a.cos, b.cos);
    EXPECT_EQ(a.sin, b.sin);
    Mat M(2 * T, heads * hd + 1);
    Rng(5, {1}).fill_normal(M, 1.0);
    Mat R = M;
    parts::rotary_rows<double>(a, R, 1, heads, hd, T, 0, R.rows());
    // Row 7 is position 2; head 1's pair 1 is dimensions (1 + 6 + 1, 1 + 6 + 3) half-split or (1 + 6 + 2, 1 + 6 + 3) interleaved.
    const int x = inter ? 1 + 6 + 2 : 1 + 6 + 1, y = 1 + 6 + 3;
    const double ang = 2.0 * f[1];
    EXPECT_NEAR(R(7, x), std::cos(ang) * M(7, x) - std::sin(ang) * M(7, y), 1e-15);
    EXPECT_NEAR(R(7, y), std::sin(ang) * M(7, x) + std::cos(ang) * M(7, y), 1e-15);
    EXPECT_EQ(R(7, 1 + 6 + 4), M(7, 1 + 6 + 4));  // past the rotated dimensions
    EXPECT_EQ(R.col(0), M.col(0));                // before c0
    parts::rotary_rows<double>(a, R, 1, heads, hd, T, 0, R.rows(), true);
    EXPECT_LT((R - M).cwiseAbs().maxCoeff(), 1e-15);
  }
}

TEST(Parts, Fp32RmsNormIsTheDefinitionWithDoubleSums) {
  const int n = 37, rows = 19;  // odd sizes: the SIMD blocks and the tails
  MatF X(rows, n + 3);
  Mat Xd(rows, n + 3);
  Rng(9, {1}).fill_normal(Xd, 3.0);
  X = Xd.cast<float>();
  Eigen::VectorXf w(n);
  for (int j = 0; j < n; ++j) w[j] = 0.5f + 0.01f * static_cast<float>(j);
  MatF Y = MatF::Zero(rows, n);
  parts::rms_norm_rows_f32(X.data(), X.cols(), n, rows, w.data(), 1e-5, Y.data(), Y.cols());
  for (int i = 0; i < rows; ++i) {
    double ss = 0;
    for (int j = 0; j < n; ++j) ss += static_cast<double>(X(i, j)) * static_cast<double>(X(i, j));
    const float r = static_cast<float>(1.0 / std::sqrt(ss / n + 1e-5));
    for (int j = 0; j < n; ++j) EXPECT_EQ(Y(i, j), X(i, j) * r * w[j]) << i << "," << j;
  }
  // In place (the gated norm of Mamba-2 normalises its own rows).
  MatF Z = X.leftCols(n);
  parts::rms_norm_rows_f32(Z.data(), Z.cols(), n, rows, w.data(), 1e-5, Z.data(), Z.cols());
  EXPECT_EQ(Z, Y);
}

}  // namespace
}  // namespace tokdyn
