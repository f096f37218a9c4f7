#pragma once
// The selective state-space (Mamba-2-like) token model of "The Attention Within" (arXiv
// 2609.17997), per channel mu = 1..n with hidden state h_i^mu in R^m, in three forms:
//  (a) SsmLayer(form = Recurrence): the hidden-state recurrence (1) and normalised step (2);
//  (b) SsmLayer(form = InputOutput): the input-output form of Lemma II.1 (beta_ij, D_ij);
//  (c) SsmFlow: the continuous-time field (5) on (S^{n-1})^len.
// Switches: SiLU on the B and C branches; the output gate g(z) ⊙ r; any schedule over depth.
#include <functional>
#include <memory>
#include <string>

#include "tokdyn/engine/dynamics.hpp"
#include "tokdyn/engine/schedule.hpp"

namespace tokdyn {

/// Parameters of one layer (or one instant of the flow). Channel mu is row/entry mu.
struct SsmParams {
  Vec alpha;     ///< alpha^mu, decay rates (n)
  Mat W_delta;   ///< n x n; row mu is W_Delta^mu (1 x n)
  Vec b_delta;   ///< b_Delta^mu (n)
  Mat S_B;       ///< m x n input matrix
  Mat S_C;       ///< m x n output matrix
  Mat W_g;       ///< n x n gate weights (only for GateKind::Silu; may be empty otherwise)
  Vec b_g;       ///< n gate bias (only for GateKind::Silu)

  int n() const { return static_cast<int>(alpha.size()); }
  int m() const { return static_cast<int>(S_B.rows()); }
  /// S_BC = S_C^T S_B (n x n), the interaction kernel.
  Mat S_BC() const { return S_C.transpose() * S_B; }
  /// Throws std::logic_error when shapes disagree (tokdyn builds them: a bug, error.hpp) and
  /// std::invalid_argument when entries are not finite.
  void validate(bool need_gate) const;
};

/// The output gate's form. The paper leaves it unspecified (§II-B); tokdyn offers
///  Off:      g = 1 (the paper's analysed model);
///  Silu:     g(z) = SiLU(W_g z + b_g), mirroring the real block's SiLU(z-branch) gate;
///  Constant: g = gate_const * 1 (equivalent to rescaling tau).
enum class GateKind { Off, Silu, Constant };

struct SsmOptions {
  double tau = 0.1;         ///< step size of the normalised residual update (2)
  bool silu_bc = false;     ///< SiLU on the B and C branches (B = Delta SiLU(S_B z), C = SiLU(S_C z))
  GateKind gate = GateKind::Off;
  double gate_const = 1.0;
};

enum class SsmForm { Recurrence, InputOutput };


/// Per-token quantities shared by every form, for all rows of Z (N x n, N = runs*len):
/// Delta = softplus(Z W_Delta^T + b^T) (N x n), A = exp(-alpha Delta), Bz = branch(S_B z) (N x m), Cz = branch(S_C z),
/// G = gate (N x n, empty when off). One batched matrix product each.
struct SsmBranches {
  Mat Delta, A, Bz, Cz, G;  ///< A = exp(-alpha ⊙ Delta), the decay scalars a_i^mu
};
void ssm_branches(const SsmParams& p, const SsmOptions& o, const Tokens& Z, SsmBranches& out);

/// Readout r_i = sum_{j<=i} beta_ij z_j of one sequence (rows [row0, row0+len) of Z), written
/// into R's matching rows. Recurrence: through h_i^mu. InputOutput: through the kernel
/// K_ij = C_i . B_j and lambda_ij^mu = Delta_j^mu prod_{l=j+1..i} exp(-alpha^mu Delta_l^mu).
void ssm_readout(SsmForm form, const SsmParams& p, const SsmBranches& br, const Tokens& Z,
                 Eigen::Index row0, int len, Tokens& R);

/// Lemma II.1 objects of one sequence Z (len x n), straight from the definitions (for checks):
/// lambda_ij^mu = Delta_j^mu exp(d_ij^mu), d_ij^mu = -alpha^mu sum_{l=j+1}^{i} Delta_l^mu.
Vec io_lambda(const SsmParams& p, const Tokens& Z, int i, int j);
/// Interaction kernel: z_i^T S_BC z_j, or SiLU(S_C z_i)^T SiLU(S_B z_j) with the SiLU.
double interaction_kernel(const SsmParams& p, bool silu_bc, const RowVec& zi, const RowVec& zj);
/// Step sizes Delta^mu(z) = softplus(W_Delta^mu z + b^mu).
Vec step_sizes(const SsmParams& p, const RowVec& z);

/// Exact tangent of the gated readout: for every run, Y = g ⊙ r(Z) (g = 1 when the gate is off)
/// and dY = D(g ⊙ r)(Z)[V] (input-output form, forward mode through Delta = softplus, the decay
/// products, the SiLU branches SiLU'(x) = s(x)(1 + x(1 - s(x))) and the gate). Both resized.
void ssm_tangent(const SsmParams& p, const SsmOptions& o, const Batch& Z, const Tokens& V, Tokens& Y, Tokens& dY);

/// The discrete layer: z_i <- pi(z_i + tau g(z_i) ⊙ r_i), with parameters from a schedule.
class SsmLayer final : public LayerMap {
 public:
  SsmLayer(std::shared_ptr<const WeightSchedule<SsmParams>> sched, SsmOptions opt,
           SsmForm form = SsmForm::InputOutput);
  void apply(long k, Batch& Z) const override;
  /// Exact tangent of (2) (both forms compute the same map): ssm_tangent for dr, then
  /// d(g ⊙ r) and Dpi(u)[du] = (du - pi <pi, du>)/|u|. About two forward readouts per call.
  void jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const override;
  bool has_exact_jvp() const override { return true; }
  /// q_i = interaction kernel of token i with itself, for the state entering layer k (§VI-B):
  /// q (runs x len).
  void interaction_terms(long k, const Batch& Z, Mat& q) const;
  const SsmOptions& options() const { return opt_; }
  /// Tap "q" (dynamics.hpp TapObserver): q_i = C_i . B_i of the state entering layer k,
  /// [runs, tokens] in double, as apply() computes it (no extra matrix products).
  std::vector<std::string> tap_names() const override { return {"q [runs, tokens]"}; }

 private:
  std::shared_ptr<const WeightSchedule<SsmParams>> sched_;
  SsmOptions opt_;
  SsmForm form_;
};

/// The flow (5): dz_i/dt = (I - z_i z_i^T) g(z_i) ⊙ sum_{j<=i} beta_ij(t) z_j, parameters
/// at_time(t) of the schedule (gate off by default, as in the paper).
class SsmFlow final : public VectorField {
 public:
  SsmFlow(std::shared_ptr<const WeightSchedule<SsmParams>> sched, SsmOptions opt);
  void eval(double t, const Batch& Z, Tokens& dZ) const override;
  /// Exact tangent of (5), including the derivative of the projection (I - x x^T/|x|^2).
  void jvp(double t, const Batch& Z, const Tokens& V, Tokens& out) const override;
  bool has_exact_jvp() const override { return true; }
  std::vector<double> switching_times(double t0, double t1) const override {
    return sched_->switching_times(t0, t1);
  }

 private:
  std::shared_ptr<const WeightSchedule<SsmParams>> sched_;
  SsmOptions opt_;
};

}  // namespace tokdyn
