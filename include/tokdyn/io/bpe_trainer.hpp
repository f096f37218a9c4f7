#pragma once
// Training a byte-level BPE tokenizer (GPT-2's pipeline: the ByteLevel pre-tokenizer with GPT-2's
// regular expression, byte-level BPE, a ByteLevel decoder) on a corpus, written as a
// tokenizer.json that tokdyn's Tokenizer and Hugging Face's tokenizers read alike.
//
// The algorithm is the classic one (Sennrich et al. 2016, as Hugging Face's BpeTrainer runs it):
// the corpus is split into words by the pre-tokenizer and counted; the alphabet is the 256 byte
// characters (id = byte value, so every text encodes); then, repeatedly, the most frequent pair of
// adjacent symbols (over all words, weighted by their counts) becomes a new symbol. Ties go to the
// pair with the smaller (left id, right id). It stops at `vocab_size` tokens (the special tokens
// included, appended last) or when no pair occurs `min_frequency` times. Deterministic: the
// result depends on the texts only, not on the thread count.
#include <cstdint>
#include <string>
#include <vector>

namespace tokdyn {

struct BpeTrainOptions {
  std::int64_t vocab_size = 4096;  ///< tokens in the result, special tokens included (>= 257)
  std::int64_t min_frequency = 2;  ///< a pair seen fewer times is never merged
  std::vector<std::string> special_tokens{"<|endoftext|>"};
  int threads = 0;  ///< pre-tokenization threads (0: all cores); the result does not depend on it
};

struct BpeTrainResult {
  std::string json;                  ///< the tokenizer.json text
  std::vector<std::string> merges;   ///< "left right" in byte-level characters, in rank order
  std::int64_t vocab_size = 0;       ///< tokens written (may fall short of the request: min_frequency)
  std::int64_t words = 0;            ///< pre-tokenized words in the corpus
  std::int64_t unique_words = 0;
  std::uint64_t bytes = 0;           ///< bytes of text read
};

/// Trains on `texts` (each UTF-8; InputError naming "text N" for invalid UTF-8). std::invalid_argument
/// for options out of range (vocab_size < 257 + specials, min_frequency < 1, a duplicate or empty
/// special token).
BpeTrainResult train_bpe(const std::vector<std::string>& texts, const BpeTrainOptions& options);

}  // namespace tokdyn
