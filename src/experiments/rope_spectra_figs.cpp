// Presets rope-fig1a, rope-fig1b, rope-fig1c, rope-fig4a, rope-fig4b, rope-fig4c: the consensus
// spectra of "Self-Attention Dynamics with Rotary Position Embeddings" (Figs. 1 and 4): the
// resonant ring's Bessel-aliasing spectrum, finite-ring gaps and their large-beta asymptotics,
// and the multi-frequency gaps (non-monotonicity in plane energy, finite-context observations,
// frequency-order reversal).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numbers>

#include "tokdyn/analysis/rope_spectra.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/rope_spectra_configs.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/core/constants.hpp"

namespace tokdyn {
// A named namespace (not an anonymous one): its using-directive must not reach the other files of
// a unity batch.
namespace preset_rope_spectra_figs {

using namespace rope;
using tokdyn::kPi;

void run_fig1a(const Params& P, RunContext& ctx) {
  const int n = static_cast<int>(P.get_int("n")), m = static_cast<int>(P.get_int("m"));
  const double beta = P.get_double("beta");
  const auto modes = ring_spectrum_bessel(n, m, beta);
  const auto dft = ring_spectrum_dft(n, m, beta);
  auto direct = ring_spectrum_direct(n, m, beta);
  CsvWriter w = ctx.table("spectrum.csv");
  CsvWriter c = ctx.table("spectrum_check.csv");
  long unreachable = 0;
  double err_dft = 0.0;
  std::vector<double> bessel_sorted;
  for (const RingMode& r : modes) {
    w.cell(r.q).cell(r.lambda).cell(static_cast<long>(r.reachable)).end_row();
    c.cell(r.q).cell(r.lambda).cell(dft[static_cast<std::size_t>(r.q)]).cell(static_cast<long>(r.reachable)).end_row();
    unreachable += r.reachable ? 0 : 1;
    err_dft = std::max(err_dft, std::abs(r.lambda - dft[static_cast<std::size_t>(r.q)]));
    bessel_sorted.push_back(r.lambda);
  }
  std::sort(bessel_sorted.rbegin(), bessel_sorted.rend());
  double err_direct = 0.0;
  for (std::size_t i = 0; i < direct.size(); ++i) err_direct = std::max(err_direct, std::abs(direct[i] - bessel_sorted[i]));
  ctx.summary("n", static_cast<long>(n));
  ctx.summary("m", static_cast<long>(m));
  ctx.summary("beta", beta);
  ctx.summary("g", static_cast<long>(ring_gcd(n, m)));
  ctx.summary("L", static_cast<long>(ring_period(n, m)));
  ctx.summary("unreachable_modes", unreachable, n == 16 && m == 4 ? "12" : "");
  ctx.summary("max_error_bessel_vs_dft", err_dft, n == 16 && m == 4 && beta == 2.0 ? "5.6e-16" : "");
  ctx.summary("max_error_sorted_direct_vs_bessel", err_direct);
  ctx.summary("gap_bessel", ring_gap(n, m, beta));
  ctx.summary("gap_lgrid_B3", lgrid_gap(ring_period(n, m), beta));
  ctx.notes["structural_zeros"] = "from the integer gcd mask (g | q), never from floating-point tests";
}

void run_fig1b(const Params& P, RunContext& ctx) {
  const double bmax = P.get_double("beta_max");
  const long pts = P.get_int("points");
  CsvWriter w = ctx.table("gaps.csv");
  double gap_min = INFINITY, gap_max = -INFINITY, cross = 0.0;  // at beta_max, over the periods
  for (long L : P.get_int_list("Ls")) {
    if (L < 1) throw InputError(fmt::format("parameter 'Ls': expected periods >= 1, got {}", L));
    for (long i = 0; i < pts; ++i) {
      const double b = bmax * static_cast<double>(i) / static_cast<double>(pts - 1);
      w.cell(std::to_string(L)).cell(b).cell(lgrid_gap(static_cast<int>(L), b)).end_row();
    }
    const double g = lgrid_gap(static_cast<int>(L), bmax);
    gap_min = std::min(gap_min, g);
    gap_max = std::max(gap_max, g);
    // Cross-check: the ring n = L (m = 1) has the same positive spectrum; its Bessel gap equals (B-3).
    cross = std::max(cross, std::abs(ring_gap(static_cast<int>(std::max(2L, L)), L >= 2 ? 1 : 0, bmax) - g));
  }
  ctx.summary("min_gap_at_beta_max", gap_min);
  ctx.summary("max_gap_at_beta_max", gap_max);
  ctx.summary("max_bessel_minus_B3", cross);
  for (long i = 0; i < pts; ++i) {
    const double b = bmax * static_cast<double>(i) / static_cast<double>(pts - 1);
    w.cell(std::string("continuum")).cell(b).cell(continuum_gap(b)).end_row();
  }
  ctx.summary("gap_L2_beta16_closed_form_26", gap_asymptotic(2, 16.0));
  ctx.notes["continuum"] = "1 - I_1(beta)/I_0(beta): the dense-phase reference curve, not a theorem (paper: partial claim)";
}

void run_fig1c(const Params& P, RunContext& ctx) {
  const double x0 = P.get_double("x_min"), x1 = P.get_double("x_max");
  const long pts = P.get_int("points");
  CsvWriter w = ctx.table("ratio.csv");
  double ratio_min = INFINITY, ratio_max = -INFINITY;  // at x_max, over the periods
  for (long L : P.get_int_list("Ls")) {
    if (L < 3) throw InputError(fmt::format("parameter 'Ls': (27) needs periods L >= 3, got {}", L));
    const double dl = 1.0 - std::cos(2.0 * kPi / static_cast<double>(L));
    double last = 0.0;
    for (long i = 0; i < pts; ++i) {
      const double x = x0 + (x1 - x0) * static_cast<double>(i) / static_cast<double>(pts - 1);
      const double b = x / dl;
      last = asymptotic_ratio(static_cast<int>(L), b);
      w.cell(std::to_string(L)).cell(x).cell(b).cell(lgrid_gap(static_cast<int>(L), b)).cell(last).end_row();
    }
    ratio_min = std::min(ratio_min, last);
    ratio_max = std::max(ratio_max, last);
  }
  ctx.summary("min_ratio_at_x_max", ratio_min, "-> 1");
  ctx.summary("max_ratio_at_x_max", ratio_max, "-> 1");
}

void run_fig4a(const Params& P, RunContext& ctx) {
  const long pts = P.get_int("points");
  CsvWriter w = ctx.table("gap_curve.csv");
  for (long i = 0; i < pts; ++i) {
    const double a = static_cast<double>(i) / static_cast<double>(pts - 1);
    const Prop74Spectrum sp = prop74_spectrum(a);
    w.cell(a).cell(1.0 - sp.lambda_minus).cell(1.0 - sp.lambda_plus).cell(sp.gap).end_row();
  }
  ctx.summary("gamma(0)", prop74_gap(0.0), "0.564435 = (35 sqrt2 - 32)/31");
  ctx.summary("gamma(2/3)", prop74_gap(2.0 / 3.0), "0.75");
  ctx.summary("gamma(1)", prop74_gap(1.0), "0.668175 = u(1+2u)/(1+u+u^2), u = 2^(-3/4)");
  // Independent check: the same gaps from the general consensus kernel (dense eigensolve).
  for (double a : {0.0, 2.0 / 3.0, 1.0}) {
    const auto k = consensus_kernel({0, 1, 2}, {kPi / 2, kPi}, {a, 1.0 - a}, prop74_beta());
    ctx.summary(fmt::format("gamma({:.4f})_dense_eigensolve", a), consensus_spectrum(k).gap);
  }
}

void run_fig4b(const Params& P, RunContext& ctx) {
  const double beta = P.get_double("beta");
  const long pts = P.get_int("points");
  const std::vector<double> freqs = standard_two_plane_freqs();
  CsvWriter w = ctx.table("gap_curve.csv");
  const std::vector<long>& ns = P.get_int_list("ns");
  const long n_max = *std::max_element(ns.begin(), ns.end());
  bool summarised = false;  // the summaries: the largest context (once, should it be listed twice)
  const long total = static_cast<long>(P.get_int_list("ns").size()) * pts;
  long done = 0;
  for (long n : P.get_int_list("ns")) {
    if (n < 2) throw InputError(fmt::format("parameter 'ns': expected context lengths >= 2, got {}", n));
    std::vector<double> pos(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) pos[static_cast<std::size_t>(i)] = static_cast<double>(i);
    for (long i = 0; i < pts; ++i) {
      const double a1 = static_cast<double>(i) / static_cast<double>(pts - 1);
      const double g = consensus_spectrum(consensus_kernel(pos, freqs, {a1, 1.0 - a1}, beta)).gap;
      w.cell(std::to_string(n)).cell(a1).cell(g).end_row();
      if (ctx.progress) ctx.progress(static_cast<double>(++done) / static_cast<double>(total));
    }
    if (n != n_max || summarised) continue;
    summarised = true;
    auto gap = [&](double a1) { return consensus_spectrum(consensus_kernel(pos, freqs, {a1, 1.0 - a1}, beta)).gap; };
    const bool paper = beta == 4.0 && (n == 256 || n == 384);
    ctx.summary("largest_n_gamma_low", gap(0.0), paper ? (n == 256 ? "0.240298" : "0.112756") : "");
    ctx.summary("largest_n_gamma_high", gap(1.0), paper ? (n == 256 ? "0.134730" : "0.135707") : "");
    ctx.summary("largest_n_gamma_equal_mixture", gap(0.5), paper && n == 384 ? "0.263105" : "");
  }
  ctx.notes["low_high"] = "low: all energy in the omega = 0.01 plane (a1 = 0); high: all energy in the omega = 1 plane (a1 = 1)";
}

void run_fig4c(const Params& P, RunContext& ctx) {
  const double beta = P.get_double("beta");
  CsvWriter w = ctx.table("two_token.csv");
  for (const auto& [label, om] : {std::pair<std::string, double>{"omega_low = pi/2", kPi / 2}, {"omega_high = pi", kPi}})
    for (double delta : {1.0, 2.0}) {
      const double g = two_token_gap(beta, om, delta);
      w.cell(label).cell(om).cell(delta).cell(beta).cell(g).end_row();
    }
  const bool slower1 = two_token_gap(beta, kPi, 1.0) < two_token_gap(beta, kPi / 2, 1.0);
  const bool faster2 = two_token_gap(beta, kPi, 2.0) > two_token_gap(beta, kPi / 2, 2.0);
  ctx.summary("delta1_high_frequency_slower", static_cast<long>(slower1), "1");
  ctx.summary("delta2_high_frequency_faster", static_cast<long>(faster2), "1");
  ctx.notes["beta"] = "the paper does not give beta for Fig. 4c; 0.5 matches its y-axis range";
}


// ------------------------------------------------------------------ output declarations

OutputDecl rope_fig1a_outputs() {
  const ColumnDecl reachable = category("reachable", "whether the mode can carry weight (gcd mask, integers only)",
                                        {{"1", "reachable: g = gcd(n, m) divides q"}, {"0", "a structural zero (lambda_q = 0 exactly)"}});
  OutputDecl o;
  o.tables = {{"spectrum.csv", "one Fourier mode q of the resonant ring (omega = 2 pi m / n): its consensus eigenvalue",
               {index("q", "Fourier mode", 0), real("lambda", "eigenvalue lambda_q of A* by Bessel aliasing (22)"), reachable}},
              {"spectrum_check.csv", "one Fourier mode q: the Bessel eigenvalue beside the DFT one",
               {index("q", "Fourier mode", 0), real("lambda_bessel", "lambda_q by Bessel aliasing (22)"),
                real("lambda_dft", "lambda_q as the DFT of the attention row (the cross-check)"), reachable}}};
  o.summaries = {{"n", "tokens (ring size; the parameter)"},
                 {"m", "resonant mode (the parameter)"},
                 {"beta", "inverse temperature (the parameter)"},
                 {"g", "gcd(n, m)"},
                 {"L", "effective period L = n / g"},
                 {"unreachable_modes", "structural zeros: modes q with g not dividing q (n - L)"},
                 {"max_error_bessel_vs_dft", "max_q |lambda_bessel - lambda_dft|"},
                 {"max_error_sorted_direct_vs_bessel", "max |sorted eigenvalues of the dense consensus matrix - sorted Bessel eigenvalues|"},
                 {"gap_bessel", "spectral gap 1 - (largest nontrivial lambda_q) from the Bessel spectrum"},
                 {"gap_lgrid_B3", "the same gap by the cancellation-free L-grid formula (B-3)"}};
  o.figures = {{"fig1a_spectrum.png", "lambda_q against q: reachable modes and structural zeros"}};
  return o;
}

OutputDecl rope_fig1b_outputs() {
  OutputDecl o;
  o.tables = {{"gaps.csv", "one (period, beta) point: the finite-ring gap, or the continuum reference",
               {text("L", "effective period L (an integer), or 'continuum': the reference 1 - I_1(beta)/I_0(beta), not a theorem"),
                real("beta", "inverse temperature"), real("gap", "gap gamma_L(beta) by (B-3) (continuum rows: the reference)")}}};
  o.summaries = {{"min_gap_at_beta_max", "smallest (B-3) gap over the periods Ls at beta = beta_max (the slowest; per period: gaps.csv)"},
                 {"max_gap_at_beta_max", "largest (B-3) gap over the periods Ls at beta = beta_max"},
                 {"max_bessel_minus_B3", "max over Ls of |Bessel gap of the ring n = L, m = 1 - (B-3) gap| at beta_max (cross-check)"},
                 {"gap_L2_beta16_closed_form_26", "the closed form (26) 2 e^{-2 beta} / (1 + e^{-2 beta}) at L = 2, beta = 16"}};
  o.figures = {{"fig1b_gaps.png", "gap against beta per period (log scale), with the continuum reference"}};
  return o;
}

OutputDecl rope_fig1c_outputs() {
  OutputDecl o;
  o.tables = {{"ratio.csv", "one (period, x) point of the large-beta asymptotics (27)",
               {text("L", "effective period L (>= 3)"), real("x", "x = beta Delta_L, Delta_L = 1 - cos(2 pi / L)"),
                real("beta", "inverse temperature x / Delta_L"), real("gap", "gap gamma_L(beta) by (B-3)"),
                real("ratio", "gamma / [2 Delta_L e^{-x}] (-> 1 as x grows)")}}};
  o.summaries = {{"min_ratio_at_x_max", "smallest ratio over the periods Ls at x = x_max"},
                 {"max_ratio_at_x_max", "largest ratio over the periods Ls at x = x_max"}};
  o.figures = {{"fig1c_asymptotics.png", "ratio against x per period, with the limit 1"}};
  return o;
}

OutputDecl rope_fig4a_outputs() {
  OutputDecl o;
  o.tables = {{"gap_curve.csv", "one plane-energy allocation a of Prop. 7.4 (n = 3, frequencies pi/2 and pi, beta = (3/4) ln 2)",
               {real("a", "energy in the omega = pi/2 plane (1 - a in the omega = pi plane)"),
                real("one_minus_lambda_minus", "1 - lambda_- (45)"), real("one_minus_lambda_plus", "1 - lambda_+ (46)"),
                real("gamma", "the gap min(1 - lambda_-, 1 - lambda_+)")}}};
  o.summaries = {{"gamma(0)", "gap at a = 0 (closed form)"},
                 {"gamma(2/3)", "gap at a = 2/3 (closed form; above both ends: not monotone)"},
                 {"gamma(1)", "gap at a = 1 (closed form)"},
                 {"gamma(0.0000)_dense_eigensolve", "gap at a = 0 from the general consensus kernel (dense eigensolve; cross-check)"},
                 {"gamma(0.6667)_dense_eigensolve", "gap at a = 2/3 from the dense eigensolve"},
                 {"gamma(1.0000)_dense_eigensolve", "gap at a = 1 from the dense eigensolve"}};
  o.figures = {{"fig4a_nonmonotone.png", "1 - lambda_-, 1 - lambda_+ and the gap against a, with gamma(2/3) = 3/4 marked"}};
  return o;
}

OutputDecl rope_fig4b_outputs() {
  OutputDecl o;
  o.tables = {{"gap_curve.csv", "one (context length, allocation) point: the consensus gap (48), frequencies (1, 0.01)",
               {text("n", "context length (tokens at positions 0..n-1)"),
                real("a1", "energy in the omega = 1 plane (1 - a1 in the omega = 0.01 plane)"),
                real("gamma", "spectral gap of the consensus kernel (dense eigensolve)")}}};
  const std::string largest = " at the largest context length of ns (the others: gap_curve.csv)";
  o.summaries = {{"largest_n_gamma_low", "gap with all energy in the omega = 0.01 plane (a1 = 0)" + largest},
                 {"largest_n_gamma_high", "gap with all energy in the omega = 1 plane (a1 = 1)" + largest},
                 {"largest_n_gamma_equal_mixture", "gap at a1 = 1/2" + largest}};
  o.figures = {{"fig4b_finite_context.png", "gap against a1 per context length"}};
  return o;
}

OutputDecl rope_fig4c_outputs() {
  OutputDecl o;
  o.tables = {{"two_token.csv", "one (frequency, position gap) pair of two tokens: the gap (47)",
               {category("label", "the active frequency", {{"omega_low = pi/2", "omega = pi/2"}, {"omega_high = pi", "omega = pi"}}),
                real("omega", "the frequency", "rad"), real("delta", "position gap of the two tokens"),
                real("beta", "inverse temperature"), real("gamma", "gap 2q/(1+q), q = exp(-2 beta sin^2(omega delta / 2)) (47)")}}};
  o.summaries = {{"delta1_high_frequency_slower", "1 when the gap at omega = pi is below the one at pi/2 for delta = 1, else 0"},
                 {"delta2_high_frequency_faster", "1 when the gap at omega = pi is above the one at pi/2 for delta = 2, else 0"}};
  o.figures = {{"fig4c_reversal.png", "gap against the position gap, per frequency"}};
  return o;
}

const ExperimentRegistration r1a{with_outputs(with_smoke(Experiment{
    "rope-fig1a", "RoPE paper Fig. 1a: Bessel-aliasing spectrum of a resonant ring with its gcd mask",
    {p_int("n", 16, "tokens (ring size)", 2, 1 << 16), p_int("m", 4, "resonant mode: omega = 2 pi m / n", 0, 65536),
     p_double("beta", 2.0, "inverse temperature", 0.0)},
    run_fig1a, "rope-fig1a",
    [](const Params& P) {
      const double n = static_cast<double>(P.get_int("n"));
      return ResourceEstimate{8.0 * 6.0 * n * n + 64e6, 10.0 * n * n * n, "the n x n consensus Jacobian and its spectrum"};
    }}, {{"n", "8"}, {"m", "2"}}), rope_fig1a_outputs())};
const ExperimentRegistration r1b{with_outputs(with_smoke(Experiment{
    "rope-fig1b", "RoPE paper Fig. 1b: cancellation-free finite-ring gaps against beta, with the continuum reference",
    {p_int_list("Ls", {2, 4, 8, 16, 32}, "effective periods L", 1, 1 << 20),
     p_double("beta_max", 16.0, "largest beta", 0.0, {}, true), p_int("points", 161, "beta grid points", 2, 100000)},
    run_fig1b, "rope-fig1b"}, {{"points", "5"}, {"Ls", "2,4"}}), rope_fig1b_outputs())};
const ExperimentRegistration r1c{with_outputs(with_smoke(Experiment{
    "rope-fig1c", "RoPE paper Fig. 1c: the large-beta asymptotics (27): gamma / [2 Delta_L e^{-x}] against x = beta Delta_L",
    {p_int_list("Ls", {3, 4, 8, 16, 32}, "effective periods L >= 3", 3, 1 << 20),
     p_double("x_min", 2.5, "smallest x", 0.0), p_double("x_max", 20.0, "largest x", 0.0, {}, true),
     p_int("points", 176, "x grid points", 2, 100000)},
    run_fig1c, "rope-fig1c"}, {{"points", "5"}, {"Ls", "3,4"}}), rope_fig1c_outputs())};
const ExperimentRegistration r4a{with_outputs(with_smoke(Experiment{
    "rope-fig4a", "RoPE paper Fig. 4a / Prop. 7.4: the gap is not monotone in plane energy (gamma(2/3) = 3/4)",
    {p_int("points", 301, "grid points of a in [0, 1]", 2, 1000000)}, run_fig4a, "rope-fig4a"}, {{"points", "5"}}), rope_fig4a_outputs())};
const ExperimentRegistration r4b{with_outputs(with_smoke(Experiment{
    "rope-fig4b", "RoPE paper Fig. 4b / (48): finite-context gaps against plane energy, frequencies (1, 0.01)",
    {p_int_list("ns", {128, 256, 384}, "context lengths", 2, 20000), p_double("beta", 4.0, "inverse temperature", 0.0),
     p_int("points", 41, "plane-energy allocations (equally spaced)", 2, 100000)},
    run_fig4b, "rope-fig4b"}, {{"ns", "8,16"}, {"points", "3"}}), rope_fig4b_outputs())};
const ExperimentRegistration r4c{with_outputs(with_smoke(Experiment{
    "rope-fig4c", "RoPE paper Fig. 4c / Prop. 7.5: frequency-order reversal between position gaps 1 and 2",
    {p_double("beta", 0.5, "inverse temperature (unspecified in the paper)", 0.0, {}, true)}, run_fig4c, "rope-fig4c"}, {}), rope_fig4c_outputs())};

}  // namespace preset_rope_spectra_figs
}  // namespace tokdyn
