#pragma once
// Strict JSON parsing for the files tokdyn reads (Mamba-2 config.json, the safetensors header and
// its shard index). On top of nlohmann's parser (RFC 8259 syntax, UTF-8 checked, numbers that
// overflow a double refused) it refuses
//   - a key given twice in one object, at any depth (nlohmann would keep the last one silently),
//   - nesting deeper than a bound (no real file of ours nests more than a few levels),
// and, only when asked, accepts the non-JSON number tokens that Python's json module writes,
// `Infinity`, `-Infinity` and `NaN` (the Hugging Face Mamba-2 config holds
// `"time_step_limit": [0.0, Infinity]`); they become the double values +inf, -inf and NaN, so that
// each reader decides where such a value is allowed. Only the standard library and nlohmann::json
// are used, so the libFuzzer targets build this file standalone.
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tokdyn::json_strict {

struct Options {
  bool python_nonfinite = false;  ///< accept Infinity, -Infinity, NaN outside strings
  std::size_t max_depth = 64;     ///< objects and arrays nested deeper than this are refused
};

enum class Problem { None, Syntax, Duplicate, TooDeep };

struct Result {
  nlohmann::json value;             ///< the document (discarded unless problem == None)
  Problem problem = Problem::None;
  std::string message;              ///< Syntax: the parser's words with line and column; TooDeep: the bound
  std::string key;                  ///< Duplicate: the key given twice
  std::string path;                 ///< Duplicate: where, e.g. "ssm_cfg" or "weight_map" ("" = top level)
  std::size_t depth = 0;            ///< Duplicate: 1 = a key of the top-level object
};

/// Parses `text` (the whole document). Never throws for bad input: see Result::problem.
Result parse(std::string_view text, const Options& opt = {});

/// Text made printable on one line: control bytes and DEL become \xNN.
std::string one_line(std::string_view s);

/// A short, one-line rendering of a JSON value for messages: nlohmann's dump with NaN and
/// infinities spelled NaN / Infinity / -Infinity, cut after `max_chars`.
std::string brief(const nlohmann::json& v, std::size_t max_chars = 60);

/// A double in messages: shortest round-trip form (%.17g).
std::string number_text(double v);

}  // namespace tokdyn::json_strict
