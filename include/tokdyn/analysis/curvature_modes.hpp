#pragma once
// Slow-mode / fast-mode decomposition of generator perturbations dA(l) by the dichotomy projectors
// (coupling paper §4.2, (A6); spec §2.13, §6.3 E6).
//
// A perturbation dA(l) of the generator maps the fibre at depth l to the fibre at depth l+1, so its
// four blocks are P_a(l+1) dA(l) P_b(l), a, b in {+, -}, with P_+(l) the projector onto the
// persistent bundle V_par(l) along the decaying bundle V_perp(l) and P_- = I - P_+:
//   slow-mode (persistent block)  P_+(l+1) dA(l) P_+(l)
//   skew blocks                   P_+(l+1) dA(l) P_-(l),  P_-(l+1) dA(l) P_+(l)
//   decaying block                P_-(l+1) dA(l) P_-(l)
//   fast-mode (the paper's)       P_-(l+1) dA(l): range in the decaying bundle
// Over a window of layers, each is summed as squared Frobenius norms and divided by
// sum_l ||dA(l)||_F^2 (the fractions of E6). The projectors are oblique in general, so the four
// block fractions need not add up to 1 (they do when P_± are orthogonal; a block's norm can reach
// ||P_±||^2 ||dA||^2, so a fraction can exceed 1; the shares divide by the four blocks' sum instead
// and stay in [0, 1]); a perturbation that is
// exactly slow-mode (dA = P_+ E P_+) has slow fraction 1, exactly fast-mode (dA = P_- E) has fast
// range fraction 1, whatever the angle between the bundles.
//
// LayerNorm's neutral direction (F19): for a Pre-LN LayerNorm stack, A(l) u = 0 for every
// u = e_t (x) 1_d (a token's constant direction), so growth scale 1 is always in the spectrum and
// there is no dichotomy on R^{T d}. The cocycle is taken on the quotient by those T directions:
// with Q an orthonormal basis of their complement, the quotient generator is Q^T (I + A(l)) Q and a
// perturbation's quotient is Q^T dA(l) Q (dA(l) u = 0 too; the part of dA's range along the
// constant directions is dropped, and reported as the neutral fraction).
#include <string>
#include <vector>

#include "tokdyn/analysis/cocycle.hpp"

namespace tokdyn::cocycle {

/// ||M||_2 = sqrt(lambda_max(M^T M)) by a symmetric eigensolver (values only): far faster than a
/// Jacobi SVD at a model's state sizes (hundreds), accurate to round-off relative to ||M||_2.
double curvature_modes_norm2(const Matrix& M);

/// Orthonormal basis (T d x T (d - 1)) of the complement of the T directions e_t (x) 1_d (state
/// index t d + i, token-major), block diagonal: each token's block is the same d x (d - 1) basis.
/// std::invalid_argument for tokens < 1 or d < 2.
Matrix ones_complement(long tokens, long d);

/// max over layers l and tokens t of |A(l) u_t| / max(|A(l)|_F, tiny), u_t = e_t (x) 1_d / sqrt(d):
/// 0 (to round-off) when every token's constant direction is in the kernel of every A(l).
double ones_kernel_residual(const std::vector<Matrix>& A, long tokens, long d);

/// The squared Frobenius norms of the blocks of one perturbation, summed over the window.
struct BlockSplit {
  double pp = 0, pm = 0, mp = 0, mm = 0;  ///< P_a(l+1) dA(l) P_b(l), a b = ++, +-, -+, --
  double fast_range = 0;                  ///< P_-(l+1) dA(l)
  double total = 0;                       ///< dA(l)
  double slow_fraction() const { return pp / total; }
  double fast_fraction() const { return mm / total; }
  double cross_plus_minus() const { return pm / total; }
  double cross_minus_plus() const { return mp / total; }
  double fast_range_fraction() const { return fast_range / total; }
  /// (pp + pm + mp + mm) / total: 1 for orthogonal projectors.
  double block_sum() const { return (pp + pm + mp + mm) / total; }
  /// The blocks' shares of their own sum, in [0, 1] whatever the projectors' obliqueness (equal to
  /// the fractions for orthogonal ones): pp / (pp + pm + mp + mm), mm / (...).
  double slow_share() const { return pp / (pp + pm + mp + mm); }
  double fast_share() const { return mm / (pp + pm + mp + mm); }
};

/// dA[l] (l = 0..L-1, each n x n) against projectors P_plus[l] (l = 0..L: the fibre of depth l).
/// std::invalid_argument for mismatched counts or shapes, or a zero perturbation.
BlockSplit split_blocks(const std::vector<Matrix>& dA, const std::vector<Matrix>& P_plus);

/// Whether the projectors are what they should be, worst over the layers:
///   idempotence  ||P_+^2 - P_+||_2 / ||P_+||_2
///   complement   (||P_+ P_-||_2 + ||P_- P_+||_2) / ||P_+||_2 with P_- = I - P_+ (P_+ P_- = 0)
///   sum          ||P_+ + P_- - I||_2
///   trace        |trace P_+ - k| (the rank of a projector is its trace; k = dim V_par)
///   invariance   ||P_+(l+1) B(l) - B(l) P_+(l)||_2 / (||B(l)||_2 ||P_+||_2)
/// (P_+ = 0 when k = 0: every residual is 0.)
struct ProjectorResiduals {
  double idempotence = 0, complement = 0, sum = 0, trace = 0, invariance = 0;
  std::vector<double> p_plus_norm;  ///< ||P_+(l)||_2 per fibre
  std::vector<double> idempotence_l, invariance_l;
};
ProjectorResiduals projector_residuals(const Cocycle& c, const Bundles& b);

}  // namespace tokdyn::cocycle
