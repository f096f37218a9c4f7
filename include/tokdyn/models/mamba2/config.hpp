#pragma once
// The Mamba-2 model configuration and its config.json reader (both layouts: state-spaces/mamba's
// MambaConfig, and the Hugging Face port's Mamba2Config). Kept apart from the block (mamba2.hpp)
// so that the libFuzzer target builds the reader without Eigen or BLAS.
//
// The reader accepts only what tokdyn computes exactly (README, "Mamba-2 config.json"):
//   - strict JSON: a key twice in one object (at any depth) is refused; the only non-JSON token
//     accepted is Python's `Infinity`, and only as the upper end of `time_step_limit` (HF) or
//     `ssm_cfg.dt_limit` (state-spaces); NaN or an infinity anywhere else is refused;
//   - every field that changes the block's numbers is either applied (dimensions, norm epsilon)
//     or must hold the one value tokdyn computes (no biases, conv bias on, SiLU, gate before the
//     norm, RMSNorm, no dt clamp, d_ssm = d_inner, no MLP or attention layers);
//   - state-spaces: unknown keys are refused, as the reference's MambaConfig(**cfg) and
//     Mamba2(**ssm_cfg) refuse them; Hugging Face: keys tokdyn does not know are left alone
//     (PretrainedConfig stores any key), the known ones are checked;
//   - at most kMaxConfigBytes bytes, a regular file (a FIFO or /dev/zero is refused at once).
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tokdyn::mamba2 {

/// Largest config.json read (a real one is under 2 KiB).
inline constexpr std::uint64_t kMaxConfigBytes = 1 << 20;

/// The real vocabulary of every released state-spaces/mamba2-* model (the GPT-NeoX-20B
/// tokenizer), and the embedding rows it is padded to (a multiple of 16).
inline constexpr int kReleasedVocab = 50277;
inline constexpr int kReleasedVocabPadded = 50288;

/// Model dimensions. Defaults are the `Mamba2` module defaults every released checkpoint uses.
struct Config {
  int d_model = 768;
  int n_layer = 24;
  int vocab_size = 50277;       ///< the real vocabulary: default token ids are drawn from [0, vocab_size)
  int pad_vocab_multiple = 16;  ///< embedding rows = vocab_size rounded up to this multiple
  int d_state = 128;
  int d_conv = 4;
  int expand = 2;
  int headdim = 64;
  int ngroups = 1;
  double eps = 1e-5;
  bool tie_embeddings = true;
  std::string format = "state-spaces";  ///< "state-spaces" or "hf" (the config.json it came from)
  /// How vocab_size was found (recorded in manifest.json): state-spaces layouts give it directly;
  /// the HF layout gives only the padded size, see parse_config_text.
  std::string vocab_rule = "tokdyn's built-in configuration";

  int d_inner() const { return expand * d_model; }
  int nheads() const { return d_inner() / headdim; }
  int conv_dim() const { return d_inner() + 2 * ngroups * d_state; }
  int d_in_proj() const { return 2 * d_inner() + 2 * ngroups * d_state + nheads(); }
  int vocab_padded() const;
  /// Throws InputError (naming `what`) unless every dimension is positive and consistent.
  void validate(const std::string& what) const;
  /// The state-spaces config.json (ssm_cfg carries the non-default Mamba2 sizes).
  nlohmann::json to_json() const;
  /// Named sizes: "tiny" (test model), "130m", "370m", "780m", "1.3b", "2.7b".
  static Config named(const std::string& size);
  static std::vector<std::string> sizes();
};

/// Parses a config.json of either layout. Throws InputError (one line, naming the file).
///
/// Vocabulary: the state-spaces layout gives the real vocab_size (50277) and
}  // namespace tokdyn::mamba2
