// The vectorised elementwise functions of nn.hpp against libm entry by entry (an independent
// implementation): log1p_nonneg and the array softplus within 3 ulp, and their edge values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tokdyn/core/nn.hpp"

namespace {
double ulps(double a, double b) {
  if (a == b) return 0.0;
  const double scale = std::max(std::abs(b), std::numeric_limits<double>::min());
  return std::abs(a - b) / (scale * std::numeric_limits<double>::epsilon());
}
}  // namespace

TEST(Nn, Log1pNonnegIsWithin3UlpOfLibm) {
  std::mt19937_64 g(7);
  std::uniform_real_distribution<double> e(-60.0, 0.0);
  Eigen::ArrayXd u(20000);
  for (Eigen::Index i = 0; i < u.size(); ++i) u(i) = std::exp2(e(g));  // 2^-60 .. 1: every binade
  u(0) = 0.0;
  u(1) = 1.0;
  u(2) = std::numeric_limits<double>::denorm_min();
  u(3) = std::numeric_limits<double>::epsilon() / 4;  // below the rounding of 1 + u
  const Eigen::ArrayXd v = tokdyn::nn::log1p_nonneg(u);
  double worst = 0;
  for (Eigen::Index i = 0; i < u.size(); ++i) worst = std::max(worst, ulps(v(i), std::log1p(u(i))));
  EXPECT_LE(worst, 3.0);
  EXPECT_EQ(v(0), 0.0);
  EXPECT_EQ(v(2), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(v(3), u(3));
}

TEST(Nn, ArraySoftplusMatchesTheScalarOne) {
  std::mt19937_64 g(8);
  std::normal_distribution<double> n(0.0, 8.0);
  Eigen::ArrayXd x(20000);
  for (Eigen::Index i = 0; i < x.size(); ++i) x(i) = n(g);
  const double edges[] = {0.0, -0.0, 1e-300, -1e-300, 36.04, -36.04, 40.0, -40.0, 700.0, -700.0, 1e300, -1e300};
  for (std::size_t i = 0; i < std::size(edges); ++i) x(static_cast<Eigen::Index>(i)) = edges[i];
  const Eigen::ArrayXd y = tokdyn::nn::softplus(x);
  double worst = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i)
    if (x(i) > -708.0) worst = std::max(worst, ulps(y(i), tokdyn::nn::softplus(x(i))));
  EXPECT_LE(worst, 3.0);
  EXPECT_EQ(y(0), std::log(2.0));
  EXPECT_EQ(y(10), 1e300);       // no overflow
  // below -708 (Eigen's exp stops at its smallest normal result): tiny and never negative
  EXPECT_GE(y(11), 0.0);
  EXPECT_LE(y(11), 2.3e-308);
  EXPECT_EQ(y(8), tokdyn::nn::softplus(700.0));
}
