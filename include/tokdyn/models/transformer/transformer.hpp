#pragma once
// The Transformer block of "Attention is Just Another Name for Coupling?" (§2, eqs. (1)-(5)):
// single-head self-attention (d_k = d_v = d, no output projection W_O) and an MLP, each behind a
// norm S, as one depth step of a LayerMap over a Batch (runs x T tokens x d, double).
//
//   Pre-LN (the paper's block, eq. (4)):
//     z   = S_1(x_t);  x_h,t = x_t + sum_s alpha_ts W_V z_s;
//     x'_t = x_h,t + W_2 phi(W_1 S_2(x_h,t) + b_1) + b_2
//   Post-LN (§2.2, Lemma 16):
//     x_h,t = S_1(x_t + sum_s alpha_ts W_V x_s);  x'_t = S_2(x_h,t + W_2 phi(W_1 x_h,t + b_1) + b_2)
//
// Multi-head (an extension; the paper has one head): head h of H uses the coordinates
// [h d/H, (h+1) d/H) of Q, K, V; the heads' outputs are concatenated (still no W_O). On H every head
// is uniform, so Lemma 2, Thm 3 and Prop 8 hold unchanged.
// Scores (eq. 1): u_ts = <R_t W_Q a_t, R_s W_K a_s> / tau + B_ts, where a = S_1(x) (Pre-LN) or x
// (Post-LN), R_t the RoPE rotation of position t (identity without RoPE), tau the temperature
// (default sqrt(d), the paper's 1/sqrt(d_k)) and B the mask/position bias:
//   causal        B_ts = 0 for s <= t, -inf otherwise (eq. 2);
//   bidirectional B_ts = 0;
//   block-local   causal inside blocks of length P ((C1): k(t) = ceil(t/P)), -inf across blocks;
//   sliding       causal window of w tokens: t - w < s <= t;
//   leaky         causal, and log(eps_leak) instead of -inf for s > t (every row still stochastic);
//   ALiBi adds -m |t - s| on the allowed entries (slope m).
// Every row of alpha is stochastic, so the homogeneous manifold H = {x_1 = ... = x_T} is invariant
// for every mask, temperature, positional scheme, norm and placement (Lemma 2).
//
// Norms S (§2.1, App. A.1): RMSNorm g ⊙ x / sqrt(|x|^2/d + eps); LayerNorm
// g ⊙ (x - mean) / sqrt(|x - mean|^2/d + eps) + beta; or none (identity). The two norms of a block
// have their own gains (g_attn, beta_attn for S_1, g_mlp, beta_mlp for S_2).
//
// The tangent map jvp() is exact forward mode through the norms, the softmax and the MLP
// (has_exact_jvp() == true). Runs are independent; k tangents of one state may be batched as k runs
// with that state: consecutive equal runs (up to 32) share one forward pass and one set of products. An optional additive per-token term (the hook for the injection
// rho psi(y) of (C2)) is added after the block; it is treated as independent of the state in jvp().
//
// Weights: seeded Gaussian (std sigma_w / sqrt(fan_in); biases std sigma_b) or read from a
// safetensors file with the tensor names
//   layers.{l}.W_Q [d,d], layers.{l}.W_K [d,d], layers.{l}.W_V [d,d], layers.{l}.W_1 [d_ff,d],
//   layers.{l}.b_1 [d_ff], layers.{l}.W_2 [d,d_ff], layers.{l}.b_2 [d] (all required), and optional
//   layers.{l}.g_attn, layers.{l}.beta_attn, layers.{l}.g_mlp, layers.{l}.beta_mlp [d]
//   (default gains 1, biases 0), l = 0..L-1 (values converted to double from F16/BF16/F32/F64).
// Weight sharing across depth: untied (layer k uses weights k-1), tied (every layer uses weights 0)
// or looped (layer k uses weights (k-1) mod L_loop).
// Layer indexing (flag F2 of the paper): layer k >= 1 of the LayerMap maps x^(k-1) -> x^(k) with the
// weights of index r = k - 1, so A(r) below is the Jacobian of that map at x*(r).
#include <functional>
#include <string>
#include <vector>

#include "tokdyn/engine/dynamics.hpp"

namespace tokdyn::tf {

enum class Norm { RMS, Layer, None };
enum class Placement { PreLN, PostLN };
enum class Activation { GeluExact, GeluTanh, Silu, Tanh, Relu };
enum class Mask { Causal, Bidirectional, BlockLocal, Sliding, Leaky };
enum class Positional { None, Rope, Alibi };
enum class Tying { Untied, Tied, Looped };

/// Parses the names used by presets ("rms", "layer", "none"; "pre", "post"; "gelu", "gelu-tanh",
/// "silu", "tanh", "relu"; "causal", "bidirectional", "block", "sliding", "leaky"; "none", "rope",
/// "alibi"; "untied", "tied", "looped"). std::invalid_argument for anything else.
Norm parse_norm(const std::string& s);
Placement parse_placement(const std::string& s);
Activation parse_activation(const std::string& s);
Mask parse_mask(const std::string& s);
Positional parse_positional(const std::string& s);
Tying parse_tying(const std::string& s);

struct Config {
  int d = 8;                        ///< token dimension (= d_k = d_v)
  int d_ff = 32;                    ///< MLP width
  Norm norm = Norm::RMS;
  double eps = 1e-6;                ///< eps_S of the norm (>= 0; 0 = unstabilised, singular at 0)
  Placement placement = Placement::PreLN;
  Activation phi = Activation::GeluExact;
  int heads = 1;                    ///< attention heads (the paper: 1); head h uses coordinates [h d/H, (h+1) d/H) of Q, K, V
  double temperature = 0.0;         ///< tau > 0; 0 means sqrt(d / heads) (sqrt(d_k))
  Mask mask = Mask::Causal;
  int block = 4;                    ///< P (block-local mask)
  int window = 4;                   ///< w (sliding mask)
  double eps_leak = 1e-3;           ///< leaky mask weight of future tokens, in (0, 1]
  Positional pos = Positional::None;
  double rope_base = 10000.0;
  double alibi_slope = 0.5;
  /// Throws std::invalid_argument naming the field for an invalid value (d < 1, d_ff < 1, eps < 0,
  /// tau < 0, P or w < 1, eps_leak outside (0, 1], odd d with RoPE, ...).
  void validate() const;
  double tau() const;               ///< the temperature actually used
  /// Warnings about the model (ReLU is not C^1: (A3) fails).
  std::vector<std::string> warnings() const;
};

struct LayerWeights {
  Mat W_Q, W_K, W_V;     ///< d x d
  Mat W_1;               ///< d_ff x d
  Mat W_2;               ///< d x d_ff
  Vec b_1, b_2;          ///< d_ff, d
  Vec g_attn, beta_attn, g_mlp, beta_mlp;  ///< d (gains and LayerNorm biases of S_1, S_2)
  void check(const Config& c, const std::string& what) const;  ///< shapes and finiteness
};

/// Seeded Gaussian weights for weight index r: std sigma_w / sqrt(fan_in) for matrices, sigma_b for
/// the biases b_1, b_2; unit gains, zero LN biases. Stream (seed, r, tensor).
LayerWeights random_weights(const Config& c, int r, double sigma_w, double sigma_b, std::uint64_t seed);
// Reading weight files: models/transformer/weights_file.hpp (models never touch files).

/// phi, phi' of an activation; L_phi = sup |phi'| (GELU 1.1289, SiLU 1.0998, tanh 1, ReLU 1).
double activation(Activation a, double z);
double activation_derivative(Activation a, double z);
double activation_lipschitz(Activation a);

/// The mask/position bias B (T x T; -inf for excluded entries), positions 0-based.
Mat score_bias(const Config& c, int T);
/// Row-wise norm S(X) of the rows of X with gains g and bias beta (beta used by LayerNorm only).
void apply_norm(const Config& c, const Vec& g, const Vec& beta, const Eigen::Ref<const Mat>& X, Mat& Z);
/// DS(x) as a dense d x d matrix (§2.2: RMS diag(g)(I/r - x x^T/(d r^3)), LN
/// diag(g)(1/sigma)(I - 11^T/d - x~x~^T/(d sigma^2)), identity for none).
Mat norm_jacobian(const Config& c, const Vec& g, const Vec& x);

/// A stack of blocks: LayerMap, layer k >= 1 uses weights index(k).
class Transformer : public LayerMap {
 public:
  /// weights.size() >= 1. Untied: layer k needs k <= weights.size() (std::out_of_range otherwise);
  /// tied: weights[0] for every layer; looped: weights[(k-1) mod weights.size()].
  Transformer(Config c, std::vector<LayerWeights> weights, Tying tying = Tying::Untied);

  void apply(long k, Batch& Z) const override;
  bool on_sphere() const override { return false; }
  void jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const override;
  bool has_exact_jvp() const override { return true; }
  std::string overflow_hint() const override {
    return "the Transformer stream overflowed; lower sigma_w / sigma_b or the depth";
  }
  /// Tap "attention" (dynamics.hpp TapObserver): the attention weights of every head of layer k at
  /// the state entering it, [runs, heads, tokens, tokens] (entry (t, s): the weight of token s in
  /// the update of token t), computed only when a watcher asks for layer k.
  /// Tap "residual_mid": the residual stream between the two sublayers of layer k, x-hat of eq. (4)
  /// (Pre-LN: x + attention; Post-LN: its norm), [runs, tokens, d]. With the state taps of layers
  /// k-1 and k it is the residual stream before and after each sublayer.
  std::vector<std::string> tap_names() const override {
    return {"attention [runs, heads, tokens, tokens]", "residual_mid [runs, tokens, d]"};
  }

  /// The attention matrices alpha of layer k at Z: one T x T matrix per run (the mean over heads;
  /// with one head, alpha itself). attention_heads: one T x (H T) matrix per run, head h in
  /// columns [h T, (h+1) T).
  std::vector<Mat> attention(long k, const Batch& Z) const;
  std::vector<Mat> attention_heads(long k, const Batch& Z) const;
  /// The block's update N(x) = F(x) - x of layer k (Pre-LN: the renormaliser of eq. (5)).
  void step_update(long k, const Batch& Z, Tokens& N) const;
  /// The reduced map of Lemma 2 on R^d: the common value of F(1 x^T) (independent of mask,
  /// temperature, positions, W_Q and W_K).
  Vec reduced_map(long k, const Vec& x) const;

  const Config& config() const { return cfg_; }
  const LayerWeights& weights(long k) const;   ///< the weights of layer k >= 1
  LayerWeights& mutable_weights(std::size_t i) { return w_.at(i); }
  std::size_t weight_sets() const { return w_.size(); }
  Tying tying() const { return tying_; }

  /// Hook for an additive per-token term (e.g. the injection rho psi(y) of (C2)): called after the
  /// block with layer k, the input batch and a zeroed matrix of the batch's shape to fill.
  using Injection = std::function<void(long k, const Batch& in, Tokens& add)>;
  void set_injection(Injection f) { inject_ = std::move(f); }

 private:
  Config cfg_;
  std::vector<LayerWeights> w_;
  Tying tying_;
  Injection inject_;
  struct Cache;
  void forward_run(const LayerWeights& W, const Mat& B, const Eigen::Ref<const Mat>& X, Mat& out, Cache* cache) const;
  void tangent_run(const LayerWeights& W, const Cache& c, const Eigen::Ref<const Mat>& dX, Mat& dout) const;
};

}  // namespace tokdyn::tf
