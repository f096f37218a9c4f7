// Preset coupling-gate-intervention: experiment E3 of the coupling paper (§6, "identification in
// practice"): run the hierarchical model (C1)-(C2) at a gate rho and with rho -> 0 at inference (the
// same weights), and measure the shift of the late-depth state along the persistent bundle V_par
// against the linear prediction of Prop 11, d_+ = |rho| sup_l |P_+(l) (G psi(0))(l)|.
//
// Two levels:
//   "linearised" (G-level, where the tangent cocycle is hyperbolic): the sector-structured family G4's
//     tangent cocycle B(l) = I + M(l) + V(l) in deviation coordinates u = y - x*, the literal self-loop
//     (15) u(l+1) = B(l) u(l) + rho psi(u(l)) with a tanh-MLP psi (psi(0) != 0, generic). Its
//     distinguished bounded trajectory u*_rho (Thm 10) is the fixed point of u = G[rho psi(u)] with G
//     the Green operator of Lemma 17 (green::Bvp, two-sided constant extension, App. B.1); the Picard
//     iterates from u = 0 are exactly the cross-block chain y_k = G[rho psi(y_{k-1})] of (C2) with
//     L_r = 1 (flag F8). rho -> 0 gives u*_0 = 0, so the shift is sup_l |P_+(l) u*_rho(l)|.
//   "transformer" (T-level, nonlinear): a random block-local Pre-LN stack with the slow path, input the
//     homogeneous X^(0) = 1 x*(0)^T (so the rho = 0 run is the reference x*(l) in every block and H_P
//     keeps every run blockwise homogeneous). The linear prediction is the first-order response
//     delta_k(l+1) = (I + A^ex(l)) delta_k(l) + rho psi(ŷ^0_{k-1}(l)) along the rho = 0 run (the
//     summaries' own dependence on rho enters at O(rho^2)), forward from delta(0) = 0 (the network's
//     input is given, not placed on u*). Random Pre-LN stacks are generally not hyperbolic (flag F17):
//     then V_par does not exist and the shift is reported as the total late-depth shift (mode "total"),
//     with P_+ used whenever the two-sided bundles exist (mode "V_par").
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/analysis/duality.hpp"
#include "tokdyn/analysis/green.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/generators_file.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/models/transformer/setup.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/models/hierarchical/hierarchical.hpp"
#include "tokdyn/models/hierarchical/setup.hpp"
#include "tokdyn/runtime/model_registry.hpp"

namespace tokdyn {
namespace {

using cocycle::Matrix;

std::vector<double> rho_grid(const Params& p) {
  std::vector<double> rho = number_list_param(p, "rho");
  for (double r : rho)
    if (r == 0.0)
      throw InputError(fmt::format("parameter 'rho': entry {} is not a nonzero finite number (rho = 0 is the reference run)", r));
  std::sort(rho.begin(), rho.end(), [](double a, double b) { return std::abs(a) < std::abs(b); });
  return rho;
}

/// log-log slope of y against |x| over the first n entries.
double loglog_slope_head(const std::vector<double>& x, const std::vector<double>& y, std::size_t n) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0, m = 0;
  for (std::size_t i = 0; i < std::min(n, x.size()); ++i) {
    if (!(y[i] > 0)) continue;
    const double a = std::log(std::abs(x[i])), b = std::log(y[i]);
    sx += a;
    sy += b;
    sxx += a * a;
    sxy += a * b;
    m += 1;
  }
  return m < 2 ? std::numeric_limits<double>::quiet_NaN() : (m * sxy - sx * sy) / (m * sxx - sx * sx);
}

struct Row {
  double rho, shift, pred;
};

/// What add_rows measured: the log-log slope over the small-rho half, |ratio - 1| at the smallest gate.
struct GateFit {
  double slope, deviation;
};

/// `pred_ref`: what the linear prediction of Prop 11 is computed with at this level (the ratio check's reference).
GateFit add_rows(CheckTable& checks, CsvWriter& csv, const std::string& level, const std::string& mode, const std::vector<Row>& rows,
              const Ref& pred_ref) {
  std::vector<double> r, dev, shift;
  for (const Row& x : rows) {
    const double ratio = x.shift / x.pred;
    csv.cell(level).cell(mode).cell(x.rho).cell(x.shift).cell(x.pred).cell(ratio).cell(std::abs(ratio - 1.0));
    csv.end_row();
    r.push_back(x.rho);
    dev.push_back(std::abs(ratio - 1.0));
    shift.push_back(x.shift);
  }
  const std::size_t n = std::max<std::size_t>(2, rows.size() / 2);  // the small-rho half of the grid
  const double s = loglog_slope_head(r, shift, n);
  checks.add("E3", fmt::format("[{}] gate intervention: the shift ({}) is linear in rho for small rho", level, mode),
             "log-log slope of the shift over the small-rho half", s, "in [0.98, 1.02]", std::abs(s - 1.0) <= 0.02,
             qualitative("Prop 11: shift linear in rho (slope 1)"));
  checks.add("E3", fmt::format("[{}] Prop 11: measured / predicted -> 1 as rho -> 0", level),
             fmt::format("|ratio - 1| at |rho| = {:.3g}", std::abs(r.front())), dev.front(), "<= 1e-2", dev.front() <= 1e-2, pred_ref);
  if (rows.size() >= 2) {
    // O(rho): |ratio - 1| / |rho| of the two smallest gates agree within a factor 3.
    const double q = (dev[0] / std::abs(r[0])) / (dev[1] / std::abs(r[1]));
    checks.add("E3", fmt::format("[{}] Prop 11: the deviation from the linear prediction is O(rho)", level),
               "(|ratio-1|/|rho|) at the smallest gate / at the next", q, "in [1/3, 3]", q >= 1.0 / 3 && q <= 3.0,
               qualitative("Prop 11: deviation O(rho) (|ratio-1|/|rho| steady)"));
  }
  return {s, dev.front()};
}

void run_gate(const Params& p, RunContext& ctx) {
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const std::vector<double> rhos = rho_grid(p);
  CheckTable checks(ctx.dir / "checks.csv");
  CsvWriter csv = ctx.table("gate.csv");
  csv.blank_nonfinite({"ratio", "deviation"});  // empty: the prediction is 0 (no ratio to it)
  const std::string which = p.get_string("level");

  // ---- G-level: the distinguished trajectory of the self-loop (15) through the Green operator.
  if (which == "linearised" || which == "both") {
    const auto [m, v] = g4_sector_params(p);
    const long Lg = p.get_int("g4_L"), d = static_cast<long>(m.size());
    const duality::SectorFlow f = duality::from_g4(Lg, m, v, p.get_double("g4_omega"), seed);
    const std::vector<Matrix> B = f.sector_sequence(1.0);
    const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(B);
    cocycle::BundlesOutcome found = cocycle::find_two_sided_bundles(c);
    if (!found)
      throw InputError(fmt::format("parameters 'g4_m', 'g4_v': the G4 tangent cocycle has no dichotomy ({}); Prop 11 needs (A4)", found.why_not));
    const cocycle::Bundles bundles = std::move(*found.bundles);
    green::EndsOutcome ends = green::find_ends(B.front(), B.back());
    if (!ends)
      throw InputError(fmt::format("parameters 'g4_m', 'g4_v': the G4 end maps have no dichotomy ({}); Prop 11 needs (A4)", ends.why_not));
    green::BvpOutcome factored = green::Bvp::factor(B, std::move(*ends.ends));
    if (!factored)
      throw InputError(fmt::format("parameters 'g4_m', 'g4_v': the G4 boundary-value problem is singular ({}); Prop 11 needs (A4)",
                                   factored.why_not));
    const green::Bvp bvp = std::move(*factored.bvp);
    const hier::Injection psi =
        hier::make_injection(hier::PsiKind::TanhMlp, static_cast<int>(d), static_cast<int>(p.get_int("psi_hidden")), p.get_double("psi_scale"), seed);
    const double K = green::green_norm_estimate(c, bundles).upper, Lpsi = psi.lipschitz();
    auto forcing = [&](const green::Seq& u, double rho) {
      green::Seq h(d, Lg);
      for (long l = 0; l < Lg; ++l) h.col(l) = rho * psi(Vec(u.col(l)));
      return h;
    };
    auto sup_par = [&](const green::Seq& u) {
      double s = 0.0;
      for (long l = 0; l <= Lg; ++l) s = std::max(s, (bundles.P_plus[static_cast<std::size_t>(l)] * u.col(l)).norm());
      return s;
    };
    const green::Seq g = bvp.solve(forcing(green::Seq::Zero(d, Lg + 1), 1.0));  // G psi(0)
    const double dplus_unit = sup_par(g);
    std::vector<Row> rows;
    double worst_ratio = 0.0, worst_res = 0.0;
    for (double rho : rhos) {
      if (std::abs(rho) >= 1.0 / (2.0 * K * Lpsi)) {  // beyond rho_0 = 1/(2 K L_psi) (Thm 10): no guaranteed fixed point
        ctx.warnings.push_back(fmt::format("[linearised] rho = {} skipped: beyond rho_0 = 1/(2 K L_psi) = {:.4g} (Thm 10)", rho, 1.0 / (2.0 * K * Lpsi)));
        continue;
      }
      // Picard iterates from 0 = the cross-block chain y_k = G[rho psi(y_{k-1})] (F8), contraction <= |rho| K L_psi.
      green::Seq u = green::Seq::Zero(d, Lg + 1), prev_step;
      double ratio = 0.0;
      bool done = false;
      for (int k = 1; k <= 200 && !done; ++k) {
        const green::Seq next = bvp.solve(forcing(u, rho));
        const green::Seq step = next - u;
        if (k >= 3 && green::sup_norm(prev_step) > 1e-13 * green::sup_norm(next))
          ratio = std::max(ratio, green::sup_norm(step) / green::sup_norm(prev_step));
        done = green::sup_norm(step) <= 1e-15 * std::max(1e-300, green::sup_norm(next));
        prev_step = step;
        u = next;
      }
      if (!done) throw ConvergenceError(fmt::format("gate intervention: the chain did not converge at rho = {}", rho));
      worst_ratio = std::max(worst_ratio, ratio / (std::abs(rho) * K * Lpsi));
      worst_res = std::max(worst_res, bvp.residual(u, forcing(u, rho)) / std::max(1e-300, green::sup_norm(u)));
      rows.push_back({rho, sup_par(u), std::abs(rho) * dplus_unit});
    }
    if (rows.size() < 2) throw InputError(fmt::format("parameter 'rho': fewer than two gates below rho_0 = 1/(2 K L_psi) = {:.4g} (Thm 10)",
                                                      1.0 / (2.0 * K * Lpsi)));
    checks.add("R19 / F8", "[linearised] the cross-block chain y_k = G[rho psi(y_{k-1})] converges to the self-loop u*_rho",
               "largest observed contraction / (|rho| ||G|| L_psi)", worst_ratio, "<= 1", worst_ratio <= 1.0,
               bound("Thm 10: contraction ratio <= |rho| ||G|| L_psi"));
    checks.add("R17", "[linearised] u*_rho solves u(l+1) = B(l) u(l) + rho psi(u(l))", "max residual / |u*|_inf", worst_res, "<= 1e-12",
               worst_res <= 1e-12, closed_form("the recursion (15) evaluated directly (green::Bvp::residual)"));
    const GateFit fit = add_rows(checks, csv, "linearised", "V_par", rows, consistency("|rho| sup |P_+ G psi(0)| by the Picard chain's own green::Bvp"));
    ctx.summary("linearised_d_plus_per_rho", dplus_unit);
    ctx.summary("linearised_slope", fit.slope);
    ctx.summary("linearised_deviation", fit.deviation);
    // (A7) and flag F4 with the bundle-aligned linear injections: the closed-loop generator
    // B(l) + rho D(l) keeps the bundles P_± exactly iff P_±(l+1) D(l) = D(l) P_±(l) (intertwining);
    // the paper's same-index commutation D(l) P_±(l) = P_±(l) D(l) is not enough once P_± moves with l.
    {
      const double cp = 0.5, cm = -0.3, rho = rhos.back();
      const auto Ds = duality::aligned_same_index(bundles, cp, cm), Di = duality::aligned_intertwining(B, bundles, cp, cm);
      std::vector<Matrix> Cs, Ci;
      for (std::size_t l = 0; l < B.size(); ++l) {
        Cs.push_back(B[l] + rho * Ds[l]);
        Ci.push_back(B[l] + rho * Di[l]);
      }
      double comm = 0.0;
      for (std::size_t l = 0; l < Ds.size(); ++l)
        comm = std::max(comm, (Ds[l] * bundles.P_plus[l] - bundles.P_plus[l] * Ds[l]).norm());
      const double res_i = duality::intertwining_residual(Ci, bundles), res_s = duality::intertwining_residual(Cs, bundles);
      const double res_b = duality::intertwining_residual(B, bundles);
      checks.add("A7 / F4", "[linearised] same-index aligned D(l) = c_+ P_+(l) + c_- P_-(l) commutes with P_±(l)", "max_l |[D, P_+]|_F", comm,
                 "<= 1e-12", comm <= 1e-12, closed_form("0: D = c_+ P_+ + c_- (I - P_+) is a polynomial in P_+"));
      checks.add("A7 / F4", "[linearised] intertwining-aligned D(l) = B(l)(c_+ P_+ + c_- P_-): B + rho D keeps the bundles",
                 fmt::format("max_l |P_+(l+1) (B + rho D) - (B + rho D) P_+(l)|, rho = {}", rho), res_i,
                 fmt::format("<= 1e-12 + the open loop's {:.2g}", res_b), res_i <= 1e-12 + 2 * res_b,
                 closed_form("0 up to the open loop's residual: P_+(l+1) B(l) = B(l) P_+(l)"));
      checks.add("A7 / F4", "[linearised] same-index commutation is not enough on a rotating G4 (F4)",
                 fmt::format("max_l |P_+(l+1) (B + rho D) - (B + rho D) P_+(l)|, rho = {}", rho), res_s,
                 "> 1e3 x the intertwining residual (when omega > 0)", p.get_double("g4_omega") == 0.0 || res_s > 1e3 * std::max(res_i, 1e-16),
                 qualitative("F4: same-index residual >> intertwining residual (omega > 0)"));
      ctx.notes["A7"] = {{"same_index_residual", res_s}, {"intertwining_residual", res_i}, {"open_loop_residual", res_b}};
    }
    ctx.notes["linearised"] = {{"green_norm_upper", K}, {"L_psi", Lpsi}, {"rho_0", 1.0 / (2.0 * K * Lpsi)}, {"d_plus_per_rho", dplus_unit},
                               {"k", bundles.k}};
  }

  // ---- T-level: the nonlinear hierarchical model at rho and at 0.
  if (which == "transformer" || which == "both") {
    const tf::Transformer model = tf::transformer_from(p, ctx);
    const tf::Config& cfg = model.config();
    if (cfg.mask != tf::Mask::BlockLocal)
      throw InputError(fmt::format("parameter 'mask' = {}: the slow path (C2) needs the block-local mask (C1); use mask = block", p.get_string("mask")));
    if (cfg.placement != tf::Placement::PreLN) throw InputError("parameter 'placement' = post: the generators (7) are Pre-LN; use pre");
    const int T = static_cast<int>(p.get_int("tokens")), P = cfg.block, L = static_cast<int>(p.get_int("depth"));
    // The slow path as the hierarchical model builds it (its knobs, the gate set per run below), with this preset's
    // multi-level compression and start summary.
    hier::SlowPath s = hier::slow_path_from(p, cfg.d, 0.0);
    for (long g : p.get_int_list("levels")) s.pi.levels.push_back(static_cast<int>(g));
    s.pi.level_kinds.assign(s.pi.levels.size(), hier::PiKind::Mean);
    if (!p.get_double_list("y0").empty()) {
      std::vector<double> y0;
      y0 = p.get_double_list("y0");
      if (static_cast<int>(y0.size()) != cfg.d)
        throw InputError(fmt::format("parameter 'y0': {} entries, expected d = {} (the dimension of psi's argument)", y0.size(), cfg.d));
      s.y0 = Eigen::Map<const Vec>(y0.data(), cfg.d);
    }
    auto build = [&](double rho) {
      hier::SlowPath sr = s;
      sr.rho = rho;
      std::optional<hier::HierarchicalModel> m;
      try {
        m.emplace(model, sr, T);
      } catch (const std::invalid_argument& e) {
        throw InputError(fmt::format("parameters of the slow path: {}", e.what()));
      }
      return std::move(*m);
    };
    const Vec x0 = tf::reference_start(cfg, seed);
    const tf::Reference ref = tf::reference_trajectory(model, x0, L);
    const std::vector<Mat> Bex = tf::tangent_sequence(ref, tf::Form::Exact);
    const int K = (T + P - 1) / P;
    // The rho = 0 run, and the summaries each layer's injection reads along it.
    const hier::HierarchicalModel m0 = build(0.0);
    std::vector<Mat> tok0(static_cast<std::size_t>(L + 1)), held0(static_cast<std::size_t>(L));
    {
      Batch Z = m0.initial_state(tf::homogeneous(x0, T));
      tok0[0] = m0.token_rows(Z);
      for (int k = 1; k <= L; ++k) {
        held0[static_cast<std::size_t>(k - 1)] = m0.held(k, Z.run(0));
        m0.apply(k, Z);
        require_finite(Z, "layer", k, "rho = 0");
        tok0[static_cast<std::size_t>(k)] = m0.token_rows(Z);
      }
    }
    // First-order response per unit rho, block by block (H_P: one vector per block).
    std::vector<Mat> g(static_cast<std::size_t>(L + 1), Mat::Zero(K, cfg.d));
    for (int l = 0; l < L; ++l) {
      const Mat& y = held0[static_cast<std::size_t>(l)];
      for (int b = 0; b < K; ++b) {
        const int src = s.loop == hier::Loop::SelfLoop ? b : b - 1;
        const Vec in = src < 0 ? (s.y0.size() ? s.y0 : Vec(Vec::Zero(cfg.d))) : Vec(y.row(src).transpose());
        g[static_cast<std::size_t>(l + 1)].row(b) =
            (Bex[static_cast<std::size_t>(l)] * g[static_cast<std::size_t>(l)].row(b).transpose() + s.psi(in)).transpose();
      }
    }
    std::vector<Matrix> Bm;
    for (const Mat& b : Bex) Bm.emplace_back(b);
    const std::optional<cocycle::Bundles> bundles = cocycle::find_two_sided_bundles(cocycle::Cocycle::from_matrices(Bm)).bundles;
    if (!bundles) {
      ctx.warnings.push_back("[transformer] the tangent cocycle of the random stack is not hyperbolic at its ends (flag F17): V_par does not "
                             "exist, the late-depth shift is reported in total");
    }
    const int first = L / 2;
    auto late_sup = [&](const std::vector<Mat>& D) {  // sup over l in [L/2, L] and blocks of |P_+(l) D_b(l)| (or |D_b(l)|)
      double sup = 0.0;
      for (int l = first; l <= L; ++l)
        for (int b = 0; b < K; ++b) {
          const Vec x = D[static_cast<std::size_t>(l)].row(b).transpose();
          sup = std::max(sup, bundles ? (bundles->P_plus[static_cast<std::size_t>(l)] * x).norm() : x.norm());
        }
      return sup;
    };
    const double pred_unit = late_sup(g);
    std::vector<Row> rows;
    for (double rho : rhos) {
      const hier::HierarchicalModel mr = build(rho);
      Batch Z = mr.initial_state(tf::homogeneous(x0, T));
      std::vector<Mat> D(static_cast<std::size_t>(L + 1), Mat::Zero(K, cfg.d));
      for (int k = 1; k <= L; ++k) {
        mr.apply(k, Z);
        require_finite(Z, "layer", k, fmt::format("rho = {}", rho));
        const Mat X = mr.token_rows(Z) - tok0[static_cast<std::size_t>(k)];
        for (int b = 0; b < K; ++b) D[static_cast<std::size_t>(k)].row(b) = X.row(b * P);
      }
      rows.push_back({rho, late_sup(D), std::abs(rho) * pred_unit});
    }
    const GateFit fit = add_rows(checks, csv, "transformer", bundles ? "V_par" : "total", rows,
                                 independent("first-order response via tf::tangent_sequence (Form::Exact)"));
    ctx.summary("transformer_prediction_per_rho", pred_unit);
    ctx.summary("transformer_slope", fit.slope);
    ctx.summary("transformer_deviation", fit.deviation);
    ctx.notes["transformer"] = {{"hyperbolic", bundles.has_value()}, {"prediction_per_rho", pred_unit}, {"late_window", {first, L}}};
  }
  checks.report(ctx, "coupling-gate-intervention");
}

std::vector<ParamSpec> gate_params() {
  auto ps = tf::transformer_params(6, 24, 8, 24, 0.0);
  for (auto& s : ps)
    if (s.key == "mask") s.def = std::string("block");
  ps.push_back(p_string("level", "both", "linearised (G4, Green operator), transformer (nonlinear T-level) or both",
                        {"linearised", "transformer", "both"}));
  ps.push_back(p_double_list("rho", {1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2}, "gate amplitudes rho (nonzero, distinct; rho = 0 is the reference run; run in order of |rho|)", -1e6, 1e6).distinct_entries());
  ps.push_back(p_double_list("g4_m", {-0.8, -0.8, -0.5, -0.5}, "linearised: G4 eigenvalues m of M(l) (repeats allowed)", -1e6, 1e6));
  ps.push_back(p_double_list("g4_v", {1.0, 1.0, 0.2, 0.2}, "linearised: G4 eigenvalues v of V(l) (repeats allowed)", -1e6, 1e6));
  ps.push_back(p_double("g4_omega", 0.01, "linearised: G4 rotation per layer", 0.0, 10.0));
  ps.push_back(p_int("g4_L", 80, "linearised: depth window", 2, 5000));
  // The slow path's knobs are the hierarchical model's (names, types, ranges, conditions: hier::slow_path_from reads
  // them), but compression: the model has no multi-level compression (it would need `levels`), this preset does, so it
  // keeps its own spec with "multi" added.
  ps.push_back(p_string("compression", "mean", "transformer: Pi", {"mean", "stride", "head", "topk", "multi"}));
  ps.push_back(model_knob("hierarchical", "topk"));
  ps.push_back(p_int_list("levels", {2, 2}, "transformer: multi-level group sizes (product = block; means; compression = multi)", 1, 512)
                   .when("compression", {"multi"}));
  ps.push_back(model_knob("hierarchical", "injection"));
  // psi_hidden and psi_scale also shape the linearised level's tanh-MLP psi, whatever `injection` is: the model's
  // conditions on injection do not hold here.
  for (const char* k : {"psi_hidden", "psi_scale"}) {
    ps.push_back(model_knob("hierarchical", k));
    ps.back().only_when.clear();
  }
  ps.push_back(model_knob("hierarchical", "refresh_every"));
  for (const char* k : {"refresh", "pooled", "slow_loop", "site"}) ps.push_back(model_knob("hierarchical", k));
  ps.push_back(p_double_list("y0", {}, "transformer: ŷ_0 of block 1 (d numbers; empty = 0)", -1e6, 1e6));
  // Knobs of one level only are refused at the other.
  std::vector<std::string> tl = tf::transformer_keys();
  tl.erase(std::find(tl.begin(), tl.end(), "seed"));  // both levels draw from the seed
  for (const char* k : {"compression", "topk", "levels", "injection", "refresh_every", "refresh", "pooled", "slow_loop", "site", "y0"})
    tl.push_back(k);
  tf::applies_only_when(ps, tl, "level", {"transformer", "both"});
  tf::applies_only_when(ps, {"g4_m", "g4_v", "g4_omega", "g4_L"}, "level", {"linearised", "both"});
  return ps;
}

OutputDecl coupling_gate_outputs() {
  OutputDecl o;
  o.tables = {
      checks_table(),
      TableDecl{"gate.csv", "one gate rho at one level: the late-depth shift of the rho run against the rho = 0 run, and Prop 11's prediction",
                {category("level", "the model", {{"linearised", "G-level: the self-loop (15) on G4's tangent cocycle, solved through the Green operator"},
                                                 {"transformer", "T-level: the nonlinear hierarchical Pre-LN model (C1)-(C2)"}}),
                 category("mode", "what the shift measures", {{"V_par", "the component along the persistent bundle, |P_+(l) .|"},
                                                              {"total", "the whole difference, |.| (no two-sided bundles: V_par does not exist, F17)"}}),
                 real("rho", "the gate rho"),
                 real("shift_par", "measured shift: linearised sup_l |P_+(l) u*_rho(l)| over the window; transformer sup over l in "
                                   "[L/2, L] and blocks of |P_+(l) (x_rho - x_0)(l)| at each block's first token (|.| when mode = total)"),
                 real("prediction", "Prop 11's linear prediction |rho| d_+ per unit rho (linearised: sup_l |P_+ G psi(0)|; transformer: the "
                                    "first-order response along the rho = 0 run, same sup)"),
                 real("ratio", "shift_par / prediction").may_be_empty("the prediction is 0 (no ratio to it)"),
                 real("deviation", "|ratio - 1|").may_be_empty("the prediction is 0 (no ratio to it)")}}};
  const std::string lin = "level = linearised or both", tr = "level = transformer or both";
  o.summaries = {{"linearised_d_plus_per_rho", "linearised: Prop 11's d_+ per unit rho, sup_l |P_+(l) (G psi(0))(l)|", "", lin},
                 {"linearised_slope", "linearised: log-log slope of the shift in |rho| over the small-rho half (1: linear)", "", lin},
                 {"linearised_deviation", "linearised: |measured / predicted - 1| at the smallest |rho|", "", lin},
                 {"transformer_prediction_per_rho", "transformer: predicted late-depth shift per unit rho (first-order response)", "", tr},
                 {"transformer_slope", "transformer: log-log slope of the shift in |rho| over the small-rho half (1: linear)", "", tr},
                 {"transformer_deviation", "transformer: |measured / predicted - 1| at the smallest |rho|", "", tr}};
  o.figures = {{"gate.png", "measured shift and linear prediction against |rho| (log-log) per level; measured / predicted against |rho|"}};
  return o;
}

const ExperimentRegistration reg_coupling_gate{with_renamed(with_outputs(with_smoke(Experiment{
    "coupling-gate-intervention",
    "Coupling paper E3 / Prop 11: gate rho -> 0 at inference, shift of the late-depth state along V_par against d_+ = |rho| sup |P_+ G psi(0)|",
    gate_params(), run_gate, "coupling-gate-intervention",
    [](const Params& p) {
      // Measured: the Transformer level about 160 d^3 + 40 T d^2 per layer (the rho = 0 run, the
      // tangent maps, one response per rho) at the small-matrix rate; the linearised level 0.5 ms a layer.
      const std::string level = p.get_string("level");
      const double d = static_cast<double>(p.get_int("d")), L = static_cast<double>(p.get_int("depth")),
                   T = static_cast<double>(p.get_int("tokens")), f = static_cast<double>(p.get_int("d_ff"));
      cost::Work w;
      double bytes = 64e6;
      if (level != "linearised") {
        w.add(L * (160.0 * d * d * d + 40.0 * T * d * d), cost::small_matrix_rate(d));
        bytes += 8.0 * L * (7.0 * d * d + 2.0 * d * f + T * d);
      }
      if (level != "transformer") w.add_timed(1e6 * static_cast<double>(p.get_int("g4_L")), 0.5e-3 * static_cast<double>(p.get_int("g4_L")));
      return w.estimate(bytes, "the layers' maps and tangents along depth, one response per rho");
    }}, {{"g4_L", "20"}, {"depth", "8"}}), coupling_gate_outputs()),
    [] {
      auto r = tf::renamed_keys(gate_params());
      r.emplace_back("L_r", "refresh_every");
      return r;
    }())};

}  // namespace
}  // namespace tokdyn
