#pragma once
// Observers see (k or t, Z) as the driver goes and accumulate numbers; no trajectory is stored.
// Metrics of The Attention Within §VI: normalised Gram spectrum lambda_bar_1 and participation
// ratio r; the interaction term q_i(t) of §VI-B (model-supplied); min pairwise cosine; distance
// to the nearest consensus configuration.
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "tokdyn/core/array_sink.hpp"
#include "tokdyn/engine/dynamics.hpp"
#include "tokdyn/core/tokens.hpp"

namespace tokdyn {

/// One cell of a tidy table: empty ("none"), text, integer or real.
using Cell = std::variant<std::monostate, std::string, long, double>;

/// A tidy table an observer emits: written to <name>.csv (io/reports.hpp write_tables), one row
/// per observation, the key columns (variant, run, layer, t, ...) first.
struct Table {
  std::string name;
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
};

class Observer {
 public:
  virtual ~Observer() = default;
  /// Called with the state after layer k (k = 0: the initial tokens) or at time t.
  virtual void observe(double t, const Batch& Z) = 0;
  /// The same for a float state (fp32 models). Default: observe() of the state widened to double
  /// (exact), so every observer works on every model.
  virtual void observe_float(double t, const BatchF& Z);
  /// The tidy tables this observer emits for one variant (the first column, named `label`, holds
  /// `variant`). Observers that write nothing themselves return none.
  virtual std::vector<Table> tables(const std::string& label, const std::string& variant) const;
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

/// Euclidean distance in (R^d)^len from the normalised tokens to the nearest point of the
/// attention models' consensus manifold C = {(x, ..., x) : |x| = 1} (RoPE paper §1.9, every token
/// at one point of the sphere, in any direction): sqrt(2 len - 2 |sum_i zhat_i|), attained at x =
/// the normalised mean (channel = -1). 0 exactly at consensus, whatever its direction.
ConsensusDistance diagonal_consensus_distance(const Eigen::Ref<const Tokens>& Z);

/// Which consensus set GramObserver measures the distance to (the `consensus_dist` columns):
///   Axes      the SSM paper's Def. III.1 sets (s_1 e_mu, ..., s_len e_mu) (Mamba-2 / SSM presets:
///             tokens collapse onto a coordinate axis, with signs);
///   Diagonal  the attention models' C = {(x, ..., x)} (rope-flow: tokens collapse to one point).
enum class ConsensusSet { Axes, Diagonal };

/// Records gram_metrics and consensus_distance of every run at every observation.
/// Values are stored as [observation][run] (a few numbers per layer and run). Tables:
///   metrics.csv       `<label>,layer,t,lambda1_mean,lambda1_std,pr_mean,pr_std,consensus_dist_mean,min_cosine_mean`
///                     (mean and population std over runs; `layer` is the observation index)
///   metrics_runs.csv  `<label>,run,layer,t,lambda1,participation,min_cosine,consensus_dist` (every run)
class GramObserver final : public Observer {
 public:
  explicit GramObserver(ConsensusSet set = ConsensusSet::Axes) : set_(set) {}
  ConsensusSet consensus_set() const { return set_; }
  void observe(double t, const Batch& Z) override;
  std::vector<Table> tables(const std::string& label, const std::string& variant) const override;
  /// Appends the runs of `other` (the same observation times: another chunk of the same batch)
  /// after this observer's runs.
  void append_runs(const GramObserver& other);
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
  ConsensusSet set_ = ConsensusSet::Axes;
};

/// Hands the state at chosen layers to a sink as "layer_K", shape [runs, tokens, d], in the model's
/// precision (float32 for float states, float64 otherwise): the per-layer states of any model
/// (io's NpyFolderSink writes them as <dir>/layer_K.npy).
class StateTapObserver final : public Observer {
 public:
  StateTapObserver(std::shared_ptr<ArraySink> sink, std::vector<long> layers);
  void observe(double t, const Batch& Z) override;
  void observe_float(double t, const BatchF& Z) override;

 private:
  template <class B>
  void tap(double t, const B& Z);
  std::shared_ptr<ArraySink> sink_;
  std::vector<long> layers_;
};

/// Hands a model's tap `name` (dynamics.hpp TapObserver) at chosen layers to a sink as "layer_K",
/// in the model's precision and with the tap's shape (e.g. Mamba-2's "mixing" of `heads`:
/// [runs, heads, tokens, tokens]); io's NpyFolderSink writes <dir>/layer_K.npy.
class ArrayTapObserver final : public TapObserver {
 public:
  ArrayTapObserver(std::shared_ptr<ArraySink> sink, std::string name, std::vector<long> layers, std::vector<int> heads = {})
      : sink_(std::move(sink)), name_(std::move(name)), layers_(std::move(layers)), heads_(std::move(heads)) {}
  bool wants(const std::string& name, long k) const override;
  std::vector<int> heads(const std::string& name, long) const override { return name == name_ ? heads_ : std::vector<int>{}; }
  void tap(const std::string& name, long k, const double* data, const std::vector<std::size_t>& shape) override;
  void tap(const std::string& name, long k, const float* data, const std::vector<std::size_t>& shape) override;

 private:
  std::shared_ptr<ArraySink> sink_;
  std::string name_;
  std::vector<long> layers_;
  std::vector<int> heads_;
};

/// Calls a function with tap `name` at every layer (tests, recorders).
class CallbackTapObserver final : public TapObserver {
 public:
  using Fn = std::function<void(long k, const double* data, const std::vector<std::size_t>& shape)>;
  CallbackTapObserver(std::string name, Fn f) : name_(std::move(name)), f_(std::move(f)) {}
  bool wants(const std::string& name, long) const override { return name == name_; }
  void tap(const std::string&, long k, const double* data, const std::vector<std::size_t>& shape) override { f_(k, data, shape); }
  using TapObserver::tap;

 private:
  std::string name_;
  Fn f_;
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
