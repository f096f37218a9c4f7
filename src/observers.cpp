#include "tokdyn/observers.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tokdyn {

GramMetrics gram_metrics(const Eigen::Ref<const Tokens>& Z) {
  const Eigen::Index len = Z.rows();
  Tokens Zh = Z;
  for (Eigen::Index i = 0; i < len; ++i) {
    const double nrm = Zh.row(i).norm();
    if (nrm > 0.0) Zh.row(i) /= nrm;
  }
  Mat G = Zh * Zh.transpose();  // uncentred Gram matrix of the normalised tokens (§VI)
  const double L = static_cast<double>(len);
  GramMetrics m{};
  // r = (sum_k lambda_bar_k^2)^{-1} = len^2 / ||G||_F^2: no eigensolver needed (The Attention Within §VI).
  m.participation = L * L / G.squaredNorm();
  Eigen::SelfAdjointEigenSolver<Mat> es(G, Eigen::EigenvaluesOnly);
  m.lambda1 = es.eigenvalues()(len - 1) / L;
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
  const Eigen::Index len = Z.rows(), d = Z.cols();
  ConsensusDistance best{std::numeric_limits<double>::infinity(), 0};
  Vec inv(len), sq(len);
  for (Eigen::Index i = 0; i < len; ++i) {
    sq[i] = Z.row(i).squaredNorm();
    inv[i] = sq[i] > 0.0 ? 1.0 / std::sqrt(sq[i]) : 0.0;
  }
  for (Eigen::Index mu = 0; mu < d; ++mu) {
    double s = 0.0;
    for (Eigen::Index i = 0; i < len; ++i) {
      const double a = std::abs(Z(i, mu)) * inv[i];
      // Tangential mass sum_{nu != mu} (z^nu)^2: by subtraction unless z^mu dominates (at most
      // one channel per token), where it is summed directly to avoid cancellation.
      const double tot = sq[i], zz = Z(i, mu) * Z(i, mu);
      const double tang = (zz > 0.5 * tot ? Z.row(i).head(mu).squaredNorm() + Z.row(i).tail(d - mu - 1).squaredNorm()
                                          : tot - zz) * inv[i] * inv[i];
      s += 2.0 * tang / (1.0 + a);
    }
    if (s < best.distance) best = {s, static_cast<int>(mu)};
  }
  best.distance = std::sqrt(best.distance);
  return best;
}

void GramObserver::observe(double t, const Batch& Z) {
  t_.push_back(t);
  std::vector<GramMetrics> row(static_cast<std::size_t>(Z.runs));
  std::vector<double> cd(static_cast<std::size_t>(Z.runs));
#pragma omp parallel for schedule(static) if (Z.runs > 1 && Z.Z.size() * Z.len >= 65536)
  for (int r = 0; r < Z.runs; ++r) {
    row[static_cast<std::size_t>(r)] = gram_metrics(Z.run(r));
    cd[static_cast<std::size_t>(r)] = consensus_distance(Z.run(r)).distance;
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

void GramObserver::lambda1_stats(std::size_t o, double& mean, double& sd) const {
  gram_stats(m_.at(o), &GramMetrics::lambda1, mean, sd);
}
void GramObserver::pr_stats(std::size_t o, double& mean, double& sd) const {
  gram_stats(m_.at(o), &GramMetrics::participation, mean, sd);
}

void InteractionObserver::observe(double t, const Batch& Z) {
  f_(static_cast<long>(std::llround(t)) + 1, Z, buf_);
  if (q_.empty()) q_.assign(static_cast<std::size_t>(Z.runs), std::vector<std::vector<double>>(static_cast<std::size_t>(Z.len)));
  for (int r = 0; r < Z.runs; ++r)
    for (int i = 0; i < Z.len; ++i) q_[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)].push_back(buf_(r, i));
}

}  // namespace tokdyn
