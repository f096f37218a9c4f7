#include "tokdyn/analysis/ssm_lemma_iv1.hpp"

#include <algorithm>
#include <boost/math/quadrature/gauss_kronrod.hpp>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <vector>

#include "tokdyn/core/nn.hpp"
#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/core/parallel.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn {

// =============================================================================================
// Lemma IV.1

SiluBiasEstimate silu_bias_monte_carlo(int m, int n, const Vec& zi, const Vec& zj, long draws, RandomEntries dist,
                                       double scale, std::uint64_t seed) {
  if (zi.size() != n || zj.size() != n || draws < 2) throw std::invalid_argument("silu_bias_monte_carlo: bad sizes");
  constexpr long kChunk = 1000;
  const long chunks = (draws + kChunk - 1) / kChunk;
  std::vector<double> s1(static_cast<std::size_t>(chunks)), s2(s1.size()), t1(s1.size()), t2(s1.size());
  const double half = std::sqrt(3.0) * scale;
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic)
  for (long c = 0; c < chunks; ++c) try {
    Rng rng(seed, {0x1e41, static_cast<std::uint64_t>(c)});  // one stream per chunk: thread-count independent
    Mat SB(m, n), SC(m, n);
    double a1 = 0, a2 = 0, b1 = 0, b2 = 0;
    const long end = std::min(draws, (c + 1) * kChunk);
    for (long d = c * kChunk; d < end; ++d) {
      if (dist == RandomEntries::Normal) {
        rng.fill_normal(SB, scale);
        rng.fill_normal(SC, scale);
      } else {
        rng.fill_uniform(SB, -half, half);
        rng.fill_uniform(SC, -half, half);
      }
      const Vec cz = SC * zi, bz = SB * zj;
      const double bil = cz.dot(bz);  // z_i^T S_C^T S_B z_j
      double sil = 0.0;               // silu(S_C z_i)^T silu(S_B z_j)
      for (int k = 0; k < m; ++k) sil += nn::silu(cz[k]) * nn::silu(bz[k]);
      a1 += bil;
      a2 += bil * bil;
      b1 += sil;
      b2 += sil * sil;
    }
    s1[static_cast<std::size_t>(c)] = a1;
    s2[static_cast<std::size_t>(c)] = a2;
    t1[static_cast<std::size_t>(c)] = b1;
    t2[static_cast<std::size_t>(c)] = b2;
  } catch (...) {
    errors.capture();
  }
  errors.rethrow();
  double A1 = 0, A2 = 0, B1 = 0, B2 = 0;
  for (long c = 0; c < chunks; ++c) {
    A1 += s1[static_cast<std::size_t>(c)];
    A2 += s2[static_cast<std::size_t>(c)];
    B1 += t1[static_cast<std::size_t>(c)];
    B2 += t2[static_cast<std::size_t>(c)];
  }
  const double N = static_cast<double>(draws);
  SiluBiasEstimate e;
  e.draws = draws;
  e.bilinear_mean = A1 / N;
  e.silu_mean = B1 / N;
  const double va = std::max(0.0, (A2 - N * e.bilinear_mean * e.bilinear_mean) / (N - 1.0));
  const double vb = std::max(0.0, (B2 - N * e.silu_mean * e.silu_mean) / (N - 1.0));
  e.bilinear_se = std::sqrt(va / N);
  e.silu_se = std::sqrt(vb / N);
  return e;
}

std::pair<double, double> silu_gaussian_moments(double s) {
  if (!(s > 0.0)) throw std::invalid_argument("silu_gaussian_moments: s must be > 0");
  using boost::math::quadrature::gauss_kronrod;
  const double c = 1.0 / (s * std::sqrt(2.0 * std::numbers::pi));
  auto pdf = [&](double x) { return c * std::exp(-0.5 * x * x / (s * s)); };
  const double L = 40.0 * s;
  const double m1 = gauss_kronrod<double, 61>::integrate([&](double x) { return nn::silu(x) * pdf(x); }, -L, L, 15, 1e-15);
  const double m2 = gauss_kronrod<double, 61>::integrate([&](double x) { return nn::silu(x) * nn::silu(x) * pdf(x); }, -L, L, 15, 1e-15);
  return {m1, m2};
}

}  // namespace tokdyn
