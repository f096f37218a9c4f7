#pragma once
// The Green operator of an exponential dichotomy (coupling paper, Lemma 17, §5.1; Thm 7, §4.2):
// the unique bounded solution u = G h of
//     u(l+1) = B(l) u(l) + h(l),   B(l) = I + A(l),
// G(l, s) = Phi(l, s) P_-(s) for l >= s and -Phi(l, s) P_+(s) for l < s (the latter through the
// restricted inverse on the persistent bundle V_par), (G h)(l) = sum_s G(l, s+1) h(s).
//
// On a window l = 0..L the generator is extended two-sidedly by constants (App. B.1): B(l) = B_left
// for l < 0 and B_right for l >= L, both hyperbolic with the same unstable dimension k. The forcing
// outside [0, L) is either the constant extension of h(0) / h(L-1) or 0 (Tails). The bounded
// solution of the extended problem restricted to the window is then the solution of the
// boundary-value problem (BVP)
//     u(l+1) - B(l) u(l) = h(l), l = 0..L-1,
//     left_rows (u(0) - ubar_-) = 0   (u(0) - ubar_- in E^u(B_left): bounded as l -> -inf),
//     right_rows (u(L) - ubar_+) = 0  (u(L) - ubar_+ in E^s(B_right): bounded as l -> +inf),
// ubar_- = (I - B_left)^{-1} h_-, ubar_+ = (I - B_right)^{-1} h_+ (the constant bounded solutions of
// the tails; 0 for Tails::Zero). This is exact, not an approximation, for the two-sided extension.
//
// Sequences on the window are d x n matrices, column l = u(l): states d x (L+1), forcings d x L.
// Norms: ||u||_inf = max_l ||u(l)||_2 (the paper's sup norm, App. A preamble).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "tokdyn/analysis/cocycle.hpp"

namespace tokdyn::green {

using Matrix = Eigen::MatrixXd;
using Seq = Eigen::MatrixXd;  ///< column l is u(l): states d x (L+1), forcings d x L

/// Forcing outside [0, L): h(0) / h(L-1) extended constantly, or 0.
enum class Tails { Constant, Zero };

/// End data of the two-sided constant extension (App. B.1): B(l) = B_left for l < 0, B_right for l >= L.
struct Ends {
  Matrix B_left, B_right;
  long k = 0;        ///< unstable dimension (equal at both ends)
  Matrix left_rows;  ///< (d-k) x d: orthonormal rows spanning E^u(B_left)^perp (the P^s(B_left) rows)
  Matrix right_rows; ///< k x d: orthonormal rows spanning E^s(B_right)^perp (the P^u(B_right) rows)
};

/// std::invalid_argument for empty / non-square / unequal / non-finite matrices; std::domain_error
/// when an end has an eigenvalue within tol of the unit circle, or the unstable dimensions differ.
Ends make_ends(const Matrix& B_left, const Matrix& B_right, double tol = 1e-9);
/// The same with "no dichotomy at the ends" as a value (why_not); bad arguments still throw.
struct EndsOutcome {
  std::optional<Ends> ends;
  std::string why_not;  ///< empty when the ends are hyperbolic with equal unstable dimensions
  explicit operator bool() const { return ends.has_value(); }
};
EndsOutcome find_ends(const Matrix& B_left, const Matrix& B_right, double tol = 1e-9);

/// Block-banded LU (partial pivoting inside the sliding 2d-k row window, as LAPACK's band LU
/// would pivot) of the BVP above. Factorises once in O(L d^3) (about 4.3 d^3 flops per layer);
/// each solve is O(L d^2). B may differ from the ends' maps (e.g. a closed loop A + rho Dpsi with
/// A's ends). std::invalid_argument for bad sizes; std::domain_error when the BVP is singular (the
/// interior cocycle has no transversal bundles: no unique bounded solution).
struct BvpOutcome;

class Bvp {
 public:
  /// Factorises the BVP; std::domain_error when it is singular (the bounded solution is not unique).
  Bvp(std::vector<Matrix> B, Ends ends);
  /// The same, with a singular BVP as a value (BvpOutcome::why_not), for callers that meet singular
  /// problems as an outcome (a continuation crossing a fold). Bad sizes are still invalid_argument.
  static BvpOutcome factor(std::vector<Matrix> B, Ends ends);

  long length() const { return L_; }
  long dim() const { return d_; }
  const Ends& ends() const { return ends_; }
  const Matrix& map(long l) const { return B_[static_cast<std::size_t>(l)]; }

  /// h: d x L -> u: d x (L+1), the bounded solution of the two-sidedly extended problem.
  Seq solve(const Seq& h, Tails tails = Tails::Constant) const;
  /// The transpose of h -> solve(h, tails): given ubar (d x (L+1)) returns hbar (d x L) with
  /// <ubar, solve(h)> = <hbar, h> for every h (the adjoint Green operator, for norm estimates).
  Seq solve_transpose(const Seq& ubar, Tails tails = Tails::Constant) const;
  /// max_l ||u(l+1) - B(l) u(l) - h(l)||_2.
  double residual(const Seq& u, const Seq& h) const;
  /// Largest violation of the two end conditions for the given tails (max of the two row residuals).
  double boundary_residual(const Seq& u, const Seq& h, Tails tails = Tails::Constant) const;
  /// sigma_min of the (L+1)d x (L+1)d BVP matrix, estimated as 1 / ||M^{-1}||_2 with ||M^{-1}||_2
  /// from `iterations` power steps on M^{-T} M^{-1} (fixed start; a lower estimate of the norm, so an
  /// upper estimate of sigma_min that converges from above). > 0: the bounded solution is unique (R17).
  double smallest_singular_value_estimate(int iterations = 30) const;
  /// The (L+1)d x (L+1)d BVP matrix M itself: rows [left_rows at u(0)], [-B(l) at u(l), I at
  /// u(l+1)] for l = 0..L-1, [right_rows at u(L)]; columns u(0), ..., u(L). For validation.
  Matrix dense_matrix() const;
  /// sigma_min of M as a certificate (a value that is not above the true one):
  ///  * "exact": dense SVD of M when (L+1)d <= dense_max; value = sigma_min - 4 N eps sigma_max
  ///    (the SVD's backward error), so it is a lower bound up to that round-off;
  ///  * "lower bound": otherwise, when the N solves fit max_flops, 1 / sqrt(||M^-1||_1 ||M^-1||_inf)
  ///    (||X||_2 <= sqrt(||X||_1 ||X||_inf)), with the columns of M^-1 from the factorisation;
  ///  * "none": too large for either; value NaN (the power estimate is not a certificate).
  struct SigmaMinCertificate {
    double value = 0;
    std::string method;  ///< "exact", "lower bound" or "none"
  };
  SigmaMinCertificate smallest_singular_value_certificate(long dense_max = 1600, double max_flops = 4e10) const;
  /// The flops counted for the factorisation (panel LU, unit-lower triangular inverse, Schur update per layer).
  double factor_flops() const;

 private:
  struct Unfactored {};
  Bvp(Unfactored, std::vector<Matrix> B, Ends ends);  ///< validates, does not factorise
  std::string factorise();                           ///< empty, or why the BVP is singular
  // Full solve of M x = (gL, h, gR) and its transpose.
  Seq solve_full(const Eigen::VectorXd& gL, const Seq& h, const Eigen::VectorXd& gR) const;
  void solve_full_transpose(const Seq& ubar, Eigen::VectorXd& gL, Seq& h, Eigen::VectorXd& gR) const;

  long L_ = 0, d_ = 0, m_ = 0;  // m = d - k carried rows
  std::vector<Matrix> B_;
  Ends ends_;
  Eigen::PartialPivLU<Matrix> lu_left_, lu_right_;  // I - B_left, I - B_right
  // The factors of every layer in one block (huge pages where the kernel allows: the first touch of
  // ~L (2d-k+d) d doubles is otherwise a page fault per 4 KiB): layer l holds its packed (m+d) x d
  // panel LU, then U12 (d x d). Shared between copies (immutable after construction).
  std::shared_ptr<double> store_;
  long stride_ = 0;
  Eigen::Map<Matrix> panel_(long l) const { return {store_.get() + l * stride_, m_ + d_, d_}; }
  Eigen::Map<Matrix> U12_(long l) const { return {store_.get() + l * stride_ + (m_ + d_) * d_, d_, d_}; }
  std::vector<std::vector<int>> ipiv_;              // LAPACK row interchanges of step l (0-based)
  Eigen::PartialPivLU<Matrix> last_;                // [X_L; right_rows] (d x d)
};

/// A factorised BVP, or why it is singular.
struct BvpOutcome {
  std::optional<Bvp> bvp;
  std::string why_not;  ///< empty when there is a factorisation
  explicit operator bool() const { return bvp.has_value(); }
};

/// Explicit Green sum (Lemma 17; validation, O(L^2 d^2), no truncation) on the window with the same
/// two-sided extension (ends B(0) and B(L-1), as cocycle::two_sided_bundles) and the tails in closed
/// form: u(l) = Phi(l,0) P_-(0) ubar_- + Phi(l,L) P_+(L) ubar_+
///   + sum_{s=0}^{l-1} Phi(l,s+1) P_-(s+1) h(s) - sum_{s=l}^{L-1} Phi(l,s+1) P_+(s+1) h(s),
/// the backward propagators through the restricted inverse on V_par (the maps T(l) of the bundles).
/// Needs b.method == "two-sided" (std::invalid_argument otherwise, or for bad sizes).
Seq green_explicit(const cocycle::Cocycle& c, const cocycle::Bundles& b, const Seq& h, Tails tails = Tails::Constant);

/// ||G||_{inf -> inf} estimates on a window.
struct NormEstimate {
  double upper = 0;     ///< max_l sum_s ||G(l, s+1)|| over the window padded by `pad` end layers on each side
  double lower = 0;     ///< ||G h||_inf for the best h found by the sign iteration (a true lower bound)
  long iterations = 0;  ///< sign-iteration steps used
};
/// Upper: cocycle::green_norm of the cocycle padded with `pad` copies of B(0) before and of B(L-1)
/// after the window (pad = 0: the window operator; pad -> inf: the bi-infinite operator of the
/// two-sided extension). Lower: the block sign iteration (Hager / Higham style for the mixed
/// (inf, 2) norm, Tails::Zero so that it bounds the same operator): h(s) = g(s)/||g(s)|| with
/// g = G^T (v e_{l*}) at the row l* where ||G h|| peaks, v = (G h)(l*)/||(G h)(l*)||, from a seeded
/// random start, until the value stops increasing (at most max_iter steps). lower <= upper always.
NormEstimate green_norm_estimate(const cocycle::Cocycle& c, const cocycle::Bundles& b, long pad = 0, int max_iter = 8,
                                 std::uint64_t seed = 1);

/// Lemma 17's bound ||G|| <= C (1/m_- + 1/m_+) at its best over a grid of rates r_- = 0.02..0.98,
/// r_+ = 1.02..2 (any pair is valid: C(r_-, r_+) is measured on the window by cocycle::growth_envelope
/// with the given start stride); k = 0 or k = d drop the absent side (r_- or r_+ = NaN).
struct Lemma17Bound {
  double bound = 0, C = 0, r_minus = 0, r_plus = 0;
};
Lemma17Bound lemma17_bound(const cocycle::Cocycle& c, const cocycle::Bundles& b, long stride = 1);

/// Interior exclusion depth of the finite-window sup statistics (boundary error O(C r_-^l + C r_+^{l-L})):
/// ceil(log(C/tol) / log(1/max(r_-, 1/r_+))); r_plus = +inf (no persistent bundle) allowed.
/// std::invalid_argument unless C >= 1, 0 < r_- < 1 < r_+, 0 < tol.
long exclusion_depth(double C, double r_minus, double r_plus, double tol);

/// Weight-tied closed form (§5.1 after Thm 10): G h = -A^{-1} h for a constant generator A and a
/// constant forcing h. std::domain_error for a singular A.
Eigen::VectorXd weight_tied_constant(const Matrix& A, const Eigen::VectorXd& h);

/// ||u||_inf = max_l ||u(l)||_2 over columns [first, last) (last < 0: all).
double sup_norm(const Seq& u, long first = 0, long last = -1);

/// G-level saddles of dimension d for the Green-operator presets (cocycle_families.hpp with the
/// first ceil(d/2) directions persistent, the rest decaying):
///   "g1": weight-tied, sigma_i from 0.25 down to 0.1 (persistent) and -0.3 to -0.5 (decaying),
///         eigenbasis condition number `knob` (>= 1);
///   "g3": upper-triangular, diagonals 1.2..1.5 (even i) / 0.7..0.4 (odd i), periodic +-10 %, coupling |b| <= knob;
///   "g4": sector-structured, m = -0.6 / -0.5, v = 0.8 / 0.2, lambda = 1, rotation omega = knob.
/// std::invalid_argument for an unknown family, d < 1, L < 1.
std::vector<Matrix> saddle_family(const std::string& family, long d, long L, double knob, std::uint64_t seed);
/// The (m, v) of saddle_family("g4", d, ...): m_i = -0.6, v_i = 0.8 (i < ceil(d/2)), else -0.5, 0.2.
std::pair<std::vector<double>, std::vector<double>> g4_sectors(long d);

}  // namespace tokdyn::green
