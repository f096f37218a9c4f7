#include "train_tokenizer.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/bpe_trainer.hpp"
#include "tokdyn/io/corpus.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/tokenizer.hpp"

namespace tokdyn::train_tokenizer_cli {

int run(const Options& o) {
  namespace fs = std::filesystem;
  const auto t0 = std::chrono::steady_clock::now();
  if (o.out.empty()) throw InputError("--out: expected the path of the tokenizer.json to write");
  const fs::path out(o.out);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec)))
    throw InputError(fmt::format("--out: '{}' exists; expected a new file (tokdyn never replaces a file it did not write)",
                                 message_line(o.out)));
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec))
    throw InputError(fmt::format("--out: the folder '{}' does not exist", message_line(parent.string())));
  BpeTrainOptions opt;
  opt.vocab_size = o.vocab_size;
  opt.min_frequency = o.min_frequency;
  opt.special_tokens = o.special;
  const Corpus corpus = read_corpus(o.corpus, "--corpus");
  BpeTrainResult r;
  try {
    r = train_bpe(corpus.texts, opt);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  // The file is read back before it is published: what we write, we can load.
  const Tokenizer check = Tokenizer::from_json(r.json, o.out);
  const fs::path tmp = parent / fmt::format(".{}.tmp-{}", out.filename().string(), static_cast<long>(::getpid()));
  try {
    write_text_file(tmp, r.json);
    fs::rename(tmp, out);
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.json) {
    nlohmann::json j{{"path", o.out}, {"vocab_size", r.vocab_size}, {"merges", r.merges.size()},
                     {"corpus_bytes", r.bytes}, {"corpus_sha256", corpus.sha256}, {"files", corpus.files.size()},
                     {"words", r.words}, {"unique_words", r.unique_words}, {"tokenizer_sha256", check.sha256()},
                     {"seconds", secs}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("wrote {}: {} tokens ({} merges{}) from {} bytes in {} file{} ({} words, {} distinct); {:.1f} s\n",
               message_line(o.out), r.vocab_size, r.merges.size(),
               r.vocab_size < o.vocab_size ? fmt::format("; no pair left seen {} times", o.min_frequency) : "",
               corpus.bytes, corpus.files.size(), corpus.files.size() == 1 ? "" : "s", r.words, r.unique_words, secs);
  }
  return 0;
}

}  // namespace tokdyn::train_tokenizer_cli
