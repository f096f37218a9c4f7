#pragma once
// Analyses of the circle (d = 2) phase model (9) of RoPE self-attention (RoPE paper §3, §4.2,
// §6.3, §7.1, App. A.2, A.3, B.4, C.3, D.1–D.4: Prop. 3.2, Prop. 4.2, Thm 5.1 (rate fits), Thm 6.3,
// Prop. 6.4, Cor. 6.5, Props. 7.1-7.2, Lemma C.1).
//
//  * Natural energy E+ (10)/(A-1), the exact witnesses (A-2)/(A-3).
//  * Twisted states (15): exact equilibrium test (16), drift and bounds (17), the twisted
//    Jacobian (B-4), its exact spectra (41)–(43), the per-configuration checks of App. D.4.
//  * Strict semicircle contraction (Thm 6.3): lifted diameter, Dini residuals via (C-2), seeded
//    states of a given diameter, integrated comparisons, the tail bounds of Cor. 6.5.
//  * Nonlinear slow-mode rate fits on resonant rings (App. D.2).
//  * RK4 order check (App. D.1) and the numerical order of fixed-step Fehlberg 7(8).
// The paper's fixed configurations (Prop. 3.2's setup, the App. D.1, D.2, D.4 grids, the Thm 6.3
// grids, Figs. 2a, 2c and 3a) are in experiments/rope_circle_configs.hpp.
//
// Integrator substitution (our decision; App. D.1 uses DOP853): the paper's DOP853 is replaced by
// Boost.Odeint's controlled runge_kutta_fehlberg78 at the same tolerances (recorded as `method`).
// Invalid user input raises std::invalid_argument with a one-line message naming the input (the parameter layer reports it as std::invalid_argument, exit 2).
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/models/rope/phase.hpp"
#include "tokdyn/core/tokens.hpp"

namespace tokdyn::rope {

// =============================================================================================
// Natural RoPE interaction energy (8), (10), (11), (A-1)–(A-3); Prop. 3.2.

/// u_i = sum_j W_ij sin delta_ij, v_i = sum_j W_ij sin(theta_i - theta_j), Z_i = sum_j W_ij with
/// the unscaled W_ij = e^{beta cos delta_ij}; E = E+ (ordered pairs, diagonal included);
/// rate = dE+/dt = 2 beta sum_i u_i v_i / Z_i.
struct EnergyTerms {
  double E = 0.0;
  Vec u, v, Z;
  double rate = 0.0;
};
EnergyTerms energy_terms(const PhaseParams& p, const Vec& theta);
/// E+(theta) = sum_{i,j} e^{beta cos delta_ij} (overflows for beta > ~700).
double energy_plus(const PhaseParams& p, const Vec& theta);
/// dE+/dt by the identity.
double energy_rate(const PhaseParams& p, const Vec& theta);
/// Centred difference along the field: [E+(theta + h F) - E+(theta - h F)] / (2h), F = (9).
double energy_rate_fd(const PhaseParams& p, const Vec& theta, double h = 1e-6);

/// Closed forms at the Prop. 3.2 states (experiments/rope_circle_configs.hpp):
/// (-1 + 3e^{1+sqrt3}) / (e^{sqrt3/2} + e^{1/2+sqrt3} + e^{1+sqrt3}) = 1.666364304459315...
double energy_witness_plus_closed();
/// (A-3): -(5e^{1+sqrt3/2} + 4) / (e^{sqrt3/2} (1 + 2e^{1+sqrt3/2}) (2 + e^{1+sqrt3/2})) = -0.1296131359239394...
double energy_witness_minus_closed();

// =============================================================================================
// Twisted states (15)–(17), (A-4), (A-5), (B-4), (40)–(43); Props. 4.2, 7.1, 7.2.
// Positions are p_j = j (j = 0..n-1) throughout.

/// A twist frequency whose arithmetic nature is given exactly: omega = pi num / den with integers
/// (den > 0, stored reduced), or a value declared to lie outside pi*Q (any nonzero algebraic
/// number such as 0.37 or sqrt 2 does, since pi is transcendental). Structure (equilibrium or not,
/// which spectrum) is decided from the integers only, never from floating-point tests.
class TwistOmega {
 public:
  /// omega = 2 pi m / n (resonant mode m of an n-ring). std::invalid_argument for n < 1.
  static TwistOmega resonant(int n, long m);
  /// omega = (2k + 1) pi (the odd antipodal family; k = 0 gives pi).
  static TwistOmega odd_antipodal(long k = 0);
  /// omega = pi num / den. std::invalid_argument for den == 0.
  static TwistOmega pi_rational(long num, long den);
  /// omega = value, declared outside pi*Q. std::invalid_argument for 0 or non-finite values.
  static TwistOmega outside_pi_q(double value);

  double value() const { return value_; }
  bool pi_rational() const { return pi_rational_; }
  long num() const { return num_; }
  long den() const { return den_; }

 private:
  bool pi_rational_ = true;
  long num_ = 0, den_ = 1;
  double value_ = 0.0;
};

/// theta_j = c - omega j (lifted, never wrapped).
Vec twisted_state(int n, double omega, double c = 0.0);
/// (16): the twisted state is an equilibrium iff omega in pi Z or n omega in 2 pi Z (exact integers).
bool is_twisted_equilibrium(int n, const TwistOmega& w);
/// F_i = [sin(n omega/2) / (n sin(omega/2))] sin(omega (i - (n-1)/2)); zero vector when
/// sin(omega/2) == 0 exactly. Independent of beta and c.
Vec twisted_drift(int n, double omega);
/// summed literally: F_i = (1/n) sum_j sin(omega (i - j)) with integer differences.
Vec twisted_drift_sum(int n, double omega);
/// (17): sharp |sin(n omega/2)| / (n |sin(omega/2)|) and coarse 1 / (n |sin(omega/2)|).
double drift_bound_sharp(int n, double omega);
double drift_bound_coarse(int n, double omega);
/// (B-4): J = (1/n) (C - diag(C 1)), C_ij = cos(omega (i - j)) (integer differences); symmetric,
/// independent of beta.
Mat twisted_jacobian(int n, double omega);
/// Centred finite-difference Jacobian of the phase RHS, column k = [F(theta + h e_k) - F(theta - h e_k)] / (2h).
Mat phase_jacobian_fd(const PhaseParams& p, const Vec& theta, double h = 2e-7);

/// One exact eigenvalue num/den with its multiplicity.
struct ExactEigenvalue {
  long num = 0, den = 1;
  int mult = 0;
  double value() const { return static_cast<double>(num) / static_cast<double>(den); }
};
/// The exact spectrum of (B-4) at a twisted equilibrium, ascending, from integers only:
///  m mod n = 0 (consensus): {-1 x (n-1), 0 x 1};  2m = 0 mod n, m != 0: (42) {0 x (n-1), 1 x 1};
///  other resonant: (41) {0 x (n-2), 1/2 x 2};  odd antipodal, n = 2r+1: (43)
///  {-1/n x r, 0 x 1, 1/n x (r-1), 1 x 1}. std::invalid_argument when (n, w) is not an equilibrium.
std::vector<ExactEigenvalue> twisted_spectrum_exact(int n, const TwistOmega& w);
/// The multiset expanded ascending.
std::vector<double> expand_spectrum(const std::vector<ExactEigenvalue>& s);
/// Max |sorted eigenvalues of the symmetric matrix J - expanded exact multiset| (std::invalid_argument on size mismatch).
double spectrum_error(const Mat& J, const std::vector<ExactEigenvalue>& exact);
/// Multiplicities of eigenvalues of a symmetric matrix, grouped within tol (ascending values).
std::vector<std::pair<double, int>> eigenvalue_multiplicities(const Mat& J, double tol = 1e-10);

/// Per-configuration errors of App. D.4.
struct TwistedRow {
  std::string family;           ///< "resonant", "odd_antipodal" or "nonresonant"
  int n = 0;
  long m = 0;                   ///< resonant mode (resonant rows), else 0
  double omega = 0.0, beta = 0.0;
  bool equilibrium = false;     ///< (16), from integers
  double rhs_max = 0.0;         ///< max_i |direct RHS (9)| at theta_j = -omega j
  double drift_error = 0.0;     ///< max_i |direct RHS - (A-5)|
  double max_drift = 0.0;       ///< max_i |(A-5)|
  double sharp_bound = 0.0, coarse_bound = 0.0;  ///< (17) (inf when sin(omega/2) = 0)
  double jacobian_fd_error = -1.0;   ///< max |centred FD (h = 2e-7) - (B-4)|; -1 when skipped
  double jacobian_general_error = 0; ///< max |phase_jacobian - (B-4)|
  double spectrum_error = -1.0;      ///< vs the exact multiset; -1 when none (nonresonant)
};
TwistedRow twisted_check(const std::string& family, int n, const TwistOmega& w, double beta, long m = 0,
                         bool fd_jacobian = true);

struct TwistedSummary {
  int count = 0;
  double max_rhs = 0, max_drift_error = 0, max_jacobian_fd_error = 0, max_jacobian_general_error = 0,
         max_spectrum_error = 0;
  bool bounds_ok = true;  ///< every row: max|F| <= sharp <= coarse (1e-15 slack)
  std::vector<TwistedRow> rows;
};
TwistedSummary summarize_twisted(std::vector<TwistedRow> rows);


// =============================================================================================
// Strict semicircle contraction (Thm 6.3), bipodal boundary (Prop. 6.4), Lemma C.1 active sets.

/// The softmax floor a_{beta,n} (7) is rope::softmax_floor (models/rope/attention.hpp).
/// Lifted diameter D = max_i theta_i - min_i theta_i (no wrapping) and q = tan(D/2).
double lifted_diameter(const Vec& theta);

/// D+D by (C-2) with active sets I+ / I- (tokdyn::dini_max / dini_min, tie tolerance `tie_tol`):
/// D+D = max_{I+} dtheta - min_{I-} dtheta. Two independent velocities: the phase RHS (9)
/// (dini_c2) and the Cartesian sphere field (5) with d = 2 (dini_direct). Residual
/// r = -D+D - 2 a sin D (>= 0 is Thm 6.3).
struct DiameterDini {
  double D = 0, q = 0, a = 0;
  double dini_c2 = 0, dini_direct = 0;
  double residual_c2 = 0, residual_direct = 0;
  int active_max = 0, active_min = 0;
};
DiameterDini diameter_dini(const PhaseParams& p, const Vec& theta, double tie_tol = 1e-14);

/// A state of n tokens with lifted diameter exactly D0: distinct tokens i_lo, i_hi drawn from
/// rng get theta = 0 and theta = D0 exactly (so max - min = D0 - 0 = D0 in floating point);
/// the others are U[0, D0). ties & 1: one more token exactly at 0; ties & 2: one more exactly at
/// D0 (when enough tokens remain). The global rotation is irrelevant (the model is equivariant).
Vec circle_state_with_diameter(int n, double D0, std::uint64_t seed, std::initializer_list<std::uint64_t> ids,
                               int ties = 0);


/// One integrated comparison: q(t)/q0 against e^{-tau}, tau = 2 a t, sampled at `samples`
/// equally spaced tau in [0, tau_max]; sampling stops after the first sample with
/// q/q0 < stop_ratio. Excess = max over samples of (q/q0 - e^{-tau}) (<= 0 when (35) holds) and
/// its absolute version q - q0 e^{-tau}.
struct ContractionSample {
  double t = 0, tau = 0, D = 0, q_ratio = 0, bound = 0;
};
struct ContractionTrajectory {
  int n = 0;
  double beta = 0, omega = 0, D0 = 0, a = 0, q0 = 0;
  std::string method;
  std::vector<ContractionSample> samples;
  double max_excess = 0, max_excess_abs = 0;
  bool stopped = false;
  AdaptiveStats stats;
};
struct ContractionOptions {
  double tau_max = 5.0;
  int samples = 201;
  double stop_ratio = 1e-10;
  AdaptiveOptions adaptive{"fehlberg78", 1e-10, 1e-12, 1e-3, false};
};
ContractionTrajectory circle_contraction(const PhaseParams& p, const Vec& theta0, const ContractionOptions& opt = {});


/// Cor. 6.5 and (37) on the circle along one trajectory (integrated to t_end, sampled at
/// `samples` equally spaced times): theta_inf = mean of the final lifted phases (our stand-in for
/// the limit x_inf of Cor. 6.5: the normalised mean of the final state), d_S(x_i, x_inf) = |theta_i - theta_inf|,
/// Q = q0 e^{-2at}. Excesses are signed so that <= 0 means the bound holds:
///   tail    max_i |theta_i - theta_inf| - arsinh(Q)/a          (36)
///   coarse  arsinh(Q)/a - (q0/a) e^{-2at}                       (36)
///   D       D - 2 q0 e^{-2at};  Y = 1 - cos D vs 2 q0^2 e^{-4at} (37)
///   chord   L_ch - 2Q/sqrt(1+Q^2), L_ch = 2 sin(D/2)             (C-6)
///   speed   max_i |dtheta_i| - L_ch                              (C-6)
/// plus max |Y - L_ch^2/2| (identity).
struct TailCheck {
  double a = 0, q0 = 0, theta_inf = 0, final_D = 0;
  int samples = 0;
  double max_tail_excess = -INFINITY, max_coarse_excess = -INFINITY, max_D_excess = -INFINITY,
         max_Y_excess = -INFINITY, max_chord_excess = -INFINITY, max_speed_excess = -INFINITY;
  double max_identity_error = 0;
};
TailCheck circle_tail_check(const PhaseParams& p, const Vec& theta0, double t_end, int samples = 201,
                            const AdaptiveOptions& opt = {"fehlberg78", 1e-10, 1e-12, 1e-3, false});

// =============================================================================================
// Nonlinear slow-mode rate fits on resonant rings (Thm 5.1 via (9); App. D.1, D.2).

/// A* (attention at consensus theta = 0, from the phase model's own softmax), its eigenvalues
/// (descending) by a dense symmetric eigensolve of S = D^{-1/2} W D^{-1/2} (W the scaled weights),
/// gamma = 1 - lambda_2 and the slow right eigenvector v = D^{-1/2} u_2 scaled to unit max-norm.
struct PhaseConsensusGap {
  Mat A;
  Vec eigenvalues;
  double gamma = 0;
  Vec slow_mode;
};
PhaseConsensusGap phase_consensus_gap(const PhaseParams& p, int n);

struct CircleRateTriple {
  int n = 0;
  long m = 0;
  double beta = 0;
};

struct RateFitOptions {
  double eps = 1e-4;          ///< amplitude in the slow mode (unit max-norm)
  int outputs = 360;          ///< output times, uniform on [0, T], T = t_factor / gamma
  double t_factor = 3.75;
  double window_lo = 0.75, window_hi = 3.75;  ///< fit window in gamma t
  /// Bulirsch-Stoer with dense output: the 360 outputs are interpolated, as DOP853's are in the
  /// paper (Fehlberg 7(8) has no dense output in Boost.Odeint and had to land on every output
  /// time: 8x slower at the same accuracy).
  AdaptiveOptions adaptive{"bulirsch_stoer", 1e-10, 1e-12, 1e-3, false};
};
/// Transverse norm ||theta - mean(theta) 1||_2; OLS of log norm on t over the window; gamma_fit = -slope.
struct RateFit {
  CircleRateTriple triple;
  double gamma = 0, gamma_fit = 0, rel_error = 0;
  int fit_points = 0;
  AdaptiveStats stats;
};
RateFit circle_rate_fit(const CircleRateTriple& c, const RateFitOptions& opt = {});

// =============================================================================================
// Integrator order checks (App. D.1).

struct OrderCheck {
  std::vector<double> steps, errors, ratios;  ///< errors: max-abs endpoint error; ratios e(h)/e(h/2)
  double reference_error_estimate = 0;        ///< |adaptive reference - fixed-step RK78 at T/4096| (diagnostic)
};
/// Classical RK4 (drivers' integrate_rk4, no retraction: phases) at the given steps to t = T
/// against adaptive fehlberg78 at rtol 1e-13 / atol 1e-15. T must be a multiple of every step.
OrderCheck circle_rk4_order_check(const PhaseParams& p, const Vec& theta0, double T, const std::vector<double>& steps);
/// Fixed-step Boost.Odeint runge_kutta_fehlberg78 (do_step, its 8th-order solution) against the
/// same adaptive reference.
OrderCheck circle_rk78_order_check(const PhaseParams& p, const Vec& theta0, double T, const std::vector<double>& steps);

}  // namespace tokdyn::rope
