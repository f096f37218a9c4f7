// The block-level HMM of the coupling paper's §5.3 (Props 13-14, App. C.3-C.4): the names of families
// and summaries, the emissions, the model's validation and sampling. The filter and the predictors'
// risks are in block_hmm_filter.cpp, exact enumeration and Monte Carlo in block_hmm_risk.cpp, the
// profile risk of Prop 13's proof in block_hmm_profile.cpp; their shared helpers in
// block_hmm_internal.hpp. See block_hmm.hpp.
#include "tokdyn/analysis/block_hmm.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "block_hmm_internal.hpp"

namespace tokdyn::hmm {
namespace {

const double kLog2Pi = std::log(2.0 * M_PI);

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

using detail::lse;

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

}  // namespace tokdyn::hmm
