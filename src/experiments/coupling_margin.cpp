// Preset coupling-margin: the closed-loop stability margin of the coupling paper (Thm 12, Remark 5,
// App. C.2; checks R20, R21, flags F4, F5, F18).
//   R20 sweep |rho| upward (both signs) by pseudo-arclength continuation of u*_rho on a weight-tied
//       G1 cocycle with an affine psi; at every point the closed-loop generator A + rho Dpsi(u*_rho):
//       end multipliers (1 entering the spectrum, unstable dimension), the closed-loop BVP's smallest
//       singular value (||G_rho||), the closed-loop bundles and their deviation from P_±. rho_crit
//       (the first event, bisected) against the exact weight-tied threshold and the three bounds:
//       rho_max^{C.2} <= rho_crit (and the sharper C.2 form, and rho_0 = 1/(2 K L_psi)); (17) with
//       c_0 = 1 reported in the manifest (flag F5: violated means c_0 < 1 is needed). Projector deviation against
//       C^2 |rho| L_psi / mu and the rate shift against 2CK beta/(1 - 2K beta).
//       (A7) on a rotating G4 cocycle: an intertwining-aligned psi keeps P_± exactly; a same-index
//       aligned one does not (flag F4).
//   R21 scalar weight-tied 1 + sigma + rho c: the critical |rho| = min(|sigma|, 2 - |sigma|)/|c| by a
//       grid sweep (exact to its resolution) and by the continuation (bisected); the
//       continuous-time reading |sigma|/|c| differs for sigma < -1 (flag F18).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <fmt/format.h>
#include <limits>

#include "tokdyn/analysis/closed_loop.hpp"
#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/generators_file.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/runtime/inputs.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/core/constants.hpp"

namespace tokdyn {
namespace {

namespace cl = closed_loop;
using cl::Matrix;
using cl::Seq;
using cl::Vector;

using tokdyn::kNaN;
/// Moduli of the eigenvalues of M.
Eigen::VectorXd moduli(const Matrix& M) { return Eigen::EigenSolver<Matrix>(M, false).eigenvalues().cwiseAbs(); }

/// Exact weight-tied threshold: the first rho (in the direction sign) where an eigenvalue of
/// I + A + rho B reaches the unit circle (scan of step h, then bisection).
double weight_tied_crit(const Matrix& Bw, const Matrix& Bpsi, double sign, double rho_end, double h) {
  auto k_of = [&](double r) {
    const Eigen::VectorXd m = moduli(Bw + r * Bpsi);
    long k = 0;
    for (Eigen::Index i = 0; i < m.size(); ++i) k += m(i) > 1.0 ? 1 : 0;
    return k;
  };
  const long k0 = k_of(0.0);
  double good = 0.0;
  for (double r = h; r <= rho_end; r += h) {
    if (k_of(sign * r) != k0) {
      double bad = r;
      for (int i = 0; i < 60; ++i) {
        const double mid = 0.5 * (good + bad);
        (k_of(sign * mid) != k0 ? bad : good) = mid;
      }
      return bad;
    }
    good = r;
  }
  return std::numeric_limits<double>::infinity();
}

/// The benchmark mode (scripts/bench_continuation.sh): a fixed-step pseudo-arclength continuation
/// of u*_rho from rho = 0 on layer maps and a tanh-MLP psi read from .npy files (the NumPy/SciPy
/// peer bench/continuation_peer.py reads the same files and runs the same algorithm).
/// generators: [L, d, d] float64, B(l) = I + A(l); psi: [d, 2d + 2] float64 with columns
/// c | W1 (d x d) | b1 | W2 (d x d), psi(u) = c + W2 tanh(W1 u + b1).
void run_bench(const Params& p, RunContext& ctx) {
  const std::string gfile = p.get_string("bench_generators"), pfile = p.get_string("bench_psi");
  std::vector<Matrix> B = read_generators_npy(gfile, "bench_generators", 2);
  const long d = B[0].rows();
  std::vector<std::size_t> ps;
  const std::vector<double> q = read_npy_double(pfile, ps, std::uint64_t(1) << 30);
  if (ps.size() != 2 || static_cast<long>(ps[0]) != d || static_cast<long>(ps[1]) != 2 * d + 2)
    throw InputError(fmt::format("{}: expected psi of shape [d, 2d + 2] = [{}, {}] (c | W1 | b1 | W2)", pfile, d, 2 * d + 2));
  for (std::size_t i = 0; i < q.size(); ++i)
    if (!std::isfinite(q[i])) throw InputError(fmt::format("parameter 'bench_psi' ({}): entry {} = {}; expected finite values", pfile, i, q[i]));
  auto at = [&](long i, long j) { return q[static_cast<std::size_t>(i * (2 * d + 2) + j)]; };
  Vector c(d), b1(d);
  Matrix W1(d, d), W2(d, d);
  for (long i = 0; i < d; ++i) {
    c(i) = at(i, 0);
    b1(i) = at(i, d + 1);
    for (long j = 0; j < d; ++j) {
      W1(i, j) = at(i, 1 + j);
      W2(i, j) = at(i, d + 2 + j);
    }
  }
  const cl::Problem prob = cl::make_problem(std::move(B), cl::tanh_mlp(c, W1, b1, W2));
  cl::ContinuationOptions o;
  o.ds0 = o.ds_min = o.ds_max = p.get_double("bench_ds");
  o.rho_end = 1e300;
  o.max_steps = static_cast<int>(p.get_int("bench_steps"));
  o.diagnose = false;
  o.tol = 1e-10;
  const auto t0 = std::chrono::steady_clock::now();
  const cl::ContinuationResult res = cl::continue_in_rho(prob, o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ctx.add_phase("continuation", secs);
  const double flops = green::Bvp(prob.B, prob.ends).factor_flops();
  CsvWriter cw = ctx.table("continuation.csv");
  for (std::size_t i = 0; i < res.points.size(); ++i)
    cw.cell(i).cell(res.points[i].rho).cell(res.points[i].u.colwise().norm().maxCoeff()).cell(res.points[i].newton_iterations).end_row();
  CsvWriter fu = ctx.table("final_u.csv");
  const Seq& u = res.points.back().u;
  for (long l = 0; l <= prob.L; ++l)
    for (long i = 0; i < d; ++i) fu.cell(l).cell(i).cell(u(i, l)).end_row();
  ctx.notes["bench"] = {{"continuation_seconds", secs}, {"steps", static_cast<long>(res.points.size()) - 1},
                        {"stop_reason", res.stop_reason}, {"factorizations", res.factorizations},
                        {"factor_gflop_each", flops / 1e9}, {"rejected", res.steps_rejected}, {"d", d}, {"L", prob.L}};
  ctx.summary("continuation_seconds", secs);
  ctx.summary("continuation_steps", static_cast<long>(res.points.size()) - 1);
  ctx.summary("final_rho", res.points.back().rho);
}

void run_margin(const Params& p, RunContext& ctx) {
  if (!p.get_string("bench_generators").empty() || !p.get_string("bench_psi").empty()) {
    if (p.get_string("bench_generators").empty() || p.get_string("bench_psi").empty())
      throw InputError("parameters 'bench_generators' and 'bench_psi': expected both files (benchmark mode) or neither");
    run_bench(p, ctx);
    return;
  }
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const long L = p.get_int("depth"), ex = p.get_int("exclude") < 0 ? L / 5 : p.get_int("exclude");
  if (2 * ex >= L) throw InputError(fmt::format("parameter 'exclude' = {}: expected less than depth/2 = {}", ex, L / 2));
  ctx.notes["exclude"] = ex;
  const double rho_end = p.get_double("rho_end"), ds_max = p.get_double("ds_max");
  const std::vector<double> s21 = number_list_param(p, "r21_sigma"), c21 = number_list_param(p, "r21_c");
  for (double s : s21)
    for (double c : c21) as_input_error([&] { cl::remark5_threshold(s, c); });
  CheckTable checks(ctx.dir / "checks.csv");

  // ---- R20: weight-tied G1 sweep ------------------------------------------------------------------
  const std::vector<double> sigma = number_list_param(p, "sigma");
  const long d = static_cast<long>(sigma.size());
  const auto B = cocycle::family_g1(L, sigma, p.get_double("kappa"), seed);
  const cl::OpenLoop ol = cl::open_loop(B, std::max(1L, L / 4), std::max(1L, L / 50));
  const cl::InjectionPtr psi = cl::random_injection(p.get_string("psi"), d, p.get_double("psi_scale"), p.get_double("psi_offset"), seed);
  write_input_stack(ctx, "generators.npy", B, "the G1 generators A(l), l = 0..L-1 of the R20 sweep ([L, d, d]; --set generators=... of cocycle-spectra reads them)");
  write_input_injection(ctx, "psi", *psi, "the R20 sweep's injection");
  const cl::Problem prob = cl::make_problem(B, psi);
  const double Lpsi = psi->lipschitz();
  if (!(Lpsi > 0)) throw InputError("parameter 'psi_scale': psi has Lipschitz constant 0 (expected a non-constant psi)");
  const cl::Bounds bd = cl::bounds(ol.K, ol.C, ol.r_minus, ol.r_plus, Lpsi);

  CsvWriter sw = ctx.table("rho_sweep.csv");
  // empty: no projector deviation (no bundles at this rho) / no growing closed-loop multiplier
  sw.blank_nonfinite({"projector_deviation", "r_plus_closed", "green_inverse_sigma_min"});
  double crit[2] = {kNaN, kNaN};
  std::string events[2];
  double dev_ratio = 0.0, shift_ratio = 0.0, dev_max = 0.0;
  bool dims_ok = true;
  long points = 0, factorizations = 0;
  for (int dir = 0; dir < 2; ++dir) {
    cl::ContinuationOptions o;
    o.direction = dir == 0 ? 1.0 : -1.0;
    o.rho_end = o.direction * rho_end;
    o.ds0 = ds_max / 4;
    o.ds_max = ds_max;
    o.open = &ol.bundles;
    o.exclude = ex;
    const cl::ContinuationResult res = cl::continue_in_rho(prob, o);
    crit[dir] = std::abs(res.rho_crit);
    events[dir] = res.stop_reason;
    factorizations += res.factorizations;
    for (std::size_t i = 0; i < res.points.size(); ++i) {
      const cl::ContinuationPoint& pt = res.points[i];
      const bool before = i + 1 < res.points.size() || res.stop_reason == "rho_end" || res.stop_reason == "max_steps";
      // Closed-loop rates from the end multipliers (the closed loop of a weight-tied cocycle with a
      // constant u* is weight-tied: its end maps carry the whole spectrum).
      const Eigen::VectorXd m = moduli(B[0] + pt.rho * psi->jacobian(0, pt.ends.minus));
      double rm = 0.0, rp = std::numeric_limits<double>::infinity();
      for (Eigen::Index j = 0; j < m.size(); ++j) (m(j) < 1.0 ? rm : rp) = m(j) < 1.0 ? std::max(rm, m(j)) : std::min(rp, m(j));
      sw.cell(o.direction).cell(pt.rho).cell(pt.u.colwise().norm().maxCoeff()).cell(pt.diag.k_minus).cell(pt.diag.k_plus)
          .cell(pt.diag.end_gap).cell(1.0 / pt.diag.sigma_min).cell(pt.diag.k_bundles).cell(pt.diag.projector_deviation)
          .cell(rm).cell(std::isfinite(rp) ? rp : kNaN).cell(pt.t_rho).cell(pt.newton_iterations).end_row();
      ++points;
      if (!before) continue;
      dims_ok = dims_ok && pt.diag.k_minus == ol.k && pt.diag.k_plus == ol.k && pt.diag.k_bundles == ol.k;
      const double beta = std::abs(pt.rho) * Lpsi;
      if (pt.rho != 0.0 && std::isfinite(pt.diag.projector_deviation)) {
        dev_max = std::max(dev_max, pt.diag.projector_deviation);
        dev_ratio = std::max(dev_ratio, pt.diag.projector_deviation / (ol.C * ol.C * beta / bd.mu));
      }
      if (pt.rho != 0.0 && 2.0 * ol.K * beta < 1.0) {
        // C.2 bounds the shift one-sidedly (r~_- <= r_- + s, r~_+ >= r_+ - s); the roughness argument
        // is symmetric, so the test uses the absolute shifts.
        const double shift = std::max(std::abs(rm - ol.r_minus), ol.k > 0 ? std::abs(ol.r_plus - rp) : 0.0);
        shift_ratio = std::max(shift_ratio, shift / bd.rate_shift(beta));
      }
    }
  }
  const double rho_crit = std::min(crit[0], crit[1]);
  const Matrix Bpsi = psi->jacobian(0, Vector::Zero(d));
  const double exact = std::min(weight_tied_crit(B[0], Bpsi, 1.0, rho_end, ds_max / 8), weight_tied_crit(B[0], Bpsi, -1.0, rho_end, ds_max / 8));
  // The thresholds and constants of R20 (summary.csv; a non-finite value is an empty cell).
  for (auto [n, v] : std::vector<std::pair<std::string, double>>{{"rho_0", bd.rho_0}, {"rho_max_17_c0_1", bd.rho_17},
                                                                 {"rho_max_C2", bd.rho_C2}, {"rho_max_C2_sharp", bd.rho_C2_sharp},
                                                                 {"rho_crit_plus", crit[0]}, {"rho_crit_minus", crit[1]},
                                                                 {"rho_crit", rho_crit}, {"rho_crit_exact_weight_tied", exact},
                                                                 {"K", ol.K}, {"C", ol.C}, {"m_minus", bd.m_minus},
                                                                 {"m_plus", bd.m_plus}, {"L_psi", Lpsi}})
    ctx.summary(n, v);
  ctx.notes["R20"] = {{"events", {events[0], events[1]}}, {"points", points}, {"factorizations", factorizations}};
  checks.add("R20 rho_crit", "Thm 12: the continuation finds the loss of the closed-loop dichotomy (weight-tied: exact)",
             "|rho_crit - exact| / exact", std::abs(rho_crit - exact) / exact, "<= 1e-5 (events: " + events[0] + ", " + events[1] + ")",
             // Near rho_crit u* grows like 1/distance and Newton's attainable residual with it: the
             // bisection's last steps depend on the arithmetic (FMA or SSE2) at the 1e-6 level.
             std::isfinite(rho_crit) && std::abs(rho_crit - exact) <= 1e-5 * exact,
             independent("weight_tied_crit: eigenvalue scan of I + A + rho Dpsi(0), bisected"));
  checks.add("R20 ordering", "F5: rho_max^{C.2} = mu^2/(4C(C+mu)L_psi) <= rho_crit", "rho_max^{C.2} / rho_crit", bd.rho_C2 / rho_crit,
             "<= 1", bd.rho_C2 <= rho_crit, bound("F5 / C.2: rho_max^{C.2} <= rho_crit"));
  checks.add("R20 ordering", "F5: the sharper C.2 form mu/(2K(C+mu)L_psi) <= rho_crit", "rho_max^{C.2 sharp} / rho_crit",
             bd.rho_C2_sharp / rho_crit, "<= 1", bd.rho_C2_sharp <= rho_crit, bound("C.2: mu/(2K(C+mu)L_psi) <= rho_crit"));
  checks.add("R20 ordering", "Thm 10: rho_0 = 1/(2 K L_psi) <= rho_crit", "rho_0 / rho_crit", bd.rho_0 / rho_crit, "<= 1",
             bd.rho_0 <= rho_crit, bound("Thm 10: rho_0 = 1/(2 K L_psi) <= rho_crit"));
  // F5: (17) with c_0 = 1, min(m)/(C^2 L_psi), against rho_crit (> 1: violated, c_0 < 1 needed); no criterion, so not a check.
  ctx.notes["rho_max_17_c0_1_over_rho_crit"] = bd.rho_17 / rho_crit;
  checks.add("R20 dims", "Thm 12: below rho_crit the closed loop keeps the bundle dimensions", "all points", dims_ok ? 1.0 : 0.0, "1",
             dims_ok, consistency("closed-loop k_-, k_+, k_bundles (diagnose) vs the open loop's k (open_loop)"));
  checks.add("R20 projector", "Thm 12 / C.2: |P~ - P| = O(C^2 |rho| L_psi / mu) below rho_crit",
             "max |P~_+ - P_+| / (C^2 |rho| L_psi / mu)", dev_ratio, "<= 1", dev_max > 0 && dev_ratio <= 1.0,
             bound("Thm 12 / C.2: |P~ - P| <= C^2 |rho| L_psi / mu"));
  checks.add("R20 rates", "C.2: the rate shift is <= 2CK beta/(1 - 2K beta) (K beta < 1/2)", "max |shift| / bound", shift_ratio, "in (0, 1]",
             shift_ratio > 0.0 && shift_ratio <= 1.0, bound("C.2: rate shift <= 2CK beta/(1 - 2K beta)"));

  // ---- R20 (A7): aligned psi on a rotating G4 cocycle -------------------------------------------------
  {
    const auto [m4, v4] = g4_sector_params(p);
    const auto B4 = cocycle::family_g4(L, m4, v4, 1.0, p.get_double("g4_omega"), seed);
    const long d4 = static_cast<long>(m4.size());
    write_input_stack(ctx, "g4_generators.npy", B4, "the rotating G4 generators of the (A7) check ([L, d, d])");
    const cl::OpenLoop o4 = cl::open_loop(B4, std::max(1L, L / 4), std::max(1L, L / 50));
    CsvWriter al = ctx.table("aligned.csv");
    double dev[2] = {0.0, 0.0};
    const double scale = p.get_double("psi_scale");
    for (int kind = 0; kind < 2; ++kind) {
      const std::string name = kind == 0 ? "intertwining" : "same-index";
      const cl::InjectionPtr ps = cl::random_injection(name, d4, scale, 0.0, seed + 7, &o4.bundles);
      write_input_injection(ctx, "psi_" + name, *ps, "the (A7) check's aligned injection");
      const cl::Problem pa = cl::make_problem(B4, ps);
      const double r0 = 1.0 / (2.0 * o4.K * ps->lipschitz());
      for (double f : {0.1, 0.25, 0.5}) {
        const cl::Solution s = cl::newton(pa, f * r0);
        const cl::EndPoints e = cl::end_equilibria(pa, f * r0);
        const cl::Diagnostics g = cl::diagnose(pa, f * r0, s.u, e, &o4.bundles, ex);
        al.cell(name).cell(f * r0).cell(g.projector_deviation).end_row();
        dev[kind] = std::max(dev[kind], std::isfinite(g.projector_deviation) ? g.projector_deviation : 1e300);
      }
    }
    checks.add("R20 A7", "(A7) intertwining P(l+1) B(l) = B(l) P(l): the closed-loop projectors equal P_± (interior)",
               "max |P~_+ - P_+|", dev[0], "<= 1e-8", dev[0] <= 1e-8,
               closed_form("(A7): P~_± = P_± exactly (deviation 0)"));
    checks.add("R20 A7", "F4: same-index commutation alone moves the projectors when P_± varies with depth", "max |P~_+ - P_+|", dev[1],
               ">= 1e-4", dev[1] >= 1e-4, qualitative("F4: same-index alignment moves P_± (deviation > 0)"));
  }

  // ---- R21: scalar weight-tied thresholds (Remark 5, F18) ---------------------------------------------
  {
    const double step = p.get_double("r21_step");
    CsvWriter r21 = ctx.table("r21.csv");
    // empty: no flip found within the sweep / continuation range, or no continuous-time reading
    r21.blank_nonfinite({"expected", "found_sweep", "found_continuation", "continuous_time"});
    double worst_sweep = 0.0, worst_cont = 0.0;
    bool flip_seen = false;
    for (double s : s21)
      for (double c : c21) {
        double expected = 0.0;
        as_input_error([&] { expected = cl::remark5_threshold(s, c); });
        // Grid sweep: the first |rho| = j step where the multiplier 1 + sigma + rho c leaves (-1, 1).
        double found = kNaN;
        for (long j = 1; j * step <= 4.0 / std::abs(c); ++j) {
          const double r = static_cast<double>(j) * step;
          if (std::abs(1.0 + s + r * c) >= 1.0 || std::abs(1.0 - r * c + s) >= 1.0) {
            found = r;
            break;
          }
        }
        // The continuation on the d = 1 closed loop (bisected event).
        const cl::Problem p1 = cl::make_problem(std::vector<Matrix>(50, Matrix::Constant(1, 1, 1.0 + s)), cl::linear(Matrix::Constant(1, 1, c)));
        double fc = std::numeric_limits<double>::infinity();
        for (double dir : {1.0, -1.0}) {
          cl::ContinuationOptions o;
          o.direction = dir;
          o.rho_end = dir * 4.0 / std::abs(c);
          o.ds_max = step * 20;
          o.ds0 = step * 5;
          o.refine_steps = 60;
          const auto res = cl::continue_in_rho(p1, o);
          if (std::isfinite(res.rho_crit)) fc = std::min(fc, std::abs(res.rho_crit));
        }
        const double cont = std::abs(s) / std::abs(c);
        r21.cell(s).cell(c).cell(expected).cell(found).cell(step).cell(fc).cell(cont).end_row();
        worst_sweep = std::max(worst_sweep, std::isfinite(found) ? std::abs(found - expected) : 1e300);
        worst_cont = std::max(worst_cont, std::abs(fc - expected));
        flip_seen = flip_seen || (s < -1.0 && std::abs(cont - expected) > step);
      }
    checks.add("R21 sweep", "Remark 5 (F18): critical |rho| = min(|sigma|, 2 - |sigma|)/|c|", "max |found - expected| (grid sweep)",
               worst_sweep, fmt::format("<= sweep step {:.3g}", step), worst_sweep <= step * (1 + 1e-9),
               closed_form("Remark 5: min(|sigma|, 2 - |sigma|)/|c| (remark5_threshold)"));
    checks.add("R21 continuation", "Remark 5: the continuation's bisected rho_crit", "max |found - expected|", worst_cont, "<= 1e-8",
               worst_cont <= 1e-8, closed_form("Remark 5: min(|sigma|, 2 - |sigma|)/|c| (remark5_threshold)"));
    checks.add("R21 continuous", "F18: the continuous-time reading |sigma|/|c| misses the flip point for sigma < -1",
               "some sigma < -1 where they differ", flip_seen ? 1.0 : 0.0, "1 (needs a sigma < -1)", flip_seen,
               closed_form("|sigma|/|c| vs Remark 5's min(|sigma|, 2 - |sigma|)/|c|"));
  }
  checks.report(ctx, "coupling-margin");
}

OutputDecl margin_outputs() {
  const std::string checks_mode = "bench_generators empty (the checks)", bench_mode = "bench_generators set (benchmark mode)";
  TableDecl ck = checks_table();
  ck.when = checks_mode;
  OutputDecl o;
  o.tables = {
      ck,
      TableDecl{"rho_sweep.csv", "one accepted continuation point of u*_rho (R20, weight-tied G1): closed-loop diagnostics",
                {integer("direction", "direction of the sweep: 1 (rho increasing from 0) or -1 (decreasing)"), real("rho", "rho"),
                 real("sup_u", "sup_l |u*_rho(l)|"),
                 integer("k_minus", "unstable dimension of the closed-loop end map at l -> -inf (I + A_- + rho Dpsi)"),
                 integer("k_plus", "unstable dimension of the closed-loop end map at l -> +inf"),
                 real("end_gap", "min over both end maps of | |lambda| - 1 | (0: an eigenvalue on the unit circle)"),
                 real("green_inverse_sigma_min", "1 / smallest singular value of the closed-loop BVP (~ ||G_rho||)")
                     .may_be_empty("the BVP is singular (smallest singular value 0)"),
                 integer("k_bundles", "dimension of the closed-loop growing bundle (-1: no bundles)"),
                 real("projector_deviation", "max_l |P~_+(l) - P_+(l)| over the interior layers")
                     .may_be_empty("no closed-loop bundles at this rho"),
                 real("r_minus_closed", "largest modulus < 1 of the closed-loop multipliers (end map)"),
                 real("r_plus_closed", "smallest modulus >= 1 of the closed-loop multipliers").may_be_empty("no growing closed-loop multiplier"),
                 real("t_rho", "rho component of the unit continuation tangent (a sign change: a fold)"),
                 integer("newton_iterations", "Newton iterations of the corrector")},
                checks_mode},
      TableDecl{"aligned.csv", "one aligned injection at one rho on the rotating G4 cocycle: the projector deviation ((A7), F4)",
                {category("psi", "how psi is aligned with the open loop's bundles",
                          {{"intertwining", "P(l+1) B(l) = B(l) P(l) ((A7): projectors kept)"}, {"same-index", "commutes with P(l) only (F4)"}}),
                 real("rho", "rho (0.1, 0.25, 0.5 times 1/(2 K L_psi))"),
                 real("projector_deviation", "max_l |P~_+(l) - P_+(l)| over the interior layers (nan: no closed-loop bundles)")
                     .may_be_nonfinite("nan: the closed loop has no bundles at this rho")},
                checks_mode},
      TableDecl{"r21.csv", "one scalar weight-tied closed loop 1 + sigma + rho c: its critical |rho| (R21, Remark 5, F18)",
                {real("sigma", "scalar generator sigma"), real("c", "slope c = Dpsi"),
                 real("expected", "min(|sigma|, 2 - |sigma|) / |c| (Remark 5)").may_be_empty("not defined"),
                 real("found_sweep", "first |rho| on the grid of step sweep_step where a multiplier leaves (-1, 1)")
                     .may_be_empty("no flip found up to 4/|c|"),
                 real("sweep_step", "the grid step (r21_step)"),
                 real("found_continuation", "the continuation's bisected critical |rho|").may_be_empty("no event up to 4/|c|"),
                 real("continuous_time", "|sigma| / |c|, the continuous-time reading (F18)").may_be_empty("not defined")},
                checks_mode},
      TableDecl{"continuation.csv", "one continuation point of the benchmark (fixed step)",
                {index("step", "continuation point (0: rho = 0)", 0), real("rho", "rho"), real("sup_u", "max_l |u*_rho(l)|"),
                 integer("newton_iterations", "Newton iterations of the corrector")},
                bench_mode},
      TableDecl{"final_u.csv", "one component of u*_rho at one layer, at the last continuation point of the benchmark",
                {index("l", "layer l (0..L)", 0), index("i", "component", 0), real("u", "u*_rho(l)_i")},
                bench_mode}};
  const std::string not_reached = "; NaN (empty): no loss of the dichotomy up to rho_end";
  o.summaries = {{"rho_0", "1/(2 K L_psi): the Thm 10 contraction radius", "", checks_mode},
                 {"rho_max_17_c0_1", "min(m_-, m_+)/(C^2 L_psi): (17) with c_0 = 1 (F5)", "", checks_mode},
                 {"rho_max_C2", "mu^2/(4 C (C + mu) L_psi): C.2 with K <= 2C/mu (F5)", "", checks_mode},
                 {"rho_max_C2_sharp", "mu/(2 K (C + mu) L_psi): C.2 with the computed K", "", checks_mode},
                 {"rho_crit_plus", "|rho| of the first loss of the closed-loop dichotomy, rho > 0 (continuation, bisected)" + not_reached, "", checks_mode},
                 {"rho_crit_minus", "the same for rho < 0" + not_reached, "", checks_mode},
                 {"rho_crit", "the smaller of the two" + not_reached, "", checks_mode},
                 {"rho_crit_exact_weight_tied", "the exact weight-tied threshold (eigenvalue scan of I + A + rho Dpsi(0), bisected)" + not_reached, "",
                  checks_mode},
                 {"K", "K: the open loop's Green-function bound", "", checks_mode},
                 {"C", "C: the open loop's dichotomy constant", "", checks_mode},
                 {"m_minus", "m_- = 1 - r_-: the contracting rate margin", "", checks_mode},
                 {"m_plus", "m_+ = r_+ - 1: the growing rate margin; NaN (empty): no growing direction (k = 0)", "", checks_mode},
                 {"L_psi", "Lipschitz constant of psi", "", checks_mode},
                 {"continuation_seconds", "wall time of the continuation", "s", bench_mode},
                 {"continuation_steps", "continuation steps taken", "", bench_mode},
                 {"final_rho", "rho at the last continuation point", "", bench_mode}};
  o.figures = {{"margin.png", "|u*| and ||G_rho|| along the continuation with rho_crit and the bounds; projector deviation; end-spectrum gap; "
                "Remark 5 thresholds (benchmark mode: empty panels)"}};
  return o;
}

std::vector<ParamSpec> margin_params() {
  std::vector<ParamSpec> ps{
      p_int("seed", 0, "base seed (cocycles, psi)", 0, kMaxSeed),
      p_int("depth", 200, "window depth L (layers)", 8, 20000),
      p_int("exclude", -1, "boundary layers excluded from the projector deviation (each end; < depth/2; -1: depth/5)", -1, 10000),
      p_double_list("sigma", {0.2, 0.1, -0.3, -0.5}, "R20 G1: eigenvalues of the tied generator A (repeats allowed)", -1e6, 1e6),
      p_double("kappa", 3.0, "R20 G1: condition number of the eigenbasis", 1.0, 1e8),
      p_string("psi", "affine", "R20 injection psi", {"identity", "linear", "affine", "tanh-mlp"}),
      p_double("psi_scale", 1.0, "psi's Lipschitz scale (not for psi = identity)", 0.0, 1e6, true).when_not("psi", {"identity"}),
      p_double("psi_offset", 0.5, "|psi(0)| (not for psi = linear)", 0.0, 1e6).when_not("psi", {"linear"}),
      p_double("rho_end", 3.0, "R20: largest |rho| of the sweep", 0.0, 1e6, true),
      p_double("ds_max", 0.02, "R20: largest continuation step (scaled arclength)", 1e-6, 1.0),
      p_double_list("g4_m", {-0.6, -0.6, -0.5, -0.5}, "A7 check, G4: eigenvalues m of M (repeats allowed)", -1e6, 1e6),
      p_double_list("g4_v", {0.8, 0.8, 0.2, 0.2}, "A7 check, G4: eigenvalues v of V (repeats allowed)", -1e6, 1e6),
      p_double("g4_omega", 0.05, "A7 check, G4: rotation angle per layer (> 0: depth-varying P_±)", 0.0, 3.2),
      p_double_list("r21_sigma", {-0.3, -0.8, -1.2, -1.7}, "R21: scalar generators sigma in (-2, 0), distinct", -2.0, 0.0, true).below_max().distinct_entries(),
      p_double_list("r21_c", {1, -0.5}, "R21: slopes c = Dpsi (nonzero, distinct)", -1e6, 1e6).distinct_entries(),
      p_double("r21_step", 1e-3, "R21: sweep resolution of |rho|", 1e-7, 0.1, true),
      p_string("bench_generators", "", "benchmark mode: .npy [L, d, d] layer maps (with bench_psi; skips the checks)").file(),
      p_string("bench_psi", "", "benchmark mode: .npy [d, 2d + 2] tanh-MLP psi, columns c | W1 | b1 | W2").file().when_not("bench_generators", {""}),
      p_int("bench_steps", 200, "benchmark mode: continuation steps", 1, 100000).when_not("bench_generators", {""}),
      p_double("bench_ds", 0.002, "benchmark mode: fixed arclength step", 1e-9, 1.0, true).when_not("bench_generators", {""}),
  };
  // The checks' knobs do not apply in benchmark mode.
  for (ParamSpec& s : ps)
    if (s.key.rfind("bench_", 0) != 0) s.only_when.push_back({"bench_generators", {""}, false});
  return ps;
}

const ExperimentRegistration reg_coupling_margin{with_renamed(with_outputs(with_smoke(Experiment{
    "coupling-margin",
    "Coupling paper Thm 12 / Remark 5: closed-loop stability margin by continuation in rho, rho_crit against the bounds (R20, R21; F4, F5, F18)",
    margin_params(), run_margin, "coupling-margin",
    [](const Params& p) {
      cost::Work w;
      if (p.get_string("bench_generators").empty()) {
        // Measured: 7.5 ms a layer (the continuation's Newton steps, each two banded LUs of the
        // closed loop, the Green norms and bounds of the checks), linear in L.
        const double L = static_cast<double>(p.get_int("depth"));
        w.add_timed(2e6 * L, 7.5e-3 * L);
        return w.estimate(2e4 * L + 64e6, "the continuation in rho: banded LUs of the closed loop along the window");
      }
      // Benchmark mode: bench_steps continuation steps of two banded LUs (5 us a layer at least) on the file's maps.
      const auto [L, d] = generators_shape_or(p, "bench_generators", 2.0, 1.0);
      const double steps = static_cast<double>(p.get_int("bench_steps")), d3 = d * d * d;
      w.add_timed(steps * 2.0 * L * 4.3 * d3, steps * 2.0 * L * (4.3 * d3 / cost::small_matrix_rate(d) + 5e-6));
      return w.estimate(8.0 * 12.0 * L * d * d + 64e6, "the continuation in rho: banded LUs of the closed loop along the window");
    }}, {{"depth", "40"}}), margin_outputs()), {{"L", "depth"}})};

}  // namespace
}  // namespace tokdyn
