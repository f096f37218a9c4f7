// Preset ssm-lemma-silu-bias: Lemma IV.1 of The Attention Within by Monte Carlo. For independent
// zero-mean S_B, S_C, E[z_i^T S_C^T S_B z_j] = 0 while E[SiLU(S_C z_i)^T SiLU(S_B z_j)] > 0.
#include <cmath>
#include <fmt/format.h>

#include "tokdyn/analysis/ssm_lemma_iv1.hpp"
#include "tokdyn/experiment.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/rng.hpp"

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
  CsvWriter csv(ctx.dir / "lemma_iv1.csv", {"entries", "pair", "kernel", "mean", "se", "z_score", "closed_form", "draws"});
  long done = 0;
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
      ++done;
      if (ctx.progress) ctx.progress(done / 4.0);
    }
  }
  ctx.notes["z"] = "two fixed unit vectors drawn from stream (seed, 0xfeed)";
}

const ExperimentRegistration reg_ssm_lemma_silu_bias{with_smoke(Experiment{
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
      return ResourceEstimate{8.0 * 4.0 * m * n + 64e6, 4.0 * draws * 8.0 * m * n, "4 x draws random m x n matrices S_B, S_C"};
    }}, {{"draws", "100"}, {"m", "4"}, {"n", "4"}})};

}  // namespace
}  // namespace tokdyn
