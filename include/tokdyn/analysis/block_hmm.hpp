#pragma once
// The data side of the coupling paper (§5.3, Props 13-14, App. C.3-C.4): a block-level hidden Markov
// model. A latent chain z_1, z_2, ... with kernel Q and initial law pi_0; given the latents, block
// B_k = (x_{(k-1)P+1}, ..., x_{kP}) holds P tokens drawn i.i.d. from the emission e(. | z_k).
//
//   * emissions (exponential families, Prop 14): categorical over V symbols (logits theta(z), T(x) =
//     onehot(x)), Gaussian N(mu(z), Sigma) (T(x) = x), Poisson (T(x) = x) and the negative control
//     N(m(z), s(z)^2) with a latent-dependent variance (T(x) = (x, x^2): the block mean of x alone is
//     not sufficient);
//   * exact forward filtering at block level in log space, the within-block token-by-token
//     posterior and the next-token predictive p(x_{t+1} | prefix, history) (for continuous emissions
//     the log predictive density);
//   * predictors whose history is a summary of the previous blocks (full blocks, block mean of T =
//     Pi_mean, last token = Pi_stride, first token = Pi_head, the previous block only, none = local);
//   * exact enumeration (categorical, tiny cases) and Monte Carlo with exact filtering, threaded over
//     sequences (one random stream per sequence, results written per sequence and reduced in a fixed
//     order: the same bits at any thread count);
//   * the profile risk R*(rho) of Prop 13's proof (C.3) for the convex logistic family logits =
//     f_theta(prefix) + rho W_r psi(previous block mean), free or norm-constrained W_r (flag F14).
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "tokdyn/core/rng.hpp"

namespace tokdyn::hmm {

using Matrix = Eigen::MatrixXd;
using Vector = Eigen::VectorXd;

enum class Family { Categorical, Gaussian, Poisson, GaussianVariance };
std::string family_name(Family f);
/// "categorical" | "gaussian" | "poisson" | "gaussian-variance" (std::invalid_argument otherwise).
Family parse_family(const std::string& name);

/// Per-token emission e(x | z) of an exponential family, e = h(x) exp(<T(x), theta(z)> - A(theta(z))).
/// A token is a row of `dim()` doubles (a categorical symbol or a Poisson count is stored as a double).
class Emission {
 public:
  /// logits: S x V (any real logits; theta(z) = logits(z, .), A = log-sum-exp).
  static Emission categorical(const Matrix& logits);
  /// mu: S x D means, Sigma: D x D shared covariance (symmetric positive definite).
  static Emission gaussian(const Matrix& mu, const Matrix& Sigma);
  /// rates: S positive rates lambda(z) <= 500 (theta = log lambda, A = lambda).
  static Emission poisson(const Vector& rates);
  /// Scalar N(mean(z), sd(z)^2): theta = (m/s^2, -1/(2 s^2)), T = (x, x^2).
  static Emission gaussian_variance(const Vector& mean, const Vector& sd);

  Family family() const { return family_; }
  int states() const { return S_; }
  int dim() const { return family_ == Family::Gaussian ? static_cast<int>(mu_.cols()) : 1; }
  /// Dimension of T(x): V, D, 1, 2.
  int stat_dim() const;
  int symbols() const { return family_ == Family::Categorical ? static_cast<int>(logp_.cols()) : 0; }
  /// Categorical: the normalised log-probabilities (S x V).
  const Matrix& log_probs() const { return logp_; }

  void sample(Rng& rng, int z, double* x) const;
  /// log e(x | z), the full density (with h(x)).
  double log_density(const double* x, int z) const;
  /// Adds T(x) to `acc` (stat_dim entries).
  void add_stat(const double* x, double* acc) const;
  /// <Tsum, theta(z)> - n A(theta(z)): the block likelihood as a function of z through the sum of
  /// T over n tokens (eq. of App. C.4; the factor prod h(x_t) does not depend on z and is dropped).
  double log_lik_stat(const Vector& Tsum, int n, int z) const;
  /// log density of the block mean of x (not of T) given z, for n tokens: Gaussian N(mu, Sigma/n),
  /// Poisson (sum ~ Poisson(n lambda)), categorical (the multinomial of the counts, = the T form),
  /// variance control N(m, s^2/n) — which is not sufficient (Prop 14's negative control).
  double log_lik_mean_x(const double* xbar, int n, int z) const;

 private:
  Family family_ = Family::Categorical;
  int S_ = 0;
  Matrix logp_, probs_;      // categorical
  Matrix mu_, Sigma_, Sinv_, Sinv_mu_;  // Gaussian (Sinv_mu_: S x D rows Sigma^-1 mu(z))
  Matrix L_;                 // Cholesky factor of Sigma
  Vector A_;                 // A(theta(z)) per state (Gaussian: 1/2 mu' Sigma^-1 mu)
  double logdet_ = 0.0;      // log det(2 pi Sigma)
  Vector rate_, mean_, sd_;  // Poisson; variance control
};

/// The block HMM: Q(i, j) = P(z_{k+1} = j | z_k = i) (rows stochastic), pi_0, block length P.
struct BlockHmm {
  Matrix Q;
  Vector pi0;
  int P = 1;
  Emission e;
  /// std::invalid_argument unless Q is S x S with stochastic rows, pi0 a law on S states, P >= 1.
  void validate() const;
  int states() const { return static_cast<int>(Q.rows()); }
};

/// The symmetric chain with persistence q: stay with probability 1 - q, jump to each other state
/// with q/(S-1) (S = 2: [[1-q, q], [q, 1-q]]). The latents are i.i.d. at q = (S-1)/S.
Matrix symmetric_kernel(int S, double q);

/// One sampled sequence of K blocks: x ((K P) x dim) and the latents z (K).
struct Sequence {
  Matrix x;
  std::vector<int> z;
};
Sequence sample(const BlockHmm& m, int K, Rng& rng);

/// The history a predictor of block k sees about blocks 1..k-1 (Prop 13/14 predictors).
enum class Summary {
  Full,       ///< every previous block (the Bayes predictor: R_full)
  Local,      ///< nothing: the within-block prefix only, with the marginal law of z_k (R_local)
  MeanT,      ///< the block means of T of every previous block (Pi_mean, Prop 14)
  MeanX,      ///< the block means of x (= MeanT when T is linear; the negative control otherwise)
  Stride,     ///< the last token of every previous block (Pi_stride)
  Head,       ///< the first token of every previous block (Pi_head)
  PrevBlock,  ///< the previous block only (whole), nothing older
};
std::string summary_name(Summary s);

/// log e(x_t | z) for every token: T x S.
Matrix token_loglik(const BlockHmm& m, const Matrix& x);
/// Per-block log-likelihood of each block's summary: K x S (Full, MeanT, MeanX, Stride, Head; for
/// Local and PrevBlock the full blocks' likelihoods).
Matrix block_loglik(const BlockHmm& m, const Matrix& x, const Matrix& tokll, Summary s);
/// Forward filtering at block level in log space (§5.3, App. C.4): row k = log p(z_k | summaries of blocks
/// < k) (the predictive prior of block k), from per-block log-likelihoods of the summaries.
Matrix filter_priors(const BlockHmm& m, const Matrix& blockll);
/// Row k = log p(z_k | summaries of blocks <= k) (the filtered posterior).
Matrix filter_posteriors(const BlockHmm& m, const Matrix& blockll);
/// The priors of block k for any predictor: Full/MeanT/MeanX/Stride/Head by filter_priors of their
/// summaries, Local by the marginals pi_0 Q^(k-1), PrevBlock from block k-1 alone.
Matrix predictor_priors(const BlockHmm& m, const Matrix& x, const Matrix& tokll, Summary s);
/// -log p(x_t | within-block prefix, block prior) for every token t (the within-block posterior
/// updated token by token; for continuous emissions a negative log density).
Vector token_losses(const Matrix& tokll, const Matrix& priors, int P);
/// Mean of token_losses over the tokens of blocks first_block.. (0-based), i.e. next-token
/// prediction "within block k+1" for k >= first_block.
double sequence_risk(const BlockHmm& m, const Matrix& x, Summary s, int first_block = 1);
/// log p(x) by the forward algorithm (all K blocks).
double log_joint(const BlockHmm& m, const Matrix& x);
/// log p(z_k | B_k) for one block under the prior log_prior, from the full block or from its mean
/// of T (Tbar) or of x.
Vector block_posterior(const BlockHmm& m, const Matrix& block, const Vector& log_prior, Summary s);

/// Exact enumeration of every categorical sequence of K blocks (V^(K P) <= 2^22), calling
/// f(x, p(x)) in lexicographic order.
void enumerate(const BlockHmm& m, int K, const std::function<void(const Matrix& x, double p)>& f);
/// Exact risks E[sequence_risk] for each predictor by enumeration; also returns sum of p(x) in `mass`.
std::vector<double> exact_risks(const BlockHmm& m, int K, const std::vector<Summary>& preds, int first_block = 1,
                                double* mass = nullptr, double* max_abs_gap_first_two = nullptr);

/// Monte Carlo with exact filtering: sequence n is drawn from Rng(seed, {stream, n}); loss(n, j) =
/// sequence_risk of predictor j. Threaded over sequences (OpenMP, static), each writes its row.
Matrix monte_carlo_losses(const BlockHmm& m, int K, long N, std::uint64_t seed, std::uint64_t stream,
                          const std::vector<Summary>& preds, int first_block = 1);

struct Estimate {
  double mean = 0.0, se = 0.0;
};

/// Monte Carlo summary of each predictor j against the first one (preds[0], normally Full).
struct McStats {
  long n = 0;
  std::vector<Estimate> risk;        ///< mean and standard error of the per-sequence risk
  std::vector<Estimate> gap;         ///< paired: risk_j - risk_0 per sequence
  std::vector<double> max_abs_gap;   ///< max over sequences of |risk_j - risk_0|
};
/// The same sequences and losses as monte_carlo_losses, without holding them: fixed chunks of
/// `chunk` sequences (threaded over chunks, OpenMP static), each reduced in sequence order (Welford),
/// the chunks combined in chunk order (Chan et al.). The bits depend on the chunk size, never on the
/// thread count.
McStats monte_carlo(const BlockHmm& m, int K, long N, std::uint64_t seed, std::uint64_t stream, const std::vector<Summary>& preds,
                    int first_block = 1, long chunk = 4096);
/// Mean and standard error of a column (summed in index order).
Estimate column_estimate(const Matrix& loss, int j);
/// Paired difference of columns a - b: mean and standard error.
Estimate paired_gap(const Matrix& loss, int a, int b);

// ---- Profile risk R*(rho) (Prop 13, proof C.3; flag F14) ------------------------------------------
/// Weighted next-token data for the logistic family: features phi(prefix) = (1, [t = 0], prefix
/// frequencies of symbols 0..V-2), psi = previous block's mean of onehot(x), symbols 0..V-2 (the
/// (C2) injection of Pi_mean of block k-1), the label, and weights summing to 1.
struct ProfileData {
  Matrix phi, psi;
  std::vector<int> y;
  Vector w;
  int V = 2;
};
/// From exact enumeration (categorical): weights p(x) / (tokens counted), tokens of blocks 2..K.
ProfileData profile_data_exact(const BlockHmm& m, int K);

struct ProfileFit {
  double risk = 0.0;     ///< the minimised expected log-loss R*(rho)
  double w_norm = 0.0;   ///< |W_r|_F at the optimum
  double lambda = 0.0;   ///< the multiplier of the norm constraint (0 when inactive)
  int newton_steps = 0;
};
/// R*(rho) = min over theta, W_r of the expected log-loss of logits = Theta phi + rho W_r psi (the last
/// symbol's logit pinned at 0), |W_r|_F <= norm_bound (infinity: free W_r). Convex: Newton with
/// backtracking; the constraint through its multiplier (bisection on lambda of the ridge (lambda/2)
/// |W_r|^2 until |W_r| = norm_bound).
ProfileFit fit_profile(const ProfileData& d, double rho, double norm_bound = std::numeric_limits<double>::infinity());

}  // namespace tokdyn::hmm
