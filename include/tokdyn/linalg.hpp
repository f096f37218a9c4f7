#pragma once
// Large matrix products through OpenBLAS (OpenMP build, sharing tokdyn's thread pool). Small
// products stay in Eigen: routing every small Eigen kernel to a threaded BLAS (EIGEN_USE_BLAS)
// made tiny eigen-solves start a thread team per call.
#include "tokdyn/tokens.hpp"

namespace tokdyn {

/// C = A * B^T (row-major doubles): one DGEMM, or Eigen's product below 2^18 multiply-adds.
void gemm_nt(const Eigen::Ref<const Mat>& A, const Eigen::Ref<const Mat>& B, Mat& C);

/// The same in float: one SGEMM, or Eigen's product below 2^18 multiply-adds.
void gemm_nt(const Eigen::Ref<const MatF>& A, const Eigen::Ref<const MatF>& B, MatF& C);

}  // namespace tokdyn
