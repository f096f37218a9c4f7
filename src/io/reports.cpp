#include "tokdyn/io/reports.hpp"

#include <algorithm>
#include <limits>
#include <optional>

#include "tokdyn/analysis/pe_window.hpp"
#include "tokdyn/io/csv.hpp"

namespace tokdyn {

SummaryWriter::SummaryWriter(const std::filesystem::path& dir)
    : w_(dir / "summary.csv", {"quantity", "value", "paper"}) {}
void SummaryWriter::put(const std::string& q, double v, const std::string& paper) { w_.cell(q).cell(v).cell(paper).end_row(); }
void SummaryWriter::put(const std::string& q, long v, const std::string& paper) { w_.cell(q).cell(v).cell(paper).end_row(); }

void write_metrics_csv(const std::filesystem::path& file, const std::vector<std::pair<std::string, const GramObserver*>>& variants,
                       const std::string& label) {
  CsvWriter csv(file, {label, "layer", "lambda1_mean", "lambda1_std", "pr_mean", "pr_std", "consensus_dist_mean",
                       "min_cosine_mean"});
  for (const auto& [name, gram] : variants)
    for (std::size_t o = 0; o < gram->times().size(); ++o) {
      double l1m, l1s, prm, prs, cd = 0.0, mc = 0.0;
      gram->lambda1_stats(o, l1m, l1s);
      gram->pr_stats(o, prm, prs);
      const std::size_t runs = gram->metrics()[o].size();
      for (std::size_t r = 0; r < runs; ++r) {
        cd += gram->consensus()[o][r];
        mc += gram->metrics()[o][r].min_cosine;
      }
      csv.cell(name).cell(static_cast<long>(o)).cell(l1m).cell(l1s).cell(prm).cell(prs).cell(cd / static_cast<double>(runs))
          .cell(mc / static_cast<double>(runs));
      csv.end_row();
    }
}

void write_pe_csvs(const std::filesystem::path& dir, const std::vector<std::pair<std::string, const QRecord*>>& variants,
                   int fig_run, const std::string& label) {
  CsvWriter pe(dir / "pe.csv", {label, "run", "token", "T_star"});
  CsvWriter curve(dir / "pe_curve.csv", {label, "token", "T", "worst_window_avg"});
  CsvWriter summary(dir / "pe_summary.csv", {label, "reading", "T_star", "run", "token"});
  CsvWriter qcsv(dir / "q.csv", {label, "run", "token", "layer", "q"});
  for (const auto& [name, rec] : variants) {
    const QRecord& Q = *rec;
    const int runs = static_cast<int>(Q.size());
    const int len = runs ? static_cast<int>(Q[0].size()) : 0;
    const std::size_t depth = len ? Q[0][0].size() : 0;
    std::vector<double> env_all(depth, std::numeric_limits<double>::infinity());
    std::vector<double> env_first = env_all;
    std::optional<int> text_max = 0, caption_max = 0;
    int text_run = -1, text_tok = -1, cap_run = -1;
    for (int i = 0; i < len; ++i) {
      std::vector<double> env_tok(depth, std::numeric_limits<double>::infinity());
      for (int r = 0; r < runs; ++r) {
        const auto& q = Q[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)];
        const auto W = worst_window_average(q);
        const auto ts = smallest_admissible_window(W);
        pe.cell(name).cell(r).cell(i + 1);
        if (ts) pe.cell(static_cast<long>(*ts)); else pe.empty();
        pe.end_row();
        for (std::size_t T = 0; T < W.size(); ++T) {
          env_tok[T] = std::min(env_tok[T], W[T]);
          env_all[T] = std::min(env_all[T], W[T]);
          if (i == 0) env_first[T] = std::min(env_first[T], W[T]);
        }
        // Text reading: max over all tokens and runs; none if any (run, token) has none.
        if (text_max) {
          if (!ts) { text_max.reset(); text_run = r; text_tok = i + 1; }
          else if (*ts > *text_max) { text_max = ts; text_run = r; text_tok = i + 1; }
        }
        if (i == 0 && caption_max) {
          if (!ts) { caption_max.reset(); cap_run = r; }
          else if (*ts > *caption_max) { caption_max = ts; cap_run = r; }
        }
      }
      for (std::size_t T = 0; T < env_tok.size(); ++T) {
        curve.cell(name).cell(i + 1).cell(static_cast<long>(T + 1)).cell(env_tok[T]);
        curve.end_row();
      }
    }
    auto put = [&](const char* reading, std::optional<int> t, int run, int tok) {
      summary.cell(name).cell(std::string(reading));
      if (t) summary.cell(static_cast<long>(*t)); else summary.empty();
      if (run >= 0) summary.cell(run); else summary.empty();
      if (tok >= 0) summary.cell(tok); else summary.empty();
      summary.end_row();
    };
    put("text", text_max, text_run, text_tok);
    put("caption", caption_max, cap_run, 1);
    put("envelope", smallest_admissible_window(env_all), -1, -1);
    put("envelope_first_token", smallest_admissible_window(env_first), -1, 1);
    if (fig_run < runs)
      for (int i = 0; i < len; ++i) {
        const auto& q = Q[static_cast<std::size_t>(fig_run)][static_cast<std::size_t>(i)];
        for (std::size_t s = 0; s < q.size(); ++s) {
          qcsv.cell(name).cell(fig_run).cell(i + 1).cell(static_cast<long>(s + 1)).cell(q[s]);
          qcsv.end_row();
        }
      }
  }
}

}  // namespace tokdyn
