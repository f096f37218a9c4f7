#pragma once
// The hierarchical model (C1)-(C2) of "Attention is Just Another Name for Coupling?" (§3, eq. (11)):
// block-local attention (C1) over blocks of P tokens (K = ceil(T/P), the last block possibly
// partial) and a slow path (C2): a compression Pi of each block, held as a summary ŷ_k, and a gated
// injection rho psi(ŷ) added to every token of a block (the same vector for all of them):
//
//   x_t^(l+1) = x_t^(l) + N_t^(l)(x^(l)) + rho psi(ŷ_{k(t)-1}^(l)),   k(t) = ceil(t/P)      (11)
//
// (layer k of the LayerMap maps depth l = k-1 to l+1 with the Transformer's weights r = k-1, flag F2).
// The injection goes through tf::Transformer::set_injection (the additive site of the paper).
//
// State. The held summaries are part of the state, so that the model is a LayerMap whose apply() is a
// function of its input alone and whose exact jvp() is the Jacobian of the coupled system (x, ŷ):
// every run has T + K rows, rows [0, T) the tokens, rows [T, T + K) the held summaries ŷ_1..ŷ_K.
// initial_state() builds it from the tokens (ŷ^(0) = Pi(pooled(x^(0)))).
//
// Refresh (tokdyn's reading of "refreshed every L_r layers", the paper gives no formula):
//   sample-and-hold: at depths l = 0, L_r, 2 L_r, ... (only l = 0 when L_r = 0, i.e. L_r = infinity,
//     the looped/held-for-the-pass case) ŷ_k <- Pi(pooled(block k of x^(l))) *before* the layer's
//     injection, so L_r = 1 is the cross-block chain y_k(l+1) = F(y_k(l)) + rho psi(y_{k-1}(l));
//   continuous relaxation (12) with g_Pi(x, ŷ) = Pi(x) - ŷ (flag F20: g_Pi is not given), one Euler
//     step per layer with epsilon = 1/L_r: the layer injects ŷ^(l), then ŷ^(l+1) = ŷ^(l) +
//     epsilon (Pi(pooled(x^(l))) - ŷ^(l)); L_r = 0 holds ŷ^(0) for the whole pass.
// Pooled quantity (flag F9): the duality table pools the raw stream x, Thm 9 the normalised S(x);
// default S(x) (a unit-gain norm of the model's kind and eps_S).
// Cross-block chain (C2): block k gets psi(ŷ_{k-1}), block 1 gets psi(ŷ_0) with ŷ_0 a fixed vector
// (flag F20: undefined in the paper; default 0). Literal self-loop (15): block k gets psi(ŷ_k)
// (flag F8: (15) is the block-stationary fixed point of the chain).
// Evaluation is parallel (all blocks present at every layer).
// Injection site: additive (the paper's eq. (11), through Transformer::set_injection) or inside S's
// argument (the variant §3 leaves out of scope): both norms of the Pre-LN block read S(x + a) and
// S(x_h + a), the residual stream does not carry a. That block is exactly F~(x + a) - a with F~ the
// plain block (x_h + a = (x + a) + attention), which is how it is evaluated (and differentiated:
// DF~(x + a)[dx + da] - da); Pre-LN only.
//
// Compressions (Remark 4): block mean; stride (the LAST token, x_{kP}); head (the FIRST token: the
// sector-1 spectral compression Pi~ of Thm 6 for the causal kernel, whose left Perron vector is e_1);
// top-k selector (mean of the k tokens of largest pooled norm, ties to the earlier token: NOT C^1 —
// its jvp is the a.e. derivative with the selection frozen); multi-level composition
// Pi^(J) o ... o Pi^(1) with per-level group sizes P_1..P_J (product = P) and a mean/stride/head per
// level. Injections psi: identity, linear B u, affine c + B u, tanh-MLP c + W_2 tanh(W_1 u + b_1).
// The bundle-aligned injections of (A7) (diagonal-aligned, intertwining-aligned, flag F4) depend on
// the dichotomy projectors P_±(l); they are built at the generator level (analysis/duality.hpp), not
// here.
#include <cstdint>
#include <string>
#include <vector>

#include "tokdyn/engine/dynamics.hpp"
#include "tokdyn/models/transformer/transformer.hpp"

namespace tokdyn::hier {

enum class PiKind { Mean, Stride, Head, TopK, Multi };
enum class PsiKind { Identity, Linear, Affine, TanhMlp };
enum class Refresh { SampleHold, Relaxation };
enum class Pooled { Raw, Normalised };
enum class Loop { Chain, SelfLoop };
enum class Site { Additive, InsideNorm };

/// "mean", "stride", "head", "topk", "multi"; "identity", "linear", "affine", "tanh-mlp";
/// "hold", "relax"; "raw", "normalised"; "chain", "self"; "additive", "inside". std::invalid_argument otherwise.
PiKind parse_pi(const std::string& s);
PsiKind parse_psi(const std::string& s);
Refresh parse_refresh(const std::string& s);
Pooled parse_pooled(const std::string& s);
Loop parse_loop(const std::string& s);
Site parse_site(const std::string& s);
std::string pi_name(PiKind k);

struct Compression {
  PiKind kind = PiKind::Mean;
  int topk = 1;                      ///< TopK: the number of tokens averaged
  std::vector<int> levels;           ///< Multi: group sizes P_1..P_J of the levels (product P)
  std::vector<PiKind> level_kinds;   ///< Multi: Mean, Stride or Head per level
  /// std::invalid_argument for topk < 1, levels whose product is not P, a level kind that is not
  /// mean/stride/head, or a multi-level compression of a partial block (T not a multiple of P).
  void validate(int P, int T) const;
  bool smooth() const { return kind != PiKind::TopK; }  ///< C^1 (Remark 4: selectors are not)
};

/// Pi of one block (its n rows): a d-vector.
Vec compress(const Compression& c, const Eigen::Ref<const Mat>& block);
/// DPi(block)[dblock] (linear compressions: Pi(dblock); top-k: the selection of `block` frozen).
Vec compress_tangent(const Compression& c, const Eigen::Ref<const Mat>& block, const Eigen::Ref<const Mat>& dblock);
/// The compression as a d x (n d) matrix on the row-major vec of an n-token block (top-k: at `block`).
Mat compression_matrix(const Compression& c, const Eigen::Ref<const Mat>& block);

/// The injection psi: R^d -> R^d.
struct Injection {
  PsiKind kind = PsiKind::Identity;
  Mat B;         ///< Linear, Affine: d x d
  Vec c;         ///< Affine, TanhMlp: d
  Mat W1;        ///< TanhMlp: h x d
  Vec b1;        ///< TanhMlp: h
  Mat W2;        ///< TanhMlp: d x h
  /// std::invalid_argument naming the field for a shape that does not fit d or a non-finite entry.
  void validate(int d) const;
  Vec operator()(const Vec& u) const;
  Mat jacobian(const Vec& u) const;
  /// A global Lipschitz constant: 0 (none), 1 (identity), |B|_2, |W_2|_2 |W_1|_2 (tanh' <= 1).
  double lipschitz() const;
};
/// Seeded psi of a kind on R^d: B, W1, W2 Gaussian with std scale / sqrt(fan_in), c and b1 with std
/// scale / sqrt(d); stream (seed, 0x5103, tensor).
Injection make_injection(PsiKind kind, int d, int hidden, double scale, std::uint64_t seed);

struct SlowPath {
  int P = 4;                        ///< block length (must equal the Transformer's block-local P)
  Compression pi;
  Injection psi;
  double rho = 0.0;                 ///< gate amplitude
  int L_r = 1;                      ///< refresh period (0: infinity)
  Refresh refresh = Refresh::SampleHold;
  Pooled pooled = Pooled::Normalised;
  Loop loop = Loop::Chain;
  Site site = Site::Additive;       ///< additive (eq. (11)) or inside the norms' argument (Pre-LN only)
  Vec y0;                           ///< ŷ_0 of the chain's block 1 (empty: 0)
};

class HierarchicalModel : public LayerMap {
 public:
  /// std::invalid_argument for a mask other than block-local, a block length different from the
  /// Transformer's, P > T, T < 1, a compression or injection that does not fit, a non-finite rho,
  /// L_r < 0, or a ŷ_0 of the wrong dimension.
  HierarchicalModel(tf::Transformer model, SlowPath slow, int T);

  int tokens() const { return T_; }
  int blocks() const { return K_; }
  int rows() const { return T_ + K_; }   ///< rows per run of the state
  const SlowPath& slow() const { return s_; }
  const tf::Transformer& transformer() const { return tf_; }

  /// The state of X (runs x T tokens stacked, runs*T x d): tokens and ŷ^(0) = Pi(pooled(x^(0))).
  Batch initial_state(const Mat& X, int runs = 1) const;
  /// The token rows (runs*T x d) and the summary rows (runs*K x d) of a state.
  Mat token_rows(const Batch& Z) const;
  Mat summary_rows(const Batch& Z) const;
  /// Pi(pooled(block k of X)) for every block of one run's tokens X (T x d): K x d.
  Mat pool(const Eigen::Ref<const Mat>& X) const;
  /// The summaries the injection of layer k reads (after a sample-and-hold refresh), one run: K x d.
  Mat held(long k, const Eigen::Ref<const Mat>& run) const;
  /// The T x d injection rho psi(ŷ_{k(t)-1}) added to one run at layer k (rows constant per block).
  Mat injection(long k, const Eigen::Ref<const Mat>& run) const;
  bool refreshes(long k) const;          ///< sample-and-hold refresh at the start of layer k

  void apply(long k, Batch& Z) const override;
  void jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const override;
  bool has_exact_jvp() const override { return true; }
  bool on_sphere() const override { return false; }
  std::string overflow_hint() const override { return tf_.overflow_hint(); }

 private:
  tf::Transformer tf_;
  SlowPath s_;
  int T_, K_;
  tf::Config unit_;  ///< the pooled norm (unit gains, no bias)
  Mat pooled_rows(const Eigen::Ref<const Mat>& X) const;
  Mat pooled_tangent(const Eigen::Ref<const Mat>& X, const Eigen::Ref<const Mat>& dX) const;
  Mat injection_from(const Mat& yhat) const;
  Batch tokens_batch(const Batch& Z) const;
};

}  // namespace tokdyn::hier
