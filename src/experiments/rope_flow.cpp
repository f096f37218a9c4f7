// Preset rope-flow: the RoPE self-attention dynamics on (S^{d-1})^n for any configuration — the
// flow (5) by retracted RK4 or an adaptive embedded method, or the discrete normalised residual
// step (3) — with the consensus observables along the way. The general-purpose entry point of the
// RoPE model (the rope-fig* presets reproduce the paper's specific artifacts).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "tokdyn/analysis/rope_sphere.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "tokdyn/experiments/output_tables.hpp"
#include "tokdyn/experiments/taps.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/reports.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/engine/observers.hpp"

namespace tokdyn {
// A named namespace (not an anonymous one): its using-directive must not reach the other files of
// a unity batch.
namespace preset_rope_flow {

using namespace rope;

void run_rope_flow(const Params& P, RunContext& ctx) {
  const int n = static_cast<int>(P.get_int("n"));
  const int runs = static_cast<int>(P.get_int("runs"));
  const AttentionParams AP = rope_attention_params(P, n, "rope-flow");
  const double t_end = P.get_double("t_end");
  const long outputs = P.get_int("outputs");
  const std::string integ = P.get_string("integrator");

  // Initial tokens: run r from stream (seed, r): uniform on the sphere, or in a cap around e_1.
  Batch Z = sphere_start(static_cast<std::uint64_t>(P.get_int("seed")), runs, n, AP.d, P.get_string("init") == "hemisphere");

  // consensus_dist: distance to the attention consensus manifold {(x, ..., x)} (RoPE §1.9), not the
  // SSM paper's axis-aligned sets (a full collapse off the axes would read as far from consensus).
  GramObserver gram(ConsensusSet::Diagonal);
  ctx.notes["consensus_dist"] = "distance of the normalised tokens to {(x, ..., x) : |x| = 1}: sqrt(2 n - 2 |sum_i zhat_i|)";
  const double a = softmax_floor(AP.beta, n);
  RowVec e1 = RowVec::Zero(AP.d);
  e1[0] = 1.0;
  GeometryObserver g(e1);
  std::vector<Observer*> obs{&gram, &g};
  double max_h_rate = NAN;  // discrete step (3): h x the largest local rate of the flow
  bool max_h_rate_seen = false;
  if (integ == "discrete") {
    // The step (3) is the model itself (a normalised residual layer), not an approximation that
    // could be refined: its step is measured against the flow's local rate and reported. It
    // follows the flow (5) only while h x rate stays inside forward Euler's region (<= 2 on the
    // real axis).
    const double h = P.get_double("h");
    const double layers = checked_step_count("h", h, 0.0, t_end, "the discrete step (3)");
    const long depth = std::max(1L, static_cast<long>(std::llround(layers)));
    AttentionStep step(AP, n, h);
    const AttentionField field(AP, n);
    Tokens v;
    double max_rate = 0.0;
    // Observe every `stride` layers (layer k at time k h); the local rate is measured there too.
    const long stride = std::max(1L, depth / outputs);
    CallbackObserver every([&](double k, const Batch& B) {
      const long kk = static_cast<long>(k);
      if (kk % stride == 0 || kk == depth) {
        gram.observe(kk * h, B);
        g.observe(kk * h, B);
        max_rate = std::max(max_rate, local_rate(field, kk * h, B, true, kk == 0 ? 16 : 4, v));
      }
    });
    // State taps of the depth model (3): taps/flow/layer_K.npy [runs, tokens, d], layer 0 the start.
    const std::vector<long> tap_layers = parse_taps(P.get_string("taps"), depth);
    StateTapObserver taps(std::make_shared<NpyFolderSink>(taps_dir(ctx.dir, "flow")), tap_layers);
    std::vector<Observer*> post{&every};
    if (!tap_layers.empty()) post.push_back(&taps);
    auto t = ctx.phase("simulate");
    iterate(step, Z, depth, post, {}, ctx.progress);
    const bool inside = h * max_rate <= kEulerRealAxisLimit;
    max_h_rate = h * max_rate;
    max_h_rate_seen = true;
    ctx.notes["step_check"] = {{"method", "discrete normalised residual step (3): a retracted forward-Euler step of the flow (5)"},
                               {"policy", "report (the step is the model's h)"},
                               {"h_requested", h}, {"layers", depth}, {"max_local_rate", max_rate}, {"max_h_rate", h * max_rate},
                               {"bound_h_rate", kEulerRealAxisLimit}, {"inside", inside}, {"action", "reported"}};
    if (!inside)
      ctx.warnings.push_back(fmt::format(
          "parameter 'h' = {}: the discrete step (3) is h x rate = {:.3g} outside forward Euler's region (<= 2) for the "
          "flow's local rate {:.4g}: the layers are the discrete model's and do not follow the flow (5); use "
          "--set h={:.2g} or smaller to follow it",
          h, h * max_rate, max_rate, 0.5 * kEulerRealAxisLimit / max_rate));
  } else {
    AttentionField F(AP, n);
    if (integ == "rk4") {
      // A general-purpose preset: one default step cannot suit every n, beta and frequency set,
      // so an unstable step is refined (halved until inside RK4's region) and reported.
      Rk4Options o;
      o.h = P.get_double("h");
      o.guard.policy = StepPolicy::Refine;
      StepReport rep;
      o.report = &rep;
      integrate_rk4(F, Z, 0.0, t_end, o, obs, t_end / static_cast<double>(outputs), ctx.progress);
      ctx.notes["step_check"] = step_report_json(rep, StepPolicy::Refine);
      if (rep.refined()) ctx.warnings.push_back(step_refined_note(rep, "h"));
    } else {
      AdaptiveOptions o;
      o.method = integ;
      o.rtol = P.get_double("rtol");
      o.atol = P.get_double("atol");
      const AdaptiveStats st = integrate_adaptive(F, Z, 0.0, t_end, o, obs, t_end / static_cast<double>(outputs), ctx.progress);
      ctx.notes["adaptive_steps"] = {{"accepted", st.accepted}, {"rejected", st.rejected}};
    }
  }
  write_tables(ctx.dir, {{"flow", &gram}});
  {
    CsvWriter geo = ctx.table("geometry.csv");
    for (const GeometryObserver::Row& row : g.rows())
      geo.cell(row.t).cell(2.0 * a * row.t).cell(row.run).cell(row.min_inner_c).cell(row.hemisphere_min).end_row();
  }
  ctx.notes["softmax_floor_a"] = a;
  double l1 = NAN, l1_sd = NAN, pr = NAN, pr_sd = NAN;
  if (!gram.times().empty()) {
    gram.lambda1_stats(gram.times().size() - 1, l1, l1_sd);
    gram.pr_stats(gram.times().size() - 1, pr, pr_sd);
  }
  ctx.summary("softmax_floor_a", a);
  ctx.summary("lambda1_final", l1);
  ctx.summary("participation_final", pr);
  ctx.summary("min_inner_c_final", g.last_min_c());
  if (max_h_rate_seen) ctx.summary("max_h_rate", max_h_rate);
  ctx.notes["frequencies"] = AP.plane_frequencies();
  ctx.notes["model"] = "dx_i/dt = P_perp(x_i) sum_j A_ij V x_j, A = softmax(beta <R_{p_i} Q x_i, R_{p_j} K x_j>) per head (Q = K = V = I)";
}

OutputDecl rope_flow_outputs() {
  OutputDecl o;
  const ColumnDecl variant = variant_column({{"flow", "the run's dynamics: the flow (5), or the discrete step (3) when integrator = discrete"}});
  o.tables = {
      {"geometry.csv", "one run at one observation time: the pairwise and hemisphere observables of its tokens",
       {real("t", "time (discrete step (3): layer k at t = k h)"),
        real("tau", "floor-scaled time tau = 2 a_{beta,n} t (a_{beta,n}: the softmax floor (7))"),
        index("run", "run (independent initial state, stream (seed, run))", 0),
        real("min_inner_c", "c = min_{i<j} <x_i, x_j>: smallest pairwise inner product of the tokens (1: consensus)"),
        real("hemisphere_min_e1", "m = min_i <x_i, e_1>: smallest first coordinate (>= 0: all tokens in the hemisphere of e_1)")}},
      metrics_table(variant), metrics_runs_table(variant)};
  o.arrays = {{"taps/<variant>/layer_<K>.npy", "float64 [runs, tokens, d]: the state after layer K of the step (3) (0: the start)",
               "integrator = discrete and taps lists K"}};
  o.summaries = {{"softmax_floor_a", "the softmax floor a_{beta,n} = 1/(1 + (n-1) e^{2 beta}) (7): the rate scale tau = 2 a t"},
                 {"lambda1_final", "lambda1 at the last observation (t_end), mean over runs (1: consensus)"},
                 {"participation_final", "participation ratio at the last observation, mean over runs (1: rank one)"},
                 {"min_inner_c_final", "smallest pairwise inner product c at the last observation, smallest over runs"},
                 {"max_h_rate", "h x the largest local rate of the flow (5) at the observations: the discrete step (3) follows the "
                                "flow while <= 2 (forward Euler's real-axis limit)", "", "integrator = discrete"}};
  o.figures = {{"flow_metrics.png", "lambda1 and participation ratio (mean over runs) and c(t) of every run against t"}};
  return o;
}

const ExperimentRegistration reg_rope_flow{with_outputs(with_smoke(Experiment{
    "rope-flow",
    "RoPE self-attention dynamics on spheres for any n, d, beta, frequencies, heads, mask: consensus observables over time",
    {p_int("n", 16, "tokens", 1, 1 << 16),  // n < 2 is refused with the model's own message
     model_knob("rope", "d"),
     model_knob("rope", "beta"),
     model_knob("rope", "freqs", std::vector<double>{}, "RoPE frequencies per plane (empty: standard 10000^(-2l/d))"),
     model_knob("rope", "positions", std::vector<double>{}, "token positions (empty: 0..n-1)"),
     model_knob("rope", "rope"),
     model_knob("rope", "causal"),
     model_knob("rope", "heads", 1L, "attention heads (consecutive coordinate blocks)"),
     model_knob("rope", "init"),
     p_int("runs", 4, "independent initial states", 1, 1000000),
     p_int("seed", 0, "seed of the initial states", 0, kMaxSeed),
     p_double("t_end", 20.0, "final time", 0.0, {}, true),
     p_string("integrator", "rk4", "retracted RK4, adaptive (Boost.Odeint) or the discrete step (3)",
              {"rk4", "dopri5", "cash_karp54", "fehlberg78", "discrete"}),
     p_double("h", 1e-2, "RK4 step, or the residual step h of (3)", 0.0, {}, true).when("integrator", {"rk4", "discrete"}),
     p_double("rtol", 1e-8, "relative tolerance (adaptive; >= 1e-14, below which steps stall in double precision)", 1e-14)
         .when("integrator", {"dopri5", "cash_karp54", "fehlberg78"}),
     p_double("atol", 1e-10, "absolute tolerance (adaptive)", 0.0, {}, true).when("integrator", {"dopri5", "cash_karp54", "fehlberg78"}),
     p_int("outputs", 200, "output times", 1, 1000000),
     taps_param("[runs, tokens, d] float64 (integrator = discrete: the layers of the step (3), up to round(t_end / h))")
         .when("integrator", {"discrete"})},
    run_rope_flow,
    "rope-flow",
    [](const Params& P) {
      const double n = static_cast<double>(P.get_int("n")), d = static_cast<double>(P.get_int("d"));
      const double R = static_cast<double>(P.get_int("runs")), outs = static_cast<double>(P.get_int("outputs"));
      const std::string integ = P.get_string("integrator");
      // Field evaluations: 4 per RK4 step, 1 per discrete step; adaptive: about 13 per step of ~h.
      const double steps = P.get_double("t_end") / P.get_double("h");
      const double evals = integ == "rk4" ? 4.0 * steps : integ == "discrete" ? steps : 13.0 * steps;
      const double per_eval = R * (4.0 * n * n * d + 30.0 * n * n);
      const double bytes = 8.0 * R * (20.0 * n * d + 3.0 * n * n) + outs * R * 200.0 + 64e6;
      return ResourceEstimate{bytes, evals * per_eval, "runs x n x n attention weights per field evaluation"};
    }}, {{"n", "4"}, {"runs", "1"}, {"t_end", "1"}, {"outputs", "5"}}), rope_flow_outputs())};

}  // namespace preset_rope_flow
}  // namespace tokdyn
