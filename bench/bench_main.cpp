// Micro-benchmarks for issue "Speed": the DGEMM peak of the machine's OpenBLAS and the per-layer
// pieces of the preset ssm-random-silu at full size (runs = 50, ell = 50, n = 768, m = 128).
//
// Every benchmark uses wall-clock time (UseRealTime), so that rate counters of multi-threaded
// pieces are true throughputs. "threads" sets both OpenMP and OpenBLAS (as `tokdyn run
// --threads` does). Counters:
//   FLOPS  floating-point operations per second, from the shapes (see the flop_* helpers);
//   exps   transcendental evaluations per second (exp, log1p);
//   draws  random numbers drawn per second;
//   layers layers diagnosed per second (BM_Diagnostics).
// scripts/bench.sh runs these with repetitions and writes bench/results-ssm-random-silu.md.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tokdyn/analysis/ssm_theory.hpp"
#include "tokdyn/core/blas_core.hpp"
#include "tokdyn/core/linalg.hpp"
#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/models/ssm/random.hpp"
#include "tokdyn/engine/observers.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/engine/schedule.hpp"
#include "tokdyn/core/sphere.hpp"

#include "bench_blas.hpp"

namespace {

using namespace tokdyn;
using tokdyn::bench::kNoTrans;
using tokdyn::bench::kRowMajor;

// The preset's full size.
constexpr int kRuns = 50, kLen = 50, kN = 768, kM = 128;
constexpr Eigen::Index kRows = static_cast<Eigen::Index>(kRuns) * kLen;  // N = runs * ell

void set_threads(int t) {
  omp_set_num_threads(t);
  openblas_set_num_threads(t);
}

// ---- FLOP counts from the shapes (per call) ----
double flop_delta_gemm() { return 2.0 * kRows * kN * kN; }       // Z W_Delta^T
double flop_bc_gemm() { return 2.0 * 2.0 * kRows * kN * kM; }    // Z S_B^T and Z S_C^T
// IO readout of one run: K = C B^T (2 ell^2 m) and, per pair j <= i, decay ⊙ w_j, K_ij *, +=, and
// the running-product update: 4 n per pair.
double flop_readout_io_run() { return 2.0 * kLen * kLen * kM + 4.0 * kN * (kLen * (kLen + 1) / 2.0); }
// Recurrence of one run: per token and channel, h = a h + in B (3 m) and r = H C (2 m).
double flop_readout_rec_run() { return 5.0 * kLen * kN * kM; }
double flop_gram_run() { return 2.0 * kLen * kLen * kN; }  // Zh Zh^T
double flop_layer() {
  return flop_delta_gemm() + flop_bc_gemm() + kRuns * (flop_readout_io_run() + flop_gram_run());
}

SsmRandomSpec full_spec() {
  SsmRandomSpec s;
  s.n = kN;
  s.m = kM;
  return s;
}

// Shared inputs, made once: one drawn layer, a 50-run batch on the sphere, its branches.
struct Data {
  SsmParams p;
  Batch Z;
  SsmBranches br[2];  // [silu off, silu on]
  Data() {
    Rng wr(0x5eedf00dULL, {0});
    p = draw_ssm_layer(full_spec(), wr);
    Z = Batch{Tokens(kRows, kN), kRuns, kLen};
    for (int r = 0; r < kRuns; ++r) {
      Rng rng(0, {static_cast<std::uint64_t>(r)});
      Z.run(r) = rng.sphere_tokens(kLen, kN);
    }
    for (int s = 0; s < 2; ++s) {
      SsmOptions o;
      o.tau = 1.0;
      o.silu_bc = s == 1;
      ssm_branches(p, o, Z.Z, br[s]);
    }
  }
};
const Data& data() {
  static const Data d;
  return d;
}

benchmark::Counter rate(double per_iter, const benchmark::State& st) {
  return benchmark::Counter(per_iter * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate,
                            benchmark::Counter::kIs1000);
}

// ---- DGEMM peak ----
void BM_Dgemm(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  set_threads(static_cast<int>(st.range(1)));
  Mat A = Mat::Random(n, n), B = Mat::Random(n, n), C(n, n);
  for (auto _ : st) {
    cblas_dgemm(kRowMajor, kNoTrans, kNoTrans, n, n, n, 1.0, A.data(), n, B.data(), n, 0.0, C.data(), n);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  st.counters["FLOPS"] = rate(2.0 * n * n * n, st);
}
BENCHMARK(BM_Dgemm)->ArgNames({"n", "threads"})->Args({2048, 1})->Args({2048, 2})->Args({4096, 2})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

// The experiment's Delta product as ssm_branches computes it (tokdyn::gemm_nt_blocked: fixed
// tiles, each a single-threaded DGEMM): (2500 x 768) (768 x 768)^T.
void BM_DgemmDelta(benchmark::State& st) {
  set_threads(static_cast<int>(st.range(0)));
  const auto& d = data();
  Mat D(kRows, kN);
  for (auto _ : st) {
    gemm_nt_blocked(d.Z.Z, d.p.W_delta, D);
    benchmark::DoNotOptimize(D.data());
  }
  st.counters["FLOPS"] = rate(flop_delta_gemm(), st);
}
BENCHMARK(BM_DgemmDelta)->ArgNames({"threads"})->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// The same product as one threaded OpenBLAS DGEMM (unblocked; its bits depend on the thread
// count), for comparison.
void BM_DgemmDeltaUnblocked(benchmark::State& st) {
  set_threads(static_cast<int>(st.range(0)));
  const auto& d = data();
  Mat D(kRows, kN);
  for (auto _ : st) {
    tokdyn::bench::threaded_gemm_nt(d.Z.Z, d.p.W_delta, D);
    benchmark::DoNotOptimize(D.data());
  }
  st.counters["FLOPS"] = rate(flop_delta_gemm(), st);
}
BENCHMARK(BM_DgemmDeltaUnblocked)->ArgNames({"threads"})->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// The same product through Eigen's own GEMM (no BLAS; single-threaded: tokdyn builds with
// EIGEN_DONT_PARALLELIZE), for comparison.
void BM_DgemmDeltaEigen(benchmark::State& st) {
  set_threads(static_cast<int>(st.range(0)));
  const auto& d = data();
  Mat D(kRows, kN);
  for (auto _ : st) {
    D.noalias() = d.Z.Z * d.p.W_delta.transpose();
    benchmark::DoNotOptimize(D.data());
  }
  st.counters["FLOPS"] = rate(flop_delta_gemm(), st);
}
BENCHMARK(BM_DgemmDeltaEigen)->ArgNames({"threads"})->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// The two branch products Z S_B^T, Z S_C^T: (2500 x 768) (768 x 128) each (gemm_nt_blocked, as
// ssm_branches).
void BM_DgemmBC(benchmark::State& st) {
  set_threads(static_cast<int>(st.range(0)));
  const auto& d = data();
  Mat Bz(kRows, kM), Cz(kRows, kM);
  for (auto _ : st) {
    gemm_nt_blocked(d.Z.Z, d.p.S_B, Bz);
    gemm_nt_blocked(d.Z.Z, d.p.S_C, Cz);
    benchmark::DoNotOptimize(Bz.data());
    benchmark::DoNotOptimize(Cz.data());
  }
  st.counters["FLOPS"] = rate(flop_bc_gemm(), st);
}
BENCHMARK(BM_DgemmBC)->ArgNames({"threads"})->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// Both branch products as one DGEMM with [S_B; S_C] stacked (256 x 768): what a fused product
// would cost.
void BM_DgemmBCStacked(benchmark::State& st) {
  set_threads(static_cast<int>(st.range(0)));
  const auto& d = data();
  Mat S(2 * kM, kN), BC(kRows, 2 * kM);
  S.topRows(kM) = d.p.S_B;
  S.bottomRows(kM) = d.p.S_C;
  for (auto _ : st) {
    gemm_nt_blocked(d.Z.Z, S, BC);
    benchmark::DoNotOptimize(BC.data());
  }
  st.counters["FLOPS"] = rate(flop_bc_gemm(), st);
}
BENCHMARK(BM_DgemmBCStacked)->ArgNames({"threads"})->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- Random draws: one layer's weights (n^2 + 2 m n + 2 n numbers; single-threaded by design) ----
void BM_DrawLayer(benchmark::State& st) {
  const auto spec = full_spec();
  std::uint64_t k = 0;
  for (auto _ : st) {
    Rng rng(0x5eedf00dULL, {k++});
    SsmParams p = draw_ssm_layer(spec, rng);
    benchmark::DoNotOptimize(p.W_delta.data());
  }
  st.counters["draws"] = rate(static_cast<double>(kN) * kN + 2.0 * kM * kN + 2.0 * kN, st);
}
BENCHMARK(BM_DrawLayer)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- Transcendentals, per element, 1 thread (ssm_branches applies them row by row, OpenMP over
// rows; its elementwise time is BM_Branches minus the GEMMs) ----
// Delta = softplus(X + b) on N x n: bias (here out of place, so that every iteration starts from
// the GEMM's output), then max, exp, log1p in one Eigen expression (which Eigen 3.4 evaluates
// with scalar std::exp / std::log1p: log1p has no double packet).
void BM_Softplus(benchmark::State& st) {
  const auto& d = data();
  Mat X = d.Z.Z * d.p.W_delta.transpose();
  Mat D(kRows, kN);
  for (auto _ : st) {
    D = X.rowwise() + d.p.b_delta.transpose();
    D = D.array().max(0.0) + (-D.array().abs()).exp().log1p();
    benchmark::DoNotOptimize(D.data());
  }
  st.counters["exps"] = rate(2.0 * kRows * kN, st);  // one exp + one log1p per entry
}
BENCHMARK(BM_Softplus)->UseRealTime()->Unit(benchmark::kMillisecond);

// A = exp(-alpha ⊙ Delta) on N x n, row by row (Eigen's vectorised exp).
void BM_DecayExp(benchmark::State& st) {
  const auto& d = data();
  const Mat& D = d.br[1].Delta;
  Mat A(kRows, kN);
  for (auto _ : st) {
    for (Eigen::Index i = 0; i < kRows; ++i) A.row(i).array() = (-(D.row(i).array() * d.p.alpha.transpose().array())).exp();
    benchmark::DoNotOptimize(A.data());
  }
  st.counters["exps"] = rate(static_cast<double>(kRows) * kN, st);
}
BENCHMARK(BM_DecayExp)->UseRealTime()->Unit(benchmark::kMillisecond);

// SiLU on the B and C branches (2 x N x m).
void BM_SiluBC(benchmark::State& st) {
  const auto& d = data();
  const Mat B0 = d.Z.Z * d.p.S_B.transpose(), C0 = d.Z.Z * d.p.S_C.transpose();
  Mat Bz(kRows, kM), Cz(kRows, kM);
  for (auto _ : st) {
    Bz = B0;
    Cz = C0;
    Bz = Bz.array() / (1.0 + (-Bz.array()).exp());
    Cz = Cz.array() / (1.0 + (-Cz.array()).exp());
    benchmark::DoNotOptimize(Bz.data());
    benchmark::DoNotOptimize(Cz.data());
  }
  st.counters["exps"] = rate(2.0 * kRows * kM, st);
}
BENCHMARK(BM_SiluBC)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- ssm_branches as a whole (GEMMs + softplus, A = exp(-alpha Delta) [+ SiLU]) ----
void BM_Branches(benchmark::State& st) {
  set_threads(static_cast<int>(st.range(1)));
  const auto& d = data();
  SsmOptions o;
  o.tau = 1.0;
  o.silu_bc = st.range(0) != 0;
  SsmBranches br;
  for (auto _ : st) {
    ssm_branches(d.p, o, d.Z.Z, br);
    benchmark::DoNotOptimize(br.Delta.data());
  }
  st.counters["FLOPS"] = rate(flop_delta_gemm() + flop_bc_gemm(), st);
}
BENCHMARK(BM_Branches)->ArgNames({"silu", "threads"})->Args({1, 1})->Args({1, 2})->Args({0, 2})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- Readout ----
// One run, single thread: form 0 = InputOutput (the preset's), 1 = Recurrence.
void BM_ReadoutRun(benchmark::State& st) {
  set_threads(1);
  const auto& d = data();
  const SsmForm form = st.range(0) == 0 ? SsmForm::InputOutput : SsmForm::Recurrence;
  Tokens R(kRows, kN);
  for (auto _ : st) {
    ssm_readout(form, d.p, d.br[1], d.Z.Z, 0, kLen, R);
    benchmark::DoNotOptimize(R.data());
  }
  st.counters["FLOPS"] = rate(form == SsmForm::InputOutput ? flop_readout_io_run() : flop_readout_rec_run(), st);
}
BENCHMARK(BM_ReadoutRun)->ArgNames({"rec"})->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

// All 50 runs, OpenMP over runs as in SsmLayer::apply.
void BM_ReadoutBatch(benchmark::State& st) {
  set_threads(static_cast<int>(st.range(1)));
  const auto& d = data();
  const SsmForm form = st.range(0) == 0 ? SsmForm::InputOutput : SsmForm::Recurrence;
  Tokens R(kRows, kN);
  for (auto _ : st) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < kRuns; ++r)
      ssm_readout(form, d.p, d.br[1], d.Z.Z, static_cast<Eigen::Index>(r) * kLen, kLen, R);
    benchmark::DoNotOptimize(R.data());
  }
  st.counters["FLOPS"] =
      rate(kRuns * (form == SsmForm::InputOutput ? flop_readout_io_run() : flop_readout_rec_run()), st);
}
BENCHMARK(BM_ReadoutBatch)->ArgNames({"rec", "threads"})->Args({0, 1})->Args({0, 2})->Args({1, 2})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- The residual update z <- pi(z + tau r) on the batch (single-threaded, as in apply) ----
void BM_Update(benchmark::State& st) {
  const auto& d = data();
  Tokens Z = d.Z.Z, R = 1e-3 * d.Z.Z;
  for (auto _ : st) {
    Tokens Rn(kRows, kN);  // apply() allocates R afresh every layer
    Rn = R;
    Z += 1.0 * Rn;
    project_rows(Z);
    benchmark::DoNotOptimize(Z.data());
  }
  st.counters["FLOPS"] = rate(4.0 * kRows * kN, st);
}
BENCHMARK(BM_Update)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- Metrics ----
void BM_GramMetricsRun(benchmark::State& st) {
  set_threads(1);
  const auto& d = data();
  for (auto _ : st) {
    GramMetrics g = gram_metrics(d.Z.run(0));
    benchmark::DoNotOptimize(g);
  }
  st.counters["FLOPS"] = rate(flop_gram_run(), st);
}
BENCHMARK(BM_GramMetricsRun)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ConsensusRun(benchmark::State& st) {
  const auto& d = data();
  for (auto _ : st) {
    ConsensusDistance c = consensus_distance(d.Z.run(0));
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_ConsensusRun)->UseRealTime()->Unit(benchmark::kMicrosecond);

// GramObserver::observe on the 50-run batch (gram_metrics + consensus_distance of every run).
void BM_GramObserve(benchmark::State& st) {
  set_threads(static_cast<int>(st.range(0)));
  const auto& d = data();
  for (auto _ : st) {
    GramObserver g;
    g.observe(1.0, d.Z);
    benchmark::DoNotOptimize(g.metrics().data());
  }
  st.counters["FLOPS"] = rate(kRuns * flop_gram_run(), st);
}
BENCHMARK(BM_GramObserve)->ArgNames({"threads"})->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- The preset's per-layer Assumption III.1 diagnostics (assumption_diagnostics, parameter
// diagnostics=true): once per layer for both variants. Timed over 4 layers, reported per layer.
void BM_Diagnostics(benchmark::State& st) {
  set_threads(static_cast<int>(st.range(0)));
  const auto spec = full_spec();
  constexpr long kLayers = 4;
  long b = 0;
  for (auto _ : st) {
    st.PauseTiming();  // fresh schedule (its cache would otherwise hold the draws); draws not timed
    auto sched = std::make_shared<IidSchedule<SsmParams>>(
        [spec](Rng& rng) { return draw_ssm_layer(spec, rng); }, 0x5eedf00dULL + static_cast<std::uint64_t>(b++), 1);
    for (long k = 1; k <= kLayers; ++k) sched->at_layer(k);
    st.ResumeTiming();
    AssumptionDiagnostics dg = assumption_diagnostics(*sched, kLayers, kLen);
    benchmark::DoNotOptimize(dg.layers.data());
  }
  st.counters["layers"] = rate(static_cast<double>(kLayers), st);
}
BENCHMARK(BM_Diagnostics)->ArgNames({"threads"})->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- One whole SsmLayer::apply on the 50-run batch (fixed weights: no draws) ----
void BM_LayerApply(benchmark::State& st) {
  set_threads(static_cast<int>(st.range(1)));
  const auto& d = data();
  auto sched = std::make_shared<ConstantSchedule<SsmParams>>(d.p);
  SsmOptions o;
  o.tau = 1.0;
  o.silu_bc = st.range(0) != 0;
  SsmLayer layer(sched, o, SsmForm::InputOutput);
  Batch Z = d.Z;
  long k = 1;
  for (auto _ : st) {
    layer.apply(k++, Z);
    benchmark::DoNotOptimize(Z.Z.data());
  }
  st.counters["FLOPS"] = rate(flop_delta_gemm() + flop_bc_gemm() + kRuns * flop_readout_io_run(), st);
}
BENCHMARK(BM_LayerApply)->ArgNames({"silu", "threads"})->Args({1, 1})->Args({1, 2})->Args({0, 2})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- One layer of the preset as `tokdyn run ssm-random-silu` does it: weights drawn for the
// layer (IidSchedule), apply with the q sink storing q as the preset does, and GramObserver ----
void BM_PresetLayer(benchmark::State& st) {
  set_threads(static_cast<int>(st.range(1)));
  const auto& d = data();
  const auto spec = full_spec();
  auto sched = std::make_shared<IidSchedule<SsmParams>>([spec](Rng& rng) { return draw_ssm_layer(spec, rng); },
                                                        0x5eedf00dULL, 1);
  SsmOptions o;
  o.tau = 1.0;
  o.silu_bc = st.range(0) != 0;
  SsmLayer layer(sched, o, SsmForm::InputOutput);
  std::vector<std::vector<std::vector<double>>> q(kRuns, std::vector<std::vector<double>>(kLen));
  CallbackTapObserver qtap("q", [&q](long, const double* qm, const std::vector<std::size_t>&) {
    for (int r = 0; r < kRuns; ++r)
      for (int i = 0; i < kLen; ++i) q[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)].push_back(qm[r * kLen + i]);
  });
  layer.watch(&qtap);
  GramObserver gram;
  Batch Z = d.Z;
  long k = 1;
  for (auto _ : st) {
    layer.apply(k, Z);
    gram.observe(static_cast<double>(k), Z);
    ++k;
    benchmark::DoNotOptimize(Z.Z.data());
  }
  st.counters["FLOPS"] = rate(flop_layer(), st);
}
BENCHMARK(BM_PresetLayer)->ArgNames({"silu", "threads"})->Args({1, 1})->Args({1, 2})->Args({0, 2})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  tokdyn::ensure_blas_core(argv);  // OpenBLAS's own kernels on a CPU it does not know (blas_core.hpp), as tokdyn does
  tokdyn::keep_freed_memory();     // freed buffers kept for reuse, as tokdyn does
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("openblas_corename", openblas_get_corename());
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  for (const char* v : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* s = std::getenv(v);
    benchmark::AddCustomContext(v, s ? s : "(unset)");
  }
  benchmark::AddCustomContext("flop_per_layer", std::to_string(flop_layer()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
