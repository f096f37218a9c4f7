#include "tokdyn/analysis/pe_window.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace tokdyn {

std::vector<double> worst_window_average(const std::vector<double>& q) {
  const std::size_t K = q.size();
  std::vector<double> P(K + 1, 0.0);  // P[s] = q(1) + ... + q(s)
  for (std::size_t s = 0; s < K; ++s) P[s + 1] = P[s] + q[s];
  std::vector<double> W(K);
  for (std::size_t T = 1; T <= K; ++T) {
    double mn = std::numeric_limits<double>::infinity();
    for (std::size_t t = 0; t + T <= K; ++t) mn = std::min(mn, P[t + T] - P[t]);
    W[T - 1] = mn / static_cast<double>(T);
  }
  return W;
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

}  // namespace tokdyn
