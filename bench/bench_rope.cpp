// Micro-benchmarks of RoPE self-attention (models/rope/attention.hpp): one evaluation of the
// flow (5) on one run of n tokens in d dimensions, 2 threads, for n in {64, 256, 1024} and
// d in {2, 64, 512}; plus the DGEMM these evaluations are built on, for the fraction of peak.
//
// Every benchmark uses wall-clock time (UseRealTime). "threads" sets both OpenMP and OpenBLAS.
// FLOP count of one AttentionField::eval (one head, Q = K = V = I), 2 per multiply-add:
//   scores  s = (R X)(R X)^T            2 n^2 d
//   output  Y = A X                     2 n^2 d
//   softmax (subtract max, scale, exp, sum, divide; exp counted as one operation)  5 n^2
//   rotation (4 mul + 2 add per plane, 3 per coordinate) and P_perp (dot + axpy)  3 n d + 4 n d
//   total   4 n^2 d + 5 n^2 + 7 n d  =  O(n^2 d)
// Symmetric scores (Q = K = I) are formed on the block upper triangle only (models/rope/attention.cpp),
// so the executed work at large n is about 3 n^2 d: the rates below are nominal (by the formula).
// Counters: GFLOP/s by that formula; ns_per_n2d = wall time / (n^2 d) in ns (printed with an "s"
// unit by the library; flat in n and d once the products dominate: the O(n^2 d) cost);
// peak_frac = GFLOP/s over the 2-thread DGEMM rate of a square 1024 product measured once
// (BM_RopeDgemmPeak reports it too). The last row (threads = 1) gives the 2-thread speed-up.
// (main() is in bench_main.cpp.)
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>

#include "tokdyn/core/linalg.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/core/rng.hpp"

#include "bench_blas.hpp"

namespace {

using tokdyn::Batch;
using tokdyn::Mat;
using tokdyn::Tokens;

void set_threads(int t) {
  omp_set_num_threads(t);
  openblas_set_num_threads(t);
}

double attention_flops(double n, double d) { return 4.0 * n * n * d + 5.0 * n * n + 7.0 * n * d; }

benchmark::Counter gflops(double flop_per_iter) {
  return benchmark::Counter(flop_per_iter / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

/// GFLOP/s of C = A B^T, 1024 x 1024 x 1024, as one threaded OpenBLAS DGEMM on 2 threads (the
/// machine's peak; best of 5).
double dgemm_peak_gflops() {
  static const double peak = [] {
    set_threads(2);
    const int n = 1024;
    const Mat A = Mat::Random(n, n), B = Mat::Random(n, n);
    Mat C;
    tokdyn::bench::threaded_gemm_nt(A, B, C);  // warm-up
    double best = 0.0;
    for (int r = 0; r < 5; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      tokdyn::bench::threaded_gemm_nt(A, B, C);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, 2.0 * n * n * n / s / 1e9);
    }
    benchmark::DoNotOptimize(C.data());
    return best;
  }();
  return peak;
}

void BM_RopeDgemmPeak(benchmark::State& st) {
  set_threads(2);
  const int n = 1024;
  const Mat A = Mat::Random(n, n), B = Mat::Random(n, n);
  Mat C;
  for (auto _ : st) {
    tokdyn::bench::threaded_gemm_nt(A, B, C);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP/s"] = gflops(2.0 * n * n * n);
}
BENCHMARK(BM_RopeDgemmPeak)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_AttentionField(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0)), d = static_cast<int>(st.range(1));
  const double peak = dgemm_peak_gflops();
  set_threads(static_cast<int>(st.range(2)));
  tokdyn::rope::AttentionParams P;
  P.d = d;
  P.beta = 1.0;
  tokdyn::rope::AttentionField F(P, n);
  tokdyn::Rng rng(0x60e, {static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(d)});
  const Batch Z{rng.sphere_tokens(n, d), 1, n};
  Tokens dZ;
  F.eval(0.0, Z, dZ);  // warm-up (allocations)
  for (auto _ : st) {
    F.eval(0.0, Z, dZ);
    benchmark::DoNotOptimize(dZ.data());
    benchmark::ClobberMemory();
  }
  const double flop = attention_flops(n, d);
  st.counters["GFLOP/s"] = gflops(flop);
  st.counters["ns_per_n2d"] = benchmark::Counter(1e-9 * static_cast<double>(n) * n * d,
                                                 benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
  st.counters["peak_frac"] = benchmark::Counter(flop / 1e9 / peak, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionField)
    ->ArgNames({"n", "d", "threads"})
    ->ArgsProduct({{64, 256, 1024}, {2, 64, 512}, {2}})
    ->Args({1024, 512, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
