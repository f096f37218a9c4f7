#include "tokdyn/linalg.hpp"

#include <cblas.h>

#include <stdexcept>

namespace tokdyn {

namespace {
/// Below this many multiply-adds a product stays in Eigen (no BLAS call, no thread team).
constexpr double kBlasMinWork = 1 << 18;
}  // namespace

namespace {

void blas_gemm_nt(int m, int n, int k, const double* A, int lda, const double* B, int ldb, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, A, lda, B, ldb, 0.0, C, ldc);
}
void blas_gemm_nt(int m, int n, int k, const float* A, int lda, const float* B, int ldb, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}

template <class M>
void gemm_nt_impl(const Eigen::Ref<const M>& A, const Eigen::Ref<const M>& B, M& C) {
  if (A.cols() != B.cols()) throw std::invalid_argument("gemm_nt: inner dimensions differ");
  C.resize(A.rows(), B.rows());
  if (C.size() == 0) return;
  if (A.cols() == 0) {
    C.setZero();
    return;
  }
  if (static_cast<double>(A.rows()) * static_cast<double>(B.rows()) * static_cast<double>(A.cols()) < kBlasMinWork) {
    C.noalias() = A * B.transpose();
    return;
  }
  blas_gemm_nt(static_cast<int>(A.rows()), static_cast<int>(B.rows()), static_cast<int>(A.cols()), A.data(),
               static_cast<int>(A.outerStride()), B.data(), static_cast<int>(B.outerStride()), C.data(),
               static_cast<int>(C.outerStride()));
}

}  // namespace

void gemm_nt(const Eigen::Ref<const Mat>& A, const Eigen::Ref<const Mat>& B, Mat& C) { gemm_nt_impl<Mat>(A, B, C); }
void gemm_nt(const Eigen::Ref<const MatF>& A, const Eigen::Ref<const MatF>& B, MatF& C) { gemm_nt_impl<MatF>(A, B, C); }

}  // namespace tokdyn
