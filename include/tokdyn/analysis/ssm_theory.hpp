#pragma once
// The theory of "The Attention Within" (arXiv 2609.17997), computed: every constant the
// assumptions and theorems define, for a constant parameter set or for a schedule sampled on a
// time grid or per layer (§III–§V: Lemma III.1, Prop. IV.1, Thm IV.1, and the linearisation at consensus).
//
//  * Lemma III.1 / Assumption III.1: certified channel bounds lambda_lo/hi(s) per gap s = i - j,
//    the principal channel mu~, gamma, Gamma, Lambda, lambda_max, lambda_min (+ sampled inner
//    estimates), and AssumptionDiagnostics per layer of any schedule.
//  * (6), Assumption IV.1: a_c, q_min(t) over the closed cap (trust-region subproblem with the
//    hard case), alpha_c(t), the PE evaluator (sliding-window integrals -> rho), Lemma IV.2's
//    eta_0, c_1, M_1.
//  * Theorem IV.1 certificate: nu_i, rho_i, C_i, M_i (13)-(15), Lemma A.1's d-sequence in the log
//    domain, Lemma A.2's C(T, theta, varrho).
//  * Section V: c_star (Frobenius / spectral / column norm), c_eff and c_eff^proof (erratum E1),
//    beta_i, kappa_i of Prop V.1.
//  * The projected variables b_i (7), V_i (8) computed stably, e_i (9); the decomposition
//    (24)-(28) of b_i'; the linearisation at a consensus point (our derivation from (5)); Lemma IV.1 Monte Carlo;
//    trajectory classification (converged to C_l(mu~), tail limsup of |z_i^mu~|).
// Channel and token indices are 0-based in code (paper's mu~ = 1 is channel 0; token i = 1 is
// row 0). Formulas that involve the token number (beta_i, kappa_i, rho_i) take the 1-based i.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "tokdyn/models/ssm.hpp"
#include "tokdyn/observers.hpp"
#include "tokdyn/schedule.hpp"

namespace tokdyn {

// =============================================================================================
// Sampling a schedule

/// Parameters at the given times (at_time).
std::vector<SsmParams> sample_times(const WeightSchedule<SsmParams>& s, const std::vector<double>& times);
/// Parameters of layers 1..depth (at_layer).
std::vector<SsmParams> sample_layers(const WeightSchedule<SsmParams>& s, long depth);
/// count equally spaced times t0 + k (t1 - t0)/(count - 1), k = 0..count-1 (count >= 2).
std::vector<double> time_grid(double t0, double t1, int count);

// =============================================================================================
// Lemma III.1 and Assumption III.1: channel bounds and spectral constants

/// Certified bounds on lambda_ij^mu for one parameter set and a sequence of len tokens (Lemma III.1, Assumption III.1):
/// Delta_lo/hi^mu = softplus(b^mu -/+ ||W^mu||) (|W^mu z| <= ||W^mu|| on the sphere);
/// lambda_lo^mu(s) = Delta_lo exp(-alpha s Delta_hi), lambda_hi^mu(s) = Delta_hi exp(-alpha s Delta_lo)
/// for alpha >= 0 (lo and hi swapped in the exponentials for alpha < 0). Attained when W = 0.
struct ChannelBounds {
  int len = 0;
  Vec delta_lo, delta_hi;  ///< n
  Mat lambda_lo, lambda_hi;  ///< n x len; column s is the gap s = i - j
};
ChannelBounds channel_bounds(const SsmParams& p, int len);

/// The constants of Assumption III.1 and Sections IV-V for a principal channel mu~.
struct SpectralConstants {
  int len = 0;
  int mu_tilde = -1;          ///< principal channel (0-based)
  bool principal = false;     ///< items 1-2 certified: lambda_lo^mu~(s) > lambda_hi^mu(s) for all s, mu != mu~
  double gamma = 0;           ///< certified lower bound on the spectral gap gamma (III.1.2)
  double Gamma = 0;           ///< certified upper bound on Gamma = max_ij Gamma_ij (§IV)
  double Lambda = 0;          ///< certified upper bound on Lambda (§IV); 0 for len = 1
  double lambda_max = 0;      ///< sup lambda_ij^mu~ (§V item 2)
  double lambda_min = 0;      ///< inf lambda_ij^mu~ (§V item 3)
  double D_norm_max = 0;      ///< sup_ij ||D_ij||_2 = max_mu max_s lambda_hi^mu(s) (Lemma III.1)
};
/// Certified constants for one parameter set. mu_tilde < 0 picks the channel with the largest
/// certified gap min_s [lambda_lo^mu(s) - max_{nu != mu} lambda_hi^nu(s)].
SpectralConstants spectral_constants(const SsmParams& p, int len, int mu_tilde = -1);
/// The same over a sample of parameter sets (a schedule on a time grid or per layer): gamma and
/// lambda_min are minima, Gamma, Lambda, lambda_max, D_norm_max maxima over the samples (the
/// inf/sup over t of the constants of Lemma III.1). mu_tilde < 0 picks it from the first sample.
SpectralConstants spectral_constants(const std::vector<SsmParams>& samples, int len, int mu_tilde = -1);
/// Principal channel with the largest certified gap, and that gap (may be <= 0).
std::pair<int, double> principal_channel(const ChannelBounds& cb);

/// Assumption III.1 items 3-7 over a sample of parameter sets: max_mu sup_t |alpha^mu| (3),
/// ||W_Delta^mu|| (4), |b_Delta^mu| (5), min_mu inf_t |b_Delta^mu| (6), sup_t ||S_BC(t)|| (7, Frobenius).
struct ParameterBounds {
  double alpha_max = 0, W_max = 0, b_max = 0, b_min = 0, S_BC_max = 0;
  /// Items 3-7 hold on the sample: every bound finite and b_min > 0.
  bool hold() const;
};
ParameterBounds parameter_bounds(const std::vector<SsmParams>& samples);

/// Monte Carlo inner estimate of the same constants: min/max over `samples` random
/// configurations Z uniform on (S^{n-1})^len of the exact lambda_ij^mu (Lemma II.1).
struct SampledSpectrum {
  double gamma = 0, Gamma = 0, Lambda = 0, lambda_max = 0, lambda_min = 0;
  long argmax_violations = 0;  ///< pairs (Z, i, j) where mu~ was not the argmax (III.1.1)
  long pairs = 0;
};
SampledSpectrum sampled_spectrum(const SsmParams& p, int len, int mu_tilde, int samples, std::uint64_t seed);

/// All lambda_ij^mu of one sequence: entry [i][j] (j <= i) is the n-vector (Lemma II.1).
std::vector<std::vector<Vec>> io_lambdas(const SsmParams& p, const Tokens& Z);

// =============================================================================================
// Assumption diagnostics per layer of any schedule

struct LayerAssumptions {
  long layer = 0;
  int mu_tilde = -1;         ///< argmax_mu of the certified gap (0-based)
  bool certified = false;    ///< III.1 items 1-2 certified at this layer (gamma > 0)
  double gamma = 0, Gamma = 0, Lambda = 0, lambda_max = 0, lambda_min = 0;  ///< certified, for mu_tilde
  int mu_attained = -1;      ///< channel attaining the largest sampled lambda_ij most often (-1: no samples)
  double gamma_sampled = 0;  ///< sampled (attained) gap for mu_attained: min over samples of lambda^mu - max others
  double S_principal = 0;    ///< (S_BC)_{mu~ mu~}: Remark IV.1's sufficient sign for PE
  double lambda_min_sym = 0; ///< lambda_min((S_BC + S_BC^T)/2): Assumption V.1 margin at this layer
};
struct AssumptionDiagnostics {
  std::vector<LayerAssumptions> layers;
  long certified_layers = 0;     ///< layers where items 1-2 are certified
  long principal_switches = 0;   ///< layers k >= 2 where mu_tilde differs from layer k-1 (Remark III.1)
  bool constant_principal = false;  ///< certified at every layer with one mu_tilde (item 1 over the run)
};
/// Diagnoses Assumption III.1 (and the sign facts of IV.1/V.1) at layers 1..depth of any
/// schedule, e.g. random weights: the principal channel per layer and its gamma, Gamma, Lambda.
/// `samples` random configurations per layer give the attained principal channel (0: skip).
AssumptionDiagnostics assumption_diagnostics(const WeightSchedule<SsmParams>& s, long depth, int len, int samples = 0,
                                             std::uint64_t seed = 0);

/// The sampled PE inequality along a record q(1..kappa) of interaction terms (§VI-B, (23)):
/// worst window average W(T) >= rho for the window T (and T* of (23)).
struct SampledPe {
  int T = 0;
  double worst_average = 0;   ///< W(T) = min over windows of the mean of q
  bool holds = false;         ///< W(T) > rho (rho = 0: admissible window)
  std::optional<int> T_star;  ///< smallest admissible window of (23)
};
SampledPe sampled_pe(const std::vector<double>& q, int T, double rho = 0.0);

// =============================================================================================
// (6), Assumption IV.1 and Lemma IV.2

/// a_c(t, z) of (6) as a function of q = z^T S_BC(t) z: gamma c (1 + c) q for q >= 0,
/// 2 (Gamma + Lambda) q for q < 0.
double a_c(double q, double c, const SpectralConstants& k);

/// Minimum of z^T S z over the closed cap {z in S^{n-1} : z^mu~ >= c} (S symmetrised): interior
/// bottom eigenvector when it reaches the cap; otherwise the boundary z = c e + sqrt(1-c^2) w,
/// w ⊥ e, |w| = 1, a trust-region subproblem solved by the secular equation, with the hard case
/// completed along the bottom eigenvector (Lemma III.1).
struct CapMinimum {
  double q_min = 0;
  Vec z;                  ///< a minimiser (unit, z^mu~ >= c)
  bool interior = false;  ///< the minimiser is a bottom eigenvector inside the cap
  bool hard_case = false; ///< trust-region hard case
};
CapMinimum cap_minimum(const Mat& S_BC, int mu_tilde, double c);
/// Validation by sampling: min of z^T S z over `samples` random cap points (half of them on the
/// boundary z^mu~ = c, the rest with z^mu~ uniform in [c, 1]).
double cap_minimum_sampled(const Mat& S_BC, int mu_tilde, double c, int samples, std::uint64_t seed);

/// alpha_c(t) = min_sigma inf_{z in Omega_c^sigma} a_c(t, z) = a_c(q_min(t)) (Assumption IV.1).
double alpha_c(const Mat& S_BC, int mu_tilde, double c, const SpectralConstants& k);

struct PeOptions {
  double c = 0.5;        ///< cap level c in ]0,1[
  double T = 1.0;        ///< window length
  double t0 = 0.0;       ///< first window start
  double starts = 1.0;   ///< window starts range over [t0, t0 + starts] (one period suffices for periodic schedules)
  int steps_per_T = 20000;  ///< trapezoid grid: T / steps_per_T
};
/// The PE evaluator (Assumption IV.1, Lemma IV.2): alpha_c on a fine grid, sliding-window
/// trapezoid integrals, rho = min over starts of (1/T) int_t^{t+T} alpha_c; eta_0, c_1, M_1.
struct PeResult {
  double c = 0, T = 0;
  double rho = 0;            ///< (1/T) min_t int_t^{t+T} alpha_c (Assumption IV.1 holds iff > 0)
  double worst_start = 0;    ///< the window start attaining the minimum
  double alpha_c_min = 0;    ///< inf_t alpha_c(t) on the grid
  double eta0 = 0;           ///< min{0, inf a_c} (Lemma IV.2)
  double c1 = 0;             ///< 1 - (1 - c) exp(eta_0 T) (Lemma IV.2)
  double M1 = 0;             ///< exp((rho - eta_0) T) (Lemma IV.2)
  std::vector<double> t, alpha;  ///< the grid and alpha_c on it
};
PeResult pe_evaluate(const WeightSchedule<SsmParams>& s, const SpectralConstants& k, const PeOptions& o);

// =============================================================================================
// Theorem IV.1 certificate, Lemmas A.1 and A.2

/// Lemma A.2: varrho = (1/2) min{-ln(theta)/T, nu}.
double discrete_iss_rate(double theta, double nu, double T);
/// Lemma A.2: C(T, theta, varrho) = (1 - theta)/(exp(-varrho T) - theta) >= 1.
double discrete_iss_constant(double T, double theta, double varrho);

/// Lemma A.1 (the d-sequence) in the log domain: d_i = 2 d_{i-1} + (2H/mu_L) sum_{j<i} sqrt(2 M_j d_j),
/// mu_L = min{1 - theta, R - r}, with d_1 found by bisection on ln d_1 as the largest value with
/// d_len <= fraction * d^max (d^max = d_eps / R; d_1 also capped by d1_cap when > 0).
struct DSequence {
  std::vector<double> log_d;      ///< ln d_i
  std::vector<double> log_d_min;  ///< ln d_i^min (-inf for i = 1)
  double log_d_max = 0;           ///< ln d^max
  double mu_L = 0;
  bool valid() const;             ///< d_i^min < d_i < d^max for every i
};
DSequence lemma_a1_sequence(double d_eps, double H, const std::vector<double>& M, double theta, double r, double R,
                            int len, double fraction = 0.5, double d1_cap = 0.0);

struct CertificateOptions {
  double eps = 0;         ///< epsilon in ]0, rho[; <= 0 means rho/2
  double R_over_r = 2.0;  ///< R = R_over_r * r (> 1)
  double M = 0;           ///< Prop IV.1's M; <= 0 means 8 sup||S_BC||_2 sup||D_ij||_2
  double fraction = 0.5;  ///< Lemma A.1 target: d_len <= fraction * d^max
};
/// Constants of the proof of Theorem IV.1 for len tokens.
struct TheoremIV1Certificate {
  int len = 0;
  double c = 0, T = 0, rho = 0, eps = 0;
  double d_eps = 0;      ///< min{1 - c, eps^2 / (8 Lambda^2 sup||S_BC||^2)} (Prop IV.1, Frobenius norm)
  double M = 0;          ///< Prop IV.1 item 2 constant
  double eta_eps = 0;    ///< min{eps, inf a_c} - eps <= 0
  double theta = 0;      ///< exp(-(rho - eps) T)
  double r = 0, R = 0;   ///< r = exp(-eta_eps T), R > r
  double H = 0;          ///< T M exp(-eta_eps T)
  std::vector<double> nu, rho_i, C_i, M_i;  ///< per token (1-based i at index i-1); nu_1, C_1 = NaN
  DSequence d;           ///< Lemma A.1
  std::vector<double> log_d() const { return d.log_d; }
};
/// sup_norm_fro / sup_norm_2: sup_t ||S_BC(t)|| in the Frobenius / spectral norm.
TheoremIV1Certificate theorem_iv1_certificate(const SpectralConstants& k, const PeResult& pe, double sup_norm_fro,
                                              double sup_norm_2, int len, const CertificateOptions& o = {});

/// Prop IV.1: d_eps = min{1 - c, eps^2/(8 Lambda^2 sup||S_BC||^2)} and M = 8 sup||S_BC||_2 sup||D||_2.
double prop_iv1_d_eps(double c, double eps, double Lambda, double sup_norm);
double prop_iv1_M(double sup_norm_2, double D_norm_max);

/// sup_t ||S_BC(t)||_F and ||S_BC(t)||_2 over samples.
double sup_kernel_norm_fro(const std::vector<SsmParams>& samples);
double sup_kernel_norm_2(const std::vector<SsmParams>& samples);

// =============================================================================================
// Section V: anisotropy, effective threshold, Prop V.1

enum class CstarNorm { Frobenius, Spectral, Column };
/// ||S_BC - ((e^mu~)^T S_BC e^mu~) I_n|| (Frobenius, spectral) or the column ||P_perp S_BC e^mu~||.
double anisotropy_numerator(const Mat& S_BC, int mu_tilde, CstarNorm norm);
/// lambda_min((S + S^T)/2) = min over unit z of z^T S z.
double kernel_lambda_min(const Mat& S_BC);

/// c_star = sup_t numerator / inf_{t,z} z^T S_BC(t) z (+inf when the denominator is <= 0: V.1
/// fails); alpha_pd = inf_{t,z} z^T S_BC z (Assumption V.1); c_eff and c_eff^proof (E1).
struct AnisotropyConstants {
  double numerator = 0;
  double alpha_pd = 0;
  double c_star = 0;
  double c_eff = 0;
  double c_eff_proof = 0;
};
AnisotropyConstants anisotropy(const std::vector<SsmParams>& samples, const SpectralConstants& k,
                               CstarNorm norm = CstarNorm::Frobenius);

/// Effective threshold (§V item 4): c_star lambda_max / sqrt((gamma + (l-1) lambda_min)^2 + c_star^2 lambda_max^2 (l-1)^2).
double c_eff_paper(double c_star, double lambda_max, double lambda_min, double gamma, int len);
/// Erratum E1: c_eff^proof = (l - 1) c_eff, the threshold Prop V.1's beta_l > 0 really needs.
double c_eff_proof(double c_star, double lambda_max, double lambda_min, double gamma, int len);
/// Prop V.1: beta_i = c (gamma + (i-1) lambda_min) - c_star lambda_max (i-1) sqrt(1 - c^2) (1-based i).
double prop_v1_beta(double c, double c_star, double gamma, double lambda_min, double lambda_max, int i);
/// Prop V.1: kappa_i = alpha_pd beta_i (1 + c).
double prop_v1_kappa(double alpha_pd, double beta, double c);

// =============================================================================================
// Projected variables (7)-(9) and the decomposition (24)-(28)

/// b_i = sigma_i z_i^mu~ (7).
double projected_b(const RowVec& z, int mu_tilde, int sigma);
/// b_i = sigma_i z_i^mu~ (7) from the principal coordinate z_mu = z_i^mu~ alone.
double projected_b(double z_mu, int sigma);
/// V_i = 1 - b_i (8), computed stably as sum_{mu != mu~} (z^mu)^2 / (1 + b_i) (1 - b^2 is that sum on the sphere; no cancellation near the pole).
double lyapunov_V(const RowVec& z, int mu_tilde, int sigma);
/// V_i (8) from b_i and the tangential mass t = sum_{mu != mu~} (z_i^mu)^2: t / (1 + b) for b > 0
/// (no cancellation near the pole), 1 - b otherwise.
double lyapunov_V(double b, double tangential);
/// |e_i| = |z_i - sigma_i e^mu~| (9) = sqrt(2 V_i).
double error_norm(const RowVec& z, int mu_tilde, int sigma);
/// A unit token with V = 1 - b of the given (tiny or not) size: z = sigma (b e + sqrt(V (2 - V)) w),
/// w a unit vector orthogonal to e^mu~ (exact tangential offset, so V keeps its digits).
RowVec token_with_V(double V, const RowVec& w, int mu_tilde, int sigma);

/// The five terms of b_i' = sigma_i z_i'^mu~ in the proof of Prop IV.1 (24)-(28), for token i
/// (0-based) of one sequence Z (len x n), S = S_BC, signs Sigma.
struct BdotDecomposition {
  double t24 = 0, t25 = 0, t26 = 0, t27 = 0, t28 = 0;
  double sum() const { return t24 + t25 + t26 + t27 + t28; }
};
BdotDecomposition bdot_decomposition(const SsmParams& p, const Tokens& Z, int i, int mu_tilde,
                                     const std::vector<int>& Sigma);
/// b_i' = sigma_i (z_i')^mu~ from the field (5) (IO form), token i (0-based).
double bdot(const SsmParams& p, const Tokens& Z, int i, int mu_tilde, int sigma);

// =============================================================================================
// Linearisation of (5) at a consensus point (our derivation; not a result of the paper), rates

/// Diagonal of the Jacobian of (5) at Z*_Sigma in tangent coordinates w_i^mu (mu != mu~):
/// -S_mu~mu~ [(lambda_ii^mu~ - lambda_ii^mu) + sum_{j<i} lambda_ij^mu~] (bilinear kernel), or with
/// the SiLU kernel K(z_i, z_j) = silu(S_C z_i)^T silu(S_B z_j):
/// -[K(s_i e, s_i e)(lambda_ii^mu~ - lambda_ii^mu) + sum_{j<i} s_i s_j K(s_i e, s_j e) lambda_ij^mu~].
/// Returns len x n; the mu~ column is 0 (not a tangent direction).
Mat consensus_linearisation_diagonal(const SsmParams& p, int len, int mu_tilde, const std::vector<int>& Sigma,
                                     bool silu_bc = false);
/// The consensus point Z*_Sigma = (s_1 e^mu~, ..., s_len e^mu~) (Definition III.1).
Tokens consensus_point(int n, int mu_tilde, const std::vector<int>& Sigma);

/// Predicted asymptotic decay rate of V_i (linearised (5), our derivation): 2 min_{i' <= i, mu != mu~} (-diagonal(i', mu)),
/// with the diagonal of consensus_linearisation_diagonal taken at time-averaged weights (e.g.
/// g = mean of g(t)). Token i (0-based) inherits the slowest rate before it through the cascade.
std::vector<double> predicted_V_rates(const Mat& diagonal, int mu_tilde);
/// Fitted exponential decay rate of a positive record: -slope of the least-squares line through
/// (t_k, ln v_k) over the points with t_k in [t_from, t_to] and v_k > floor.
double fitted_decay_rate(const std::vector<double>& t, const std::vector<double>& v, double t_from, double t_to,
                         double floor = 1e-280);

// =============================================================================================
// Lemma IV.1: positive bias of the SiLU kernel

enum class RandomEntries { Normal, Uniform };
struct SiluBiasEstimate {
  long draws = 0;
  double bilinear_mean = 0, bilinear_se = 0;  ///< z_i^T S_C^T S_B z_j
  double silu_mean = 0, silu_se = 0;          ///< silu(S_C z_i)^T silu(S_B z_j)
};
/// Monte Carlo over independent S_B, S_C (m x n) with iid zero-mean entries of standard
/// deviation `scale` (normal, or uniform on [-sqrt 3 scale, sqrt 3 scale]); seeded per draw.
SiluBiasEstimate silu_bias_monte_carlo(int m, int n, const Vec& zi, const Vec& zj, long draws, RandomEntries dist,
                                       double scale, std::uint64_t seed);
/// E[silu(X)] and E[silu(X)^2] for X ~ N(0, s^2), by Gauss-Kronrod quadrature. With unit z and
/// iid N(0, s^2) entries, E[silu(S_C z_i)^T silu(S_B z_j)] = m E[silu(X)]^2 (Lemma IV.1).
std::pair<double, double> silu_gaussian_moments(double s = 1.0);

// =============================================================================================
// Trajectory classification (Definition III.1)

/// Records, per run and token, max |z_i^mu~| over observations with t >= t_tail: the tail-window
/// estimate of limsup |z_i^mu~(t)| (Definition III.1; e.g. the last 20% of a long horizon).
class TailObserver final : public Observer {
 public:
  TailObserver(int mu_tilde, double t_tail) : mu_(mu_tilde), t_tail_(t_tail) {}
  void observe(double t, const Batch& Z) override;
  /// runs x len (zeros until the tail window starts)
  const Mat& tail_max() const { return tail_; }
  /// The tail maxima of run r as a vector (for classify_trajectory).
  std::vector<double> limsup(int r) const;

 private:
  int mu_;
  double t_tail_;
  Mat tail_;
};

struct TrajectoryClass {
  bool converged = false;       ///< max_i V_i^{Sigma_hat}(t_end) < tol, sigma_hat_i = sign(z_i^mu~(t_end))
  std::vector<int> signs;       ///< Sigma_hat
  double max_V = 0;             ///< max_i V_i (stable formula)
  std::vector<double> limsup;   ///< tail max of |z_i^mu~| (empty when not supplied)
  /// Trapping-set membership estimate: some token with limsup <= threshold (e.g. c_eff).
  bool trapped(double threshold) const;
};
/// Classifies the final state Z (len x n) of one run.
TrajectoryClass classify_trajectory(const Eigen::Ref<const Tokens>& Z, int mu_tilde, double tol,
                                    const std::vector<double>& limsup = {});

}  // namespace tokdyn
