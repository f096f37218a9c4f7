// The model registry (experiments/model_registry.hpp): one descriptor per depth model. Each
// descriptor's build is the whole of what an analysis needs to know about the model.
#include "tokdyn/experiments/model_registry.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <memory>
#include <stdexcept>

#include "tokdyn/error.hpp"
#include "tokdyn/experiments/transformer_setup.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/mamba2_checkpoint.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/models/decoder/decoder.hpp"
#include "tokdyn/models/hierarchical.hpp"
#include "tokdyn/models/mamba2.hpp"
#include "tokdyn/models/rope_attention.hpp"
#include "tokdyn/models/ssm.hpp"
#include "tokdyn/models/ssm_random.hpp"
#include "tokdyn/rng.hpp"
#include "tokdyn/schedule.hpp"

namespace tokdyn {
namespace {

using ModelSetup = ModelInstance;

// ---- SSM (The Attention Within (1)-(2)): random zero-mean weights, as the ssm-random-silu preset ----
ModelSetup build_ssm(const Params& P, RunContext&) {
  const SsmRandomSpec spec = ssm_random_spec(P);
  const auto seed = static_cast<std::uint64_t>(P.get_int("seed"));
  const int len = static_cast<int>(P.get_int("tokens"));
  auto sched = ssm_random_schedule(P, P.get_int("redraw"));
  SsmOptions o;
  o.tau = P.get_double("tau");
  o.silu_bc = P.get_bool("silu");
  o.gate = GateKind::Off;
  ModelSetup S;
  S.map = std::make_unique<SsmLayer>(sched, o, P.get_string("form") == "recurrence" ? SsmForm::Recurrence : SsmForm::InputOutput);
  S.Z0 = sphere_start(seed, 1, len, spec.n);
  S.notes["model"] = fmt::format("SSM layer (2) of The Attention Within, n = {}, m = {}, tau = {}, SiLU on B/C {}, gate off, "
                                 "{} weights redrawn every {} layer(s)",
                                 spec.n, spec.m, o.tau, o.silu_bc ? "on" : "off", spec.weights, P.get_int("redraw"));
  S.notes["initial_tokens"] = "uniform on S^{n-1}, stream (seed, 0)";
  S.notes["tangent_step"] = "trajectory by SsmLayer::apply; tangents by its exact jvp (one call for the k tangents)";
  return S;
}

// ---- RoPE attention step (3) of "Self-Attention Dynamics with Rotary Position Embeddings" ----
ModelSetup build_rope(const Params& P, RunContext&) {
  const int len = static_cast<int>(P.get_int("tokens"));
  const rope::AttentionParams AP = rope_attention_params(P, len, "depth-spectra");
  const double h = P.get_double("h");
  ModelSetup S;
  S.map = std::make_unique<rope::AttentionStep>(AP, len, h);
  S.Z0 = sphere_start(static_cast<std::uint64_t>(P.get_int("seed")), 1, len, AP.d, P.get_string("init") == "hemisphere");
  S.notes["model"] = fmt::format("RoPE attention step (3): x_i <- pi(x_i + h y_i), h = {}, d = {}, beta = {}, rope {}, "
                                 "causal {}, heads {}",
                                 h, AP.d, AP.beta, AP.rope, AP.causal, AP.heads);
  S.notes["frequencies"] = AP.plane_frequencies();
  S.notes["initial_tokens"] = fmt::format("uniform on S^{{d-1}}{}, stream (seed, 0)",
                                          P.get_string("init") == "hemisphere" ? " folded to x_1 >= 0" : "");
  S.notes["tangent_step"] = "trajectory by AttentionStep::apply; tangents by its exact jvp (one call for the k tangents)";
  return S;
}

// ---- the real Mamba-2 block (The Attention Within §II-B), from a checkpoint ----
ModelSetup build_mamba2(const Params& P, RunContext& ctx) {
  using namespace mamba2;
  Model model = mamba2_model(P);
  const Config cfg = model.cfg;
  const int len = static_cast<int>(P.get_int("tokens"));
  const std::string layers = P.get_string("layers");
  const long layer = P.get_int("layer");
  if (layers == "single" && layer >= cfg.n_layer)
    throw InputError(fmt::format("parameter 'layer': the model has {} layers (0..{}), got {}", cfg.n_layer, cfg.n_layer - 1, layer));
  const Update update = P.get_string("update") == "sphere" ? Update::Sphere : Update::Residual;
  // Token ids as run 0 of the Mamba-2 presets' (given, or iid uniform in [0, vocab), stream (seed, 0)).
  std::string drawn_from;
  int runs = 1;  // the rows of a given token_ids file (Python's hidden_states of a batch)
  const std::vector<std::int64_t> ids = model_token_ids(P, model.embedding.rows(), cfg.vocab_size, runs, len, ctx, drawn_from);
  const MatF X0 = embed(model, ids, update);
  ModelSetup S;
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

// ---- the Transformer block (4) of the coupling paper, seeded random or from a safetensors file ----
ModelSetup build_transformer(const Params& P, RunContext& ctx) {
  // The shared Transformer schema's keys, filled from this preset's knobs (T = tokens, L = depth).
  Params q;
  const auto copy = [&](const std::string& to, const std::string& from) { q.values_[to] = P.values_.at(from); };
  for (const char* k : {"d", "d_ff", "sigma_w", "sigma_b", "norm", "eps", "placement", "activation", "mask", "P", "window",
                        "eps_leak", "positional", "temperature", "heads", "tying", "loop", "seed"})
    copy(k, k);
  copy("T", "tokens");
  copy("L", "depth");
  copy("weights", "tf_weights");
  if (P.get_string("tying") == "untied" && P.get_string("tf_weights").empty() && P.get_int("depth") > 5000)
    throw InputError(fmt::format("parameter 'depth' = {}: untied random weights are drawn for every layer, at most 5000 "
                                 "(use --set tying=tied or tying=looped for deeper runs)", P.get_int("depth")));
  tf::Transformer model = tf::transformer_from(q, ctx, 0, "tf_weights");
  const tf::Config& c = model.config();
  const int len = static_cast<int>(P.get_int("tokens"));
  ModelSetup S;
  Tokens X(len, c.d);
  Rng(static_cast<std::uint64_t>(P.get_int("seed")), {0x7f}).fill_normal(X, 1.0);
  S.Z0 = Batch{X, 1, len};
  S.map = std::make_unique<tf::Transformer>(std::move(model));
  S.notes["model"] = fmt::format("Transformer block (4): d = {}, d_ff = {}, {} {}, {}, mask {}, tying {}", c.d, c.d_ff,
                                 P.get_string("placement"), P.get_string("norm"), P.get_string("activation"),
                                 P.get_string("mask"), P.get_string("tying"));
  S.notes["initial_tokens"] = "Gaussian entries of unit variance, stream (seed, 0x7f)";
  S.notes["tangent_step"] = "trajectory by Transformer::apply; tangents by its exact jvp (one call for the k tangents)";
  return S;
}

// ---- the hierarchical model (C1)-(C2), eq. (11) of the coupling paper: the Transformer with the
// block-local mask and the slow path (compressions of blocks, a gated injection) ----
ModelSetup build_hierarchical(const Params& P, RunContext& ctx) {
  Params q;
  const auto copy = [&](const std::string& to, const std::string& from) { q.values_[to] = P.values_.at(from); };
  for (const char* k : {"d", "d_ff", "sigma_w", "sigma_b", "norm", "eps", "placement", "activation", "positional", "temperature",
                        "heads", "tying", "loop", "seed"})
    copy(k, k);
  q.values_["window"] = 4L;        // masks other than block-local only
  q.values_["eps_leak"] = 1e-3;
  copy("T", "tokens");
  copy("L", "depth");
  copy("weights", "tf_weights");
  copy("P", "block");
  q.values_["mask"] = std::string("block");  // (C1): attention within blocks of P tokens
  if (P.get_string("tying") == "untied" && P.get_string("tf_weights").empty() && P.get_int("depth") > 5000)
    throw InputError(fmt::format("parameter 'depth' = {}: untied random weights are drawn for every layer, at most 5000 "
                                 "(use --set tying=tied or tying=looped for deeper runs)", P.get_int("depth")));
  tf::Transformer model = tf::transformer_from(q, ctx, 0, "tf_weights");
  const tf::Config c = model.config();
  const int T = static_cast<int>(P.get_int("tokens"));
  const int block = static_cast<int>(P.get_int("block"));
  if (block > T) throw InputError(fmt::format("parameter 'block' = {}: longer than the sequence (tokens = {})", block, T));
  hier::SlowPath s;
  s.P = block;
  s.pi.kind = hier::parse_pi(P.get_string("compression"));
  s.pi.topk = static_cast<int>(P.get_int("topk"));
  s.psi = hier::make_injection(hier::parse_psi(P.get_string("injection")), c.d, static_cast<int>(P.get_int("psi_hidden")),
                               P.get_double("psi_scale"), static_cast<std::uint64_t>(P.get_int("seed")));
  s.rho = P.get_double("rho");
  s.L_r = static_cast<int>(P.get_int("refresh_every"));
  s.refresh = hier::parse_refresh(P.get_string("refresh"));
  s.pooled = hier::parse_pooled(P.get_string("pooled"));
  s.loop = hier::parse_loop(P.get_string("slow_loop"));
  s.site = hier::parse_site(P.get_string("site"));
  auto hm = std::make_unique<hier::HierarchicalModel>(std::move(model), s, T);
  Tokens X(T, c.d);
  Rng(static_cast<std::uint64_t>(P.get_int("seed")), {0x7f}).fill_normal(X, 1.0);
  ModelSetup S;
  S.Z0 = hm->initial_state(X, 1);
  S.notes["model"] = fmt::format("hierarchical (C1)-(C2), eq. (11): Transformer block (4) with d = {}, block-local mask P = {}; "
                                 "slow path: Pi = {}, psi = {}, rho = {}, refresh every {} ({}), {} pooled, {}, {} injection",
                                 c.d, block, P.get_string("compression"), P.get_string("injection"), s.rho, s.L_r,
                                 P.get_string("refresh"), P.get_string("pooled"), P.get_string("slow_loop"), P.get_string("site"));
  S.notes["state_rows"] = fmt::format("{} token rows, then the {} held block summaries (the state of the coupled system)", T, hm->blocks());
  S.notes["initial_tokens"] = "Gaussian entries of unit variance, stream (seed, 0x7f); summaries Pi(pooled(x(0)))";
  S.notes["tangent_step"] = "trajectory by HierarchicalModel::apply; tangents by its exact jvp (tokens and summaries)";
  S.map = std::move(hm);
  return S;
}

/// The Transformer's knobs (the shared schema of experiments/transformer_setup.hpp) as they appear
/// here: d, heads and seed are shared with other models, T and L are tokens and depth, and the
/// weights file is tf_weights (weights is the SSM's distribution).
std::vector<ParamSpec> transformer_knobs() {
  std::vector<ParamSpec> out;
  for (ParamSpec q : tf::transformer_params(4, 16, 16, 200, 0.0)) {
    if (q.key == "d" || q.key == "heads" || q.key == "seed" || q.key == "T" || q.key == "L") continue;
    if (q.key == "weights") q.key = "tf_weights";
    for (ParamCondition& c : q.only_when)
      if (c.key == "weights") c.key = "tf_weights";
    out.push_back(std::move(q));
  }
  return out;
}

std::vector<ModelDescriptor> make_registry() {
  std::vector<ModelDescriptor> r;
  r.push_back(ModelDescriptor{
      "ssm",
      "The Attention Within (1)-(2): the selective SSM layer on spheres, random zero-mean weights (as ssm-random-silu)",
      {p_int("n", 16, "token dimension n", 1, 65536),
       p_int("m", 16, "hidden-state size per channel", 1, 65536),
       p_double("tau", 1.0, "step of the normalised update (2)", 0.0, 1e6, true),
       p_string("weights", "mamba2", "random weight distribution", {"mamba2", "gaussian"}),
       p_double("sigma", 1.0, "standard deviation for weights=gaussian", 0.0, {}, true).when("weights", {"gaussian"}),
       p_bool("silu", true, "SiLU on the B and C branches"),
       p_int("redraw", 1, "weights redrawn every this many layers (>= depth: one weight-tied layer)", 1, 10000000),
       p_string("form", "io", "which exact form computes the layer: input-output (io) or the recurrence", {"io", "recurrence"})},
      {"q"},
      build_ssm,
      [](const Params& P) {
        const double d = static_cast<double>(P.get_int("n")), m = static_cast<double>(P.get_int("m"));
        const double T = static_cast<double>(P.get_int("tokens"));
        return ModelCost{d, 4.0 * d * (d + m) + 8.0 * T * d,
                         8.0 * 2.0 * (3.0 * d * d + 2.0 * m * d + 2.0 * d)};  // a layer's weights (and the next one drawn)
      },
      {},
      {},
      {"redraw"}});
  r.push_back(ModelDescriptor{
      "rope",
      "Self-Attention Dynamics with RoPE, step (3): x_i <- pi(x_i + h y_i), softmax attention with rotary queries and keys",
      {p_int("d", 4, "token dimension (even with RoPE)", 1, 1 << 14),
       p_double("beta", 1.0, "inverse temperature", 0.0),
       p_double("h", 0.1, "residual step h of (3)", 0.0, {}, true),
       p_bool("rope", true, "rotate queries and keys"),
       p_bool("causal", false, "causal mask"),
       p_int("heads", 1, "attention heads", 1, 4096),
       p_double_list("freqs", {}, "frequencies per plane (empty: standard)", -1e12, 1e12).when("rope", {"true"}),
       p_double_list("positions", {}, "token positions (empty: 0..T-1)", -1e12, 1e12),
       p_string("init", "sphere", "initial tokens uniform on the sphere or in the hemisphere x_1 >= 0", {"sphere", "hemisphere"})},
      {"attention"},
      build_rope,
      [](const Params& P) {
        const double d = static_cast<double>(P.get_int("d")), T = static_cast<double>(P.get_int("tokens"));
        return ModelCost{d, 16.0 * T * d, 0.0};
      },
      {},
      {},
      {}});
  r.push_back(ModelDescriptor{
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
           .when("token_ids", {""}),
       p_string("token_ids", "", "a .npy file of int token ids [runs, tokens] to use instead of random ids").file(),
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
      {"layers", "layer"}});
  std::vector<ParamSpec> tk{p_int("d", 4, "token dimension (= d_k = d_v)", 1, 1 << 14),
                            p_int("heads", 1, "attention heads (must divide d)", 1, 4096)};
  for (ParamSpec& q : transformer_knobs()) tk.push_back(std::move(q));
  r.push_back(ModelDescriptor{
      "transformer",
      "Coupling paper block (4): the Transformer depth map (Pre/Post-LN, RMS/LayerNorm, masks, RoPE/ALiBi), seeded or from a weights file",
      std::move(tk),
      {"attention", "residual_mid"},
      build_transformer,
      [](const Params& P) {
        const double d = static_cast<double>(P.get_int("d")), T = static_cast<double>(P.get_int("tokens"));
        return ModelCost{d, 6.0 * d * (2.0 * d + static_cast<double>(P.get_int("d_ff"))) + 12.0 * T * d, 0.0};
      },
      {},
      {},
      {"tying", "loop"}});
  // The hierarchical model: the Transformer's knobs but its mask (always block-local, of length
  // `block`), and the slow path's.
  std::vector<ParamSpec> hk{p_int("d", 4, "token dimension (= d_k = d_v)", 1, 1 << 14),
                            p_int("heads", 1, "attention heads (must divide d)", 1, 4096)};
  for (ParamSpec& q : transformer_knobs())
    if (q.key != "mask" && q.key != "P" && q.key != "window" && q.key != "eps_leak") hk.push_back(std::move(q));
  for (ParamSpec q : std::vector<ParamSpec>{
           p_int("block", 4, "block length P of the block-local attention (C1) and of the compressions (C2)", 1, 512),
           p_double("rho", 0.1, "gate amplitude rho of the slow path's injection", -1e6, 1e6),
           p_string("compression", "mean", "compression Pi of a block (Remark 4)", {"mean", "stride", "head", "topk"}),
           p_int("topk", 1, "tokens averaged by the top-k selector", 1, 512).when("compression", {"topk"}),
           p_string("injection", "tanh-mlp", "injection psi", {"identity", "linear", "affine", "tanh-mlp"}),
           p_int("psi_hidden", 8, "hidden width of the tanh-MLP psi", 1, 4096).when("injection", {"tanh-mlp"}),
           p_double("psi_scale", 1.0, "scale of psi's random weights", 0.0, 1e6, true).when_not("injection", {"identity"}),
           p_int("refresh_every", 1, "summaries refreshed every this many layers (0: held for the whole pass)", 0, 10000000),
           p_string("refresh", "hold", "sample-and-hold refresh or the continuous relaxation (12)", {"hold", "relax"})
               .when_not("refresh_every", {"0"}),  // held for the whole pass: no refresh to choose
           p_string("pooled", "normalised", "pooled quantity: the raw stream x or the normalised S(x) (flag F9)", {"raw", "normalised"}),
           p_string("slow_loop", "chain", "block k reads the summary of block k-1 (chain) or its own (self, eq. (15))", {"chain", "self"}),
           p_string("site", "additive", "injection site: additive (eq. (11)) or inside the norms' argument (Pre-LN only)",
                    {"additive", "inside"})})
    hk.push_back(std::move(q));
  r.push_back(ModelDescriptor{
      "hierarchical",
      "Coupling paper eq. (11): the Transformer with block-local attention (C1) and the gated slow path of block summaries (C2)",
      std::move(hk),
      {},
      build_hierarchical,
      [](const Params& P) {
        const double d = static_cast<double>(P.get_int("d")), T = static_cast<double>(P.get_int("tokens"));
        return ModelCost{d, 6.0 * d * (2.0 * d + static_cast<double>(P.get_int("d_ff"))) + 12.0 * T * d, 0.0};
      },
      {},
      {},
      {"tying", "loop", "refresh_every"}});
  return r;
}

}  // namespace

// ---- the parts ----

SsmRandomSpec ssm_random_spec(const Params& P) {
  SsmRandomSpec spec;
  spec.n = static_cast<int>(P.get_int("n"));
  spec.m = static_cast<int>(P.get_int("m"));
  spec.weights = P.get_string("weights");
  spec.sigma = P.get_double("sigma");
  return spec;
}

std::shared_ptr<IidSchedule<SsmParams>> ssm_random_schedule(const Params& P, long redraw) {
  const SsmRandomSpec spec = ssm_random_spec(P);
  const auto seed = static_cast<std::uint64_t>(P.get_int("seed"));
  return std::make_shared<IidSchedule<SsmParams>>([spec](Rng& rng) { return draw_ssm_layer(spec, rng); }, seed ^ 0x5eedf00dULL,
                                                  redraw);
}

Batch sphere_start(std::uint64_t seed, int runs, int len, int d, bool hemisphere) {
  Batch Z{Tokens(static_cast<Eigen::Index>(runs) * len, d), runs, len};
  for (int r = 0; r < runs; ++r) {
    Rng rng(seed, {static_cast<std::uint64_t>(r)});
    Tokens X = rng.sphere_tokens(len, d);
    if (hemisphere)
      for (int i = 0; i < len; ++i) X(i, 0) = std::abs(X(i, 0));
    Z.run(r) = X;
  }
  return Z;
}

rope::AttentionParams rope_attention_params(const Params& P, int tokens, const std::string& who) {
  rope::AttentionParams AP;
  AP.d = static_cast<int>(P.get_int("d"));
  AP.beta = P.get_double("beta");
  AP.rope = P.get_bool("rope");
  AP.causal = P.get_bool("causal");
  AP.heads = static_cast<int>(P.get_int("heads"));
  AP.freqs = P.get_double_list("freqs");
  AP.positions = P.get_double_list("positions");
  AP.validate(tokens, who);
  return AP;
}

mamba2::Model mamba2_model(const Params& P) {
  const std::string ck = P.get_string("checkpoint");
  if (!ck.empty()) return mamba2::load(ck);
  return mamba2::init_model(mamba2::Config::named(P.get_string("size")), static_cast<std::uint64_t>(P.get_int("model_seed")));
}

std::optional<mamba2::Config> mamba2_config(const Params& P) {
  const std::string ck = P.get_string("checkpoint");
  if (ck.empty()) return mamba2::Config::named(P.get_string("size"));
  std::error_code ec;
  const std::filesystem::path dir =
      std::filesystem::is_directory(ck, ec) ? std::filesystem::path(ck) : std::filesystem::path(ck).parent_path();
  if (!std::filesystem::exists(dir / "config.json", ec)) return std::nullopt;
  return mamba2::parse_config(dir / "config.json");
}

std::vector<std::int64_t> model_token_ids(const Params& P, long rows, long vocab_real, int& runs, int len, RunContext& ctx,
                                          std::string& drawn_from) {
  std::vector<std::int64_t> ids;
  const std::string idfile = P.get_string("token_ids");
  if (!idfile.empty()) {
    std::vector<std::size_t> shape;
    // At most 65536 runs of len ids: a larger file is refused from its header, before it is read.
    ids = read_npy_int(idfile, shape, 65536ull * static_cast<std::uint64_t>(len));
    if (shape.size() != 2 || shape[1] != static_cast<std::size_t>(len) || shape[0] == 0)
      throw InputError(fmt::format("{}: token ids have shape [{}]; expected [runs, tokens] with tokens = {}", idfile,
                                   fmt::join(shape, ", "), len));
    runs = static_cast<int>(shape[0]);
    for (std::int64_t id : ids)
      if (id < 0 || id >= rows)
        throw InputError(fmt::format("{}: token id {} out of range; expected ids in [0, {})", idfile, id, rows));
    drawn_from = "given (token_ids)";
  } else {
    long vocab = P.get_int("vocab");
    if (vocab == 0) vocab = vocab_real;
    if (vocab > rows) throw InputError(fmt::format("parameter 'vocab': the embedding has {} rows, got {}", rows, vocab));
    ids = decoder::draw_token_ids(static_cast<std::uint64_t>(vocab), runs, len, static_cast<std::uint64_t>(P.get_int("seed")));
    drawn_from = fmt::format("[0, {})", vocab);
  }
  write_npy(ctx.dir / "token_ids.npy", ids.data(), {static_cast<std::size_t>(runs), static_cast<std::size_t>(len)});
  return ids;
}

std::vector<std::int64_t> mamba2_token_ids(const Params& P, const mamba2::Model& m, int runs, int len, RunContext& ctx,
                                           std::string& drawn_from) {
  std::vector<std::int64_t> ids;
  const std::string idfile = P.get_string("token_ids");
  if (!idfile.empty()) {
    std::vector<std::size_t> shape;
    // At most runs * tokens ids: a larger file is refused from its header, before it is read.
    ids = read_npy_int(idfile, shape, static_cast<std::uint64_t>(runs) * static_cast<std::uint64_t>(len));
    if (shape.size() != 2 || shape[0] != static_cast<std::size_t>(runs) || shape[1] != static_cast<std::size_t>(len))
      throw InputError(fmt::format("{}: token ids have shape [{}]; expected [runs, tokens] = [{}, {}]", idfile,
                                   fmt::join(shape, ", "), runs, len));
    for (std::int64_t id : ids)
      if (id < 0 || id >= m.embedding.rows())
        throw InputError(fmt::format("{}: token id {} out of range; expected ids in [0, {})", idfile, id, m.embedding.rows()));
    drawn_from = "given (token_ids)";
  } else {
    // The default range is the model's real vocabulary (50277 for the released models, in either
    // config layout; Config::vocab_rule says how it was found), not the padded embedding rows.
    long vocab = P.get_int("vocab");
    if (vocab == 0) vocab = m.cfg.vocab_size;
    if (vocab > m.embedding.rows())
      throw InputError(fmt::format("parameter 'vocab': the embedding has {} rows, got {}", m.embedding.rows(), vocab));
    ids = mamba2::draw_token_ids(static_cast<std::uint64_t>(vocab), runs, len, static_cast<std::uint64_t>(P.get_int("seed")));
    drawn_from = fmt::format("[0, {})", vocab);
  }
  write_npy(ctx.dir / "token_ids.npy", ids.data(), {static_cast<std::size_t>(runs), static_cast<std::size_t>(len)});
  return ids;
}

ParamSpec model_knob(const std::string& model, const std::string& key) {
  for (const ParamSpec& q : model_descriptor(model).knobs)
    if (q.key == key) return q;
  throw std::logic_error(fmt::format("model registry: model '{}' has no knob '{}'", model, key));
}

ParamSpec model_knob(const std::string& model, const std::string& key, ParamValue def, std::string help) {
  ParamSpec q = model_knob(model, key);
  if (def.index() != q.def.index())
    throw std::logic_error(fmt::format("model registry: a default of the wrong type for knob '{}' of '{}'", key, model));
  q.def = std::move(def);
  if (!help.empty()) q.help = std::move(help);
  return q;
}

bool ModelDescriptor::has_tap(const std::string& t) const { return std::find(taps.begin(), taps.end(), t) != taps.end(); }

namespace {
std::vector<std::function<std::vector<ModelDescriptor>()>>& registered_models() {
  static std::vector<std::function<std::vector<ModelDescriptor>()>> v;
  return v;
}
}  // namespace

ModelRegistration::ModelRegistration(std::function<std::vector<ModelDescriptor>()> make) { registered_models().push_back(std::move(make)); }

const std::vector<ModelDescriptor>& model_registry() {
  static const std::vector<ModelDescriptor> r = [] {
    std::vector<ModelDescriptor> v = make_registry();
    std::vector<ModelDescriptor> more;
    for (const auto& make : registered_models())
      for (ModelDescriptor& m : make()) more.push_back(std::move(m));
    std::sort(more.begin(), more.end(), [](const ModelDescriptor& a, const ModelDescriptor& b) { return a.name < b.name; });
    for (ModelDescriptor& m : more) v.push_back(std::move(m));
    return v;
  }();
  return r;
}

std::vector<std::string> model_names() {
  std::vector<std::string> n;
  for (const ModelDescriptor& m : model_registry()) n.push_back(m.name);
  return n;
}

const ModelDescriptor& model_descriptor(const std::string& name) {
  for (const ModelDescriptor& m : model_registry())
    if (m.name == name) return m;
  throw std::invalid_argument(fmt::format("model '{}': expected one of {}", name, fmt::join(model_names(), ", ")));
}

std::vector<std::string> models_with_checkpoints() {
  std::vector<std::string> n;
  for (const ModelDescriptor& m : model_registry())
    if (m.make_checkpoint) n.push_back(m.name);
  return n;
}

ModelInstance build_model(const std::string& name, const Params& P, RunContext& ctx) {
  const ModelDescriptor& m = model_descriptor(name);
  for (const ParamSpec& q : m.knobs) {
    if (!P.is_explicit(q.key)) continue;
    // The union of the models' knobs may take more choices or a wider range than this model's own.
    const auto vit = P.values_.find(q.key);
    if (vit != P.values_.end()) {
      const ParamValue& v = vit->second;
      if (!q.choices.empty() && std::holds_alternative<std::string>(v) &&
          std::find(q.choices.begin(), q.choices.end(), std::get<std::string>(v)) == q.choices.end())
        throw InputError(fmt::format("parameter '{}' = {}: model={} takes one of {}", q.key, std::get<std::string>(v), name,
                                     fmt::join(q.choices, ", ")));
      double x = 0;
      bool num = false;
      if (std::holds_alternative<long>(v)) x = static_cast<double>(std::get<long>(v)), num = true;
      if (std::holds_alternative<double>(v)) x = std::get<double>(v), num = true;
      if (num && ((q.min && (x < *q.min || (q.min_exclusive && x == *q.min))) || (q.max && (x > *q.max || (q.max_exclusive && x == *q.max)))))
        throw InputError(fmt::format("parameter '{}' = {}: model={} takes {}{} .. {}{}", q.key, value_text(v), name,
                                     q.min_exclusive ? "(" : "[", q.min ? value_text(ParamValue(*q.min)) : std::string("-inf"),
                                     q.max ? value_text(ParamValue(*q.max)) : std::string("inf"), q.max_exclusive ? ")" : "]"));
    }
    for (const ParamCondition& c : q.only_when) {
      const auto it = P.values_.find(c.key);
      if (it == P.values_.end()) continue;
      const std::string now = value_text(it->second);
      if ((std::find(c.values.begin(), c.values.end(), now) != c.values.end()) != c.negate) continue;
      std::vector<std::string> vs;
      for (const std::string& v : c.values) vs.push_back(v.empty() ? std::string("empty") : v);
      throw InputError(fmt::format("parameter '{}' does not apply to model={} when {} = {}: it applies only when {} is {}{} "
                                   "(leave '{}' unset)",
                                   q.key, name, c.key, now.empty() ? std::string("'' (empty)") : now, c.key,
                                   c.negate ? "not " : "", fmt::join(vs, c.negate ? " nor " : " or "), q.key));
    }
  }
  return m.build(P, ctx);
}

std::vector<std::string> models_with_tap(const std::string& t) {
  std::vector<std::string> n;
  for (const ModelDescriptor& m : model_registry())
    if (m.has_tap(t)) n.push_back(m.name);
  return n;
}

std::vector<std::string> model_knob_conflicts() {
  std::vector<std::string> out;
  std::map<std::string, std::pair<std::string, ParamType>> first;
  for (const ModelDescriptor& m : model_registry())
    for (const ParamSpec& q : m.knobs) {
      const auto [it, fresh] = first.emplace(q.key, std::make_pair(m.name, q.type));
      if (!fresh && it->second.second != q.type)
        out.push_back(fmt::format("knob '{}' of {} has another type than {}'s", q.key, m.name, it->second.first));
    }
  return out;
}

std::vector<ParamSpec> model_knobs(const std::string& model_key, const std::vector<std::string>& only) {
  std::vector<ParamSpec> out;
  std::map<std::string, std::vector<std::string>> owners;
  for (const ModelDescriptor& m : model_registry()) {
    if (!only.empty() && std::find(only.begin(), only.end(), m.name) == only.end()) continue;
    for (const ParamSpec& q : m.knobs) {
      auto it = std::find_if(out.begin(), out.end(), [&](const ParamSpec& p) { return p.key == q.key; });
      if (it == out.end()) {
        out.push_back(q);
        out.back().help = m.name + ": " + q.help;
      } else {
        // A type conflict is a registry error (model_knob_conflicts; a test keeps it empty): the
        // first model's spec is kept. Other differences are the union: the other model's default
        // as a default under model=..., its choices added, the widest range (build_model checks
        // each model's own).
        if (it->type != q.type) {
          owners[q.key].push_back(m.name);
          continue;
        }
        if (!(it->def == q.def)) {
          it->def_when.push_back({ParamCondition{model_key, {m.name}, false}, q.def});
          it->help += fmt::format(" [default {} for model={}]", value_text(q.def), m.name);
        }
        if (!it->choices.empty() || !q.choices.empty()) {
          if (it->choices.empty() || q.choices.empty()) it->choices.clear();
          else
            for (const std::string& c : q.choices)
              if (std::find(it->choices.begin(), it->choices.end(), c) == it->choices.end()) it->choices.push_back(c);
        }
        if (it->min && (!q.min || *q.min < *it->min)) it->min = q.min;
        if (it->max && (!q.max || *q.max > *it->max)) it->max = q.max;
        it->help += "; " + m.name + ": " + q.help;
      }
      owners[q.key].push_back(m.name);
    }
  }
  // A key several models share whose own conditions differ between them (Mamba-2's tau applies with
  // update=sphere, the SSM's always) cannot state them in one spec: the union applies per model,
  // and build_model refuses what a model's own condition excludes.
  for (ParamSpec& q : out) {
    const std::vector<std::string>& who = owners[q.key];
    bool same = true;
    for (const std::string& o : who) {
      const ParamSpec own = model_knob(o, q.key);
      if (own.type != q.type) continue;  // a conflict (model_knob_conflicts), not merged
      if (own.only_when.size() != q.only_when.size()) same = false;
      for (std::size_t i = 0; same && i < own.only_when.size(); ++i)
        same = own.only_when[i].key == q.only_when[i].key && own.only_when[i].values == q.only_when[i].values &&
               own.only_when[i].negate == q.only_when[i].negate;
    }
    if (!same) q.only_when.clear();
    q.only_when.push_back({model_key, who, false});
  }
  return out;
}

}  // namespace tokdyn
