#include "tokdyn/analysis/rope_sphere.hpp"

#include <stdexcept>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tokdyn/analysis/dini.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/engine/observers.hpp"
#include "tokdyn/core/sphere.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/core/symmetric_eigen.hpp"

namespace tokdyn::rope {

namespace {

using tokdyn::kNaN;
void require_paper_model(const AttentionParams& P, const char* what) {
  if (!P.is_paper_model())
    throw std::invalid_argument(fmt::format("{}: the bound is proved for the paper's model; expected heads = 1, causal = false "
                                 "and Q = K = V = identity (empty)",
                                 what));
}

void require_dim(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, const char* what) {
  if (X.cols() != P.d)
    throw std::invalid_argument(fmt::format("{}: tokens have {} coordinates; expected d = {}", what, X.cols(), P.d));
  P.validate(static_cast<int>(X.rows()), what);
}

/// F = the vector field (5) at X (one run).
Tokens field_at(const AttentionParams& P, const Eigen::Ref<const Tokens>& X) {
  const int n = static_cast<int>(X.rows());
  AttentionField F(P, n);
  Batch B{Tokens(X), 1, n};
  Tokens dZ;
  F.eval(0.0, B, dZ);
  return dZ;
}

/// <a, b> summed in index order (plain loop).
double dot_rows(const Eigen::Ref<const RowVec>& a, const Eigen::Ref<const RowVec>& b) {
  double s = 0.0;
  for (Eigen::Index k = 0; k < a.size(); ++k) s += a[k] * b[k];
  return s;
}

Mat gram(const Eigen::Ref<const Tokens>& X) {
  const Eigen::Index n = X.rows();
  Mat G(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = i; j < n; ++j) G(i, j) = G(j, i) = dot_rows(X.row(i), X.row(j));
  return G;
}

RowVec unit_normal(Rng& rng, int d) {
  RowVec g(d);
  for (;;) {
    for (int k = 0; k < d; ++k) g[k] = rng.normal();
    const double nr = g.norm();
    if (nr > 1e-8) return g / nr;
  }
}

/// A unit vector tangent at the unit vector u (d >= 2).
RowVec unit_tangent(Rng& rng, const RowVec& u) {
  const int d = static_cast<int>(u.size());
  RowVec g(d);
  for (;;) {
    for (int k = 0; k < d; ++k) g[k] = rng.normal();
    g -= g.dot(u) * u;
    const double nr = g.norm();
    if (nr > 1e-8) return g / nr;
  }
}

double pairwise_bound(double a, double c, double tol) { return c >= -tol ? 2.0 * a * (1.0 - c * c) : 4.0 * c; }

DiniValue nonobtuse_from_rates(const Mat& G, const Mat& dG, double a, double tol) {
  const Eigen::Index n = G.rows();
  std::vector<double> f, df;
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = i + 1; j < n; ++j) {
      f.push_back(G(i, j));
      df.push_back(dG(i, j));
    }
  DiniValue v;
  v.value = *std::min_element(f.begin(), f.end());
  v.dini = dini_min(f, df, tol);
  v.bound = pairwise_bound(a, v.value, tol);
  v.residual = v.dini - v.bound;
  v.active = static_cast<int>(std::count_if(f.begin(), f.end(), [&](double x) { return x <= v.value + tol; }));
  return v;
}

DiniValue hemisphere_from_rates(const std::vector<double>& h, const std::vector<double>& dh, double tol) {
  DiniValue v;
  v.value = *std::min_element(h.begin(), h.end());
  v.dini = dini_min(h, dh, tol);
  v.bound = 2.0 * std::min(v.value, 0.0);
  v.residual = v.dini - v.bound;
  v.active = static_cast<int>(std::count_if(h.begin(), h.end(), [&](double x) { return x <= v.value + tol; }));
  return v;
}

std::vector<double> heights(const Eigen::Ref<const Tokens>& X, const RowVec& w) {
  std::vector<double> h(static_cast<std::size_t>(X.rows()));
  for (Eigen::Index i = 0; i < X.rows(); ++i) h[static_cast<std::size_t>(i)] = dot_rows(X.row(i), w);
  return h;
}

void check_pole(const AttentionParams& P, const RowVec& w, const char* what) {
  if (w.size() != P.d) throw std::invalid_argument(fmt::format("{}: pole w has {} entries; expected d = {}", what, w.size(), P.d));
}

}  // namespace

// ---- Observables ----

double hemisphere_min(const Eigen::Ref<const Tokens>& X, const Eigen::Ref<const RowVec>& w) {
  double m = std::numeric_limits<double>::infinity();
  for (Eigen::Index i = 0; i < X.rows(); ++i) m = std::min(m, dot_rows(X.row(i), w));
  return m;
}

double min_pairwise_inner(const Eigen::Ref<const Tokens>& X) {
  double c = std::numeric_limits<double>::infinity();
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    for (Eigen::Index j = i + 1; j < X.rows(); ++j) c = std::min(c, dot_rows(X.row(i), X.row(j)));
  return c;
}

void GeometryObserver::observe(double t, const Batch& Z) {
  last_min_c_ = std::numeric_limits<double>::infinity();
  for (int r = 0; r < Z.runs; ++r) {
    const double c = min_pairwise_inner(Z.run(r));
    last_min_c_ = std::min(last_min_c_, c);
    rows_.push_back({t, r, c, hemisphere_min(Z.run(r), w_)});
  }
}

double rho_of(double c) { return c <= -1.0 ? std::numeric_limits<double>::infinity() : (1.0 - c) / (1.0 + c); }

double sphere_diameter_of(double c) { return std::acos(std::clamp(c, -1.0, 1.0)); }

double chordal_diameter(const Eigen::Ref<const Tokens>& X) {
  double L = 0.0;
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    for (Eigen::Index j = i + 1; j < X.rows(); ++j) L = std::max(L, (X.row(i) - X.row(j)).norm());
  return L;
}

double floor_time(double beta, int n, double t) { return 2.0 * softmax_floor(beta, n) * t; }

SphereObservables observe(const Eigen::Ref<const Tokens>& X, const RowVec& w) {
  SphereObservables o;
  o.m_w = w.size() == X.cols() ? hemisphere_min(X, w) : kNaN;
  o.c = min_pairwise_inner(X);
  o.rho = rho_of(o.c);
  o.D_S = sphere_diameter_of(o.c);
  o.L_ch = chordal_diameter(X);
  o.Y = deficit_of(o.c);
  return o;
}

// ---- Dini residuals ----

DiniValue hemisphere_dini_c3(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, const RowVec& w, double tol) {
  require_paper_model(P, "hemisphere_dini_c3");
  require_dim(P, X, "hemisphere_dini_c3");
  check_pole(P, w, "hemisphere_dini_c3");
  Mat A;
  attention(P, X, A);
  const Mat G = gram(X);
  const std::vector<double> h = heights(X, w);
  const Eigen::Index n = X.rows();
  std::vector<double> dh(static_cast<std::size_t>(n));
  for (Eigen::Index i = 0; i < n; ++i) {
    // (C-3) with h_i in place of m: the exact rate of every h_i (equal to (C-3) on the active set).
    double s = 0.0;
    for (Eigen::Index j = 0; j < n; ++j) s += A(i, j) * (h[static_cast<std::size_t>(j)] - G(i, j) * h[static_cast<std::size_t>(i)]);
    dh[static_cast<std::size_t>(i)] = s;
  }
  return hemisphere_from_rates(h, dh, tol);
}

DiniValue hemisphere_dini_direct(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, const RowVec& w,
                                 double tol) {
  require_paper_model(P, "hemisphere_dini_direct");
  require_dim(P, X, "hemisphere_dini_direct");
  check_pole(P, w, "hemisphere_dini_direct");
  const Tokens F = field_at(P, X);
  const std::vector<double> h = heights(X, w);
  std::vector<double> dh(h.size());
  for (Eigen::Index i = 0; i < X.rows(); ++i) dh[static_cast<std::size_t>(i)] = F.row(i).dot(w);
  return hemisphere_from_rates(h, dh, tol);
}

DiniValue nonobtuse_dini_c5(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, double tol) {
  require_paper_model(P, "nonobtuse_dini_c5");
  require_dim(P, X, "nonobtuse_dini_c5");
  Mat A;
  attention(P, X, A);
  const Mat G = gram(X);
  const Eigen::Index n = X.rows();
  // (C-5): dg_ij = sum_k A_ik (g_kj - g_ik g_ij) + sum_k A_jk (g_ik - g_jk g_ij)
  //             = (AG)_ij + (AG)_ji - (r_i + r_j) g_ij,  r_i = sum_k A_ik g_ik.
  const Mat AG = A * G;
  const Vec r = A.cwiseProduct(G).rowwise().sum();
  Mat dG = Mat::Zero(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = i + 1; j < n; ++j) dG(i, j) = AG(i, j) + AG(j, i) - (r[i] + r[j]) * G(i, j);
  return nonobtuse_from_rates(G, dG, softmax_floor(P.beta, static_cast<int>(n)), tol);
}

DiniValue nonobtuse_dini_direct(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, double tol) {
  require_paper_model(P, "nonobtuse_dini_direct");
  require_dim(P, X, "nonobtuse_dini_direct");
  const Tokens F = field_at(P, X);
  const Mat G = gram(X);
  const Eigen::Index n = X.rows();
  Mat dG = Mat::Zero(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = i + 1; j < n; ++j) dG(i, j) = F.row(i).dot(X.row(j)) + X.row(i).dot(F.row(j));
  return nonobtuse_from_rates(G, dG, softmax_floor(P.beta, static_cast<int>(n)), tol);
}

// ---- Generators ----

Tokens acute_state(Rng& rng, int n, int d, double tmin, double tmax, int* redraws) {
  if (n < 2 || d < 2) throw std::invalid_argument(fmt::format("acute_state: n = {}, d = {}; expected n >= 2 and d >= 2", n, d));
  if (!(tmin >= 0.0 && tmin <= tmax && tmax < 1.0))
    throw std::invalid_argument(fmt::format("acute_state: magnitudes [{}, {}]; expected 0 <= tmin <= tmax < 1", tmin, tmax));
  if (redraws) *redraws = 0;
  for (int attempt = 0;; ++attempt) {
    const RowVec u = unit_normal(rng, d);
    Tokens X(n, d);
    for (int i = 0; i < n; ++i) {
      const RowVec t = unit_tangent(rng, u) * rng.uniform(tmin, tmax);
      const RowVec x = u + t;
      X.row(i) = x / x.norm();
    }
    if (min_pairwise_inner(X) >= 0.0) return X;
    if (redraws) ++*redraws;  // analytically impossible for tmax < 1; kept as a guard
    if (attempt > 1000) throw std::runtime_error("acute_state: could not draw a non-obtuse state");
  }
}

HemisphereState hemisphere_state(Rng& rng, int n, int d, bool boundary, double mlo, double mhi) {
  if (n < 2 || d < 2) throw std::invalid_argument(fmt::format("hemisphere_state: n = {}, d = {}; expected n >= 2 and d >= 2", n, d));
  if (!(mlo > 0.0 && mlo <= mhi && mhi <= 1.0))
    throw std::invalid_argument(fmt::format("hemisphere_state: margins [{}, {}]; expected 0 < lo <= hi <= 1", mlo, mhi));
  HemisphereState s;
  s.margin = rng.uniform(mlo, mhi);
  // Support of the boundary token: one RoPE plane (d even, d >= 4) or one coordinate (d = 2 or odd).
  std::vector<int> supp;
  if (boundary) {
    if (d % 2 == 0 && d >= 4) {
      const int k = static_cast<int>(rng.below(static_cast<std::uint64_t>(d / 2)));
      supp = {2 * k, 2 * k + 1};
    } else {
      supp = {static_cast<int>(rng.below(static_cast<std::uint64_t>(d)))};
    }
  }
  // Pole w: Gaussian direction with exact zeros on the boundary token's support.
  RowVec w(d);
  for (;;) {
    for (int k = 0; k < d; ++k) w[k] = rng.normal();
    for (int k : supp) w[k] = 0.0;
    const double nr = w.norm();
    if (nr > 1e-8) {
      w /= nr;
      break;
    }
  }
  s.w = w;
  s.X.resize(n, d);
  for (int i = 0; i < n; ++i) {
    const double h = rng.uniform(s.margin, 1.0);
    const RowVec x = h * w + std::sqrt(std::max(0.0, 1.0 - h * h)) * unit_tangent(rng, w);
    s.X.row(i) = x / x.norm();
  }
  if (boundary) {
    s.boundary = static_cast<int>(rng.below(static_cast<std::uint64_t>(n)));
    RowVec xb = RowVec::Zero(d);
    if (supp.size() == 2) {
      const double phi = rng.uniform(0.0, 2.0 * 3.14159265358979323846);
      xb[supp[0]] = std::cos(phi);
      xb[supp[1]] = std::sin(phi);
      xb /= xb.norm();
    } else {
      xb[supp[0]] = rng.uniform() < 0.5 ? -1.0 : 1.0;
    }
    s.X.row(s.boundary) = xb;
  }
  return s;
}

Tokens equiangular_state(int n, double c0) {
  if (n < 2 || !(c0 >= 0.0 && c0 < 1.0))
    throw std::invalid_argument(fmt::format("equiangular_state: n = {}, c0 = {}; expected n >= 2 and 0 <= c0 < 1", n, c0));
  Tokens X = Tokens::Zero(n, n + 1);
  const double a = std::sqrt(1.0 - c0), b = std::sqrt(c0);
  for (int i = 0; i < n; ++i) {
    X(i, i) = a;
    X(i, n) = b;
  }
  return X;
}

Mat seeded_orthogonal(int d, std::uint64_t seed) {
  if (d < 1) throw std::invalid_argument(fmt::format("seeded_orthogonal: d = {}; expected d >= 1", d));
  Rng rng(seed, {0x0a7Full, static_cast<std::uint64_t>(d)});
  Eigen::MatrixXd G(d, d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) G(i, j) = rng.normal();
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(G);
  Eigen::MatrixXd Qm = qr.householderQ();
  const Eigen::MatrixXd& R = qr.matrixQR();
  for (int k = 0; k < d; ++k)
    if (R(k, k) < 0.0) Qm.col(k) *= -1.0;
  return Mat(Qm);
}

Tokens equiangular_rotated(int n, double c0, std::uint64_t seed) {
  const Tokens X = equiangular_state(n, c0);
  const Mat O = seeded_orthogonal(n + 1, seed);
  return X * O.transpose();  // x_i <- O x_i
}

Tokens sharpness_witness(const AttentionParams& P, int n, int j, const RowVec& u) {
  P.validate(n, "sharpness_witness");
  if (P.Q.size() != 0 || P.K.size() != 0)
    throw std::invalid_argument("sharpness_witness: expected Q = K = identity (empty)");
  if (j < 0 || j >= n) throw std::invalid_argument(fmt::format("sharpness_witness: j = {}; expected 0 <= j < n = {}", j, n));
  if (u.size() != P.d) throw std::invalid_argument(fmt::format("sharpness_witness: u has {} entries; expected d = {}", u.size(), P.d));
  AttentionParams Pm = P;
  Pm.positions.resize(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) Pm.positions[static_cast<std::size_t>(k)] = -P.position(k);  // R_{-p} = R_p^T
  Pm.freqs = P.plane_frequencies();
  Tokens U = u.replicate(n, 1), X;
  rotate(Pm, U, X);
  X.row(j) *= -1.0;
  return X;
}

// ---- Trajectories ----

double TrajectoryReport::max_excess() const {
  double m = identity_Y;
  for (const Excess* e : {&rho, &tan_half, &tanh_c, &hemisphere_monotone, &hemisphere_initial, &tail, &r37_D, &r37_Lch, &r37_Y})
    if (!std::isnan(e->abs)) m = std::max(m, e->abs);
  return m;
}

double TrajectoryReport::max_excess_rel() const {
  double m = -std::numeric_limits<double>::infinity();
  for (const Excess* e : {&rho, &tan_half, &tanh_c, &hemisphere_monotone, &hemisphere_initial, &tail, &r37_D, &r37_Lch, &r37_Y})
    if (!std::isnan(e->rel)) m = std::max(m, e->rel);
  return m;
}

namespace {

void bump(Excess& e, double value, double scale) {
  if (std::isnan(e.abs)) e.abs = e.rel = -std::numeric_limits<double>::infinity();
  e.abs = std::max(e.abs, value);
  e.rel = std::max(e.rel, scale > 0.0 ? value / scale : value);
}

}  // namespace

TrajectoryReport sphere_trajectory_bounds(const AttentionParams& P, const Tokens& X0, const TrajectoryOptions& opt) {
  require_paper_model(P, "sphere_trajectory_bounds");
  require_dim(P, X0, "sphere_trajectory_bounds");
  if (!(opt.t_end > 0.0) || !(opt.h > 0.0) || opt.outputs < 1)
    throw std::invalid_argument(fmt::format("sphere_trajectory_bounds: t_end = {}, h = {}, outputs = {}; expected positive values",
                                 opt.t_end, opt.h, opt.outputs));
  const bool hemi = opt.w.size() > 0;
  if (hemi) check_pole(P, opt.w, "sphere_trajectory_bounds");
  const int n = static_cast<int>(X0.rows());
  TrajectoryReport R;
  R.a = softmax_floor(P.beta, n);
  R.c0 = min_pairwise_inner(X0);
  R.rho0 = rho_of(R.c0);
  R.q0 = std::sqrt(R.rho0);  // tan(D_S(0)/2)
  R.m0 = hemi ? hemisphere_min(X0, opt.w) : kNaN;

  std::vector<double> ts;
  std::vector<Tokens> Xs;
  CallbackObserver obs([&](double t, const Batch& Z) {
    ts.push_back(t);
    Xs.push_back(Z.Z);
  });
  AttentionField F(P, n);
  Batch B{X0, 1, n};
  Rk4Options ro;
  ro.h = opt.h;
  ro.retract = true;
  ro.report = &R.steps;  // guarded (refuse): the bounds are only meaningful on a stable run
  integrate_rk4(F, B, 0.0, opt.t_end, ro, {&obs}, opt.t_end / opt.outputs);

  RowVec xinf = B.Z.colwise().sum();
  xinf /= xinf.norm();
  const bool nonobtuse = R.c0 >= 0.0;
  const bool exact_orth = R.c0 == 0.0;
  const bool tail = opt.tail && nonobtuse && R.a > 0.0;
  const double a = R.a, q0 = R.q0;
  double m_prev = R.m0;
  for (std::size_t k = 0; k < ts.size(); ++k) {
    const double t = ts[k];
    const Tokens& X = Xs[k];
    const double c = min_pairwise_inner(X);
    const double e2 = std::exp(-2.0 * a * t), e4 = std::exp(-4.0 * a * t);
    const double Y = deficit_of(c), Lch = chordal_diameter(X);
    R.identity_Y = std::max(R.identity_Y, std::abs(Y - 0.5 * Lch * Lch));
    R.max_norm_deviation = std::max(R.max_norm_deviation, tokdyn::max_norm_deviation(X));
    if (nonobtuse) {
      const double rho = rho_of(c);
      bump(R.rho, rho - R.rho0 * e4, R.rho0);
      bump(R.tan_half, std::sqrt(rho) - q0 * e2, q0);
      const double Ds = sphere_diameter_of(c);
      bump(R.r37_D, Ds - 2.0 * q0 * e2, 2.0 * q0);
      bump(R.r37_Lch, Lch - 2.0 * q0 * e2, 2.0 * q0);
      bump(R.r37_Y, Y - 2.0 * q0 * q0 * e4, 2.0 * q0 * q0);
      R.evaluations += 5;
      if (exact_orth) {
        bump(R.tanh_c, std::tanh(2.0 * a * t) - c, 1.0);
        ++R.evaluations;
      }
    }
    if (tail) {
      const double bound = std::asinh(q0 * e2) / a;
      double dmax = 0.0;
      for (int i = 0; i < n; ++i) dmax = std::max(dmax, geodesic(X.row(i), xinf));
      bump(R.tail, dmax - bound, std::asinh(q0) / a);
      ++R.evaluations;
    }
    if (hemi && R.m0 >= 0.0) {
      const double m = hemisphere_min(X, opt.w);
      bump(R.hemisphere_initial, R.m0 - m, std::max(R.m0, 1e-300));
      if (k > 0) bump(R.hemisphere_monotone, m_prev - m, std::max(R.m0, 1e-300));
      m_prev = m;
      R.evaluations += k > 0 ? 2 : 1;
    }
  }
  R.samples = static_cast<int>(ts.size());
  R.final_diameter = sphere_diameter_of(min_pairwise_inner(B.Z));
  return R;
}

// ---- Consensus and slow modes ----

RowVec consensus_point(const std::vector<double>& energies, const std::vector<double>& angles) {
  if (energies.empty()) throw std::invalid_argument("consensus_point: no plane energies; expected at least one");
  if (!angles.empty() && angles.size() != energies.size())
    throw std::invalid_argument(fmt::format("consensus_point: {} angles; expected {} (one per plane) or none", angles.size(),
                                 energies.size()));
  double sum = 0.0;
  for (double a : energies) {
    if (!(a >= 0.0) || !std::isfinite(a))
      throw std::invalid_argument(fmt::format("consensus_point: plane energy {}; expected finite energies >= 0", a));
    sum += a;
  }
  if (std::abs(sum - 1.0) > 1e-12)
    throw std::invalid_argument(fmt::format("consensus_point: plane energies sum to {}; expected 1", sum));
  const int r = static_cast<int>(energies.size());
  RowVec x(2 * r);
  for (int l = 0; l < r; ++l) {
    const double phi = angles.empty() ? 0.0 : angles[static_cast<std::size_t>(l)];
    const double s = std::sqrt(energies[static_cast<std::size_t>(l)]);
    x[2 * l] = s * std::cos(phi);
    x[2 * l + 1] = s * std::sin(phi);
  }
  return x;
}

ConsensusAttention consensus_attention(const AttentionParams& P, int n, const RowVec& xstar) {
  require_paper_model(P, "consensus_attention");
  P.validate(n, "consensus_attention");
  if (xstar.size() != P.d)
    throw std::invalid_argument(fmt::format("consensus_attention: x* has {} entries; expected d = {}", xstar.size(), P.d));
  const Tokens X = xstar.replicate(n, 1);
  ConsensusAttention K;
  Mat S;
  attention(P, X, K.A, &S);
  // Globally scaled kernel: W_ij = exp(beta (s_ij - 1)) in [e^{-2 beta}, 1] (exactly symmetric: S is).
  K.W = (P.beta * (S.array() - 1.0)).exp().matrix();
  K.Zrow = K.W.rowwise().sum();
  K.pi = K.Zrow / K.Zrow.sum();
  const Vec isd = K.Zrow.cwiseSqrt().cwiseInverse();
  Eigen::MatrixXd Ssym = isd.asDiagonal() * K.W * isd.asDiagonal();
  Ssym = 0.5 * (Ssym + Ssym.transpose()).eval();
  const SymmetricEigen es = lapack_symmetric_eigen(Ssym);
  K.lambda = es.values.reverse();
  const Vec u2 = es.vectors.col(n - 2);
  K.v2 = isd.cwiseProduct(u2);
  Eigen::Index imax = 0;
  K.v2.cwiseAbs().maxCoeff(&imax);
  K.v2 /= K.v2[imax];  // unit max-norm, largest entry +1
  K.gamma = 1.0 - K.lambda[1];
  K.a_consistency = (K.A - K.Zrow.cwiseInverse().asDiagonal() * K.W).cwiseAbs().maxCoeff();
  return K;
}

Mat tangent_basis(const RowVec& x) {
  const int d = static_cast<int>(x.size());
  if (d < 2) throw std::invalid_argument(fmt::format("tangent_basis: d = {}; expected d >= 2", d));
  const double nx = x.norm();
  const double s = x[0] >= 0.0 ? 1.0 : -1.0;
  RowVec v = x;
  v[0] += s * nx;
  // H = I - 2 v v^T / |v|^2 is symmetric orthogonal with H x = -s |x| e_0, so rows 1..d-1 of H
  // are an orthonormal basis of x's orthogonal complement.
  Mat H = Mat::Identity(d, d) - (2.0 / v.squaredNorm()) * (v.transpose() * v);
  return H.bottomRows(d - 1);
}

SlowModeFit slow_mode_fit(const AttentionParams& P, int n, const RowVec& xstar, const SlowModeOptions& opt) {
  if (!(opt.amplitude > 0.0) || !(opt.h > 0.0) || opt.outputs < 3 || !(opt.window_lo < opt.window_hi) ||
      !(opt.t_end_scaled > 0.0))
    throw std::invalid_argument("slow_mode_fit: expected amplitude > 0, h > 0, outputs >= 3, window_lo < window_hi, t_end_scaled > 0");
  const ConsensusAttention K = consensus_attention(P, n, xstar);
  SlowModeFit fit;
  fit.gamma = K.gamma;
  fit.lambda2 = K.lambda[1];
  const RowVec xs = xstar / xstar.norm();
  const Mat E = tangent_basis(xs);
  // Default tangent direction: the last Householder basis vector (see the report in the tests;
  // the direction only changes the O(amplitude) bias of the fit).
  const int which = opt.tangent >= 0 ? opt.tangent : static_cast<int>(E.rows()) - 1;
  if (which >= E.rows())
    throw std::invalid_argument(fmt::format("slow_mode_fit: tangent = {}; expected < d - 1 = {}", which, E.rows()));
  const RowVec e = E.row(which);
  Tokens X0(n, P.d);
  for (int i = 0; i < n; ++i) {
    const RowVec x = xs + opt.amplitude * K.v2[i] * e;
    X0.row(i) = x / x.norm();
  }
  const double T = opt.t_end_scaled / fit.gamma;
  fit.t_end = T;
  std::vector<double> tt, ll;
  CallbackObserver obs([&](double t, const Batch& Z) {
    const double gt = fit.gamma * t;
    if (gt < opt.window_lo - 1e-9 || gt > opt.window_hi + 1e-9) return;
    const RowVec mean = Z.Z.colwise().mean();
    const double N = (Z.Z.rowwise() - mean).norm();
    tt.push_back(t);
    ll.push_back(std::log(N));
  });
  AttentionField F(P, n);
  Batch B{X0, 1, n};
  Rk4Options ro;
  ro.h = opt.h;
  ro.retract = true;
  ro.report = &fit.steps;  // guarded (refuse): the paper's step 1e-2 is kept, never silently unstable
  integrate_rk4(F, B, 0.0, T, ro, {&obs}, T / (opt.outputs - 1));
  fit.samples = static_cast<int>(tt.size());
  if (fit.samples < 2) throw std::runtime_error("slow_mode_fit: fewer than two samples in the fit window");
  double mt = 0.0, ml = 0.0;
  for (std::size_t k = 0; k < tt.size(); ++k) {
    mt += tt[k];
    ml += ll[k];
  }
  mt /= static_cast<double>(tt.size());
  ml /= static_cast<double>(tt.size());
  double sxy = 0.0, sxx = 0.0;
  for (std::size_t k = 0; k < tt.size(); ++k) {
    sxy += (tt[k] - mt) * (ll[k] - ml);
    sxx += (tt[k] - mt) * (tt[k] - mt);
  }
  fit.gamma_fit = -sxy / sxx;
  fit.rel_error = std::abs(fit.gamma_fit - fit.gamma) / fit.gamma;
  return fit;
}

}  // namespace tokdyn::rope
