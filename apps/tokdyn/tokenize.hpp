#pragma once
// `tokdyn tokenize PATH TEXT`: a checkpoint's tokenizer on a text (ids and pieces), many texts from
// a JSON-lines file (--jsonl, one JSON string per line), their throughput, or ids decoded.
#include <string>

namespace tokdyn::tokenize_cli {

struct Options {
  std::string path;       ///< tokenizer.json or a folder holding one
  std::string text;       ///< the text (when no --jsonl and no --decode)
  bool text_given = false;
  std::string jsonl;      ///< texts, one JSON string per line
  std::string decode;     ///< ids to decode ("1 2 3" or "1,2,3")
  bool json = false;      ///< JSON output
  bool no_special = false;
  bool throughput = false;
};

/// Runs the command; throws InputError for bad input.
int run(const Options& o);

}  // namespace tokdyn::tokenize_cli
