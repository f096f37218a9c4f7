#pragma once
// Observers see (k or t, Z) as the driver goes and accumulate numbers; no trajectory is stored.
// Metrics of The Attention Within §VI: normalised Gram spectrum lambda_bar_1 and participation
// ratio r; the interaction term q_i(t) of §VI-B (model-supplied); min pairwise cosine; distance
// to the nearest consensus configuration.
#include <functional>
#include <string>
#include <vector>

#include "tokdyn/tokens.hpp"

namespace tokdyn {

class Observer {
 public:
  virtual ~Observer() = default;
  /// Called with the state after layer k (k = 0: the initial tokens) or at time t.
  virtual void observe(double t, const Batch& Z) = 0;
};

/// Per-sequence Gram metrics of one configuration Z (len x d), tokens normalised first.
struct GramMetrics {
  double lambda1;       ///< largest eigenvalue of G = Zhat Zhat^T divided by len (§VI)
  double participation; ///< r = (sum_k lambda_bar_k^2)^{-1} = len^2 / ||G||_F^2
  double min_cosine;    ///< min_{i<j} <zhat_i, zhat_j>
};
GramMetrics gram_metrics(const Eigen::Ref<const Tokens>& Z);

/// Mean and population standard deviation over runs of one Gram metric (the mean +/- std bands of
/// The Attention Within §VI, Figs. 2-3): field is e.g. &GramMetrics::lambda1.
void gram_stats(const std::vector<GramMetrics>& runs, double GramMetrics::*field, double& mean, double& sd);

/// Euclidean distance in (R^d)^len from the normalised tokens to the nearest consensus
/// configuration (s_1 e^mu, ..., s_len e^mu) of Definition III.1, over all channels mu and signs.
struct ConsensusDistance {
  double distance;
  int channel;  ///< the channel mu of the nearest consensus set (0-based)
};
ConsensusDistance consensus_distance(const Eigen::Ref<const Tokens>& Z);

/// Records gram_metrics and consensus_distance of every run at every observation.
/// Values are stored as [observation][run] (a few numbers per layer and run).
class GramObserver final : public Observer {
 public:
  void observe(double t, const Batch& Z) override;
  const std::vector<double>& times() const { return t_; }
  const std::vector<std::vector<GramMetrics>>& metrics() const { return m_; }
  const std::vector<std::vector<double>>& consensus() const { return cd_; }
  /// Mean and (population) standard deviation across runs at observation o.
  void lambda1_stats(std::size_t o, double& mean, double& sd) const;
  void pr_stats(std::size_t o, double& mean, double& sd) const;

 private:
  std::vector<double> t_;
  std::vector<std::vector<GramMetrics>> m_;
  std::vector<std::vector<double>> cd_;
};

/// Records q_i(t) for every run and token through a model-supplied function that writes
/// q (runs x len) for the state entering layer k. Stored as q[run][token][observation].
class InteractionObserver final : public Observer {
 public:
  using QFunction = std::function<void(long k, const Batch& Z, Mat& q)>;
  explicit InteractionObserver(QFunction f) : f_(std::move(f)) {}
  /// Called by the driver with the state entering layer k = t + 1 (pre-layer hook).
  void observe(double t, const Batch& Z) override;
  const std::vector<std::vector<std::vector<double>>>& q() const { return q_; }

 private:
  QFunction f_;
  Mat buf_;
  std::vector<std::vector<std::vector<double>>> q_;
};

/// Calls a function at every observation (tests, taps).
class CallbackObserver final : public Observer {
 public:
  explicit CallbackObserver(std::function<void(double, const Batch&)> f) : f_(std::move(f)) {}
  void observe(double t, const Batch& Z) override { f_(t, Z); }

 private:
  std::function<void(double, const Batch&)> f_;
};

}  // namespace tokdyn
