// The block-level HMM of the coupling paper's §5.3 (Props 13-14, App. C.3-C.4): emissions, sampling,
// exact forward filtering in log space, within-block predictives, exact enumeration, Monte Carlo and
// the profile risk of Prop 13's proof. See block_hmm.hpp. Longer than 700 lines on purpose: the
// profile risk's data are built from the same enumeration and its losses from the same log-sum-exp
// as the filter's; one translation unit keeps those helpers private.
#include "tokdyn/analysis/block_hmm.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "tokdyn/core/parallel.hpp"
#include "tokdyn/core/constants.hpp"

namespace tokdyn::hmm {
namespace {

using tokdyn::kInf;
const double kLog2Pi = std::log(2.0 * M_PI);

/// log sum exp of n values; -inf when every value is -inf.
double lse(const double* v, int n) {
  double mx = -kInf;
  for (int i = 0; i < n; ++i) mx = std::max(mx, v[i]);
  if (mx == -kInf) return -kInf;
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += std::exp(v[i] - mx);
  return mx + std::log(s);
}
double lse(const Vector& v) { return lse(v.data(), static_cast<int>(v.size())); }

/// log(sum_z' exp(a(z')) Q(z', z)) for every z: the prediction step of the filter.
Vector predict_step(const Vector& log_post, const Matrix& logQ) {
  const int S = static_cast<int>(logQ.rows());
  Vector out(S), tmp(S);
  for (int z = 0; z < S; ++z) {
    for (int zp = 0; zp < S; ++zp) tmp(zp) = log_post(zp) + logQ(zp, z);
    out(z) = lse(tmp);
  }
  return out;
}

Vector normalise(const Vector& v) {
  const double c = lse(v);
  if (!std::isfinite(c)) throw std::domain_error("block HMM filter: every latent state has zero probability (an impossible observation)");
  return v.array() - c;
}

Matrix log_of(const Matrix& Q) { return Q.array().log().matrix(); }

void check_law(const Vector& p, const std::string& what) {
  double s = 0.0;
  for (int i = 0; i < p.size(); ++i) {
    if (!(p(i) >= 0.0) || !std::isfinite(p(i)))
      throw std::invalid_argument(fmt::format("{}: expected non-negative finite probabilities, got {}", what, p(i)));
    s += p(i);
  }
  if (std::abs(s - 1.0) > 1e-12) throw std::invalid_argument(fmt::format("{}: expected probabilities summing to 1, got {}", what, s));
}

}  // namespace

std::string family_name(Family f) {
  switch (f) {
    case Family::Categorical: return "categorical";
    case Family::Gaussian: return "gaussian";
    case Family::Poisson: return "poisson";
    case Family::GaussianVariance: return "gaussian-variance";
  }
  throw std::logic_error("family_name: unknown family");
}

Family parse_family(const std::string& name) {
  for (Family f : {Family::Categorical, Family::Gaussian, Family::Poisson, Family::GaussianVariance})
    if (family_name(f) == name) return f;
  throw std::invalid_argument(fmt::format("emission family: expected categorical, gaussian, poisson or gaussian-variance, got '{}'", name));
}

std::string summary_name(Summary s) {
  switch (s) {
    case Summary::Full: return "full";
    case Summary::Local: return "local";
    case Summary::MeanT: return "mean_T";
    case Summary::MeanX: return "mean_x";
    case Summary::Stride: return "stride";
    case Summary::Head: return "head";
    case Summary::PrevBlock: return "prev_block";
  }
  throw std::logic_error("summary_name: unknown summary");
}

// ---- Emissions ------------------------------------------------------------------------------------

Emission Emission::categorical(const Matrix& logits) {
  if (logits.rows() < 1 || logits.cols() < 2)
    throw std::invalid_argument(fmt::format("categorical emission: expected S >= 1 states and V >= 2 symbols, got {} x {}", logits.rows(), logits.cols()));
  if (!logits.allFinite()) throw std::invalid_argument("categorical emission: expected finite logits");
  Emission e;
  e.family_ = Family::Categorical;
  e.S_ = static_cast<int>(logits.rows());
  e.logp_ = logits;
  e.A_.resize(e.S_);
  for (int z = 0; z < e.S_; ++z) {
    const Vector row = logits.row(z).transpose();
    e.A_(z) = lse(row);
    e.logp_.row(z).array() -= e.A_(z);
  }
  e.probs_ = e.logp_.array().exp().matrix();
  e.mu_ = logits;  // theta(z): the logits themselves
  return e;
}

Emission Emission::gaussian(const Matrix& mu, const Matrix& Sigma) {
  if (mu.rows() < 1 || mu.cols() < 1 || Sigma.rows() != mu.cols() || Sigma.cols() != mu.cols())
    throw std::invalid_argument(fmt::format("gaussian emission: expected mu S x D and Sigma D x D, got {} x {} and {} x {}", mu.rows(), mu.cols(), Sigma.rows(), Sigma.cols()));
  if (!mu.allFinite() || !Sigma.allFinite() || (Sigma - Sigma.transpose()).cwiseAbs().maxCoeff() > 1e-12 * Sigma.cwiseAbs().maxCoeff())
    throw std::invalid_argument("gaussian emission: expected finite means and a symmetric covariance");
  Emission e;
  e.family_ = Family::Gaussian;
  e.S_ = static_cast<int>(mu.rows());
  const Eigen::LLT<Matrix> llt(Sigma);
  if (llt.info() != Eigen::Success) throw std::invalid_argument("gaussian emission: expected a positive definite covariance Sigma");
  e.mu_ = mu;
  e.Sigma_ = Sigma;
  e.L_ = llt.matrixL();
  e.Sinv_ = llt.solve(Matrix::Identity(Sigma.rows(), Sigma.cols()));
  e.Sinv_mu_ = (e.Sinv_ * mu.transpose()).transpose();
  e.A_.resize(e.S_);
  for (int z = 0; z < e.S_; ++z) e.A_(z) = 0.5 * mu.row(z).dot(e.Sinv_mu_.row(z));
  const double D = static_cast<double>(mu.cols());
  e.logdet_ = D * kLog2Pi + 2.0 * e.L_.diagonal().array().log().sum();
  return e;
}

Emission Emission::poisson(const Vector& rates) {
  if (rates.size() < 1) throw std::invalid_argument("poisson emission: expected at least one state");
  for (int z = 0; z < rates.size(); ++z)
    if (!(rates(z) > 0.0) || !(rates(z) <= 500.0))
      throw std::invalid_argument(fmt::format("poisson emission: expected rates in (0, 500], got {}", rates(z)));
  Emission e;
  e.family_ = Family::Poisson;
  e.S_ = static_cast<int>(rates.size());
  e.rate_ = rates;
  return e;
}

Emission Emission::gaussian_variance(const Vector& mean, const Vector& sd) {
  if (mean.size() < 1 || mean.size() != sd.size())
    throw std::invalid_argument(fmt::format("gaussian-variance emission: expected S means and S standard deviations, got {} and {}", mean.size(), sd.size()));
  for (int z = 0; z < sd.size(); ++z)
    if (!(sd(z) > 0.0) || !std::isfinite(sd(z)) || !std::isfinite(mean(z)))
      throw std::invalid_argument(fmt::format("gaussian-variance emission: expected finite means and positive standard deviations, got sd {}", sd(z)));
  Emission e;
  e.family_ = Family::GaussianVariance;
  e.S_ = static_cast<int>(mean.size());
  e.mean_ = mean;
  e.sd_ = sd;
  return e;
}

int Emission::stat_dim() const {
  switch (family_) {
    case Family::Categorical: return static_cast<int>(logp_.cols());
    case Family::Gaussian: return static_cast<int>(mu_.cols());
    case Family::Poisson: return 1;
    case Family::GaussianVariance: return 2;
  }
  throw std::logic_error("stat_dim: unknown family");
}

void Emission::sample(Rng& rng, int z, double* x) const {
  switch (family_) {
    case Family::Categorical: {
      const double u = rng.uniform();
      const int V = static_cast<int>(logp_.cols());
      double c = 0.0;
      int v = V - 1;
      for (int i = 0; i < V; ++i) {
        c += probs_(z, i);
        if (u < c) {
          v = i;
          break;
        }
      }
      x[0] = v;
      return;
    }
    case Family::Gaussian: {
      const int D = static_cast<int>(mu_.cols());
      Vector xi(D);
      for (int i = 0; i < D; ++i) xi(i) = rng.normal();
      const Vector v = mu_.row(z).transpose() + L_ * xi;
      for (int i = 0; i < D; ++i) x[i] = v(i);
      return;
    }
    case Family::Poisson: {
      // Inversion: p_0 = exp(-lambda), p_{k+1} = p_k lambda/(k+1) (lambda <= 500: exp(-lambda) > 0).
      const double lam = rate_(z), u = rng.uniform();
      double p = std::exp(-lam), c = p;
      long k = 0;
      while (u >= c && k < 100000) {
        ++k;
        p *= lam / static_cast<double>(k);
        c += p;
        if (p == 0.0 && static_cast<double>(k) > lam) break;
      }
      x[0] = static_cast<double>(k);
      return;
    }
    case Family::GaussianVariance:
      x[0] = mean_(z) + sd_(z) * rng.normal();
      return;
  }
}

double Emission::log_density(const double* x, int z) const {
  switch (family_) {
    case Family::Categorical: return logp_(z, static_cast<int>(x[0]));
    case Family::Gaussian: {
      const int D = static_cast<int>(mu_.cols());
      const Vector r = Eigen::Map<const Vector>(x, D) - mu_.row(z).transpose();
      const Vector y = L_.triangularView<Eigen::Lower>().solve(r);
      return -0.5 * (y.squaredNorm() + logdet_);
    }
    case Family::Poisson: return x[0] * std::log(rate_(z)) - rate_(z) - std::lgamma(x[0] + 1.0);
    case Family::GaussianVariance: {
      const double r = (x[0] - mean_(z)) / sd_(z);
      return -0.5 * (r * r + kLog2Pi) - std::log(sd_(z));
    }
  }
  throw std::logic_error("log_density: unknown family");
}

void Emission::add_stat(const double* x, double* acc) const {
  switch (family_) {
    case Family::Categorical: acc[static_cast<int>(x[0])] += 1.0; return;
    case Family::Gaussian:
      for (int i = 0; i < mu_.cols(); ++i) acc[i] += x[i];
      return;
    case Family::Poisson: acc[0] += x[0]; return;
    case Family::GaussianVariance:
      acc[0] += x[0];
      acc[1] += x[0] * x[0];
      return;
  }
}

double Emission::log_lik_stat(const Vector& Tsum, int n, int z) const {
  const double dn = static_cast<double>(n);
  switch (family_) {
    case Family::Categorical: return Tsum.dot(mu_.row(z).transpose()) - dn * A_(z);
    case Family::Gaussian: return Tsum.dot(Sinv_mu_.row(z).transpose()) - dn * A_(z);
    case Family::Poisson: return Tsum(0) * std::log(rate_(z)) - dn * rate_(z);
    case Family::GaussianVariance: {
      const double s2 = sd_(z) * sd_(z);
      const double t1 = mean_(z) / s2, t2 = -0.5 / s2;
      return Tsum(0) * t1 + Tsum(1) * t2 - dn * (0.5 * mean_(z) * mean_(z) / s2 + std::log(sd_(z)));
    }
  }
  throw std::logic_error("log_lik_stat: unknown family");
}

double Emission::log_lik_mean_x(const double* xbar, int n, int z) const {
  const double dn = static_cast<double>(n);
  switch (family_) {
    case Family::Categorical: {
      // xbar holds the V symbol frequencies (the mean of onehot(x)): the multinomial of the counts.
      double s = std::lgamma(dn + 1.0);
      for (int v = 0; v < logp_.cols(); ++v) {
        const double c = std::round(xbar[v] * dn);
        s += c * logp_(z, v) - std::lgamma(c + 1.0);
      }
      return s;
    }
    case Family::Gaussian: {
      const int D = static_cast<int>(mu_.cols());
      const Vector r = Eigen::Map<const Vector>(xbar, D) - mu_.row(z).transpose();
      const Vector y = L_.triangularView<Eigen::Lower>().solve(r);
      return -0.5 * (dn * y.squaredNorm() + logdet_ - static_cast<double>(D) * std::log(dn));
    }
    case Family::Poisson: {
      const double sum = std::round(xbar[0] * dn), lam = dn * rate_(z);
      return sum * std::log(lam) - lam - std::lgamma(sum + 1.0);
    }
    case Family::GaussianVariance: {
      const double s = sd_(z) / std::sqrt(dn), r = (xbar[0] - mean_(z)) / s;
      return -0.5 * (r * r + kLog2Pi) - std::log(s);
    }
  }
  throw std::logic_error("log_lik_mean_x: unknown family");
}

// ---- The model ------------------------------------------------------------------------------------

void BlockHmm::validate() const {
  const int S = states();
  if (S < 1 || Q.cols() != S) throw std::invalid_argument(fmt::format("block HMM: expected a square kernel Q, got {} x {}", Q.rows(), Q.cols()));
  if (pi0.size() != S) throw std::invalid_argument(fmt::format("block HMM: expected pi_0 with {} entries, got {}", S, pi0.size()));
  if (e.states() != S) throw std::invalid_argument(fmt::format("block HMM: the emission has {} states, Q has {}", e.states(), S));
  if (P < 1) throw std::invalid_argument(fmt::format("block HMM: expected block length P >= 1, got {}", P));
  for (int i = 0; i < S; ++i) check_law(Q.row(i).transpose(), fmt::format("block HMM: row {} of Q", i));
  check_law(pi0, "block HMM: pi_0");
}

Matrix symmetric_kernel(int S, double q) {
  if (S < 2) throw std::invalid_argument(fmt::format("symmetric kernel: expected S >= 2 states, got {}", S));
  if (!(q >= 0.0 && q <= 1.0)) throw std::invalid_argument(fmt::format("symmetric kernel: expected persistence q in [0, 1], got {}", q));
  Matrix Q = Matrix::Constant(S, S, q / static_cast<double>(S - 1));
  Q.diagonal().setConstant(1.0 - q);
  return Q;
}

Sequence sample(const BlockHmm& m, int K, Rng& rng) {
  const int S = m.states(), D = m.e.dim();
  Sequence s;
  s.x.resize(static_cast<Eigen::Index>(K) * m.P, D);
  s.z.resize(static_cast<std::size_t>(K));
  Vector xt(D);
  int z = 0;
  for (int k = 0; k < K; ++k) {
    // Latent by inversion of its law (pi_0 for the first block, row z of Q after).
    const double u = rng.uniform();
    double c = 0.0;
    int nz = S - 1;
    for (int j = 0; j < S; ++j) {
      c += k == 0 ? m.pi0(j) : m.Q(z, j);
      if (u < c) {
        nz = j;
        break;
      }
    }
    // Guard the round-off tail: never land on a state of probability 0.
    while ((k == 0 ? m.pi0(nz) : m.Q(z, nz)) == 0.0 && nz > 0) --nz;
    z = nz;
    s.z[static_cast<std::size_t>(k)] = z;
    for (int t = 0; t < m.P; ++t) {
      m.e.sample(rng, z, xt.data());
      s.x.row(static_cast<Eigen::Index>(k) * m.P + t) = xt.transpose();
    }
  }
  return s;
}

Matrix token_loglik(const BlockHmm& m, const Matrix& x) {
  const int S = m.states(), D = m.e.dim();
  if (x.cols() != D) throw std::invalid_argument(fmt::format("token_loglik: expected tokens of dimension {}, got {}", D, x.cols()));
  Matrix ll(x.rows(), S);
  Vector xt(D);
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    xt = x.row(t).transpose();
    for (int z = 0; z < S; ++z) ll(t, z) = m.e.log_density(xt.data(), z);
  }
  return ll;
}

Matrix block_loglik(const BlockHmm& m, const Matrix& x, const Matrix& tokll, Summary s) {
  const int S = m.states(), P = m.P;
  const int K = static_cast<int>(x.rows() / P);
  if (x.rows() != static_cast<Eigen::Index>(K) * P || tokll.rows() != x.rows())
    throw std::invalid_argument(fmt::format("block_loglik: expected whole blocks of P = {} tokens, got {}", P, x.rows()));
  Matrix bl(K, S);
  const int ds = m.e.stat_dim(), D = m.e.dim();
  Vector Tsum(ds), xbar(std::max(D, ds));
  for (int k = 0; k < K; ++k) {
    const Eigen::Index b = static_cast<Eigen::Index>(k) * P;
    switch (s) {
      case Summary::Full:
      case Summary::Local:
      case Summary::PrevBlock: bl.row(k) = tokll.middleRows(b, P).colwise().sum(); break;
      case Summary::Stride: bl.row(k) = tokll.row(b + P - 1); break;
      case Summary::Head: bl.row(k) = tokll.row(b); break;
      case Summary::MeanT: {
        // Prop 14 / App. C.4: e(B_k | z) = h(B_k) exp(<sum_t T(x_t), theta(z)> - P A(theta(z))),
        // a function of z through Tbar_k = P^-1 sum_t T(x_t) only.
        Tsum.setZero();
        Vector xt(D);
        for (int t = 0; t < P; ++t) {
          xt = x.row(b + t).transpose();
          m.e.add_stat(xt.data(), Tsum.data());
        }
        const Vector Tbar = Tsum / static_cast<double>(P);
        for (int z = 0; z < S; ++z) bl(k, z) = m.e.log_lik_stat(Tbar * static_cast<double>(P), P, z);
        break;
      }
      case Summary::MeanX: {
        xbar.setZero();
        if (m.e.family() == Family::Categorical) {
          Vector xt(1);
          for (int t = 0; t < P; ++t) {
            xt(0) = x(b + t, 0);
            m.e.add_stat(xt.data(), xbar.data());
          }
        } else {
          for (int t = 0; t < P; ++t)
            for (int i = 0; i < D; ++i) xbar(i) += x(b + t, i);
        }
        xbar /= static_cast<double>(P);
        for (int z = 0; z < S; ++z) bl(k, z) = m.e.log_lik_mean_x(xbar.data(), P, z);
        break;
      }
    }
  }
  return bl;
}

Matrix filter_posteriors(const BlockHmm& m, const Matrix& blockll) {
  const Matrix logQ = log_of(m.Q);
  const Eigen::Index K = blockll.rows();
  Matrix post(K, m.states());
  Vector prior = m.pi0.array().log().matrix();
  for (Eigen::Index k = 0; k < K; ++k) {
    // alpha_k(z) ∝ [sum_z' alpha_{k-1}(z') Q(z | z')] e(B_k | z)  (§5.3, the filtering recursion).
    if (k > 0) prior = predict_step(post.row(k - 1).transpose(), logQ);
    post.row(k) = normalise(prior + blockll.row(k).transpose()).transpose();
  }
  return post;
}

namespace {
Matrix filter_priors_q(const BlockHmm& m, const Matrix& logQ, const Matrix& blockll) {
  const Eigen::Index K = blockll.rows();
  Matrix pri(K, m.states());
  if (K == 0) return pri;
  pri.row(0) = m.pi0.array().log().matrix().transpose();
  Vector post;
  for (Eigen::Index k = 1; k < K; ++k) {
    post = normalise(pri.row(k - 1).transpose() + blockll.row(k - 1).transpose());
    pri.row(k) = predict_step(post, logQ).transpose();
  }
  return pri;
}
}  // namespace

Matrix filter_priors(const BlockHmm& m, const Matrix& blockll) { return filter_priors_q(m, log_of(m.Q), blockll); }

namespace {
/// log of the marginal laws pi_0 Q^k, k = 0..K-1.
Matrix log_marginals(const BlockHmm& m, Eigen::Index K) {
  Matrix out(K, m.states());
  Vector p = m.pi0;
  for (Eigen::Index k = 0; k < K; ++k) {
    out.row(k) = p.array().log().matrix().transpose();
    p = (p.transpose() * m.Q).transpose();
  }
  return out;
}
}  // namespace

namespace {
/// What every predictor of one model shares: log Q and the log marginals of z_k, k < K.
struct Prepared {
  Matrix logQ, logmarg;
};
Prepared prepare(const BlockHmm& m, Eigen::Index K) { return {log_of(m.Q), log_marginals(m, K)}; }

Matrix priors_prepared(const BlockHmm& m, const Prepared& pr, const Matrix& x, const Matrix& tokll, Summary s) {
  const Eigen::Index K = x.rows() / m.P;
  if (s == Summary::Local) return pr.logmarg.topRows(K);
  if (s == Summary::PrevBlock) {
    // Only block k-1 is seen: p(z_k | B_{k-1}) = sum_z' p(z' | B_{k-1}) Q(z', z), with p(z_{k-1} =
    // z' | B_{k-1}) ∝ p(z_{k-1} = z') e(B_{k-1} | z').
    const Matrix bl = block_loglik(m, x, tokll, Summary::Full);
    Matrix pri(K, m.states());
    if (K > 0) pri.row(0) = pr.logmarg.row(0);
    for (Eigen::Index k = 1; k < K; ++k)
      pri.row(k) = predict_step(normalise(pr.logmarg.row(k - 1).transpose() + bl.row(k - 1).transpose()), pr.logQ).transpose();
    return pri;
  }
  return filter_priors_q(m, pr.logQ, block_loglik(m, x, tokll, s));
}
}  // namespace

Matrix predictor_priors(const BlockHmm& m, const Matrix& x, const Matrix& tokll, Summary s) {
  return priors_prepared(m, prepare(m, x.rows() / m.P), x, tokll, s);
}

namespace {
/// The token likelihoods scaled for probability-space updates: lik(t, z) = exp(tokll(t, z) - top(t))
/// with top(t) = max_z tokll(t, z) (no underflow of the largest term; shared by every predictor).
struct ScaledLik {
  Matrix lik;
  Vector top;
};
ScaledLik scaled_lik(const Matrix& tokll) {
  ScaledLik s{Matrix(tokll.rows(), tokll.cols()), Vector(tokll.rows())};
  for (Eigen::Index t = 0; t < tokll.rows(); ++t) {
    s.top(t) = tokll.row(t).maxCoeff();
    for (Eigen::Index z = 0; z < tokll.cols(); ++z) s.lik(t, z) = std::exp(tokll(t, z) - s.top(t));
  }
  return s;
}

/// The token losses -log p(x_t | prefix, history) (when `loss` is given) and their sum over tokens
/// t >= first (the log of a running product, flushed before it could leave the normal range).
double losses_scaled(const ScaledLik& sl, const Matrix& priors, int P, Eigen::Index first, Vector* loss) {
  const Eigen::Index T = sl.lik.rows();
  const Eigen::Index S = sl.lik.cols();
  Vector w(S);
  if (loss) loss->resize(T);
  double sum = 0.0, prod = 1.0;
  for (Eigen::Index t = 0; t < T; ++t) {
    // Within block k the posterior w(z) = p(z_k = z | prefix, history) is updated token by token:
    // p(x_{t+1} | prefix, history) = sum_z w(z) e(x_{t+1} | z), then w <- w e(x_{t+1} | .) / p.
    if (t % P == 0) {
      const Vector lp = normalise(priors.row(t / P).transpose());
      w = lp.array().exp().matrix();
    }
    double p = 0.0;
    for (Eigen::Index z = 0; z < S; ++z) p += w(z) * sl.lik(t, z);
    for (Eigen::Index z = 0; z < S; ++z) w(z) = w(z) * sl.lik(t, z) / p;
    if (loss) (*loss)(t) = -(sl.top(t) + std::log(p));
    if (t >= first) {
      sum -= sl.top(t);
      prod *= p;
      if (prod < 1e-250 || prod > 1e250) {
        sum -= std::log(prod);
        prod = 1.0;
      }
    }
  }
  return sum - std::log(prod);
}
}  // namespace

Vector token_losses(const Matrix& tokll, const Matrix& priors, int P) {
  Vector loss;
  losses_scaled(scaled_lik(tokll), priors, P, 0, &loss);
  return loss;
}

double sequence_risk(const BlockHmm& m, const Matrix& x, Summary s, int first_block) {
  const Matrix tokll = token_loglik(m, x);
  const Eigen::Index b = static_cast<Eigen::Index>(first_block) * m.P;
  if (first_block < 0 || b >= x.rows())
    throw std::invalid_argument(fmt::format("sequence_risk: first block {} is outside the {} blocks", first_block, x.rows() / m.P));
  const double sum = losses_scaled(scaled_lik(tokll), predictor_priors(m, x, tokll, s), m.P, b, nullptr);
  return sum / static_cast<double>(x.rows() - b);
}

double log_joint(const BlockHmm& m, const Matrix& x) {
  const Matrix tokll = token_loglik(m, x);
  const Matrix bl = block_loglik(m, x, tokll, Summary::Full);
  const Matrix pri = filter_priors(m, bl);
  double s = 0.0;
  for (Eigen::Index k = 0; k < bl.rows(); ++k) s += lse(Vector(pri.row(k).transpose() + bl.row(k).transpose()));
  return s;
}

Vector block_posterior(const BlockHmm& m, const Matrix& block, const Vector& log_prior, Summary s) {
  if (block.rows() != m.P) throw std::invalid_argument(fmt::format("block_posterior: expected one block of {} tokens, got {}", m.P, block.rows()));
  const Matrix bl = block_loglik(m, block, token_loglik(m, block), s);
  return normalise(log_prior + bl.row(0).transpose());
}

// ---- Enumeration and Monte Carlo -----------------------------------------------------------------

void enumerate(const BlockHmm& m, int K, const std::function<void(const Matrix& x, double p)>& f) {
  if (m.e.family() != Family::Categorical) throw std::invalid_argument("enumerate: expected a categorical emission");
  const int V = m.e.symbols();
  const int T = K * m.P;
  const double count = std::pow(static_cast<double>(V), static_cast<double>(T));
  if (K < 1 || count > 4194304.0)
    throw std::invalid_argument(fmt::format("enumerate: expected V^(K P) <= 2^22 sequences, got {}^{}", V, T));
  Matrix x = Matrix::Zero(T, 1);
  for (long n = 0; n < static_cast<long>(count); ++n) {
    long r = n;
    for (int t = T - 1; t >= 0; --t) {
      x(t, 0) = static_cast<double>(r % V);
      r /= V;
    }
    f(x, std::exp(log_joint(m, x)));
  }
}

std::vector<double> exact_risks(const BlockHmm& m, int K, const std::vector<Summary>& preds, int first_block, double* mass,
                                double* max_abs_gap_first_two) {
  std::vector<double> r(preds.size(), 0.0);
  double total = 0.0, gap = 0.0;
  enumerate(m, K, [&](const Matrix& x, double p) {
    total += p;
    std::vector<double> v(preds.size());
    for (std::size_t j = 0; j < preds.size(); ++j) {
      v[j] = sequence_risk(m, x, preds[j], first_block);
      r[j] += p * v[j];
    }
    if (preds.size() >= 2) gap = std::max(gap, std::abs(v[0] - v[1]));
  });
  if (mass) *mass = total;
  if (max_abs_gap_first_two) *max_abs_gap_first_two = gap;
  return r;
}

namespace {
/// The per-predictor risks of sequence n (stream (seed, stream, n)).
void sequence_losses(const BlockHmm& m, const Prepared& pr, int K, std::uint64_t seed, std::uint64_t stream, long n,
                     const std::vector<Summary>& preds, int first_block, double* out) {
  Rng rng(seed, {stream, static_cast<std::uint64_t>(n)});
  const Sequence s = sample(m, K, rng);
  const Matrix tokll = token_loglik(m, s.x);
  const ScaledLik sl = scaled_lik(tokll);
  const Eigen::Index b = static_cast<Eigen::Index>(first_block) * m.P;
  for (std::size_t j = 0; j < preds.size(); ++j) {
    const double sum = losses_scaled(sl, priors_prepared(m, pr, s.x, tokll, preds[j]), m.P, b, nullptr);
    out[j] = sum / static_cast<double>(s.x.rows() - b);
  }
}

void check_mc(const BlockHmm& m, int K, long N, int first_block) {
  m.validate();
  if (N < 1 || first_block < 0 || K < first_block + 1)
    throw std::invalid_argument(fmt::format("Monte Carlo: expected N >= 1 sequences and K > first_block blocks, got N = {}, K = {}", N, K));
}

/// Running mean and sum of squared deviations (Welford), combinable (Chan et al.).
struct Moments {
  double n = 0.0, mean = 0.0, m2 = 0.0;
  void add(double x) {
    n += 1.0;
    const double d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
  }
  void merge(const Moments& o) {
    if (o.n == 0.0) return;
    const double nn = n + o.n, d = o.mean - mean;
    mean += d * o.n / nn;
    m2 += o.m2 + d * d * n * o.n / nn;
    n = nn;
  }
  Estimate estimate() const { return {mean, n > 1.0 ? std::sqrt(m2 / (n - 1.0) / n) : 0.0}; }
};
}  // namespace

Matrix monte_carlo_losses(const BlockHmm& m, int K, long N, std::uint64_t seed, std::uint64_t stream, const std::vector<Summary>& preds,
                          int first_block) {
  check_mc(m, K, N, first_block);
  Matrix loss(N, static_cast<Eigen::Index>(preds.size()));
  const Prepared pr = prepare(m, K);
  ParallelErrors errors;
#pragma omp parallel for schedule(static)
  for (long n = 0; n < N; ++n) {
    if (errors.failed()) continue;
    try {
      Vector row(static_cast<Eigen::Index>(preds.size()));
      sequence_losses(m, pr, K, seed, stream, n, preds, first_block, row.data());
      loss.row(n) = row.transpose();
    } catch (...) {
      errors.capture();
    }
  }
  errors.rethrow();
  return loss;
}

McStats monte_carlo(const BlockHmm& m, int K, long N, std::uint64_t seed, std::uint64_t stream, const std::vector<Summary>& preds,
                    int first_block, long chunk) {
  check_mc(m, K, N, first_block);
  if (chunk < 1) throw std::invalid_argument(fmt::format("Monte Carlo: expected a chunk of >= 1 sequences, got {}", chunk));
  const std::size_t J = preds.size();
  const long chunks = (N + chunk - 1) / chunk;
  struct Part {
    std::vector<Moments> risk, gap;
    std::vector<double> max_gap;
  };
  std::vector<Part> parts(static_cast<std::size_t>(chunks), Part{std::vector<Moments>(J), std::vector<Moments>(J), std::vector<double>(J, 0.0)});
  const Prepared pr = prepare(m, K);
  ParallelErrors errors;
#pragma omp parallel for schedule(static, 1)
  for (long c = 0; c < chunks; ++c) {
    if (errors.failed()) continue;
    try {
      Part& part = parts[static_cast<std::size_t>(c)];
      std::vector<double> row(J);
      for (long n = c * chunk; n < std::min(N, (c + 1) * chunk); ++n) {
        sequence_losses(m, pr, K, seed, stream, n, preds, first_block, row.data());
        for (std::size_t j = 0; j < J; ++j) {
          part.risk[j].add(row[j]);
          part.gap[j].add(row[j] - row[0]);
          part.max_gap[j] = std::max(part.max_gap[j], std::abs(row[j] - row[0]));
        }
      }
    } catch (...) {
      errors.capture();
    }
  }
  errors.rethrow();
  McStats st;
  st.n = N;
  std::vector<Moments> risk(J), gap(J);
  st.max_abs_gap.assign(J, 0.0);
  for (const Part& part : parts)
    for (std::size_t j = 0; j < J; ++j) {
      risk[j].merge(part.risk[j]);
      gap[j].merge(part.gap[j]);
      st.max_abs_gap[j] = std::max(st.max_abs_gap[j], part.max_gap[j]);
    }
  for (std::size_t j = 0; j < J; ++j) {
    st.risk.push_back(risk[j].estimate());
    st.gap.push_back(gap[j].estimate());
  }
  return st;
}

Estimate column_estimate(const Matrix& loss, int j) {
  const Eigen::Index N = loss.rows();
  double s = 0.0;
  for (Eigen::Index n = 0; n < N; ++n) s += loss(n, j);
  const double mean = s / static_cast<double>(N);
  double v = 0.0;
  for (Eigen::Index n = 0; n < N; ++n) v += (loss(n, j) - mean) * (loss(n, j) - mean);
  const double se = N > 1 ? std::sqrt(v / static_cast<double>(N - 1) / static_cast<double>(N)) : 0.0;
  return {mean, se};
}

Estimate paired_gap(const Matrix& loss, int a, int b) {
  Matrix d(loss.rows(), 1);
  d.col(0) = loss.col(a) - loss.col(b);
  return column_estimate(d, 0);
}

// ---- Profile risk ---------------------------------------------------------------------------------

ProfileData profile_data_exact(const BlockHmm& m, int K) {
  if (m.e.family() != Family::Categorical) throw std::invalid_argument("profile data: expected a categorical emission");
  if (K < 2) throw std::invalid_argument(fmt::format("profile data: expected K >= 2 blocks (a previous block to summarise), got {}", K));
  const int V = m.e.symbols(), P = m.P;
  const int per_seq = (K - 1) * P;
  // The features are functions of integer counts: one weighted row per distinct (position t, prefix
  // counts, previous block's counts, next symbol), keyed exactly and kept in key order.
  std::map<std::vector<int>, double> rows;
  std::vector<int> key(static_cast<std::size_t>(2 * V + 1));
  enumerate(m, K, [&](const Matrix& x, double p) {
    for (int k = 1; k < K; ++k) {
      std::vector<int> prev(static_cast<std::size_t>(V), 0), cnt(static_cast<std::size_t>(V), 0);
      for (int t = 0; t < P; ++t) ++prev[static_cast<std::size_t>(x((k - 1) * P + t, 0))];
      for (int t = 0; t < P; ++t) {
        const int y = static_cast<int>(x(k * P + t, 0));
        key[0] = t;
        for (int v = 0; v < V; ++v) {
          key[static_cast<std::size_t>(1 + v)] = cnt[static_cast<std::size_t>(v)];
          key[static_cast<std::size_t>(1 + V + v)] = prev[static_cast<std::size_t>(v)];
        }
        key.back() = y;
        rows[key] += p / per_seq;
        ++cnt[static_cast<std::size_t>(y)];
      }
    }
  });
  ProfileData d;
  d.V = V;
  const auto n = static_cast<Eigen::Index>(rows.size());
  d.phi.resize(n, 2 + (V - 1));
  d.psi.resize(n, V - 1);
  d.y.resize(rows.size());
  d.w.resize(n);
  Eigen::Index r = 0;
  for (const auto& [k, w] : rows) {
    const int t = k[0];
    d.phi(r, 0) = 1.0;
    d.phi(r, 1) = t == 0 ? 1.0 : 0.0;
    for (int v = 0; v < V - 1; ++v) d.phi(r, 2 + v) = t == 0 ? 0.0 : static_cast<double>(k[static_cast<std::size_t>(1 + v)]) / t;
    for (int v = 0; v < V - 1; ++v) d.psi(r, v) = static_cast<double>(k[static_cast<std::size_t>(1 + V + v)]) / P;
    d.y[static_cast<std::size_t>(r)] = k.back();
    d.w(r) = w;
    ++r;
  }
  return d;
}

namespace {

/// Weighted multinomial log-loss of logits (beta * g), last class pinned at 0, plus (lambda/2)|W|^2
/// on the psi block; its gradient and Hessian. beta is (V-1) x G flattened row-major.
struct Objective {
  const ProfileData& d;
  double rho;
  double lambda;
  int V, F, Gp, G;
  Objective(const ProfileData& dd, double r, double l)
      : d(dd), rho(r), lambda(l), V(dd.V), F(static_cast<int>(dd.phi.cols())), Gp(r == 0.0 ? 0 : static_cast<int>(dd.psi.cols())), G(F + Gp) {}
  int n() const { return (V - 1) * G; }
  double eval(const Vector& beta, Vector* grad, Matrix* hess) const {
    const int C = V - 1, N = n();
    if (grad) grad->setZero(N);
    if (hess) hess->setZero(N, N);
    double f = 0.0;
    Vector g(G), eta(V), p(V);
    for (Eigen::Index i = 0; i < d.phi.rows(); ++i) {
      const double w = d.w(i);
      if (w == 0.0) continue;
      g.head(F) = d.phi.row(i).transpose();
      if (Gp) g.tail(Gp) = rho * d.psi.row(i).transpose();
      for (int c = 0; c < C; ++c) eta(c) = beta.segment(c * G, G).dot(g);
      eta(C) = 0.0;
      const double z = lse(eta);
      const int y = d.y[static_cast<std::size_t>(i)];
      f += w * (z - eta(y));
      p = (eta.array() - z).exp().matrix();
      if (grad)
        for (int c = 0; c < C; ++c) grad->segment(c * G, G) += w * (p(c) - (c == y ? 1.0 : 0.0)) * g;
      if (hess) {
        for (int a = 0; a < C; ++a)
          for (int b = 0; b < C; ++b)
            hess->block(a * G, b * G, G, G).noalias() += (w * ((a == b ? p(a) : 0.0) - p(a) * p(b))) * (g * g.transpose());
      }
    }
    if (Gp && lambda > 0.0) {
      for (int c = 0; c < C; ++c) {
        const auto Wc = beta.segment(c * G + F, Gp);
        f += 0.5 * lambda * Wc.squaredNorm();
        if (grad) grad->segment(c * G + F, Gp) += lambda * Wc;
        if (hess) hess->block(c * G + F, c * G + F, Gp, Gp) += lambda * Matrix::Identity(Gp, Gp);
      }
    }
    return f;
  }
  double w_norm(const Vector& beta) const {
    double s = 0.0;
    for (int c = 0; c < V - 1; ++c) s += beta.segment(c * G + F, Gp).squaredNorm();
    return std::sqrt(s);
  }
  double risk(const Vector& beta) const { return Objective(d, rho, 0.0).eval(beta, nullptr, nullptr); }
};

/// Damped Newton with backtracking on a convex objective, then full steps once the Newton decrement
/// g' H^-1 g is below the round-off of the objective (quadratic convergence).
Vector newton(const Objective& obj, Vector beta, int* steps) {
  Vector g, step;
  Matrix H;
  double f = obj.eval(beta, &g, &H);
  int quadratic = 0;
  for (int it = 0; it < 100; ++it) {
    // A tiny Levenberg shift keeps the solve defined where the Hessian is singular (collinear
    // features); it only changes the path, not the minimiser.
    const double shift = 1e-12 * std::max(1.0, H.diagonal().maxCoeff());
    step = (H + shift * Matrix::Identity(H.rows(), H.cols())).ldlt().solve(-g);
    const double dec = -g.dot(step);
    if (!(dec > 0.0)) break;
    if (dec < 1e-12 * std::max(1.0, std::abs(f))) {
      // Quadratic regime: the decrease (dec/2) is below the round-off of f, so a line search cannot
      // see it; full Newton steps square the decrement, two more reach the minimiser's round-off.
      beta += step;
      f = obj.eval(beta, &g, &H);
      if (steps) ++*steps;
      if (++quadratic >= 3) break;
      continue;
    }
    double t = 1.0, fn = f;
    Vector trial;
    for (int ls = 0; ls < 40; ++ls) {
      trial = beta + t * step;
      fn = obj.eval(trial, nullptr, nullptr);
      if (fn <= f - 1e-4 * t * dec) break;
      t *= 0.5;
    }
    if (!(fn < f)) break;  // no decrease possible at round-off level: converged
    beta = trial;
    f = obj.eval(beta, &g, &H);
    if (steps) ++*steps;
  }
  return beta;
}

}  // namespace

ProfileFit fit_profile(const ProfileData& d, double rho, double norm_bound) {
  if (!std::isfinite(rho)) throw std::invalid_argument(fmt::format("profile risk: expected a finite rho, got {}", rho));
  if (!(norm_bound > 0.0)) throw std::invalid_argument(fmt::format("profile risk: expected a positive read-in norm bound, got {}", norm_bound));
  ProfileFit fit;
  const Objective free_obj(d, rho, 0.0);
  Vector beta = newton(free_obj, Vector::Zero(free_obj.n()), &fit.newton_steps);
  fit.w_norm = free_obj.Gp ? free_obj.w_norm(beta) : 0.0;
  if (free_obj.Gp && fit.w_norm > norm_bound) {
    // KKT: the minimiser on the ball |W_r| <= c minimises the ridge objective with the multiplier
    // lambda > 0 at which |W_r(lambda)| = c; |W_r(lambda)| decreases in lambda: bisect log lambda.
    double lo = -20.0, hi = 20.0;
    Vector best = beta;
    for (int it = 0; it < 80; ++it) {
      const double mid = 0.5 * (lo + hi);
      const Objective o(d, rho, std::pow(10.0, mid));
      const Vector b = newton(o, best, &fit.newton_steps);
      const double nrm = o.w_norm(b);
      if (nrm > norm_bound) lo = mid;
      else {
        hi = mid;
        best = b;
      }
      if (hi - lo < 1e-13) break;
    }
    fit.lambda = std::pow(10.0, hi);
    beta = best;
    fit.w_norm = free_obj.w_norm(beta);
  }
  fit.risk = free_obj.risk(beta);
  return fit;
}

}  // namespace tokdyn::hmm
