#include "tokdyn/analysis/ssm_theory.hpp"

#include <Eigen/Eigenvalues>
#include <Eigen/SVD>
#include <algorithm>
#include <boost/math/quadrature/gauss_kronrod.hpp>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <numbers>
#include <numeric>
#include <stdexcept>

#include "tokdyn/parallel.hpp"
#include "tokdyn/analysis/pe_window.hpp"
#include "tokdyn/error.hpp"
#include "tokdyn/rng.hpp"

namespace tokdyn {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// ln(e^a + e^b) without overflow.
double log_add_exp(double a, double b) {
  if (a == -kInf) return b;
  if (b == -kInf) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

void check_mu(int mu, int n, const char* who) {
  if (mu < 0 || mu >= n) throw std::invalid_argument(std::string(who) + ": principal channel out of range");
}

Mat symmetric_part(const Mat& S) { return 0.5 * (S + S.transpose()); }

/// Eigen-decomposition of a symmetric matrix, eigenvalues ascending. Small matrices (n <= 48) by
/// cyclic Jacobi rotations: Eigen's tridiagonalisation calls BLAS dsymv under EIGEN_USE_BLAS, and
/// the OpenMP build of OpenBLAS forks a thread team for every call, even for 4 x 4 matrices
/// (tens to hundreds of microseconds per solve, more under load).
void symmetric_eigen(const Mat& S, Vec& lam, Mat& V, bool vectors = true) {
  const Eigen::Index n = S.rows();
  if (n > 48) {
    Eigen::SelfAdjointEigenSolver<Mat> es(S, vectors ? Eigen::ComputeEigenvectors : Eigen::EigenvaluesOnly);
    lam = es.eigenvalues();
    if (vectors) V = es.eigenvectors();
    return;
  }
  Eigen::MatrixXd A = S;
  Eigen::MatrixXd Q = Eigen::MatrixXd::Identity(n, n);
  const double scale = std::max(A.norm(), std::numeric_limits<double>::min());
  for (int sweep = 0; sweep < 64; ++sweep) {
    double off = 0.0;
    for (Eigen::Index p = 0; p < n; ++p)
      for (Eigen::Index q = p + 1; q < n; ++q) off += A(p, q) * A(p, q);
    if (std::sqrt(off) <= 1e-17 * scale) break;
    for (Eigen::Index p = 0; p < n; ++p)
      for (Eigen::Index q = p + 1; q < n; ++q) {
        const double apq = A(p, q);
        if (apq == 0.0) continue;
        const double theta = (A(q, q) - A(p, p)) / (2.0 * apq);
        const double t = (theta >= 0.0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        for (Eigen::Index k = 0; k < n; ++k) {  // A <- J^T A J, rotation in the (p, q) plane
          const double akp = A(k, p), akq = A(k, q);
          A(k, p) = c * akp - s * akq;
          A(k, q) = s * akp + c * akq;
        }
        for (Eigen::Index k = 0; k < n; ++k) {
          const double apk = A(p, k), aqk = A(q, k);
          A(p, k) = c * apk - s * aqk;
          A(q, k) = s * apk + c * aqk;
        }
        A(p, q) = A(q, p) = 0.0;
        for (Eigen::Index k = 0; k < n; ++k) {
          const double qkp = Q(k, p), qkq = Q(k, q);
          Q(k, p) = c * qkp - s * qkq;
          Q(k, q) = s * qkp + c * qkq;
        }
      }
  }
  std::vector<Eigen::Index> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](Eigen::Index a, Eigen::Index b) { return A(a, a) < A(b, b); });
  lam.resize(n);
  if (vectors) V.resize(n, n);
  for (Eigen::Index k = 0; k < n; ++k) {
    lam[k] = A(idx[static_cast<std::size_t>(k)], idx[static_cast<std::size_t>(k)]);
    if (vectors) V.col(k) = Q.col(idx[static_cast<std::size_t>(k)]);
  }
}

}  // namespace

// =============================================================================================
// Sampling

std::vector<SsmParams> sample_times(const WeightSchedule<SsmParams>& s, const std::vector<double>& times) {
  std::vector<SsmParams> out;
  out.reserve(times.size());
  for (double t : times) out.push_back(*s.at_time(t));
  return out;
}

std::vector<SsmParams> sample_layers(const WeightSchedule<SsmParams>& s, long depth) {
  std::vector<SsmParams> out;
  out.reserve(static_cast<std::size_t>(std::max(0L, depth)));
  for (long k = 1; k <= depth; ++k) out.push_back(*s.at_layer(k));
  return out;
}

std::vector<double> time_grid(double t0, double t1, int count) {
  if (count < 2) throw std::invalid_argument("time_grid: count must be >= 2");
  std::vector<double> t(static_cast<std::size_t>(count));
  for (int k = 0; k < count; ++k) t[static_cast<std::size_t>(k)] = t0 + (t1 - t0) * k / (count - 1);
  return t;
}

// =============================================================================================
// Lemma III.1: channel bounds

ChannelBounds channel_bounds(const SsmParams& p, int len) {
  if (len < 1) throw std::invalid_argument("channel_bounds: len must be >= 1");
  const int n = p.n();
  ChannelBounds cb;
  cb.len = len;
  cb.delta_lo.resize(n);
  cb.delta_hi.resize(n);
  cb.lambda_lo.resize(n, len);
  cb.lambda_hi.resize(n, len);
  for (int mu = 0; mu < n; ++mu) {
    // |W^mu z| <= ||W^mu|| on the unit sphere, softplus increasing (Lemma III.1).
    const double w = p.W_delta.row(mu).norm();
    const double lo = softplus(p.b_delta[mu] - w), hi = softplus(p.b_delta[mu] + w);
    cb.delta_lo[mu] = lo;
    cb.delta_hi[mu] = hi;
    const double a = p.alpha[mu];
    for (int s = 0; s < len; ++s) {
      // lambda_ij^mu = Delta_j exp(-alpha sum_{l=j+1}^{i} Delta_l) (Lemma II.1), tokens independent.
      if (a >= 0.0) {
        cb.lambda_lo(mu, s) = lo * std::exp(-a * s * hi);
        cb.lambda_hi(mu, s) = hi * std::exp(-a * s * lo);
      } else {
        cb.lambda_lo(mu, s) = lo * std::exp(-a * s * lo);
        cb.lambda_hi(mu, s) = hi * std::exp(-a * s * hi);
      }
    }
  }
  return cb;
}

namespace {

/// Certified gap of channel mu: min_s [lambda_lo^mu(s) - max_{nu != mu} lambda_hi^nu(s)] (III.1.2).
double certified_gap(const ChannelBounds& cb, int mu) {
  const Eigen::Index n = cb.lambda_lo.rows();
  double gap = kInf;
  for (int s = 0; s < cb.len; ++s) {
    double other = -kInf;
    for (Eigen::Index nu = 0; nu < n; ++nu)
      if (nu != mu) other = std::max(other, cb.lambda_hi(nu, s));
    gap = std::min(gap, cb.lambda_lo(mu, s) - other);
  }
  return gap;
}

SpectralConstants constants_from_bounds(const ChannelBounds& cb, int mu) {
  const Eigen::Index n = cb.lambda_lo.rows();
  SpectralConstants k;
  k.len = cb.len;
  k.mu_tilde = mu;
  k.gamma = certified_gap(cb, mu);  // gamma = min_{j<=i} gamma_ij (III.1.2)
  double Gamma = -kInf;
  for (int s = 0; s < cb.len; ++s) {
    double other = kInf;
    for (Eigen::Index nu = 0; nu < n; ++nu)
      if (nu != mu) other = std::min(other, cb.lambda_lo(nu, s));
    if (n > 1) Gamma = std::max(Gamma, cb.lambda_hi(mu, s) - other);  // Gamma_ij (§IV)
  }
  k.Gamma = n > 1 ? Gamma : 0.0;
  k.Lambda = 0.0;  // Lambda = max_i sup sum_{j<i} lambda_ij^mu~ <= sum_{s=1}^{l-1} lambda_hi(s) (§IV)
  for (int s = 1; s < cb.len; ++s) k.Lambda += cb.lambda_hi(mu, s);
  k.lambda_max = cb.lambda_hi.row(mu).maxCoeff();  // §V item 2
  k.lambda_min = cb.lambda_lo.row(mu).minCoeff();  // §V item 3
  k.D_norm_max = cb.lambda_hi.maxCoeff();          // Lemma III.1: sup ||D_ij||_2
  k.principal = k.gamma > 0.0;
  return k;
}

}  // namespace

std::pair<int, double> principal_channel(const ChannelBounds& cb) {
  // The largest and second-largest lambda_hi(., s) per gap s make every channel's certified
  // gap O(len) instead of O(n len): max over nu != mu is top1 unless mu attains it.
  const Eigen::Index n = cb.lambda_lo.rows();
  std::vector<double> top1(static_cast<std::size_t>(cb.len), -kInf), top2 = top1;
  std::vector<Eigen::Index> arg1(static_cast<std::size_t>(cb.len), -1);
  for (int s = 0; s < cb.len; ++s)
    for (Eigen::Index nu = 0; nu < n; ++nu) {
      const double v = cb.lambda_hi(nu, s);
      const auto si = static_cast<std::size_t>(s);
      if (v > top1[si]) {
        top2[si] = top1[si];
        top1[si] = v;
        arg1[si] = nu;
      } else if (v > top2[si]) {
        top2[si] = v;
      }
    }
  int best = 0;
  double gbest = -kInf;
  for (int mu = 0; mu < n; ++mu) {
    double g = kInf;
    for (int s = 0; s < cb.len; ++s) {
      const auto si = static_cast<std::size_t>(s);
      g = std::min(g, cb.lambda_lo(mu, s) - (arg1[si] == mu ? top2[si] : top1[si]));
    }
    if (g > gbest) {
      gbest = g;
      best = mu;
    }
  }
  return {best, gbest};
}

SpectralConstants spectral_constants(const SsmParams& p, int len, int mu_tilde) {
  const ChannelBounds cb = channel_bounds(p, len);
  if (mu_tilde < 0) mu_tilde = principal_channel(cb).first;
  check_mu(mu_tilde, p.n(), "spectral_constants");
  return constants_from_bounds(cb, mu_tilde);
}

SpectralConstants spectral_constants(const std::vector<SsmParams>& samples, int len, int mu_tilde) {
  if (samples.empty()) throw std::invalid_argument("spectral_constants: no samples");
  if (mu_tilde < 0) mu_tilde = principal_channel(channel_bounds(samples.front(), len)).first;
  SpectralConstants k = spectral_constants(samples.front(), len, mu_tilde);
  for (std::size_t a = 1; a < samples.size(); ++a) {
    const SpectralConstants q = spectral_constants(samples[a], len, mu_tilde);
    // inf/sup over t (Lemma III.1): per-time bounds combined.
    k.gamma = std::min(k.gamma, q.gamma);
    k.Gamma = std::max(k.Gamma, q.Gamma);
    k.Lambda = std::max(k.Lambda, q.Lambda);
    k.lambda_max = std::max(k.lambda_max, q.lambda_max);
    k.lambda_min = std::min(k.lambda_min, q.lambda_min);
    k.D_norm_max = std::max(k.D_norm_max, q.D_norm_max);
  }
  k.principal = k.gamma > 0.0;
  return k;
}

bool ParameterBounds::hold() const {
  return std::isfinite(alpha_max) && std::isfinite(W_max) && std::isfinite(b_max) && std::isfinite(S_BC_max) && b_min > 0.0;
}

ParameterBounds parameter_bounds(const std::vector<SsmParams>& samples) {
  if (samples.empty()) throw std::invalid_argument("parameter_bounds: no samples");
  ParameterBounds b;
  b.b_min = kInf;
  for (const auto& p : samples) {
    b.alpha_max = std::max(b.alpha_max, p.alpha.cwiseAbs().maxCoeff());                // III.1.3
    for (Eigen::Index mu = 0; mu < p.W_delta.rows(); ++mu) b.W_max = std::max(b.W_max, p.W_delta.row(mu).norm());  // III.1.4
    b.b_max = std::max(b.b_max, p.b_delta.cwiseAbs().maxCoeff());                      // III.1.5
    b.b_min = std::min(b.b_min, p.b_delta.cwiseAbs().minCoeff());                      // III.1.6
    b.S_BC_max = std::max(b.S_BC_max, p.S_BC().norm());                                // III.1.7
  }
  return b;
}

std::vector<std::vector<Vec>> io_lambdas(const SsmParams& p, const Tokens& Z) {
  const int len = static_cast<int>(Z.rows()), n = p.n();
  Mat Delta = Z * p.W_delta.transpose();
  Delta.rowwise() += p.b_delta.transpose();
  Delta = Delta.unaryExpr([](double x) { return softplus(x); });
  std::vector<std::vector<Vec>> L(static_cast<std::size_t>(len));
  for (int i = 0; i < len; ++i) L[static_cast<std::size_t>(i)].resize(static_cast<std::size_t>(i + 1));
  for (int j = 0; j < len; ++j) {
    // lambda_ij^mu = Delta_j^mu exp(d_ij^mu), d_ij^mu = -alpha^mu sum_{l=j+1}^{i} Delta_l^mu (Lemma II.1),
    // by running products (graceful underflow).
    Vec v = Delta.row(j).transpose();
    for (int i = j; i < len; ++i) {
      if (i > j)
        for (int mu = 0; mu < n; ++mu) v[mu] *= std::exp(-p.alpha[mu] * Delta(i, mu));
      L[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = v;
    }
  }
  return L;
}

SampledSpectrum sampled_spectrum(const SsmParams& p, int len, int mu_tilde, int samples, std::uint64_t seed) {
  const int n = p.n();
  check_mu(mu_tilde, n, "sampled_spectrum");
  SampledSpectrum r;
  r.gamma = kInf;
  r.Gamma = -kInf;
  r.lambda_max = -kInf;
  r.lambda_min = kInf;
  Rng rng(seed, {0x5a});
  for (int a = 0; a < samples; ++a) {
    const Tokens Z = rng.sphere_tokens(len, n);
    const auto L = io_lambdas(p, Z);
    for (int i = 0; i < len; ++i) {
      double sum = 0.0;
      for (int j = 0; j <= i; ++j) {
        const Vec& l = L[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
        double omax = -kInf, omin = kInf;
        for (int mu = 0; mu < n; ++mu)
          if (mu != mu_tilde) {
            omax = std::max(omax, l[mu]);
            omin = std::min(omin, l[mu]);
          }
        if (n > 1) {
          r.gamma = std::min(r.gamma, l[mu_tilde] - omax);
          r.Gamma = std::max(r.Gamma, l[mu_tilde] - omin);
          if (l[mu_tilde] < omax) ++r.argmax_violations;
        }
        r.lambda_max = std::max(r.lambda_max, l[mu_tilde]);
        r.lambda_min = std::min(r.lambda_min, l[mu_tilde]);
        if (j < i) sum += l[mu_tilde];
        ++r.pairs;
      }
      if (i >= 1) r.Lambda = std::max(r.Lambda, sum);
    }
  }
  return r;
}

// =============================================================================================
// Assumption diagnostics

AssumptionDiagnostics assumption_diagnostics(const WeightSchedule<SsmParams>& s, long depth, int len, int samples,
                                             std::uint64_t seed) {
  AssumptionDiagnostics d;
  d.layers.resize(static_cast<std::size_t>(std::max(0L, depth)));
  // Layers are independent: diagnose them in parallel (each entry depends only on its layer).
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1)
  for (long k = 1; k <= depth; ++k) try {
    const auto p = s.at_layer(k);
    const int n = p->n();
    const ChannelBounds cb = channel_bounds(*p, len);
    const int mu = principal_channel(cb).first;
    const SpectralConstants sc = constants_from_bounds(cb, mu);
    LayerAssumptions la;
    la.layer = k;
    la.mu_tilde = mu;
    la.certified = sc.principal;
    la.gamma = sc.gamma;
    la.Gamma = sc.Gamma;
    la.Lambda = sc.Lambda;
    la.lambda_max = sc.lambda_max;
    la.lambda_min = sc.lambda_min;
    const Mat S = p->S_BC();
    la.S_principal = S(mu, mu);              // Remark IV.1: (S_BC)_{mu~mu~} > 0 suffices for PE
    la.lambda_min_sym = kernel_lambda_min(S);  // Assumption V.1 margin
    if (samples > 0) {
      // Attained principal channel: the argmax of lambda_ij^mu most often over sampled Z.
      std::vector<long> count(static_cast<std::size_t>(n), 0);
      std::vector<Tokens> Zs;
      Rng rng(seed, {static_cast<std::uint64_t>(k)});
      for (int a = 0; a < samples; ++a) Zs.push_back(rng.sphere_tokens(len, n));
      std::vector<std::vector<std::vector<Vec>>> Ls;
      for (const auto& Z : Zs) {
        Ls.push_back(io_lambdas(*p, Z));
        for (const auto& row : Ls.back())
          for (const auto& l : row) {
            Eigen::Index am;
            l.maxCoeff(&am);
            ++count[static_cast<std::size_t>(am)];
          }
      }
      la.mu_attained = static_cast<int>(std::max_element(count.begin(), count.end()) - count.begin());
      double g = kInf;
      for (const auto& L : Ls)
        for (const auto& row : L)
          for (const auto& l : row) {
            double other = -kInf;
            for (int nu = 0; nu < n; ++nu)
              if (nu != la.mu_attained) other = std::max(other, l[nu]);
            g = std::min(g, l[la.mu_attained] - other);
          }
      la.gamma_sampled = g;
    }
    d.layers[static_cast<std::size_t>(k - 1)] = la;
  } catch (...) {
    errors.capture();
  }
  errors.rethrow();
  int prev = -1;
  bool all_cert = depth >= 1;
  for (const auto& la : d.layers) {
    if (la.certified) ++d.certified_layers;
    all_cert = all_cert && la.certified;
    if (la.layer >= 2 && la.mu_tilde != prev) ++d.principal_switches;
    prev = la.mu_tilde;
  }
  d.constant_principal = all_cert && d.principal_switches == 0;
  return d;
}

SampledPe sampled_pe(const std::vector<double>& q, int T, double rho) {
  const int kappa = static_cast<int>(q.size());
  if (T < 1 || T > kappa) throw std::invalid_argument("sampled_pe: need 1 <= T <= record length");
  SampledPe r;
  r.T = T;
  r.worst_average = worst_window_average(q, T);  // W(T) (23), of analysis/pe_window
  r.holds = r.worst_average > rho;
  r.T_star = smallest_admissible_window(worst_window_average(q));
  return r;
}

// =============================================================================================
// (6), caps, PE

double a_c(double q, double c, const SpectralConstants& k) {
  // (6): gamma c (1 + c) q for q >= 0, 2 (Gamma + Lambda) q for q < 0.
  return q >= 0.0 ? k.gamma * c * (1.0 + c) * q : 2.0 * (k.Gamma + k.Lambda) * q;
}

CapMinimum cap_minimum(const Mat& S_BC, int mu, double c) {
  const int n = static_cast<int>(S_BC.rows());
  check_mu(mu, n, "cap_minimum");
  if (!(c >= 0.0 && c < 1.0)) throw std::invalid_argument("cap_minimum: c must be in [0, 1)");
  const Mat S = symmetric_part(S_BC);
  CapMinimum r;
  if (n == 1) {
    r.z = Vec::Ones(1);
    r.q_min = S(0, 0);
    r.interior = true;
    return r;
  }
  Vec lam;
  Mat V;
  symmetric_eigen(S, lam, V);
  const double scale = std::max(1.0, lam.cwiseAbs().maxCoeff());
  // 1. Interior: the bottom eigenspace reaches the cap iff the projection of e^mu~ onto it has
  //    norm >= c (its normalisation is the eigenvector with the largest mu~ component).
  Vec u = Vec::Zero(n);
  for (int k = 0; k < n && lam[k] <= lam[0] + 1e-12 * scale; ++k) u += V(mu, k) * V.col(k);
  const double un = u.norm();
  if (un >= c && un > 0.0) {
    r.z = u / un;
    r.q_min = lam[0];
    r.interior = true;
    return r;
  }
  // 2. Boundary z = c e + s w, s = sqrt(1 - c^2), w ⊥ e, |w| = 1:
  //    q = c^2 S_ee + 2 c s p^T w + s^2 w^T P w  (p = S_{perp,mu~}, P = S_{perp,perp}).
  const double s = std::sqrt((1.0 - c) * (1.0 + c));
  std::vector<int> perp;
  for (int k = 0; k < n; ++k)
    if (k != mu) perp.push_back(k);
  const int m = n - 1;
  Mat A(m, m);
  Vec g(m);
  for (int a = 0; a < m; ++a) {
    g[a] = c * s * S(perp[static_cast<std::size_t>(a)], mu);
    for (int b = 0; b < m; ++b) A(a, b) = s * s * S(perp[static_cast<std::size_t>(a)], perp[static_cast<std::size_t>(b)]);
  }
  // 3. min w^T A w + 2 g^T w on |w| = 1 (trust-region equality): (A - nu I) w = -g, nu <= a_1.
  Vec a;
  Mat U;
  symmetric_eigen(A, a, U);
  const Vec gh = U.transpose() * g;
  const double ascale = std::max(1.0, a.cwiseAbs().maxCoeff());
  const double a1 = a[0];
  int nb = 0;
  while (nb < m && a[nb] <= a1 + 1e-12 * ascale) ++nb;
  const double gB = gh.head(nb).norm();
  Vec w = Vec::Zero(m);
  bool solved = false;
  if (gB <= 1e-14 * std::max(1.0, g.norm())) {
    // 4. Hard-case candidate: nu = a_1, w = w0 + tau u_1, w0 = -sum_{k not in bottom} gh_k/(a_k - a_1) u_k.
    Vec w0 = Vec::Zero(m);
    for (int k = nb; k < m; ++k) w0 -= gh[k] / (a[k] - a1) * U.col(k);
    const double n0 = w0.squaredNorm();
    if (n0 <= 1.0) {
      w = w0 + std::sqrt(1.0 - n0) * U.col(0);
      r.hard_case = true;
      solved = true;
    }
  }
  if (!solved) {
    // Secular equation in x = a_1 - nu in ]0, |g|]: f(x) = 1/|w(x)| - 1 increases from < 0 to >= 0.
    auto wnorm2 = [&](double x) {
      double t = 0.0;
      for (int k = 0; k < m; ++k) {
        const double d = a[k] - a1 + x;
        t += gh[k] * gh[k] / (d * d);
      }
      return t;
    };
    double lo = 0.0, hi = std::max(g.norm(), 1e-300);
    for (int it = 0; it < 400 && hi - lo > 1e-17 * hi; ++it) {
      const double mid = 0.5 * (lo + hi);
      if (mid <= lo || mid >= hi) break;
      if (wnorm2(mid) > 1.0) lo = mid; else hi = mid;
    }
    const double x = hi;
    for (int k = 0; k < m; ++k) w -= gh[k] / (a[k] - a1 + x) * U.col(k);
    w.normalize();
  }
  r.z = Vec::Zero(n);
  r.z[mu] = c;
  for (int k = 0; k < m; ++k) r.z[perp[static_cast<std::size_t>(k)]] = s * w[k];
  r.q_min = r.z.dot(S * r.z);
  r.interior = false;
  return r;
}

double cap_minimum_sampled(const Mat& S_BC, int mu, double c, int samples, std::uint64_t seed) {
  const int n = static_cast<int>(S_BC.rows());
  check_mu(mu, n, "cap_minimum_sampled");
  const Mat S = symmetric_part(S_BC);
  Rng rng(seed, {0xcab});
  double best = kInf;
  Vec w(n);
  for (int a = 0; a < samples; ++a) {
    const double zm = (a % 2 == 0) ? c : rng.uniform(c, 1.0);
    rng.fill_normal(w);
    w[mu] = 0.0;
    const double wn = w.norm();
    if (wn == 0.0) continue;
    Vec z = std::sqrt(std::max(0.0, 1.0 - zm * zm)) / wn * w;
    z[mu] = zm;
    best = std::min(best, z.dot(S * z));
  }
  return best;
}

double alpha_c(const Mat& S_BC, int mu_tilde, double c, const SpectralConstants& k) {
  // Assumption IV.1: alpha_c(t) = min_sigma inf_{z in Omega_c^sigma} a_c(t, z) = a_c(q_min(t)),
  // a_c increasing in q and the quadratic form even (sigma = -1 gives the same value).
  return a_c(cap_minimum(S_BC, mu_tilde, c).q_min, c, k);
}

PeResult pe_evaluate(const WeightSchedule<SsmParams>& s, const SpectralConstants& k, const PeOptions& o) {
  if (!(o.c > 0.0 && o.c < 1.0)) throw std::invalid_argument("pe_evaluate: c must be in ]0,1[");
  if (!(o.T > 0.0) || o.steps_per_T < 2 || !(o.starts >= 0.0)) throw std::invalid_argument("pe_evaluate: bad window");
  PeResult r;
  r.c = o.c;
  r.T = o.T;
  const double h = o.T / o.steps_per_T;
  // Derived grid size, checked before it is cast: a tiny window T would overflow it.
  const double starts = o.starts / h;
  if (!(starts <= 1e7))
    throw InputError(fmt::format("PE window T = {}: the evaluator's grid (step T / {}) would need {:.3g} points to cover "
                                 "the window starts over [0, {}]; at most 1e7 (expected T >= {:.3g})",
                                 o.T, o.steps_per_T, starts, o.starts, o.starts * o.steps_per_T / 1e7));
  const long nstart = static_cast<long>(std::llround(starts));
  const long N = nstart + o.steps_per_T + 1;
  r.t.resize(static_cast<std::size_t>(N));
  r.alpha.resize(static_cast<std::size_t>(N));
  for (long q = 0; q < N; ++q) {
    const double t = o.t0 + q * h;
    r.t[static_cast<std::size_t>(q)] = t;
    r.alpha[static_cast<std::size_t>(q)] = alpha_c(s.at_time(t)->S_BC(), k.mu_tilde, o.c, k);
  }
  // Sliding-window trapezoid integrals of alpha_c; rho = min_t (1/T) int_t^{t+T} alpha_c (IV.1).
  std::vector<double> I(static_cast<std::size_t>(N), 0.0);
  for (long q = 1; q < N; ++q)
    I[static_cast<std::size_t>(q)] =
        I[static_cast<std::size_t>(q - 1)] + 0.5 * h * (r.alpha[static_cast<std::size_t>(q - 1)] + r.alpha[static_cast<std::size_t>(q)]);
  double best = kInf;
  for (long q = 0; q <= nstart; ++q) {
    const double v = I[static_cast<std::size_t>(q + o.steps_per_T)] - I[static_cast<std::size_t>(q)];
    if (v < best) {
      best = v;
      r.worst_start = r.t[static_cast<std::size_t>(q)];
    }
  }
  r.rho = best / o.T;
  r.alpha_c_min = *std::min_element(r.alpha.begin(), r.alpha.end());
  r.eta0 = std::min(0.0, r.alpha_c_min);                  // Lemma IV.2: eta_0 = min{0, inf a_c}
  r.c1 = 1.0 - (1.0 - o.c) * std::exp(r.eta0 * o.T);     // Lemma IV.2: c_1 = 1 - (1-c) exp(eta_0 T)
  r.M1 = std::exp((r.rho - r.eta0) * o.T);               // Lemma IV.2: M_1 = exp((rho - eta_0) T)
  return r;
}

// =============================================================================================
// Theorem IV.1 certificate

double discrete_iss_rate(double theta, double nu, double T) {
  return 0.5 * std::min(-std::log(theta) / T, nu);  // Lemma A.2: varrho
}

double discrete_iss_constant(double T, double theta, double varrho) {
  return (1.0 - theta) / (std::exp(-varrho * T) - theta);  // Lemma A.2: C(T, theta, varrho)
}

bool DSequence::valid() const {
  for (std::size_t i = 0; i < log_d.size(); ++i)
    if (!(log_d[i] > log_d_min[i]) || !(log_d[i] < log_d_max)) return false;
  return !log_d.empty();
}

DSequence lemma_a1_sequence(double d_eps, double H, const std::vector<double>& M, double theta, double r, double R,
                            int len, double fraction, double d1_cap) {
  if (len < 1 || static_cast<int>(M.size()) < len) throw std::invalid_argument("lemma_a1_sequence: need M_1..M_len");
  if (!(theta > 0.0 && theta < 1.0) || !(R > r) || !(r >= 1.0) || !(d_eps > 0.0) || !(H > 0.0))
    throw std::invalid_argument("lemma_a1_sequence: need 0 < theta < 1, R > r >= 1, d_eps > 0, H > 0");
  if (!(fraction > 0.0 && fraction < 1.0)) throw std::invalid_argument("lemma_a1_sequence: fraction in ]0,1[");
  DSequence d;
  d.mu_L = std::min(1.0 - theta, R - r);  // Lemma A.1: mu = min{1 - theta, R - r}
  d.log_d_max = std::log(d_eps / R);      // d^max = d_eps / R
  const double lnH2 = std::log(2.0 * H / d.mu_L), lnH = std::log(H / d.mu_L), ln2 = std::log(2.0);
  // d_i = 2 d_{i-1} + (2H/mu) sum_{j<i} sqrt(2 M_j d_j), in logs (doubly exponential shrinkage).
  auto build = [&](double x, std::vector<double>& ld, std::vector<double>* ldmin) {
    ld.assign(static_cast<std::size_t>(len), 0.0);
    ld[0] = x;
    if (ldmin) ldmin->assign(static_cast<std::size_t>(len), -kInf);
    double S = -kInf;  // ln sum_{j<i} sqrt(2 M_j d_j)
    for (int i = 1; i < len; ++i) {
      S = log_add_exp(S, 0.5 * (ln2 + std::log(M[static_cast<std::size_t>(i - 1)]) + ld[static_cast<std::size_t>(i - 1)]));
      ld[static_cast<std::size_t>(i)] = log_add_exp(ln2 + ld[static_cast<std::size_t>(i - 1)], lnH2 + S);
      if (ldmin) (*ldmin)[static_cast<std::size_t>(i)] = std::max(ld[static_cast<std::size_t>(i - 1)], lnH + S);
    }
  };
  const double target = std::log(fraction) + d.log_d_max;
  double hi = d.log_d_max;
  if (d1_cap > 0.0) hi = std::min(hi, std::log(d1_cap));
  std::vector<double> ld;
  build(hi, ld, nullptr);
  double x;
  if (ld.back() <= target) {
    x = hi;
  } else {
    double lo = hi - 64.0;
    for (build(lo, ld, nullptr); ld.back() > target; build(lo, ld, nullptr)) lo = hi - 2.0 * (hi - lo);
    for (int it = 0; it < 300; ++it) {
      const double mid = 0.5 * (lo + hi);
      if (mid <= lo || mid >= hi) break;
      build(mid, ld, nullptr);
      if (ld.back() <= target) lo = mid; else hi = mid;
    }
    x = lo;
  }
  build(x, d.log_d, &d.log_d_min);
  return d;
}

double prop_iv1_d_eps(double c, double eps, double Lambda, double sup_norm) {
  // Prop IV.1 proof: 2 sqrt(2 d_eps) Lambda sup||S_BC|| <= eps.
  if (Lambda <= 0.0 || sup_norm <= 0.0) return 1.0 - c;
  return std::min(1.0 - c, eps * eps / (8.0 * Lambda * Lambda * sup_norm * sup_norm));
}

double prop_iv1_M(double sup_norm_2, double D_norm_max) {
  return 8.0 * sup_norm_2 * D_norm_max;  // bound of (26)+(27)+(28) (our reading of the proof of Prop. IV.1)
}

double sup_kernel_norm_fro(const std::vector<SsmParams>& samples) {
  double m = 0.0;
  for (const auto& p : samples) m = std::max(m, p.S_BC().norm());
  return m;
}

double sup_kernel_norm_2(const std::vector<SsmParams>& samples) {
  double m = 0.0;
  for (const auto& p : samples) {
    Eigen::JacobiSVD<Mat> svd(p.S_BC());
    m = std::max(m, svd.singularValues()(0));
  }
  return m;
}

TheoremIV1Certificate theorem_iv1_certificate(const SpectralConstants& k, const PeResult& pe, double sup_norm_fro,
                                              double sup_norm_2, int len, const CertificateOptions& o) {
  if (!(pe.rho > 0.0)) throw std::invalid_argument("theorem_iv1_certificate: PE fails (rho <= 0)");
  if (len < 1) throw std::invalid_argument("theorem_iv1_certificate: len must be >= 1");
  TheoremIV1Certificate cert;
  cert.len = len;
  cert.c = pe.c;
  cert.T = pe.T;
  cert.rho = pe.rho;
  cert.eps = o.eps > 0.0 ? o.eps : 0.5 * pe.rho;
  if (!(cert.eps < pe.rho)) throw std::invalid_argument("theorem_iv1_certificate: need eps in ]0, rho[");
  if (!(o.R_over_r > 1.0)) throw std::invalid_argument("theorem_iv1_certificate: need R > r");
  const double T = pe.T;
  cert.M = o.M > 0.0 ? o.M : prop_iv1_M(sup_norm_2, k.D_norm_max);
  cert.d_eps = prop_iv1_d_eps(pe.c, cert.eps, k.Lambda, sup_norm_fro);
  cert.eta_eps = std::min(cert.eps, pe.alpha_c_min) - cert.eps;  // eta_eps = min{eps, inf a_c} - eps
  cert.theta = std::exp(-(pe.rho - cert.eps) * T);                // theta = exp(-(rho - eps) T)
  cert.r = std::exp(-cert.eta_eps * T);                           // r = exp(-eta_eps T)
  cert.R = o.R_over_r * cert.r;
  cert.H = T * cert.M * std::exp(-cert.eta_eps * T);              // H = T M exp(-eta_eps T)
  cert.nu.assign(static_cast<std::size_t>(len), kNaN);
  cert.rho_i.assign(static_cast<std::size_t>(len), 0.0);
  cert.C_i.assign(static_cast<std::size_t>(len), kNaN);
  cert.M_i.assign(static_cast<std::size_t>(len), 0.0);
  cert.rho_i[0] = pe.rho;  // rho_1 = rho (Lemma IV.2)
  cert.M_i[0] = pe.M1;     // M_1 (Lemma IV.2)
  double rmin = pe.rho;
  for (int i = 1; i < len; ++i) {
    const auto u = static_cast<std::size_t>(i);
    cert.nu[u] = 0.5 * rmin;                                          // (13)
    cert.rho_i[u] = discrete_iss_rate(cert.theta, cert.nu[u], T);     // (14)
    cert.C_i[u] = discrete_iss_constant(T, cert.theta, cert.rho_i[u]);  // Lemma A.2
    cert.M_i[u] = std::max(1.0, std::exp(cert.rho_i[u] * T) * (cert.C_i[u] * cert.r + 1.0 - cert.theta));  // (15)
    rmin = std::min(rmin, cert.rho_i[u]);
  }
  cert.d = lemma_a1_sequence(cert.d_eps, cert.H, cert.M_i, cert.theta, cert.r, cert.R, len, o.fraction,
                             1.0 - pe.c1);  // d_1 also within Lemma IV.2's domain 1 - c_1
  return cert;
}

// =============================================================================================
// Section V

double anisotropy_numerator(const Mat& S_BC, int mu, CstarNorm norm) {
  const int n = static_cast<int>(S_BC.rows());
  check_mu(mu, n, "anisotropy_numerator");
  if (norm == CstarNorm::Column) {
    Vec col = S_BC.col(mu);  // ||P_perp S_BC e^mu~||: all that Prop V.1's proof uses
    col[mu] = 0.0;
    return col.norm();
  }
  const Mat A = S_BC - S_BC(mu, mu) * Mat::Identity(n, n);  // S_BC - ((e^mu~)^T S_BC e^mu~) I_n
  if (norm == CstarNorm::Frobenius) return A.norm();
  Eigen::JacobiSVD<Mat> svd(A);
  return svd.singularValues()(0);
}

double kernel_lambda_min(const Mat& S_BC) {
  Vec lam;
  Mat V;
  symmetric_eigen(symmetric_part(S_BC), lam, V, false);
  return lam[0];
}

double c_eff_paper(double c_star, double lambda_max, double lambda_min, double gamma, int len) {
  const double l1 = len - 1.0;
  if (std::isinf(c_star)) return len >= 2 ? 1.0 / l1 : kInf;
  // §V item 4: c_star lambda_max / sqrt((gamma + (l-1) lambda_min)^2 + c_star^2 lambda_max^2 (l-1)^2)
  const double a = gamma + l1 * lambda_min, b = c_star * lambda_max * l1;
  return c_star * lambda_max / std::sqrt(a * a + b * b);
}

double c_eff_proof(double c_star, double lambda_max, double lambda_min, double gamma, int len) {
  if (std::isinf(c_star)) return len >= 2 ? 1.0 : kInf;
  return (len - 1.0) * c_eff_paper(c_star, lambda_max, lambda_min, gamma, len);  // erratum E1
}

double prop_v1_beta(double c, double c_star, double gamma, double lambda_min, double lambda_max, int i) {
  // Prop V.1 (35): beta = c (gamma + (i-1) lambda_min) - c_star lambda_max (i-1) sqrt(1 - c^2)
  return c * (gamma + (i - 1.0) * lambda_min) - c_star * lambda_max * (i - 1.0) * std::sqrt((1.0 - c) * (1.0 + c));
}

double prop_v1_kappa(double alpha_pd, double beta, double c) { return alpha_pd * beta * (1.0 + c); }  // kappa = alpha beta (1+c)

AnisotropyConstants anisotropy(const std::vector<SsmParams>& samples, const SpectralConstants& k, CstarNorm norm) {
  if (samples.empty()) throw std::invalid_argument("anisotropy: no samples");
  AnisotropyConstants a;
  a.alpha_pd = kInf;
  for (const auto& p : samples) {
    const Mat S = p.S_BC();
    a.numerator = std::max(a.numerator, anisotropy_numerator(S, k.mu_tilde, norm));
    a.alpha_pd = std::min(a.alpha_pd, kernel_lambda_min(S));
  }
  // c_star = sup_t ||S_BC - S_ee I|| / inf_{t,z} z^T S_BC z (§V item 1); +inf when V.1 fails.
  a.c_star = a.alpha_pd > 0.0 ? a.numerator / a.alpha_pd : kInf;
  a.c_eff = c_eff_paper(a.c_star, k.lambda_max, k.lambda_min, k.gamma, k.len);
  a.c_eff_proof = c_eff_proof(a.c_star, k.lambda_max, k.lambda_min, k.gamma, k.len);
  return a;
}

// =============================================================================================
// Projected variables and the decomposition (24)-(28)

double projected_b(double z_mu, int sigma) { return sigma * z_mu; }  // b_i = sigma_i z_i^mu~, The Attention Within (7)
double projected_b(const RowVec& z, int mu, int sigma) { return projected_b(z[mu], sigma); }

// V = 1 - b = sum_{mu != mu~} (z^mu)^2 / (1 + b) on the sphere, The Attention Within (8).
double lyapunov_V(double b, double tangential) { return b > 0.0 ? tangential / (1.0 + b) : 1.0 - b; }

double lyapunov_V(const RowVec& z, int mu, int sigma) {
  const double b = projected_b(z, mu, sigma);
  if (b <= 0.0) return lyapunov_V(b, 0.0);  // 1 - b: no cancellation, the tangential mass is not needed
  double t = 0.0;
  for (Eigen::Index k = 0; k < z.size(); ++k)
    if (k != mu) t += z[k] * z[k];
  return lyapunov_V(b, t);
}

double error_norm(const RowVec& z, int mu, int sigma) { return std::sqrt(2.0 * lyapunov_V(z, mu, sigma)); }  // |e|^2 = 2V

RowVec token_with_V(double V, const RowVec& w, int mu, int sigma) {
  RowVec u = w;
  u[mu] = 0.0;
  const double un = u.norm();
  if (!(un > 0.0)) throw std::invalid_argument("token_with_V: w must have a component orthogonal to e^mu~");
  RowVec z = (std::sqrt(V * (2.0 - V)) / un) * u;
  z[mu] = 1.0 - V;
  return sigma * z;
}

BdotDecomposition bdot_decomposition(const SsmParams& p, const Tokens& Z, int i, int mu, const std::vector<int>& Sigma) {
  const int n = p.n();
  check_mu(mu, n, "bdot_decomposition");
  if (i < 0 || i >= Z.rows() || static_cast<int>(Sigma.size()) < i + 1)
    throw std::invalid_argument("bdot_decomposition: token index or signs out of range");
  const Mat S = p.S_BC();
  const auto L = io_lambdas(p, Z.topRows(i + 1));
  const RowVec zi = Z.row(i);
  const double si = Sigma[static_cast<std::size_t>(i)];
  const double bi = si * zi[mu];
  const Vec& lii = L[static_cast<std::size_t>(i)][static_cast<std::size_t>(i)];
  BdotDecomposition d;
  const double q = zi.dot(S * zi.transpose());
  // (24) = (z_i^T S z_i)(lambda_ii^mu~ - z_i^T D_ii z_i) b_i
  d.t24 = q * (lii[mu] - zi.cwiseProduct(zi).dot(lii.transpose())) * bi;
  const double zSe = zi.dot(S.col(mu).transpose());  // z_i^T S e^mu~
  for (int j = 0; j < i; ++j) {
    const Vec& l = L[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
    const double sj = Sigma[static_cast<std::size_t>(j)];
    RowVec ej = Z.row(j);
    ej[mu] -= sj;  // e_j = z_j - sigma_j e^mu~ (9)
    const double ziDe = l[mu] * zi[mu];                         // z_i^T D_ij e^mu~
    const double ziDej = zi.cwiseProduct(ej).dot(l.transpose());  // z_i^T D_ij e_j
    const double zSej = zi.dot(S * ej.transpose());             // z_i^T S e_j
    d.t25 += zSe * (si * l[mu] - ziDe * bi);                    // (25)
    d.t26 += sj * zSe * (si * l[mu] * ej[mu] - ziDej * bi);     // (26)
    d.t27 += sj * zSej * (si * l[mu] - ziDe * bi);              // (27)
    d.t28 += zSej * (si * l[mu] * ej[mu] - ziDej * bi);         // (28)
  }
  return d;
}

double bdot(const SsmParams& p, const Tokens& Z, int i, int mu, int sigma) {
  SsmBranches br;
  ssm_branches(p, SsmOptions{}, Z, br);
  Tokens R(Z.rows(), Z.cols());
  ssm_readout(SsmForm::InputOutput, p, br, Z, 0, static_cast<int>(Z.rows()), R);
  // (5): z_i' = (I - z_i z_i^T) sum_j beta_ij z_j; b_i' = sigma_i (z_i')^mu~.
  const RowVec zi = Z.row(i);
  const double zr = zi.dot(R.row(i));
  return sigma * (R(i, mu) - zr * zi[mu] / zi.squaredNorm());
}

// =============================================================================================
// Linearisation of (5) at a consensus point (our derivation)

Tokens consensus_point(int n, int mu, const std::vector<int>& Sigma) {
  check_mu(mu, n, "consensus_point");
  Tokens Z = Tokens::Zero(static_cast<Eigen::Index>(Sigma.size()), n);
  for (std::size_t i = 0; i < Sigma.size(); ++i) Z(static_cast<Eigen::Index>(i), mu) = Sigma[i];
  return Z;
}

Mat consensus_linearisation_diagonal(const SsmParams& p, int len, int mu, const std::vector<int>& Sigma, bool silu_bc) {
  const int n = p.n();
  if (static_cast<int>(Sigma.size()) < len) throw std::invalid_argument("consensus_linearisation_diagonal: need len signs");
  std::vector<int> sig(Sigma.begin(), Sigma.begin() + len);
  const Tokens Z = consensus_point(n, mu, sig);
  const auto L = io_lambdas(p, Z);
  Mat D = Mat::Zero(len, n);
  for (int i = 0; i < len; ++i) {
    const Vec& lii = L[static_cast<std::size_t>(i)][static_cast<std::size_t>(i)];
    const double Kii = interaction_kernel(p, silu_bc, Z.row(i), Z.row(i));
    double cross = 0.0;  // sum_{j<i} s_i s_j K(s_i e, s_j e) lambda_ij^mu~
    for (int j = 0; j < i; ++j)
      cross += sig[static_cast<std::size_t>(i)] * sig[static_cast<std::size_t>(j)] *
               interaction_kernel(p, silu_bc, Z.row(i), Z.row(j)) * L[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)][mu];
    for (int nu = 0; nu < n; ++nu)
      if (nu != mu) D(i, nu) = -(Kii * (lii[mu] - lii[nu]) + cross);  // linearised (5)
  }
  return D;
}

std::vector<double> predicted_V_rates(const Mat& diagonal, int mu) {
  std::vector<double> out(static_cast<std::size_t>(diagonal.rows()));
  double slowest = kInf;
  for (Eigen::Index i = 0; i < diagonal.rows(); ++i) {
    for (Eigen::Index nu = 0; nu < diagonal.cols(); ++nu)
      if (nu != mu) slowest = std::min(slowest, -diagonal(i, nu));
    out[static_cast<std::size_t>(i)] = 2.0 * slowest;  // V ~ |w|^2 decays at twice the slowest rate
  }
  return out;
}

double fitted_decay_rate(const std::vector<double>& t, const std::vector<double>& v, double t_from, double t_to,
                         double floor) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  long cnt = 0;
  for (std::size_t k = 0; k < t.size() && k < v.size(); ++k) {
    if (t[k] < t_from || t[k] > t_to || !(v[k] > floor)) continue;
    const double y = std::log(v[k]);
    sx += t[k];
    sy += y;
    sxx += t[k] * t[k];
    sxy += t[k] * y;
    ++cnt;
  }
  if (cnt < 2) return kNaN;
  const double den = cnt * sxx - sx * sx;
  if (!(den > 0.0)) return kNaN;
  return -(cnt * sxy - sx * sy) / den;
}

// =============================================================================================
// Lemma IV.1

SiluBiasEstimate silu_bias_monte_carlo(int m, int n, const Vec& zi, const Vec& zj, long draws, RandomEntries dist,
                                       double scale, std::uint64_t seed) {
  if (zi.size() != n || zj.size() != n || draws < 2) throw std::invalid_argument("silu_bias_monte_carlo: bad sizes");
  constexpr long kChunk = 1000;
  const long chunks = (draws + kChunk - 1) / kChunk;
  std::vector<double> s1(static_cast<std::size_t>(chunks)), s2(s1.size()), t1(s1.size()), t2(s1.size());
  const double half = std::sqrt(3.0) * scale;
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic)
  for (long c = 0; c < chunks; ++c) try {
    Rng rng(seed, {0x1e41, static_cast<std::uint64_t>(c)});  // one stream per chunk: thread-count independent
    Mat SB(m, n), SC(m, n);
    double a1 = 0, a2 = 0, b1 = 0, b2 = 0;
    const long end = std::min(draws, (c + 1) * kChunk);
    for (long d = c * kChunk; d < end; ++d) {
      if (dist == RandomEntries::Normal) {
        rng.fill_normal(SB, scale);
        rng.fill_normal(SC, scale);
      } else {
        rng.fill_uniform(SB, -half, half);
        rng.fill_uniform(SC, -half, half);
      }
      const Vec cz = SC * zi, bz = SB * zj;
      const double bil = cz.dot(bz);  // z_i^T S_C^T S_B z_j
      double sil = 0.0;               // silu(S_C z_i)^T silu(S_B z_j)
      for (int k = 0; k < m; ++k) sil += silu(cz[k]) * silu(bz[k]);
      a1 += bil;
      a2 += bil * bil;
      b1 += sil;
      b2 += sil * sil;
    }
    s1[static_cast<std::size_t>(c)] = a1;
    s2[static_cast<std::size_t>(c)] = a2;
    t1[static_cast<std::size_t>(c)] = b1;
    t2[static_cast<std::size_t>(c)] = b2;
  } catch (...) {
    errors.capture();
  }
  errors.rethrow();
  double A1 = 0, A2 = 0, B1 = 0, B2 = 0;
  for (long c = 0; c < chunks; ++c) {
    A1 += s1[static_cast<std::size_t>(c)];
    A2 += s2[static_cast<std::size_t>(c)];
    B1 += t1[static_cast<std::size_t>(c)];
    B2 += t2[static_cast<std::size_t>(c)];
  }
  const double N = static_cast<double>(draws);
  SiluBiasEstimate e;
  e.draws = draws;
  e.bilinear_mean = A1 / N;
  e.silu_mean = B1 / N;
  const double va = std::max(0.0, (A2 - N * e.bilinear_mean * e.bilinear_mean) / (N - 1.0));
  const double vb = std::max(0.0, (B2 - N * e.silu_mean * e.silu_mean) / (N - 1.0));
  e.bilinear_se = std::sqrt(va / N);
  e.silu_se = std::sqrt(vb / N);
  return e;
}

std::pair<double, double> silu_gaussian_moments(double s) {
  if (!(s > 0.0)) throw std::invalid_argument("silu_gaussian_moments: s must be > 0");
  using boost::math::quadrature::gauss_kronrod;
  const double c = 1.0 / (s * std::sqrt(2.0 * std::numbers::pi));
  auto pdf = [&](double x) { return c * std::exp(-0.5 * x * x / (s * s)); };
  const double L = 40.0 * s;
  const double m1 = gauss_kronrod<double, 61>::integrate([&](double x) { return silu(x) * pdf(x); }, -L, L, 15, 1e-15);
  const double m2 = gauss_kronrod<double, 61>::integrate([&](double x) { return silu(x) * silu(x) * pdf(x); }, -L, L, 15, 1e-15);
  return {m1, m2};
}

// =============================================================================================
// Trajectory classification

void TailObserver::observe(double t, const Batch& Z) {
  if (tail_.rows() != Z.runs || tail_.cols() != Z.len) tail_ = Mat::Zero(Z.runs, Z.len);
  if (t < t_tail_) return;
  for (int r = 0; r < Z.runs; ++r)
    for (int i = 0; i < Z.len; ++i) {
      const double a = std::abs(Z.Z(static_cast<Eigen::Index>(r) * Z.len + i, mu_));
      if (a > tail_(r, i)) tail_(r, i) = a;
    }
}

std::vector<double> TailObserver::limsup(int r) const {
  std::vector<double> v(static_cast<std::size_t>(tail_.cols()));
  for (Eigen::Index i = 0; i < tail_.cols(); ++i) v[static_cast<std::size_t>(i)] = tail_(r, i);
  return v;
}

bool TrajectoryClass::trapped(double threshold) const {
  for (double v : limsup)
    if (v <= threshold) return true;
  return false;
}

TrajectoryClass classify_trajectory(const Eigen::Ref<const Tokens>& Z, int mu, double tol, const std::vector<double>& limsup) {
  check_mu(mu, static_cast<int>(Z.cols()), "classify_trajectory");
  TrajectoryClass c;
  c.limsup = limsup;
  c.signs.resize(static_cast<std::size_t>(Z.rows()));
  for (Eigen::Index i = 0; i < Z.rows(); ++i) {
    const int s = Z(i, mu) >= 0.0 ? 1 : -1;  // sigma_hat_i = sign(z_i^mu~(t_end))
    c.signs[static_cast<std::size_t>(i)] = s;
    c.max_V = std::max(c.max_V, lyapunov_V(Z.row(i), mu, s));
  }
  c.converged = c.max_V < tol;
  return c;
}

}  // namespace tokdyn
