#pragma once
// Transformer parts written once, each with its exact tangent (forward-mode JVP), for the decoder
// families (GPT-2, GPT-NeoX / Pythia, Llama; models/decoder/decoder.hpp). Rows are tokens; every
// function works on any block of rows and computes each row by the same code, so a caller that
// splits rows over threads gets the same bits on any thread count.
//
//   LayerNorm  y = (x - mean x) / sqrt(var x + eps) * w (+ b)
//   RMSNorm    y = x / sqrt(mean x^2 + eps) * w
//   GELU       g(u) = u Phi(u) (erf);  GELU-tanh  g(u) = u/2 (1 + tanh(sqrt(2/pi)(u + 0.044715 u^3)));
//   SiLU       s(u) = u sigma(u);      ReLU
//   rotary     pairs (i, i + r/2) (half-split, "rotate_half") or (2i, 2i + 1) (interleaved) of the
//              first r dimensions of a head rotated by the angle p * f_i, f_i the pair's frequency
//   attention  P = softmax(beta s Q K^T + mask) (row-wise), O = P V; s = 1/sqrt(head_dim)
#include <vector>

#include "tokdyn/core/tokens.hpp"

namespace tokdyn::decoder {

template <class S>
using MatT = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class S>
using VecT = Eigen::Matrix<S, Eigen::Dynamic, 1>;
using VecF = VecT<float>;

enum class NormKind { LayerNorm, RMSNorm };
enum class Act { Gelu, GeluTanh, Silu, Relu };

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
};

/// Rotates the first rot_dims entries of each head slice [c0 + h hd, c0 + h hd + hd) for heads
/// [0, heads) of rows [r0, r1) of M, row i at position (i mod T). Linear: the tangent is the same
/// rotation.
template <class S>
void rotary_rows(const RotaryTable& R, MatT<S>& M, long c0, int heads, int hd, int T, long r0, long r1);

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

}  // namespace tokdyn::decoder

#include "tokdyn/models/decoder/parts_impl.hpp"
