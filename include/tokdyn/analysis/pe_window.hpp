#pragma once
// Persistency-of-excitation windows of The Attention Within §VI-B, eq. (23): for a record
// q(1..kappa) of the interaction term of one token,
//   W(T) = min_{0 <= t <= kappa-T} (1/T) sum_{s=t+1}^{t+T} q(s),   T = 1..kappa,
//   T* = min{T : W(T) > 0}, or none when no T up to kappa is admissible.
#include <optional>
#include <string>
#include <vector>

#include "tokdyn/engine/observers.hpp"

namespace tokdyn {

/// W(T) for T = 1..q.size() (entry T-1), by prefix sums: O(kappa^2).
std::vector<double> worst_window_average(const std::vector<double>& q);
/// W(T) of (23) for one window length T (1 <= T <= q.size(), else std::invalid_argument); the
/// same value, to the bit, as entry T-1 of worst_window_average(q).
double worst_window_average(const std::vector<double>& q, int T);

/// Smallest admissible window T* of (23), or nullopt ("none").
std::optional<int> smallest_admissible_window(const std::vector<double>& W);

/// Average of q over consecutive windows of length T: entry s (0-based) is the mean of
/// q(s+1..s+T), s = 0..kappa-T (the middle panel of Figs. 4-5).
std::vector<double> window_averages(const std::vector<double>& q, int T);

/// q record of one variant: q[run][token][layer-1], layers 1..depth.
using QRecord = std::vector<std::vector<std::vector<double>>>;

/// T* of eq. (23) over all runs and tokens of a record, under the four readings (the paper does not
/// say over which tokens and runs T* is maximised, so all are reported): the text's max over all
/// tokens and runs ("none" if any (run, token) has none), the caption's max over runs for the first
/// token, the envelope (smallest T with min over tokens and runs of W(T) > 0) and that envelope for
/// the first token.
struct PeReadings {
  struct Reading {
    std::optional<int> t_star;
    int run = -1;    ///< the run that attains it (-1: not a single run)
    int token = -1;  ///< 1-based token (-1: not a single token)
  };
  std::vector<std::vector<std::optional<int>>> t_star;  ///< [run][token]
  std::vector<std::vector<double>> envelope_token;      ///< [token][T-1]: min over runs of W(T)
  Reading text, caption, envelope, envelope_first_token;
};
PeReadings pe_readings(const QRecord& q);

/// Records the interaction terms q_i(k) of §VI-B for every run and token. They are model-supplied
/// (Mamba-2: C_i . B_i as the block uses them; the SSM model: its interaction sink): the model's hook
/// calls record() with q of the state entering layer k. Tables:
///   pe.csv          `<label>,run,token,T_star` (empty: none)
///   pe_curve.csv    `<label>,token,T,worst_window_avg` (envelope over runs per token)
///   pe_summary.csv  `<label>,reading,T_star,run,token` (the four readings of PeReadings)
///   q.csv           `<label>,run,token,layer,q` for run `fig_run`
class PeObserver final : public Observer, public TapObserver {
 public:
  explicit PeObserver(int fig_run) : fig_run_(fig_run) {}
  void observe(double, const Batch&) override {}  // q arrives through the model's tap "q"
  // The model's tap "q" ([runs, tokens]) of every layer (a model offering it: SSM, Mamba-2).
  bool wants(const std::string& name, long) const override { return name == "q"; }
  void tap(const std::string&, long, const double* q, const std::vector<std::size_t>& shape) override {
    record(q, static_cast<int>(shape.at(0)), static_cast<int>(shape.at(1)));
  }
  void tap(const std::string&, long, const float* q, const std::vector<std::size_t>& shape) override {
    record(q, static_cast<int>(shape.at(0)), static_cast<int>(shape.at(1)));
  }
  /// q of layer k for `runs` x `len` tokens, run-major (q[r * len + i]).
  template <class T>
  void record(const T* q, int runs, int len) {
    if (q_.empty()) q_.assign(static_cast<std::size_t>(runs), std::vector<std::vector<double>>(static_cast<std::size_t>(len)));
    for (int r = 0; r < runs; ++r)
      for (int i = 0; i < len; ++i)
        q_[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)].push_back(static_cast<double>(q[static_cast<long>(r) * len + i]));
  }
  const QRecord& q() const { return q_; }
  std::vector<Table> tables(const std::string& label, const std::string& variant) const override;

 private:
  int fig_run_;
  QRecord q_;
};

}  // namespace tokdyn
