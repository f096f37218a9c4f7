// Mamba-2 checkpoints: config.json (both layouts) and safetensors weights, read and written
// (see models/mamba2/checkpoint.hpp). The config reader uses the standard library, nlohmann::json and
// tokdyn's strict JSON and file helpers only (fuzzed standalone: scripts/fuzz.sh mamba2_config).
#include "tokdyn/models/mamba2/config_json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/json_strict.hpp"

namespace tokdyn::mamba2 {

namespace {

using json = nlohmann::json;

[[noreturn]] void json_fail(const std::string& what, const std::string& text) {
  throw InputError(json_strict::one_line(what + ": " + text));
}

}  // namespace

// ---------------------------------------------------------------- config.json

namespace {

/// Typed access to the keys of one JSON object, with messages naming the key by its path.
class Fields {
 public:
  Fields(const json& obj, std::string prefix, const std::string& what) : obj_(obj), prefix_(std::move(prefix)), what_(what) {}

  std::string name(const std::string& key) const { return "'" + prefix_ + key + "'"; }
  const json* get(const std::string& key) const {
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }
  [[noreturn]] void bad(const std::string& key, const std::string& text) const { json_fail(what_, "key " + name(key) + ": " + text); }

  int integer(const std::string& key, int def, bool required = false) const {
    const json* v = get(key);
    if (!v) {
      if (required) json_fail(what_, "missing key " + name(key) + "; expected an integer");
      return def;
    }
    if (!v->is_number_integer()) bad(key, "expected an integer, got " + json_strict::brief(*v));
    if (v->is_number_unsigned() ? v->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<int>::max())
                                : (v->get<std::int64_t>() < std::numeric_limits<int>::min() ||
                                   v->get<std::int64_t>() > std::numeric_limits<int>::max()))
      bad(key, "expected an integer in the int range, got " + json_strict::brief(*v));
    return v->is_number_unsigned() ? static_cast<int>(v->get<std::uint64_t>()) : static_cast<int>(v->get<std::int64_t>());
  }
  bool boolean(const std::string& key, bool def) const {
    const json* v = get(key);
    if (!v) return def;
    if (!v->is_boolean()) bad(key, "expected true or false, got " + json_strict::brief(*v));
    return v->get<bool>();
  }
  /// A boolean that tokdyn supports with one value only.
  void require_bool(const std::string& key, bool def, bool supported, const std::string& why) const {
    if (boolean(key, def) != supported)
      bad(key, std::string(supported ? "false" : "true") + " is not supported (" + why + "); expected " +
                   (supported ? "true" : "false"));
  }
  double number(const std::string& key, double def) const {
    const json* v = get(key);
    if (!v) return def;
    if (!v->is_number()) bad(key, "expected a number, got " + json_strict::brief(*v));
    return v->get<double>();
  }
  std::string string(const std::string& key, const std::string& def) const {
    const json* v = get(key);
    if (!v) return def;
    if (!v->is_string()) bad(key, "expected a string, got " + json_strict::brief(*v));
    return v->get<std::string>();
  }
  /// dt_limit / time_step_limit: tokdyn applies no clamp, so only (0, inf) -- the default and the
  /// value of every released model -- is accepted.
  void require_no_dt_clamp(const std::string& key) const {
    const json* v = get(key);
    if (!v) return;
    if (!v->is_array() || v->size() != 2 || !(*v)[0].is_number() || !(*v)[1].is_number())
      bad(key, "expected two numbers [low, high], got " + json_strict::brief(*v));
    const double lo = (*v)[0].get<double>(), hi = (*v)[1].get<double>();
    if (!(lo == 0.0 && hi == std::numeric_limits<double>::infinity()))
      bad(key, json_strict::brief(*v) +
                   " would clamp dt after the softplus, and tokdyn applies no dt clamp; expected [0.0, Infinity] "
                   "(no clamp, the value of every released model)");
  }
  /// Refuses keys not in `known` (state-spaces: the reference refuses them too).
  void only(const std::vector<std::string>& known, const std::string& whose) const {
    for (const auto& [k, v] : obj_.items()) {
      (void)v;
      if (std::find(known.begin(), known.end(), k) == known.end()) {
        std::string list;
        for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
        json_fail(what_, "unknown key " + name(k) + " (" + whose + " has no such field); expected only " + list);
      }
    }
  }

 private:
  const json& obj_;
  std::string prefix_;
  const std::string& what_;
};

/// Refuses NaN and infinities everywhere except at `allowed` (a path such as
/// "time_step_limit[1]"), where +Infinity is accepted.
void refuse_nonfinite(const json& v, const std::string& path, const std::string& allowed, const std::string& what) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) || (path == allowed && d > 0)) return;
    json_fail(what, "key '" + path + "' is " + json_strict::brief(v) + "; expected a finite number (Infinity only as the upper end of " +
                   (allowed.empty() ? std::string("a dt limit") : "'" + allowed.substr(0, allowed.size() - 3) + "'") + ")");
  }
  if (v.is_object())
    for (const auto& [k, e] : v.items()) refuse_nonfinite(e, path.empty() ? k : path + "." + k, allowed, what);
  if (v.is_array())
    for (std::size_t i = 0; i < v.size(); ++i) refuse_nonfinite(v[i], path + "[" + std::to_string(i) + "]", allowed, what);
}

const char* const kExpectConfig = "a Mamba-2 config.json (state-spaces or Hugging Face layout)";

struct Released {
  const char* name;
  int d_model, n_layer;
};
// The released state-spaces/mamba2-* models (all with the GPT-NeoX-20B tokenizer, 50277 tokens).
constexpr Released kReleased[] = {
    {"mamba2-130m", 768, 24}, {"mamba2-370m", 1024, 48}, {"mamba2-780m", 1536, 48}, {"mamba2-1.3b", 2048, 48}, {"mamba2-2.7b", 2560, 64}};

void parse_state_spaces(const json& j, Config& c, const std::string& what) {
  c.format = "state-spaces";
  const Fields f(j, "", what);
  refuse_nonfinite(j, "", "ssm_cfg.dt_limit[1]", what);
  f.only({"d_model", "d_intermediate", "n_layer", "vocab_size", "ssm_cfg", "attn_layer_idx", "attn_cfg", "rms_norm",
          "residual_in_fp32", "fused_add_norm", "pad_vocab_size_multiple", "tie_embeddings"},
         "the reference MambaConfig");
  c.d_model = f.integer("d_model", 0, true);
  c.n_layer = f.integer("n_layer", 0, true);
  c.vocab_size = f.integer("vocab_size", 0, true);
  c.pad_vocab_multiple = f.integer("pad_vocab_size_multiple", 8);  // MambaConfig's default
  c.tie_embeddings = f.boolean("tie_embeddings", true);             // the output head only: not used
  f.require_bool("rms_norm", true, true, "tokdyn's block uses RMSNorm");
  f.boolean("residual_in_fp32", true);  // tokdyn keeps the residual in fp32 either way
  f.boolean("fused_add_norm", true);    // a kernel choice, the same numbers
  if (f.integer("d_intermediate", 0) != 0)
    f.bad("d_intermediate", "MLP blocks are not supported; expected 0 (a pure Mamba-2 model)");
  if (const json* a = f.get("attn_layer_idx"); a && !(a->is_array() && a->empty()))
    f.bad("attn_layer_idx", "attention layers are not supported; expected [] (a pure Mamba-2 model), got " +
                                json_strict::brief(*a));
  if (const json* a = f.get("attn_cfg"); a && !a->is_object())
    f.bad("attn_cfg", "expected an object, got " + json_strict::brief(*a));
  const json* sp = f.get("ssm_cfg");
  if (!sp || !sp->is_object()) json_fail(what, "missing object 'ssm_cfg'; expected {\"layer\": \"Mamba2\", ...}");
  const Fields s(*sp, "ssm_cfg.", what);
  s.only({"layer", "d_state", "d_conv", "expand", "headdim", "ngroups", "d_ssm", "rmsnorm", "norm_before_gate",
          "D_has_hdim", "bias", "conv_bias", "dt_limit", "conv_init", "A_init_range", "dt_min", "dt_max", "dt_init_floor",
          "chunk_size", "use_mem_eff_path", "sequence_parallel", "process_group", "device", "dtype"},
         "the reference Mamba2 module");
  if (s.string("layer", "Mamba1") != "Mamba2")
    s.bad("layer", "expected \"Mamba2\" (Mamba-1 is not supported; an absent layer means Mamba1), got " +
                       (s.get("layer") ? json_strict::brief(*s.get("layer")) : std::string("none")));
  c.d_state = s.integer("d_state", c.d_state);
  c.d_conv = s.integer("d_conv", c.d_conv);
  c.expand = s.integer("expand", c.expand);
  c.headdim = s.integer("headdim", c.headdim);
  c.ngroups = s.integer("ngroups", c.ngroups);
  s.require_bool("rmsnorm", true, true, "tokdyn's block has the gated RMSNorm");
  s.require_bool("norm_before_gate", false, false, "tokdyn gates before the norm, as the checkpoints do");
  s.require_bool("D_has_hdim", false, false, "tokdyn's D is one value per head");
  s.require_bool("bias", false, false, "tokdyn's projections have no bias");
  s.require_bool("conv_bias", true, true, "tokdyn's conv has a bias");
  s.require_no_dt_clamp("dt_limit");
  if (const json* d = s.get("d_ssm"); d && !d->is_null()) {
    const int d_ssm = s.integer("d_ssm", 0);
    if (static_cast<long long>(d_ssm) != static_cast<long long>(c.expand) * c.d_model)
      s.bad("d_ssm", std::to_string(d_ssm) + " would put only part of the channels through the SSM; expected null or d_inner = " +
                         std::to_string(static_cast<long long>(c.expand) * c.d_model));
  }
  // conv_init, A_init_range, dt_min, dt_max, dt_init_floor set initial values only (the weights
  // are read from the checkpoint); chunk_size, use_mem_eff_path, sequence_parallel, process_group,
  // device, dtype choose kernels and placement, not the numbers.
  c.vocab_rule = "state-spaces config.json: vocab_size " + std::to_string(c.vocab_size) +
                 " is the real vocabulary (embedding padded to a multiple of " + std::to_string(c.pad_vocab_multiple) + ")";
}

void parse_hf(const json& j, Config& c, const std::string& what) {
  c.format = "hf";
  const Fields f(j, "", what);
  refuse_nonfinite(j, "", "time_step_limit[1]", what);
  if (const json* t = f.get("model_type"); t && *t != "mamba2")
    f.bad("model_type", "expected \"mamba2\", got " + json_strict::brief(*t));
  // Absent keys take the Hugging Face Mamba2Config defaults, except n_groups (HF default 8,
  // released models 1), which must be given.
  c.d_model = f.integer("hidden_size", 0, true);
  c.n_layer = f.integer("num_hidden_layers", 0, true);
  const int vocab = f.integer("vocab_size", 0, true);
  c.d_state = f.integer("state_size", 128);
  c.d_conv = f.integer("conv_kernel", 4);
  c.expand = f.integer("expand", 2);
  c.headdim = f.integer("head_dim", 64);
  c.ngroups = f.integer("n_groups", 8, true);
  c.tie_embeddings = f.boolean("tie_word_embeddings", false);  // the output head only: not used
  c.eps = f.number("layer_norm_epsilon", 1e-5);
  if (!(c.eps > 0)) f.bad("layer_norm_epsilon", "expected a number > 0, got " + json_strict::number_text(c.eps));
  f.require_bool("use_bias", false, false, "tokdyn's projections have no bias");
  f.require_bool("use_conv_bias", true, true, "tokdyn's conv has a bias");
  f.require_bool("rms_norm", true, true, "tokdyn's block uses RMSNorm");
  f.require_bool("norm_before_gate", false, false, "tokdyn gates before the norm, as the checkpoints do");
  f.boolean("residual_in_fp32", true);  // tokdyn keeps the residual in fp32 either way
  const std::string act = f.string("hidden_act", "silu");
  if (act != "silu" && act != "swish")
    f.bad("hidden_act", "\"" + act + "\" is not supported (tokdyn's conv activation is SiLU); expected \"silu\"");
  f.require_no_dt_clamp("time_step_limit");
  c.vocab_size = vocab;
  c.pad_vocab_multiple = 1;
  c.validate(what);
  const int heads = f.integer("num_heads", 128);
  if (heads != c.nheads())
    json_fail(what, "inconsistent config: num_heads = " + std::to_string(heads) + (f.get("num_heads") ? "" : " (the HF default)") +
                   "; expected expand * hidden_size / head_dim = " + std::to_string(c.nheads()));
  // The vocabulary: see parse_config_text in the header.
  const Released* rel = nullptr;
  for (const auto& r : kReleased)
    if (r.d_model == c.d_model && r.n_layer == c.n_layer) rel = &r;
  const Config def;
  if (rel && vocab == kReleasedVocabPadded && c.d_state == def.d_state && c.headdim == def.headdim &&
      c.expand == def.expand && c.ngroups == def.ngroups && c.d_conv == def.d_conv) {
    c.vocab_size = kReleasedVocab;
    c.pad_vocab_multiple = 16;
    c.vocab_rule = std::string("Hugging Face config.json gives the padded vocab_size 50288; the model is the released "
                               "state-spaces/") +
                   rel->name + " (hidden_size, num_hidden_layers, default sizes), whose GPT-NeoX-20B tokenizer has 50277 "
                               "tokens: vocab_size 50277, padded to a multiple of 16, as in its state-spaces config";
  } else {
    c.vocab_rule = "Hugging Face config.json gives vocab_size " + std::to_string(vocab) +
                   ", the embedding rows; not a released state-spaces/mamba2-* model, so its tokenizer size is unknown "
                   "to tokdyn and all " + std::to_string(vocab) + " rows count as the vocabulary (set vocab=N to draw ids from fewer)";
  }
  // chunk_size, time_step_rank/min/max/floor, initializer_range, rescale_prenorm_residual,
  // use_cache and the token ids are kernel choices, initialisation or generation settings.
}

}  // namespace

Config parse_config_text(std::string_view text, const std::string& what) {
  json_strict::Options opt;
  opt.python_nonfinite = true;
  opt.max_depth = 32;
  const json_strict::Result r = json_strict::parse(text, opt);
  switch (r.problem) {
    case json_strict::Problem::None: break;
    case json_strict::Problem::Duplicate:
      json_fail(what, "duplicate key '" + r.key + "'" + (r.path.empty() ? std::string() : " in '" + r.path + "'") +
                     "; expected each key once (a JSON reader would silently keep one of the values)");
    case json_strict::Problem::TooDeep:
      json_fail(what, "JSON nests deeper than " + std::to_string(opt.max_depth) + " levels; expected " + kExpectConfig);
    case json_strict::Problem::Syntax:
      json_fail(what, "not valid JSON (" + r.message + "); expected " + kExpectConfig);
  }
  const json& j = r.value;
  if (!j.is_object()) json_fail(what, std::string("expected a JSON object (") + kExpectConfig + "), got " + json_strict::brief(j));
  Config c;
  if (j.contains("d_model")) parse_state_spaces(j, c, what);
  else if (j.contains("hidden_size")) parse_hf(j, c, what);
  else
    json_fail(what, "neither a state-spaces config (no 'd_model') nor a Hugging Face Mamba-2 config (no 'hidden_size'); expected " +
                   std::string(kExpectConfig));
  c.validate(what);
  return c;
}

Config parse_config(const std::filesystem::path& file) {
  const std::string what = file.string();
  return parse_config_text(read_regular_file(file, kMaxConfigBytes, what), what);
}

}  // namespace tokdyn::mamba2
