#pragma once
// Finite active-set calculus (RoPE paper, Lemma C.1): for finitely many C^1 functions f_a with
// values f and time derivatives df at time t,
//   D+ min_a f_a = min over the active set {a : f_a = min f} of df_a,
//   D+ max_a f_a = max over the active set {a : f_a = max f} of df_a.
// "Active" means within `tol` of the extremum (tol = 0: exact ties only).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace tokdyn {

/// Upper right Dini derivative of min_a f_a. Throws std::invalid_argument on size mismatch or empty input.
inline double dini_min(const std::vector<double>& f, const std::vector<double>& df, double tol = 0.0) {
  if (f.empty() || f.size() != df.size()) throw std::invalid_argument("dini_min: values and rates must be non-empty and equally long");
  const double m = *std::min_element(f.begin(), f.end());
  double d = std::numeric_limits<double>::infinity();
  for (std::size_t a = 0; a < f.size(); ++a)
    if (f[a] <= m + tol) d = std::min(d, df[a]);
  return d;
}

/// Upper right Dini derivative of max_a f_a.
inline double dini_max(const std::vector<double>& f, const std::vector<double>& df, double tol = 0.0) {
  if (f.empty() || f.size() != df.size()) throw std::invalid_argument("dini_max: values and rates must be non-empty and equally long");
  const double m = *std::max_element(f.begin(), f.end());
  double d = -std::numeric_limits<double>::infinity();
  for (std::size_t a = 0; a < f.size(); ++a)
    if (f[a] >= m - tol) d = std::max(d, df[a]);
  return d;
}

}  // namespace tokdyn
