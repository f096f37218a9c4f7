// The decoder families (GPT-2, GPT-NeoX / Pythia, Llama; models/decoder/) as registry models:
// one descriptor per registered family, made here from the family's own file, so that a new
// family is its file in src/models/decoder/ and its tests.
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "tokdyn/runtime/prompts.hpp"
#include "tokdyn/models/decoder/checkpoint.hpp"
#include "tokdyn/models/decoder/decoder.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn {
namespace {

using decoder::Family;

decoder::Arch named_arch(const Family& f, const std::string& size) {
  return f.parse_config(f.named_config(size), fmt::format("{} size {}", f.name, size));
}

/// The arch P names, without reading weights: the checkpoint's config.json or the named size.
decoder::Arch arch_of(const Family& f, const Params& P) {
  const std::string ck = P.get_string("checkpoint");
  return ck.empty() ? named_arch(f, P.get_string("size")) : decoder::read_config(f, ck);
}

/// W_Q and W_K replaced (fresh N(0, init_std^2)) or perturbed (+ sigma rms(W) N(0, 1)), from
/// streams (seed, 0x9c, layer, row): the rows of the query and key heads of layers from .. last.
void replace_qk(decoder::Model& m, const std::string& how, double sigma, std::uint64_t seed, std::size_t from) {
  const decoder::Arch& a = m.arch;
  const long rows = a.q_rows() + a.kv_rows();
  for (std::size_t l = from; l < m.layers.size(); ++l) {
    auto W = m.layers[l].qkv_w.topRows(rows);
    const double rms = std::sqrt(W.template cast<double>().squaredNorm() / static_cast<double>(W.size()));
    for (long r = 0; r < rows; ++r) {
      Rng rng(seed, {0x9c, l, static_cast<std::uint64_t>(r)});
      for (long c = 0; c < W.cols(); ++c) {
        const double z = rng.normal();
        W(r, c) = how == "random" ? static_cast<float>(a.init_std * z) : static_cast<float>(W(r, c) + sigma * rms * z);
      }
    }
  }
}

ModelInstance build_decoder(const Family& f, const Params& P, RunContext& ctx) {
  using namespace decoder;
  const std::string ck = P.get_string("checkpoint");
  // Prompts (encoded by the checkpoint's or the given tokenizer) set the tokens and the runs.
  const std::optional<PromptTokens> prompts = prompt_tokens(P, ck);
  const int len = prompts ? prompts->len : static_cast<int>(P.get_int("tokens"));
  // The context first, from config.json alone (before any weight is read).
  const Arch pre = arch_of(f, P);
  if (len > pre.max_positions)
    throw InputError(prompts ? fmt::format("parameter '{}': {} tokens, longer than the model's context of {} positions (max "
                                           "positions in config.json)", P.get_string("prompt").empty() ? "prompts" : "prompt",
                                           len, pre.max_positions)
                             : fmt::format("parameter 'tokens' = {}: longer than the model's context of {} positions (max "
                                           "positions in config.json)", len, pre.max_positions));
  Model m = ck.empty() ? init_model(f, pre, static_cast<std::uint64_t>(P.get_int("model_seed"))) : load(f, ck);
  const Arch& a = m.arch;
  const std::string layers = P.get_string("layers");
  const long layer = P.get_int("layer");
  if (layers == "single" && layer >= a.n_layer)
    throw InputError(fmt::format("parameter 'layer': the model has {} layers (0..{}), got {}", a.n_layer, a.n_layer - 1, layer));
  const std::string qk = P.get_string("qk");
  const long qk_from = qk != "checkpoint" ? P.get_int("qk_from") : 0;
  if (qk_from >= a.n_layer)
    throw InputError(fmt::format("parameter 'qk_from' = {}: the model has {} layers (0..{})", qk_from, a.n_layer, a.n_layer - 1));
  if (qk != "checkpoint")
    replace_qk(m, qk, P.get_double("qk_sigma"), static_cast<std::uint64_t>(P.get_int("seed")), static_cast<std::size_t>(qk_from));
  Switches sw;
  sw.positions = P.get_bool("use_positions");
  const std::string sub = P.get_string("sublayers");
  sw.attention = sub != "mlp";
  sw.mlp = sub != "attention";
  sw.beta = P.get_double("beta");
  const Update update = P.get_string("update") == "sphere" ? Update::Sphere : Update::Residual;
  // One run (depth-spectra, Python), or the preset's `runs` (transformer-clustering); a token_ids
  // file gives its own number of rows.
  int runs = P.has("runs") ? static_cast<int>(P.get_int("runs")) : 1;
  std::string drawn_from;
  const std::vector<std::int64_t> ids =
      model_token_ids(P, m.wte.rows(), a.vocab_size, runs, len, ctx, drawn_from, prompts ? &*prompts : nullptr);
  const MatF X0 = embed(m, ids, len, sw, update);
  ModelInstance S;
  S.notes["model"] = m.source;
  S.notes["synthetic_model"] = !m.generated_by.empty();
  if (!m.generated_by.empty())
    S.notes["synthetic_model_note"] =
        ck.empty() ? fmt::format("no checkpoint given: a freshly initialised {} of size {} (seed {}), not trained", f.hf_class,
                                 P.get_string("size"), P.get_int("model_seed"))
                   : fmt::format("checkpoint written by {} (not trained)", m.generated_by);
  S.notes["model_config"] = a.config;
  S.notes["parameters"] = a.parameters();
  std::vector<std::shared_ptr<const Layer>> shared;
  for (Layer& L : m.layers) shared.push_back(std::make_shared<const Layer>(std::move(L)));
  auto sched = layers == "single" ? std::make_shared<const ListSchedule<Layer>>(shared, std::vector<long>{layer})
                                  : std::make_shared<const ListSchedule<Layer>>(shared);
  auto map = std::make_unique<DecoderMap>(a, sw, sched, update, P.get_double("tau"), len);
  const DecoderMap* dm = map.get();
  S.map = std::move(map);
  S.Z0 = Batch{X0.cast<double>(), runs, len};
  S.step = [dm](long l, const Batch& Z, const Batch&, const Tokens& V, Batch& Znext, Tokens& W) {
    Tokens Y;
    dm->step_double_tangents(l, Z, V, Y, W);
    Znext = Batch{std::move(Y), Z.runs, Z.len};
  };
  S.notes["schedule"] = layers == "single" ? fmt::format("single: layer {} at every depth step", layer)
                                           : fmt::format("cycle: depth step l uses layer (l-1) mod {}", a.n_layer);
  S.notes["update"] = update == Update::Sphere ? fmt::format("sphere: z <- pi(z + {} (F(z) - z))", P.get_double("tau"))
                                               : "residual: x <- F(x), the model's own residual stream";
  S.notes["ablations"] = fmt::format("positions {}, sublayers {}, beta {}, qk {}{}", sw.positions ? "on" : "off", sub, sw.beta, qk,
                                     qk != "checkpoint" ? fmt::format(" from layer {}", qk_from) : std::string());
  S.notes["initial_tokens"] = fmt::format("embedding rows of token ids {}{}; token_ids.npy", drawn_from,
                                          a.positions == Positions::Learned && sw.positions ? " plus position rows 0..tokens-1" : "");
  S.notes["tangent_step"] = "value and tangents by DecoderMap::step_double_tangents (double forward mode, weights widened)";
  return S;
}

ModelDescriptor descriptor_of(const Family& f) {
  ModelDescriptor d;
  d.name = f.name;
  d.description = f.description + " (" + f.hf_class + " checkpoints; fp32 state, exact double tangents)";
  d.knobs = {
      p_string("checkpoint", "", "checkpoint directory (config.json + model.safetensors); empty: a freshly initialised model")
          .directory(),
      p_string("size", f.sizes.front(), "size of the freshly initialised model when no checkpoint is given", f.sizes)
          .when("checkpoint", {""}),
      p_int("model_seed", 0, "seed of the freshly initialised model (= tokdyn make-checkpoint --seed)", 0, kMaxSeed)
          .when("checkpoint", {""}),
      p_string("layers", "cycle", "the model's blocks cycled, or one block repeated", {"cycle", "single"}),
      p_int("layer", 0, "the block of layers=single", 0, 1000000).when("layers", {"single"}),
      p_string("update", "residual", "residual: the true residual stream; sphere: z <- pi(z + tau (F(z) - z)), the layer's increment",
               {"residual", "sphere"}),
      p_double("tau", 1.0, "tau of update=sphere", 0.0, 1e6, true).when("update", {"sphere"}),
      p_int("vocab", 0, "token ids drawn from [0, vocab); 0: the model's vocab_size", 0,
            16777216)
          .when("token_ids", {""})
          .when("prompt", {""})
          .when("prompts", {""}),
      p_string("token_ids", "", "a .npy file of int token ids [runs, tokens] to use instead of random ids")
          .file()
          .when("prompt", {""})
          .when("prompts", {""}),
      p_bool("use_positions", true, "positional information: learned position rows (GPT-2) or the rotary rotation (NeoX, Llama)"),
      p_string("sublayers", "both", "the layer's branches: both, attention only (MLP off) or MLP only (attention off)",
               {"both", "attention", "mlp"}),
      p_double("beta", 1.0, "inverse temperature", 0.0),
      p_string("qk", "checkpoint", "W_Q and W_K as loaded, perturbed (+ qk_sigma rms(W) N(0,1)) or random (N(0, init_std^2))",
               {"checkpoint", "perturbed", "random"}),
      p_double("qk_sigma", 0.1, "relative size of the W_Q / W_K perturbation", 0.0, 1e3, true).when("qk", {"perturbed"}),
      p_int("qk_from", 0, "first (0-based) layer whose W_Q and W_K are perturbed or replaced (0: every layer)", 0, 1000000)
          .when_not("qk", {"checkpoint"})};
  for (ParamSpec& q : prompt_knobs()) d.knobs.push_back(std::move(q));
  d.taps = {"attention", "residual_mid"};
  d.build = [&f](const Params& P, RunContext& ctx) { return build_decoder(f, P, ctx); };
  d.cost = [&f](const Params& P) {
    // From config.json or the named size (not the weights); a missing config is sized as the
    // family's smallest named size here and reported by the loader.
    decoder::Arch a;
    try {
      a = arch_of(f, P);
    } catch (const InputError&) {
      a = named_arch(f, f.sizes.front());
    }
    const double dd = a.d_model, T = static_cast<double>(P.get_int("tokens"));
    return ModelCost{dd, 4.0 * dd * (a.qkv_rows() + a.q_rows() + (a.gated_mlp ? 3.0 : 2.0) * a.d_ff) + 8.0 * T * a.q_rows(),
                     4.0 * a.parameters()};
  };
  d.checkpoint_sizes = f.sizes;
  d.make_checkpoint = [&f](const std::string& size, std::uint64_t seed, const std::filesystem::path& dir) {
    decoder::save(f, decoder::init_model(f, named_arch(f, size), seed), dir);
  };
  d.schedule_knobs = {"layers", "layer"};
  d.writes = {token_ids_written()};
  return d;
}

// Every family that registered itself (decoder::FamilyRegistration in its own file). Registered
// before the default-priority static objects: presets take the registry's knobs during static
// initialisation.
__attribute__((init_priority(1000))) const ModelRegistration reg_decoder_families{100, [] {
  std::vector<ModelDescriptor> v;
  for (const Family* f : decoder::families()) v.push_back(descriptor_of(*f));
  return v;
}};

}  // namespace
}  // namespace tokdyn
