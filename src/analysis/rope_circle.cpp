#include "tokdyn/analysis/rope_circle.hpp"

#include <stdexcept>
#include <algorithm>
#include <boost/numeric/odeint.hpp>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "tokdyn/analysis/dini.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/engine/observers.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/core/symmetric_eigen.hpp"

namespace tokdyn::rope {

namespace {

using tokdyn::kPi;
double max_abs(const Vec& v) { return v.size() ? v.cwiseAbs().maxCoeff() : 0.0; }
double max_abs(const Mat& m) { return m.size() ? m.cwiseAbs().maxCoeff() : 0.0; }

/// Ascending eigenvalues of the symmetric part of J.
Vec symmetric_eigenvalues(const Mat& J) {
  const Eigen::MatrixXd S = 0.5 * (J + J.transpose());
  return lapack_symmetric_eigenvalues(S);
}

}  // namespace

// =============================================================================================
// Energy.

EnergyTerms energy_terms(const PhaseParams& p, const Vec& theta) {
  const int n = static_cast<int>(theta.size());
  p.validate(n, "energy_terms");
  EnergyTerms e;
  e.u.setZero(n);
  e.v.setZero(n);
  e.Z.setZero(n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const double d = theta[i] - theta[j] + p.omega * (p.position(i) - p.position(j));
      const double w = std::exp(p.beta * std::cos(d));  // unscaled W_ij = e^{beta cos delta_ij}
      e.E += w;
      e.Z[i] += w;
      e.u[i] += w * std::sin(d);
      e.v[i] += w * std::sin(theta[i] - theta[j]);
    }
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += e.u[i] * e.v[i] / e.Z[i];
  e.rate = 2.0 * p.beta * s;
  return e;
}

double energy_plus(const PhaseParams& p, const Vec& theta) { return energy_terms(p, theta).E; }
double energy_rate(const PhaseParams& p, const Vec& theta) { return energy_terms(p, theta).rate; }

double energy_rate_fd(const PhaseParams& p, const Vec& theta, double h) {
  if (!(h > 0.0) || !std::isfinite(h)) throw std::invalid_argument("energy_rate_fd: step h must be finite and > 0");
  Vec F;
  phase_velocity(p, theta, F);
  const Vec tp = theta + h * F, tm = theta - h * F;
  return (energy_plus(p, tp) - energy_plus(p, tm)) / (2.0 * h);
}

double energy_witness_plus_closed() {
  const double r3 = std::sqrt(3.0);
  return (-1.0 + 3.0 * std::exp(1.0 + r3)) / (std::exp(r3 / 2.0) + std::exp(0.5 + r3) + std::exp(1.0 + r3));
}

double energy_witness_minus_closed() {
  const double r3 = std::sqrt(3.0);
  const double e = std::exp(1.0 + r3 / 2.0);
  return -(5.0 * e + 4.0) / (std::exp(r3 / 2.0) * (1.0 + 2.0 * e) * (2.0 + e));
}

// =============================================================================================
// Twisted states.

namespace {
long gcd_l(long a, long b) { return std::gcd(a < 0 ? -a : a, b < 0 ? -b : b); }
}  // namespace

TwistOmega TwistOmega::pi_rational(long num, long den) {
  if (den == 0) throw std::invalid_argument("TwistOmega: denominator must be nonzero");
  if (den < 0) {
    num = -num;
    den = -den;
  }
  const long g = num == 0 ? den : gcd_l(num, den);
  TwistOmega w;
  w.pi_rational_ = true;
  w.num_ = num / g;
  w.den_ = den / g;
  w.value_ = kPi * static_cast<double>(num) / static_cast<double>(den);
  return w;
}

TwistOmega TwistOmega::resonant(int n, long m) {
  if (n < 1) throw std::invalid_argument("TwistOmega::resonant: ring size n must be >= 1, got " + std::to_string(n));
  TwistOmega w = pi_rational(2 * m, n);
  w.value_ = 2.0 * kPi * static_cast<double>(m) / static_cast<double>(n);
  return w;
}

TwistOmega TwistOmega::odd_antipodal(long k) { return pi_rational(2 * k + 1, 1); }

TwistOmega TwistOmega::outside_pi_q(double value) {
  if (!std::isfinite(value) || value == 0.0)
    throw std::invalid_argument("TwistOmega::outside_pi_q: value must be finite and nonzero (0 lies in pi*Q)");
  TwistOmega w;
  w.pi_rational_ = false;
  w.num_ = 0;
  w.den_ = 0;
  w.value_ = value;
  return w;
}

Vec twisted_state(int n, double omega, double c) {
  if (n < 2) throw std::invalid_argument("twisted_state: expected at least 2 tokens, got " + std::to_string(n));
  Vec th(n);
  for (int j = 0; j < n; ++j) th[j] = c - omega * static_cast<double>(j);
  return th;
}

bool is_twisted_equilibrium(int n, const TwistOmega& w) {
  if (n < 2) throw std::invalid_argument("is_twisted_equilibrium: expected at least 2 tokens, got " + std::to_string(n));
  if (!w.pi_rational()) return false;               // omega not in pi*Q: neither condition of (16)
  if (w.den() == 1) return true;                    // omega in pi Z
  return (static_cast<long>(n) * w.num()) % (2 * w.den()) == 0;  // n omega in 2 pi Z
}

Vec twisted_drift(int n, double omega) {
  if (n < 2) throw std::invalid_argument("twisted_drift: expected at least 2 tokens, got " + std::to_string(n));
  Vec F = Vec::Zero(n);
  const double s = std::sin(0.5 * omega);
  if (s == 0.0) return F;
  const double amp = std::sin(0.5 * n * omega) / (n * s);
  for (int i = 0; i < n; ++i) F[i] = amp * std::sin(omega * (i - 0.5 * (n - 1)));
  return F;
}

Vec twisted_drift_sum(int n, double omega) {
  if (n < 2) throw std::invalid_argument("twisted_drift_sum: expected at least 2 tokens, got " + std::to_string(n));
  Vec F(n);
  for (int i = 0; i < n; ++i) {
    double s = 0.0;
    for (int j = 0; j < n; ++j) s += std::sin(omega * static_cast<double>(i - j));
    F[i] = s / n;
  }
  return F;
}

double drift_bound_sharp(int n, double omega) {
  const double s = std::abs(std::sin(0.5 * omega));
  if (s == 0.0) return std::numeric_limits<double>::infinity();
  return std::abs(std::sin(0.5 * n * omega)) / (n * s);
}

double drift_bound_coarse(int n, double omega) {
  const double s = std::abs(std::sin(0.5 * omega));
  if (s == 0.0) return std::numeric_limits<double>::infinity();
  return 1.0 / (n * s);
}

Mat twisted_jacobian(int n, double omega) {
  if (n < 2) throw std::invalid_argument("twisted_jacobian: expected at least 2 tokens, got " + std::to_string(n));
  Mat C(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) C(i, j) = std::cos(omega * static_cast<double>(i - j));
  Mat J = C / static_cast<double>(n);
  for (int i = 0; i < n; ++i) J(i, i) -= C.row(i).sum() / n;
  return J;
}

Mat phase_jacobian_fd(const PhaseParams& p, const Vec& theta, double h) {
  if (!(h > 0.0) || !std::isfinite(h)) throw std::invalid_argument("phase_jacobian_fd: step h must be finite and > 0");
  const int n = static_cast<int>(theta.size());
  p.validate(n, "phase_jacobian_fd");
  // Centred differences of (9), column k perturbing theta_k by +-h. Only the pair terms that
  // involve token k change, so each column costs O(n) on top of the base state's row sums
  // (Z_i = 1 + sum_{j != i} w_ij, num_i = sum_{j != i} w_ij sin(theta_j - theta_i)): the whole
  // Jacobian costs O(n^2) instead of 2n evaluations of O(n^2). Row k is recomputed in full.
  auto w = [&](int i, int j, double ti, double tj) {
    const double s = std::sin(0.5 * (ti - tj + p.omega * (p.position(i) - p.position(j))));
    return std::exp(-2.0 * p.beta * s * s);
  };
  Vec Z = Vec::Ones(n), num = Vec::Zero(n);
  Mat W(n, n), T(n, n);  // W(i, j) = w_ij, T(i, j) = w_ij sin(theta_j - theta_i), at the base state
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (j == i) {
        W(i, j) = T(i, j) = 0.0;
        continue;
      }
      W(i, j) = w(i, j, theta[i], theta[j]);
      T(i, j) = W(i, j) * std::sin(theta[j] - theta[i]);
      Z[i] += W(i, j);
      num[i] += T(i, j);
    }
  Mat J(n, n);
  for (int k = 0; k < n; ++k) {
    const double tkp = theta[k] + h, tkm = theta[k] - h;
    for (int i = 0; i < n; ++i) {
      double fp, fm;
      if (i == k) {
        double zp = 1.0, np = 0.0, zm = 1.0, nm = 0.0;
        for (int j = 0; j < n; ++j) {
          if (j == k) continue;
          const double wp = w(k, j, tkp, theta[j]), wm = w(k, j, tkm, theta[j]);
          zp += wp, np += wp * std::sin(theta[j] - tkp);
          zm += wm, nm += wm * std::sin(theta[j] - tkm);
        }
        fp = np / zp, fm = nm / zm;
      } else {
        const double wp = w(i, k, theta[i], tkp), wm = w(i, k, theta[i], tkm);
        fp = (num[i] - T(i, k) + wp * std::sin(tkp - theta[i])) / (Z[i] - W(i, k) + wp);
        fm = (num[i] - T(i, k) + wm * std::sin(tkm - theta[i])) / (Z[i] - W(i, k) + wm);
      }
      J(i, k) = (fp - fm) / (2.0 * h);
    }
  }
  return J;
}

std::vector<ExactEigenvalue> twisted_spectrum_exact(int n, const TwistOmega& w) {
  if (!is_twisted_equilibrium(n, w))
    throw std::invalid_argument("twisted_spectrum_exact: the twisted state with n = " + std::to_string(n) +
                     " is not an equilibrium (omega must lie in pi Z or n omega in 2 pi Z)");
  const long nl = n;
  if ((nl * w.num()) % (2 * w.den()) == 0) {
    const long m = nl * w.num() / (2 * w.den());
    const long mb = ((m % nl) + nl) % nl;
    if (mb == 0) return {{-1, 1, n - 1}, {0, 1, 1}};       // consensus
    if ((2 * mb) % nl == 0) return {{0, 1, n - 1}, {1, 1, 1}};  // (42)
    return {{0, 1, n - 2}, {1, 2, 2}};                      // (41)
  }
  // omega an odd multiple of pi with n odd: (43).
  const int r = (n - 1) / 2;
  std::vector<ExactEigenvalue> s{{-1, nl, r}, {0, 1, 1}};
  if (r - 1 > 0) s.push_back({1, nl, r - 1});
  s.push_back({1, 1, 1});
  return s;
}

std::vector<double> expand_spectrum(const std::vector<ExactEigenvalue>& s) {
  std::vector<double> v;
  for (const auto& e : s)
    for (int k = 0; k < e.mult; ++k) v.push_back(e.value());
  std::sort(v.begin(), v.end());
  return v;
}

double spectrum_error(const Mat& J, const std::vector<ExactEigenvalue>& exact) {
  const std::vector<double> ex = expand_spectrum(exact);
  if (J.rows() != J.cols() || static_cast<std::size_t>(J.rows()) != ex.size())
    throw std::invalid_argument("spectrum_error: matrix size does not match the multiset size");
  const Vec ev = symmetric_eigenvalues(J);
  double e = 0.0;
  for (std::size_t k = 0; k < ex.size(); ++k) e = std::max(e, std::abs(ev[static_cast<Eigen::Index>(k)] - ex[k]));
  return e;
}

std::vector<std::pair<double, int>> eigenvalue_multiplicities(const Mat& J, double tol) {
  const Vec ev = symmetric_eigenvalues(J);
  std::vector<std::pair<double, int>> out;
  for (Eigen::Index k = 0; k < ev.size(); ++k) {
    if (!out.empty() && std::abs(ev[k] - out.back().first) <= tol)
      ++out.back().second;
    else
      out.push_back({ev[k], 1});
  }
  return out;
}

TwistedRow twisted_check(const std::string& family, int n, const TwistOmega& w, double beta, long m, bool fd_jacobian) {
  TwistedRow r;
  r.family = family;
  r.n = n;
  r.m = m;
  r.omega = w.value();
  r.beta = beta;
  r.equilibrium = is_twisted_equilibrium(n, w);
  const PhaseParams p{beta, w.value(), {}};
  p.validate(n, "twisted_check");
  const Vec th = twisted_state(n, w.value());
  Vec F;
  phase_velocity(p, th, F);
  r.rhs_max = max_abs(F);
  const Vec Fa = twisted_drift(n, w.value());
  r.drift_error = max_abs(Vec(F - Fa));
  r.max_drift = max_abs(Fa);
  r.sharp_bound = drift_bound_sharp(n, w.value());
  r.coarse_bound = drift_bound_coarse(n, w.value());
  const Mat Jb = twisted_jacobian(n, w.value());
  Mat Jg;
  phase_jacobian(p, th, Jg);
  r.jacobian_general_error = max_abs(Mat(Jg - Jb));
  if (fd_jacobian) r.jacobian_fd_error = max_abs(Mat(phase_jacobian_fd(p, th, 2e-7) - Jb));
  if (r.equilibrium) r.spectrum_error = spectrum_error(Jb, twisted_spectrum_exact(n, w));
  return r;
}

TwistedSummary summarize_twisted(std::vector<TwistedRow> rows) {
  TwistedSummary s;
  s.count = static_cast<int>(rows.size());
  for (const auto& r : rows) {
    if (r.equilibrium) s.max_rhs = std::max(s.max_rhs, r.rhs_max);
    s.max_drift_error = std::max(s.max_drift_error, r.drift_error);
    s.max_jacobian_fd_error = std::max(s.max_jacobian_fd_error, r.jacobian_fd_error);
    s.max_jacobian_general_error = std::max(s.max_jacobian_general_error, r.jacobian_general_error);
    s.max_spectrum_error = std::max(s.max_spectrum_error, r.spectrum_error);
    if (!(r.max_drift <= r.sharp_bound + 1e-15 && r.sharp_bound <= r.coarse_bound + 1e-15)) s.bounds_ok = false;
  }
  s.rows = std::move(rows);
  return s;
}

// =============================================================================================
// Semicircle contraction.

double lifted_diameter(const Vec& theta) {
  if (theta.size() == 0) throw std::invalid_argument("lifted_diameter: empty state");
  return theta.maxCoeff() - theta.minCoeff();
}

DiameterDini diameter_dini(const PhaseParams& p, const Vec& theta, double tie_tol) {
  const int n = static_cast<int>(theta.size());
  p.validate(n, "diameter_dini");
  DiameterDini r;
  r.D = lifted_diameter(theta);
  r.q = std::tan(0.5 * r.D);
  r.a = softmax_floor(p.beta, n);
  Vec v1, v2;
  phase_velocity(p, theta, v1);
  phase_velocity_cartesian(p, theta, v2);
  const std::vector<double> f(theta.data(), theta.data() + n);
  const std::vector<double> d1(v1.data(), v1.data() + n), d2(v2.data(), v2.data() + n);
  // (C-2) through Lemma C.1's active sets.
  r.dini_c2 = dini_max(f, d1, tie_tol) - dini_min(f, d1, tie_tol);
  r.dini_direct = dini_max(f, d2, tie_tol) - dini_min(f, d2, tie_tol);
  const double mx = theta.maxCoeff(), mn = theta.minCoeff();
  for (int i = 0; i < n; ++i) {
    if (theta[i] >= mx - tie_tol) ++r.active_max;
    if (theta[i] <= mn + tie_tol) ++r.active_min;
  }
  const double bound = 2.0 * r.a * std::sin(r.D);
  r.residual_c2 = -r.dini_c2 - bound;
  r.residual_direct = -r.dini_direct - bound;
  return r;
}

Vec circle_state_with_diameter(int n, double D0, std::uint64_t seed, std::initializer_list<std::uint64_t> ids, int ties) {
  if (n < 2) throw std::invalid_argument("circle_state_with_diameter: expected at least 2 tokens, got " + std::to_string(n));
  if (!std::isfinite(D0) || D0 < 0.0) throw std::invalid_argument("circle_state_with_diameter: D0 must be finite and >= 0");
  Rng rng(seed, ids);
  const int lo = static_cast<int>(rng.below(static_cast<std::uint64_t>(n)));
  int hi = static_cast<int>(rng.below(static_cast<std::uint64_t>(n - 1)));
  if (hi >= lo) ++hi;
  Vec th(n);
  std::vector<int> rest;
  for (int i = 0; i < n; ++i) {
    if (i == lo) {
      th[i] = 0.0;
    } else if (i == hi) {
      th[i] = D0;
    } else {
      th[i] = D0 * rng.uniform();
      rest.push_back(i);
    }
  }
  auto take = [&]() {
    const std::size_t k = static_cast<std::size_t>(rng.below(rest.size()));
    const int i = rest[k];
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(k));
    return i;
  };
  if ((ties & 1) && !rest.empty()) th[take()] = 0.0;
  if ((ties & 2) && !rest.empty()) th[take()] = D0;
  return th;
}

namespace {
struct StopIntegration {};
}  // namespace

ContractionTrajectory circle_contraction(const PhaseParams& p, const Vec& theta0, const ContractionOptions& opt) {
  const int n = static_cast<int>(theta0.size());
  p.validate(n, "circle_contraction");
  if (opt.samples < 2 || !(opt.tau_max > 0.0)) throw std::invalid_argument("circle_contraction: need >= 2 samples and tau_max > 0");
  ContractionTrajectory tr;
  tr.n = n;
  tr.beta = p.beta;
  tr.omega = p.omega;
  tr.D0 = lifted_diameter(theta0);
  if (!(tr.D0 < kPi)) throw std::invalid_argument("circle_contraction: initial lifted diameter must be < pi (Thm 6.3)");
  tr.a = softmax_floor(p.beta, n);
  tr.q0 = std::tan(0.5 * tr.D0);
  tr.method = opt.adaptive.method;
  tr.max_excess = -std::numeric_limits<double>::infinity();
  tr.max_excess_abs = -std::numeric_limits<double>::infinity();
  const double t_end = opt.tau_max / (2.0 * tr.a);
  const double every = t_end / (opt.samples - 1);
  PhaseField f(p, n);
  Batch B = phase_batch(theta0);
  CallbackObserver obs([&](double t, const Batch& Z) {
    if (tr.stopped) return;
    ContractionSample s;
    s.t = t;
    s.tau = 2.0 * tr.a * t;
    s.D = lifted_diameter(Z.Z.col(0));
    s.q_ratio = std::tan(0.5 * s.D) / tr.q0;
    s.bound = std::exp(-s.tau);
    tr.samples.push_back(s);
    tr.max_excess = std::max(tr.max_excess, s.q_ratio - s.bound);
    tr.max_excess_abs = std::max(tr.max_excess_abs, tr.q0 * s.q_ratio - tr.q0 * s.bound);
    if (s.q_ratio < opt.stop_ratio) {
      tr.stopped = true;
      throw StopIntegration{};
    }
  });
  try {
    tr.stats = integrate_adaptive(f, B, 0.0, t_end, opt.adaptive, {&obs}, every);
  } catch (const StopIntegration&) {
  }
  return tr;
}

TailCheck circle_tail_check(const PhaseParams& p, const Vec& theta0, double t_end, int samples, const AdaptiveOptions& opt) {
  const int n = static_cast<int>(theta0.size());
  p.validate(n, "circle_tail_check");
  if (samples < 2 || !(t_end > 0.0)) throw std::invalid_argument("circle_tail_check: need >= 2 samples and t_end > 0");
  TailCheck tc;
  tc.a = softmax_floor(p.beta, n);
  const double D0 = lifted_diameter(theta0);
  if (!(D0 < kPi)) throw std::invalid_argument("circle_tail_check: initial lifted diameter must be < pi (Thm 6.3)");
  tc.q0 = std::tan(0.5 * D0);
  PhaseField f(p, n);
  Batch B = phase_batch(theta0);
  std::vector<double> ts;
  std::vector<Vec> states;
  CallbackObserver obs([&](double t, const Batch& Z) {
    ts.push_back(t);
    states.push_back(Z.Z.col(0));
  });
  integrate_adaptive(f, B, 0.0, t_end, opt, {&obs}, t_end / (samples - 1));
  tc.samples = static_cast<int>(ts.size());
  tc.theta_inf = states.back().mean();
  tc.final_D = lifted_diameter(states.back());
  Vec v;
  for (std::size_t k = 0; k < ts.size(); ++k) {
    const Vec& th = states[k];
    const double e = std::exp(-2.0 * tc.a * ts[k]);
    const double Q = tc.q0 * e, D = lifted_diameter(th);
    const double Lch = 2.0 * std::sin(0.5 * D), Y = 1.0 - std::cos(D);
    tc.max_tail_excess = std::max(tc.max_tail_excess, (th.array() - tc.theta_inf).abs().maxCoeff() - std::asinh(Q) / tc.a);
    tc.max_coarse_excess = std::max(tc.max_coarse_excess, std::asinh(Q) / tc.a - tc.q0 * e / tc.a);
    tc.max_D_excess = std::max(tc.max_D_excess, D - 2.0 * tc.q0 * e);
    tc.max_Y_excess = std::max(tc.max_Y_excess, Y - 2.0 * tc.q0 * tc.q0 * e * e);
    tc.max_chord_excess = std::max(tc.max_chord_excess, Lch - 2.0 * Q / std::sqrt(1.0 + Q * Q));
    phase_velocity(p, th, v);
    tc.max_speed_excess = std::max(tc.max_speed_excess, v.cwiseAbs().maxCoeff() - Lch);
    tc.max_identity_error = std::max(tc.max_identity_error, std::abs(Y - 0.5 * Lch * Lch));
  }
  return tc;
}

// =============================================================================================
// Rate fits.

PhaseConsensusGap phase_consensus_gap(const PhaseParams& p, int n) {
  p.validate(n, "phase_consensus_gap");
  PhaseConsensusGap g;
  phase_attention(p, Vec::Zero(n), g.A);
  // The scaled weights have W_ii = 1, so Z_i = 1 / A_ii and S_ij = A_ij sqrt(Z_i / Z_j).
  Vec Z(n);
  for (int i = 0; i < n; ++i) Z[i] = 1.0 / g.A(i, i);
  Eigen::MatrixXd S(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) S(i, j) = g.A(i, j) * std::sqrt(Z[i] / Z[j]);
  S = (0.5 * (S + S.transpose())).eval();
  const SymmetricEigen es = lapack_symmetric_eigen(S);
  g.eigenvalues = es.values.reverse();
  g.gamma = 1.0 - g.eigenvalues[1];
  Vec u = es.vectors.col(n - 2);
  g.slow_mode = u.cwiseQuotient(Z.cwiseSqrt());
  Eigen::Index k;
  g.slow_mode.cwiseAbs().maxCoeff(&k);
  g.slow_mode /= g.slow_mode[k];  // unit max-norm, largest entry +1
  return g;
}

RateFit circle_rate_fit(const CircleRateTriple& c, const RateFitOptions& opt) {
  if (opt.outputs < 3) throw std::invalid_argument("circle_rate_fit: need at least 3 output times");
  const TwistOmega w = TwistOmega::resonant(c.n, c.m);
  const PhaseParams p{c.beta, w.value(), {}};
  const PhaseConsensusGap g = phase_consensus_gap(p, c.n);
  RateFit r;
  r.triple = c;
  r.gamma = g.gamma;
  const double T = opt.t_factor / g.gamma;
  PhaseField f(p, c.n);
  Batch B = phase_batch(opt.eps * g.slow_mode);
  std::vector<double> ts, ls;
  CallbackObserver obs([&](double t, const Batch& Z) {
    const Vec th = Z.Z.col(0);
    const double N = (th.array() - th.mean()).matrix().norm();
    const double gt = g.gamma * t;
    if (gt >= opt.window_lo - 1e-12 && gt <= opt.window_hi + 1e-12) {
      ts.push_back(t);
      ls.push_back(std::log(N));
    }
  });
  r.stats = integrate_adaptive(f, B, 0.0, T, opt.adaptive, {&obs}, T / (opt.outputs - 1));
  const int m = static_cast<int>(ts.size());
  r.fit_points = m;
  if (m < 2) throw std::invalid_argument("circle_rate_fit: fewer than 2 samples in the fit window");
  double tm = 0, lm = 0;
  for (int k = 0; k < m; ++k) {
    tm += ts[k];
    lm += ls[k];
  }
  tm /= m;
  lm /= m;
  double sxy = 0, sxx = 0;
  for (int k = 0; k < m; ++k) {
    sxy += (ts[k] - tm) * (ls[k] - lm);
    sxx += (ts[k] - tm) * (ts[k] - tm);
  }
  r.gamma_fit = -sxy / sxx;
  r.rel_error = std::abs(r.gamma_fit - r.gamma) / r.gamma;
  return r;
}

// =============================================================================================
// Order checks.

namespace {

Vec reference_solution(const PhaseParams& p, const Vec& th0, double T) {
  PhaseField f(p, static_cast<int>(th0.size()));
  Batch B = phase_batch(th0);
  integrate_adaptive(f, B, 0.0, T, AdaptiveOptions{"fehlberg78", 1e-13, 1e-15, 1e-3, false});
  return B.Z.col(0);
}

Vec rk78_fixed(const PhaseParams& p, const Vec& th0, double T, double h) {
  namespace ode = boost::numeric::odeint;
  using State = std::vector<double>;
  checked_step_count("step", h, 0.0, T, "Fehlberg 7(8)");  // before the count is cast
  const long steps = std::lround(T / h);
  if (!(h > 0.0) || steps < 1 || std::abs(steps * h - T) > 1e-12 * T)
    throw std::invalid_argument("circle_rk78_order_check: T must be a positive multiple of every step");
  // The fixed step is guarded like RK4's, with the Fehlberg 7(8) region (refuse).
  const PhaseField field(p, static_cast<int>(th0.size()));
  StepGuardOptions go;
  go.method = "Fehlberg 7(8)";
  go.param = "step";
  go.max_h_rate = kRkf78MaxHRate;
  go.region_radius = kRkf78StabilityRadius;
  StepGuard guard(field, false, go, h, T);
  ode::runge_kutta_fehlberg78<State> st;
  State x(th0.data(), th0.data() + th0.size());
  Vec th, d;
  auto sys = [&](const State& xs, State& dx, double) {
    th = Eigen::Map<const Vec>(xs.data(), static_cast<Eigen::Index>(xs.size()));
    phase_velocity(p, th, d);
    dx.assign(d.data(), d.data() + d.size());
  };
  double t = 0.0;
  for (long k = 0; k < steps; ++k) {
    guard.before_step(t, phase_batch(Eigen::Map<const Vec>(x.data(), static_cast<Eigen::Index>(x.size()))), h);
    st.do_step(sys, x, t, h);
    t += h;
  }
  return Eigen::Map<const Vec>(x.data(), static_cast<Eigen::Index>(x.size()));
}

void fill_ratios(OrderCheck& oc) {
  for (std::size_t k = 1; k < oc.errors.size(); ++k) oc.ratios.push_back(oc.errors[k - 1] / oc.errors[k]);
}

}  // namespace

OrderCheck circle_rk4_order_check(const PhaseParams& p, const Vec& theta0, double T, const std::vector<double>& steps) {
  const int n = static_cast<int>(theta0.size());
  p.validate(n, "circle_rk4_order_check");
  const Vec ref = reference_solution(p, theta0, T);
  OrderCheck oc;
  oc.reference_error_estimate = max_abs(Vec(ref - rk78_fixed(p, theta0, T, T / 4096.0)));
  PhaseField f(p, n);
  for (double h : steps) {
    checked_step_count("step", h, 0.0, T);  // before the count is cast
    const long k = std::lround(T / h);
    if (!(h > 0.0) || k < 1 || std::abs(k * h - T) > 1e-12 * T)
      throw std::invalid_argument("circle_rk4_order_check: T must be a positive multiple of every step");
    Batch B = phase_batch(theta0);
    integrate_rk4(f, B, 0.0, T, Rk4Options{h, false});
    oc.steps.push_back(h);
    oc.errors.push_back(max_abs(Vec(B.Z.col(0) - ref)));
  }
  fill_ratios(oc);
  return oc;
}

OrderCheck circle_rk78_order_check(const PhaseParams& p, const Vec& theta0, double T, const std::vector<double>& steps) {
  p.validate(static_cast<int>(theta0.size()), "circle_rk78_order_check");
  const Vec ref = reference_solution(p, theta0, T);
  OrderCheck oc;
  oc.reference_error_estimate = max_abs(Vec(ref - rk78_fixed(p, theta0, T, T / 4096.0)));
  for (double h : steps) {
    oc.steps.push_back(h);
    oc.errors.push_back(max_abs(Vec(rk78_fixed(p, theta0, T, h) - ref)));
  }
  fill_ratios(oc);
  return oc;
}

}  // namespace tokdyn::rope
