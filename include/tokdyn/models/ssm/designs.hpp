#pragma once
// Weight designs for the theory of "The Attention Within" (arXiv 2609.17997): parameter sets and
// schedules t -> (alpha, W_Delta, b_Delta, S_B, S_C) that satisfy, or deliberately violate, the
// paper's assumptions (Assumptions III.1, IV.1 and §V). Channel indices are 0-based: the paper's
// principal channel mu~ = 1 is channel 0 here.
//
// Every kernel-prescribed design is realised through our factorisation (the paper prescribes S_BC, not S_B and S_C):
//   S_C(t) = Q(t) [I_n; 0],  S_B(t) = Q(t) [S_BC(t); 0],  Q(t) = exp(t K0) in O(m), K0 skew,
// so that S_C^T S_B = S_BC(t) exactly while S_B and S_C themselves move in time (only S_BC
// enters the model, Lemma II.1). With K0 empty, Q = I and m = n.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/engine/schedule.hpp"

namespace tokdyn {

using SsmSchedule = WeightSchedule<SsmParams>;
using SsmSchedulePtr = std::shared_ptr<WeightSchedule<SsmParams>>;
/// S_BC(t): the interaction kernel as a function of time.
using KernelFn = std::function<Mat(double)>;
/// A scalar modulation g(t) of an isotropic kernel S_BC(t) = g(t) I_n.
using ScalarFn = std::function<double(double)>;

// ---------------------------------------------------------------------------------------------
// Channel parameter sets (alpha, W_Delta, b_Delta); S_B = S_C = I_n (S_BC = I_n) until a kernel
// is set with set_interaction_kernel.

/// G1, the principal channel with an exact gap (our design): n = 4, W_Delta = 0,
/// b_Delta = (1, -1, -1.5, -2), alpha = (0, 0.5, 0.5, 0.5). gamma = 1 exactly.
SsmParams design_g1();
/// G1 with a small decay on the principal channel, alpha^mu~ = alpha_principal (still principal
/// for 0.05, our variants).
SsmParams design_g1_decay(double alpha_principal = 0.05);
/// G1 with W_Delta rows ~ N(0, w_sd^2) (our variants; T7 uses w_sd = 0.1).
SsmParams design_g1_perturbed(Rng& rng, double w_sd = 0.1);
/// S-TIE channels (Remark IV.2): b_Delta = (1, 1, -1.5, -2), alpha = (0, 0, 0.5, 0.5), W = 0.
SsmParams design_tie_channels();
/// S-ANI2 (remark after Thm V.1): n = 2, b_Delta = (1, -1), alpha = (0, 0.5), W = 0,
/// S_BC = [[1, k], [-k, d]] (rows). The paper-spec design is k = 11, d = 25.
SsmParams design_ani2(double k = 11.0, double d = 25.0);
/// The S-ANI2 kernel [[1, k], [-k, d]].
Mat ani2_kernel(double k = 11.0, double d = 25.0);

// ---------------------------------------------------------------------------------------------
// Prescribed-S_BC factorisation (our factorisation)

/// Sets S_C = Q [I_n; 0] and S_B = Q [S_BC; 0] (m x n each), so that S_C^T S_B = S_BC.
/// m = 0 means m = n; Q empty means Q = I_m. Throws std::invalid_argument when m < n (S_BC has
/// rank <= m and cannot be prescribed in general), std::logic_error when shapes disagree.
void set_interaction_kernel(SsmParams& p, const Mat& S_BC, int m = 0, const Mat& Q = Mat());

/// Q(t) = exp(t K0) for a skew-symmetric K0, evaluated exactly through the real Schur form
/// K0 = U blockdiag(omega_k J) U^T (J = [[0, 1], [-1, 0]]): Q(t) = U blockdiag(rot(omega_k t)) U^T,
/// orthogonal to round-off for every t.
class SkewRotation {
 public:
  SkewRotation() = default;
  explicit SkewRotation(const Mat& K0);
  bool empty() const { return U_.size() == 0; }
  int dim() const { return static_cast<int>(U_.rows()); }
  Mat at(double t) const;
  /// The rotation frequencies omega_k (one per 2x2 block).
  const std::vector<double>& frequencies() const { return omega_; }

 private:
  Mat U_;
  std::vector<int> block_start_;  ///< first index of each 2x2 block in U's columns
  std::vector<double> omega_;
};

/// A random skew-symmetric m x m matrix (A - A^T)/2, A_ij ~ N(0, scale^2).
Mat random_skew(Rng& rng, int m, double scale = 1.0);

/// How a prescribed kernel is realised: hidden size m (0: m = n) and K0 (skew m x m; empty: Q = I).
struct KernelRealisation {
  int m = 0;
  Mat K0;
};

// ---------------------------------------------------------------------------------------------
// Scalar modulations and their integrals G(t) = int_0^t g (the exact time change t -> G(t) of the flow (5)).

double g_iso(double t);   ///< S-ISO: g(t) = 1 + 0.5 sin t
double g_pe(double t);    ///< S-PE: g(t) = 1 + 1.2 sin(2 pi t)
double g_pef(double t);   ///< S-PEF: g(t) = 1 + 2 sin(2 pi t)
double G_iso(double t);   ///< int_0^t g_iso = t + 0.5 (1 - cos t)
double G_pe(double t);    ///< int_0^t g_pe = t + (1.2 / (2 pi)) (1 - cos 2 pi t)
double G_pef(double t);   ///< int_0^t g_pef = t + (1 / pi) (1 - cos 2 pi t)

// ---------------------------------------------------------------------------------------------
// Schedules

/// t -> (channels of `base`, S_BC(t)) realised with Q(t) = exp(t K0) (our factorisation). Smooth in t.
SsmSchedulePtr prescribed_kernel_schedule(SsmParams base, KernelFn S_BC, const KernelRealisation& r = {});

/// S-ISO: S_BC(t) = g(t) I_n (c_star = 0, c_eff = 0; V.1 holds for any alpha_pd < inf g).
SsmSchedulePtr design_s_iso(SsmParams base = design_g1(), ScalarFn g = g_iso, const KernelRealisation& r = {});
/// S-PE: S_BC(t) = (1 + 1.2 sin 2 pi t) I_n: pointwise sign changes, PE holds (rho = 0.448851
/// with G1, l = 5, c = 0.5, T = 1).
SsmSchedulePtr design_s_pe(SsmParams base = design_g1(), const KernelRealisation& r = {});
/// S-PEF: S_BC(t) = (1 + 2 sin 2 pi t) I_n: PE fails (rho(T=1) < 0) yet tokens converge.
SsmSchedulePtr design_s_pef(SsmParams base = design_g1(), const KernelRealisation& r = {});
/// S-CAP kernel: diag(1, -0.5, -0.5, -0.5) + k0 sin t (e1 e2^T - e2 e1^T) (n = 4).
Mat s_cap_kernel(double t, double k0 = 0.5);
/// S-CAP (Cor IV.1, not V.1): G1 channels with s_cap_kernel; positive only on caps |z^1| > 1/sqrt 3.
SsmSchedulePtr design_s_cap(double k0 = 0.5, const KernelRealisation& r = {});
/// S-ANI2 as a (constant) schedule.
SsmSchedulePtr design_s_ani2(double k = 11.0, double d = 25.0, const KernelRealisation& r = {});
/// S-TIE (Remark IV.2): tied principal eigenvalue, with the S-ISO kernel g(t) I_n.
SsmSchedulePtr design_s_tie(ScalarFn g = g_iso, const KernelRealisation& r = {});
/// S-SW (Remark III.1 / IV.2): G1 for t < t_s; from t_s on, the b_Delta and alpha entries of
/// channels 0 and 1 are swapped (mu~ becomes channel 1). Kernel g(t) I_n (S-ISO by default).
/// The schedule reports t_s as a switching time so integrators never step across it.
SsmSchedulePtr design_s_sw(double t_s = 5.0, ScalarFn g = g_iso, const KernelRealisation& r = {});
/// S-RND (Lemma IV.1): S_B, S_C with iid N(0, s^2) entries, independent of each other and
/// redrawn every layer (seeded per layer); channels from `base` (n must match).
SsmSchedulePtr design_s_rnd(SsmParams base, int m, double s, std::uint64_t seed);

/// A schedule that uses `before(t)` for t < t_s and `after(t)` for t >= t_s, with t_s reported
/// as a switching time (layer k uses time (k-1) * period, like FunctionSchedule).
class TimeSwitchSchedule final : public WeightSchedule<SsmParams> {
 public:
  TimeSwitchSchedule(std::function<SsmParams(double)> before, std::function<SsmParams(double)> after, double t_s);
  std::shared_ptr<const SsmParams> at_layer(long k) const override;
  std::shared_ptr<const SsmParams> at_time(double t) const override;
  std::vector<double> switching_times(double t0, double t1) const override;

 private:
  std::function<SsmParams(double)> before_, after_;
  double t_s_;
};

/// Looks a design up by name ("s-iso", "s-pe", "s-pef", "s-cap", "s-tie", "s-sw", "s-ani2"),
/// with G1 channels where applicable. Throws std::invalid_argument for unknown names.
SsmSchedulePtr design_by_name(const std::string& name, const KernelRealisation& r = {});

}  // namespace tokdyn
