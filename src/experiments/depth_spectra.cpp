// Preset depth-spectra: the top-k Lyapunov exponents of the depth map of any tokdyn model along
// one trajectory (coupling paper eq. (10): the linearised depth dynamics; growth scales gamma = e^mu
// of §2.9), by discrete QR through the model's own JVP (analysis/depth_spectra.hpp).
//
// Adding a model is one function: a ModelBuilder (Params -> the LayerMap, its initial state and its
// tangent step) in the table `builders()` below, plus its knobs in the schema (tagged with the
// models they apply to, so a knob set for another model is refused).
#include <algorithm>
#include <filesystem>
#include <functional>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <map>
#include <memory>
#include <sstream>

#include "tokdyn/analysis/depth_spectra.hpp"
#include "tokdyn/error.hpp"
#include "tokdyn/experiment.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/mamba2_checkpoint.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/models/mamba2.hpp"
#include "tokdyn/models/rope_attention.hpp"
#include "tokdyn/models/ssm.hpp"
#include "tokdyn/models/ssm_random.hpp"
#include "tokdyn/rng.hpp"
#include "tokdyn/schedule.hpp"
#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/experiments/transformer_setup.hpp"

namespace tokdyn {
namespace {

/// What a model contributes to a depth-spectrum run.
struct ModelSetup {
  std::unique_ptr<LayerMap> map;
  Batch Z0;                 ///< one run of `tokens` tokens
  TangentStep step;         ///< empty: apply_and_jvp(*map)
  /// The attention weights of layer k at the state entering it, [heads, tokens, tokens] row-major
  /// (models with attention only; empty function otherwise).
  std::function<std::vector<double>(long, const Tokens&, int&)> attention;
  nlohmann::json notes = nlohmann::json::object();
};

using ModelBuilder = ModelSetup (*)(const Params&, RunContext&);


// ---- SSM (The Attention Within (1)-(2)): random zero-mean weights, as the ssm-random-silu preset ----
ModelSetup build_ssm(const Params& P, RunContext&) {
  SsmRandomSpec spec;
  spec.n = static_cast<int>(P.get_int("n"));
  spec.m = static_cast<int>(P.get_int("m"));
  spec.weights = P.get_string("weights");
  spec.sigma = P.get_double("sigma");
  const auto seed = static_cast<std::uint64_t>(P.get_int("seed"));
  const int len = static_cast<int>(P.get_int("tokens"));
  // Layer weights redrawn every `redraw` layers from stream (seed ^ 0x5eedf00d, block), as ssm-random-silu.
  auto sched = std::make_shared<IidSchedule<SsmParams>>([spec](Rng& rng) { return draw_ssm_layer(spec, rng); },
                                                         seed ^ 0x5eedf00dULL, P.get_int("redraw"));
  SsmOptions o;
  o.tau = P.get_double("tau");
  o.silu_bc = P.get_bool("silu");
  o.gate = GateKind::Off;
  ModelSetup S;
  S.map = std::make_unique<SsmLayer>(sched, o, SsmForm::InputOutput);
  Rng rng(seed, {0});
  S.Z0 = Batch{rng.sphere_tokens(len, spec.n), 1, len};
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
  rope::AttentionParams AP;
  AP.d = static_cast<int>(P.get_int("d"));
  AP.beta = P.get_double("beta");
  AP.rope = P.get_bool("rope");
  AP.causal = P.get_bool("causal");
  AP.heads = static_cast<int>(P.get_int("heads"));
  AP.freqs = P.get_double_list("freqs");
  AP.positions = P.get_double_list("positions");
  AP.validate(len, "depth-spectra");
  const double h = P.get_double("h");
  ModelSetup S;
  S.map = std::make_unique<rope::AttentionStep>(AP, len, h);
  S.attention = [AP](long, const Tokens& state, int& heads) {
    Mat A;  // heads*n x n: rows [h n, (h+1) n) are head h (row-major: already [heads, n, n])
    rope::attention(AP, state, A);
    heads = AP.heads;
    return std::vector<double>(A.data(), A.data() + A.size());
  };
  Rng rng(static_cast<std::uint64_t>(P.get_int("seed")), {0});
  Tokens X = rng.sphere_tokens(len, AP.d);
  if (P.get_string("init") == "hemisphere")
    for (int i = 0; i < len; ++i) X(i, 0) = std::abs(X(i, 0));
  S.Z0 = Batch{X, 1, len};
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
  const std::string ck = P.get_string("checkpoint");
  if (ck.empty())
    throw InputError("parameter 'checkpoint': model=mamba2 needs a checkpoint directory (make one with "
                     "'tokdyn make-checkpoint --size 130m --seed 0 -o DIR')");
  Model model = load(ck);
  const Config cfg = model.cfg;
  const int len = static_cast<int>(P.get_int("tokens"));
  const std::string layers = P.get_string("layers");
  const long layer = P.get_int("layer");
  if (layers == "single" && layer >= cfg.n_layer)
    throw InputError(fmt::format("parameter 'layer': the model has {} layers (0..{}), got {}", cfg.n_layer, cfg.n_layer - 1, layer));
  long vocab = P.get_int("vocab");
  if (vocab == 0) vocab = cfg.vocab_size;
  if (vocab > model.embedding.rows())
    throw InputError(fmt::format("parameter 'vocab': the embedding has {} rows, got {}", model.embedding.rows(), vocab));
  const Update update = P.get_string("update") == "sphere" ? Update::Sphere : Update::Residual;
  // Token ids iid uniform in [0, vocab), stream (seed, 0): run 0 of the Mamba-2 presets' draw.
  const std::vector<std::int64_t> ids =
      draw_token_ids(static_cast<std::uint64_t>(vocab), 1, len, static_cast<std::uint64_t>(P.get_int("seed")));
  write_npy(ctx.dir / "token_ids.npy", ids.data(), {1, static_cast<std::size_t>(len)});
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
  auto map = std::make_unique<BlockMap>(cfg, Switches{}, sched, update, tau);
  const BlockMap* bm = map.get();
  S.map = std::move(map);
  S.Z0 = Batch{X0.cast<double>(), 1, len};
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
  S.notes["initial_tokens"] = fmt::format("embedding rows of token ids iid uniform in [0, {}), stream (seed, 0); token_ids.npy", vocab);
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
  S.attention = [m = static_cast<const tf::Transformer*>(S.map.get()), len](long k, const Tokens& state, int& heads) {
    const Mat A = m->attention_heads(k, Batch{state, 1, len}).front();  // T x (H T): head h in columns [h T, (h+1) T)
    heads = static_cast<int>(A.cols() / len);
    std::vector<double> out;
    out.reserve(static_cast<std::size_t>(A.size()));
    for (int h = 0; h < heads; ++h)
      for (int t = 0; t < len; ++t)
        for (int s = 0; s < len; ++s) out.push_back(A(t, static_cast<Eigen::Index>(h) * len + s));
    return out;
  };
  S.notes["model"] = fmt::format("Transformer block (4): d = {}, d_ff = {}, {} {}, {}, mask {}, tying {}", c.d, c.d_ff,
                                 P.get_string("placement"), P.get_string("norm"), P.get_string("activation"),
                                 P.get_string("mask"), P.get_string("tying"));
  S.notes["initial_tokens"] = "Gaussian entries of unit variance, stream (seed, 0x7f)";
  S.notes["tangent_step"] = "trajectory by Transformer::apply; tangents by its exact jvp (one call for the k tangents)";
  return S;
}

const std::map<std::string, ModelBuilder>& builders() {
  static const std::map<std::string, ModelBuilder> b{
      {"ssm", build_ssm}, {"rope", build_rope}, {"mamba2", build_mamba2}, {"transformer", build_transformer}};
  return b;
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
    q.help = "transformer: " + q.help;
    out.push_back(std::move(q));
  }
  return out;
}

/// Knobs that apply to some models only (a knob set for another model is refused).
const std::map<std::string, std::vector<std::string>>& knob_models() {
  static const std::map<std::string, std::vector<std::string>> m = [] {
    std::map<std::string, std::vector<std::string>> out{
      {"n", {"ssm"}},          {"m", {"ssm"}},          {"weights", {"ssm"}},     {"sigma", {"ssm"}},
      {"silu", {"ssm"}},       {"redraw", {"ssm"}},     {"tau", {"ssm", "mamba2"}}, {"d", {"rope", "transformer"}},
      {"beta", {"rope"}},      {"h", {"rope"}},         {"rope", {"rope"}},       {"causal", {"rope"}},
      {"heads", {"rope", "transformer"}},     {"freqs", {"rope"}},     {"positions", {"rope"}},  {"init", {"rope"}},
      {"checkpoint", {"mamba2"}}, {"layers", {"mamba2"}}, {"layer", {"mamba2"}}, {"update", {"mamba2"}},
      {"vocab", {"mamba2"}},   {"attention", {"rope", "transformer"}}};
    for (const ParamSpec& q : transformer_knobs()) out[q.key] = {"transformer"};
    return out;
  }();
  return m;
}

void run_depth_spectra(const Params& P, RunContext& ctx) {
  const std::string model = P.get_string("model");
  DepthSpectrumOptions o;
  o.k = static_cast<int>(P.get_int("k"));
  o.depth = P.get_int("depth");
  o.burn_in = P.get_int("burn_in");
  o.seed = static_cast<std::uint64_t>(P.get_int("tangent_seed"));
  if (o.burn_in >= o.depth)
    throw InputError(fmt::format("parameter 'burn_in': expected burn_in < depth = {}, got {}", o.depth, o.burn_in));
  std::vector<long> Hs = P.get_int_list("H");
  if (Hs.empty()) {
    const long N = o.depth - o.burn_in;
    for (long div : {8, 4, 2})
      if (Hs.empty() || std::max(1L, N / div) != Hs.back()) Hs.push_back(std::max(1L, N / div));
  }
  for (long H : Hs)
    if (H > o.depth - o.burn_in)
      throw InputError(fmt::format("parameter 'H': Steklov window {} is longer than the measured window depth - burn_in = {}", H,
                                   o.depth - o.burn_in));
  ModelSetup S = builders().at(model)(P, ctx);
  // A start state from the user (x0 = FILE.npy) replaces the drawn or embedded tokens; either way the
  // start actually used is written to x0.npy, so that anyone can recompute the trajectory.
  if (const std::string& x0 = P.get_string("x0"); !x0.empty()) {
    std::vector<std::size_t> shape;
    const std::vector<double> v = read_npy_double(x0, shape);
    const auto T = static_cast<std::size_t>(S.Z0.len), d = static_cast<std::size_t>(S.Z0.Z.cols());
    if (shape.size() != 2 || shape[0] != T || shape[1] != d)
      throw InputError(fmt::format("parameter 'x0' ({}): shape [{}]; expected [tokens, d] = [{}, {}] for model={}", x0,
                                   fmt::join(shape, ", "), T, d, model));
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        throw InputError(fmt::format("parameter 'x0' ({}): entry [{}, {}] is {}; expected finite numbers", x0, i / d, i % d, v[i]));
    Tokens X = Eigen::Map<const Tokens>(v.data(), static_cast<Eigen::Index>(T), static_cast<Eigen::Index>(d));
    if (S.map->on_sphere()) {  // the model's state lives on (S^{d-1})^T: each token is normalised
      for (Eigen::Index i = 0; i < X.rows(); ++i) {
        const double nrm = X.row(i).norm();
        if (!(nrm > 0))
          throw InputError(fmt::format("parameter 'x0' ({}): token {} is zero; model={} needs tokens on the unit sphere", x0, i, model));
        if (std::abs(nrm - 1.0) > 4.0 * std::numeric_limits<double>::epsilon()) X.row(i) /= nrm;  // on it already: kept
      }
      S.notes["x0"] = fmt::format("{} (each token normalised: model={} lives on the sphere)", x0, model);
    } else {
      S.notes["x0"] = x0;
    }
    S.Z0 = Batch{X, 1, S.Z0.len};
  }
  write_npy(ctx.dir / "x0.npy", S.Z0.Z.data(), {static_cast<std::size_t>(S.Z0.len), static_cast<std::size_t>(S.Z0.Z.cols())});
  const long dim = tangent_dimension(*S.map, S.Z0);
  if (o.k > dim)
    throw InputError(fmt::format("parameter 'k': expected at most the tangent dimension {} = tokens x {} of model={}, got {}", dim,
                                 dim / S.Z0.len, model, o.k));
  // A tangent frame from the user (v0 = FILE.npy [k, tokens, d]) replaces the Gaussian one.
  Tokens frame;
  const std::string v0 = P.get_string("v0");
  if (!v0.empty()) {
    std::vector<std::size_t> shape;
    const std::vector<double> v = read_npy_double(v0, shape);
    const std::size_t len = static_cast<std::size_t>(S.Z0.len), dd = static_cast<std::size_t>(S.Z0.Z.cols());
    if (shape.size() != 3 || shape[0] != static_cast<std::size_t>(o.k) || shape[1] != len || shape[2] != dd)
      throw InputError(fmt::format("parameter 'v0' ({}): shape [{}]; expected [k, tokens, d] = [{}, {}, {}] for model={}", v0,
                                   fmt::join(shape, ", "), o.k, len, dd, model));
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        throw InputError(fmt::format("parameter 'v0' ({}): entry {} is {}; expected finite numbers", v0, i, v[i]));
    frame = Eigen::Map<const Tokens>(v.data(), static_cast<Eigen::Index>(o.k) * S.Z0.len, S.Z0.Z.cols());
    o.tangents = &frame;
    S.notes["v0"] = fmt::format("{} (then projected onto the tangent space and orthonormalised; v0.npy: the frame given)", v0);
  }
  const std::vector<long> att = P.get_int_list("attention");
  for (long k : att)
    if (k > o.depth) throw InputError(fmt::format("parameter 'attention': expected layers in [1, depth = {}], got {}", o.depth, k));
  o.keep_states = P.get_bool("trajectory") || !att.empty();
  DepthSpectrum R;
  try {
    R = depth_spectrum(*S.map, S.Z0, o, S.step, ctx.progress);
  } catch (const std::invalid_argument& e) {
    if (!v0.empty() && std::string(e.what()).rfind("the initial tangent frame", 0) == 0)
      throw InputError(fmt::format("parameter 'v0' ({}): {}", v0, e.what()));
    throw;
  }
  write_npy(ctx.dir / "v0.npy", R.tangents0.data(),
            {static_cast<std::size_t>(o.k), static_cast<std::size_t>(S.Z0.len), static_cast<std::size_t>(S.Z0.Z.cols())});
  if (!att.empty()) {
    std::filesystem::create_directories(ctx.dir / "attention");
    for (long k : att) {
      int heads = 1;
      const std::vector<double> a = S.attention(k, R.states[static_cast<std::size_t>(k - 1)], heads);
      write_npy(ctx.dir / "attention" / fmt::format("layer_{}.npy", k), a.data(),
                {static_cast<std::size_t>(heads), static_cast<std::size_t>(S.Z0.len), static_cast<std::size_t>(S.Z0.len)});
    }
    S.notes["attention"] = "attention/layer_K.npy [heads, tokens, tokens]: the attention weights of layer K at the state entering it, x(K-1)";
  }
  if (P.get_bool("trajectory")) {
    std::vector<double> buf;
    buf.reserve(R.states.size() * static_cast<std::size_t>(R.states.front().size()));
    for (const Tokens& X : R.states) buf.insert(buf.end(), X.data(), X.data() + X.size());
    write_npy(ctx.dir / "trajectory.npy", buf.data(),
              {R.states.size(), static_cast<std::size_t>(S.Z0.len), static_cast<std::size_t>(S.Z0.Z.cols())});
  }

  CsvWriter ly(ctx.dir / "lyapunov.csv", {"i", "mu", "gamma"});
  for (int i = 0; i < R.k; ++i) {
    ly.cell(i + 1).cell(R.mu[i]).cell(R.gamma[i]);
    ly.end_row();
  }
  CsvWriter gr(ctx.dir / "growth.csv", {"layer", "i", "log_r", "mu_running"});
  for (long l = 1; l <= R.depth; ++l)
    for (int i = 0; i < R.k; ++i) {
      gr.cell(l).cell(i + 1).cell(R.log_r(l - 1, i));
      if (l > R.burn_in) gr.cell(R.mu_running(l - 1 - R.burn_in, i)); else gr.empty();
      gr.end_row();
    }
  // Dichotomy (Sacker-Sell) intervals of the top-k QR diagonal (Thm 5): Bohl intervals of each
  // column with Steklov window H, merged where they overlap.
  CsvWriter dich(ctx.dir / "dichotomy.csv", {"H", "interval", "lower", "upper", "columns"});
  for (long H : Hs) {
    const auto merged = cocycle::merge_intervals(cocycle::bohl_intervals(R.measured_log_r(), H));
    for (std::size_t j = 0; j < merged.size(); ++j) {
      dich.cell(H).cell(static_cast<long>(j)).cell(merged[j].lower).cell(merged[j].upper).cell(static_cast<long>(merged[j].columns.size()));
      dich.end_row();
    }
  }
  ctx.notes = S.notes;
  ctx.notes["tangent_dimension"] = dim;
  ctx.notes["tangent_space"] = S.map->on_sphere()
                                   ? "product of the tangent spaces of (S^{d-1})^T: radial directions absent (the step is normalised)"
                                   : "R^{T d} (the state is not normalised)";
  ctx.notes["exact_jvp"] = S.map->has_exact_jvp();
  ctx.notes["method"] = "discrete QR (Benettin): k tangents pushed by one batched jvp per layer, thin Householder QR with "
                        "diag(R) > 0, mu_i = mean of log R_ii over layers burn_in+1..depth, in QR order";
  ctx.notes["sum_mu"] = R.mu.sum();
}

std::vector<ParamSpec> depth_spectra_params() {
  std::vector<ParamSpec> ps{
     p_string("model", "ssm", "which model's depth map", {"ssm", "rope", "mamba2", "transformer"}),
     p_int_list("H", {}, "Steklov windows H of the dichotomy intervals, each <= depth - burn_in (empty: N/8, N/4, N/2 of the measured N layers)", 1, 10000000),
     p_int("k", 8, "number of Lyapunov exponents (tangent vectors)", 1, 100000),
     p_int("depth", 200, "layers applied", 1, 10000000),
     p_int("burn_in", 20, "first layers not averaged (< depth)", 0, 10000000),
     p_int("tokens", 16, "tokens of the trajectory (T)", 1, 100000),
     p_int("seed", 0, "seed of the initial tokens / token ids (and of the SSM weights)", 0, kMaxSeed),
     p_int("tangent_seed", 0, "seed of the initial tangent vectors", 0, kMaxSeed).when("v0", {""}),
     p_string("v0", "", "float64 .npy [k, tokens, d]: the initial tangent frame (projected onto the tangent space and "
              "orthonormalised; empty: Gaussian from tangent_seed); the frame before that step is always written to v0.npy").file(),
     p_bool("trajectory", false, "write the trajectory x(0..depth) to trajectory.npy [depth + 1, tokens, d]"),
     p_int_list("attention", {}, "rope, transformer: write the attention weights of these layers to attention/layer_K.npy "
                "[heads, tokens, tokens]", 1, 10000000),
     p_string("x0", "", "float64 .npy [tokens, d]: the start state (empty: the model's drawn or embedded tokens); "
              "the start used is always written to x0.npy").file(),
     // ssm
     p_int("n", 16, "ssm: token dimension n", 1, 65536),
     p_int("m", 16, "ssm: hidden-state size per channel", 1, 65536),
     p_double("tau", 1.0, "ssm: step of the normalised update (2); mamba2: tau of update=sphere", 0.0, 1e6, true),
     p_string("weights", "mamba2", "ssm: random weight distribution", {"mamba2", "gaussian"}),
     p_double("sigma", 1.0, "ssm: standard deviation for weights=gaussian", 0.0, {}, true).when("weights", {"gaussian"}),
     p_bool("silu", true, "ssm: SiLU on the B and C branches"),
     p_int("redraw", 1, "ssm: weights redrawn every this many layers (>= depth: one weight-tied layer)", 1, 10000000),
     // rope
     p_int("d", 4, "rope: token dimension (even with RoPE)", 1, 1 << 14),
     p_double("beta", 1.0, "rope: inverse temperature", 0.0),
     p_double("h", 0.1, "rope: residual step h of (3)", 0.0, {}, true),
     p_bool("rope", true, "rope: rotate queries and keys"),
     p_bool("causal", false, "rope: causal mask"),
     p_int("heads", 1, "rope, transformer: attention heads (transformer: must divide d)", 1, 4096),
     p_double_list("freqs", {}, "rope: frequencies per plane (empty: standard)", -1e12, 1e12).when("rope", {"true"}),
     p_double_list("positions", {}, "rope: token positions (empty: 0..T-1)", -1e12, 1e12),
     p_string("init", "sphere", "rope: initial tokens uniform on the sphere or in the hemisphere x_1 >= 0", {"sphere", "hemisphere"}),
     // mamba2
     p_string("checkpoint", "", "mamba2: checkpoint directory (required for model=mamba2)").directory(),
     p_string("layers", "cycle", "mamba2: the model's blocks cycled, or one block repeated", {"cycle", "single"}),
     p_int("layer", 0, "mamba2: the block of layers=single", 0, 1000000).when("layers", {"single"}),
     p_string("update", "residual", "mamba2: residual stream or the sphere update", {"residual", "sphere"}),
     p_int("vocab", 0, "mamba2: token ids drawn from [0, vocab) (0: the model's vocabulary)", 0, 1 << 30)};
  for (ParamSpec& q : transformer_knobs()) ps.push_back(std::move(q));
  // Knobs of one model only: the parameter layer refuses them for another model.
  for (ParamSpec& q : ps)
    if (auto it = knob_models().find(q.key); it != knob_models().end()) q.only_when.push_back({"model", it->second, false});
  return ps;
}

const ExperimentRegistration reg_depth_spectra{with_smoke(Experiment{
    "depth-spectra",
    "Coupling paper eq. (10): top-k Lyapunov exponents and dichotomy intervals of the depth map of a model (ssm | rope | mamba2 | transformer) via its JVP",
    depth_spectra_params(),
    run_depth_spectra,
    "depth-spectra",
    [](const Params& P) {
      const double k = static_cast<double>(P.get_int("k")), T = static_cast<double>(P.get_int("tokens"));
      const double depth = static_cast<double>(P.get_int("depth"));
      const std::string model = P.get_string("model");
      double d = 0.0, per_row = 0.0, weights = 0.0;
      // Every model mixes tokens through T x T matrices (the SSM's io form, attention): a few per run
      // of the k + 1 (value and tangents).
      const double mixing = 8.0 * 3.0 * T * T * (k + 1.0);
      if (model == "ssm") {
        d = static_cast<double>(P.get_int("n"));
        const double m = static_cast<double>(P.get_int("m"));
        per_row = 4.0 * d * (d + m) + 8.0 * T * d;
        weights = 8.0 * 2.0 * (3.0 * d * d + 2.0 * m * d + 2.0 * d);  // a layer's weights (and the next one drawn)
      } else if (model == "rope") {
        d = static_cast<double>(P.get_int("d"));
        per_row = 16.0 * T * d;
      } else if (model == "transformer") {
        d = static_cast<double>(P.get_int("d"));
        per_row = 6.0 * d * (2.0 * d + static_cast<double>(P.get_int("d_ff"))) + 12.0 * T * d;
      } else {
        d = 768.0;  // unknown until the checkpoint is read: sized as mamba2-130m
        per_row = 4.0 * (d * 3352.0 + 1536.0 * d) + 8.0 * T * 1536.0;
      }
      // Kept states (trajectory, or the states the attention weights are read at) and the .npy buffer.
      const double traj = P.get_bool("trajectory") || !P.get_int_list("attention").empty() ? 2.0 * 8.0 * (depth + 1.0) * T * d : 0.0;
      const double bytes = 8.0 * (8.0 * k * T * d + 2.0 * k * T * k + depth * k * 2.0) + 8.0 * 30.0 * k * T * d + weights + mixing + traj + 64e6;
      const double flops = depth * (k * T * per_row + 4.0 * T * d * k * k);
      return ResourceEstimate{bytes, flops, "k replicas of the T x d state and their tangents, one jvp per layer"};
    }}, {{"depth", "12"}, {"burn_in", "2"}, {"k", "2"}, {"tokens", "4"}, {"n", "4"}, {"m", "4"}},
    {{"lyapunov.csv:mu", "-inf: the layer maps are exactly singular along this direction (R_ii = 0: log 0)"}, {"growth.csv:log_r", "-inf: the layer maps are exactly singular along this direction (R_ii = 0: log 0)"},
     {"growth.csv:mu_running", "-inf: the layer maps are exactly singular along this direction (R_ii = 0: log 0)"}})};

}  // namespace
}  // namespace tokdyn
