// Presets mamba2-fig1 .. mamba2-fig6: the experiments of The Attention Within §VI on a real
// Mamba-2 block (checkpoint given by `--set checkpoint=DIR`, or a freshly initialised model of
// the same layout when none is given). Depth dynamics of 50 runs of 50 tokens over 200 layers;
// Gram metrics per depth; the interaction terms q_i(t) = C_i . B_i and their PE windows.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <set>

#include "tokdyn/analysis/pe_window.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/experiments/attention_within_checks.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "tokdyn/runtime/prompts.hpp"
#include "tokdyn/experiments/output_tables.hpp"
#include "tokdyn/experiments/pe_tables.hpp"
#include "tokdyn/experiments/taps.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/reports.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"
#include "tokdyn/models/mamba2/checkpoint.hpp"
#include "tokdyn/engine/observers.hpp"

namespace tokdyn {
// A named namespace (not an anonymous one): its using-directive must not reach the other files of
// a unity batch.
namespace preset_mamba2_figs {

namespace fs = std::filesystem;
using namespace mamba2;

enum class Sched { Cycle, Single, List, Random };

Sched sched_of(const std::string& s) {
  if (s == "cycle") return Sched::Cycle;
  if (s == "single") return Sched::Single;
  if (s == "list") return Sched::List;
  return Sched::Random;
}

/// What every mamba2 preset shares: the model, the initial tokens, the depth-run options.
struct Setup {
  Model model;
  bool synthetic = false;
  int runs = 0, len = 0;
  long depth = 0;
  std::vector<std::int64_t> ids;  // [runs*len]
  Update update = Update::Residual;
  float tau = 1.0f;
  std::vector<long> mixing_depths;
  std::vector<int> mixing_heads;
  Switches base;                  // the switches not set by a variant
  std::vector<long> taps;
  std::uint64_t random_seed = 0;
  std::vector<std::shared_ptr<const Layer>> layers;  // the model's blocks (shared by schedules)
};

struct Variant {
  std::string name;
  Switches sw;
};

Setup make_setup(const Params& P, RunContext& ctx) {
  Setup S;
  // Prompts (encoded by the checkpoint's or the given tokenizer) set the runs and the tokens.
  const std::optional<PromptTokens> prompts = prompt_tokens(P, P.get_string("checkpoint"));
  S.runs = prompts ? prompts->runs : static_cast<int>(P.get_int("runs"));
  S.len = prompts ? prompts->len : static_cast<int>(P.get_int("tokens"));
  S.depth = P.get_int("depth");
  S.model = mamba2_model(P);
  S.synthetic = P.get_string("checkpoint").empty() || !S.model.generated_by.empty();  // make-checkpoint's: not trained weights
  const Config& c = S.model.cfg;
  S.update = P.get_string("update") == "sphere" ? Update::Sphere : Update::Residual;
  S.tau = static_cast<float>(P.get_double("tau"));
  S.base.conv = P.get_bool("conv");
  S.base.silu_x = P.get_bool("silu_x");
  S.base.d_skip = P.get_bool("d_skip");
  S.base.mixer_norm = P.get_bool("mixer_norm");
  S.random_seed = static_cast<std::uint64_t>(P.get_int("random_seed"));
  S.taps = parse_taps(P.get_string("taps"), S.depth);
  for (long k : P.get_int_list("mixing"))
    if (k < 1 || k > S.depth)
      throw InputError(fmt::format("parameter 'mixing': expected layer steps in [1, depth = {}], got {}", S.depth, k));
  S.mixing_depths = P.get_int_list("mixing");
  for (long h : P.get_int_list("mixing_heads")) {
    if (h >= c.nheads()) throw InputError(fmt::format("parameter 'mixing_heads': the model has {} heads, got head {}", c.nheads(), h));
    S.mixing_heads.push_back(static_cast<int>(h));
  }
  if (P.get_string("schedule") == "single" && P.get_int("layer") >= c.n_layer)
    throw InputError(fmt::format("parameter 'layer': the model has {} layers (0..{}), got {}", c.n_layer, c.n_layer - 1, P.get_int("layer")));
  if (P.get_string("schedule") == "list") {
    if (P.get_int_list("layers").empty()) throw InputError("parameter 'layers': expected a non-empty list of layer indices for schedule=list");
    for (long l : P.get_int_list("layers"))
      if (l >= c.n_layer) throw InputError(fmt::format("parameter 'layers': the model has {} layers, got {}", c.n_layer, l));
  }

  // Initial tokens: given ids, or ids iid uniform in [0, vocab) (run r: stream (seed, r)).
  std::string drawn_from;
  S.ids = mamba2_token_ids(P, S.model, S.runs, S.len, ctx, drawn_from, prompts ? &*prompts : nullptr);

  ctx.notes["model"] = S.model.source;
  ctx.notes["synthetic_model"] = S.synthetic;
  ctx.notes["model_config"] = c.to_json();
  ctx.notes["model_config_layout"] = c.format;  // the config.json it was read from: state-spaces or hf
  ctx.notes["norm_epsilon"] = c.eps;            // of the three RMSNorms (HF layer_norm_epsilon; else 1e-5)
  ctx.notes["update"] = S.update == Update::Sphere
                            ? fmt::format("sphere: z <- pi(z + {} * mixer(RMSNorm(z))), tokens start on the unit sphere", S.tau)
                            : "residual: x <- x + mixer(RMSNorm(x)) (the reference's residual stream, fp32); metrics on x/|x|";
  ctx.notes["vocab"] = {{"embedding_rows", S.model.embedding.rows()},
                        {"real_vocab_size", c.vocab_size},
                        {"rule", c.vocab_rule},
                        {"ids_drawn_from", drawn_from}};
  ctx.notes["initial_tokens"] = prompts ? fmt::format("embedding rows of the token ids of {} (token_ids.npy)", drawn_from)
                                : P.get_string("token_ids").empty()
                                    ? "embedding rows of token ids iid uniform in [0, vocab); run r uses stream (seed, r); ids in token_ids.npy"
                                    : "embedding rows of the given token ids (token_ids.npy)";
  S.layers = share_layers(S.model);
  return S;
}

/// The blocks acting at each depth step under a schedule (schedule.hpp: the model's blocks as a
/// ListSchedule, or a fresh reference initialisation per step).
std::shared_ptr<const LayerSchedule> make_schedule(const Setup& S, Sched sched, const Params& P) {
  std::vector<long> index;
  switch (sched) {
    case Sched::Cycle: return std::make_shared<const ListSchedule<Layer>>(S.layers);
    case Sched::Single: index = {P.get_int("layer")}; break;
    case Sched::List: index = P.get_int_list("layers"); break;
    case Sched::Random: return random_layers(S.model.cfg, S.random_seed);
  }
  return std::make_shared<const ListSchedule<Layer>>(S.layers, index);
}

std::string describe_schedule(Sched s, const Params& P, int n_layer) {
  switch (s) {
    case Sched::Cycle: return fmt::format("cycle: depth step k uses block (k-1) mod {}", n_layer);
    case Sched::Single: return fmt::format("single: block {} at every depth step", P.get_int("layer"));
    case Sched::List: return fmt::format("list: blocks [{}] cycled", fmt::join(P.get_int_list("layers"), ", "));
    case Sched::Random:
      return fmt::format("random: every depth step k a freshly initialised block (reference initialisation, stream "
                         "(random_seed={}, 1, 1000000+k)), shared by runs and variants",
                         P.get_int("random_seed"));
  }
  return {};
}

struct PassResult {
  std::vector<std::string> names;
  std::vector<GramObserver> gram;
  std::vector<PeObserver> pe;
};

/// One depth pass over `variants` (labels `names`): one BlockMap per variant, run by the generic
/// driver in lock step so that variants share each layer (paired comparisons; a random layer is
/// drawn once). Observers: Gram metrics, state taps (taps/), q (PE windows), mixing matrices.
PassResult run_pass(const Setup& S, const std::shared_ptr<const LayerSchedule>& layers, const std::vector<Variant>& variants,
                    const std::vector<std::string>& names, int fig_run, RunContext& ctx, double p0, double p1, bool write_taps) {
  auto sim_timer = ctx.phase("simulate");
  const bool record_q = fig_run >= 0;  // q and its PE windows (fig_run: the run written to q.csv)
  const std::size_t n = variants.size();
  PassResult R;
  R.names = names;
  R.gram.resize(n);
  R.pe.assign(n, PeObserver(fig_run));
  std::vector<BlockMap> maps;
  std::vector<BatchF> states;
  std::vector<StateTapObserver> taps;
  std::vector<ArrayTapObserver> mixtaps;
  maps.reserve(n), states.reserve(n), taps.reserve(n), mixtaps.reserve(n);
  const MatF X0 = embed(S.model, S.ids, S.update);
  std::vector<Lane<BatchF>> lanes;
  for (std::size_t v = 0; v < n; ++v) {
    maps.emplace_back(S.model.cfg, variants[v].sw, layers, S.update, S.tau);
    states.push_back(BatchF{X0, S.runs, S.len});
    Lane<BatchF> lane{variants[v].name, &maps[v], &states[v], {&R.gram[v]}, {}};
    if (write_taps && !S.taps.empty()) {
      taps.emplace_back(std::make_shared<NpyFolderSink>(taps_dir(ctx.dir, names[v])), S.taps);
      lane.post.push_back(&taps.back());
    }
    if (record_q) maps[v].watch(&R.pe[v]);  // the model's tap "q" into the PE windows
    if (write_taps && !S.mixing_depths.empty() && !S.mixing_heads.empty()) {
      mixtaps.emplace_back(std::make_shared<NpyFolderSink>(ctx.dir / "mixing" / names[v]), "mixing", S.mixing_depths, S.mixing_heads);
      maps[v].watch(&mixtaps.back());
    }
    lanes.push_back(std::move(lane));
  }
  iterate_lanes(lanes, S.depth, [&](double f) {
    if (ctx.progress) ctx.progress(p0 + (p1 - p0) * f);
  });
  return R;
}

nlohmann::json switches_json(const Switches& s) {
  return {{"gate", s.gate}, {"silu_bc", s.silu_bc}, {"silu_x", s.silu_x}, {"conv", s.conv}, {"d_skip", s.d_skip},
          {"mixer_norm", s.mixer_norm}};
}

std::vector<ParamSpec> common_params(const std::string& sched, long layer, const std::string& variants_def,
                                     const std::vector<std::string>& variant_choices) {
  return {
      model_knob("mamba2", "checkpoint"),
      model_knob("mamba2", "size"),
      model_knob("mamba2", "model_seed"),
      p_int("runs", 50, "independent draws of the initial tokens", 1, 1000000),
      p_int("tokens", 50, "tokens per sequence (ell)", 1, 100000),
      p_int("depth", 200, "number of layer steps", 1, 10000000),
      p_int("seed", 0, "seed of the token-id draws", 0, kMaxSeed),
      model_knob("mamba2", "vocab"),
      model_knob("mamba2", "token_ids"),
      model_knob("mamba2", "prompt"),
      model_knob("mamba2", "prompts"),
      model_knob("mamba2", "tokenizer"),
      model_knob("mamba2", "add_special_tokens"),
      model_knob("mamba2", "update"),
      model_knob("mamba2", "tau", 1.0, "step size of the sphere update"),
      p_string("schedule", sched, "which block acts at each depth step", {"cycle", "single", "list", "random"}),
      p_int("layer", layer, "the block repeated by schedule=single", 0, 4095).when("schedule", {"single"}),
      p_int_list("layers", {}, "the blocks cycled by schedule=list", 0, 4095).when("schedule", {"list"}),
      p_int("random_seed", 1, "seed of the random blocks (schedule=random)", 0, kMaxSeed).when("schedule", {"random"}),
      p_string("variants", variants_def, "which variants to run", variant_choices),
      p_bool("conv", true, "causal depthwise conv (false: identity conv)"),
      p_bool("silu_x", true, "SiLU on the x channels after the conv"),
      p_bool("d_skip", true, "the D x skip term"),
      p_bool("mixer_norm", true, "the gated RMSNorm"),
      taps_param("[runs, tokens, d_model]"),
      p_int_list("mixing", {}, "write the mixing matrices at these layer steps to mixing/<variant>/layer_K.npy [runs, heads, tokens, tokens]", 1, 10000000),
      p_int_list("mixing_heads", {0}, "heads whose mixing matrices are written (with mixing)", 0, 4095).distinct_entries().when_not("mixing", {""}),
  };
}

/// Variants named in `variants` ("both" = all of `all`), with the switches each sets.
std::vector<std::pair<std::string, Switches>> pick(const std::string& sel, const std::vector<std::pair<std::string, Switches>>& all) {
  std::vector<std::pair<std::string, Switches>> out;
  for (const auto& v : all)
    if (sel == "both" || sel == v.first) out.push_back(v);
  return out;
}

/// Why the paper's numbers of Fig. `fig` do not apply to this run ("" when they do): the figure's
/// schedule, every part of the block on, trained weights for the trained-block figures, depth 200.
/// `random_rows`: Fig. 6's random-block configurations (no schedule or trained weights involved).
/// `any_size`: the reason for the paper's qualitative claims, which apply to a trained model of any
/// size (the same rules without "the paper's model is mamba2-130m").
std::string paper_values_na(const Setup& S, const Params& P, int fig, bool random_rows = false, bool any_size = false) {
  const bool trained = !random_rows && (fig == 1 || fig == 2 || fig == 4 || fig == 6);
  const char* sched = fig == 2 ? "single" : (fig == 3 || fig == 5 ? "random" : "cycle");
  if (!random_rows && P.get_string("schedule") != sched)
    return fmt::format("the paper's Fig. {} uses schedule={}; this run used schedule={}", fig, sched, P.get_string("schedule"));
  if (!any_size && (S.model.cfg.d_model != 768 || S.model.cfg.n_layer != 24))
    return fmt::format("the paper's model is mamba2-130m (d_model 768, 24 layers); this run's has d_model {}, {} layers",
                       S.model.cfg.d_model, S.model.cfg.n_layer);
  if (!S.base.conv || !S.base.silu_x || !S.base.d_skip || !S.base.mixer_norm)
    return "the paper's block has its conv, SiLU on x, D skip and gated norm on; this run switched one off";
  return attention_within::not_applicable_reason(S.depth, trained, !S.synthetic);
}

/// The paper's reported numbers of Figs. 1-5 for the variants run (checks.csv).
void paper_checks(const Setup& S, const Params& P, RunContext& ctx, int fig, const PassResult& R) {
  namespace aw = attention_within;
  CheckTable checks(ctx.dir / "checks.csv");
  const std::string why = paper_values_na(S, P, fig);
  const std::string why_q = paper_values_na(S, P, fig, false, true);
  auto find = [&](const char* name) -> std::ptrdiff_t {
    for (std::size_t v = 0; v < R.names.size(); ++v)
      if (R.names[v] == name) return static_cast<std::ptrdiff_t>(v);
    return -1;
  };
  auto gram = [&](const char* name) -> const GramObserver* {
    const auto v = find(name);
    return v < 0 ? nullptr : &R.gram[static_cast<std::size_t>(v)];
  };
  switch (fig) {
    case 1: aw::fig1_checks(checks, gram("no_gate"), gram("gate"), why, why_q); break;
    case 2:
      if (const GramObserver* g = gram("no_gate")) aw::fig2_checks(checks, *g, why);
      break;
    case 3: aw::fig3_checks(checks, gram("silu"), gram("no_silu"), why); break;
    default:
      if (const auto v = find("silu"); v >= 0)
        aw::fig45_checks(checks, R.pe[static_cast<std::size_t>(v)].q(), static_cast<int>(P.get_int("fig_run")),
                         static_cast<int>(P.get_int("fig_token")), fig == 5, why, why_q);
  }
  checks.report(ctx, fmt::format("mamba2-fig{}", fig));
  ctx.notes["paper_values"] = aw::paper_values(fig);
}

/// The paper's value of Fig. `fig` for `variant` (`key`: "lambda1", "r" or "" for a T*), as the
/// paper states it: "~0.8", "> 0.95" (Fig. 2's lambda_bar_1), "past 14" (Fig. 3's r without SiLU),
/// "35", "none"; from attention_within::paper_values, the one place the numbers are defined.
std::string paper_text(int fig, const std::string& variant, const std::string& key) {
  const nlohmann::json pv = attention_within::paper_values(fig);
  if (key.empty()) {
    const nlohmann::json& v = pv.contains(variant) ? pv.at(variant) : pv.at("t_star");
    return v.is_null() ? std::string("none") : fmt::format("{}", v.get<int>());
  }
  if (!pv.contains(variant)) return {};
  const double v = pv.at(variant).at(key).get<double>();
  if (fig == 2 && key == "lambda1") return fmt::format("> {}", v);
  if (fig == 3 && variant == "no_silu" && key == "r") return fmt::format("past {}", v);
  return fmt::format("~{}", v);
}

/// T* of eq. (23) as a summary value (NaN: none).
double t_star_value(const std::optional<int>& t) { return t ? static_cast<double>(*t) : kNaN; }

/// Scalar summaries of Figs. 1-5 (see mamba2_outputs): plateau (Figs. 1-2: mean of the run-mean
/// over the second half of the layers, 101-200 at the paper's depth) or end values (Fig. 3) of
/// lambda_bar_1 and r per variant; T* of the drawn token (Figs. 4-5).
void mamba2_summaries(const Params& P, RunContext& ctx, int fig, long depth, const PassResult& R) {
  namespace aw = attention_within;
  auto gram = [&](const std::string& name) -> const GramObserver* {
    for (std::size_t v = 0; v < R.names.size(); ++v)
      if (R.names[v] == name) return &R.gram[v];
    return nullptr;
  };
  if (fig <= 3) {
    const std::vector<std::string> names = fig == 1 ? std::vector<std::string>{"no_gate", "gate"}
                                           : fig == 2 ? std::vector<std::string>{"no_gate"}
                                                      : std::vector<std::string>{"silu", "no_silu"};
    const std::string what = fig == 3 ? "end" : "plateau";
    for (const std::string& v : names) {
      const GramObserver* g = gram(v);
      for (bool part : {false, true}) {
        double x = kNaN;
        if (g) x = fig == 3 ? aw::run_mean_at(*g, depth, part) : aw::run_mean_over(*g, depth / 2 + 1, depth, part);
        ctx.summary(fmt::format("{}_{}_{}", part ? "r" : "lambda1", what, v), x, paper_text(fig, v, part ? "r" : "lambda1"));
      }
    }
    return;
  }
  // Figs. 4-5: the variant drawn (silu unless variants = no_silu).
  const std::string shown = P.get_string("variants") == "no_silu" ? "no_silu" : "silu";
  const int run = static_cast<int>(P.get_int("fig_run")), token = static_cast<int>(P.get_int("fig_token"));
  std::size_t vi = 0;
  while (vi < R.names.size() && R.names[vi] != shown) ++vi;
  const QRecord& q = R.pe[vi].q();
  const PeReadings rd = pe_readings(q);
  double lo = kNaN, hi = kNaN;
  for (const auto& runs_q : rd.t_star) {
    const std::optional<int>& t = runs_q[static_cast<std::size_t>(token - 1)];
    if (!t) continue;
    lo = std::isnan(lo) ? *t : std::min(lo, static_cast<double>(*t));
    hi = std::isnan(hi) ? *t : std::max(hi, static_cast<double>(*t));
  }
  ctx.summary("t_star_token", t_star_value(rd.t_star[static_cast<std::size_t>(run)][static_cast<std::size_t>(token - 1)]),
              shown == "silu" ? paper_text(fig, "t_star", "") : std::string());
  ctx.summary("t_star_token_min", lo);
  ctx.summary("t_star_token_max", hi);
  ctx.summary("t_star_text", t_star_value(rd.text.t_star));
}

/// Figs. 1-3 (and 4-5): one schedule, one or two variants.
void run_single_schedule(const Params& P, RunContext& ctx, const std::vector<std::pair<std::string, Switches>>& all,
                         bool pe, int fig) {
  Setup S = make_setup(P, ctx);
  const Sched sched = sched_of(P.get_string("schedule"));
  const auto chosen = pick(P.get_string("variants"), all);
  std::vector<Variant> vars;
  std::vector<std::string> names;
  nlohmann::json vj = nlohmann::json::object();
  for (const auto& [name, sw] : chosen) {
    Switches s = sw;
    s.conv = S.base.conv, s.silu_x = S.base.silu_x, s.d_skip = S.base.d_skip, s.mixer_norm = S.base.mixer_norm;
    vars.push_back({name, s});
    names.push_back(name);
    vj[name] = switches_json(s);
  }
  int fig_run = 0;
  if (pe) {
    fig_run = static_cast<int>(P.get_int("fig_run"));
    if (fig_run >= S.runs) throw InputError(fmt::format("parameter 'fig_run': expected a run index < runs ({}), got {}", S.runs, fig_run));
    if (P.get_int("fig_token") > S.len)
      throw InputError(fmt::format("parameter 'fig_token': expected a token index <= tokens ({}), got {}", S.len, P.get_int("fig_token")));
    if (P.get_int("window") > S.depth)
      throw InputError(fmt::format("parameter 'window': expected a window <= depth ({}), got {}", S.depth, P.get_int("window")));
  }
  const PassResult R = run_pass(S, make_schedule(S, sched, P), vars, names, pe ? fig_run : -1, ctx, 0.0, 1.0, true);
  std::vector<std::pair<std::string, const Observer*>> mv, qv;
  for (std::size_t v = 0; v < vars.size(); ++v) {
    mv.emplace_back(names[v], &R.gram[v]);
    qv.emplace_back(names[v], &R.pe[v]);
  }
  write_tables(ctx.dir, mv);
  if (pe) {
    write_tables(ctx.dir, qv);
    ctx.notes["fig_run"] = fig_run;
    ctx.notes["fig_token"] = P.get_int("fig_token");
    ctx.notes["window"] = P.get_int("window");
    ctx.notes["q"] = "q_i(t) = C_i . B_i (group 0) exactly as the block uses them at layer t (post-conv, post-SiLU when on), "
                     "for the state entering layer t";
  }
  ctx.notes["schedule"] = describe_schedule(sched, P, S.model.cfg.n_layer);
  ctx.notes["variants"] = vj;
  paper_checks(S, P, ctx, fig, R);
  mamba2_summaries(P, ctx, fig, S.depth, R);
}

Switches sw_gate(bool gate, bool silu_bc) {
  Switches s;
  s.gate = gate;
  s.silu_bc = silu_bc;
  return s;
}

std::vector<ParamSpec> with(std::vector<ParamSpec> a, std::vector<ParamSpec> b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<ParamSpec> pe_params(long window) {
  return {p_int("fig_run", 0, "run shown in q.csv and the figure", 0, 1000000),
          p_int("fig_token", 1, "token (1-based) shown in the figure", 1, 100000),
          p_int("window", window, "window length T of the middle panel", 1, 10000000)};
}

/// Memory and work of a Mamba-2 depth run, from the model's config (the checkpoint's, or the named
/// size) and the batch: weights in fp32 (plus the mapped file while converting), the activations of
/// runs x tokens per block, the per-head L x L SSD matrices.
ResourceEstimate mamba2_estimate(const Params& P, double configs) {
  const std::optional<Config> cfg = mamba2_config(P);
  if (!cfg) return {};  // the loader reports what is missing
  const Config& c = *cfg;
  const bool ck = !P.get_string("checkpoint").empty();
  const double d = c.d_model, di = c.d_inner(), dip = c.d_in_proj(), H = c.nheads(), V = c.vocab_padded();
  const double per_layer = dip * d + di * d + (di + 2.0 * c.ngroups * c.d_state) * (c.d_conv + 1) + 3.0 * H + di + d;
  const double weights = 4.0 * (c.n_layer * per_layer + V * d + d);
  const double R = static_cast<double>(P.get_int("runs")), L = static_cast<double>(P.get_int("tokens"));
  const double depth = static_cast<double>(P.get_int("depth"));
  const double act = 4.0 * R * L * (2.0 * dip + 3.0 * di + 6.0 * d) + 4.0 * 4.0 * L * L * 8.0;
  const double bytes = weights * (ck ? 2.0 : 1.0) + act + 64e6;
  const double flops = configs * depth * (2.0 * R * L * (d * dip + di * d) + 2.0 * R * H * L * L * (2.0 * c.d_state + c.headdim));
  // fp32 products on every thread at about 3e10 FLOP/s each (82 % of the 2-thread SGEMM peak when
  // idle: docs/speed.md), the block's element-wise kernels included.
  cost::Work w;
  w.add(flops, 3e10, true);
  return w.estimate(bytes, fmt::format("a {}-layer d_model {} model, runs x tokens x d_in_proj activations", c.n_layer, c.d_model));
}

using Values = std::vector<std::pair<std::string, std::string>>;
const Values kGateVariants = {{"gate", "output gate on (SiLU on B/C)"}, {"no_gate", "output gate off (SiLU on B/C)"}};
const Values kSiluVariants = {{"silu", "SiLU on the B/C branches, gate off"}, {"no_silu", "no SiLU on B/C, gate off"}};

/// What mamba2-fig<fig> writes (fig 45: Figs. 4 and 5, whose figure is named after the schedule).
OutputDecl mamba2_outputs(int fig, const Values& variants) {
  const ColumnDecl variant = variant_column(variants);
  OutputDecl o;
  o.tables = {metrics_table(variant), metrics_runs_table(variant)};
  if (fig >= 4)
    for (TableDecl& t : pe_tables(variant)) o.tables.push_back(std::move(t));
  o.tables.push_back(checks_table());
  o.arrays = {{"token_ids.npy", "int64 [runs, tokens]: the token ids whose embeddings are the initial tokens"},
              {"taps/<variant>/layer_<K>.npy",
               "float32 [runs, tokens, d_model]: the state after layer step K (0: the embedded start; update=residual: the residual "
               "stream x, sphere: z)", "taps lists K"},
              {"mixing/<variant>/layer_<K>.npy",
               "float32 [runs, heads, tokens, tokens]: the SSD mixing matrices of the heads mixing_heads at layer step K, entry "
               "[t, s] = (C_t . B_s) exp(A sum dt) dt_s for s <= t, 0 above", "mixing lists K"}};
  const std::string half = "mean of the run-mean over layers depth/2+1..depth (101-200 at the paper's depth 200)";
  const std::string not_run = " (empty: the variant was not run)";
  // "lambda1_<key>_<v>", "r_<key>_<v>": lambda_bar_1 and r of variant v, `what` says how they are read.
  auto plateau = [&](const std::string& v, const std::string& key, const std::string& what) {
    return std::vector<SummaryDecl>{{"lambda1_" + key + "_" + v, "lambda_bar_1 of " + v + ": " + what + not_run},
                                    {"r_" + key + "_" + v, "participation ratio r of " + v + ": " + what + not_run}};
  };
  auto add = [&](std::vector<SummaryDecl> s) { o.summaries.insert(o.summaries.end(), s.begin(), s.end()); };
  const std::string none = "; empty: no admissible window";
  switch (fig) {
    case 1:
      add(plateau("no_gate", "plateau", half));
      add(plateau("gate", "plateau", half));
      break;
    case 2: add(plateau("no_gate", "plateau", half)); break;
    case 3:
      add(plateau("silu", "end", "run-mean at the last layer (the paper's layer 200)"));
      add(plateau("no_silu", "end", "run-mean at the last layer (the paper's layer 200)"));
      break;
    case 6:
      for (const auto& v : variants)
        o.summaries.push_back({"t_star_" + v.first, "T* of (23), largest over tokens and runs (the text's reading), " + v.first + none,
                               "layers"});
      break;
    default:
      o.summaries = {{"t_star_token", "T* of (23) of token fig_token of run fig_run, the variant drawn (silu unless variants = no_silu)" + none,
                      "layers"},
                     {"t_star_token_min", "smallest T* over runs of token fig_token (the paper's run is one it does not identify); "
                      "empty: no run has an admissible window for that token", "layers"},
                     {"t_star_token_max", "largest T* over runs of token fig_token; empty: no run has one", "layers"},
                     {"t_star_text", "T* largest over tokens and runs (the text's reading; empty: some token of some run has none)", "layers"}};
  }
  // The figures python/tokdyn_plot/metrics.py draws.
  switch (fig) {
    case 1: o.figures = {{"fig1_metrics.png", "Fig. 1: lambda_bar_1 and r against depth, gate on vs off, with the paper's values"}}; break;
    case 2: o.figures = {{"fig2_metrics.png", "Fig. 2: lambda_bar_1 and r against depth for one block repeated, with the paper's values"}}; break;
    case 3: o.figures = {{"fig3_metrics.png", "Fig. 3: lambda_bar_1 and r against depth, SiLU on vs off, with the paper's values"}}; break;
    case 6:
      o.figures = {{"fig6_pe_windows.png", "Fig. 6: worst-case window average against T per variant, with the paper's T*"},
                   {"metrics.png", "lambda_bar_1 and r against depth of the four variants"}};
      break;
    default:
      o.figures = {{"fig4_pe_token.png", "Fig. 4: sign of q, window average at T = window and W(T) of token fig_token of run fig_run",
                    "schedule != random"},
                   {"fig5_pe_token.png", "Fig. 5: the same panels", "schedule = random"},
                   {"metrics.png", "lambda_bar_1 and r against depth"}};
  }
  return o;
}

double variant_count(const Params& P) {
  const std::string v = P.get_string("variants");
  return v == "both" || v == "all" ? 2.0 : 1.0;
}

const ExperimentRegistration reg1{with_outputs(with_smoke(Experiment{
    "mamba2-fig1",
    "Attention Within Fig. 1: Mamba-2 blocks cycled to depth 200, SiLU on, output gate on vs off",
    common_params("cycle", 0, "both", {"both", "gate", "no_gate"}),
    [](const Params& P, RunContext& ctx) {
      run_single_schedule(P, ctx, {{"gate", sw_gate(true, true)}, {"no_gate", sw_gate(false, true)}}, false, 1);
    },
    "mamba2-fig1",
    [](const Params& P) { return mamba2_estimate(P, variant_count(P)); }}, {{"size", "tiny"}, {"runs", "2"}, {"tokens", "4"}, {"depth", "4"}}), mamba2_outputs(1, kGateVariants))};

const ExperimentRegistration reg2{with_outputs(with_smoke(Experiment{
    "mamba2-fig2",
    "Attention Within Fig. 2: one Mamba-2 block repeated (layer=0 by default), gate off",
    common_params("single", 0, "no_gate", {"no_gate", "gate", "both"}),
    [](const Params& P, RunContext& ctx) {
      run_single_schedule(P, ctx, {{"no_gate", sw_gate(false, true)}, {"gate", sw_gate(true, true)}}, false, 2);
    },
    "mamba2-fig2",
    [](const Params& P) { return mamba2_estimate(P, variant_count(P)); }}, {{"size", "tiny"}, {"runs", "2"}, {"tokens", "4"}, {"depth", "4"}}), mamba2_outputs(2, kGateVariants))};

const ExperimentRegistration reg3{with_outputs(with_smoke(Experiment{
    "mamba2-fig3",
    "Attention Within Fig. 3: freshly initialised Mamba-2 blocks redrawn at every layer, gate off, SiLU on B/C vs off",
    common_params("random", 0, "both", {"both", "silu", "no_silu"}),
    [](const Params& P, RunContext& ctx) {
      run_single_schedule(P, ctx, {{"silu", sw_gate(false, true)}, {"no_silu", sw_gate(false, false)}}, false, 3);
    },
    "mamba2-fig3",
    [](const Params& P) { return mamba2_estimate(P, variant_count(P)); }}, {{"size", "tiny"}, {"runs", "2"}, {"tokens", "4"}, {"depth", "4"}}), mamba2_outputs(3, kSiluVariants))};

const ExperimentRegistration reg4{with_outputs(with_smoke(Experiment{
    "mamba2-fig4",
    "Attention Within Fig. 4: q_1(t) along one trajectory through the cycled blocks, gate off, its windows and T*",
    with(common_params("cycle", 0, "silu", {"silu", "no_silu", "both"}), pe_params(8)),
    [](const Params& P, RunContext& ctx) {
      run_single_schedule(P, ctx, {{"silu", sw_gate(false, true)}, {"no_silu", sw_gate(false, false)}}, true, 4);
    },
    "mamba2-fig45",
    [](const Params& P) { return mamba2_estimate(P, variant_count(P)); }}, {{"size", "tiny"}, {"runs", "2"}, {"tokens", "4"}, {"depth", "8"}, {"window", "4"}}), mamba2_outputs(4, kSiluVariants))};

const ExperimentRegistration reg5{with_outputs(with_smoke(Experiment{
    "mamba2-fig5",
    "Attention Within Fig. 5: q_1(t) along one trajectory through random blocks redrawn per layer, gate off",
    with(common_params("random", 0, "silu", {"silu", "no_silu", "both"}), pe_params(34)),
    [](const Params& P, RunContext& ctx) {
      run_single_schedule(P, ctx, {{"silu", sw_gate(false, true)}, {"no_silu", sw_gate(false, false)}}, true, 5);
    },
    "mamba2-fig45",
    [](const Params& P) { return mamba2_estimate(P, variant_count(P)); }}, {{"size", "tiny"}, {"runs", "2"}, {"tokens", "4"}, {"depth", "8"}, {"window", "4"}}), mamba2_outputs(5, kSiluVariants))};

// Fig. 6: four configurations (trained / random blocks) x (SiLU on B/C on / off), gate off.
void run_fig6(const Params& P, RunContext& ctx) {
  Setup S = make_setup(P, ctx);
  auto variants = [&](bool) {
    std::vector<Variant> v;
    for (bool silu : {true, false}) {
      Switches s = sw_gate(false, silu);
      s.conv = S.base.conv, s.silu_x = S.base.silu_x, s.d_skip = S.base.d_skip, s.mixer_norm = S.base.mixer_norm;
      v.push_back({silu ? "silu" : "no_silu", s});
    }
    return v;
  };
  const Sched trained = sched_of(P.get_string("schedule"));
  if (trained == Sched::Random) throw InputError("parameter 'schedule': Fig. 6 compares the model's blocks with random ones; expected cycle, single or list");
  const int fig_run = static_cast<int>(P.get_int("fig_run"));
  const PassResult A = run_pass(S, make_schedule(S, trained, P), variants(true), {"mamba2_silu", "mamba2_no_silu"}, fig_run, ctx, 0.0,
                                0.5, true);
  const PassResult B = run_pass(S, make_schedule(S, Sched::Random, P), variants(false), {"random_silu", "random_no_silu"}, fig_run,
                                ctx, 0.5, 1.0, true);  // taps and mixing of every variant, random ones too
  std::vector<std::pair<std::string, const Observer*>> mv, qv;
  for (const PassResult* R : {&A, &B})
    for (std::size_t v = 0; v < R->names.size(); ++v) {
      mv.emplace_back(R->names[v], &R->gram[v]);
      qv.emplace_back(R->names[v], &R->pe[v]);
    }
  write_tables(ctx.dir, mv);
  write_tables(ctx.dir, qv);
  {
    namespace aw = attention_within;
    CheckTable checks(ctx.dir / "checks.csv");
    const std::string why_trained = paper_values_na(S, P, 6);
    const std::string why_random = paper_values_na(S, P, 6, true);
    const std::optional<int> t_silu = pe_readings(A.pe[0].q()).text.t_star;
    const std::string why_trained_q = paper_values_na(S, P, 6, false, true);
    const std::string why_random_q = paper_values_na(S, P, 6, true, true);
    aw::fig6_checks(checks, "mamba2_silu", A.pe[0].q(), 0, why_trained);
    aw::fig6_checks(checks, "mamba2_no_silu", A.pe[1].q(), t_silu ? *t_silu : 0, why_trained, why_trained_q);
    aw::fig6_checks(checks, "random_silu", B.pe[0].q(), 0, why_random);
    aw::fig6_checks(checks, "random_no_silu", B.pe[1].q(), 0, why_random, why_random_q);
    checks.report(ctx, "mamba2-fig6");
    ctx.notes["paper_values"] = aw::paper_values(6);
  }
  for (const PassResult* R : {&A, &B})
    for (std::size_t v = 0; v < R->names.size(); ++v)
      ctx.summary("t_star_" + R->names[v], t_star_value(pe_readings(R->pe[v].q()).text.t_star), paper_text(6, R->names[v], ""));
  ctx.notes["schedule_trained"] = describe_schedule(trained, P, S.model.cfg.n_layer);
  ctx.notes["schedule_random"] = describe_schedule(Sched::Random, P, S.model.cfg.n_layer);
  ctx.notes["gate"] = false;
  ctx.notes["q"] = "q_i(t) = C_i . B_i (group 0) exactly as the block uses them at layer t, for the state entering layer t";
}

std::vector<ParamSpec> fig6_params() {
  auto v = common_params("cycle", 0, "all", {"all"});
  v.push_back(p_int("fig_run", 0, "run written to q.csv", 0, 1000000));
  return v;
}

const ExperimentRegistration reg6{with_outputs(with_smoke(Experiment{
    "mamba2-fig6",
    "Attention Within Fig. 6: worst-case window averages and T* for trained/random blocks x SiLU on/off",
    fig6_params(),
    [](const Params& P, RunContext& ctx) {
      if (P.get_int("fig_run") >= P.get_int("runs"))
        throw InputError(fmt::format("parameter 'fig_run': expected a run index < runs ({}), got {}", P.get_int("runs"), P.get_int("fig_run")));
      run_fig6(P, ctx);
    },
    "mamba2-fig6",
    [](const Params& P) { return mamba2_estimate(P, 2.0 * variant_count(P)); }}, {{"size", "tiny"}, {"runs", "2"}, {"tokens", "4"}, {"depth", "4"}}),
    mamba2_outputs(6, {{"mamba2_silu", "the model's blocks (schedule), SiLU on B/C, gate off"},
                       {"mamba2_no_silu", "the model's blocks (schedule), no SiLU on B/C, gate off"},
                       {"random_silu", "freshly initialised blocks redrawn per layer, SiLU on B/C, gate off"},
                       {"random_no_silu", "freshly initialised blocks redrawn per layer, no SiLU on B/C, gate off"}}))};

}  // namespace preset_mamba2_figs
}  // namespace tokdyn
