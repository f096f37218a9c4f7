#pragma once
// The Transformer presets' shared architecture parameters (coupling paper, block (4)): one schema
// and one way from validated Params to a Config, its weights and the model, for every preset that
// runs a Transformer stack (coupling-*, depth-spectra with model = transformer).
#include <cstdint>
#include <vector>

#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/models/transformer/transformer.hpp"

namespace tokdyn::tf {

/// The architecture keys (d, d_ff, T, L, sigma_w, sigma_b, norm, eps, placement, activation, mask,
/// P, window, eps_leak, positional, temperature, tying, loop, weights, seed) with these defaults.
std::vector<ParamSpec> transformer_params(long d, long d_ff, long T, long L, double sigma_b);
/// The Transformer's knobs as the model registry declares them (models transformer and
/// hierarchical): transformer_params without d, heads and seed (shared with other models), T and L
/// (the registry's tokens and depth), the weights file named tf_weights.
std::vector<ParamSpec> transformer_registry_knobs();
/// Every key of transformer_params.
std::vector<std::string> transformer_keys();
/// Adds the condition "applies only when `key` is one of `values`" to the parameters named `keys`.
void applies_only_when(std::vector<ParamSpec>& ps, const std::vector<std::string>& keys, const std::string& key,
                       const std::vector<std::string>& values);
/// The Config of validated Params (InputError for combinations the schema cannot express).
/// With a weights file, d and d_ff must be the file's (layers.0.W_Q is d x d, layers.0.W_1 d_ff x d):
/// InputError naming both otherwise. weights_key: the preset's name of the file parameter (messages).
Config config_from(const Params& p, const std::string& weights_key = "weights");
/// Seeded random weights (one set per untied layer, one tied, `loop` looped) or the `weights` file:
/// exactly L weight sets for tying = untied, exactly one for tied, the loop's period for looped.
std::vector<LayerWeights> weights_from(const Params& p, const Config& c, std::uint64_t seed_offset = 0,
                                       const std::string& weights_key = "weights");
/// The stack; the model's warnings (ReLU is not C^1) go to the run's warnings.
Transformer transformer_from(const Params& p, RunContext& ctx, std::uint64_t seed_offset = 0,
                             const std::string& weights_key = "weights");
/// The reference's starting point x*(0): Gaussian entries of unit variance, stream (seed, 0xa11ce).
Vec reference_start(const Config& c, std::uint64_t seed);

}  // namespace tokdyn::tf
