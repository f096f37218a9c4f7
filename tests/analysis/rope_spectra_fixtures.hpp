#pragma once
// Shared by test_rope_spectra_bessel.cpp and test_rope_spectra_kernel.cpp: token positions
// 0, 1, ..., n-1.
#include <vector>

namespace tokdyn::testing {

inline std::vector<double> iota_positions(int n) {
  std::vector<double> p(n);
  for (int i = 0; i < n; ++i) p[i] = i;
  return p;
}

}  // namespace tokdyn::testing
