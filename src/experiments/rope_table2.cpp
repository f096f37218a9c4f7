// Presets rope-fig2b, rope-fig4d and rope-table2 of "Self-Attention Dynamics with Rotary Position
// Embeddings": pairwise non-obtuse contraction on the sphere (Fig. 2b), the multi-frequency rate
// parity (Fig. 4d), and Table 2's four rows of independent cross-checks with the paper's
// configuration counts, each discrepancy next to the paper's.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <numbers>

#include "tokdyn/analysis/rope_circle.hpp"
#include "tokdyn/analysis/rope_spectra.hpp"
#include "tokdyn/analysis/rope_sphere.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/experiments/rope_circle_configs.hpp"
#include "tokdyn/experiments/rope_spectra_configs.hpp"
#include "tokdyn/experiments/rope_sphere_configs.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/engine/observers.hpp"
#include "tokdyn/core/parallel.hpp"

namespace tokdyn {
// A named namespace (not an anonymous one): its using-directive must not reach the other files of
// a unity batch.
namespace preset_rope_table2 {

using namespace rope;

// ------------------------------------------------------------------ Fig. 2b

void run_fig2b(const Params& P, RunContext& ctx) {
  const int n = static_cast<int>(P.get_int("n"));
  const int d = n + 1;
  if (d % 2) throw InputError(fmt::format("parameter 'n': the orthogonal tokens live in d = n + 1, which must be even for RoPE; got n = {}", n));
  AttentionParams AP;
  AP.d = d;
  AP.beta = P.get_double("beta");
  AP.freqs = standard_frequencies(d);
  AP.validate(n, "rope-fig2b");
  const double a = softmax_floor(AP.beta, n);
  const double tau_max = P.get_double("tau_max");
  const double t_end = tau_max / (2.0 * a);
  const double h = P.get_double("h");
  const long outputs = P.get_int("outputs");
  CsvWriter w = ctx.table("trajectories.csv");
  const Tokens plain = equiangular_state(n, 0.0);
  const Tokens rotated = equiangular_rotated(n, 0.0, 2026);
  {  // active pairs at t = 0: every pair has <x_i, x_j> = 0 exactly
    long active = 0;
    const Mat G = plain * plain.transpose();
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) active += G(i, j) == 0.0 ? 1 : 0;
    ctx.summary("active unordered pairs at t = 0", active, n == 5 ? "10" : "");
  }
  double worst = -INFINITY;
  StepReport steps;
  for (const auto& [name, X0] : {std::pair<std::string, Tokens>{"plane-aligned", plain}, {"rotated", rotated}})
    for (double step : {h, h / 2}) {
      AttentionField F(AP, n);
      Batch Z{X0, 1, n};
      const std::string label = fmt::format("{}, h = {}", name, step);
      CallbackObserver obs([&](double t, const Batch& B) {
        const double c = min_pairwise_inner(B.Z);
        const double tau = 2.0 * a * t;
        w.cell(label).cell(t).cell(tau).cell(c).cell(std::tanh(tau)).end_row();
        worst = std::max(worst, std::tanh(tau) - c);
      });
      Rk4Options o;
      o.h = step;
      o.report = &steps;  // the paper's steps, guarded: refused (never changed) when unstable
      integrate_rk4(F, Z, 0.0, t_end, o, {&obs}, t_end / static_cast<double>(outputs));
    }
  ctx.summary("max (tanh tau - c(t)) over both orientations and steps", worst, "<= 0");
  ctx.notes["integrator"] = "classical RK4, every stage retracted to the spheres; step h and h/2";
  ctx.notes["step_check"] = step_report_json(steps, StepPolicy::Refuse);
  ctx.notes["states"] = "x_i = e_i in d = n + 1 (plane-aligned) and the same times a seeded orthogonal matrix (rotated)";
}

// ------------------------------------------------------------------ Fig. 4d

void run_fig4d(const Params& P, RunContext& ctx) {
  SlowModeOptions o;
  o.h = P.get_double("h");
  const auto fits = multifrequency_rate_fits(o);
  CsvWriter w = ctx.table("rates.csv");
  double worst = 0.0;
  StepReport steps;
  for (const auto& f : fits) {
    steps.merge(f.steps);
    w.cell(f.energy_high).cell(f.gamma).cell(f.gamma_fit).cell(f.rel_error).cell(static_cast<long>(f.samples)).end_row();
    worst = std::max(worst, f.rel_error);
  }
  ctx.summary("max relative rate error", worst, "2.80e-06");
  ctx.notes["setup"] = "n = 16, beta = 4, d = 4, frequencies (1, 0.01), energy a in the omega = 1 plane; slow-mode amplitude 1e-4, retracted RK4, 360 outputs, fit over 0.75 <= gamma t <= 3.75";
  ctx.notes["step_check"] = step_report_json(steps, StepPolicy::Refuse);
}

// ------------------------------------------------------------------ Table 2

/// table2.csv (the paper's table beside tokdyn's, row by row) and checks.csv (the verdicts).
/// Table 2's discrepancies are round-off, FD-truncation and integration-error magnitudes of two
/// computations the paper calls independent (and tokdyn implements separately): they cannot be
/// matched bit for bit, so each is checked against the order-of-magnitude threshold of
/// specs/rope-attention-dynamics.md §3.2, with the paper's value beside it; the configuration
/// counts are checked exactly against the paper's.
struct Table2 {
  CsvWriter w;
  CheckTable checks;
  explicit Table2(const RunContext& ctx) : w(ctx.table("table2.csv")), checks(ctx.dir / "checks.csv") {}
  void put(const std::string& row, const std::string& q, const std::string& paper, double v, long count) {
    w.cell(row).cell(q);
    if (paper.empty()) w.empty(); else w.cell(paper);
    w.cell(v).cell(count).end_row();
  }
  /// A discrepancy |value| <= threshold (or a residual value >= -threshold when `residual`).
  void discrepancy(const std::string& id, const std::string& row, const std::string& what, double v, double threshold,
                   const std::string& paper_value, const Ref& ref, bool residual = false) {
    const std::string from_paper = paper_value.empty() ? std::string("not in the paper's table")
                                                       : fmt::format("paper: {}", paper_value);
    const std::string expected = residual ? fmt::format(">= -{:g} ({})", threshold, from_paper)
                                          : fmt::format("<= {:g} ({})", threshold, from_paper);
    checks.add(id, "Table 2, " + row, what, v, expected, residual ? v >= -threshold : std::abs(v) <= threshold, ref);
  }
  /// A configuration count against the paper's.
  void count(const std::string& id, const std::string& row, const std::string& what, long v, long paper_count) {
    checks.add(id, "Table 2, " + row + ": coverage", what, static_cast<double>(v), fmt::format("= {}", paper_count), v == paper_count,
               paper(fmt::format("Table 2: {} {}", paper_count, what)));
  }
};

void run_table2(const Params& P, RunContext& ctx) {
  Table2 T(ctx);
  // Wall-clock seconds per part go into the manifest's notes, not into a result file: the result
  // files have the same bytes on every run and thread count, a time never does.
  nlohmann::json part_times = nlohmann::json::array();
  StepReport rk4_steps;  // every sphere RK4 integration of the table (guarded, refuse)
  auto timed = [&](const char* part, auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    part_times.push_back({{"part", part}, {"seconds", sec}});
    ctx.add_phase(part, sec);
    ctx.notes["part_times_s"] = part_times;
  };
  double done = 0.0;
  auto step = [&](double frac) {
    done += frac;
    if (ctx.progress) ctx.progress(std::min(1.0, done));
  };

  // Row 1: resonant spectrum and local rate.
  const std::string r1 = "Resonant spectrum and local rate";
  timed("resonant spectra (144)", [&] {
    const ResonantSummary rs = evaluate_resonant_grid(resonant_grid());
    CsvWriter c = ctx.table("resonant.csv");
    for (const auto& r : rs.rows)
      c.cell(r.cfg.n).cell(r.cfg.m).cell(r.cfg.beta).cell(r.g).cell(r.L).cell(r.reachable).cell(r.structural_zeros)
          .cell(r.spectrum_error).cell(r.dft_error).cell(r.gap_bessel).cell(r.gap_lgrid).cell(r.gap_error).end_row();
    T.put(r1, "full-spectrum error", "1.554e-15", rs.max_spectrum_error, rs.count);
    ctx.summary("resonant full-spectrum error", rs.max_spectrum_error, "1.554e-15");
    T.put(r1, "Bessel-Fourier gap error", "6.051e-15", rs.max_gap_error, rs.count);
    T.put(r1, "structural-zero counts = n - L (mask)", "", rs.counts_ok ? 1.0 : 0.0, rs.count);
    T.discrepancy("T2.1 spectrum", r1, "max full-spectrum error (direct matrix spectrum vs congruence-filtered Bessel spectrum)",
                  rs.max_spectrum_error, 1e-13, "1.554e-15", independent("dense eigensolve of the linearisation vs the Bessel-coefficient spectrum"));
    T.discrepancy("T2.1 gap", r1, "max Bessel-Fourier gap error", rs.max_gap_error, 1e-13, "6.051e-15",
                  independent("Bessel-series gap vs the stable Fourier L-grid gap"));
    T.checks.add("T2.1 structural zeros", "Table 2, " + r1 + ": the mask leaves n - L structural zeros", "spectra whose zero count is n - L (1: all)",
                 rs.counts_ok ? 1.0 : 0.0, "= 1 (every spectrum)", rs.counts_ok, closed_form("n - L zero eigenvalues of the congruence mask"));
    T.count("T2.1 spectra", r1, "resonant spectra", rs.count, 144);
  });
  step(0.05);
  timed("resonant rate fits (12)", [&] {
    CsvWriter c = ctx.table("rate_fits.csv");
    double worst = 0.0;
    long count = 0;
    // The 12 fits are independent: on every core, one fit per thread (the same bits at any thread count).
    const std::vector<CircleRateTriple> triples = circle_rate_fit_triples();
    const std::vector<RateFit> fits =
        parallel_map(static_cast<long>(triples.size()), [&](long i) { return circle_rate_fit(triples[static_cast<std::size_t>(i)]); });
    for (std::size_t i = 0; i < triples.size(); ++i) {
      const CircleRateTriple& tr = triples[i];
      const RateFit& f = fits[i];
      c.cell(std::string("resonant")).cell(tr.n).cell(tr.m).cell(tr.beta).empty().cell(f.gamma).cell(f.gamma_fit).cell(f.rel_error).end_row();
      worst = std::max(worst, f.rel_error);
      ++count;
    }
    step(0.3);
    T.put(r1, "relative rate error", "1.059e-07", worst, count);
    ctx.summary("resonant relative rate error", worst, "1.059e-07");
    T.discrepancy("T2.1 rate", r1, "max relative error of the fitted nonlinear rate against the linear gap", worst, 1e-6, "1.059e-7",
                  independent("nonlinear phase-flow integration (Bulirsch-Stoer) vs the spectral gap"));
    T.count("T2.1 rate fits", r1, "rate fits", count, 12);
  });

  // Row 2: geometric contraction bounds.
  const std::string r2 = "Geometric contraction bounds";
  timed("geometric (Dini grids, trajectories)", [&] {
    long evals = 0;
    double min_res = INFINITY, max_excess = -INFINITY;
    CsvWriter c = ctx.table("dini.csv");
    const DiniGrid sg = sphere_dini_grids();
    for (const auto& r : sg.rows) {
      c.cell(r.family);
      if (r.variant.empty()) c.empty(); else c.cell(r.variant);
      c.cell(r.n).cell(r.d).cell(r.beta).empty().cell(r.config).cell(r.value).cell(r.residual_formula).cell(r.residual_direct)
          .cell(r.active).end_row();
    }
    evals += sg.count;
    min_res = std::min(min_res, sg.min_residual);
    step(0.15);
    for (const auto& r : circle_dini_grid()) {
      c.cell(std::string("semicircle")).cell(fmt::format("ties={}", r.ties)).cell(r.n).cell(2).cell(r.beta).cell(r.omega).cell(r.config)
          .cell(r.dini.D).cell(r.dini.residual_c2).cell(r.dini.residual_direct).cell(r.dini.active_max + r.dini.active_min).end_row();
      min_res = std::min({min_res, r.dini.residual_c2, r.dini.residual_direct});
      ++evals;
    }
    step(0.1);
    CsvWriter tr = ctx.table("trajectories.csv");
    for (const auto& t : circle_contraction_grid()) {
      tr.cell(std::string("semicircle")).cell(t.n).cell(t.beta).cell(t.omega).cell(t.D0).cell(t.max_excess).cell(t.max_excess_abs).end_row();
      max_excess = std::max(max_excess, t.max_excess);
      ++evals;
    }
    step(0.2);
    // Evaluated separately (App. D.3): orthogonal and antipodal two-token states, and the sharp
    // beta = 16 softmax-floor configuration.
    {
      AttentionParams AP;
      AP.d = 4;
      AP.beta = 2.0;
      AP.freqs = standard_frequencies(4);
      Tokens X = Tokens::Zero(2, 4);
      X(0, 0) = 1.0, X(1, 1) = 1.0;  // orthogonal: c = 0, both residual routes
      const DiniValue v1 = nonobtuse_dini_c5(AP, X), v2 = nonobtuse_dini_direct(AP, X);
      min_res = std::min({min_res, v1.residual, v2.residual});
      TrajectoryOptions o;
      o.t_end = 4.0;
      const TrajectoryReport rep = sphere_trajectory_bounds(AP, X, o);
      rk4_steps.merge(rep.steps);
      max_excess = std::max(max_excess, rep.max_excess_rel());
      tr.cell(std::string("sphere two-token orthogonal")).cell(2).cell(AP.beta).empty().empty().cell(rep.max_excess_rel()).cell(rep.max_excess()).end_row();
      evals += 3;
      Tokens Y = Tokens::Zero(2, 4);
      Y(0, 0) = 1.0, Y(1, 0) = -1.0;  // antipodal: stationary (Prop. 6.4)
      AttentionField F(AP, 2);
      Tokens dY;
      F.eval(0.0, Batch{Y, 1, 2}, dY);
      T.put(r2, "antipodal two-token velocity (stationary)", "", dY.cwiseAbs().maxCoeff(), 1);
      T.discrepancy("T2.2 antipodal", r2, "max |velocity| of an antipodal two-token state", dY.cwiseAbs().maxCoeff(), 1e-15, "",
                    closed_form("Prop. 6.4: an antipodal pair is stationary (velocity 0)"));
      ++evals;
      AttentionParams AQ = AP;
      AQ.beta = 16.0;
      RowVec u = RowVec::Zero(4);
      u[0] = 1.0;
      const Tokens Wt = sharpness_witness(AQ, 5, 2, u);
      Mat A;
      attention(AQ, Wt, A);
      T.put(r2, "beta = 16 softmax floor: A_ij / a_{beta,n} - 1", "", A(0, 2) / softmax_floor(16.0, 5) - 1.0, 1);
      T.discrepancy("T2.2 softmax floor", r2, "A_ij / a_{beta,n} - 1 at the sharpness witness (beta = 16, n = 5)",
                    A(0, 2) / softmax_floor(16.0, 5) - 1.0, 1e-12, "", closed_form("the witness attains the softmax floor a_{beta,n} exactly"));
      ++evals;
    }
    T.put(r2, "minimum inequality residual", "-3.886e-16", min_res, evals);
    T.put(r2, "maximum trajectory excess", "2.961e-10", max_excess, 72 + 1);
    ctx.summary("min Dini residual", min_res, "-3.886e-16");
    ctx.summary("max trajectory excess", max_excess, "2.961e-10");
    T.discrepancy("T2.2 Dini residual", r2, "min residual of the Dini inequalities over the grids", min_res, 1e-13, "-3.886e-16",
                  bound("the Dini inequalities of the contraction theorems (direct vector fields)"), true);
    T.discrepancy("T2.2 trajectory excess", r2, "max excess of integrated trajectories over their comparison solutions", max_excess, 2e-8,
                  "2.961e-10 (threshold: the paper's integration-comparison tolerance)", bound("the comparison solutions of the contraction theorems"));
    ctx.notes["geometric_count"] = fmt::format(
        "{} evaluations: sphere Dini grids {} (non-obtuse 1800, hemisphere 1800, equiangular 120), circle Dini 3240, "
        "integrated comparisons 72, separate two-token/antipodal/beta=16 cases 5. The paper reports 7057 without a breakdown; "
        "our reconstruction of the paper's breakdown gives 7032 plus about 25 separate evaluations.",
        evals, sg.count);
  });

  // Row 3: twisted states and drift.
  const std::string r3 = "Twisted states and drift";
  timed("twisted (70 + 50)", [&] {
    const TwistedSummary eq = summarize_twisted(twisted_equilibrium_grid());
    const TwistedSummary nr = summarize_twisted(twisted_nonresonant_grid(2.0, static_cast<int>(P.get_int("fd_max_n"))));
    CsvWriter c = ctx.table("twisted.csv");
    for (const auto* S : {&eq, &nr})
      for (const auto& r : S->rows)
        c.cell(r.family).cell(r.n).cell(r.m).cell(r.omega).cell(r.rhs_max).cell(r.drift_error).cell(r.max_drift).cell(r.sharp_bound)
            .cell(r.coarse_bound).cell(r.jacobian_fd_error).cell(r.spectrum_error).end_row();
    T.put(r3, "drift-formula error (nonresonant)", "3.764e-16", nr.max_drift_error, nr.count);
    ctx.summary("nonresonant drift-formula error", nr.max_drift_error, "3.764e-16");
    T.put(r3, "Jacobian error (analytic vs centred FD, h = 2e-7)", "3.070e-09", eq.max_jacobian_fd_error, eq.count);
    T.put(r3, "equilibrium residual (direct RHS)", "", eq.max_rhs, eq.count);
    T.put(r3, "spectrum error vs (41)-(43)", "", eq.max_spectrum_error, eq.count);
    T.discrepancy("T2.3 drift formula", r3, "max |direct RHS - closed drift formula (A-5)| (nonresonant)", nr.max_drift_error, 1e-14, "3.764e-16",
                  independent("direct right-hand side vs the closed drift formula"));
    T.discrepancy("T2.3 Jacobian", r3, "max |analytic Jacobian - centred FD Jacobian| (h = 2e-7)", eq.max_jacobian_fd_error, 1e-7, "3.070e-9",
                  independent("centred finite differences of the direct right-hand side"));
    T.discrepancy("T2.3 equilibria", r3, "max |direct RHS| at the twisted states", eq.max_rhs, 1e-13, "",
                  closed_form("twisted states are equilibria (right-hand side 0)"));
    T.discrepancy("T2.3 spectra", r3, "max eigenvalue error against (41)-(43)", eq.max_spectrum_error, 1e-12, "",
                  closed_form("the twisted-state eigenvalues (41)-(43)"));
    T.count("T2.3 equilibria count", r3, "equilibrium configurations", eq.count, 70);
    T.count("T2.3 nonresonant count", r3, "nonresonant configurations", nr.count, 50);
  });
  step(0.05);

  // Row 4: multi-frequency gap.
  const std::string r4 = "Multi-frequency gap";
  timed("multi-frequency (9 + 320 + 5)", [&] {
    const ThreeWaySummary tw = evaluate_three_way_grid(three_way_grid());
    const PsdSummary ps = evaluate_psd_grid(psd_stress_grid());
    CsvWriter c = ctx.table("multifrequency.csv");
    for (const auto& r : tw.rows)
      c.cell(std::string("three-way")).cell(r.cfg.n).cell(r.cfg.beta).cell(r.cfg.energies[0]).cell(r.gap_similarity).cell(r.gap_laplacian)
          .cell(r.gap_generalized).cell(r.disagreement).empty().empty().end_row();
    for (const auto& r : ps.rows)
      c.cell(std::string("psd")).cell(r.cfg.n).cell(r.cfg.beta).cell(r.cfg.energies[0]).cell(r.gap).empty().empty().empty()
          .cell(r.lambda_min_W).cell(r.lambda_min_S).end_row();
    T.put(r4, "gap disagreement (three formulations)", "1.527e-15", tw.max_disagreement, tw.count);
    T.put(r4, "PSD stress: min eigenvalue of S", "", ps.min_lambda_S, ps.count);
    T.put(r4, "PSD stress: min eigenvalue of scaled W", "", ps.min_lambda_W, ps.count);
    T.discrepancy("T2.4 gap", r4, "max disagreement of the gap between the three formulations", tw.max_disagreement, 1e-13, "1.527e-15",
                  independent("similarity transform vs normalized Laplacian vs generalized eigenproblem"));
    T.discrepancy("T2.4 PSD S", r4, "min eigenvalue of S over the stress configurations", ps.min_lambda_S, 1e-12, "",
                  bound("S is positive semidefinite"), true);
    T.discrepancy("T2.4 PSD W", r4, "min eigenvalue of the scaled W over the stress configurations", ps.min_lambda_W, 1e-12, "",
                  bound("the scaled W is positive semidefinite"), true);
    T.count("T2.4 three-way count", r4, "three-way gap comparisons", tw.count, 9);
    T.count("T2.4 PSD count", r4, "positive-semidefiniteness stress configurations", ps.count, 320);
    step(0.05);
    const auto fits = multifrequency_rate_fits();
    double worst = 0.0;
    CsvWriter f = ctx.table("rate_fits_multifrequency.csv");
    for (const auto& x : fits) {
      rk4_steps.merge(x.steps);
      f.cell(x.energy_high).cell(x.gamma).cell(x.gamma_fit).cell(x.rel_error).end_row();
      worst = std::max(worst, x.rel_error);
    }
    T.put(r4, "relative rate error", "2.805e-06", worst, static_cast<long>(fits.size()));
    ctx.summary("multifrequency relative rate error", worst, "2.805e-06");
    T.discrepancy("T2.4 rate", r4, "max relative error of the fitted sphere-flow rate against the gap", worst, 2e-5, "2.805e-6",
                  independent("nonlinear sphere flow (retracted RK4) vs the multi-frequency gap"));
    T.count("T2.4 rate fits", r4, "rate fits", static_cast<long>(fits.size()), 5);
  });
  if (ctx.progress) ctx.progress(1.0);
  T.checks.report(ctx, "rope-table2");
  ctx.notes["integrators"] = "phase form (where the paper uses DOP853, rtol 1e-10, atol 1e-12): Boost.Odeint Bulirsch-Stoer with dense output for the 12 rate fits, Runge-Kutta-Fehlberg 7(8) for the integrated comparisons; sphere: RK4 retracted at every stage";
  ctx.notes["step_check"] = step_report_json(rk4_steps, StepPolicy::Refuse);
  ctx.notes["thresholds"] = "Table 2: the discrepancies are round-off / FD / integration magnitudes; tokdyn asserts the same order of magnitude in its tests";
}


// ------------------------------------------------------------------ output declarations

OutputDecl rope_fig2b_outputs() {
  OutputDecl o;
  o.tables = {{"trajectories.csv", "one output time of one sphere trajectory from orthogonal tokens (d = n + 1, standard frequencies)",
               {text("case", "orientation and RK4 step: 'plane-aligned, h = H' (x_i = e_i) or 'rotated, h = H' (the same times a seeded "
                             "orthogonal matrix), each at h and h/2"),
                real("t", "time"), real("tau", "floor-scaled time tau = 2 a_{beta,n} t"),
                real("c", "c(t) = min_{i<j} <x_i, x_j>: smallest pairwise inner product"),
                real("bound", "tanh(tau): Thm 6.2's lower bound on c(t)")}}};
  o.summaries = {{"active unordered pairs at t = 0", "pairs with <x_i, x_j> = 0 exactly at t = 0 (all n(n-1)/2: every pair is active)"},
                 {"max (tanh tau - c(t)) over both orientations and steps", "largest excess of the bound over c(t) (<= 0: Thm 6.2 holds)"}};
  o.figures = {{"fig2b_nonobtuse.png", "c(t) of every case against tanh(tau)"}};
  return o;
}

const ColumnDecl& rope_rate_columns_a_high() {
  static const ColumnDecl c = real("a_high", "energy in the omega = 1 plane (frequencies (1, 0.01); 1 - a_high in the omega = 0.01 plane)");
  return c;
}

OutputDecl rope_fig4d_outputs() {
  OutputDecl o;
  o.tables = {{"rates.csv", "one plane-energy allocation (n = 16, beta = 4, d = 4): fitted nonlinear slow-mode rate against the gap",
               {rope_rate_columns_a_high(), real("gamma", "gap 1 - lambda_2(A*) of the consensus linearisation"),
                real("gamma_fit", "minus the slope of log N(t) (slow-mode norm) over 0.75 <= gamma t <= 3.75 (retracted RK4)"),
                real("rel_error", "|gamma_fit - gamma| / gamma"), integer("samples", "output times inside the fit window")}}};
  o.summaries = {{"max relative rate error", "largest rel_error over the five allocations"}};
  o.figures = {{"fig4d_rate_parity.png", "fitted rate against the gap, per allocation"}};
  return o;
}

OutputDecl rope_table2_outputs() {
  const std::string fd_skipped = "-1: skipped (n > fd_max_n)";
  const ColumnDecl traj_omega = real("omega", "frequency", "rad").may_be_empty("sphere rows (standard frequencies, d = 4)");
  OutputDecl o;
  o.tables = {
      {"table2.csv", "one quantity of one row of the paper's Table 2: the paper's value beside tokdyn's",
       {category("row", "the row of Table 2",
                 {{"Resonant spectrum and local rate", "row 1"}, {"Geometric contraction bounds", "row 2"},
                  {"Twisted states and drift", "row 3"}, {"Multi-frequency gap", "row 4"}}),
        text("quantity", "what is measured (a discrepancy, a residual, an excess or a count check)"),
        text("paper", "the paper's value, as printed").may_be_empty("the paper's table has no value for it"),
        real("tokdyn", "tokdyn's value (worst over the configurations; 1/0 for a yes/no count check)"),
        integer("count", "configurations (or evaluations) it is taken over")}},
      checks_table(),
      {"resonant.csv", "one resonant ring (n, m, beta) of the 144 (row 1)",
       {integer("n", "tokens (ring size)"), integer("m", "resonant mode: omega = 2 pi m / n"), real("beta", "inverse temperature"),
        integer("g", "gcd(n, m)"), integer("L", "effective period n / g"),
        integer("reachable", "modes q with g | q (the gcd mask; = L)"), integer("structural_zeros", "modes that are exactly zero (n - L)"),
        real("spectrum_error", "max |sorted dense eigenvalues - sorted Bessel eigenvalues (22)|"),
        real("dft_error", "max_q |Bessel lambda_q - DFT lambda_q|"), real("gap_bessel", "gap from the Bessel spectrum"),
        real("gap_lgrid", "gap by the L-grid formula (B-3)"), real("gap_error", "|gap_bessel - gap_lgrid|")}},
      {"rate_fits.csv", "one nonlinear slow-mode rate fit of a resonant ring (row 1, App. D.2: 12 triples)",
       {category("family", "the model", {{"resonant", "the circle phase flow (9) on a resonant ring"}}), integer("n", "tokens"),
        integer("m", "resonant mode"), real("beta", "inverse temperature"),
        real("a_high", "plane energy").may_be_empty("resonant rings: one frequency, no plane energy"),
        real("gamma", "the spectral gap of the linearisation (the linear rate)"),
        real("gamma_fit", "minus the slope of log ||theta - mean theta|| over 0.75 <= gamma t <= 3.75 (Bulirsch-Stoer)"),
        real("rel_error", "|gamma_fit - gamma| / gamma")}},
      {"dini.csv", "one state of the Dini-inequality grids (row 2): sphere grids of App. D.3 and the circle grid of Thm 6.3",
       {category("family", "the inequality and its states",
                 {{"nonobtuse", "Thm 6.2 on the sphere: seeded acute states, c = min pairwise inner product"},
                  {"hemisphere", "Prop. 6.1 on the sphere: seeded hemisphere states, m = min_i <x_i, w>"},
                  {"equiangular", "Thm 6.2 at equiangular states <x_i, x_j> = c0 (every pair active)"},
                  {"semicircle", "Thm 6.3 on the circle (d = 2): seeded states of a given lifted diameter D0"}}),
        category("variant", "the kind of state within the family",
                 {{"interior", "hemisphere: every token strictly inside"}, {"boundary", "hemisphere: one token exactly on the boundary"},
                  {"plane-aligned", "equiangular: built on the coordinate axes"},
                  {"rotated", "equiangular: the same times a seeded orthogonal matrix"},
                  {"ties=0", "semicircle: no extra token at an end of the arc"}, {"ties=1", "semicircle: one more token exactly at 0"},
                  {"ties=2", "semicircle: one more token exactly at D0"}, {"ties=3", "semicircle: one more at each end"}})
            .may_be_empty("nonobtuse: one kind of state"),
        integer("n", "tokens"), integer("d", "dimension"), real("beta", "inverse temperature"),
        real("omega", "the circle's frequency", "rad").may_be_empty("sphere rows (standard frequencies 10000^(-2l/d))"),
        index("instance", "which state of its grid point: nonobtuse, hemisphere: seeded configuration 0..39 (hemisphere: the odd ones hold a boundary token); "
                        "equiangular: index of c0 in (0, 1e-12, 1e-6, 0.1, 0.5); semicircle: seeded configuration 0..19 (ties = config mod 4)", 0),
        real("value", "the state's observable: c (nonobtuse, equiangular), m (hemisphere), lifted diameter D in rad (semicircle)"),
        real("residual_formula", "Dini derivative minus the bound, velocities by the paper's formula ((C-5), (C-3); semicircle: phase "
                                 "RHS (9) via (C-2)); >= 0: the inequality holds"),
        real("residual_direct", "the same with velocities from the vector field (5)"),
        integer("active", "active-set size (sphere: of the formula route, equiangular: the smaller of both; semicircle: |I+| + |I-|)")}},
      {"trajectories.csv", "one integrated trajectory compared with its comparison solution (row 2: 72 circle + 1 sphere)",
       {category("family", "the trajectory",
                 {{"semicircle", "circle phase flow (9) from a seeded state of lifted diameter D0 (Thm 6.3)"},
                  {"sphere two-token orthogonal", "two orthogonal tokens in d = 4, beta = 2 (sphere bounds, retracted RK4)"}}),
        integer("n", "tokens"), real("beta", "inverse temperature"), traj_omega,
        real("D0", "initial lifted diameter", "rad").may_be_empty("the sphere row"),
        real("max_excess", "largest relative excess over the comparison solution (q/q0 - e^{-tau} on the circle; <= 0: the bound holds)"),
        real("max_excess_abs", "largest absolute excess (q - q0 e^{-tau} on the circle)")}},
      {"twisted.csv", "one twisted state theta_j = -omega j (row 3, App. D.4: 70 equilibria + 50 nonresonant)",
       {category("family", "the twist",
                 {{"resonant", "omega = 2 pi m / n: an equilibrium"}, {"odd_antipodal", "omega = pi, n odd: an equilibrium"},
                  {"nonresonant", "omega outside pi Q: drifts"}}),
        integer("n", "tokens"), integer("m", "resonant mode (0 unless resonant)"), real("omega", "twist frequency", "rad"),
        real("rhs_max", "max_i |right-hand side (9)| at the twisted state"),
        real("drift_error", "max_i |right-hand side (9) - drift formula (A-5)|"), real("max_drift", "max_i |drift formula (A-5)|"),
        real("sharp_bound", "sharp drift bound (17)"), real("coarse_bound", "coarse drift bound (17)"),
        real("jacobian_fd_error", "max |centred FD Jacobian (h = 2e-7) - (B-4)| (" + fd_skipped + ")"),
        real("spectrum_error", "max |eigenvalues of (B-4) - exact (41)-(43)| (-1: nonresonant, no exact spectrum)")}},
      {"multifrequency.csv", "one multi-frequency configuration (row 4): a three-way gap comparison or a PSD stress configuration",
       {category("kind", "the check", {{"three-way", "the gap by three formulations (9 configurations)"},
                                       {"psd", "positive-semidefiniteness stress (320 seeded allocations)"}}),
        integer("n", "tokens"), real("beta", "inverse temperature"), rope_rate_columns_a_high(),
        real("gap_similarity", "gap by the similarity transform S (psd rows: the gap)"),
        real("gap_laplacian", "gap by the normalised Laplacian").may_be_empty("psd rows"),
        real("gap_generalized", "gap by the generalized eigenproblem").may_be_empty("psd rows"),
        real("disagreement", "max pairwise |difference| of the three gaps").may_be_empty("psd rows"),
        real("lambda_min_W", "smallest eigenvalue of the scaled W").may_be_empty("three-way rows"),
        real("lambda_min_S", "smallest eigenvalue of S").may_be_empty("three-way rows")}},
      {"rate_fits_multifrequency.csv", "one of the five multi-frequency slow-mode rate fits of Fig. 4d (row 4)",
       {rope_rate_columns_a_high(), real("gamma", "gap 1 - lambda_2(A*)"),
        real("gamma_fit", "minus the slope of log N(t) over 0.75 <= gamma t <= 3.75 (retracted RK4)"),
        real("rel_error", "|gamma_fit - gamma| / gamma")}}};
  o.summaries = {{"resonant full-spectrum error", "row 1: max spectrum_error over the 144 resonant rings"},
                 {"resonant relative rate error", "row 1: max rel_error of the 12 resonant rate fits"},
                 {"min Dini residual", "row 2: smallest residual of the Dini inequalities over all grids (>= 0: they hold)"},
                 {"max trajectory excess", "row 2: largest relative excess of the integrated trajectories over their comparison solutions"},
                 {"nonresonant drift-formula error", "row 3: max drift_error over the 50 nonresonant states"},
                 {"multifrequency relative rate error", "row 4: max rel_error of the five multi-frequency rate fits"}};
  o.figures = {{"table2.png", "the paper's discrepancies beside tokdyn's, per quantity (log scale)"}};
  return o;
}

const ExperimentRegistration r2b{with_outputs(with_smoke(Experiment{
    "rope-fig2b", "RoPE paper Fig. 2b / Thm 6.2: initially orthogonal tokens stay above tanh(tau), two orientations, step halved",
    {p_int("n", 5, "tokens (d = n + 1)", 2, 64), p_double("beta", 1.0, "inverse temperature", 0.0),
     p_double("tau_max", 1.2, "largest floor-scaled time", 0.0, {}, true), p_double("h", 2e-2, "RK4 step (also run at h/2)", 0.0, {}, true),
     p_int("outputs", 120, "output times", 1, 1000000)},
    run_fig2b, "rope-fig2b"}, {{"n", "3"}, {"outputs", "10"}}), rope_fig2b_outputs())};
const ExperimentRegistration r4d{with_outputs(with_smoke(Experiment{
    "rope-fig4d", "RoPE paper Fig. 4d: fitted nonlinear slow-mode rates against the gap, n = 16, beta = 4, frequencies (1, 0.01)",
    {p_double("h", 1e-2, "retracted RK4 step", 0.0, {}, true)}, run_fig4d, "rope-fig4d"}, {}), rope_fig4d_outputs())};
const ExperimentRegistration rt2{with_outputs(with_smoke(Experiment{
    "rope-table2", "RoPE paper Table 2: all four rows of independent cross-checks, with the paper's configuration counts",
    {p_int("fd_max_n", 1 << 20, "largest nonresonant n whose FD Jacobian is also checked", 0, 1 << 20)}, run_table2, "rope-table2"}, {{"fd_max_n", "0"}}), rope_table2_outputs())};

}  // namespace preset_rope_table2
}  // namespace tokdyn
