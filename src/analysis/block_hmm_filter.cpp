// The block-level HMM's exact filtering in log space (see block_hmm.hpp): token and block
// log-likelihoods under every summary, the forward filter's posteriors and priors, the predictors'
// priors, the within-block token losses and a sequence's risk, the log joint and a block's
// posterior. Also the home of the helpers that the Monte Carlo risks share (block_hmm_internal.hpp).
#include "tokdyn/analysis/block_hmm.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "block_hmm_internal.hpp"

namespace tokdyn::hmm {

using detail::lse;
using detail::prepare;
using detail::Prepared;
using detail::priors_prepared;
using detail::ScaledLik;

namespace {

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

}  // namespace

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


namespace detail {
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
}  // namespace detail

Matrix predictor_priors(const BlockHmm& m, const Matrix& x, const Matrix& tokll, Summary s) {
  return priors_prepared(m, prepare(m, x.rows() / m.P), x, tokll, s);
}


namespace detail {
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
}  // namespace detail

using detail::losses_scaled;
using detail::scaled_lik;

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

}  // namespace tokdyn::hmm
