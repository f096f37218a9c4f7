// Metrics of §VI (lambda_bar_1, participation ratio, consensus distance) and the PE windows of
// §VI-B (spec T27).
#include <gtest/gtest.h>

#include <cmath>

#include "tokdyn/analysis/pe_window.hpp"
#include "tokdyn/observers.hpp"
#include "tokdyn/rng.hpp"

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
