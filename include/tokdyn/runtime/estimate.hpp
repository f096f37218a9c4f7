#pragma once
// A run's time, estimated before it starts (Experiment::estimate, check_resources): the work counted
// from the algorithm's dominant loops, each kind of work at the rate tokdyn's kernels sustain on one
// thread of a shared machine (measured, then rounded down so that estimates err towards announcing:
// docs/speed.md "Announced estimates"). A run longer than kAnnounceSeconds says so before it starts.
#include <string>

#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn::cost {

/// FLOP/s of one thread for a preset that gives its flops alone (ResourceEstimate::seconds = 0):
/// BLAS-3 products of medium matrices, rounded down (a shared 2-core AMD EPYC sustains 15-40).
inline constexpr double kRateDefault = 1e10;
/// Dense products and blocked factorisations of matrices of 128 and more (OpenBLAS).
inline constexpr double kRateBlas3 = 1e10;
/// Large batched products (runs x tokens rows against n x n weights: the SSM presets' layers),
/// OpenBLAS DGEMM near its peak: 31 GFLOP/s per thread measured in ssm-random-silu on a shared 2-core
/// AMD EPYC, rounded down.
inline constexpr double kRateBatchedGemm = 2.5e10;
/// Runs whose estimated time is longer than this are announced before they start.
inline constexpr double kAnnounceSeconds = 5.0;

/// FLOP/s of one thread on dense d x d work done one matrix at a time in a loop (Eigen products,
/// LU, QR of a recurrence): call overhead and short vectors make small matrices slow. 3e10 d / (d +
/// 100): about 2.2e9 at d = 8, 7e9 at d = 32, 2.2e10 at d = 256 (measured: 16-54 GFLOP/s for the
/// products alone, 0.4-16 for LU and QR).
double small_matrix_rate(double d);
/// FLOP/s of one thread on matrix-vector work with d x d blocks one at a time (the banded solves of
/// a recurrence, a push of one vector through the layers): 0.3 us of overhead per block of 6 d^2
/// flops at 5e9 (0.6e9 at d = 8, 3e9 at d = 64).
double small_vector_rate(double d);
/// One spectral norm ||X||_2 of a d x d matrix (tokdyn::spectral_norm): its flops (the two-sided
/// Jacobi SVD below d = 64, about 50 d^3; the divide-and-conquer SVD from 64 on, about 4 d^3 of
/// bidiagonalisation; closed form for 2 x 2) and its one-thread seconds as measured (Jacobi about
/// 200 d^3 / kRateBlas3: 10 us at d = 8; divide and conquer 4 d^2 (d + 600) / kRateBlas3: 1 ms at
/// d = 64, 0.12 s at 512).
double spectral_norm_flops(double d);
double spectral_norm_seconds(double d);

/// Work of several kinds, each at its own rate; a part is either shared by the run's threads or a
/// sequential recurrence that one thread does whatever the thread count.
class Work {
 public:
  /// Adds `flops` done at `rate` FLOP/s per thread; `parallel`: the threads share it.
  Work& add(double flops, double rate, bool parallel = false);
  /// Adds `flops` that take `seconds` on one thread (work whose time is measured, not a rate).
  Work& add_timed(double flops, double seconds, bool parallel = false);
  /// Adds another estimate (a preset run inside this one), at its own rates.
  Work& add(const ResourceEstimate& r);
  /// Adds `count` spectral norms of d x d matrices.
  Work& add_norms(double count, double d, bool parallel = false);
  /// Adds `steps` layers of a push of a dichotomy projector through a cocycle of dimension d with its
  /// norm at every layer (cocycle::growth_envelope, green_norm): in the bundles' coordinates, an
  /// m x m product and norm, m about d / 2.
  Work& add_pushes(double steps, double d, bool parallel = false);
  double flops() const { return flops_; }
  /// One-thread seconds.
  double seconds() const { return serial_ + parallel_; }
  /// The estimate: this work, `bytes` of memory, what dominates.
  ResourceEstimate estimate(double bytes, std::string what) const;

 private:
  double flops_ = 0, serial_ = 0, parallel_ = 0;
};

/// Wall seconds of a run with estimate `r` on `threads` threads: r.seconds split into its
/// sequential and shared parts, or r.flops at kRateDefault on every thread.
double estimated_seconds(const ResourceEstimate& r, int threads);
/// A duration as the announcement prints it: "about 8 s", "about 3 min 20 s", "about 2 h", ...
std::string duration_text(double seconds);

}  // namespace tokdyn::cost
