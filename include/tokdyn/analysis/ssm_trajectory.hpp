#pragma once
// Per-trajectory quantities of "The Attention Within" (arXiv 2609.17997):
//  * The projected variables b_i (7), V_i (8) computed stably, e_i (9); the decomposition
//    (24)-(28) of b_i' (proof of Prop. IV.1).
//  * The linearisation of (5) at a consensus point (Definition III.1; our derivation, not a
//    result of the paper) and the decay rates it predicts.
//  * Trajectory classification (Definition III.1): converged to C_l(mu~), tail limsup of |z_i^mu~|.
// Channel and token indices are 0-based in code (paper's mu~ = 1 is channel 0; token i = 1 is
// row 0). Formulas that involve the token number (beta_i, kappa_i, rho_i) take the 1-based i.
#include <vector>

#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/engine/observers.hpp"

namespace tokdyn {

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
