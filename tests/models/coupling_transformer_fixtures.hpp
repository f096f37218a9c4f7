#pragma once
// Shared by the coupling Transformer tests (test_coupling_transformer_*.cpp): a random stack with
// non-trivial gains and LayerNorm biases, a random matrix, and every option combination of a block.
#include <cstdint>
#include <vector>

#include "tokdyn/models/transformer/transformer.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn::tf::coupling_fixtures {

inline Transformer make(Config c, int L, std::uint64_t seed, double sigma_w = 1.0, double sigma_b = 0.3, Tying tying = Tying::Untied) {
  std::vector<LayerWeights> ws;
  for (int r = 0; r < L; ++r) {
    LayerWeights W = random_weights(c, r, sigma_w, sigma_b, seed);
    // Non-trivial gains and LayerNorm biases, so every derivative term is exercised.
    Rng g(seed, {99, static_cast<std::uint64_t>(r)});
    for (Vec* v : {&W.g_attn, &W.g_mlp}) {
      g.fill_uniform(*v, 0.5, 1.5);
    }
    for (Vec* v : {&W.beta_attn, &W.beta_mlp}) g.fill_normal(*v, 0.2);
    ws.push_back(W);
  }
  return Transformer(c, ws, tying);
}

inline Mat random_mat(int r, int c, std::uint64_t seed, double s = 1.0) {
  Mat M(r, c);
  Rng(seed, {7}).fill_normal(M, s);
  return M;
}

struct Combo {
  Norm norm;
  Placement pl;
  Activation phi;
  Mask mask;
  Positional pos;
};

inline std::vector<Combo> all_combos() {
  std::vector<Combo> out;
  for (Norm n : {Norm::RMS, Norm::Layer, Norm::None})
    for (Placement p : {Placement::PreLN, Placement::PostLN})
      for (Activation a : {Activation::GeluExact, Activation::GeluTanh, Activation::Silu, Activation::Tanh})
        for (Mask m : {Mask::Causal, Mask::Bidirectional, Mask::BlockLocal, Mask::Sliding, Mask::Leaky})
          for (Positional q : {Positional::None, Positional::Rope, Positional::Alibi}) out.push_back({n, p, a, m, q});
  return out;
}

inline Config config_of(const Combo& k, int d = 4, int d_ff = 6) {
  Config c;
  c.d = d;
  c.d_ff = d_ff;
  c.norm = k.norm;
  c.placement = k.pl;
  c.phi = k.phi;
  c.mask = k.mask;
  c.pos = k.pos;
  c.block = 2;
  c.window = 2;
  c.eps_leak = 0.05;
  c.temperature = 0.7;
  c.eps = 1e-5;
  return c;
}

}  // namespace tokdyn::tf::coupling_fixtures
