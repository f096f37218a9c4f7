#include "tokdyn/linalg.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <stdexcept>

namespace tokdyn {

namespace {

using Eigen::Index;

/// Below this many multiply-adds a product is one Eigen product (no BLAS call, no thread team).
constexpr double kBlasMinWork = 1 << 18;
/// Below this many multiply-adds the tiles stay on the calling thread (a team costs more).
constexpr double kParallelMinWork = 1 << 20;
/// Tile sizes: at most kRowTile rows per row block (each tile a large enough single-threaded
/// GEMM), at least kMinTiles blocks when blocks of kMinRowTile rows allow it; the same for
/// columns when there is only one row block.
constexpr Index kRowTile = 256, kMinRowTile = 32, kColTile = 512, kMinColTile = 64, kMinTiles = 4;
/// Tile heights and widths are multiples of this (whole micro-kernel panels).
constexpr Index kAlign = 8;

/// Number of blocks to cut `len` into: blocks of at most `target`, at least kMinTiles when blocks
/// of `min_len` allow it, an even number when more than one.
Index block_count(Index len, Index target, Index min_len) {
  Index b = (len + target - 1) / target;
  b = std::max(b, std::min<Index>(kMinTiles, len / min_len));
  if (b > 1 && b % 2 != 0) ++b;
  return std::max<Index>(b, 1);
}

/// Block length for `count` blocks of `len` (rounded up to kAlign, at most len).
Index block_length(Index len, Index count) {
  const Index l = (len + count - 1) / count;
  return std::min(len, (l + kAlign - 1) / kAlign * kAlign);
}

void blas_gemm_nt(int m, int n, int k, const double* A, int lda, const double* B, int ldb, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, A, lda, B, ldb, 0.0, C, ldc);
}
void blas_gemm_nt(int m, int n, int k, const float* A, int lda, const float* B, int ldb, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}

template <class M>
void gemm_impl(const Eigen::Ref<const M>& A, const Eigen::Ref<const M>& B, M& C, bool parallel, GemmPart part) {
  if (A.cols() != B.cols()) throw std::invalid_argument("gemm_nt_blocked: inner dimensions differ");
  const Index m = A.rows(), n = B.rows(), k = A.cols();
  if (part == GemmPart::Upper && m != n) throw std::invalid_argument("gemm_nt_blocked: the upper part needs a square product");
  C.resize(m, n);
  if (C.size() == 0) return;
  if (k == 0) {
    C.setZero();
    return;
  }
  const GemmTiling t = gemm_tiling(m, n, k);
  if (!t.blas) {
    C.noalias() = A * B.transpose();  // single-threaded: Eigen's threading is off project-wide
    return;
  }
  const Index lda = A.outerStride(), ldb = B.outerStride(), ldc = C.outerStride();
  const Index tiles = t.tiles();
  auto tile = [&](Index i) {
    const Index r0 = (i / t.col_blocks) * t.rows, nr = std::min(t.rows, m - r0);
    Index c0 = (i % t.col_blocks) * t.cols;
    const Index c1 = std::min(n, c0 + t.cols);
    if (part == GemmPart::Upper) c0 = std::max(c0, r0);
    if (c1 <= c0) return;
    blas_gemm_nt(static_cast<int>(nr), static_cast<int>(c1 - c0), static_cast<int>(k), A.data() + r0 * lda,
                 static_cast<int>(lda), B.data() + c0 * ldb, static_cast<int>(ldb), C.data() + r0 * ldc + c0,
                 static_cast<int>(ldc));
  };
  // Always inside a region (a team of one when not parallel), so that every BLAS call sees one
  // thread: OpenBLAS's OpenMP build runs single-threaded inside an active region or when the
  // calling task's thread count is 1. The count is set for this region's tasks only.
#pragma omp parallel if (parallel && t.parallel && tiles > 1)
  {
    omp_set_num_threads(1);
#pragma omp for schedule(dynamic, 1)
    for (Index i = 0; i < tiles; ++i) tile(i);
  }
}

}  // namespace

GemmTiling gemm_tiling(Index m, Index n, Index k) {
  GemmTiling t;
  t.rows = m;
  t.cols = n;
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (m <= 0 || n <= 0 || k <= 0 || work < kBlasMinWork) return t;
  t.blas = true;
  t.parallel = work >= kParallelMinWork;
  t.rows = block_length(m, block_count(m, kRowTile, kMinRowTile));
  t.row_blocks = (m + t.rows - 1) / t.rows;
  if (t.row_blocks == 1) {
    t.cols = block_length(n, block_count(n, kColTile, kMinColTile));
    t.col_blocks = (n + t.cols - 1) / t.cols;
  }
  return t;
}

void gemm_nt_blocked(const Eigen::Ref<const Mat>& A, const Eigen::Ref<const Mat>& B, Mat& C, bool parallel, GemmPart part) {
  gemm_impl<Mat>(A, B, C, parallel, part);
}
void gemm_nt_blocked(const Eigen::Ref<const MatF>& A, const Eigen::Ref<const MatF>& B, MatF& C, bool parallel,
                     GemmPart part) {
  gemm_impl<MatF>(A, B, C, parallel, part);
}

}  // namespace tokdyn
