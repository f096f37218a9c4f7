// A run's parameters resolved from defaults <- TOML file <- `--set`: the config file read (regular,
// at most 1 MiB, ASCII outside comment lines) and parsed, unknown and renamed keys refused with a
// hint, dependent defaults, parameters that do not apply refused, path parameters checked; and the
// preset a config file names. The parsing of each value is in params_values.cpp.
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/core/suggest.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <toml++/toml.h>
#include <unistd.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"
#include "params_internal.hpp"

namespace tokdyn {

namespace fs = std::filesystem;

using params_detail::describe;
using params_detail::join;
using params_detail::Origin;
using params_detail::toml_text;
using params_detail::value_of_string;
using params_detail::value_of_toml;

namespace {

// A key the preset renamed: "parameter 'T' was renamed 'tokens' (--set tokens=8)", the hint in the
// form the key was given in (`--set`, or a TOML line `tokens = 8`).
std::optional<std::string> renamed_key_message(const Experiment& e, const std::string& key, const std::string& hint_value, bool toml) {
  const std::optional<std::string> to = renamed_to(e, key);
  if (!to) return std::nullopt;
  return fmt::format("parameter '{}' was renamed '{}' ({})", key, *to,
                     toml ? fmt::format("write {} = {}", *to, hint_value) : fmt::format("--set {}={}", *to, hint_value));
}

std::string unknown_key_message(const Experiment& e, const std::string& key) {
  std::vector<std::string> known;
  for (const auto& s : e.params) known.push_back(s.key);
  if (key == "sweep")  // a config written for `tokdyn sweep` (docs/sweeps.md), given to `tokdyn run`
    return fmt::format("a [sweep] table is read by `tokdyn sweep FILE.toml`, not by `tokdyn run` (one run has one value per parameter; "
                       "preset '{}')", e.name);
  return fmt::format("unknown parameter '{}' for preset '{}'{} (known: {})", key, e.name, did_you_mean(key, known),
                     known.empty() ? std::string("none") : join(known, ", "));
}

const ParamSpec* find_spec(const Experiment& e, const std::string& key) {
  for (const auto& s : e.params)
    if (s.key == key) return &s;
  return nullptr;
}

std::string file_prefix(const fs::path& file, const toml::node* n = nullptr) {
  if (n && n->source().begin.line > 0) return fmt::format("config file '{}' line {}: ", file.string(), n->source().begin.line);
  return fmt::format("config file '{}': ", file.string());
}

// The first byte outside ASCII that is not on a comment line, as (line, column), or (0, 0).
// tokdyn's keys and values are ASCII; and toml++ 3.3.0 (Debian 12) reaches undefined behaviour
// classifying some non-ASCII characters where it parses values (its whitespace table's
// "unreachable" branch, found by fuzz/fuzz_params.cpp). Where toml++ parses a value is only
// knowable by parsing, so a config file keeps non-ASCII text to lines whose first non-blank
// character is '#': a comment, or the content of a multi-line string.
std::pair<long, long> non_ascii_outside_comment_lines(const std::string& t) {
  long line = 1, col = 0;
  bool comment_line = false, at_start = true;
  for (const char c : t) {
    ++col;
    if (c == '\n') {
      ++line;
      col = 0;
      comment_line = false;
      at_start = true;
      continue;
    }
    if (at_start && c != ' ' && c != '\t') {
      at_start = false;
      comment_line = c == '#';
    }
    if (static_cast<unsigned char>(c) >= 0x80 && !comment_line) return {line, col};
  }
  return {0, 0};
}

toml::table load_toml(const fs::path& file) {
  // Regular files only (a FIFO or /dev/zero is refused without blocking), at most 1 MiB.
  const std::string text = read_regular_file(file, 1u << 20, fmt::format("config file '{}'", file.string()));
  if (const auto [line, col] = non_ascii_outside_comment_lines(text); line > 0)
    throw InputError(fmt::format("config file '{}' line {}, column {}: a non-ASCII character; expected ASCII keys and values "
                                 "(non-ASCII text only on '#' comment lines; give such a path with --set)",
                                 file.string(), line, col));
  try {
    return toml::parse(text, file.string());
  } catch (const toml::parse_error& err) {
    const auto& b = err.source().begin;
    throw InputError(one_line(fmt::format("config file '{}' line {}, column {}: {}", file.string(), b.line, b.column,
                                          std::string(err.description()))));
  }
}

}  // namespace

Params resolve_params(const Experiment& e, const std::vector<std::pair<std::string, std::string>>& sets,
                      const std::optional<fs::path>& toml_file) {
  Params p;
  for (const auto& s : e.params) p.values_[s.key] = s.def;

  if (toml_file) {
    p.config_file = toml_file->string();
    const toml::table tbl = load_toml(*toml_file);
    for (const auto& [k, node] : tbl) {
      const std::string key(k.str());
      if (key == "preset") continue;
      const Origin o{file_prefix(*toml_file, &node)};
      const ParamSpec* s = find_spec(e, key);
      if (!s) {
        if (renamed_to(e, key)) throw InputError(one_line(o.prefix + *renamed_key_message(e, key, toml_text(node), true)));
        throw InputError(one_line(o.prefix + unknown_key_message(e, key)));
      }
      p.values_[key] = value_of_toml(o, *s, node);
      p.explicit_.insert(key);
    }
  }

  std::map<std::string, std::string> seen;  // key -> its first `--set` value
  for (const auto& [key, value] : sets) {
    const ParamSpec* s = find_spec(e, key);
    if (!s) {
      if (const auto m = renamed_key_message(e, key, value, false)) throw InputError(one_line(*m));
      throw InputError(one_line(unknown_key_message(e, key)));
    }
    if (auto it = seen.find(key); it != seen.end())
      throw InputError(one_line(fmt::format("parameter '{}' is set twice (--set {}={} and --set {}={}); give it once",
                                            key, key, it->second, key, value)));
    seen.emplace(key, value);
    p.values_[key] = value_of_string(*s, value);
    p.explicit_.insert(key);
  }

  // Defaults that depend on another parameter's value (ParamSpec::def_when).
  for (const ParamSpec& s : e.params) {
    if (p.is_explicit(s.key)) continue;
    for (const auto& [c, v] : s.def_when) {
      const auto it = p.values_.find(c.key);
      if (it == p.values_.end()) continue;
      const std::string now = value_text(it->second);
      if ((std::find(c.values.begin(), c.values.end(), now) != c.values.end()) != c.negate) {
        p.values_[s.key] = v;
        break;
      }
    }
  }

  // Parameters that do not apply to the chosen options are refused, never ignored.
  for (const ParamSpec& s : e.params) {
    if (!p.is_explicit(s.key)) continue;
    for (const ParamCondition& c : s.only_when) {
      const ParamSpec* ctl = find_spec(e, c.key);
      if (!ctl) throw std::logic_error(fmt::format("preset '{}': parameter '{}' depends on unknown '{}'", e.name, s.key, c.key));
      const std::string now = value_text(p.values_.at(c.key));
      const bool listed = std::find(c.values.begin(), c.values.end(), now) != c.values.end();
      if (listed != c.negate) continue;
      auto shown = [](const std::string& v) { return v.empty() ? std::string("empty") : v; };
      std::vector<std::string> vs;
      for (const auto& v : c.values) vs.push_back(shown(v));
      throw InputError(one_line(fmt::format(
          "parameter '{}' does not apply when {} = {}: it applies only when {} is {}{} (leave '{}' unset)", s.key, c.key,
          now.empty() ? std::string("'' (empty)") : now, c.key, c.negate ? "not " : "", join(vs, c.negate ? " nor " : " or "),
          s.key)));
    }
    // A path parameter is checked whenever it is given.
    if (s.path != PathKind::None) {
      const std::string& v = std::get<std::string>(p.values_.at(s.key));
      if (v.empty()) continue;
      if (s.path == PathKind::File) {
        // Opened as the reader will open it (without blocking: a FIFO or a device is named as such).
        const OpenedFile f = open_regular_file(v, ~std::uint64_t{0}, fmt::format("parameter '{}': {}", s.key, v));
        ::close(f.fd);
        continue;
      }
      std::error_code ec;
      const auto st = fs::status(v, ec);
      if (ec || !fs::exists(st))
        throw InputError(one_line(fmt::format("parameter '{}': '{}' does not exist; expected an existing directory", s.key, v)));
      if (!fs::is_directory(st))
        throw InputError(one_line(fmt::format("parameter '{}': '{}' is not a directory; expected an existing directory", s.key, v)));
    }
  }
  return p;
}

const Experiment& experiment_of_toml(const fs::path& file) {
  const toml::table tbl = load_toml(file);
  const toml::node* n = tbl.get("preset");
  if (!n)
    throw InputError(fmt::format("config file '{}': missing key 'preset' (the experiment to run, see `tokdyn presets`)",
                                 file.string()));
  auto name = n->as_string();
  if (!name)
    throw InputError(one_line(fmt::format("{}key 'preset': expected a string (an experiment name), got {}",
                                          file_prefix(file, n), describe(*n))));
  const Experiment* e = find_experiment(name->get());
  if (!e)
    throw InputError(
        one_line(file_prefix(file, n) + unknown_preset_message(name->get())));
  return *e;
}

}  // namespace tokdyn
