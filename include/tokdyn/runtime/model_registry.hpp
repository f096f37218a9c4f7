#pragma once
// The model registry: one descriptor per depth model (SSM, RoPE attention, Mamba-2, Transformer),
// holding its knobs, how to build its LayerMap and start state, its taps and its cost. Analyses
// over "any model" (depth-spectra; next, the Python package and sweeps) take models from here and
// have no per-model branch; `tokdyn models` lists them.
//
// Adding a model: its folder src/models/<family>/ (and include/tokdyn/models/<family>/) with the
// map, its JVP, its readers and descriptor.cpp, which registers the descriptor (ModelRegistration).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokdyn/analysis/depth_spectra.hpp"
#include "tokdyn/engine/dynamics.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/models/ssm/random.hpp"
#include "tokdyn/engine/schedule.hpp"

namespace tokdyn {

struct PromptTokens;

/// A model built from its knobs: the depth map, one run of start tokens, and what else it offers.
struct ModelInstance {
  std::unique_ptr<LayerMap> map;
  Batch Z0;           ///< one run of `tokens` tokens
  TangentStep step;   ///< value and tangents together (empty: apply_and_jvp(*map))
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
  /// The named internal quantities its map exposes besides the state (LayerMap::tap_names; a test
  /// holds the two equal).
  std::vector<std::string> taps;
  /// Builds the model and its start state. Reads `tokens` and `seed` besides its knobs; may write
  /// the inputs it draws or reads (token ids, weights) into ctx.dir.
  std::function<ModelInstance(const Params&, RunContext&)> build;
  std::function<ModelCost(const Params&)> cost;
  /// Models that read weight files: the sizes a fresh checkpoint can have, and how to write one
  /// (`tokdyn make-checkpoint --model NAME`). Empty for models without files.
  std::vector<std::string> checkpoint_sizes;
  std::function<void(const std::string& size, std::uint64_t seed, const std::filesystem::path& dir)> make_checkpoint;
  /// The knobs that decide which weights act at each depth step (Python's
  /// Model.trajectory(schedule=...) and SCHEDULE_KNOBS).
  std::vector<std::string> schedule_knobs;
  /// The files its build writes into the run's folder, declared (token_ids.npy for the models
  /// that embed token ids). A preset with a `model` knob declares them through model_arrays.
  std::vector<ArrayDecl> writes;
  bool has_tap(const std::string& t) const;
};

/// Every registered model, in a fixed order.
const std::vector<ModelDescriptor>& model_registry();
/// The descriptor of `name`; std::invalid_argument naming the registered models otherwise.
const ModelDescriptor& model_descriptor(const std::string& name);
/// Registers model descriptors at static-initialisation time, from the family's own folder
/// (src/models/<family>/descriptor.cpp):
/// `__attribute__((init_priority(1000))) const ModelRegistration reg_<family>{order, make};`
/// (before the default-priority presets, which read the registry while they are initialised).
/// The registry lists models by (order, name): the papers' models 10..50 (ssm, rope, mamba2,
/// transformer, hierarchical), the decoder families 100. `make` is called once, when the registry
/// is first used.
struct ModelRegistration {
  ModelRegistration(int order, std::function<std::vector<ModelDescriptor>()> make);
};
/// Knobs two models declare with different types: each is a registry error (a test keeps the
/// list empty; model_knobs keeps the first model's spec). One line per conflict.
std::vector<std::string> model_knob_conflicts();
/// The declaration of token_ids.npy, the file every model with token ids writes (model_token_ids).
inline ArrayDecl token_ids_written() {
  return {"token_ids.npy", "int64 [runs, tokens]: the token ids embedded as the start state"};
}
/// The names, in registry order.
std::vector<std::string> model_names();
/// Every file the models' builds write (ModelDescriptor::writes), each once, written "when
/// <model_key> = <the models that write it>" (among `only`; empty: every model).
std::vector<ArrayDecl> model_arrays(const std::string& model_key = "model", const std::vector<std::string>& only = {});
/// The names of the models that expose tap `t`.
std::vector<std::string> models_with_tap(const std::string& t);
/// The names of the models that can write a fresh checkpoint.
std::vector<std::string> models_with_checkpoints();

/// Builds model `name` from P (the descriptor's build), after refusing a knob given explicitly
/// whose own condition in this model does not hold (e.g. Mamba-2's tau with update=residual: a
/// condition the union of model_knobs cannot state for a key several models share).
ModelInstance build_model(const std::string& name, const Params& P, RunContext& ctx);

/// The union of the models' knobs, for a preset with a `model` parameter: each key once (the first
/// model's spec; its help joined as "ssm: ...; mamba2: ..."), applying only when `model` is one of
/// the models that declare it. `only`: the union over these models alone (empty: every model).
std::vector<ParamSpec> model_knobs(const std::string& model_key = "model", const std::vector<std::string>& only = {});

// ---- The parts the descriptors build from, shared with presets that set up several runs or
// variants themselves (ssm-random-silu, rope-flow, the mamba2 presets): the same knobs, the same
// draws, written once here. ----

/// Model `model`'s knob `key` as registered (type, range, conditions), with a preset's own default
/// and, when given, its own help.
ParamSpec model_knob(const std::string& model, const std::string& key);
ParamSpec model_knob(const std::string& model, const std::string& key, ParamValue def, std::string help = {});

/// Start tokens of `runs` runs of `len` tokens uniform on S^{d-1}: run r from stream (seed, r);
/// `hemisphere` folds each to x_1 >= 0.
Batch sphere_start(std::uint64_t seed, int runs, int len, int d, bool hemisphere = false);

/// The SSM's random layers from knobs n, m, weights, sigma and seed: layer k's weights drawn from
/// stream (seed ^ 0x5eedf00d, block), redrawn every `redraw` layers.
std::shared_ptr<IidSchedule<SsmParams>> ssm_random_schedule(const Params& P, long redraw);
SsmRandomSpec ssm_random_spec(const Params& P);

/// RoPE attention from knobs d, beta, rope, causal, heads, freqs, positions for `tokens` tokens,
/// validated (messages name `who`).
rope::AttentionParams rope_attention_params(const Params& P, int tokens, const std::string& who);

/// Mamba-2: the checkpoint's model (knob checkpoint), or a freshly initialised one of knobs size
/// and model_seed (what `tokdyn make-checkpoint` writes).
mamba2::Model mamba2_model(const Params& P);
/// The config of the Mamba-2 model P names, without reading its weights (for estimates): the
/// checkpoint's config.json, or the named size; nullopt when the checkpoint has no config.json
/// (the loader reports what is missing).
std::optional<mamba2::Config> mamba2_config(const Params& P);
/// Token ids [runs, len]: read from knob token_ids (a .npy file) when given, otherwise iid uniform
/// in [0, vocab) with run r from stream (seed, r) (vocab = 0: the model's real vocabulary). Written
/// to ctx.dir/token_ids.npy. `drawn_from` says where they came from, for the manifest.
/// With `prompts` (runtime/prompts.hpp) the ids are the prompts' (runs and len must be theirs).
std::vector<std::int64_t> mamba2_token_ids(const Params& P, const mamba2::Model& m, int runs, int len, RunContext& ctx,
                                           std::string& drawn_from, const PromptTokens* prompts = nullptr);
/// The same for any model with an embedding of `rows` rows and a real vocabulary `vocab`: runs
/// is the number of rows of the token_ids file when one is given (runs_in: otherwise), and is
/// returned through `runs`. The ids are checked against [0, rows).
std::vector<std::int64_t> model_token_ids(const Params& P, long rows, long vocab, int& runs, int len, RunContext& ctx,
                                          std::string& drawn_from, const PromptTokens* prompts = nullptr);

}  // namespace tokdyn
