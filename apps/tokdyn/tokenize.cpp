// `tokdyn tokenize`: see tokenize.hpp.
#include "tokenize.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/json_strict.hpp"
#include "tokdyn/io/tokenizer.hpp"

namespace tokdyn::tokenize_cli {

namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json encoding_json(const Tokenizer& T, const Encoding& e) {
  json j;
  j["ids"] = e.ids;
  j["pieces"] = e.pieces;
  j["decoded"] = T.decode(e.ids, false);
  return j;
}

/// The texts of a JSON-lines file: each line one JSON string.
std::vector<std::string> read_jsonl(const std::string& path) {
  const std::string all = read_regular_file(path, std::uint64_t{4} << 30, path);
  std::vector<std::string> texts;
  std::size_t line = 0;
  for (std::size_t at = 0; at < all.size();) {
    std::size_t nl = all.find('\n', at);
    if (nl == std::string::npos) nl = all.size();
    ++line;
    const std::string_view s(all.data() + at, nl - at);
    at = nl + 1;
    if (s.empty() && at >= all.size()) break;
    const json_strict::Result r = json_strict::parse(s);
    if (r.problem != json_strict::Problem::None || !r.value.is_string())
      throw InputError(fmt::format("{}:{}: expected one JSON string per line{}", path, line,
                                   r.problem == json_strict::Problem::Syntax ? " (" + r.message + ")" : std::string()));
    texts.push_back(r.value.get<std::string>());
  }
  return texts;
}

std::vector<std::int64_t> parse_ids(const std::string& s) {
  std::vector<std::int64_t> ids;
  std::size_t i = 0;
  while (i < s.size()) {
    if (s[i] == ' ' || s[i] == ',' || s[i] == '\t') {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i || j - i > 10)
      throw InputError(fmt::format("--decode: expected token ids separated by spaces or commas, got '{}'", json_strict::one_line(s)));
    ids.push_back(std::stoll(s.substr(i, j - i)));
    i = j;
  }
  return ids;
}

/// A piece for a terminal: quoted, control characters escaped.
std::string shown(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += fmt::format("\\{}", static_cast<char>(c));
    else if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else if (c == '\r') o += "\\r";
    else if (c < 0x20 || c == 0x7f) o += fmt::format("\\x{:02x}", c);
    else o.push_back(static_cast<char>(c));
  }
  return o + "\"";
}

}  // namespace

int run(const Options& o) {
  const int modes = (o.text_given ? 1 : 0) + (o.jsonl.empty() ? 0 : 1) + (o.decode.empty() ? 0 : 1);
  if (modes != 1)
    throw InputError("tokenize: expected one of a TEXT, --jsonl FILE or --decode IDS (see `tokdyn tokenize --help`)");
  if (o.throughput && o.jsonl.empty()) throw InputError("tokenize: --throughput measures --jsonl FILE; give one");
  if (o.throughput && o.json) throw InputError("tokenize: --throughput prints one line; --json does not apply");
  if (!o.decode.empty() && o.no_special) throw InputError("tokenize: --no-special applies to encoding, not to --decode");
  const Tokenizer T = Tokenizer::from_file(o.path);
  const bool special = !o.no_special;
  if (!o.decode.empty()) {
    const std::vector<std::int64_t> ids = parse_ids(o.decode);
    const std::string text = T.decode(ids, false);
    if (o.json) fmt::print("{}\n", dump(json{{"ids", ids}, {"decoded", text}}));
    else fmt::print("{}\n", text);
    return 0;
  }
  if (!o.jsonl.empty()) {
    const std::vector<std::string> texts = read_jsonl(o.jsonl);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<Encoding> enc = T.encode_batch(texts, special, o.throughput ? 1 : 0);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (o.throughput) {
      std::size_t bytes = 0, tokens = 0;
      for (const auto& t : texts) bytes += t.size();
      for (const auto& e : enc) tokens += e.ids.size();
      fmt::print("tokdyn: encoded {} texts, {} bytes, {} tokens in {:.3f} s: {:.2f} MB/s (one thread)\n", texts.size(), bytes, tokens,
                 secs, secs > 0 ? bytes / secs / 1e6 : 0.0);
      return 0;
    }
    std::string out;
    for (const Encoding& e : enc) {
      out += o.json ? dump(encoding_json(T, e)) : fmt::format("{}", fmt::join(e.ids, " "));
      out += '\n';
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  }
  require_utf8(o.text, "TEXT");
  const Encoding e = T.encode(o.text, special);
  if (o.json) {
    json j = encoding_json(T, e);
    j["text"] = o.text;
    fmt::print("{}\n", dump(j));
    return 0;
  }
  fmt::print("tokenizer  {}\n           {}\n", T.source(), T.summary());
  fmt::print("tokens     {}\n", e.ids.size());
  fmt::print("ids        {}\n", fmt::join(e.ids, " "));
  if (!e.unknown.empty()) {
    std::vector<std::string> u;
    for (const auto& s : e.unknown) u.push_back(shown(s));
    fmt::print("unknown    {} (the vocabulary cannot produce them)\n", fmt::join(u, ", "));
  }
  fmt::print("{:>5}  {:>8}  {:<24}  {}\n", "#", "id", "piece", "text");
  for (std::size_t k = 0; k < e.ids.size(); ++k)
    fmt::print("{:>5}  {:>8}  {:<24}  {}{}\n", k, e.ids[k], e.pieces[k], shown(T.piece_text(e.ids[k])), e.special[k] ? "  (special)" : "");
  return 0;
}

}  // namespace tokdyn::tokenize_cli
