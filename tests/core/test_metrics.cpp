// Metrics of §VI (lambda_bar_1, participation ratio, consensus distance) and the PE windows of
// §VI-B (spec T27).
#include <gtest/gtest.h>

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tokdyn/analysis/pe_window.hpp"
#include "tokdyn/engine/observers.hpp"
#include "tokdyn/core/rng.hpp"

using namespace tokdyn;

TEST(GramMetrics, CollinearTokensWithRandomSignsGiveOne) {
  Rng rng(1);
  const Tokens v = rng.sphere_tokens(1, 16);
  Tokens Z(50, 16);
  for (int i = 0; i < 50; ++i) Z.row(i) = (rng.uniform() < 0.5 ? -1.0 : 1.0) * v.row(0);
  const GramMetrics g = gram_metrics(Z);
  EXPECT_NEAR(g.lambda1, 1.0, 1e-12);
  EXPECT_NEAR(g.participation, 1.0, 1e-12);
}

TEST(GramMetrics, OrthonormalTokensGiveOneOverLenAndLen) {
  Tokens Z = Tokens::Identity(10, 16);
  const GramMetrics g = gram_metrics(Z);
  EXPECT_NEAR(g.lambda1, 0.1, 1e-12);
  EXPECT_NEAR(g.participation, 10.0, 1e-12);
  EXPECT_NEAR(g.min_cosine, 0.0, 1e-15);
}

TEST(GramMetrics, TwoClustersGiveHalfAndTwo) {
  Tokens Z = Tokens::Zero(8, 5);
  for (int i = 0; i < 4; ++i) Z(i, 0) = 1.0;
  for (int i = 4; i < 8; ++i) Z(i, 1) = -3.0;  // unnormalised: metrics normalise first
  const GramMetrics g = gram_metrics(Z);
  EXPECT_NEAR(g.lambda1, 0.5, 1e-12);
  EXPECT_NEAR(g.participation, 2.0, 1e-12);
}

TEST(GramMetrics, RandomTokensSatisfyParticipationBounds) {
  Rng rng(2);
  for (int trial = 0; trial < 20; ++trial) {
    const Tokens Z = rng.sphere_tokens(12, 6);
    const GramMetrics g = gram_metrics(Z);
    const Mat G = Z * Z.transpose();
    EXPECT_NEAR(g.participation, 144.0 / G.squaredNorm(), 1e-12);
    EXPECT_LE(1.0 / g.lambda1, g.participation + 1e-12);
    EXPECT_LE(g.participation, 1.0 / (g.lambda1 * g.lambda1) + 1e-12);
    EXPECT_LE(g.participation, 6.0 + 1e-12);  // r <= rank G <= min(len, d)
  }
}

TEST(GramMetrics, PreprocessingSizeAgreesWithAnEigenReference) {
  // 50 tokens in 768 dimensions, as ssm-random-silu observes each run: the Gram product goes
  // through BLAS and lambda_1 through LAPACK's bisection for the largest eigenvalue alone; the
  // reference is Eigen's own product and its full symmetric eigensolver (no shared code).
  Rng rng(3);
  Tokens Z = rng.sphere_tokens(50, 768);
  Z.topRows(20) += 2.0 * Z.row(0).replicate(20, 1);  // a partial cluster, unnormalised rows
  const GramMetrics g = gram_metrics(Z);
  Tokens Zh = Z;
  for (Eigen::Index i = 0; i < Zh.rows(); ++i) Zh.row(i).normalize();
  const Eigen::MatrixXd G = Zh * Zh.transpose();
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(G, Eigen::EigenvaluesOnly);
  EXPECT_NEAR(g.lambda1, es.eigenvalues()(49) / 50.0, 1e-13);
  EXPECT_NEAR(g.participation, 2500.0 / G.squaredNorm(), 1e-12);
  double mc = 1.0;
  for (int i = 0; i < 50; ++i)
    for (int j = i + 1; j < 50; ++j) mc = std::min(mc, G(i, j));
  EXPECT_NEAR(g.min_cosine, mc, 1e-14);
  EXPECT_GT(g.lambda1, 0.3);  // the cluster of 20 shows
}

TEST(ConsensusDistance, ZeroAtConsensusAndExactNearIt) {
  Tokens Z = Tokens::Zero(4, 3);
  Z(0, 2) = 1;
  Z(1, 2) = -1;
  Z(2, 2) = 1;
  Z(3, 2) = -1;
  EXPECT_EQ(consensus_distance(Z).distance, 0.0);
  EXPECT_EQ(consensus_distance(Z).channel, 2);
  // Tiny tangential offsets keep their digits (no 1 - b cancellation).
  Z(0, 0) = 1e-12;
  Z.row(0).normalize();
  EXPECT_NEAR(consensus_distance(Z).distance, 1e-12, 1e-24);
  // Generic case against the direct formula.
  Rng rng(3);
  const Tokens R = rng.sphere_tokens(5, 4);
  double best = 1e300;
  for (int mu = 0; mu < 4; ++mu) {
    double s = 0;
    for (int i = 0; i < 5; ++i) s += (R.row(i) - (R(i, mu) >= 0 ? 1.0 : -1.0) * RowVec::Unit(4, mu)).squaredNorm();
    best = std::min(best, s);
  }
  EXPECT_NEAR(consensus_distance(R).distance, std::sqrt(best), 1e-12);
}

// The channel-by-channel loop consensus_distance replaced (it walks the tokens of one channel at a
// time): the token-by-token version must give the same bits, dominant channels and zero rows included.
ConsensusDistance consensus_distance_by_channel(const Tokens& Z) {
  const Eigen::Index len = Z.rows(), d = Z.cols();
  ConsensusDistance best{std::numeric_limits<double>::infinity(), 0};
  Vec inv(len), sq(len);
  for (Eigen::Index i = 0; i < len; ++i) {
    sq[i] = Z.row(i).squaredNorm();
    inv[i] = sq[i] > 0.0 ? 1.0 / std::sqrt(sq[i]) : 0.0;
  }
  for (Eigen::Index mu = 0; mu < d; ++mu) {
    double s = 0.0;
    for (Eigen::Index i = 0; i < len; ++i) {
      const double a = std::abs(Z(i, mu)) * inv[i];
      const double tot = sq[i], zz = Z(i, mu) * Z(i, mu);
      const double tang = (zz > 0.5 * tot ? Z.row(i).head(mu).squaredNorm() + Z.row(i).tail(d - mu - 1).squaredNorm()
                                          : tot - zz) * inv[i] * inv[i];
      s += 2.0 * tang / (1.0 + a);
    }
    if (s < best.distance) best = {s, static_cast<int>(mu)};
  }
  best.distance = std::sqrt(best.distance);
  return best;
}

TEST(ConsensusDistance, SameBitsAsTheChannelByChannelLoop) {
  Rng rng(11);
  for (int trial = 0; trial < 6; ++trial) {
    const int len = 3 + 7 * trial, d = 5 + 31 * trial;
    Tokens Z = rng.sphere_tokens(len, d);
    Z *= 1.0 + trial;                                         // off the sphere too
    Z.row(1) = RowVec::Zero(d);                               // a zero token
    Z(2, d / 2) = 40.0;                                       // a dominant channel
    if (trial % 2 == 0) Z.col(d - 1).array() += 10.0;         // near consensus on the last channel
    const ConsensusDistance a = consensus_distance(Z), b = consensus_distance_by_channel(Z);
    EXPECT_EQ(a.channel, b.channel) << trial;
    EXPECT_EQ(std::memcmp(&a.distance, &b.distance, sizeof(double)), 0) << trial << ": " << a.distance << " vs " << b.distance;
  }
}

TEST(PeWindow, NonMonotoneWorstWindowAverage) {
  std::vector<double> q;
  for (int k = 0; k < 10; ++k) q.insert(q.end(), {-1.0, -1.0, 3.0});
  const auto W = worst_window_average(q);
  EXPECT_DOUBLE_EQ(W[0], -1.0);
  EXPECT_DOUBLE_EQ(W[1], -1.0);
  EXPECT_NEAR(W[2], 1.0 / 3.0, 1e-15);
  EXPECT_NEAR(W[3], 0.0, 1e-15);  // W is not monotone in T
  EXPECT_EQ(smallest_admissible_window(W), 3);
}

TEST(PeWindow, NegativeStretchNeedsLongWindow) {
  std::vector<double> q(200, 1.0);
  for (int s = 101; s <= 110; ++s) q[s - 1] = -1.0;
  EXPECT_EQ(smallest_admissible_window(worst_window_average(q)), 21);
}

TEST(PeWindow, AlwaysNegativeHasNoAdmissibleWindow) {
  std::vector<double> q(50, -1.0);
  EXPECT_FALSE(smallest_admissible_window(worst_window_average(q)).has_value());
}

TEST(PeWindow, WindowAveragesSlide) {
  const std::vector<double> q{1, 2, 3, 4};
  const auto a = window_averages(q, 2);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_DOUBLE_EQ(a[0], 1.5);
  EXPECT_DOUBLE_EQ(a[2], 3.5);
}
