// Preset coupling-data: the data side of the coupling paper (§5.3, Props 13-14, App. C.3-C.4) on a
// block-level HMM (a latent Markov chain z_k, blocks of P tokens i.i.d. given z_k).
//   R22 (Prop 13): with independent blocks the Bayes next-token predictor is block-local:
//       (a) identical rows of Q (i.i.d. latents) and (b) a deterministic latent give R_full = R_local
//       per sequence; (c) a persistent symmetric chain (q below the i.i.d. point) gives R_local >
//       R_full, the gap growing as |1 - 2q| -> 1; flag F13: a random but constant latent gives a gap.
//       The profile risk R*(rho) of the convex logistic family logits = f_theta(prefix) + rho W_r
//       psi(previous block mean) is flat under independence; under persistence it decreases as |rho|
//       opens when |W_r| is bounded, and is a step at rho = 0 when W_r is free (flag F14).
//   R23 (Prop 14): the block posterior from the full block equals that from Tbar_k (Gaussian,
//       Poisson, categorical), so does filtering; a slow path fed by Pi_mean reaches R_full while
//       Pi_stride and Pi_head lose; negative control (latent variance): the mean of x loses, the mean
//       of T = (x, x^2) does not.
// Outputs: checks.csv, risks.csv (risk against persistence q), sufficiency.csv, profile.csv.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "tokdyn/analysis/block_hmm.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/generators_file.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/constants.hpp"

namespace tokdyn {
namespace {

using hmm::BlockHmm;
using hmm::Emission;
using hmm::Family;
using hmm::Matrix;
using hmm::Summary;
using hmm::Vector;

using tokdyn::kNaN;
using tokdyn::kInf;
/// The emission of a family from the preset's knobs (design drawn from stream (seed, tag)).
Emission make_emission(Family f, int S, int V, int D, double contrast, double rate, std::uint64_t seed) {
  const auto spread = [&](int z) { return contrast * (S > 1 ? static_cast<double>(z) / (S - 1) - 0.5 : 0.0); };
  switch (f) {
    case Family::Categorical: {
      Rng rng(seed, {0xda7a, 1});
      Matrix logits(S, V);
      for (int z = 0; z < S; ++z)
        for (int v = 0; v < V; ++v) logits(z, v) = contrast * rng.normal();
      return Emission::categorical(logits);
    }
    case Family::Gaussian: {
      Rng rng(seed, {0xda7a, 2});
      Matrix mu(S, D), B(D, D);
      for (int z = 0; z < S; ++z)
        for (int i = 0; i < D; ++i) mu(z, i) = contrast * rng.normal();
      for (int i = 0; i < D; ++i)
        for (int j = 0; j < D; ++j) B(i, j) = 0.5 * rng.normal();
      Matrix Sigma = B * B.transpose() / D + 0.5 * Matrix::Identity(D, D);
      Sigma = 0.5 * (Sigma + Sigma.transpose());
      return Emission::gaussian(mu, Sigma);
    }
    case Family::Poisson: {
      Vector r(S);
      for (int z = 0; z < S; ++z) r(z) = rate * std::exp(spread(z));
      return Emission::poisson(r);
    }
    case Family::GaussianVariance: {
      Vector m = Vector::Zero(S), s(S);
      for (int z = 0; z < S; ++z) s(z) = std::exp(spread(z));
      return Emission::gaussian_variance(m, s);
    }
  }
  throw std::logic_error("make_emission: unknown family");
}

BlockHmm symmetric_hmm(const Emission& e, int S, int P, double q) {
  BlockHmm m{hmm::symmetric_kernel(S, q), Vector::Constant(S, 1.0 / S), P, e};
  m.validate();
  return m;
}

/// Largest |difference| between two log-posteriors, as probabilities.
double prob_diff(const Vector& la, const Vector& lb) { return (la.array().exp() - lb.array().exp()).abs().maxCoeff(); }

void run_data(const Params& p, RunContext& ctx) {
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const int S = static_cast<int>(p.get_int("S")), V = static_cast<int>(p.get_int("V")), D = static_cast<int>(p.get_int("dim"));
  const int P = static_cast<int>(p.get_int("block")), K = static_cast<int>(p.get_int("blocks"));
  const long N = p.get_int("sequences"), Ns = p.get_int("suff_sequences");
  const double contrast = p.get_double("contrast"), rate = p.get_double("rate");
  const Family fam = hmm::parse_family(p.get_string("emission"));
  const int eV = static_cast<int>(p.get_int("exact_V")), eP = static_cast<int>(p.get_int("exact_block")), eK = static_cast<int>(p.get_int("exact_blocks"));
  const double pq = p.get_double("profile_q"), sq = p.get_double("suff_q"), cnorm = p.get_double("readin_norm");

  // ---- Inputs the schema cannot express ------------------------------------------------------------
  const std::vector<double> qs = number_list_param(p, "q_grid"), rhos = number_list_param(p, "rho_grid");
  for (double q : qs)
    if (!(q >= 0.0 && q <= 1.0)) throw InputError(fmt::format("parameter 'q_grid': entry {} is outside [0, 1]; expected persistences q in [0, 1]", q));
  for (std::size_t i = 0; i < qs.size(); ++i)
    for (std::size_t j = i + 1; j < qs.size(); ++j)
      if (qs[i] == qs[j]) throw InputError(fmt::format("parameter 'q_grid': entry {} appears twice; expected distinct persistences", qs[i]));
  if (V < 2) throw InputError(fmt::format("parameter 'V' = {}: the categorical emissions (R22, R23) need V >= 2 symbols", V));
  if (fam == Family::GaussianVariance && p.is_explicit("dim") && D != 1)
    throw InputError(fmt::format("parameter 'dim' = {}: the gaussian-variance emission is scalar (T = (x, x^2)); expected dim = 1", D));
  if (std::pow(static_cast<double>(eV), static_cast<double>(eP * eK)) > 262144.0)
    throw InputError(fmt::format("parameters 'exact_V', 'exact_block', 'exact_blocks': {}^({} x {}) sequences to enumerate; expected at most 2^18", eV, eP, eK));
  const double q_iid = static_cast<double>(S - 1) / S;  // rows of the symmetric kernel coincide: i.i.d. latents

  CheckTable checks(ctx.dir / "checks.csv");
  CsvWriter risks = ctx.table("risks.csv");
  // Summaries (put at the end): gaps at the smallest q of the grid, the bounded gate's gain, Prop 14's posterior difference.
  double sum_gap_exact = kNaN, sum_gap_mc = kNaN, sum_gap_mc_se = kNaN, sum_gate_gain = kNaN, sum_post_T = 0.0;
  const std::vector<Summary> preds = {Summary::Full, Summary::Local, Summary::MeanT, Summary::Stride, Summary::Head, Summary::PrevBlock};
  std::vector<Summary> sweep_preds = preds;
  if (fam == Family::GaussianVariance) sweep_preds.push_back(Summary::MeanX);  // the control: the mean of x is not sufficient
  const Emission e = make_emission(fam, S, V, D, contrast, rate, seed);
  const Emission tiny_e = make_emission(Family::Categorical, 2, eV, 1, contrast, rate, seed);
  int step = 0;
  const double steps = static_cast<double>(qs.size()) + 6.0;
  const auto progress = [&] {
    if (ctx.progress) ctx.progress(std::min(1.0, ++step / steps));
  };

  // ---- R22 (a), (b), F13: independent blocks, exact (tiny categorical) and Monte Carlo -------------
  {
    Rng rr(seed, {0xda7a, 3});
    Vector r(S), r2(2);
    for (int z = 0; z < S; ++z) r(z) = 0.2 + rr.uniform();
    r /= r.sum();
    r2 << 0.3, 0.7;
    struct Case {
      std::string id, what;
      Matrix Q2, QS;
      Vector pi2, piS;
      bool independent;
    };
    Matrix perm2(2, 2), permS = Matrix::Zero(S, S);
    perm2 << 0, 1, 1, 0;
    for (int z = 0; z < S; ++z) permS(z, (z + 1) % S) = 1.0;
    const Vector e2 = Vector::Unit(2, 0), eS = Vector::Unit(S, 0);
    const std::vector<Case> cases = {
        {"R22a", "identical rows of Q (i.i.d. latents)", Matrix(r2.transpose().replicate(2, 1)), Matrix(r.transpose().replicate(S, 1)), r2, r, true},
        {"R22b", "deterministic constant latent (Q = I, pi_0 = e_1)", Matrix::Identity(2, 2), Matrix::Identity(S, S), e2, eS, true},
        {"R22b", "deterministic cycling latent (Q a permutation, pi_0 = e_1)", perm2, permS, e2, eS, true},
        {"F13", "random but constant latent (Q = I, pi_0 uniform)", Matrix::Identity(2, 2), Matrix::Identity(S, S),
         Vector::Constant(2, 0.5), Vector::Constant(S, 1.0 / S), false}};
    const long Nc = std::min<long>(N, 20000);
    for (const Case& c : cases) {
      BlockHmm tiny{c.Q2, c.pi2, eP, tiny_e};
      tiny.validate();
      double mass = 0.0, maxd = 0.0;
      const auto ex = hmm::exact_risks(tiny, eK, {Summary::Full, Summary::Local}, 1, &mass, &maxd);
      BlockHmm big{c.QS, c.piS, P, e};
      big.validate();
      const hmm::McStats st = hmm::monte_carlo(big, K, Nc, seed, 0xa0, {Summary::Full, Summary::Local});
      const hmm::Estimate g = st.gap[1];
      const double mcd = st.max_abs_gap[1];
      if (c.independent) {
        checks.add(c.id, "Prop 13: independent blocks, the Bayes predictor is block-local: R_full = R_local per sequence",
                   fmt::format("{}: exact, V = {}, P = {}, {} blocks: max |R_full - R_local| over {} sequences", c.what, eV, eP, eK,
                               std::pow(eV, eP * eK)),
                   maxd, "<= 1e-14", maxd <= 1e-14, closed_form("0: Prop 13 - with independent blocks the Bayes filter equals the marginal prior, sequence by sequence (value: hmm::exact_risks, Full vs Local)"));
        checks.add(c.id, "Prop 13: independent blocks, R_full = R_local per sequence",
                   fmt::format("{}: Monte Carlo, {}, P = {}, {} blocks: max |R_full - R_local| over {} sequences", c.what, hmm::family_name(fam), P, K, Nc),
                   mcd, "<= 1e-14", mcd <= 1e-14, closed_form("0: Prop 13 - independent blocks, R_full = R_local per sequence (value: hmm::monte_carlo, Full vs Local)"));
      } else {
        checks.add(c.id, "F13: a random but constant latent makes blocks dependent: R_local - R_full > 0",
                   fmt::format("{}: exact, V = {}, P = {}, {} blocks: R_local - R_full", c.what, eV, eP, eK), ex[1] - ex[0], "> 1e-4",
                   ex[1] - ex[0] > 1e-4, qualitative("F13: a random constant latent gives R_local > R_full"));
        checks.add(c.id, "F13: a random but constant latent makes blocks dependent: R_local - R_full > 0",
                   fmt::format("{}: Monte Carlo ({}): (R_local - R_full) / stderr", c.what, hmm::family_name(fam)), g.mean / g.se, "> 5",
                   g.mean / g.se > 5.0, qualitative("F13: a random constant latent gives R_local > R_full"));
      }
      if (c.id == "R22a")
        checks.add("R22 exact", "enumeration: the probabilities of every sequence sum to 1", "|sum_x p(x) - 1|", std::abs(mass - 1.0), "<= 1e-12",
                   std::abs(mass - 1.0) <= 1e-12, closed_form("total probability 1"));
      progress();
    }
  }

  // ---- R22 (c): risks against persistence q (exact tiny, Monte Carlo at the preset's size) ---------
  {
    std::vector<double> exact_gap;
    const std::size_t qmin = static_cast<std::size_t>(std::min_element(qs.begin(), qs.end()) - qs.begin());
    for (double q : qs) {
      const BlockHmm tiny = symmetric_hmm(tiny_e, 2, eP, std::min(q, 1.0));
      const auto ex = hmm::exact_risks(tiny, eK, preds);
      for (std::size_t j = 0; j < preds.size(); ++j)
        risks.cell(std::string("exact")).cell(std::string("categorical")).cell(q).cell(hmm::summary_name(preds[j])).cell(ex[j]).cell(0.0)
            .cell(ex[j] - ex[0]).cell(0.0).end_row();
      exact_gap.push_back(ex[1] - ex[0]);
    }
    std::vector<hmm::Estimate> mc_gap;
    double flat = 0.0;
    bool have_iid = false;
    for (double q : qs) {
      const BlockHmm m = symmetric_hmm(e, S, P, q);
      const hmm::McStats st = hmm::monte_carlo(m, K, N, seed, 0xb0, sweep_preds);
      for (std::size_t j = 0; j < sweep_preds.size(); ++j) {
        const hmm::Estimate r = st.risk[j], g = st.gap[j];
        risks.cell(std::string("monte_carlo")).cell(hmm::family_name(fam)).cell(q).cell(hmm::summary_name(sweep_preds[j])).cell(r.mean).cell(r.se)
            .cell(g.mean).cell(g.se).end_row();
      }
      mc_gap.push_back(st.gap[1]);
      if (std::abs(q - q_iid) <= 1e-15) {
        have_iid = true;
        flat = std::max(flat, st.max_abs_gap[1]);
      }
      progress();
    }
    if (!qs.empty()) {
      sum_gap_exact = exact_gap[qmin];
      sum_gap_mc = mc_gap[qmin].mean;
      sum_gap_mc_se = mc_gap[qmin].se;
    }
    // Exact gaps: > 0 below the i.i.d. point, growing as q falls (|lambda_2(Q)| = |1 - 2q| -> 1).
    std::vector<std::size_t> order(qs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return qs[a] < qs[b]; });
    double min_exact = kInf, min_z = kInf, worst_mono_exact = kInf, worst_mono_mc = kInf;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const std::size_t a = order[i];
      if (qs[a] < 0.5 - 1e-12) {
        min_exact = std::min(min_exact, exact_gap[a]);
        if (qs[a] < q_iid - 1e-12) min_z = std::min(min_z, mc_gap[a].mean / mc_gap[a].se);
      }
      if (i + 1 < order.size() && qs[order[i + 1]] <= 0.5 + 1e-12) {
        const std::size_t b = order[i + 1];
        worst_mono_exact = std::min(worst_mono_exact, exact_gap[a] - exact_gap[b]);
        if (qs[b] <= q_iid + 1e-12)
          worst_mono_mc = std::min(worst_mono_mc, (mc_gap[a].mean - mc_gap[b].mean) / std::hypot(mc_gap[a].se, mc_gap[b].se));
      }
    }
    if (std::isfinite(min_exact))
      checks.add("R22c", "Prop 13 converse: a persistent latent (q < 1/2) gives R_local - R_full > 0",
                 fmt::format("exact (V = {}, P = {}, {} blocks): smallest R_local - R_full over q < 1/2", eV, eP, eK), min_exact, "> 0", min_exact > 0.0,
                 qualitative("Prop 13 converse: R_local > R_full for q < 1/2"));
    if (std::isfinite(min_z))
      checks.add("R22c", "Prop 13 converse: a persistent latent gives R_local - R_full > 0",
                 fmt::format("Monte Carlo ({}, {} sequences): smallest (R_local - R_full) / stderr over q < {}", hmm::family_name(fam), N, q_iid), min_z,
                 "> 3", min_z > 3.0, qualitative("Prop 13 converse: R_local > R_full for q < 1/2"));
    if (std::isfinite(worst_mono_exact))
      checks.add("R22c", "the gap grows as |1 - 2q| -> 1 (q -> 0)", "exact: smallest gap(q_i) - gap(q_i+1) over the sorted grid (q <= 1/2)",
                 worst_mono_exact, "> 0", worst_mono_exact > 0.0, qualitative("Prop 13: the gap grows as |1 - 2q| -> 1"));
    if (std::isfinite(worst_mono_mc))
      checks.add("R22c", "the gap grows as |1 - 2q| -> 1 (q -> 0)",
                 "Monte Carlo: smallest (gap(q_i) - gap(q_i+1)) / stderr over the sorted grid (q <= i.i.d. point)", worst_mono_mc, "> -3",
                 worst_mono_mc > -3.0, qualitative("Prop 13: the gap grows as |1 - 2q| -> 1"));
    if (have_iid)
      checks.add("R22a", "flat at the i.i.d. point of the grid (q = (S-1)/S)",
                 fmt::format("Monte Carlo: max |R_full - R_local| per sequence at q = {}", q_iid), flat, "<= 1e-14", flat <= 1e-14,
                 closed_form("0: at the i.i.d. point the blocks are independent (Prop 13), R_full = R_local per sequence"));
  }

  // ---- R22 profile risk R*(rho) (C.3 Step 2; F14) ----------------------------------------------------
  {
    CsvWriter prof = ctx.table("profile.csv");
    struct Setting {
      std::string name;
      double q;
    };
    for (const Setting& st : {Setting{"independent", 0.5}, Setting{"persistent", pq}}) {
      const BlockHmm tiny = symmetric_hmm(tiny_e, 2, eP, st.q);
      const auto bayes = hmm::exact_risks(tiny, eK, {Summary::Full, Summary::Local});
      const hmm::ProfileData data = hmm::profile_data_exact(tiny, eK);
      for (const std::string ri : {"free", "bounded"}) {
        std::vector<hmm::ProfileFit> fits;
        for (double rho : rhos) {
          fits.push_back(hmm::fit_profile(data, rho, ri == "free" ? kInf : cnorm));
          const auto& f = fits.back();
          prof.cell(st.name).cell(st.q).cell(ri).cell(rho).cell(f.risk).cell(f.w_norm).cell(std::abs(rho) * f.w_norm).cell(f.lambda).cell(bayes[0])
              .cell(bayes[1]).end_row();
        }
        // R*(0) (the rho = 0 family) and the spread of R* over the grid.
        const hmm::ProfileFit f0 = hmm::fit_profile(data, 0.0);
        double spread = 0.0, below = kInf, spread_nz = 0.0, drop = kInf, mono = kInf, sym = 0.0;
        double rw_lo = kInf, rw_hi = 0.0, bayes_gap = kInf, first_nz = kNaN;
        for (std::size_t i = 0; i < rhos.size(); ++i) {
          spread = std::max(spread, std::abs(fits[i].risk - f0.risk));
          bayes_gap = std::min(bayes_gap, fits[i].risk - bayes[0]);
          if (rhos[i] != 0.0) {
            if (std::isnan(first_nz)) first_nz = fits[i].risk;
            spread_nz = std::max(spread_nz, std::abs(fits[i].risk - first_nz));
            drop = std::min(drop, f0.risk - fits[i].risk);
            rw_lo = std::min(rw_lo, std::abs(rhos[i]) * fits[i].w_norm);
            rw_hi = std::max(rw_hi, std::abs(rhos[i]) * fits[i].w_norm);
          }
          for (std::size_t j = 0; j < rhos.size(); ++j) {
            if (std::abs(rhos[i]) > std::abs(rhos[j])) mono = std::min(mono, fits[j].risk - fits[i].risk);
            if (rhos[i] == -rhos[j]) sym = std::max(sym, std::abs(fits[i].risk - fits[j].risk));
          }
        }
        below = f0.risk - bayes[1];
        const std::string tag = fmt::format("{} (q = {}), {} W_r", st.name, st.q, ri == "free" ? "free" : fmt::format("|W_r| <= {}", cnorm));
        checks.add("R22 profile", "R*(rho) >= the Bayes risk R_full; R*(0) >= R_local (the rho = 0 family is block-local)",
                   tag + ": min_rho R*(rho) - R_full, and R*(0) - R_local (the smaller)", std::min(bayes_gap, below), ">= -1e-12",
                   std::min(bayes_gap, below) >= -1e-12, bound("Bayes optimality: R*(rho) >= R_full, R*(0) >= R_local"));
        if (st.name == "independent") {
          checks.add("R22 profile", "Prop 13: independent blocks, the profile risk R*(rho) is flat in rho", tag + ": max_rho |R*(rho) - R*(0)|", spread,
                     "<= 1e-9", spread <= 1e-9, closed_form("0: Prop 13 - independent blocks carry no information across blocks, so R*(rho) = R*(0)"));
        } else if (ri == "bounded") {
          if (std::isfinite(mono))
            checks.add("R22 profile", "persistence, bounded read-in: R*(rho) decreases as |rho| opens", tag + ": min over |rho_i| > |rho_j| of R*(rho_j) - R*(rho_i)",
                       mono, ">= -1e-10", mono >= -1e-10, qualitative("C.3 Step 2: R*(rho) decreases as |rho| opens"));
          // Strictly decreasing while the bound binds: rho_j = 0 or |W_r(rho_j)| at the bound (lambda > 0).
          double strict = kInf;
          for (std::size_t i = 0; i < rhos.size(); ++i)
            for (std::size_t j = 0; j < rhos.size(); ++j)
              if (std::abs(rhos[i]) > std::abs(rhos[j]) && (rhos[j] == 0.0 || fits[j].lambda > 0.0))
                strict = std::min(strict, fits[j].risk - fits[i].risk);
          if (std::isfinite(strict))
            checks.add("R22 profile", "persistence, bounded read-in: R*(rho) strictly decreases in |rho| while the bound binds",
                       tag + ": min over |rho_i| > |rho_j|, rho_j binding or 0, of R*(rho_j) - R*(rho_i)", strict, "> 1e-6", strict > 1e-6,
                       qualitative("C.3 Step 2: R*(rho) strictly decreases while the bound binds"));
          double widest = kNaN, best = kInf;
          for (std::size_t i = 0; i < rhos.size(); ++i)
            if (std::abs(rhos[i]) > 0 && fits[i].risk < best) best = fits[i].risk, widest = f0.risk - fits[i].risk;
          if (st.name == "persistent") sum_gate_gain = widest;
          if (std::isfinite(best))
            checks.add("R22 profile", "persistence, bounded read-in: opening the gate lowers the risk", tag + ": R*(0) - min_rho R*(rho)", widest,
                       "> 1e-4", widest > 1e-4, qualitative("C.3 Step 2: R*(0) > min_rho R*(rho) under persistence"));
          checks.add("R22 profile", "the bounded family is symmetric in rho", tag + ": max |R*(rho) - R*(-rho)|", sym, "<= 1e-10", sym <= 1e-10,
                     closed_form("0: (rho, W_r) -> (-rho, -W_r) leaves the bounded family invariant"));
        } else if (std::isfinite(drop)) {
          checks.add("F14", "free read-in: R*(rho) is the same for every rho != 0 (rho confounded with the read-in scale)",
                     tag + ": max over rho != 0 of |R*(rho) - R*(rho_1)|", spread_nz, "<= 1e-9", spread_nz <= 1e-9,
                     closed_form("0: F14 - with a free read-in only rho W_r enters the model"));
          checks.add("F14", "free read-in: only on/off is identifiable: R*(0) > R*(rho != 0)", tag + ": min over rho != 0 of R*(0) - R*(rho)", drop, "> 1e-4",
                     drop > 1e-4, qualitative("F14: R*(0) > R*(rho != 0) (only on/off identifiable)"));
          checks.add("F14", "free read-in: the fitted |W_r| scales as 1/|rho| (|rho| |W_r| constant)", tag + ": max / min of |rho| |W_r| over rho != 0",
                     rw_hi / rw_lo, "<= 1 + 1e-6", rw_hi / rw_lo <= 1.0 + 1e-6,
                     closed_form("ratio 1: F14 - only rho W_r enters, so |rho| |W_r| is the same for every rho != 0"));
        }
      }
    }
    progress();
  }

  // ---- R23 (Prop 14): sufficiency of the block mean ---------------------------------------------------
  {
    CsvWriter suff = ctx.table("sufficiency.csv");
    suff.blank_nonfinite({"posterior_max_diff", "filter_max_diff"});  // empty: not computed for this statistic
    for (Family f : {Family::Categorical, Family::Gaussian, Family::Poisson, Family::GaussianVariance}) {
      const Emission ef = make_emission(f, S, V, f == Family::GaussianVariance ? 1 : D, contrast, rate, seed);
      const BlockHmm m = symmetric_hmm(ef, S, P, sq);
      const std::string fn = hmm::family_name(f);
      const bool control = f == Family::GaussianVariance;
      std::vector<Summary> sp = {Summary::Full, Summary::MeanT, Summary::Stride, Summary::Head, Summary::PrevBlock, Summary::Local};
      if (control) sp.push_back(Summary::MeanX);
      const hmm::McStats st = hmm::monte_carlo(m, K, Ns, seed, 0xc0 + static_cast<std::uint64_t>(f), sp);
      // Posteriors p(z_k | B_k) and filters p(z_k | B_{1:k}) on the first sequences, from the full
      // blocks and from the block means (of T; of x for the control).
      const long nseq = std::min<long>(Ns, 200);
      double post_T = 0.0, post_X = 0.0, filt_T = 0.0, filt_X = 0.0;
      for (long n = 0; n < nseq; ++n) {
        Rng rng(seed, {0xc0 + static_cast<std::uint64_t>(f), static_cast<std::uint64_t>(n)});
        const hmm::Sequence s = hmm::sample(m, K, rng);
        const Matrix tokll = hmm::token_loglik(m, s.x);
        const Vector prior = m.pi0.array().log().matrix();
        for (int k = 0; k < K; ++k) {
          const Matrix B = s.x.middleRows(static_cast<Eigen::Index>(k) * P, P);
          const Vector full = hmm::block_posterior(m, B, prior, Summary::Full);
          post_T = std::max(post_T, prob_diff(full, hmm::block_posterior(m, B, prior, Summary::MeanT)));
          post_X = std::max(post_X, prob_diff(full, hmm::block_posterior(m, B, prior, Summary::MeanX)));
        }
        const Matrix ff = hmm::filter_posteriors(m, hmm::block_loglik(m, s.x, tokll, Summary::Full));
        const Matrix fT = hmm::filter_posteriors(m, hmm::block_loglik(m, s.x, tokll, Summary::MeanT));
        const Matrix fX = hmm::filter_posteriors(m, hmm::block_loglik(m, s.x, tokll, Summary::MeanX));
        for (int k = 0; k < K; ++k) {
          filt_T = std::max(filt_T, prob_diff(ff.row(k).transpose(), fT.row(k).transpose()));
          filt_X = std::max(filt_X, prob_diff(ff.row(k).transpose(), fX.row(k).transpose()));
        }
      }
      for (std::size_t j = 0; j < sp.size(); ++j) {
        const hmm::Estimate r = st.risk[j], g = st.gap[j];
        const double pd = sp[j] == Summary::MeanT ? post_T : sp[j] == Summary::MeanX ? post_X : kNaN;
        const double fd = sp[j] == Summary::MeanT ? filt_T : sp[j] == Summary::MeanX ? filt_X : kNaN;
        suff.cell(fn).cell(hmm::summary_name(sp[j])).cell(pd).cell(fd).cell(r.mean).cell(r.se).cell(g.mean).cell(g.se).cell(st.max_abs_gap[j])
            .end_row();
      }
      const std::string where = fmt::format("{} (S = {}, P = {}, q = {}, {} blocks)", fn, S, P, sq, K);
      const double seqT = st.max_abs_gap[1];
      sum_post_T = std::max(sum_post_T, post_T);
      checks.add("R23", "Prop 14: p(z_k | B_k) from the full block equals p(z_k | Tbar_k) (mean of T)",
                 where + fmt::format(": max |difference| over {} blocks", nseq * K), post_T, "<= 1e-14", post_T <= 1e-14,
                 independent("Emission::log_lik_stat(Tbar) vs summed log_density (block_loglik)"));
      checks.add("R23", "Prop 14: filtering p(z_k | B_1:k) from the block means of T equals filtering from the full blocks",
                 where + ": max |difference| over blocks and sequences", filt_T, "<= 1e-13", filt_T <= 1e-13,
                 independent("filter_posteriors on Emission::log_lik_stat(Tbar) vs summed log_density"));
      checks.add("R23", "Prop 14: next-token log-loss with a slow path fed by Pi_mean (of T) equals R_full",
                 where + fmt::format(": max |R_mean - R_full| per sequence ({} sequences)", Ns), seqT, "<= 1e-12", seqT <= 1e-12,
                 independent("MC risks: Emission::log_lik_stat(Tbar) vs summed log_density"));
      for (int j : {2, 3}) {
        const hmm::Estimate g = st.gap[static_cast<std::size_t>(j)];
        checks.add("R23", fmt::format("Pi_{} loses information under persistence: R_{} > R_full", hmm::summary_name(sp[static_cast<std::size_t>(j)]),
                                      hmm::summary_name(sp[static_cast<std::size_t>(j)])),
                   where + fmt::format(": (R_{} - R_full) / stderr", hmm::summary_name(sp[static_cast<std::size_t>(j)])), g.mean / g.se, "> 5",
                   g.mean / g.se > 5.0, qualitative("Prop 14: Pi_stride, Pi_head lose under persistence (R > R_full)"));
      }
      if (control) {
        const hmm::Estimate g = st.gap[6];
        checks.add("R23 control", "latent variance: the block mean of x is NOT sufficient: p(z | xbar) != p(z | B)",
                   where + ": max |p(z | B) - p(z | xbar)| over blocks", post_X, "> 1e-3", post_X > 1e-3,
                   qualitative("C.4 control: p(z | xbar) != p(z | B) for a latent variance"));
        checks.add("R23 control", "latent variance: a slow path fed by the mean of x is strictly worse than R_full",
                   where + ": (R_mean_x - R_full) / stderr", g.mean / g.se, "> 5", g.mean / g.se > 5.0,
                   qualitative("C.4 control: R_mean_x > R_full for a latent variance"));
      } else {
        checks.add("R23", "T linear: the block mean of x is the block mean of T (the same posterior)",
                   where + ": max |p(z | B) - p(z | xbar)| over blocks", post_X, "<= 1e-14", post_X <= 1e-14,
                   independent("Emission::log_lik_mean_x(xbar) vs summed log_density (block_loglik)"));
      }
      progress();
    }
  }

  // ---- Monte Carlo against exact enumeration (the tiny model) ----------------------------------------
  {
    const BlockHmm tiny = symmetric_hmm(tiny_e, 2, eP, pq);
    const auto ex = hmm::exact_risks(tiny, eK, {Summary::Full, Summary::Local});
    const hmm::McStats st = hmm::monte_carlo(tiny, eK, std::min<long>(N, 50000), seed, 0xd0, {Summary::Full, Summary::Local});
    double worst = 0.0;
    for (int j = 0; j < 2; ++j) {
      const hmm::Estimate r = st.risk[static_cast<std::size_t>(j)];
      worst = std::max(worst, std::abs(r.mean - ex[static_cast<std::size_t>(j)]) / r.se);
    }
    checks.add("R22 exact", "Monte Carlo with exact filtering agrees with exact enumeration",
               fmt::format("tiny model, q = {}: max over R_full, R_local of |MC - exact| / stderr", pq), worst, "< 4.5", worst < 4.5,
               independent("hmm::exact_risks: enumeration of all V^(P K) sequences"));
    progress();
  }

  ctx.notes["i_i_d_point_q"] = q_iid;
  ctx.notes["pi0"] = "uniform (the stationary law of the symmetric chain)";
  ctx.notes["risk_positions"] = "next-token log-loss averaged over the tokens of blocks 2..K (block 1 has no history)";
  checks.report(ctx, "coupling-data");
  ctx.summary("gap_exact_q_min", sum_gap_exact);
  ctx.summary("gap_mc_q_min", sum_gap_mc);
  ctx.summary("gap_mc_q_min_stderr", sum_gap_mc_se);
  ctx.summary("gate_gain_bounded", sum_gate_gain);
  ctx.summary("mean_T_posterior_max_diff", sum_post_T);
}

OutputDecl data_outputs() {
  const std::vector<std::pair<std::string, std::string>> predictors = {
      {"full", "every previous block: the Bayes predictor (R_full)"},
      {"local", "the within-block prefix only, with the marginal law of z_k (R_local)"},
      {"mean_T", "the block means of T of every previous block (Pi_mean, Prop 14)"},
      {"mean_x", "the block means of x (the gaussian-variance control, where it is not sufficient)"},
      {"stride", "the last token of every previous block (Pi_stride)"},
      {"head", "the first token of every previous block (Pi_head)"},
      {"prev_block", "the previous block only (whole), nothing older"}};
  const std::vector<std::pair<std::string, std::string>> families = {
      {"categorical", "categorical symbols"}, {"gaussian", "Gaussian vectors with a latent mean"}, {"poisson", "Poisson counts with a latent rate"},
      {"gaussian-variance", "scalar Gaussian with a latent variance (T = (x, x^2): the negative control)"}};
  OutputDecl o;
  o.tables = {
      checks_table(),
      {"risks.csv", "one predictor at one persistence q: its next-token risk and its gap to the Bayes predictor (R22 c)",
       {category("method", "how the risk was computed", {{"exact", "exact enumeration of the tiny categorical model (exact_V, exact_block, exact_blocks)"},
                                                          {"monte_carlo", "Monte Carlo over `sequences` sequences of the preset's model"}}),
        category("emission", "emission family", families), real("q", "persistence q of the symmetric latent chain"),
        category("predictor", "what the predictor of block k sees of blocks 1..k-1", predictors),
        real("risk", "next-token log-loss averaged over the tokens of blocks 2..K", "nat"),
        real("stderr", "its standard error (exact: 0)", "nat"), real("gap", "risk - R_full (paired per sequence)", "nat"),
        real("gap_stderr", "its standard error (exact: 0)", "nat")}},
      {"profile.csv", "one gate amplitude rho of the logistic family: the profile risk R*(rho) (C.3 Step 2, F14), exact on the tiny model",
       {category("setting", "the latent chain", {{"independent", "q = 1/2: independent blocks"}, {"persistent", "q = profile_q"}}),
        real("q", "its persistence q"),
        category("read_in", "the read-in W_r", {{"free", "unbounded"}, {"bounded", "|W_r|_F <= readin_norm"}}),
        real("rho", "gate amplitude rho"), real("risk", "the minimised expected log-loss R*(rho)", "nat"),
        real("w_norm", "|W_r|_F at the optimum"), real("rho_w_norm", "|rho| |W_r|_F"),
        real("lambda", "multiplier of the norm constraint (0: inactive)"), real("R_full", "Bayes risk R_full of the setting", "nat"),
        real("R_local", "block-local risk R_local of the setting", "nat")}},
      {"sufficiency.csv", "one summary statistic of one emission family: posterior, filter and risk against the full blocks (R23)",
       {category("family", "emission family (persistence suff_q)", families),
        category("statistic", "what the slow path sees of the previous blocks", predictors),
        real("posterior_max_diff", "max |p(z_k | B_k) - p(z_k | statistic of B_k)| over blocks of the first <= 200 sequences")
            .may_be_empty("not computed for this statistic (only mean_T and mean_x)"),
        real("filter_max_diff", "max |p(z_k | B_1:k) - p(z_k | statistics of B_1:k)| over blocks and those sequences")
            .may_be_empty("not computed for this statistic (only mean_T and mean_x)"),
        real("risk", "next-token log-loss (Monte Carlo, suff_sequences)", "nat"), real("stderr", "its standard error", "nat"),
        real("gap", "risk - R_full (paired per sequence)", "nat"), real("gap_stderr", "its standard error", "nat"),
        real("max_seq_diff", "max over sequences of |risk - R_full|", "nat")}}};
  o.summaries = {{"gap_exact_q_min", "exact R_local - R_full at the smallest q of q_grid (tiny categorical model)", "nat"},
                 {"gap_mc_q_min", "Monte Carlo R_local - R_full at the smallest q of q_grid (the emission family's model)", "nat"},
                 {"gap_mc_q_min_stderr", "its standard error", "nat"},
                 {"gate_gain_bounded", "R*(0) - min over rho != 0 of R*(rho), persistent setting, bounded read-in (> 0: the gate helps); "
                                       "NaN (empty): rho_grid has no rho != 0", "nat"},
                 {"mean_T_posterior_max_diff", "max over families of |p(z_k | B_k) - p(z_k | Tbar_k)| (Prop 14: 0)"}};
  o.figures = {{"data.png", "risk gaps against persistence q (Monte Carlo; exact), the profile risk R*(rho), R23 gaps per emission family"}};
  return o;
}

std::vector<ParamSpec> data_params() {
  return {
      p_string("emission", "categorical", "emission family of the risk-vs-q sweep (R22 c)", {"categorical", "gaussian", "poisson", "gaussian-variance"}),
      p_int("S", 2, "latent states", 2, 16),
      p_int("V", 4, "symbols of the categorical emissions (>= 2)", 1, 64),
      p_int("dim", 2, "dimension of the Gaussian emission (the variance control is scalar)", 1, 16),
      p_int("block", 8, "block length P (tokens per block)", 1, 256),
      p_int("blocks", 6, "blocks per sequence (K)", 2, 1000),
      p_int("sequences", 100000, "Monte Carlo sequences per q of the sweep", 2, 100000000),
      p_int("suff_sequences", 20000, "Monte Carlo sequences per family of R23", 2, 100000000),
      p_double_list("q_grid", {0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5}, "persistence grid q in [0, 1] (symmetric chain; i.i.d. at q = (S-1)/S); increasing", 0.0, 1.0).increasing(),
      p_double("contrast", 1.5, "scale of the latent's effect on the emissions", 0.0, 100.0, true),
      p_double("rate", 3.0, "Poisson base rate", 0.0, 100.0, true),
      p_int("exact_V", 2, "exact enumeration (R22, profile): symbols", 2, 16),
      p_int("exact_block", 3, "exact enumeration: block length", 1, 18),
      p_int("exact_blocks", 3, "exact enumeration: blocks", 2, 18),
      p_double("profile_q", 0.1, "persistence of the profile-risk and MC-vs-exact model", 0.0, 1.0),
      p_double("suff_q", 0.1, "persistence of the R23 sufficiency runs", 0.0, 1.0),
      p_double_list("rho_grid", {-2, -1, -0.5, -0.25, -0.1, 0, 0.1, 0.25, 0.5, 1, 2}, "gate amplitudes rho of the profile risk; increasing", -1e6, 1e6).increasing(),
      p_double("readin_norm", 1.0, "bound on |W_r|_F of the bounded read-in (F14)", 0.0, 1e6, true),
      p_int("seed", 0, "base seed", 0, kMaxSeed),
  };
}

const ExperimentRegistration reg_coupling_data{with_renamed(with_outputs(with_smoke(Experiment{
    "coupling-data",
    "Coupling paper §5.3 data side: block HMM risks vs persistence (Prop 13, R22, F13, F14) and block-mean sufficiency (Prop 14, R23)",
    data_params(), run_data, "coupling-data",
    [](const Params& p) {
      // Times measured on one thread (per token of a sequence): the q sweep's filter and predictors
      // (0.16 us per token, growing with the sequence: x (1 + T / 96)), R23's runs of the 4 emission
      // families (2.1 us per token), both on every thread and 1.75x at S = 4; the exact enumeration
      // (1 us per token of each of V^(P K) sequences) and the rest (0.8 s).
      const double T = static_cast<double>(p.get_int("block")) * static_cast<double>(p.get_int("blocks"));
      const double n = static_cast<double>(p.get_int("sequences")), ns = static_cast<double>(p.get_int("suff_sequences"));
      const double nq = static_cast<double>(p.get_double_list("q_grid").size()), S = static_cast<double>(p.get_int("S"));
      const double s_factor = 0.25 + 0.375 * S;
      const double Te = static_cast<double>(p.get_int("exact_block")) * static_cast<double>(p.get_int("exact_blocks"));
      double exact = std::pow(static_cast<double>(p.get_int("exact_V")), Te);
      if (exact > 262144.0) exact = 0;  // more than 2^18 sequences: the run refuses them before any work
      cost::Work w;
      w.add_timed(2000.0 * T * n * nq, n * nq * T * (1.0 + T / 96.0) * 0.16e-6 * s_factor, true);
      w.add_timed(800.0 * T * ns, ns * T * 2.1e-6 * s_factor, true);
      w.add_timed(1000.0 * exact * Te, exact * Te * 1e-6).add_timed(1e9, 0.8);
      return w.estimate(64e6, "sequences x tokens x predictors (streamed in chunks)");
    }}, {{"sequences", "10"}, {"suff_sequences", "10"}, {"blocks", "2"}, {"exact_block", "2"}, {"exact_blocks", "2"}}), data_outputs()),
    {{"P", "block"}, {"exact_P", "exact_block"}})};

}  // namespace
}  // namespace tokdyn
