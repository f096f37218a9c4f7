#pragma once
// The depth–coarse-grain duality of the coupling paper (Thm 6, Remark 6, App. B.2) and the
// quantities of Thm 9, on the block-local linearised full flow at a homogeneous reference with the
// held summary ŷ fixed (so differences of solutions follow the homogeneous linear flow).
//
// A sector-structured flow holds, per layer l, two d x d matrices B0(l), B1(l) such that one layer
// maps a T x d deviation dX (blocks of P tokens, the last possibly partial) to
//   dX' = dX B0^T + alpha*_blk dX B1^T,     alpha*_blk = I_K ⊗ alpha*_P (Thm 3(1), block-local),
// and the sector map of eigenvalue lambda is B0 + lambda B1 (Thm 3(2)):
//   exact Transformer form (flag F1): B0 = I + M~, B1 = (I + M~) V   (sector (I + M~)(I + lambda V));
//   paper form (8) and the G-level family G4: B0 = I + M, B1 = V.
// The tangent cocycle Phi(l, s) is the sector lambda = 1.
//
// Head/difference coordinates (no eigenvectors, perfectly conditioned, §7.3): the sector-1
// coefficient of a block is its head token, dX^H = 1 dx_head^T per block, dX^perp = dX - dX^H (the
// fluctuation subspace {head = 0}); Pi~ (the spectral compression of Thm 6(3)) reads the head
// token. iota broadcasts block values back to H_P.
#include <cstdint>
#include <vector>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/models/hierarchical/hierarchical.hpp"
#include "tokdyn/core/tokens.hpp"

namespace tokdyn::duality {

using cocycle::Matrix;

struct SectorFlow {
  std::vector<Matrix> B0, B1;
  long length() const { return static_cast<long>(B0.size()); }
  long dim() const { return B0.empty() ? 0 : B0[0].rows(); }
  Matrix sector(long l, double lambda) const;      ///< B0(l) + lambda B1(l)
  std::vector<Matrix> sector_sequence(double lambda, long first = 0, long last = -1) const;
  cocycle::Cocycle tangent() const;                ///< lambda = 1
};

/// From a Transformer reference (layer_generators along x*): exact or paper form (F1).
SectorFlow from_reference(const tf::Reference& ref, tf::Form form);
/// G4 (sector-structured, paper form): M(l) = R diag(m) R^T, V(l) = R diag(v) R^T, R(l) a slow rotation.
SectorFlow from_g4(long L, const std::vector<double>& m, const std::vector<double>& v, double omega, std::uint64_t seed);

/// One layer of the full flow on a T x d deviation (blocks of P).
Mat full_step(const SectorFlow& f, long l, int P, const Mat& dX);
/// Phi^full(l1, l0) dX.
Mat full_flow(const SectorFlow& f, int P, const Mat& dX, long l0, long l1);
/// Phi^full(l1, l0) on one block of n tokens as a dense (n d) x (n d) matrix on the row-major vec.
Matrix full_matrix(const SectorFlow& f, int n, long l0, long l1);
/// Phi(l1, l0) of the tangent cocycle (dense d x d).
Matrix tangent_product(const SectorFlow& f, long l0, long l1);

/// Block heads (K x d), the H_P part 1 dx_head^T (T x d) and iota (K x d -> T x d).
Mat heads(const Mat& dX, int P);
Mat homogeneous_part(const Mat& dX, int P);
Mat iota(const Mat& Y, int T, int P);
/// Pi of every block (K x d) for a linear compression.
Mat compress_blocks(const hier::Compression& c, const Mat& X, int P);
/// iota (1 x n block) as a (n d) x d matrix.
Matrix iota_matrix(int n, long d);

/// Growth envelope of a cocycle: the upper end r of the Bohl interval of its top QR exponent
/// (Steklov window H over the whole length) and C = max over starts s (every `stride`) and n of
/// |Phi(s+n, s)| / r^n.
struct Envelope {
  double r = 0.0, C = 1.0;
};
Envelope envelope(const std::vector<Matrix>& B, long H, long stride);
/// (A5): r_f, C_f over the fluctuation sectors lambda_j = 1/j, j = 2..P.
Envelope fluctuation_envelope(const SectorFlow& f, int P, long H, long stride);

/// C_sharp(l) = ||Phi^full(l, 0) restricted to the fluctuation subspace||_2 (flag F16), l = 0..L,
/// the largest over the block lengths present (P and the partial last block).
std::vector<double> sharp_constant(const SectorFlow& f, int T, int P);

/// Remark 6 error on one block of n tokens: ||Phi^full(l, 0) - iota Phi(l, l0) Pi Phi^full(l0, 0)||_2
/// (Pi a linear compression; l0 = 0 is the one-shot formula).
double remark6_error(const SectorFlow& f, const hier::Compression& pi, int n, long l, long l0);

/// Bundle-aligned linear injections Dpsi(l) for (A7) at the G-level (flag F4), from the dichotomy
/// projectors P_+(l), l = 0..L, of the cocycle B(l):
///   same-index ("diagonal-aligned"): D(l) = c_+ P_+(l) + c_- P_-(l), which commutes with P_±(l) — the
///     paper's (A7); it preserves the bundles of B + rho D only when P_± is depth-constant;
///   intertwining: D(l) = B(l) (c_+ P_+(l) + c_- P_-(l)), for which P_±(l+1) D(l) = D(l) P_±(l) (the
///     relation exact bundle preservation needs, F4).
std::vector<Matrix> aligned_same_index(const cocycle::Bundles& b, double c_plus, double c_minus);
std::vector<Matrix> aligned_intertwining(const std::vector<Matrix>& B, const cocycle::Bundles& b, double c_plus, double c_minus);
/// max_l ||P_+(l+1) M(l) - M(l) P_+(l)||_2 for a sequence M(l), l = 0..L-1 (the invariance residual).
double intertwining_residual(const std::vector<Matrix>& M, const cocycle::Bundles& b);

}  // namespace tokdyn::duality
