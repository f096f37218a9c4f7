// The profile risk R*(rho) of the coupling paper's Prop 13 proof (App. C.3) on the block-level HMM:
// its data from exact enumeration (one weighted row per distinct count key), and the fit of the
// convex logistic family, free or with the read-in norm bounded (damped Newton, bisection on the
// ridge multiplier). See block_hmm.hpp.
#include "tokdyn/analysis/block_hmm.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "block_hmm_internal.hpp"

namespace tokdyn::hmm {

using detail::lse;

// ---- Profile risk ---------------------------------------------------------------------------------

ProfileData profile_data_exact(const BlockHmm& m, int K) {
  if (m.e.family() != Family::Categorical) throw std::invalid_argument("profile data: expected a categorical emission");
  if (K < 2) throw std::invalid_argument(fmt::format("profile data: expected K >= 2 blocks (a previous block to summarise), got {}", K));
  const int V = m.e.symbols(), P = m.P;
  const int per_seq = (K - 1) * P;
  // The features are functions of integer counts: one weighted row per distinct (position t, prefix
  // counts, previous block's counts, next symbol), keyed exactly and kept in key order.
  std::map<std::vector<int>, double> rows;
  std::vector<int> key(static_cast<std::size_t>(2 * V + 1));
  enumerate(m, K, [&](const Matrix& x, double p) {
    for (int k = 1; k < K; ++k) {
      std::vector<int> prev(static_cast<std::size_t>(V), 0), cnt(static_cast<std::size_t>(V), 0);
      for (int t = 0; t < P; ++t) ++prev[static_cast<std::size_t>(x((k - 1) * P + t, 0))];
      for (int t = 0; t < P; ++t) {
        const int y = static_cast<int>(x(k * P + t, 0));
        key[0] = t;
        for (int v = 0; v < V; ++v) {
          key[static_cast<std::size_t>(1 + v)] = cnt[static_cast<std::size_t>(v)];
          key[static_cast<std::size_t>(1 + V + v)] = prev[static_cast<std::size_t>(v)];
        }
        key.back() = y;
        rows[key] += p / per_seq;
        ++cnt[static_cast<std::size_t>(y)];
      }
    }
  });
  ProfileData d;
  d.V = V;
  const auto n = static_cast<Eigen::Index>(rows.size());
  d.phi.resize(n, 2 + (V - 1));
  d.psi.resize(n, V - 1);
  d.y.resize(rows.size());
  d.w.resize(n);
  Eigen::Index r = 0;
  for (const auto& [k, w] : rows) {
    const int t = k[0];
    d.phi(r, 0) = 1.0;
    d.phi(r, 1) = t == 0 ? 1.0 : 0.0;
    for (int v = 0; v < V - 1; ++v) d.phi(r, 2 + v) = t == 0 ? 0.0 : static_cast<double>(k[static_cast<std::size_t>(1 + v)]) / t;
    for (int v = 0; v < V - 1; ++v) d.psi(r, v) = static_cast<double>(k[static_cast<std::size_t>(1 + V + v)]) / P;
    d.y[static_cast<std::size_t>(r)] = k.back();
    d.w(r) = w;
    ++r;
  }
  return d;
}

namespace {

/// Weighted multinomial log-loss of logits (beta * g), last class pinned at 0, plus (lambda/2)|W|^2
/// on the psi block; its gradient and Hessian. beta is (V-1) x G flattened row-major.
struct Objective {
  const ProfileData& d;
  double rho;
  double lambda;
  int V, F, Gp, G;
  Objective(const ProfileData& dd, double r, double l)
      : d(dd), rho(r), lambda(l), V(dd.V), F(static_cast<int>(dd.phi.cols())), Gp(r == 0.0 ? 0 : static_cast<int>(dd.psi.cols())), G(F + Gp) {}
  int n() const { return (V - 1) * G; }
  double eval(const Vector& beta, Vector* grad, Matrix* hess) const {
    const int C = V - 1, N = n();
    if (grad) grad->setZero(N);
    if (hess) hess->setZero(N, N);
    double f = 0.0;
    Vector g(G), eta(V), p(V);
    for (Eigen::Index i = 0; i < d.phi.rows(); ++i) {
      const double w = d.w(i);
      if (w == 0.0) continue;
      g.head(F) = d.phi.row(i).transpose();
      if (Gp) g.tail(Gp) = rho * d.psi.row(i).transpose();
      for (int c = 0; c < C; ++c) eta(c) = beta.segment(c * G, G).dot(g);
      eta(C) = 0.0;
      const double z = lse(eta);
      const int y = d.y[static_cast<std::size_t>(i)];
      f += w * (z - eta(y));
      p = (eta.array() - z).exp().matrix();
      if (grad)
        for (int c = 0; c < C; ++c) grad->segment(c * G, G) += w * (p(c) - (c == y ? 1.0 : 0.0)) * g;
      if (hess) {
        for (int a = 0; a < C; ++a)
          for (int b = 0; b < C; ++b)
            hess->block(a * G, b * G, G, G).noalias() += (w * ((a == b ? p(a) : 0.0) - p(a) * p(b))) * (g * g.transpose());
      }
    }
    if (Gp && lambda > 0.0) {
      for (int c = 0; c < C; ++c) {
        const auto Wc = beta.segment(c * G + F, Gp);
        f += 0.5 * lambda * Wc.squaredNorm();
        if (grad) grad->segment(c * G + F, Gp) += lambda * Wc;
        if (hess) hess->block(c * G + F, c * G + F, Gp, Gp) += lambda * Matrix::Identity(Gp, Gp);
      }
    }
    return f;
  }
  double w_norm(const Vector& beta) const {
    double s = 0.0;
    for (int c = 0; c < V - 1; ++c) s += beta.segment(c * G + F, Gp).squaredNorm();
    return std::sqrt(s);
  }
  double risk(const Vector& beta) const { return Objective(d, rho, 0.0).eval(beta, nullptr, nullptr); }
};

/// Damped Newton with backtracking on a convex objective, then full steps once the Newton decrement
/// g' H^-1 g is below the round-off of the objective (quadratic convergence).
Vector newton(const Objective& obj, Vector beta, int* steps) {
  Vector g, step;
  Matrix H;
  double f = obj.eval(beta, &g, &H);
  int quadratic = 0;
  for (int it = 0; it < 100; ++it) {
    // A tiny Levenberg shift keeps the solve defined where the Hessian is singular (collinear
    // features); it only changes the path, not the minimiser.
    const double shift = 1e-12 * std::max(1.0, H.diagonal().maxCoeff());
    step = (H + shift * Matrix::Identity(H.rows(), H.cols())).ldlt().solve(-g);
    const double dec = -g.dot(step);
    if (!(dec > 0.0)) break;
    if (dec < 1e-12 * std::max(1.0, std::abs(f))) {
      // Quadratic regime: the decrease (dec/2) is below the round-off of f, so a line search cannot
      // see it; full Newton steps square the decrement, two more reach the minimiser's round-off.
      beta += step;
      f = obj.eval(beta, &g, &H);
      if (steps) ++*steps;
      if (++quadratic >= 3) break;
      continue;
    }
    double t = 1.0, fn = f;
    Vector trial;
    for (int ls = 0; ls < 40; ++ls) {
      trial = beta + t * step;
      fn = obj.eval(trial, nullptr, nullptr);
      if (fn <= f - 1e-4 * t * dec) break;
      t *= 0.5;
    }
    if (!(fn < f)) break;  // no decrease possible at round-off level: converged
    beta = trial;
    f = obj.eval(beta, &g, &H);
    if (steps) ++*steps;
  }
  return beta;
}

}  // namespace

ProfileFit fit_profile(const ProfileData& d, double rho, double norm_bound) {
  if (!std::isfinite(rho)) throw std::invalid_argument(fmt::format("profile risk: expected a finite rho, got {}", rho));
  if (!(norm_bound > 0.0)) throw std::invalid_argument(fmt::format("profile risk: expected a positive read-in norm bound, got {}", norm_bound));
  ProfileFit fit;
  const Objective free_obj(d, rho, 0.0);
  Vector beta = newton(free_obj, Vector::Zero(free_obj.n()), &fit.newton_steps);
  fit.w_norm = free_obj.Gp ? free_obj.w_norm(beta) : 0.0;
  if (free_obj.Gp && fit.w_norm > norm_bound) {
    // KKT: the minimiser on the ball |W_r| <= c minimises the ridge objective with the multiplier
    // lambda > 0 at which |W_r(lambda)| = c; |W_r(lambda)| decreases in lambda: bisect log lambda.
    double lo = -20.0, hi = 20.0;
    Vector best = beta;
    for (int it = 0; it < 80; ++it) {
      const double mid = 0.5 * (lo + hi);
      const Objective o(d, rho, std::pow(10.0, mid));
      const Vector b = newton(o, best, &fit.newton_steps);
      const double nrm = o.w_norm(b);
      if (nrm > norm_bound) lo = mid;
      else {
        hi = mid;
        best = b;
      }
      if (hi - lo < 1e-13) break;
    }
    fit.lambda = std::pow(10.0, hi);
    beta = best;
    fit.w_norm = free_obj.w_norm(beta);
  }
  fit.risk = free_obj.risk(beta);
  return fit;
}

}  // namespace tokdyn::hmm
