// Dichotomy bundles and projectors (App. B.1 two-sided extension; covariant Lyapunov vectors),
// the dichotomy constant C(r_-, r_+) of (A4), the Green-operator norm of Lemma 17 on a window,
// the time-ordered exponential of Thm 4 and dense products. See analysis/cocycle.hpp.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/norms.hpp"

namespace tokdyn::cocycle {

namespace {
double smallest_sv(const Matrix& M) {
  if (M.size() == 0) return 1.0;
  const Eigen::VectorXd s = Eigen::JacobiSVD<Matrix>(M).singularValues();
  return s(s.size() - 1);
}
}  // namespace

namespace {
/// "No dichotomy" inside this file only: thrown where the construction finds the cocycle has no
/// bundles, turned into BundlesOutcome::why_not by find_two_sided_bundles (a std::domain_error for
/// the callers of the throwing two_sided_bundles / unstable_subspace).
class NoDichotomyFound : public std::domain_error {
 public:
  using std::domain_error::domain_error;
};
}  // namespace

Matrix unstable_subspace(const Matrix& M, double tol) {
  SubspaceOutcome o = find_unstable_subspace(M, tol);
  if (!o) throw NoDichotomyFound(o.why_not);
  return std::move(*o.basis);
}

SubspaceOutcome find_unstable_subspace(const Matrix& M, double tol) {
  SubspaceOutcome out;
  const long d = M.rows();
  if (M.cols() != d || d < 1) throw std::invalid_argument("unstable_subspace: expected a non-empty square matrix");
  Eigen::EigenSolver<Matrix> es(M, true);
  if (es.info() != Eigen::Success) throw ConvergenceError("unstable_subspace: the eigenvalue iteration did not converge");
  const Eigen::VectorXcd lam = es.eigenvalues();
  const Eigen::MatrixXcd vec = es.eigenvectors();
  std::vector<Eigen::VectorXd> cols;
  long count = 0;
  for (long i = 0; i < d; ++i) {
    const double a = std::abs(lam(i));
    if (std::abs(a - 1.0) <= tol) {
      out.why_not = fmt::format("unstable_subspace: eigenvalue {:.6g}{:+.6g}i has modulus {:.12g}, within {:g} of 1; expected a "
                                "hyperbolic matrix",
                                lam(i).real(), lam(i).imag(), a, tol);
      return out;
    }
    if (a < 1.0) continue;
    ++count;
    if (lam(i).imag() == 0.0) {
      cols.push_back(vec.col(i).real());
    } else if (lam(i).imag() > 0.0) {  // a complex pair spans Re v, Im v (its conjugate is skipped)
      cols.push_back(vec.col(i).real());
      cols.push_back(vec.col(i).imag());
    }
  }
  Matrix V(d, static_cast<long>(cols.size()));
  for (std::size_t j = 0; j < cols.size(); ++j) V.col(static_cast<long>(j)) = cols[j];
  if (V.cols() != count) throw std::logic_error("unstable_subspace: complex eigenvalues not in conjugate pairs");
  if (count == 0) {
    out.basis = Matrix(d, 0);
    return out;
  }
  Matrix Q, R;
  qr_signfixed(V, Q, R);
  // A defective unstable eigenvalue gives parallel eigenvectors: refuse rather than return a
  // basis of the wrong dimension.
  const double rmax = R.diagonal().cwiseAbs().maxCoeff();
  if (R.diagonal().cwiseAbs().minCoeff() <= 1e-10 * rmax) {
    out.why_not = "unstable_subspace: the unstable eigenvectors are (numerically) dependent (a defective eigenvalue); expected a "
                  "diagonalisable end matrix";
    return out;
  }
  out.basis = std::move(Q);
  return out;
}

Bundles two_sided_bundles(const Cocycle& c) {
  const long L = c.length(), d = c.dim();
  Bundles b;
  b.method = "two-sided";
  b.first = 0;
  const Matrix U0 = unstable_subspace(c.matrix(0));
  const Matrix ZL = unstable_subspace(c.matrix(L - 1).transpose());
  if (U0.cols() != ZL.cols())
    throw NoDichotomyFound(fmt::format("two-sided bundles: B(0) has {} unstable directions and B(L-1) has {}; expected the same number",
                                        U0.cols(), ZL.cols()));
  const long k = U0.cols();
  b.k = k;
  b.U.resize(static_cast<std::size_t>(L + 1));
  b.T.resize(static_cast<std::size_t>(L));
  b.P_plus.resize(static_cast<std::size_t>(L + 1));
  if (k == 0 || k == d) {
    for (long l = 0; l <= L; ++l) {
      b.U[static_cast<std::size_t>(l)] = k == 0 ? Matrix(d, 0) : Matrix(Matrix::Identity(d, d));
      b.P_plus[static_cast<std::size_t>(l)] = k == 0 ? Matrix(Matrix::Zero(d, d)) : Matrix(Matrix::Identity(d, d));
      if (l < L) b.T[static_cast<std::size_t>(l)] = k == 0 ? Matrix(0, 0) : c.matrix(l);
    }
    return b;
  }
  // Push V_par forward: B(l) U(l) = U(l+1) T(l) (the dominant subspace: stable under QR).
  b.U[0] = U0;
  Matrix W;
  for (long l = 0; l < L; ++l) {
    c.apply(l, b.U[static_cast<std::size_t>(l)], W);
    qr_signfixed(W, b.U[static_cast<std::size_t>(l + 1)], b.T[static_cast<std::size_t>(l)]);
  }
  // Pull V_perp^perp back with transposes: Z(l) = span B(l)^T Z(l+1), Z(L) = E^u(B(L-1)^T).
  std::vector<Matrix> Z(static_cast<std::size_t>(L + 1));
  Z[static_cast<std::size_t>(L)] = ZL;
  Matrix R;
  for (long l = L - 1; l >= 0; --l) {
    c.apply_transpose(l, Z[static_cast<std::size_t>(l + 1)], W);
    qr_signfixed(W, Z[static_cast<std::size_t>(l)], R);
  }
  for (long l = 0; l <= L; ++l) {
    const Matrix& U = b.U[static_cast<std::size_t>(l)];
    const Matrix& Zl = Z[static_cast<std::size_t>(l)];
    const Matrix G = Zl.transpose() * U;  // k x k; sigma_min = sin of the bundle angle
    if (smallest_sv(G) < 1e-13)
      throw NoDichotomyFound(fmt::format("two-sided bundles: V_par and V_perp are not transversal at layer {} (sigma_min(Z^T U) = {:.3g})",
                                          l, smallest_sv(G)));
    b.P_plus[static_cast<std::size_t>(l)] = U * G.partialPivLu().solve(Zl.transpose());
  }
  return b;
}

BundlesOutcome find_two_sided_bundles(const Cocycle& c) {
  try {
    return {two_sided_bundles(c), ""};
  } catch (const NoDichotomyFound& e) {
    return {std::nullopt, e.what()};
  }
}

Bundles clv_bundles(const Cocycle& c, long burn, long k_plus) {
  BundlesOutcome o = find_clv_bundles(c, burn, k_plus);
  if (!o) throw std::domain_error(o.why_not);
  return std::move(*o.bundles);
}

BundlesOutcome find_clv_bundles(const Cocycle& c, long burn, long k_plus) {
  const long L = c.length(), d = c.dim();
  if (burn < 0 || 2 * burn > L)
    throw std::invalid_argument(fmt::format("clv_bundles: burn = {} with L = {}; expected 0 <= 2 burn <= L", burn, L));
  QrOptions opt;
  opt.keep_factors = true;
  const QrResult qr = qr_iterate(c, opt);
  if (k_plus < 0) {
    const LyapunovSpectrum s = lyapunov_spectrum(qr.log_diag.middleRows(burn, std::max<long>(L - 2 * burn, 1)));
    k_plus = 0;
    for (long i = 0; i < d; ++i) k_plus += s.mu(i) > 0 ? 1 : 0;
  }
  if (k_plus > d) throw std::invalid_argument("clv_bundles: k_plus > d");
  for (const auto& R : qr.R)
    if (R.diagonal().minCoeff() <= 0) return {std::nullopt, "clv_bundles: a singular QR factor (R_ii = 0); expected invertible layer maps"};
  Bundles b;
  b.method = "clv";
  b.k = k_plus;
  b.first = burn;
  const long n = L - 2 * burn + 1;  // layers burn..L-burn
  b.U.resize(static_cast<std::size_t>(n));
  b.T.resize(static_cast<std::size_t>(std::max<long>(n - 1, 0)));
  b.P_plus.resize(static_cast<std::size_t>(n));
  // Backward: C_L = I (upper triangular), C_r = R_r^{-1} C_{r+1}, columns normalised.
  Matrix C = Matrix::Identity(d, d);
  const Eigen::VectorXd e = (Eigen::VectorXd(d) << Eigen::VectorXd::Ones(k_plus), Eigen::VectorXd::Zero(d - k_plus)).finished();
  for (long r = L; r >= burn; --r) {
    if (r < L) {
      C = qr.R[static_cast<std::size_t>(r)].triangularView<Eigen::Upper>().solve(C);
      for (long j = 0; j < d; ++j) C.col(j) /= C.col(j).norm();
    }
    if (r > L - burn) continue;
    const long j = r - burn;
    const Matrix& Q = qr.Q[static_cast<std::size_t>(r)];
    // V = Q C (CLVs as columns); P_+ = V E V^{-1} = Q C E C^{-1} Q^T. Since C is upper
    // triangular, V_par = span of the first k_plus columns of Q.
    const Matrix Cinv = C.triangularView<Eigen::Upper>().solve(Matrix::Identity(d, d));
    b.P_plus[static_cast<std::size_t>(j)] = Q * C * e.asDiagonal() * Cinv * Q.transpose();
    b.U[static_cast<std::size_t>(j)] = Q.leftCols(k_plus);
    if (r < L - burn) b.T[static_cast<std::size_t>(j)] = qr.R[static_cast<std::size_t>(r)].topLeftCorner(k_plus, k_plus);
  }
  return {std::move(b), ""};
}

BundleDiagnostics bundle_diagnostics(const Cocycle& c, const Bundles& b) {
  const long n = static_cast<long>(b.P_plus.size()), d = c.dim();
  BundleDiagnostics g;
  g.angle.resize(n);
  g.p_plus_norm.resize(n);
  g.invariance = Eigen::VectorXd::Zero(n);
  for (long j = 0; j < n; ++j) {
    const Matrix& P = b.P_plus[static_cast<std::size_t>(j)];
    const double nrm = spectral_norm(P);
    g.p_plus_norm(j) = nrm;
    // ||P|| = 1/sin(theta_min) for an oblique projector other than 0 and I.
    g.angle(j) = (b.k == 0 || b.k == d) ? M_PI / 2 : std::asin(std::min(1.0, 1.0 / nrm));
    const long l = b.first + j;
    if (j + 1 < n && l < c.length()) {
      const Matrix B = c.matrix(l);
      g.invariance(j) = spectral_norm(b.P_plus[static_cast<std::size_t>(j + 1)] * B - B * P);
    }
  }
  return g;
}

GrowthEnvelope growth_envelope(const Cocycle& c, const Bundles& b, long stride, double r_minus_min, double r_plus_max) {
  if (stride < 1) throw std::invalid_argument("growth_envelope: stride must be >= 1");
  if (!(r_minus_min >= 0) || !(r_plus_max > 0)) throw std::invalid_argument("growth_envelope: expected r_minus_min >= 0 and r_plus_max > 0");
  const long n = static_cast<long>(b.P_plus.size()), d = c.dim(), k = b.k;
  if (static_cast<long>(b.T.size()) < n - 1) throw std::invalid_argument("growth_envelope: bundles without the restricted maps T(l)");
  // A push from one start stops once its norm, weighted as the constants weigh it at the extreme
  // rate asked for (g / r_minus_min^j forward, g r_plus_max^j backward), has fallen below
  // kNegligible of the largest weighted value it reached (after kMinLags layers at least). Under a
  // dichotomy whose rates lie beyond those extremes the weighted norm only decays from there, so the
  // rest changes no constant C(r) for r_minus >= r_minus_min (r_plus <= r_plus_max) above round-off,
  // and a push costs about its decay length, not L. Rates 0 / inf: no truncation (every lag).
  constexpr double kNegligible = 1e-18;
  constexpr long kMinLags = 8;
  const double log_neg = std::log(kNegligible);
  const bool cut_minus = r_minus_min > 0, cut_plus = std::isfinite(r_plus_max);
  const double wm = cut_minus ? -std::log(r_minus_min) : 0.0, wp = cut_plus ? std::log(r_plus_max) : 0.0;
  const long starts = (n + stride - 1) / stride;
  GrowthEnvelope g;
  g.g_minus = Eigen::VectorXd::Zero(n);
  g.g_plus = Eigen::VectorXd::Zero(n);
  // Starts run in parallel on a stored cocycle (a callback cocycle may not be reentrant); each
  // thread keeps its own envelope and they are merged by max: the same bits at any thread count.
  const bool parallel = c.has_matrices() && starts > 1;
#pragma omp parallel if (parallel)
  {
    Eigen::VectorXd gm = Eigen::VectorXd::Zero(n), gp = Eigen::VectorXd::Zero(n);
    const Matrix I = Matrix::Identity(d, d);
    Matrix X, Y, W;
#pragma omp for schedule(dynamic, 1)
    for (long si = 0; si < starts; ++si) {
      const long s = si * stride;
      // Forward on V_perp: X(l) = P_-(l) Phi(l, s) P_-(s), re-projected every step.
      X = I - b.P_plus[static_cast<std::size_t>(s)];
      double v = spectral_norm(X);
      gm(0) = std::max(gm(0), v);
      double peak = v > 0 ? std::log(v) : -std::numeric_limits<double>::infinity();
      for (long j = s; j + 1 < n; ++j) {
        c.apply(b.first + j, X, Y);
        X.noalias() = (I - b.P_plus[static_cast<std::size_t>(j + 1)]) * Y;
        v = spectral_norm(X);
        const long lag = j + 1 - s;
        gm(lag) = std::max(gm(lag), v);
        if (!cut_minus) continue;
        const double w = v > 0 ? std::log(v) + static_cast<double>(lag) * wm : -std::numeric_limits<double>::infinity();
        peak = std::max(peak, w);
        if (lag >= kMinLags && !(w > peak + log_neg)) break;
      }
    if (k == 0) continue;
      // Backward on V_par: Phi(l, s) P_+(s) = U(l) [T(l)^{-1} ... T(s-1)^{-1}] U(s)^T P_+(s).
      W = b.U[static_cast<std::size_t>(s)].transpose() * b.P_plus[static_cast<std::size_t>(s)];
      v = spectral_norm(W);
      gp(0) = std::max(gp(0), v);
      peak = v > 0 ? std::log(v) : -std::numeric_limits<double>::infinity();
      for (long j = s - 1; j >= 0; --j) {
        W = b.T[static_cast<std::size_t>(j)].partialPivLu().solve(W);
        v = spectral_norm(W);
        const long lag = s - j;
        gp(lag) = std::max(gp(lag), v);
        if (!cut_plus) continue;
        const double w = v > 0 ? std::log(v) + static_cast<double>(lag) * wp : -std::numeric_limits<double>::infinity();
        peak = std::max(peak, w);
        if (lag >= kMinLags && !(w > peak + log_neg)) break;
      }
    }
#pragma omp critical(tokdyn_growth_envelope)
    {
      g.g_minus = g.g_minus.cwiseMax(gm);
      g.g_plus = g.g_plus.cwiseMax(gp);
    }
  }
  // Logs once (the constants scan them for every rate asked).
  auto logs = [](const Eigen::VectorXd& v) {
    Eigen::VectorXd l(v.size());
    for (long j = 0; j < v.size(); ++j) l(j) = v(j) > 0 ? std::log(v(j)) : -std::numeric_limits<double>::infinity();
    return l;
  };
  g.log_minus = logs(g.g_minus);
  g.log_plus = logs(g.g_plus);
  return g;
}

namespace {
/// max(1, max_j exp(log_g[j] + j * log_r)), from the logs: one exp for the whole scan.
double envelope_constant(const Eigen::VectorXd& log_g, double log_r) {
  double best = 0.0;  // log 1
  for (long j = 0; j < log_g.size(); ++j) best = std::max(best, log_g(j) + static_cast<double>(j) * log_r);
  return std::exp(best);
}
}  // namespace

double constant_minus(const GrowthEnvelope& g, double r_minus) {
  if (!(r_minus > 0)) throw std::invalid_argument("constant_minus: r_minus must be > 0");
  return envelope_constant(g.log_minus, -std::log(r_minus));
}

double constant_plus(const GrowthEnvelope& g, double r_plus) {
  if (!(r_plus > 0)) throw std::invalid_argument("constant_plus: r_plus must be > 0");
  return envelope_constant(g.log_plus, std::log(r_plus));
}

double green_norm(const Cocycle& c, const Bundles& b) {
  const long n = static_cast<long>(b.P_plus.size()), d = c.dim(), k = b.k;
  if (static_cast<long>(b.T.size()) < n - 1) throw std::invalid_argument("green_norm: bundles without the restricted maps T(l)");
  Eigen::VectorXd row = Eigen::VectorXd::Zero(n);  // row(l) = sum_s ||G(l, s+1)||
  const Matrix I = Matrix::Identity(d, d);
  Matrix X, Y;
  // A push ends once its norm is below 1e-18 of the largest it reached (after 8 layers at least):
  // under the dichotomy it only decays from there, and the terms left out add at most L * 1e-18 of a
  // row's sum. A window without decay is pushed to its end (the O(L^2 d^3) of the definition);
  // with it the cost is about L times the decay length.
  constexpr double kNegligible = 1e-18;
  constexpr long kMinLags = 8;
  for (long sig = 1; sig < n; ++sig) {  // sig = s + 1, s = 0..n-2 (h lives on the n-1 steps)
    X = I - b.P_plus[static_cast<std::size_t>(sig)];
    double v = spectral_norm(X), peak = v;
    row(sig) += v;
    for (long j = sig; j + 1 < n; ++j) {
      c.apply(b.first + j, X, Y);
      X.noalias() = (I - b.P_plus[static_cast<std::size_t>(j + 1)]) * Y;
      v = spectral_norm(X);
      row(j + 1) += v;
      peak = std::max(peak, v);
      if (j + 1 - sig >= kMinLags && !(v > kNegligible * peak)) break;
    }
    if (k == 0) continue;
    Matrix W = b.U[static_cast<std::size_t>(sig)].transpose() * b.P_plus[static_cast<std::size_t>(sig)];
    peak = 0;
    for (long j = sig - 1; j >= 0; --j) {
      W = b.T[static_cast<std::size_t>(j)].partialPivLu().solve(W);
      v = spectral_norm(W);
      row(j) += v;
      peak = std::max(peak, v);
      if (sig - j > kMinLags && !(v > kNegligible * peak)) break;
    }
  }
  return row.maxCoeff();
}

// ------------------------------------------------------------------------------------------------

Matrix time_ordered_exp(const std::function<Matrix(double)>& A, double t0, double t1, double tol, long m0, long* steps_used) {
  if (!(t1 >= t0) || !std::isfinite(t0) || !std::isfinite(t1)) throw std::invalid_argument("time_ordered_exp: expected finite t0 <= t1");
  if (m0 < 1) throw std::invalid_argument("time_ordered_exp: m0 must be >= 1");
  const long d = A(t0).rows();
  auto rk4 = [&](long m) {
    Matrix P = Matrix::Identity(d, d);
    const double h = (t1 - t0) / static_cast<double>(m);
    for (long i = 0; i < m; ++i) {
      const double t = t0 + h * static_cast<double>(i);
      const Matrix Am = A(t + 0.5 * h);
      const Matrix k1 = A(t) * P;
      const Matrix k2 = Am * (P + 0.5 * h * k1);
      const Matrix k3 = Am * (P + 0.5 * h * k2);
      const Matrix k4 = A(t + h) * (P + h * k3);
      P += (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
    }
    return P;
  };
  long m = m0;
  Matrix prev = rk4(m);
  constexpr long kMaxSteps = long(1) << 22;
  while (true) {
    m *= 2;
    Matrix cur = rk4(m);
    const double change = (cur - prev).cwiseAbs().maxCoeff();
    const double scale = std::max(1.0, cur.cwiseAbs().maxCoeff());
    if (change <= tol * scale) {
      if (steps_used) *steps_used = m;
      return cur;
    }
    if (m >= kMaxSteps)
      throw ConvergenceError(fmt::format("time_ordered_exp: RK4 did not converge to {:g} with {} steps (change {:.3g})", tol, m, change));
    prev = std::move(cur);
  }
}

std::function<Matrix(double)> piecewise_linear(std::vector<Matrix> A) {
  if (A.empty()) throw std::invalid_argument("piecewise_linear: no matrices");
  return [A = std::move(A)](double t) -> Matrix {
    const long n = static_cast<long>(A.size());
    if (!(t > 0)) return A.front();
    if (t >= static_cast<double>(n - 1)) return A.back();
    const long r = static_cast<long>(std::floor(t));
    const double w = t - static_cast<double>(r);
    return (1.0 - w) * A[static_cast<std::size_t>(r)] + w * A[static_cast<std::size_t>(r + 1)];
  };
}

Matrix dense_product(const Cocycle& c, long l, long s) {
  if (s < 0 || l < s || l > c.length()) throw std::invalid_argument(fmt::format("dense_product: Phi({}, {}) outside 0 <= s <= l <= {}", l, s, c.length()));
  Matrix P = Matrix::Identity(c.dim(), c.dim()), Y;
  for (long r = s; r < l; ++r) {
    c.apply(r, P, Y);
    P = Y;
  }
  return P;
}

}  // namespace tokdyn::cocycle
