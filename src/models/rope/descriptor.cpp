// The model registry's descriptor of the RoPE attention step: its knobs, how it is built from them, its taps and
// cost. It registers itself (runtime/model_registry.hpp); nothing else names it.
#include <fmt/format.h>
#include <memory>

#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/runtime/model_registry.hpp"

namespace tokdyn {
namespace {


// ---- RoPE attention step (3) of "Self-Attention Dynamics with Rotary Position Embeddings" ----
ModelInstance build_rope(const Params& P, RunContext&) {
  const int len = static_cast<int>(P.get_int("tokens"));
  const rope::AttentionParams AP = rope_attention_params(P, len, "depth-spectra");
  const double h = P.get_double("h");
  ModelInstance S;
  S.map = std::make_unique<rope::AttentionStep>(AP, len, h);
  S.Z0 = sphere_start(static_cast<std::uint64_t>(P.get_int("seed")), 1, len, AP.d, P.get_string("init") == "hemisphere");
  S.notes["model"] = fmt::format("RoPE attention step (3): x_i <- pi(x_i + h y_i), h = {}, d = {}, beta = {}, rope {}, "
                                 "causal {}, heads {}",
                                 h, AP.d, AP.beta, AP.rope, AP.causal, AP.heads);
  S.notes["frequencies"] = AP.plane_frequencies();
  S.notes["initial_tokens"] = fmt::format("uniform on S^{{d-1}}{}, stream (seed, 0)",
                                          P.get_string("init") == "hemisphere" ? " folded to x_1 >= 0" : "");
  S.notes["tangent_step"] = "trajectory by AttentionStep::apply; tangents by its exact jvp (one call for the k tangents)";
  return S;
}

std::vector<ModelDescriptor> rope_descriptors() {
  return {ModelDescriptor{
      "rope",
      "Self-Attention Dynamics with RoPE, step (3): x_i <- pi(x_i + h y_i), softmax attention with rotary queries and keys",
      {p_int("d", 4, "token dimension (even with RoPE)", 1, 1 << 14),
       p_double("beta", 1.0, "inverse temperature", 0.0),
       p_double("h", 0.1, "residual step h of (3)", 0.0, {}, true),
       p_bool("rope", true, "rotate queries and keys"),
       p_bool("causal", false, "causal mask"),
       p_int("heads", 1, "attention heads", 1, 4096),
       p_double_list("freqs", {}, "frequencies per plane (empty: standard)", -1e12, 1e12).when("rope", {"true"}),
       p_double_list("positions", {}, "token positions (empty: 0..T-1)", -1e12, 1e12),
       p_string("init", "sphere", "initial tokens uniform on the sphere or in the hemisphere x_1 >= 0", {"sphere", "hemisphere"})},
      {"attention"},
      build_rope,
      [](const Params& P) {
        const double d = static_cast<double>(P.get_int("d")), T = static_cast<double>(P.get_int("tokens"));
        return ModelCost{d, 16.0 * T * d, 0.0};
      },
      {},
      {},
      {},
      {}}};
}

__attribute__((init_priority(1000))) const ModelRegistration reg_rope{20, rope_descriptors};

}  // namespace
}  // namespace tokdyn
