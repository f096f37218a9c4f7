// The model registry's descriptor of the coupling paper's Transformer block (4): its knobs, how it is built from them, its taps and
// cost. It registers itself (runtime/model_registry.hpp); nothing else names it.
#include <fmt/format.h>
#include <memory>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/models/transformer/setup.hpp"
#include "tokdyn/models/transformer/transformer.hpp"
#include "tokdyn/runtime/model_registry.hpp"

namespace tokdyn {
namespace {


// ---- the Transformer block (4) of the coupling paper, seeded random or from a safetensors file ----
ModelInstance build_transformer(const Params& P, RunContext& ctx) {
  // The knobs are the shared Transformer schema's keys (tf::transformer_params): P is read as it is.
  if (P.get_string("tying") == "untied" && P.get_string("tf_weights").empty() && P.get_int("depth") > 5000)
    throw InputError(fmt::format("parameter 'depth' = {}: untied random weights are drawn for every layer, at most 5000 "
                                 "(use --set tying=tied or tying=looped for deeper runs)", P.get_int("depth")));
  tf::Transformer model = tf::transformer_from(P, ctx);
  const tf::Config& c = model.config();
  const int len = static_cast<int>(P.get_int("tokens"));
  ModelInstance S;
  Tokens X(len, c.d);
  Rng(static_cast<std::uint64_t>(P.get_int("seed")), {0x7f}).fill_normal(X, 1.0);
  S.Z0 = Batch{X, 1, len};
  S.map = std::make_unique<tf::Transformer>(std::move(model));
  S.notes["model"] = fmt::format("Transformer block (4): d = {}, d_ff = {}, {} {}, {}, mask {}, tying {}", c.d, c.d_ff,
                                 P.get_string("placement"), P.get_string("norm"), P.get_string("activation"),
                                 P.get_string("mask"), P.get_string("tying"));
  S.notes["initial_tokens"] = "Gaussian entries of unit variance, stream (seed, 0x7f)";
  S.notes["tangent_step"] = "trajectory by Transformer::apply; tangents by its exact jvp (one call for the k tangents)";
  return S;
}

std::vector<ModelDescriptor> transformer_descriptors() {
  std::vector<ParamSpec> tk{p_int("d", 4, "token dimension (= d_k = d_v)", 1, 1 << 14),
                            p_int("heads", 1, "attention heads (must divide d)", 1, 4096)};
  for (ParamSpec& q : tf::transformer_registry_knobs()) tk.push_back(std::move(q));
  return {ModelDescriptor{
      "transformer",
      "Coupling paper block (4): the Transformer depth map (Pre/Post-LN, RMS/LayerNorm, masks, RoPE/ALiBi), seeded or from a weights file",
      std::move(tk),
      {"attention", "residual_mid"},
      build_transformer,
      [](const Params& P) {
        const double d = static_cast<double>(P.get_int("d")), T = static_cast<double>(P.get_int("tokens"));
        return ModelCost{d, 6.0 * d * (2.0 * d + static_cast<double>(P.get_int("d_ff"))) + 12.0 * T * d, 0.0};
      },
      {},
      {},
      {"tying", "loop"},
      {}}};
}

__attribute__((init_priority(1000))) const ModelRegistration reg_transformer{40, transformer_descriptors};

}  // namespace
}  // namespace tokdyn
