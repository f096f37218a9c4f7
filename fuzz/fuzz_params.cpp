// libFuzzer target for the parameter layer: TOML config text and `--set key=value` strings against
// every preset's schema. The schemas come from the real registry, as `tokdyn show PRESET --json`
// writes them (scripts/fuzz.sh collects them into the file named by TOKDYN_FUZZ_SCHEMAS), and are
// registered here with a run function that does nothing: the target exercises parse_set,
// experiment_of_toml and resolve_params with exactly the rules the CLI applies.
//
// Input layout: byte 0 picks the preset; the rest is split at '\n\x01\n': the first part is the
// TOML text (written to a file, as a user's config), every further part one `--set` argument.
//
// Any exception but InputError, a crash or a sanitizer report is a bug. An InputError message must
// be one line. Accepted values must satisfy their spec (bounds, choices, list rules, conditions)
// and survive a round trip: value_text of each explicit value, given back as `--set`, resolves to
// the same value.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"

namespace {

using namespace tokdyn;

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "invariant violated: %s\n", what.c_str());
  std::abort();
}

ParamType type_of(const std::string& t) {
  if (t == "int") return ParamType::Int;
  if (t == "double") return ParamType::Double;
  if (t == "bool") return ParamType::Bool;
  if (t == "string") return ParamType::String;
  if (t == "int list") return ParamType::IntList;
  if (t == "number list") return ParamType::DoubleList;
  bug("unknown type in the schemas file: " + t);
}

ParamSpec spec_of(const nlohmann::json& j) {
  const ParamType t = type_of(j.at("type").get<std::string>());
  const auto num = [&](const char* k) -> std::optional<double> {
    if (j.at(k).is_null()) return std::nullopt;
    return j.at(k).get<double>();
  };
  ParamSpec s;
  const std::string key = j.at("key");
  const std::string help = j.at("help");
  switch (t) {
    case ParamType::Int: s = p_int(key, j.at("default").get<long>(), help, num("min"), num("max")); break;
    case ParamType::Double:
      s = p_double(key, j.at("default").get<double>(), help, num("min"), num("max"), j.at("min_exclusive").get<bool>());
      break;
    case ParamType::Bool: s = p_bool(key, j.at("default").get<bool>(), help); break;
    case ParamType::String:
      s = p_string(key, j.at("default").get<std::string>(), help, j.at("choices").get<std::vector<std::string>>());
      break;
    case ParamType::IntList: s = p_int_list(key, j.at("default").get<std::vector<long>>(), help, num("min"), num("max")); break;
    case ParamType::DoubleList:
      s = p_double_list(key, j.at("default").get<std::vector<double>>(), help, num("min"), num("max"),
                        j.at("min_exclusive").get<bool>());
      break;
  }
  s.max_exclusive = j.at("max_exclusive").get<bool>();
  if (j.contains("min_items")) {
    s.min_items = j.at("min_items").get<std::size_t>();
    s.max_items = j.at("max_items").get<std::size_t>();
    s.distinct = j.at("distinct").get<bool>();
    s.ascending = j.at("ascending").get<bool>();
  }
  const std::string path = j.at("path");
  s.path = path == "file" ? PathKind::File : path == "directory" ? PathKind::Directory : PathKind::None;
  for (const auto& c : j.at("only_when"))
    s.only_when.push_back({c.at("key").get<std::string>(), c.at("values").get<std::vector<std::string>>(),
                           c.at("negate").get<bool>()});
  return s;
}

std::vector<const Experiment*> g_presets;
std::string g_toml;  // this process's scratch config file

void register_schemas() {
  const char* file = std::getenv("TOKDYN_FUZZ_SCHEMAS");
  if (!file) bug("TOKDYN_FUZZ_SCHEMAS is not set (scripts/fuzz.sh sets it)");
  std::ifstream in(file);
  if (!in) bug(std::string("cannot read ") + file);
  const nlohmann::json all = nlohmann::json::parse(in);
  for (const auto& sj : all) {
    Experiment e;
    e.name = sj.at("preset").get<std::string>();
    e.description = sj.at("description").get<std::string>();
    for (const auto& pj : sj.at("params")) e.params.push_back(spec_of(pj));
    e.run = [](const Params&, RunContext&) {};
    ExperimentRegistration reg{std::move(e)};  // the registry's own structural checks apply
  }
  g_presets = experiments();
  if (g_presets.empty()) bug("no presets in the schemas file");
  g_toml = "/tmp/tokdyn-fuzz-params-" + std::to_string(::getpid()) + ".toml";
}

bool is_one_line(const std::string& m) { return !m.empty() && m.find('\n') == std::string::npos && m.find('\r') == std::string::npos; }

void check_accepted(const Experiment& e, const Params& p) {
  for (const ParamSpec& s : e.params) {
    if (!p.has(s.key)) bug("resolved parameters miss '" + s.key + "'");
    if (!p.is_explicit(s.key)) continue;
    const ParamValue& v = p.values_.at(s.key);
    const auto in_bounds = [&](double x) {
      if (!std::isfinite(x)) return false;
      if (s.min && (s.min_exclusive ? !(x > *s.min) : !(x >= *s.min))) return false;
      if (s.max && (s.max_exclusive ? !(x < *s.max) : !(x <= *s.max))) return false;
      return true;
    };
    switch (s.type) {
      case ParamType::Int:
        if (!in_bounds(static_cast<double>(std::get<long>(v)))) bug(e.name + ": accepted an int out of bounds: " + s.key);
        break;
      case ParamType::Double:
        if (!in_bounds(std::get<double>(v))) bug(e.name + ": accepted a double out of bounds: " + s.key);
        break;
      case ParamType::String:
        if (!s.choices.empty() && std::find(s.choices.begin(), s.choices.end(), std::get<std::string>(v)) == s.choices.end())
          bug(e.name + ": accepted a string that is not a choice: " + s.key);
        break;
      case ParamType::IntList:
      case ParamType::DoubleList: {
        std::vector<double> xs;
        if (s.type == ParamType::IntList)
          for (long x : std::get<std::vector<long>>(v)) xs.push_back(static_cast<double>(x));
        else
          xs = std::get<std::vector<double>>(v);
        if (xs.size() < s.min_items || xs.size() > s.max_items) bug(e.name + ": accepted a list of the wrong length: " + s.key);
        for (std::size_t i = 0; i < xs.size(); ++i) {
          if (!in_bounds(xs[i])) bug(e.name + ": accepted a list entry out of bounds: " + s.key);
          if (i && s.ascending && !(xs[i] > xs[i - 1])) bug(e.name + ": accepted a list out of order: " + s.key);
          for (std::size_t k = 0; s.distinct && k < i; ++k)
            if (xs[k] == xs[i]) bug(e.name + ": accepted a repeated entry: " + s.key);
        }
        break;
      }
      case ParamType::Bool: break;
    }
    // A parameter that does not apply was refused.
    for (const ParamCondition& c : s.only_when) {
      const std::string now = value_text(p.values_.at(c.key));
      const bool listed = std::find(c.values.begin(), c.values.end(), now) != c.values.end();
      if (listed == c.negate) bug(e.name + ": accepted '" + s.key + "' although it does not apply");
    }
  }
  // Round trip: every explicit value, written as `--set` text, resolves to the same value.
  std::vector<std::pair<std::string, std::string>> sets;
  for (const ParamSpec& s : e.params)
    if (p.is_explicit(s.key)) sets.emplace_back(s.key, value_text(p.values_.at(s.key)));
  Params q;
  try {
    q = resolve_params(e, sets);
  } catch (const InputError& err) {
    bug(e.name + ": accepted values do not resolve again from their own text: " + err.what());
  }
  for (const auto& [k, _] : sets)
    if (!(q.values_.at(k) == p.values_.at(k))) bug(e.name + ": value of '" + k + "' changed in a text round trip");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  register_schemas();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const Experiment& e = *g_presets[data[0] % g_presets.size()];
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::string> parts;
  const std::string sep = "\n\x01\n";
  for (std::size_t start = 0;;) {
    const std::size_t at = rest.find(sep, start);
    parts.push_back(rest.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + sep.size();
  }
  {
    std::ofstream out(g_toml, std::ios::binary | std::ios::trunc);
    out << "preset = \"" << e.name << "\"\n" << parts[0];
  }
  std::vector<std::pair<std::string, std::string>> sets;
  try {
    for (std::size_t i = 1; i < parts.size(); ++i) sets.push_back(parse_set(parts[i]));
    const Experiment& named = experiment_of_toml(g_toml);
    if (&named != &e) {
      // the text may have named another preset: validate against that one (still a valid config)
    }
    const Params p = resolve_params(named, sets, g_toml);
    check_accepted(named, p);
  } catch (const InputError& err) {
    if (!is_one_line(err.what())) bug(std::string("an InputError that is not one line: ") + err.what());
  }
  return 0;
}
