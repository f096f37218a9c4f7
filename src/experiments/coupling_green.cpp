// Preset coupling-green: the Green operator of a dichotomy (coupling paper Lemma 17, check R17).
// For a random bounded forcing h on a window of a G-level saddle (family g1 / g3 / g4, or a
// generators file) the bounded solution u = G h of u(l+1) = (I + A(l)) u(l) + h(l) is computed by
// the block-banded BVP of the two-sided constant extension (App. B.1) and checked:
//   residual ~1e-13, end conditions, uniqueness (sigma_min of the BVP matrix > 0), agreement with
//   the explicit Green sum (Lemma 17's kernel) ~1e-10, ||G|| lower <= upper <= C (1/m_- + 1/m_+)
//   on windows L/4, L/2, L, and the weight-tied closed form G h = -A^{-1} h for constant h.
// Optionally (tlevel = true) the same on the tangent cocycle of a random Pre-LN Transformer along
// its reference trajectory, when its window ends are hyperbolic (flag F17: for random stacks they
// usually are not, the stream grows and |A(l)| ~ 1/|x*(l)| -> 0, so the default is G-level only).
// Outputs: checks.csv, green.csv (per layer: |u|, |P_+ u|, |P_- u|, explicit-sum difference,
// residual), norms.csv (window, upper, lower, bound), u.npy (write_u), summaries, figure coupling-green.
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/green.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/generators_file.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/models/transformer/setup.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/constants.hpp"

namespace tokdyn {
namespace {

using green::Matrix;
using green::Seq;
using green::Tails;

using tokdyn::kNaN;
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}


// Forcing from a float64 .npy [L, d] (row l = h(l)).
Seq read_forcing(const std::string& file, long L, long d) {
  std::vector<std::size_t> shape;
  const std::vector<double> v = read_npy_double(file, shape, std::uint64_t(1) << 28);
  if (shape.size() != 2 || static_cast<long>(shape[0]) != L || static_cast<long>(shape[1]) != d)
    throw InputError(fmt::format("parameter 'forcing' ({}): expected shape [{}, {}] (L, d of the generators)", file, L, d));
  Seq h(d, L);
  for (long l = 0; l < L; ++l)
    for (long i = 0; i < d; ++i) {
      const double x = v[static_cast<std::size_t>(l * d + i)];
      if (!std::isfinite(x)) throw InputError(fmt::format("parameter 'forcing' ({}): entry [{}, {}] is not finite", file, l, i));
      h(i, l) = x;
    }
  return h;
}

Seq random_forcing(long d, long L, std::uint64_t seed) {
  Rng rng(seed, {0x67726e, 1});
  Seq h(d, L);
  for (long l = 0; l < L; ++l)
    for (long i = 0; i < d; ++i) h(i, l) = rng.uniform(-1.0, 1.0);
  return h;
}

// What the validation of one window measured (the G-level values become summaries).
struct WindowResult {
  double explicit_diff = kNaN;  ///< max_l |u_BVP(l) - u_sum(l)| / (1 + |u|_inf); NaN: no explicit sum (L > explicit_max_L)
  double norm_upper = kNaN;     ///< upper estimate of ||G||_inf on the full window; NaN: no dichotomy there
  double bound = kNaN;          ///< Lemma 17's C (1/m_- + 1/m_+) on the full window; NaN: no dichotomy there
};

// The full R17 validation of one window: explicit sum, projections, norms; rows of green.csv.
WindowResult validate_window(const std::string& level, const std::vector<Matrix>& B, const Seq& h, const Seq& u,
                     long explicit_max_L, double exclusion_tol, CsvWriter& gcsv, CsvWriter& ncsv, CheckTable& checks, RunContext& ctx) {
  const long L = static_cast<long>(B.size()), d = B.front().rows();
  const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(B);
  const cocycle::Bundles b = [&] {
    auto timer = ctx.phase("bundles");
    return cocycle::two_sided_bundles(c);
  }();
  const double scale = 1 + green::sup_norm(u);
  WindowResult out;
  Seq ue;
  double diff = kNaN;
  if (L <= explicit_max_L) {
    auto timer = ctx.phase("explicit_sum");
    ue = green::green_explicit(c, b, h, Tails::Constant);
    diff = green::sup_norm(ue - u) / scale;
    checks.add("R17 explicit", "Lemma 17: G h is the explicit Green sum (BVP of the two-sided extension = kernel sum)",
               level + ": max_l |u_BVP(l) - u_sum(l)| / (1 + |u|_inf)", diff, "<= 1e-10", diff <= 1e-10,
               independent("green_explicit: the explicit kernel sum (Lemma 17)"));
  }
  out.explicit_diff = diff;
  // ||G|| on windows L/4, L/2, L (the first layers of the window).
  const long stride = std::max(1L, L / 200);
  green::Lemma17Bound full;
  for (long w : {L / 4, L / 2, L}) {
    if (w < 2) continue;
    const std::vector<Matrix> Bw(B.begin(), B.begin() + w);
    const cocycle::Cocycle cw = cocycle::Cocycle::from_matrices(Bw);
    cocycle::BundlesOutcome found = [&] {
      auto timer = ctx.phase("bundles");
      return cocycle::find_two_sided_bundles(cw);
    }();
    if (!found) {  // a sub-window whose last map is not a saddle of the same k
      ctx.warnings.push_back(fmt::format("{} window {}: no two-sided dichotomy ({}); norm row skipped", level, w, found.why_not));
      continue;
    }
    const cocycle::Bundles bw = std::move(*found.bundles);
    auto norm_timer = ctx.phase("norms");
    const green::NormEstimate e = green::green_norm_estimate(cw, bw);
    norm_timer.stop();
    auto bound_timer = ctx.phase("lemma17_bound");
    const green::Lemma17Bound lb = green::lemma17_bound(cw, bw, stride);
    bound_timer.stop();
    if (w == L) {
      full = lb;
      out.norm_upper = e.upper;
      out.bound = lb.bound;
    }
    ncsv.cell(level).cell(w).cell(e.upper).cell(e.lower).cell(lb.bound).cell(lb.C).cell(lb.r_minus).cell(lb.r_plus).end_row();
    const bool ok = e.lower <= e.upper * (1 + 1e-12) && e.upper <= lb.bound * (1 + 1e-12);
    checks.add("R17 norm", "Lemma 17(1): ||G||_inf <= C (1/m_- + 1/m_+)",
               fmt::format("{} window {}: upper max_l sum_s |G(l,s+1)| / bound (lower {:.4g} <= upper {:.4g})", level, w, e.lower, e.upper),
               e.upper / lb.bound, "lower <= upper and upper / bound <= 1", ok, bound("Lemma 17(1): C (1/m_- + 1/m_+)"));
  }
  long lb_depth = 0;
  if (std::isfinite(full.C) && full.C >= 1) {  // C = 0: no window of 2+ layers had a dichotomy (no bound)
    const double rm = std::isnan(full.r_minus) ? 1e-3 : full.r_minus;
    const double rp = std::isnan(full.r_plus) ? std::numeric_limits<double>::infinity() : full.r_plus;
    lb_depth = green::exclusion_depth(full.C, rm, rp, exclusion_tol);
  }
  ctx.notes[level + "_exclusion_depth"] = lb_depth;
  ctx.notes[level + "_k"] = b.k;
  const Matrix I = Matrix::Identity(d, d);
  for (long l = 0; l <= L; ++l) {
    const Eigen::VectorXd pu = b.P_plus[static_cast<std::size_t>(l)] * u.col(l);
    const double res = l < L ? (u.col(l + 1) - B[static_cast<std::size_t>(l)] * u.col(l) - h.col(l)).norm() : kNaN;
    const bool interior = l >= lb_depth && l <= L - lb_depth;
    gcsv.cell(level).cell(l).cell(u.col(l).norm()).cell(pu.norm()).cell((u.col(l) - pu).norm())
        .cell(ue.size() ? (ue.col(l) - u.col(l)).norm() : kNaN).cell(res).cell(std::string(interior ? "true" : "false"));
    gcsv.end_row();
  }
  return out;
}

void run_green(const Params& p, RunContext& ctx) {
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const std::string gen_file = p.get_string("generators"), forcing_file = p.get_string("forcing");
  const bool validate = p.get_bool("validate");
  const long explicit_max_L = p.get_int("explicit_max_L");
  std::vector<Matrix> B;
  if (!gen_file.empty()) {
    for (const char* k : {"d", "depth"})
      if (p.is_explicit(k) && !p.get_bool("tlevel"))
        throw InputError(fmt::format("parameter '{}' does not apply with a generators file (its shape gives d and depth) unless "
                                     "tlevel = true (leave '{}' unset)", k, k));
    B = read_generators_npy(gen_file, "generators", 2);  // the window's two ends and a norm window need L >= 2
  } else {
    double knob = p.get_double("knob");
    const std::string fam = p.get_string("family");
    if (std::isnan(knob) || knob < 0) knob = fam == "g1" ? 5.0 : fam == "g3" ? 1.5 : 0.05;
    if (fam == "g1" && knob < 1) throw InputError(fmt::format("parameter 'knob' = {}: family g1 needs kappa >= 1", knob));
    B = green::saddle_family(fam, p.get_int("d"), p.get_int("depth"), knob, seed);
  }
  const long L = static_cast<long>(B.size()), d = B.front().rows();
  if (!forcing_file.empty() && gen_file.empty())
    throw InputError("parameter 'forcing': a forcing file needs a 'generators' file (its shape [L, d] follows the generators)");
  const Seq h = forcing_file.empty() ? random_forcing(d, L, seed) : read_forcing(forcing_file, L, d);

  CheckTable checks(ctx.dir / "checks.csv");
  // ---- the BVP (production path), timed -----------------------------------------------------------
  const auto t0 = std::chrono::steady_clock::now();
  const green::Ends ends = green::make_ends(B.front(), B.back());  // domain_error: not hyperbolic (exit 2)
  // Without validation B is not needed afterwards: hand it over (no copy of the L maps in the timing).
  const green::Bvp bvp(validate ? B : std::move(B), ends);
  const double t_factor = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  const Seq u = bvp.solve(h, Tails::Constant);
  const double t_solve = seconds_since(t1);
  ctx.notes["L"] = L;
  ctx.notes["d"] = d;
  ctx.notes["k"] = ends.k;
  ctx.notes["factor_seconds"] = t_factor;
  ctx.notes["solve_seconds"] = t_solve;
  ctx.add_phase("factor", t_factor);
  ctx.add_phase("solve", t_solve);
  ctx.notes["factor_flops"] = bvp.factor_flops();
  ctx.notes["solve_flops"] = static_cast<double>(L) * (4.0 * static_cast<double>(d) * static_cast<double>(d));
  const double scale = 1 + green::sup_norm(u);
  const double res = bvp.residual(u, h) / scale, bres = bvp.boundary_residual(u, h, Tails::Constant) / scale;
  checks.add("R17 residual", "Lemma 17(2): G h solves u(l+1) = (I + A(l)) u(l) + h(l)", "G-level: max_l residual / (1 + |u|_inf)", res,
             "<= 1e-12", res <= 1e-12, closed_form("u(l+1) - (I + A(l)) u(l) - h(l) from the layer maps"));
  checks.add("R17 residual", "Lemma 17(2): G h is the bounded solution of the two-sided extension (end conditions)",
             "G-level: end-condition residual / (1 + |u|_inf)", bres, "<= 1e-12", bres <= 1e-12,
             consistency("Bvp::solve vs the end rows of make_ends it imposes"));
  double sigma_min = kNaN;  // the certificate (a summary); NaN: none
  if (validate) {
    // A certificate, not an estimate: the exact sigma_min (dense SVD, less its round-off) where the
    // size allows, else the lower bound 1/sqrt(|M^-1|_1 |M^-1|_inf); the power-iteration value
    // (an upper estimate) stays in the manifest for comparison.
    auto timer = ctx.phase("certificate");
    const green::Bvp::SigmaMinCertificate cert = bvp.smallest_singular_value_certificate();
    ctx.notes["sigma_min"] = {{"certificate", cert.method == "none" ? nlohmann::json(nullptr) : nlohmann::json(cert.value)},
                              {"method", cert.method}, {"power_estimate", bvp.smallest_singular_value_estimate()}};
    if (cert.method != "none") sigma_min = cert.value;
    if (cert.method == "none")
      ctx.warnings.push_back("R17 uniqueness: the BVP is too large for a sigma_min certificate (dense SVD or N solves); the check is not applicable");
    checks.add("R17 uniqueness", "Lemma 17(3): the bounded solution is unique (homogeneous BVP only trivial)",
               fmt::format("G-level: sigma_min(BVP matrix), {} (a value not above the true one)", cert.method == "exact" ? "exact: dense SVD less its round-off" : cert.method == "lower bound" ? "lower bound 1/sqrt(|M^-1|_1 |M^-1|_inf)" : "no certificate"),
               cert.value, "> 1e-8", cert.value > 1e-8,
               qualitative("Lemma 17(3): sigma_min(BVP matrix) > 0 (uniqueness)"));
  }
  // u.npy [L + 1, d]: row l = u(l) (Seq is column-major d x (L + 1), column l contiguous).
  if (p.get_bool("write_u")) write_npy(ctx.dir / "u.npy", u.data(), {static_cast<std::size_t>(L + 1), static_cast<std::size_t>(d)});
  if (ctx.progress) ctx.progress(0.2);
  WindowResult gres;
  if (validate) {
    CsvWriter gcsv = ctx.table("green.csv");
    gcsv.blank_nonfinite({"explicit_diff", "residual"});  // empty: no explicit sum (window too long) / no residual at l = L
    CsvWriter ncsv = ctx.table("norms.csv");
    // empty: no decaying / growing part (e.g. d = 1), so no rate or constant on that side
    ncsv.blank_nonfinite({"upper", "lower", "bound", "C", "r_minus", "r_plus"});
    gres = validate_window("G-level", B, h, u, explicit_max_L, p.get_double("exclusion_tol"), gcsv, ncsv, checks, ctx);
    if (ctx.progress) ctx.progress(0.6);

    // ---- weight-tied closed form: A constant, h constant -> -A^{-1} h at every layer --------------
    {
      const long Lw = 40;
      const std::vector<Matrix> Bt = green::saddle_family("g1", d, Lw, 5.0, seed + 1);
      const Matrix A = Bt.front() - Matrix::Identity(d, d);
      const Eigen::VectorXd h0 = h.col(0);
      const Seq u_t = green::Bvp(Bt, green::make_ends(Bt.front(), Bt.back())).solve(h0.replicate(1, Lw), Tails::Constant);
      const Eigen::VectorXd closed = green::weight_tied_constant(A, h0);
      double err = 0;
      for (long l = 0; l <= Lw; ++l) err = std::max(err, (u_t.col(l) - closed).norm());
      err /= 1 + closed.norm();
      checks.add("R17 weight-tied", "§5.1: weight-tied G h = -A^{-1} h for constant h", "G1: max_l |u(l) + A^{-1} h| / (1 + |A^{-1} h|)",
                 err, "<= 1e-12", err <= 1e-12, closed_form("-A^{-1} h (weight-tied, green::weight_tied_constant)"));
    }

    // ---- T-level: the Transformer's tangent cocycle, where hyperbolic (F17) ----------------------
    if (p.get_bool("tlevel")) {
      const tf::Transformer model = tf::transformer_from(p, ctx);
      const tf::Reference ref = tf::reference_trajectory(model, tf::reference_start(model.config(), seed), static_cast<int>(p.get_int("depth")));
      std::vector<Matrix> BT;
      for (const Mat& m : tf::tangent_sequence(ref, tf::Form::Exact)) BT.emplace_back(m);
      // No dichotomy at the window's ends (or a singular BVP) is an outcome, not an error.
      const green::EndsOutcome eT = green::find_ends(BT.front(), BT.back(), 1e-6);
      green::BvpOutcome bT = eT ? green::Bvp::factor(BT, *eT.ends) : green::BvpOutcome{std::nullopt, eT.why_not};
      if (bT) {
        const Seq hT = random_forcing(static_cast<long>(BT.front().rows()), static_cast<long>(BT.size()), seed + 2);
        const Seq uT = bT.bvp->solve(hT, Tails::Constant);
        const double rT = bT.bvp->residual(uT, hT) / (1 + green::sup_norm(uT));
        checks.add("R17 residual", "Lemma 17(2) on the Transformer tangent cocycle", "T-level: max_l residual / (1 + |u|_inf)", rT,
                   "<= 1e-12", rT <= 1e-12, closed_form("u(l+1) - (I + A(l)) u(l) - h(l) from the layer maps"));
        validate_window("T-level", BT, hT, uT, explicit_max_L, p.get_double("exclusion_tol"), gcsv, ncsv, checks, ctx);
        ctx.notes["tlevel_hyperbolic"] = true;
      } else {
        // F17: Pre-LN stacks grow the stream, |A(l)| ~ 1/|x*(l)|, the end maps approach I.
        const Eigen::VectorXcd ev = Eigen::EigenSolver<Matrix>(BT.back(), false).eigenvalues();
        double closest = std::numeric_limits<double>::infinity();
        for (long i = 0; i < ev.size(); ++i) closest = std::min(closest, std::abs(std::abs(ev(i)) - 1.0));
        ctx.notes["tlevel_hyperbolic"] = false;
        const std::string why =
            eT ? fmt::format("the window's boundary-value problem is singular ({}): the Green operator does not exist", bT.why_not)
               : fmt::format("the window's end maps are not hyperbolic (flag F17, distance of an eigenvalue modulus to 1: "
                             "{:.3g}): the Green operator does not exist", closest);
        checks.not_applicable("R17 residual", "Lemma 17(2) on the Transformer tangent cocycle", "T-level: max_l residual / (1 + |u|_inf)",
                              why, closed_form("u(l+1) - (I + A(l)) u(l) - h(l) from the layer maps"));
        ctx.notes["tlevel_end_distance_to_unit_circle"] = closest;
        ctx.warnings.push_back(fmt::format("T-level: the Transformer tangent cocycle's window {} (flag F17; {}); "
                                           "R17 checked at the G-level only",
                                           eT ? "has a singular boundary-value problem" : "ends are not hyperbolic", bT.why_not));
      }
    }
  }
  checks.report(ctx, "coupling-green");
  ctx.summary("residual", res);
  ctx.summary("explicit_diff", gres.explicit_diff);
  ctx.summary("green_norm_upper", gres.norm_upper);
  ctx.summary("lemma17_bound", gres.bound);
  ctx.summary("sigma_min", sigma_min);
}

OutputDecl coupling_green_outputs() {
  const auto level = [] {
    return category("level", "which cocycle", {{"G-level", "the G-level saddle (family, or the generators file)"},
                                               {"T-level", "the random Pre-LN Transformer's tangent cocycle (tlevel = true, hyperbolic ends)"}});
  };
  const std::string one_sided = "not defined: the cocycle has no decaying (r_minus) or no growing (r_plus) bundle, e.g. d = 1";
  const std::string overflow = "not finite in double precision (an estimate that overflows)";
  OutputDecl o;
  o.tables = {
      checks_table(),
      TableDecl{"green.csv", "one layer of the window of one level: the bounded solution u = G h and its validation",
                {level(), index("l", "layer l of the window (0..L)", 0), real("norm_u", "|u(l)| (Euclidean)"),
                 real("norm_Pplus_u", "|P_+(l) u(l)|: component in the persistent (growing) bundle V_par"),
                 real("norm_Pminus_u", "|u(l) - P_+(l) u(l)|: component in the decaying bundle V_perp"),
                 real("explicit_diff", "|u_BVP(l) - u_sum(l)|: difference to the explicit Green sum of Lemma 17 (absolute)")
                     .may_be_empty("window longer than explicit_max_L: the explicit sum is not computed"),
                 real("residual", "|u(l+1) - (I + A(l)) u(l) - h(l)| (absolute)").may_be_empty("l = L: no layer map after the window"),
                 flag("interior", "l_b <= l <= L - l_b: outside the boundary layers, l_b = ceil(log(C / exclusion_tol) / log(1 / max(r_-, 1/r_+))) "
                      "from Lemma 17's bound on the full window (0 without a bound)")},
                "validate = true"},
      TableDecl{"norms.csv", "one sub-window (the first w layers; w = L/4, L/2, L) of one level: ||G||_inf estimates and Lemma 17's bound",
                {level(), integer("window", "length w of the sub-window (layers)"),
                 real("upper", "upper estimate of ||G||_inf: max_l sum_s |G(l, s+1)|").may_be_empty(overflow),
                 real("lower", "lower estimate of ||G||_inf: ||G h||_inf at the best h of a sign iteration").may_be_empty(overflow),
                 real("bound", "Lemma 17(1): C (1/m_- + 1/m_+), m_- = 1 - r_-, m_+ = r_+ - 1, at its best over the grid of rates")
                     .may_be_empty(overflow),
                 real("C", "the dichotomy constant C of that bound").may_be_empty(overflow),
                 real("r_minus", "the decay factor r_- per layer of that bound").may_be_empty(one_sided),
                 real("r_plus", "the growth factor r_+ per layer of that bound").may_be_empty(one_sided)},
                "validate = true"}};
  o.arrays = {{"u.npy", "float64 [L + 1, d]: the bounded solution u = G h, row l = u(l) (G-level)", "write_u = true"}};
  o.summaries = {{"residual", "G-level: max_l |u(l+1) - (I + A(l)) u(l) - h(l)| / (1 + |u|_inf) of the BVP solution"},
                 {"explicit_diff", "G-level: max_l |u_BVP(l) - u_sum(l)| / (1 + |u|_inf) against the explicit Green sum "
                                   "(NaN: validate = false or L > explicit_max_L)"},
                 {"green_norm_upper", "G-level: upper estimate of ||G||_inf on the full window (NaN: validate = false, or no dichotomy)"},
                 {"lemma17_bound", "G-level: Lemma 17's bound C (1/m_- + 1/m_+) on the full window (NaN: validate = false, or no dichotomy)"},
                 {"sigma_min", "G-level: certified lower value of the smallest singular value of the BVP matrix (uniqueness; NaN: validate = "
                               "false, or too large for a certificate)"}};
  o.figures = {{"green.png", "per level: |u|, |P_+ u|, |P_- u| along the window; residual and explicit-sum agreement; ||G|| estimates "
                             "and Lemma 17's bound against the window", "validate = true"}};
  return o;
}

std::vector<ParamSpec> green_params() {
  auto ps = tf::transformer_params(4, 16, 8, 200, 0.0);
  // tokens is not a knob here (the T-level reference is one token); the architecture applies with tlevel.
  ps.erase(std::remove_if(ps.begin(), ps.end(), [](const ParamSpec& s) { return s.key == "tokens"; }), ps.end());
  std::vector<std::string> arch = tf::transformer_keys();
  arch.erase(std::remove_if(arch.begin(), arch.end(), [](const std::string& k) { return k == "d" || k == "depth" || k == "seed"; }),
             arch.end());
  tf::applies_only_when(ps, arch, "tlevel", {"true"});
  ps.push_back(p_string("family", "g4", "G-level saddle: g1 weight-tied, g3 triangular non-normal, g4 sector-structured rotating",
                        {"g1", "g3", "g4"}));
  ps.back().only_when.push_back({"generators", {""}, false});
  ps.push_back(p_double("knob", -1.0, "family knob: g1 kappa(S) (>= 1), g3 coupling |b|, g4 rotation omega (< 0: 5, 1.5, 0.05)", -1.0, 1e6)
                   .when("generators", {""}));
  ps.push_back(p_string("generators", "", "float64 .npy [L, d, d] of layer maps I + A(l) (empty: the family; overrides d, depth)").file());
  ps.push_back(p_string("forcing", "", "float64 .npy [L, d] forcing h(l) (empty: uniform in [-1, 1]); needs 'generators'")
                   .file()
                   .when_not("generators", {""}));
  ps.push_back(p_bool("validate", true, "R17 validation (explicit sum, norms, projections, uniqueness); off for timing runs"));
  ps.push_back(p_int("explicit_max_L", 2000, "longest window for the O(L^2 d^2) explicit Green sum", 1, 100000).when("validate", {"true"}));
  ps.push_back(p_double("exclusion_tol", 1e-4, "boundary-layer tolerance of the interior [l_b, L - l_b] (green.csv 'interior')", 0.0, 1.0, true)
                   .when("validate", {"true"}));
  ps.push_back(p_bool("tlevel", false, "also the random Pre-LN Transformer's tangent cocycle (usually not hyperbolic: F17)").when("validate", {"true"}));
  ps.push_back(p_bool("write_u", false, "write u.npy [L + 1, d] (the solution, one row per layer)"));
  return ps;
}

// Adds the work of one level's BVP (factor and solve) and, with `validate`, its R17 validation.
void add_green_work(cost::Work& w, double& bytes, double L, double d, bool validate, double explicit_max_L) {
  const double N = (L + 1) * d, d2 = d * d, d3 = d2 * d;
  const double mat = cost::small_matrix_rate(d), vec = cost::small_vector_rate(d);
  w.add_timed(L * 4.3 * d3, L * (4.3 * d3 / mat + 5e-6)).add(L * 6.0 * d2, vec);  // the BVP: banded LU (5 us a layer at least), one solve
  bytes += 8.0 * 10.0 * L * d2;           // layer maps, the BVP's factors, bundles and projectors
  if (!validate) return;
  // Layers a push of green_norm runs each way before it is negligible (1e-18 of its peak): about 300
  // at rates 0.87 and 1 / 0.87 per layer (a saddle with margins near 0.15), or the whole window.
  constexpr double kDecayLayers = 300;
  w.add(2.75 * L * 12.0 * d3, mat);                              // bundles of the window and of the 3 norm windows
  if (L <= explicit_max_L) w.add(3.0 * L * L * d2, vec);         // explicit Green sum
  if (N <= 1600) {  // sigma_min certificate: dense SVD of the N x N BVP matrix
    bytes += 8.0 * 3.0 * N * N;
    w.add(30.0 * N * N * N, cost::kRateBlas3);
  } else if (N * 6.0 * L * d2 <= 4e10) {  // or N solves for the norm bound (the certificate's own limit)
    w.add(N * L * 6.0 * d2, vec);
  }
  w.add(60.0 * L * 6.0 * d2, vec);  // the power estimate of sigma_min: 30 solves and 30 transposed
  const long Ll = static_cast<long>(L), stride = std::max(1L, Ll / 200);
  for (const long win : {Ll / 4, Ll / 2, Ll}) {
    if (win < 2) continue;
    const double n = static_cast<double>(win);
    w.add_pushes(n * std::min(n, 2.0 * kDecayLayers), d, true);                        // green_norm: every start, both ways (threads share the starts)
    w.add(16.0 * n * 6.0 * d2, vec);                                                   // its sign iteration: 8 + 8 solves
    w.add_pushes(static_cast<double>((win + stride - 1) / stride) * n, d, true);    // Lemma 17: the growth envelope
  }
}

// The work of a run, part by part (phases in manifest.json notes.phase_seconds). The BVP (factor
// and solve) is O(L d^3); the validation adds, each linear in L or bounded: the bundles; the
// explicit Green sum, O(L^2 d^2) but only up to explicit_max_L; the sigma_min certificate (a dense SVD
// up to N = 1600 unknowns, else N solves while they fit 4e10 counted flops, else none); ||G|| on the
// windows L/4, L/2, L (green_norm: every start pushed until it decays, and a sign iteration of a few
// solves); Lemma 17's constant (growth_envelope: about 200 starts per window, each pushed across the
// whole window, on every thread). tlevel: the same for the Transformer's tangent cocycle.
ResourceEstimate green_estimate(const Params& p) {
  // The generators file's own shape when given (header only), else the family's d and L.
  const double depth = static_cast<double>(p.get_int("depth")), dim = static_cast<double>(p.get_int("d"));
  const auto [L, d] = generators_shape_or(p, "generators", depth, dim);
  const bool validate = p.get_bool("validate");
  const double explicit_max_L = static_cast<double>(p.get_int("explicit_max_L"));
  cost::Work w;
  double bytes = 64e6;
  add_green_work(w, bytes, L, d, validate, explicit_max_L);
  if (validate && p.get_bool("tlevel")) {
    w.add(depth * 20.0 * dim * dim * (dim + static_cast<double>(p.get_int("d_ff"))), cost::small_matrix_rate(dim));  // tangent maps
    add_green_work(w, bytes, depth, dim, true, explicit_max_L);
  }
  return w.estimate(bytes, "the layer maps and the BVP's banded factors; validation: explicit sum, sigma_min certificate, "
                           "||G|| and Lemma 17's constant on 3 windows");
}

const ExperimentRegistration reg_coupling_green{tf::with_renamed_keys(with_outputs(with_smoke(Experiment{
    "coupling-green",
    "Coupling paper Lemma 17 (R17): the Green operator of a dichotomy by the block-banded BVP, explicit sum, norms, uniqueness",
    green_params(), run_green, "coupling-green", green_estimate}, {{"depth", "40"}}), coupling_green_outputs()))};

}  // namespace
}  // namespace tokdyn
