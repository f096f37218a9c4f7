#pragma once
// The closed loop of the coupling paper (§5.1–5.2): the distinguished bounded trajectory u*_rho of
// (15), u(l+1) = (I + A(l)) u(l) + rho psi(u(l)), in its bounded form u = G[rho psi(u)] (Thm 10,
// App. C.1), its first-order displacement (Prop 11), continuation in the gate amplitude rho, and
// the closed-loop stability margin (Thm 12, Remark 5, App. C.2).
//
// Deviation coordinates (App. C.1): u(l) = y(l) - x*(l), psi(u) := psi(x* + u), so an injection's
// offset c plays the role of psi(x*) and psi(0) = c.
//
// The window problem (two-sided constant extension, App. B.1; tokdyn's choice, documented in
// docs/reproduction.md): states u(0..L) (a d x (L+1) Seq), layer maps B(l) = I + A(l), l = 0..L-1;
//   u(l+1) - B(l) u(l) = rho psi_l(u(l))                      (l = 0..L-1),
//   left_rows (u(0) - ubar_-) = 0,  right_rows (u(L) - ubar_+) = 0,
// with left_rows / right_rows the rows of the open loop's ends (green::make_ends of B(0), B(L-1))
// and ubar_± the closed loop's own end equilibria, A_± ubar + rho psi(ubar) = 0 (the constant
// solution of the extended closed loop beyond the window). The weight-tied affine case is then
// exact on the whole window (u* = -rho (A + rho B)^{-1} c at every l). Writing u = ubar(l) + w with
// the end profile ubar(l) (ubar_- on the first half, ubar_+ on the second), w has homogeneous
// boundary rows, so
//   * Picard:  u <- ubar + G_0[rho psi(u) - L ubar]      (G_0 = the open-loop Green operator with
//              zero tails; contraction ratio <= ||G|| |rho| L_psi, Thm 10),
//   * Newton:  the linearisation is the BVP with generator B(l) + rho Dpsi_l(u(l)) and the same
//              boundary rows: delta = Bvp(B + rho Dpsi(u), ends).solve(-R(u), Zero) — this is
//              (I - rho G Dpsi(u)) delta = -(u - G[rho psi(u)]) of the spec, multiplied through by
//              the open-loop operator, so each Newton step costs one O(L d^3) banded solve,
//   * pseudo-arclength continuation in rho on (w, rho) with the bordered (Keller) solve.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/green.hpp"

namespace tokdyn::closed_loop {

using Matrix = Eigen::MatrixXd;
using Vector = Eigen::VectorXd;
using Seq = Eigen::MatrixXd;  ///< column l is u(l)

// ------------------------------------------------------------------------------------------------
// The injection family psi (C^1), possibly depth-dependent (the aligned ones): psi_l(u).

class Injection {
 public:
  virtual ~Injection() = default;
  virtual long dim() const = 0;
  virtual Vector value(long l, const Vector& u) const = 0;
  virtual Matrix jacobian(long l, const Vector& u) const = 0;
  /// A global Lipschitz estimate sup_{l,u} ||Dpsi_l(u)||_2 (Thm 10's L_psi).
  virtual double lipschitz() const = 0;
  virtual std::string name() const = 0;
  /// Its defining tensors, named as in the formula (e.g. {"c", {c}}, {"W1", {W1}}; a depth-dependent
  /// map gives one matrix per layer; a vector is a one-column matrix): what a run writes so that
  /// psi can be rebuilt elsewhere (issue 17).
  virtual std::vector<std::pair<std::string, std::vector<Matrix>>> parameters() const = 0;
};
using InjectionPtr = std::shared_ptr<const Injection>;

/// psi(u) = c + B u (affine; c = psi(x*) in deviation coordinates).
InjectionPtr affine(Vector c, Matrix B);
/// psi(x) = x read at x* + u: psi(u) = offset + u.
InjectionPtr identity(Vector offset);
/// psi(u) = B u.
InjectionPtr linear(Matrix B);
/// psi(u) = c + W2 tanh(W1 u + b1) (W1: h x d, b1: h, W2: d x h).
InjectionPtr tanh_mlp(Vector c, Matrix W1, Vector b1, Matrix W2);
/// Same-index aligned (A7 as the paper states it): psi_l(u) = c + B(l) u with
/// B(l) = P_+(l) M P_+(l) + P_-(l) M P_-(l), which commutes with P_±(l) (flag F4: not enough for
/// bundle preservation when P_± varies with depth).
InjectionPtr same_index_aligned(const cocycle::Bundles& b, const Matrix& M, Vector c);
/// Intertwining aligned (flag F4): B(l) = P_+(l+1) M P_+(l) + P_-(l+1) M P_-(l), so
/// P_±(l+1) B(l) = B(l) P_±(l) and A(l) + rho B(l) keeps the bundles of A exactly.
InjectionPtr intertwining_aligned(const cocycle::Bundles& b, const Matrix& M, Vector c);
/// sup_l ||Dpsi_l(u(l))||_2 along a trajectory (Thm 12's L_psi).
double lipschitz_along(const Injection& psi, const Seq& u);

// ------------------------------------------------------------------------------------------------
// The problem: open loop + injection.

struct Problem {
  std::vector<Matrix> B;  ///< I + A(l), l = 0..L-1
  green::Ends ends;       ///< the open loop's ends (B(0), B(L-1))
  InjectionPtr psi;
  long L = 0, d = 0;
};
/// std::invalid_argument: empty B, shapes, psi of another dimension; std::domain_error: an end is
/// not hyperbolic (or the ends' unstable dimensions differ).
Problem make_problem(std::vector<Matrix> B, InjectionPtr psi);

/// The closed loop's end equilibria ubar_± (A_± ubar + rho psi_{0 | L-1}(ubar) = 0, Newton) and
/// their rho-derivatives -(A_± + rho Dpsi)^{-1} psi(ubar). std::domain_error when Newton fails or
/// A_± + rho Dpsi(ubar) is singular.
struct EndPoints {
  Vector minus, plus, dminus, dplus;
};
EndPoints end_equilibria(const Problem& p, double rho, const EndPoints* guess = nullptr);
/// The same as a value: the end equilibria, or why there are none at this rho (A + rho Dpsi
/// singular; or Newton not converging, `no_convergence`). end_equilibria throws std::domain_error /
/// ConvergenceError with the same message.
struct EndOutcome {
  std::optional<EndPoints> ends;
  std::string why_not;
  bool no_convergence = false;
  explicit operator bool() const { return ends.has_value(); }
};
EndOutcome find_end_equilibria(const Problem& p, double rho, const EndPoints* guess = nullptr);
/// The end profile: ubar_- for l <= L/2, ubar_+ after (d x (L+1)).
Seq end_profile(const Problem& p, const Vector& minus, const Vector& plus);
/// R(l) = u(l+1) - B(l) u(l) - rho psi_l(u(l)), l = 0..L-1 (d x L).
Seq residual(const Problem& p, double rho, const Seq& u);
/// The closed-loop generator B(l) + rho Dpsi_l(u(l)).
std::vector<Matrix> closed_loop_maps(const Problem& p, double rho, const Seq& u);
/// Prop 11: d/drho u*_rho at 0 = G psi(0) (open-loop Green operator, constant tails).
Seq first_order(const Problem& p);

struct IterOptions {
  int max_iter = 60;
  double tol = 1e-13;  ///< on the step, relative to 1 + ||u||_inf
};
struct Solution {
  Seq u;  ///< d x (L + 1) always: the last iterate, NaN when Newton stopped before its first one (why_not)
  double rho = 0;
  std::vector<double> history;  ///< Picard: ||u^{n+1} - u^n||_inf; Newton: ||R(u^n)||_inf (n = 0, 1, ...)
  int iterations = 0;
  bool converged = false;
  /// Newton: why it stopped without converging when it could not go on (no end equilibria at this
  /// rho, a singular closed-loop BVP); empty otherwise (converged, or out of iterations).
  std::string why_not;
};
/// Picard iteration of u = G[rho psi(u)] from the end profile.
Solution picard(const Problem& p, double rho, const IterOptions& opt = {});
/// Newton's method from `guess` (empty: the end profile); the guess's end states are projected
/// onto the boundary rows first.
Solution newton(const Problem& p, double rho, const Seq& guess = Seq(), const IterOptions& opt = {});
/// The cross-block chain (flag F8): y_k = G[rho psi(y_{k-1})] (with the same end data), y_0 = the
/// end profile; returns ||y_k - u_star||_inf for k = 1..blocks.
std::vector<double> cross_block_chain(const Problem& p, double rho, int blocks, const Seq& u_star);

// ------------------------------------------------------------------------------------------------
// Closed-loop diagnostics along the branch (Thm 12, R20).

struct Diagnostics {
  long k_minus = 0, k_plus = 0;  ///< unstable dimensions of the closed-loop end maps I + A_± + rho Dpsi(ubar_±)
  double end_gap = 0;            ///< min over both end maps of | |lambda| - 1 |
  double sigma_min = 0;          ///< smallest singular value estimate of the closed-loop BVP (1/sigma_min ~ ||G_rho||)
  bool bundles_ok = false;       ///< the closed-loop two-sided bundles exist (transversal, equal end dimensions)
  long k_bundles = -1;
  double projector_deviation = std::numeric_limits<double>::quiet_NaN();  ///< max_l ||P~_+(l) - P_+(l)|| on the interior
};
/// The end-map part of the diagnostics only (k_minus, k_plus, end_gap).
Diagnostics diagnose_ends(const Problem& p, double rho, const EndPoints& e);
/// `open` (optional): the open loop's bundles for the projector deviation over l in
/// [exclude, L - exclude].
Diagnostics diagnose(const Problem& p, double rho, const Seq& u, const EndPoints& e, const cocycle::Bundles* open,
                     long exclude, bool with_bundles = true);

struct ContinuationOptions {
  double rho_end = 1.0;    ///< stop once rho passes it (in the direction of travel)
  double direction = 1.0;  ///< +1: rho increases from 0, -1: decreases
  double ds0 = 0.01, ds_min = 1e-6, ds_max = 0.05;  ///< arclength steps (scaled: |w|^2/(L+1) + rho^2)
  int max_steps = 10000;
  int newton_max = 8;
  double tol = 1e-11;
  bool diagnose = true;      ///< diagnostics at every accepted point and event detection
  bool with_bundles = true;  ///< closed-loop bundles in the diagnostics
  double gap_tol = 1e-9;     ///< an end multiplier within this of the unit circle counts as "1 enters"
  double sigma_min_tol = 1e-10;  ///< closed-loop BVP smallest singular value below it: ||G_rho|| diverges
  bool refine = true;        ///< bisect the bracket of an end-spectrum event (Newton solves)
  int refine_steps = 30;
  const cocycle::Bundles* open = nullptr;
  long exclude = 0;
};
struct ContinuationPoint {
  double rho = 0;
  Seq u;
  EndPoints ends;
  double t_rho = 0;  ///< rho-component of the unit tangent (sign change: fold)
  double ds = 0;
  int newton_iterations = 0;
  Diagnostics diag;
};
struct ContinuationResult {
  std::vector<ContinuationPoint> points;
  std::string stop_reason;  ///< "rho_end", "max_steps", or the event: "end spectrum", "dimension",
                            ///< "bundles", "green", "fold", "step"
  double rho_crit = std::numeric_limits<double>::quiet_NaN();  ///< first rho of an event (refined)
  double rho_crit_bracket = std::numeric_limits<double>::quiet_NaN();  ///< width of its bracket
  int steps_rejected = 0;
  long factorizations = 0;
};
ContinuationResult continue_in_rho(const Problem& p, const ContinuationOptions& opt);

// ------------------------------------------------------------------------------------------------
// The bounds of Thm 10 / Thm 12 (appendix constants) and flags F5, F6.

struct Bounds {
  double K = 0, C = 0, m_minus = 0, m_plus = 0, mu = 0, L_psi = 0;
  double rho_0 = 0;          ///< 1/(2 K L_psi) (Thm 10, C.1)
  double rho_17 = 0;         ///< min(m_-, m_+)/(C^2 L_psi): (17) with c_0 = 1
  double rho_C2 = 0;         ///< mu^2/(4 C (C + mu) L_psi) (C.2 with K <= 2C/mu, flag F5)
  double rho_C2_sharp = 0;   ///< mu/(2 K (C + mu) L_psi) (C.2 with the computed K)
  double K_bound = 0;        ///< C (1/m_- + 1/m_+) (Lemma 17)
  /// Thm 10 sup bounds: appendix 2K|rho||psi(0)| and main text C|rho||psi(0)|/mu (flag F6).
  double sup_appendix(double rho, double psi0) const { return 2.0 * K * std::abs(rho) * psi0; }
  double sup_main(double rho, double psi0) const { return C * std::abs(rho) * psi0 / mu; }
  /// C.2's rate shift 2 C K beta / (1 - 2 K beta) (beta = |rho| L_psi).
  double rate_shift(double beta) const { return 2.0 * C * K * beta / (1.0 - 2.0 * K * beta); }
};
/// m_± are taken as 1 - r_- and r_+ - 1; with k = 0 (all-contracting, (A4°)) m_+ = +inf.
Bounds bounds(double K, double C, double r_minus, double r_plus, double L_psi);

/// The scalar weight-tied closed loop of Remark 5 (flag F18): multiplier 1 + sigma + rho c.
/// Critical |rho| = min(|sigma|, 2 - |sigma|)/|c| for sigma in (-2, 0).
double remark5_threshold(double sigma, double c);

// ------------------------------------------------------------------------------------------------
// Helpers shared by the presets.

/// The open loop's constants: two-sided bundles, K = max_l sum_s ||G(l, s+1)|| (cocycle::green_norm,
/// an upper estimate of ||G||), r_- / r_+ the spectral edges at 1 from the QR Bohl intervals
/// (Steklov window H; r_+ = +inf when k = 0) and C = the dichotomy constant at those rates
/// (growth envelope over starts every `stride` layers).
struct OpenLoop {
  cocycle::Bundles bundles;
  double K = 0, C = 1, r_minus = 0, r_plus = 0;
  long k = 0;
};
OpenLoop open_loop(const std::vector<Matrix>& B, long H, long stride);

/// A seeded injection of a named kind on R^d: "identity" (offset c), "linear" (scale W),
/// "affine" (c + scale W), "tanh-mlp" (c' + W2 tanh(W1 u + b1), hidden width d, ||W2|| ||W1|| = scale,
/// c' such that psi(0) = c),
/// "same-index" / "intertwining" (aligned with `b`, M = scale W, offset c). W, W1, W2 Gaussian / sqrt(d)
/// normalised to unit 2-norm; c Gaussian normalised to |c| = offset. std::invalid_argument for an
/// unknown kind or an aligned kind without bundles.
InjectionPtr random_injection(const std::string& kind, long d, double scale, double offset, std::uint64_t seed,
                              const cocycle::Bundles* b = nullptr);

}  // namespace tokdyn::closed_loop
