// Check R17 of the coupling paper (Lemma 17, the Green operator of a dichotomy): the block-banded
// BVP solution of u(l+1) = B(l) u(l) + h(l) on a window with the two-sided constant extension
// (App. B.1) has residual ~1e-13, agrees with the explicit Green sum to ~1e-10 (families G1, G3,
// G4, including non-normal ones), is unique (smallest singular value of the BVP matrix > 0), gives
// -A^{-1} h in the weight-tied case, and its norm satisfies lower <= upper <= C (1/m_- + 1/m_+).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/analysis/green.hpp"
#include "tokdyn/core/rng.hpp"

using namespace tokdyn;
using green::Matrix;
using green::Seq;
using green::Tails;

namespace {

Seq random_forcing(long d, long L, std::uint64_t seed) {
  Rng rng(seed, {0x68});
  Seq h(d, L);
  for (long j = 0; j < L; ++j)
    for (long i = 0; i < d; ++i) h(i, j) = rng.uniform(-1.0, 1.0);
  return h;
}

green::Bvp make_bvp(const std::vector<Matrix>& B) { return green::Bvp(B, green::make_ends(B.front(), B.back())); }

// Residual, end conditions and explicit-sum agreement for one family, both tail conventions.
void check_family(const std::vector<Matrix>& B, long expect_k, const char* name) {
  const long L = static_cast<long>(B.size()), d = B.front().rows();
  const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(B);
  const cocycle::Bundles b = cocycle::two_sided_bundles(c);
  ASSERT_EQ(b.k, expect_k) << name;
  const green::Bvp bvp = make_bvp(B);
  EXPECT_EQ(bvp.ends().k, expect_k) << name;
  const Seq h = random_forcing(d, L, 3);
  for (Tails t : {Tails::Constant, Tails::Zero}) {
    const Seq u = bvp.solve(h, t);
    const double scale = 1 + green::sup_norm(u);
    EXPECT_LT(bvp.residual(u, h), 1e-13 * scale * 10) << name;
    EXPECT_LT(bvp.boundary_residual(u, h, t), 1e-12 * scale) << name;
    const Seq ue = green::green_explicit(c, b, h, t);
    EXPECT_LT(green::sup_norm(ue - u), 1e-10 * scale) << name << (t == Tails::Zero ? " zero tails" : " constant tails");
    // The adjoint: <ubar, G h> = <G^T ubar, h>.
    Seq ubar(d, L + 1);
    Rng rng(5, {7});
    for (long j = 0; j <= L; ++j)
      for (long i = 0; i < d; ++i) ubar(i, j) = rng.normal();
    const Seq hbar = bvp.solve_transpose(ubar, t);
    EXPECT_NEAR((ubar.array() * u.array()).sum(), (hbar.array() * h.array()).sum(), 1e-10 * scale * ubar.norm() * h.norm()) << name;
  }
  EXPECT_GT(bvp.smallest_singular_value_estimate(), 1e-4) << name;
}

}  // namespace

TEST(CouplingGreen, BvpMatchesTheExplicitGreenSumOnG1G3G4) {
  // G1 weight-tied, non-normal eigenbasis (kappa(S) = 8): spectrum {1.2, 1.1, 0.7, 0.5}.
  check_family(cocycle::family_g1(60, {0.2, 0.1, -0.3, -0.5}, 8.0, 11), 2, "G1");
  // G3 upper-triangular, periodic diagonals, strong non-normal coupling |b| <= 1.5.
  check_family(cocycle::family_g3(80, {1.3, 0.6, 1.2, 0.5}, "periodic", 0.1, 6, 3, 1.5, 4), 2, "G3");
  // G4 sector-structured saddle, slowly rotating (omega = 0.05).
  check_family(cocycle::family_g4(80, {-0.6, -0.6, -0.5, -0.5}, {0.8, 0.8, 0.2, 0.2}, 1.0, 0.05, 7), 2, "G4");
}

TEST(CouplingGreen, AllContractingAndAllExpanding) {
  // k = 0 (looped LTI, A4°): u(0) = (I - B_left)^{-1} h(0) is forced, G h = sum_{s<l} Phi(l,s+1) h(s) + tail.
  check_family(cocycle::family_g2(50, 3, -1.5, 0.5, 9), 0, "G2 (k = 0)");
  // k = d: every direction expands, G h = -sum_{s>=l} Phi(l,s+1) h(s) - tail.
  check_family(cocycle::family_g1(50, {0.3, 0.15, 0.4}, 3.0, 2), 3, "G1 expanding (k = d)");
}

TEST(CouplingGreen, WeightTiedClosedForm) {
  // A(l) = A constant, h constant: G h = -A^{-1} h at every layer (two-sided extension: exact).
  const auto B = cocycle::family_g1(40, {0.2, 0.1, -0.3, -0.5}, 5.0, 21);
  const Matrix A = B.front() - Matrix::Identity(4, 4);
  Eigen::VectorXd h0(4);
  h0 << 0.3, -1.0, 0.5, 2.0;
  const Seq h = h0.replicate(1, 40);
  const Seq u = make_bvp(B).solve(h, Tails::Constant);
  const Eigen::VectorXd closed = green::weight_tied_constant(A, h0);
  for (long l = 0; l <= 40; ++l) EXPECT_LT((u.col(l) - closed).norm(), 1e-12 * (1 + closed.norm())) << l;
  EXPECT_LT((closed + A.inverse() * h0).norm(), 1e-12 * closed.norm());
  EXPECT_THROW(green::weight_tied_constant(Matrix::Zero(2, 2), Eigen::VectorXd::Ones(2)), std::domain_error);
}

TEST(CouplingGreen, UniquenessAndTheNonHyperbolicLimit) {
  // Ends B = diag(2, 0.5): E^u(B_left) = e1, E^s(B_right) = e2. An interior rotation by theta carries
  // e1 to (cos theta, sin theta): at theta = pi/2 it lands in E^s(B_right) and the homogeneous BVP
  // has the nonzero bounded solution u(0) = e1 (no uniqueness); sigma_min of the BVP matrix ~ cos theta.
  Matrix Bl = Matrix::Zero(2, 2);
  Bl(0, 0) = 2.0;
  Bl(1, 1) = 0.5;
  auto rotated = [&](double theta) {
    Matrix R(2, 2);
    R << std::cos(theta), -std::sin(theta), std::sin(theta), std::cos(theta);
    return std::vector<Matrix>{Bl, R, Bl, Bl};
  };
  const green::Ends e = green::make_ends(Bl, Bl);
  const double s_far = green::Bvp(rotated(0.3), e).smallest_singular_value_estimate();
  const double s_near = green::Bvp(rotated(M_PI / 2 - 1e-7), e).smallest_singular_value_estimate();
  EXPECT_GT(s_far, 0.05);
  EXPECT_GT(s_near, 0.0);
  EXPECT_LT(s_near, 1e-6);
  Matrix swap(2, 2);
  swap << 0, 1, 1, 0;
  EXPECT_THROW(green::Bvp(std::vector<Matrix>{Bl, swap, Bl}, e), std::domain_error);  // exactly singular
  // An end approaching the unit circle: growth scale 1 + a, the constant-tail solution -h/a blows up
  // (||G|| >= 1/a), and at a = 0 there is no dichotomy: make_ends refuses.
  auto end_cocycle = [](double a) {
    Matrix B = Matrix::Zero(2, 2);
    B(0, 0) = 1.0 + a;
    B(1, 1) = 0.5;
    B(0, 1) = 0.7;
    return std::vector<Matrix>(30, B);
  };
  for (double a : {1e-2, 1e-4, 1e-6}) {
    const auto B = end_cocycle(a);
    const Seq h = Seq::Constant(2, 30, 1.0);
    const Seq u = make_bvp(B).solve(h);
    EXPECT_GT(green::sup_norm(u), 0.99 / a) << a;
  }
  const auto B1 = end_cocycle(0.0);
  EXPECT_THROW(green::make_ends(B1.front(), B1.back()), std::domain_error);
  // Different unstable dimensions at the two ends.
  EXPECT_THROW(green::make_ends(end_cocycle(0.3).front(), 0.5 * Matrix::Identity(2, 2)), std::domain_error);
}

TEST(CouplingGreen, NormEstimatesBracketAndObeyLemma17) {
  const auto B = cocycle::family_g4(60, {-0.6, -0.6, -0.5, -0.5}, {0.8, 0.8, 0.2, 0.2}, 1.0, 0.05, 7);
  const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(B);
  const cocycle::Bundles b = cocycle::two_sided_bundles(c);
  const green::NormEstimate e = green::green_norm_estimate(c, b);
  EXPECT_GT(e.lower, 0.0);
  EXPECT_LE(e.lower, e.upper * (1 + 1e-12));
  EXPECT_GT(e.lower, 0.3 * e.upper);  // the sign iteration is not a trivial bound
  // Lemma 17: ||G|| <= C (1/m_- + 1/m_+), C for rates r_- = 0.8, r_+ = 1.1 (spectrum ~ {0.7, 1.2}).
  const double rm = 0.8, rp = 1.1;
  const cocycle::GrowthEnvelope g = cocycle::growth_envelope(c, b);
  const double C = std::max(cocycle::constant_minus(g, rm), cocycle::constant_plus(g, rp));
  const double bound = C * (1 / (1 - rm) + 1 / (rp - 1));
  EXPECT_LE(e.upper, bound);
  // The padded (closer to bi-infinite) operator: upper grows but stays under the bound.
  const green::NormEstimate ep = green::green_norm_estimate(c, b, 20);
  EXPECT_GE(ep.upper, e.upper * (1 - 1e-12));
  EXPECT_LE(ep.upper, bound);
  // Weight-tied scalar: ||G|| = 1/|a| exactly for B = 1 + a.
  const std::vector<Matrix> Bs(40, Matrix::Constant(1, 1, 0.6));
  const cocycle::Cocycle cs = cocycle::Cocycle::from_matrices(Bs);
  const green::NormEstimate es = green::green_norm_estimate(cs, cocycle::two_sided_bundles(cs), 200);
  EXPECT_NEAR(es.upper, 1 / 0.4, 1e-9);
  EXPECT_LE(es.lower, es.upper);
  EXPECT_GT(es.lower, 0.99 * (1 - std::pow(0.6, 40)) / 0.4);
}

TEST(CouplingGreen, ExclusionDepth) {
  // log(C/tol)/log(1/max(r_-, 1/r_+)): C = 10, tol = 1e-8, r_- = 0.5, r_+ = 1.25 (1/r_+ = 0.8).
  EXPECT_EQ(green::exclusion_depth(10, 0.5, 1.25, 1e-8), static_cast<long>(std::ceil(std::log(1e9) / std::log(1.25))));
  EXPECT_EQ(green::exclusion_depth(1, 0.5, std::numeric_limits<double>::infinity(), 0.25), 2);
  EXPECT_THROW(green::exclusion_depth(0.5, 0.5, 2, 1e-8), std::invalid_argument);
  EXPECT_THROW(green::exclusion_depth(2, 1.0, 2, 1e-8), std::invalid_argument);
}

TEST(CouplingGreen, BadSizesThrow) {
  const auto B = cocycle::family_g1(10, {0.2, -0.3}, 2.0, 1);
  const green::Ends e = green::make_ends(B.front(), B.back());
  EXPECT_THROW(green::Bvp({}, e), std::invalid_argument);
  EXPECT_THROW(green::Bvp({Matrix::Identity(3, 3)}, e), std::invalid_argument);
  EXPECT_THROW(green::make_ends(Matrix(0, 0), Matrix(0, 0)), std::invalid_argument);
  EXPECT_THROW(green::make_ends(Matrix::Identity(2, 2) * 2, Matrix::Identity(3, 3) * 2), std::invalid_argument);
  green::Ends bad = e;
  bad.left_rows = Matrix(2, 2);
  EXPECT_THROW(green::Bvp(B, bad), std::invalid_argument);
  const green::Bvp bvp(B, e);
  EXPECT_THROW(bvp.solve(Seq::Zero(2, 9)), std::invalid_argument);
  EXPECT_THROW(bvp.solve(Seq::Zero(3, 10)), std::invalid_argument);
  EXPECT_THROW(bvp.solve_transpose(Seq::Zero(2, 10)), std::invalid_argument);
  EXPECT_THROW(bvp.residual(Seq::Zero(2, 11), Seq::Zero(2, 11)), std::invalid_argument);
  Seq hn = Seq::Zero(2, 10);
  hn(0, 3) = std::nan("");
  EXPECT_THROW(bvp.solve(hn), std::invalid_argument);
  const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(B);
  const cocycle::Bundles b = cocycle::two_sided_bundles(c);
  EXPECT_THROW(green::green_explicit(c, b, Seq::Zero(2, 5)), std::invalid_argument);
  const cocycle::Bundles clv = cocycle::clv_bundles(c, 2);
  EXPECT_THROW(green::green_explicit(c, clv, Seq::Zero(2, 10)), std::invalid_argument);
}

// Blocks above the base size of the recursive triangular inverse (d = 64, as the benchmarks): the
// block LU's solution against Eigen's LU of the assembled dense BVP matrix (independent code), and a
// factor store released by another BVP of the same size (other entries) gives the same bits.
TEST(CouplingGreen, LargeBlocksMatchADenseSolveAndAReusedStoreGivesTheSameBits) {
  const long d = 64, L = 16;
  const std::vector<Matrix> B = green::saddle_family("g4", d, L, 0.05, 3);
  const green::Bvp a = make_bvp(B);
  ASSERT_EQ(a.ends().k, 32);
  const Seq h = random_forcing(d, L, 9);
  const Seq u = a.solve(h, Tails::Zero);
  Eigen::VectorXd rhs = Eigen::VectorXd::Zero((L + 1) * d);
  for (long l = 0; l < L; ++l) rhs.segment(a.ends().B_left.rows() - a.ends().k + l * d, d) = h.col(l);
  const Eigen::VectorXd x = a.dense_matrix().partialPivLu().solve(rhs);
  double worst = 0;
  for (long l = 0; l <= L; ++l) worst = std::max(worst, (x.segment(l * d, d) - u.col(l)).cwiseAbs().maxCoeff());
  EXPECT_LT(worst, 1e-12 * (1 + green::sup_norm(u)));
  {
    const green::Bvp other = make_bvp(green::saddle_family("g4", d, L, 0.05, 4));  // same size, other entries
    EXPECT_GT(green::sup_norm(other.solve(h, Tails::Zero) - u), 1e-3);
  }
  const green::Bvp again = make_bvp(B);  // may take the store `other` released
  const Seq u2 = again.solve(h, Tails::Zero);
  EXPECT_EQ((u2 - u).cwiseAbs().maxCoeff(), 0.0);
}
