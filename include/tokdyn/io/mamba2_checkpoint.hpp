#pragma once
// Mamba-2 checkpoints on disk: the config.json reader (state-spaces and Hugging Face layouts) and
// the safetensors weights, read into a mamba2::Model and written in the reference layout. The
// one loader module for checkpoint files; further architectures add their reader here.
#include <filesystem>
#include <string>
#include <string_view>

#include "tokdyn/models/mamba2.hpp"
#include "tokdyn/models/mamba2_config.hpp"

namespace tokdyn::mamba2 {

/// Reads config.json.
/// pad_vocab_size_multiple (16); the Hugging Face layout gives only the padded vocab_size (50288:
/// the HF conversion rounds it up and drops the multiple). Rule: an HF config that is one of the
/// released models -- hidden_size and num_hidden_layers of mamba2-130m/370m/780m/1.3b/2.7b, the
/// default state_size 128, head_dim 64, expand 2, n_groups 1, conv_kernel 4, and vocab_size 50288
/// -- gets vocab_size 50277 and pad_vocab_multiple 16, exactly as its state-spaces config; any
/// other HF config keeps its vocab_size as the real vocabulary (pad_vocab_multiple 1), since its
/// tokenizer is unknown to tokdyn. Config::vocab_rule says which rule applied.
Config parse_config(const std::filesystem::path& file);
/// The same, from the file's bytes (`what` names the file in messages). For tests and fuzzing.
Config parse_config_text(std::string_view text, const std::string& what);

/// Loads a checkpoint: a directory holding config.json and model.safetensors (or a sharded
/// model.safetensors.index.json), or a .safetensors file with config.json beside it. Both tensor
/// naming schemes; tied embeddings (lm_head absent, or present and ignored). Every shape is
/// checked against the config; missing or unexpected tensors and non-finite values are refused.
/// Throws InputError (one line, naming the file).
Model load(const std::filesystem::path& path);

/// Writes config.json and model.safetensors into `dir` in the reference layout: state-spaces
/// names, tied embedding without lm_head, F16 tensors except A_log, dt_bias and D (F32), and
/// __metadata__ {"format": "pt"}. Written to a temporary directory, then renamed.
void save(const Model& m, const std::filesystem::path& dir);

}  // namespace tokdyn::mamba2
