#pragma once
// Symmetric eigenproblems through LAPACK's robust drivers (the OpenBLAS build tokdyn links).
//
// Eigen's SelfAdjointEigenSolver runs an implicit QR iteration with a fixed iteration budget; on
// strongly degenerate spectra (the normal case for the consensus and RoPE operators of the papers)
// it can give up, and whether it does depends on the CPU's vector width (it failed for n = 2000 on
// an AVX-512 Xeon and not on AVX2). These wrappers never give up on a finite symmetric matrix:
//   * eigenvalues: dsyevr; when its QR-free root-free QR (dsterf) does not converge, dsyevr itself
//     falls back to bisection (dstebz), which always converges;
//   * eigenvalues and vectors: dsyevd (divide and conquer); if it reports failure, dsyevr (MRRR,
//     with bisection and inverse iteration as its own fallback).
// Both run on the calling thread only (a team of one OpenMP thread, where OpenBLAS's OpenMP build
// does not thread), so the bits do not depend on the thread count.
#include <Eigen/Core>

namespace tokdyn {

/// Eigenvalues of the symmetric matrix A (its lower triangle is read), ascending.
/// Throws std::invalid_argument for a non-square or non-finite A.
Eigen::VectorXd lapack_symmetric_eigenvalues(const Eigen::MatrixXd& A);

/// The largest eigenvalue of the symmetric matrix A (n >= 1; lower triangle read): dsyevr with
/// RANGE = 'I' (bisection, dstebz, on the tridiagonal form), to the same absolute accuracy
/// eps |A| as all of them, without computing the others.
double lapack_symmetric_largest_eigenvalue(const Eigen::MatrixXd& A);

/// Eigenvalues (ascending) and orthonormal eigenvectors (columns, in the same order) of A.
struct SymmetricEigen {
  Eigen::VectorXd values;
  Eigen::MatrixXd vectors;
};
SymmetricEigen lapack_symmetric_eigen(const Eigen::MatrixXd& A);

/// Eigenvalues (ascending) of the symmetric-definite pencil A x = lambda D x with D diagonal and
/// positive (given as its diagonal): the eigenvalues of D^{-1/2} A D^{-1/2}.
Eigen::VectorXd lapack_diagonal_pencil_eigenvalues(const Eigen::MatrixXd& A, const Eigen::VectorXd& D);

}  // namespace tokdyn
