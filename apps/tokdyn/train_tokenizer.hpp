#pragma once
// `tokdyn train-tokenizer --corpus FILE|DIR --vocab-size N --out tokenizer.json`: a byte-level BPE
// tokenizer (GPT-2's pipeline) trained on a corpus (io/bpe_trainer.hpp).
#include <string>
#include <vector>

namespace tokdyn::train_tokenizer_cli {

struct Options {
  std::string corpus;
  std::string out;
  long vocab_size = 4096;
  long min_frequency = 2;
  std::vector<std::string> special{"<|endoftext|>"};
  bool json = false;  ///< one JSON line of facts instead of the sentence
};

/// Trains and writes `out` (refused when it exists; written through a temporary file). Throws
/// InputError for bad input.
int run(const Options& o);

}  // namespace tokdyn::train_tokenizer_cli
