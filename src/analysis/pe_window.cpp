#include "tokdyn/analysis/pe_window.hpp"

#include <algorithm>
#include <limits>
#include <utility>
#include <stdexcept>

namespace tokdyn {

namespace {

// P[s] = q(1) + ... + q(s), s = 0..kappa.
std::vector<double> prefix_sums(const std::vector<double>& q) {
  std::vector<double> P(q.size() + 1, 0.0);
  for (std::size_t s = 0; s < q.size(); ++s) P[s + 1] = P[s] + q[s];
  return P;
}

// W(T) = min_{0 <= t <= kappa-T} (1/T) sum_{s=t+1}^{t+T} q(s), The Attention Within eq. (23).
double window_minimum(const std::vector<double>& P, std::size_t T) {
  double mn = std::numeric_limits<double>::infinity();
  for (std::size_t t = 0; t + T < P.size(); ++t) mn = std::min(mn, P[t + T] - P[t]);
  return mn / static_cast<double>(T);
}

}  // namespace

std::vector<double> worst_window_average(const std::vector<double>& q) {
  const std::vector<double> P = prefix_sums(q);
  std::vector<double> W(q.size());
  for (std::size_t T = 1; T <= q.size(); ++T) W[T - 1] = window_minimum(P, T);
  return W;
}

double worst_window_average(const std::vector<double>& q, int T) {
  if (T < 1 || static_cast<std::size_t>(T) > q.size())
    throw std::invalid_argument("worst_window_average: need 1 <= T <= record length");
  return window_minimum(prefix_sums(q), static_cast<std::size_t>(T));
}

std::optional<int> smallest_admissible_window(const std::vector<double>& W) {
  for (std::size_t T = 1; T <= W.size(); ++T)
    if (W[T - 1] > 0.0) return static_cast<int>(T);
  return std::nullopt;
}

std::vector<double> window_averages(const std::vector<double>& q, int T) {
  if (T < 1) throw std::invalid_argument("window_averages: T must be >= 1");
  std::vector<double> out;
  double s = 0.0;
  for (std::size_t i = 0; i < q.size(); ++i) {
    s += q[i];
    if (i >= static_cast<std::size_t>(T)) s -= q[i - static_cast<std::size_t>(T)];
    if (i + 1 >= static_cast<std::size_t>(T)) out.push_back(s / T);
  }
  return out;
}

PeReadings pe_readings(const QRecord& Q) {
  PeReadings R;
  const int runs = static_cast<int>(Q.size());
  const int len = runs ? static_cast<int>(Q[0].size()) : 0;
  const std::size_t depth = len ? Q[0][0].size() : 0;
  std::vector<double> env_all(depth, std::numeric_limits<double>::infinity());
  std::vector<double> env_first = env_all;
  R.t_star.assign(static_cast<std::size_t>(runs), std::vector<std::optional<int>>(static_cast<std::size_t>(len)));
  R.envelope_token.assign(static_cast<std::size_t>(len), env_all);
  // Text: max over all tokens and runs (none if any has none); caption: first token only.
  R.text.t_star = 0;
  R.caption.t_star = 0;
  R.caption.token = 1;
  for (int i = 0; i < len; ++i) {
    std::vector<double>& env_tok = R.envelope_token[static_cast<std::size_t>(i)];
    for (int r = 0; r < runs; ++r) {
      const auto W = worst_window_average(Q[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)]);
      const auto ts = smallest_admissible_window(W);
      R.t_star[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = ts;
      for (std::size_t T = 0; T < W.size(); ++T) {
        env_tok[T] = std::min(env_tok[T], W[T]);
        env_all[T] = std::min(env_all[T], W[T]);
        if (i == 0) env_first[T] = std::min(env_first[T], W[T]);
      }
      if (R.text.t_star && (!ts || *ts > *R.text.t_star)) R.text = {ts, r, i + 1};
      if (i == 0 && R.caption.t_star && (!ts || *ts > *R.caption.t_star)) R.caption = {ts, r, 1};
    }
  }
  if (R.text.t_star && R.text.run < 0) R.text.token = -1;
  R.envelope = {smallest_admissible_window(env_all), -1, -1};
  R.envelope_first_token = {smallest_admissible_window(env_first), -1, 1};
  return R;
}

std::vector<Table> PeObserver::tables(const std::string& label, const std::string& variant) const {
  auto opt = [](std::optional<int> v) -> Cell { return v ? Cell(static_cast<long>(*v)) : Cell(); };
  auto idx = [](int v) -> Cell { return v >= 0 ? Cell(static_cast<long>(v)) : Cell(); };
  const PeReadings R = pe_readings(q_);
  Table pe{"pe", {label, "run", "token", "T_star"}, {}};
  Table curve{"pe_curve", {label, "token", "T", "worst_window_avg"}, {}};
  Table summary{"pe_summary", {label, "reading", "T_star", "run", "token"}, {}};
  Table qt{"q", {label, "run", "token", "layer", "q"}, {}};
  const int runs = static_cast<int>(q_.size());
  const int len = runs ? static_cast<int>(q_[0].size()) : 0;
  for (int i = 0; i < len; ++i) {
    for (int r = 0; r < runs; ++r)
      pe.rows.push_back({variant, static_cast<long>(r), static_cast<long>(i + 1), opt(R.t_star[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)])});
    const auto& env = R.envelope_token[static_cast<std::size_t>(i)];
    for (std::size_t T = 0; T < env.size(); ++T)
      curve.rows.push_back({variant, static_cast<long>(i + 1), static_cast<long>(T + 1), env[T]});
  }
  const std::pair<const char*, const PeReadings::Reading*> readings[] = {
      {"text", &R.text}, {"caption", &R.caption}, {"envelope", &R.envelope}, {"envelope_first_token", &R.envelope_first_token}};
  for (const auto& [name, rd] : readings)
    summary.rows.push_back({variant, std::string(name), opt(rd->t_star), idx(rd->run), idx(rd->token)});
  if (fig_run_ < runs)
    for (int i = 0; i < len; ++i) {
      const auto& q = q_[static_cast<std::size_t>(fig_run_)][static_cast<std::size_t>(i)];
      for (std::size_t s = 0; s < q.size(); ++s)
        qt.rows.push_back({variant, static_cast<long>(fig_run_), static_cast<long>(i + 1), static_cast<long>(s + 1), q[s]});
    }
  return {std::move(pe), std::move(curve), std::move(summary), std::move(qt)};
}

}  // namespace tokdyn
