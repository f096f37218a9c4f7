#pragma once
// The parts of a tokenizer (io/tokenizer.hpp): Unicode helpers, the regex engine, the pipeline's
// steps as parsed from tokenizer.json, and the BPE model. Shared by the files of src/io/tokenizer/.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokdyn/io/tokenizer.hpp"

typedef struct re_pattern_buffer OnigRegexType;

namespace tokdyn::tok {

// ---- Unicode (unicode.cpp) ----

/// Decodes the code point at s[i] (valid UTF-8 assumed) and advances i past it.
char32_t next_char(std::string_view s, std::size_t& i);
/// The byte length of the UTF-8 character starting with byte `lead`.
std::size_t char_len(unsigned char lead);
void append_utf8(std::string& out, char32_t c);
/// Byte index of the first invalid UTF-8 sequence, or npos.
std::size_t invalid_utf8_at(std::string_view s);
/// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes U+FFFD.
std::string utf8_lossy(std::string_view bytes);

bool is_whitespace(char32_t c);    ///< Rust char::is_whitespace (White_Space)
bool is_numeric(char32_t c);       ///< Rust char::is_numeric (Nd, Nl, No)
bool is_alphanumeric(char32_t c);  ///< Rust char::is_alphanumeric (Alphabetic or numeric)
/// A word character of Rust's regex \\w (Alphabetic, marks, decimal digits, connector punctuation,
/// Join_Control): the single_word rule of added tokens.
bool is_word_char(char32_t c);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalize(std::string_view s, NormalForm f);

/// An Oniguruma regular expression (the reference library's engine, same syntax and tables).
class Regex {
 public:
  Regex(const std::string& pattern, const std::string& where);  ///< InputError naming `where`
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  /// Every match [start, end) from left to right, as the onig crate's find_iter: an empty match
  /// right after the previous match is skipped by one character.
  void find_all(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const;

 private:
  OnigRegexType* re_ = nullptr;
};

// ---- the pipeline's steps ----

/// A pattern of Replace / Split: a literal string or a regex.
struct Pattern {
  std::string literal;
  std::shared_ptr<const Regex> regex;  ///< set: a regex
  /// Non-overlapping matches as (offsets, is_match) covering all of `s` (Hugging Face's find_matches).
  void find_matches(std::string_view s, std::vector<std::pair<std::pair<std::size_t, std::size_t>, bool>>& out) const;
};

struct Normalizer {
  enum class Kind { Sequence, Form, Strip, Prepend, Replace } kind = Kind::Sequence;
  std::vector<Normalizer> seq;
  NormalForm form = NormalForm::NFC;
  bool left = false, right = false;  ///< Strip
  std::string text;                  ///< Prepend: the prefix; Replace: the content
  Pattern pattern;                   ///< Replace
  void apply(std::string& s) const;
  std::string name() const;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
enum class Prepend { Always, First, Never };

/// A piece of text during pre-tokenization; `at_start`: it begins at offset 0 of the input.
struct Piece {
  std::string text;
  bool at_start = false;
  std::int64_t id = -1;  ///< >= 0: an added token, left alone by the pre-tokenizers and the model
};

struct PreTokenizer {
  enum class Kind { Sequence, ByteLevel, Split, Metaspace, Whitespace, WhitespaceSplit, Digits } kind = Kind::Sequence;
  std::vector<PreTokenizer> seq;
  bool add_prefix_space = false, use_regex = true;  ///< ByteLevel
  Pattern pattern;                                  ///< Split (Whitespace: \w+|[^\w\s]+)
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  std::string replacement = "\u2581";  ///< Metaspace
  Prepend prepend = Prepend::Always;
  bool split = true;
  bool individual_digits = false;  ///< Digits
  void apply(std::vector<Piece>& pieces) const;
  std::string name() const;
};

struct PostProcessor {
  enum class Kind { Sequence, ByteLevel, Template, Bert } kind = Kind::Sequence;
  std::vector<PostProcessor> seq;
  /// Template: the single template as (is_sequence, special name); Bert / Roberta: cls, A, sep.
  std::vector<std::pair<bool, std::string>> single;
  std::unordered_map<std::string, std::pair<std::vector<std::int64_t>, std::vector<std::string>>> specials;
  void apply(Encoding& e) const;
  std::string name() const;
};

struct Decoder {
  enum class Kind { Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, BPE } kind = Kind::Sequence;
  std::vector<Decoder> seq;
  Pattern pattern;               ///< Replace
  std::string content;           ///< Replace: the replacement; BPE: the suffix
  char32_t strip_char = ' ';
  std::size_t start = 0, stop = 0;
  std::string replacement = "\u2581";
  Prepend prepend = Prepend::Always;
  void apply(std::vector<std::string>& tokens) const;
  std::string name() const;
};

struct AddedToken {
  std::int64_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

/// Hash with heterogeneous lookup (find by string_view without a copy).
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, std::int64_t, StringHash, std::equal_to<>>;

// ---- the BPE model (bpe.cpp) ----
struct Bpe {
  Vocab vocab;
  std::vector<std::string> vocab_r;  ///< id -> token ("" and absent for holes)
  std::vector<char> present;
  /// (left id, right id) -> (rank, merged id)
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges;
  std::string unk_token;  ///< empty: none
  std::int64_t unk_id = -1;
  std::string prefix, suffix;  ///< continuing_subword_prefix, end_of_word_suffix
  bool has_prefix = false, has_suffix = false;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  std::int64_t byte_ids[256];  ///< byte fallback: id of "<0xXX>", -1 when absent

  using Cache = std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>>;
  /// Appends the ids of one pre-tokenized word to `ids`; spans that became unk or were dropped to `unknown`.
  void tokenize(std::string_view word, std::vector<std::int64_t>& ids, std::vector<std::string>& unknown, Cache* cache) const;
  /// The merged ids of `word` (no cache).
  void merge_word(std::string_view word, std::vector<std::int32_t>& out, std::vector<std::string>& unknown) const;
};

/// The GPT-2 byte-to-character map (bytes_to_unicode) as UTF-8 strings, and its inverse.
const std::string& byte_char(unsigned char b);
/// The byte of a byte-level character, or -1.
int char_byte(char32_t c);

}  // namespace tokdyn::tok

namespace tokdyn {

struct Tokenizer::Impl {
  std::string source, sha;
  tok::Bpe bpe;
  std::vector<tok::AddedToken> added;  ///< in file order
  std::unordered_map<std::int64_t, std::size_t> added_by_id;
  tok::Vocab added_by_content;
  std::vector<std::size_t> raw_tokens, normalized_tokens;  ///< indices into `added`
  std::vector<std::string> normalized_content;              ///< content of each normalized token, normalized
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre;
  std::unique_ptr<tok::PostProcessor> post;
  std::unique_ptr<tok::Decoder> decoder;
  std::int64_t vocab_size = 0;

  Encoding encode(std::string_view text, bool add_special, tok::Bpe::Cache& cache) const;
  std::string token_of(std::int64_t id) const;  ///< "" when none
};

}  // namespace tokdyn
