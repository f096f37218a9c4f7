#include "tokdyn/analysis/ssm_trajectory.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "tokdyn/analysis/ssm_bounds.hpp"
#include "ssm_internal.hpp"

namespace tokdyn {

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
