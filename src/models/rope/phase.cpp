#include "tokdyn/models/rope/phase.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokdyn/core/error.hpp"

namespace tokdyn::rope {

void PhaseParams::validate(int n, const std::string& what) const {
  if (n < 2) throw std::invalid_argument(what + ": expected at least 2 tokens, got " + std::to_string(n));
  if (!std::isfinite(beta) || beta < 0.0)
    throw std::invalid_argument(what + ": beta must be finite and >= 0, got " + std::to_string(beta));
  if (!std::isfinite(omega)) throw std::invalid_argument(what + ": omega must be finite");
  if (!positions.empty()) {
    if (positions.size() != static_cast<std::size_t>(n))
      throw std::invalid_argument(what + ": expected " + std::to_string(n) + " positions (or none), got " +
                       std::to_string(positions.size()));
    for (std::size_t i = 0; i < positions.size(); ++i)
      if (!std::isfinite(positions[i])) throw std::invalid_argument(what + ": position " + std::to_string(i) + " is not finite");
  }
}

namespace {

int checked_size(const PhaseParams& p, const Vec& theta, const char* what) {
  const int n = static_cast<int>(theta.size());
  p.validate(n, what);
  return n;
}

/// Max-subtracted weight exp(beta (cos d - 1)) = exp(-2 beta sin^2(d/2)).
inline double weight(double beta, double d) {
  const double s = std::sin(0.5 * d);
  return std::exp(-2.0 * beta * s * s);
}

}  // namespace

void phase_attention(const PhaseParams& p, const Vec& theta, Mat& A) {
  const int n = checked_size(p, theta, "phase_attention");
  A.resize(n, n);
  for (int i = 0; i < n; ++i) {
    const double pi_ = p.position(i);
    double Z = 0.0;
    for (int j = 0; j < n; ++j) {
      const double w = (j == i) ? 1.0 : weight(p.beta, theta[i] - theta[j] + p.omega * (pi_ - p.position(j)));
      A(i, j) = w;
      Z += w;
    }
    A.row(i) /= Z;
  }
}

void phase_velocity(const PhaseParams& p, const Vec& theta, Vec& dtheta) {
  const int n = checked_size(p, theta, "phase_velocity");
  dtheta.resize(n);
  // One sine and cosine per token instead of three transcendentals per pair: with u_i = e^{i theta_i}
  // and v_i = e^{i (theta_i + omega p_i)}, sin(theta_j - theta_i) = Im(u_j conj u_i) and the
  // weight's cos(theta_i - theta_j + omega (p_i - p_j)) = Re(v_i conj v_j); the weight
  // exp(beta (cos - 1)) is symmetric in (i, j) and the sine antisymmetric, so each pair is visited
  // once (an exp per pair). Near a tie cos - 1 has an absolute error of a few ulp, the weight's
  // relative error beta times that: the velocity is exact to the same order as the direct form.
  thread_local std::vector<double> buf;
  buf.resize(6 * static_cast<std::size_t>(n));
  double* uc = buf.data();
  double* us = uc + n;
  double* vc = us + n;
  double* vs = vc + n;
  double* Z = vs + n;
  double* num = Z + n;
  for (int i = 0; i < n; ++i) {
    uc[i] = std::cos(theta[i]);
    us[i] = std::sin(theta[i]);
    const double a = theta[i] + p.omega * p.position(i);
    vc[i] = std::cos(a);
    vs[i] = std::sin(a);
    Z[i] = 1.0;  // the diagonal: weight 1, sine 0
    num[i] = 0.0;
  }
  const double beta = p.beta;
  for (int i = 0; i < n; ++i) {
    double Zi = 0.0, ni = 0.0;
    for (int j = i + 1; j < n; ++j) {
      const double w = std::exp(beta * ((vc[i] * vc[j] + vs[i] * vs[j]) - 1.0));
      const double sn = us[j] * uc[i] - uc[j] * us[i];  // sin(theta_j - theta_i)
      Zi += w;
      ni += w * sn;
      Z[j] += w;
      num[j] -= w * sn;
    }
    Z[i] += Zi;
    num[i] += ni;
  }
  for (int i = 0; i < n; ++i) dtheta[i] = num[i] / Z[i];
}

void phase_velocity_cartesian(const PhaseParams& p, const Vec& theta, Vec& dtheta) {
  const int n = checked_size(p, theta, "phase_velocity_cartesian");
  Mat X(n, 2), Y(n, 2);
  for (int i = 0; i < n; ++i) {
    X(i, 0) = std::cos(theta[i]);
    X(i, 1) = std::sin(theta[i]);
    // R_p x: rotation by omega p in the plane.
    const double a = p.omega * p.position(i), c = std::cos(a), s = std::sin(a);
    Y(i, 0) = c * X(i, 0) - s * X(i, 1);
    Y(i, 1) = s * X(i, 0) + c * X(i, 1);
  }
  dtheta.resize(n);
  for (int i = 0; i < n; ++i) {
    double Z = 0.0, f0 = 0.0, f1 = 0.0;
    const double smax = Y.row(i).squaredNorm();  // s_ii (= 1 up to rounding) is the row maximum
    for (int j = 0; j < n; ++j) {
      const double s = Y.row(i).dot(Y.row(j));
      const double w = std::exp(p.beta * (s - smax));
      const double g = X.row(i).dot(X.row(j));
      Z += w;
      f0 += w * (X(j, 0) - g * X(i, 0));
      f1 += w * (X(j, 1) - g * X(i, 1));
    }
    dtheta[i] = (-X(i, 1) * f0 + X(i, 0) * f1) / Z;
  }
}

void phase_jacobian(const PhaseParams& p, const Vec& theta, Mat& J) {
  const int n = checked_size(p, theta, "phase_jacobian");
  J.setZero(n, n);
  Vec w(n), sg(n), sn(n), cs(n);
  for (int i = 0; i < n; ++i) {
    const double pi_ = p.position(i);
    double Z = 0.0;
    for (int j = 0; j < n; ++j) {
      const double d = theta[i] - theta[j] + p.omega * (pi_ - p.position(j));
      w[j] = (j == i) ? 1.0 : weight(p.beta, d);
      sg[j] = (j == i) ? 0.0 : std::sin(d);
      sn[j] = (j == i) ? 0.0 : std::sin(theta[j] - theta[i]);
      cs[j] = (j == i) ? 1.0 : std::cos(theta[j] - theta[i]);
      Z += w[j];
    }
    double F = 0.0, mu = 0.0, sum_c = 0.0, sum_ss = 0.0;
    for (int j = 0; j < n; ++j) {
      const double a = w[j] / Z;
      F += a * sn[j];
      mu += a * sg[j];
      sum_c += a * cs[j];
      sum_ss += a * sn[j] * sg[j];
    }
    for (int k = 0; k < n; ++k) {
      if (k == i) continue;
      const double a = w[k] / Z;
      J(i, k) = a * cs[k] + p.beta * a * sg[k] * (sn[k] - F);
    }
    J(i, i) = w[i] / Z - sum_c - p.beta * sum_ss + p.beta * mu * F;
  }
}

Batch phase_batch(const Vec& theta) {
  Batch B;
  B.Z = theta;
  B.runs = 1;
  B.len = static_cast<int>(theta.size());
  return B;
}

Vec batch_phases(const Batch& Z, int run) {
  // Batches and run indices are built by tokdyn: a mismatch is a bug (std::logic_error, error.hpp).
  if (Z.Z.cols() != 1)
    throw std::logic_error("batch_phases: expected a one-column phase batch, got " + std::to_string(Z.Z.cols()) + " columns");
  if (run < 0 || run >= Z.runs)
    throw std::logic_error("batch_phases: expected a run index in [0, " + std::to_string(Z.runs) + "), got " +
                           std::to_string(run));
  return Z.run(run).col(0);
}

PhaseField::PhaseField(PhaseParams p, int n) : p_(std::move(p)), n_(n) { p_.validate(n, "PhaseField"); }

void PhaseField::check(const Batch& Z) const {
  if (Z.Z.cols() != 1)
    throw std::logic_error("PhaseField: expected a batch with one column (the phase), got " + std::to_string(Z.Z.cols()));
  if (Z.len != n_ || Z.Z.rows() != static_cast<Eigen::Index>(Z.runs) * Z.len)
    throw std::logic_error("PhaseField: expected runs of " + std::to_string(n_) + " tokens, got len " + std::to_string(Z.len));
}

void PhaseField::eval(double, const Batch& Z, Tokens& dZ) const {
  check(Z);
  dZ.resize(Z.Z.rows(), 1);
  Vec th, d;
  for (int r = 0; r < Z.runs; ++r) {
    th = Z.run(r).col(0);
    phase_velocity(p_, th, d);
    dZ.middleRows(static_cast<Eigen::Index>(r) * n_, n_).col(0) = d;
  }
}

void PhaseField::jvp(double, const Batch& Z, const Tokens& V, Tokens& out) const {
  check(Z);
  if (V.rows() != Z.Z.rows() || V.cols() != 1) throw std::logic_error("PhaseField::jvp: expected a direction with the batch's shape");
  out.resize(Z.Z.rows(), 1);
  Vec th;
  Mat J;
  for (int r = 0; r < Z.runs; ++r) {
    const Eigen::Index o = static_cast<Eigen::Index>(r) * n_;
    th = Z.run(r).col(0);
    phase_jacobian(p_, th, J);
    out.middleRows(o, n_).col(0) = J * V.middleRows(o, n_).col(0);
  }
}

}  // namespace tokdyn::rope
