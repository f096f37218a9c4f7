// The Transformer presets' shared architecture parameters and model construction.
#include "tokdyn/models/transformer/setup.hpp"
#include "tokdyn/runtime/inputs.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "tokdyn/models/transformer/weights_file.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn::tf {

std::vector<ParamSpec> transformer_params(long d, long d_ff, long tokens, long depth, double sigma_b) {
  return {p_int("d", d, "token dimension (= d_k = d_v)", 1, 256),
          p_int("d_ff", d_ff, "MLP width", 1, 4096),
          p_int("tokens", tokens, "tokens per sequence", 1, 512),
          p_int("depth", depth, "depth (number of layers)", 1, 5000),
          p_double("sigma_w", 1.0, "weight std x sqrt(fan_in) (random weights only)", 0.0, 100.0).when("tf_weights", {""}),
          p_double("sigma_b", sigma_b, "bias std (b_1, b_2) (random weights only)", 0.0, 100.0).when("tf_weights", {""}),
          p_string("norm", "rms", "norm S", {"rms", "layer", "none"}),
          p_double("eps", 1e-6, "eps_S of the norm", 0.0, 1.0).when_not("norm", {"none"}),
          p_string("placement", "pre", "norm placement", {"pre", "post"}),
          p_string("activation", "gelu", "MLP activation phi (relu is not C^1: warned)", {"gelu", "gelu-tanh", "silu", "tanh", "relu"}),
          p_string("mask", "causal", "attention mask", {"causal", "bidirectional", "block", "sliding", "leaky"}),
          p_int("block", 4, "block length (mask = block)", 1, 512).when("mask", {"block"}),
          p_int("window", 4, "sliding window w (mask = sliding)", 1, 512).when("mask", {"sliding"}),
          p_double("eps_leak", 1e-3, "weight of future tokens (mask = leaky)", 0.0, 1.0, true).when("mask", {"leaky"}),
          p_string("positional", "none", "positional scheme", {"none", "rope", "alibi"}),
          p_double("temperature", 0.0, "softmax temperature tau (0 = sqrt(d/heads))", 0.0, 1e6),
          p_int("heads", 1, "attention heads (the paper: 1; must divide d)", 1, 256),
          p_string("tying", "untied", "weights across depth", {"untied", "tied", "looped"}),
          p_int("loop", 4, "period of a looped stack (tying = looped, random weights)", 1, 5000).when("tying", {"looped"}).when("tf_weights", {""}),
          p_string("tf_weights", "", "safetensors file of layers.{l}.W_Q ... (empty: seeded random weights)").file(),
          p_int("seed", 0, "base seed", 0, kMaxSeed)};
}

std::vector<ParamSpec> transformer_registry_knobs() {
  std::vector<ParamSpec> out;
  for (ParamSpec q : tf::transformer_params(4, 16, 16, 200, 0.0))
    if (q.key != "d" && q.key != "heads" && q.key != "seed" && q.key != "tokens" && q.key != "depth") out.push_back(std::move(q));
  return out;
}

std::vector<std::pair<std::string, std::string>> renamed_keys(const std::vector<ParamSpec>& params) {
  const auto has = [&](const std::string& key) {
    return std::any_of(params.begin(), params.end(), [&](const ParamSpec& s) { return s.key == key; });
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::pair<std::string, std::string>& r :
       std::vector<std::pair<std::string, std::string>>{{"T", "tokens"}, {"L", "depth"}, {"weights", "tf_weights"}, {"P", "block"}})
    if (has(r.second) && !has(r.first)) out.push_back(r);
  return out;
}

Experiment with_renamed_keys(Experiment e) {
  for (auto& r : renamed_keys(e.params)) e.renamed.push_back(std::move(r));
  return e;
}

void applies_only_when(std::vector<ParamSpec>& ps, const std::vector<std::string>& keys, const std::string& key,
                       const std::vector<std::string>& values) {
  for (ParamSpec& s : ps)
    if (std::find(keys.begin(), keys.end(), s.key) != keys.end()) s.only_when.push_back({key, values, false});
}

std::vector<std::string> transformer_keys() {
  std::vector<std::string> out;
  for (const ParamSpec& s : transformer_params(1, 1, 1, 1, 0.0)) out.push_back(s.key);
  return out;
}

Config config_from(const Params& p) {
  const std::string& file = p.get_string("tf_weights");
  if (!file.empty()) {
    const auto [fd, fff] = file_dimensions(file);
    if (fd != p.get_int("d") || fff != p.get_int("d_ff"))
      throw InputError(fmt::format("parameter 'tf_weights' = {}: the file's Transformer has d = {}, d_ff = {} (layers.0.W_Q, layers.0.W_1); "
                                   "expected d = {} and d_ff = {} to match it (--set d={} --set d_ff={})",
                                   file, fd, fff, p.get_int("d"), p.get_int("d_ff"), fd, fff));
  }
  Config c;
  c.d = static_cast<int>(p.get_int("d"));
  c.d_ff = static_cast<int>(p.get_int("d_ff"));
  c.norm = parse_norm(p.get_string("norm"));
  c.eps = p.get_double("eps");
  c.placement = parse_placement(p.get_string("placement"));
  c.phi = parse_activation(p.get_string("activation"));
  c.mask = parse_mask(p.get_string("mask"));
  c.block = static_cast<int>(p.get_int("block"));
  c.window = static_cast<int>(p.get_int("window"));
  c.eps_leak = p.get_double("eps_leak");
  c.pos = parse_positional(p.get_string("positional"));
  c.temperature = p.get_double("temperature");
  c.heads = static_cast<int>(p.get_int("heads"));
  if (c.d % c.heads)
    throw InputError(fmt::format("parameter 'heads' = {}: expected a divisor of d = {}", c.heads, c.d));
  if (c.pos == Positional::Rope && (c.d / c.heads) % 2)
    throw InputError(fmt::format("parameter 'd' = {}: positional = rope needs an even head size d/heads (heads = {})", c.d, c.heads));
  c.validate();
  return c;
}

std::vector<LayerWeights> weights_from(const Params& p, const Config& c, std::uint64_t seed_offset) {
  const int L = static_cast<int>(p.get_int("depth"));
  const Tying tying = parse_tying(p.get_string("tying"));
  const std::string& file = p.get_string("tf_weights");
  if (!file.empty()) {
    auto w = load_weights(file, c);
    const auto n = static_cast<int>(w.size());
    // Every weight set of the file is used: no silent truncation, no silent "layer 0 of 50".
    if (tying == Tying::Untied && n != L)
      throw InputError(fmt::format("parameter 'tf_weights' = {}: {} weight sets in the file; tying = untied uses one per layer, expected "
                                   "exactly depth = {} (--set depth={}, or tying = looped to repeat them)", file, n, L, n));
    if (tying == Tying::Tied && n != 1)
      throw InputError(fmt::format("parameter 'tf_weights' = {}: {} weight sets in the file; tying = tied uses exactly one (layers.0.* "
                                   "only), expected a file with one set, or tying = untied / looped", file, n));
    return w;
  }
  const int n = tying == Tying::Tied ? 1 : tying == Tying::Looped ? static_cast<int>(p.get_int("loop")) : L;
  std::vector<LayerWeights> w;
  for (int r = 0; r < n; ++r)
    w.push_back(random_weights(c, r, p.get_double("sigma_w"), p.get_double("sigma_b"),
                               static_cast<std::uint64_t>(p.get_int("seed")) + seed_offset));
  return w;
}

Transformer transformer_from(const Params& p, RunContext& ctx, std::uint64_t seed_offset) {
  const Config c = config_from(p);
  for (const auto& w : c.warnings()) ctx.warnings.push_back(w);
  std::vector<LayerWeights> w = weights_from(p, c, seed_offset);
  if (p.get_string("tf_weights").empty()) {
    // Drawn here: written so that anyone can recompute (and --set <key>=inputs/... reruns on them).
    const std::string file = seed_offset == 0 ? std::string("tf_weights.safetensors") : fmt::format("tf_weights_{}.safetensors", seed_offset);
    write_input_transformer(ctx, file, w,
                            fmt::format("the {} randomly drawn weight set(s) of the Transformer stack (tying = {}); rerun on them with "
                                        "--set tf_weights=<this folder>/inputs/{} --set tying={}",
                                        w.size(), p.get_string("tying"), file, p.get_string("tying")));
  }
  return Transformer(c, std::move(w), parse_tying(p.get_string("tying")));
}

Vec reference_start(const Config& c, std::uint64_t seed) {
  Vec x(c.d);
  Rng(seed, {0xa11ce}).fill_normal(x, 1.0);
  return x;
}

}  // namespace tokdyn::tf
