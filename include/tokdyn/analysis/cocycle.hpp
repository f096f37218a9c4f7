#pragma once
// Linear cocycles of depth and their spectra (coupling paper, §2.4 eq. (10), Thm 4, Thm 5,
// assumption (A4), App. A.3–A.4, B.1).
//
// A cocycle is a sequence of layer maps B(l) = I + A(l), l = 0..L-1, on R^d. Conventions:
//   Phi(l, s) = B(l-1) B(l-2) ... B(s)  (l >= s),  Phi(s, s) = I,  Phi(l, s) = Phi(l, r) Phi(r, s);
//   layer r maps the state of depth r to depth r+1 (the paper's indexing of (4) and (5) disagree
//   by one, flag F2; tokdyn uses layer r = 0..L-1 with weights indexed r).
// Growth scales are multiplicative: gamma = e^mu, "decay" gamma < 1, hyperbolic iff 1 is not in
// the dichotomy spectrum.
//
// A generator is held either as a vector of dense d x d matrices or as a callback that applies
// B(l) to k vectors at once (a d x k matrix), so that a model with only a Jacobian-vector product
// can use the QR spectrum without forming B(l). Everything here works on Eigen::MatrixXd
// (column-major: Householder QR and the triangular solves want columns).
#include <functional>
#include <string>
#include <optional>
#include <string>
#include <limits>
#include <vector>

#include <Eigen/Dense>

namespace tokdyn::cocycle {

using Matrix = Eigen::MatrixXd;

/// The generator of a cocycle: L layer maps B(l) = I + A(l) on R^d.
class Cocycle {
 public:
  /// out = B(l) Q (Q is d x k; out is resized to d x k).
  using ApplyFn = std::function<void(long l, const Matrix& Q, Matrix& out)>;

  /// From dense matrices B(0..L-1), each d x d (std::invalid_argument for an empty list, unequal
  /// or non-square shapes, non-finite entries).
  static Cocycle from_matrices(std::vector<Matrix> B);
  /// From a callback: apply(l, Q, out) sets out = B(l) Q; apply_transpose (optional) out = B(l)^T Q.
  Cocycle(long L, long d, ApplyFn apply, ApplyFn apply_transpose = {});

  long length() const { return L_; }
  long dim() const { return d_; }
  void apply(long l, const Matrix& Q, Matrix& out) const;
  /// out = B(l)^T Q (std::logic_error without a transpose).
  void apply_transpose(long l, const Matrix& Q, Matrix& out) const;
  bool has_transpose() const { return has_matrices() || static_cast<bool>(apply_t_); }
  bool has_matrices() const { return !B_.empty(); }
  /// The stored matrices B(0..L-1) (empty for a callback cocycle).
  const std::vector<Matrix>& matrices() const { return B_; }
  /// B(l) as a dense matrix (stored, or formed by applying the callback to the identity).
  Matrix matrix(long l) const;
  /// sup_l ||A(l)||_2 = sup_l ||B(l) - I||_2.
  double sup_norm_A() const;

 private:
  Cocycle() = default;
  long L_ = 0, d_ = 0;
  std::vector<Matrix> B_;
  ApplyFn apply_, apply_t_;
  void check_layer(long l) const;
};

// ------------------------------------------------------------------------------------------------
// Discrete QR (Benettin / Eckmann–Ruelle): Z = B(r) Q_r = Q_{r+1} R_r, diag(R_r) > 0.

struct QrOptions {
  long first = 0;           ///< first layer used (window [first, last))
  long last = -1;           ///< one past the last layer (-1: L)
  long k = 0;               ///< number of directions (0: all d)
  long reorth_every = 1;    ///< Householder re-orthonormalisation every q steps (log R of a block
                            ///< is spread evenly over its q steps)
  bool keep_factors = false;  ///< keep Q_r (r = first..last) and R_r (needed by the CLVs)
  Matrix Q0;                ///< starting d x k orthonormal frame (empty: the first k identity columns)
};

struct QrResult {
  Matrix log_diag;            ///< (last-first) x k: log R_r[i,i]; -inf where R_r[i,i] = 0 (growth scale 0)
  /// Per column: the first step (row of log_diag) at which R_ii fell to round-off, R_ii <=
  /// 64 eps ||Z||_F (Z = B Q, the frame's image), or -1. From that step on the column carries
  /// round-off, not growth: its exponent is unresolved (a rank-deficient layer has growth scale 0
  /// along it, which round-off reports as a small positive number).
  std::vector<long> unresolved_at;
  Matrix Q_final;             ///< d x k
  std::vector<Matrix> Q;      ///< keep_factors: Q_r, r = first..last (last-first+1 frames)
  std::vector<Matrix> R;      ///< keep_factors: R_r, k x k upper triangular
};

/// Runs the discrete QR algorithm over the window. Singular factors give log R_ii = -inf, never NaN.
/// Each image Z = B Q is scaled by a power of two before its QR (exact; the scale's log is added
/// back), so generators of any finite size give finite exponents. tokdyn::NonFiniteError (exit 4)
/// when an image itself is not finite (B(l) Q overflows, or a callback returns NaN), naming the layer.
QrResult qr_iterate(const Cocycle& c, const QrOptions& opt = {});

/// Householder QR of Z (d x k, d >= k) with diag(R) >= 0: Z = Q R, Q d x k orthonormal.
void qr_signfixed(const Matrix& Z, Matrix& Q, Matrix& R);

/// One re-orthonormalisation of the discrete QR (Benettin) algorithm: the step qr_iterate and the
/// depth spectra (analysis/depth_spectra.hpp) both take. Z (n x k, finite: the frame's image, or a
/// block's product of images) is scaled by an exact power of two 2^-e when its largest entry lies
/// outside [2^-200, 2^200] (images of ordinary size are left alone); then Z = Q R with diag(R) >= 0
/// (qr_signfixed: LAPACK above a size, Householder below) and log_r[i] = log R_ii + (e + extra_e2)
/// log 2, -inf where R_ii = 0 (growth scale 0; Q's column stays a unit vector orthogonal to the
/// others). A column whose R_ii fell to round-off of the image (0 < R_ii <= 64 eps |Z|_F) and is not
/// yet marked gets unresolved[i] = step (unresolved has k entries, -1 = resolved so far).
void benettin_step(Matrix& Z, Matrix& Q, Matrix& R, Eigen::Ref<Eigen::RowVectorXd> log_r, std::vector<long>& unresolved,
                   long step, long extra_e2 = 0);

struct LyapunovSpectrum {
  Eigen::VectorXd mu;     ///< finite-window exponents (1/N) sum_r log R_r[i,i], in QR order
  Eigen::VectorXd gamma;  ///< growth scales e^mu (0 for mu = -inf)
  long window = 0;        ///< N = rows used after the burn-in
};
/// Exponents of the rows [burn_in, rows) of log_diag (std::invalid_argument: empty window).
LyapunovSpectrum lyapunov_spectrum(const Matrix& log_diag, long burn_in = 0);
/// Running (finite-time) exponents: row r = mean of rows [burn_in, r] (rows before burn_in: NaN-free 0).
Matrix running_exponents(const Matrix& log_diag, long burn_in = 0);

// ------------------------------------------------------------------------------------------------
// Dichotomy (Sacker–Sell) spectrum from the QR diagonal: Bohl intervals with Steklov window H.

struct Interval {
  double lower = 0, upper = 0;  ///< growth scales
  std::vector<long> columns;    ///< QR diagonal columns whose Bohl intervals were merged into it
};

/// Bohl interval of each column of log_diag over rows [begin, end): [exp(min_s m_s), exp(max_s m_s)]
/// with m_s the mean of rows s..s+H-1 (Steklov average), over every window inside [begin, end).
/// -inf entries give lower = 0. std::invalid_argument: H < 1 or H > end - begin.
std::vector<Interval> bohl_intervals(const Matrix& log_diag, long H, long begin = 0, long end = -1);
/// Sorted union of overlapping (or touching within rel_tol) intervals.
std::vector<Interval> merge_intervals(std::vector<Interval> iv, double rel_tol = 0.0);
/// A-posteriori integral separation of the diagonal (Dieci–Van Vleck): for each consecutive pair
/// (i, i+1) of columns, the smallest Steklov average over windows of length H of
/// log R[i,i] - log R[i+1,i+1]. Positive for every pair: the diagonal is separated at scale H.
Eigen::VectorXd separation(const Matrix& log_diag, long H, long begin = 0, long end = -1);
/// Whether 1 lies outside every interval (a dichotomy at growth scale 1: hyperbolic), with no
/// tolerance: a boundary case (an interval ending at 0.9999999999999987 for an exactly neutral
/// cocycle) is called hyperbolic. Decisions users read go through decide_hyperbolic.
bool hyperbolic(const std::vector<Interval>& merged);

/// A decision at a boundary: yes, no, or undecided when the margin is within the tolerance.
enum class Verdict { Yes, No, Undecided };
const char* verdict_name(Verdict v);  ///< "yes", "no", "undecided"

/// The estimate's own error for Bohl intervals of log_diag over rows [begin, end), in log growth
/// scale per layer (the units of log lower / log upper):
///   round-off    16 eps (k + 1) (1 + max |log R_ii|)   (each QR step's backward error, k columns)
///   window bias  max_i osc_i / N                         (osc_i = max_t |S_i(t) - mu_i t|, S_i the
///                partial sums of column i, mu_i its mean: the log kappa of the frame seen on the
///                window of N layers; 0 for a constant diagonal)
/// tolerance = round-off + window bias.
struct SpectrumError {
  double roundoff = 0, window_bias = 0;
  double tolerance() const { return roundoff + window_bias; }
};
SpectrumError spectrum_error(const Matrix& log_diag, long begin = 0, long end = -1);

/// Hyperbolicity with a tolerance. margin: signed distance, in log growth scale, of log 1 = 0 from
/// the merged intervals: positive = outside every interval (the distance to the nearest endpoint),
/// negative = inside one (minus the distance to its nearer endpoint). verdict: yes if margin >
/// tolerance, no if margin < -tolerance, undecided otherwise.
struct HyperbolicDecision {
  Verdict verdict = Verdict::Undecided;
  double margin = 0, tolerance = 0;
};
HyperbolicDecision decide_hyperbolic(const std::vector<Interval>& merged, double tolerance);

/// Rank function cross-check (Dieci–Elia–Van Vleck): log singular values of Phi(s+N, s) for
/// s = begin, begin+stride, ... (s+N <= end), each row divided by N (so entries are log growth
/// scales). Rows: starts; columns: singular values, largest first. The triangular product is formed
/// explicitly (with a running scale), so the window must be short enough that sigma_1 / sigma_d of
/// Phi(s+N, s) stays below ~1e13: beyond that the smallest values are lost to round-off.
struct FiniteTimeSvd {
  std::vector<long> starts;
  Matrix log_sv_rate;  ///< starts x d, (1/N) log sigma_i(Phi(s+N, s))
  long N = 0;
};
FiniteTimeSvd finite_time_svd(const Cocycle& c, long N, long stride, long begin = 0, long end = -1);
/// k(gamma) over the starts: the least and the largest number of singular values above gamma^N.
/// In the resolvent set both agree; they differ inside spectral intervals.
std::pair<long, long> rank_function(const FiniteTimeSvd& f, double gamma);

// ------------------------------------------------------------------------------------------------
// Bundles and projectors P_+(l) (persistent, growth > 1) and P_-(l) = I - P_+(l).

struct Bundles {
  long k = 0;                      ///< dim V_par (unstable dimension)
  std::vector<Matrix> U;           ///< orthonormal basis of V_par(l), d x k (l = first, first+1, ...)
  std::vector<Matrix> T;           ///< B(l) U(l) = U(l+1) T(l), k x k (the restricted maps on V_par)
  std::vector<Matrix> P_plus;      ///< l = 0..L (two-sided) or the CLV window
  long first = 0;                  ///< layer of P_plus[0]
  std::string method;              ///< "two-sided" or "clv"
};

/// Orthonormal basis (d x k) of the unstable subspace of M (eigenvalues |lambda| > 1), real
/// (complex pairs give their real and imaginary parts). std::domain_error when some eigenvalue
/// has |lambda| within tol of 1 (not hyperbolic).
Matrix unstable_subspace(const Matrix& M, double tol = 1e-9);
/// The same as a value: the basis, or why M has none (an eigenvalue within tol of the unit circle,
/// a defective unstable eigenvalue). A bad argument or a non-converging iteration still throws.
struct SubspaceOutcome {
  std::optional<Matrix> basis;
  std::string why_not;  ///< empty when there is a basis
  explicit operator bool() const { return basis.has_value(); }
};
SubspaceOutcome find_unstable_subspace(const Matrix& M, double tol = 1e-9);

/// (a) Two-sided constant extension (App. B.1): B(l) = B(0) for l < 0 and B(L-1) for l >= L.
/// V_par(l) = Phi(l,0) E^u(B(0)) (pushed forward with QR), V_perp(l)^perp = Phi(L,l)^T (E^s(B(L-1)))^perp
/// (pulled back with transposes and QR); P_+ = U (Z^T U)^{-1} Z^T. std::domain_error when an end
/// is not hyperbolic, the unstable dimensions differ, or the bundles are not transversal.
Bundles two_sided_bundles(const Cocycle& c);

/// The same as a value: the bundles, or why the cocycle has none (an end with an eigenvalue
/// within 1e-9 of the unit circle or a defective unstable eigenvalue, unequal unstable dimensions
/// at the two ends, bundles not transversal). "No dichotomy" is an outcome of the numbers, not an
/// error: callers branch on it instead of catching. Other failures (a bad argument, an eigenvalue
/// iteration that did not converge) still throw.
struct BundlesOutcome {
  std::optional<Bundles> bundles;
  std::string why_not;  ///< empty when there are bundles
  explicit operator bool() const { return bundles.has_value(); }
};
BundlesOutcome find_two_sided_bundles(const Cocycle& c);

/// (b) Covariant Lyapunov vectors (Ginelli et al. 2007): forward QR (full, k = d), backward
/// C_r = R_r^{-1} C_{r+1} with column normalisation; the CLVs with exponent > 0 span V_par.
/// Valid on [burn, L - burn]: P_plus[j] is the projector at layer burn + j. k_plus < 0: the
/// number of exponents > 0 on the window. std::domain_error for a singular R.
Bundles clv_bundles(const Cocycle& c, long burn, long k_plus = -1);
/// The same with a singular R as a value (BundlesOutcome::why_not); bad arguments still throw.
BundlesOutcome find_clv_bundles(const Cocycle& c, long burn, long k_plus = -1);

struct BundleDiagnostics {
  Eigen::VectorXd angle;          ///< minimal angle between V_par(l) and V_perp(l) (radians; pi/2 when k = 0 or d)
  Eigen::VectorXd p_plus_norm;    ///< ||P_+(l)||_2
  Eigen::VectorXd invariance;     ///< ||P_+(l+1) B(l) - B(l) P_+(l)||_2 (last entry: 0)
};
BundleDiagnostics bundle_diagnostics(const Cocycle& c, const Bundles& b);

// ------------------------------------------------------------------------------------------------
// Dichotomy constant C(r_-, r_+) and its trade-off curves (two-sided bundles).

/// g_minus[j] = max_s ||Phi(s+j, s) P_-(s)||, g_plus[j] = max_s ||Phi(s-j, s) P_+(s)|| over the
/// sampled starts s (every `stride`-th layer), j = 0..L. Forward pushes are re-projected onto
/// P_- every step (exact by invariance; keeps the growing part's round-off out); backward uses
/// the restricted inverse on V_par (T(l)^{-1}).
/// With r_minus_min > 0 (r_plus_max finite) a push ends once g / r_minus_min^j (g r_plus_max^j) is
/// below 1e-18 of the largest it reached (after 8 layers at least): the constants below are then
/// exact to round-off for every r_minus >= r_minus_min (r_plus <= r_plus_max) outside the spectrum,
/// at a cost of about the decay length per start instead of L (cocycle_bundles.cpp). The defaults
/// push every start to the end. Starts run in parallel on a stored cocycle (same bits at any thread
/// count).
struct GrowthEnvelope {
  Eigen::VectorXd g_minus, g_plus;
  Eigen::VectorXd log_minus, log_plus;  ///< their logs (-inf for 0)
};
GrowthEnvelope growth_envelope(const Cocycle& c, const Bundles& b, long stride = 1, double r_minus_min = 0,
                               double r_plus_max = std::numeric_limits<double>::infinity());
/// C_-(r) = max(1, max_j g_minus[j] r^-j); C_+(r) = max(1, max_j g_plus[j] r^j).
double constant_minus(const GrowthEnvelope& g, double r_minus);
double constant_plus(const GrowthEnvelope& g, double r_plus);

/// max_l sum_s ||G(l, s+1)|| over the window (Green operator of u(l+1) = B(l) u(l) + h(l):
/// G(l, s+1) = Phi(l, s+1) P_-(s+1) for s < l, -Phi(l, s+1) P_+(s+1) for s >= l). O(L^2 d^3):
/// for validation windows. An all-contracting cocycle (k = 0) uses P_+ = 0.
double green_norm(const Cocycle& c, const Bundles& b);

// ------------------------------------------------------------------------------------------------
// Time-ordered exponential (Thm 4) and dense products (cross-checks).

/// Phi_c(t1, t0) of dPhi/dt = A(t) Phi by RK4 with m substeps, m doubling from m0 until the
/// largest entry change is below tol (relative to max(1, |Phi|_max)). steps_used: final m.
Matrix time_ordered_exp(const std::function<Matrix(double)>& A, double t0, double t1, double tol = 1e-13,
                        long m0 = 1, long* steps_used = nullptr);
/// A(t) = piecewise-linear interpolation of the layer matrices A(r) at t = r (constant beyond the ends).
std::function<Matrix(double)> piecewise_linear(std::vector<Matrix> A);

/// Dense Phi(l, s) = B(l-1) ... B(s) (small sizes only).
Matrix dense_product(const Cocycle& c, long l, long s);

}  // namespace tokdyn::cocycle
