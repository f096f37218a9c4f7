// Prompts for runs: see runtime/prompts.hpp.
#include "tokdyn/runtime/prompts.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/json_strict.hpp"
#include "tokdyn/io/tokenizer.hpp"

namespace tokdyn {

namespace {

/// A text for a one-line message: control characters escaped, cut after 40 characters.
std::string quoted(const std::string& s) {
  std::string o = json_strict::one_line(s);
  if (o.size() > 40) {
    std::size_t cut = 40;
    while (cut > 0 && (static_cast<unsigned char>(o[cut]) & 0xc0) == 0x80) --cut;
    o = o.substr(0, cut) + "...";
  }
  return "'" + o + "'";
}

std::vector<std::string> read_prompts(const std::string& path) {
  const std::string all = read_regular_file(path, std::uint64_t{64} << 20, path);
  std::vector<std::string> out;
  std::size_t line = 0;
  for (std::size_t at = 0; at < all.size();) {
    std::size_t nl = all.find('\n', at);
    if (nl == std::string::npos) nl = all.size();
    std::string s = all.substr(at, nl - at);
    at = nl + 1;
    ++line;
    if (!s.empty() && s.back() == '\r') s.pop_back();  // CRLF files: the CR ends the line too
    require_utf8(s, fmt::format("parameter 'prompts': {} line {}", path, line));
    if (s.empty())
      throw InputError(fmt::format("parameter 'prompts': {} line {} is empty; expected one prompt per line", path, line));
    out.push_back(std::move(s));
  }
  if (out.empty()) throw InputError(fmt::format("parameter 'prompts': {} holds no prompt; expected one prompt per line", path));
  return out;
}

}  // namespace

nlohmann::json PromptTokens::manifest() const {
  nlohmann::json j;
  j["tokenizer"] = {{"path", tokenizer}, {"sha256", sha256}, {"summary", summary}};
  nlohmann::json ps = nlohmann::json::array();
  for (std::size_t r = 0; r < texts.size(); ++r) {
    std::vector<std::int64_t> row(ids.begin() + static_cast<long>(r) * len, ids.begin() + static_cast<long>(r + 1) * len);
    ps.push_back({{"text", texts[r]}, {"ids", row}, {"pieces", pieces[r]}, {"labels", labels[r]}});
  }
  j["prompts"] = ps;
  return j;
}

std::vector<ParamSpec> prompt_knobs() {
  return {
      p_string("prompt", "", "a text to start from, encoded by the model's tokenizer: one run of the prompt's tokens")
          .when("prompts", {""}),
      p_string("prompts", "", "a text file of prompts, one per line, one run each; all must encode to the same number of tokens")
          .file(),
      p_string("tokenizer", "",
               "the tokenizer.json (or a folder holding one) that encodes prompt / prompts; default: the checkpoint's"),
      p_bool("add_special_tokens", true, "prompt / prompts: add the tokenizer's special tokens (its BOS / EOS template)"),
  };
}

std::optional<PromptTokens> prompt_tokens(const Params& P, const std::string& checkpoint) {
  // A preset may leave the prompt knobs out (coupling-qk-specificity starts from one token's row).
  const std::string one = P.has("prompt") ? P.get_string("prompt") : std::string();
  const std::string file = P.has("prompts") ? P.get_string("prompts") : std::string();
  if (one.empty() && file.empty()) {
    for (const char* k : {"tokenizer", "add_special_tokens"})
      if (P.has(k) && P.is_explicit(k))
        throw InputError(fmt::format("parameter '{}' does not apply without a prompt: it applies only with prompt or prompts "
                                     "(leave '{}' unset)", k, k));
    return std::nullopt;
  }
  const char* knob = one.empty() ? "prompts" : "prompt";
  for (const char* k : {"tokens", "runs"})
    if (P.has(k) && P.is_explicit(k))
      throw InputError(fmt::format("parameter '{}' does not apply with {}: the {} set{} it (leave '{}' unset)", k, knob,
                                   one.empty() ? "prompts" : "prompt", one.empty() ? "" : "s", k));
  std::vector<std::string> texts;
  if (!one.empty()) {
    require_utf8(one, "parameter 'prompt'");
    texts.push_back(one);
  } else {
    texts = read_prompts(file);
  }
  std::string path = P.get_string("tokenizer");
  if (path.empty()) {
    if (checkpoint.empty())
      throw InputError(fmt::format("parameter '{}': no tokenizer to encode it: the model has no checkpoint; give "
                                   "--set tokenizer=PATH (a tokenizer.json, or a checkpoint folder holding one)", knob));
    if (find_tokenizer_json(checkpoint).empty())
      throw InputError(fmt::format("parameter '{}': the checkpoint {} has no tokenizer.json; give --set tokenizer=PATH (a "
                                   "tokenizer.json, or a folder holding one)", knob, checkpoint));
    path = checkpoint;
  }
  std::optional<Tokenizer> T;
  try {
    T = Tokenizer::from_file(path);
  } catch (const InputError& e) {
    throw InputError(fmt::format("parameter 'tokenizer': {}", e.what()));
  }
  PromptTokens pt;
  pt.tokenizer = T->source();
  pt.sha256 = T->sha256();
  pt.summary = T->summary();
  const bool special = P.get_bool("add_special_tokens");
  std::vector<int> lens;
  for (std::size_t r = 0; r < texts.size(); ++r) {
    const Encoding e = T->encode(texts[r], special);
    const std::string where = one.empty() ? fmt::format("parameter 'prompts': {} line {}", file, r + 1) : "parameter 'prompt'";
    if (!e.unknown.empty()) {
      std::vector<std::string> u;
      for (std::size_t k = 0; k < e.unknown.size() && k < 5; ++k) u.push_back(quoted(e.unknown[k]));
      throw InputError(fmt::format("{}: the vocabulary of {} cannot produce {} (it would become the unknown token or be dropped)",
                                   where, T->source(), fmt::join(u, ", ")));
    }
    if (e.ids.empty()) throw InputError(fmt::format("{}: encodes to no token", where));
    lens.push_back(static_cast<int>(e.ids.size()));
    pt.ids.insert(pt.ids.end(), e.ids.begin(), e.ids.end());
    pt.pieces.push_back(e.pieces);
    std::vector<std::string> lab;
    for (std::int64_t id : e.ids) lab.push_back(T->piece_text(id));
    pt.labels.push_back(std::move(lab));
  }
  for (std::size_t r = 1; r < lens.size(); ++r)
    if (lens[r] != lens[0]) {
      std::vector<std::string> shown;
      for (std::size_t k = 0; k < lens.size() && k < 8; ++k) shown.push_back(fmt::format("line {}: {}", k + 1, lens[k]));
      if (lens.size() > 8) shown.push_back("...");
      throw InputError(fmt::format("parameter 'prompts': {}: the prompts encode to different numbers of tokens ({}); tokdyn runs "
                                   "prompts of one length together and neither pads nor masks: give prompts of equal token "
                                   "counts (`tokdyn tokenize` shows them), or run each prompt alone", file, fmt::join(shown, ", ")));
    }
  pt.texts = std::move(texts);
  pt.runs = static_cast<int>(pt.texts.size());
  pt.len = lens[0];
  return pt;
}

void check_prompt_ids(const PromptTokens& pt, long rows) {
  for (std::int64_t id : pt.ids)
    if (id >= rows)
      throw InputError(fmt::format("parameter 'tokenizer': {} gives token id {}, outside the model's {} embedding rows: the "
                                   "tokenizer does not belong to this model", pt.tokenizer, id, rows));
}

}  // namespace tokdyn
