#pragma once
// Dichotomy spectra estimated from activation trajectories alone (coupling paper §6 "Identification
// in practice", experiment E7, which the paper calls open; engineering spec §6.3 E7 with the
// algorithms of §7.4–§7.7).
//
// The data: a base trajectory X_l (l = 0..L) and an ensemble of E trajectories X_l^(e) started near
// it, each state flattened to a vector of R^n (n = rows x d, a run's rows row-major, as tokdyn's
// tangents are laid out). No weights and no Jacobian-vector products: only the states.
//
// The estimator, per layer l = 0..L-1:
//   D_l = [X_l^(1) - X_l, ..., X_l^(E) - X_l]                        (n x E, the observed differences)
//   Â_l = argmin_A ||A D_l - D_(l+1)||_F, the minimum-norm solution  = D_(l+1) D_l^+
// computed by a complete orthogonal decomposition of D_l^T (column-pivoted Householder QR, then a
// QR of R^T: LAPACK-style direct factorisations, no iteration that can fail to converge). With
// E >= n and D_l of full rank the fit is the unique, ridge-free least-squares map (interpolating when
// E = n); with E < n (or D_l numerically rank-deficient: columns whose pivot falls below rcond of the
// largest) it is determined only on the span of the perturbations, range(D_l), and is 0 on its
// orthogonal complement: Â_l = D_(l+1) D_l^+ is the map the data determine, and nothing else.
//
// Then the Â_l are the generators B(l) of a cocycle (analysis/cocycle.hpp) and go through the same
// discrete QR (cocycle::qr_iterate, the Benettin step cocycle::benettin_step that the exact depth
// spectra use): top-k exponents mu_i = mean log R_ii, Bohl/Steklov intervals (cocycle::bohl_intervals),
// and, on the whole R^n, the dichotomy at a growth scale and its constant C exactly as
// coupling-dichotomy's R11 computes them for exact cocycles (two-sided bundles, growth envelope,
// C(r_-, r_+^min)).
//
// Why the estimate can be exact with E < n. The QR frame starts inside the data: Q_0 spans the first
// k differences D_0[:, 0:k] (or a given frame inside range(D_0)). For a linear cocycle without noise,
// D_l = Phi(l, 0) D_0, so Q_l = orth(Phi(l, 0) Q_0) stays inside range(D_l) and Â_l Q_l = B(l) Q_l
// exactly: the top-k exponents are recovered to round-off from any E >= k. Directions outside the
// span are never needed by the frame. What limits the estimate is (a) nonlinearity: D_(l+1) = DF_l D_l
// + O(|D_l|^2) (the amplitude eps of the perturbations), (b) observation noise against the
// perturbations' size, which shrinks or grows with depth like exp(l mu_i) per direction, and (c) the
// collapse of the ensemble onto the leading directions: cond(D_l) grows like exp(l (mu_1 - mu_n)), so
// weak directions sink below round-off or noise and their part of Â_l is fitted to that. More
// members (E) average the noise out of the fit (its error falls like 1/sqrt(E - n) once E > n).
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/depth_spectra.hpp"
#include "tokdyn/core/tokens.hpp"

namespace tokdyn::trajectory_spectra {

using cocycle::Matrix;

/// One depth step of the model applied to one run: Znext = F_l(Z) (the map whose trajectories are
/// observed).
using ValueStep = std::function<void(long l, const Batch& Z, Batch& Znext)>;

/// The value part of a TangentStep (depth_spectra.hpp): Znext of step(l, Z, Z, 0, Znext, W) with one
/// zero tangent, so that the states are those of exactly the map whose JVP the exact spectrum uses
/// (for a float-state model, its double step).
ValueStep value_of(const TangentStep& step);

/// The states of the base run Z0 (one run) and of `starts` (each one run of Z0's shape) over `depth`
/// layers: result[l] is n x (1 + E), column 0 the base, column e the start e-1 pushed l layers
/// (n = Z0.len x d, a run flattened row-major); l = 0..depth. Layer by layer, the runs one after
/// another. std::invalid_argument for shapes that differ or a non-finite start; tokdyn::NonFiniteError
/// naming the layer and member when a state stops being finite.
std::vector<Matrix> record_ensemble(const ValueStep& step, const Batch& Z0, const std::vector<Tokens>& starts, long depth);

/// The exact dense Jacobians J_l = DF_l(Z_(l-1)) (n x n) along the trajectory of Z0 (one run),
/// l = 1..depth (result[l-1]), each from n tangents e_1..e_n pushed by the model's tangent step in
/// one call. O(n) tangents per layer: for small n (the reference of the estimator's C).
std::vector<Matrix> dense_jacobians(const TangentStep& step, const Batch& Z0, long depth);

/// The differences D_l = X_l^(e) - X_l^(base) (n x E) of recorded states (result of record_ensemble,
/// or observations). sphere_d > 0: the states are runs of tokens on S^(sphere_d - 1); each token's
/// difference is projected onto the tangent space of its base token (x -> x - z <z, x> / |z|^2), so
/// that the O(|delta|^2) radial parts of the differences do not enter the fit.
std::vector<Matrix> differences(const std::vector<Matrix>& states, long sphere_d = 0);

/// The tangent projector of a product of spheres at x (a run of tokens of dimension d flattened,
/// n = x.size()): block diagonal, I - z z^T / |z|^2 per token z (I for a zero token). n x n.
Matrix tangent_projector(const Eigen::VectorXd& x, long d);

/// The least-squares map of one layer, Â = D1 D0^+ (0 on the orthogonal complement of range(D0)):
/// held dense (n x n) when E >= n, else as D1 (n x E) and the complete orthogonal decomposition of D0
/// (n x E), Â Q = D1 (D0^+ Q) with D0^+ Q the minimum-norm least-squares solution of D0 C = Q, so that
/// a wide model (n = rows x d in the thousands) never holds an n x n matrix per layer and no
/// pseudo-inverse is formed.
struct LayerFit {
  Matrix A;              ///< n x n when E >= n, else empty
  Matrix U;              ///< E < n: D1 (n x E); else empty
  Eigen::CompleteOrthogonalDecomposition<Matrix> D0;  ///< E < n: of D0 (n x E); else not computed
  long rank = 0;         ///< numerical rank of D0 (the pivots above rcond of the largest)
  double cond = 0;       ///< |T_11| / |T_rr| of the decomposition's triangular factor (an estimate of cond(D0) on its range)
  double residual = 0;   ///< ||Â D0 - D1||_F / ||D1||_F (0 when the fit interpolates: E <= rank)
  /// out = Â Q (Q has n rows).
  void apply(const Matrix& Q, Matrix& out) const {
    if (A.size()) {
      out.noalias() = A * Q;
    } else if (rank == 0) {
      out = Matrix::Zero(U.rows(), Q.cols());
    } else {
      const Matrix C = D0.solve(Q);
      out.noalias() = U * C;
    }
  }
  /// Â as a dense n x n matrix.
  Matrix matrix() const {
    if (A.size()) return A;
    Matrix out;
    apply(Matrix::Identity(U.rows(), U.rows()), out);
    return out;
  }
};
/// Â = D1 D0^+ by a complete orthogonal decomposition: of D0^T (E x n) when E >= n (Â^T is the
/// minimum-norm least-squares solution of D0^T X = D1^T), of D0 (n x E) otherwise. rcond: the threshold of the
/// numerical rank relative to the largest pivot (0: Eigen's default, max(E, n) x machine epsilon).
/// std::invalid_argument for shapes that differ, E < 1 or non-finite entries.
LayerFit fit_layer(const Matrix& D0, const Matrix& D1, double rcond = 0.0);
/// fit_layer for l = 0..L-1 (D has L + 1 entries), layers in parallel (one whole layer per thread:
/// the same bits on any thread count).
std::vector<LayerFit> fit_layers(const std::vector<Matrix>& D, double rcond = 0.0);

/// The dichotomy of a cocycle at growth scale `split` as coupling-dichotomy's R11 takes it for exact
/// cocycles: the QR of all d columns over [burn_in, L), each column's Bohl interval with Steklov
/// window H, r_- = the top of the intervals below split, r_+^min = the bottom of those above it,
/// r_+^max = the top of all (flag F11), a yes / no / undecided verdict on "split outside the merged
/// intervals" against the estimate's own error (cocycle::decide_hyperbolic with
/// cocycle::spectrum_error), and, when it is yes and some interval lies below split, the constant
/// C = max(C_-(r_-), C_+(r_+^min)) of the cocycle split^-1 B(l) from its two-sided bundles and
/// growth envelope (starts every `stride` layers). Growth scales are reported unscaled (r_- < split <
/// r_+^min); C is that of the rescaled cocycle (split = 1: the paper's dichotomy).
struct Dichotomy {
  double split = 1.0;
  long H = 0;
  std::vector<cocycle::Interval> columns;  ///< one Bohl interval per QR column (growth scales)
  std::vector<cocycle::Interval> merged;   ///< their sorted union
  double r_minus = 0, r_plus_min = 0, r_plus_max = 0;  ///< NaN when there is no such column
  long k_plus = 0, k_neutral = 0;  ///< columns above split, and straddling it
  cocycle::HyperbolicDecision decision;    ///< split outside the merged intervals (margin in log growth scale)
  double C = 0;                            ///< NaN when there is no constant (why_no_C)
  std::string why_no_C;                    ///< empty when C was computed
};
Dichotomy dichotomy(const cocycle::Cocycle& c, long H, double split = 1.0, long burn_in = 0, long stride = 1);

struct EstimateOptions {
  long k = 1;             ///< exponents (QR columns), 1 <= k <= min(n, E)
  long burn_in = 0;       ///< first layers whose log R_ii are not averaged
  double rcond = 0.0;     ///< fit_layer's rank threshold (0: the default)
  /// The initial frame (n x k, orthonormal columns inside range(D_0)); empty: the first k differences
  /// D_0[:, 0:k], orthonormalised by the Benettin step (so the exact spectrum started from those k
  /// perturbation directions is the one to compare with).
  Matrix Q0;
  long H = 0;             ///< Steklov window of the intervals (0: no intervals)
  /// Also the full-dimension spectrum, verdict and C (dichotomy(), O(L n^3 + L^2 n^3 / stride)) when
  /// every fit has rank n; with a fit of rank < n (E < n) the directions outside the span are not
  /// estimated (the fit annihilates them), so there is no full-dimension spectrum (has_dichotomy
  /// false, dich.why_no_C says why).
  bool with_dichotomy = false;
  double split = 1.0;     ///< growth scale of that dichotomy
  long stride = 1;        ///< starts of its growth envelope
};

struct Estimate {
  std::vector<LayerFit> fits;         ///< Â_l, l = 0..L-1
  cocycle::QrResult qr;               ///< the top-k QR of the Â cocycle from Q0
  cocycle::LyapunovSpectrum spectrum; ///< exponents over [burn_in, L), in QR order
  std::vector<cocycle::Interval> intervals;  ///< Bohl interval per QR column (H > 0)
  Dichotomy dich;                     ///< with_dichotomy and has_dichotomy
  bool has_dichotomy = false;         ///< dich computed (with_dichotomy and every fit of rank n)
  long min_rank = 0;                  ///< smallest rank of the fits
  double max_cond = 0;                ///< largest cond of the fits
};
/// The estimate from the differences D (D_0..D_L, each n x E). std::invalid_argument for fewer than 2
/// entries, unequal shapes, k outside [1, min(n, E)], burn_in outside [0, L), H > L - burn_in, a Q0 of
/// the wrong shape, or first differences that are (numerically) rank-deficient for the frame.
Estimate estimate(const std::vector<Matrix>& D, const EstimateOptions& opt);

/// The initial frame the estimate uses by default: the first k columns of D0 orthonormalised by the
/// Benettin step (diag R >= 0).
Matrix frame_from(const Matrix& D0, long k);

}  // namespace tokdyn::trajectory_spectra
