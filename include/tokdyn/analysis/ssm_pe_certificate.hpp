#pragma once
// Persistency of excitation and the certificate of Theorem IV.1 of "The Attention Within"
// (arXiv 2609.17997), §IV, §VI-B and App. A:
//  * (6), Assumption IV.1: a_c, q_min(t) over the closed cap (trust-region subproblem with the
//    hard case), alpha_c(t), the PE evaluator (sliding-window integrals -> rho), Lemma IV.2's
//    eta_0, c_1, M_1; the sampled PE inequality of §VI-B, eq. (23).
//  * Theorem IV.1 certificate: nu_i, rho_i, C_i, M_i (13)-(15), Lemma A.1's d-sequence in the log
//    domain, Lemma A.2's C(T, theta, varrho), Prop. IV.1's d_eps and M.
// Channel and token indices are 0-based in code (paper's mu~ = 1 is channel 0; token i = 1 is
// row 0). Formulas that involve the token number (beta_i, kappa_i, rho_i) take the 1-based i.
#include <optional>
#include <vector>

#include "tokdyn/analysis/ssm_bounds.hpp"

namespace tokdyn {

// =============================================================================================
// Sampled PE inequality (§VI-B, (23))

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

}  // namespace tokdyn
