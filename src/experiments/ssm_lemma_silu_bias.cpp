// Preset ssm-lemma-silu-bias: Lemma IV.1 of The Attention Within by Monte Carlo. For independent
// zero-mean S_B, S_C, E[z_i^T S_C^T S_B z_j] = 0 while E[SiLU(S_C z_i)^T SiLU(S_B z_j)] > 0.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "tokdyn/analysis/ssm_lemma_iv1.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn {
namespace {

void run_lemma(const Params& P, RunContext& ctx) {
  const int m = static_cast<int>(P.get_int("m")), n = static_cast<int>(P.get_int("n"));
  const long draws = P.get_int("draws");
  const double scale = P.get_double("scale");
  const auto seed = static_cast<std::uint64_t>(P.get_int("seed"));
  Rng rng(seed, {0xfeed});
  const Tokens Z = rng.sphere_tokens(2, n);
  const Vec zi = Z.row(0).transpose(), zj = Z.row(1).transpose();
  // Closed form for Gaussian entries: m E[SiLU(X)]^2, X ~ N(0, scale^2), for any unit z_i, z_j.
  const double es = silu_gaussian_moments(scale).first;
  CsvWriter csv = ctx.table("lemma_iv1.csv");
  long done = 0;
  double silu_normal = 0.0, silu_z_min = std::numeric_limits<double>::infinity(), bilinear_z_max = 0.0;
  for (RandomEntries dist : {RandomEntries::Normal, RandomEntries::Uniform}) {
    const std::string dn = dist == RandomEntries::Normal ? "normal" : "uniform";
    for (int same = 0; same < 2; ++same) {
      const Vec& b = same ? zi : zj;
      const SiluBiasEstimate e = silu_bias_monte_carlo(m, n, zi, b, draws, dist, scale, seed + 1 + done);
      const std::string pair = same ? "z_i = z_j" : "z_i != z_j";
      csv.cell(dn).cell(pair).cell(std::string("bilinear")).cell(e.bilinear_mean).cell(e.bilinear_se)
          .cell(e.bilinear_mean / e.bilinear_se).cell(0.0).cell(draws);
      csv.end_row();
      csv.cell(dn).cell(pair).cell(std::string("silu")).cell(e.silu_mean).cell(e.silu_se).cell(e.silu_mean / e.silu_se);
      if (dist == RandomEntries::Normal) csv.cell(m * es * es); else csv.empty();
      csv.cell(draws);
      csv.end_row();
      if (dist == RandomEntries::Normal && !same) silu_normal = e.silu_mean;
      silu_z_min = std::min(silu_z_min, e.silu_mean / e.silu_se);
      bilinear_z_max = std::max(bilinear_z_max, std::abs(e.bilinear_mean / e.bilinear_se));
      ++done;
      if (ctx.progress) ctx.progress(done / 4.0);
    }
  }
  ctx.notes["z"] = "two fixed unit vectors drawn from stream (seed, 0xfeed)";
  ctx.summary("silu_mean", silu_normal);
  ctx.summary("silu_closed_form", m * es * es);
  ctx.summary("silu_z_min", silu_z_min);
  ctx.summary("bilinear_abs_z_max", bilinear_z_max);
}

OutputDecl ssm_lemma_silu_bias_outputs() {
  OutputDecl o;
  o.tables = {TableDecl{
      "lemma_iv1.csv", "one Monte Carlo estimate of an interaction term of Lemma IV.1, E[f(S_C z_i)^T f(S_B z_j)] over draws of (S_B, S_C)",
      {category("entries", "distribution of the entries of S_B, S_C (zero mean, standard deviation scale)",
                {{"normal", "Gaussian N(0, scale^2)"}, {"uniform", "uniform on [-sqrt 3 scale, sqrt 3 scale] (the same standard deviation)"}}),
       category("pair", "the two unit tokens", {{"z_i = z_j", "the same token"}, {"z_i != z_j", "two different fixed unit tokens"}}),
       category("kernel", "the interaction term", {{"bilinear", "z_i^T S_C^T S_B z_j (no SiLU): mean 0 by the lemma"},
                                                   {"silu", "SiLU(S_C z_i)^T SiLU(S_B z_j): mean > 0 by the lemma"}}),
       real("mean", "Monte Carlo mean over the draws"), real("se", "its standard error"),
       real("z_score", "mean / se"),
       real("closed_form", "the exact mean: 0 (bilinear), m E[SiLU(X)]^2 with X ~ N(0, scale^2) (silu, normal entries)")
           .may_be_empty("no closed form here (silu kernel with uniform entries)"),
       integer("draws", "independent (S_B, S_C) draws")}}};
  o.summaries = {
      {"silu_mean", "Monte Carlo mean of the SiLU term, normal entries, z_i != z_j (Lemma IV.1: > 0)"},
      {"silu_closed_form", "its exact value m E[SiLU(X)]^2, X ~ N(0, scale^2)"},
      {"silu_z_min", "smallest z-score of the SiLU term over entries and pairs (Lemma IV.1: clearly > 0)"},
      {"bilinear_abs_z_max", "largest |z-score| of the bilinear term over entries and pairs (Lemma IV.1: mean 0, so O(1))"}};
  return o;
}

const ExperimentRegistration reg_ssm_lemma_silu_bias{with_outputs(with_smoke(Experiment{
    "ssm-lemma-silu-bias",
    "Attention Within Lemma IV.1: Monte Carlo of the bilinear (mean 0) and SiLU (mean > 0) interaction terms",
    {p_int("m", 64, "rows of S_B, S_C (state size)", 1, 65536), p_int("n", 16, "token dimension", 1, 65536),
     p_int("draws", 200000, "independent (S_B, S_C) draws", 2, 1000000000),
     p_double("scale", 1.0, "standard deviation of the entries (1e-30 to 1e30: beyond, the z-score's moments under- or overflow)", 1e-30, 1e30),
     p_int("seed", 0, "base seed", 0, kMaxSeed)},
    run_lemma, "",
    [](const Params& P) {
      const double m = static_cast<double>(P.get_int("m")), n = static_cast<double>(P.get_int("n"));
      const double draws = static_cast<double>(P.get_int("draws"));
      // Drawing the entries dominates: 76 ns per entry pair of S_B, S_C on one thread (measured), every thread.
      cost::Work w;
      w.add_timed(4.0 * draws * 8.0 * m * n, draws * m * n * 76e-9, true);
      return w.estimate(8.0 * 4.0 * m * n + 64e6, "4 x draws random m x n matrices S_B, S_C");
    }}, {{"draws", "100"}, {"m", "4"}, {"n", "4"}}), ssm_lemma_silu_bias_outputs())};

}  // namespace
}  // namespace tokdyn
