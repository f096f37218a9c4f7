#pragma once
// Decoder-only transformers as their checkpoints are published (GPT-2, GPT-NeoX / Pythia, Llama),
// built from the parts of parts.hpp, as one depth map each. One layer of the residual stream x
// (rows: tokens of one sequence; runs stacked), with h = norm(x):
//   attention  a = W_o concat_h softmax(beta s rot(Q_h) rot(K_g(h))^T + causal mask) V_g(h) (+ b_o),
//              [Q|K|V] = W_qkv h (+ b_qkv), s = 1/sqrt(head_dim), g(h) = h / (heads / kv_heads)
//   MLP        m = W_down act(W_up h2 + b_up) + b_down,  or gated (SwiGLU): W_down (act(W_gate h2) * W_up h2)
//   sequential (Pre-LN)  x' = x + a(ln1 x);  x'' = x' + m(ln2 x')
//   parallel (GPT-NeoX)  x'' = x + a(ln1 x) + m(ln2 x)
// Depth update: residual x <- x''  (the model's own stream), or sphere z <- pi(z + tau (x'' - z)).
// Each family (src/models/decoder/<family>.cpp) reads its config.json into an Arch, names its
// tensors (TensorSlot: where each goes, transposed or permuted as its checkpoint stores it) and
// initialises a fresh model as its reference implementation does; it registers itself (Family).
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokdyn/engine/dynamics.hpp"
#include "tokdyn/models/parts/parts.hpp"
#include "tokdyn/engine/schedule.hpp"

namespace tokdyn::decoder {

// The shared transformer parts (models/parts/parts.hpp), named here as the families use them.
using namespace parts;

enum class Positions { None, Learned, Rotary };
enum class Layout { Sequential, Parallel };

/// Every hyper-parameter that shapes the forward pass, whatever the family.
struct Arch {
  std::string family;  ///< "gpt2", "neox", "llama"
  int d_model = 0, n_layer = 0, n_head = 0, n_kv_head = 0, head_dim = 0, d_ff = 0, vocab_size = 0, max_positions = 0;
  NormKind norm = NormKind::LayerNorm;
  double norm_eps = 1e-5;
  bool norm_bias = true;
  Positions positions = Positions::Learned;
  int rotary_dims = 0;       ///< rotated dimensions of each head (even; Rotary)
  double rope_theta = 10000;
  bool rotary_interleaved = false;
  std::string rope_scaling = "none";  ///< "none", "linear", "llama3"
  double rope_factor = 1, rope_low_freq_factor = 1, rope_high_freq_factor = 4;
  double rope_original_max = 8192;
  Act act = Act::GeluTanh;
  bool gated_mlp = false;
  bool qkv_bias = true, out_bias = true, mlp_bias = true;
  Layout layout = Layout::Sequential;
  bool tied_embeddings = true;
  double init_std = 0.02;
  nlohmann::json config = nlohmann::json::object();  ///< config.json as read or written

  int q_rows() const { return n_head * head_dim; }
  int kv_rows() const { return n_kv_head * head_dim; }
  int qkv_rows() const { return q_rows() + 2 * kv_rows(); }
  /// Rotary frequencies of the pairs, after rope_scaling.
  std::vector<double> frequencies() const;
  /// Parameters of the layers, the embeddings and the final norm (the output head when untied).
  double parameters() const;
  /// Throws std::invalid_argument naming the first inconsistent field (what the family's reader
  /// turns into an InputError naming config.json).
  void validate() const;
};

/// One layer's weights, in scalar S (float as loaded; double for the tangent step).
template <class S>
struct LayerT {
  VecT<S> ln1_w, ln1_b, ln2_w, ln2_b;  ///< [d] (b empty without bias; ln2 unused when no MLP norm)
  MatT<S> qkv_w;                       ///< [qkv_rows, d]: rows q heads, then k heads, then v heads
  VecT<S> qkv_b;                       ///< [qkv_rows] or empty
  MatT<S> o_w;                         ///< [d, q_rows]
  VecT<S> o_b;                         ///< [d] or empty
  MatT<S> up_w;                        ///< [d_ff, d], gated: [2 d_ff, d] (rows: gate, then up)
  VecT<S> up_b;                        ///< [d_ff] or empty
  MatT<S> down_w;                      ///< [d, d_ff]
  VecT<S> down_b;                      ///< [d] or empty
};
using Layer = LayerT<float>;
LayerT<double> widen(const Layer& L);

struct Model {
  Arch arch;
  MatF wte;          ///< [vocab, d]
  MatF wpe;          ///< [max_positions, d] (Learned positions only)
  VecF lnf_w, lnf_b; ///< final norm (not part of the depth map; kept for hidden_states' last entry)
  MatF lm_head;      ///< [vocab, d] when untied (not used by the depth map)
  std::vector<Layer> layers;
  std::string source;        ///< checkpoint path or "make-checkpoint ..." description
  std::string generated_by;  ///< non-empty for a fresh model (recorded in __metadata__ "tokdyn")
};

/// Where one checkpoint tensor goes: its name and stored shape, and how its values (float, C
/// order) enter and leave the model (transposed, permuted, or split as the family stores it).
struct TensorSlot {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::function<void(Model&, const float*)> load;
  std::function<std::vector<float>(const Model&)> save;
  /// How a fresh model draws it: "normal" (N(0, std^2)), "ones", "zeros".
  std::string init = "normal";
  double init_std = 0;  ///< 0: arch.init_std
};

/// One decoder family: everything tokdyn knows of it, in its own file.
struct Family {
  std::string name;         ///< "gpt2"
  std::string hf_class;     ///< "GPT2LMHeadModel"
  std::string description;  ///< one line
  std::vector<std::string> sizes;  ///< make-checkpoint sizes
  /// config.json -> Arch; InputError "<what>: field '<f>' ..." for a field it refuses.
  std::function<Arch(const nlohmann::json& cfg, const std::string& what)> parse_config;
  /// A named size's config.json (what make-checkpoint writes).
  std::function<nlohmann::json(const std::string& size)> named_config;
  /// The checkpoint's tensors for an arch (every one required).
  std::function<std::vector<TensorSlot>(const Arch&)> tensors;
  /// Names of buffers some checkpoints carry that play no part in the forward (attention masks,
  /// rotary inverse frequencies): accepted and ignored. Matched as a suffix of the tensor name.
  std::vector<std::string> ignorable_suffixes;
  /// Prefixes a checkpoint's names may lack (GPT-2's published file has no "transformer.").
  std::vector<std::string> optional_prefixes;
};

/// The registered families, in name order.
std::vector<const Family*> families();
const Family* find_family(const std::string& name);
/// `__attribute__((init_priority(1000))) const FamilyRegistration reg{&family};` in the family's
/// file, the Family itself defined the same way just before it: both are then constructed before
/// every default-priority static object, and the presets, which take the model registry's knobs
/// while they are statically initialised, see every family whatever the link order.
struct FamilyRegistration {
  explicit FamilyRegistration(const Family* f);
};

/// A model whose every slot is allocated (zeros) for an arch (the loader and init fill it).
Model allocate(const Arch& a);
/// A fresh model initialised as the family's reference implementation initialises a new
/// ...ForCausalLM (each slot's rule), drawn from streams (seed, slot index) (the same on any thread count).
Model init_model(const Family& f, const Arch& a, std::uint64_t seed);

/// Ablations (where they act in the layer) and the depth update.
struct Switches {
  bool positions = true;   ///< off: no rotary rotation (and, for learned positions, no position rows in the embedding)
  bool attention = true;   ///< off: the attention branch is zero
  bool mlp = true;         ///< off: the MLP branch is zero
  double beta = 1.0;       ///< attention logits scaled by beta (inverse temperature)
  bool causal = true;
};
enum class Update { Residual, Sphere };

using LayerSchedule = WeightSchedule<Layer>;

/// One depth step as a LayerMap: fp32 forward with BLAS products in fixed tiles (same bits on any
/// thread count), exact double forward-mode tangents (step_double_tangents; jvp). Taps:
///   "attention"     [runs, heads, tokens, tokens]  the probabilities of the heads asked for
///   "residual_mid"  [runs, tokens, d]              x + a(ln1 x), the stream after the attention branch
class DecoderMap final : public LayerMap {
 public:
  DecoderMap(Arch a, Switches sw, std::shared_ptr<const LayerSchedule> layers, Update update, double tau, int len);
  void apply(long k, Batch& Z) const override;
  void apply_float(long k, BatchF& Z) const override;
  bool float_state() const override { return true; }
  bool on_sphere() const override { return update_ == Update::Sphere; }
  void jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const override;
  bool has_exact_jvp() const override { return true; }
  std::string overflow_hint() const override { return "the residual stream overflowed; check the checkpoint's weights"; }
  std::vector<std::string> tap_names() const override {
    return {"attention [runs, heads, tokens, tokens]", "residual_mid [runs, tokens, d]"};
  }
  /// Value and tangents in double at Z (R runs): V holds m blocks of the shape of Z (direction j of
  /// every run in rows j R T .. (j+1) R T - 1). Y = F_k(Z), dY = D F_k(Z)[V].
  void step_double_tangents(long k, const Batch& Z, const Tokens& V, Tokens& Y, Tokens& dY) const;
  /// The increment x'' - x of layer k in S (the branches), for rows of R runs of `len` tokens.
  template <class S>
  void increment(const LayerT<S>& L, const MatT<S>& X, int runs, MatT<S>& D, long k, bool taps) const;
  const Arch& arch() const { return arch_; }
  const Switches& switches() const { return sw_; }
  /// Multiply-adds of one step over `runs` sequences of `len` tokens.
  double flops(int runs) const;
  int len() const { return len_; }

 private:
  Arch arch_;
  Switches sw_;
  std::shared_ptr<const LayerSchedule> layers_;
  Update update_;
  double tau_;
  int len_;
  RotaryTable rot_;
  /// The schedule's layer k widened to double (for the tangent step), cached per layer while the
  /// cache stays under 2 GiB.
  std::shared_ptr<const LayerT<double>> widened(long k) const;
  mutable std::mutex wide_mu_;
  mutable std::vector<std::pair<std::shared_ptr<const Layer>, std::shared_ptr<const LayerT<double>>>> wide_;
};

/// Token ids iid uniform in [0, vocab): run r from stream (seed, r); [runs * len] run-major.
std::vector<std::int64_t> draw_token_ids(std::uint64_t vocab, int runs, int len, std::uint64_t seed);
/// The start state: embedding rows of `ids` (+ position rows 0..len-1 for learned positions when
/// sw.positions), in the update's space (sphere: unit rows).
MatF embed(const Model& m, const std::vector<std::int64_t>& ids, int len, const Switches& sw, Update update);

}  // namespace tokdyn::decoder
