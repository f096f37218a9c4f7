// GPT-2 (Hugging Face GPT2LMHeadModel): learned absolute positions, LayerNorm with bias, the fused
// c_attn Conv1D (stored [in, out]), biases on every linear map, GELU-tanh MLP of width n_inner
// (4 d), final ln_f, output embedding tied to wte.
#include <cmath>

#include "family_util.hpp"

namespace tokdyn::decoder {
namespace {
using namespace detail;

Arch gpt2_parse(const nlohmann::json& j, const std::string& what) {
  ConfigReader r(j, what, "gpt2");
  r.check_identity("gpt2", {"GPT2LMHeadModel", "GPT2Model"});
  Arch a;
  a.family = "gpt2";
  a.vocab_size = static_cast<int>(r.get_int("vocab_size", 1, 1 << 24));
  a.max_positions = static_cast<int>(r.get_int("n_positions", 1, 1 << 24));
  if (r.has("n_ctx") && r.get_int("n_ctx", 1, 1 << 24) != a.max_positions) r.fail("n_ctx", "equal to n_positions");
  a.d_model = static_cast<int>(r.get_int("n_embd", 1, 1 << 16));
  a.n_layer = static_cast<int>(r.get_int("n_layer", 1, 4096));
  a.n_head = static_cast<int>(r.get_int("n_head", 1, 4096));
  if (a.d_model % a.n_head) r.fail("n_head", fmt::format("a divisor of n_embd = {}", a.d_model));
  a.n_kv_head = a.n_head;
  a.head_dim = a.d_model / a.n_head;
  a.d_ff = r.has("n_inner") ? static_cast<int>(r.get_int("n_inner", 1, 1 << 20)) : 4 * a.d_model;
  r.use("n_inner");
  const std::string act =
      r.get_string("activation_function", {"gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu", "relu", "silu", "swish"}, "gelu_new");
  a.act = act == "gelu" ? Act::Gelu : act == "relu" ? Act::Relu : (act == "silu" || act == "swish") ? Act::Silu : Act::GeluTanh;
  a.norm = NormKind::LayerNorm;
  a.norm_bias = true;
  a.norm_eps = r.get_double("layer_norm_epsilon", 1e-12, 0.1, 1e-5);
  a.positions = Positions::Learned;
  a.layout = Layout::Sequential;
  a.init_std = r.get_double("initializer_range", 1e-6, 1.0, 0.02);
  if (!r.get_bool("scale_attn_weights", true)) r.fail("scale_attn_weights", "true (unscaled attention is not implemented)");
  if (r.get_bool("scale_attn_by_inverse_layer_idx", false))
    r.fail("scale_attn_by_inverse_layer_idx", "false (per-layer attention scaling is not implemented)");
  r.get_bool("reorder_and_upcast_attn", false);  // the same attention, computed in fp32: tokdyn always is
  if (r.get_bool("add_cross_attention", false)) r.fail("add_cross_attention", "false (a decoder-only model)");
  a.tied_embeddings = r.get_bool("tie_word_embeddings", true);
  r.finish();
  a.config = j;
  validate(a, what);
  return a;
}

nlohmann::json gpt2_named(const std::string& size) {
  nlohmann::json j{{"model_type", "gpt2"},       {"architectures", {"GPT2LMHeadModel"}},
                   {"activation_function", "gelu_new"}, {"layer_norm_epsilon", 1e-5},
                   {"initializer_range", 0.02},  {"scale_attn_weights", true},
                   {"tie_word_embeddings", true}, {"bos_token_id", 50256}, {"eos_token_id", 50256}};
  if (size == "124m") {
    j.update({{"vocab_size", 50257}, {"n_positions", 1024}, {"n_embd", 768}, {"n_layer", 12}, {"n_head", 12}});
  } else if (size == "small") {
    j.update({{"vocab_size", 4096}, {"n_positions", 256}, {"n_embd", 256}, {"n_layer", 4}, {"n_head", 8}});
  } else {  // tiny
    j.update({{"vocab_size", 512}, {"n_positions", 64}, {"n_embd", 64}, {"n_layer", 2}, {"n_head", 4}});
    j["bos_token_id"] = 511;
    j["eos_token_id"] = 511;
  }
  return j;
}

std::vector<TensorSlot> gpt2_tensors(const Arch& a) {
  using U = std::uint64_t;
  const U d = static_cast<U>(a.d_model), F = static_cast<U>(a.d_ff), V = static_cast<U>(a.vocab_size), P = static_cast<U>(a.max_positions);
  const double proj_sd = a.init_std / std::sqrt(2.0 * a.n_layer);  // GPT-2's rescaled residual projections
  std::vector<TensorSlot> s;
  s.push_back(direct("transformer.wte.weight", {V, d}, [](Model& m) { return m.wte.data(); }));
  s.push_back(direct("transformer.wpe.weight", {P, d}, [](Model& m) { return m.wpe.data(); }));
  for (int l = 0; l < a.n_layer; ++l) {
    const std::string p = fmt::format("transformer.h.{}.", l);
    const auto L = [l](Model& m) -> Layer& { return m.layers[static_cast<std::size_t>(l)]; };
    s.push_back(direct(p + "ln_1.weight", {d}, [L](Model& m) { return L(m).ln1_w.data(); }, "ones"));
    s.push_back(direct(p + "ln_1.bias", {d}, [L](Model& m) { return L(m).ln1_b.data(); }, "zeros"));
    s.push_back(transposed(p + "attn.c_attn.weight", d, 3 * d, [L](Model& m) { return L(m).qkv_w.data(); }));
    s.push_back(direct(p + "attn.c_attn.bias", {3 * d}, [L](Model& m) { return L(m).qkv_b.data(); }, "zeros"));
    s.push_back(transposed(p + "attn.c_proj.weight", d, d, [L](Model& m) { return L(m).o_w.data(); }, proj_sd));
    s.push_back(direct(p + "attn.c_proj.bias", {d}, [L](Model& m) { return L(m).o_b.data(); }, "zeros"));
    s.push_back(direct(p + "ln_2.weight", {d}, [L](Model& m) { return L(m).ln2_w.data(); }, "ones"));
    s.push_back(direct(p + "ln_2.bias", {d}, [L](Model& m) { return L(m).ln2_b.data(); }, "zeros"));
    s.push_back(transposed(p + "mlp.c_fc.weight", d, F, [L](Model& m) { return L(m).up_w.data(); }));
    s.push_back(direct(p + "mlp.c_fc.bias", {F}, [L](Model& m) { return L(m).up_b.data(); }, "zeros"));
    s.push_back(transposed(p + "mlp.c_proj.weight", F, d, [L](Model& m) { return L(m).down_w.data(); }, proj_sd));
    s.push_back(direct(p + "mlp.c_proj.bias", {d}, [L](Model& m) { return L(m).down_b.data(); }, "zeros"));
  }
  s.push_back(direct("transformer.ln_f.weight", {d}, [](Model& m) { return m.lnf_w.data(); }, "ones"));
  s.push_back(direct("transformer.ln_f.bias", {d}, [](Model& m) { return m.lnf_b.data(); }, "zeros"));
  if (!a.tied_embeddings) s.push_back(direct("lm_head.weight", {V, d}, [](Model& m) { return m.lm_head.data(); }));
  return s;
}

// Initialised before the default-priority static objects (the presets build their parameter lists
// from the registry during static initialisation): see FamilyRegistration.
__attribute__((init_priority(1000))) const Family gpt2{
    "gpt2",
    "GPT2LMHeadModel",
    "GPT-2: learned positions, Pre-LN LayerNorm with bias, GELU-tanh MLP, fused Conv1D attention (Hugging Face layout)",
    {"tiny", "small", "124m"},
    gpt2_parse,
    gpt2_named,
    gpt2_tensors,
    {".attn.bias", ".attn.masked_bias", "lm_head.weight"},
    {"transformer."}};
__attribute__((init_priority(1000))) const FamilyRegistration reg_gpt2{&gpt2};

}  // namespace
}  // namespace tokdyn::decoder
