// Parameter schemas and values: constructors, typed getters, formatting for `tokdyn show`, and
// validation of defaults <- TOML file <- `--set` (every bad value is one InputError line).
#include "tokdyn/experiment.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "tokdyn/error.hpp"
#include "tokdyn/io/file.hpp"

namespace tokdyn {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Schema constructors

ParamSpec p_int(std::string key, long def, std::string help, std::optional<double> min, std::optional<double> max) {
  return ParamSpec{std::move(key), ParamType::Int, ParamValue{std::in_place_type<long>, def}, std::move(help), min, max,
                   false, {}};
}

ParamSpec p_double(std::string key, double def, std::string help, std::optional<double> min,
                   std::optional<double> max, bool min_exclusive) {
  return ParamSpec{std::move(key), ParamType::Double, ParamValue{std::in_place_type<double>, def}, std::move(help),
                   min, max, min_exclusive, {}};
}

ParamSpec p_bool(std::string key, bool def, std::string help) {
  return ParamSpec{std::move(key), ParamType::Bool, ParamValue{std::in_place_type<bool>, def}, std::move(help), {},
                   {}, false, {}};
}

ParamSpec p_string(std::string key, std::string def, std::string help, std::vector<std::string> choices) {
  return ParamSpec{std::move(key), ParamType::String, ParamValue{std::in_place_type<std::string>, std::move(def)},
                   std::move(help), {}, {}, false, std::move(choices)};
}

ParamSpec p_int_list(std::string key, std::vector<long> def, std::string help, std::optional<double> min,
                     std::optional<double> max) {
  return ParamSpec{std::move(key), ParamType::IntList,
                   ParamValue{std::in_place_type<std::vector<long>>, std::move(def)}, std::move(help), min, max,
                   false, {}};
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
  if (s.max) out += fmt::format("{}<= {}", out.empty() ? "" : " and ", num(*s.max, integer));
  return out;
}

bool in_bounds(const ParamSpec& s, double v) {
  if (s.min && (s.min_exclusive ? !(v > *s.min) : !(v >= *s.min))) return false;
  if (s.max && !(v <= *s.max)) return false;
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
  };
  return std::visit(V{}, v);
}

std::string range_text(const ParamSpec& s) {
  switch (s.type) {
    case ParamType::Int:
    case ParamType::IntList: return bounds_text(s, true);
    case ParamType::Double: return bounds_text(s, false);
    case ParamType::String: return join(s.choices, " | ");
    case ParamType::Bool: return "";
  }
  return "";
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

std::string unknown_key_message(const Experiment& e, const std::string& key) {
  std::vector<std::string> known;
  for (const auto& s : e.params) known.push_back(s.key);
  return fmt::format("unknown parameter '{}' for preset '{}' (known: {})", key, e.name,
                     known.empty() ? std::string("none") : join(known, ", "));
}

const ParamSpec* find_spec(const Experiment& e, const std::string& key) {
  for (const auto& s : e.params)
    if (s.key == key) return &s;
  return nullptr;
}

std::string trimmed(const std::string& s) {
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

long parse_long(const Origin& o, const std::string& label, const std::string& raw) {
  const std::string t = trimmed(raw);
  const char* b = t.data();
  const char* end = t.data() + t.size();
  if (b != end && *b == '+') ++b;
  long v = 0;
  auto [p, ec] = std::from_chars(b, end, v);
  if (ec == std::errc::result_out_of_range)
    bad(o, label, fmt::format("expected an integer, got '{}' (out of range)", raw));
  if (ec != std::errc() || p != end || t.empty()) bad(o, label, fmt::format("expected an integer, got '{}'", raw));
  return v;
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
      const std::string t = trimmed(raw);
      const char* b = t.data();
      const char* end = t.data() + t.size();
      if (b != end && *b == '+') ++b;
      double v = 0;
      auto [p, ec] = std::from_chars(b, end, v, std::chars_format::general);
      if (ec == std::errc::result_out_of_range && p == end)
        bad(o, s.key, fmt::format("expected a finite number, got '{}'", raw));
      if (ec != std::errc() || p != end || t.empty()) bad(o, s.key, fmt::format("expected a number, got '{}'", raw));
      check_double(o, s, v, fmt::format("'{}'", raw));
      return ParamValue{std::in_place_type<double>, v};
    }
    case ParamType::Bool: {
      const std::string t = lower(trimmed(raw));
      if (t == "true" || t == "1" || t == "yes" || t == "on") return ParamValue{std::in_place_type<bool>, true};
      if (t == "false" || t == "0" || t == "no" || t == "off") return ParamValue{std::in_place_type<bool>, false};
      bad(o, s.key, fmt::format("expected true or false (or 1/0, yes/no, on/off), got '{}'", raw));
    }
    case ParamType::String: {
      check_string(o, s, raw);
      return ParamValue{std::in_place_type<std::string>, raw};
    }
    case ParamType::IntList: {
      std::string t = trimmed(raw);
      if (t.size() >= 2 && t.front() == '[' && t.back() == ']') t = trimmed(t.substr(1, t.size() - 2));
      std::vector<long> out;
      if (t.empty()) return ParamValue{std::in_place_type<std::vector<long>>, out};
      std::size_t start = 0;
      for (std::size_t i = 1;; ++i) {
        const auto comma = t.find(',', start);
        const std::string item = t.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const std::string it = trimmed(item);
        const char* b = it.data();
        const char* end = it.data() + it.size();
        if (b != end && *b == '+') ++b;
        long v = 0;
        auto [p, ec] = std::from_chars(b, end, v);
        if (ec != std::errc() || p != end || it.empty())
          throw InputError(
              one_line(fmt::format("parameter '{}' entry {}: expected an integer, got '{}'", s.key, i, item)));
        if (!in_bounds(s, static_cast<double>(v)))
          throw InputError(one_line(fmt::format("parameter '{}' entry {}: expected an integer {}, got {}", s.key, i,
                                                bounds_text(s, true), v)));
        out.push_back(v);
        if (out.size() > kMaxListLength)
          throw InputError(one_line(fmt::format("parameter '{}': expected at most {} entries", s.key, kMaxListLength)));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      return ParamValue{std::in_place_type<std::vector<long>>, std::move(out)};
    }
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
    case ParamType::IntList: {
      auto a = n.as_array();
      if (!a) bad(o, s.key, fmt::format("expected an array of integers, got {}", describe(n)));
      std::vector<long> out;
      if (a->size() > kMaxListLength)
        bad(o, s.key, fmt::format("expected at most {} entries, got {}", kMaxListLength, a->size()));
      for (std::size_t i = 0; i < a->size(); ++i) {
        const toml::node& el = *a->get(i);
        auto v = el.as_integer();
        if (!v)
          throw InputError(one_line(fmt::format("{}parameter '{}' entry {}: expected an integer, got {}", o.prefix,
                                                s.key, i + 1, describe(el))));
        if (!in_bounds(s, static_cast<double>(v->get())))
          throw InputError(one_line(fmt::format("{}parameter '{}' entry {}: expected an integer {}, got {}",
                                                o.prefix, s.key, i + 1, bounds_text(s, true), v->get())));
        out.push_back(static_cast<long>(v->get()));
      }
      return ParamValue{std::in_place_type<std::vector<long>>, std::move(out)};
    }
  }
  throw std::logic_error("unhandled parameter type");
}

std::string file_prefix(const fs::path& file, const toml::node* n = nullptr) {
  if (n && n->source().begin.line > 0) return fmt::format("config file '{}' line {}: ", file.string(), n->source().begin.line);
  return fmt::format("config file '{}': ", file.string());
}

toml::table load_toml(const fs::path& file) {
  // Regular files only (a FIFO or /dev/zero is refused without blocking), at most 1 MiB.
  const std::string text = read_regular_file(file, 1u << 20, fmt::format("config file '{}'", file.string()));
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
      if (!s) throw InputError(one_line(o.prefix + unknown_key_message(e, key)));
      p.values_[key] = value_of_toml(o, *s, node);
      p.explicit_.insert(key);
    }
  }

  for (const auto& [key, value] : sets) {
    const ParamSpec* s = find_spec(e, key);
    if (!s) throw InputError(one_line(unknown_key_message(e, key)));
    p.values_[key] = value_of_string(*s, value);
    p.explicit_.insert(key);
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
