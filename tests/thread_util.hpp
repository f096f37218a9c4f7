#pragma once
// Thread-count helpers for the "same bits on any thread count" tests.
#include <omp.h>

#include <vector>

// OpenBLAS entry point (the OpenMP build's cblas.h is not on the tests' include path).
extern "C" void openblas_set_num_threads(int);

namespace tokdyn::testing {

/// The thread counts every invariance test compares. The machine has 2 cores: 3 and 4
/// oversubscribe, which is fine for a correctness test (and splits differently from 2).
inline const std::vector<int> kThreadCounts = {1, 2, 3, 4};

/// Sets OpenMP's and OpenBLAS's thread counts, as `tokdyn run --threads` does.
inline void set_threads(int t) {
  omp_set_num_threads(t);
  openblas_set_num_threads(t);
}

/// Restores the thread count found at construction when it goes out of scope.
class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(omp_get_max_threads()) {}
  ~ThreadCountGuard() { set_threads(saved_); }
  ThreadCountGuard(const ThreadCountGuard&) = delete;
  ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;

 private:
  int saved_;
};

}  // namespace tokdyn::testing
