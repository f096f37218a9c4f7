#include "tokdyn/core/linalg.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace tokdyn {

namespace {

using Eigen::Index;

/// Below this many multiply-adds a product is one Eigen product (no BLAS call, no thread team).
constexpr double kBlasMinWork = 1 << 18;
/// A tile is at least this many multiply-adds (a smaller one costs more in call and team overhead
/// than it gains).
constexpr double kTileMinWork = 1 << 19;
/// Tiles per product when the work allows: two per core on the project's 2-core machines, so that
/// a core slowed by another process hands tiles to the other. Each tile repacks its panels of A
/// and B, so more tiles cost more (256-row tiles of the Mamba-2 in_proj: ~10 % more CPU time than
/// one call; 4 tiles: ~3 %, and faster than one threaded call on 2 threads).
constexpr Index kMaxTiles = 4;
/// Smallest tile height and width.
constexpr Index kMinRows = 32, kMinCols = 64;
/// Tile heights and widths are multiples of this (whole micro-kernel panels).
constexpr Index kAlign = 8;

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
  // Shapes are computed by tokdyn itself: a mismatch is a bug (std::logic_error, error.hpp).
  if (A.cols() != B.cols())
    throw std::logic_error(fmt::format("gemm_nt_blocked: expected A and B with the same number of columns, got {} and {}",
                                       A.cols(), B.cols()));
  const Index m = A.rows(), n = B.rows(), k = A.cols();
  if (part == GemmPart::Upper && m != n)
    throw std::logic_error(fmt::format("gemm_nt_blocked: the upper part expected a square product, got {} x {}", m, n));
  C.resize(m, n);
  if (C.size() == 0) return;
  if (k == 0) {
    C.setZero();
    return;
  }
  const GemmTiling t = gemm_tiling(m, n, k, part);
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
#pragma omp parallel if (parallel && t.parallel)
  {
    omp_set_num_threads(1);
#pragma omp for schedule(dynamic, 1)
    for (Index i = 0; i < tiles; ++i) tile(i);
  }
}

}  // namespace

GemmTiling gemm_tiling(Index m, Index n, Index k, GemmPart part) {
  GemmTiling t;
  t.rows = m;
  t.cols = n;
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (m <= 0 || n <= 0 || k <= 0 || work < kBlasMinWork) return t;
  t.blas = true;
  Index want = 1;
  while (want < kMaxTiles && work >= 2.0 * static_cast<double>(want) * kTileMinWork) want *= 2;
  // A grid r x c of tiles with r c = want: as many row blocks as the rows allow (tiles of whole
  // rows of C measured fastest: 4 x 1 against 2 x 2 and one threaded call on the 130m in_proj),
  // column blocks only for products of few rows; the upper part only row blocks (the tiles left
  // of the diagonal are skipped). Fewer tiles when even that does not fit.
  const Index rmax = std::max<Index>(1, m / kMinRows);
  const Index cmax = part == GemmPart::Upper ? 1 : std::max<Index>(1, n / kMinCols);
  Index r = 1, c = 1;
  for (Index T = want; T >= 1 && r * c == 1; T /= 2)
    for (Index rr = T; rr >= 1; rr /= 2)
      if (rr <= rmax && T / rr <= cmax) {
        r = rr;
        c = T / rr;
        break;
      }
  t.rows = block_length(m, r);
  t.cols = block_length(n, c);
  t.row_blocks = (m + t.rows - 1) / t.rows;
  t.col_blocks = (n + t.cols - 1) / t.cols;
  t.parallel = t.tiles() > 1;
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
