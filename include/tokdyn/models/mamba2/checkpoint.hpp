#pragma once
// Mamba-2 checkpoints on disk: the config.json reader (state-spaces and Hugging Face layouts) and
// the safetensors weights, read into a mamba2::Model and written in the reference layout. The
// one loader module for checkpoint files; further architectures add their reader here.
#include <filesystem>
#include <string>
#include <string_view>

#include "tokdyn/models/mamba2/mamba2.hpp"
#include "tokdyn/models/mamba2/config_json.hpp"
#include "tokdyn/models/mamba2/config.hpp"

namespace tokdyn::mamba2 {

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
