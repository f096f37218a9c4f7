// Parameter schemas and values: constructors, typed getters, formatting for `tokdyn show`, and
// validation of defaults <- TOML file <- `--set` (every bad value is one InputError line).
#include "tokdyn/runtime/experiment.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <toml++/toml.h>
#include <unistd.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"

namespace tokdyn {

namespace fs = std::filesystem;

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

namespace {

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


}  // namespace

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

// ---------------------------------------------------------------------------------------------
// Validation

namespace {

// Where a value came from, for messages: "" (command line) or "config file 'x.toml' line 3: ".
struct Origin {
  std::string prefix;
};

[[noreturn]] void bad(const Origin& o, const std::string& key, const std::string& what) {
  throw InputError(one_line(fmt::format("{}parameter '{}': {}", o.prefix, key, what)));
}

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
  return fmt::format("unknown parameter '{}' for preset '{}' (known: {})", key, e.name,
                     known.empty() ? std::string("none") : join(known, ", "));
}

const ParamSpec* find_spec(const Experiment& e, const std::string& key) {
  for (const auto& s : e.params)
    if (s.key == key) return &s;
  return nullptr;
}

std::string param_trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void check_int(const Origin& o, const std::string& label, const ParamSpec& s, long v) {
  if (!in_bounds(s, static_cast<double>(v)))
    bad(o, label, fmt::format("expected an integer {}, got {}", bounds_text(s, true), v));
}

void check_double(const Origin& o, const ParamSpec& s, double v, const std::string& shown) {
  if (!std::isfinite(v)) bad(o, s.key, fmt::format("expected a finite number, got {}", shown));
  if (!in_bounds(s, v)) bad(o, s.key, fmt::format("expected a number {}, got {}", bounds_text(s, false), shown));
}

void check_string(const Origin& o, const ParamSpec& s, const std::string& v) {
  if (!s.choices.empty() && std::find(s.choices.begin(), s.choices.end(), v) == s.choices.end())
    bad(o, s.key, fmt::format("expected one of: {} (got '{}')", join(s.choices, ", "), v));
}

/// For a scalar given several values ("0.5,1,2"): where several values go.
std::string sweep_hint(const std::string& key, const std::string& raw) {
  if (raw.find(',') == std::string::npos) return "";
  return fmt::format(" (one value per run; several are a sweep: tokdyn sweep PRESET --grid {}={})", key, raw);
}

long parse_long(const Origin& o, const std::string& label, const std::string& raw) {
  const std::string t = param_trimmed(raw);
  const char* b = t.data();
  const char* end = t.data() + t.size();
  if (b != end && *b == '+') ++b;
  long v = 0;
  auto [p, ec] = std::from_chars(b, end, v);
  if (ec == std::errc::result_out_of_range)
    bad(o, label, fmt::format("expected an integer, got '{}' (out of range)", raw));
  if (ec != std::errc() || p != end || t.empty()) bad(o, label, fmt::format("expected an integer, got '{}'{}", raw, sweep_hint(label, raw)));
  return v;
}

enum class NumParse { Ok, NotANumber, Overflow };

// Parses [b, end) as one double. A value below the smallest normal double (a denormal, or one that
// rounds to 0) is its nearest double, as in a TOML file; only overflow is out of range.
NumParse parse_double_token(const char* b, const char* end, double& v) {
  auto [p, ec] = std::from_chars(b, end, v, std::chars_format::general);
  if (p != end || b == end) return NumParse::NotANumber;
  if (ec == std::errc()) return NumParse::Ok;
  if (ec != std::errc::result_out_of_range) return NumParse::NotANumber;
  const std::string t(b, end);
  errno = 0;
  char* stop = nullptr;
  v = std::strtod(t.c_str(), &stop);
  if (stop != t.c_str() + t.size()) return NumParse::NotANumber;
  return std::isinf(v) ? NumParse::Overflow : NumParse::Ok;
}

// Checks a list's entries against the spec (bounds, finiteness, count, repeats, order) and builds
// its value; entries are doubles here (an IntList's entries were parsed as exact integers).
ParamValue list_value(const Origin& o, const ParamSpec& s, const std::vector<double>& v) {
  const bool ints = s.type == ParamType::IntList;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i]))
      throw InputError(one_line(fmt::format("{}parameter '{}' entry {}: expected a finite number, got {}", o.prefix,
                                            s.key, i + 1, v[i])));
    if (!in_bounds(s, v[i]))
      throw InputError(one_line(fmt::format("{}parameter '{}' entry {}: expected {} {}, got {}", o.prefix, s.key,
                                            i + 1, ints ? "an integer" : "a number", bounds_text(s, ints),
                                            num(v[i], ints))));
  }
  if (v.size() < s.min_items)
    bad(o, s.key, v.empty() ? fmt::format("expected at least {} entr{} (the list is empty)", s.min_items,
                                          s.min_items == 1 ? "y" : "ies")
                            : fmt::format("expected at least {} entries, got {}", s.min_items, v.size()));
  if (v.size() > s.max_items) bad(o, s.key, fmt::format("expected at most {} entries, got {}", s.max_items, v.size()));
  for (std::size_t i = 1; i < v.size(); ++i) {
    if (s.ascending && !(v[i] > v[i - 1]))
      bad(o, s.key, fmt::format("expected strictly increasing entries, got {} after {} (entry {})", num(v[i], ints),
                                num(v[i - 1], ints), i + 1));
    if (s.distinct)
      for (std::size_t j = 0; j < i; ++j)
        if (v[j] == v[i])
          bad(o, s.key, fmt::format("entry {} repeats entry {} ({}); expected distinct entries", i + 1, j + 1,
                                    num(v[i], ints)));
  }
  if (ints) {
    std::vector<long> out;
    out.reserve(v.size());
    for (double d : v) out.push_back(static_cast<long>(d));
    return ParamValue{std::in_place_type<std::vector<long>>, std::move(out)};
  }
  return ParamValue{std::in_place_type<std::vector<double>>, v};
}

// A list written as text: "1,2,3" or "[1, 2, 3]"; "" or "[]" is the empty list.
ParamValue list_of_string(const Origin& o, const ParamSpec& s, const std::string& raw) {
  const bool ints = s.type == ParamType::IntList;
  std::string t = param_trimmed(raw);
  if (t.size() >= 2 && t.front() == '[' && t.back() == ']') t = param_trimmed(t.substr(1, t.size() - 2));
  std::vector<double> entries;
  if (t.empty()) return list_value(o, s, entries);
  std::size_t start = 0;
  for (std::size_t i = 1;; ++i) {
    const auto comma = t.find(',', start);
    const std::string item = t.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::string it = param_trimmed(item);
    if (it.empty())
      throw InputError(one_line(fmt::format("{}parameter '{}' entry {}: empty (a stray comma in '{}'?); expected {}",
                                            o.prefix, s.key, i, raw, ints ? "an integer" : "a number")));
    const char* b = it.data();
    const char* end = it.data() + it.size();
    if (*b == '+') ++b;
    double d = 0;
    bool ok = false;
    if (ints) {
      long v = 0;
      auto [p, ec] = std::from_chars(b, end, v);
      ok = ec == std::errc() && p == end && std::abs(static_cast<double>(v)) <= kMaxSeed;
      d = static_cast<double>(v);
    } else {
      ok = parse_double_token(b, end, d) == NumParse::Ok && std::isfinite(d);
    }
    if (!ok && ints)
      throw InputError(one_line(fmt::format("{}parameter '{}' entry {}: expected an integer, got '{}'", o.prefix, s.key, i, item)));
    if (!ok && !std::isnan(d) && !std::isinf(d))
      throw InputError(one_line(fmt::format("{}parameter '{}' entry {}: '{}' is not a number; expected a finite number",
                                            o.prefix, s.key, i, item)));
    if (!ok)
      throw InputError(one_line(fmt::format("{}parameter '{}' entry {}: expected a finite number, got '{}'", o.prefix, s.key, i, item)));
    entries.push_back(d);
    if (entries.size() > s.max_items)
      bad(o, s.key, fmt::format("expected at most {} entries", s.max_items));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return list_value(o, s, entries);
}

// Parses a `--set` value for spec `s`.
ParamValue value_of_string(const ParamSpec& s, const std::string& raw) {
  const Origin o{};
  switch (s.type) {
    case ParamType::Int: {
      long v = parse_long(o, s.key, raw);
      check_int(o, s.key, s, v);
      return ParamValue{std::in_place_type<long>, v};
    }
    case ParamType::Double: {
      const std::string t = param_trimmed(raw);
      const char* b = t.data();
      const char* end = t.data() + t.size();
      if (b != end && *b == '+') ++b;
      double v = 0;
      const NumParse r = parse_double_token(b, end, v);
      if (r == NumParse::Overflow) bad(o, s.key, fmt::format("expected a finite number, got '{}'", raw));
      if (r != NumParse::Ok || t.empty()) bad(o, s.key, fmt::format("expected a number, got '{}'{}", raw, sweep_hint(s.key, raw)));
      check_double(o, s, v, fmt::format("'{}'", raw));
      return ParamValue{std::in_place_type<double>, v};
    }
    case ParamType::Bool: {
      const std::string t = lower(param_trimmed(raw));
      if (t == "true" || t == "1" || t == "yes" || t == "on") return ParamValue{std::in_place_type<bool>, true};
      if (t == "false" || t == "0" || t == "no" || t == "off") return ParamValue{std::in_place_type<bool>, false};
      bad(o, s.key, fmt::format("expected true or false (or 1/0, yes/no, on/off), got '{}'", raw));
    }
    case ParamType::String: {
      check_string(o, s, raw);
      return ParamValue{std::in_place_type<std::string>, raw};
    }
    case ParamType::IntList:
    case ParamType::DoubleList: return list_of_string(o, s, raw);
  }
  throw std::logic_error("unhandled parameter type");
}

// How a TOML value is shown in messages.
std::string describe(const toml::node& n) {
  if (auto v = n.as_string()) return fmt::format("'{}' (a string)", v->get());
  if (auto v = n.as_integer()) return std::to_string(v->get());
  if (auto v = n.as_floating_point()) {
    const double d = v->get();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 1e15) return fmt::format("{:.1f}", d);
    return fmt::format("{}", d);
  }
  if (auto v = n.as_boolean()) return v->get() ? "true" : "false";
  if (n.is_array()) return "an array";
  if (n.is_table()) return "a table";
  return "a date/time";
}

// A scalar TOML value as it may be written back in a file (for a hint that rewrites its line);
// "..." for an array, a table or a date. (Not toml++'s formatter: it reaches undefined behaviour
// on some arrays, found by fuzz/fuzz_params.cpp.)
std::string toml_text(const toml::node& n) {
  if (auto v = n.as_string()) {
    std::string out = "\"";
    for (const char c : v->get()) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out + "\"";
  }
  if (auto v = n.as_integer()) return std::to_string(v->get());
  if (auto v = n.as_floating_point()) return fmt::format("{}", v->get());
  if (auto v = n.as_boolean()) return v->get() ? "true" : "false";
  return "...";
}

ParamValue value_of_toml(const Origin& o, const ParamSpec& s, const toml::node& n) {
  switch (s.type) {
    case ParamType::Int: {
      auto v = n.as_integer();
      if (!v) bad(o, s.key, fmt::format("expected an integer, got {}", describe(n)));
      check_int(o, s.key, s, static_cast<long>(v->get()));
      return ParamValue{std::in_place_type<long>, static_cast<long>(v->get())};
    }
    case ParamType::Double: {
      double d = 0;
      if (auto i = n.as_integer())
        d = static_cast<double>(i->get());
      else if (auto f = n.as_floating_point())
        d = f->get();
      else
        bad(o, s.key, fmt::format("expected a number, got {}", describe(n)));
      check_double(o, s, d, describe(n));
      return ParamValue{std::in_place_type<double>, d};
    }
    case ParamType::Bool: {
      auto v = n.as_boolean();
      if (!v) bad(o, s.key, fmt::format("expected true or false, got {}", describe(n)));
      return ParamValue{std::in_place_type<bool>, v->get()};
    }
    case ParamType::String: {
      auto v = n.as_string();
      if (!v) bad(o, s.key, fmt::format("expected a string, got {}", describe(n)));
      check_string(o, s, v->get());
      return ParamValue{std::in_place_type<std::string>, v->get()};
    }
    case ParamType::IntList:
    case ParamType::DoubleList: {
      // A TOML string holds the same comma-separated text as `--set` (older configs wrote lists so).
      if (auto str = n.as_string()) return list_of_string(o, s, str->get());
      auto a = n.as_array();
      if (!a)
        bad(o, s.key, fmt::format("expected an array of {}, got {}",
                                  s.type == ParamType::IntList ? "integers" : "numbers", describe(n)));
      if (a->size() > s.max_items)
        bad(o, s.key, fmt::format("expected at most {} entries, got {}", s.max_items, a->size()));
      std::vector<double> entries;
      for (std::size_t i = 0; i < a->size(); ++i) {
        const toml::node& el = *a->get(i);
        double d = 0;
        if (auto v = el.as_integer())
          d = static_cast<double>(v->get());
        else if (auto f = el.as_floating_point(); f && s.type == ParamType::DoubleList)
          d = f->get();
        else
          throw InputError(one_line(fmt::format("{}parameter '{}' entry {}: expected {}, got {}", o.prefix, s.key,
                                                i + 1, s.type == ParamType::IntList ? "an integer" : "a number",
                                                describe(el))));
        entries.push_back(d);
      }
      return list_value(o, s, entries);
    }
  }
  throw std::logic_error("unhandled parameter type");
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
        one_line(fmt::format("{}unknown preset '{}' (see `tokdyn presets`)", file_prefix(file, n), name->get())));
  return *e;
}

}  // namespace tokdyn
