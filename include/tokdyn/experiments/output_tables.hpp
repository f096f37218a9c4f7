#pragma once
// Output tables that several presets write with the same schema, declared once (outputs.hpp):
// the Gram metrics of the observers (metrics.csv, metrics_runs.csv). Every preset that writes
// them lists its own variants in the `variant` column.
#include <string>
#include <utility>
#include <vector>

#include "tokdyn/outputs.hpp"

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

}  // namespace tokdyn
