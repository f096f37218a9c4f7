#pragma once
// Persistency-of-excitation windows of The Attention Within §VI-B, eq. (23): for a record
// q(1..kappa) of the interaction term of one token,
//   W(T) = min_{0 <= t <= kappa-T} (1/T) sum_{s=t+1}^{t+T} q(s),   T = 1..kappa,
//   T* = min{T : W(T) > 0}, or none when no T up to kappa is admissible.
#include <optional>
#include <vector>

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

}  // namespace tokdyn
