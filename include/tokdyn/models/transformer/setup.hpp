#pragma once
// The Transformer presets' shared architecture parameters (coupling paper, block (4)): one schema
// and one way from validated Params to a Config, its weights and the model, for every preset that
// runs a Transformer stack (coupling-*, depth-spectra with model = transformer).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/models/transformer/transformer.hpp"

namespace tokdyn::tf {

/// The architecture keys (d, d_ff, tokens, depth, sigma_w, sigma_b, norm, eps, placement, activation,
/// mask, block, window, eps_leak, positional, temperature, heads, tying, loop, tf_weights, seed) with
/// these defaults: the model registry's names (models transformer and hierarchical), so a preset
/// and the registry speak of the same knob by the same name.
std::vector<ParamSpec> transformer_params(long d, long d_ff, long tokens, long depth, double sigma_b);
/// The Transformer's knobs as the model registry declares them (models transformer and
/// hierarchical): transformer_params without d, heads and seed (shared with other models), tokens
/// and depth (the registry's own, shared by every model).
std::vector<ParamSpec> transformer_registry_knobs();
/// The names the Transformer presets used before they spoke the registry's vocabulary, {old, new}:
/// T -> tokens, L -> depth, weights -> tf_weights, P -> block, each where the new name is a key of
/// `params` and the old one is not (a preset whose own knob is called `weights` keeps it). A preset
/// declares them (Experiment::renamed, with_renamed) so that an old name is refused with the new one.
std::vector<std::pair<std::string, std::string>> renamed_keys(const std::vector<ParamSpec>& params);
/// `e` with renamed_keys(e.params) added to its renamed keys.
Experiment with_renamed_keys(Experiment e);
/// Every key of transformer_params.
std::vector<std::string> transformer_keys();
/// Adds the condition "applies only when `key` is one of `values`" to the parameters named `keys`.
void applies_only_when(std::vector<ParamSpec>& ps, const std::vector<std::string>& keys, const std::string& key,
                       const std::vector<std::string>& values);
/// The Config of validated Params (InputError for combinations the schema cannot express).
/// With a weights file (tf_weights), d and d_ff must be the file's (layers.0.W_Q is d x d,
/// layers.0.W_1 d_ff x d): InputError naming both otherwise.
Config config_from(const Params& p);
/// Seeded random weights (one set per untied layer, one tied, `loop` looped) or the tf_weights file:
/// exactly `depth` weight sets for tying = untied, exactly one for tied, the loop's period for looped.
std::vector<LayerWeights> weights_from(const Params& p, const Config& c, std::uint64_t seed_offset = 0);
/// The stack; the model's warnings (ReLU is not C^1) go to the run's warnings.
Transformer transformer_from(const Params& p, RunContext& ctx, std::uint64_t seed_offset = 0);
/// The reference's starting point x*(0): Gaussian entries of unit variance, stream (seed, 0xa11ce).
Vec reference_start(const Config& c, std::uint64_t seed);

}  // namespace tokdyn::tf
