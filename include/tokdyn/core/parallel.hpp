#pragma once
// Exceptions inside OpenMP loops: an exception must not leave a parallel region (the runtime
// would terminate the process). Capture the first one and rethrow it after the loop:
//
//   ParallelErrors errors;
//   #pragma omp parallel for
//   for (int i = 0; i < n; ++i) try {
//     ...
//   } catch (...) {
//     errors.capture();
//   }
//   errors.rethrow();
//
// Which exception is kept when several iterations fail depends on scheduling; every one of them
// is a real failure of the run, so the message is right either way.
#include <exception>
#include <mutex>
#include <optional>
#include <type_traits>
#include <vector>

namespace tokdyn {

class ParallelErrors {
 public:
  /// Call from a catch block: keeps the first exception.
  void capture() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (!first_) first_ = std::current_exception();
  }
  /// True once an iteration failed (later iterations may skip their work).
  bool failed() const noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<bool>(first_);
  }
  /// Rethrows the first captured exception, if any.
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  mutable std::mutex mu_;
  std::exception_ptr first_;
};

/// out[i] = f(i) for i in [0, n), the items spread over the OpenMP threads (dynamic, one item at a
/// time), each item computed whole by one thread: as long as f(i) shares no mutable state, every
/// item has the same bits at any thread count. For grids of independent evaluations (rate fits,
/// trajectories, grid points). An exception in an item is rethrown after the loop (ParallelErrors);
/// f should not report progress (it runs on worker threads).
template <class F>
auto parallel_map(long n, F&& f) -> std::vector<std::decay_t<decltype(f(0L))>> {
  using T = std::decay_t<decltype(f(0L))>;
  std::vector<std::optional<T>> tmp(static_cast<std::size_t>(n > 0 ? n : 0));
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1)
  for (long i = 0; i < n; ++i) {
    if (errors.failed()) continue;
    try {
      tmp[static_cast<std::size_t>(i)].emplace(f(i));
    } catch (...) {
      errors.capture();
    }
  }
  errors.rethrow();
  std::vector<T> out;
  out.reserve(tmp.size());
  for (auto& t : tmp) out.push_back(std::move(*t));
  return out;
}

}  // namespace tokdyn
