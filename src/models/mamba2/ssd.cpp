#include "ssd.hpp"

#include <algorithm>

#include <Eigen/Core>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TOKDYN_SSD_AVX2 1
#endif

namespace tokdyn::mamba2::detail {

namespace {

/// Rows per register block: NT rows x 16 columns = 2 NT accumulators (12 of the 16 ymm registers).
constexpr int kRows = 6;

/// Scalar columns [p0, P) of rows t0 .. t0+NT-1 (sums over s < s_end in increasing order).
void block_scalar(const float* M, int T, const float* X, long ldx, int P, float* Y, long ldy, int t0, int nt, int s_end,
                  int p0) {
  for (int i = 0; i < nt; ++i) {
    const float* m = M + static_cast<long>(t0 + i) * T;
    for (int p = p0; p < P; ++p) {
      float acc = 0.0f;
#ifdef TOKDYN_SSD_AVX2
      for (int s = 0; s < s_end; ++s) acc = __builtin_fmaf(m[s], X[s * ldx + p], acc);
#else
      for (int s = 0; s < s_end; ++s) acc += m[s] * X[s * ldx + p];
#endif
      Y[(t0 + i) * ldy + p] = acc;
    }
  }
}

#ifdef TOKDYN_SSD_AVX2
/// Rows t0 .. t0+NT-1, columns [0, P): 16 columns at a time, then 8, then scalar.
template <int NT>
void block_avx2(const float* M, int T, const float* X, long ldx, int P, float* Y, long ldy, int t0, int s_end) {
  const float* m[NT];
  for (int i = 0; i < NT; ++i) m[i] = M + static_cast<long>(t0 + i) * T;
  int p = 0;
  for (; p + 16 <= P; p += 16) {
    __m256 c0[NT], c1[NT];
    for (int i = 0; i < NT; ++i) c0[i] = c1[i] = _mm256_setzero_ps();
    const float* x = X + p;
    for (int s = 0; s < s_end; ++s, x += ldx) {
      const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
      for (int i = 0; i < NT; ++i) {
        const __m256 a = _mm256_broadcast_ss(m[i] + s);
        c0[i] = _mm256_fmadd_ps(a, x0, c0[i]);
        c1[i] = _mm256_fmadd_ps(a, x1, c1[i]);
      }
    }
    for (int i = 0; i < NT; ++i) {
      _mm256_storeu_ps(Y + (t0 + i) * ldy + p, c0[i]);
      _mm256_storeu_ps(Y + (t0 + i) * ldy + p + 8, c1[i]);
    }
  }
  for (; p + 8 <= P; p += 8) {
    __m256 c0[NT];
    for (int i = 0; i < NT; ++i) c0[i] = _mm256_setzero_ps();
    const float* x = X + p;
    for (int s = 0; s < s_end; ++s, x += ldx) {
      const __m256 x0 = _mm256_loadu_ps(x);
      for (int i = 0; i < NT; ++i) c0[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(m[i] + s), x0, c0[i]);
    }
    for (int i = 0; i < NT; ++i) _mm256_storeu_ps(Y + (t0 + i) * ldy + p, c0[i]);
  }
  if (p < P) block_scalar(M, T, X, ldx, P, Y, ldy, t0, NT, s_end, p);
}
#endif

}  // namespace

void causal_head_product(const float* M, int T, const float* X, long ldx, int P, float* Y, long ldy, bool d_skip, float D) {
  for (int t0 = 0; t0 < T; t0 += kRows) {
    const int nt = std::min(kRows, T - t0);
    const int s_end = t0 + nt;  // M[t, s] = 0 for s > t: the block's last row needs s < t0 + nt
#ifdef TOKDYN_SSD_AVX2
    switch (nt) {
      case 6: block_avx2<6>(M, T, X, ldx, P, Y, ldy, t0, s_end); break;
      case 5: block_avx2<5>(M, T, X, ldx, P, Y, ldy, t0, s_end); break;
      case 4: block_avx2<4>(M, T, X, ldx, P, Y, ldy, t0, s_end); break;
      case 3: block_avx2<3>(M, T, X, ldx, P, Y, ldy, t0, s_end); break;
      case 2: block_avx2<2>(M, T, X, ldx, P, Y, ldy, t0, s_end); break;
      default: block_avx2<1>(M, T, X, ldx, P, Y, ldy, t0, s_end); break;
    }
#else
    block_scalar(M, T, X, ldx, P, Y, ldy, t0, nt, s_end, 0);
#endif
  }
  if (d_skip)
    for (int t = 0; t < T; ++t)
      for (int p = 0; p < P; ++p) Y[t * ldy + p] += D * X[t * ldx + p];
}

bool causal_head_product_matches_eigen(int P, int T) {
#ifdef TOKDYN_SSD_AVX2
  return Eigen::internal::packet_traits<float>::size == 8 && (P % 24 == 0 || P % 24 == 16) && T <= 256;
#else
  return false;
#endif
}

namespace {

double row_sum_of_squares_from(const float* x, int j0, int n, double s) {
  for (int j = j0; j < n; ++j) s += static_cast<double>(x[j]) * static_cast<double>(x[j]);
  return s;
}

#ifdef TOKDYN_SSD_AVX2
/// Columns [0, n4) (n4 a multiple of 4) of 4 rows: lane k of the result is row k's sum.
inline __m256d four_rows(const float* x0, const float* x1, const float* x2, const float* x3, int n4, __m256d acc) {
  for (int j = 0; j < n4; j += 4) {
    __m128 a = _mm_loadu_ps(x0 + j), b = _mm_loadu_ps(x1 + j), c = _mm_loadu_ps(x2 + j), d = _mm_loadu_ps(x3 + j);
    _MM_TRANSPOSE4_PS(a, b, c, d);  // a: column j of the 4 rows, b: column j+1, ...
    const __m256d va = _mm256_cvtps_pd(a), vb = _mm256_cvtps_pd(b), vc = _mm256_cvtps_pd(c), vd = _mm256_cvtps_pd(d);
    acc = _mm256_fmadd_pd(va, va, acc);
    acc = _mm256_fmadd_pd(vb, vb, acc);
    acc = _mm256_fmadd_pd(vc, vc, acc);
    acc = _mm256_fmadd_pd(vd, vd, acc);
  }
  return acc;
}
#endif

}  // namespace

void row_sums_of_squares(const float* X, long ld, int n, int rows, double* ss) {
  int k = 0;
#ifdef TOKDYN_SSD_AVX2
  const int n4 = n & ~3;
  for (; k + 8 <= rows; k += 8) {  // two independent groups of 4 rows in flight
    const float* x = X + k * ld;
    __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
    for (int j = 0; j < n4; j += 4) {
      a = four_rows(x + j, x + ld + j, x + 2 * ld + j, x + 3 * ld + j, 4, a);
      b = four_rows(x + 4 * ld + j, x + 5 * ld + j, x + 6 * ld + j, x + 7 * ld + j, 4, b);
    }
    alignas(32) double s[8];
    _mm256_store_pd(s, a);
    _mm256_store_pd(s + 4, b);
    for (int q = 0; q < 8; ++q) ss[k + q] = row_sum_of_squares_from(x + q * ld, n4, n, s[q]);
  }
  for (; k + 4 <= rows; k += 4) {
    const float* x = X + k * ld;
    const __m256d a = four_rows(x, x + ld, x + 2 * ld, x + 3 * ld, n4, _mm256_setzero_pd());
    alignas(32) double s[4];
    _mm256_store_pd(s, a);
    for (int q = 0; q < 4; ++q) ss[k + q] = row_sum_of_squares_from(x + q * ld, n4, n, s[q]);
  }
#endif
  for (; k < rows; ++k) ss[k] = row_sum_of_squares_from(X + k * ld, 0, n, 0.0);
}

}  // namespace tokdyn::mamba2::detail
