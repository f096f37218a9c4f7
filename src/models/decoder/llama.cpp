// Llama (Hugging Face LlamaForCausalLM): RMSNorm, rotary positions on the whole head (half-split
// pairs, rope_theta; rope_scaling linear or llama3), grouped-query attention (num_key_value_heads),
// SwiGLU MLP, no biases (attention_bias / mlp_bias when set), tie_word_embeddings either way.
#include "family_util.hpp"

namespace tokdyn::decoder {
namespace {
using namespace detail;

Arch llama_parse(const nlohmann::json& j, const std::string& what) {
  ConfigReader r(j, what, "llama");
  r.check_identity("llama", {"LlamaForCausalLM", "LlamaModel"});
  Arch a;
  a.family = "llama";
  a.vocab_size = static_cast<int>(r.get_int("vocab_size", 1, 1 << 24));
  a.d_model = static_cast<int>(r.get_int("hidden_size", 1, 1 << 16));
  a.n_layer = static_cast<int>(r.get_int("num_hidden_layers", 1, 4096));
  a.n_head = static_cast<int>(r.get_int("num_attention_heads", 1, 4096));
  a.n_kv_head = static_cast<int>(r.get_int("num_key_value_heads", 1, 4096, a.n_head));
  if (a.n_head % a.n_kv_head) r.fail("num_key_value_heads", fmt::format("a divisor of num_attention_heads = {}", a.n_head));
  if (!r.has("head_dim") && a.d_model % a.n_head) r.fail("num_attention_heads", fmt::format("a divisor of hidden_size = {}", a.d_model));
  a.head_dim = static_cast<int>(r.get_int("head_dim", 1, 4096, a.d_model / a.n_head));
  if (a.head_dim % 2) r.fail("head_dim", "an even head dimension (rotary pairs)");
  a.d_ff = static_cast<int>(r.get_int("intermediate_size", 1, 1 << 20));
  a.max_positions = static_cast<int>(r.get_int("max_position_embeddings", 1, 1 << 24, 2048));
  const std::string act = r.get_string("hidden_act", {"silu", "swish", "gelu", "gelu_new", "gelu_pytorch_tanh", "relu"}, "silu");
  a.act = (act == "silu" || act == "swish") ? Act::Silu : act == "gelu" ? Act::Gelu : act == "relu" ? Act::Relu : Act::GeluTanh;
  a.gated_mlp = true;
  a.positions = Positions::Rotary;
  a.rotary_dims = a.head_dim;
  a.rope_theta = r.get_double("rope_theta", 1.0 + 1e-9, 1e12, 10000.0);
  read_rope_scaling(r, a, true);
  a.norm = NormKind::RMSNorm;
  a.norm_bias = false;
  a.norm_eps = r.get_double("rms_norm_eps", 1e-12, 0.1, 1e-6);
  a.layout = Layout::Sequential;
  a.tied_embeddings = r.get_bool("tie_word_embeddings", false);
  a.qkv_bias = a.out_bias = r.get_bool("attention_bias", false);
  a.mlp_bias = r.get_bool("mlp_bias", false);
  a.init_std = r.get_double("initializer_range", 1e-6, 1.0, 0.02);
  r.finish();
  a.config = j;
  validate(a, what);
  return a;
}

nlohmann::json llama_named(const std::string& size) {
  nlohmann::json j{{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"hidden_act", "silu"},
                   {"rms_norm_eps", 1e-6},  {"initializer_range", 0.02},          {"rope_theta", 10000.0},
                   {"attention_bias", false}, {"mlp_bias", false},                {"bos_token_id", 1},
                   {"eos_token_id", 2}};
  if (size == "small") {
    j.update({{"vocab_size", 4096}, {"hidden_size", 256}, {"num_hidden_layers", 4}, {"num_attention_heads", 8},
              {"num_key_value_heads", 4}, {"intermediate_size", 688}, {"max_position_embeddings", 256},
              {"tie_word_embeddings", false}});
  } else if (size == "tiny-llama3") {
    j.update({{"vocab_size", 512}, {"hidden_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
              {"num_key_value_heads", 2}, {"intermediate_size", 172}, {"max_position_embeddings", 64},
              {"tie_word_embeddings", false}, {"rope_theta", 500000.0},
              {"rope_scaling",
               {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                {"original_max_position_embeddings", 16}}}});
  } else {  // tiny: tied embeddings, grouped-query attention
    j.update({{"vocab_size", 512}, {"hidden_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
              {"num_key_value_heads", 2}, {"intermediate_size", 172}, {"max_position_embeddings", 64},
              {"tie_word_embeddings", true}});
  }
  return j;
}

std::vector<TensorSlot> llama_tensors(const Arch& a) {
  using U = std::uint64_t;
  const U d = static_cast<U>(a.d_model), F = static_cast<U>(a.d_ff), V = static_cast<U>(a.vocab_size);
  const U q = static_cast<U>(a.q_rows()), kv = static_cast<U>(a.kv_rows());
  std::vector<TensorSlot> s;
  s.push_back(direct("model.embed_tokens.weight", {V, d}, [](Model& m) { return m.wte.data(); }));
  for (int l = 0; l < a.n_layer; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    const auto L = [l](Model& m) -> Layer& { return m.layers[static_cast<std::size_t>(l)]; };
    s.push_back(direct(p + "input_layernorm.weight", {d}, [L](Model& m) { return L(m).ln1_w.data(); }, "ones"));
    s.push_back(direct(p + "self_attn.q_proj.weight", {q, d}, [L](Model& m) { return L(m).qkv_w.data(); }));
    s.push_back(direct(p + "self_attn.k_proj.weight", {kv, d}, [L, q, d](Model& m) { return L(m).qkv_w.data() + q * d; }));
    s.push_back(direct(p + "self_attn.v_proj.weight", {kv, d}, [L, q, kv, d](Model& m) { return L(m).qkv_w.data() + (q + kv) * d; }));
    if (a.qkv_bias) {
      s.push_back(direct(p + "self_attn.q_proj.bias", {q}, [L](Model& m) { return L(m).qkv_b.data(); }, "zeros"));
      s.push_back(direct(p + "self_attn.k_proj.bias", {kv}, [L, q](Model& m) { return L(m).qkv_b.data() + q; }, "zeros"));
      s.push_back(direct(p + "self_attn.v_proj.bias", {kv}, [L, q, kv](Model& m) { return L(m).qkv_b.data() + q + kv; }, "zeros"));
    }
    s.push_back(direct(p + "self_attn.o_proj.weight", {d, q}, [L](Model& m) { return L(m).o_w.data(); }));
    if (a.out_bias) s.push_back(direct(p + "self_attn.o_proj.bias", {d}, [L](Model& m) { return L(m).o_b.data(); }, "zeros"));
    s.push_back(direct(p + "post_attention_layernorm.weight", {d}, [L](Model& m) { return L(m).ln2_w.data(); }, "ones"));
    s.push_back(direct(p + "mlp.gate_proj.weight", {F, d}, [L](Model& m) { return L(m).up_w.data(); }));
    s.push_back(direct(p + "mlp.up_proj.weight", {F, d}, [L, F, d](Model& m) { return L(m).up_w.data() + F * d; }));
    s.push_back(direct(p + "mlp.down_proj.weight", {d, F}, [L](Model& m) { return L(m).down_w.data(); }));
    if (a.mlp_bias) {
      s.push_back(direct(p + "mlp.gate_proj.bias", {F}, [L](Model& m) { return L(m).up_b.data(); }, "zeros"));
      s.push_back(direct(p + "mlp.up_proj.bias", {F}, [L, F](Model& m) { return L(m).up_b.data() + F; }, "zeros"));
      s.push_back(direct(p + "mlp.down_proj.bias", {d}, [L](Model& m) { return L(m).down_b.data(); }, "zeros"));
    }
  }
  s.push_back(direct("model.norm.weight", {d}, [](Model& m) { return m.lnf_w.data(); }, "ones"));
  if (!a.tied_embeddings) s.push_back(direct("lm_head.weight", {V, d}, [](Model& m) { return m.lm_head.data(); }));
  return s;
}

// Initialised before the default-priority static objects (the presets build their parameter lists
// from the registry during static initialisation): see FamilyRegistration.
__attribute__((init_priority(1000))) const Family llama{
    "llama",
    "LlamaForCausalLM",
    "Llama: RMSNorm, rotary (rope_theta, rope_scaling linear / llama3), grouped-query attention, SwiGLU MLP, no biases",
    {"tiny", "tiny-llama3", "small"},
    llama_parse,
    llama_named,
    llama_tensors,
    {".self_attn.rotary_emb.inv_freq", "lm_head.weight"},
    {}};
__attribute__((init_priority(1000))) const FamilyRegistration reg_llama{&llama};

}  // namespace
}  // namespace tokdyn::decoder
