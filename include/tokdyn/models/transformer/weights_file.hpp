#pragma once
// The Transformer's weight files: safetensors with tensors layers.{l}.W_Q ... (the names in
// models/transformer/transformer.hpp), read into the model's LayerWeights.
#include <string>
#include <utility>
#include <vector>

#include "tokdyn/models/transformer/transformer.hpp"

namespace tokdyn::tf {

/// Reads layers.{l}.* for l = 0..n-1 (tensor names in models/transformer/transformer.hpp); InputError naming the
/// file and tensor for a missing tensor, a wrong shape, a non-finite value, or a tensor that is not
/// one of them.
std::vector<LayerWeights> load_weights(const std::string& path, const Config& c);
/// d and d_ff of a weights file (the shapes of layers.0.W_Q and layers.0.W_1), read from its header.
std::pair<long, long> file_dimensions(const std::string& path);
/// Counts the consecutive layers.{l}.W_Q tensors of a file (the number of weight sets).
int count_layers(const std::string& path);

}  // namespace tokdyn::tf
