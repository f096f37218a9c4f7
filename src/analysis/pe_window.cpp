#include "tokdyn/analysis/pe_window.hpp"

#include <algorithm>
#include <limits>
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

}  // namespace tokdyn
