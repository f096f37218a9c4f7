// Preset ssm-random-silu: the paper's SSM model (The Attention Within, (1)-(2)) with zero-mean
// random weights redrawn at every layer, gate off, with and without SiLU on the B/C branches
// (Fig. 3), and the persistency-of-excitation windows of §VI-B (Figs. 5-6 layout).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <optional>

#include "tokdyn/analysis/pe_window.hpp"
#include "tokdyn/analysis/ssm_bounds.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "tokdyn/experiments/attention_within_checks.hpp"
#include "tokdyn/experiments/output_tables.hpp"
#include "tokdyn/experiments/pe_tables.hpp"
#include "tokdyn/experiments/taps.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/reports.hpp"
#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/models/ssm/random.hpp"
#include "tokdyn/engine/observers.hpp"

namespace tokdyn {
namespace {

struct VariantResult {
  std::string name;
  GramObserver gram;
  PeObserver pe{0};
};

void run_ssm_random_silu(const Params& P, RunContext& ctx) {
  const int runs = static_cast<int>(P.get_int("runs"));
  const long depth = P.get_int("depth");
  const int len = static_cast<int>(P.get_int("tokens"));
  const SsmRandomSpec spec = ssm_random_spec(P);
  const auto seed = static_cast<std::uint64_t>(P.get_int("seed"));
  const SsmForm form = P.get_string("form") == "recurrence" ? SsmForm::Recurrence : SsmForm::InputOutput;
  const int fig_run = static_cast<int>(P.get_int("fig_run"));
  const int fig_token = static_cast<int>(P.get_int("fig_token"));
  if (fig_run >= runs) throw InputError(fmt::format("parameter 'fig_run': expected a run index < runs ({}), got {}", runs, fig_run));
  if (fig_token > len) throw InputError(fmt::format("parameter 'fig_token': expected a token index <= tokens ({}), got {}", len, fig_token));
  const std::vector<long> tap_layers = parse_taps(P.get_string("taps"), depth);
  std::vector<std::string> variants;
  const std::string sel = P.get_string("variants");
  if (sel == "both" || sel == "silu") variants.push_back("silu");
  if (sel == "both" || sel == "no_silu") variants.push_back("no_silu");

  // One random weight sequence, shared by all runs and by both variants (paired comparison);
  // layer k is drawn from the stream (seed, "weights", k-1), independent of threads.
  auto sched = ssm_random_schedule(P, 1);
  // Initial tokens of run r: uniform on S^{n-1}, stream (seed, r).
  const Batch Z0 = sphere_start(seed, runs, len, spec.n);

  std::vector<VariantResult> res(variants.size());
  nlohmann::json step_checks = nlohmann::json::object();
  for (std::size_t vi = 0; vi < variants.size(); ++vi) {
    VariantResult& R = res[vi];
    R.name = variants[vi];
    SsmOptions o;
    o.tau = P.get_double("tau");
    o.silu_bc = R.name == "silu";
    o.gate = GateKind::Off;
    SsmLayer layer(sched, o, form);
    R.pe = PeObserver(fig_run);
    layer.watch(&R.pe);  // the layer's tap "q" [runs, tokens] into the PE windows
    Batch Z = Z0;
    const double share = 1.0 / static_cast<double>(variants.size());
    // The layer (2) is the model (a retracted forward-Euler step of the flow (5) with the same
    // layer's weights): its step tau is measured against that flow's local rate on run 0, at
    // layer 1 and every depth/4 layers, and reported (the discrete model is what the paper's
    // Fig. 3 runs; it follows the flow only while tau x rate <= 2). Five checks of 8 power
    // iterations on one run cost about 80 single-run field evaluations (~1% of a default run).
    double max_rate = 0.0;
    long checked = 0;
    const long every_k = std::max(1L, depth / 4);
    CallbackObserver rate_check([&](double km1, const Batch& B) {
      const long k = static_cast<long>(km1) + 1;
      if (k != 1 && k % every_k != 0 && k != depth) return;
      const SsmFlow flow(std::make_shared<ConstantSchedule<SsmParams>>(*sched->at_layer(k)), o);
      Tokens v;
      max_rate = std::max(max_rate, local_rate(flow, 0.0, Batch{B.run(0), 1, len}, true, 8, v));
      ++checked;
    });
    StateTapObserver taps(std::make_shared<NpyFolderSink>(taps_dir(ctx.dir, R.name)), tap_layers);
    std::vector<Observer*> post{&R.gram};
    if (!tap_layers.empty()) post.push_back(&taps);
    auto sim_timer = ctx.phase("simulate");
    iterate(layer, Z, depth, post, {&rate_check}, [&](double f) {
      if (ctx.progress) ctx.progress((static_cast<double>(vi) + f) * share);
    });
    step_checks[R.name] = {{"max_local_rate", max_rate}, {"max_h_rate", o.tau * max_rate}, {"layers_checked", checked},
                           {"inside", o.tau * max_rate <= kEulerRealAxisLimit}};
  }

  {
    std::vector<std::pair<std::string, const Observer*>> mv, qv;
    for (const auto& R : res) {
      mv.emplace_back(R.name, &R.gram);
      qv.emplace_back(R.name, &R.pe);
    }
    write_tables(ctx.dir, mv);
    // PE windows (§VI-B, eq. (23)) for every run and token; envelopes over runs per token.
    write_tables(ctx.dir, qv);
  }
  // The paper's reported numbers for random weights (Figs. 3, 5 and Fig. 6's random rows).
  {
    namespace aw = attention_within;
    CheckTable checks(ctx.dir / "checks.csv");
    const std::string why = aw::not_applicable_reason(depth, false, true);
    const VariantResult* silu = nullptr;
    const VariantResult* no_silu = nullptr;
    for (const auto& R : res) (R.name == "silu" ? silu : no_silu) = &R;
    aw::fig3_checks(checks, silu ? &silu->gram : nullptr, no_silu ? &no_silu->gram : nullptr, why);
    if (silu) {
      aw::fig45_checks(checks, silu->pe.q(), fig_run, fig_token, true, why);
      aw::fig6_checks(checks, "random_silu", silu->pe.q(), 0, why);
    }
    if (no_silu) aw::fig6_checks(checks, "random_no_silu", no_silu->pe.q(), 0, why);
    checks.report(ctx, "ssm-random-silu");
    ctx.notes["paper_values"] = {{"fig3", aw::paper_values(3)}, {"fig5", aw::paper_values(5)}, {"fig6", aw::paper_values(6)}};
  }
  // Assumption III.1 along the run (certified channel bounds per layer; Remark IV.1's sign of
  // (S_BC)_{mu~mu~}; Assumption V.1's margin), and the run-level verdict.
  if (P.get_bool("diagnostics")) {
    auto diag_timer = ctx.phase("diagnostics");
    const AssumptionDiagnostics diag = assumption_diagnostics(*sched, depth, len);
    diag_timer.stop();
    CsvWriter a = ctx.table("assumptions.csv");
    for (const auto& la : diag.layers) {
      a.cell(la.layer).cell(la.mu_tilde + 1).cell(static_cast<long>(la.certified)).cell(la.gamma).cell(la.Gamma)
          .cell(la.Lambda).cell(la.lambda_max).cell(la.lambda_min).cell(la.S_principal).cell(la.lambda_min_sym);
      a.end_row();
    }
    ctx.notes["assumption_III1_certified_layers"] = diag.certified_layers;
    ctx.notes["principal_channel_switches"] = diag.principal_switches;
    ctx.notes["assumption_III1_holds_over_run"] = diag.constant_principal;
  }
  ctx.notes["weights"] = spec.weights == "mamba2"
      ? "Mamba-2 initialisation at the scale of normalised inputs: S_B, S_C, W_Delta iid U(-1,1); b_Delta = dt_bias init; alpha ~ U(1,16); redrawn at every layer, shared by runs and variants"
      : "iid N(0, sigma^2) for S_B, S_C, W_Delta; b_Delta = dt_bias init; alpha ~ U(1,16); redrawn at every layer";
  ctx.notes["initial_tokens"] = "iid uniform on the unit sphere; run r uses stream (seed, r)";
  ctx.notes["step_check"] = {
      {"method", "the discrete layer (2): a retracted forward-Euler step of the flow (5) with that layer's weights"},
      {"policy", "report (tau is the model's step; the paper's Fig. 3 is the discrete model)"},
      {"h_requested", P.get_double("tau")}, {"bound_h_rate", kEulerRealAxisLimit},
      {"rate_estimate", "power iteration on the flow's tangential Jacobian (finite-difference JVPs), run 0, layer 1 and every depth/4 layers"},
      {"variants", step_checks}, {"action", "reported"}};
  ctx.notes["fig_run"] = fig_run;
  ctx.notes["fig_token"] = fig_token;
  // Scalar summaries: Fig. 3's end values and Fig. 6's T* (text reading) per variant; NaN for a
  // variant not run (or no admissible window). The paper's values are at depth 200.
  namespace aw = attention_within;
  const VariantResult* by_name[2] = {nullptr, nullptr};  // silu, no_silu
  for (const auto& R : res) by_name[R.name == "silu" ? 0 : 1] = &R;
  for (int v = 0; v < 2; ++v) {
    const VariantResult* R = by_name[v];
    const std::string name = v == 0 ? "silu" : "no_silu";
    ctx.summary("lambda1_end_" + name, R ? aw::run_mean_at(R->gram, depth, false) : kNaN, v == 0 ? "~0.88" : "~0.23");
    ctx.summary("r_end_" + name, R ? aw::run_mean_at(R->gram, depth, true) : kNaN, v == 0 ? "~1.3" : "past 14");
  }
  for (int v = 0; v < 2; ++v) {
    const VariantResult* R = by_name[v];
    const std::optional<int> ts = R ? pe_readings(R->pe.q()).text.t_star : std::nullopt;
    ctx.summary(v == 0 ? "t_star_silu" : "t_star_no_silu", ts ? static_cast<double>(*ts) : kNaN, v == 0 ? "35" : "none");
  }
}

OutputDecl ssm_random_silu_outputs() {
  const ColumnDecl variant = variant_column({{"silu", "SiLU on the B/C branches (the paper's model)"},
                                             {"no_silu", "no SiLU on B/C: the bilinear interaction of Lemma IV.1"}});
  OutputDecl o;
  o.tables = {metrics_table(variant), metrics_runs_table(variant)};
  for (TableDecl& t : pe_tables(variant)) o.tables.push_back(std::move(t));
  o.tables.push_back(checks_table());
  o.tables.push_back(TableDecl{
      "assumptions.csv", "one layer: Assumption III.1 diagnostics of its weights (certified channel bounds, Lemma III.1)",
      {index("layer", "layer k", 1), index("mu_tilde", "principal channel mu~ (largest certified gap)", 1),
       category("certified", "Assumption III.1 items 1-2 certified at this layer",
                {{"1", "certified: gamma > 0"}, {"0", "not certified"}}),
       real("gamma", "certified lower bound on the spectral gap gamma (III.1.2)")
           .may_be_nonfinite("inf when n = 1: gamma is a minimum over the other channels, and there is none"),
       real("Gamma", "certified upper bound on Gamma = max_ij Gamma_ij (§IV)"),
       real("Lambda", "certified upper bound on Lambda (§IV); 0 for one token"),
       real("lambda_max", "sup of lambda_ij^mu~ (§V item 2)"), real("lambda_min", "inf of lambda_ij^mu~ (§V item 3)"),
       real("S_principal", "(S_BC)_{mu~ mu~}: Remark IV.1's sufficient sign for PE"),
       real("lambda_min_sym", "smallest eigenvalue of (S_BC + S_BC^T)/2: Assumption V.1's margin")},
      "diagnostics = true"});
  o.arrays = {{"taps/<variant>/layer_<K>.npy", "float64 [runs, tokens, n]: the state after layer K (0: the initial tokens)",
               "taps lists K"}};
  const std::string na = " (empty: the variant was not run)";
  o.summaries = {
      {"lambda1_end_silu", "run-mean lambda_bar_1 at the last layer, SiLU on (Fig. 3; paper at layer 200)" + na},
      {"r_end_silu", "run-mean participation ratio r at the last layer, SiLU on (Fig. 3)" + na},
      {"lambda1_end_no_silu", "run-mean lambda_bar_1 at the last layer, no SiLU (Fig. 3)" + na},
      {"r_end_no_silu", "run-mean participation ratio r at the last layer, no SiLU (Fig. 3)" + na},
      {"t_star_silu", "T* of (23), largest over tokens and runs, SiLU on (Fig. 6, random weights; empty: some token of some run "
                      "has no admissible window, or the variant was not run)", "layers"},
      {"t_star_no_silu", "the same without SiLU (empty: none, or the variant was not run; the paper finds none)", "layers"}};
  o.figures = {{"fig3_metrics.png", "Fig. 3 layout: lambda_bar_1 and r against depth, SiLU on vs off, with the paper's values"},
               {"fig5_pe_token.png", "Fig. 5 layout: sign of q, window average and W(T) of token fig_token of run fig_run (SiLU on)",
                "variants = both or silu"},
               {"fig6_pe_windows.png", "Fig. 6 layout: worst-case window average against T per variant (envelope over runs and tokens)"}};
  return o;
}

const ExperimentRegistration reg_ssm_random_silu{with_outputs(with_smoke(Experiment{
    "ssm-random-silu",
    "Attention Within Fig. 3/5/6: paper SSM model, random weights redrawn per layer, SiLU on vs off",
    {p_int("runs", 50, "independent draws of the initial tokens", 1, 1000000),
     p_int("depth", 200, "number of layers", 1, 10000000),
     p_int("tokens", 50, "tokens per sequence (ell)", 1, 100000),
     model_knob("ssm", "n", 768L, "token dimension (mamba2-130m d_model)"),
     model_knob("ssm", "m", 128L, "hidden-state size per channel (mamba2-130m d_state)"),
     model_knob("ssm", "tau", 1.0, "step size of the normalised residual update (2)"),
     p_int("seed", 0, "base seed (weights and initial tokens)", 0, kMaxSeed),
     model_knob("ssm", "form"),
     p_string("variants", "both", "which variants to run", {"both", "silu", "no_silu"}),
     model_knob("ssm", "weights"),
     model_knob("ssm", "sigma"),
     p_bool("diagnostics", true, "write assumptions.csv: Assumption III.1 diagnostics per layer"),
     p_int("fig_run", 0, "run shown in the Fig. 5 panel and q.csv", 0, 1000000),
     p_int("fig_token", 1, "token (1-based) shown in the Fig. 5 panel", 1, 100000),
     taps_param("[runs, tokens, n] float64")},
    run_ssm_random_silu,
    "ssm-random-silu",
    [](const Params& P) {
      const double R = static_cast<double>(P.get_int("runs")), L = static_cast<double>(P.get_int("tokens"));
      const double n = static_cast<double>(P.get_int("n")), m = static_cast<double>(P.get_int("m"));
      const double depth = static_cast<double>(P.get_int("depth"));
      const double variants = P.get_string("variants") == "both" ? 2.0 : 1.0;
      const double rec = P.get_string("form") == "recurrence" ? 2.0 * R * n * m : 0.0;
      const double bytes = 8.0 * (12.0 * R * L * n + 6.0 * n * n + 4.0 * n * m + rec + 2.0 * R * L * L) + 64e6;
      const double flops = variants * depth *
                           (2.0 * R * L * n * (n + m) + (P.get_bool("diagnostics") ? 2.0 * n * n * n : 0.0) +
                            2.0 * R * L * L * n + (rec > 0 ? 4.0 * R * L * n * m : 0.0));
      cost::Work w;
      w.add(flops, cost::kRateBatchedGemm, true);  // batched GEMMs over runs x tokens rows, on every thread
      return w.estimate(bytes, "runs x tokens x n states, n x n weights per layer");
    }}, {{"runs", "2"}, {"depth", "4"}, {"tokens", "4"}, {"n", "8"}, {"m", "4"}}), ssm_random_silu_outputs())};

}  // namespace
}  // namespace tokdyn
