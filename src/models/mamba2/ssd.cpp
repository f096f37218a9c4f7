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

}  // namespace tokdyn::mamba2::detail
