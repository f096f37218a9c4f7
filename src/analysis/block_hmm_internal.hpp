#pragma once
// Helpers shared by the block-level HMM's translation units (src/analysis/block_hmm*.cpp): the
// log-sum-exp (emissions, filter and profile risk), and what the Monte Carlo risks share with the
// exact filter: the prepared data of every predictor and the scaled token likelihoods with their
// running-product losses. Internal to src/analysis (not installed); declared in tokdyn::hmm::detail
// and defined once (lse inline here, the rest in block_hmm_filter.cpp), so that no helper is defined
// twice in the library or in a unity batch.
#include <algorithm>
#include <cmath>

#include "tokdyn/analysis/block_hmm.hpp"
#include "tokdyn/core/constants.hpp"

namespace tokdyn::hmm::detail {

/// log sum exp of n values; -inf when every value is -inf.
inline double lse(const double* v, int n) {
  double mx = -kInf;
  for (int i = 0; i < n; ++i) mx = std::max(mx, v[i]);
  if (mx == -kInf) return -kInf;
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += std::exp(v[i] - mx);
  return mx + std::log(s);
}
inline double lse(const Vector& v) { return lse(v.data(), static_cast<int>(v.size())); }

/// What every predictor of one model shares: log Q and the log marginals of z_k, k < K.
struct Prepared {
  Matrix logQ, logmarg;
};
Prepared prepare(const BlockHmm& m, Eigen::Index K);
Matrix priors_prepared(const BlockHmm& m, const Prepared& pr, const Matrix& x, const Matrix& tokll, Summary s);

/// The token likelihoods scaled for probability-space updates: lik(t, z) = exp(tokll(t, z) - top(t))
/// with top(t) = max_z tokll(t, z) (no underflow of the largest term; shared by every predictor).
struct ScaledLik {
  Matrix lik;
  Vector top;
};
ScaledLik scaled_lik(const Matrix& tokll);

/// The token losses -log p(x_t | prefix, history) (when `loss` is given) and their sum over tokens
/// t >= first (the log of a running product, flushed before it could leave the normal range).
double losses_scaled(const ScaledLik& sl, const Matrix& priors, int P, Eigen::Index first, Vector* loss);

}  // namespace tokdyn::hmm::detail
