#pragma once
// The tidy CSV files shared by the depth experiments of The Attention Within (§VI): Gram metrics
// per depth, and the persistency-of-excitation windows of §VI-B (eq. (23)) under the four
// readings of T* (the paper does not say over which tokens and runs T* is maximised, so all are
// reported: the text's max over all tokens and runs, the caption's first token only, the envelope
// smallest T with min over tokens and runs of W(T) > 0, and that envelope for the first token).
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokdyn/io/csv.hpp"
#include "tokdyn/observers.hpp"

namespace tokdyn {

/// summary.csv: `quantity,value,paper`: tokdyn's value next to the paper's (empty when the
/// paper prints none).
class SummaryWriter {
 public:
  explicit SummaryWriter(const std::filesystem::path& dir);
  void put(const std::string& quantity, double value, const std::string& paper = "");
  void put(const std::string& quantity, long value, const std::string& paper = "");

 private:
  CsvWriter w_;
};

/// q record of one variant: q[run][token][layer-1], layers 1..depth.
using QRecord = std::vector<std::vector<std::vector<double>>>;

/// metrics.csv: `<label>,layer,lambda1_mean,lambda1_std,pr_mean,pr_std,consensus_dist_mean,min_cosine_mean`.
void write_metrics_csv(const std::filesystem::path& file, const std::vector<std::pair<std::string, const GramObserver*>>& variants,
                       const std::string& label = "variant");

/// pe.csv (`<label>,run,token,T_star`), pe_curve.csv (`<label>,token,T,worst_window_avg`: envelope
/// over runs per token), pe_summary.csv (`<label>,reading,T_star,run,token`) and q.csv
/// (`<label>,run,token,layer,q` for run `fig_run`) into `dir`. Empty T_star means none.
void write_pe_csvs(const std::filesystem::path& dir, const std::vector<std::pair<std::string, const QRecord*>>& variants,
                   int fig_run, const std::string& label = "variant");

}  // namespace tokdyn
