// Presets coupling-duality and coupling-thm9: the depth–coarse-grain duality of the coupling paper
// (Thm 6, Remark 6, App. B.2; checks R12, R13) and Thm 9 (check R16, flag F12), on the block-local
// linearised full flow at a homogeneous reference with the held summary fixed.
//
// Two families where the quantities are defined:
//   G-level "g4": the sector-structured family G4 (paper form B0 = I + M, B1 = V, a slow rotation),
//     hyperbolic (r_+ ~ 1.2, r_- ~ 0.7, r_f ~ 0.8 at the spec's m, v): every quantity, including the
//     dichotomy bundles P_± of the tangent cocycle (the slow tick, Remark 6's C, Thm 9);
//   T-level "transformer": a small random Pre-LN stack, its exact sector maps (flag F1) along x*(l).
//     Its tangent cocycle is generally not hyperbolic (flag F17), so the bundle quantities (slow
//     tick, C of Remark 6, Thm 9) are reported only when the two-sided bundles exist.
// Norms: the Euclidean norm of the row-major vec of a T x d deviation (the Frobenius norm) and the
// induced 2-norms; with it, Thm 6(2) holds with C' = 1 (App. B.2's change of basis costs kappa_alpha
// = ||W_n|| ||W_n^{-1}||, each sector at most C_f r_f^l), which is the constant tokdyn uses in
// tau_sat (flag F15: the error is relative to ||dX^perp||, and the compression is Pi~, the head).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/analysis/duality.hpp"
#include "tokdyn/analysis/frozen_kernel.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/generators_file.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/models/transformer/setup.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/core/norms.hpp"

namespace tokdyn {
namespace {

using duality::Matrix;
using duality::SectorFlow;
using tokdyn::kNaN;

/// Least-squares slope of log y against l over [a, b] (entries > 0): the fitted rate exp(slope).
double fitted_rate(const std::vector<double>& y, long a, long b) {
  double sl = 0, sy = 0, sll = 0, sly = 0, n = 0;
  for (long l = a; l <= b; ++l) {
    const double v = y[static_cast<std::size_t>(l)];
    if (!(v > 0) || !std::isfinite(v)) continue;
    const double x = static_cast<double>(l), ly = std::log(v);
    sl += x;
    sy += ly;
    sll += x * x;
    sly += x * ly;
    n += 1;
  }
  if (n < 2) return kNaN;
  return std::exp((n * sly - sl * sy) / (n * sll - sl * sl));
}

/// The family's flow and its name.
struct FlowFamily {
  std::string name;
  SectorFlow flow;
  int T = 8, P = 4;
};

std::vector<FlowFamily> families(const Params& p, RunContext& ctx, const std::string& which) {
  std::vector<FlowFamily> out;
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const int T = static_cast<int>(p.get_int("tokens")), P = static_cast<int>(p.get_int("block"));
  if (P > T) throw InputError(fmt::format("parameter 'block' = {}: longer than the sequence (tokens = {})", P, T));
  if (P < 2) throw InputError(fmt::format("parameter 'block' = {}: expected >= 2 (a block of one token has no fluctuation sector)", P));
  if (which == "g4" || which == "both") {
    const auto [m, v] = g4_sector_params(p);
    out.push_back({"g4", duality::from_g4(p.get_int("g4_L"), m, v, p.get_double("g4_omega"), seed), T, P});
  }
  if (which == "transformer" || which == "both") {
    const tf::Transformer model = tf::transformer_from(p, ctx);
    if (model.config().placement != tf::Placement::PreLN)
      throw InputError("parameter 'placement' = post: the generators (7) and sector maps are Pre-LN; use pre");
    const tf::Form form = p.get_string("form") == "paper" ? tf::Form::Paper : tf::Form::Exact;
    const tf::Reference ref = tf::reference_trajectory(model, tf::reference_start(model.config(), seed), static_cast<int>(p.get_int("depth")));
    out.push_back({"transformer", duality::from_reference(ref, form), T, P});
  }
  return out;
}

hier::Compression compression(hier::PiKind k, const std::vector<int>& levels) {
  hier::Compression c;
  c.kind = k;
  if (k == hier::PiKind::Multi) {
    c.levels = levels;
    // Multi-level: a head at the first level, then means (a genuinely different map off H_P).
    c.level_kinds.assign(levels.size(), hier::PiKind::Mean);
    c.level_kinds[0] = hier::PiKind::Head;
  }
  return c;
}

std::vector<int> parse_levels(const Params& p, int P, int T) {
  std::vector<int> levels;
  for (long g : p.get_int_list("levels")) levels.push_back(static_cast<int>(g));
  hier::Compression c = compression(hier::PiKind::Multi, levels);
  try {
    c.validate(P, T);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("parameter 'levels': {}", e.what()));
  }
  return levels;
}

/// Bundles of the tangent cocycle when it is hyperbolic at both ends (two-sided extension).
std::optional<cocycle::Bundles> try_bundles(const cocycle::Cocycle& c) { return cocycle::find_two_sided_bundles(c).bundles; }

/// r_- (the top decaying Bohl edge) and r_+^max (F11) of the tangent cocycle, and C for r_-.
struct Dichotomy {
  double r_minus = kNaN, r_plus_min = kNaN, r_plus_max = kNaN, C = kNaN, P_minus_sup = kNaN;
  std::optional<cocycle::Bundles> b;
};
Dichotomy dichotomy(const SectorFlow& f, long H) {
  Dichotomy out;
  const cocycle::Cocycle c = f.tangent();
  const auto qr = cocycle::qr_iterate(c);
  for (const auto& iv : cocycle::bohl_intervals(qr.log_diag, std::min(H, f.length()))) {
    if (iv.upper < 1.0) out.r_minus = std::isnan(out.r_minus) ? iv.upper : std::max(out.r_minus, iv.upper);
    if (iv.lower > 1.0) out.r_plus_min = std::isnan(out.r_plus_min) ? iv.lower : std::min(out.r_plus_min, iv.lower);
    out.r_plus_max = std::isnan(out.r_plus_max) ? iv.upper : std::max(out.r_plus_max, iv.upper);
  }
  out.b = try_bundles(c);
  if (out.b && !std::isnan(out.r_minus)) {
    const auto env = cocycle::growth_envelope(c, *out.b, std::max<long>(1, f.length() / 20));
    out.C = cocycle::constant_minus(env, out.r_minus);
    out.P_minus_sup = 0.0;
    for (const Matrix& Pp : out.b->P_plus)
      out.P_minus_sup = std::max(out.P_minus_sup, spectral_norm(Matrix::Identity(f.dim(), f.dim()) - Pp));
  }
  return out;
}

void run_duality(const Params& p, RunContext& ctx) {
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const long H = p.get_int("H"), probes = p.get_int("probes"), L_r = p.get_int("refresh_every");
  const double eps_tol = p.get_double("eps_tol");
  const auto fams = families(p, ctx, p.get_string("family"));
  for (const FlowFamily& F : fams)
    if (L_r > F.flow.length())
      throw InputError(fmt::format("parameter 'refresh_every' = {}: one slow tick is longer than the depth {} of the {} family", L_r, F.flow.length(), F.name));
  const std::vector<int> levels = parse_levels(p, static_cast<int>(p.get_int("block")), static_cast<int>(p.get_int("tokens")));
  CheckTable checks(ctx.dir / "checks.csv");
  CsvWriter dcsv = ctx.table("duality.csv");
  // empty: not finite in double precision over this depth (a vacuous bound; an error relative to 0)
  dcsv.blank_nonfinite({"error_rel", "bound", "C_sharp", "duality_error_rel"});
  CsvWriter rcsv = ctx.table("remark6.csv");
  rcsv.blank_nonfinite({"error", "bound"});  // empty: not finite in double precision over this depth (vacuous)
  CsvWriter tcsv = ctx.table("slow_tick.csv");
  CsvWriter scsv = ctx.table("families.csv");
  // empty: not defined for this family (no dichotomy of the tangent cocycle, no decay to saturate)
  scsv.blank_nonfinite({"r_f", "C_f", "r_minus", "r_plus_min", "r_plus_max", "C", "theta", "C_prime_emp", "tau_sat_formula",
                        "tau_sat_empirical"});
  const std::vector<hier::PiKind> kinds = {hier::PiKind::Mean, hier::PiKind::Stride, hier::PiKind::Head, hier::PiKind::Multi};
  for (const FlowFamily& F : fams) {
    const SectorFlow& f = F.flow;
    const long L = f.length(), d = f.dim();
    const int T = F.T, P = F.P, K = (T + P - 1) / P;
    const std::string tag = F.name;
    const double kappa = fk::kappa_alpha(P);
    const duality::Envelope fl = duality::fluctuation_envelope(f, P, H, std::max<long>(1, L / 20));
    const Dichotomy dch = dichotomy(f, H);
    const std::vector<double> sharp = duality::sharp_constant(f, T, P);

    // ---- R12 part 1: H_P invariant, the flow on it is diagonal (each block by Phi(l, 0)), Pi o iota = id.
    double inv = 0.0, diag = 0.0, pii = 0.0;
    for (long q = 0; q < probes; ++q) {
      Mat Y(K, d);
      Rng(seed, {0xd0a1, static_cast<std::uint64_t>(q)}).fill_normal(Y, 1.0);
      Mat X = duality::iota(Y, T, P);
      for (long l = 0; l < L; ++l) {
        X = duality::full_step(f, l, P, X);
        inv = std::max(inv, fk::fluctuation(X, P).norm() / X.norm());
      }
      const Mat want = duality::iota(Y * duality::tangent_product(f, 0, L).transpose(), T, P);
      diag = std::max(diag, (X - want).norm() / want.norm());
      for (hier::PiKind k : kinds)
        pii = std::max(pii, (duality::compress_blocks(compression(k, levels), duality::iota(Y, T, P), P) - Y).cwiseAbs().maxCoeff() /
                                Y.cwiseAbs().maxCoeff());
    }
    checks.add("R12 part 1", fmt::format("[{}] Thm 6(1): H_P is invariant under Phi^full_l", tag), "max_l |fluctuation| / |X|", inv,
               "<= 1e-12", inv <= 1e-12, closed_form("0: fk::fluctuation of the flowed iota Y (block-constant states)"));
    checks.add("R12 part 1", fmt::format("[{}] Thm 6(1): on H_P the depth flow is iota Phi(l,0) Pi (block-diagonal)", tag),
               "relative error at l = L", diag, "<= 1e-10", diag <= 1e-10,
               closed_form("iota Phi(L,0) Y: the d x d tangent_product, broadcast"));
    checks.add("R13", fmt::format("[{}] Remark 4: Pi_mean, Pi_stride, Pi~_head, multi-level all invert iota (coincide on H_P)", tag),
               "max |Pi iota Y - Y| / max |Y|", pii, "<= 1e-15", pii <= 1e-15, closed_form("Pi iota = id: the block values Y themselves"));

    // ---- R12 parts 2 and 3: E_l = Phi^full_l(dX) - Phi^full_l(dX^H), the duality error.
    std::vector<double> err(static_cast<std::size_t>(L + 1), 0.0), derr(static_cast<std::size_t>(L + 1), 0.0);
    double gap = 0.0;  // | ||duality error|| - ||E_l|| | relative (Pi~ kills dX^perp exactly)
    for (long q = 0; q < probes; ++q) {
      Mat dX(T, d);
      Rng(seed, {0xd0a2, static_cast<std::uint64_t>(q)}).fill_normal(dX, 1.0);
      const Mat dH = duality::homogeneous_part(dX, P);
      const double nperp = (dX - dH).norm();
      // E_l is propagated as Phi^full_l(dX^perp) (linearity); the difference Phi(dX) - Phi(dX^H) of the
      // growing flows agrees with it to the round-off of |Phi(dX)| (checked), but not to E_l's own size.
      Mat A = dX, B = dH, E = dX - dH;
      Mat head = duality::heads(dX, P);  // Pi~ dX
      for (long l = 0; l <= L; ++l) {
        const double e = E.norm() / nperp;
        const Mat D = A - duality::iota(head, T, P);
        const double de = D.norm() / nperp;
        err[static_cast<std::size_t>(l)] = std::max(err[static_cast<std::size_t>(l)], e);
        derr[static_cast<std::size_t>(l)] = std::max(derr[static_cast<std::size_t>(l)], de);
        gap = std::max({gap, (D - E).norm() / A.norm(), (A - B - E).norm() / A.norm()});
        if (l == L) break;
        A = duality::full_step(f, l, P, A);
        B = duality::full_step(f, l, P, B);
        E = duality::full_step(f, l, P, E);
        head = head * f.sector(l, 1.0).transpose();
      }
    }
    double cprime = 0.0, sharp_ratio = 0.0, sharp_le = 0.0;
    long l_emp = -1;
    for (long l = 0; l <= L; ++l) {
      const double bound = kappa * fl.C * std::pow(fl.r, static_cast<double>(l));
      const auto i = static_cast<std::size_t>(l);
      cprime = std::max(cprime, err[i] / bound);
      sharp_ratio = std::max(sharp_ratio, sharp[i] / bound);
      sharp_le = std::max(sharp_le, err[i] - sharp[i] * (1 + 1e-12));
      if (l_emp < 0 && derr[i] <= eps_tol) {
        bool stays = true;
        for (long m = l; m <= L; ++m) stays = stays && derr[static_cast<std::size_t>(m)] <= eps_tol;
        if (stays) l_emp = l;
      }
      dcsv.cell(tag).cell(l).cell(err[i]).cell(bound).cell(sharp[i]).cell(derr[i]);
      dcsv.end_row();
    }
    const double tau_sat = std::log(kappa * fl.C / eps_tol) / std::log(1.0 / fl.r);
    checks.add("R12 part 2", fmt::format("[{}] Thm 6(2): |E_l| <= C' kappa_alpha C_f r_f^l |dX^perp| with C' = 1", tag),
               "C'_emp = max_l |E_l| / (kappa_alpha C_f r_f^l |dX^perp|)", cprime, "<= 1", cprime <= 1.0,
               bound("Thm 6(2): |E_l| <= C' kappa_alpha C_f r_f^l |dX^perp|, C' = 1"));
    checks.add("R12 part 2", fmt::format("[{}] F16: the sharp constant C_sharp(l) = |Phi^full_l on the fluctuations| bounds |E_l|", tag),
               "max_l (|E_l| / |dX^perp| - C_sharp(l))", sharp_le, "<= 0", sharp_le <= 0.0,
               bound("F16: |E_l| <= C_sharp(l) |dX^perp| (sharp_constant)"));
    checks.add("R12 part 2", fmt::format("[{}] F16: C_sharp(l) is far below kappa_alpha C_f r_f^l", tag),
               "max_l C_sharp(l) / (kappa_alpha C_f r_f^l)", sharp_ratio, "< 0.5", sharp_ratio < 0.5,
               qualitative("F16: C_sharp(l) well below kappa_alpha C_f r_f^l"));
    checks.add("R12 part 3", fmt::format("[{}] (14) with Pi~ (F15): the duality error is E_l (Pi~ dX^perp = 0)", tag),
               "max_l |Phi dX - iota Phi(l,0) Pi~ dX - E_l| / |Phi dX| (and Phi dX - Phi dX^H)", gap, "<= 1e-12", gap <= 1e-12,
               consistency("E_l = full_step flow of dX^perp vs full_step flow of dX minus its H_P part"));
    // tau_sat exists only under (A5) (r_f < 1); random Pre-LN stacks generally violate it (flag F17).
    const bool a5 = fl.r < 1.0;
    if (a5) {
      const bool tau_ok = l_emp >= 0 && (tau_sat > static_cast<double>(L) || static_cast<double>(l_emp) <= tau_sat);
      checks.add("R12 part 3", fmt::format("[{}] (14): the error is <= eps_tol |dX^perp| past tau_sat (formula, C' = 1)", tag),
                 fmt::format("empirical first l (formula tau_sat = {:.4g})", tau_sat), static_cast<double>(l_emp), "<= tau_sat", tau_ok,
                 bound("(14): tau_sat = log(kappa_alpha C_f / eps_tol) / log(1 / r_f), C' = 1"));
    } else {
      ctx.warnings.push_back(fmt::format("[{}] (A5) fails on this window: r_f = {:.4g} >= 1 (flag F17), so tau_sat and the Remark 6 decay "
                                         "are not defined; the exact identities and C_sharp are still checked",
                                         tag, fl.r));
    }

    // ---- Slow tick: P_±(l + L_r) Phi(l + L_r, l) = Phi(l + L_r, l) P_±(l) (A4), where the bundles exist.
    if (dch.b) {
      double worst = 0.0;
      for (long l = 0; l + L_r <= L; ++l) {
        const Matrix Ph = duality::tangent_product(f, l, l + L_r);
        const Matrix& P0 = dch.b->P_plus[static_cast<std::size_t>(l)];
        const Matrix& P1 = dch.b->P_plus[static_cast<std::size_t>(l + L_r)];
        const Matrix I = Matrix::Identity(d, d);
        const double sc = spectral_norm(Ph) * std::max(spectral_norm(P0), 1.0);
        const double rp = spectral_norm(P1 * Ph - Ph * P0) / sc, rm = spectral_norm((I - P1) * Ph - Ph * (I - P0)) / sc;
        worst = std::max({worst, rp, rm});
        tcsv.cell(tag).cell(l).cell(rp).cell(rm);
        tcsv.end_row();
      }
      checks.add("R12 slow tick", fmt::format("[{}] Thm 6(3): one slow tick Phi(l + L_r, l) preserves V_par and V_perp", tag),
                 fmt::format("max_l |P_±(l+L_r) Phi - Phi P_±(l)| / (|Phi| |P_+|), L_r = {}", L_r), worst, "<= 1e-10", worst <= 1e-10,
                 consistency("two_sided_bundles P_± (pushed by the same cocycle) vs tangent_product"));
    } else {
      ctx.warnings.push_back(fmt::format("[{}] the tangent cocycle is not hyperbolic at both ends (flag F17): no bundles, so the slow tick, "
                                         "Remark 6's C and the negative control's r_+ are not defined there", tag));
    }

    // ---- R13 Remark 6: measure after mixing (l0 = ceil(l/2)) against the one-shot formula (l0 = 0).
    const double r_up = std::max(1.0, std::isnan(dch.r_plus_max) ? 1.0 : dch.r_plus_max);
    const duality::Envelope up = duality::envelope(f.sector_sequence(1.0), H, std::max<long>(1, L / 20));
    const double theta = fl.r * r_up;
    const long L6 = std::min<long>(L, p.get_int("remark6_L"));
    std::vector<double> half(static_cast<std::size_t>(L6 + 1)), zero(static_cast<std::size_t>(L6 + 1));
    double cpp = 0.0;
    for (hier::PiKind k : kinds) {
      const hier::Compression c = compression(k, levels);
      for (long l = 0; l <= L6; ++l) {
        const long l0h = (l + 1) / 2;
        const double eh = duality::remark6_error(f, c, P, l, l0h), ez = duality::remark6_error(f, c, P, l, 0);
        const double bh = kappa * up.C * fl.C * std::pow(up.r, static_cast<double>(l - l0h)) * std::pow(fl.r, static_cast<double>(l0h));
        const double bz = kappa * up.C * fl.C * std::pow(up.r, static_cast<double>(l));
        rcsv.cell(tag).cell(hier::pi_name(k)).cell(std::string("half")).cell(l).cell(l0h).cell(eh).cell(bh);
        rcsv.end_row();
        rcsv.cell(tag).cell(hier::pi_name(k)).cell(std::string("zero")).cell(l).cell(0L).cell(ez).cell(bz);
        rcsv.end_row();
        if (k == hier::PiKind::Mean) {
          half[static_cast<std::size_t>(l)] = eh;
          zero[static_cast<std::size_t>(l)] = ez;
          cpp = std::max(cpp, eh / bh);
        }
      }
    }
    const double c2 = 1.0 + std::sqrt(static_cast<double>(P));
    checks.add("R13", fmt::format("[{}] Remark 6: |E| <= C'' kappa_alpha C C_f r_+^l1 r_f^l0 (block mean, l0 = ceil(l/2))", tag),
               "C''_emp", cpp, fmt::format("<= 1 + sqrt(P) = {:.4g} (|iota| (|Pi~| + |Pi|))", c2), cpp <= c2,
               bound("Remark 6: C'' <= |iota| (|Pi~| + |Pi|) = 1 + sqrt(P)"));
    const double rate_half = fitted_rate(half, L6 / 2, L6);
    if (theta < 1.0)  // the gap of (A5)
      checks.add("R13", fmt::format("[{}] Remark 6: with l0 = ceil(l/2) the error decays like theta^floor(l/2)", tag),
                 "fitted rate per layer (second half)", rate_half,
                 fmt::format("< 1 and <= sqrt(theta) = {:.4g} (theta = r_f r_+^max; 2 % for the finite window)", std::sqrt(theta)),
                 rate_half < 1.0 && rate_half <= std::sqrt(theta) * 1.02, bound("Remark 6: rate <= sqrt(theta), theta = r_f r_+^max < 1"));
    const double rate_zero = fitted_rate(zero, L6 / 2, L6);
    if (dch.b && dch.r_plus_min > 1.0) {
      checks.add("R13 control", fmt::format("[{}] Remark 6: the one-shot l0 = 0 error grows like r_+^l", tag), "fitted rate per layer",
                 rate_zero, fmt::format("in [r_+^min, r_+^max] = [{:.4g}, {:.4g}] (5 %)", dch.r_plus_min, dch.r_plus_max),
                 rate_zero >= dch.r_plus_min * 0.95 && rate_zero <= dch.r_plus_max * 1.05,
                 independent("Bohl interval of the tangent cocycle (qr_iterate, bohl_intervals)"));
    }
    scsv.cell(tag).cell(kappa).cell(fl.r).cell(fl.C).cell(dch.r_minus).cell(dch.r_plus_min).cell(dch.r_plus_max).cell(dch.C).cell(theta)
        .cell(cprime).cell(tau_sat).cell(l_emp);
    scsv.end_row();
    ctx.summary(tag + "_r_f", fl.r);
    ctx.summary(tag + "_C_prime_emp", cprime);
    if (tag == "g4") {
      ctx.summary("g4_tau_sat_formula", a5 ? tau_sat : kNaN);
      ctx.summary("g4_tau_sat_empirical", l_emp >= 0 ? static_cast<double>(l_emp) : kNaN);
    }
    ctx.notes[tag] = {{"kappa_alpha", kappa}, {"r_f", fl.r}, {"C_f", fl.C}, {"r_minus", dch.r_minus}, {"r_plus_max", dch.r_plus_max},
                      {"C_prime_emp", cprime}, {"tau_sat", tau_sat}, {"tau_sat_empirical", l_emp}, {"hyperbolic", dch.b.has_value()},
                      {"remark6_rate_half", rate_half}, {"remark6_rate_zero", rate_zero}, {"A5_holds", a5}, {"theta", theta}};
  }
  checks.report(ctx, "coupling-duality");
}

std::vector<ParamSpec> common_params(bool transformer) {
  std::vector<ParamSpec> ps;
  if (transformer) {
    ps = tf::transformer_params(6, 24, 8, 48, 0.0);
    ps.push_back(p_string("form", "exact", "T-level generator convention: exact (I+M~)(I+lambda V) or paper (F1)", {"exact", "paper"}));
  } else {
    ps = {p_int("tokens", 8, "tokens per sequence", 2, 512), p_int("block", 4, "block length", 2, 512), p_int("seed", 0, "base seed", 0, kMaxSeed)};
  }
  ps.push_back(p_double_list("g4_m", {-0.8, -0.8, -0.5, -0.5}, "G4: eigenvalues m of M(l) (repeats allowed)", -1e6, 1e6));
  ps.push_back(p_double_list("g4_v", {1.0, 1.0, 0.2, 0.2}, "G4: eigenvalues v of V(l) (repeats allowed)", -1e6, 1e6));
  ps.push_back(p_double("g4_omega", 0.01, "G4: rotation angle per layer", 0.0, 10.0));
  ps.push_back(p_int("g4_L", 80, "G4: depth", 2, 5000));
  ps.push_back(p_int("H", 10, "Steklov window of the Bohl growth-rate estimates", 1, 5000));
  ps.push_back(p_int("probes", 4, "random deviations dX per check", 1, 1000));
  return ps;
}

std::vector<ParamSpec> duality_params() {
  auto ps = common_params(true);
  ps.push_back(p_string("family", "both", "g4 (G-level), transformer (T-level) or both", {"g4", "transformer", "both"}));
  ps.push_back(p_double("eps_tol", 1e-3, "tolerance of the duality (14)", 0.0, 1.0, true));
  // The hierarchical model's refresh period (its knob refresh_every), here the length of one slow tick: at least one layer
  // (the model's 0, "held for the whole pass", has no tick).
  ps.push_back(p_int("refresh_every", 4, "refresh period L_r: the slow tick Phi(l + L_r, l)", 1, 5000));
  ps.push_back(p_int("remark6_L", 60, "largest depth of the Remark 6 sweep", 2, 5000));
  ps.push_back(p_int_list("levels", {2, 2}, "multi-level compression: group sizes per level (product = block; head, then means)", 1, 512));
  // block is the block length of both families here (not only of mask = block).
  for (ParamSpec& s : ps)
    if (s.key == "block") s.only_when.clear();
  std::vector<std::string> tl;
  for (const std::string& k : tf::transformer_keys())
    if (k != "tokens" && k != "block" && k != "seed") tl.push_back(k);
  tl.push_back("form");
  tf::applies_only_when(ps, tl, "family", {"transformer", "both"});
  tf::applies_only_when(ps, {"g4_m", "g4_v", "g4_omega", "g4_L"}, "family", {"g4", "both"});
  return ps;
}

/// The keys renamed to the model registry's names ({old, new}): the Transformer's (T-level) and L_r.
std::vector<std::pair<std::string, std::string>> duality_renamed(bool transformer) {
  if (!transformer) return {{"T", "tokens"}, {"P", "block"}};
  auto r = tf::renamed_keys(duality_params());
  r.emplace_back("L_r", "refresh_every");
  return r;
}

// ------------------------------------------------------------------------------------------------
// Thm 9 (R16, flag F12).

void run_thm9(const Params& p, RunContext& ctx) {
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const long H = p.get_int("H"), probes = p.get_int("probes");
  const auto fams = families(p, ctx, "g4");
  const FlowFamily& F = fams.front();
  const SectorFlow& f = F.flow;
  const long L = f.length(), d = f.dim();
  const int T = F.T, P = F.P, K = (T + P - 1) / P;
  const hier::Compression pi = compression(hier::parse_pi(p.get_string("compression")), {});
  const hier::Injection psi = hier::make_injection(hier::PsiKind::TanhMlp, static_cast<int>(d), static_cast<int>(p.get_int("psi_hidden")),
                                                   p.get_double("psi_scale"), seed);
  const double Lpsi = psi.lipschitz(), kappa = fk::kappa_alpha(P);
  const duality::Envelope fl = duality::fluctuation_envelope(f, P, H, std::max<long>(1, L / 20));
  const Dichotomy dch = dichotomy(f, H);
  if (!dch.b || std::isnan(dch.C))
    throw InputError("coupling-thm9: the G4 tangent cocycle has no dichotomy at these parameters (g4_m, g4_v): Thm 9 needs (A4)");
  const std::vector<double> sharp = duality::sharp_constant(f, T, P);
  CheckTable checks(ctx.dir / "checks.csv");
  CsvWriter csv(ctx.dir / "thm9.csv", {"probe", "block", "l", "lhs", "lpsi_pminus", "rhs_literal", "rhs_corrected"});
  // empty: not finite in double precision over this depth (a bound that overflows is vacuous)
  csv.blank_nonfinite({"lhs", "lpsi_pminus", "rhs_literal", "rhs_corrected"});
  std::vector<double> worst(static_cast<std::size_t>(L + 1), 0.0);
  long literal_viol = 0, corrected_viol = 0, rows = 0;
  double slack = 0.0, lip = 0.0;  // max lhs / rhs_corrected, max lhs / (L_psi |P_- zeta|)
  const Matrix I = Matrix::Identity(d, d);
  for (long q = 0; q < probes; ++q) {
    Mat dX(T, d);
    Rng(seed, {0x7e09, static_cast<std::uint64_t>(q)}).fill_normal(dX, 1.0);
    const Mat zeta0 = duality::compress_blocks(pi, dX, P), head0 = duality::heads(dX, P), perp0 = fk::fluctuation(dX, P);
    const Matrix Pm0 = I - dch.b->P_plus[0];
    // zeta(l) = Pi(Phi^full_l dX) = Phi(l, 0) Pi~ dX + Pi(E_l) per block (App. B.2), each part propagated on
    // its own: the decaying component P_-(l) zeta = Phi(l, 0) P_-(0) Pi~ dX + P_-(l) Pi(E_l) is then free of the
    // round-off of the growing persistent part (the sector-1 push is re-projected onto P_- every layer).
    Mat head = head0, E = perp0, vm(K, d);
    for (int b = 0; b < K; ++b) vm.row(b) = (Pm0 * head0.row(b).transpose()).transpose();
    for (long l = 0; l <= L; ++l) {
      const Mat piE = duality::compress_blocks(pi, E, P);
      const Matrix& Pp = dch.b->P_plus[static_cast<std::size_t>(l)];
      for (int b = 0; b < K; ++b) {
        const int a = b * P, n = std::min(P, T - a);
        const double nperp = perp0.middleRows(a, n).norm();
        const Vec z = (head.row(b) + piE.row(b)).transpose();
        const Vec zm = vm.row(b).transpose() + (I - Pp) * piE.row(b).transpose();  // P_-(l) zeta
        const double lhs = (psi(z) - psi(Vec(z - zm))).norm();
        const double pm = Lpsi * zm.norm();  // the proof's first step: lhs <= L_psi |P_-(l) zeta|
        lip = std::max(lip, pm > 0 ? lhs / pm : (lhs > 0 ? 2.0 : 0.0));
        const double rl = std::pow(dch.r_minus, static_cast<double>(l));
        const double lit = Lpsi * dch.C * rl * (Pm0 * zeta0.row(b).transpose()).norm() +
                           Lpsi * kappa * fl.C * std::pow(fl.r, static_cast<double>(l)) * nperp;
        const double cor = Lpsi * (dch.C * rl * (Pm0 * head0.row(b).transpose()).norm() + dch.P_minus_sup * sharp[static_cast<std::size_t>(l)] * nperp);
        literal_viol += lhs > lit * (1 + 1e-12) ? 1 : 0;
        corrected_viol += lhs > cor * (1 + 1e-12) ? 1 : 0;
        slack = std::max(slack, lhs / cor);
        ++rows;
        worst[static_cast<std::size_t>(l)] = std::max(worst[static_cast<std::size_t>(l)], pm);
        csv.cell(q).cell(static_cast<long>(b)).cell(l).cell(lhs).cell(pm).cell(lit).cell(cor);
        csv.end_row();
      }
      if (l == L) break;
      const Matrix B = f.sector(l, 1.0), Pm1 = I - dch.b->P_plus[static_cast<std::size_t>(l + 1)];
      head = head * B.transpose();
      vm = vm * (Pm1 * B).transpose();
      E = duality::full_step(f, l, P, E);
    }
  }
  checks.add("R16", "Thm 9 (F12 corrected): |psi(zeta) - psi(P_+ zeta)| <= L_psi (C r_-^l |P_-(0) Pi~ dX| + |P_-|_inf C_sharp(l) |dX^perp|)",
             fmt::format("violations of {} (probe, block, l)", rows), static_cast<double>(corrected_viol), "0", corrected_viol == 0,
             bound("Thm 9 corrected (F12): L_psi (C r_-^l |P_- Pi~ dX| + |P_-| C_sharp |dX^perp|)"));
  checks.add("R16", "Thm 9 (F12 corrected): slack of the corrected bound", "max lhs / rhs_corrected", slack, "<= 1", slack <= 1.0,
             bound("Thm 9 corrected (F12): L_psi (C r_-^l |P_- Pi~ dX| + |P_-| C_sharp |dX^perp|)"));
  checks.add("R16 literal", "Thm 9 as printed: L_psi C r_-^l |P_-(0) zeta^(0)| + L_psi C' kappa_alpha C_f r_f^l |dX^perp| (C' = 1)",
             fmt::format("violations of {} (reported, F12)", rows), static_cast<double>(literal_viol),
             "0 here (F12: the printed form is not the proved one; violations are reported)", literal_viol == 0,
             bound("Thm 9 as printed: L_psi C r_-^l |P_-(0) zeta| + L_psi kappa_alpha C_f r_f^l |dX^perp|"));
  checks.add("R16", "Thm 9 proof, first step: |psi(zeta) - psi(P_+ zeta)| <= L_psi |P_-(l) zeta|", "max ratio", lip, "<= 1",
             lip <= 1.0 + 1e-12, bound("Thm 9 proof: L_psi |P_-(l) zeta| (psi is L_psi-Lipschitz)"));
  // The decay of L_psi |P_-(l) zeta| (the saturating tanh makes the lhs itself fall even faster).
  const double rate = fitted_rate(worst, L / 2, L), want = std::max(dch.r_minus, fl.r);
  checks.add("R16", "Thm 9: the discrepancy decays like max(r_-, r_f)^l", "fitted rate of max L_psi |P_- zeta| per layer (second half)",
             rate, fmt::format("<= max(r_-, r_f) = {:.4g} (2 %)", want), rate <= want * 1.02, bound("Thm 9: decay rate max(r_-, r_f)"));
  ctx.notes["thm9"] = {{"L_psi", Lpsi}, {"C", dch.C}, {"r_minus", dch.r_minus}, {"r_f", fl.r}, {"C_f", fl.C}, {"kappa_alpha", kappa},
                       {"P_minus_sup", dch.P_minus_sup}, {"literal_violations", literal_viol}, {"rows", rows}, {"rate", rate},
                       {"compression", hier::pi_name(pi.kind)}};
  checks.report(ctx, "coupling-thm9");
  ctx.summary("rate", rate);
  ctx.summary("r_minus", dch.r_minus);
  ctx.summary("r_f", fl.r);
  ctx.summary("slack", slack);
  ctx.summary("literal_violations", literal_viol);
}

std::vector<ParamSpec> thm9_params() {
  auto ps = common_params(false);
  ps.push_back(p_string("compression", "mean", "Pi of the pooled deviation zeta = Pi(dX)", {"mean", "stride", "head"}));
  ps.push_back(p_int("psi_hidden", 8, "tanh-MLP psi: hidden width", 1, 1024));
  ps.push_back(p_double("psi_scale", 1.5, "tanh-MLP psi: weight scale", 0.0, 100.0, true));
  return ps;
}

OutputDecl coupling_duality_outputs() {
  const auto family = [] {
    return category("family", "the flow", {{"g4", "G-level: the sector-structured family G4"},
                                           {"transformer", "T-level: the random Pre-LN stack's exact sector maps along x*(l)"}});
  };
  const std::string overflow = "not finite in double precision over this depth (a vacuous bound; an error relative to 0)";
  const std::string undefined = "not defined for this family (no dichotomy of the tangent cocycle, no decay to saturate)";
  OutputDecl o;
  o.tables = {
      checks_table(),
      TableDecl{"duality.csv", "one layer of one family: the off-manifold error E_l of Thm 6(2), its bounds and the duality error",
                {family(), index("l", "layer l (0..depth)", 0),
                 real("error_rel", "|E_l| / |dX^perp|, max over probes (Frobenius; E_l = Phi^full_l(dX^perp))").may_be_empty(overflow),
                 real("bound", "Thm 6(2) with C' = 1: kappa_alpha C_f r_f^l").may_be_empty(overflow),
                 real("C_sharp", "sharp constant C_sharp(l): norm of Phi^full_l on the fluctuations (F16)").may_be_empty(overflow),
                 real("duality_error_rel", "|Phi^full_l dX - iota Phi(l,0) Pi~ dX| / |dX^perp|, max over probes (14, F15)")
                     .may_be_empty(overflow)}},
      TableDecl{"remark6.csv", "one layer, compression and l0 rule of one family: Remark 6's error of measuring after mixing, and its bound",
                {family(),
                 category("compression", "Pi", {{"mean", "block mean"}, {"stride", "last token of the block"}, {"head", "first token of the block (Pi~)"},
                                                {"multi", "multi-level: head at the first level, then means (levels)"}}),
                 category("l0_rule", "the mixing depth l0", {{"half", "l0 = ceil(l/2) (measure after mixing)"}, {"zero", "l0 = 0 (one shot)"}}),
                 index("l", "layer l (0..min(depth, remark6_L))", 0), index("l0", "mixing depth l0", 0),
                 real("error", "|Phi^full_l - iota Phi(l, l0) Pi Phi^full_l0| (operator norm)").may_be_empty(overflow),
                 real("bound", "kappa_alpha C_1 C_f r_1^(l - l0) r_f^l0 (C_1, r_1: growth envelope of the sector-1 maps)").may_be_empty(overflow)}},
      TableDecl{"slow_tick.csv", "one start layer of one family whose tangent cocycle has two-sided bundles: how one slow tick "
                                 "Phi(l + L_r, l) commutes with the bundles (Thm 6(3)); no rows for a family without bundles (F17)",
                {family(), index("l", "start layer l of the tick", 0),
                 real("residual_plus", "|P_+(l+L_r) Phi - Phi P_+(l)|_2 / (|Phi|_2 max(|P_+(l)|_2, 1))"),
                 real("residual_minus", "|P_-(l+L_r) Phi - Phi P_-(l)|_2 / (|Phi|_2 max(|P_+(l)|_2, 1))")}},
      TableDecl{"families.csv", "one family: the constants and rates of the duality",
                {family(), real("kappa_alpha", "kappa_alpha(P) = |W_n| |W_n^-1| of the block's change of basis (App. B.2)"),
                 real("r_f", "decay rate r_f of the fluctuation sector (Bohl estimate, per layer)").may_be_empty(undefined),
                 real("C_f", "constant C_f of the fluctuation envelope C_f r_f^l").may_be_empty(undefined),
                 real("r_minus", "r_-: top of the decaying Bohl intervals of the tangent cocycle (per layer)").may_be_empty(undefined),
                 real("r_plus_min", "r_+^min: bottom of the growing Bohl intervals (per layer)").may_be_empty(undefined),
                 real("r_plus_max", "r_+^max: top of all Bohl intervals (per layer, F11)").may_be_empty(undefined),
                 real("C", "dichotomy constant C of the decaying bundle for r_-").may_be_empty(undefined),
                 real("theta", "theta = r_f max(1, r_+^max): Remark 6's rate (< 1: the gap of (A5))").may_be_empty(undefined),
                 real("C_prime_emp", "C'_emp = max_l |E_l| / (kappa_alpha C_f r_f^l |dX^perp|) (Thm 6(2) holds with C' = 1)").may_be_empty(undefined),
                 real("tau_sat_formula", "tau_sat = log(kappa_alpha C_f / eps_tol) / log(1 / r_f) (C' = 1; meaningful only when r_f < 1, "
                                         "negative otherwise)", "layers").may_be_empty(undefined),
                 integer("tau_sat_empirical", "first layer from which the duality error stays <= eps_tol (-1: never within the depth)")}}};
  const std::string g4 = "family = g4 or both", tr = "family = transformer or both";
  o.summaries = {{"g4_r_f", "G4: decay rate r_f of the fluctuation sector (growth factor per layer)", "", g4},
                 {"g4_C_prime_emp", "G4: C'_emp = max_l |E_l| / (kappa_alpha C_f r_f^l |dX^perp|) (Thm 6(2): <= 1)", "", g4},
                 {"g4_tau_sat_formula", "G4: tau_sat = log(kappa_alpha C_f / eps_tol) / log(1 / r_f) (NaN: (A5) fails, r_f >= 1)", "layers", g4},
                 {"g4_tau_sat_empirical", "G4: first layer from which the duality error stays <= eps_tol (NaN: never within the depth)", "layers", g4},
                 {"transformer_r_f", "Pre-LN stack: decay rate r_f of the fluctuation sector (growth factor per layer; >= 1: (A5) fails, F17)", "", tr},
                 {"transformer_C_prime_emp", "Pre-LN stack: C'_emp = max_l |E_l| / (kappa_alpha C_f r_f^l |dX^perp|)", "", tr}};
  o.figures = {{"duality.png", "per family: |E_l| / |dX^perp| against kappa_alpha C_f r_f^l and C_sharp(l), with eps_tol and tau_sat; "
                               "Remark 6's error after mixing against the one-shot error, per compression"}};
  return o;
}

OutputDecl coupling_thm9_outputs() {
  const std::string overflow = "not finite in double precision over this depth (a bound that overflows is vacuous)";
  OutputDecl o;
  o.tables = {checks_table(),
              TableDecl{"thm9.csv", "one probe, block and layer: Thm 9's discrepancy and its bounds (G4)",
                        {index("probe", "probe (random deviation dX)", 0), index("block", "block of P tokens", 0), index("l", "layer l", 0),
                         real("lhs", "|psi(zeta) - psi(zeta - P_-(l) zeta)|, zeta = Pi(Phi^full_l dX) of the block").may_be_empty(overflow),
                         real("lpsi_pminus", "L_psi |P_-(l) zeta| (the proof's first step)").may_be_empty(overflow),
                         real("rhs_literal", "Thm 9 as printed: L_psi C r_-^l |P_-(0) zeta(0)| + L_psi kappa_alpha C_f r_f^l |dX^perp| (C' = 1)")
                             .may_be_empty(overflow),
                         real("rhs_corrected", "Thm 9 corrected (F12): L_psi (C r_-^l |P_-(0) Pi~ dX| + |P_-|_inf C_sharp(l) |dX^perp|)")
                             .may_be_empty(overflow)}}};
  o.summaries = {{"rate", "fitted decay rate per layer of max L_psi |P_- zeta| over the second half (Thm 9: <= max(r_-, r_f))"},
                 {"r_minus", "r_-: top of the decaying Bohl intervals of the G4 tangent cocycle (growth factor per layer)"},
                 {"r_f", "decay rate r_f of the fluctuation sector (growth factor per layer)"},
                 {"slack", "max lhs / rhs_corrected (the corrected bound holds: <= 1)"},
                 {"literal_violations", "rows of thm9.csv where the printed bound fails (F12)"}};
  o.figures = {{"thm9.png", "the discrepancy, L_psi |P_- zeta| and the printed and corrected right-hand sides against depth"}};
  return o;
}

const ExperimentRegistration reg_duality{with_renamed(with_outputs(with_smoke(Experiment{
    "coupling-duality",
    "Coupling paper Thm 6 / Remark 6: depth-coarse-grain duality, tau_sat, C_sharp, slow tick, block mean after mixing (R12, R13; F15, F16)",
    duality_params(), run_duality, "coupling-duality",
    [](const Params& p) {
      // Measured (d = 6-48): the Transformer family's sector flows, probes and constants take about
      // 1e4 d^3 per layer and 6e5 d^3 once, at the small-matrix rate; the G4 family 0.5 ms a layer.
      const std::string fam = p.get_string("family");
      const double d = static_cast<double>(p.get_int("d")), L = static_cast<double>(p.get_int("depth")),
                   f = static_cast<double>(p.get_int("d_ff")), d3 = d * d * d;
      cost::Work w;
      double bytes = 64e6;
      if (fam != "g4") {
        w.add(1e4 * L * d3 + 6e5 * d3, cost::small_matrix_rate(d));
        bytes += 8.0 * L * (13.0 * d * d + 2.0 * d * f);
      }
      if (fam != "transformer") w.add_timed(1e6 * static_cast<double>(p.get_int("g4_L")), 0.5e-3 * static_cast<double>(p.get_int("g4_L")));
      w.add_timed(1e8, 0.3);
      return w.estimate(bytes, "the sector flows along depth, their probes, envelopes and constants (d x d products and norms)");
    }}, {{"g4_L", "20"}, {"depth", "12"}, {"remark6_L", "10"}, {"probes", "1"}}),
    coupling_duality_outputs()), duality_renamed(true))};
const ExperimentRegistration reg_thm9{with_renamed(with_outputs(with_smoke(Experiment{
    "coupling-thm9", "Coupling paper Thm 9: decaying content does not reach the injection, printed and corrected bounds (R16, F12)",
    thm9_params(), run_thm9, "coupling-thm9"}, {{"g4_L", "20"}, {"probes", "1"}}), coupling_thm9_outputs()), duality_renamed(false))};

}  // namespace
}  // namespace tokdyn
