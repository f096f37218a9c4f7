#pragma once
// Transformer parts written once, each with its exact tangent (forward-mode JVP), for every
// attention model: the decoder families (GPT-2, GPT-NeoX / Pythia, Llama; models/decoder/), the
// coupling paper's Transformer block (4) and hierarchical model (models/transformer/,
// models/hierarchical/) and the RoPE paper's attention (models/rope/). Rows are tokens; every
// function works on any block of rows and computes each row by the same code, so a caller that
// splits rows over threads gets the same bits on any thread count.
//
//   LayerNorm  y = (x - mean x) / sqrt(var x + eps) * w (+ b)
//   RMSNorm    y = x / sqrt(mean x^2 + eps) * w
//   GELU       g(u) = u Phi(u) (erf);  GELU-tanh  g(u) = u/2 (1 + tanh(sqrt(2/pi)(u + 0.044715 u^3)));
//   SiLU       s(u) = u sigma(u);      ReLU;  tanh
//   rotary     pairs (i, i + r/2) (half-split, "rotate_half") or (2i, 2i + 1) (interleaved) of the
//              first r dimensions of a head rotated by the angle p * f_i, f_i the pair's frequency,
//              p the token's position (0..T-1, or any given positions)
//   masks      causal, bidirectional, block-local, sliding window, leaky (future tokens weighted
//              eps), as an additive score bias (-inf where masked); ALiBi adds -slope |t - s|
//   attention  P = softmax(beta s Q K^T + mask) (row-wise), O = P V; s = 1/sqrt(head_dim)
//   softmax tangent  dP = scale P * (dS - rowsum(P * dS)) (the Jacobian of a softmax row is
//              symmetric: the same map is its reverse mode)
#include <vector>

#include "tokdyn/core/tokens.hpp"

namespace tokdyn::parts {

template <class S>
using MatT = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class S>
using VecT = Eigen::Matrix<S, Eigen::Dynamic, 1>;
using VecF = VecT<float>;

enum class NormKind { LayerNorm, RMSNorm };
enum class Act { Gelu, GeluTanh, Silu, Relu, Tanh };

/// The activation and its derivative, in the precision of S.
template <class S>
S act_value(Act a, S u);
template <class S>
S act_derivative(Act a, S u);

/// G = act(U) elementwise on a block (any shapes alike), vectorised (Eigen's packet tanh, erf,
/// exp: within a few ulp of the scalar functions); gated: G = act(U) * Up.
template <class S, class DU, class DG>
void act_block(Act a, const Eigen::ArrayBase<DU>& U, Eigen::ArrayBase<DG> const& G);

/// Normalises rows [r0, r1) of X into Y (Y has X's shape). `inv` (size X.rows(), may be null)
/// receives 1/sqrt(var + eps) (LayerNorm) or 1/sqrt(mean x^2 + eps) (RMSNorm) of each row, for
/// the tangent. b may be empty (no bias).
template <class S>
void norm_rows(NormKind kind, const MatT<S>& X, const VecT<S>& w, const VecT<S>& b, double eps, MatT<S>& Y, long r0, long r1,
               S* inv = nullptr);

/// ss[k] = sum_j double(X[k, j])^2 over j = 0 .. n-1 in increasing order, for rows k < rows (row
/// stride ld): bit for bit Eigen's X.row(k).cast<double>().squaredNorm() (a sequential sum; each
/// square is exact in double, so fused and separate multiply-adds agree). Several rows advance
/// together, one per SIMD lane, so the sequential sums do not wait on each other.
void row_sums_of_squares(const float* X, long ld, int n, int rows, double* ss);
/// The fp32 RMSNorm of the Mamba-2 block (its pre-norm and, per group, its gated norm): rows
/// [0, rows) of X (n entries, stride ldx) into Y (stride ldy; Y may be X),
/// y = x * float(1 / sqrt(sum x^2 / n + eps)) * w, the sum of squares in double
/// (row_sums_of_squares).
void rms_norm_rows_f32(const float* X, long ldx, int n, int rows, const float* w, double eps, float* Y, long ldy);

/// Tangent of norm_rows at X (whose 1/sqrt values are `inv`) along dX: rows [r0, r1) of dX map to
/// the same rows of dY; X row i of dX row j is j mod X.rows().
///   n = (x - mu) inv,  dn = inv (dxc - n mean(n dxc)),  dxc = dx - mean dx (LayerNorm; RMSNorm: no
///   centring, n = x inv),  dy = dn * w.
void norm_tangent_rows(NormKind kind, const Mat& X, const double* inv, const Vec& w, const Mat& dX, Mat& dY, long r0, long r1);

/// Rotary frequencies f_i of the pairs of the first `rot_dims` dimensions: theta^(-2i / rot_dims).
std::vector<double> rotary_frequencies(int rot_dims, double theta);

/// cos and sin of p f_i for positions p = 0..T-1: [T, rot_dims / 2] each, row p.
struct RotaryTable {
  int rot_dims = 0;
  bool interleaved = false;
  Mat cos, sin;
  RotaryTable() = default;
  RotaryTable(const std::vector<double>& freqs, int T, bool interleaved);
  /// Row p at positions[p] (any real positions: the RoPE paper's general p_i).
  RotaryTable(const std::vector<double>& freqs, const std::vector<double>& positions, bool interleaved);
};

/// Rotates the first rot_dims entries of each head slice [c0 + h hd, c0 + h hd + hd) for heads
/// [0, heads) of rows [r0, r1) of M, row i at position (i mod T). Linear: the tangent is the same
/// rotation. `inverse`: the transposed (inverse) rotation, the reverse mode of the rotation.
template <class S>
void rotary_rows(const RotaryTable& R, MatT<S>& M, long c0, int heads, int hd, int T, long r0, long r1, bool inverse = false);

/// Attention masks (which key s a query t may see) and the ALiBi position bias.
enum class MaskKind { Causal, Bidirectional, Block, Sliding, Leaky };
struct MaskSpec {
  MaskKind kind = MaskKind::Causal;
  int block = 1;            ///< Block: s and t in the same block of this many tokens (and s <= t)
  int window = 1;           ///< Sliding: t - window < s <= t
  double eps_leak = 0.0;    ///< Leaky: every key visible, the future ones (s > t) weighted eps_leak
  double alibi_slope = 0;   ///< > 0: ALiBi, score bias -slope |t - s|
};
/// The additive score bias [T, T]: 0 (or ln eps_leak for a leaky future key, minus the ALiBi
/// term) where visible, -inf where masked.
Mat score_bias(const MaskSpec& m, int T);

/// Tangent (and, the Jacobian being symmetric, reverse mode) of row-wise softmax probabilities P
/// in place: dS <- scale P * (dS - rowsum(P * dS)), over the first i + 1 entries of row i when
/// causal (the rest set to 0), over every entry otherwise (masked entries have P = 0).
template <class DP, class DS>
void softmax_tangent_rows(const Eigen::MatrixBase<DP>& P, Eigen::MatrixBase<DS> const& dS, double scale, bool causal);

/// One head of causal (or bidirectional) softmax attention on one sequence: Q [T, hd], K, V [T, hd]
/// views; P [T, T] receives the probabilities (0 above the diagonal when causal), O [T, hd] = P V.
template <class S, class DQ, class DK, class DV, class DO>
void attention_head(const Eigen::MatrixBase<DQ>& Q, const Eigen::MatrixBase<DK>& K, const Eigen::MatrixBase<DV>& V, double scale,
                    bool causal, MatT<S>& P, Eigen::MatrixBase<DO> const& O_);

/// Its tangent at (Q, K, V) with probabilities P: dS = scale (dQ K^T + Q dK^T),
/// dP = P * (dS - rowsum(P * dS)), dO = dP V + P dV.
template <class DQ, class DK, class DV, class DdQ, class DdK, class DdV, class DO>
void attention_head_tangent(const Eigen::MatrixBase<DQ>& Q, const Eigen::MatrixBase<DK>& K, const Eigen::MatrixBase<DV>& V,
                            const Mat& P, const Eigen::MatrixBase<DdQ>& dQ, const Eigen::MatrixBase<DdK>& dK,
                            const Eigen::MatrixBase<DdV>& dV, double scale, bool causal, Eigen::MatrixBase<DO> const& dO_);

}  // namespace tokdyn::parts

#include "tokdyn/models/parts/parts_impl.hpp"
