// The fp32 RMSNorm with double sums of squares (models/parts/parts.hpp), register-blocked.
#include "tokdyn/models/parts/parts.hpp"

#include <cmath>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TOKDYN_PARTS_AVX2 1
#endif

namespace tokdyn::parts {

namespace {

double row_sum_of_squares_from(const float* x, int j0, int n, double s) {
  for (int j = j0; j < n; ++j) s += static_cast<double>(x[j]) * static_cast<double>(x[j]);
  return s;
}

#ifdef TOKDYN_PARTS_AVX2
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
#ifdef TOKDYN_PARTS_AVX2
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


void rms_norm_rows_f32(const float* X, long ldx, int n, int rows, const float* w, double eps, float* Y, long ldy) {
  constexpr int kBlock = 8;
  double ss[kBlock];
  for (int k0 = 0; k0 < rows; k0 += kBlock) {
    const int nr = rows - k0 < kBlock ? rows - k0 : kBlock;
    row_sums_of_squares(X + k0 * ldx, ldx, n, nr, ss);
    for (int k = 0; k < nr; ++k) {
      const float r = static_cast<float>(1.0 / std::sqrt(ss[k] / n + eps));
      const float* x = X + (k0 + k) * ldx;
      float* y = Y + (k0 + k) * ldy;
      for (int j = 0; j < n; ++j) y[j] = x[j] * r * w[j];
    }
  }
}

}  // namespace tokdyn::parts
