#pragma once
// OpenBLAS entry points for the benchmarks (declared here: the OpenMP build's cblas.h is not on
// tokdyn_bench's include path), and C = A B^T as one threaded OpenBLAS call: the unblocked
// reference against which tokdyn's fixed-tile GEMM (tokdyn::gemm_nt_blocked) is measured. Its
// bits depend on the thread count; tokdyn itself no longer calls BLAS this way.
#include "tokdyn/core/tokens.hpp"

extern "C" {
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
char* openblas_get_corename(void);
char* openblas_get_config(void);
void cblas_dgemm(int order, int transa, int transb, int m, int n, int k, double alpha, const double* a, int lda,
                 const double* b, int ldb, double beta, double* c, int ldc);
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc);
}

namespace tokdyn::bench {

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

/// C = A B^T (row-major), one OpenBLAS call on OpenBLAS's threads (unblocked).
inline void threaded_gemm_nt(const Mat& A, const Mat& B, Mat& C) {
  C.resize(A.rows(), B.rows());
  cblas_dgemm(kRowMajor, kNoTrans, kTrans, static_cast<int>(A.rows()), static_cast<int>(B.rows()),
              static_cast<int>(A.cols()), 1.0, A.data(), static_cast<int>(A.cols()), B.data(),
              static_cast<int>(B.cols()), 0.0, C.data(), static_cast<int>(C.cols()));
}
inline void threaded_gemm_nt(const MatF& A, const MatF& B, MatF& C) {
  C.resize(A.rows(), B.rows());
  cblas_sgemm(kRowMajor, kNoTrans, kTrans, static_cast<int>(A.rows()), static_cast<int>(B.rows()),
              static_cast<int>(A.cols()), 1.0f, A.data(), static_cast<int>(A.cols()), B.data(),
              static_cast<int>(B.cols()), 0.0f, C.data(), static_cast<int>(C.cols()));
}

}  // namespace tokdyn::bench
