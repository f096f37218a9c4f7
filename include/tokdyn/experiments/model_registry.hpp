#pragma once
// The model registry: one descriptor per depth model (SSM, RoPE attention, Mamba-2, Transformer),
// holding its knobs, how to build its LayerMap and start state, its taps and its cost. Analyses
// over "any model" (depth-spectra; next, the Python package and sweeps) take models from here and
// have no per-model branch; `tokdyn models` lists them.
//
// Adding a model: its model file (include/tokdyn/models/X.hpp, src/models/X.cpp) and one
// descriptor in src/experiments/model_registry.cpp.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokdyn/analysis/depth_spectra.hpp"
#include "tokdyn/dynamics.hpp"
#include "tokdyn/experiment.hpp"

namespace tokdyn {

/// A model built from its knobs: the depth map, one run of start tokens, and what else it offers.
struct ModelInstance {
  std::unique_ptr<LayerMap> map;
  Batch Z0;           ///< one run of `tokens` tokens
  TangentStep step;   ///< value and tangents together (empty: apply_and_jvp(*map))
  /// The "attention" tap: the attention weights of layer k at the state entering it,
  /// [heads, tokens, tokens] row-major (empty for models without attention).
  std::function<std::vector<double>(long k, const Tokens& state, int& heads)> attention;
  nlohmann::json notes = nlohmann::json::object();  ///< facts for manifest.json
};

/// A rough size of one layer of the model, for resource estimates before anything is built.
struct ModelCost {
  double d = 0;             ///< token dimension
  double per_row = 0;       ///< flops per token row per layer (value or one tangent)
  double weight_bytes = 0;  ///< weights held at once
};

struct ModelDescriptor {
  std::string name;         ///< "ssm", "rope", "mamba2", "transformer"
  std::string description;  ///< one line: the paper's model and equation
  /// Its own knobs. A key two models share (d, heads, tau) has the same type, default and range in
  /// both; the analyses tag each knob with the models it applies to.
  std::vector<ParamSpec> knobs;
  std::vector<std::string> taps;  ///< named internal quantities it exposes besides the state
  /// Builds the model and its start state. Reads `tokens` and `seed` besides its knobs; may write
  /// the inputs it draws or reads (token ids, weights) into ctx.dir.
  std::function<ModelInstance(const Params&, RunContext&)> build;
  std::function<ModelCost(const Params&)> cost;
  bool has_tap(const std::string& t) const;
};

/// Every registered model, in a fixed order.
const std::vector<ModelDescriptor>& model_registry();
/// The descriptor of `name`; std::invalid_argument naming the registered models otherwise.
const ModelDescriptor& model_descriptor(const std::string& name);
/// The names, in registry order.
std::vector<std::string> model_names();
/// The names of the models that expose tap `t`.
std::vector<std::string> models_with_tap(const std::string& t);

/// The union of the models' knobs, for a preset with a `model` parameter: each key once (the first
/// model's spec; its help joined as "ssm: ...; mamba2: ..."), applying only when `model` is one of
/// the models that declare it.
std::vector<ParamSpec> model_knobs(const std::string& model_key = "model");

}  // namespace tokdyn
