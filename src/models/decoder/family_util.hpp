#pragma once
// What the decoder families' files share (private to src/models/decoder/): reading config.json
// fields with their types, refusing every field a reader does not know, and tensor slots.
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tokdyn/core/error.hpp"
#include "tokdyn/models/decoder/decoder.hpp"

namespace tokdyn::decoder::detail {

/// Fields of config.json that never change the forward pass (metadata, training-time dropout,
/// generation settings, token ids): accepted and ignored by every family.
inline const std::set<std::string>& harmless_fields() {
  static const std::set<std::string> s{
      "_name_or_path", "transformers_version", "torch_dtype", "dtype", "use_cache", "bos_token_id", "eos_token_id",
      "pad_token_id", "sep_token_id", "decoder_start_token_id", "tokenizer_class", "task_specific_params",
      "output_attentions", "output_hidden_states", "return_dict", "id2label", "label2id", "problem_type", "max_length",
      "min_length", "do_sample", "num_beams", "temperature", "top_k", "top_p", "repetition_penalty", "length_penalty",
      "no_repeat_ngram_size", "early_stopping", "prefix", "finetuning_task", "chunk_size_feed_forward", "is_decoder",
      "is_encoder_decoder", "tie_encoder_decoder", "pruned_heads", "torchscript", "use_bfloat16", "output_scores",
      "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
      "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", "cross_attention_hidden_size",
      "typical_p", "num_return_sequences", "bad_words_ids", "diversity_penalty", "num_beam_groups", "encoder_no_repeat_ngram_size",
      "attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "classifier_dropout",
      "hidden_dropout_prob", "attention_dropout_prob", "summary_type", "summary_use_proj", "summary_activation",
      "summary_proj_to_labels", "summary_first_dropout", "gradient_checkpointing", "output_past", "n_ctx", "pretraining_tp",
      "initializer_range", "use_return_dict", "quantization_config_absent"};
  return s;
}

/// One config.json: typed reads that remember which fields were read, and finish() refusing any
/// other field (it may change the forward pass: never ignored).
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string what, std::string family) : j_(j), what_(std::move(what)), family_(std::move(family)) {
    if (!j_.is_object()) fail("", "a JSON object");
  }
  [[noreturn]] void fail(const std::string& field, const std::string& expected) const {
    if (field.empty()) throw InputError(one_line(fmt::format("{}: expected {} (a {} config.json)", what_, expected, family_)));
    throw InputError(one_line(fmt::format("{}: field '{}' = {}; expected {}", what_, field,
                                          j_.contains(field) ? j_.at(field).dump() : "missing", expected)));
  }
  /// A message on one line: control bytes (a string value of the file may hold a newline) as \xNN.
  static std::string one_line(const std::string& s) {
    std::string o;
    for (unsigned char c : s) {
      if (c < 0x20 || c == 0x7f) o += fmt::format("\\x{:02x}", c);
      else o.push_back(static_cast<char>(c));
    }
    return o;
  }
  bool has(const std::string& f) const { return j_.contains(f) && !j_.at(f).is_null(); }
  const nlohmann::json& raw(const std::string& f) {
    used_.insert(f);
    return j_.at(f);
  }
  void use(const std::string& f) { used_.insert(f); }
  long get_int(const std::string& f, long lo, long hi, std::optional<long> def = std::nullopt) {
    used_.insert(f);
    if (!has(f)) {
      if (def) return *def;
      fail(f, fmt::format("an integer in [{}, {}] (required)", lo, hi));
    }
    const auto& v = j_.at(f);
    if (!v.is_number_integer() || v.get<long long>() < lo || v.get<long long>() > hi) fail(f, fmt::format("an integer in [{}, {}]", lo, hi));
    return static_cast<long>(v.get<long long>());
  }
  double get_double(const std::string& f, double lo, double hi, std::optional<double> def = std::nullopt) {
    used_.insert(f);
    if (!has(f)) {
      if (def) return *def;
      fail(f, fmt::format("a number in [{}, {}] (required)", lo, hi));
    }
    const auto& v = j_.at(f);
    if (!v.is_number() || !(v.get<double>() >= lo && v.get<double>() <= hi)) fail(f, fmt::format("a number in [{}, {}]", lo, hi));
    return v.get<double>();
  }
  bool get_bool(const std::string& f, bool def) {
    used_.insert(f);
    if (!has(f)) return def;
    if (!j_.at(f).is_boolean()) fail(f, "true or false");
    return j_.at(f).get<bool>();
  }
  std::string get_string(const std::string& f, const std::vector<std::string>& allowed, std::optional<std::string> def) {
    used_.insert(f);
    if (!has(f)) {
      if (def) return *def;
      fail(f, fmt::format("one of {} (required)", fmt::join(allowed, ", ")));
    }
    const auto& v = j_.at(f);
    std::string s = v.is_string() ? v.get<std::string>() : std::string();
    if (!v.is_string() || std::find(allowed.begin(), allowed.end(), s) == allowed.end())
      fail(f, fmt::format("one of {} (others are not implemented)", fmt::join(allowed, ", ")));
    return s;
  }
  /// model_type and architectures, when present, name this family.
  void check_identity(const std::string& model_type, const std::vector<std::string>& classes) {
    used_.insert("model_type");
    used_.insert("architectures");
    if (has("model_type") && (!j_.at("model_type").is_string() || j_.at("model_type").get<std::string>() != model_type))
      fail("model_type", fmt::format("\"{}\" (use --set model=<family> for the checkpoint's family)", model_type));
    if (has("architectures")) {
      const auto& a = j_.at("architectures");
      bool ok = a.is_array() && !a.empty();
      if (ok)
        for (const auto& x : a)
          ok = ok && x.is_string() && std::find(classes.begin(), classes.end(), x.get<std::string>()) != classes.end();
      if (!ok) fail("architectures", fmt::format("[{}]", fmt::join(classes, " or ")));
    }
  }
  /// Refuses any field neither read nor harmless.
  void finish() const {
    for (const auto& [k, v] : j_.items()) {
      if (used_.count(k) || harmless_fields().count(k)) continue;
      throw InputError(fmt::format("{}: field '{}' is not implemented by tokdyn's {} reader (it may change the forward pass, so it "
                                   "is refused rather than ignored); expected only the fields docs/models.md lists",
                                   what_, k, family_));
    }
  }

 private:
  const nlohmann::json& j_;
  std::string what_, family_;
  std::set<std::string> used_;
};

/// The rope_scaling object: null, {"type"|"rope_type": "linear", "factor"} or llama3's
/// {"rope_type": "llama3", factor, low_freq_factor, high_freq_factor, original_max_position_embeddings};
/// every other type refused by name.
inline void read_rope_scaling(ConfigReader& r, Arch& a, bool allow_llama3) {
  r.use("rope_scaling");
  if (!r.has("rope_scaling")) return;
  const nlohmann::json& s = r.raw("rope_scaling");
  if (!s.is_object()) r.fail("rope_scaling", "null or an object");
  std::string type;
  for (const char* k : {"rope_type", "type"})
    if (s.contains(k) && s.at(k).is_string()) type = s.at(k).get<std::string>();
  if (type == "default" || type.empty()) {
    if (s.size() > (s.contains("rope_type") ? 1u : 0u) + (s.contains("type") ? 1u : 0u))
      r.fail("rope_scaling", "a type tokdyn implements: linear" + std::string(allow_llama3 ? " or llama3" : ""));
    return;
  }
  if (type != "linear" && !(allow_llama3 && type == "llama3"))
    r.fail("rope_scaling", fmt::format("type linear{} (rope_scaling type '{}' is not implemented)", allow_llama3 ? " or llama3" : "", type));
  auto num = [&](const char* k, bool required, double def) {
    if (!s.contains(k)) {
      if (required) r.fail("rope_scaling", fmt::format("a number '{}'", k));
      return def;
    }
    if (!s.at(k).is_number()) r.fail("rope_scaling", fmt::format("a number '{}'", k));
    return s.at(k).get<double>();
  };
  for (const auto& [k, v] : s.items())
    if (k != "rope_type" && k != "type" && k != "factor" &&
        !(type == "llama3" && (k == "low_freq_factor" || k == "high_freq_factor" || k == "original_max_position_embeddings")))
      r.fail("rope_scaling", fmt::format("no field '{}' for type {} (not implemented)", k, type));
  a.rope_scaling = type;
  a.rope_factor = num("factor", true, 1);
  if (type == "llama3") {
    a.rope_low_freq_factor = num("low_freq_factor", true, 1);
    a.rope_high_freq_factor = num("high_freq_factor", true, 4);
    a.rope_original_max = num("original_max_position_embeddings", true, 8192);
  }
}

/// Validates the arch, naming the file.
inline void validate(const Arch& a, const std::string& what) {
  try {
    a.validate();
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("{}: {}", what, e.what()));
  }
}

// ---- slots ----

inline std::uint64_t numel(const std::vector<std::uint64_t>& s) {
  std::uint64_t n = 1;
  for (auto x : s) n *= x;
  return n;
}

/// A tensor stored as tokdyn holds it: `n` contiguous floats at acc(model).
template <class Acc>
TensorSlot direct(std::string name, std::vector<std::uint64_t> shape, Acc acc, std::string init = "normal", double sd = 0) {
  const std::uint64_t n = numel(shape);
  TensorSlot s;
  s.name = std::move(name);
  s.shape = std::move(shape);
  s.load = [acc, n](Model& m, const float* x) { std::memcpy(acc(m), x, n * sizeof(float)); };
  s.save = [acc, n](const Model& m) {
    const float* p = acc(const_cast<Model&>(m));
    return std::vector<float>(p, p + n);
  };
  s.init = std::move(init);
  s.init_std = sd;
  return s;
}

/// A matrix stored transposed ([in, out], GPT-2's Conv1D) that tokdyn holds as [out, in] rows at acc(model).
template <class Acc>
TensorSlot transposed(std::string name, std::uint64_t in, std::uint64_t out, Acc acc, double sd = 0) {
  TensorSlot s;
  s.name = std::move(name);
  s.shape = {in, out};
  s.load = [acc, in, out](Model& m, const float* x) {
    float* p = acc(m);
    for (std::uint64_t i = 0; i < in; ++i)
      for (std::uint64_t o = 0; o < out; ++o) p[o * in + i] = x[i * out + o];
  };
  s.save = [acc, in, out](const Model& m) {
    const float* p = acc(const_cast<Model&>(m));
    std::vector<float> v(in * out);
    for (std::uint64_t i = 0; i < in; ++i)
      for (std::uint64_t o = 0; o < out; ++o) v[i * out + o] = p[o * in + i];
    return v;
  };
  s.init_std = sd;
  return s;
}

}  // namespace tokdyn::decoder::detail
