#pragma once
// Seeded random numbers whose streams never depend on thread count or scheduling: every random
// object is drawn from a stream named by (seed, ids...), e.g. (seed, run) or (seed, layer).
// Generator: xoshiro256++ seeded through splitmix64; normals by the polar method.
#include <cstdint>
#include <initializer_list>

#include "tokdyn/core/tokens.hpp"

namespace tokdyn {

/// splitmix64 mixing step (also used to derive stream seeds).
std::uint64_t splitmix64(std::uint64_t& state);

class Rng {
 public:
  /// A stream named by a base seed and any number of integer ids.
  explicit Rng(std::uint64_t seed, std::initializer_list<std::uint64_t> ids = {});

  std::uint64_t next_u64();
  /// Uniform on [0, 1) with 53 random bits.
  double uniform();
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Standard normal N(0, 1).
  double normal();
  /// Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n);

  /// Fill with iid N(0, s^2) / U(lo, hi).
  void fill_normal(Mat& M, double s = 1.0);
  void fill_uniform(Mat& M, double lo, double hi);
  void fill_normal(Vec& v, double s = 1.0);
  void fill_uniform(Vec& v, double lo, double hi);
  /// n x d tokens uniform on the sphere S^{d-1} (normalised Gaussians).
  Tokens sphere_tokens(int n, int d);

 private:
  std::uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace tokdyn
