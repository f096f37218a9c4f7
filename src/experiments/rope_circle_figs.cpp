// Presets rope-fig2a, rope-fig2c, rope-fig3a, rope-fig3b, rope-fig3c: the circle (d = 2) results
// of "Self-Attention Dynamics with Rotary Position Embeddings": open-semicircle contraction
// (Fig. 2a), the bipodal boundary (Fig. 2c), the energy no-go (Fig. 3a), twisted-state spectra
// (Fig. 3b) and the nonresonant drift (Fig. 3c).
#include <cmath>
#include <fmt/format.h>
#include <numbers>

#include "tokdyn/analysis/rope_circle.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/rope_circle_configs.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/core/constants.hpp"

namespace tokdyn {
// A named namespace (not an anonymous one): its using-directive must not reach the other files of
// a unity batch.
namespace preset_rope_circle_figs {

using namespace rope;
using tokdyn::kPi;

void run_fig2a(const Params& P, RunContext& ctx) {
  const auto trajs = fig2a_trajectories(static_cast<int>(P.get_int("samples")));
  CsvWriter w = ctx.table("trajectories.csv");
  double worst = -INFINITY;
  for (const auto& T : trajs) {
    const std::string name = fmt::format("n={}, beta={}, omega={}, D0={:.4f}pi", T.n, T.beta, T.omega, T.D0 / kPi);
    for (const auto& x : T.samples) w.cell(name).cell(x.t).cell(x.tau).cell(x.D).cell(x.q_ratio).cell(x.bound).end_row();
    ctx.summary("max_excess_over_envelope " + name, T.max_excess);
    worst = std::max(worst, T.max_excess);
  }
  ctx.summary("max_excess_over_envelope", worst, "<= 0 (q/q0 <= e^-tau)");
  ctx.notes["integrator"] = "phase form (9), Boost.Odeint Runge-Kutta-Fehlberg 7(8), rtol 1e-10, atol 1e-12 (the paper: DOP853)";
}

void run_fig2c(const Params& P, RunContext& ctx) {
  const long pts = P.get_int("samples");
  const double tau_max = P.get_double("tau_max");
  const double a = softmax_floor(2.0, 2);
  std::vector<double> times(static_cast<std::size_t>(pts));
  for (long i = 0; i < pts; ++i) times[static_cast<std::size_t>(i)] = tau_max / (2.0 * a) * static_cast<double>(i) / static_cast<double>(pts - 1);
  CsvWriter w = ctx.table("trajectories.csv");
  w.blank_nonfinite({"bound_over_pi"});  // empty: the bipodal case D0 = pi has no bound
  for (const auto& [name, D0] : {std::pair<std::string, double>{"D0 = pi (bipodal)", kPi}, {"D0 = pi - 0.05", kPi - 0.05}}) {
    for (const auto& x : fig2c_curve(D0, times))
      w.cell(name).cell(x.t).cell(x.tau).cell(x.D_over_pi).cell(D0 == kPi ? NAN : x.bound_over_pi).end_row();
  }
  const char* paper_D[] = {"0.967213", "0.931714", "0.850085"};
  const char* paper_B[] = {"0.967343", "0.933133", "0.864288"};
  int i = 0;
  for (const auto& x : fig2c_checkpoints()) {
    ctx.summary(fmt::format("D/pi at tau = {:.3f}", x.tau), x.D_over_pi, paper_D[i]);
    ctx.summary(fmt::format("bound/pi at tau = {:.3f}", x.tau), x.bound_over_pi, paper_B[i]);
    ++i;
  }
  const auto stay = fig2c_curve(kPi, {0.0, times.back()});
  ctx.summary("bipodal D/pi at the end", stay.back().D_over_pi, "1 (stationary)");
}

void run_fig3a(const Params& P, RunContext& ctx) {
  const EnergyGrid g = energy_rate_grid(static_cast<int>(P.get_int("points")));
  CsvWriter w = ctx.table("field.csv");
  for (Eigen::Index i = 0; i < g.axis.size(); ++i)
    for (Eigen::Index j = 0; j < g.axis.size(); ++j) w.cell(g.axis[i]).cell(g.axis[j]).cell(g.rate(i, j)).end_row();
  const PhaseParams p = prop32_params();
  CsvWriter wit = ctx.table("witnesses.csv");
  const Vec a = prop32_state_plus(), b = prop32_state_minus();
  wit.cell(a[1]).cell(a[2]).cell(energy_rate(p, a)).cell(energy_witness_plus_closed()).cell(energy_rate_fd(p, a))
      .cell(std::string("1.666364304459315")).end_row();
  wit.cell(b[1]).cell(b[2]).cell(energy_rate(p, b)).cell(energy_witness_minus_closed()).cell(energy_rate_fd(p, b))
      .cell(std::string("-0.1296131359239394")).end_row();
  ctx.summary("dE+(0,pi/6,pi/3)", energy_rate(p, a), "1.666364304459315");
  ctx.summary("dE+(0,pi/6,0)", energy_rate(p, b), "-0.1296131359239394");
  ctx.summary("grid min", g.rate.minCoeff());
  ctx.summary("grid max", g.rate.maxCoeff());
}

void run_fig3b(const Params& P, RunContext& ctx) {
  const int n = static_cast<int>(P.get_int("n"));
  const long m = P.get_int("m");
  if (m % n == 0) throw InputError(fmt::format("parameter 'm': expected a nonzero resonant mode (m mod n != 0), got {}", m));
  if (n % 2 == 0) throw InputError(fmt::format("parameter 'n': the odd antipodal case needs odd n, got {}", n));
  CsvWriter w = ctx.table("spectra.csv");
  // key: the case in the summaries' names (fixed: n and m are parameters, named in spectra.csv:case).
  const struct {
    std::string name, key;
    TwistOmega om;
  } cases[] = {{fmt::format("generic (n, m) = ({}, {})", n, m), "generic", TwistOmega::resonant(n, m)},
               {fmt::format("odd antipodal (n, omega) = ({}, pi)", n), "odd antipodal", TwistOmega::odd_antipodal()}};
  for (const auto& c : cases) {
    const Mat J = twisted_jacobian(n, c.om.value());
    const auto exact = twisted_spectrum_exact(n, c.om);
    for (const auto& [ev, mult] : eigenvalue_multiplicities(J)) {
      std::string ex;
      for (const auto& e : exact)
        if (std::abs(e.value() - ev) < 1e-9) ex = fmt::format("{}/{} x{}", e.num, e.den, e.mult);
      w.cell(c.name).cell(ev).cell(static_cast<long>(mult));
      if (ex.empty()) w.empty(); else w.cell(ex);
      w.end_row();
    }
    ctx.summary("spectrum error " + c.key, spectrum_error(J, exact));
    const TwistedRow row = twisted_check(c.name, n, c.om, P.get_double("beta"), m);
    ctx.summary("direct RHS at the twisted state " + c.key, row.rhs_max);
    ctx.summary("Jacobian FD error " + c.key, row.jacobian_fd_error);
  }
}

void run_fig3c(const Params& P, RunContext& ctx) {
  const auto rows = twisted_nonresonant_grid(2.0, static_cast<int>(P.get_int("fd_max_n")));
  CsvWriter w = ctx.table("drift.csv");
  double err = 0.0;
  for (const auto& r : rows) {
    w.cell(r.omega).cell(static_cast<long>(r.n)).cell(r.max_drift).cell(r.sharp_bound).cell(r.coarse_bound).cell(r.drift_error).end_row();
    err = std::max(err, r.drift_error);
  }
  ctx.summary("max direct/formula error", err, "<= 1.4e-15 (Fig. 3c), 3.764e-16 (Table 2)");
  ctx.summary("configurations", static_cast<double>(rows.size()), "50");
  ctx.notes["n_values"] = "the paper lists no n: 10 log-spaced values 10..200, round(10 * 20^(k/9))";
}


// ------------------------------------------------------------------ output declarations

const std::string kFig2aCase1 = "n=2, beta=0, omega=0, D0=0.9000pi", kFig2aCase2 = "n=6, beta=1, omega=0.7, D0=0.9000pi",
                  kFig2aCase3 = "n=2, beta=2, omega=0, D0=0.9841pi";

OutputDecl rope_fig2a_outputs() {
  OutputDecl o;
  o.tables = {{"trajectories.csv", "one sample of one integrated circle trajectory (phase form (9)): diameter against the envelope",
               {category("case", "the trajectory (n tokens, inverse temperature, frequency, initial lifted diameter)",
                         {{kFig2aCase1, "two tokens, beta = 0: q(t) = q0 e^{-t} exactly"},
                          {kFig2aCase2, "six tokens, seeded state of lifted diameter 0.9 pi"},
                          {kFig2aCase3, "two tokens at lifted diameter pi - 0.05"}}),
                real("t", "time"), real("tau", "floor-scaled time tau = 2 a_{beta,n} t"),
                real("D", "lifted diameter max_i theta_i - min_i theta_i", "rad"),
                real("q_ratio", "q(t)/q0 with q = tan(D/2)"),
                real("envelope", "e^{-tau}: Thm 6.3's bound on q/q0")}}};
  for (const std::string& c : {kFig2aCase1, kFig2aCase2, kFig2aCase3})
    o.summaries.push_back({"max_excess_over_envelope " + c, "max over the samples of q/q0 - e^{-tau} for this trajectory (<= 0: Thm 6.3 holds)"});
  o.summaries.push_back({"max_excess_over_envelope", "the largest of the three"});
  o.figures = {{"fig2a_semicircle.png", "q(t)/q0 of each trajectory against the envelope e^{-tau} (log scale)"}};
  return o;
}

OutputDecl rope_fig2c_outputs() {
  OutputDecl o;
  o.tables = {{"trajectories.csv", "one output time of one two-token circle trajectory (n = 2, beta = 2, omega = 0)",
               {category("case", "the initial lifted diameter D0",
                         {{"D0 = pi (bipodal)", "an antipodal pair: stationary (Prop. 6.4)"},
                          {"D0 = pi - 0.05", "just inside the open semicircle: contracts (Thm 6.3)"}}),
                real("t", "time"), real("tau", "floor-scaled time tau = 2 a_{beta,n} t"),
                real("D_over_pi", "lifted diameter D(t) / pi"),
                real("bound_over_pi", "comparison solution 2 atan(tan(D0/2) e^{-tau}) / pi")
                    .may_be_empty("the bipodal case D0 = pi: no bound")}}};
  for (const char* tau : {"0.719", "1.439", "2.158"}) {
    o.summaries.push_back({fmt::format("D/pi at tau = {}", tau), "D/pi of the D0 = pi - 0.05 trajectory at the paper's marked point "
                                                                "(t = 20, 40, 60)"});
    o.summaries.push_back({fmt::format("bound/pi at tau = {}", tau), "the comparison solution / pi at that point"});
  }
  o.summaries.push_back({"bipodal D/pi at the end", "D/pi of the D0 = pi trajectory at the last output time (1: stationary)"});
  o.figures = {{"fig2c_bipodal.png", "D(t)/pi of both trajectories, with the comparison solution"}};
  return o;
}

OutputDecl rope_fig3a_outputs() {
  OutputDecl o;
  const std::string at = " at theta = (0, theta1, theta2) (Prop. 3.2: n = 3, positions 0, 1, 2, beta = 1, omega = pi)";
  o.tables = {{"field.csv", "one grid point (theta1, theta2) on [-pi, pi]^2: the energy derivative",
               {real("theta1", "phase of token 1", "rad"), real("theta2", "phase of token 2", "rad"),
                real("dE", "dE+/dt by the identity (A-1)" + at)}},
              {"witnesses.csv", "one of the paper's two witness states: dE+/dt by three routes and the paper's value",
               {real("theta1", "phase of token 1", "rad"), real("theta2", "phase of token 2", "rad"),
                real("dE", "dE+/dt by the identity (A-1)" + at),
                real("dE_closed_form", "the closed form (A-2) (first row) or (A-3) (second row)"),
                real("dE_finite_difference", "centred difference of E+ along the field (9), h = 1e-6"),
                text("paper", "the paper's value, as printed")}}};
  o.summaries = {{"dE+(0,pi/6,pi/3)", "dE+/dt at the positive witness (A-2)"},
                 {"dE+(0,pi/6,0)", "dE+/dt at the negative witness (A-3)"},
                 {"grid min", "smallest dE+/dt over the grid (< 0: the energy can decrease)"},
                 {"grid max", "largest dE+/dt over the grid (> 0: it can increase; no Lyapunov function)"}};
  o.figures = {{"fig3a_energy.png", "dE+/dt over (theta1, theta2) with its zero contour and the two witnesses"}};
  return o;
}

OutputDecl rope_fig3b_outputs() {
  OutputDecl o;
  o.tables = {{"spectra.csv", "one distinct eigenvalue of the twisted-state Jacobian (B-4) of one case",
               {text("case", "the twisted state: 'generic (n, m) = (N, M)' (omega = 2 pi m / n) or 'odd antipodal (n, omega) = (N, pi)'"),
                real("eigenvalue", "eigenvalue of J (dense eigensolve; equal within 1e-10 grouped)"),
                integer("multiplicity", "how many eigenvalues of J the group holds"),
                text("exact", "the exact eigenvalue of (41)-(43) it matches within 1e-9, as 'num/den xmultiplicity'")
                    .may_be_empty("no exact eigenvalue within 1e-9")}}};
  for (const char* c : {"generic", "odd antipodal"}) {
    const std::string which = std::string(" (") + c + " case: n, m as in spectra.csv:case)";
    o.summaries.push_back({fmt::format("spectrum error {}", c), "max |sorted eigenvalues of J - the exact multiset (41)-(43)|" + which});
    o.summaries.push_back({fmt::format("direct RHS at the twisted state {}", c), "max_i |right-hand side (9)| at the twisted state "
                                                                               "(0: an equilibrium)" + which});
    o.summaries.push_back({fmt::format("Jacobian FD error {}", c), "max |centred FD Jacobian (h = 2e-7) - (B-4)|" + which});
  }
  o.figures = {{"fig3b_twisted_spectra.png", "eigenvalue multiplicities of both cases, labelled with the exact values"}};
  return o;
}

OutputDecl rope_fig3c_outputs() {
  OutputDecl o;
  o.tables = {{"drift.csv", "one nonresonant twisted state (omega, n): its drift against the bounds (17)",
               {real("omega", "twist frequency (outside pi Q)", "rad"), integer("n", "tokens"),
                real("max_direct", "max_i |dtheta_i/dt| at the twisted state, by the drift formula (A-5) (the direct right-hand side "
                                   "(9) agrees within formula_error)"),
                real("sharp_bound", "sharp bound (17): |sin(n omega/2)| / (n |sin(omega/2)|)"),
                real("coarse_bound", "coarse bound (17): 1 / (n |sin(omega/2)|)"),
                real("formula_error", "max_i |direct right-hand side (9) - drift formula (A-5)|")}}};
  o.summaries = {{"max direct/formula error", "largest formula_error over the configurations"},
                 {"configurations", "nonresonant configurations evaluated"}};
  o.figures = {{"fig3c_drift.png", "drift and its sharp and coarse bounds against n, per omega"}};
  return o;
}

const ExperimentRegistration r2a{with_outputs(with_smoke(Experiment{
    "rope-fig2a", "RoPE paper Fig. 2a / Thm 6.3: open-semicircle contraction q(t)/q0 against the envelope e^{-tau}",
    {p_int("samples", 501, "output times on tau in [0, 5]", 2, 1000000)}, run_fig2a, "rope-fig2a",
    [](const Params& P) {  // measured: about 20 us per output time (the trajectories' dense output and rows)
      const double n = static_cast<double>(P.get_int("samples"));
      cost::Work w;
      w.add_timed(2e4 * n, 20e-6 * n);
      return w.estimate(64e6 + 400.0 * n, "the trajectories at every output time");
    }}, {{"samples", "11"}}), rope_fig2a_outputs())};
const ExperimentRegistration r2c{with_outputs(with_smoke(Experiment{
    "rope-fig2c", "RoPE paper Fig. 2c / Prop. 6.4: the bipodal boundary D0 = pi is stationary, D0 = pi - 0.05 contracts",
    {p_int("samples", 251, "output times", 2, 1000000), p_double("tau_max", 2.5, "largest floor-scaled time", 0.0, {}, true)},
    run_fig2c, "rope-fig2c",
    [](const Params& P) {  // measured: about 10 us per output time at tau_max = 2.5, more with a longer horizon
      const double n = static_cast<double>(P.get_int("samples")), t = std::max(1.0, P.get_double("tau_max") / 2.5);
      cost::Work w;
      w.add_timed(1e4 * n * t, 10e-6 * n * t);
      return w.estimate(64e6 + 400.0 * n, "the trajectories at every output time");
    }}, {{"samples", "11"}}), rope_fig2c_outputs())};
const ExperimentRegistration r3a{with_outputs(with_smoke(Experiment{
    "rope-fig3a", "RoPE paper Fig. 3a / Prop. 3.2: the energy derivative changes sign (no-go), with the exact witnesses",
    {p_int("points", 181, "grid points per axis on [-pi, pi]", 3, 5000)}, run_fig3a, "rope-fig3a"}, {{"points", "11"}}), rope_fig3a_outputs())};
const ExperimentRegistration r3b{with_outputs(with_smoke(Experiment{
    "rope-fig3b", "RoPE paper Fig. 3b / Props. 7.1-7.2: twisted-state Jacobian spectra, generic and odd antipodal",
    {p_int("n", 9, "tokens (odd, for the antipodal case)", 3, 4096), p_int("m", 2, "resonant mode of the generic case", 0, 65536),
     p_double("beta", 2.0, "inverse temperature (the spectra do not depend on it)", 0.0)},
    run_fig3b, "rope-fig3b",
    [](const Params& P) {
      const double n = static_cast<double>(P.get_int("n"));
      return ResourceEstimate{8.0 * 8.0 * n * n + 64e6, 20.0 * n * n * n, "n x n twisted-state Jacobians and their spectra"};
    }}, {{"n", "5"}}), rope_fig3b_outputs())};
const ExperimentRegistration r3c{with_outputs(with_smoke(Experiment{
    "rope-fig3c", "RoPE paper Fig. 3c / Prop. 4.2: nonresonant drift against its sharp and coarse bounds",
    {p_int("fd_max_n", 40, "largest n whose finite-difference Jacobian is also checked", 0, 1 << 20)}, run_fig3c, "rope-fig3c"}, {}), rope_fig3c_outputs())};

}  // namespace preset_rope_circle_figs
}  // namespace tokdyn
