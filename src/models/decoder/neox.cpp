// GPT-NeoX / Pythia (Hugging Face GPTNeoXForCausalLM): rotary positions on rotary_pct of each
// head's dimensions (half-split pairs, base rotary_emb_base), LayerNorm with bias, the fused
// per-head query_key_value layout ([heads, 3, head_dim] rows), GELU MLP with biases, the parallel
// residual (x + attn(ln1 x) + mlp(ln2 x)) or the sequential one, untied embed_out.
#include "family_util.hpp"

namespace tokdyn::decoder {
namespace {
using namespace detail;

Arch neox_parse(const nlohmann::json& j, const std::string& what) {
  ConfigReader r(j, what, "neox");
  r.check_identity("gpt_neox", {"GPTNeoXForCausalLM", "GPTNeoXModel"});
  Arch a;
  a.family = "neox";
  a.vocab_size = static_cast<int>(r.get_int("vocab_size", 1, 1 << 24));
  a.d_model = static_cast<int>(r.get_int("hidden_size", 1, 1 << 16));
  a.n_layer = static_cast<int>(r.get_int("num_hidden_layers", 1, 4096));
  a.n_head = static_cast<int>(r.get_int("num_attention_heads", 1, 4096));
  if (a.d_model % a.n_head) r.fail("num_attention_heads", fmt::format("a divisor of hidden_size = {}", a.d_model));
  a.n_kv_head = a.n_head;
  a.head_dim = a.d_model / a.n_head;
  a.d_ff = static_cast<int>(r.get_int("intermediate_size", 1, 1 << 20));
  a.max_positions = static_cast<int>(r.get_int("max_position_embeddings", 1, 1 << 24));
  const std::string act = r.get_string("hidden_act", {"gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "silu"}, "gelu");
  a.act = act == "gelu" ? Act::Gelu : act == "relu" ? Act::Relu : act == "silu" ? Act::Silu : Act::GeluTanh;
  const double pct = r.get_double("rotary_pct", 0.0, 1.0, 0.25);
  a.positions = Positions::Rotary;
  a.rotary_dims = static_cast<int>(a.head_dim * pct);  // as the reference: int(head_size * rotary_pct)
  if (a.rotary_dims < 2) r.fail("rotary_pct", fmt::format("a fraction giving at least 2 rotary dimensions of head_dim = {}", a.head_dim));
  if (a.rotary_dims % 2) r.fail("rotary_pct", fmt::format("a fraction giving an even number of rotary dimensions (got {})", a.rotary_dims));
  a.rope_theta = r.get_double("rotary_emb_base", 1.0 + 1e-9, 1e12, 10000.0);
  if (r.has("rope_theta")) {
    const double t = r.get_double("rope_theta", 1.0 + 1e-9, 1e12);
    if (r.has("rotary_emb_base") && t != a.rope_theta) r.fail("rope_theta", "equal to rotary_emb_base when both are given");
    a.rope_theta = t;
  }
  r.use("rope_theta");
  read_rope_scaling(r, a, false);
  a.norm = NormKind::LayerNorm;
  a.norm_bias = true;
  a.norm_eps = r.get_double("layer_norm_eps", 1e-12, 0.1, 1e-5);
  a.layout = r.get_bool("use_parallel_residual", true) ? Layout::Parallel : Layout::Sequential;
  a.tied_embeddings = r.get_bool("tie_word_embeddings", false);
  const bool bias = r.get_bool("attention_bias", true);
  a.qkv_bias = a.out_bias = bias;
  a.mlp_bias = true;
  a.init_std = r.get_double("initializer_range", 1e-6, 1.0, 0.02);
  r.finish();
  a.config = j;
  validate(a, what);
  return a;
}

nlohmann::json neox_named(const std::string& size) {
  nlohmann::json j{{"model_type", "gpt_neox"}, {"architectures", {"GPTNeoXForCausalLM"}}, {"hidden_act", "gelu"},
                   {"layer_norm_eps", 1e-5},   {"initializer_range", 0.02},             {"rotary_emb_base", 10000},
                   {"tie_word_embeddings", false}, {"use_parallel_residual", true},    {"bos_token_id", 0},
                   {"eos_token_id", 0}};
  if (size == "pythia-70m") {
    j.update({{"vocab_size", 50304}, {"hidden_size", 512}, {"num_hidden_layers", 6}, {"num_attention_heads", 8},
              {"intermediate_size", 2048}, {"max_position_embeddings", 2048}, {"rotary_pct", 0.25}});
  } else if (size == "pythia-160m") {
    j.update({{"vocab_size", 50304}, {"hidden_size", 768}, {"num_hidden_layers", 12}, {"num_attention_heads", 12},
              {"intermediate_size", 3072}, {"max_position_embeddings", 2048}, {"rotary_pct", 0.25}});
  } else if (size == "small") {
    j.update({{"vocab_size", 4096}, {"hidden_size", 256}, {"num_hidden_layers", 4}, {"num_attention_heads", 8},
              {"intermediate_size", 1024}, {"max_position_embeddings", 256}, {"rotary_pct", 0.25}});
  } else {  // tiny, tiny-sequential
    j.update({{"vocab_size", 512}, {"hidden_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
              {"intermediate_size", 256}, {"max_position_embeddings", 64}, {"rotary_pct", 0.5}});
    if (size == "tiny-sequential") j["use_parallel_residual"] = false;
  }
  return j;
}

std::vector<TensorSlot> neox_tensors(const Arch& a) {
  using U = std::uint64_t;
  const U d = static_cast<U>(a.d_model), F = static_cast<U>(a.d_ff), V = static_cast<U>(a.vocab_size);
  const U H = static_cast<U>(a.n_head), hd = static_cast<U>(a.head_dim);
  std::vector<TensorSlot> s;
  s.push_back(direct("gpt_neox.embed_in.weight", {V, d}, [](Model& m) { return m.wte.data(); }));
  for (int l = 0; l < a.n_layer; ++l) {
    const std::string p = fmt::format("gpt_neox.layers.{}.", l);
    const auto L = [l](Model& m) -> Layer& { return m.layers[static_cast<std::size_t>(l)]; };
    s.push_back(direct(p + "input_layernorm.weight", {d}, [L](Model& m) { return L(m).ln1_w.data(); }, "ones"));
    s.push_back(direct(p + "input_layernorm.bias", {d}, [L](Model& m) { return L(m).ln1_b.data(); }, "zeros"));
    s.push_back(direct(p + "post_attention_layernorm.weight", {d}, [L](Model& m) { return L(m).ln2_w.data(); }, "ones"));
    s.push_back(direct(p + "post_attention_layernorm.bias", {d}, [L](Model& m) { return L(m).ln2_b.data(); }, "zeros"));
    // query_key_value: stored row (h, c, j) = h 3 hd + c hd + j (c: q, k, v); tokdyn's row c H hd + h hd + j.
    const auto perm = [H, hd](U stored) {
      const U h = stored / (3 * hd), c = (stored / hd) % 3, j = stored % hd;
      return c * H * hd + h * hd + j;
    };
    for (int part = 0; part < 2; ++part) {
      TensorSlot t;
      t.name = p + (part == 0 ? "attention.query_key_value.weight" : "attention.query_key_value.bias");
      const U cols = part == 0 ? d : 1;
      t.shape = part == 0 ? std::vector<U>{3 * d, d} : std::vector<U>{3 * d};
      const auto acc = [L, part](Model& m) { return part == 0 ? L(m).qkv_w.data() : L(m).qkv_b.data(); };
      t.load = [acc, perm, cols, d](Model& m, const float* x) {
        float* q = acc(m);
        for (U r = 0; r < 3 * d; ++r) std::memcpy(q + perm(r) * cols, x + r * cols, cols * sizeof(float));
      };
      t.save = [acc, perm, cols, d](const Model& m) {
        const float* q = acc(const_cast<Model&>(m));
        std::vector<float> v(3 * d * cols);
        for (U r = 0; r < 3 * d; ++r) std::memcpy(v.data() + r * cols, q + perm(r) * cols, cols * sizeof(float));
        return v;
      };
      t.init = part == 0 ? "normal" : "zeros";
      if (part == 0 || a.qkv_bias) s.push_back(std::move(t));
    }
    s.push_back(direct(p + "attention.dense.weight", {d, d}, [L](Model& m) { return L(m).o_w.data(); }));
    if (a.out_bias) s.push_back(direct(p + "attention.dense.bias", {d}, [L](Model& m) { return L(m).o_b.data(); }, "zeros"));
    s.push_back(direct(p + "mlp.dense_h_to_4h.weight", {F, d}, [L](Model& m) { return L(m).up_w.data(); }));
    s.push_back(direct(p + "mlp.dense_h_to_4h.bias", {F}, [L](Model& m) { return L(m).up_b.data(); }, "zeros"));
    s.push_back(direct(p + "mlp.dense_4h_to_h.weight", {d, F}, [L](Model& m) { return L(m).down_w.data(); }));
    s.push_back(direct(p + "mlp.dense_4h_to_h.bias", {d}, [L](Model& m) { return L(m).down_b.data(); }, "zeros"));
  }
  s.push_back(direct("gpt_neox.final_layer_norm.weight", {d}, [](Model& m) { return m.lnf_w.data(); }, "ones"));
  s.push_back(direct("gpt_neox.final_layer_norm.bias", {d}, [](Model& m) { return m.lnf_b.data(); }, "zeros"));
  if (!a.tied_embeddings) s.push_back(direct("embed_out.weight", {V, d}, [](Model& m) { return m.lm_head.data(); }));
  return s;
}

// Initialised before the default-priority static objects (the presets build their parameter lists
// from the registry during static initialisation): see FamilyRegistration.
__attribute__((init_priority(1000))) const Family neox{
    "neox",
    "GPTNeoXForCausalLM",
    "GPT-NeoX / Pythia: rotary on rotary_pct of each head, LayerNorm with bias, GELU MLP, parallel (or sequential) residual",
    {"tiny", "tiny-sequential", "small", "pythia-70m", "pythia-160m"},
    neox_parse,
    neox_named,
    neox_tensors,
    {".attention.bias", ".attention.masked_bias", ".attention.rotary_emb.inv_freq", "embed_out.weight"},
    {}};
__attribute__((init_priority(1000))) const FamilyRegistration reg_neox{&neox};

}  // namespace
}  // namespace tokdyn::decoder
