#pragma once
// A text corpus for training (tokenizers, models): a file, or every regular file under a folder
// (recursively; names starting with '.' skipped; in byte order of their paths relative to the
// folder). Each file must be UTF-8. python/tokdyn_train/data.py lists a corpus by the same rule and
// both hash it the same way, so a manifest's data hash names the same bytes in either language.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tokdyn {

struct Corpus {
  std::vector<std::filesystem::path> files;  ///< in reading order
  std::vector<std::string> texts;            ///< the files cut at line ends into pieces of <= 64 KiB
  std::uint64_t bytes = 0;
  /// SHA-256 over, per file in order: its relative path (the file name for a file corpus), a NUL,
  /// its size as decimal text, a NUL, its bytes.
  std::string sha256;
};

/// Reads `path`; InputError naming `what` for a missing path, a folder without files, a file that
/// is not UTF-8 (naming it and the byte) or a corpus above `max_bytes`.
Corpus read_corpus(const std::filesystem::path& path, const std::string& what, std::uint64_t max_bytes = std::uint64_t{1} << 30);

}  // namespace tokdyn
