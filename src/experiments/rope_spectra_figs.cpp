// Presets rope-fig1a, rope-fig1b, rope-fig1c, rope-fig4a, rope-fig4b, rope-fig4c: the consensus
// spectra of "Self-Attention Dynamics with Rotary Position Embeddings" (Figs. 1 and 4): the
// resonant ring's Bessel-aliasing spectrum, finite-ring gaps and their large-beta asymptotics,
// and the multi-frequency gaps (non-monotonicity in plane energy, finite-context observations,
// frequency-order reversal).
#include <cmath>
#include <fmt/format.h>
#include <numbers>

#include "tokdyn/analysis/rope_spectra.hpp"
#include "tokdyn/error.hpp"
#include "tokdyn/experiment.hpp"
#include "tokdyn/experiments/rope_spectra_configs.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/reports.hpp"
#include "tokdyn/constants.hpp"

namespace tokdyn {
// A named namespace (not an anonymous one): its using-directive must not reach the other files of
// a unity batch.
namespace preset_rope_spectra_figs {

using namespace rope;
using tokdyn::kPi;
using Summary = SummaryWriter;

void run_fig1a(const Params& P, RunContext& ctx) {
  const int n = static_cast<int>(P.get_int("n")), m = static_cast<int>(P.get_int("m"));
  const double beta = P.get_double("beta");
  const auto modes = ring_spectrum_bessel(n, m, beta);
  const auto dft = ring_spectrum_dft(n, m, beta);
  auto direct = ring_spectrum_direct(n, m, beta);
  CsvWriter w(ctx.dir / "spectrum.csv", {"q", "lambda", "reachable"});
  CsvWriter c(ctx.dir / "spectrum_check.csv", {"q", "lambda_bessel", "lambda_dft", "reachable"});
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
  Summary s(ctx.dir);
  s.put("n", static_cast<long>(n));
  s.put("m", static_cast<long>(m));
  s.put("beta", beta);
  s.put("g", static_cast<long>(ring_gcd(n, m)));
  s.put("L", static_cast<long>(ring_period(n, m)));
  s.put("unreachable_modes", unreachable, n == 16 && m == 4 ? "12" : "");
  s.put("max_error_bessel_vs_dft", err_dft, n == 16 && m == 4 && beta == 2.0 ? "5.6e-16" : "");
  s.put("max_error_sorted_direct_vs_bessel", err_direct);
  s.put("gap_bessel", ring_gap(n, m, beta));
  s.put("gap_lgrid_B3", lgrid_gap(ring_period(n, m), beta));
  ctx.notes["structural_zeros"] = "from the integer gcd mask (g | q), never from floating-point tests";
}

void run_fig1b(const Params& P, RunContext& ctx) {
  const double bmax = P.get_double("beta_max");
  const long pts = P.get_int("points");
  CsvWriter w(ctx.dir / "gaps.csv", {"L", "beta", "gap"});
  Summary s(ctx.dir);
  for (long L : P.get_int_list("Ls")) {
    if (L < 1) throw InputError(fmt::format("parameter 'Ls': expected periods >= 1, got {}", L));
    for (long i = 0; i < pts; ++i) {
      const double b = bmax * static_cast<double>(i) / static_cast<double>(pts - 1);
      w.cell(std::to_string(L)).cell(b).cell(lgrid_gap(static_cast<int>(L), b)).end_row();
    }
    s.put(fmt::format("gap_L{}_beta{}", L, bmax), lgrid_gap(static_cast<int>(L), bmax));
    // Cross-check: the ring n = L (m = 1) has the same positive spectrum; its Bessel gap equals (B-3).
    s.put(fmt::format("bessel_minus_B3_L{}_beta{}", L, bmax),
          std::abs(ring_gap(static_cast<int>(std::max(2L, L)), L >= 2 ? 1 : 0, bmax) - lgrid_gap(static_cast<int>(L), bmax)));
  }
  for (long i = 0; i < pts; ++i) {
    const double b = bmax * static_cast<double>(i) / static_cast<double>(pts - 1);
    w.cell(std::string("continuum")).cell(b).cell(continuum_gap(b)).end_row();
  }
  s.put("gap_L2_beta16_closed_form_26", gap_asymptotic(2, 16.0));
  ctx.notes["continuum"] = "1 - I_1(beta)/I_0(beta): the dense-phase reference curve, not a theorem (paper: partial claim)";
}

void run_fig1c(const Params& P, RunContext& ctx) {
  const double x0 = P.get_double("x_min"), x1 = P.get_double("x_max");
  const long pts = P.get_int("points");
  CsvWriter w(ctx.dir / "ratio.csv", {"L", "x", "beta", "gap", "ratio"});
  Summary s(ctx.dir);
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
    s.put(fmt::format("ratio_L{}_x{}", L, x1), last, "-> 1");
  }
}

void run_fig4a(const Params& P, RunContext& ctx) {
  const long pts = P.get_int("points");
  CsvWriter w(ctx.dir / "gap_curve.csv", {"a", "one_minus_lambda_minus", "one_minus_lambda_plus", "gamma"});
  for (long i = 0; i < pts; ++i) {
    const double a = static_cast<double>(i) / static_cast<double>(pts - 1);
    const Prop74Spectrum sp = prop74_spectrum(a);
    w.cell(a).cell(1.0 - sp.lambda_minus).cell(1.0 - sp.lambda_plus).cell(sp.gap).end_row();
  }
  Summary s(ctx.dir);
  s.put("gamma(0)", prop74_gap(0.0), "0.564435 = (35 sqrt2 - 32)/31");
  s.put("gamma(2/3)", prop74_gap(2.0 / 3.0), "0.75");
  s.put("gamma(1)", prop74_gap(1.0), "0.668175 = u(1+2u)/(1+u+u^2), u = 2^(-3/4)");
  // Independent check: the same gaps from the general consensus kernel (dense eigensolve).
  for (double a : {0.0, 2.0 / 3.0, 1.0}) {
    const auto k = consensus_kernel({0, 1, 2}, {kPi / 2, kPi}, {a, 1.0 - a}, prop74_beta());
    s.put(fmt::format("gamma({:.4f})_dense_eigensolve", a), consensus_spectrum(k).gap);
  }
}

void run_fig4b(const Params& P, RunContext& ctx) {
  const double beta = P.get_double("beta");
  const long pts = P.get_int("points");
  const std::vector<double> freqs = standard_two_plane_freqs();
  CsvWriter w(ctx.dir / "gap_curve.csv", {"n", "a1", "gamma"});
  Summary s(ctx.dir);
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
    auto gap = [&](double a1) { return consensus_spectrum(consensus_kernel(pos, freqs, {a1, 1.0 - a1}, beta)).gap; };
    const bool paper = beta == 4.0 && (n == 256 || n == 384);
    s.put(fmt::format("n{}_gamma_low", n), gap(0.0), paper ? (n == 256 ? "0.240298" : "0.112756") : "");
    s.put(fmt::format("n{}_gamma_high", n), gap(1.0), paper ? (n == 256 ? "0.134730" : "0.135707") : "");
    s.put(fmt::format("n{}_gamma_equal_mixture", n), gap(0.5), paper && n == 384 ? "0.263105" : "");
  }
  ctx.notes["low_high"] = "low: all energy in the omega = 0.01 plane (a1 = 0); high: all energy in the omega = 1 plane (a1 = 1)";
}

void run_fig4c(const Params& P, RunContext& ctx) {
  const double beta = P.get_double("beta");
  CsvWriter w(ctx.dir / "two_token.csv", {"label", "omega", "delta", "beta", "gamma"});
  Summary s(ctx.dir);
  for (const auto& [label, om] : {std::pair<std::string, double>{"omega_low = pi/2", kPi / 2}, {"omega_high = pi", kPi}})
    for (double delta : {1.0, 2.0}) {
      const double g = two_token_gap(beta, om, delta);
      w.cell(label).cell(om).cell(delta).cell(beta).cell(g).end_row();
    }
  const bool slower1 = two_token_gap(beta, kPi, 1.0) < two_token_gap(beta, kPi / 2, 1.0);
  const bool faster2 = two_token_gap(beta, kPi, 2.0) > two_token_gap(beta, kPi / 2, 2.0);
  s.put("delta1_high_frequency_slower", static_cast<long>(slower1), "1");
  s.put("delta2_high_frequency_faster", static_cast<long>(faster2), "1");
  ctx.notes["beta"] = "the paper does not give beta for Fig. 4c; 0.5 matches its y-axis range";
}

const ExperimentRegistration r1a{with_smoke(Experiment{
    "rope-fig1a", "RoPE paper Fig. 1a: Bessel-aliasing spectrum of a resonant ring with its gcd mask",
    {p_int("n", 16, "tokens (ring size)", 2, 1 << 16), p_int("m", 4, "resonant mode: omega = 2 pi m / n", 0, 65536),
     p_double("beta", 2.0, "inverse temperature", 0.0)},
    run_fig1a, "rope-fig1a",
    [](const Params& P) {
      const double n = static_cast<double>(P.get_int("n"));
      return ResourceEstimate{8.0 * 6.0 * n * n + 64e6, 10.0 * n * n * n, "the n x n consensus Jacobian and its spectrum"};
    }}, {{"n", "8"}, {"m", "2"}})};
const ExperimentRegistration r1b{with_smoke(Experiment{
    "rope-fig1b", "RoPE paper Fig. 1b: cancellation-free finite-ring gaps against beta, with the continuum reference",
    {p_int_list("Ls", {2, 4, 8, 16, 32}, "effective periods L", 1, 1 << 20),
     p_double("beta_max", 16.0, "largest beta", 0.0, {}, true), p_int("points", 161, "beta grid points", 2, 100000)},
    run_fig1b, "rope-fig1b"}, {{"points", "5"}, {"Ls", "2,4"}})};
const ExperimentRegistration r1c{with_smoke(Experiment{
    "rope-fig1c", "RoPE paper Fig. 1c: the large-beta asymptotics (27): gamma / [2 Delta_L e^{-x}] against x = beta Delta_L",
    {p_int_list("Ls", {3, 4, 8, 16, 32}, "effective periods L >= 3", 3, 1 << 20),
     p_double("x_min", 2.5, "smallest x", 0.0), p_double("x_max", 20.0, "largest x", 0.0, {}, true),
     p_int("points", 176, "x grid points", 2, 100000)},
    run_fig1c, "rope-fig1c"}, {{"points", "5"}, {"Ls", "3,4"}})};
const ExperimentRegistration r4a{with_smoke(Experiment{
    "rope-fig4a", "RoPE paper Fig. 4a / Prop. 7.4: the gap is not monotone in plane energy (gamma(2/3) = 3/4)",
    {p_int("points", 301, "grid points of a in [0, 1]", 2, 1000000)}, run_fig4a, "rope-fig4a"}, {{"points", "5"}})};
const ExperimentRegistration r4b{with_smoke(Experiment{
    "rope-fig4b", "RoPE paper Fig. 4b / (48): finite-context gaps against plane energy, frequencies (1, 0.01)",
    {p_int_list("ns", {128, 256, 384}, "context lengths", 2, 20000), p_double("beta", 4.0, "inverse temperature", 0.0),
     p_int("points", 41, "plane-energy allocations (equally spaced)", 2, 100000)},
    run_fig4b, "rope-fig4b"}, {{"ns", "8,16"}, {"points", "3"}})};
const ExperimentRegistration r4c{with_smoke(Experiment{
    "rope-fig4c", "RoPE paper Fig. 4c / Prop. 7.5: frequency-order reversal between position gaps 1 and 2",
    {p_double("beta", 0.5, "inverse temperature (unspecified in the paper)", 0.0, {}, true)}, run_fig4c, "rope-fig4c"}, {})};

}  // namespace preset_rope_spectra_figs
}  // namespace tokdyn
