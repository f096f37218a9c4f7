#include "tokdyn/core/rng.hpp"

#include <cmath>

namespace tokdyn {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Rng::Rng(std::uint64_t seed, std::initializer_list<std::uint64_t> ids) {
  std::uint64_t st = seed;
  std::uint64_t h = splitmix64(st);
  for (std::uint64_t id : ids) {
    std::uint64_t mix = h ^ (id + 0x632be59bd9b4e019ULL);
    h = splitmix64(mix);
    st ^= h;
  }
  std::uint64_t st2 = h ^ seed;
  for (auto& s : s_) s = splitmix64(st2);
}

static inline std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

std::uint64_t Rng::next_u64() {  // xoshiro256++
  const std::uint64_t result = rotl(s_[0] + s_[3], 23) + s_[0];
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u, v, s;
  do {
    u = 2.0 * uniform() - 1.0;
    v = 2.0 * uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double f = std::sqrt(-2.0 * std::log(s) / s);
  spare_ = v * f;
  has_spare_ = true;
  return u * f;
}

namespace {
// GCC's and Clang's 128-bit integer: an extension, not ISO C++ (__extension__ keeps -Wpedantic quiet).
__extension__ typedef unsigned __int128 u128;
}  // namespace

std::uint64_t Rng::below(std::uint64_t n) {
  // Lemire's nearly divisionless method with rejection: exact uniformity.
  u128 m = static_cast<u128>(next_u64()) * n;
  std::uint64_t l = static_cast<std::uint64_t>(m);
  if (l < n) {
    const std::uint64_t t = (0 - n) % n;
    while (l < t) {
      m = static_cast<u128>(next_u64()) * n;
      l = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

void Rng::fill_normal(Mat& M, double s) {
  for (Eigen::Index i = 0; i < M.size(); ++i) M.data()[i] = s * normal();
}
void Rng::fill_uniform(Mat& M, double lo, double hi) {
  for (Eigen::Index i = 0; i < M.size(); ++i) M.data()[i] = uniform(lo, hi);
}
void Rng::fill_normal(Vec& v, double s) {
  for (Eigen::Index i = 0; i < v.size(); ++i) v[i] = s * normal();
}
void Rng::fill_uniform(Vec& v, double lo, double hi) {
  for (Eigen::Index i = 0; i < v.size(); ++i) v[i] = uniform(lo, hi);
}

Tokens Rng::sphere_tokens(int n, int d) {
  Tokens Z(n, d);
  for (int i = 0; i < n; ++i) {
    double nrm = 0.0;
    do {
      for (int j = 0; j < d; ++j) Z(i, j) = normal();
      nrm = Z.row(i).norm();
    } while (nrm < 1e-300);
    Z.row(i) /= nrm;
  }
  return Z;
}

}  // namespace tokdyn
