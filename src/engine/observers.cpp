#include "tokdyn/engine/observers.hpp"

#include "tokdyn/core/linalg.hpp"
#include "tokdyn/core/symmetric_eigen.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tokdyn {

void Observer::observe_float(double t, const BatchF& Z) {
  const Batch D{Z.Z.cast<double>(), Z.runs, Z.len};
  observe(t, D);
}

std::vector<Table> Observer::tables(const std::string&, const std::string&) const { return {}; }

GramMetrics gram_metrics(const Eigen::Ref<const Tokens>& Z) {
  const Eigen::Index len = Z.rows();
  Tokens Zh = Z;
  for (Eigen::Index i = 0; i < len; ++i) {
    const double nrm = Zh.row(i).norm();
    if (nrm > 0.0) Zh.row(i) *= 1.0 / nrm;
  }
  // Uncentred Gram matrix of the normalised tokens (§VI): one single-threaded BLAS product in the
  // caller's thread (observers call this for many runs in parallel); only the largest eigenvalue
  // is computed. 181 us per 50 x 768 run against 289 us with Eigen's product and all eigenvalues.
  Mat G;
  gemm_nt_blocked(Zh, Zh, G, /*parallel=*/false);
  const double L = static_cast<double>(len);
  GramMetrics m{};
  // r = (sum_k lambda_bar_k^2)^{-1} = len^2 / ||G||_F^2: no eigensolver needed (The Attention Within §VI).
  m.participation = L * L / G.squaredNorm();
  m.lambda1 = lapack_symmetric_largest_eigenvalue(G) / L;
  double mc = 1.0;
  for (Eigen::Index i = 0; i < len; ++i)
    for (Eigen::Index j = i + 1; j < len; ++j) mc = std::min(mc, G(i, j));
  m.min_cosine = len > 1 ? mc : 1.0;
  return m;
}

ConsensusDistance consensus_distance(const Eigen::Ref<const Tokens>& Z) {
  // Nearest point of the consensus sets C_len(mu) = {(s_1 e^mu, ..., s_len e^mu)} (Def. III.1),
  // over every channel mu and sign pattern: sum_i |zh_i - s_i e^mu|^2 = 2 len - 2 sum_i |zh_i^mu|
  // with s_i = sign(zh_i^mu). Computed from the tangential part so that tiny distances keep
  // their digits: |zh - s e^mu|^2 = 2 (1 - |zh^mu|) = 2 sum_{nu != mu} (zh^nu)^2 / (1 + |zh^mu|).
  // Token by token: s[mu] gathers the tokens' terms in token order (the sum of each channel is the
  // same sequence of operations as a channel-by-channel loop), while the inner loop runs over the
  // contiguous channels of one token and vectorises.
  // The products |z^mu| inv and (z^mu)^2 are rounded (stored) before they are added, as in the
  // channel-by-channel loop this replaced: the compiler may not fuse them into the additions (FMA),
  // which would change the last bits of the metric.
  const Eigen::Index len = Z.rows(), d = Z.cols();
  std::vector<double> s(static_cast<std::size_t>(d), 0.0), term(static_cast<std::size_t>(d)),
      az(static_cast<std::size_t>(d)), zz(static_cast<std::size_t>(d));
  for (Eigen::Index i = 0; i < len; ++i) {
    const auto zi = Z.row(i);
    const double tot = zi.squaredNorm();
    const double inv = tot > 0.0 ? 1.0 / std::sqrt(tot) : 0.0;
    const double* z = zi.data();
    double* tm = term.data();
    for (Eigen::Index mu = 0; mu < d; ++mu) {
      az[static_cast<std::size_t>(mu)] = std::abs(z[mu]) * inv;
      zz[static_cast<std::size_t>(mu)] = z[mu] * z[mu];
    }
    // Tangential mass sum_{nu != mu} (z^nu)^2 by subtraction ...
    for (Eigen::Index mu = 0; mu < d; ++mu)
      tm[mu] = 2.0 * ((tot - zz[static_cast<std::size_t>(mu)]) * inv * inv) / (1.0 + az[static_cast<std::size_t>(mu)]);
    // ... unless z^mu dominates (at most one channel per token), where it is summed directly to
    // avoid cancellation.
    for (Eigen::Index mu = 0; mu < d; ++mu)
      if (zz[static_cast<std::size_t>(mu)] > 0.5 * tot) {
        const double tang = (zi.head(mu).squaredNorm() + zi.tail(d - mu - 1).squaredNorm()) * inv * inv;
        tm[mu] = 2.0 * tang / (1.0 + az[static_cast<std::size_t>(mu)]);
      }
    for (Eigen::Index mu = 0; mu < d; ++mu) s[static_cast<std::size_t>(mu)] += tm[mu];
  }
  ConsensusDistance best{std::numeric_limits<double>::infinity(), 0};
  for (Eigen::Index mu = 0; mu < d; ++mu)
    if (s[static_cast<std::size_t>(mu)] < best.distance) best = {s[static_cast<std::size_t>(mu)], static_cast<int>(mu)};
  best.distance = std::sqrt(best.distance);
  return best;
}

ConsensusDistance diagonal_consensus_distance(const Eigen::Ref<const Tokens>& Z) {
  const Eigen::Index len = Z.rows();
  RowVec sum = RowVec::Zero(Z.cols());
  for (Eigen::Index i = 0; i < len; ++i) {
    const double nrm = Z.row(i).norm();
    if (nrm > 0.0) sum += Z.row(i) / nrm;
  }
  // min over |x| = 1 of sum_i |zhat_i - x|^2 = 2 len - 2 <sum_i zhat_i, x>, at x = sum / |sum|.
  return {std::sqrt(std::max(0.0, 2.0 * static_cast<double>(len) - 2.0 * sum.norm())), -1};
}

void GramObserver::observe(double t, const Batch& Z) {
  t_.push_back(t);
  std::vector<GramMetrics> row(static_cast<std::size_t>(Z.runs));
  std::vector<double> cd(static_cast<std::size_t>(Z.runs));
#pragma omp parallel for schedule(static) if (Z.runs > 1 && Z.Z.size() * Z.len >= 65536)
  for (int r = 0; r < Z.runs; ++r) {
    row[static_cast<std::size_t>(r)] = gram_metrics(Z.run(r));
    cd[static_cast<std::size_t>(r)] =
        (set_ == ConsensusSet::Diagonal ? diagonal_consensus_distance(Z.run(r)) : consensus_distance(Z.run(r))).distance;
  }
  m_.push_back(std::move(row));
  cd_.push_back(std::move(cd));
}

void gram_stats(const std::vector<GramMetrics>& v, double GramMetrics::*f, double& mean, double& sd) {
  double s = 0.0, s2 = 0.0;
  for (const auto& g : v) s += g.*f;
  mean = s / static_cast<double>(v.size());
  for (const auto& g : v) s2 += (g.*f - mean) * (g.*f - mean);
  sd = std::sqrt(s2 / static_cast<double>(v.size()));
}

std::vector<Table> GramObserver::tables(const std::string& label, const std::string& variant) const {
  Table sum{"metrics", {label, "layer", "t", "lambda1_mean", "lambda1_std", "pr_mean", "pr_std", "consensus_dist_mean", "min_cosine_mean"}, {}};
  Table per{"metrics_runs", {label, "run", "layer", "t", "lambda1", "participation", "min_cosine", "consensus_dist"}, {}};
  for (std::size_t o = 0; o < t_.size(); ++o) {
    double l1m, l1s, prm, prs, cd = 0.0, mc = 0.0;
    lambda1_stats(o, l1m, l1s);
    pr_stats(o, prm, prs);
    const std::size_t runs = m_[o].size();
    for (std::size_t r = 0; r < runs; ++r) {
      cd += cd_[o][r];
      mc += m_[o][r].min_cosine;
    }
    sum.rows.push_back({variant, static_cast<long>(o), t_[o], l1m, l1s, prm, prs, cd / static_cast<double>(runs),
                        mc / static_cast<double>(runs)});
  }
  const std::size_t runs = t_.empty() ? 0 : m_[0].size();
  for (std::size_t r = 0; r < runs; ++r)
    for (std::size_t o = 0; o < t_.size(); ++o) {
      const GramMetrics& g = m_[o][r];
      per.rows.push_back({variant, static_cast<long>(r), static_cast<long>(o), t_[o], g.lambda1, g.participation, g.min_cosine,
                          cd_[o][r]});
    }
  return {std::move(sum), std::move(per)};
}

void GramObserver::append_runs(const GramObserver& other) {
  if (t_.empty()) {
    *this = other;
    return;
  }
  if (other.t_ != t_) throw std::invalid_argument("GramObserver::append_runs: the observation times differ");
  for (std::size_t o = 0; o < t_.size(); ++o) {
    m_[o].insert(m_[o].end(), other.m_[o].begin(), other.m_[o].end());
    cd_[o].insert(cd_[o].end(), other.cd_[o].begin(), other.cd_[o].end());
  }
}

void GramObserver::lambda1_stats(std::size_t o, double& mean, double& sd) const {
  gram_stats(m_.at(o), &GramMetrics::lambda1, mean, sd);
}
void GramObserver::pr_stats(std::size_t o, double& mean, double& sd) const {
  gram_stats(m_.at(o), &GramMetrics::participation, mean, sd);
}

StateTapObserver::StateTapObserver(std::shared_ptr<ArraySink> sink, std::vector<long> layers)
    : sink_(std::move(sink)), layers_(std::move(layers)) {}

template <class B>
void StateTapObserver::tap(double t, const B& Z) {
  const long k = std::lround(t);
  if (std::find(layers_.begin(), layers_.end(), k) == layers_.end()) return;
  sink_->put("layer_" + std::to_string(k), Z.Z.data(),
            {static_cast<std::size_t>(Z.runs), static_cast<std::size_t>(Z.len), static_cast<std::size_t>(Z.Z.cols())});
}
void StateTapObserver::observe(double t, const Batch& Z) { tap(t, Z); }
void StateTapObserver::observe_float(double t, const BatchF& Z) { tap(t, Z); }

bool ArrayTapObserver::wants(const std::string& name, long k) const {
  return name == name_ && std::find(layers_.begin(), layers_.end(), k) != layers_.end();
}
void ArrayTapObserver::tap(const std::string&, long k, const double* data, const std::vector<std::size_t>& shape) {
  sink_->put("layer_" + std::to_string(k), data, shape);
}
void ArrayTapObserver::tap(const std::string&, long k, const float* data, const std::vector<std::size_t>& shape) {
  sink_->put("layer_" + std::to_string(k), data, shape);
}

}  // namespace tokdyn
