// Parameter schemas and values: constructors, typed getters, formatting for `tokdyn show`. The
// parsing of one value is in params_values.cpp, the validation of defaults <- TOML file <- `--set`
// in params_resolve.cpp (every bad value is one InputError line); shared helpers in
// params_internal.hpp.
#include "tokdyn/runtime/experiment.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "tokdyn/core/error.hpp"
#include "params_internal.hpp"

namespace tokdyn {

using params_detail::bounds_text;
using params_detail::join;

// ---------------------------------------------------------------------------------------------
// Schema constructors

namespace {

ParamSpec spec(std::string key, ParamType type, ParamValue def, std::string help, std::optional<double> min = {},
               std::optional<double> max = {}, bool min_exclusive = false) {
  ParamSpec s;
  s.key = std::move(key);
  s.type = type;
  s.def = std::move(def);
  s.help = std::move(help);
  s.min = min;
  s.max = max;
  s.min_exclusive = min_exclusive;
  return s;
}

}  // namespace

ParamSpec p_int(std::string key, long def, std::string help, std::optional<double> min, std::optional<double> max) {
  return spec(std::move(key), ParamType::Int, ParamValue{std::in_place_type<long>, def}, std::move(help), min, max);
}

ParamSpec p_double(std::string key, double def, std::string help, std::optional<double> min,
                   std::optional<double> max, bool min_exclusive) {
  return spec(std::move(key), ParamType::Double, ParamValue{std::in_place_type<double>, def}, std::move(help), min, max,
              min_exclusive);
}

ParamSpec p_bool(std::string key, bool def, std::string help) {
  return spec(std::move(key), ParamType::Bool, ParamValue{std::in_place_type<bool>, def}, std::move(help));
}

ParamSpec p_string(std::string key, std::string def, std::string help, std::vector<std::string> choices) {
  ParamSpec s = spec(std::move(key), ParamType::String, ParamValue{std::in_place_type<std::string>, std::move(def)},
                     std::move(help));
  s.choices = std::move(choices);
  return s;
}

ParamSpec p_int_list(std::string key, std::vector<long> def, std::string help, std::optional<double> min,
                     std::optional<double> max) {
  const std::size_t lo = def.empty() ? 0 : 1;
  ParamSpec s = spec(std::move(key), ParamType::IntList, ParamValue{std::in_place_type<std::vector<long>>, std::move(def)},
                     std::move(help), min, max);
  s.min_items = lo;
  return s;
}

ParamSpec p_double_list(std::string key, std::vector<double> def, std::string help, std::optional<double> min,
                        std::optional<double> max, bool min_exclusive) {
  const std::size_t lo = def.empty() ? 0 : 1;
  ParamSpec s = spec(std::move(key), ParamType::DoubleList,
                     ParamValue{std::in_place_type<std::vector<double>>, std::move(def)}, std::move(help), min, max,
                     min_exclusive);
  s.min_items = lo;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Params

namespace {

template <class T>
const T& get_checked(const std::map<std::string, ParamValue>& values, const std::string& key, const char* want) {
  auto it = values.find(key);
  if (it == values.end()) throw std::logic_error(fmt::format("parameter '{}' is not in the experiment's schema", key));
  const T* v = std::get_if<T>(&it->second);
  if (!v) throw std::logic_error(fmt::format("parameter '{}' is not {}", key, want));
  return *v;
}

nlohmann::json json_of(const ParamValue& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

}  // namespace

long Params::get_int(const std::string& key) const { return get_checked<long>(values_, key, "an int"); }
double Params::get_double(const std::string& key) const { return get_checked<double>(values_, key, "a double"); }
bool Params::get_bool(const std::string& key) const { return get_checked<bool>(values_, key, "a bool"); }
const std::string& Params::get_string(const std::string& key) const {
  return get_checked<std::string>(values_, key, "a string");
}
const std::vector<long>& Params::get_int_list(const std::string& key) const {
  return get_checked<std::vector<long>>(values_, key, "an int list");
}
const std::vector<double>& Params::get_double_list(const std::string& key) const {
  return get_checked<std::vector<double>>(values_, key, "a number list");
}

nlohmann::json Params::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : values_) j[k] = json_of(v);
  return j;
}

// ---------------------------------------------------------------------------------------------
// Formatting helpers (also used by `tokdyn show`)

namespace params_detail {

std::string num(double v, bool integer) {
  if (integer && std::abs(v) < 9.0e15 && v == std::floor(v)) return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{}", v);
}

std::string bounds_text(const ParamSpec& s, bool integer) {
  std::string out;
  if (s.min) out = fmt::format("{} {}", s.min_exclusive ? ">" : ">=", num(*s.min, integer));
  if (s.max) out += fmt::format("{}{} {}", out.empty() ? "" : " and ", s.max_exclusive ? "<" : "<=", num(*s.max, integer));
  return out;
}

bool in_bounds(const ParamSpec& s, double v) {
  if (s.min && (s.min_exclusive ? !(v > *s.min) : !(v >= *s.min))) return false;
  if (s.max && (s.max_exclusive ? !(v < *s.max) : !(v <= *s.max))) return false;
  return true;
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

}  // namespace params_detail

std::string type_name(ParamType t) {
  switch (t) {
    case ParamType::Int: return "int";
    case ParamType::Double: return "double";
    case ParamType::Bool: return "bool";
    case ParamType::String: return "string";
    case ParamType::IntList: return "int list";
    case ParamType::DoubleList: return "number list";
  }
  return "?";
}

std::string value_text(const ParamValue& v) {
  struct V {
    std::string operator()(long x) const { return std::to_string(x); }
    std::string operator()(double x) const { return fmt::format("{}", x); }
    std::string operator()(bool x) const { return x ? "true" : "false"; }
    std::string operator()(const std::string& x) const { return x; }
    std::string operator()(const std::vector<long>& x) const {
      std::string out;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(x[i]);
      }
      return out;
    }
    std::string operator()(const std::vector<double>& x) const {
      std::string out;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (i) out += ',';
        out += fmt::format("{}", x[i]);
      }
      return out;
    }
  };
  return std::visit(V{}, v);
}

namespace {

std::string list_rules_text(const ParamSpec& s) {
  std::vector<std::string> parts;
  if (s.min_items == 0)
    parts.push_back("may be empty");
  else if (s.min_items > 1)
    parts.push_back(fmt::format(">= {} entries", s.min_items));
  if (s.max_items < kMaxListLength) parts.push_back(fmt::format("<= {} entries", s.max_items));
  if (s.ascending)
    parts.push_back("increasing");
  else if (s.distinct)
    parts.push_back("no repeats");
  return join(parts, ", ");
}

}  // namespace

std::string range_text(const ParamSpec& s) {
  switch (s.type) {
    case ParamType::Int: return bounds_text(s, true);
    case ParamType::IntList:
    case ParamType::DoubleList: {
      std::string b = bounds_text(s, s.type == ParamType::IntList);
      const std::string r = list_rules_text(s);
      if (!r.empty()) b += (b.empty() ? "" : "; ") + r;
      return b;
    }
    case ParamType::Double: return bounds_text(s, false);
    case ParamType::String:
      if (s.path == PathKind::File) return "a file";
      if (s.path == PathKind::Directory) return "a directory";
      return join(s.choices, " | ");
    case ParamType::Bool: return "";
  }
  return "";
}

nlohmann::json schema_json(const Experiment& e) {
  nlohmann::json params = nlohmann::json::array();
  for (const ParamSpec& s : e.params) {
    nlohmann::json j;
    j["key"] = s.key;
    j["type"] = type_name(s.type);
    j["default"] = json_of(s.def);
    j["default_text"] = value_text(s.def);
    j["help"] = s.help;
    j["min"] = s.min ? nlohmann::json(*s.min) : nlohmann::json();
    j["max"] = s.max ? nlohmann::json(*s.max) : nlohmann::json();
    j["min_exclusive"] = s.min_exclusive;
    j["max_exclusive"] = s.max_exclusive;
    j["choices"] = s.choices;
    if (s.type == ParamType::IntList || s.type == ParamType::DoubleList) {
      j["min_items"] = s.min_items;
      j["max_items"] = s.max_items;
      j["distinct"] = s.distinct;
      j["ascending"] = s.ascending;
    }
    j["path"] = s.path == PathKind::File ? "file" : s.path == PathKind::Directory ? "directory" : "";
    nlohmann::json conds = nlohmann::json::array();
    for (const ParamCondition& c : s.only_when)
      conds.push_back({{"key", c.key}, {"values", c.values}, {"negate", c.negate}});
    j["only_when"] = conds;
    params.push_back(std::move(j));
  }
  nlohmann::json smoke = nlohmann::json::object();
  for (const auto& [k, v] : e.smoke) smoke[k] = v;
  nlohmann::json nonfinite = nlohmann::json::object();
  for (const auto& [k, v] : e.nonfinite_ok) nonfinite[k] = v;
  for (const TableDecl& t : e.outputs.tables)
    for (const ColumnDecl& c : t.columns)
      if (!c.nonfinite.empty()) nonfinite[t.file + ":" + c.name] = c.nonfinite;
  nlohmann::json renamed = nlohmann::json::object();
  for (const auto& [from, to] : e.renamed) renamed[from] = to;
  return {{"preset", e.name},   {"description", e.description}, {"params", params}, {"renamed", renamed},
          {"smoke", smoke},     {"nonfinite_ok", nonfinite}, {"figure_kind", e.figure_kind},
          {"outputs", outputs_json(e.outputs)}};
}

std::pair<std::string, std::string> parse_set(const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos) throw InputError(fmt::format("--set '{}': expected key=value", one_line(arg)));
  auto trim = [](std::string s) {
    const auto b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return std::string();
    return s.substr(b, s.find_last_not_of(" \t") - b + 1);
  };
  std::string key = trim(arg.substr(0, eq));
  if (key.empty()) throw InputError(fmt::format("--set '{}': expected key=value (the key is empty)", one_line(arg)));
  return {key, arg.substr(eq + 1)};
}

std::optional<std::string> renamed_to(const Experiment& e, const std::string& key) {
  for (const auto& [from, to] : e.renamed)
    if (from == key) return to;
  return std::nullopt;
}

}  // namespace tokdyn
