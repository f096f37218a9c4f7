// The closed loop (15) of the coupling paper: injection family, Picard / Newton for
// u = G[rho psi(u)] (Thm 10, App. C.1), pseudo-arclength continuation in rho and the closed-loop
// diagnostics of Thm 12 / App. C.2. The formulation (boundary rows of the open loop, the closed
// loop's own end equilibria) is explained in closed_loop.hpp.
#include "tokdyn/analysis/closed_loop.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/norms.hpp"

namespace tokdyn::closed_loop {
namespace {


void require_finite(const Matrix& M, const char* what) {
  if (!M.allFinite()) throw std::invalid_argument(fmt::format("closed_loop: {} has non-finite entries", what));
}

class Affine final : public Injection {
 public:
  Affine(Vector c, Matrix B, std::string name) : c_(std::move(c)), B_(std::move(B)), name_(std::move(name)) {
    if (B_.rows() != B_.cols() || B_.rows() != c_.size())
      throw std::invalid_argument(fmt::format("closed_loop: affine psi: B is {} x {}, c has {} entries (expected d x d and d)",
                                              B_.rows(), B_.cols(), c_.size()));
    require_finite(B_, "psi's matrix B");
    require_finite(c_, "psi's offset c");
    lip_ = spectral_norm(B_);
  }
  long dim() const override { return c_.size(); }
  Vector value(long, const Vector& u) const override { return c_ + B_ * u; }
  Matrix jacobian(long, const Vector&) const override { return B_; }
  double lipschitz() const override { return lip_; }
  std::string name() const override { return name_; }
  std::vector<std::pair<std::string, std::vector<Matrix>>> parameters() const override { return {{"c", {c_}}, {"B", {B_}}}; }

 private:
  Vector c_;
  Matrix B_;
  std::string name_;
  double lip_ = 0;
};

class TanhMlp final : public Injection {
 public:
  TanhMlp(Vector c, Matrix W1, Vector b1, Matrix W2) : c_(std::move(c)), W1_(std::move(W1)), b1_(std::move(b1)), W2_(std::move(W2)) {
    const long d = c_.size();
    if (W1_.cols() != d || W1_.rows() != b1_.size() || W2_.rows() != d || W2_.cols() != W1_.rows())
      throw std::invalid_argument(fmt::format(
          "closed_loop: tanh-MLP psi: W1 {} x {}, b1 {}, W2 {} x {}, c {} (expected W1 h x d, b1 h, W2 d x h, c d)", W1_.rows(),
          W1_.cols(), b1_.size(), W2_.rows(), W2_.cols(), d));
    require_finite(W1_, "psi's W1");
    require_finite(W2_, "psi's W2");
    require_finite(b1_, "psi's b1");
    require_finite(c_, "psi's offset c");
    lip_ = spectral_norm(W2_) * spectral_norm(W1_);  // |tanh'| <= 1
  }
  long dim() const override { return c_.size(); }
  Vector value(long, const Vector& u) const override { return c_ + W2_ * (W1_ * u + b1_).array().tanh().matrix(); }
  Matrix jacobian(long, const Vector& u) const override {
    const Eigen::ArrayXd t = (W1_ * u + b1_).array().tanh();
    return W2_ * ((1.0 - t * t).matrix().asDiagonal() * W1_);
  }
  double lipschitz() const override { return lip_; }
  std::string name() const override { return "tanh-mlp"; }
  std::vector<std::pair<std::string, std::vector<Matrix>>> parameters() const override {
    return {{"c", {c_}}, {"W1", {W1_}}, {"b1", {b1_}}, {"W2", {W2_}}};
  }

 private:
  Vector c_;
  Matrix W1_;
  Vector b1_;
  Matrix W2_;
  double lip_ = 0;
};

/// psi_l(u) = c + B(l) u, B(l) clamped to the stored range beyond it (constant extension).
class DepthLinear final : public Injection {
 public:
  DepthLinear(Vector c, std::vector<Matrix> B, std::string name) : c_(std::move(c)), B_(std::move(B)), name_(std::move(name)) {
    for (const Matrix& M : B_) lip_ = std::max(lip_, spectral_norm(M));
  }
  long dim() const override { return c_.size(); }
  Vector value(long l, const Vector& u) const override { return c_ + at(l) * u; }
  Matrix jacobian(long l, const Vector&) const override { return at(l); }
  double lipschitz() const override { return lip_; }
  std::string name() const override { return name_; }
  std::vector<std::pair<std::string, std::vector<Matrix>>> parameters() const override { return {{"c", {c_}}, {"B", B_}}; }

 private:
  const Matrix& at(long l) const {
    const long n = static_cast<long>(B_.size());
    return B_[static_cast<std::size_t>(std::clamp(l, 0L, n - 1))];
  }
  Vector c_;
  std::vector<Matrix> B_;
  std::string name_;
  double lip_ = 0;
};

std::vector<Matrix> aligned_maps(const cocycle::Bundles& b, const Matrix& M, const Vector& c, bool intertwining) {
  if (b.first != 0 || b.P_plus.size() < 2)
    throw std::invalid_argument("closed_loop: aligned psi needs two-sided bundles P_+(l), l = 0..L");
  const long d = b.P_plus[0].rows();
  if (M.rows() != d || M.cols() != d || c.size() != d)
    throw std::invalid_argument(fmt::format("closed_loop: aligned psi: M is {} x {}, c has {} entries, the bundles live in R^{}",
                                            M.rows(), M.cols(), c.size(), d));
  require_finite(M, "aligned psi's M");
  const Matrix I = Matrix::Identity(d, d);
  const long L = static_cast<long>(b.P_plus.size()) - 1;
  std::vector<Matrix> out;
  out.reserve(static_cast<std::size_t>(L));
  for (long l = 0; l < L; ++l) {
    const Matrix& Pl = b.P_plus[static_cast<std::size_t>(l)];
    const Matrix& Pn = intertwining ? b.P_plus[static_cast<std::size_t>(l + 1)] : Pl;
    out.push_back(Pn * M * Pl + (I - Pn) * M * (I - Pl));
  }
  return out;
}

/// The end equilibrium of one side by Newton, or why there is none here (`why`, and
/// `no_convergence` when Newton did not converge rather than meet a singular Jacobian).
std::optional<Vector> solve_end_point(const Matrix& Bend, const Injection& psi, long l, double rho, Vector u, std::string& why,
                                      bool& no_convergence) {
  const long d = Bend.rows();
  const Matrix A = Bend - Matrix::Identity(d, d);
  const double scale = 1.0 + A.norm() + std::abs(rho) * psi.lipschitz();  // Frobenius: a cheap upper bound of |A|_2
  for (int it = 0; it < 100; ++it) {
    const Vector F = A * u + rho * psi.value(l, u);
    const Eigen::PartialPivLU<Matrix> lu(A + rho * psi.jacobian(l, u));
    if (!(lu.rcond() > 1e-14)) {
      why = fmt::format("closed_loop: A + rho Dpsi is singular at the end equilibrium (rho = {})", rho);
      return std::nullopt;
    }
    const Vector du = lu.solve(F);
    u -= du;
    if (!u.allFinite()) break;
    if (du.norm() <= 1e-15 * (1.0 + u.norm())) break;
  }
  const Vector F = A * u + rho * psi.value(l, u);
  if (!u.allFinite() || F.norm() > 1e-11 * scale * (1.0 + u.norm())) {
    why = fmt::format("closed_loop: Newton for the end equilibrium did not converge (rho = {})", rho);
    no_convergence = true;
    return std::nullopt;
  }
  return u;
}

Vector end_derivative(const Matrix& Bend, const Injection& psi, long l, double rho, const Vector& u) {
  const long d = Bend.rows();
  const Matrix J = Bend - Matrix::Identity(d, d) + rho * psi.jacobian(l, u);
  return -J.partialPivLu().solve(psi.value(l, u));
}

/// Moves the end states of w onto the boundary rows' null spaces (min-norm change).
void project_ends(const green::Ends& e, Seq& w) {
  const long L = w.cols() - 1;
  if (e.left_rows.rows() > 0) {
    const Vector r = e.left_rows * w.col(0);
    w.col(0) -= e.left_rows.completeOrthogonalDecomposition().solve(r);
  }
  if (e.right_rows.rows() > 0) {
    const Vector r = e.right_rows * w.col(L);
    w.col(L) -= e.right_rows.completeOrthogonalDecomposition().solve(r);
  }
}

/// L ubar (l) = ubar(l+1) - M(l) ubar(l) for a profile ubar and maps M.
Seq apply_operator(const std::vector<Matrix>& M, const Seq& u) {
  const long L = static_cast<long>(M.size());
  Seq out(u.rows(), L);
  for (long l = 0; l < L; ++l) out.col(l) = u.col(l + 1) - M[static_cast<std::size_t>(l)] * u.col(l);
  return out;
}

/// Picard / block chain: u^{n+1} = ubar + G_0[rho psi(u^n) - L ubar]. With u_star: records the
/// distance to it instead of the step.
Solution fixed_point_iteration(const Problem& p, double rho, const IterOptions& opt, const Seq* u_star, int blocks) {
  const EndPoints e = end_equilibria(p, rho);
  const Seq ub = end_profile(p, e.minus, e.plus);
  const Seq Lub = apply_operator(p.B, ub);
  const green::Bvp open(p.B, p.ends);
  Solution s;
  s.rho = rho;
  s.u = ub;
  const int n = u_star ? blocks : opt.max_iter;
  for (int it = 0; it < n; ++it) {
    Seq h(p.d, p.L);
    for (long l = 0; l < p.L; ++l) h.col(l) = rho * p.psi->value(l, s.u.col(l)) - Lub.col(l);
    Seq next = ub + open.solve(h, green::Tails::Zero);
    const double step = green::sup_norm(next - s.u);
    s.u = std::move(next);
    s.iterations = it + 1;
    if (!s.u.allFinite()) break;
    if (u_star) {
      s.history.push_back(green::sup_norm(s.u - *u_star));
      continue;
    }
    s.history.push_back(step);
    if (step <= opt.tol * (1.0 + green::sup_norm(s.u))) {
      s.converged = true;
      break;
    }
  }
  return s;
}

}  // namespace

// ------------------------------------------------------------------------------------------------

InjectionPtr affine(Vector c, Matrix B) { return std::make_shared<Affine>(std::move(c), std::move(B), "affine"); }
InjectionPtr identity(Vector offset) {
  const long d = offset.size();
  return std::make_shared<Affine>(std::move(offset), Matrix::Identity(d, d), "identity");
}
InjectionPtr linear(Matrix B) {
  const long d = B.rows();
  return std::make_shared<Affine>(Vector::Zero(d), std::move(B), "linear");
}
InjectionPtr tanh_mlp(Vector c, Matrix W1, Vector b1, Matrix W2) {
  return std::make_shared<TanhMlp>(std::move(c), std::move(W1), std::move(b1), std::move(W2));
}
InjectionPtr same_index_aligned(const cocycle::Bundles& b, const Matrix& M, Vector c) {
  auto maps = aligned_maps(b, M, c, false);
  return std::make_shared<DepthLinear>(std::move(c), std::move(maps), "same-index-aligned");
}
InjectionPtr intertwining_aligned(const cocycle::Bundles& b, const Matrix& M, Vector c) {
  auto maps = aligned_maps(b, M, c, true);
  return std::make_shared<DepthLinear>(std::move(c), std::move(maps), "intertwining-aligned");
}

double lipschitz_along(const Injection& psi, const Seq& u) {
  double m = 0.0;
  for (long l = 0; l < u.cols(); ++l) m = std::max(m, spectral_norm(psi.jacobian(l, u.col(l))));
  return m;
}

Problem make_problem(std::vector<Matrix> B, InjectionPtr psi) {
  if (B.empty()) throw std::invalid_argument("closed_loop: the open loop has no layers");
  if (!psi) throw std::invalid_argument("closed_loop: no injection psi");
  const long d = B[0].rows();
  for (const Matrix& M : B) {
    if (M.rows() != d || M.cols() != d) throw std::invalid_argument("closed_loop: layer maps of unequal or non-square shapes");
    require_finite(M, "a layer map");
  }
  if (psi->dim() != d)
    throw std::invalid_argument(fmt::format("closed_loop: psi acts on R^{} but the layer maps on R^{}", psi->dim(), d));
  Problem p;
  p.L = static_cast<long>(B.size());
  p.d = d;
  p.ends = green::make_ends(B.front(), B.back());
  p.B = std::move(B);
  p.psi = std::move(psi);
  return p;
}

EndOutcome find_end_equilibria(const Problem& p, double rho, const EndPoints* guess) {
  if (!std::isfinite(rho)) throw std::invalid_argument("closed_loop: rho is not finite");
  EndOutcome o;
  const Vector z = Vector::Zero(p.d);
  std::optional<Vector> minus = solve_end_point(p.B.front(), *p.psi, 0, rho, guess ? guess->minus : z, o.why_not, o.no_convergence);
  if (!minus) return o;
  std::optional<Vector> plus = solve_end_point(p.B.back(), *p.psi, p.L - 1, rho, guess ? guess->plus : z, o.why_not, o.no_convergence);
  if (!plus) return o;
  EndPoints e;
  e.minus = std::move(*minus);
  e.plus = std::move(*plus);
  e.dminus = end_derivative(p.B.front(), *p.psi, 0, rho, e.minus);
  e.dplus = end_derivative(p.B.back(), *p.psi, p.L - 1, rho, e.plus);
  o.ends = std::move(e);
  return o;
}

EndPoints end_equilibria(const Problem& p, double rho, const EndPoints* guess) {
  EndOutcome o = find_end_equilibria(p, rho, guess);
  if (!o) {
    if (o.no_convergence) throw ConvergenceError(o.why_not);
    throw std::domain_error(o.why_not);
  }
  return std::move(*o.ends);
}

Seq end_profile(const Problem& p, const Vector& minus, const Vector& plus) {
  Seq u(p.d, p.L + 1);
  for (long l = 0; l <= p.L; ++l) u.col(l) = l <= p.L / 2 ? minus : plus;
  return u;
}

// The layers are independent in the residual and in the closed-loop maps: on every core, each
// layer computed whole by one thread (Eigen is single-threaded in tokdyn), so the bits do not
// depend on the thread count. The injections are const and stateless (this file's classes).
Seq residual(const Problem& p, double rho, const Seq& u) {
  Seq R(p.d, p.L);
#pragma omp parallel for schedule(static) if (p.L * p.d * p.d >= 65536)
  for (long l = 0; l < p.L; ++l)
    R.col(l) = u.col(l + 1) - p.B[static_cast<std::size_t>(l)] * u.col(l) - rho * p.psi->value(l, u.col(l));
  return R;
}

std::vector<Matrix> closed_loop_maps(const Problem& p, double rho, const Seq& u) {
  std::vector<Matrix> M(static_cast<std::size_t>(p.L));
#pragma omp parallel for schedule(static) if (p.L * p.d * p.d >= 65536)
  for (long l = 0; l < p.L; ++l)
    M[static_cast<std::size_t>(l)] = p.B[static_cast<std::size_t>(l)] + rho * p.psi->jacobian(l, u.col(l));
  return M;
}

Seq first_order(const Problem& p) {
  Seq h(p.d, p.L);
  const Vector z = Vector::Zero(p.d);
  for (long l = 0; l < p.L; ++l) h.col(l) = p.psi->value(l, z);
  return green::Bvp(p.B, p.ends).solve(h, green::Tails::Constant);
}

Solution picard(const Problem& p, double rho, const IterOptions& opt) {
  return fixed_point_iteration(p, rho, opt, nullptr, 0);
}

std::vector<double> cross_block_chain(const Problem& p, double rho, int blocks, const Seq& u_star) {
  if (blocks < 1) throw std::invalid_argument("closed_loop: the block chain needs at least one block");
  if (u_star.rows() != p.d || u_star.cols() != p.L + 1)
    throw std::invalid_argument("closed_loop: u_star is not d x (L+1)");
  return fixed_point_iteration(p, rho, {}, &u_star, blocks).history;
}

Solution newton(const Problem& p, double rho, const Seq& guess, const IterOptions& opt) {
  Solution s;
  s.rho = rho;
  // Until Newton has an iterate: NaN of the solution's shape, so that a caller which uses u without
  // looking at `converged` computes NaN (an n/a check), never reads out of bounds.
  s.u = Seq::Constant(p.d, p.L + 1, std::numeric_limits<double>::quiet_NaN());
  const EndOutcome eo = find_end_equilibria(p, rho);
  if (!eo) {
    s.why_not = eo.why_not;
    return s;
  }
  const EndPoints& e = *eo.ends;
  const Seq ub = end_profile(p, e.minus, e.plus);
  if (guess.size() == 0) {
    s.u = ub;
  } else {
    if (guess.rows() != p.d || guess.cols() != p.L + 1)
      throw std::invalid_argument(fmt::format("closed_loop: Newton's guess is {} x {}, expected {} x {}", guess.rows(),
                                              guess.cols(), p.d, p.L + 1));
    Seq w = guess - ub;
    project_ends(p.ends, w);
    s.u = ub + w;
  }
  for (int it = 0; it < opt.max_iter; ++it) {
    const Seq R = residual(p, rho, s.u);
    s.history.push_back(green::sup_norm(R));
    const green::BvpOutcome bvp = green::Bvp::factor(closed_loop_maps(p, rho, s.u), p.ends);
    if (!bvp) {
      s.why_not = bvp.why_not;
      return s;
    }
    const Seq delta = bvp.bvp->solve(-R, green::Tails::Zero);
    s.u += delta;
    s.iterations = it + 1;
    if (!s.u.allFinite()) break;
    if (green::sup_norm(delta) <= opt.tol * (1.0 + green::sup_norm(s.u))) {
      s.converged = true;
      s.history.push_back(green::sup_norm(residual(p, rho, s.u)));
      break;
    }
  }
  return s;
}

Diagnostics diagnose_ends(const Problem& p, double rho, const EndPoints& e) {
  Diagnostics g;
  g.end_gap = std::numeric_limits<double>::infinity();
  for (int side = 0; side < 2; ++side) {
    const long l = side == 0 ? 0 : p.L - 1;
    const Matrix M = p.B[static_cast<std::size_t>(l)] + rho * p.psi->jacobian(l, side == 0 ? e.minus : e.plus);
    const Eigen::VectorXd mod = Eigen::EigenSolver<Matrix>(M, false).eigenvalues().cwiseAbs();
    long k = 0;
    for (Eigen::Index i = 0; i < mod.size(); ++i) {
      k += mod(i) > 1.0 ? 1 : 0;
      g.end_gap = std::min(g.end_gap, std::abs(mod(i) - 1.0));
    }
    (side == 0 ? g.k_minus : g.k_plus) = k;
  }
  return g;
}

Diagnostics diagnose(const Problem& p, double rho, const Seq& u, const EndPoints& e, const cocycle::Bundles* open,
                     long exclude, bool with_bundles) {
  Diagnostics g = diagnose_ends(p, rho, e);
  const std::vector<Matrix> maps = closed_loop_maps(p, rho, u);
  // A singular BVP has sigma_min = 0 (the bounded solution is not unique).
  const green::BvpOutcome bvp = green::Bvp::factor(maps, p.ends);
  g.sigma_min = bvp ? bvp.bvp->smallest_singular_value_estimate() : 0.0;
  if (with_bundles) {
    const cocycle::BundlesOutcome found = cocycle::find_two_sided_bundles(cocycle::Cocycle::from_matrices(maps));
    g.bundles_ok = static_cast<bool>(found);
    if (found) {
      const cocycle::Bundles& cb = *found.bundles;
      g.k_bundles = cb.k;
      if (open && open->k == cb.k && open->P_plus.size() == cb.P_plus.size()) {
        double dev = 0.0;
        for (long l = exclude; l <= p.L - exclude; ++l)
          dev = std::max(dev, spectral_norm(cb.P_plus[static_cast<std::size_t>(l)] - open->P_plus[static_cast<std::size_t>(l)]));
        g.projector_deviation = dev;
      }
    }
  }
  return g;
}


// ------------------------------------------------------------------------------------------------

Bounds bounds(double K, double C, double r_minus, double r_plus, double L_psi) {
  if (!(K > 0 && C >= 1.0 - 1e-12 && L_psi > 0 && r_minus < 1.0 && r_plus > 1.0))
    throw std::invalid_argument(fmt::format("closed_loop::bounds: need K > 0, C >= 1, L_psi > 0, r_- < 1 < r_+ (got K = {}, "
                                            "C = {}, L_psi = {}, r_- = {}, r_+ = {})", K, C, L_psi, r_minus, r_plus));
  Bounds b;
  b.K = K;
  b.C = C;
  b.L_psi = L_psi;
  b.m_minus = 1.0 - r_minus;
  b.m_plus = r_plus - 1.0;  // +inf for an all-contracting cocycle (A4°)
  b.mu = std::min(b.m_minus, b.m_plus);
  b.K_bound = C * (1.0 / b.m_minus + 1.0 / b.m_plus);
  b.rho_0 = 1.0 / (2.0 * K * L_psi);
  b.rho_17 = b.mu / (C * C * L_psi);
  b.rho_C2 = b.mu * b.mu / (4.0 * C * (C + b.mu) * L_psi);
  b.rho_C2_sharp = b.mu / (2.0 * K * (C + b.mu) * L_psi);
  return b;
}

double remark5_threshold(double sigma, double c) {
  if (!(sigma > -2.0 && sigma < 0.0) || !(c != 0.0) || !std::isfinite(c))
    throw std::invalid_argument(fmt::format("closed_loop: Remark 5 needs sigma in (-2, 0) and c != 0 (got {}, {})", sigma, c));
  return std::min(std::abs(sigma), 2.0 - std::abs(sigma)) / std::abs(c);
}

}  // namespace tokdyn::closed_loop

namespace tokdyn::closed_loop {

OpenLoop open_loop(const std::vector<Matrix>& B, long H, long stride) {
  const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(B);
  OpenLoop o;
  o.bundles = cocycle::two_sided_bundles(c);
  o.k = o.bundles.k;
  o.K = cocycle::green_norm(c, o.bundles);
  const auto qr = cocycle::qr_iterate(c);
  const long L = static_cast<long>(B.size());
  const auto iv = cocycle::bohl_intervals(qr.log_diag, std::clamp(H, 1L, L));
  o.r_minus = 0.0;
  o.r_plus = std::numeric_limits<double>::infinity();
  for (const auto& i : iv) {
    if (i.upper < 1.0) o.r_minus = std::max(o.r_minus, i.upper);
    else if (i.lower > 1.0) o.r_plus = std::min(o.r_plus, i.lower);
    else
      throw std::domain_error(fmt::format("closed_loop: the open loop is not hyperbolic (a Bohl interval [{}, {}] contains 1)",
                                          i.lower, i.upper));
  }
  const auto env = cocycle::growth_envelope(c, o.bundles, std::max(1L, stride));
  o.C = 1.0;
  if (o.k < B[0].rows()) o.C = std::max(o.C, cocycle::constant_minus(env, o.r_minus));
  if (o.k > 0) o.C = std::max(o.C, cocycle::constant_plus(env, o.r_plus));
  return o;
}

InjectionPtr random_injection(const std::string& kind, long d, double scale, double offset, std::uint64_t seed,
                              const cocycle::Bundles* b) {
  if (d < 1) throw std::invalid_argument("closed_loop: psi needs d >= 1");
  if (!std::isfinite(scale) || !std::isfinite(offset)) throw std::invalid_argument("closed_loop: psi's scale and offset must be finite");
  Rng rng(seed, {0xc105ed, 0x1});
  auto unit = [&](long r, long cdim) {
    Mat M(r, cdim);
    rng.fill_normal(M);
    Matrix out = M;
    const double n = spectral_norm(out);
    return n > 0 ? Matrix(out / n) : out;
  };
  Vec c(d);
  rng.fill_normal(c);
  c *= offset / std::max(c.norm(), 1e-300);
  const Matrix W = unit(d, d);
  if (kind == "identity") return identity(c);
  if (kind == "linear") return linear(scale * W);
  if (kind == "affine") return affine(c, scale * W);
  if (kind == "tanh-mlp") {
    const Matrix W1 = unit(d, d), W2 = unit(d, d);
    Vec b1(d);
    rng.fill_normal(b1, 0.5);
    const Matrix V2 = (scale < 0 ? -1.0 : 1.0) * std::sqrt(std::abs(scale)) * W2;
    const Vector c0 = c - V2 * b1.array().tanh().matrix();  // so that psi(0) = c
    return tanh_mlp(c0, std::sqrt(std::abs(scale)) * W1, b1, V2);
  }
  if (kind == "same-index" || kind == "intertwining") {
    if (!b) throw std::invalid_argument("closed_loop: an aligned psi needs the open loop's bundles");
    return kind == "same-index" ? same_index_aligned(*b, scale * W, c) : intertwining_aligned(*b, scale * W, c);
  }
  throw std::invalid_argument(fmt::format(
      "closed_loop: unknown psi kind '{}' (expected identity, linear, affine, tanh-mlp, same-index, intertwining)", kind));
}

}  // namespace tokdyn::closed_loop
