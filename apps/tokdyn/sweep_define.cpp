// `tokdyn sweep` (sweep.hpp): the text and CSV helpers, and the sweep's definition: the axes of
// --grid, --zip, --points and a config file's [sweep] table expanded into points, each resolved
// (the same validation as a run), hashed by its resolved parameters and given its estimated work.
#include "sweep_internal.hpp"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"

namespace tokdyn::sweep::detail {

// ---------------------------------------------------------------------------------------------
// Small helpers

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(trim(cur));
  return out;
}

namespace {

std::optional<double> number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

bool is_integer_text(const std::string& s) {
  if (s.empty()) return false;
  std::size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

namespace {

/// A double as a parameter value: 15 significant digits, so that 0.1 * 3 is written 0.3.
std::string double_text(double v) {
  const double r = std::stod(fmt::format("{:.15g}", v));
  return fmt::format("{}", r == 0.0 ? 0.0 : r);
}

}  // namespace

namespace {

/// 64-bit FNV-1a: a point's folder name (12 hex digits) from its canonical parameter text.
std::string short_hash(const std::string& text) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  return fmt::format("{:012x}", h >> 16);
}

// ---------------------------------------------------------------------------------------------
// The grid

const ParamSpec& spec_of(const Experiment& e, const std::string& key, const std::string& option) {
  for (const ParamSpec& s : e.params)
    if (s.key == key) return s;
  if (const std::optional<std::string> to = renamed_to(e, key))
    throw InputError(fmt::format("{} {}: parameter '{}' was renamed '{}' ({} {}=...)", option, key, key, *to, option, *to));
  std::vector<std::string> keys;
  for (const ParamSpec& s : e.params) keys.push_back(s.key);
  throw InputError(fmt::format("{} {}: not a parameter of preset {}; expected one of {} (see `tokdyn show {}`)", option, key, e.name,
                               fmt::join(keys, ", "), e.name));
}

bool is_list(const ParamSpec& s) { return s.type == ParamType::IntList || s.type == ParamType::DoubleList; }

/// The values of one `--grid/--zip key=SPEC`: a list (a,b,c; list parameters: a;b;c), a range
/// A:B[:STEP] or A:B:xF (geometric), linspace(A,B,N) or logspace(A,B,N) (10^A .. 10^B).
std::vector<std::string> expand(const std::string& option, const std::string& key, const std::string& spec, const ParamSpec& s) {
  const std::string what = fmt::format("{} {}={}", option, key, spec);
  constexpr std::size_t kMaxValues = 100000;
  auto bad = [&](const std::string& why) {
    return InputError(fmt::format("{}: {}; expected a list (a,b,c), a range A:B[:STEP] or A:B:xF, linspace(A,B,N) or logspace(A,B,N)",
                                  what, why));
  };
  if (spec.empty()) throw bad("no values");
  std::vector<std::string> out;
  const bool numeric = s.type == ParamType::Int || s.type == ParamType::Double;
  for (const char* fn : {"linspace(", "logspace("}) {
    if (spec.rfind(fn, 0) != 0) continue;
    if (!numeric) throw bad(fmt::format("{} needs a numeric parameter ({} is {})", fn, key, type_name(s.type)));
    if (spec.back() != ')') throw bad("no closing parenthesis");
    const auto args = split(spec.substr(9, spec.size() - 10), ',');
    if (args.size() != 3) throw bad("three arguments expected");
    const auto a = number(args[0]), b = number(args[1]);
    if (!a || !b || !is_integer_text(args[2])) throw bad("A and B numbers, N a positive integer");
    const long n = std::strtol(args[2].c_str(), nullptr, 10);
    if (n < 1 || n > static_cast<long>(kMaxValues)) throw bad(fmt::format("N = {} outside 1..{}", n, kMaxValues));
    const bool log = fn[1] == 'o';
    for (long i = 0; i < n; ++i) {
      const double t = n == 1 ? *a : (*a * static_cast<double>(n - 1 - i) + *b * static_cast<double>(i)) / static_cast<double>(n - 1);
      const double v = log ? std::pow(10.0, t) : t;
      if (!std::isfinite(v)) throw bad("a value is not finite");
      if (s.type == ParamType::Int) {
        if (v != std::round(v)) throw bad(fmt::format("{} is an integer parameter and {} is not an integer", key, double_text(v)));
        out.push_back(fmt::format("{}", static_cast<long long>(std::llround(v))));
      } else {
        out.push_back(double_text(v));
      }
    }
    return out;
  }
  if (numeric && spec.find(':') != std::string::npos) {
    const auto parts = split(spec, ':');
    if (parts.size() < 2 || parts.size() > 3) throw bad("a range has two or three parts");
    const auto a = number(parts[0]), b = number(parts[1]);
    if (!a || !b) throw bad("A and B must be numbers");
    const bool geometric = parts.size() == 3 && !parts[2].empty() && parts[2][0] == 'x';
    const std::string step_text = parts.size() == 3 ? (geometric ? parts[2].substr(1) : parts[2]) : "1";
    const auto step = number(step_text);
    if (!step) throw bad("STEP must be a number");
    const bool integers = s.type == ParamType::Int || (is_integer_text(parts[0]) && is_integer_text(parts[1]) && is_integer_text(step_text) && !geometric);
    if (geometric) {
      if (!(*step > 0.0) || *step == 1.0 || !(*a > 0.0) || !(*b > 0.0)) throw bad("a geometric range needs A, B > 0 and a factor F > 0, F != 1");
      if ((*b > *a) != (*step > 1.0)) throw bad("the factor does not move A towards B");
    } else if (*step == 0.0 || ((*b - *a) * *step < 0.0)) {
      throw bad("the step does not move A towards B");
    }
    for (long i = 0;; ++i) {
      const double v = geometric ? *a * std::pow(*step, static_cast<double>(i)) : *a + static_cast<double>(i) * *step;
      const double slack = 1e-9 * std::max(std::abs(*a), std::abs(*b));
      if ((*b >= *a && v > *b + slack) || (*b < *a && v < *b - slack)) break;
      if (out.size() == kMaxValues) throw bad(fmt::format("more than {} values", kMaxValues));
      if (integers) {
        if (std::abs(v - std::round(v)) > 1e-9 * std::max(1.0, std::abs(v)))
          throw bad(fmt::format("{} is an integer parameter and {} is not an integer", key, double_text(v)));
        out.push_back(fmt::format("{}", static_cast<long long>(std::llround(v))));
      } else {
        out.push_back(double_text(v));
      }
    }
    return out;
  }
  out = split(spec, is_list(s) ? ';' : ',');
  return out;
}

/// A TOML value of a [sweep] axis as --grid text: a string is a spec ("8:64:x2"), an array the
/// values (an array of arrays: the points of a list parameter, joined by ';').
std::string toml_axis_text(const toml::node& n, const std::string& where) {
  auto scalar = [&](const toml::node& v) -> std::string {
    if (auto x = v.as_integer()) return std::to_string(x->get());
    if (auto x = v.as_floating_point()) return fmt::format("{}", x->get());
    if (auto x = v.as_boolean()) return x->get() ? "true" : "false";
    if (auto x = v.as_string()) return x->get();
    throw InputError(fmt::format("{}: expected numbers, strings or booleans", where));
  };
  if (auto str = n.as_string()) return str->get();
  const toml::array* arr = n.as_array();
  if (!arr || arr->empty()) throw InputError(fmt::format("{}: expected a spec string (\"8:64:x2\") or a non-empty array of values", where));
  std::string out;
  const bool nested = arr->front().is_array();
  for (const toml::node& v : *arr) {
    std::string item;
    if (nested) {
      const toml::array* inner = v.as_array();
      if (!inner) throw InputError(fmt::format("{}: mixed arrays and values; expected one kind", where));
      for (const toml::node& x : *inner) {
        if (!item.empty()) item += ',';
        item += scalar(x);
      }
    } else {
      item = scalar(v);
    }
    if (!out.empty()) out += nested ? ';' : ',';
    out += item;
  }
  return out;
}

/// A config file's [sweep] table: grid = {key = [values] | "spec"}, zip = {...}, points = "file.csv"
/// (relative to the config's folder). The points resolve a copy of the config without it.
void read_sweep_table(Definition& d, std::vector<std::string>& grids, std::vector<std::string>& zips, std::string& points_file) {
  const fs::path file = *d.config_given;
  toml::table tbl;
  try {
    tbl = toml::parse_file(file.string());
  } catch (const toml::parse_error& err) {
    throw InputError(fmt::format("config file '{}': {}", file.string(), message_line(std::string(err.description()))));
  }
  const toml::node* sw = tbl.get("sweep");
  if (!sw) return;
  const toml::table* st = sw->as_table();
  if (!st) throw InputError(fmt::format("config file '{}': key 'sweep': expected a table [sweep] with grid, zip or points", file.string()));
  for (const auto& [k, v] : *st) {
    const std::string key(k.str());
    const std::string where = fmt::format("config file '{}': [sweep] {}", file.string(), key);
    if (key == "points") {
      const auto p = v.as_string();
      if (!p) throw InputError(fmt::format("{}: expected the path of a CSV file", where));
      if (!points_file.empty()) throw InputError(fmt::format("{}: and --points {}; give one", where, points_file));
      const fs::path pf = p->get();
      points_file = (pf.is_absolute() ? pf : file.parent_path() / pf).string();
    } else if (key == "grid" || key == "zip") {
      const toml::table* axes = v.as_table();
      if (!axes) throw InputError(fmt::format("{}: expected a table of parameters, e.g. {} = {{ beta = [0.5, 1, 2] }}", where, key));
      for (const auto& [pk, pv] : *axes)
        (key == "grid" ? grids : zips).push_back(std::string(pk.str()) + "=" + toml_axis_text(pv, fmt::format("{}.{}", where, pk.str())));
    } else {
      throw InputError(fmt::format("{}: unknown key; expected grid, zip or points", where));
    }
  }
  tbl.erase("sweep");
  const fs::path stripped = fs::temp_directory_path() / fmt::format("tokdyn-sweep-{}.toml", ::getpid());
  std::ostringstream text;
  text << tbl << "\n";
  d.config_file = std::make_shared<TempFile>(stripped);
  write_text_file(stripped, text.str());
  d.config = stripped;
  d.target = stripped.string();  // the points' `tokdyn run` reads it (the sweep removes it when done)
}

}  // namespace

Definition define(const Options& o) {
  Definition d;
  d.target = o.target;
  const bool toml = o.target.size() > 5 && o.target.compare(o.target.size() - 5, 5, ".toml") == 0;
  std::vector<std::string> grids, zips;  // a config's [sweep] table first, then the command line's
  std::string points_file = o.points_file;
  if (toml || (!find_experiment(o.target) && fs::exists(o.target))) {
    d.config = d.config_given = fs::path(o.target);
    d.e = &experiment_of_toml(*d.config);
    read_sweep_table(d, grids, zips, points_file);
  } else {
    d.e = find_experiment(o.target);
    if (!d.e) throw InputError(unknown_preset_message(o.target));
  }
  const Experiment& e = *d.e;
  std::set<std::string> used;
  auto claim = [&](const std::string& key, const std::string& option) {
    spec_of(e, key, option);
    if (!used.insert(key).second)
      throw InputError(fmt::format("{} {}: the parameter is already given by another --set, --grid, --zip or --points; give it once", option, key));
  };
  for (const std::string& s : o.sets) {
    auto kv = parse_set(s);
    claim(kv.first, "--set");
    d.base.push_back(kv);
  }
  // Axes: each a list of rows of (key, value); the product runs over them, the last fastest.
  struct Axis {
    std::vector<std::string> keys;
    std::vector<std::vector<std::string>> rows;
  };
  std::vector<Axis> axes;
  auto key_spec = [](const std::string& arg, const char* option) {
    const auto eq = arg.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError(fmt::format("{} '{}': expected key=SPEC, e.g. {} beta=0.5,1,2", option, arg, option));
    return std::pair{trim(arg.substr(0, eq)), trim(arg.substr(eq + 1))};
  };
  grids.insert(grids.end(), o.grids.begin(), o.grids.end());
  zips.insert(zips.end(), o.zips.begin(), o.zips.end());
  for (const std::string& g : grids) {
    auto [key, spec] = key_spec(g, "--grid");
    claim(key, "--grid");
    Axis a{{key}, {}};
    for (std::string& v : expand("--grid", key, spec, spec_of(e, key, "--grid"))) a.rows.push_back({std::move(v)});
    d.axes.push_back({{"kind", "grid"}, {"key", key}, {"spec", spec}});
    axes.push_back(std::move(a));
  }
  if (!zips.empty()) {
    Axis a;
    json keys = json::array(), specs = json::object();
    std::vector<std::vector<std::string>> cols;
    for (const std::string& z : zips) {
      auto [key, spec] = key_spec(z, "--zip");
      claim(key, "--zip");
      cols.push_back(expand("--zip", key, spec, spec_of(e, key, "--zip")));
      if (cols.size() > 1 && cols.back().size() != cols.front().size())
        throw InputError(fmt::format("--zip {}: {} values, but --zip {} has {}; zipped parameters move together and need the same count",
                                     key, cols.back().size(), a.keys.front(), cols.front().size()));
      a.keys.push_back(key);
      keys.push_back(key), specs[key] = spec;
    }
    for (std::size_t i = 0; i < cols.front().size(); ++i) {
      std::vector<std::string> row;
      for (const auto& c : cols) row.push_back(c[i]);
      a.rows.push_back(std::move(row));
    }
    d.axes.push_back({{"kind", "zip"}, {"keys", keys}, {"specs", specs}});
    axes.push_back(std::move(a));
  }
  if (!points_file.empty()) {
    const auto rows = read_csv(points_file, "--points");
    if (rows.size() < 2) throw InputError(fmt::format("--points '{}': expected a header of parameter names and at least one row", points_file));
    Axis a;
    a.keys = rows[0];
    for (std::string& k : a.keys) {
      k = trim(k);
      claim(k, "--points column");
    }
    for (std::size_t r = 1; r < rows.size(); ++r) {
      if (rows[r].size() != a.keys.size())
        throw InputError(fmt::format("--points '{}': row {} has {} cells; the header has {}", points_file, r + 1, rows[r].size(), a.keys.size()));
      a.rows.push_back(rows[r]);
    }
    // The points by content, not by file name: the same rows from another file are the same sweep.
    d.axes.push_back({{"kind", "points"}, {"keys", a.keys}, {"rows", a.rows}});
    axes.push_back(std::move(a));
  }
  if (axes.empty()) throw InputError("sweep: no --grid, --zip or --points; expected at least one (e.g. --grid beta=0.5,1,2)");
  for (const Axis& a : axes)
    for (const std::string& k : a.keys) d.keys.push_back(k);
  std::size_t total = 1;
  for (const Axis& a : axes) {
    if (a.rows.empty() || total > 1000000 / a.rows.size()) throw InputError("sweep: more than 1000000 points; expected fewer");
    total *= a.rows.size();
  }
  std::map<std::string, long> seen;
  for (std::size_t i = 0; i < total; ++i) {
    Point p;
    p.index = static_cast<long>(i);
    std::size_t rest = i;
    std::vector<std::size_t> at(axes.size());
    for (std::size_t k = axes.size(); k-- > 0;) at[k] = rest % axes[k].rows.size(), rest /= axes[k].rows.size();
    for (std::size_t k = 0; k < axes.size(); ++k)
      for (std::size_t c = 0; c < axes[k].keys.size(); ++c) {
        const std::string& v = axes[k].rows[at[k]][c];
        if (!v.empty()) p.values.emplace_back(axes[k].keys[c], v);  // an empty --points cell: the default
      }
    std::vector<std::pair<std::string, std::string>> sets = d.base;
    sets.insert(sets.end(), p.values.begin(), p.values.end());
    try {
      p.params = resolve_params(e, sets, d.config);
    } catch (const InputError& x) {
      p.error = "error: " + message_line(x.what());  // as the CLI says it
    }
    if (p.params) {
      // The point's identity is its resolved parameters (defaults included): the same run has the
      // same hash however it was spelled (beta=1 or beta=1.0).
      p.hash = short_hash("tokdyn-sweep-point\n" + e.name + "\n" + p.params->to_json().dump());
      if (e.estimate) {
        try {
          p.work = e.estimate(*p.params).flops;
        } catch (const std::exception&) {
          p.work = 0;  // the run itself will report what is wrong
        }
      }
      // Values as the run reads them (0.50 -> 0.5), for sweep.csv and the manifest.
      for (auto& [k, v] : p.values) v = value_text(p.params->values_.at(k));
    } else {
      std::string raw = "tokdyn-sweep-unresolved\n" + e.name;
      for (const auto& [k, v] : sets) raw += "\n" + k + "=" + v;
      p.hash = short_hash(raw);
    }
    if (auto [it, fresh] = seen.emplace(p.hash, p.index); !fresh) {
      std::string a, b;
      for (const auto& [k, v] : d.points[static_cast<std::size_t>(it->second)].values) a += (a.empty() ? "" : " ") + k + "=" + v;
      for (const auto& [k, v] : p.values) b += (b.empty() ? "" : " ") + k + "=" + v;
      throw InputError(fmt::format("sweep: points {} ({}) and {} ({}) run the same parameters; expected each point once", it->second, a,
                                   p.index, b));
    }
    d.points.push_back(std::move(p));
  }
  return d;
}

std::string point_label(const Point& p) {
  std::string s;
  for (const auto& [k, v] : p.values) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s.empty() ? "(defaults)" : s;
}

}  // namespace tokdyn::sweep::detail
