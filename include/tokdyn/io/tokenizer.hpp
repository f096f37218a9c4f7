#pragma once
// Text in: a checkpoint's own tokenizer, read from its Hugging Face `tokenizer.json`, encoding and
// decoding exactly as Hugging Face's `tokenizers` library does (tests/reference/tokenizer compares
// the two on the published GPT-2, Llama 2 and Llama 3 vocabularies).
//
// Supported (everything else is refused by name, InputError, never approximated):
//   model           BPE (merges as "a b" strings or [a, b] pairs; unk_token, fuse_unk, byte_fallback,
//                   continuing_subword_prefix, end_of_word_suffix, ignore_merges; dropout null or 0)
//   normalizer      Sequence, NFC, NFD, NFKC, NFKD, Strip, Prepend, Replace
//   pre_tokenizer   Sequence, ByteLevel, Split, Metaspace, Whitespace, WhitespaceSplit, Digits
//   post_processor  Sequence, ByteLevel, TemplateProcessing, BertProcessing, RobertaProcessing
//   decoder         Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, BPEDecoder
//   added_tokens    with single_word, lstrip, rstrip, normalized and special
// Regular expressions run on Oniguruma (the engine of the reference library); Unicode
// normalisation and character properties come from ICU.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tokdyn {

/// One text encoded.
struct Encoding {
  std::vector<std::int64_t> ids;
  std::vector<std::string> pieces;  ///< the vocabulary strings of the ids (Hugging Face's "tokens")
  std::vector<char> special;        ///< 1: an added special token or one the post-processor added
  /// Text the vocabulary could not produce: each span that became the unknown token, or that was
  /// dropped because the model has neither an unknown token nor byte fallback.
  std::vector<std::string> unknown;
};

class Tokenizer {
 public:
  /// Reads `path`: a tokenizer.json, or a folder holding one (a checkpoint folder). InputError
  /// naming the file and what was expected for a missing, malformed or unsupported file.
  static Tokenizer from_file(const std::filesystem::path& path);
  /// Parses the text of a tokenizer.json; `name` is the source used in messages.
  static Tokenizer from_json(std::string_view json, const std::string& name);

  /// Encodes one text (UTF-8; InputError for invalid UTF-8). add_special_tokens: apply the
  /// post-processor's template (BOS / EOS), as Hugging Face's encode(text, add_special_tokens).
  Encoding encode(std::string_view text, bool add_special_tokens = true) const;
  /// Encodes many texts on `threads` threads (0: all cores); the result does not depend on it.
  std::vector<Encoding> encode_batch(const std::vector<std::string>& texts, bool add_special_tokens = true,
                                     int threads = 0) const;
  /// Decodes ids as Hugging Face's decode(ids, skip_special_tokens). InputError for an id outside
  /// the vocabulary.
  std::string decode(std::span<const std::int64_t> ids, bool skip_special_tokens = false) const;
  /// One id decoded alone: the piece as text, for labels (" world" for GPT-2's "Ġworld").
  std::string piece_text(std::int64_t id) const;

  std::optional<std::int64_t> token_to_id(std::string_view token) const;
  /// The vocabulary string of `id` (added tokens included); InputError when there is none.
  std::string id_to_token(std::int64_t id) const;
  /// One past the largest id (added tokens included).
  std::int64_t vocab_size() const;
  bool is_special(std::int64_t id) const;
  /// Where it was read from (a path, or the name given to from_json).
  const std::string& source() const;
  /// One line: the model and pipeline, e.g. "BPE (50257 tokens, 50000 merges), pre-tokenizer ByteLevel, ...".
  std::string summary() const;
  /// SHA-256 of the tokenizer.json bytes (hex), for manifests.
  const std::string& sha256() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

/// The tokenizer.json of a checkpoint path: the file itself, or `dir/tokenizer.json`, or the
/// tokenizer.json next to a weights file. Empty when there is none.
std::filesystem::path find_tokenizer_json(const std::filesystem::path& path);

/// Checks that `text` is valid UTF-8; InputError "`what`: invalid UTF-8 at byte N ..." otherwise.
void require_utf8(std::string_view text, const std::string& what);

}  // namespace tokdyn
