// tokdyn's one GEMM (linalg.hpp): C = A B^T in tiles fixed by the shapes, the same bits on any
// thread count, inside or outside a parallel loop; its tiling; its results against Eigen.
#include <gtest/gtest.h>
#include <omp.h>

#include <stdexcept>

#include "thread_util.hpp"
#include "tokdyn/core/linalg.hpp"
#include "tokdyn/core/rng.hpp"

using namespace tokdyn;
using tokdyn::testing::kThreadCounts;
using tokdyn::testing::set_threads;
using tokdyn::testing::ThreadCountGuard;

namespace {

template <class M>
M random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  Rng rng(seed, {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols)});
  Mat X(rows, cols);
  rng.fill_normal(X);
  return X.cast<typename M::Scalar>();
}

struct Shape {
  Eigen::Index m, n, k;
};

}  // namespace

TEST(Linalg, GemmTilingDependsOnTheShapesOnly) {
  // Small products: one Eigen product.
  GemmTiling t = gemm_tiling(3, 80, 96);
  EXPECT_FALSE(t.blas);
  EXPECT_EQ(t.tiles(), 1);
  // The Mamba-2 130m projections of mamba2-fig1 (runs x tokens = 2500 rows): 4 row blocks of 632
  // rows (the last 604).
  for (const Shape s : {Shape{2500, 3352, 768}, Shape{2500, 1816, 768}, Shape{2500, 768, 1536}}) {
    t = gemm_tiling(s.m, s.n, s.k);
    EXPECT_TRUE(t.blas && t.parallel);
    EXPECT_EQ(t.rows, 632);
    EXPECT_EQ(t.row_blocks, 4);
    EXPECT_EQ(t.col_blocks, 1);
  }
  // Few rows, many columns: column blocks (2 x 2 when 2 row blocks fit). The upper part: row
  // blocks only.
  t = gemm_tiling(50, 3352, 768);
  EXPECT_EQ(t.row_blocks, 1);
  EXPECT_EQ(t.col_blocks, 4);
  t = gemm_tiling(100, 3352, 768);
  EXPECT_EQ(t.row_blocks, 2);
  EXPECT_EQ(t.col_blocks, 2);
  t = gemm_tiling(1000, 1000, 64, GemmPart::Upper);
  EXPECT_EQ(t.row_blocks, 4);
  EXPECT_EQ(t.col_blocks, 1);
  // Every tiling covers C exactly once with at most 4 tiles of at least 32 rows and 64 columns
  // (unless C is smaller), 4 of them from 2^21 multiply-adds when the sizes allow it; the thread
  // count plays no part.
  ThreadCountGuard guard;
  for (Eigen::Index m : {1, 7, 33, 64, 100, 130, 256, 257, 300, 513, 576, 1000, 2500, 4099}) {
    for (Eigen::Index n : {1, 64, 200, 768, 3352}) {
      for (Eigen::Index k : {16, 512}) {
        set_threads(1);
        const GemmTiling a = gemm_tiling(m, n, k);
        for (int th : kThreadCounts) {
          set_threads(th);
          const GemmTiling b = gemm_tiling(m, n, k);
          EXPECT_EQ(a.rows, b.rows);
          EXPECT_EQ(a.cols, b.cols);
          EXPECT_EQ(a.row_blocks, b.row_blocks);
          EXPECT_EQ(a.col_blocks, b.col_blocks);
        }
        if (!a.blas) continue;
        EXPECT_GE(a.rows * a.row_blocks, m);
        EXPECT_LT(a.rows * (a.row_blocks - 1), m);
        EXPECT_GE(a.cols * a.col_blocks, n);
        EXPECT_LT(a.cols * (a.col_blocks - 1), n);
        EXPECT_LE(a.tiles(), 4);
        EXPECT_EQ(a.parallel, a.tiles() > 1);
        if (a.row_blocks > 1) {
          EXPECT_GE(a.rows, 32) << m;
        }
        if (a.col_blocks > 1) {
          EXPECT_GE(a.cols, 64) << n;
        }
        if (static_cast<double>(m) * n * k >= (1 << 21) && (m >= 128 || n >= 256 || (m >= 64 && n >= 128))) {
          EXPECT_EQ(a.tiles(), 4) << m << " x " << n << " x " << k;
        }
      }
    }
  }
}

template <class M>
void expect_matches_eigen(double tol) {
  for (const Shape s : {Shape{3, 80, 96}, Shape{300, 80, 96}, Shape{40, 3000, 64}, Shape{600, 200, 100}, Shape{1, 1, 1}}) {
    const M A = random_matrix<M>(s.m + 2, s.k + 3, 1), B = random_matrix<M>(s.n + 1, s.k + 3, 2);
    // Strided views (rows and columns of larger matrices), as the models pass them.
    const auto a = A.block(1, 2, s.m, s.k);
    const auto b = B.block(1, 1, s.n, s.k);
    const M ref = a * b.transpose();
    M C;
    gemm_nt_blocked(a, b, C);
    ASSERT_EQ(C.rows(), s.m);
    ASSERT_EQ(C.cols(), s.n);
    EXPECT_LT((C - ref).cwiseAbs().maxCoeff(), tol) << s.m << " x " << s.n << " x " << s.k;
    gemm_nt_blocked(a, b, C, /*parallel=*/false);
    EXPECT_LT((C - ref).cwiseAbs().maxCoeff(), tol);
  }
  // The upper part of a square product: at least the block upper triangle, which equals Eigen's.
  for (Eigen::Index n : {20, 300, 700}) {
    const M X = random_matrix<M>(n, 48, 3);
    const M ref = X * X.transpose();
    M C;
    gemm_nt_blocked(X, X, C, true, GemmPart::Upper);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = i; j < n; ++j) ASSERT_LT(std::abs(C(i, j) - ref(i, j)), tol) << n << " " << i << " " << j;
  }
  // Empty inner dimension: zeros; no rows: empty.
  M C;
  gemm_nt_blocked(M(3, 0), M(4, 0), C);
  EXPECT_EQ(C, M::Zero(3, 4));
  gemm_nt_blocked(M(0, 5), M(4, 5), C);
  EXPECT_EQ(C.rows(), 0);
  EXPECT_THROW(gemm_nt_blocked(M(2, 3), M(4, 5), C), std::logic_error);
  EXPECT_THROW(gemm_nt_blocked(M(2, 3), M(4, 3), C, true, GemmPart::Upper), std::logic_error);
}

TEST(Linalg, GemmNtBlockedMatchesEigen) {
  expect_matches_eigen<Mat>(1e-11);
  expect_matches_eigen<MatF>(5e-4);
}

template <class M>
void expect_same_bits_on_any_thread_count() {
  ThreadCountGuard guard;
  // Row tiles (full and upper part) and column tiles, all above the threshold of a thread team.
  for (const Shape s : {Shape{576, 296, 64}, Shape{1000, 1000, 64}, Shape{48, 3352, 96}, Shape{300, 768, 200}}) {
    const GemmTiling t = gemm_tiling(s.m, s.n, s.k);
    ASSERT_TRUE(t.blas && t.parallel && t.tiles() >= 4) << "the test must exercise the threaded tile loop";
    const M A = random_matrix<M>(s.m, s.k, 4), B = random_matrix<M>(s.n, s.k, 5);
    const bool square = s.m == s.n;
    M ref, ref_upper;
    set_threads(1);
    gemm_nt_blocked(A, B, ref);
    if (square) gemm_nt_blocked(A, A, ref_upper, true, GemmPart::Upper);
    for (int th : kThreadCounts) {
      set_threads(th);
      M C;
      gemm_nt_blocked(A, B, C);
      EXPECT_EQ(C, ref) << th << " threads, " << s.m << " x " << s.n << " x " << s.k;
      gemm_nt_blocked(A, B, C, /*parallel=*/false);
      EXPECT_EQ(C, ref) << th << " threads, not parallel";
      if (square) {
        gemm_nt_blocked(A, A, C, true, GemmPart::Upper);
        const GemmTiling tu = gemm_tiling(s.m, s.n, s.k, GemmPart::Upper);
        ASSERT_TRUE(tu.parallel && tu.tiles() >= 4);
        for (Eigen::Index b = 0; b < tu.row_blocks; ++b) {
          const Eigen::Index r0 = b * tu.rows, rb = std::min(tu.rows, s.m - r0);
          EXPECT_EQ(C.block(r0, r0, rb, s.n - r0), ref_upper.block(r0, r0, rb, s.n - r0)) << th << " threads, upper";
        }
      }
      // Called from inside a parallel loop (each iteration one product, as the models' per-run
      // loops do): the same bits again.
      std::vector<M> inner(3);
#pragma omp parallel for schedule(static)
      for (int i = 0; i < 3; ++i) gemm_nt_blocked(A, B, inner[static_cast<std::size_t>(i)], i != 1);
      for (const M& Ci : inner) EXPECT_EQ(Ci, ref) << th << " threads, inside a parallel loop";
      EXPECT_EQ(omp_get_max_threads(), th) << "the caller's thread count is left alone";
    }
  }
}

TEST(Linalg, GemmNtBlockedSameBitsOnOneToFourThreads) {
  expect_same_bits_on_any_thread_count<MatF>();
  expect_same_bits_on_any_thread_count<Mat>();
}
