#pragma once
// The circle (d = 2) phase model of RoPE self-attention (RoPE paper §2, eqs. (8)–(9)):
//   x_i = (cos theta_i, sin theta_i),  delta_ij = theta_i - theta_j + omega (p_i - p_j),
//   A_ij = row softmax_j of beta cos(delta_ij),
//   dtheta_i/dt = sum_j A_ij sin(theta_j - theta_i)                                        (9)
// The scores carry the RoPE phase, the motion does not (values are unrotated).
// Phases are continuous lifts in R: nothing here ever wraps them.
//
// Numerics: the row maximum of beta cos(delta_ij) is the diagonal (delta_ii = 0), so the
// max-subtracted weights are W~_ij = exp(beta (cos delta_ij - 1)) = exp(-2 beta sin^2(delta_ij / 2))
// in (0, 1] with W~_ii = 1 (no overflow for any finite beta; no cancellation in cos - 1).
//
// Invalid parameters (n, beta, omega, positions) raise std::invalid_argument (reported as std::invalid_argument, exit 2, by the parameter layer) with a one-line message
// naming the input; a batch of the wrong shape is a bug (std::logic_error, error.hpp).
#include <string>
#include <vector>

#include "tokdyn/engine/dynamics.hpp"
#include "tokdyn/core/tokens.hpp"

namespace tokdyn::rope {

/// Parameters of (9): inverse temperature beta >= 0, one RoPE frequency omega, positions p
/// (empty: p_i = i, i = 0..n-1; otherwise exactly n finite reals).
struct PhaseParams {
  double beta = 1.0;
  double omega = 0.0;
  std::vector<double> positions;

  /// std::invalid_argument (message prefixed by `what`) unless n >= 2, beta finite and >= 0, omega finite,
  /// positions empty or n finite values.
  void validate(int n, const std::string& what) const;
  /// p_i (i when positions is empty).
  double position(int i) const { return positions.empty() ? static_cast<double>(i) : positions[static_cast<std::size_t>(i)]; }
};

/// A_ij(theta): the attention matrix of (9) (row-stochastic, max-subtracted softmax).
void phase_attention(const PhaseParams& p, const Vec& theta, Mat& A);

/// (9): dtheta_i = sum_j A_ij sin(theta_j - theta_i). dtheta is resized to n = theta.size().
void phase_velocity(const PhaseParams& p, const Vec& theta, Vec& dtheta);

/// The same velocity computed independently through the Cartesian sphere field (5) with d = 2:
/// y_i = R_{p_i} x_i, s_ij = <y_i, y_j>, F_i = sum_j A_ij (x_j - <x_i, x_j> x_i), dtheta_i = <F_i, x_i^perp>.
void phase_velocity_cartesian(const PhaseParams& p, const Vec& theta, Vec& dtheta);

/// Analytic Jacobian J_ik = d(dtheta_i)/d(theta_k) of (9) at any state. With
/// s_ij = sin(theta_j - theta_i), c_ij = cos(theta_j - theta_i), sigma_ij = sin(delta_ij), F = (9),
/// mu_i = sum_j A_ij sigma_ij (the score derivatives d log W_ij / d theta_k = -beta sigma_ij (1[k=i] - 1[k=j])):
///   J_ik = A_ik c_ik + beta A_ik sigma_ik (s_ik - F_i)                                (k != i)
///   J_ii = A_ii - sum_j A_ij c_ij - beta sum_j A_ij s_ij sigma_ij + beta mu_i F_i.
/// J 1 = 0 (global phase equivariance). At a twisted state (delta = 0) this is (B-4).
void phase_jacobian(const PhaseParams& p, const Vec& theta, Mat& J);

/// A one-column batch (one run) holding the phases theta; and back.
Batch phase_batch(const Vec& theta);
Vec batch_phases(const Batch& Z, int run = 0);

/// (9) as a VectorField over a Batch whose rows are tokens with ONE column (the phase); runs of
/// n tokens are stacked. Not tangent to spheres (on_sphere() = false): integrators never retract.
class PhaseField final : public VectorField {
 public:
  /// Validates the parameters for n tokens per run (std::invalid_argument).
  PhaseField(PhaseParams p, int n);
  /// std::logic_error unless Z has one column and runs of exactly n tokens.
  void eval(double t, const Batch& Z, Tokens& dZ) const override;
  /// Exact tangent map through phase_jacobian, run by run.
  void jvp(double t, const Batch& Z, const Tokens& V, Tokens& out) const override;
  bool on_sphere() const override { return false; }
  const PhaseParams& params() const { return p_; }
  int tokens() const { return n_; }

 private:
  void check(const Batch& Z) const;
  PhaseParams p_;
  int n_;
};

}  // namespace tokdyn::rope
