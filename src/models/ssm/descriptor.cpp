// The model registry's descriptor of the SSM layer of The Attention Within: its knobs, how it is built from them, its taps and
// cost. It registers itself (runtime/model_registry.hpp); nothing else names it.
#include <fmt/format.h>
#include <memory>

#include "tokdyn/models/ssm/random.hpp"
#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/runtime/model_registry.hpp"

namespace tokdyn {
namespace {


// ---- SSM (The Attention Within (1)-(2)): random zero-mean weights, as the ssm-random-silu preset ----
ModelInstance build_ssm(const Params& P, RunContext&) {
  const SsmRandomSpec spec = ssm_random_spec(P);
  const auto seed = static_cast<std::uint64_t>(P.get_int("seed"));
  const int len = static_cast<int>(P.get_int("tokens"));
  auto sched = ssm_random_schedule(P, P.get_int("redraw"));
  SsmOptions o;
  o.tau = P.get_double("tau");
  o.silu_bc = P.get_bool("silu");
  o.gate = GateKind::Off;
  ModelInstance S;
  S.map = std::make_unique<SsmLayer>(sched, o, P.get_string("form") == "recurrence" ? SsmForm::Recurrence : SsmForm::InputOutput);
  S.Z0 = sphere_start(seed, 1, len, spec.n);
  S.notes["model"] = fmt::format("SSM layer (2) of The Attention Within, n = {}, m = {}, tau = {}, SiLU on B/C {}, gate off, "
                                 "{} weights redrawn every {} layer(s)",
                                 spec.n, spec.m, o.tau, o.silu_bc ? "on" : "off", spec.weights, P.get_int("redraw"));
  S.notes["initial_tokens"] = "uniform on S^{n-1}, stream (seed, 0)";
  S.notes["tangent_step"] = "trajectory by SsmLayer::apply; tangents by its exact jvp (one call for the k tangents)";
  return S;
}

std::vector<ModelDescriptor> ssm_descriptors() {
  return {ModelDescriptor{
      "ssm",
      "The Attention Within (1)-(2): the selective SSM layer on spheres, random zero-mean weights (as ssm-random-silu)",
      {p_int("n", 16, "token dimension n", 1, 65536),
       p_int("m", 16, "hidden-state size per channel", 1, 65536),
       p_double("tau", 1.0, "step of the normalised update (2)", 0.0, 1e6, true),
       p_string("weights", "mamba2", "random weight distribution", {"mamba2", "gaussian"}),
       p_double("sigma", 1.0, "standard deviation for weights=gaussian", 0.0, {}, true).when("weights", {"gaussian"}),
       p_bool("silu", true, "SiLU on the B and C branches"),
       p_int("redraw", 1, "weights redrawn every this many layers (>= depth: one weight-tied layer)", 1, 10000000),
       p_string("form", "io", "which exact form computes the layer: input-output (io) or the recurrence", {"io", "recurrence"})},
      {"q"},
      build_ssm,
      [](const Params& P) {
        const double d = static_cast<double>(P.get_int("n")), m = static_cast<double>(P.get_int("m"));
        const double T = static_cast<double>(P.get_int("tokens"));
        return ModelCost{d, 4.0 * d * (d + m) + 8.0 * T * d,
                         8.0 * 2.0 * (3.0 * d * d + 2.0 * m * d + 2.0 * d)};  // a layer's weights (and the next one drawn)
      },
      {},
      {},
      {"redraw"},
      {}}};
}

__attribute__((init_priority(1000))) const ModelRegistration reg_ssm{10, ssm_descriptors};

}  // namespace
}  // namespace tokdyn
