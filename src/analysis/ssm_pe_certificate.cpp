#include "tokdyn/analysis/ssm_pe_certificate.hpp"

#include <Eigen/SVD>
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <stdexcept>

#include "tokdyn/analysis/pe_window.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/rng.hpp"
#include "ssm_internal.hpp"

namespace tokdyn {

namespace {

/// ln(e^a + e^b) without overflow.
double log_add_exp(double a, double b) {
  if (a == -kInf) return b;
  if (b == -kInf) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

}  // namespace

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
    throw std::invalid_argument(fmt::format("PE window T = {}: the evaluator's grid (step T / {}) would need {:.3g} points to cover "
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

}  // namespace tokdyn
