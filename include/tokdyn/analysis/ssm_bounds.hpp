#pragma once
// Channel bounds and assumption diagnostics of "The Attention Within" (arXiv 2609.17997), §III:
//  * Lemma III.1 / Assumption III.1: certified channel bounds lambda_lo/hi(s) per gap s = i - j,
//    the principal channel mu~, gamma, Gamma, Lambda (§IV), lambda_max, lambda_min (§V), sampled
//    inner estimates (Lemma II.1), and AssumptionDiagnostics per layer of any schedule.
//  * Sampling a schedule on a time grid or per layer (the inf/sup over t of Lemma III.1).
// Channel and token indices are 0-based in code (paper's mu~ = 1 is channel 0; token i = 1 is
// row 0). Formulas that involve the token number (beta_i, kappa_i, rho_i) take the 1-based i.
#include <cstdint>
#include <utility>
#include <vector>

#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/engine/schedule.hpp"

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

}  // namespace tokdyn
