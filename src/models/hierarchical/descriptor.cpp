// The model registry's descriptor of the coupling paper's hierarchical model (C1)-(C2): its knobs, how it is built from them, its taps and
// cost. It registers itself (runtime/model_registry.hpp); nothing else names it.
#include <fmt/format.h>
#include <memory>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/models/hierarchical/hierarchical.hpp"
#include "tokdyn/models/hierarchical/setup.hpp"
#include "tokdyn/models/transformer/setup.hpp"
#include "tokdyn/runtime/model_registry.hpp"

namespace tokdyn {
namespace {


// ---- the hierarchical model (C1)-(C2), eq. (11) of the coupling paper: the Transformer with the
// block-local mask and the slow path (compressions of blocks, a gated injection) ----
ModelInstance build_hierarchical(const Params& P, RunContext& ctx) {
  // The knobs are the shared Transformer schema's keys (tf::transformer_params) but the mask: P as it
  // is, with the block-local mask of length `block` (C1).
  Params q = P;
  q.values_["mask"] = std::string("block");
  q.values_["window"] = 4L;  // masks other than block-local only
  q.values_["eps_leak"] = 1e-3;
  if (P.get_string("tying") == "untied" && P.get_string("tf_weights").empty() && P.get_int("depth") > 5000)
    throw InputError(fmt::format("parameter 'depth' = {}: untied random weights are drawn for every layer, at most 5000 "
                                 "(use --set tying=tied or tying=looped for deeper runs)", P.get_int("depth")));
  tf::Transformer model = tf::transformer_from(q, ctx);
  const tf::Config c = model.config();
  const int T = static_cast<int>(P.get_int("tokens"));
  const int block = static_cast<int>(P.get_int("block"));
  const hier::SlowPath s = hier::slow_path_from(P, c.d, P.get_double("rho"));
  auto hm = std::make_unique<hier::HierarchicalModel>(std::move(model), s, T);
  Tokens X(T, c.d);
  Rng(static_cast<std::uint64_t>(P.get_int("seed")), {0x7f}).fill_normal(X, 1.0);
  ModelInstance S;
  S.Z0 = hm->initial_state(X, 1);
  S.notes["model"] = fmt::format("hierarchical (C1)-(C2), eq. (11): Transformer block (4) with d = {}, block-local mask P = {}; "
                                 "slow path: Pi = {}, psi = {}, rho = {}, refresh every {} ({}), {} pooled, {}, {} injection",
                                 c.d, block, P.get_string("compression"), P.get_string("injection"), s.rho, s.L_r,
                                 P.get_string("refresh"), P.get_string("pooled"), P.get_string("slow_loop"), P.get_string("site"));
  S.notes["state_rows"] = fmt::format("{} token rows, then the {} held block summaries (the state of the coupled system)", T, hm->blocks());
  S.notes["initial_tokens"] = "Gaussian entries of unit variance, stream (seed, 0x7f); summaries Pi(pooled(x(0)))";
  S.notes["tangent_step"] = "trajectory by HierarchicalModel::apply; tangents by its exact jvp (tokens and summaries)";
  S.map = std::move(hm);
  return S;
}

std::vector<ModelDescriptor> hierarchical_descriptors() {
  // The hierarchical model: the Transformer's knobs but its mask (always block-local, of length
  // `block`), and the slow path's.
  std::vector<ParamSpec> hk{p_int("d", 4, "token dimension (= d_k = d_v)", 1, 1 << 14),
                            p_int("heads", 1, "attention heads (must divide d)", 1, 4096)};
  for (ParamSpec& q : tf::transformer_registry_knobs())
    if (q.key != "mask" && q.key != "block" && q.key != "window" && q.key != "eps_leak") hk.push_back(std::move(q));
  for (ParamSpec q : std::vector<ParamSpec>{
           p_int("block", 4, "block length P of the block-local attention (C1) and of the compressions (C2)", 1, 512),
           p_double("rho", 0.1, "gate amplitude rho of the slow path's injection", -1e6, 1e6),
           p_string("compression", "mean", "compression Pi of a block (Remark 4)", {"mean", "stride", "head", "topk"}),
           p_int("topk", 1, "tokens averaged by the top-k selector", 1, 512).when("compression", {"topk"}),
           p_string("injection", "tanh-mlp", "injection psi", {"identity", "linear", "affine", "tanh-mlp"}),
           p_int("psi_hidden", 8, "hidden width of the tanh-MLP psi", 1, 4096).when("injection", {"tanh-mlp"}),
           p_double("psi_scale", 1.0, "scale of psi's random weights", 0.0, 1e6, true).when_not("injection", {"identity"}),
           p_int("refresh_every", 1, "summaries refreshed every this many layers (0: held for the whole pass)", 0, 10000000),
           p_string("refresh", "hold", "sample-and-hold refresh or the continuous relaxation (12)", {"hold", "relax"})
               .when_not("refresh_every", {"0"}),  // held for the whole pass: no refresh to choose
           p_string("pooled", "normalised", "pooled quantity: the raw stream x or the normalised S(x) (flag F9)", {"raw", "normalised"}),
           p_string("slow_loop", "chain", "block k reads the summary of block k-1 (chain) or its own (self, eq. (15))", {"chain", "self"}),
           p_string("site", "additive", "injection site: additive (eq. (11)) or inside the norms' argument (Pre-LN only)",
                    {"additive", "inside"})})
    hk.push_back(std::move(q));
  return {ModelDescriptor{
      "hierarchical",
      "Coupling paper eq. (11): the Transformer with block-local attention (C1) and the gated slow path of block summaries (C2)",
      std::move(hk),
      {},
      build_hierarchical,
      [](const Params& P) {
        const double d = static_cast<double>(P.get_int("d")), T = static_cast<double>(P.get_int("tokens"));
        return ModelCost{d, 6.0 * d * (2.0 * d + static_cast<double>(P.get_int("d_ff"))) + 12.0 * T * d, 0.0};
      },
      {},
      {},
      {"tying", "loop", "refresh_every"},
      {}}};
}

__attribute__((init_priority(1000))) const ModelRegistration reg_hierarchical{50, hierarchical_descriptors};

}  // namespace
}  // namespace tokdyn
