// One parameter value, parsed and checked against its spec: from `--set` text (integers, numbers,
// booleans, choices, lists as "1,2,3" or "[1, 2, 3]") and from a TOML node, with the messages that
// name the parameter, where it came from and what was expected (every bad value is one InputError
// line). Called by resolve_params (params_resolve.cpp); declared in params_internal.hpp.
#include "tokdyn/core/suggest.hpp"
#include "tokdyn/runtime/experiment.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "tokdyn/core/error.hpp"
#include "params_internal.hpp"

namespace tokdyn {

using params_detail::bounds_text;
using params_detail::in_bounds;
using params_detail::join;
using params_detail::num;
using params_detail::Origin;

// ---------------------------------------------------------------------------------------------
// Validation

namespace {

[[noreturn]] void bad(const Origin& o, const std::string& key, const std::string& what) {
  throw InputError(one_line(fmt::format("{}parameter '{}': {}", o.prefix, key, what)));
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
    bad(o, s.key, fmt::format("expected one of: {} (got '{}'){}", join(s.choices, ", "), v, did_you_mean(v, s.choices)));
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

}  // namespace

namespace params_detail {

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

}  // namespace params_detail

}  // namespace tokdyn
