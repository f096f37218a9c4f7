// The data side of the coupling paper (§5.3, Props 13-14): the block-level HMM of analysis/block_hmm
// and the preset coupling-data.
//   * filtering: the chain rule (sum of next-token losses over a whole sequence = -log p(x)) on
//     every sequence of a tiny model, the predictive summing to 1;
//   * R22 (Prop 13) by exact enumeration (V = 2, P = 3, 3 blocks, 512 sequences): (a) identical rows
//     of Q and (b) deterministic latents give R_full = R_local per sequence; (c) persistence gives a
//     gap growing as q -> 0, zero at q = 1/2; F13: a random constant latent gives a gap; the
//     profile risk (flat under independence; bounded read-in decreasing; free read-in a step, F14);
//   * R23 (Prop 14): posteriors and filters from Tbar equal those from full blocks (Gaussian,
//     Poisson, categorical); Pi_mean reaches R_full, Pi_stride / Pi_head lose; the variance control;
//   * Monte Carlo: agrees with enumeration; the same bits at 1 and 2 threads;
//   * the preset at small size (every check passes) and its bad input (exit 2, one line).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <omp.h>

#include "test_util.hpp"
#include "tokdyn/analysis/block_hmm.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using namespace tokdyn::hmm;
using tokdyn::testing::run_cli;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;

namespace {

Emission tiny_categorical() {
  Matrix logits(2, 2);
  logits << 0.9, -0.7, -1.1, 0.6;
  return Emission::categorical(logits);
}

BlockHmm tiny(const Matrix& Q, const Vector& pi0, int P = 3) {
  BlockHmm m{Q, pi0, P, tiny_categorical()};
  m.validate();
  return m;
}

BlockHmm symmetric(const Emission& e, double q, int P) {
  const int S = e.states();
  BlockHmm m{symmetric_kernel(S, q), Vector::Constant(S, 1.0 / S), P, e};
  m.validate();
  return m;
}

Emission gaussian2() {
  Matrix mu(2, 2), Sigma(2, 2);
  mu << 0.8, -0.4, -0.6, 0.9;
  Sigma << 1.0, 0.3, 0.3, 0.7;
  return Emission::gaussian(mu, Sigma);
}
Emission poisson2() {
  Vector r(2);
  r << 1.8, 4.5;
  return Emission::poisson(r);
}
Emission categorical3() {
  Matrix logits(2, 3);
  logits << 0.5, -0.3, 0.1, -0.8, 0.7, 0.2;
  return Emission::categorical(logits);
}
Emission variance2() {
  Vector m = Vector::Zero(2), s(2);
  s << 0.6, 1.6;
  return Emission::gaussian_variance(m, s);
}

double max_prob_diff(const Vector& a, const Vector& b) { return (a.array().exp() - b.array().exp()).abs().maxCoeff(); }

}  // namespace

// ---- Filtering --------------------------------------------------------------------------------------

TEST(CouplingDataHmm, ChainRuleAndNormalisationOnEverySequence) {
  const BlockHmm m = tiny(symmetric_kernel(2, 0.2), Vector::Constant(2, 0.5));
  double mass = 0.0, worst = 0.0;
  enumerate(m, 3, [&](const Matrix& x, double p) {
    mass += p;
    // The full predictive's losses over every token (block 1 included) telescope to -log p(x).
    const double r = sequence_risk(m, x, Summary::Full, 0) * static_cast<double>(x.rows());
    worst = std::max(worst, std::abs(r + std::log(p)));
  });
  EXPECT_NEAR(mass, 1.0, 1e-12);
  EXPECT_LT(worst, 1e-12);
  // p(x_t = 0 | ...) + p(x_t = 1 | ...) = 1 at a within-block position: change the last token.
  Matrix x = Matrix::Zero(9, 1);
  x(4, 0) = 1;
  const Matrix ll0 = token_loglik(m, x);
  const Vector l0 = token_losses(ll0, predictor_priors(m, x, ll0, Summary::Full), 3);
  x(5, 0) = 1;
  const Matrix ll1 = token_loglik(m, x);
  const Vector l1 = token_losses(ll1, predictor_priors(m, x, ll1, Summary::Full), 3);
  EXPECT_NEAR(std::exp(-l0(5)) + std::exp(-l1(5)), 1.0, 1e-14);
}

// ---- R22 (Prop 13), exact enumeration ----------------------------------------------------------------

TEST(CouplingDataR22, IndependentBlocksGiveEqualRisksPerSequence) {
  Matrix rows(2, 2);
  rows << 0.3, 0.7, 0.3, 0.7;
  Vector r(2);
  r << 0.3, 0.7;
  Matrix perm(2, 2);
  perm << 0, 1, 1, 0;
  const Vector e1 = Vector::Unit(2, 0);
  // (a) identical rows; (b) a deterministic constant and a deterministic cycling latent.
  for (const BlockHmm& m : {tiny(rows, r), tiny(Matrix::Identity(2, 2), e1), tiny(perm, e1)}) {
    double mass = 0.0, maxd = -1.0;
    const auto ex = exact_risks(m, 3, {Summary::Full, Summary::Local}, 1, &mass, &maxd);
    EXPECT_NEAR(mass, 1.0, 1e-12);
    EXPECT_LE(maxd, 1e-14);
    EXPECT_GE(maxd, 0.0);
    EXPECT_NEAR(ex[0], ex[1], 1e-15);
  }
}

TEST(CouplingDataR22, PersistenceGapPositiveAndGrowingAsQFalls) {
  const std::vector<double> qs = {0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5};
  std::vector<double> gap;
  for (double q : qs) {
    double maxd = 0.0;
    const auto ex = exact_risks(tiny(symmetric_kernel(2, q), Vector::Constant(2, 0.5)), 3, {Summary::Full, Summary::Local}, 1, nullptr, &maxd);
    gap.push_back(ex[1] - ex[0]);
    if (q == 0.5) {
      EXPECT_LE(maxd, 1e-14);
    }
  }
  for (std::size_t i = 0; i + 1 < qs.size(); ++i) {
    EXPECT_GT(gap[i], gap[i + 1]) << "q = " << qs[i];
    if (qs[i] < 0.5) {
      EXPECT_GT(gap[i], 0.0);
    }
  }
  EXPECT_LE(std::abs(gap.back()), 1e-15);
  // F13: a random but constant latent (Q = I, pi_0 uniform) is the most persistent case.
  const auto f13 = exact_risks(tiny(Matrix::Identity(2, 2), Vector::Constant(2, 0.5)), 3, {Summary::Full, Summary::Local});
  EXPECT_GT(f13[1] - f13[0], gap.front());
}

TEST(CouplingDataR22, ProfileRiskFlatUnderIndependenceAndF14) {
  const std::vector<double> rhos = {-1.0, -0.25, 0.0, 0.1, 0.25, 0.5, 2.0};
  const double inf = std::numeric_limits<double>::infinity();
  // Independent blocks: R*(rho) = R*(0) for free and bounded read-in (C.3 Step 2).
  {
    const ProfileData d = profile_data_exact(tiny(symmetric_kernel(2, 0.5), Vector::Constant(2, 0.5)), 3);
    const double r0 = fit_profile(d, 0.0).risk;
    for (double rho : rhos) {
      EXPECT_NEAR(fit_profile(d, rho).risk, r0, 1e-9) << rho;
      EXPECT_NEAR(fit_profile(d, rho, 0.5).risk, r0, 1e-9) << rho;
    }
  }
  // Persistence: bounded read-in decreases as |rho| opens (strictly while the bound binds);
  // free read-in: R* is one value for every rho != 0 and |rho| |W_r| is constant (F14).
  const BlockHmm m = tiny(symmetric_kernel(2, 0.1), Vector::Constant(2, 0.5));
  const ProfileData d = profile_data_exact(m, 3);
  const auto bayes = exact_risks(m, 3, {Summary::Full, Summary::Local});
  const ProfileFit f0 = fit_profile(d, 0.0);
  EXPECT_GE(f0.risk, bayes[1] - 1e-12);
  const ProfileFit f1 = fit_profile(d, 1.0, inf);
  EXPECT_GT(f0.risk - f1.risk, 1e-4);
  for (double rho : rhos) {
    if (rho == 0.0) continue;
    const ProfileFit f = fit_profile(d, rho, inf);
    EXPECT_NEAR(f.risk, f1.risk, 1e-9) << rho;
    EXPECT_NEAR(std::abs(rho) * f.w_norm, f1.w_norm, 1e-6 * f1.w_norm) << rho;
    EXPECT_GE(f.risk, bayes[0] - 1e-12);
  }
  const double c = 0.5 * f1.w_norm;  // binds for |rho| < 2
  double prev = f0.risk;
  for (double rho : {0.1, 0.25, 0.5, 1.0, 2.0}) {
    const ProfileFit f = fit_profile(d, rho, c);
    const ProfileFit g = fit_profile(d, -rho, c);
    EXPECT_NEAR(f.risk, g.risk, 1e-10);
    EXPECT_LE(f.w_norm, c * (1 + 1e-10));
    if (rho < 2.0) {
      EXPECT_GT(f.lambda, 0.0);
      EXPECT_NEAR(f.w_norm, c, 1e-9 * c);
      EXPECT_LT(f.risk, prev - 1e-6) << rho;
    } else {
      EXPECT_NEAR(f.risk, f1.risk, 1e-9);
    }
    prev = f.risk;
  }
}

// ---- R23 (Prop 14) ---------------------------------------------------------------------------------

TEST(CouplingDataR23, BlockMeanIsSufficientForExponentialFamilies) {
  for (const Emission& e : {gaussian2(), poisson2(), categorical3()}) {
    const BlockHmm m = symmetric(e, 0.1, 6);
    double post = 0.0, filt = 0.0, risk = 0.0;
    for (std::uint64_t n = 0; n < 60; ++n) {
      Rng rng(11, {n});
      const Sequence s = sample(m, 5, rng);
      Vector prior(2);
      prior << std::log(0.3), std::log(0.7);
      for (int k = 0; k < 5; ++k) {
        const Matrix B = s.x.middleRows(k * 6, 6);
        post = std::max(post, max_prob_diff(block_posterior(m, B, prior, Summary::Full), block_posterior(m, B, prior, Summary::MeanT)));
        post = std::max(post, max_prob_diff(block_posterior(m, B, prior, Summary::Full), block_posterior(m, B, prior, Summary::MeanX)));
      }
      const Matrix ll = token_loglik(m, s.x);
      const Matrix a = filter_posteriors(m, block_loglik(m, s.x, ll, Summary::Full));
      const Matrix b = filter_posteriors(m, block_loglik(m, s.x, ll, Summary::MeanT));
      for (int k = 0; k < 5; ++k) filt = std::max(filt, max_prob_diff(a.row(k).transpose(), b.row(k).transpose()));
      risk = std::max(risk, std::abs(sequence_risk(m, s.x, Summary::Full) - sequence_risk(m, s.x, Summary::MeanT)));
    }
    EXPECT_LE(post, 1e-14) << family_name(e.family());
    EXPECT_LE(filt, 1e-13) << family_name(e.family());
    EXPECT_LE(risk, 1e-13) << family_name(e.family());
    // Pi_stride and Pi_head lose information under persistence.
    const Matrix loss = monte_carlo_losses(m, 4, 3000, 5, 1, {Summary::Full, Summary::MeanT, Summary::Stride, Summary::Head});
    EXPECT_LE((loss.col(0) - loss.col(1)).cwiseAbs().maxCoeff(), 1e-13);
    for (int j : {2, 3}) {
      const Estimate g = paired_gap(loss, j, 0);
      EXPECT_GT(g.mean / g.se, 5.0) << family_name(e.family()) << " predictor " << j;
    }
  }
}

TEST(CouplingDataR23, VarianceLatentNegativeControl) {
  const BlockHmm m = symmetric(variance2(), 0.1, 6);
  double postT = 0.0, postX = 0.0;
  for (std::uint64_t n = 0; n < 40; ++n) {
    Rng rng(12, {n});
    const Sequence s = sample(m, 4, rng);
    const Vector prior = Vector::Constant(2, std::log(0.5));
    for (int k = 0; k < 4; ++k) {
      const Matrix B = s.x.middleRows(k * 6, 6);
      const Vector full = block_posterior(m, B, prior, Summary::Full);
      postT = std::max(postT, max_prob_diff(full, block_posterior(m, B, prior, Summary::MeanT)));
      postX = std::max(postX, max_prob_diff(full, block_posterior(m, B, prior, Summary::MeanX)));
    }
  }
  EXPECT_LE(postT, 1e-14);  // the mean of T = (x, x^2) is sufficient
  EXPECT_GT(postX, 1e-3);   // the mean of x is not
  const Matrix loss = monte_carlo_losses(m, 4, 3000, 6, 2, {Summary::Full, Summary::MeanT, Summary::MeanX});
  EXPECT_LE((loss.col(0) - loss.col(1)).cwiseAbs().maxCoeff(), 1e-13);
  const Estimate g = paired_gap(loss, 2, 0);
  EXPECT_GT(g.mean / g.se, 5.0);
}

// ---- Monte Carlo -----------------------------------------------------------------------------------

TEST(CouplingDataMonteCarlo, AgreesWithEnumerationAndSameBitsAtOneAndTwoThreads) {
  const BlockHmm m = tiny(symmetric_kernel(2, 0.1), Vector::Constant(2, 0.5));
  const std::vector<Summary> preds = {Summary::Full, Summary::Local, Summary::PrevBlock, Summary::Stride};
  const auto ex = exact_risks(m, 3, preds);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Matrix a = monte_carlo_losses(m, 3, 20000, 3, 7, preds);
  omp_set_num_threads(2);
  const Matrix b = monte_carlo_losses(m, 3, 20000, 3, 7, preds);
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<std::size_t>(a.size())), 0);
  for (int j = 0; j < 4; ++j) {
    const Estimate r = column_estimate(a, j);
    EXPECT_LT(std::abs(r.mean - ex[static_cast<std::size_t>(j)]), 4.5 * r.se) << summary_name(preds[static_cast<std::size_t>(j)]);
  }
  // The streamed statistics (chunks of 1000, combined in order) equal those of the stored losses,
  // with the same bits at 1 and 2 threads.
  omp_set_num_threads(1);
  const McStats s1 = monte_carlo(m, 3, 20000, 3, 7, preds, 1, 1000);
  omp_set_num_threads(2);
  const McStats s2 = monte_carlo(m, 3, 20000, 3, 7, preds, 1, 1000);
  omp_set_num_threads(saved);
  for (int j = 0; j < 4; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    const Estimate r = column_estimate(a, j), g = paired_gap(a, j, 0);
    EXPECT_NEAR(s1.risk[jj].mean, r.mean, 1e-11);  // two summation orders over 2e4 terms
    EXPECT_NEAR(s1.risk[jj].se, r.se, 1e-9 * r.se);
    EXPECT_NEAR(s1.gap[jj].mean, g.mean, 1e-11);
    EXPECT_NEAR(s1.gap[jj].se, g.se, 1e-9 * g.se + 1e-300);
    EXPECT_EQ(s1.max_abs_gap[jj], (a.col(j) - a.col(0)).cwiseAbs().maxCoeff());
    EXPECT_EQ(s1.risk[jj].mean, s2.risk[jj].mean);
    EXPECT_EQ(s1.gap[jj].se, s2.gap[jj].se);
  }
  // Ordering of the exact risks: full <= prev_block <= local; stride <= local.
  EXPECT_LT(ex[0], ex[2]);
  EXPECT_LT(ex[2], ex[1]);
  EXPECT_LT(ex[3], ex[1]);
}

TEST(CouplingDataHmm, LibraryRefusesBadModels) {
  Matrix bad(2, 2);
  bad << 0.6, 0.6, 0.5, 0.5;
  EXPECT_THROW(tiny(bad, Vector::Constant(2, 0.5)), std::invalid_argument);
  EXPECT_THROW(tiny(symmetric_kernel(2, 0.2), Vector::Constant(2, 0.6)), std::invalid_argument);
  EXPECT_THROW(tiny(symmetric_kernel(2, 0.2), Vector::Constant(2, 0.5), 0), std::invalid_argument);
  EXPECT_THROW(symmetric_kernel(2, 1.5), std::invalid_argument);
  EXPECT_THROW(symmetric_kernel(1, 0.5), std::invalid_argument);
  EXPECT_THROW(Emission::categorical(Matrix::Zero(2, 1)), std::invalid_argument);
  Matrix notpd(2, 2);
  notpd << 1.0, 2.0, 2.0, 1.0;
  EXPECT_THROW(Emission::gaussian(Matrix::Zero(2, 2), notpd), std::invalid_argument);
  EXPECT_THROW(Emission::poisson(Vector::Constant(2, -1.0)), std::invalid_argument);
  EXPECT_THROW(parse_family("beta"), std::invalid_argument);
  const ProfileData d = profile_data_exact(tiny(symmetric_kernel(2, 0.2), Vector::Constant(2, 0.5)), 2);
  EXPECT_THROW(fit_profile(d, std::nan(""), 1.0), std::invalid_argument);
  EXPECT_THROW(fit_profile(d, 0.5, 0.0), std::invalid_argument);
}

// ---- The preset ------------------------------------------------------------------------------------

namespace {
using Sets = std::vector<std::pair<std::string, std::string>>;
const Sets kSmall = {{"sequences", "3000"}, {"suff_sequences", "2000"}, {"q_grid", "0.02,0.1,0.3,0.5"},
                     {"rho_grid", "-0.5,0,0.1,0.25,1"}, {"block", "6"}, {"blocks", "4"}};

std::vector<std::string> lines(const fs::path& f) {
  std::ifstream in(f);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
}  // namespace

TEST(CouplingDataPreset, EveryCheckPassesAtSmallSize) {
  TempDir tmp;
  const Experiment* e = find_experiment("coupling-data");
  ASSERT_NE(e, nullptr);
  const fs::path out = tmp.path() / "a";
  run_experiment(*e, resolve_params(*e, kSmall), out, 2, /*figures=*/false, /*show_progress=*/false);
  const auto rows = lines(out / "checks.csv");
  ASSERT_GE(rows.size(), 40u);
  EXPECT_EQ(rows[0], "check,statement,quantity,value,expected,reference_kind,reference,pass");
  int r22 = 0, r23 = 0, f13 = 0, f14 = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].substr(rows[i].rfind(',') + 1), "true") << rows[i];
    r22 += rows[i].rfind("R22", 0) == 0;
    r23 += rows[i].rfind("R23", 0) == 0;
    f13 += rows[i].rfind("F13", 0) == 0;
    f14 += rows[i].rfind("F14", 0) == 0;
  }
  EXPECT_GT(r22, 10);
  EXPECT_GT(r23, 16);
  EXPECT_EQ(f13, 2);
  EXPECT_EQ(f14, 3);
  EXPECT_EQ(lines(out / "risks.csv").size(), 1u + 2u * 4u * 6u);  // exact and MC, 4 q, 6 predictors
  EXPECT_EQ(lines(out / "profile.csv").size(), 1u + 4u * 5u);     // 2 settings x 2 read-ins x 5 rho
  EXPECT_EQ(lines(out / "sufficiency.csv").size(), 1u + 3u * 6u + 7u);
}

TEST(CouplingDataPreset, SameBitsAtOneAndTwoThreadsForAnotherEmission) {
  TempDir tmp;
  const Experiment* e = find_experiment("coupling-data");
  ASSERT_NE(e, nullptr);
  Sets sets = {{"sequences", "1500"}, {"suff_sequences", "300"}, {"q_grid", "0.05,0.5"}, {"rho_grid", "0,1"},
               {"block", "4"},            {"blocks", "3"},           {"emission", "gaussian-variance"}};
  run_experiment(*e, resolve_params(*e, sets), tmp.path() / "t1", 1, false, false);
  run_experiment(*e, resolve_params(*e, sets), tmp.path() / "t2", 2, false, false);
  for (const char* f : {"checks.csv", "risks.csv", "sufficiency.csv", "profile.csv"})
    EXPECT_EQ(slurp(tmp.path() / "t1" / f), slurp(tmp.path() / "t2" / f)) << f;
  // The control's sweep includes the mean of x (8 rows of the 2 q values x 7 predictors are MC).
  EXPECT_EQ(lines(tmp.path() / "t1" / "risks.csv").size(), 1u + 2u * 6u + 2u * 7u);
}

TEST(CouplingDataPreset, BadInputExitsTwoWithOneLine) {
  TempDir tmp;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--set", "q_grid="}, "q_grid"},
      {{"--set", "q_grid=0.1,nan"}, "q_grid"},
      {{"--set", "q_grid=0.1,inf"}, "q_grid"},
      {{"--set", "q_grid=0.1,1.5"}, "q_grid"},
      {{"--set", "q_grid=-0.1"}, "q_grid"},
      {{"--set", "q_grid=0.1,0.2,0.1"}, "q_grid"},
      {{"--set", "rho_grid="}, "rho_grid"},
      {{"--set", "rho_grid=0,1e999"}, "rho_grid"},
      {{"--set", "block=0"}, "block"},
      {{"--set", "V=1"}, "V"},
      {{"--set", "emission=gaussian-variance", "--set", "dim=2"}, "dim"},
      {{"--set", "emission=beta"}, "emission"},
      {{"--set", "exact_block=9", "--set", "exact_blocks=9"}, "exact_block"},
  };
  for (const auto& [sets, key] : cases) {
    std::vector<std::string> args = {"run", "coupling-data", "--out", "res", "--no-figures", "--set", "sequences=10", "--set", "suff_sequences=10"};
    args.insert(args.end(), sets.begin(), sets.end());
    const auto r = run_cli(tmp.path(), args);
    EXPECT_EQ(r.code, 2) << key << ": " << r.err;
    EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(tmp.path() / "res")) << key;
  }
}
