// The model registry's descriptor of the real Mamba-2 block: its knobs, how it is built from them, its taps and
// cost. It registers itself (runtime/model_registry.hpp); nothing else names it.
#include <fmt/format.h>
#include <memory>

#include "tokdyn/core/error.hpp"
#include "tokdyn/models/mamba2/checkpoint.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "tokdyn/runtime/prompts.hpp"

namespace tokdyn {
namespace {


// ---- the real Mamba-2 block (The Attention Within §II-B), from a checkpoint ----
ModelInstance build_mamba2(const Params& P, RunContext& ctx) {
  using namespace mamba2;
  Model model = mamba2_model(P);
  const Config cfg = model.cfg;
  const std::optional<PromptTokens> prompts = prompt_tokens(P, P.get_string("checkpoint"));
  const int len = prompts ? prompts->len : static_cast<int>(P.get_int("tokens"));
  const std::string layers = P.get_string("layers");
  const long layer = P.get_int("layer");
  if (layers == "single" && layer >= cfg.n_layer)
    throw InputError(fmt::format("parameter 'layer': the model has {} layers (0..{}), got {}", cfg.n_layer, cfg.n_layer - 1, layer));
  const Update update = P.get_string("update") == "sphere" ? Update::Sphere : Update::Residual;
  // Token ids as run 0 of the Mamba-2 presets' (given, or iid uniform in [0, vocab), stream (seed, 0)).
  std::string drawn_from;
  int runs = 1;  // the rows of a given token_ids file (Python's hidden_states of a batch)
  const std::vector<std::int64_t> ids =
      model_token_ids(P, model.embedding.rows(), cfg.vocab_size, runs, len, ctx, drawn_from, prompts ? &*prompts : nullptr);
  const MatF X0 = embed(model, ids, update);
  ModelInstance S;
  S.notes["model"] = model.source;
  S.notes["synthetic_model"] = !model.generated_by.empty();
  S.notes["model_config"] = cfg.to_json();
  auto shared = share_layers(model);
  std::shared_ptr<const LayerSchedule> sched =
      layers == "single" ? std::make_shared<const ListSchedule<Layer>>(shared, std::vector<long>{layer})
                         : std::make_shared<const ListSchedule<Layer>>(shared);
  const float tau = static_cast<float>(P.get_double("tau"));
  Switches sw;  // the ablation switches (The Attention Within §VI); all on: the reference block
  sw.gate = P.get_bool("gate");
  sw.silu_bc = P.get_bool("silu_bc");
  sw.silu_x = P.get_bool("silu_x");
  sw.conv = P.get_bool("conv");
  sw.d_skip = P.get_bool("d_skip");
  sw.mixer_norm = P.get_bool("mixer_norm");
  auto map = std::make_unique<BlockMap>(cfg, sw, sched, update, tau);
  const BlockMap* bm = map.get();
  S.map = std::move(map);
  S.Z0 = Batch{X0.cast<double>(), runs, len};
  // The block's own state is fp32; its linearisation is exact forward mode in double. The
  // trajectory is advanced by the same double step (step_double_tangents: the value of the one run
  // computed once, the k tangents sharing it), so the cocycle is the Jacobian of exactly the map
  // that moves the state; the fp32 trajectory differs from it by fp32 round-off per layer.
  S.step = [bm](long l, const Batch& Z, const Batch&, const Tokens& V, Batch& Znext, Tokens& W) {
    Tokens Y;
    bm->step_double_tangents(l, Z, V, Y, W);
    Znext = Batch{std::move(Y), Z.runs, Z.len};
  };
  S.notes["schedule"] = layers == "single" ? fmt::format("single: block {} at every depth step", layer)
                                           : fmt::format("cycle: depth step l uses block (l-1) mod {}", cfg.n_layer);
  S.notes["update"] = update == Update::Sphere ? fmt::format("sphere: z <- pi(z + {} mixer(RMSNorm(z)))", tau)
                                               : "residual: x <- x + mixer(RMSNorm(x))";
  S.notes["initial_tokens"] = fmt::format("embedding rows of token ids {}; token_ids.npy", drawn_from);
  S.notes["tangent_step"] =
      "value and tangents by BlockMap::step_double_tangents (double forward mode): the value once, the k tangents sharing it";
  return S;
}

std::vector<ModelDescriptor> mamba2_descriptors() {
  ModelDescriptor desc{
      "mamba2",
      "The Attention Within §II-B: the real Mamba-2 block from a checkpoint (fp32 state, exact double forward-mode tangents)",
      {p_double("tau", 1.0, "tau of update=sphere", 0.0, 1e6, true).when("update", {"sphere"}),
       p_string("checkpoint", "", "checkpoint directory (config.json + model.safetensors); empty: a freshly initialised model")
           .directory(),
       p_string("size", "130m", "size of the freshly initialised model when no checkpoint is given", mamba2::Config::sizes())
           .when("checkpoint", {""}),
       p_int("model_seed", 0, "seed of the freshly initialised model (= tokdyn make-checkpoint --seed)", 0, kMaxSeed)
           .when("checkpoint", {""}),
       p_string("layers", "cycle", "the model's blocks cycled, or one block repeated", {"cycle", "single"}),
       p_int("layer", 0, "the block of layers=single", 0, 1000000).when("layers", {"single"}),
       p_string("update", "residual", "residual: the true residual stream; sphere: z <- pi(z + tau mixer(RMSNorm z))",
                {"residual", "sphere"}),
       p_int("vocab", 0, "token ids drawn from [0, vocab); 0: the model's real vocabulary (50277 for the released models)", 0,
             16777216)
           .when("token_ids", {""})
           .when("prompt", {""})
           .when("prompts", {""}),
       p_string("token_ids", "", "a .npy file of int token ids [runs, tokens] to use instead of random ids")
           .file()
           .when("prompt", {""})
           .when("prompts", {""}),
       p_bool("gate", true, "the output gate (off: v = y)"),
       p_bool("silu_bc", true, "SiLU on the B and C channels"),
       p_bool("silu_x", true, "SiLU on the x channels after the conv"),
       p_bool("conv", true, "causal depthwise conv (off: identity conv)"),
       p_bool("d_skip", true, "the D x skip term"),
       p_bool("mixer_norm", true, "the gated RMSNorm")},
      {"q", "mixing"},
      build_mamba2,
      [](const Params& P) {
        // From the checkpoint's config.json (not its weights), or the named size; a missing config
        // is sized as mamba2-130m here and reported by the loader.
        const mamba2::Config c = mamba2_config(P).value_or(mamba2::Config::named("130m"));
        const double d = c.d_model, di = c.d_inner(), dip = c.d_in_proj();
        const double T = static_cast<double>(P.get_int("tokens"));
        return ModelCost{d, 4.0 * (d * dip + di * d) + 8.0 * T * di, 4.0 * c.n_layer * (dip * d + di * d)};
      },
      mamba2::Config::sizes(),
      [](const std::string& size, std::uint64_t seed, const std::filesystem::path& dir) {
        mamba2::save(mamba2::init_model(mamba2::Config::named(size), seed), dir);
      },
      {"layers", "layer"},
      {token_ids_written()}};
  for (ParamSpec& q : prompt_knobs()) desc.knobs.push_back(std::move(q));
  return {desc};
}

__attribute__((init_priority(1000))) const ModelRegistration reg_mamba2{30, mamba2_descriptors};

}  // namespace
}  // namespace tokdyn
