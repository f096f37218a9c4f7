#pragma once
// Shared by the Mamba-2 tests: a float state of iid N(0, 1) entries from stream (seed).
#include <cstdint>

#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/tokens.hpp"

namespace tokdyn::testing {

inline MatF random_state(long rows, int d, std::uint64_t seed) {
  Rng rng(seed);
  MatF X(rows, d);
  for (Eigen::Index i = 0; i < X.size(); ++i) X.data()[i] = static_cast<float>(rng.normal());
  return X;
}

}  // namespace tokdyn::testing
