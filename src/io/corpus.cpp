// A training corpus read from a file or a folder (corpus.hpp).
#include "tokdyn/io/corpus.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <system_error>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/sha256.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/tokenizer.hpp"

namespace tokdyn {

Corpus read_corpus(const std::filesystem::path& path, const std::string& what, std::uint64_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    throw InputError(fmt::format("{}: '{}' does not exist; expected a text file or a folder of text files", what,
                                 message_line(path.string())));
  Corpus c;
  std::vector<std::pair<std::string, fs::path>> listed;  // (relative path, path)
  if (fs::is_directory(st)) {
    fs::recursive_directory_iterator it(path, fs::directory_options::none, ec), end;
    if (ec) throw InputError(fmt::format("{}: cannot list '{}' ({})", what, message_line(path.string()), ec.message()));
    for (; it != end; it.increment(ec)) {
      if (ec) throw InputError(fmt::format("{}: cannot list '{}' ({})", what, message_line(path.string()), ec.message()));
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) listed.emplace_back(fs::relative(it->path(), path).generic_string(), it->path());
    }
    if (listed.empty())
      throw InputError(fmt::format("{}: the folder '{}' holds no files; expected text files", what, message_line(path.string())));
    std::sort(listed.begin(), listed.end());
  } else if (fs::is_regular_file(st)) {
    listed.emplace_back(path.filename().string(), path);
  } else {
    throw InputError(fmt::format("{}: '{}' is neither a file nor a folder; expected a text file or a folder of text files",
                                 what, message_line(path.string())));
  }
  std::string hashed;
  for (const auto& [rel, p] : listed) {
    const std::uint64_t left = max_bytes - c.bytes;
    std::string text = read_regular_file(p, left, what);
    require_utf8(text, fmt::format("{}: '{}'", what, message_line(p.string())));
    c.bytes += text.size();
    hashed += rel;
    hashed += '\0';
    hashed += std::to_string(text.size());
    hashed += '\0';
    hashed += text;
    // Pieces of at most 64 KiB, cut after a line end where there is one.
    constexpr std::size_t kPiece = 64 * 1024;
    std::size_t at = 0;
    while (at < text.size()) {
      std::size_t end = std::min(text.size(), at + kPiece);
      if (end < text.size()) {
        const std::size_t nl = text.rfind('\n', end - 1);
        if (nl != std::string::npos && nl >= at) end = nl + 1;
        else
          while (end > at + 1 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // a whole character
      }
      c.texts.push_back(text.substr(at, end - at));
      at = end;
    }
    c.files.push_back(p);
  }
  c.sha256 = sha256_hex(hashed);
  return c;
}

}  // namespace tokdyn
