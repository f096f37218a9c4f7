// LAPACK's robust symmetric drivers (symmetric_eigen.hpp) against closed forms, on the degenerate
// spectra the papers produce (a ring's cosines in pairs, the consensus projector's 0 of
// multiplicity n - 1), at sizes where Eigen's QR iteration gave up on an AVX-512 CPU.
#include <gtest/gtest.h>
#include <omp.h>

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "tokdyn/core/symmetric_eigen.hpp"

namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

// Adjacency of the n-cycle: eigenvalues 2 cos(2 pi k / n), k = 0..n-1 (each twice except k = 0, n/2).
MatrixXd ring(int n) {
  MatrixXd A = MatrixXd::Zero(n, n);
  for (int i = 0; i < n; ++i) {
    A(i, (i + 1) % n) = 1.0;
    A((i + 1) % n, i) = 1.0;
  }
  return A;
}

VectorXd ring_closed_form(int n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) v[static_cast<std::size_t>(k)] = 2.0 * std::cos(2.0 * std::numbers::pi * k / n);
  std::sort(v.begin(), v.end());
  return Eigen::Map<VectorXd>(v.data(), n);
}

TEST(SymmetricEigen, RingSpectrumMatchesTheClosedFormAtSizesWhereQrGaveUp) {
  for (int n : {3, 4, 1999, 2000}) {  // n >= 3: a simple cycle
    const VectorXd w = tokdyn::lapack_symmetric_eigenvalues(ring(n));
    ASSERT_EQ(w.size(), n);
    EXPECT_LT((w - ring_closed_form(n)).cwiseAbs().maxCoeff(), 1e-12) << "n = " << n;
  }
}

TEST(SymmetricEigen, LargestEigenvalueAloneMatchesTheClosedForm) {
  // The ring's largest eigenvalue is 2 (k = 0); the consensus projector's is 1 over a zero of
  // multiplicity n - 1; a diagonal's is its largest entry, wherever it sits.
  for (int n : {3, 50, 2000}) EXPECT_NEAR(tokdyn::lapack_symmetric_largest_eigenvalue(ring(n)), 2.0, 1e-12) << "n = " << n;
  EXPECT_NEAR(tokdyn::lapack_symmetric_largest_eigenvalue(MatrixXd::Constant(500, 500, 1.0 / 500)), 1.0, 1e-13);
  VectorXd d(5);
  d << -3.0, 7.5, 0.0, 7.25, -9.0;
  EXPECT_NEAR(tokdyn::lapack_symmetric_largest_eigenvalue(d.asDiagonal().toDenseMatrix()), 7.5, 1e-14);
  EXPECT_DOUBLE_EQ(tokdyn::lapack_symmetric_largest_eigenvalue(MatrixXd::Constant(1, 1, -2.0)), -2.0);
  EXPECT_THROW(tokdyn::lapack_symmetric_largest_eigenvalue(MatrixXd(0, 0)), std::invalid_argument);
  EXPECT_THROW(tokdyn::lapack_symmetric_largest_eigenvalue(MatrixXd::Zero(2, 3)), std::invalid_argument);
}

TEST(SymmetricEigen, ConsensusProjectorHasOneAndAZeroOfMultiplicityNMinusOne) {
  const int n = 2000;
  const MatrixXd J = MatrixXd::Constant(n, n, 1.0 / n);  // closed form: eigenvalues 1 (once), 0 (n - 1 times)
  const tokdyn::SymmetricEigen es = tokdyn::lapack_symmetric_eigen(J);
  EXPECT_NEAR(es.values(n - 1), 1.0, 1e-13);
  EXPECT_LT(es.values.head(n - 1).cwiseAbs().maxCoeff(), 1e-13);
  EXPECT_LT((es.vectors.transpose() * es.vectors - MatrixXd::Identity(n, n)).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LT((J * es.vectors - es.vectors * es.values.asDiagonal()).cwiseAbs().maxCoeff(), 1e-13);
  // The eigenvector of 1 is the constant vector (up to sign).
  EXPECT_NEAR(std::abs(es.vectors.col(n - 1).sum()), std::sqrt(static_cast<double>(n)), 1e-10);
}

TEST(SymmetricEigen, VectorsDiagonaliseARandomlyRotatedDegenerateSpectrum) {
  const int n = 300;
  Eigen::HouseholderQR<MatrixXd> qr(MatrixXd::Random(n, n));
  const MatrixXd Q = qr.householderQ();
  VectorXd lam(n);
  for (int i = 0; i < n; ++i) lam(i) = static_cast<double>(i / 50);  // six eigenvalues, each 50 times
  const MatrixXd A = Q * lam.asDiagonal() * Q.transpose();
  const tokdyn::SymmetricEigen es = tokdyn::lapack_symmetric_eigen(A);
  EXPECT_LT((es.values - lam).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LT((A * es.vectors - es.vectors * es.values.asDiagonal()).cwiseAbs().maxCoeff(), 1e-11);
  EXPECT_LT((tokdyn::lapack_symmetric_eigenvalues(A) - lam).cwiseAbs().maxCoeff(), 1e-12);
}

TEST(SymmetricEigen, DiagonalPencilEqualsTheScaledProblem) {
  // A x = lambda D x with A = D^{1/2} B D^{1/2}: the eigenvalues of B (closed form for the ring).
  const int n = 64;
  VectorXd D(n);
  for (int i = 0; i < n; ++i) D(i) = 0.5 + static_cast<double>(i % 7);
  const MatrixXd A = D.cwiseSqrt().asDiagonal() * ring(n) * D.cwiseSqrt().asDiagonal();
  const VectorXd w = tokdyn::lapack_diagonal_pencil_eigenvalues(A, D);
  EXPECT_LT((w - ring_closed_form(n)).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_THROW(tokdyn::lapack_diagonal_pencil_eigenvalues(A, VectorXd::Zero(n)), std::invalid_argument);
}

TEST(SymmetricEigen, BitsDoNotDependOnTheThreadCount) {
  const int n = 500;
  const MatrixXd R = MatrixXd::Random(n, n);
  const MatrixXd A = R + R.transpose();
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  const tokdyn::SymmetricEigen one = tokdyn::lapack_symmetric_eigen(A);
  const VectorXd w1 = tokdyn::lapack_symmetric_eigenvalues(A);
  omp_set_num_threads(4);
  const tokdyn::SymmetricEigen four = tokdyn::lapack_symmetric_eigen(A);
  const VectorXd w4 = tokdyn::lapack_symmetric_eigenvalues(A);
  omp_set_num_threads(before);
  EXPECT_TRUE(one.values == four.values);
  EXPECT_TRUE(one.vectors == four.vectors);
  EXPECT_TRUE(w1 == w4);
}

TEST(SymmetricEigen, RefusesNonFiniteAndNonSquareInput) {
  MatrixXd A = MatrixXd::Identity(3, 3);
  A(1, 2) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(tokdyn::lapack_symmetric_eigenvalues(A), std::invalid_argument);
  EXPECT_THROW(tokdyn::lapack_symmetric_eigen(MatrixXd::Zero(2, 3)), std::invalid_argument);
  EXPECT_EQ(tokdyn::lapack_symmetric_eigenvalues(MatrixXd(0, 0)).size(), 0);
}

}  // namespace
