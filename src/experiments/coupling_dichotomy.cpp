// Preset coupling-dichotomy: the dichotomy spectrum of the coupling paper (Thm 5, checks R10 (a)-(e))
// and the (A4)/(A5) diagnostics on random Transformer stacks against depth (R11, flag F17).
//   (a) weight-tied family G1: QR growth scales -> |1 + sigma_i|, point intervals, C against the
//       spectral projector norms and kappa(S);
//   (b) the Transformer's tangent cocycle: at most d intervals, inside (0, 1 + a];
//   (c) a scalar switching sequence: Steklov/Bohl estimates approach [lo, hi] once runs exceed H;
//   (d) hyperbolicity: 1 outside the estimated spectrum iff the Green operator of gamma^-1 B stays
//       bounded as the window grows (a sweep of gamma through the G1 spectrum);
//   (e) LayerNorm stacks: (I + A(l)) 1_d = 1_d, so growth scale 1 is always in the spectrum (F19);
//   R6 along depth: the full Td cocycle's spectrum is the union of its T sector cocycles' spectra;
//   R11: per depth window r_-, r_+^min, r_+^max (F11), C, m_-, m_+, r_f, C_f, theta, the transient
//       depth, with |x*(l)| and |A(l)| per layer (F17: |A| ~ 1/|x*| under Pre-LN).
// Every check is a row of checks.csv (check, statement, quantity, value, expected, pass, reference_kind, reference).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/analysis/frozen_kernel.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/generators_file.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/runtime/inputs.hpp"
#include "tokdyn/models/transformer/setup.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/core/norms.hpp"

namespace tokdyn {
namespace {

using cocycle::Cocycle;
using cocycle::Interval;
using cocycle::Matrix;

using tokdyn::kNaN;


/// Spectral edges around 1 from the Bohl intervals of the QR columns (flag F11: r_+ is a lower
/// bound of the growth along V_par (r_plus_min, for m_+) and an upper bound of all growth
/// (r_plus_max, for (A5) and Remark 6)). Columns whose interval contains 1 are neutral: with any
/// of them the window has no dichotomy at 1.
struct Edges {
  double r_minus = kNaN, r_plus_min = kNaN, r_plus_max = kNaN;
  long k_plus = 0, k_neutral = 0;  ///< QR columns above 1, and straddling 1
};
Edges edges(const std::vector<Interval>& columns) {
  Edges e;
  for (const Interval& iv : columns) {
    if (iv.upper < 1.0) e.r_minus = std::isnan(e.r_minus) ? iv.upper : std::max(e.r_minus, iv.upper);
    else if (iv.lower > 1.0) {
      e.r_plus_min = std::isnan(e.r_plus_min) ? iv.lower : std::min(e.r_plus_min, iv.lower);
      ++e.k_plus;
    } else {
      ++e.k_neutral;
    }
    e.r_plus_max = std::isnan(e.r_plus_max) ? iv.upper : std::max(e.r_plus_max, iv.upper);
  }
  return e;
}

Cocycle window_of(const std::vector<Matrix>& B, long first, long last) {
  return Cocycle::from_matrices(std::vector<Matrix>(B.begin() + first, B.begin() + last));
}

std::vector<Matrix> to_matrices(const std::vector<Mat>& M) {
  std::vector<Matrix> out;
  out.reserve(M.size());
  for (const Mat& m : M) out.emplace_back(m);
  return out;
}

/// Upper growth scale and constant of one sector cocycle on a window: r = the upper end of the
/// Bohl interval of the top QR exponent (Steklov window H), C = max_{s,n} |Phi(s+n, s)| / r^n over
/// starts s every `stride` layers.
std::pair<double, double> sector_rate(const std::vector<Matrix>& S, long H, long stride) {
  const Cocycle c = Cocycle::from_matrices(S);
  cocycle::QrOptions o;
  o.k = 1;
  const auto qr = cocycle::qr_iterate(c, o);
  const double r = cocycle::bohl_intervals(qr.log_diag, H).at(0).upper;
  double C = 1.0;
  const long L = static_cast<long>(S.size());
  for (long s = 0; s < L; s += stride) {
    Matrix P = Matrix::Identity(S[0].rows(), S[0].cols());
    for (long n = 1; s + n <= L; ++n) {
      P = S[static_cast<std::size_t>(s + n - 1)] * P;
      C = std::max(C, spectral_norm(P) / std::pow(r, static_cast<double>(n)));
    }
  }
  return {r, C};
}

void run_dichotomy(const Params& p, RunContext& ctx) {
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const long window = p.get_int("R11_window"), L = p.get_int("depth");
  const std::vector<long>& Hs = p.get_int_list("H");
  const tf::Form form = p.get_string("form") == "paper" ? tf::Form::Paper : tf::Form::Exact;
  for (long H : Hs)
    if (H > window)
      throw InputError(fmt::format("parameter 'H': Steklov window {} is longer than the depth window R11_window = {}", H, window));
  if (window > L) throw InputError(fmt::format("parameter 'R11_window' = {}: longer than the depth (depth = {})", window, L));
  const std::vector<double> sigma = number_list_param(p, "sigma");
  for (double v : sigma)
    if (std::abs(std::abs(1.0 + v) - 1.0) < 1e-9)
      throw InputError(fmt::format("parameter 'sigma': entry {} gives the growth scale |1 + sigma| = 1 (not hyperbolic); expected sigma not 0 or -2", v));
  if (!(p.get_double("switch_lo") < p.get_double("switch_hi")))
    throw InputError(fmt::format("parameters 'switch_lo' = {} and 'switch_hi' = {}: expected lo < hi", p.get_double("switch_lo"),
                                 p.get_double("switch_hi")));
  const long H_min = *std::min_element(Hs.begin(), Hs.end());
  const long H_win = *std::max_element(Hs.begin(), Hs.end());  // R11's windows: the longest Steklov window
  CheckTable checks(ctx.dir / "checks.csv");
  CsvWriter ivs = ctx.table("intervals.csv");
  auto write_intervals = [&](const std::string& part, long H, const std::vector<Interval>& iv) {
    for (std::size_t i = 0; i < iv.size(); ++i) {
      ivs.cell(part).cell(H).cell(static_cast<long>(i)).cell(iv[i].lower).cell(iv[i].upper);
      ivs.end_row();
    }
  };

  // ---- (a) weight-tied G1 -------------------------------------------------------------------------
  {
    auto timer = ctx.phase("G1");
    const double kappa = p.get_double("kappa");
    const long Lg = p.get_int("g1_L"), burn = Lg / 2;
    const auto B = cocycle::family_g1(Lg, sigma, kappa, seed);
    write_input_stack(ctx, "g1_generators.npy", B, "the weight-tied G1 generators of check (a) ([L, d, d])");
    const Cocycle c = Cocycle::from_matrices(B);
    const auto qr = cocycle::qr_iterate(c);
    const auto ly = cocycle::lyapunov_spectrum(qr.log_diag, burn);
    std::vector<double> want, got(ly.gamma.data(), ly.gamma.data() + ly.gamma.size());
    for (double s : sigma) want.push_back(std::abs(1.0 + s));
    std::sort(want.rbegin(), want.rend());
    std::sort(got.rbegin(), got.rend());
    double err = 0.0;
    for (std::size_t i = 0; i < want.size(); ++i) err = std::max(err, std::abs(got[i] - want[i]) / want[i]);
    checks.add("R10a", "Thm 5 weight-tied: QR growth scales are |1 + sigma_i|", "max relative error", err, "<= 1e-6",
               err <= 1e-6, closed_form("|1 + sigma_i|, sigma_i the eigenvalues of the tied generator"));
    double width = 0.0;
    for (long H : Hs) {
      if (H > Lg - burn) continue;
      const auto iv = cocycle::bohl_intervals(qr.log_diag, H, burn);
      for (const auto& i : iv) width = std::max(width, (i.upper - i.lower) / i.upper);
      write_intervals("G1", H, cocycle::merge_intervals(iv));
    }
    checks.add("R10a", "Thm 5 weight-tied: the Sacker-Sell intervals are points", "max relative width", width, "<= 1e-6",
               width <= 1e-6, closed_form("width 0: a constant cocycle's spectrum is the points |1 + sigma_i|"));
    // C against the spectral projectors of S diag(sigma) S^-1 (Thm 5 step (6): C is at most kappa(S)).
    const Matrix S = cocycle::family_g1_basis(static_cast<long>(sigma.size()), kappa, seed);
    const Matrix Sinv = S.inverse();
    Eigen::VectorXd up(sigma.size());
    for (std::size_t i = 0; i < sigma.size(); ++i) up(static_cast<Eigen::Index>(i)) = std::abs(1.0 + sigma[i]) > 1.0 ? 1.0 : 0.0;
    const Matrix Pp = S * up.asDiagonal() * Sinv, Pm = Matrix::Identity(S.rows(), S.cols()) - Pp;
    const auto bundles = cocycle::two_sided_bundles(c);
    const auto env = cocycle::growth_envelope(c, bundles, std::max<long>(1, Lg / 50));
    double C = 1.0;
    for (double w : want) {
      const bool edge_minus = w < 1.0 && w == *std::find_if(want.begin(), want.end(), [](double v) { return v < 1.0; });
      const bool edge_plus = w > 1.0 && w == *std::find_if(want.rbegin(), want.rend(), [](double v) { return v > 1.0; });
      if (edge_minus) C = std::max(C, cocycle::constant_minus(env, w));  // r_- = the largest decaying scale
      if (edge_plus) C = std::max(C, cocycle::constant_plus(env, w));    // r_+ = the smallest growing scale
    }
    const double proj = std::max(spectral_norm(Pp), spectral_norm(Pm)), kS = spectral_norm(S) * spectral_norm(Sinv);
    checks.add("R10a", "Thm 5 weight-tied: dichotomy constant between the projector norms and kappa(S)", "C", C,
               fmt::format("in [{:.6g}, {:.6g}]", proj, kS), C >= proj * (1 - 1e-9) && C <= kS * (1 + 1e-9),
               bound("Thm 5 step (6): max |P_±| <= C <= kappa(S)"));
    ctx.notes["G1"] = {{"sigma", sigma}, {"kappa_S", kS}, {"projector_norm", proj}, {"C", C}};

    // (d) hyperbolicity: the Green operator of gamma^-1 B on windows L and 2L.
    CsvWriter green = ctx.table("green.csv");
    green.blank_nonfinite({"green_norm"});  // empty: gamma on the spectrum (hyperbolic = false), no Green operator
    const long Lw = std::max<long>(8, p.get_int("green_L"));
    std::vector<double> gammas;
    const double lo = want.back() * 0.8, hi = want.front() * 1.2;
    for (int i = 0; i <= 24; ++i) gammas.push_back(lo * std::pow(hi / lo, i / 24.0));
    for (double w : want) gammas.push_back(w);
    std::sort(gammas.begin(), gammas.end());
    for (double g : gammas) {
      double norms[2] = {kNaN, kNaN};
      for (int j = 0; j < 2; ++j) {
        const long n = Lw << j;
        std::vector<Matrix> Bg(static_cast<std::size_t>(n), B[0] / g);
        const Cocycle cg = Cocycle::from_matrices(Bg);
        // gamma on the spectrum: no dichotomy, the Green operator does not exist.
        const cocycle::BundlesOutcome found = cocycle::find_two_sided_bundles(cg);
        const bool ok = static_cast<bool>(found);
        if (ok) norms[j] = cocycle::green_norm(cg, *found.bundles);
        green.cell(g).cell(n).cell(ok ? norms[j] : kNaN).cell(std::string(ok ? "true" : "false"));
        green.end_row();
      }
    }
    // The Green operator of the constant cocycle on all of Z: sum_k |B^k P_-| + sum_{k>=1} |B^-k P_+|
    // (Lemma 17). A window's norm is a partial sum of it (two-sided extension), so hyperbolicity
    // shows as |G|(L) <= |G|(2L) <= |G|_inf < infinity.
    double g_inf = 0.0;
    {
      Matrix Pk = Pm;
      for (int k = 0; k < 100000; ++k) {
        const double t = spectral_norm(Pk);
        g_inf += t;
        if (t < 1e-17 * g_inf) break;
        Pk = Pm * (B[0] * Pk);  // re-projected: round-off along V_par would grow
      }
      const Matrix Binv = B[0].inverse();
      Pk = Binv * Pp;
      for (int k = 1; k < 100000; ++k) {
        const double t = spectral_norm(Pk);
        g_inf += t;
        if (t < 1e-17 * g_inf) break;
        Pk = Pp * (Binv * Pk);
      }
    }
    const Cocycle c1 = Cocycle::from_matrices(std::vector<Matrix>(static_cast<std::size_t>(Lw), B[0]));
    const Cocycle c2 = Cocycle::from_matrices(std::vector<Matrix>(static_cast<std::size_t>(2 * Lw), B[0]));
    const double g1 = cocycle::green_norm(c1, cocycle::two_sided_bundles(c1));
    const double g2 = cocycle::green_norm(c2, cocycle::two_sided_bundles(c2));
    const bool one_hyperbolic =
        cocycle::hyperbolic(cocycle::merge_intervals(cocycle::bohl_intervals(qr.log_diag, H_min, burn)));
    checks.add("R10d", "Thm 5 / Lemma 17: 1 outside the estimated spectrum and the Green operator bounded as the window doubles",
               "|G|(2L) / |G|_inf", g2 / g_inf,
               fmt::format("hyperbolic, |G|(L) / |G|_inf = {:.12g} <= value <= 1", g1 / g_inf),
               one_hyperbolic && std::isfinite(g_inf) && g1 <= g2 * (1 + 1e-12) && g2 <= g_inf * (1 + 1e-9),
               closed_form("|G|_inf = sum_k |B^k P_-| + sum_k |B^-k P_+|, P_± from S (Lemma 17)"));
    ctx.notes["G1"]["green_inf"] = g_inf;
  }

  // ---- (c) scalar switching -----------------------------------------------------------------------
  {
    auto timer = ctx.phase("switching");
    const double lo = p.get_double("switch_lo"), hi = p.get_double("switch_hi");
    const long Ls = p.get_int("switch_L"), run0 = p.get_int("switch_run0");
    const auto B = cocycle::switching_scalar(Ls, lo, hi, run0);
    const auto qr = cocycle::qr_iterate(Cocycle::from_matrices(B));
    // The longest complete run of each level inside the window.
    long longest[2] = {0, 0}, len = run0;
    for (long at = 0, lvl = 1; at < Ls; at += len, len *= 2, lvl ^= 1)
      if (at + len <= Ls) longest[lvl] = std::max(longest[lvl], len);
    const long both = std::min(longest[0], longest[1]);
    double worst_inside = 0.0;
    bool hyper = false;
    // The H of the preset and a doubling grid up to the whole sequence: the estimate is [lo, hi] while
    // some run of each level is at least H long, and shrinks inside it beyond.
    std::vector<long> grid(Hs.begin(), Hs.end());
    for (long H = 2; H <= Ls; H *= 2) grid.push_back(H);
    std::sort(grid.begin(), grid.end());
    grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
    for (long H : grid) {
      if (H > Ls) continue;
      const auto iv = cocycle::bohl_intervals(qr.log_diag, H);
      write_intervals("switching", H, iv);
      hyper = hyper || cocycle::hyperbolic(iv);
      if (H <= both) worst_inside = std::max({worst_inside, std::abs(iv[0].lower - lo), std::abs(iv[0].upper - hi)});
    }
    checks.add("R10c", "Thm 5: switching a(l) in {lo, hi}: the Steklov estimate is [lo, hi] once runs exceed H",
               "max |edge - [lo, hi]| over H <= longest run", worst_inside, "<= 1e-12", worst_inside <= 1e-12,
               closed_form("[lo, hi]: the two levels of the switching sequence"));
    checks.add("R10c", "Thm 5: 1 in [lo, hi]: not hyperbolic although window averages sit on either side",
               "hyperbolic at some H", hyper ? 1.0 : 0.0, "0", !hyper,
               closed_form("Sigma = [lo, hi] contains 1: not hyperbolic"));
    ctx.notes["switching"] = {{"lo", lo}, {"hi", hi}, {"run0", run0}, {"L", Ls}, {"longest_run_of_both_levels", both}};
  }

  // ---- (b), R11, F17: the Transformer's tangent cocycle -----------------------------------------------
  auto reference_timer = ctx.phase("reference");
  tf::Transformer model = tf::transformer_from(p, ctx);
  const tf::Config& cfg = model.config();
  if (cfg.placement != tf::Placement::PreLN)
    throw InputError("parameter 'placement' = post: the generators (7) and the cocycle (9) are Pre-LN; use pre");
  const long d = cfg.d, P = p.get_int("sectors");
  const tf::Reference ref = tf::reference_trajectory(model, tf::reference_start(cfg, seed), static_cast<int>(L));
  const std::vector<Matrix> B = to_matrices(tf::tangent_sequence(ref, form));
  {
    CsvWriter csv = ctx.table("reference.csv");
    for (long l = 0; l < L; ++l) {
      const Matrix A = B[static_cast<std::size_t>(l)] - Matrix::Identity(d, d);
      const double nx = ref.x[static_cast<std::size_t>(l)].norm();
      csv.cell(l).cell(nx).cell(spectral_norm(A)).cell(A.norm()).cell(A.norm() * nx);
      csv.end_row();
    }
  }
  reference_timer.stop();
  auto spectrum_timer = ctx.phase("spectrum");
  const Cocycle whole = Cocycle::from_matrices(B);
  const double a = whole.sup_norm_A();
  const auto qr = cocycle::qr_iterate(whole);
  const auto spec = cocycle::lyapunov_spectrum(qr.log_diag);
  {
    CsvWriter ly = ctx.table("lyapunov.csv");
    for (Eigen::Index i = 0; i < spec.mu.size(); ++i) {
      ly.cell(static_cast<long>(i)).cell(spec.mu(i)).cell(spec.gamma(i));
      ly.end_row();
    }
  }
  std::size_t most = 0;
  double outside = 0.0;
  for (long H : Hs) {
    const auto merged = cocycle::merge_intervals(cocycle::bohl_intervals(qr.log_diag, H));
    write_intervals("transformer", H, merged);
    most = std::max(most, merged.size());
    for (const auto& iv : merged) outside = std::max({outside, iv.upper - (1.0 + a), iv.lower <= 0.0 ? 1.0 : 0.0});
  }
  checks.add("R10b", "Thm 5: at most d spectral intervals", "intervals (most over H)", static_cast<double>(most),
             fmt::format("<= {}", d), static_cast<long>(most) <= d, bound("Thm 5: at most d spectral intervals"));
  checks.add("R10b", "Thm 5: Sigma inside (0, 1 + a], a = sup |A(l)|", "largest excess over 1 + a", outside, "<= 1e-12",
             outside <= 1e-12, bound("Thm 5: Sigma in (0, 1 + a], a = sup_l |A(l)|"));

  // R6 along depth: the Lyapunov spectrum of the full Td cocycle (the Jacobians (8) exact,
  // I (x) (I + M~) + alpha* (x) (I + M~) V, along the reference) is the union of the T sector
  // cocycles' spectra (I + M~)(I + V/j), j = 1..T (Thm 3: the full flow is block diagonal in the
  // Pascal eigenbasis W (x) I). The sectors are what tokdyn computes; the dense Td product is the
  // cross-check. Finite-window exponents of conjugate cocycles differ by at most 2 log kappa(W)/N.
  spectrum_timer.stop();
  if (cfg.mask == tf::Mask::Causal && cfg.pos == tf::Positional::None && p.get_int("tokens") * d <= 256) {
    auto timer = ctx.phase("R6");
    const int T = static_cast<int>(p.get_int("tokens"));
    const long burn = L / 4, N = L - burn;
    const Mat astar = fk::alpha_star(T);
    std::vector<double> sectors, full;
    for (int j = 1; j <= T; ++j) {
      std::vector<Matrix> S;
      for (long l = 0; l < L; ++l)
        S.emplace_back(tf::sector_map(ref.layers[static_cast<std::size_t>(l)], 1.0 / j, form));
      const auto s = cocycle::lyapunov_spectrum(cocycle::qr_iterate(Cocycle::from_matrices(S)).log_diag, burn);
      sectors.insert(sectors.end(), s.mu.data(), s.mu.data() + s.mu.size());
    }
    std::vector<Matrix> J;
    for (long l = 0; l < L; ++l) J.emplace_back(tf::jacobian_from_generators(ref.layers[static_cast<std::size_t>(l)], astar, form));
    const auto fs = cocycle::lyapunov_spectrum(cocycle::qr_iterate(Cocycle::from_matrices(J)).log_diag, burn);
    full.assign(fs.mu.data(), fs.mu.data() + fs.mu.size());
    std::sort(sectors.begin(), sectors.end());
    std::sort(full.begin(), full.end());
    double diff = 0.0;
    for (std::size_t i = 0; i < full.size(); ++i) diff = std::max(diff, std::abs(full[i] - sectors[i]));
    const double bound = 2.0 * std::log(fk::kappa_alpha(T)) / static_cast<double>(N);
    CsvWriter sc = ctx.table("sector_spectra.csv");
    for (std::size_t i = 0; i < full.size(); ++i) {
      sc.cell(static_cast<long>(i)).cell(full[i]).cell(sectors[i]);
      sc.end_row();
    }
    checks.add("R6", "Thm 3: the full Td cocycle's Lyapunov spectrum is the union of the T sector cocycles' spectra",
               "max |mu_full - mu_sectors| (sorted)", diff, fmt::format("<= 2 log kappa_alpha / N = {:.4g}", bound), diff <= bound,
               consistency("dense Td Jacobians (8) (kron_sum) vs T sector_map cocycles, both by qr_iterate"));
  }

  // R11 per window.
  auto windows_timer = ctx.phase("windows");
  CsvWriter win = ctx.table("windows.csv");
  // empty: not defined for this window (no dichotomy, or no growing / decaying part)
  win.blank_nonfinite({"r_minus", "r_plus_min", "r_plus_max", "C", "m_minus", "m_plus", "transient_depth", "r_f", "C_f", "theta"});
  std::vector<double> m_first, m_last;
  for (long first = 0; first + window <= L; first += window) {
    const long last = first + window;
    const Cocycle c = window_of(B, first, last);
    const auto q = cocycle::qr_iterate(c);
    const auto cols = cocycle::bohl_intervals(q.log_diag, H_win);
    const Edges e = edges(cols);
    // yes / no / undecided: the margin of 1 from the spectrum against the estimate's own error
    const cocycle::HyperbolicDecision dec =
        cocycle::decide_hyperbolic(cocycle::merge_intervals(cols), cocycle::spectrum_error(q.log_diag).tolerance());
    const bool hyp = dec.verdict == cocycle::Verdict::Yes;
    double C = kNaN;
    if (hyp && !std::isnan(e.r_minus)) {
      // No bundles (the window's end maps are not hyperbolic with equal unstable dimensions): no constant.
      if (const cocycle::BundlesOutcome found = cocycle::find_two_sided_bundles(c)) {
        const cocycle::Bundles& b = *found.bundles;
        const auto env = cocycle::growth_envelope(c, b, std::max<long>(1, window / 20));
        C = cocycle::constant_minus(env, e.r_minus);
        if (b.k > 0 && !std::isnan(e.r_plus_min)) C = std::max(C, cocycle::constant_plus(env, e.r_plus_min));
      }
    }
    // (A5): the fluctuation sectors lambda_j = 1/j, j = 2..P.
    double r_f = 0.0, C_f = 1.0;
    for (long j = 2; j <= P; ++j) {
      std::vector<Matrix> S;
      for (long l = first; l < last; ++l)
        S.emplace_back(tf::sector_map(ref.layers[static_cast<std::size_t>(l)], 1.0 / static_cast<double>(j), form));
      const auto [r, Cj] = sector_rate(S, H_win, std::max<long>(1, window / 10));
      r_f = std::max(r_f, r);
      C_f = std::max(C_f, Cj);
    }
    const double m_minus = 1.0 - e.r_minus, m_plus = e.r_plus_min - 1.0;
    const double theta = r_f * (std::isnan(e.r_plus_max) ? 1.0 : std::max(1.0, e.r_plus_max));
    win.cell(first).cell(last).cell(H_win).cell(e.r_minus).cell(e.r_plus_min).cell(e.r_plus_max).cell(e.k_plus).cell(e.k_neutral)
        .cell(std::string(cocycle::verdict_name(dec.verdict))).cell(dec.margin).cell(dec.tolerance).cell(C).cell(m_minus).cell(m_plus)
        .cell(std::log(C) / std::log(1.0 / e.r_minus)).cell(r_f).cell(C_f).cell(theta);
    win.end_row();
    const double margin = std::max(std::isnan(m_minus) ? 0.0 : m_minus, std::isnan(m_plus) ? 0.0 : m_plus);
    if (first == 0) m_first = {m_minus, m_plus, margin};
    m_last = {m_minus, m_plus, margin};
  }
  windows_timer.stop();
  // F17: |x*| grows linearly (Prop 1) and |A| ~ 1/|x*|.
  {
    const double growth = ref.x.back().norm() / ref.x.front().norm();
    double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
    for (long l = L / 4; l < L; ++l) {
      const double v = (B[static_cast<std::size_t>(l)] - Matrix::Identity(d, d)).norm() * ref.x[static_cast<std::size_t>(l)].norm();
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const double A0 = (B.front() - Matrix::Identity(d, d)).norm(), AL = (B.back() - Matrix::Identity(d, d)).norm();
    checks.add("F17", "Pre-LN: the reference stream grows (Prop 1)", "|x*(L)| / |x*(0)|", growth, "> 2", growth > 2.0,
               qualitative("Prop 1: |x*(l)| grows (linearly) with depth"));
    checks.add("F17", "Pre-LN: |A(l)| decays along depth", "|A(L-1)|_F / |A(0)|_F", AL / A0, "< 0.5", AL / A0 < 0.5,
               qualitative("F17: |A(l)| decays with depth under Pre-LN"));
    checks.add("F17", "Pre-LN: |A(l)|_F |x*(l)| stays of one size (|A| ~ 1/|x*|)", "max / min over l >= L/4", hi / lo, "<= 2",
               hi / lo <= 2.0, qualitative("F17: |A(l)| ~ 1/|x*(l)| under Pre-LN"));
  }
  ctx.notes["R11"] = {{"margins_first_window", m_first}, {"margins_last_window", m_last}, {"a", a}};
  ctx.summary("mu_max", spec.mu.maxCoeff());
  ctx.summary("sup_norm_A", a);
  ctx.summary("spectral_intervals", most);
  ctx.summary("margin_first_window", m_first[2]);
  ctx.summary("margin_last_window", m_last[2]);
  if (L >= 2 * window)
    checks.add("R11", "F17: the margins m_-, m_+ of random Pre-LN stacks shrink with depth", "largest margin, last / first window",
               m_last[2] / m_first[2], "< 1", m_last[2] < m_first[2], qualitative("F17: the margins m_-, m_+ shrink with depth"));

  // ---- (e) LayerNorm: the neutral direction 1_d (F19) -----------------------------------------------
  {
    auto timer = ctx.phase("layernorm");
    tf::Config lc = cfg;
    lc.norm = tf::Norm::Layer;
    const tf::Transformer ln(lc, tf::weights_from(p, lc), tf::parse_tying(p.get_string("tying")));
    const tf::Reference lref = tf::reference_trajectory(ln, tf::reference_start(lc, seed), static_cast<int>(L));
    const std::vector<Matrix> LB = to_matrices(tf::tangent_sequence(lref, form));
    const Eigen::VectorXd one = Eigen::VectorXd::Ones(d);
    double fixed = 0.0;
    for (const Matrix& M : LB) fixed = std::max(fixed, (M * one - one).cwiseAbs().maxCoeff());
    cocycle::QrOptions o;
    o.Q0 = Matrix::Identity(d, d);
    o.Q0.col(0) = one / std::sqrt(static_cast<double>(d));
    o.Q0 = Eigen::HouseholderQR<Matrix>(o.Q0).householderQ();
    if (o.Q0.col(0).dot(one) < 0) o.Q0 = -o.Q0;
    const auto lq = cocycle::qr_iterate(Cocycle::from_matrices(LB), o);
    const double neutral = lq.log_diag.col(0).cwiseAbs().maxCoeff();
    checks.add("R10e", "F19: LayerNorm: (I + A(l)) 1_d = 1_d at every layer", "max |(I + A) 1 - 1|", fixed, "<= 1e-12",
               fixed <= 1e-12, closed_form("(I + A(l)) 1_d = 1_d: LayerNorm's centring (F19)"));
    checks.add("R10e", "F19: LayerNorm: growth scale 1 along 1_d (in every window's spectrum)", "max_l |log R_11(l)|", neutral,
               "<= 1e-12", neutral <= 1e-12, closed_form("log R_11 = 0 along 1_d, from (I + A(l)) 1_d = 1_d (F19)"));
  }
  checks.report(ctx, "coupling-dichotomy");
}

std::vector<ParamSpec> dichotomy_params() {
  auto ps = tf::transformer_params(8, 32, 8, 400, 0.0);
  ps.push_back(p_int_list("H", {10, 25, 50}, "Steklov windows H of the Bohl intervals (each <= R11_window)", 1, 100000));
  ps.push_back(p_int("R11_window", 100, "depth window of the (A4)/(A5) diagnostics", 2, 5000));
  ps.push_back(p_int("sectors", 4, "fluctuation sectors lambda_j = 1/j, j = 2..sectors, for r_f (A5)", 2, 64));
  ps.push_back(p_string("form", "exact", "generator convention: exact (I+M~)(I+V) or paper I+M+V (F1)", {"exact", "paper"}));
  ps.push_back(p_double_list("sigma", {0.2, 0.1, -0.3, -0.5}, "G1 (R10a): eigenvalues sigma_i of the tied generator A (repeats allowed)", -1e6, 1e6));
  ps.push_back(p_double("kappa", 10.0, "G1: condition number of the eigenbasis S", 1.0, 1e8));
  ps.push_back(p_int("g1_L", 400, "G1: depth (the second half is the measuring window)", 4, 100000));
  ps.push_back(p_int("green_L", 200, "R10d: window of the Green operator (and twice it)", 8, 2000));
  ps.push_back(p_double("switch_lo", 0.9, "R10c: low level of the switching sequence", 0.0, 1e6, true));
  ps.push_back(p_double("switch_hi", 1.2, "R10c: high level", 0.0, 1e6, true));
  ps.push_back(p_int("switch_run0", 4, "R10c: first run length (runs double)", 1, 100000));
  ps.push_back(p_int("switch_L", 2000, "R10c: length of the switching sequence", 2, 1000000));
  return ps;
}

OutputDecl coupling_dichotomy_outputs() {
  OutputDecl o;
  o.tables = {
      checks_table(),
      {"intervals.csv", "one spectral interval (growth scales) of one cocycle part for one Steklov window H",
       {category("part", "which cocycle",
                 {{"G1", "(a) the weight-tied family G1: merged Bohl intervals over its second half (each H not longer than that half)"},
                  {"switching", "(c) the scalar switching sequence: its Bohl interval, for the H given and H = 2, 4, 8, ... <= switch_L"},
                  {"transformer", "(b) the random Pre-LN Transformer's tangent cocycle: merged Bohl intervals over the whole depth"}}),
        integer("H", "Steklov window (layers)"), index("interval", "interval index within (part, H) (0: the lowest)", 0),
        real("lower", "lower end (growth scale)"), real("upper", "upper end (growth scale)")}},
      {"green.csv", "(d) one growth scale gamma and one window: the Green operator of the constant cocycle gamma^-1 B (family G1)",
       {real("gamma", "growth scale gamma (a sweep through the G1 spectrum, and each |1 + sigma_i|)"),
        integer("window", "window length (layers): max(8, green_L) or twice it"),
        real("green_norm", "max_l sum_s ||G(l, s+1)|| of gamma^-1 B on the window")
            .may_be_empty("gamma is on the spectrum: no dichotomy, no Green operator (hyperbolic = false)"),
        flag("hyperbolic", "gamma^-1 B has two-sided bundles (gamma outside the spectrum)")}},
      {"reference.csv", "one layer of the random Pre-LN Transformer along its reference trajectory x*",
       {index("l", "layer l (the map from depth l to l+1)", 0), real("norm_x", "|x*(l)|: the reference state entering layer l"),
        real("norm_A", "||A(l)||_2 of the tangent map B(l) = I + A(l)"), real("norm_A_F", "||A(l)||_F"),
        real("norm_A_F_times_norm_x", "||A(l)||_F |x*(l)| (F17: of one size under Pre-LN)")}},
      {"lyapunov.csv", "one Lyapunov exponent of the Transformer's tangent cocycle (d of them, in QR order, over the whole depth)",
       {index("i", "exponent index, in QR order (0: the first column, usually the largest)", 0),
        real("mu", "Lyapunov exponent: mean of log R_ii over layers 0..L-1", "1/layer"), real("gamma", "growth scale exp(mu) per layer")}},
      {"sector_spectra.csv", "R6: one exponent of the full T d cocycle and of the union of the T sector cocycles, both sorted ascending",
       {index("i", "rank in ascending order (0: the smallest)", 0),
        real("mu_full", "exponent of the dense T d Jacobian cocycle (layers L/4..L-1)", "1/layer"),
        real("mu_sectors", "exponent of the union of the T sector cocycles (I + M~)(I + V/j), j = 1..T (same layers)", "1/layer")},
       "mask = causal, positional = none and tokens x d <= 256"},
      {"windows.csv", "R11: one depth window [first, last) of the Transformer's tangent cocycle: (A4)/(A5) diagnostics",
       {index("first", "first layer of the window", 0), integer("last", "one past the window's last layer"),
        integer("H", "Steklov window of the Bohl intervals (the largest H)"),
        real("r_minus", "r_-: top of the decaying QR columns' Bohl intervals (growth scale)").may_be_empty("no column below 1"),
        real("r_plus_min", "r_+^min: bottom of the growing columns' Bohl intervals (F11: lower growth bound)").may_be_empty("no column above 1"),
        real("r_plus_max", "r_+^max: top of every column's Bohl interval (F11: upper growth bound)"),
        integer("k_plus", "QR columns whose Bohl interval lies above 1"), integer("k_neutral", "QR columns whose Bohl interval contains 1"),
        category("hyperbolic", "1 outside the merged intervals, against the estimate's tolerance",
                 {{"yes", "margin > tolerance"}, {"no", "margin < -tolerance"}, {"undecided", "|margin| <= tolerance"}}),
        real("hyperbolic_margin", "signed log distance of 1 from the merged intervals (> 0: outside)", "1/layer"),
        real("hyperbolic_tolerance", "the estimate's own error (round-off + window bias)", "1/layer"),
        real("C", "dichotomy constant at r_-, r_+^min (two-sided bundles)")
            .may_be_empty("no constant: hyperbolic is not yes, no decaying column, no two-sided bundles, or not finite"),
        real("m_minus", "margin 1 - r_minus").may_be_empty("no column below 1"),
        real("m_plus", "margin r_plus_min - 1").may_be_empty("no column above 1"),
        real("transient_depth", "log C / log(1 / r_minus)", "layer").may_be_empty("C empty"),
        real("r_f", "(A5) largest top growth scale of the fluctuation sectors lambda_j = 1/j, j = 2..sectors"),
        real("C_f", "(A5) largest constant max_(s,n) ||Phi_j(s+n, s)|| / r^n of those sectors"),
        real("theta", "(A5) r_f max(1, r_plus_max)")}}};
  o.summaries = {{"mu_max", "the largest Lyapunov exponent of the Transformer's tangent cocycle (lyapunov.csv)", "1/layer"},
                 {"sup_norm_A", "a = sup_l ||A(l)||_2 of that cocycle (Thm 5: Sigma in (0, 1 + a])"},
                 {"spectral_intervals", "most merged spectral intervals of that cocycle over the H given (Thm 5: at most d)"},
                 {"margin_first_window", "largest margin max(m_-, m_+) of the first depth window (0 when neither is defined)"},
                 {"margin_last_window", "the same for the last depth window (F17: smaller than the first)"}};
  o.figures = {{"dichotomy.png", "reference stream and |A| (F17), window rates against depth (R11), switching Bohl intervals against H "
                "(R10c), Green norm against gamma (R10d)"}};
  return o;
}

// The work of a run by part (phases in manifest.json notes.phase_seconds): G1 (QR, bundles, a growth
// envelope of 50 starts, the Green norms of 29 scalings on green_L and 2 green_L layers), the scalar
// switching sequence, the Transformer's reference trajectories and tangent maps (and LayerNorm's, (e)),
// their spectrum (QR), R6 (T sector cocycles and the dense Td Jacobians, when T d <= 256), and R11 per
// depth window: QR, the fluctuation sectors' constants (products from 10 starts, each with a spectral
// norm) and, in hyperbolic windows, the bundles and a growth envelope of 20 starts (counted always).
ResourceEstimate dichotomy_estimate(const Params& p) {
  const double L = static_cast<double>(p.get_int("depth")), d = static_cast<double>(p.get_int("d")),
               f = static_cast<double>(p.get_int("d_ff")), T = static_cast<double>(p.get_int("tokens"));
  const long window = p.get_int("R11_window"), sectors = p.get_int("sectors");
  const double ds = static_cast<double>(p.get_double_list("sigma").size()), Lg = static_cast<double>(p.get_int("g1_L")),
               Lw = static_cast<double>(std::max<long>(8, p.get_int("green_L"))), Ls = static_cast<double>(p.get_int("switch_L"));
  const double d3 = d * d * d, mat = cost::small_matrix_rate(d);
  cost::Work w;
  {  // (a), (d): the G1 cocycle of dimension ds
    const double sm = cost::small_matrix_rate(ds), g3 = ds * ds * ds;
    w.add(Lg * 20.0 * g3, sm).add_pushes(50.0 * Lg, ds, true);
    // 31 Green norms on each window: about half of the scalings lie far from the spectrum, where the
    // pushes end after a few layers; the others run across the window.
    for (const double n : {Lw, 2.0 * Lw}) w.add(31.0 * n * 12.0 * g3, sm).add_pushes(0.5 * 31.0 * n * std::min(n, 1000.0), ds);
  }
  w.add(Ls * 200.0, cost::small_vector_rate(1));  // (c) the scalar switching sequence
  // The reference trajectory's layer generators (products with W_1, W_2, norm Jacobians), twice
  // (RMS and LayerNorm (e)); |A(l)| (a spectral norm) per layer for reference.csv and for sup |A|;
  // QR of both tangent cocycles.
  w.add(2.0 * L * (8.0 * d * d * f + 14.0 * d3), mat).add_norms(2.0 * L, d).add(2.0 * L * 10.0 / 3.0 * d3, mat);
  if (p.get_string("mask") == "causal" && p.get_string("positional") == "none" && T * d <= 256) {
    const double n = T * d;  // R6: T sector cocycles and the Td x Td Jacobians (8)
    w.add(L * (T * 16.0 / 3.0 * d3 + 10.0 / 3.0 * n * n * n + 2.0 * n * n), cost::small_matrix_rate(n));
  }
  if (window <= static_cast<long>(L)) {
    const double windows = std::floor(L / static_cast<double>(window)), n = static_cast<double>(window);
    auto pushes = [&](long stride, bool whole) {  // layers pushed from starts every `stride` layers of a window
      double sum = 0;
      for (long s = 0; s < window; s += stride) sum += whole ? n : n - static_cast<double>(s);
      return sum;
    };
    const double sector_steps = pushes(std::max<long>(1, window / 10), false), env_steps = pushes(std::max<long>(1, window / 20), true);
    const double sec = static_cast<double>(sectors - 1);
    w.add(windows * n * (10.0 / 3.0 + 12.0) * d3, mat);  // QR, bundles
    w.add_pushes(windows * env_steps, d, true);           // growth envelope
    w.add(windows * sec * (n * 2.0 * d3 + sector_steps * 2.0 * d3), mat).add_norms(windows * sec * sector_steps, d);  // (A5) sectors
  }
  // Held at once during (e): both models' weights, both references' layer generators (7 d x d each),
  // the tangent maps and the whole cocycle's copy of them.
  const double bytes = 8.0 * L * (2.0 * (3.0 * d * d + 2.0 * d * f) + 17.0 * d * d) + 64e6;
  return w.estimate(bytes, "the layer generators and tangent maps along depth, QR, and per depth window the fluctuation sectors' "
                           "constants (products and spectral norms)");
}

const ExperimentRegistration reg_coupling_dichotomy{tf::with_renamed_keys(with_outputs(with_smoke(Experiment{
    "coupling-dichotomy",
    "Coupling paper Thm 5 / (A4)-(A5): dichotomy spectra R10 (a)-(e), window diagnostics R11 on random Pre-LN stacks (F17, F19)",
    dichotomy_params(), run_dichotomy, "coupling-dichotomy", dichotomy_estimate}, {{"depth", "40"}, {"g1_L", "40"}, {"green_L", "20"}, {"switch_L", "100"}, {"R11_window", "20"}, {"H", "5,10"}}), coupling_dichotomy_outputs()))};

}  // namespace
}  // namespace tokdyn
