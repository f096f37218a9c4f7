#pragma once
// Decoder-family checkpoints on disk (GPT-2, GPT-NeoX, Llama: models/decoder/): config.json read
// by the family's reader, safetensors weights (one file or sharded; F32, F16, BF16, F64) placed
// by the family's tensor slots, every shape checked against the config, unknown tensors refused,
// and a fresh model written in the exact Hugging Face layout.
#include <cstdint>
#include <filesystem>
#include <string>

#include "tokdyn/models/decoder/decoder.hpp"

namespace tokdyn::decoder {

/// config.json of a checkpoint directory (or beside a .safetensors file), read by family `f`.
/// InputError naming the file for a malformed file or a field the family refuses.
Arch read_config(const Family& f, const std::filesystem::path& path_or_dir);
/// Parses config.json text (the fuzz target's entry).
Arch parse_config_text(const Family& f, const std::string& text, const std::string& what);

/// Bytes the model needs in memory as float32 (its tensors as the config implies them).
std::uint64_t memory_bytes(const Arch& a);

/// Loads a checkpoint of family `f`. Refuses (ResourceError, exit 3) before reading any weight a
/// model whose float32 weights exceed the machine's memory, with the estimate.
Model load(const Family& f, const std::filesystem::path& path_or_dir);

/// Writes config.json (the arch's) and model.safetensors (F32, names and shapes of the family's
/// slots; tied embeddings stored once) into the new directory `dir` (temporary folder renamed).
void save(const Family& f, const Model& m, const std::filesystem::path& dir);

}  // namespace tokdyn::decoder
