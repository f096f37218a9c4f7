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

}  // namespace tokdyn
