#include "tokdyn/models/ssm/random.hpp"

#include <cmath>
#include <stdexcept>

namespace tokdyn {

SsmParams draw_ssm_layer(const SsmRandomSpec& spec, Rng& rng) {
  const int n = spec.n, m = spec.m;
  SsmParams p;
  p.alpha.resize(n);
  p.b_delta.resize(n);
  for (int mu = 0; mu < n; ++mu) p.alpha[mu] = rng.uniform(1.0, 16.0);  // exp(ln U(1,16))
  for (int mu = 0; mu < n; ++mu) {
    double dt = std::exp(rng.uniform(std::log(1e-3), std::log(1e-1)));
    dt = std::max(dt, 1e-4);
    p.b_delta[mu] = dt + std::log(-std::expm1(-dt));  // softplus(b) = dt
  }
  p.W_delta.resize(n, n);
  p.S_B.resize(m, n);
  p.S_C.resize(m, n);
  if (spec.weights == "mamba2") {
    rng.fill_uniform(p.W_delta, -1.0, 1.0);
    rng.fill_uniform(p.S_B, -1.0, 1.0);
    rng.fill_uniform(p.S_C, -1.0, 1.0);
  } else if (spec.weights == "gaussian") {
    rng.fill_normal(p.W_delta, spec.sigma);
    rng.fill_normal(p.S_B, spec.sigma);
    rng.fill_normal(p.S_C, spec.sigma);
  } else {
    throw std::invalid_argument("draw_ssm_layer: expected weights mamba2 or gaussian, got '" + spec.weights + "'");
  }
  return p;
}

}  // namespace tokdyn
