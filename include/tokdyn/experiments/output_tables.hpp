#pragma once
// Output tables that several presets write with the same schema, declared once (outputs.hpp):
// the Gram metrics of the observers (metrics.csv, metrics_runs.csv). Every preset that writes
// them lists its own variants in the `variant` column.
#include <string>
#include <utility>
#include <vector>

#include "tokdyn/io/outputs.hpp"

namespace tokdyn {

/// The `variant` column: which configuration of the preset a row belongs to, with the preset's values.
inline ColumnDecl variant_column(std::vector<std::pair<std::string, std::string>> values) {
  return category("variant", "the configuration the row belongs to", std::move(values));
}

/// metrics.csv (GramObserver): Gram metrics averaged over runs, per observation.
inline TableDecl metrics_table(const ColumnDecl& variant) {
  return {"metrics.csv",
          "one observation (layer, or time of a flow) of one variant: Gram metrics of the normalised tokens, over runs",
          {variant, index("layer", "observation index (0: the initial tokens; for a depth model, the layer)", 0),
           real("t", "time of the observation (depth models: the layer; flows: continuous time)"),
           real("lambda1_mean", "top eigenvalue of the Gram matrix of the normalised tokens divided by the number of tokens, mean over runs "
                "(1: consensus)"),
           real("lambda1_std", "its standard deviation over runs"),
           real("pr_mean", "participation ratio (sum lambda)^2 / sum lambda^2 of that Gram matrix, mean over runs (1: rank one)"),
           real("pr_std", "its standard deviation over runs"),
           real("consensus_dist_mean", "distance of the tokens to the nearest consensus point, mean over runs"),
           real("min_cosine_mean", "smallest pairwise cosine of the tokens, mean over runs")}};
}

/// metrics_runs.csv (GramObserver): the same metrics per run.
inline TableDecl metrics_runs_table(const ColumnDecl& variant) {
  return {"metrics_runs.csv", "one run at one observation of one variant: Gram metrics of its normalised tokens",
          {variant, index("run", "run (independent draw of the tokens)", 0),
           index("layer", "observation index (0: the initial tokens; for a depth model, the layer)", 0),
           real("t", "time of the observation (depth models: the layer; flows: continuous time)"),
           real("lambda1", "top eigenvalue of the Gram matrix of the normalised tokens divided by the number of tokens (1: consensus)"),
           real("participation", "participation ratio of that Gram matrix (1: rank one)"),
           real("min_cosine", "smallest pairwise cosine of the tokens"),
           real("consensus_dist", "distance of the tokens to the nearest consensus point")}};
}

/// The spectrum tables of a discrete-QR (Benettin) run, the same in cocycle-spectra and
/// depth-spectra: lyapunov.csv, running.csv, dichotomy.csv. `what`: "of the cocycle" / "of the depth
/// map"; `layer`: the running table's layer column (each preset's own base and meaning);
/// `mu_layers` / `running_layers`: the layers averaged; `running_empty`: what an empty mu_running
/// means (empty: it never is); `unresolved_base`: the base of unresolved_from_layer.
inline std::vector<TableDecl> spectrum_tables(const std::string& what, ColumnDecl layer, const std::string& mu_layers,
                                              const std::string& running_layers, const std::string& running_empty,
                                              int unresolved_base, const std::string& running_rows) {
  const std::string singular = "-inf: the layer maps are exactly singular along this direction (R_ii = 0: log 0)";
  ColumnDecl mu_running = real("mu_running", "mean of log R_ii over layers " + running_layers, "1/layer").may_be_nonfinite(singular);
  mu_running.empty = running_empty;  // empty: the column never holds an empty cell
  return {
      {"lyapunov.csv", "one Lyapunov exponent " + what + " (top k, in QR order)",
       {index("i", "exponent index, in QR order (0: the first column, usually the largest)", 0),
        real("mu", "Lyapunov exponent: mean of log R_ii over layers " + mu_layers, "1/layer").may_be_nonfinite(singular),
        real("gamma", "growth scale exp(mu) per layer (0 for mu = -inf)"),
        flag("resolved", "R_ii never fell to round-off of the frame's image: the exponent measures growth"),
        index("unresolved_from_layer", "first layer at which R_ii fell to round-off (as in running.csv)", unresolved_base)
            .may_be_empty("the column never fell to round-off (resolved = true)")}},
      {"running.csv", "one QR column at one layer" + running_rows + ": its log growth and the running exponent",
       {std::move(layer), index("i", "exponent index, in QR order (as in lyapunov.csv)", 0),
        real("log_r", "log R_ii of the layer", "1/layer").may_be_nonfinite(singular), std::move(mu_running)}},
      {"dichotomy.csv", "one merged dichotomy (Sacker-Sell) interval " + what + " for one Steklov window",
       {integer("H", "Steklov window (layers)"), index("interval", "interval index, ascending (0: the lowest)", 0),
        real("lower", "lower end, as a growth scale (exp of an exponent)"), real("upper", "upper end, as a growth scale"),
        integer("columns", "QR columns whose Bohl intervals merged into this one")}}};
}

}  // namespace tokdyn
