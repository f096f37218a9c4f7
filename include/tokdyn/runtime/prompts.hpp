#pragma once
// Text in for runs: the knobs `prompt` (one text, one run) and `prompts` (a file, one prompt per
// line, one run each), encoded by the model's own tokenizer (the checkpoint's tokenizer.json, or
// the knob `tokenizer`), with `add_special_tokens` (the tokenizer's BOS / EOS template).
//
// The rule for several prompts: every prompt must encode to the same number of tokens; prompts of
// different lengths are refused with their lengths (tokdyn neither pads nor masks: a pad token
// would be a token that moves with the others). The number of tokens (and of runs) is the
// prompts': an explicit `tokens` or `runs` beside a prompt is refused. Text the vocabulary cannot
// produce (it would become the unknown token, or be dropped) is refused, naming it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn {

struct PromptTokens {
  std::vector<std::int64_t> ids;  ///< [runs, len], row-major
  int runs = 0, len = 0;
  std::vector<std::string> texts;
  std::vector<std::vector<std::string>> pieces;  ///< the vocabulary strings
  std::vector<std::vector<std::string>> labels;  ///< each piece decoded alone (" world")
  std::string tokenizer, sha256, summary;        ///< the tokenizer.json used
  /// For the manifest: {"tokenizer": {...}, "prompts": [{text, ids, pieces, labels}, ...]}.
  nlohmann::json manifest() const;
};

/// The prompt knobs of a model with token ids, added to its descriptor (and to presets listing
/// its knobs): prompt, prompts, tokenizer, add_special_tokens.
std::vector<ParamSpec> prompt_knobs();

/// The prompts P gives (nullopt when neither `prompt` nor `prompts` is set), encoded by the
/// tokenizer of `tokenizer`, else of `checkpoint`. InputError for every refusal above, for a
/// missing tokenizer, and for a bad tokenizer.json.
std::optional<PromptTokens> prompt_tokens(const Params& P, const std::string& checkpoint);

/// The ids of prompts checked against a model's `rows` embedding rows (InputError naming the
/// tokenizer when one is outside).
void check_prompt_ids(const PromptTokens& pt, long rows);

}  // namespace tokdyn
