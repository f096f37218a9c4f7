// Resource checks before a run: memory against the machine, and the announced work of long runs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <strings.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <unistd.h>

#include <fmt/format.h>

#include "tokdyn/core/blas_core.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"

extern "C" char* openblas_get_corename(void);

namespace tokdyn {

namespace {

std::string bytes_text(double b) {
  const char* unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024.0 && u < 6) b /= 1024.0, ++u;
  return u == 0 ? fmt::format("{:.0f} bytes", b) : fmt::format("{:.1f} {}", b, unit[u]);
}

std::string flops_text(double f) {
  if (!std::isfinite(f)) return "more than can be counted";
  if (f >= 1e18) return fmt::format("{:.1e} FLOP", f);  // no 300-digit numbers
  if (f >= 1e15) return fmt::format("{:.1f} PFLOP", f / 1e15);
  if (f >= 1e12) return fmt::format("{:.1f} TFLOP", f / 1e12);
  return fmt::format("{:.1f} GFLOP", f / 1e9);
}

/// A cgroup v2 (or v1) memory limit, if one is set.
double cgroup_limit() {
  for (const char* f : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(f);
    std::string s;
    if (in >> s && !s.empty() && s != "max") {
      try {
        const double v = std::stod(s);
        if (v > 0 && v < 1e18) return v;
      } catch (...) {
      }
    }
  }
  return 0;
}

}  // namespace

double machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  double ram = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
  const double cg = cgroup_limit();
  if (cg > 0 && (ram <= 0 || cg < ram)) ram = cg;
  return ram;
}

void check_resources(const Experiment& e, const Params& p, int threads, bool announce) {
  if (!e.estimate) return;
  const ResourceEstimate r = e.estimate(p);
  const double have = machine_memory_bytes();
  if (!(r.bytes >= 0) || !std::isfinite(r.bytes) || (have > 0 && r.bytes > 0.9 * have))
    throw InputError(fmt::format("{}: the run needs about {} for {}; this machine has {} (lower the sizes; see `tokdyn show {}`)",
                                 e.name, std::isfinite(r.bytes) ? bytes_text(r.bytes) : std::string("more than can be counted"),
                                 r.what, bytes_text(have), e.name));
  // Runs of more than a few seconds say up front how long they will take, and what for.
  threads = std::max(threads, 1);
  const double seconds = cost::estimated_seconds(r, threads);
  if (announce && !(seconds <= cost::kAnnounceSeconds)) {
    std::fprintf(stderr, "tokdyn: %s: estimated time %s on %d thread%s (work %s: %s; memory about %s)\n", e.name.c_str(),
                 cost::duration_text(seconds).c_str(), threads, threads == 1 ? "" : "s", flops_text(r.flops).c_str(), r.what.c_str(),
                 bytes_text(r.bytes).c_str());
    std::fflush(stderr);
  }
}

namespace cost {

double small_matrix_rate(double d) {
  if (!(d > 0)) return 0.1 * kRateBlas3;
  return 3.0 * kRateBlas3 * d / (d + 100.0);
}

double small_vector_rate(double d) {
  // 0.3 us of overhead per block and 5 GFLOP/s on its 6 d^2 flops (a layer of a banded solve).
  if (!(d > 0)) return 1e8;
  const double f = 6.0 * d * d;
  return f / (0.3e-6 + f / 5e9);
}

double spectral_norm_flops(double d) {
  if (d <= 1) return std::max(d, 0.0);
  if (d <= 2) return 30.0;
  return (d < 64 ? 50.0 : 4.0) * d * d * d;
}

double spectral_norm_seconds(double d) {
  if (d <= 2) return 0.2e-6;
  if (d < 64) return 200.0 * d * d * d / kRateBlas3;  // two-sided Jacobi
  return 4.0 * d * d * (d + 600.0) / kRateBlas3;        // divide and conquer: 1 ms at 64, 0.12 s at 512
}

Work& Work::add(double flops, double rate, bool parallel) {
  if (!(flops > 0)) return *this;
  flops_ += flops;
  (parallel ? parallel_ : serial_) += flops / rate;
  return *this;
}

Work& Work::add(const ResourceEstimate& r) {
  flops_ += r.flops;
  if (r.seconds > 0) {
    const double p = std::clamp(r.parallel, 0.0, 1.0);
    serial_ += r.seconds * (1 - p);
    parallel_ += r.seconds * p;
  } else {
    parallel_ += r.flops / kRateDefault;
  }
  return *this;
}

Work& Work::add_timed(double flops, double seconds, bool parallel) {
  if (!(seconds > 0)) return *this;
  flops_ += std::max(flops, 0.0);
  (parallel ? parallel_ : serial_) += seconds;
  return *this;
}

Work& Work::add_norms(double count, double d, bool parallel) {
  return add_timed(count * spectral_norm_flops(d), count * spectral_norm_seconds(d), parallel);
}

Work& Work::add_pushes(double steps, double d, bool parallel) {
  // A push runs in the bundles' own coordinates (cocycle_bundles.cpp Chains): an m x m product and an
  // m x m norm a layer, m = k or d - k, about d / 2 (the chains themselves, a few d^3 a layer, are
  // counted with the bundles).
  const double m = d > 1 ? std::ceil(d / 2.0) : d;
  add(steps * 2.0 * m * m * m, small_matrix_rate(m), parallel);
  return add_timed(steps * spectral_norm_flops(m), steps * spectral_norm_seconds(m), parallel);
}

ResourceEstimate Work::estimate(double bytes, std::string what) const {
  const double s = seconds();
  return ResourceEstimate{bytes, flops_, std::move(what), s, s > 0 ? parallel_ / s : 1.0};
}

double estimated_seconds(const ResourceEstimate& r, int threads) {
  const double t = std::max(threads, 1);
  if (r.seconds > 0) {
    const double p = std::clamp(r.parallel, 0.0, 1.0);
    return r.seconds * ((1 - p) + p / t);
  }
  return r.flops / (kRateDefault * t);
}

std::string duration_text(double s) {
  if (!std::isfinite(s) || s > 3.15e7 * 100) return "more than a century";
  if (s > 3.15e7) return fmt::format("about {:.0f} years", s / 3.15e7);
  if (s > 86400 * 2) return fmt::format("about {:.0f} days", s / 86400);
  if (s > 7200) return fmt::format("about {:.0f} h", s / 3600);
  if (s >= 600) return fmt::format("about {:.0f} min", s / 60);
  if (s >= 90) {
    const long tens = std::lround(s / 10.0);  // to 10 s
    return tens % 6 == 0 ? fmt::format("about {} min", tens / 6) : fmt::format("about {} min {} s", tens / 6, (tens % 6) * 10);
  }
  if (s >= 1) return fmt::format("about {:.0f} s", s);
  return "under a second";
}

}  // namespace cost

// ---- OpenBLAS kernels (blas_core.hpp) -----------------------------------------------------------

std::string blas_core() {
  const char* c = openblas_get_corename();
  return c != nullptr ? std::string(c) : std::string();
}

std::string blas_core_upgrade() {
#if defined(__x86_64__)
  // OpenBLAS's x86-64 kernel sets with AVX2 (or wider) GEMM kernels.
  const std::string core = blas_core();
  for (const char* good : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator"})
    if (::strcasecmp(core.c_str(), good) == 0) return {};
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return {};
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  return "Haswell";
#else
  return {};
#endif
}

void ensure_blas_core(char** argv) {
  // TOKDYN_BLAS_CORE takes one value; anything else is refused, not ignored (exit 2, bad input).
  const char* k = std::getenv("TOKDYN_BLAS_CORE");
  if (k != nullptr && std::string(k) != "keep") {
    std::fprintf(stderr, "tokdyn: error: environment variable TOKDYN_BLAS_CORE='%s': expected 'keep' (OpenBLAS's own kernel choice) or unset\n", k);
    std::exit(2);
  }
  if (k != nullptr || std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::string up = blas_core_upgrade();
  if (up.empty()) return;
  ::setenv("TOKDYN_BLAS_CORE_DETECTED", blas_core().c_str(), 1);
  ::setenv("OPENBLAS_CORETYPE", up.c_str(), 1);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv("/proc/self/exe", argv);
  // Not re-executed (no /proc): go on with the kernels OpenBLAS chose, and say nothing changed.
  ::unsetenv("OPENBLAS_CORETYPE");
  ::unsetenv("TOKDYN_BLAS_CORE_DETECTED");
}

void keep_freed_memory() {
#if defined(__GLIBC__)
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

std::string blas_core_detected() {
  const char* d = std::getenv("TOKDYN_BLAS_CORE_DETECTED");
  const char* c = std::getenv("OPENBLAS_CORETYPE");
  return d != nullptr && c != nullptr ? std::string(d) : std::string();
}

}  // namespace tokdyn
