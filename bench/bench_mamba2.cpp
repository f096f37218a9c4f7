// Micro-benchmarks for the preset mamba2-fig1 (Mamba-2 130m, runs = 50, tokens = 50): the SGEMM
// peak of the machine's OpenBLAS, the GEMM shapes of one mixer call (blocked as the mixer computes
// them, and unblocked for comparison), and one whole mixer call.
//
// Every benchmark uses wall-clock time (UseRealTime). "threads" sets both OpenMP and OpenBLAS
// (as `tokdyn run --threads` does). Counter: GFLOP/s, floating-point operations (2 per
// multiply-add, from the shapes; Engine::flops for the mixer) per second of wall time, in 1e9.
// scripts/bench_mamba2.sh runs these and writes bench/results-mamba2-fig1.md.
// (main() is in bench_main.cpp.)
#include <benchmark/benchmark.h>
#include <omp.h>

#include "tokdyn/core/linalg.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"

#include "bench_blas.hpp"

namespace {

using tokdyn::MatF;

void set_threads(int t) {
  omp_set_num_threads(t);
  openblas_set_num_threads(t);
}

benchmark::Counter gflops(double flop_per_iter) {
  return benchmark::Counter(flop_per_iter / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// C = A B^T with A m x k and B n x k, 2 m n k FLOPs. blocked: tokdyn::gemm_nt_blocked (fixed tiles,
// each a single-threaded SGEMM, the tiles over OpenMP threads: what the mixer does); otherwise one
// threaded OpenBLAS SGEMM (unblocked: the machine's peak, and what the mixer did before).
void run_sgemm(benchmark::State& st, int m, int n, int k, int threads, bool blocked) {
  set_threads(threads);
  const MatF A = MatF::Random(m, k), B = MatF::Random(n, k);
  MatF C(m, n);
  for (auto _ : st) {
    if (blocked) tokdyn::gemm_nt_blocked(A, B, C);
    else tokdyn::bench::threaded_gemm_nt(A, B, C);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP/s"] = gflops(2.0 * m * n * k);
}

// ---- SGEMM peak: square n x n x n, one threaded SGEMM ----
void BM_Sgemm(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  run_sgemm(st, n, n, n, static_cast<int>(st.range(1)), false);
}
BENCHMARK(BM_Sgemm)->ArgNames({"n", "threads"})->Args({4096, 1})->Args({4096, 2})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- The projections of one 130m mixer call over runs * tokens = 2500 rows ----
// in_proj:  (2500 x 768) (3352 x 768)^T   (gate on; all rows z, xBC, dt)
//           (2500 x 768) (1816 x 768)^T   (gate off: the z rows are skipped)
// out_proj: (2500 x 1536) (768 x 1536)^T
// and the same with few rows (runs x tokens = 50: column tiles).
// BM_SgemmShape: blocked, as the mixer computes them; BM_SgemmShapeUnblocked: one threaded SGEMM.
void BM_SgemmShape(benchmark::State& st) {
  run_sgemm(st, static_cast<int>(st.range(0)), static_cast<int>(st.range(1)), static_cast<int>(st.range(2)),
            static_cast<int>(st.range(3)), true);
}
void BM_SgemmShapeUnblocked(benchmark::State& st) {
  run_sgemm(st, static_cast<int>(st.range(0)), static_cast<int>(st.range(1)), static_cast<int>(st.range(2)),
            static_cast<int>(st.range(3)), false);
}
#define TOKDYN_MIXER_SHAPES(b)                                                                    \
  BENCHMARK(b)->ArgNames({"m", "n", "k", "threads"})                                              \
      ->Args({2500, 3352, 768, 2})->Args({2500, 1816, 768, 2})->Args({2500, 768, 1536, 2})         \
      ->Args({2500, 3352, 768, 1})->Args({50, 3352, 768, 2})->Args({50, 768, 1536, 2})            \
      ->UseRealTime()->Unit(benchmark::kMillisecond)
TOKDYN_MIXER_SHAPES(BM_SgemmShape);
TOKDYN_MIXER_SHAPES(BM_SgemmShapeUnblocked);
#undef TOKDYN_MIXER_SHAPES

// ---- One mixer call: Engine::mixer on a 130m layer, runs = 50, len = 50 ----
struct MixerData {
  tokdyn::mamba2::Config cfg = tokdyn::mamba2::Config::named("130m");
  tokdyn::mamba2::Layer layer;
  MatF X;
  MixerData() {
    layer = tokdyn::mamba2::init_layer(cfg, 0, 0);
    X = MatF::Random(50 * 50, cfg.d_model);
  }
};
const MixerData& mixer_data() {
  static const MixerData d;
  return d;
}

void BM_Mamba2Mixer(benchmark::State& st) {
  constexpr int kRuns = 50, kLen = 50;
  const bool gate = st.range(0) != 0;
  set_threads(static_cast<int>(st.range(1)));
  const MixerData& d = mixer_data();
  tokdyn::mamba2::Switches sw;
  sw.gate = gate;
  tokdyn::mamba2::Engine eng(d.cfg, sw);
  MatF out;
  eng.mixer(d.layer, d.X, kRuns, kLen, out);  // warm-up: sizes the engine's buffers
  for (auto _ : st) {
    eng.mixer(d.layer, d.X, kRuns, kLen, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP/s"] = gflops(eng.flops(kRuns, kLen));
}
BENCHMARK(BM_Mamba2Mixer)->ArgNames({"gate", "threads"})->Args({1, 2})->Args({0, 2})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
