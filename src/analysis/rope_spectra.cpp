// Consensus kernels, their spectra, the resonant-ring Bessel-aliasing spectrum and scaled
// modified Bessel functions (see include/tokdyn/analysis/rope_spectra.hpp).
#include "tokdyn/analysis/rope_spectra.hpp"

#include <stdexcept>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <numeric>
#include <sstream>
#include <string>

#include "tokdyn/core/error.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/core/parallel.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/core/symmetric_eigen.hpp"

namespace tokdyn::rope {
namespace {

using ColMat = Eigen::MatrixXd;
using tokdyn::kPi;
std::string num(double x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  return s.str();
}

[[noreturn]] void spectra_bad(const std::string& where, const std::string& what) { throw std::invalid_argument(where + ": " + what); }

void check_beta(const char* where, double beta) {
  if (!std::isfinite(beta) || beta < 0.0) spectra_bad(where, "beta must be finite and >= 0, got " + num(beta));
}

// The Miller start grows like 10 sqrt(beta): beyond kMaxBesselBeta the work (> 1e7 steps) is refused.
void check_bessel_beta(double beta) {
  check_beta("bessel_i_scaled", beta);
  if (beta > kMaxBesselBeta) spectra_bad("bessel_i_scaled", "beta must be <= " + num(kMaxBesselBeta) + ", got " + num(beta));
}

void check_ring(const char* where, int n, double beta) {
  if (n < 2) spectra_bad(where, "n must be >= 2, got " + std::to_string(n));
  check_beta(where, beta);
}

// phi(k) = k asinh(k/beta) - sqrt(beta^2 + k^2) + beta: a lower estimate of log(I_0 / I_k)
// (uniform Debye asymptotics), used only to choose truncation points. beta > 0.
double log_decay(double k, double beta) {
  return k * std::asinh(k / beta) - std::hypot(beta, k) + beta;
}

// Smallest k >= k0 with phi(k) >= target (beta > 0).
int decay_index(double beta, double target, int k0 = 0) {
  long long k = std::max(k0, 0);
  long long step = 1;
  while (log_decay(static_cast<double>(k), beta) < target) {
    k += step;
    step *= 2;
  }
  // Binary refinement back towards the smallest qualifying k.
  long long lo = std::max<long long>(k0, k - step), hi = k;
  while (lo < hi) {
    const long long mid = lo + (hi - lo) / 2;
    if (log_decay(static_cast<double>(mid), beta) >= target) hi = mid; else lo = mid + 1;
  }
  return static_cast<int>(std::min<long long>(hi, std::numeric_limits<int>::max() / 2));
}

// Rigorous upper bound of log I~_k(beta): I_k(b) <= (b/2)^k / k! e^{b^2/(4(k+1))}.
double log_bessel_bound(int k, double beta) {
  return k * std::log(beta / 2.0) - std::lgamma(k + 1.0) + beta * beta / (4.0 * (k + 1.0)) - beta;
}

// An order c such that I~_k(beta) underflows double for every k >= c (so those are exactly 0):
// the rigorous bound above is below the log of the smallest subnormal at c, and I~_k decreases in
// k. Returns kmax + 1 when the bound does not certify underflow at kmax.
int underflow_order(int kmax, double beta) {
  constexpr double kLogTiny = -746.0;  // log(4.9e-324) = -744.4
  auto under = [&](int k) { return k >= 1 && log_bessel_bound(k, beta) < kLogTiny; };
  if (!under(kmax)) return kmax + 1;
  int lo = 1, hi = kmax;  // invariant: under(hi)
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (under(mid)) hi = mid; else lo = mid + 1;
  }
  return hi;
}

ColMat to_col(const Mat& M) { return ColMat(M); }

Vec sorted_desc(Vec v) {
  std::sort(v.data(), v.data() + v.size(), std::greater<double>());
  return v;
}

Vec sym_eigenvalues(const ColMat& M) { return lapack_symmetric_eigenvalues(M); }  // ascending

long long mod(long long a, long long n) {
  const long long r = a % n;
  return r < 0 ? r + n : r;
}

// t[r] = 2 sin^2(pi min(r, L - r) / L) = 1 - cos(2 pi r / L), exactly symmetric in r <-> L - r.
std::vector<double> one_minus_cos_table(int L) {
  std::vector<double> t(L);
  for (int r = 0; r < L; ++r) {
    const double s = std::sin(kPi * std::min(r, L - r) / L);
    t[r] = 2.0 * s * s;
  }
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Bessel

std::vector<double> bessel_i_scaled_all(int kmax, double beta) {
  if (kmax < 0) spectra_bad("bessel_i_scaled_all", "kmax must be >= 0, got " + std::to_string(kmax));
  check_bessel_beta(beta);
  std::vector<double> out(static_cast<std::size_t>(kmax) + 1, 0.0);
  if (beta == 0.0) {
    out[0] = 1.0;
    return out;
  }
  // Orders from kcap on underflow to exactly 0; compute only below.
  const int kcap = underflow_order(kmax, beta);
  const int keff = std::min(kmax, kcap - 1);
  // Start N of the backward ratio recurrence: I_N / I_0 < e^{-50} and I_N / I_keff < e^{-45}.
  int N = std::max(keff + 20, decay_index(beta, 50.0));
  {
    const double target = log_decay(static_cast<double>(keff), beta) + 45.0;
    N = std::max(N, decay_index(beta, target, keff));
  }
  const long double b = beta;
  std::vector<long double> ratio(static_cast<std::size_t>(keff) + 1, 0.0L);
  long double r = 0.0L, T = 0.0L;  // r_{k} = I_k / I_{k-1}; T_k = sum_{j>=k} prod_{i=k}^{j} r_i
  for (int j = N; j >= 1; --j) {
    r = 1.0L / (2.0L * static_cast<long double>(j) / b + r);
    T = r * (1.0L + T);
    if (j <= keff) ratio[j] = r;
  }
  long double cur = 1.0L / (1.0L + 2.0L * T);  // I~_0 from I~_0 (1 + 2 sum_{k>=1} I_k/I_0) = 1
  out[0] = static_cast<double>(cur);
  for (int k = 1; k <= keff; ++k) {
    cur *= ratio[k];
    out[k] = static_cast<double>(cur);
  }
  return out;
}

double bessel_i_scaled(int k, double beta) {
  check_bessel_beta(beta);
  if (k == std::numeric_limits<int>::min()) return 0.0;
  const int a = std::abs(k);
  if (beta == 0.0) return a == 0 ? 1.0 : 0.0;
  if (a > 0 && underflow_order(a, beta) <= a) return 0.0;
  return bessel_i_scaled_all(a, beta)[a];
}

// ---------------------------------------------------------------------------------------------
// Consensus kernel

ConsensusKernel consensus_kernel(const std::vector<double>& positions, const std::vector<double>& freqs,
                                 const std::vector<double>& energies, double beta) {
  const char* W = "consensus_kernel";
  if (positions.size() < 2) spectra_bad(W, "positions must hold >= 2 entries, got " + std::to_string(positions.size()));
  if (freqs.empty()) spectra_bad(W, "freqs must hold >= 1 frequency, got none");
  if (energies.size() != freqs.size())
    spectra_bad(W, "energies must hold one entry per frequency (" + std::to_string(freqs.size()) + "), got " +
               std::to_string(energies.size()));
  for (std::size_t i = 0; i < positions.size(); ++i)
    if (!std::isfinite(positions[i])) spectra_bad(W, "positions[" + std::to_string(i) + "] must be finite, got " + num(positions[i]));
  for (std::size_t l = 0; l < freqs.size(); ++l)
    if (!std::isfinite(freqs[l])) spectra_bad(W, "freqs[" + std::to_string(l) + "] must be finite, got " + num(freqs[l]));
  double sum = 0.0;
  for (std::size_t l = 0; l < energies.size(); ++l) {
    if (!std::isfinite(energies[l]) || energies[l] < 0.0)
      spectra_bad(W, "energies[" + std::to_string(l) + "] must be finite and >= 0, got " + num(energies[l]));
    sum += energies[l];
  }
  if (std::abs(sum - 1.0) > 1e-12) spectra_bad(W, "energies must sum to 1 (within 1e-12), got sum " + num(sum));
  check_beta(W, beta);

  const int n = static_cast<int>(positions.size());
  const std::size_t r = freqs.size();
  ConsensusKernel k;
  k.K.resize(n, n);
  k.W.resize(n, n);
  for (int i = 0; i < n; ++i) {
    k.K(i, i) = sum;  // sum_l a_l cos 0
    k.W(i, i) = 1.0;
    for (int j = i + 1; j < n; ++j) {
      const double h = positions[i] - positions[j];
      double kij = 0.0, dev = 0.0;  // dev = 1 - K_ij as a sum of nonnegative terms
      for (std::size_t l = 0; l < r; ++l) {
        if (energies[l] == 0.0) continue;
        const double th = freqs[l] * h;
        const double s = std::sin(0.5 * th);
        kij += energies[l] * std::cos(th);
        dev += energies[l] * 2.0 * s * s;
      }
      k.K(i, j) = k.K(j, i) = kij;
      k.W(i, j) = k.W(j, i) = std::exp(-beta * dev);
    }
  }
  k.Z = k.W.rowwise().sum();
  k.A = k.Z.cwiseInverse().asDiagonal() * k.W;
  const Vec isq = k.Z.cwiseSqrt().cwiseInverse();
  k.S.resize(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = i; j < n; ++j) k.S(i, j) = k.S(j, i) = k.W(i, j) * isq(i) * isq(j);
  return k;
}

KernelSpectrum consensus_spectrum(const ConsensusKernel& k, GapMethod m) {
  const Eigen::Index n = k.W.rows();
  if (n < 2 || k.S.rows() != n || k.Z.size() != n) spectra_bad("consensus_spectrum", "kernel must be n x n with n >= 2 (build it with consensus_kernel)");
  KernelSpectrum out;
  switch (m) {
    case GapMethod::Similarity: {
      out.eigenvalues = sorted_desc(sym_eigenvalues(to_col(k.S)));
      out.gap = 1.0 - out.eigenvalues(1);
      break;
    }
    case GapMethod::Laplacian: {
      ColMat Lp = -to_col(k.S);
      for (Eigen::Index i = 0; i < n; ++i) {
        double off = 0.0;  // Z_i - W_ii without subtraction
        for (Eigen::Index j = 0; j < n; ++j)
          if (j != i) off += k.W(i, j);
        Lp(i, i) = off / k.Z(i);
      }
      const Vec mu = sym_eigenvalues(Lp);  // ascending
      out.eigenvalues = sorted_desc((1.0 - mu.array()).matrix());
      out.gap = mu(1);
      break;
    }
    case GapMethod::Generalized: {
      const ColMat Wc = to_col(k.W);
      out.eigenvalues = sorted_desc(lapack_diagonal_pencil_eigenvalues(Wc, k.Z));
      out.gap = 1.0 - out.eigenvalues(1);
      break;
    }
  }
  return out;
}

PsdMinima psd_minima(const ConsensusKernel& k) {
  PsdMinima p;
  p.lambda_min_W = sym_eigenvalues(to_col(k.W))(0);
  p.lambda_min_S = sym_eigenvalues(to_col(k.S))(0);
  return p;
}

double local_gap_lower_bound(int n, double beta) {
  if (n < 2) spectra_bad("local_gap_lower_bound", "n must be >= 2, got " + std::to_string(n));
  check_beta("local_gap_lower_bound", beta);
  return n * softmax_floor(beta, n);  // (38): gamma >= n a_{beta,n}, a of (7)
}

// ---------------------------------------------------------------------------------------------
// Resonant ring

int ring_gcd(int n, int m) {
  if (n < 1) spectra_bad("ring_gcd", "n must be >= 1, got " + std::to_string(n));
  const long long mb = mod(m, n);
  return mb == 0 ? n : static_cast<int>(std::gcd(mb, static_cast<long long>(n)));
}

int ring_period(int n, int m) { return n / ring_gcd(n, m); }

std::vector<RingMode> ring_spectrum_bessel(int n, int m, double beta) {
  check_ring("ring_spectrum_bessel", n, beta);
  const long long mb = mod(m, n);
  const int g = ring_gcd(n, m);
  // |k| <= K: K >= n (every reachable mode's smallest |k| <= L/2 is included) and I~_K/I~_0 < e^{-50}.
  const int K = beta == 0.0 ? n : std::max(n, decay_index(beta, 50.0)) + 20;
  const std::vector<double> I = bessel_i_scaled_all(K, beta);
  std::vector<double> B(n, 0.0);
  for (int k = K; k >= 1; --k) {  // smallest terms first
    if (I[k] == 0.0) continue;
    const long long r1 = mod(mb * k, n), r2 = mod(-mb * k, n);
    B[r1] += I[k];
    B[r2] += I[k];
  }
  B[0] += I[0];
  std::vector<RingMode> out(n);
  for (int q = 0; q < n; ++q) {
    out[q].q = q;
    out[q].reachable = (q % g) == 0;
    out[q].lambda = q == 0 ? 1.0 : B[q] / B[0];
  }
  return out;
}

namespace {
// First row of A for the ring: a_h = w_h / sum w, with integer-reduced phases.
std::vector<double> ring_row(int n, int m, double beta) {
  const std::vector<double> t = one_minus_cos_table(n);
  const long long mb = mod(m, n);
  std::vector<double> a(n);
  double z = 0.0;
  for (int h = 0; h < n; ++h) {
    a[h] = std::exp(-beta * t[mod(mb * h, n)]);
    z += a[h];
  }
  for (double& x : a) x /= z;
  return a;
}
}  // namespace

std::vector<double> ring_spectrum_dft(int n, int m, double beta) {
  check_ring("ring_spectrum_dft", n, beta);
  const std::vector<double> a = ring_row(n, m, beta);
  std::vector<double> c(n);
  for (int r = 0; r < n; ++r) c[r] = std::cos(2.0 * kPi * r / n);
  std::vector<double> lam(n);
  for (int q = 0; q < n; ++q) {
    double s = 0.0;
    for (int h = 0; h < n; ++h) s += a[h] * c[mod(static_cast<long long>(q) * h, n)];
    lam[q] = s;
  }
  return lam;
}

std::vector<double> ring_spectrum_direct(int n, int m, double beta) {
  check_ring("ring_spectrum_direct", n, beta);
  const std::vector<double> t = one_minus_cos_table(n);
  const long long mb = mod(m, n);
  Mat W(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) W(i, j) = std::exp(-beta * t[mod(mb * (j - i), n)]);
  const Vec Z = W.rowwise().sum();
  ColMat S(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = i; j < n; ++j) S(i, j) = S(j, i) = W(i, j) / std::sqrt(Z(i) * Z(j));
  const Vec ev = sorted_desc(sym_eigenvalues(S));
  return std::vector<double>(ev.data(), ev.data() + ev.size());
}

double ring_gap(int n, int m, double beta) {
  const std::vector<RingMode> s = ring_spectrum_bessel(n, m, beta);
  double lam2 = 0.0;
  for (int q = 1; q < n; ++q) lam2 = std::max(lam2, s[q].lambda);
  return 1.0 - lam2;
}

double lgrid_gap(int L, double beta) {
  if (L < 1) spectra_bad("lgrid_gap", "L must be >= 1, got " + std::to_string(L));
  check_beta("lgrid_gap", beta);
  if (L == 1) return 1.0;
  const std::vector<double> t = one_minus_cos_table(L);
  std::vector<double> b(L);
  double den = 0.0;
  for (int k = L - 1; k >= 0; --k) {
    b[k] = std::exp(-beta * t[k]);
    den += b[k];
  }
  double best = std::numeric_limits<double>::infinity();
  for (int s = 1; s < L; ++s) {
    double num_s = 0.0;
    for (int k = 1; k < L; ++k) num_s += b[k] * t[mod(static_cast<long long>(s) * k, L)];
    best = std::min(best, num_s / den);
  }
  return best;
}

double gap_asymptotic(int L, double beta) {
  if (L < 1) spectra_bad("gap_asymptotic", "L must be >= 1, got " + std::to_string(L));
  check_beta("gap_asymptotic", beta);
  if (L == 1) return 1.0;
  if (L == 2) return 2.0 * softmax_floor(beta, 2);  // (26) = 2 a_{beta,2}; x2 is exact, so bit-equal
  const double s = std::sin(kPi / L);
  const double dL = 2.0 * s * s;
  return 2.0 * dL * std::exp(-beta * dL);
}

double asymptotic_ratio(int L, double beta) {
  if (L < 2) spectra_bad("asymptotic_ratio", "L must be >= 2, got " + std::to_string(L));
  check_beta("asymptotic_ratio", beta);
  const std::vector<double> t = one_minus_cos_table(L);
  const double dL = t[1];
  double den = 0.0;
  for (int k = L - 1; k >= 0; --k) den += std::exp(-beta * t[k]);
  double best = std::numeric_limits<double>::infinity();
  for (int s = 1; s < L; ++s) {
    double num_s = 0.0;  // k = 0 contributes 0; for k >= 1, t[k] >= t[1] so b^_k <= 1
    for (int k = 1; k < L; ++k) num_s += std::exp(-beta * (t[k] - dL)) * t[mod(static_cast<long long>(s) * k, L)];
    best = std::min(best, num_s / den);
  }
  return best / (2.0 * dL);
}

double continuum_gap(double beta) {
  check_beta("continuum_gap", beta);
  const std::vector<double> I = bessel_i_scaled_all(1, beta);
  return 1.0 - I[1] / I[0];
}

// ---------------------------------------------------------------------------------------------
// Analytic cases

double prop74_beta() { return 0.75 * std::numbers::ln2; }

Prop74Spectrum prop74_spectrum(double a) {
  if (!std::isfinite(a) || a < 0.0 || a > 1.0) spectra_bad("prop74_spectrum", "a (energy in the pi/2 plane) must lie in [0, 1], got " + num(a));
  const double beta = prop74_beta();
  const double x = std::exp(beta * (a - 2.0)), y = std::exp(-2.0 * beta * a);
  Prop74Spectrum p;
  p.lambda_minus = (1.0 - y) / (1.0 + x + y);
  p.lambda_plus = (1.0 + y) / (1.0 + x + y) + 1.0 / (1.0 + 2.0 * x) - 1.0;
  p.gap = std::min(1.0 - p.lambda_minus, 1.0 - p.lambda_plus);
  return p;
}

double prop74_gap(double a) { return prop74_spectrum(a).gap; }

double two_token_gap(double beta, double omega, double delta) {
  check_beta("two_token_gap", beta);
  if (!std::isfinite(omega)) spectra_bad("two_token_gap", "omega must be finite, got " + num(omega));
  if (!std::isfinite(delta)) spectra_bad("two_token_gap", "delta must be finite, got " + num(delta));
  const double s = std::sin(0.5 * omega * delta);
  const double q = std::exp(-2.0 * beta * s * s);
  return 2.0 * q / (1.0 + q);
}

// ---------------------------------------------------------------------------------------------
// Generators and evaluations

ResonantRow evaluate_resonant(const RingConfig& c) {
  ResonantRow row;
  row.cfg = c;
  row.g = ring_gcd(c.n, c.m);
  row.L = c.n / row.g;
  const std::vector<RingMode> bes = ring_spectrum_bessel(c.n, c.m, c.beta);
  const std::vector<double> dft = ring_spectrum_dft(c.n, c.m, c.beta);
  const std::vector<double> dir = ring_spectrum_direct(c.n, c.m, c.beta);
  std::vector<double> bs(c.n);
  for (int q = 0; q < c.n; ++q) {
    bs[q] = bes[q].lambda;
    if (bes[q].reachable) {
      ++row.reachable;
      if (bes[q].lambda > 0.0) ++row.positive;
    } else {
      ++row.structural_zeros;
    }
    row.dft_error = std::max(row.dft_error, std::abs(bes[q].lambda - dft[q]));
  }
  std::sort(bs.begin(), bs.end(), std::greater<double>());
  for (int q = 0; q < c.n; ++q) row.spectrum_error = std::max(row.spectrum_error, std::abs(bs[q] - dir[q]));
  row.gap_bessel = ring_gap(c.n, c.m, c.beta);
  row.gap_lgrid = lgrid_gap(row.L, c.beta);
  row.gap_error = std::abs(row.gap_bessel - row.gap_lgrid);
  return row;
}

ResonantSummary evaluate_resonant_grid(const std::vector<RingConfig>& cfgs) {
  ResonantSummary s;
  // The configurations on every core, one per thread (the same bits at any thread count).
  std::vector<ResonantRow> rows =
      parallel_map(static_cast<long>(cfgs.size()), [&](long i) { return evaluate_resonant(cfgs[static_cast<std::size_t>(i)]); });
  for (std::size_t i = 0; i < cfgs.size(); ++i) {
    const RingConfig& c = cfgs[i];
    ResonantRow& r = rows[i];
    ++s.count;
    s.max_spectrum_error = std::max(s.max_spectrum_error, r.spectrum_error);
    s.max_dft_error = std::max(s.max_dft_error, r.dft_error);
    s.max_gap_error = std::max(s.max_gap_error, r.gap_error);
    if (r.reachable != r.L || r.structural_zeros != c.n - r.L) s.counts_ok = false;
    s.rows.push_back(std::move(r));
  }
  return s;
}

namespace {
std::vector<double> integer_positions(int n) {
  std::vector<double> p(n);
  for (int i = 0; i < n; ++i) p[i] = i;
  return p;
}
}  // namespace

ThreeWayRow evaluate_three_way(const MultiFreqConfig& c) {
  const ConsensusKernel k = consensus_kernel(integer_positions(c.n), c.freqs, c.energies, c.beta);
  ThreeWayRow r;
  r.cfg = c;
  r.gap_similarity = consensus_spectrum(k, GapMethod::Similarity).gap;
  r.gap_laplacian = consensus_spectrum(k, GapMethod::Laplacian).gap;
  r.gap_generalized = consensus_spectrum(k, GapMethod::Generalized).gap;
  r.disagreement = std::max({std::abs(r.gap_similarity - r.gap_laplacian), std::abs(r.gap_similarity - r.gap_generalized),
                             std::abs(r.gap_laplacian - r.gap_generalized)});
  return r;
}

ThreeWaySummary evaluate_three_way_grid(const std::vector<MultiFreqConfig>& cfgs) {
  ThreeWaySummary s;
  std::vector<ThreeWayRow> rows =
      parallel_map(static_cast<long>(cfgs.size()), [&](long i) { return evaluate_three_way(cfgs[static_cast<std::size_t>(i)]); });
  for (ThreeWayRow& r : rows) {
    ++s.count;
    s.max_disagreement = std::max(s.max_disagreement, r.disagreement);
    s.rows.push_back(std::move(r));
  }
  return s;
}

PsdRow evaluate_psd(const MultiFreqConfig& c) {
  const ConsensusKernel k = consensus_kernel(integer_positions(c.n), c.freqs, c.energies, c.beta);
  PsdRow r;
  r.cfg = c;
  const PsdMinima p = psd_minima(k);
  r.lambda_min_W = p.lambda_min_W;
  r.lambda_min_S = p.lambda_min_S;
  const KernelSpectrum sp = consensus_spectrum(k, GapMethod::Similarity);
  r.lambda_max_S = sp.eigenvalues(0);
  r.gap = sp.gap;
  return r;
}

PsdSummary evaluate_psd_grid(const std::vector<MultiFreqConfig>& cfgs) {
  PsdSummary s;
  s.min_lambda_W = std::numeric_limits<double>::infinity();
  s.min_lambda_S = std::numeric_limits<double>::infinity();
  std::vector<PsdRow> rows =
      parallel_map(static_cast<long>(cfgs.size()), [&](long i) { return evaluate_psd(cfgs[static_cast<std::size_t>(i)]); });
  for (PsdRow& r : rows) {
    ++s.count;
    s.min_lambda_W = std::min(s.min_lambda_W, r.lambda_min_W);
    s.min_lambda_S = std::min(s.min_lambda_S, r.lambda_min_S);
    s.max_lambda_S_error = std::max(s.max_lambda_S_error, std::abs(r.lambda_max_S - 1.0));
    s.rows.push_back(std::move(r));
  }
  return s;
}

}  // namespace tokdyn::rope
