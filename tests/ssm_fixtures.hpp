#pragma once
// Shared test instances (spec §6 "random instance").
#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn::testing {

/// n = 8, m = 16 by default: S_B, S_C ~ N(0, 1/n); W_Delta ~ N(0, 0.09/n); b ~ N(0,1);
/// alpha ~ U(0.1, 2); gate weights ~ N(0, 1/n).
inline SsmParams random_ssm(std::uint64_t seed, int n = 8, int m = 16) {
  Rng rng(seed, {7});
  SsmParams p;
  p.alpha.resize(n);
  rng.fill_uniform(p.alpha, 0.1, 2.0);
  p.W_delta.resize(n, n);
  rng.fill_normal(p.W_delta, std::sqrt(0.09 / n));
  p.b_delta.resize(n);
  rng.fill_normal(p.b_delta, 1.0);
  p.S_B.resize(m, n);
  p.S_C.resize(m, n);
  rng.fill_normal(p.S_B, 1.0 / std::sqrt(n));
  rng.fill_normal(p.S_C, 1.0 / std::sqrt(n));
  p.W_g.resize(n, n);
  rng.fill_normal(p.W_g, 1.0 / std::sqrt(n));
  p.b_g = Vec::Zero(n);
  return p;
}

}  // namespace tokdyn::testing
