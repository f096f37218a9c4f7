// Presets rope-fig2a, rope-fig2c, rope-fig3a, rope-fig3b, rope-fig3c: the circle (d = 2) results
// of "Self-Attention Dynamics with Rotary Position Embeddings": open-semicircle contraction
// (Fig. 2a), the bipodal boundary (Fig. 2c), the energy no-go (Fig. 3a), twisted-state spectra
// (Fig. 3b) and the nonresonant drift (Fig. 3c).
#include <cmath>
#include <fmt/format.h>
#include <numbers>

#include "tokdyn/analysis/rope_circle.hpp"
#include "tokdyn/error.hpp"
#include "tokdyn/experiment.hpp"
#include "tokdyn/experiments/rope_circle_configs.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/reports.hpp"
#include "tokdyn/constants.hpp"

namespace tokdyn {
// A named namespace (not an anonymous one): its using-directive must not reach the other files of
// a unity batch.
namespace preset_rope_circle_figs {

using namespace rope;
using tokdyn::kPi;
using Summary = SummaryWriter;

void run_fig2a(const Params& P, RunContext& ctx) {
  const auto trajs = fig2a_trajectories(static_cast<int>(P.get_int("samples")));
  CsvWriter w(ctx.dir / "trajectories.csv", {"case", "t", "tau", "D", "q_ratio", "envelope"});
  Summary s(ctx.dir);
  double worst = -INFINITY;
  for (const auto& T : trajs) {
    const std::string name = fmt::format("n={}, beta={}, omega={}, D0={:.4f}pi", T.n, T.beta, T.omega, T.D0 / kPi);
    for (const auto& x : T.samples) w.cell(name).cell(x.t).cell(x.tau).cell(x.D).cell(x.q_ratio).cell(x.bound).end_row();
    s.put("max_excess_over_envelope " + name, T.max_excess);
    worst = std::max(worst, T.max_excess);
  }
  s.put("max_excess_over_envelope", worst, "<= 0 (q/q0 <= e^-tau)");
  ctx.notes["integrator"] = "phase form (9), Boost.Odeint Runge-Kutta-Fehlberg 7(8), rtol 1e-10, atol 1e-12 (the paper: DOP853)";
}

void run_fig2c(const Params& P, RunContext& ctx) {
  const long pts = P.get_int("samples");
  const double tau_max = P.get_double("tau_max");
  const double a = softmax_floor(2.0, 2);
  std::vector<double> times(static_cast<std::size_t>(pts));
  for (long i = 0; i < pts; ++i) times[static_cast<std::size_t>(i)] = tau_max / (2.0 * a) * static_cast<double>(i) / static_cast<double>(pts - 1);
  CsvWriter w(ctx.dir / "trajectories.csv", {"case", "t", "tau", "D_over_pi", "bound_over_pi"});
  w.blank_nonfinite({"bound_over_pi"});  // empty: the bipodal case D0 = pi has no bound
  for (const auto& [name, D0] : {std::pair<std::string, double>{"D0 = pi (bipodal)", kPi}, {"D0 = pi - 0.05", kPi - 0.05}}) {
    for (const auto& x : fig2c_curve(D0, times))
      w.cell(name).cell(x.t).cell(x.tau).cell(x.D_over_pi).cell(D0 == kPi ? NAN : x.bound_over_pi).end_row();
  }
  Summary s(ctx.dir);
  const char* paper_D[] = {"0.967213", "0.931714", "0.850085"};
  const char* paper_B[] = {"0.967343", "0.933133", "0.864288"};
  int i = 0;
  for (const auto& x : fig2c_checkpoints()) {
    s.put(fmt::format("D/pi at tau = {:.3f}", x.tau), x.D_over_pi, paper_D[i]);
    s.put(fmt::format("bound/pi at tau = {:.3f}", x.tau), x.bound_over_pi, paper_B[i]);
    ++i;
  }
  const auto stay = fig2c_curve(kPi, {0.0, times.back()});
  s.put("bipodal D/pi at the end", stay.back().D_over_pi, "1 (stationary)");
}

void run_fig3a(const Params& P, RunContext& ctx) {
  const EnergyGrid g = energy_rate_grid(static_cast<int>(P.get_int("points")));
  CsvWriter w(ctx.dir / "field.csv", {"theta1", "theta2", "dE"});
  for (Eigen::Index i = 0; i < g.axis.size(); ++i)
    for (Eigen::Index j = 0; j < g.axis.size(); ++j) w.cell(g.axis[i]).cell(g.axis[j]).cell(g.rate(i, j)).end_row();
  const PhaseParams p = prop32_params();
  CsvWriter wit(ctx.dir / "witnesses.csv", {"theta1", "theta2", "dE", "dE_closed_form", "dE_finite_difference", "paper"});
  const Vec a = prop32_state_plus(), b = prop32_state_minus();
  wit.cell(a[1]).cell(a[2]).cell(energy_rate(p, a)).cell(energy_witness_plus_closed()).cell(energy_rate_fd(p, a))
      .cell(std::string("1.666364304459315")).end_row();
  wit.cell(b[1]).cell(b[2]).cell(energy_rate(p, b)).cell(energy_witness_minus_closed()).cell(energy_rate_fd(p, b))
      .cell(std::string("-0.1296131359239394")).end_row();
  Summary s(ctx.dir);
  s.put("dE+(0,pi/6,pi/3)", energy_rate(p, a), "1.666364304459315");
  s.put("dE+(0,pi/6,0)", energy_rate(p, b), "-0.1296131359239394");
  s.put("grid min", g.rate.minCoeff());
  s.put("grid max", g.rate.maxCoeff());
}

void run_fig3b(const Params& P, RunContext& ctx) {
  const int n = static_cast<int>(P.get_int("n"));
  const long m = P.get_int("m");
  if (m % n == 0) throw InputError(fmt::format("parameter 'm': expected a nonzero resonant mode (m mod n != 0), got {}", m));
  if (n % 2 == 0) throw InputError(fmt::format("parameter 'n': the odd antipodal case needs odd n, got {}", n));
  CsvWriter w(ctx.dir / "spectra.csv", {"case", "eigenvalue", "multiplicity", "exact"});
  Summary s(ctx.dir);
  const struct {
    std::string name;
    TwistOmega om;
  } cases[] = {{fmt::format("generic (n, m) = ({}, {})", n, m), TwistOmega::resonant(n, m)},
               {fmt::format("odd antipodal (n, omega) = ({}, pi)", n), TwistOmega::odd_antipodal()}};
  for (const auto& c : cases) {
    const Mat J = twisted_jacobian(n, c.om.value());
    const auto exact = twisted_spectrum_exact(n, c.om);
    for (const auto& [ev, mult] : eigenvalue_multiplicities(J)) {
      std::string ex;
      for (const auto& e : exact)
        if (std::abs(e.value() - ev) < 1e-9) ex = fmt::format("{}/{} x{}", e.num, e.den, e.mult);
      w.cell(c.name).cell(ev).cell(static_cast<long>(mult)).cell(ex).end_row();
    }
    s.put("spectrum error " + c.name, spectrum_error(J, exact));
    const TwistedRow row = twisted_check(c.name, n, c.om, P.get_double("beta"), m);
    s.put("direct RHS at the twisted state " + c.name, row.rhs_max);
    s.put("Jacobian FD error " + c.name, row.jacobian_fd_error);
  }
}

void run_fig3c(const Params& P, RunContext& ctx) {
  const auto rows = twisted_nonresonant_grid(2.0, static_cast<int>(P.get_int("fd_max_n")));
  CsvWriter w(ctx.dir / "drift.csv", {"omega", "n", "max_direct", "sharp_bound", "coarse_bound", "formula_error"});
  double err = 0.0;
  for (const auto& r : rows) {
    w.cell(r.omega).cell(static_cast<long>(r.n)).cell(r.max_drift).cell(r.sharp_bound).cell(r.coarse_bound).cell(r.drift_error).end_row();
    err = std::max(err, r.drift_error);
  }
  Summary s(ctx.dir);
  s.put("max direct/formula error", err, "<= 1.4e-15 (Fig. 3c), 3.764e-16 (Table 2)");
  s.put("configurations", static_cast<double>(rows.size()), "50");
  ctx.notes["n_values"] = "the paper lists no n: 10 log-spaced values 10..200, round(10 * 20^(k/9))";
}

const ExperimentRegistration r2a{with_smoke(Experiment{
    "rope-fig2a", "RoPE paper Fig. 2a / Thm 6.3: open-semicircle contraction q(t)/q0 against the envelope e^{-tau}",
    {p_int("samples", 501, "output times on tau in [0, 5]", 2, 1000000)}, run_fig2a, "rope-fig2a"}, {{"samples", "11"}})};
const ExperimentRegistration r2c{with_smoke(Experiment{
    "rope-fig2c", "RoPE paper Fig. 2c / Prop. 6.4: the bipodal boundary D0 = pi is stationary, D0 = pi - 0.05 contracts",
    {p_int("samples", 251, "output times", 2, 1000000), p_double("tau_max", 2.5, "largest floor-scaled time", 0.0, {}, true)},
    run_fig2c, "rope-fig2c"}, {{"samples", "11"}})};
const ExperimentRegistration r3a{with_smoke(Experiment{
    "rope-fig3a", "RoPE paper Fig. 3a / Prop. 3.2: the energy derivative changes sign (no-go), with the exact witnesses",
    {p_int("points", 181, "grid points per axis on [-pi, pi]", 3, 5000)}, run_fig3a, "rope-fig3a"}, {{"points", "11"}})};
const ExperimentRegistration r3b{with_smoke(Experiment{
    "rope-fig3b", "RoPE paper Fig. 3b / Props. 7.1-7.2: twisted-state Jacobian spectra, generic and odd antipodal",
    {p_int("n", 9, "tokens (odd, for the antipodal case)", 3, 4096), p_int("m", 2, "resonant mode of the generic case", 0, 65536),
     p_double("beta", 2.0, "inverse temperature (the spectra do not depend on it)", 0.0)},
    run_fig3b, "rope-fig3b",
    [](const Params& P) {
      const double n = static_cast<double>(P.get_int("n"));
      return ResourceEstimate{8.0 * 8.0 * n * n + 64e6, 20.0 * n * n * n, "n x n twisted-state Jacobians and their spectra"};
    }}, {{"n", "5"}})};
const ExperimentRegistration r3c{with_smoke(Experiment{
    "rope-fig3c", "RoPE paper Fig. 3c / Prop. 4.2: nonresonant drift against its sharp and coarse bounds",
    {p_int("fd_max_n", 40, "largest n whose finite-difference Jacobian is also checked", 0, 1 << 20)}, run_fig3c, "rope-fig3c"}, {})};

}  // namespace preset_rope_circle_figs
}  // namespace tokdyn
