// The growth envelope and dichotomy constants (cocycle_bundles.cpp) against brute force: every
// Phi(s+j, s) P_-(s) and Phi(s-j, s) P_+(s) formed by dense products over the whole window, its
// 2-norm by JacobiSVD. The envelope stops a push once it is below 1e-18 of its peak and runs the
// starts in parallel: the constants must not move, at any thread count. And the 2 x 2 fast path
// of spectral_norm against JacobiSVD.
#include <gtest/gtest.h>

#include <Eigen/SVD>
#include <algorithm>
#include <cmath>
#include <omp.h>
#include <random>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/core/norms.hpp"

using namespace tokdyn;
using Matrix = Eigen::MatrixXd;

namespace {

double svd_norm(const Matrix& A) { return Eigen::JacobiSVD<Matrix>(A).singularValues()(0); }

/// C_-(r), C_+(r) by the untruncated pushes over the starts s = 0, stride, 2 stride, ...: forward
/// P_-(l) B(l-1) ... re-projected every step (the growing part's round-off kept out, as the
/// definition on V_perp asks), backward by the restricted inverses T(l)^{-1}, every lag to the end,
/// each norm by JacobiSVD.
std::pair<double, double> brute_constants(const std::vector<Matrix>& B, const cocycle::Bundles& b, long stride, double rm, double rp) {
  const long n = static_cast<long>(b.P_plus.size()), d = B[0].rows();
  const Matrix I = Matrix::Identity(d, d);
  double Cm = 1, Cp = 1;
  for (long s = 0; s < n; s += stride) {
    Matrix X = I - b.P_plus[static_cast<std::size_t>(s)];
    for (long l = s; l < n; ++l) {
      if (l > s) X = (I - b.P_plus[static_cast<std::size_t>(l)]) * (B[static_cast<std::size_t>(l - 1)] * X);
      Cm = std::max(Cm, svd_norm(X) / std::pow(rm, static_cast<double>(l - s)));
    }
    if (b.k == 0) continue;
    Matrix W = b.U[static_cast<std::size_t>(s)].transpose() * b.P_plus[static_cast<std::size_t>(s)];
    for (long l = s; l >= 0; --l) {
      if (l < s) W = b.T[static_cast<std::size_t>(l)].partialPivLu().solve(W);
      Cp = std::max(Cp, svd_norm(W) * std::pow(rp, static_cast<double>(s - l)));
    }
  }
  return {Cm, Cp};
}

/// max_l sum_s ||G(l, s+1)|| by the definition: every Phi(l, s+1) P_-(s+1) (dense products,
/// re-projected every step) and Phi(l, s+1) P_+(s+1) (restricted inverses) to the window's ends, each
/// norm by JacobiSVD, no push cut short.
double brute_green(const std::vector<Matrix>& B, const cocycle::Bundles& b) {
  const long n = static_cast<long>(b.P_plus.size()), d = B[0].rows();
  const Matrix I = Matrix::Identity(d, d);
  Eigen::VectorXd row = Eigen::VectorXd::Zero(n);
  for (long sig = 1; sig < n; ++sig) {
    Matrix X = I - b.P_plus[static_cast<std::size_t>(sig)];
    row(sig) += svd_norm(X);
    for (long l = sig + 1; l < n; ++l) {
      X = (I - b.P_plus[static_cast<std::size_t>(l)]) * (B[static_cast<std::size_t>(l - 1)] * X);
      row(l) += svd_norm(X);
    }
    if (b.k == 0) continue;
    Matrix W = b.U[static_cast<std::size_t>(sig)].transpose() * b.P_plus[static_cast<std::size_t>(sig)];
    for (long l = sig - 1; l >= 0; --l) {
      W = b.T[static_cast<std::size_t>(l)].partialPivLu().solve(W);
      row(l) += svd_norm(W);
    }
  }
  return row.maxCoeff();
}

}  // namespace

TEST(CocycleEnvelope, GreenNormEqualsBruteForceAtAnyThreadCount) {
  // The pushes run in the bundles' own coordinates (m x m and k x k products, m = d - k): the row
  // sums must equal the d x d definition. G4 (k = 2 of d = 4, shear) and G3 (switching, k = 2).
  for (const auto& B : {cocycle::family_g4(90, {-0.6, -0.6, -0.5, -0.5}, {0.8, 0.8, 0.2, 0.2}, 1.0, 0.05, 7),
                        cocycle::family_g3(90, {1.3, 1.1, 0.8, 0.6}, "switching", 0.1, 8, 4, 2.0, 3)}) {
    const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(B);
    const cocycle::Bundles b = cocycle::two_sided_bundles(c);
    ASSERT_GT(b.k, 0);
    ASSERT_LT(b.k, c.dim());
    const double want = brute_green(B, b);
    double first = 0;
    for (const int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      const double g = cocycle::green_norm(c, b);
      EXPECT_NEAR(g, want, 1e-12 * want);
      if (threads == 1) first = g;
      EXPECT_EQ(g, first);  // the same bits at any thread count
    }
  }
  omp_set_num_threads(1);
}

TEST(CocycleEnvelope, SpectralNormTwoByTwoEqualsSvd) {
  std::mt19937_64 gen(5);
  std::normal_distribution<double> z;
  for (int t = 0; t < 2000; ++t) {
    Matrix A(2, 2);
    for (int i = 0; i < 4; ++i) A(i / 2, i % 2) = z(gen) * std::pow(10.0, (t % 7) - 3);
    if (t % 5 == 0) A.col(1) = 3.0 * A.col(0);  // rank one
    EXPECT_NEAR(spectral_norm(A), svd_norm(A), 1e-14 * svd_norm(A)) << A;
  }
  for (const auto& [r, c] : {std::pair{1, 5}, std::pair{4, 1}, std::pair{1, 1}}) {
    Matrix v(r, c);
    for (long i = 0; i < v.size(); ++i) v(i) = z(gen);
    EXPECT_NEAR(spectral_norm(v), svd_norm(v), 1e-15 * svd_norm(v));  // a vector: its Euclidean norm
  }
  EXPECT_EQ(spectral_norm(Matrix::Zero(2, 2)), 0.0);
  EXPECT_DOUBLE_EQ(spectral_norm(Matrix::Identity(2, 2) * -2.5), 2.5);
  Matrix R(2, 2);
  R << 0, -1, 1, 0;  // a rotation: every singular value 1
  EXPECT_DOUBLE_EQ(spectral_norm(R), 1.0);
}

TEST(CocycleEnvelope, ConstantsEqualBruteForceAtAnyThreadCount) {
  // A dichotomy with non-normal transients (family G4: growing and decaying blocks with shear).
  const auto B = cocycle::family_g4(300, {-0.6, -0.6, -0.5, -0.5}, {0.8, 0.8, 0.2, 0.2}, 1.0, 0.05, 7);
  const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(B);
  const cocycle::Bundles b = cocycle::two_sided_bundles(c);
  ASSERT_GT(b.k, 0);
  for (const long stride : {1L, 7L, 50L}) {
    for (const auto& [rm, rp] : {std::pair{0.8, 1.1}, std::pair{0.95, 1.02}, std::pair{0.7, 1.3}}) {
      const auto [bm, bp] = brute_constants(B, b, stride, rm, rp);
      double first_m = 0, first_p = 0;
      for (const int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        // Pushes cut at the rates asked (0.7 / 1.3 lie at the spectrum's edges: there the weighted
        // norms do not decay, and nothing is cut).
        const cocycle::GrowthEnvelope g = cocycle::growth_envelope(c, b, stride, rm, rp);
        const double cm = cocycle::constant_minus(g, rm), cp = cocycle::constant_plus(g, rp);
        const cocycle::GrowthEnvelope full = cocycle::growth_envelope(c, b, stride);
        EXPECT_NEAR(cocycle::constant_minus(full, rm), bm, 1e-12 * bm);  // untruncated: the reference's loop
        EXPECT_NEAR(cocycle::constant_plus(full, rp), bp, 1e-12 * bp);
        // A larger r_- (smaller r_+) than the cut's is exact too.
        EXPECT_NEAR(cocycle::constant_minus(g, std::sqrt(rm)), cocycle::constant_minus(full, std::sqrt(rm)), 1e-12 * cm);
        EXPECT_NEAR(cm, bm, 1e-9 * bm) << "stride " << stride << " r_- " << rm;
        EXPECT_NEAR(cp, bp, 1e-9 * bp) << "stride " << stride << " r_+ " << rp;
        if (threads == 1) first_m = cm, first_p = cp;
        EXPECT_EQ(cm, first_m);  // the same bits at any thread count
        EXPECT_EQ(cp, first_p);
      }
    }
  }
  omp_set_num_threads(1);
}

TEST(CocycleEnvelope, APushStopsOnceNegligibleSoLongCocyclesCostAboutTheirLength) {
  // A strongly contracting stable part: from each start the push dies out after ~ 41/|log 0.3|
  // layers; the envelope beyond is exactly zero, and its constants equal those of a short window.
  const long L = 20000;
  std::vector<Matrix> B(L, Matrix::Zero(2, 2));
  for (long l = 0; l < L; ++l) B[static_cast<std::size_t>(l)] << 2.0, 0.1 * std::sin(0.01 * l), 0.0, 0.3;
  const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(B);
  const cocycle::Bundles b = cocycle::two_sided_bundles(c);
  const cocycle::GrowthEnvelope g = cocycle::growth_envelope(c, b, 1, 0.5, 1.5);
  long last = 0;
  for (long j = 0; j < g.g_minus.size(); ++j)
    if (g.g_minus(j) > 0) last = j;
  EXPECT_LT(last, 120);  // weighted (0.3 / 0.5)^j: below 1e-18 after ~81 layers
  EXPECT_GT(last, 60);
  const double green = cocycle::green_norm(c, b);  // truncated pushes: O(L x decay) at L = 20000
  EXPECT_GT(green, 1.0);
  // Against every push to the end (starts every 997 layers, to keep the reference affordable).
  const cocycle::GrowthEnvelope cut = cocycle::growth_envelope(c, b, 997, 0.5, 1.5), full = cocycle::growth_envelope(c, b, 997);
  for (const double r : {0.5, 0.7, 0.9}) {
    const double want = cocycle::constant_minus(full, r);
    EXPECT_NEAR(cocycle::constant_minus(cut, r), want, 1e-13 * want) << r;
  }
  for (const double r : {1.5, 1.2}) {
    const double want = cocycle::constant_plus(full, r);
    EXPECT_NEAR(cocycle::constant_plus(cut, r), want, 1e-13 * want) << r;
  }
}
