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
#include "tokdyn/drivers.hpp"
#include "tokdyn/error.hpp"
#include "tokdyn/experiment.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/experiments/rope_circle_configs.hpp"
#include "tokdyn/experiments/rope_spectra_configs.hpp"
#include "tokdyn/experiments/rope_sphere_configs.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/models/rope_attention.hpp"
#include "tokdyn/observers.hpp"

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
  CsvWriter w(ctx.dir / "trajectories.csv", {"case", "t", "tau", "c", "bound"});
  CsvWriter s(ctx.dir / "summary.csv", {"quantity", "value", "paper"});
  const Tokens plain = equiangular_state(n, 0.0);
  const Tokens rotated = equiangular_rotated(n, 0.0, 2026);
  {  // active pairs at t = 0: every pair has <x_i, x_j> = 0 exactly
    long active = 0;
    const Mat G = plain * plain.transpose();
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) active += G(i, j) == 0.0 ? 1 : 0;
    s.cell(std::string("active unordered pairs at t = 0")).cell(active).cell(std::string(n == 5 ? "10" : "")).end_row();
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
  s.cell(std::string("max (tanh tau - c(t)) over both orientations and steps")).cell(worst).cell(std::string("<= 0")).end_row();
  ctx.notes["integrator"] = "classical RK4, every stage retracted to the spheres; step h and h/2";
  ctx.notes["step_check"] = step_report_json(steps, StepPolicy::Refuse);
  ctx.notes["states"] = "x_i = e_i in d = n + 1 (plane-aligned) and the same times a seeded orthogonal matrix (rotated)";
}

// ------------------------------------------------------------------ Fig. 4d

void run_fig4d(const Params& P, RunContext& ctx) {
  SlowModeOptions o;
  o.h = P.get_double("h");
  const auto fits = multifrequency_rate_fits(o);
  CsvWriter w(ctx.dir / "rates.csv", {"a_high", "gamma", "gamma_fit", "rel_error", "samples"});
  double worst = 0.0;
  StepReport steps;
  for (const auto& f : fits) {
    steps.merge(f.steps);
    w.cell(f.energy_high).cell(f.gamma).cell(f.gamma_fit).cell(f.rel_error).cell(static_cast<long>(f.samples)).end_row();
    worst = std::max(worst, f.rel_error);
  }
  CsvWriter s(ctx.dir / "summary.csv", {"quantity", "value", "paper"});
  s.cell(std::string("max relative rate error")).cell(worst).cell(std::string("2.80e-06")).end_row();
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
  explicit Table2(const std::filesystem::path& dir)
      : w(dir / "table2.csv", {"row", "quantity", "paper", "tokdyn", "count"}), checks(dir / "checks.csv") {}
  void put(const std::string& row, const std::string& q, const std::string& paper, double v, long count) {
    w.cell(row).cell(q).cell(paper).cell(v).cell(count).end_row();
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
  Table2 T(ctx.dir);
  // Wall-clock seconds per part go into the manifest's notes, not into a result file: the result
  // files have the same bytes on every run and thread count, a time never does.
  nlohmann::json part_times = nlohmann::json::array();
  StepReport rk4_steps;  // every sphere RK4 integration of the table (guarded, refuse)
  auto timed = [&](const char* part, auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    part_times.push_back({{"part", part}, {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}});
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
    CsvWriter c(ctx.dir / "resonant.csv", {"n", "m", "beta", "g", "L", "reachable", "structural_zeros", "spectrum_error", "dft_error",
                                           "gap_bessel", "gap_lgrid", "gap_error"});
    for (const auto& r : rs.rows)
      c.cell(r.cfg.n).cell(r.cfg.m).cell(r.cfg.beta).cell(r.g).cell(r.L).cell(r.reachable).cell(r.structural_zeros)
          .cell(r.spectrum_error).cell(r.dft_error).cell(r.gap_bessel).cell(r.gap_lgrid).cell(r.gap_error).end_row();
    T.put(r1, "full-spectrum error", "1.554e-15", rs.max_spectrum_error, rs.count);
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
    CsvWriter c(ctx.dir / "rate_fits.csv", {"family", "n", "m", "beta", "a_high", "gamma", "gamma_fit", "rel_error"});
    double worst = 0.0;
    long count = 0;
    for (const auto& tr : circle_rate_fit_triples()) {
      const RateFit f = circle_rate_fit(tr);
      c.cell(std::string("resonant")).cell(tr.n).cell(tr.m).cell(tr.beta).empty().cell(f.gamma).cell(f.gamma_fit).cell(f.rel_error).end_row();
      worst = std::max(worst, f.rel_error);
      ++count;
      step(0.3 / 12.0);
    }
    T.put(r1, "relative rate error", "1.059e-07", worst, count);
    T.discrepancy("T2.1 rate", r1, "max relative error of the fitted nonlinear rate against the linear gap", worst, 1e-6, "1.059e-7",
                  independent("nonlinear phase-flow integration (Bulirsch-Stoer) vs the spectral gap"));
    T.count("T2.1 rate fits", r1, "rate fits", count, 12);
  });

  // Row 2: geometric contraction bounds.
  const std::string r2 = "Geometric contraction bounds";
  timed("geometric (Dini grids, trajectories)", [&] {
    long evals = 0;
    double min_res = INFINITY, max_excess = -INFINITY;
    CsvWriter c(ctx.dir / "dini.csv", {"family", "variant", "n", "d", "beta", "omega", "config", "value", "residual_formula", "residual_direct", "active"});
    const DiniGrid sg = sphere_dini_grids();
    for (const auto& r : sg.rows)
      c.cell(r.family).cell(r.variant).cell(r.n).cell(r.d).cell(r.beta).empty().cell(r.config).cell(r.value).cell(r.residual_formula)
          .cell(r.residual_direct).cell(r.active).end_row();
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
    CsvWriter tr(ctx.dir / "trajectories.csv", {"family", "n", "beta", "omega", "D0", "max_excess", "max_excess_abs"});
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
    CsvWriter c(ctx.dir / "twisted.csv", {"family", "n", "m", "omega", "rhs_max", "drift_error", "max_drift", "sharp_bound", "coarse_bound",
                                          "jacobian_fd_error", "spectrum_error"});
    for (const auto* S : {&eq, &nr})
      for (const auto& r : S->rows)
        c.cell(r.family).cell(r.n).cell(r.m).cell(r.omega).cell(r.rhs_max).cell(r.drift_error).cell(r.max_drift).cell(r.sharp_bound)
            .cell(r.coarse_bound).cell(r.jacobian_fd_error).cell(r.spectrum_error).end_row();
    T.put(r3, "drift-formula error (nonresonant)", "3.764e-16", nr.max_drift_error, nr.count);
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
    CsvWriter c(ctx.dir / "multifrequency.csv", {"kind", "n", "beta", "a_high", "gap_similarity", "gap_laplacian", "gap_generalized",
                                                 "disagreement", "lambda_min_W", "lambda_min_S"});
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
    CsvWriter f(ctx.dir / "rate_fits_multifrequency.csv", {"a_high", "gamma", "gamma_fit", "rel_error"});
    for (const auto& x : fits) {
      rk4_steps.merge(x.steps);
      f.cell(x.energy_high).cell(x.gamma).cell(x.gamma_fit).cell(x.rel_error).end_row();
      worst = std::max(worst, x.rel_error);
    }
    T.put(r4, "relative rate error", "2.805e-06", worst, static_cast<long>(fits.size()));
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

const ExperimentRegistration r2b{with_smoke(Experiment{
    "rope-fig2b", "RoPE paper Fig. 2b / Thm 6.2: initially orthogonal tokens stay above tanh(tau), two orientations, step halved",
    {p_int("n", 5, "tokens (d = n + 1)", 2, 64), p_double("beta", 1.0, "inverse temperature", 0.0),
     p_double("tau_max", 1.2, "largest floor-scaled time", 0.0, {}, true), p_double("h", 2e-2, "RK4 step (also run at h/2)", 0.0, {}, true),
     p_int("outputs", 120, "output times", 1, 1000000)},
    run_fig2b, "rope-fig2b"}, {{"n", "3"}, {"outputs", "10"}})};
const ExperimentRegistration r4d{with_smoke(Experiment{
    "rope-fig4d", "RoPE paper Fig. 4d: fitted nonlinear slow-mode rates against the gap, n = 16, beta = 4, frequencies (1, 0.01)",
    {p_double("h", 1e-2, "retracted RK4 step", 0.0, {}, true)}, run_fig4d, "rope-fig4d"}, {})};
const ExperimentRegistration rt2{with_smoke(Experiment{
    "rope-table2", "RoPE paper Table 2: all four rows of independent cross-checks, with the paper's configuration counts",
    {p_int("fd_max_n", 1 << 20, "largest nonresonant n whose FD Jacobian is also checked", 0, 1 << 20)}, run_table2, "rope-table2"}, {{"fd_max_n", "0"}})};

}  // namespace preset_rope_table2
}  // namespace tokdyn
