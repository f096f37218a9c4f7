#pragma once
// Sphere-side geometry of RoPE self-attention (RoPE paper eqs. (28)–(37), Prop. 6.1, Thm 6.2,
// Cor. 6.5, Thm 4.3, Thm 7.3): observables, Dini residuals through the finite
// active-set calculus (Lemma C.1, analysis/dini.hpp), seeded state generators, trajectory-vs-bound
// comparisons along the retracted RK4, and the nonlinear slow-mode rate fit at a consensus point.
// The paper's App. D.3 Dini grids and Fig. 4d's fits are in experiments/rope_sphere_configs.hpp.
//
// All bounds are the paper's, proved for its model: one head, no mask, Q = K = V = I
// (AttentionParams::is_paper_model()); the functions that evaluate them throw std::invalid_argument otherwise.
//
// Ties (Lemma C.1 needs the exact active set). `tol` is an absolute tolerance on the values:
//  - tol = 0 is right whenever the tie is exact in floating point, i.e. the tied values are the
//    same bits. That holds for the plane-aligned equiangular states (every Gram entry is the
//    single product sqrt(c0)*sqrt(c0) plus exact zeros) and for the hemisphere boundary token
//    (built so that <x_b, w> is a sum of exact zeros, see hemisphere_state);
//  - a tie that is exact only in real arithmetic (the rotated equiangular state: Q x_i) is spread
//    over a few ulp by rounding; tol = 0 would then keep only the pairs that happen to round
//    lowest and overestimate D+ (a non-conservative residual). Such near ties use a small
//    tolerance (kNearTieTol = 1e-14, ~50 ulp at 1): a non-minimal member admitted by the tolerance
//    can only lower min over the active set, i.e. make the residual more conservative;
//  - generic random states have no ties; tol = 0.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/sphere.hpp"

namespace tokdyn::rope {

/// Tie tolerance for ties that are exact only in real arithmetic (rotated equiangular states).
inline constexpr double kNearTieTol = 1e-14;

// ---------------------------------------------------------------------------------------------
// Observables (eqs. 28-37). X: n x d unit tokens.

/// m_w = min_i <x_i, w>.
double hemisphere_min(const Eigen::Ref<const Tokens>& X, const Eigen::Ref<const RowVec>& w);
/// c = min_{i<j} <x_i, x_j>.
double min_pairwise_inner(const Eigen::Ref<const Tokens>& X);
/// rho = (1 - c)/(1 + c) (eq. 31); +inf at c = -1.
double rho_of(double c);

/// Records, at every observation, each run's c = min_{i<j} <x_i, x_j> and m = min_i <x_i, w>
/// (the observables of the contraction theorems): rows in observation order, runs in order.
class GeometryObserver final : public Observer {
 public:
  struct Row {
    double t;
    int run;
    double min_inner_c;
    double hemisphere_min;
  };
  explicit GeometryObserver(RowVec w) : w_(std::move(w)) {}
  void observe(double t, const Batch& Z) override;
  const std::vector<Row>& rows() const { return rows_; }
  /// The smallest c over the runs at the latest observation (NaN before any).
  double last_min_c() const { return last_min_c_; }

 private:
  RowVec w_;
  std::vector<Row> rows_;
  double last_min_c_ = std::numeric_limits<double>::quiet_NaN();
};
/// D_S = arccos c (pairwise geodesic diameter), c clamped to [-1, 1].
double sphere_diameter_of(double c);
/// Y = 1 - c (quadratic deficit).
inline double deficit_of(double c) { return 1.0 - c; }
/// Chordal diameter max_{i<j} |x_i - x_j|, computed from the differences (so that the identity
/// Y = L_ch^2/2 is a check, not a definition).
double chordal_diameter(const Eigen::Ref<const Tokens>& X);
/// Floor-scaled time tau = 2 a_{beta,n} t.
double floor_time(double beta, int n, double t);
/// The geodesic distance arccos<x, y> is tokdyn::geodesic (sphere.hpp).

struct SphereObservables {
  double m_w = 0.0;  ///< NaN when no w is given
  double c = 0.0, rho = 0.0, D_S = 0.0, L_ch = 0.0, Y = 0.0;
};
SphereObservables observe(const Eigen::Ref<const Tokens>& X, const RowVec& w = RowVec());

// ---------------------------------------------------------------------------------------------
// Dini residuals (Lemma C.1 via dini_min). residual >= 0 <=> the proved inequality holds.

struct DiniValue {
  double value = 0.0;     ///< m (hemisphere) or c (pairwise)
  double dini = 0.0;      ///< D+ of the minimum over the active set
  double bound = 0.0;     ///< the comparison: 2 min{m, 0}, or 2a(1 - c^2) (c >= 0) / 4c (c < 0)
  double residual = 0.0;  ///< dini - bound
  int active = 0;         ///< size of the active set
};

/// P6.1: r = D+m - 2 min{m, 0}, with dh_i = sum_j A_ij (h_j - <x_i, x_j> h_i) (C-3).
DiniValue hemisphere_dini_c3(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, const RowVec& w,
                             double tol = 0.0);
/// The same with dh_i = <F_i, w> from the vector field (5).
DiniValue hemisphere_dini_direct(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, const RowVec& w,
                                 double tol = 0.0);
/// T6.2: r = D+c - 2a(1 - c^2) (for c >= 0; 4c for c < 0), dg_ij from (C-5).
DiniValue nonobtuse_dini_c5(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, double tol = 0.0);
/// The same with dg_ij = <F_i, x_j> + <x_i, F_j> from the vector field (5).
DiniValue nonobtuse_dini_direct(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, double tol = 0.0);

// ---------------------------------------------------------------------------------------------
// Seeded state generators (Rng streams only).

/// Acute state: x_i = normalise(u + t_i), u a random unit anchor, t_i tangent at u with |t_i|
/// uniform in [tmin, tmax]. Then <x_i, x_j> is proportional to 1 + <t_i, t_j> >= 1 - tmax^2 > 0
/// for tmax < 1, so every pairwise inner product is positive; a state whose computed minimum is
/// nevertheless < 0 would be redrawn (never happens for tmax < 1; `redraws` counts it).
Tokens acute_state(Rng& rng, int n, int d, double tmin = 0.05, double tmax = 0.45, int* redraws = nullptr);

struct HemisphereState {
  Tokens X;           ///< n x d
  RowVec w;           ///< the hemisphere's pole
  double margin = 0;  ///< drawn margin: h_i in [margin, 1] for non-boundary tokens
  int boundary = -1;  ///< index of the boundary token (h = 0 exactly), -1 if none
};
/// Hemisphere state: w random unit; margin uniform in [mlo, mhi]; h_i uniform in [margin, 1];
/// x_i = h_i w + sqrt(1 - h_i^2) t_i (t_i unit tangent at w), normalised. With `boundary`, one
/// random token b lies exactly on the boundary: its support is one random RoPE plane (coordinates
/// 2k, 2k+1; one coordinate when d = 2, d odd: one coordinate) at a random in-plane angle, and w
/// is drawn with exact zeros there. Every product x_bc w_c then has an exact-zero factor, so
/// h_b = <x_b, w> is exactly 0 in floating point however the dot product is summed or fused
/// (FMA contraction is on in this build). Orientation is no loss of generality inside a plane:
/// the model is equivariant under a common rotation of each RoPE plane.
HemisphereState hemisphere_state(Rng& rng, int n, int d, bool boundary, double mlo = 0.02, double mhi = 0.8);

/// Equiangular state x_i = sqrt(1 - c0) e_i + sqrt(c0) e_n in d = n + 1 ("plane-aligned").
Tokens equiangular_state(int n, double c0);
/// A d x d orthogonal matrix from the seeded stream (Householder QR of a Gaussian matrix, signs
/// fixed so that R has a positive diagonal).
Mat seeded_orthogonal(int d, std::uint64_t seed);
/// The equiangular state times seeded_orthogonal(n + 1, seed) ("rotated"): x_i <- O x_i.
Tokens equiangular_rotated(int n, double c0, std::uint64_t seed);
/// T3.1 sharpness witness: x_k = R_{p_k}^T u (k != j), x_j = -R_{p_j}^T u, so that row i has
/// s_ij = -1, s_ik = +1 and A_ij = a_{beta,n} (i != j; u a unit row vector of length d).
Tokens sharpness_witness(const AttentionParams& P, int n, int j, const RowVec& u);

// ---------------------------------------------------------------------------------------------
// Trajectory-vs-bound comparisons along the retracted RK4 (drivers.hpp).

struct TrajectoryOptions {
  double t_end = 10.0;
  double h = 1e-2;    ///< RK4 step
  int outputs = 200;  ///< comparison times t_k = k t_end/outputs, k = 0..outputs
  RowVec w;           ///< hemisphere pole (empty: no hemisphere checks)
  bool tail = true;   ///< C6.5 tail check against x_inf = normalised mean of the final state
};

/// Excess = max over the output times of (observable - bound): <= 0 when the bound holds,
/// positive = violated. `rel` divides by the bound's value at t = 0. NaN when not applicable.
struct Excess {
  double abs = std::numeric_limits<double>::quiet_NaN();
  double rel = std::numeric_limits<double>::quiet_NaN();
};

struct TrajectoryReport {
  double a = 0.0;                     ///< a_{beta,n}
  double c0 = 0.0, rho0 = 0.0, q0 = 0.0, m0 = 0.0;
  int samples = 0;                    ///< comparison times
  Excess rho;                         ///< rho(t) <= rho0 e^{-4at} (c0 >= 0)
  Excess tan_half;                    ///< tan(D_S/2) <= q0 e^{-2at} (c0 >= 0)
  Excess tanh_c;                      ///< tanh(2at) - c(t) <= 0 (c0 == 0 only)
  Excess hemisphere_monotone;         ///< m_w(t_{k-1}) - m_w(t_k) <= 0 (w given, m0 >= 0)
  Excess hemisphere_initial;          ///< m_w(0) - m_w(t) <= 0
  Excess tail;                        ///< d_S(x_i, x_inf) <= (1/a) arsinh Q(t) (c0 >= 0, tail)
  Excess r37_D, r37_Lch, r37_Y;       ///< D_S, L_ch <= 2 q0 e^{-2at}; Y <= 2 q0^2 e^{-4at}
  double identity_Y = 0.0;            ///< max |Y - L_ch^2/2|
  double final_diameter = 0.0;        ///< D_S at t_end (x_inf is exact up to about this)
  double max_norm_deviation = 0.0;    ///< max | |x_i| - 1 | over the samples
  /// Largest absolute excess over the applicable bounds (and identity_Y).
  double max_excess() const;
  /// Largest relative excess over the applicable bounds.
  double max_excess_rel() const;
  /// Number of bound evaluations made (applicable bounds x samples).
  long evaluations = 0;
  StepReport steps;                   ///< the RK4 step guard's report (policy: refuse)
};

TrajectoryReport sphere_trajectory_bounds(const AttentionParams& P, const Tokens& X0, const TrajectoryOptions& opt);

// ---------------------------------------------------------------------------------------------
// Consensus and the nonlinear slow-mode rate (T4.3, T7.3; App. D.1, D.5).

/// x* with plane energies ||x*^{(l)}||^2 = a_l and in-plane angles phi_l (default 0):
/// x*^{(l)} = sqrt(a_l)(cos phi_l, sin phi_l). d = 2 a.size(); the a_l must be >= 0 and sum to 1.
RowVec consensus_point(const std::vector<double>& energies, const std::vector<double>& angles = {});

struct ConsensusAttention {
  Mat A;        ///< A* from attention() at the consensus state (n x n)
  Mat W;        ///< globally scaled kernel exp(beta (s_ij - 1)), exactly symmetric
  Vec Zrow;     ///< W 1
  Vec pi;       ///< stationary weights Z_i / sum Z
  Vec lambda;   ///< eigenvalues of A* (via S = D^{-1/2} W D^{-1/2}), non-increasing
  Vec v2;       ///< right eigenvector of A* for lambda_2, scaled to unit max-norm
  double gamma = 0.0;  ///< 1 - lambda_2
  double a_consistency = 0.0;  ///< max |A* - D^{-1} W| (attention() vs the kernel)
};
/// The consensus kernel at (x*, ..., x*) for the paper model P (n tokens).
ConsensusAttention consensus_attention(const AttentionParams& P, int n, const RowVec& xstar);

/// Orthonormal basis of the tangent space at the unit vector x (rows, (d-1) x d; Householder).
Mat tangent_basis(const RowVec& x);

struct SlowModeOptions {
  double amplitude = 1e-4;   ///< perturbation size (max over tokens)
  double h = 1e-2;           ///< retracted RK4 step
  int outputs = 360;         ///< output times, uniform on [0, T] (both ends included)
  double window_lo = 0.75;   ///< fit window in gamma t
  double window_hi = 3.75;
  double t_end_scaled = 3.75;  ///< T = t_end_scaled / gamma
  int tangent = -1;          ///< tangent direction: row of tangent_basis(x*); -1: the default rule (see .cpp)
};

struct SlowModeFit {
  double gamma = 0.0;       ///< 1 - lambda_2(A*)
  double gamma_fit = 0.0;   ///< - slope of log N(t) over the window
  StepReport steps;         ///< the RK4 step guard's report (policy: refuse)
  double rel_error = 0.0;   ///< |gamma_fit - gamma| / gamma
  double lambda2 = 0.0;
  int samples = 0;          ///< output times inside the window
  double t_end = 0.0;
  double energy_high = 0.0; ///< (paper fits) energy in the first plane
};
/// Perturb (x*, ..., x*) by amplitude v_i e (v the slow right eigenvector of A*, unit max-norm;
/// e a unit tangent vector at x*), retract, integrate with retracted RK4, and fit the decay of
/// N(t) = (sum_i |x_i - xbar|^2)^{1/2} (xbar the arithmetic mean).
SlowModeFit slow_mode_fit(const AttentionParams& P, int n, const RowVec& xstar, const SlowModeOptions& opt = {});

}  // namespace tokdyn::rope
