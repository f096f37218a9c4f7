// Dichotomy bundles and projectors (App. B.1 two-sided extension; covariant Lyapunov vectors),
// the dichotomy constant C(r_-, r_+) of (A4), the Green-operator norm of Lemma 17 on a window,
// the time-ordered exponential of Thm 4 and dense products. See analysis/cocycle.hpp.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/norms.hpp"

namespace tokdyn::cocycle {

namespace {
double smallest_sv(const Matrix& M) {
  if (M.size() == 0) return 1.0;
  // Divide and conquer from 64 on (the two-sided Jacobi SVD costs 0.6 s at 256 x 256 here, once per layer).
  const Eigen::VectorXd s = std::min(M.rows(), M.cols()) >= 64 ? Eigen::VectorXd(Eigen::BDCSVD<Matrix>(M).singularValues())
                                                                : Eigen::VectorXd(Eigen::JacobiSVD<Matrix>(M).singularValues());
  return s(s.size() - 1);
}

// Q R = W with diag(R) >= 0; one column directly (a layer of a 2 x 2 cocycle is a few flops, not an
// Eigen QR object), else qr_signfixed.
void qr_push(const Matrix& W, Matrix& Q, Matrix& R) {
  if (W.cols() == 1) {
    const double nrm = W.norm();
    if (nrm > 1e-150 && nrm < 1e150) {
      Q = W / nrm;
      R.resize(1, 1);
      R(0, 0) = nrm;
      return;
    }
  }
  qr_signfixed(W, Q, R);
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
    qr_push(W, b.U[static_cast<std::size_t>(l + 1)], b.T[static_cast<std::size_t>(l)]);
  }
  // Pull V_perp^perp back with transposes: Z(l) = span B(l)^T Z(l+1), Z(L) = E^u(B(L-1)^T). The
  // d x k bases are kept one after another in one array (no allocation per layer).
  const long dk = d * k;
  std::vector<double> Zs(static_cast<std::size_t>((L + 1) * dk));
  std::copy(ZL.data(), ZL.data() + dk, Zs.begin() + L * dk);
  Matrix R, Zn, Zl(d, k);
  for (long l = L - 1; l >= 0; --l) {
    Zl = Eigen::Map<const Matrix>(Zs.data() + (l + 1) * dk, d, k);
    c.apply_transpose(l, Zl, W);
    qr_push(W, Zn, R);
    std::copy(Zn.data(), Zn.data() + dk, Zs.begin() + l * dk);
  }
  for (long l = 0; l <= L; ++l) {
    const Matrix& U = b.U[static_cast<std::size_t>(l)];
    Zl = Eigen::Map<const Matrix>(Zs.data() + l * dk, d, k);
    if (k == 1) {  // G = z . u, a number: P_+ = u z^T / G
      const double g = Zl.col(0).dot(U.col(0));
      if (std::abs(g) < 1e-13)
        throw NoDichotomyFound(fmt::format("two-sided bundles: V_par and V_perp are not transversal at layer {} (sigma_min(Z^T U) = {:.3g})",
                                            l, std::abs(g)));
      Matrix& P = b.P_plus[static_cast<std::size_t>(l)];
      P.noalias() = U * Zl.transpose();
      P /= g;
      continue;
    }
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
  Matrix B, D;  // a callback cocycle's layer map; P_+(l+1) B(l) - B(l) P_+(l)
  for (long j = 0; j < n; ++j) {
    const Matrix& P = b.P_plus[static_cast<std::size_t>(j)];
    const double nrm = spectral_norm(P);
    g.p_plus_norm(j) = nrm;
    // ||P|| = 1/sin(theta_min) for an oblique projector other than 0 and I.
    g.angle(j) = (b.k == 0 || b.k == d) ? M_PI / 2 : std::asin(std::min(1.0, 1.0 / nrm));
    const long l = b.first + j;
    if (j + 1 < n && l < c.length()) {
      if (!c.has_matrices()) B = c.matrix(l);
      const Matrix& Bl = c.has_matrices() ? c.matrices()[static_cast<std::size_t>(l)] : B;
      D.noalias() = b.P_plus[static_cast<std::size_t>(j + 1)] * Bl;
      D.noalias() -= Bl * P;
      g.invariance(j) = spectral_norm(D);
    }
  }
  return g;
}

namespace {
// The projectors' pushes in the bundles' own coordinates. V(j), an orthonormal basis of V_perp(j),
// is pushed forward and re-projected onto V_perp every layer: P_-(j+1) B(j) V(j) = V(j+1) S(j) (QR);
// U(j), T(j) are the bundles' own: B(j) U(j) = U(j+1) T(j). Then, m = d - k,
//   Phi(l, s) P_-(s) = V(l) S(l-1) ... S(s) [V(s)^T P_-(s)]                     (l >= s),
//   Phi(l, s) P_+(s) = U(l) T(l)^-1 ... T(s-1)^-1 [U(s)^T P_+(s)]                (l <= s),
// and with V, U orthonormal and the LQ factors V(s)^T P_-(s) = Lm(s) Q, U(s)^T P_+(s) = Lp(s) Q',
//   ||Phi(l, s) P_-(s)|| = ||S(l-1) ... S(s) Lm(s)||,  ||Phi(l, s) P_+(s)|| = ||T(l)^-1 ... T(s-1)^-1 Lp(s)||:
// a push costs an m x m (k x k) product and norm a layer instead of d x d ones (about (d / m)^3 less,
// and no d x d SVD: a scalar for a 2 x 2 cocycle). The same numbers as pushing the d x d projectors
// with a re-projection every layer, to round-off.
struct Chains {
  long n = 0, m = 0, k = 0, stride = 1;
  std::vector<double> S, Tinv;  // layer j -> j + 1 (j = 0..n-2): m x m and k x k blocks, column-major, one after another
  std::vector<Matrix> Lm, Lp;   // at the starts j = 0, stride, 2 stride, ...: m x m and k x k
  const double* s(long j) const { return S.data() + j * m * m; }
  const double* tinv(long j) const { return Tinv.data() + j * k * k; }
};


// R^T of the thin QR of N^T: a square factor F with F F^T = N N^T (so ||X N|| = ||X F||).
Matrix lq_factor(const Matrix& N) {
  if (N.rows() == 0) return Matrix(0, 0);
  Eigen::HouseholderQR<Matrix> qr(N.transpose());
  return Matrix(qr.matrixQR().topRows(N.rows()).triangularView<Eigen::Upper>()).transpose();
}

Chains make_chains(const Cocycle& c, const Bundles& b, long stride) {
  Chains ch;
  ch.n = static_cast<long>(b.P_plus.size());
  ch.k = b.k;
  ch.m = c.dim() - b.k;
  ch.stride = stride;
  const long n = ch.n, d = c.dim(), m = ch.m, k = ch.k;
  if (n == 0) return ch;
  const std::size_t steps = static_cast<std::size_t>(std::max<long>(n - 1, 0));
  ch.S.resize(steps * static_cast<std::size_t>(m * m));
  ch.Tinv.resize(steps * static_cast<std::size_t>(k * k));
  ch.Lm.resize(static_cast<std::size_t>((n + stride - 1) / stride));
  ch.Lp.resize(ch.Lm.size());
  Matrix V, Y, Vn, Sj;
  if (m > 0) {  // V(0): the first m columns of a column-pivoted QR of P_-(0) (rank m)
    const Matrix Pm0 = Matrix::Identity(d, d) - b.P_plus[0];
    const Eigen::ColPivHouseholderQR<Matrix> qr(Pm0);
    V = qr.householderQ() * Matrix::Identity(d, m);
  }
  for (long j = 0; j < n; ++j) {
    const Matrix& P = b.P_plus[static_cast<std::size_t>(j)];
    if (j % stride == 0) {
      const std::size_t i = static_cast<std::size_t>(j / stride);
      ch.Lm[i] = m > 0 ? lq_factor(V.transpose() - (V.transpose() * P)) : Matrix(0, 0);
      ch.Lp[i] = k > 0 ? lq_factor(b.U[static_cast<std::size_t>(j)].transpose() * P) : Matrix(0, 0);
    }
    if (j + 1 == n) break;
    if (m > 0) {
      c.apply(b.first + j, V, Y);
      Y -= b.P_plus[static_cast<std::size_t>(j + 1)] * Y;  // onto V_perp(j + 1)
      qr_push(Y, Vn, Sj);
      std::copy(Sj.data(), Sj.data() + m * m, ch.S.begin() + j * m * m);
      V.swap(Vn);
    }
    if (k == 1) {
      ch.Tinv[static_cast<std::size_t>(j)] = 1.0 / b.T[static_cast<std::size_t>(j)](0, 0);
    } else if (k > 0) {
      const Matrix Ti = b.T[static_cast<std::size_t>(j)].partialPivLu().inverse();
      std::copy(Ti.data(), Ti.data() + k * k, ch.Tinv.begin() + j * k * k);
    }
  }
  return ch;
}

// ||K||_2 of a small square matrix (|K| for 1 x 1; tokdyn::spectral_norm's closed form for 2 x 2).
double chain_norm(const Matrix& K) { return K.size() == 1 ? std::abs(K(0, 0)) : spectral_norm(K); }

// One push through a chain: K <- M K per layer. `step_norm` gives ||K|| (the sums of green_norm, where
// underflow is harmless); `step` its log without underflow: K is rescaled whenever its norm leaves
// [2^-500, 2^500], its scale kept in `log_scale` (the envelope's logs at long lags).
struct ScaledPush {
  Matrix K, tmp;
  double log_scale = 0;
  void start(const Matrix& F) { K = F; log_scale = 0; }
  // K <- M K (M square, column-major at `M`).
  void multiply(const double* M) {
    if (K.size() == 1) {
      K(0, 0) *= M[0];
    } else {
      tmp.noalias() = Eigen::Map<const Matrix>(M, K.rows(), K.rows()) * K;
      K.swap(tmp);
    }
  }
  double step_norm(const double* M) {
    multiply(M);
    return chain_norm(K);
  }
  // returns log ||K|| (-inf for 0), K rescaled as needed.
  double step(const double* M) {
    multiply(M);
    return log_norm();
  }
  double log_norm() {
    const double v = chain_norm(K);
    if (!(v > 0)) return -std::numeric_limits<double>::infinity();
    if (v > 0x1p500 || v < 0x1p-500) {
      K /= v;
      log_scale += std::log(v);
      return log_scale;
    }
    return log_scale + std::log(v);
  }
};
}  // namespace

GrowthEnvelope growth_envelope(const Cocycle& c, const Bundles& b, long stride, double r_minus_min, double r_plus_max) {
  if (stride < 1) throw std::invalid_argument("growth_envelope: stride must be >= 1");
  if (!(r_minus_min >= 0) || !(r_plus_max > 0)) throw std::invalid_argument("growth_envelope: expected r_minus_min >= 0 and r_plus_max > 0");
  const long n = static_cast<long>(b.P_plus.size());
  if (static_cast<long>(b.T.size()) < n - 1) throw std::invalid_argument("growth_envelope: bundles without the restricted maps T(l)");
  // A push from one start stops once its norm, weighted as the constants weigh it at the extreme
  // rate asked for (g / r_minus_min^j forward, g r_plus_max^j backward), has fallen below
  // kNegligible of the largest weighted value it reached (after kMinLags layers at least). Under a
  // dichotomy whose rates lie beyond those extremes the weighted norm only decays from there, so the
  // rest changes no constant C(r) for r_minus >= r_minus_min (r_plus <= r_plus_max) above round-off,
  // and a push costs about its decay length, not L. Rates 0 / inf: no truncation (every lag).
  constexpr double kNegligible = 1e-18;
  constexpr long kMinLags = 8;
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  const double log_neg = std::log(kNegligible);
  const bool cut_minus = r_minus_min > 0, cut_plus = std::isfinite(r_plus_max);
  const double wm = cut_minus ? -std::log(r_minus_min) : 0.0, wp = cut_plus ? std::log(r_plus_max) : 0.0;
  const Chains ch = make_chains(c, b, stride);
  const long starts = static_cast<long>(ch.Lm.size());
  GrowthEnvelope g;
  g.log_minus = Eigen::VectorXd::Constant(n, kNone);
  g.log_plus = Eigen::VectorXd::Constant(n, kNone);
  // The pushes use the chains alone (not the cocycle): starts run in parallel, each thread keeps its
  // own envelope (in logs: exact far below the smallest double) and they are merged by max: the same
  // bits at any thread count.
#pragma omp parallel if (starts > 1)
  {
    Eigen::VectorXd lm = Eigen::VectorXd::Constant(n, kNone), lp = Eigen::VectorXd::Constant(n, kNone);
    ScaledPush X;
#pragma omp for schedule(dynamic, 1)
    for (long si = 0; si < starts; ++si) {
      const long s = si * stride;
      if (ch.m > 0) {  // forward on V_perp (P_- = 0 when m = 0: g_minus stays 0)
        X.start(ch.Lm[static_cast<std::size_t>(si)]);
        double v = X.log_norm();
        lm(0) = std::max(lm(0), v);
        double peak = v;
        for (long j = s; j + 1 < n; ++j) {
          v = X.step(ch.s(j));
          const long lag = j + 1 - s;
          lm(lag) = std::max(lm(lag), v);
          if (!cut_minus) continue;
          const double w = v + static_cast<double>(lag) * wm;
          peak = std::max(peak, w);
          if (lag >= kMinLags && !(w > peak + log_neg)) break;
        }
      }
      if (ch.k > 0) {  // backward on V_par
        X.start(ch.Lp[static_cast<std::size_t>(si)]);
        double v = X.log_norm();
        lp(0) = std::max(lp(0), v);
        double peak = v;
        for (long j = s - 1; j >= 0; --j) {
          v = X.step(ch.tinv(j));
          const long lag = s - j;
          lp(lag) = std::max(lp(lag), v);
          if (!cut_plus) continue;
          const double w = v + static_cast<double>(lag) * wp;
          peak = std::max(peak, w);
          if (lag >= kMinLags && !(w > peak + log_neg)) break;
        }
      }
    }
#pragma omp critical(tokdyn_growth_envelope)
    {
      g.log_minus = g.log_minus.cwiseMax(lm);
      g.log_plus = g.log_plus.cwiseMax(lp);
    }
  }
  // std::exp: Eigen's vectorised exp does not give 0 for -inf.
  g.g_minus = g.log_minus.unaryExpr([](double v) { return std::exp(v); });
  g.g_plus = g.log_plus.unaryExpr([](double v) { return std::exp(v); });
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
  const long n = static_cast<long>(b.P_plus.size());
  if (static_cast<long>(b.T.size()) < n - 1) throw std::invalid_argument("green_norm: bundles without the restricted maps T(l)");
  if (n == 0) return 0.0;
  // A push ends once its norm is below 1e-18 of the largest it reached (after 8 layers at least):
  // under the dichotomy it only decays from there, and the terms left out add at most L * 1e-18 of a
  // row's sum. A window without decay is pushed to its end (the O(L^2) pushes of the definition);
  // with it the cost is about L times the decay length, each push an m x m or k x k product (Chains).
  constexpr double kNegligible = 1e-18;
  constexpr long kMinLags = 8;
  const Chains ch = make_chains(c, b, 1);
  // row(l) = sum_s ||G(l, s+1)||, summed per block of starts (a fixed partition: the same bits at any
  // thread count), then over the blocks in order.
  const long blocks = std::min<long>(8, n), per = (n + blocks - 1) / blocks;
  std::vector<Eigen::VectorXd> rows(static_cast<std::size_t>(blocks), Eigen::VectorXd::Zero(n));
#pragma omp parallel for schedule(dynamic, 1) if (n > 64)
  for (long bi = 0; bi < blocks; ++bi) {
    Eigen::VectorXd& row = rows[static_cast<std::size_t>(bi)];
    ScaledPush X;  // plain norms: step_norm, no rescaling
    for (long sig = std::max(1L, bi * per); sig < std::min(n, (bi + 1) * per); ++sig) {  // sig = s + 1 (h on the n-1 steps)
      if (ch.m > 0) {
        X.start(ch.Lm[static_cast<std::size_t>(sig)]);
        double v = chain_norm(X.K), peak = v;
        row(sig) += v;
        for (long j = sig; j + 1 < n; ++j) {
          v = X.step_norm(ch.s(j));
          row(j + 1) += v;
          peak = std::max(peak, v);
          if (j + 1 - sig >= kMinLags && !(v > kNegligible * peak)) break;
        }
      }
      if (ch.k == 0) continue;
      X.start(ch.Lp[static_cast<std::size_t>(sig)]);
      double peak = 0;
      for (long j = sig - 1; j >= 0; --j) {
        const double v = X.step_norm(ch.tinv(j));
        row(j) += v;
        peak = std::max(peak, v);
        if (sig - j > kMinLags && !(v > kNegligible * peak)) break;
      }
    }
  }
  Eigen::VectorXd row = Eigen::VectorXd::Zero(n);
  for (const Eigen::VectorXd& r : rows) row += r;
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
