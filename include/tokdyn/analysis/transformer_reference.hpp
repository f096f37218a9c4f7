#pragma once
// The homogeneous manifold, the reference trajectory and the exact linearisation of the
// Transformer block along it (coupling paper Lemma 2, eqs. (7)-(9), Thm 3).
//
// Layer r = 0..L-1 maps x*(r) -> x*(r+1) with the weights of LayerMap layer k = r + 1 (flag F2).
// At each layer (Pre-LN, §2.7):
//   x_h = x* + W_V S_1(x*)                                  (half-step state)
//   V   = W_V DS_1(x*)
//   M~  = W_2 diag(phi'(W_1 S_2(x_h) + b_1)) W_1 DS_2(x_h)  (exact, at the half step)
//   M_paper = W_2 diag(phi'(W_1 S_2(x*) + b_1)) W_1 DS_2(x*)    (eq. (7), at x*)
//   A^ex = M~ + V + M~ V  (I + A^ex is the Jacobian of the reduced map),  A^paper = M_paper + V;
//   sector maps: exact (I + M~)(I + lambda V), paper form I + M_paper + lambda V.
// The exact Jacobian of the block at X* = 1 x*^T (flag F1: eq. (8) is not it) is
//   J = I_T ⊗ (I + M~) + alpha ⊗ ((I + M~) V),
// with alpha the attention matrix at X* (the frozen kernel 1/t for the causal mask, Thm 3(1)).
// Kronecker convention: (A ⊗ B) acts on X as A X B^T; matrices here act on the row-major vec of X
// (index t d + i), where vec(A X B^T) = (A ⊗ B) vec(X).
#include <vector>

#include "tokdyn/models/transformer/transformer.hpp"

namespace tokdyn::tf {

enum class Form { Exact, Paper };

struct LayerGenerators {
  long r = 0;           ///< layer index (weights of LayerMap layer r + 1)
  Vec x, x_h;           ///< x*(r) and the half-step state
  Mat DS_x, DS_h;       ///< DS_1(x*), DS_2(x_h)
  Mat V, M_tilde, M_paper, A_exact, A_paper;
};

/// The generators of layer r at the homogeneous state x (Pre-LN only: std::invalid_argument for a
/// Post-LN model, whose reduced-map Jacobian reduced_jacobian() gives instead).
LayerGenerators layer_generators(const Transformer& tf, long r, const Vec& x);

/// x*(0..L) by the reduced map (Lemma 2) and the generators of layers 0..L-1 (Pre-LN).
struct Reference {
  std::vector<Vec> x;                  ///< L + 1 states
  std::vector<LayerGenerators> layers; ///< L layers
};
Reference reference_trajectory(const Transformer& tf, const Vec& x0, int L);
/// The states x*(0..L) only (any placement).
std::vector<Vec> reference_states(const Transformer& tf, const Vec& x0, int L);

/// I + A(r) for r = 0..L-1 (exact: (I + M~)(I + V); paper: I + M_paper + V), dense d x d: the
/// tangent cocycle's layer maps Phi(r+1, r).
std::vector<Mat> tangent_sequence(const Reference& ref, Form form);
/// The sector map of eigenvalue lambda: exact (I + M~)(I + lambda V), paper I + M_paper + lambda V.
Mat sector_map(const LayerGenerators& g, double lambda, Form form);

/// I ⊗ B + alpha ⊗ C on the row-major vec of a T x d state (Td x Td).
Mat kron_sum(const Mat& alpha, const Mat& B, const Mat& C);
/// J_exact = I ⊗ (I + M~) + alpha ⊗ (I + M~) V and J_paper = I ⊗ (I + M_paper) + alpha ⊗ V (eq. (8)).
Mat jacobian_from_generators(const LayerGenerators& g, const Mat& alpha, Form form);

/// The Jacobian of layer k of the block at the T x d state X (one run), Td x Td on the row-major
/// vec: analytically (columns of the exact jvp) or by central differences with step h.
Mat block_jacobian(const Transformer& tf, long k, const Mat& X);
Mat block_jacobian_fd(const Transformer& tf, long k, const Mat& X, double h = 1e-6);
/// The d x d Jacobian of the reduced map of layer k at x (exact jvp of the block on one token) and
/// by central differences of Transformer::reduced_map.
Mat reduced_jacobian(const Transformer& tf, long k, const Vec& x);
Mat reduced_jacobian_fd(const Transformer& tf, long k, const Vec& x, double h = 1e-6);

/// 1 x^T with T rows.
Mat homogeneous(const Vec& x, int T);

}  // namespace tokdyn::tf

namespace tokdyn::tf {

/// Prop 1's bound on the step of one Pre-LN block (unit gains scale sqrt(d) by ||g||_inf; LayerNorm's
/// bias adds ||beta||):
///   C_N = ||W_V|| s_1 + ||W_2|| (L_phi (||W_1|| s_2 + ||b_1||) + |phi(0)| sqrt(d_ff)) + ||b_2||,
/// s_i = ||g_i||_inf sqrt(d) + ||beta_i|| (2-norms by SVD).
double step_bound(const Config& c, const LayerWeights& W);

/// Lemma 16 (Post-LN): a zero of y(x) = x + W_2 phi(W_1 x + b_1) + b_2 (the MLP sublayer's
/// residual, whose preimage of the norm's singular set {0} is weight-dependent) by Newton's method
/// from x0. Returns the point and sets `residual` to |y(x)|; std::domain_error if Newton fails.
Vec postln_singular_point(const Config& c, const LayerWeights& W, const Vec& x0, double& residual);

}  // namespace tokdyn::tf
