// Slow-mode / fast-mode blocks of generator perturbations (analysis/curvature_modes.hpp, coupling
// paper (A6), E6): exact slow-mode and fast-mode perturbations against oblique projectors of a
// weight-tied cocycle, the projector residuals, LayerNorm's quotient basis.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/analysis/curvature_modes.hpp"

using namespace tokdyn::cocycle;

namespace {

Matrix random_matrix(long n, unsigned seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> N(0.0, 1.0);
  Matrix M(n, n);
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < n; ++j) M(i, j) = N(g);
  return M;
}

/// A weight-tied G1 cocycle (kappa(S) = 10: oblique projectors) and its two-sided bundles.
struct Tied {
  Cocycle c;
  Bundles b;
};
Tied tied(long L) {
  Cocycle c = Cocycle::from_matrices(family_g1(L, {0.2, 0.1, -0.3, -0.5}, 10.0, 3));
  Bundles b = two_sided_bundles(c);
  return {std::move(c), std::move(b)};
}

}  // namespace

TEST(CurvatureModes, ExactSlowAndFastPerturbations) {
  const long L = 6;
  const Tied t = tied(L);
  ASSERT_EQ(t.b.k, 2);
  const long n = t.c.dim();
  const Matrix I = Matrix::Identity(n, n);
  std::vector<Matrix> slow, fast, decaying, skew;
  for (long l = 0; l < L; ++l) {
    const Matrix E = random_matrix(n, 10 + static_cast<unsigned>(l));
    const Matrix& Pin = t.b.P_plus[static_cast<std::size_t>(l)];
    const Matrix& Pout = t.b.P_plus[static_cast<std::size_t>(l + 1)];
    slow.push_back(Pout * E * Pin);
    fast.push_back((I - Pout) * E);
    decaying.push_back((I - Pout) * E * (I - Pin));
    skew.push_back(Pout * E * (I - Pin));
  }
  const BlockSplit s = split_blocks(slow, t.b.P_plus);
  EXPECT_NEAR(s.slow_fraction(), 1.0, 1e-12);
  EXPECT_NEAR(s.slow_share(), 1.0, 1e-12);
  EXPECT_LE(s.fast_range_fraction(), 1e-20 + 1e-24);
  EXPECT_NEAR(s.fast_fraction(), 0.0, 1e-20);
  const BlockSplit f = split_blocks(fast, t.b.P_plus);
  EXPECT_NEAR(f.fast_range_fraction(), 1.0, 1e-12);
  EXPECT_NEAR(f.slow_fraction(), 0.0, 1e-20);
  EXPECT_NEAR(f.cross_plus_minus(), 0.0, 1e-20);
  const BlockSplit d = split_blocks(decaying, t.b.P_plus);
  EXPECT_NEAR(d.fast_fraction(), 1.0, 1e-12);
  EXPECT_NEAR(d.fast_range_fraction(), 1.0, 1e-12);
  const BlockSplit k = split_blocks(skew, t.b.P_plus);
  EXPECT_NEAR(k.cross_plus_minus(), 1.0, 1e-12);
  EXPECT_NEAR(k.slow_fraction() + k.fast_fraction() + k.cross_minus_plus(), 0.0, 1e-20);
  // Oblique projectors: a generic perturbation's blocks need not add up to its norm.
  std::vector<Matrix> generic;
  for (long l = 0; l < L; ++l) generic.push_back(random_matrix(n, 100 + static_cast<unsigned>(l)));
  const BlockSplit g = split_blocks(generic, t.b.P_plus);
  EXPECT_GT(g.block_sum(), 1.0 + 1e-3);
  EXPECT_NEAR(g.slow_share() * g.block_sum(), g.slow_fraction(), 1e-12);
  EXPECT_LE(g.slow_share() + g.fast_share(), 1.0);
  EXPECT_GE(g.slow_fraction(), 0.0);
  // Orthogonal projectors (a diagonal cocycle): the four blocks add up to the whole.
  std::vector<Matrix> B(static_cast<std::size_t>(L), Matrix(Eigen::Vector4d(1.2, 1.1, 0.7, 0.5).asDiagonal()));
  const Cocycle cd = Cocycle::from_matrices(B);
  const Bundles bd = two_sided_bundles(cd);
  EXPECT_NEAR(split_blocks(generic, bd.P_plus).block_sum(), 1.0, 1e-12);
}

TEST(CurvatureModes, ScaleFreeAndRefusals) {
  const Tied t = tied(4);
  std::vector<Matrix> E, E3;
  for (long l = 0; l < 4; ++l) {
    E.push_back(random_matrix(4, 7 + static_cast<unsigned>(l)));
    E3.push_back(-3.0 * E.back());
  }
  EXPECT_NEAR(split_blocks(E, t.b.P_plus).slow_fraction(), split_blocks(E3, t.b.P_plus).slow_fraction(), 1e-14);
  std::vector<Matrix> Z(4, Matrix::Zero(4, 4));
  EXPECT_THROW(split_blocks(Z, t.b.P_plus), std::invalid_argument);
  EXPECT_THROW(split_blocks(E, std::vector<Matrix>(t.b.P_plus.begin(), t.b.P_plus.end() - 1)), std::invalid_argument);
}

TEST(CurvatureModes, ProjectorResiduals) {
  const Tied t = tied(8);
  const ProjectorResiduals r = projector_residuals(t.c, t.b);
  EXPECT_LE(r.idempotence, 1e-12);
  EXPECT_LE(r.complement, 1e-12);
  EXPECT_LE(r.sum, 1e-14);
  EXPECT_LE(r.trace, 1e-11);
  EXPECT_LE(r.invariance, 1e-12);
  EXPECT_EQ(r.p_plus_norm.size(), t.b.P_plus.size());
  EXPECT_GT(r.p_plus_norm[0], 1.0);  // oblique
  // A matrix that is not a projector is caught.
  Bundles bad = t.b;
  bad.P_plus[3] = 1.1 * bad.P_plus[3];
  EXPECT_GT(projector_residuals(t.c, bad).idempotence, 0.05);
}

TEST(CurvatureModes, OnesComplementAndKernel) {
  const long T = 3, d = 5;
  const Matrix Q = ones_complement(T, d);
  ASSERT_EQ(Q.rows(), T * d);
  ASSERT_EQ(Q.cols(), T * (d - 1));
  EXPECT_LE((Q.transpose() * Q - Matrix::Identity(T * (d - 1), T * (d - 1))).cwiseAbs().maxCoeff(), 1e-15);
  for (long t = 0; t < T; ++t) {
    Eigen::VectorXd u = Eigen::VectorXd::Zero(T * d);
    u.segment(t * d, d).setOnes();
    EXPECT_LE((Q.transpose() * u).cwiseAbs().maxCoeff(), 1e-15);
  }
  // A generator that annihilates every token's constant direction: A = M (I - Pi), Pi the projector onto them.
  Matrix Pi = Matrix::Identity(T * d, T * d) - Q * Q.transpose();
  const Matrix A = random_matrix(T * d, 5) * (Matrix::Identity(T * d, T * d) - Pi);
  EXPECT_LE(ones_kernel_residual({A}, T, d), 1e-14);
  EXPECT_GT(ones_kernel_residual({random_matrix(T * d, 6)}, T, d), 1e-3);
  EXPECT_THROW(ones_complement(2, 1), std::invalid_argument);
}
