#pragma once
// Large matrix products whose bits depend on the data and the shapes only: never on the number
// of threads, nor on whether the call is made inside a parallel loop.
//
// A threaded BLAS call splits a product by the thread count (and by what the CPU reports), so
// its last bits change with `--threads`. tokdyn's one GEMM instead cuts C = A B^T into tiles
// fixed by (m, n, k) alone, computes every tile with a single-threaded call (OpenBLAS, or Eigen
// for small products) over the whole inner dimension, and spreads the tiles over OpenMP threads
// (schedule(dynamic): a core slowed by another process hands tiles to the other).
// Which thread computes a tile, and in which order, does not change the tile's bits.
//
// Eigen's own GEMM threading (its blocking depends on the thread count too) is switched off for
// the whole project (EIGEN_DONT_PARALLELIZE, set in CMakeLists.txt), so every other Eigen product
// runs on the thread that calls it.
#include <omp.h>

#include "tokdyn/core/tokens.hpp"

namespace tokdyn {

/// Runs f() with every BLAS and LAPACK call inside it single-threaded, on the calling thread: f runs
/// in an OpenMP team of one whose tasks see one thread, and OpenBLAS's OpenMP build then runs on the
/// calling thread alone. So the call's bits depend on the data only, never on `--threads` nor on
/// whether the caller is inside a parallel loop. f must not throw (an exception may not leave an
/// OpenMP region): report through its captures (LAPACK's info) and throw after the call.
template <class F>
void single_threaded_blas(F&& f) {
#pragma omp parallel if (false)
  {
    omp_set_num_threads(1);
    f();
  }
}

/// Which part of C = A B^T gemm_nt_blocked forms.
enum class GemmPart {
  Full,   ///< all of C
  Upper,  ///< C square: at least its block upper triangle (row block b: the columns from the block's
          ///< first row on); entries left of that are unspecified. For symmetric products that are
          ///< mirrored afterwards (about half the work).
};

/// How gemm_nt_blocked cuts C (m x n, inner dimension k) into tiles: a function of the shapes
/// (and the part) alone, never of the thread count or the CPU. Tiles are row_blocks x col_blocks,
/// of rows x cols entries (the last row / column of tiles may be smaller).
struct GemmTiling {
  Eigen::Index row_blocks = 1, col_blocks = 1;
  Eigen::Index rows = 0, cols = 0;
  bool blas = false;      ///< tiles computed by single-threaded OpenBLAS (else one Eigen product)
  bool parallel = false;  ///< several tiles: spread over threads (when the caller allows it)
  Eigen::Index tiles() const { return row_blocks * col_blocks; }
};

/// The tiling of C = A B^T with A m x k and B n x k. Below 2^18 multiply-adds: one Eigen product.
/// Above: up to 4 tiles (2 from 2^20 multiply-adds, 4 from 2^21), row blocks of at least 32 rows
/// (4 x 1), or for products of few rows 2 x 2 or 1 x 4 with column blocks of at least 64 columns;
/// row blocks only for the upper part.
GemmTiling gemm_tiling(Eigen::Index m, Eigen::Index n, Eigen::Index k, GemmPart part = GemmPart::Full);

/// C = A B^T (row-major doubles), tile by tile as gemm_tiling(m, n, k) says. parallel: the tiles
/// are spread over the OpenMP threads (pass false inside a loop that is already parallel; the
/// bits are the same either way). C is resized to m x n.
void gemm_nt_blocked(const Eigen::Ref<const Mat>& A, const Eigen::Ref<const Mat>& B, Mat& C, bool parallel = true,
                     GemmPart part = GemmPart::Full);

/// The same in float (SGEMM tiles).
void gemm_nt_blocked(const Eigen::Ref<const MatF>& A, const Eigen::Ref<const MatF>& B, MatF& C, bool parallel = true,
                     GemmPart part = GemmPart::Full);

}  // namespace tokdyn
