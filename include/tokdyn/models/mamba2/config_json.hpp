#pragma once
// The Mamba-2 config.json reader (state-spaces and Hugging Face layouts). Standard library,
// nlohmann::json and tokdyn's strict JSON and file helpers only (fuzzed standalone).
#include <filesystem>
#include <string>
#include <string_view>

#include "tokdyn/models/mamba2/config.hpp"

namespace tokdyn::mamba2 {

/// Reads config.json. About the vocabulary:
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

}  // namespace tokdyn::mamba2
