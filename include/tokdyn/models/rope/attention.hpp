#pragma once
// RoPE self-attention on (S^{d-1})^n ("Self-Attention Dynamics with Rotary Position Embeddings",
// §2, eqs. (1)-(7)): rotated queries and keys, unrotated values.
//  - rotate():          y_i = R_{p_i} x_i, R_p = ⊕_l rot(omega_l p) (eq. 1);
//  - attention():       A_ij = softmax_j(beta <R_{p_i} Q x_i, R_{p_j} K x_j>) (eq. 2);
//  - AttentionField:    the flow (5), dx_i = P_perp(x_i) y_i, y_i = sum_j A_ij V x_j;
//  - AttentionStep:     the normalised residual step (3), x_i <- (x_i + h y_i)/|x_i + h y_i|.
// The paper's model is the default: one head, no mask, Q = K = V = I. Multi-head, the causal mask
// and Q/K/V matrices are extensions (outside the paper's theorems).
//
// Conventions (RoPE paper §2, eq. (1); heads, masks and the plane layout are tokdyn's choices):
//  - plane l = coordinates (2l, 2l+1), 0-based ("interleaved"); rotation angle omega_l p_i,
//    counter-clockwise: (x, y) -> (c x - s y, s x + c y);
//  - heads split the d coordinates into `heads` consecutive blocks of size dh = d/heads; head h
//    attends with its block, and its RoPE planes are the planes inside the block. `freqs` lists
//    one frequency per plane of the whole vector (d/2 entries, plane l of head h is global plane
//    h dh/2 + l) or one per plane of a head (dh/2 entries, shared by every head). Empty with
//    rope = true: standard_frequencies(dh) in every head.
//
// Numerics and speed: per head, the scores S = (R Q X)(R K X)^T and the output A (X V^T) are
// matrix products (tokdyn::gemm_nt_blocked: tiles fixed by the shapes, each a single-threaded
// OpenBLAS DGEMM, or one Eigen product when small; a threaded DGEMM changes its bits with the
// thread count, fixed tiles do not). Scores that are symmetric by construction (Q and K both
// identity, or Q == K) are formed on the block upper triangle only (about half the score work)
// and mirrored, so they are exactly symmetric. A head of size 2 (d = 2) uses direct loops.
// Each row's softmax subtracts the row maximum, so no beta overflows (beta = 1e6 is fine; the
// floor e^{-2 beta} then underflows to 0). Masked entries are exactly 0.
// Threads: OpenMP over runs when there are several and the work is large (each run then on one
// thread), otherwise over the row blocks of the products and the rows of the softmax; every
// number is computed by the same code whatever the thread count, so results are bit-identical on
// any number of threads. Tiny problems start no thread team (if-clauses).
#include <memory>
#include <string>
#include <vector>

#include "tokdyn/engine/dynamics.hpp"

namespace tokdyn::rope {

/// omega_l = base^{-2(l + offset)/d}, l = 0..d/2-1 (d even >= 2). (1, 0.01) for d = 4.
std::vector<double> standard_frequencies(int d, double base = 10000.0, int offset = 0);

/// a_{beta,n} = 1/(1 + (n-1) e^{2 beta}) = e^{-2 beta}/(n - 1 + e^{-2 beta}) (eq. 7), evaluated in the
/// overflow-free second form (it underflows to 0 for beta > ~372). std::invalid_argument for n < 2, beta < 0
/// or non-finite beta.
double softmax_floor(double beta, int n);

struct AttentionParams {
  int d = 2;                      ///< token dimension
  double beta = 1.0;              ///< inverse temperature (>= 0, finite)
  std::vector<double> positions;  ///< p_i; empty: 0..n-1
  std::vector<double> freqs;      ///< omega per plane (d/2 or d/(2 heads) entries); empty: standard
  bool rope = true;               ///< rotate queries and keys (values are never rotated)
  bool causal = false;            ///< causal mask (token i attends to j <= i)
  int heads = 1;                  ///< number of heads (equal consecutive coordinate blocks)
  Mat Q, K, V;                    ///< d x d; empty = identity (the paper)

  /// std::invalid_argument (one line, naming `what` and the expected value) for: d < 1, heads < 1 or not
  /// dividing d, odd d or odd head size with RoPE, n < 2, beta < 0 or non-finite, positions not
  /// empty and not n entries or non-finite, freqs of the wrong length or non-finite, Q/K/V not
  /// empty and not d x d or non-finite.
  void validate(int n, const std::string& what) const;
  /// Head size d / heads.
  int head_dim() const { return heads > 0 ? d / heads : d; }
  /// The paper's model: one head, no mask, Q = K = V = I (RoPE on or off).
  bool is_paper_model() const { return heads == 1 && !causal && Q.size() == 0 && K.size() == 0 && V.size() == 0; }
  /// Frequency of every plane of the whole vector (d/2 entries) after defaults; empty without RoPE.
  std::vector<double> plane_frequencies() const;
  /// Position of token i after defaults.
  double position(int i) const { return positions.empty() ? static_cast<double>(i) : positions[static_cast<std::size_t>(i)]; }
};

/// Y_i = R_{p_i} X_i per head block (X: n x d). Y = X when P.rope is false. Y may not alias X.
void rotate(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, Tokens& Y);

/// Attention of one sequence X (n x d): A (heads*n x n, rows [h n, (h+1) n) are head h), each
/// row stochastic (masked entries exactly 0). With `scores`, also the raw scores
/// s_ij = <R_{p_i} Q x_i, R_{p_j} K x_j> of each head (same shape, masked entries included).
void attention(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, Mat& A, Mat* scores = nullptr);

/// The attention output y_i = sum_j A_ij V x_j of one sequence (head blocks concatenated), n x d.
void attention_output(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, Tokens& Y);

namespace detail {
struct Resolved;  // parameters with defaults filled in and rotation tables precomputed
}

/// The flow (5): dx_i/dt = y_i - <x_i, y_i> x_i, y_i = sum_j A_ij(x) V x_j (per head block), for
/// every run of a batch of runs x n tokens (same parameters for every run).
class AttentionField final : public VectorField {
 public:
  explicit AttentionField(AttentionParams P, int n);
  ~AttentionField() override;
  AttentionField(const AttentionField&) = delete;
  AttentionField& operator=(const AttentionField&) = delete;
  void eval(double t, const Batch& Z, Tokens& dZ) const override;
  /// Exact tangent: dy_i = sum_j (dA_ij V x_j + A_ij V v_j), dA_ij = beta A_ij (ds_ij - sum_k A_ik ds_ik),
  /// ds_ij = <R_i Q v_i, R_j K x_j> + <R_i Q x_i, R_j K v_j>; then d(y - <x, y> x). About two
  /// attention passes (it forms the scores and their tangents per head; plain Eigen products).
  void jvp(double t, const Batch& Z, const Tokens& V, Tokens& out) const override;
  bool has_exact_jvp() const override { return true; }
  const AttentionParams& params() const { return P_; }
  int tokens() const { return n_; }

 private:
  AttentionParams P_;
  int n_;
  std::unique_ptr<const detail::Resolved> R_;
};

/// The normalised residual step (3): x_i <- (x_i + h y_i)/|x_i + h y_i| (all tokens updated from
/// the same state; a zero vector is left unnormalised).
class AttentionStep final : public LayerMap {
 public:
  AttentionStep(AttentionParams P, int n, double h);
  ~AttentionStep() override;
  AttentionStep(const AttentionStep&) = delete;
  AttentionStep& operator=(const AttentionStep&) = delete;
  void apply(long k, Batch& Z) const override;
  /// Exact tangent of (3): Dpi(u)[v + h dy], u = x + h y, Dpi(u)[w] = (w - pi <pi, w>)/|u|.
  void jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const override;
  bool has_exact_jvp() const override { return true; }
  /// Exact transpose product (reverse mode through the same quantities as jvp; ~3 attention passes).
  void vjp(long k, const Batch& Z, const Tokens& W, Tokens& out) const override;
  bool has_vjp() const override { return true; }
  double step() const { return h_; }
  /// Tap "attention": the attention weights at the state entering layer k, [runs, heads, n, n]
  /// (row t of head h: the weights token t gives the tokens), computed only when asked for.
  std::vector<std::string> tap_names() const override { return {"attention [runs, heads, tokens, tokens]"}; }

 private:
  AttentionParams P_;
  int n_;
  double h_;
  std::unique_ptr<const detail::Resolved> R_;
};

}  // namespace tokdyn::rope
