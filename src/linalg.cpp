#include "tokdyn/linalg.hpp"

#include <cblas.h>

#include <stdexcept>

namespace tokdyn {

namespace {
/// Below this many multiply-adds a product stays in Eigen (no BLAS call, no thread team).
constexpr double kBlasMinWork = 1 << 18;
}  // namespace

void gemm_nt(const Eigen::Ref<const Mat>& A, const Eigen::Ref<const Mat>& B, Mat& C) {
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
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(A.rows()), static_cast<int>(B.rows()),
              static_cast<int>(A.cols()), 1.0, A.data(), static_cast<int>(A.outerStride()), B.data(),
              static_cast<int>(B.outerStride()), 0.0, C.data(), static_cast<int>(C.outerStride()));
}

void gemm_nt(const Eigen::Ref<const MatF>& A, const Eigen::Ref<const MatF>& B, MatF& C) {
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
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(A.rows()), static_cast<int>(B.rows()),
              static_cast<int>(A.cols()), 1.0f, A.data(), static_cast<int>(A.outerStride()), B.data(),
              static_cast<int>(B.outerStride()), 0.0f, C.data(), static_cast<int>(C.outerStride()));
}

}  // namespace tokdyn
