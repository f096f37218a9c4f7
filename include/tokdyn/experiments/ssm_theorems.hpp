#pragma once
// What the presets ssm-theorem-pe (src/experiments/ssm_theorems.cpp) and ssm-theorem-pd
// (src/experiments/ssm_theorem_pd.cpp) share: integrating many runs of a constructed SSM flow and
// recording z_i^mu~ along them, the integrator parameters, the initial tokens, the kernel's
// realisation, the shared output tables (convergence.csv, constants.csv) and check rows.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokdyn/analysis/ssm_trajectory.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/models/ssm/designs.hpp"
#include "tokdyn/engine/observers.hpp"
#include "tokdyn/io/outputs.hpp"

namespace tokdyn::ssm_theorems {

inline constexpr int kChunk = 8;  ///< runs per integration chunk (fixed: thread-count independent)
inline constexpr int kMu = 0;     ///< principal channel of every design here (paper's mu~ = 1)

/// What one variant's runs produced: per observation the Gram metrics of every run, and per
/// (run, token, observation) z_i^mu~ and the tangential mass sum_{nu != mu~} (z_i^nu)^2 (so
/// that b_i and the stable V_i can be formed for any sign pattern afterwards).
struct Recorded {
  std::vector<double> t;
  GramObserver gram;                           ///< Gram metrics of every run at every observation
  std::vector<double> zmu, tang;               ///< [(run * len + i) * nobs + o]
  Tokens final_state;                          ///< (runs * len) x n at t_end
  Mat tail;                                    ///< runs x len: max |z_i^mu~| over the last 20%
  int runs = 0, len = 0;
  std::size_t nobs() const { return t.size(); }
  std::size_t at(int r, int i, std::size_t o) const {
    return (static_cast<std::size_t>(r) * static_cast<std::size_t>(len) + static_cast<std::size_t>(i)) * nobs() + o;
  }
  double b(int r, int i, std::size_t o, int sigma) const { return projected_b(zmu[at(r, i, o)], sigma); }
  double V(int r, int i, std::size_t o, int sigma) const { return lyapunov_V(b(r, i, o, sigma), tang[at(r, i, o)]); }
};

/// How the runs are integrated (parameters integrator, h, rtol, atol).
struct Integration {
  std::string method = "dopri5";  ///< dopri5 | cash_karp54 | fehlberg78 | rk4
  double h = 0.01, rtol = 1e-10, atol = 1e-14;
  bool fixed() const { return method == "rk4"; }
};

/// What the integrator did over every run and variant, for manifest.json.
struct IntegrationLog {
  StepReport steps;     ///< rk4: the step guard's report
  AdaptiveStats stats;  ///< adaptive: accepted / rejected steps
};

Integration integration_of(const Params& P);

/// Fixed step only: refuses an unstable h before any work, from the local rates at the initial
/// states of every variant (so the message gives the step that is safe for all of them).
void refuse_unstable_start(const Integration& in, double t_end, const std::vector<std::pair<SsmSchedulePtr, Batch>>& starts);

/// Integrates the runs of Z0 in chunks of kChunk (threads over chunks), observing every `every`.
Recorded integrate_runs(const SsmSchedulePtr& s, const Batch& Z0, double t_end, const Integration& in, double every,
                        IntegrationLog& log, const ProgressFn& progress);

/// metrics.csv and metrics_runs.csv of the variants (write_tables).
void write_metric_tables(const RunContext& ctx, const std::vector<std::pair<std::string, GramObserver>>& metrics);
/// Rows of convergence.csv: b_i and V_i of the first `max_runs` runs under the sign pattern `signs`.
void write_convergence(CsvWriter& csv, const std::string& variant, const Recorded& R, const std::vector<std::vector<int>>& signs,
                       int max_runs);

/// Initial tokens: run r of variant v from the stream (seed, v, r).
/// near_pole: V_i(0) uniform in [0, v0] with random signs (signs returned); else uniform.
Batch initial_tokens(std::uint64_t seed, int v, int runs, int len, int n, bool near_pole, double v0,
                     std::vector<std::vector<int>>& signs);
/// Signs of the final state (sigma_hat_i = sign z_i^mu~(t_end), Definition III.1).
std::vector<std::vector<int>> final_signs(const Recorded& R);
KernelRealisation realisation(std::uint64_t seed, int n, int m, double rotation);
/// A row of constants.csv (a non-finite value: an empty cell).
void put_constant(CsvWriter& csv, const std::string& v, const std::string& name, double value);
void write_integration_notes(RunContext& ctx, const Integration& in, const IntegrationLog& log);
/// Parameter checks of both presets (c, c_cap, every, the recorded volume).
void check_common(const Params& P);

/// A value against a reference number of the engineering spec (specs/ssm-consensus.md), computed
/// outside tokdyn: |value - expected| <= tol.
void spec_value_row(CheckTable& t, const std::string& check, const std::string& statement, const std::string& quantity,
                    double value, double expected, double tol, const std::string& spec_test, const std::string& why_na = {});

/// Runs x tokens x (n = 4) states, 4 RK4 stages per step, O(l^2 m n) per field evaluation.
ResourceEstimate theorem_estimate(const Params& P, double runs, double tokens);
ParamSpec c_spec(double def, const char* help);

/// convergence.csv and constants.csv (both presets), with the preset's `variant` column.
TableDecl theorem_convergence_table(const ColumnDecl& variant);
TableDecl theorem_constants_table(const ColumnDecl& variant);

}  // namespace tokdyn::ssm_theorems
