// The block-level HMM's risks by exact enumeration (categorical emissions, tiny cases) and by Monte
// Carlo with exact filtering, threaded over sequences with one random stream each and reduced in a
// fixed order; the estimates (mean and standard error) of loss columns and paired gaps. See
// block_hmm.hpp; the filter they run is in block_hmm_filter.cpp.
#include "tokdyn/analysis/block_hmm.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "tokdyn/core/parallel.hpp"
#include "block_hmm_internal.hpp"

namespace tokdyn::hmm {

using detail::losses_scaled;
using detail::prepare;
using detail::Prepared;
using detail::priors_prepared;
using detail::scaled_lik;
using detail::ScaledLik;

// ---- Enumeration and Monte Carlo -----------------------------------------------------------------

void enumerate(const BlockHmm& m, int K, const std::function<void(const Matrix& x, double p)>& f) {
  if (m.e.family() != Family::Categorical) throw std::invalid_argument("enumerate: expected a categorical emission");
  const int V = m.e.symbols();
  const int T = K * m.P;
  const double count = std::pow(static_cast<double>(V), static_cast<double>(T));
  if (K < 1 || count > 4194304.0)
    throw std::invalid_argument(fmt::format("enumerate: expected V^(K P) <= 2^22 sequences, got {}^{}", V, T));
  Matrix x = Matrix::Zero(T, 1);
  for (long n = 0; n < static_cast<long>(count); ++n) {
    long r = n;
    for (int t = T - 1; t >= 0; --t) {
      x(t, 0) = static_cast<double>(r % V);
      r /= V;
    }
    f(x, std::exp(log_joint(m, x)));
  }
}

std::vector<double> exact_risks(const BlockHmm& m, int K, const std::vector<Summary>& preds, int first_block, double* mass,
                                double* max_abs_gap_first_two) {
  std::vector<double> r(preds.size(), 0.0);
  double total = 0.0, gap = 0.0;
  enumerate(m, K, [&](const Matrix& x, double p) {
    total += p;
    std::vector<double> v(preds.size());
    for (std::size_t j = 0; j < preds.size(); ++j) {
      v[j] = sequence_risk(m, x, preds[j], first_block);
      r[j] += p * v[j];
    }
    if (preds.size() >= 2) gap = std::max(gap, std::abs(v[0] - v[1]));
  });
  if (mass) *mass = total;
  if (max_abs_gap_first_two) *max_abs_gap_first_two = gap;
  return r;
}

namespace {
/// The per-predictor risks of sequence n (stream (seed, stream, n)).
void sequence_losses(const BlockHmm& m, const Prepared& pr, int K, std::uint64_t seed, std::uint64_t stream, long n,
                     const std::vector<Summary>& preds, int first_block, double* out) {
  Rng rng(seed, {stream, static_cast<std::uint64_t>(n)});
  const Sequence s = sample(m, K, rng);
  const Matrix tokll = token_loglik(m, s.x);
  const ScaledLik sl = scaled_lik(tokll);
  const Eigen::Index b = static_cast<Eigen::Index>(first_block) * m.P;
  for (std::size_t j = 0; j < preds.size(); ++j) {
    const double sum = losses_scaled(sl, priors_prepared(m, pr, s.x, tokll, preds[j]), m.P, b, nullptr);
    out[j] = sum / static_cast<double>(s.x.rows() - b);
  }
}

void check_mc(const BlockHmm& m, int K, long N, int first_block) {
  m.validate();
  if (N < 1 || first_block < 0 || K < first_block + 1)
    throw std::invalid_argument(fmt::format("Monte Carlo: expected N >= 1 sequences and K > first_block blocks, got N = {}, K = {}", N, K));
}

/// Running mean and sum of squared deviations (Welford), combinable (Chan et al.).
struct Moments {
  double n = 0.0, mean = 0.0, m2 = 0.0;
  void add(double x) {
    n += 1.0;
    const double d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
  }
  void merge(const Moments& o) {
    if (o.n == 0.0) return;
    const double nn = n + o.n, d = o.mean - mean;
    mean += d * o.n / nn;
    m2 += o.m2 + d * d * n * o.n / nn;
    n = nn;
  }
  Estimate estimate() const { return {mean, n > 1.0 ? std::sqrt(m2 / (n - 1.0) / n) : 0.0}; }
};
}  // namespace

Matrix monte_carlo_losses(const BlockHmm& m, int K, long N, std::uint64_t seed, std::uint64_t stream, const std::vector<Summary>& preds,
                          int first_block) {
  check_mc(m, K, N, first_block);
  Matrix loss(N, static_cast<Eigen::Index>(preds.size()));
  const Prepared pr = prepare(m, K);
  ParallelErrors errors;
#pragma omp parallel for schedule(static)
  for (long n = 0; n < N; ++n) {
    if (errors.failed()) continue;
    try {
      Vector row(static_cast<Eigen::Index>(preds.size()));
      sequence_losses(m, pr, K, seed, stream, n, preds, first_block, row.data());
      loss.row(n) = row.transpose();
    } catch (...) {
      errors.capture();
    }
  }
  errors.rethrow();
  return loss;
}

McStats monte_carlo(const BlockHmm& m, int K, long N, std::uint64_t seed, std::uint64_t stream, const std::vector<Summary>& preds,
                    int first_block, long chunk) {
  check_mc(m, K, N, first_block);
  if (chunk < 1) throw std::invalid_argument(fmt::format("Monte Carlo: expected a chunk of >= 1 sequences, got {}", chunk));
  const std::size_t J = preds.size();
  const long chunks = (N + chunk - 1) / chunk;
  struct Part {
    std::vector<Moments> risk, gap;
    std::vector<double> max_gap;
  };
  std::vector<Part> parts(static_cast<std::size_t>(chunks), Part{std::vector<Moments>(J), std::vector<Moments>(J), std::vector<double>(J, 0.0)});
  const Prepared pr = prepare(m, K);
  ParallelErrors errors;
#pragma omp parallel for schedule(static, 1)
  for (long c = 0; c < chunks; ++c) {
    if (errors.failed()) continue;
    try {
      Part& part = parts[static_cast<std::size_t>(c)];
      std::vector<double> row(J);
      for (long n = c * chunk; n < std::min(N, (c + 1) * chunk); ++n) {
        sequence_losses(m, pr, K, seed, stream, n, preds, first_block, row.data());
        for (std::size_t j = 0; j < J; ++j) {
          part.risk[j].add(row[j]);
          part.gap[j].add(row[j] - row[0]);
          part.max_gap[j] = std::max(part.max_gap[j], std::abs(row[j] - row[0]));
        }
      }
    } catch (...) {
      errors.capture();
    }
  }
  errors.rethrow();
  McStats st;
  st.n = N;
  std::vector<Moments> risk(J), gap(J);
  st.max_abs_gap.assign(J, 0.0);
  for (const Part& part : parts)
    for (std::size_t j = 0; j < J; ++j) {
      risk[j].merge(part.risk[j]);
      gap[j].merge(part.gap[j]);
      st.max_abs_gap[j] = std::max(st.max_abs_gap[j], part.max_gap[j]);
    }
  for (std::size_t j = 0; j < J; ++j) {
    st.risk.push_back(risk[j].estimate());
    st.gap.push_back(gap[j].estimate());
  }
  return st;
}

Estimate column_estimate(const Matrix& loss, int j) {
  const Eigen::Index N = loss.rows();
  double s = 0.0;
  for (Eigen::Index n = 0; n < N; ++n) s += loss(n, j);
  const double mean = s / static_cast<double>(N);
  double v = 0.0;
  for (Eigen::Index n = 0; n < N; ++n) v += (loss(n, j) - mean) * (loss(n, j) - mean);
  const double se = N > 1 ? std::sqrt(v / static_cast<double>(N - 1) / static_cast<double>(N)) : 0.0;
  return {mean, se};
}

Estimate paired_gap(const Matrix& loss, int a, int b) {
  Matrix d(loss.rows(), 1);
  d.col(0) = loss.col(a) - loss.col(b);
  return column_estimate(d, 0);
}

}  // namespace tokdyn::hmm
