// Presets of the coupling paper's cocycle part ("Attention is Just Another Name for Coupling?",
// §2.4, Thm 4, Thm 5, (A4), C.1):
//   cocycle-spectra  Lyapunov and dichotomy (Sacker–Sell) spectra, bundles, projectors and the
//                    dichotomy constant of any cocycle (a .npy of layer maps or a family G1–G5);
//   coupling-euler   Thm 4 (Euler step as first-order truncation of the time-ordered exponential)
//                    and the non-normal transient growth of §2.4;
//   coupling-looped  the looped LTI model of §2.4 / C.1: global attraction at rate rho(Abar) and
//                    the Green-operator norm 1 / (1 - rho(Abar)).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/inputs.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/experiments/output_tables.hpp"
#include "tokdyn/experiments/generators_file.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/norms.hpp"

namespace tokdyn {
namespace {

using cocycle::Matrix;


std::vector<Matrix> family_generators(const Params& P) {
  const std::string fam = P.get_string("family");
  const long L = P.get_int("depth"), d = P.get_int("d");
  const auto seed = static_cast<std::uint64_t>(P.get_int("seed"));
  if (fam == "G1") return cocycle::family_g1(L, number_list_param(P, "sigma"), P.get_double("kappa"), seed);
  if (fam == "G2") {
    if (P.get_double("a_lo") > P.get_double("a_hi"))
      throw InputError(fmt::format("parameters 'a_lo' = {} and 'a_hi' = {}: expected a_lo <= a_hi", P.get_double("a_lo"), P.get_double("a_hi")));
    return cocycle::family_g2(L, d, P.get_double("a_lo"), P.get_double("a_hi"), seed);
  }
  if (fam == "G3")
    return cocycle::family_g3(L, number_list_param(P, "base"), P.get_string("mode"), P.get_double("amp"), P.get_int("period"),
                              P.get_int("run0"), P.get_double("b"), seed);
  if (fam == "G4") {
    const auto m = number_list_param(P, "m"), v = number_list_param(P, "v");
    if (m.size() != v.size())
      throw InputError(fmt::format("parameters 'm' and 'v': {} and {} values; expected the same number", m.size(), v.size()));
    return cocycle::family_g4(L, m, v, P.get_double("lambda"), P.get_double("omega"), seed);
  }
  return cocycle::family_g5(L, d, P.get_double("scale"), P.get_double("delta"), P.get_int("smooth"), seed);
}

// ------------------------------------------------------------------ cocycle-spectra

double spectra_bundles(const Params& P, RunContext& ctx, const cocycle::Cocycle& c, long burn, long H_min,
                       const std::vector<cocycle::Interval>& widest, const cocycle::HyperbolicDecision& dec);

void run_spectra(const Params& P, RunContext& ctx) {
  const std::string file = P.get_string("generators");
  std::vector<Matrix> drawn;
  if (file.empty()) {
    drawn = family_generators(P);
    write_input_stack(ctx, "generators.npy", drawn,
                      fmt::format("the family {} generators A(l), l = 0..L-1 ([L, d, d]); --set generators=<this folder>/inputs/generators.npy reruns on them",
                                  P.get_string("family")));
  }
  const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(file.empty() ? std::move(drawn) : read_generators_npy(file, "generators"));
  const long L = c.length(), d = c.dim();
  // The default burn-in (40 layers) shrinks to a tenth of a shorter cocycle; an explicit one is kept.
  const long burn = P.is_explicit("burn_in") ? P.get_int("burn_in") : std::min(P.get_int("burn_in"), L / 10);
  if (burn >= L)
    throw InputError(fmt::format("parameter 'burn_in' = {}: expected less than the number of layers L = {} (an empty window)", burn, L));
  const long N = L - burn;
  const long k = P.get_int("k") == 0 ? d : P.get_int("k");
  if (k > d) throw InputError(fmt::format("parameter 'k' = {}: expected at most the dimension d = {}", k, d));
  std::vector<long> Hs(P.get_int_list("H").begin(), P.get_int_list("H").end());
  if (Hs.empty())
    for (long div : {8, 4, 2}) Hs.push_back(std::max<long>(1, N / div));
  for (long H : Hs)
    if (H < 1 || H > N)
      throw InputError(fmt::format("parameter 'H': Steklov window {} is outside 1..{} (the window L - burn_in = {} - {})", H, N, L, burn));
  std::sort(Hs.begin(), Hs.end());
  Hs.erase(std::unique(Hs.begin(), Hs.end()), Hs.end());

  // Discrete QR over the whole cocycle; the burn-in is dropped from every statistic.
  cocycle::QrOptions opt;
  opt.k = k;
  opt.reorth_every = P.get_int("reorth_every");
  // Where the run's time goes (manifest notes.phase_seconds): the spectrum (qr), the rank
  // cross-check, the bundles and constant.
  auto qr_timer = ctx.phase("qr");
  const cocycle::QrResult qr = cocycle::qr_iterate(c, opt);
  const double qr_seconds = qr_timer.stop();
  ctx.notes["qr_seconds"] = qr_seconds;  // manifest only
  const cocycle::LyapunovSpectrum ly = cocycle::lyapunov_spectrum(qr.log_diag, burn);
  {
    // resolved = false: R_ii fell to round-off of the frame's image at some layer (qr_iterate's
    // unresolved_at): from there the column measures round-off, not growth (a rank-deficient layer).
    CsvWriter w = ctx.table("lyapunov.csv");
    w.blank_nonfinite({"unresolved_from_layer"});
    std::vector<long> unresolved;
    for (long i = 0; i < k; ++i) {
      const long at = qr.unresolved_at[static_cast<std::size_t>(i)];
      if (at >= 0) unresolved.push_back(i);
      w.cell(i).cell(ly.mu(i)).cell(ly.gamma(i)).cell(std::string(at >= 0 ? "false" : "true"))
          .cell(at >= 0 ? static_cast<double>(at) : std::numeric_limits<double>::quiet_NaN()).end_row();
    }
    ctx.notes["unresolved_columns"] = unresolved;
    if (!unresolved.empty())
      ctx.warnings.push_back(fmt::format("{} QR column(s) fell to round-off (R_ii <= 64 eps |B Q|): their exponents are unresolved "
                                         "(a rank-deficient layer; the growth scale along them may be exactly 0); see lyapunov.csv:resolved",
                                         unresolved.size()));
    const Matrix run = cocycle::running_exponents(qr.log_diag, burn);
    CsvWriter g = ctx.table("running.csv");
    const long step = std::max<long>(1, N / 500);
    for (long l = burn; l < L; l += step)
      for (long i = 0; i < k; ++i) g.cell(l).cell(i).cell(qr.log_diag(l, i)).cell(run(l, i)).end_row();
  }
  std::vector<cocycle::Interval> widest;  // merged intervals at the smallest H (the widest, most conservative)
  {
    CsvWriter w = ctx.table("dichotomy.csv");
    CsvWriter s = ctx.table("separation.csv");
    for (long H : Hs) {
      const auto merged = cocycle::merge_intervals(cocycle::bohl_intervals(qr.log_diag, H, burn));
      if (widest.empty()) widest = merged;
      for (std::size_t j = 0; j < merged.size(); ++j)
        w.cell(H).cell(j).cell(merged[j].lower).cell(merged[j].upper).cell(merged[j].columns.size()).end_row();
      const Eigen::VectorXd sep = cocycle::separation(qr.log_diag, H, burn);
      for (long i = 0; i < sep.size(); ++i) s.cell(H).cell(i).cell(sep(i)).end_row();
    }
  }
  // yes / no / undecided: the margin of 1 from the widest estimate against the estimate's own error
  // (round-off and the window's bias, cocycle::spectrum_error).
  const cocycle::SpectrumError err = cocycle::spectrum_error(qr.log_diag, burn);
  const cocycle::HyperbolicDecision dec = cocycle::decide_hyperbolic(widest, err.tolerance());
  ctx.notes["hyperbolic"] = cocycle::verdict_name(dec.verdict);
  ctx.notes["hyperbolic_margin"] = dec.margin;
  ctx.notes["hyperbolic_tolerance"] = {{"total", err.tolerance()}, {"roundoff", err.roundoff}, {"window_bias", err.window_bias}};
  ctx.notes["layers"] = L;
  ctx.notes["dimension"] = d;
  // The rank function k(gamma) from finite-time singular values, a cross-check of the intervals:
  // short windows only (the triangular product is formed explicitly, finite_time_svd). It repeats
  // about 50 x 32 QR steps, several times the spectrum's own N steps at large d, so by default it
  // is computed only up to d = kRankDefaultMaxD; above, the run says what it would cost and how
  // to ask for it.
  constexpr long kRankDefaultMaxD = 64;
  const long Nsv = std::min<long>(Hs.front(), 32);
  const long stride = std::max<long>(1, (N - Nsv + 1) / 50);
  const long rank_steps = ((N - Nsv) / stride + 1) * Nsv;
  if (P.is_explicit("rank") && P.get_bool("rank") && k != d)
    throw InputError(fmt::format("parameter 'rank' = true: the rank function needs every QR direction (k = 0 or k = d = {}), got k = {}", d, k));
  const bool rank_wanted = P.get_bool("rank") && k == d && (P.is_explicit("rank") || d <= kRankDefaultMaxD);
  if (P.get_bool("rank") && k == d && !rank_wanted) {
    const double per_step = qr_seconds / static_cast<double>(L);
    const double est = per_step * static_cast<double>(rank_steps) / static_cast<double>(std::max(1, std::min(ctx.threads, 2)));
    ctx.warnings.push_back(fmt::format("rank function (rank.csv) not computed: at d = {} it repeats {} QR steps, about {:.1f} s here "
                                       "({:.1f}x the spectrum's {:.1f} s); --set rank=true computes it (by default only up to d = {})",
                                       d, rank_steps, est, est / std::max(1e-9, qr_seconds), qr_seconds,
                                       kRankDefaultMaxD));
    ctx.notes["rank_skipped_estimate_seconds"] = est;
  }
  if (rank_wanted) {
    auto rank_timer = ctx.phase("rank");
    const auto f = cocycle::finite_time_svd(c, Nsv, stride, burn);
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (long i = 0; i < f.log_sv_rate.size(); ++i)
      if (std::isfinite(f.log_sv_rate(i))) {
        lo = std::min(lo, f.log_sv_rate(i));
        hi = std::max(hi, f.log_sv_rate(i));
      }
    if (std::isfinite(lo)) {
      CsvWriter w = ctx.table("rank.csv");
      const double pad = 0.1 * (hi - lo) + 0.05;
      for (int j = 0; j <= 200; ++j) {
        const double gamma = std::exp(lo - pad + (hi - lo + 2 * pad) * j / 200.0);
        const auto [kmin, kmax] = cocycle::rank_function(f, gamma);
        w.cell(gamma).cell(kmin).cell(kmax).cell(Nsv).end_row();
      }
    }
  }
  // The dichotomy constant C (NaN when it is not computed: bundles = none, no bundles, not hyperbolic).
  const double C = spectra_bundles(P, ctx, c, burn, Hs.front(), widest, dec);  // phases bundles, bundle_diagnostics, constant
  ctx.summary("mu_max", ly.mu.maxCoeff());
  ctx.summary("mu_min", ly.mu.minCoeff());
  ctx.summary("intervals", widest.size());
  ctx.summary("hyperbolic_margin", dec.margin);
  ctx.summary("C", C);
}

// Bundles, projectors and the dichotomy constant of cocycle-spectra (bundles.csv, constants.csv,
// tradeoff.csv): returns C, NaN when it is not computed.
double spectra_bundles(const Params& P, RunContext& ctx, const cocycle::Cocycle& c, long burn, long H_min,
                       const std::vector<cocycle::Interval>& widest, const cocycle::HyperbolicDecision& dec) {
  constexpr double none = std::numeric_limits<double>::quiet_NaN();
  auto timer = ctx.phase("bundles");
  const std::string method = P.get_string("bundles");
  if (method == "none") return none;
  // No bundles (no dichotomy, a singular layer for CLVs) is an outcome of the data, reported.
  cocycle::BundlesOutcome found = method == "clv" ? cocycle::find_clv_bundles(c, burn) : cocycle::find_two_sided_bundles(c);
  if (!found) {
    ctx.warnings.push_back("no bundles: " + found.why_not);
    ctx.notes["bundles"] = "none: " + found.why_not;
    return none;
  }
  const cocycle::Bundles b = std::move(*found.bundles);
  ctx.notes["bundles"] = b.method;
  ctx.notes["k_plus"] = b.k;
  timer.stop();
  auto diag_timer = ctx.phase("bundle_diagnostics");
  const auto diag = cocycle::bundle_diagnostics(c, b);
  {
    CsvWriter w = ctx.table("bundles.csv");
    for (long j = 0; j < diag.angle.size(); ++j)
      w.cell(b.first + j).cell(diag.angle(j)).cell(diag.p_plus_norm(j)).cell(diag.invariance(j)).end_row();
  }
  diag_timer.stop();
  if (dec.verdict != cocycle::Verdict::Yes) {
    ctx.warnings.push_back(dec.verdict == cocycle::Verdict::No
                               ? fmt::format("1 lies in the estimated dichotomy spectrum (not hyperbolic: margin {:.3g} < -tolerance {:.3g}): "
                                             "no dichotomy constant", dec.margin, dec.tolerance)
                               : fmt::format("hyperbolicity undecided: 1 is within the estimate's tolerance {:.3g} of the spectrum "
                                             "(margin {:.3g}): no dichotomy constant", dec.tolerance, dec.margin));
    return none;
  }
  // Rates: r_- just above the decaying part of the spectrum, r_+^min just below the growing part
  // (flag F11: r_+ is a lower growth bound in (A4); r_+^max = sup Sigma is the upper one).
  double g_lo = 0, g_hi = std::numeric_limits<double>::infinity(), sup = 0;
  for (const auto& x : widest) {
    if (x.upper < 1) g_lo = std::max(g_lo, x.upper);
    if (x.lower > 1) g_hi = std::min(g_hi, x.lower);
    sup = std::max(sup, x.upper);
  }
  const double slack = P.get_double("slack");
  double r_minus = P.get_double("r_minus"), r_plus = P.get_double("r_plus");
  if (r_minus == 0) r_minus = g_lo > 0 ? std::exp((1 - slack) * std::log(g_lo)) : slack;
  if (r_plus == 0) r_plus = std::isfinite(g_hi) ? std::exp((1 - slack) * std::log(g_hi)) : std::exp(slack);
  auto constant_timer = ctx.phase("constant");
  const long stride = P.get_int("stride") == 0 ? std::max<long>(1, static_cast<long>(b.P_plus.size()) / 100) : P.get_int("stride");
  // The extreme rates asked for (r_-, r_+ and tradeoff.csv's grids below): the envelope's pushes end
  // where no constant at these rates can change (cocycle.hpp growth_envelope).
  const double a_lo = g_lo > 0 ? std::log(g_lo) : std::log(1e-3), top = std::isfinite(g_hi) ? std::log(g_hi) : 0.5;
  const double r_min = std::min(r_minus, std::exp(a_lo * (1 - 1 / 60.0))), r_max = std::max(r_plus, std::exp(top * 59 / 60.0));
  const auto env = cocycle::growth_envelope(c, b, stride, r_min, r_max);
  const double Cm = cocycle::constant_minus(env, r_minus), Cp = cocycle::constant_plus(env, r_plus);
  const double C = std::max(Cm, Cp);
  {
    CsvWriter w = ctx.table("constants.csv");
    // empty: no finite constant at these rates (a rate at or beyond the spectrum's edge)
    w.blank_nonfinite({"C", "C_minus", "C_plus", "transient_depth"});
    w.cell(r_minus).cell(r_plus).cell(C).cell(1 - r_minus).cell(r_plus - 1).cell(Cm).cell(Cp);
    if (std::isfinite(g_hi)) w.cell(g_hi); else w.empty();
    w.cell(sup).cell(r_minus < 1 ? std::log(C) / std::log(1 / r_minus) : 0.0).cell(b.k).cell(H_min).cell(stride).end_row();
  }
  {
    CsvWriter w = ctx.table("tradeoff.csv");
    w.blank_nonfinite({"C"});  // empty: no finite constant at this rate
    const double a = a_lo;
    for (int j = 1; j < 60; ++j) {
      const double r = std::exp(a * (1 - j / 60.0));
      w.cell(std::string("minus")).cell(r).cell(cocycle::constant_minus(env, r)).end_row();
    }
    if (b.k > 0) {
      for (int j = 1; j < 60; ++j) {
        const double r = std::exp(top * j / 60.0);
        w.cell(std::string("plus")).cell(r).cell(cocycle::constant_plus(env, r)).end_row();
      }
    }
  }
  return C;
}

// ------------------------------------------------------------------ coupling-euler

double spectral_radius(const Matrix& M) { return Eigen::EigenSolver<Matrix>(M, false).eigenvalues().cwiseAbs().maxCoeff(); }

void run_euler(const Params& P, RunContext& ctx) {
  const long d = P.get_int("d"), L = P.get_int("depth");
  const auto seed = static_cast<std::uint64_t>(P.get_int("seed"));
  const long halvings = P.get_int("halvings");
  // R8: A(l) of family G5 (smooth between i.i.d. knots); A(.) continuous by linear interpolation.
  const auto B = cocycle::family_g5(L, d, P.get_double("scale"), P.get_double("delta"), P.get_int("smooth"), seed);
  write_input_stack(ctx, "generators.npy", B, "the family G5 layer maps B(l) = I + A(l) of the Euler check ([L, d, d])");
  const Matrix I = Matrix::Identity(d, d);
  auto layers_A = [&](double s) {
    std::vector<Matrix> A;
    for (const auto& b : B) A.push_back(s * (b - I));
    return A;
  };
  auto stats = [&](const std::vector<Matrix>& A, double& a, double& jump) {
    a = 0;
    jump = 0;
    for (std::size_t r = 0; r < A.size(); ++r) {
      a = std::max(a, spectral_norm(A[r]));
      if (r + 1 < A.size()) jump = std::max(jump, spectral_norm(A[r + 1] - A[r]));
    }
  };
  const auto A = layers_A(1.0);
  const auto Af = cocycle::piecewise_linear(A);
  double a = 0, jump = 0;
  stats(A, a, jump);
  double worst_ratio = 0;
  {
    CsvWriter w = ctx.table("euler_local.csv");
    for (long h = 0; h <= halvings; ++h) {
      const double D = std::ldexp(1.0, static_cast<int>(-h));
      const double omega = D * jump;  // omega_A(Delta) for piecewise-linear A, Delta <= 1
      const double bound = omega * D + 0.5 * a * a * D * D * std::exp(a * D);
      for (long l = 0; l + 1 < L; ++l) {
        const Matrix Pc = cocycle::time_ordered_exp(Af, static_cast<double>(l), static_cast<double>(l) + D);
        const double dev = spectral_norm(Pc - (I + D * A[static_cast<std::size_t>(l)]));
        worst_ratio = std::max(worst_ratio, dev / bound);
        w.cell(D).cell(l).cell(dev).cell(bound).cell(omega).cell(a).end_row();
      }
      if (ctx.progress) ctx.progress(0.5 * static_cast<double>(h + 1) / static_cast<double>(halvings + 1));
    }
  }
  ctx.notes["thm4_worst_deviation_over_bound"] = worst_ratio;
  std::vector<double> global_err;
  {  // global Euler error over [0, L-1]: prod (I + Delta A(j Delta)) against Phi_c(L-1, 0)
    Matrix exact = I;
    for (long l = 0; l + 1 < L; ++l) exact = (cocycle::time_ordered_exp(Af, static_cast<double>(l), static_cast<double>(l + 1)) * exact).eval();
    CsvWriter w = ctx.table("euler_global.csv");
    for (long h = 0; h <= halvings; ++h) {
      const long n = (L - 1) << h;
      const double D = std::ldexp(1.0, static_cast<int>(-h));
      Matrix E = I;
      for (long j = 0; j < n; ++j) E = ((I + D * Af(static_cast<double>(j) * D)) * E).eval();
      global_err.push_back(spectral_norm(E - exact));
      w.cell(D).cell(global_err.back()).cell(L - 1).end_row();
    }
  }
  {  // per-layer deviation at Delta = 1 against the size a of A (small only when a << 1)
    CsvWriter w = ctx.table("euler_scale.csv");
    for (int e = -6; e <= 2; ++e) {
      const auto As = layers_A(std::ldexp(1.0, e));
      const auto Asf = cocycle::piecewise_linear(As);
      double as = 0, js = 0, dev = 0;
      stats(As, as, js);
      for (long l = 0; l + 1 < L; ++l)
        dev = std::max(dev, spectral_norm(cocycle::time_ordered_exp(Asf, static_cast<double>(l), static_cast<double>(l + 1)) - (I + As[static_cast<std::size_t>(l)])));
      w.cell(as).cell(dev).cell(js + 0.5 * as * as * std::exp(as)).end_row();
    }
  }
  // R9: non-normal transient growth.
  const long nn = P.get_int("nn_depth");
  const auto pair = cocycle::nonnormal_pair(nn);
  const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(pair);
  const auto qr = cocycle::qr_iterate(c);
  const Matrix run = cocycle::running_exponents(qr.log_diag);
  {
    CsvWriter w = ctx.table("nonnormal.csv");
    Matrix Phi = Matrix::Identity(2, 2);
    double log_prod = 0;
    w.cell(0L).cell(1.0).cell(1.0).empty().end_row();
    for (long l = 0; l < nn; ++l) {
      Phi = (pair[static_cast<std::size_t>(l)] * Phi).eval();
      log_prod += std::log(spectral_radius(pair[static_cast<std::size_t>(l)]));
      w.cell(l + 1).cell(spectral_norm(Phi)).cell(std::exp(log_prod)).cell(run(l, 0)).end_row();
    }
  }
  const double target = std::sqrt(spectral_radius(pair[1] * pair[0]));
  const auto ly = cocycle::lyapunov_spectrum(qr.log_diag, nn / 2);  // burn-in: half the depth
  ctx.notes["nonnormal_growth_scale"] = ly.gamma(0);
  // Slope of log error against log Delta over the finest halving (NaN with fewer than 3 steps).
  const std::size_t n_err = global_err.size();
  const double slope = n_err >= 3 ? std::log2(global_err[n_err - 2] / global_err[n_err - 1]) : std::numeric_limits<double>::quiet_NaN();
  ctx.summary("deviation_over_bound", worst_ratio);
  ctx.summary("euler_order", slope);
  ctx.summary("rho_B1", spectral_radius(pair[0]));
  ctx.summary("rho_B2", spectral_radius(pair[1]));
  ctx.summary("rho_B2B1", spectral_radius(pair[1] * pair[0]));
  ctx.summary("sqrt_rho_B2B1", target);
  ctx.summary("gamma_1", ly.gamma(0));
  ctx.summary("gamma_2", ly.gamma(1));
  CheckTable checks(ctx.dir / "checks.csv");
  checks.add("R8", "Thm 4: |Phi_c(l + Delta, l) - (I + Delta A(l))| <= omega_A(Delta) Delta + a^2 Delta^2 e^(a Delta) / 2",
             "max deviation / bound", worst_ratio, "<= 1", worst_ratio <= 1.0,
             bound("Thm 4: omega_A(Delta) Delta + a^2 Delta^2 e^(a Delta) / 2"));
  if (n_err >= 3) {  // slope of log error against log Delta over the finest halvings
    checks.add("R8", "Thm 4: the Euler product converges to the time-ordered exponential at first order", "log2 error ratio, last halving",
               slope, "in [0.9, 1.1]", slope >= 0.9 && slope <= 1.1, qualitative("Thm 4: first-order convergence (slope 1)"));
  }
  const double r9 = std::abs(ly.gamma(0) - target) / target;
  checks.add("R9", "non-normal pair: growth scale sqrt(rho(B2 B1)) although rho(B_i) < 1", "|gamma_1 - sqrt(rho(B2 B1))| / sqrt(rho(B2 B1))",
             r9, "<= 1e-10", r9 <= 1e-10, closed_form("sqrt(rho(B2 B1)): eigenvalues of the period-2 product"));
  checks.add("R9", "non-normal pair: every factor contracts in spectral radius", "max rho(B_i)",
             std::max(spectral_radius(pair[0]), spectral_radius(pair[1])), "< 1 (while gamma_1 > 1)",
             std::max(spectral_radius(pair[0]), spectral_radius(pair[1])) < 1.0 && ly.gamma(0) > 1.0,
             qualitative("§2.4: rho(B_i) < 1 while gamma_1 > 1 (non-normal growth)"));
  checks.report(ctx, "coupling-euler");
}

// ------------------------------------------------------------------ coupling-looped

void run_looped(const Params& P, RunContext& ctx) {
  const long d = P.get_int("d"), T = P.get_int("loops"), Lg = P.get_int("green_window");
  const auto seed = static_cast<std::uint64_t>(P.get_int("seed"));
  if (P.get_double("a_lo") > P.get_double("a_hi"))
    throw InputError(fmt::format("parameters 'a_lo' = {} and 'a_hi' = {}: expected a_lo <= a_hi", P.get_double("a_lo"), P.get_double("a_hi")));
  const Eigen::VectorXd abar = cocycle::family_g2_diagonal(d, P.get_double("a_lo"), P.get_double("a_hi"), seed);
  const double rho = abar.maxCoeff();
  Rng rng(seed, {0x100b});
  Eigen::VectorXd e(d), h(d);
  rng.fill_normal(e);
  rng.fill_normal(h);
  h *= 10.0;
  write_input_vector(ctx, "abar.npy", abar, "the diagonal of the looped map's Abar (h <- Abar h + e)");
  write_input_vector(ctx, "h0.npy", h, "the looped recurrence's start h(0)");
  write_input_vector(ctx, "e.npy", e, "the looped recurrence's input e");
  // h* = (I - Abar)^{-1} Bbar e (C.1; the undefined Deltabar is 0 for the linear recurrence, F20).
  const Eigen::VectorXd hstar = (e.array() / (1.0 - abar.array())).matrix();
  const double d0 = (h - hstar).norm();
  double worst = 0, last = d0;
  {
    CsvWriter w = ctx.table("looped.csv");
    for (long t = 0; t <= T; ++t) {
      const double dist = (h - hstar).norm(), bound = std::pow(rho, static_cast<double>(t)) * d0;
      worst = std::max(worst, dist / bound);
      last = dist;
      w.cell(t).cell(dist).cell(bound).cell(rho).end_row();
      h = (abar.array() * h.array()).matrix() + e;
    }
  }
  ctx.notes["worst_dist_over_bound"] = worst;
  // ||G|| = max_l sum_s ||G(l, s+1)|| for the all-contracting cocycle (P_+ = 0), against rho -> 1.
  CsvWriter w = ctx.table("green.csv");
  double g_err = 0;
  const std::vector<double> targets = {0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995};
  for (std::size_t j = 0; j < targets.size(); ++j) {
    // Scale log(abar) so that the largest entry is the target radius (same ratios between entries).
    const Eigen::VectorXd ab = (abar.array().log() * (std::log(targets[j]) / std::log(rho))).exp().matrix();
    const Matrix Bm = ab.asDiagonal();
    const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(std::vector<Matrix>(static_cast<std::size_t>(Lg), Bm));
    const cocycle::Bundles b = cocycle::two_sided_bundles(c);
    const double r = ab.maxCoeff();
    const double gn = cocycle::green_norm(c, b), gw = (1 - std::pow(r, static_cast<double>(Lg))) / (1 - r);
    g_err = std::max(g_err, std::abs(gn - gw) / gw);
    w.cell(r).cell(gn).cell(gw).cell(1 / (1 - r)).cell(Lg).end_row();
    if (ctx.progress) ctx.progress(static_cast<double>(j + 1) / static_cast<double>(targets.size()));
  }
  ctx.summary("rho", rho);
  ctx.summary("measured_rate", std::pow(last / d0, 1.0 / static_cast<double>(T)));
  ctx.summary("worst_dist_over_bound", worst);
  ctx.summary("green_rel_error", g_err);
  CheckTable checks(ctx.dir / "checks.csv");
  checks.add("R25", "looped LTI (C.1): |h_t - h*| <= rho(Abar)^t |h_0 - h*| (C = 1)", "max |h_t - h*| / bound", worst, "<= 1 + 1e-12",
             worst <= 1.0 + 1e-12, bound("C.1: rho(Abar)^t |h_0 - h*| (C = 1)"));
  checks.add("R25", "looped LTI: ||G|| = (1 - rho^L) / (1 - rho) on the window, 1 / (1 - rho) -> infinity as rho -> 1",
             "max relative error of ||G||", g_err, "<= 1e-12", g_err <= 1e-12,
             closed_form("(1 - rho^L) / (1 - rho) (diagonal LTI)"));
  checks.report(ctx, "coupling-looped");
}

OutputDecl cocycle_spectra_outputs() {
  const std::string singular = "-inf: the layer maps are exactly singular along this direction (R_ii = 0: log 0)";
  const std::string when_c = "bundles != none, the bundles exist and 1 is outside the estimated spectrum (hyperbolic = yes)";
  OutputDecl o;
  o.tables = spectrum_tables("of the cocycle", index("layer", "layer r (the map from depth r to r+1)", 0), "burn_in..L-1",
                             "burn_in..r", "", 0, " (every max(1, N/500)-th layer from burn_in)");
  o.tables.insert(o.tables.end(), {
      {"separation.csv", "one consecutive pair of QR columns for one Steklov window: integral separation (Dieci-Van Vleck)",
       {integer("H", "Steklov window (layers)"), index("pair", "the pair (i, i+1) of QR columns, i counted from 0", 0),
        real("min_gap", "smallest Steklov average of log R_ii - log R_(i+1)(i+1) (positive: separated at scale H; "
             "about 1e306 when column i+1 alone is exactly singular: separated without bound)", "1/layer")
            .may_be_nonfinite("-inf: column i alone is exactly singular at some layer (never separated)")}},
      {"rank.csv", "one growth scale gamma: the rank function k(gamma) from finite-time singular values (Dieci-Elia-Van Vleck)",
       {real("gamma", "growth scale"), integer("k_min", "fewest singular values of Phi(s+N, s) above gamma^N over the starts s"),
        integer("k_max", "most singular values above gamma^N over the starts (k_min < k_max: gamma inside a spectral interval)"),
        integer("N", "window of the finite-time singular values (layers): min(smallest H, 32)")},
       "rank = true (by default only for d <= 64; an explicit rank=true at any d), k = d, and some finite-time singular value is finite"},
      {"bundles.csv", "one layer: the bundles V_par, V_perp and the projector P_+ there",
       {index("l", "layer of the projector P_+(l) (two-sided: 0..L; clv: burn_in..)", 0),
        real("angle", "smallest angle between V_par(l) and V_perp(l) (pi/2 when k_+ = 0 or d)", "rad"),
        real("p_plus_norm", "||P_+(l)||_2"),
        real("invariance_residual", "||P_+(l+1) B(l) - B(l) P_+(l)||_2 (0 at the last layer)")},
       "bundles != none and the bundles exist (ends hyperbolic with equal unstable dimensions)"},
      {"constants.csv", "the dichotomy constant C at the rates r_-, r_+ (assumption (A4)); one row",
       {real("r_minus", "decay rate r_- (growth scale; automatic: (top of the decaying spectrum)^(1 - slack))"),
        real("r_plus", "growth rate r_+ (growth scale; automatic: (bottom of the growing spectrum)^(1 - slack))"),
        real("C", "dichotomy constant max(C_minus, C_plus)").may_be_empty("no finite constant at these rates"),
        real("m_minus", "margin 1 - r_minus"), real("m_plus", "margin r_plus - 1"),
        real("C_minus", "max over starts s, j of ||Phi(s+j, s) P_-(s)|| r_minus^-j (at least 1)").may_be_empty("no finite constant at r_minus"),
        real("C_plus", "max over starts s, j of ||Phi(s-j, s) P_+(s)|| r_plus^j (at least 1)").may_be_empty("no finite constant at r_plus"),
        real("r_plus_min", "lower end of the growing part of the spectrum (F11: the lower growth bound)")
            .may_be_empty("no interval above 1 (no growing part)"),
        real("r_plus_max", "upper end of the whole spectrum (F11: the upper growth bound)"),
        real("transient_depth", "log C / log(1 / r_minus): depth after which the decaying part is below 1 (0 when r_minus = 1)", "layer")
            .may_be_empty("C not finite"),
        integer("k_plus", "dimension of V_par (unstable directions)"), integer("H", "Steklov window of the intervals used (the smallest H)"),
        integer("stride", "start layers s sampled every stride layers")},
       when_c},
      {"tradeoff.csv", "one rate on one side: the constant C as a function of the rate (the trade-off curves)",
       {category("side", "which constant", {{"minus", "C_-(r) of the decaying part, r below 1"}, {"plus", "C_+(r) of the growing part, r above 1"}}),
        real("r", "rate (growth scale)"), real("C", "C_-(r) or C_+(r)").may_be_empty("no finite constant at this rate")},
       when_c}});
  o.summaries = {{"mu_max", "the largest of the k Lyapunov exponents (empty when -inf)", "1/layer"},
                 {"mu_min", "the smallest of the k Lyapunov exponents (empty when -inf: an exactly singular direction)", "1/layer"},
                 {"intervals", "merged dichotomy intervals at the smallest Steklov window H"},
                 {"hyperbolic_margin", "signed log distance of 1 from those intervals (> 0: outside every interval; "
                  "hyperbolic = yes when above the estimate's tolerance)", "1/layer"},
                 {"C", "the dichotomy constant of constants.csv (empty when not computed: bundles = none, no bundles, or not hyperbolic)"}};
  o.figures = {{"cocycle_spectra.png", "running exponents, dichotomy intervals per H with the growth scales, bundles and projectors, "
                "trade-off curves C(r)"}};
  return o;
}

// The work of a run by part (phases in manifest.json notes.phase_seconds): the discrete QR (a d x d
// product and a QR of d x k per layer, every core from d = 128), the rank function when it is
// computed (50 windows of up to 32 QR steps and a singular value decomposition each), and the
// bundles: two-sided (a Schur form at each end, subspaces pushed both ways, the projectors) or CLVs,
// their diagnostics (two spectral norms per layer) and the constant's growth envelope (about 100
// starts, each pushed across the window with a spectral norm per layer; counted in full, although
// it runs only for a hyperbolic cocycle and its pushes end early once negligible).
ResourceEstimate spectra_estimate(const Params& P) {
  const std::string fam = P.get_string("family");
  const double fam_d = static_cast<double>(fam == "G1" ? P.get_double_list("sigma").size()
                                           : fam == "G3" ? P.get_double_list("base").size()
                                           : fam == "G4" ? P.get_double_list("m").size()
                                                         : static_cast<std::size_t>(P.get_int("d")));
  // The file's own shape when one is given (its header alone is read), else the family's sizes.
  const auto [L, d] = generators_shape_or(P, "generators", static_cast<double>(P.get_int("depth")), fam_d);
  const double k = P.get_int("k") == 0 ? d : std::min(d, static_cast<double>(P.get_int("k")));
  const double d3 = d * d * d, mat = cost::small_matrix_rate(d);
  const bool wide = d >= 128;  // the QR's blocks on every core
  const double burn = P.is_explicit("burn_in") ? static_cast<double>(P.get_int("burn_in")) : std::min(static_cast<double>(P.get_int("burn_in")), std::floor(L / 10));
  const double N = std::max(1.0, L - burn);
  cost::Work w;
  w.add(L * d * d * 30.0, cost::small_vector_rate(d));             // the family's draw (or the file's read)
  w.add(L * (2.0 * d * d * k + 4.0 * d * k * k), mat, wide);      // discrete QR
  const std::vector<long>& Hs = P.get_int_list("H");
  const double H_min = Hs.empty() ? std::max(1.0, std::floor(N / 8)) : static_cast<double>(*std::min_element(Hs.begin(), Hs.end()));
  if (P.get_bool("rank") && k == d && (P.is_explicit("rank") || d <= 64)) {
    const double Nsv = std::min(H_min, 32.0), stride = std::max(1.0, std::floor((N - Nsv + 1) / 50));
    const double windows = std::floor(std::max(0.0, N - Nsv) / stride) + 1;
    w.add(windows * (Nsv * 6.0 * d3 + 25.0 * d3), mat, true);  // finite-time QR steps and each window's SVD
  }
  const std::string method = P.get_string("bundles");
  if (method != "none") {
    const double n = method == "clv" ? std::max(1.0, L - 2.0 * burn + 1.0) : L + 1.0;
    w.add(50.0 * d3, mat).add(L * 12.0 * d3, mat);        // end Schur forms, pushes and projectors (or CLVs)
    w.add(n * 4.0 * d3, mat).add_norms(2.0 * n, d);       // diagnostics: projector and invariance norms
    const double stride = P.get_int("stride") == 0 ? std::max(1.0, std::floor(n / 100)) : static_cast<double>(P.get_int("stride"));
    w.add_pushes(std::ceil(n / stride) * n, d, true);     // the constant's growth envelope
  }
  return w.estimate(8.0 * L * d * d * (method == "none" ? 1.2 : 3.0) + 64e6,
                    "L dense d x d layer maps (and projectors): QR, bundles, and the constant's pushes with a spectral norm per layer");
}

const ExperimentRegistration reg_spectra{with_outputs(with_smoke(Experiment{
    "cocycle-spectra",
    "Coupling paper Thm 5 / (A4): Lyapunov, dichotomy (Sacker-Sell) spectra, bundles and constant C of a cocycle (.npy or G1-G5)",
    {p_string("generators", "", "float64 .npy [L, d, d] of layer maps I + A(l) (empty: use the family)").file(),
     p_string("family", "G1", "synthetic family when no file is given", {"G1", "G2", "G3", "G4", "G5"}).when("generators", {""}),
     p_int("depth", 400, "layers L of the family", 1, 100000).when("generators", {""}), p_int("d", 4, "dimension for G2 and G5", 1, 512).when("family", {"G2", "G5"}).when("generators", {""}),
     p_int("seed", 0, "random seed", 0, kMaxSeed),
     p_double_list("sigma", {0.2, 0.1, -0.3, -0.5}, "G1: eigenvalues of A (repeats allowed: multiplicities)", -1e6, 1e6).when("family", {"G1"}).when("generators", {""}),
     p_double("kappa", 10.0, "G1: condition number of the eigenbasis S", 1.0, 1e12).when("family", {"G1"}).when("generators", {""}),
     p_double("a_lo", -2.0, "G2: a_i uniform in [a_lo, a_hi], Abar = exp(-exp(a_i))", -20.0, 20.0).when("family", {"G2"}).when("generators", {""}),
     p_double("a_hi", 1.0, "G2: upper end of a_i", -20.0, 20.0).when("family", {"G2"}).when("generators", {""}),
     p_double_list("base", {1.3, 1.1, 0.8, 0.6}, "G3: diagonal base levels (repeats allowed)", -1e6, 1e6).when("family", {"G3"}).when("generators", {""}),
     p_string("mode", "switching", "G3: diagonal sequences", {"constant", "periodic", "switching"}).when("family", {"G3"}).when("generators", {""}),
     p_double("amp", 0.1, "G3: levels base (1 -+ amp) (modes periodic, switching)", 0.0, 0.999).when("family", {"G3"}).when("mode", {"periodic", "switching"}).when("generators", {""}), p_int("period", 8, "G3: period (periodic mode)", 2, 100000).when("family", {"G3"}).when("mode", {"periodic"}).when("generators", {""}),
     p_int("run0", 4, "G3: first run length (switching mode)", 1, 100000).when("family", {"G3"}).when("mode", {"switching"}).when("generators", {""}), p_double("b", 2.0, "G3: off-diagonal entries in [-b, b]", 0.0, 1e6).when("family", {"G3"}).when("generators", {""}),
     p_double_list("m", {-0.6, -0.6, -0.5, -0.5}, "G4: eigenvalues of M (repeats allowed)", -1e6, 1e6).when("family", {"G4"}).when("generators", {""}), p_double_list("v", {0.8, 0.8, 0.2, 0.2}, "G4: eigenvalues of V (repeats allowed)", -1e6, 1e6).when("family", {"G4"}).when("generators", {""}),
     p_double("lambda", 1.0, "G4: kernel eigenvalue lambda in I + M + lambda V", -1e6, 1e6).when("family", {"G4"}).when("generators", {""}),
     p_double("omega", 0.01, "G4: rotation angle per layer", -10.0, 10.0).when("family", {"G4"}).when("generators", {""}),
     p_double("scale", 0.5, "G5: A_0 = scale G / sqrt(d)", 0.0, 1e6).when("family", {"G5"}).when("generators", {""}), p_double("delta", 0.1, "G5: size of the layer variation E(l)", 0.0, 1e6).when("family", {"G5"}).when("generators", {""}),
     p_int("smooth", 0, "G5: 0 = i.i.d. E(l), else linear between i.i.d. knots every `smooth` layers", 0, 100000).when("family", {"G5"}).when("generators", {""}),
     p_int("k", 0, "QR directions (0: all d)", 0, 100000), p_int("burn_in", 40, "layers dropped from every statistic (default: 40, or L/10 when L < 400)", 0, 100000),
     p_int_list("H", {}, "Steklov windows (empty: N/8, N/4, N/2 of the window N = L - burn_in)", 1, 1000000),
     p_int("reorth_every", 1, "QR re-orthonormalisation every q steps", 1, 1000),
     p_string("bundles", "two-sided", "projectors: two-sided constant extension, CLVs or none", {"two-sided", "clv", "none"}),
     p_double("r_minus", 0.0, "r_- for C (0: just above the decaying spectrum, see slack)", 0.0, 1.0).when_not("bundles", {"none"}),
     p_double("r_plus", 0.0, "r_+ for C (0: just below the growing spectrum)", 0.0, 1e6).when_not("bundles", {"none"}),
     p_double("slack", 0.1, "automatic rates: r = (spectral edge)^(1 - slack)", 0.0, 1.0, true).when_not("bundles", {"none"}),
     p_int("stride", 0, "C: start layers sampled every `stride` layers (0: L/100)", 0, 100000).when_not("bundles", {"none"}),
     p_bool("rank", true, "rank function k(gamma) from finite-time singular values (k = d only; by default only up to d = 64: "
                          "above, the run prints its estimated cost, and an explicit rank=true computes it)")},
    run_spectra, "cocycle-spectra", spectra_estimate}, {{"depth", "40"}}), cocycle_spectra_outputs())};

OutputDecl coupling_euler_outputs() {
  OutputDecl o;
  o.tables = {
      {"euler_local.csv", "one step Delta at one layer l: the Euler step against the time-ordered exponential (Thm 4)",
       {real("delta", "step Delta (1, 1/2, ..., 2^-halvings)", "layer"), index("l", "layer l, the start of the step [l, l + Delta]", 0),
        real("deviation", "||Phi_c(l + Delta, l) - (I + Delta A(l))||_2"),
        real("bound", "Thm 4 bound omega_A(Delta) Delta + a^2 Delta^2 e^(a Delta) / 2"),
        real("omega", "modulus of continuity omega_A(Delta) = Delta max_l ||A(l+1) - A(l)||_2 (A piecewise linear)"),
        real("a", "a = max_l ||A(l)||_2")}},
      {"euler_global.csv", "one step Delta: the Euler product over the whole depth against Phi_c(L-1, 0)",
       {real("delta", "step Delta", "layer"), real("error", "||prod_j (I + Delta A(j Delta)) - Phi_c(L-1, 0)||_2"),
        integer("depth", "length L - 1 of the time interval [0, L-1] (layers)")}},
      {"euler_scale.csv", "one scale s = 2^-6 .. 2^2 of A (layers s A(l)): the Euler deviation at Delta = 1 against the size a",
       {real("a", "a = max_l ||s A(l)||_2"), real("deviation_max", "max_l ||Phi_c(l + 1, l) - (I + s A(l))||_2"),
        real("bound_max", "Thm 4 bound at Delta = 1: max jump + a^2 e^a / 2")}},
      {"nonnormal.csv", "one depth l of the alternating non-normal pair B1, B2 (each of spectral radius 0.5)",
       {index("l", "depth l: layers applied", 0), real("phi_norm", "||Phi(l, 0)||_2"), real("prod_rho", "prod_(r < l) rho(B(r)) = 0.5^l"),
        real("mu1_running", "running top QR exponent: mean of log R_11 over layers 0..l-1", "1/layer")
            .may_be_empty("l = 0: no layer applied yet")}},
      checks_table()};
  o.summaries = {{"deviation_over_bound", "Thm 4: max over Delta and l of the Euler deviation / its bound (euler_local.csv)"},
                 {"euler_order", "log2 of the ratio of the global Euler errors at the last two steps (1: first order; empty when halvings < 2)"},
                 {"rho_B1", "spectral radius of B1"},
                 {"rho_B2", "spectral radius of B2"},
                 {"rho_B2B1", "spectral radius of the period product B2 B1"},
                 {"sqrt_rho_B2B1", "sqrt(rho(B2 B1)): the growth scale of the alternating cocycle"},
                 {"gamma_1", "top QR growth scale of the alternating cocycle (burn-in: half of nn_depth)"},
                 {"gamma_2", "second QR growth scale of the alternating cocycle"}};
  o.figures = {{"coupling_euler.png", "local Euler deviation and bound against Delta, global error (slope 1), deviation at Delta = 1 "
                "against a, non-normal transient growth"}};
  return o;
}

OutputDecl coupling_looped_outputs() {
  OutputDecl o;
  o.tables = {
      {"looped.csv", "one loop t of the looped LTI recurrence h <- Abar h + e (C.1)",
       {index("t", "loop t", 0), real("dist", "||h_t - h*||, h* = (I - Abar)^-1 e"), real("bound", "rho(Abar)^t ||h_0 - h*||"),
        real("rho", "rho(Abar), the largest entry of the diagonal Abar")}},
      {"green.csv", "one spectral radius rho -> 1: the Green operator norm of the all-contracting diagonal cocycle",
       {real("rho", "spectral radius of the rescaled Abar (log Abar scaled so that its largest entry is rho)"),
        real("G_norm", "computed max_l sum_s ||G(l, s+1)|| over the window"), real("G_window", "closed form (1 - rho^L) / (1 - rho) on the window"),
        real("G_infinite", "1 / (1 - rho): the norm on the infinite window"), integer("window", "window length L (layers): green_window")}},
      checks_table()};
  o.summaries = {{"rho", "rho(Abar): the contraction rate the bound uses"},
                 {"measured_rate", "(||h_T - h*|| / ||h_0 - h*||)^(1/T) over the T = loops loops"},
                 {"worst_dist_over_bound", "max over t of ||h_t - h*|| / (rho^t ||h_0 - h*||) (<= 1: C = 1)"},
                 {"green_rel_error", "max over rho of |G_norm - G_window| / G_window"}};
  o.figures = {{"coupling_looped.png", "distance to h* against loops with the bound rho^t; the Green norm against rho"}};
  return o;
}

const ExperimentRegistration reg_euler{with_outputs(with_smoke(Experiment{
    "coupling-euler",
    "Coupling paper Thm 4 (Euler step vs time-ordered exponential, bound and slope 1) and §2.4 non-normal transient growth (R8, R9)",
    {p_int("d", 3, "dimension", 1, 64), p_int("depth", 9, "layer matrices A(0..L-1) (family G5)", 2, 200),
     p_int("seed", 0, "random seed", 0, kMaxSeed), p_double("scale", 0.3, "A_0 = scale G / sqrt(d)", 0.0, 100.0),
     p_double("delta", 0.2, "layer variation", 0.0, 100.0), p_int("smooth", 2, "knot spacing of E(l) (0: i.i.d.)", 0, 1000),
     p_int("halvings", 6, "Delta = 1, 1/2, ..., 2^-halvings", 1, 10), p_int("nn_depth", 60, "layers of the non-normal pair", 2, 100000)},
    run_euler, "coupling-euler",
    [](const Params& P) {
      // Time-ordered exponentials per layer for every step Delta, the exact product and 9 scales of A:
      // RK4 doubled to its tolerance, about 160 steps of 4 d x d products (measured at d = 16-64 with
      // scale + delta = 0.5; the steps grow with the size of A); the non-normal pair's 2 x 2 products.
      const double d = static_cast<double>(P.get_int("d")), L = static_cast<double>(P.get_int("depth"));
      const double calls = (static_cast<double>(P.get_int("halvings")) + 11.0) * (L - 1.0);
      const double steps = 160.0 * std::max(1.0, (P.get_double("scale") + P.get_double("delta")) / 0.5);
      const double nn = static_cast<double>(P.get_int("nn_depth"));
      cost::Work w;
      w.add(calls * steps * 8.0 * d * d * d, cost::small_matrix_rate(d)).add_timed(nn * 50.0, nn * 4e-6);
      return w.estimate(8.0 * 4.0 * L * d * d + 64e6, "time-ordered exponentials of every layer by RK4 (d x d products)");
    }}, {{"depth", "3"}, {"halvings", "2"}, {"nn_depth", "10"}}), coupling_euler_outputs())};

const ExperimentRegistration reg_looped{with_outputs(with_smoke(Experiment{
    "coupling-looped",
    "Coupling paper §2.4 / C.1: looped LTI Abar = diag(exp(-exp(a))): ||h_t - h*|| <= rho^t ||h_0 - h*||, ||G|| = 1/(1 - rho) (R25)",
    {p_int("d", 6, "state dimension", 1, 256), p_int("loops", 200, "loop count t", 1, 1000000),
     p_int("seed", 0, "random seed", 0, kMaxSeed), p_double("a_lo", -3.0, "a_i uniform in [a_lo, a_hi]", -20.0, 20.0),
     p_double("a_hi", 1.0, "upper end of a_i", -20.0, 20.0),
     p_int("green_window", 400, "window length L for ||G||", 2, 5000)},
    run_looped, "coupling-looped",
    [](const Params& P) {
      const double d = static_cast<double>(P.get_int("d")), L = static_cast<double>(P.get_int("green_window"));
      // 10 radii, each max_l sum_s ||G(l, s+1)||: L^2 / 2 products and 2-norms of d x d matrices.
      return ResourceEstimate{8.0 * L * d * d * 3 + 64e6, 10.0 * L * L * 20.0 * d * d * d, "10 Green-norm sums over L^2 / 2 layer pairs"};
    }}, {{"d", "2"}, {"loops", "20"}, {"green_window", "20"}}), coupling_looped_outputs())};

}  // namespace
}  // namespace tokdyn
