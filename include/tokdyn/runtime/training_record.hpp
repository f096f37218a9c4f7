#pragma once
// What a checkpoint made by `tokdyn train` says about its training (its manifest.json): every run
// given such a checkpoint records it in manifest.json as notes.trained_by, and the figures say it in
// their footer (python/tokdyn_plot/common.py).
#include <string>

#include <nlohmann/json.hpp>

namespace tokdyn {

/// {model, size, parameters, steps, tokens_seen, epochs, heldout_loss, unigram_entropy, seed,
/// corpus_sha256, tokenizer_sha256} from `checkpoint`/manifest.json when `tokdyn train` wrote it;
/// for one of its intermediate checkpoints (checkpoints/step-N: state.json beside the weights,
/// train-args.json two folders up) {checkpoint_step, model, size, seed, steps, tokens_seen, the
/// last held-out loss before it}; null otherwise (no such file, another tool's, unreadable).
nlohmann::json training_record(const std::string& checkpoint);

}  // namespace tokdyn
