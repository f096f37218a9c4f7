// `tokdyn sweep` (sweep.hpp): the grid, the points' hashes, the result folder, running the points
// as child processes (serially, --jobs, a shard, or the ranks of mpirun), and sweep.csv.
#include "sweep.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "tokdyn/build_info.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/core/host.hpp"
#include "tokdyn/core/interrupt.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/runtime/output_folder.hpp"

#if TOKDYN_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C interface only
#include <mpi.h>
#endif

extern char** environ;

namespace tokdyn::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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

std::optional<double> number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

bool is_integer_text(const std::string& s) {
  if (s.empty()) return false;
  std::size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

/// A double as a parameter value: 15 significant digits, so that 0.1 * 3 is written 0.3.
std::string double_text(double v) {
  const double r = std::stod(fmt::format("{:.15g}", v));
  return fmt::format("{}", r == 0.0 ? 0.0 : r);
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

/// The rows of a CSV file (RFC 4180 quoting); the header is row 0.
std::vector<std::vector<std::string>> read_csv(const fs::path& file, const std::string& what) {
  const std::string text = read_regular_file(file, 256 * kMiB, what);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string cell;
  bool quoted = false, any = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') cell += '"', ++i;
      else if (c == '"') quoted = false;
      else cell += c;
      continue;
    }
    if (c == '"') quoted = true, any = true;
    else if (c == ',') row.push_back(cell), cell.clear(), any = true;
    else if (c == '\r') continue;
    else if (c == '\n') {
      row.push_back(cell), cell.clear();
      if (!(row.size() == 1 && row[0].empty() && !any)) rows.push_back(row);
      row.clear(), any = false;
    } else cell += c, any = true;
  }
  if (quoted) throw InputError(fmt::format("{} '{}': an unterminated quoted cell; expected CSV", what, file.string()));
  if (any || !cell.empty()) row.push_back(cell), rows.push_back(row);
  return rows;
}

/// Writes `text` to `file` atomically (a temporary file beside it, then rename).
void write_atomic(const fs::path& file, const std::string& text) {
  const fs::path tmp = file.string() + fmt::format(".tmp-{}", ::getpid());
  write_text_file(tmp, text);
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw ResourceError(fmt::format("'{}': cannot publish: {}", file.string(), ec.message()));
  }
}



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

struct Point {
  long index = 0;
  std::vector<std::pair<std::string, std::string>> values;  ///< the axes' values (key, text)
  std::optional<Params> params;                               ///< resolved (none: the point is bad input)
  std::string error;                                          ///< why it could not be resolved
  std::string hash;
  double work = 0;                                            ///< the preset's estimated flops (ordering)
};

/// A file the sweep writes for its points and removes when it ends (or is interrupted).
struct TempFile {
  explicit TempFile(fs::path p) : path(std::move(p)), guard(path) {}
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  fs::path path;
  interrupt::PathGuard guard;
};

struct Definition {
  const Experiment* e = nullptr;
  std::string target;                                   ///< as given (preset or config file)
  std::optional<fs::path> config;                       ///< the config file the points resolve (without [sweep])
  std::optional<fs::path> config_given;                 ///< the config file as given (the definition names it)
  std::shared_ptr<TempFile> config_file;         ///< a written config without [sweep], removed with the sweep
  std::vector<std::pair<std::string, std::string>> base;  ///< --set
  json axes = json::array();
  std::vector<std::string> keys;                         ///< the axes' keys, in order
  std::vector<Point> points;

  json to_json() const {
    json pts = json::array();
    for (const Point& p : points) {
      json v = json::object();
      for (const auto& [k, x] : p.values) v[k] = x;
      pts.push_back({{"index", p.index}, {"hash", p.hash}, {"values", v}});
    }
    json sets = json::object();
    for (const auto& [k, v] : base) sets[k] = v;
    json d = {{"preset", e->name}, {"sets", sets}, {"axes", axes}, {"keys", keys}, {"points", pts}};
    if (config_given) d["config"] = fs::absolute(*config_given).lexically_normal().string();
    return d;
  }
};

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
    if (!d.e) throw InputError(fmt::format("unknown preset '{}' (see `tokdyn presets`)", o.target));
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

// ---------------------------------------------------------------------------------------------
// The result folder

json read_json_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return json();
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str(), nullptr, false);
}

bool is_sweep_manifest(const json& m) { return m.is_object() && m.value("kind", "") == "tokdyn-sweep" && m.contains("definition"); }

/// What differs between two definitions, named by key, for the refusal.
std::string differences(const json& was, const json& now) {
  std::vector<std::string> out;
  if (was.value("preset", "") != now.value("preset", "")) out.push_back(fmt::format("preset: {} there, {} here", was.value("preset", ""), now.value("preset", "")));
  const json ws = was.value("sets", json::object()), ns = now.value("sets", json::object());
  std::set<std::string> keys;
  for (const auto& [k, v] : ws.items()) keys.insert(k);
  for (const auto& [k, v] : ns.items()) keys.insert(k);
  for (const std::string& k : keys) {
    const std::string a = ws.contains(k) ? ws[k].get<std::string>() : "(not set)", b = ns.contains(k) ? ns[k].get<std::string>() : "(not set)";
    if (a != b) out.push_back(fmt::format("--set {}: {} there, {} here", k, a, b));
  }
  if (was.value("axes", json()) != now.value("axes", json())) {
    auto text = [](const json& axes) {
      std::string s;
      for (const json& a : axes) {
        const std::string kind = a.value("kind", "");
        std::string t = kind == "grid" ? a["key"].get<std::string>() + "=" + a["spec"].get<std::string>()
                        : kind == "zip" ? "zip " + a["specs"].dump()
                                        : fmt::format("--points of {} rows", a.value("rows", json::array()).size());
        s += (s.empty() ? "" : "; ") + t;
      }
      return s.empty() ? std::string("none") : s;
    };
    out.push_back(fmt::format("axes: {} there, {} here", text(was.value("axes", json::array())), text(now.value("axes", json::array()))));
  }
  if (out.empty() && was.value("config", "") != now.value("config", "")) out.push_back("the config file");
  if (out.empty()) out.push_back("the points' resolved parameters (a config file or tokdyn's defaults changed)");
  return fmt::format("{}", fmt::join(out, "; "));
}

/// True for "<anything>.tmp-<digits>" (a temporary of write_atomic or of a point's OutputFolder).
bool is_tmp_name(const std::string& n) {
  const auto at = n.rfind(".tmp-");
  return at != std::string::npos && at > 0 && is_integer_text(n.substr(at + 5)) && n[at + 5] != '-' && n[at + 5] != '+';
}

/// Every entry of a previous sweep's folder, to replace it with --overwrite: the manifest,
/// sweep.csv, the sweep figures, each point (a complete tokdyn result, checked as `tokdyn run
/// --overwrite` checks one), the points' locks and temporaries, the failure records and logs.
/// Anything else (a file the user put there, a symbolic link, a folder tokdyn did not write) is
/// refused with its name: a sweep never deletes what it did not write.
std::vector<fs::path> sweep_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  auto refuse = [&](const fs::path& p, const std::string& why) {
    return InputError(fmt::format("--out '{}': --overwrite replaces only a previous sweep, and '{}' {}; remove it or use another --out",
                                  dir.string(), p.lexically_relative(dir).generic_string(), why));
  };
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    const auto st = e.symlink_status();
    if (fs::is_symlink(st)) throw refuse(e.path(), "is a symbolic link");
    const bool file = fs::is_regular_file(st), folder = fs::is_directory(st);
    if (file && (n == "manifest.json" || n == "sweep.csv" || is_tmp_name(n) ||
                 (n.rfind("sweep_", 0) == 0 && e.path().extension() == ".png"))) {
      out.push_back(e.path());
    } else if (folder && n == "points") {
      for (const auto& q : fs::directory_iterator(e.path())) {
        const std::string m = q.path().filename().string();
        const auto qs = q.symlink_status();
        if (fs::is_symlink(qs)) throw refuse(q.path(), "is a symbolic link");
        std::string why;
        if (fs::is_directory(qs) && !is_tmp_name(m) && classify_folder(q.path(), &why) != FolderKind::TokdynResult)
          throw refuse(q.path(), "is not a tokdyn result (" + why + ")");
        if (fs::is_directory(qs) && is_tmp_name(m) && !fs::exists(q.path() / ".tokdyn-temporary"))
          throw refuse(q.path(), "is not a tokdyn temporary folder");
        if (fs::is_regular_file(qs) && !(m.size() > 14 && m[0] == '.' && m.compare(m.size() - 13, 13, ".tokdyn-lock") == 0))
          throw refuse(q.path(), "was not written by tokdyn");
        if (!fs::is_directory(qs) && !fs::is_regular_file(qs)) throw refuse(q.path(), "is not a file or folder");
        out.push_back(q.path());
      }
      out.push_back(e.path());
    } else if (folder && n == "failed") {
      for (const auto& q : fs::directory_iterator(e.path())) {
        const std::string m = q.path().filename().string();
        const bool record = q.path().extension() == ".json" && read_json_file(q.path()).contains("exit_code");
        const bool log = m[0] == '.' && m.find(".stderr-") != std::string::npos;
        if (!fs::is_regular_file(q.symlink_status()) || !(record || log)) throw refuse(q.path(), "was not written by tokdyn");
        out.push_back(q.path());
      }
      out.push_back(e.path());
    } else {
      throw refuse(e.path(), "was not written by tokdyn sweep");
    }
  }
  return out;
}

/// Checks --out and writes the sweep's manifest (definition) unless the same sweep is there.
void prepare(const fs::path& dir, const Definition& d, bool overwrite) {
  const json def = d.to_json();
  std::error_code ec;
  const auto st = fs::symlink_status(dir, ec);
  if (fs::exists(st)) {
    if (fs::is_symlink(st) || !fs::is_directory(st))
      throw InputError(fmt::format("--out '{}': not a directory; expected a new folder, an empty one or a previous sweep", dir.string()));
    const json m = read_json_file(dir / "manifest.json");
    if (is_sweep_manifest(m)) {
      if (m["definition"] != def) {
        if (!overwrite)
          throw InputError(fmt::format("--out '{}': holds a sweep of other parameters ({}); use another --out, or --overwrite to replace it",
                                       dir.string(), differences(m["definition"], def)));
        // Only what a sweep writes is removed, each entry checked first; anything else refuses.
        for (const fs::path& p : sweep_entries(dir)) fs::remove_all(p);
      } else {
        return;  // the same sweep: resume
      }
    } else if (!fs::is_empty(dir)) {
      throw InputError(fmt::format("--out '{}': exists and is not a tokdyn sweep (no sweep manifest.json); expected a new folder, an empty one "
                                   "or a previous sweep",
                                   dir.string()));
    }
  }
  fs::create_directories(dir / "points");
  json m = {{"kind", "tokdyn-sweep"}, {"version", TOKDYN_VERSION}, {"definition", def}};
  write_atomic(dir / "manifest.json", m.dump(2) + "\n");
}

/// The sweep's definition as written in DIR (for --collect, and for shards joining a sweep).
json stored_definition(const fs::path& dir) {
  const json m = read_json_file(dir / "manifest.json");
  if (!is_sweep_manifest(m)) throw InputError(fmt::format("--collect '{}': no sweep manifest.json there; expected the --out of a tokdyn sweep", dir.string()));
  return m;
}

bool complete(const fs::path& dir, const std::string& hash) { return fs::exists(dir / "points" / hash / "manifest.json"); }

/// A complete point is skipped only when its result was made with exactly its parameters.
void check_complete_points(const fs::path& dir, const Definition& d) {
  for (const Point& p : d.points) {
    if (!p.params || !complete(dir, p.hash)) continue;
    const json pm = read_json_file(dir / "points" / p.hash / "manifest.json");
    const json want = p.params->to_json();
    if (pm.value("preset", "") == d.e->name && pm.value("params", json()) == want) continue;
    std::vector<std::string> keys;
    for (const auto& [k, v] : want.items())
      if (!pm.contains("params") || !pm["params"].contains(k) || pm["params"][k] != v) keys.push_back(k);
    throw InputError(fmt::format("--out '{}': points/{} holds a result of other parameters ({}); expected this point's result: "
                                 "remove that folder, or use --overwrite",
                                 dir.string(), p.hash, keys.empty() ? std::string("another preset") : fmt::format("{}", fmt::join(keys, ", "))));
  }
}

// ---------------------------------------------------------------------------------------------
// Running a point: a child `tokdyn run` process

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw ResourceError(fmt::format("cannot find the tokdyn binary (/proc/self/exe): {}", ec.message()));
  return p.string();
}

struct Child {
  pid_t pid = -1;
  long index = -1;
  std::chrono::steady_clock::time_point start;
  fs::path err;
};

struct Outcome {
  long index = -1;
  int code = 0;
  std::string error;
  double seconds = 0;
};

class Runner {
 public:
  Runner(const Definition& d, fs::path dir, int threads, bool figures, json where)
      : d_(d), dir_(std::move(dir)), threads_(threads), figures_(figures), where_(std::move(where)), exe_(self_exe()) {
    fs::create_directories(dir_ / "failed");
    // A killed sweep's point logs (.<hash>.stderr-<pid> of a pid no longer running) are removed.
    for (const auto& entry : fs::directory_iterator(dir_ / "failed")) {
      const std::string n = entry.path().filename().string();
      const auto at = n.rfind(".stderr-");
      if (n.empty() || n[0] != '.' || at == std::string::npos) continue;
      const std::string pid = n.substr(at + 8);
      if (is_integer_text(pid) && ::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) {
        std::error_code ec;
        fs::remove(entry.path(), ec);
      }
    }
  }

  /// Starts point `i` as a child process.
  Child start(long i) {
    if (interrupt::interrupting()) interrupt::wait_for_exit();  // the handler is stopping the points
    const Point& p = d_.points[static_cast<std::size_t>(i)];
    Child c;
    c.index = i;
    c.start = std::chrono::steady_clock::now();
    c.err = dir_ / "failed" / fmt::format(".{}.stderr-{}", p.hash, ::getpid());
    std::vector<std::string> args = {exe_, "run", d_.target, "--out", (dir_ / "points" / p.hash).string(), "--threads", std::to_string(threads_),
                                     "--quiet"};
    if (!figures_) args.emplace_back("--no-figures");
    for (const auto& [k, v] : d_.base) args.push_back("--set"), args.push_back(k + "=" + v);
    for (const auto& [k, v] : p.values) args.push_back("--set"), args.push_back(k + "=" + v);
    json note = where_;
    note["sweep"] = fs::absolute(dir_).lexically_normal().string();
    note["point"] = p.index;
    note["hash"] = p.hash;
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e)
      if (std::strncmp(*e, "TOKDYN_SWEEP_POINT=", 19) != 0) env.emplace_back(*e);
    env.push_back("TOKDYN_SWEEP_POINT=" + note.dump());
    std::vector<char*> argv, envp;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    // From creating the point's log to registering it and the child for clean-up, an interrupt waits: one that came
    // in between would leave the log (or the child) behind.
    const interrupt::CriticalSection starting;
    const int err_fd = ::open(c.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (err_fd < 0) throw ResourceError(fmt::format("'{}': {}", c.err.string(), errno_text(errno)));
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(err_fd);
      throw ResourceError(fmt::format("cannot start a point (fork): {}", errno_text(errno)));
    }
    if (pid == 0) {
      // The child: its own process group (the sweep's interrupt handler stops it), killed with
      // the sweep (SIGTERM, which `tokdyn run` turns into a clean exit), stdout discarded.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(128 + SIGTERM);
      const int null_fd = ::open("/dev/null", O_WRONLY);
      if (null_fd >= 0) ::dup2(null_fd, 1);
      ::dup2(err_fd, 2);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(err_fd);
    ::setpgid(pid, pid);
    c.pid = pid;
    guards_.emplace(pid, std::make_unique<interrupt::ChildGuard>(pid));
    err_guards_.emplace(pid, std::make_unique<interrupt::PathGuard>(c.err));  // removed if the sweep is interrupted
    return c;
  }

  /// Waits for `c` (blocking, or not: nullopt while it runs) and records its outcome.
  std::optional<Outcome> finish(const Child& c, bool block) {
    int status = 0;
    pid_t r;
    do r = ::waitpid(c.pid, &status, block ? 0 : WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == 0) return std::nullopt;
    return reap(c, r < 0 ? -1 : status);
  }

  /// The outcome of `c`, which ended with wait status `status` (-1: lost).
  Outcome reap(const Child& c, int status) {
    // A point stopped by the sweep's own interrupt is not a failure to record: the handler is
    // removing the partial results and ends the process.
    if (interrupt::interrupting()) interrupt::wait_for_exit();
    guards_.erase(c.pid);
    err_guards_.erase(c.pid);
    Outcome o;
    o.index = c.index;
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
    o.code = status < 0 ? exit_code::internal : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::string last;
    {
      std::ifstream in(c.err);
      for (std::string line; std::getline(in, line);)
        if (!trim(line).empty()) last = trim(line);
    }
    std::error_code ec;
    fs::remove(c.err, ec);
    if (last.rfind("tokdyn: ", 0) == 0) last = last.substr(8);
    const Point& p = d_.points[static_cast<std::size_t>(c.index)];
    if (o.code == 0 || o.code == exit_code::figures_failed) {
      fs::remove(dir_ / "failed" / (p.hash + ".json"), ec);
      if (o.code == exit_code::figures_failed) o.error = last;
      if (!complete(dir_, p.hash)) o.code = exit_code::internal, o.error = "the point's run ended without a result";
    } else {
      o.error = last.empty() ? (status >= 0 && WIFSIGNALED(status) ? fmt::format("killed by {}", interrupt::signal_name(WTERMSIG(status))) : "no message")
                             : last;
    }
    if (o.code != 0 && o.code != exit_code::figures_failed) record_failure(p, o);
    return o;
  }

  const fs::path& dir() const { return dir_; }
  const std::string& hash(long i) const { return d_.points[static_cast<std::size_t>(i)].hash; }

  /// A point that failed (or could not be resolved): failed/<hash>.json.
  void record_failure(const Point& p, const Outcome& o) const {
    json f = where_;
    f["point"] = p.index;
    f["hash"] = p.hash;
    f["exit_code"] = o.code;
    f["error"] = o.error;
    f["seconds"] = o.seconds;
    write_atomic(dir_ / "failed" / (p.hash + ".json"), f.dump(2) + "\n");
  }

 private:
  const Definition& d_;
  fs::path dir_;
  int threads_;
  bool figures_;
  json where_;
  std::string exe_;
  std::map<pid_t, std::unique_ptr<interrupt::ChildGuard>> guards_;
  std::map<pid_t, std::unique_ptr<interrupt::PathGuard>> err_guards_;
};

/// One line per finished point (stdout, flushed: a batch job's log shows progress).
class Progress {
 public:
  Progress(const Definition& d, std::size_t todo, bool quiet) : d_(d), todo_(todo), quiet_(quiet) {}
  void done(const Outcome& o, const std::string& who = "") {
    ++n_;
    if (o.code != 0 && o.code != exit_code::figures_failed) ++failed_;
    if (quiet_) return;
    const Point& p = d_.points[static_cast<std::size_t>(o.index)];
    const int w = static_cast<int>(std::to_string(todo_).size());
    if (o.code == 0)
      fmt::print("[{:>{}}/{}] {}  ok  {:.2f} s{}\n", n_, w, todo_, point_label(p), o.seconds, who);
    else if (o.code == exit_code::figures_failed)  // the results are there; only its figures failed
      fmt::print("[{:>{}}/{}] {}  ok  {:.2f} s{} (figures failed: {})\n", n_, w, todo_, point_label(p), o.seconds, who, o.error);
    else
      fmt::print("[{:>{}}/{}] {}  failed (exit {}): {}{}\n", n_, w, todo_, point_label(p), o.code, o.error, who);
    std::fflush(stdout);
  }
  std::size_t failed() const { return failed_; }

 private:
  const Definition& d_;
  std::size_t todo_, n_ = 0, failed_ = 0;
  bool quiet_;
};

// ---------------------------------------------------------------------------------------------
// sweep.csv and the final manifest

struct PointFiles {
  std::string status;  // ok | failed | missing
  int code = 0;
  std::string error;
  std::map<std::string, std::string> summaries;
  std::vector<std::pair<std::string, std::string>> checks;  // id, pass
  json manifest;
};

PointFiles read_point(const fs::path& dir, const json& point) {
  PointFiles f;
  const std::string hash = point["hash"].get<std::string>();
  const fs::path pd = dir / "points" / hash;
  if (complete(dir, hash)) {
    f.status = "ok";
    f.manifest = read_json_file(pd / "manifest.json");
    if (f.manifest.contains("figure_error")) f.error = f.manifest["figure_error"].get<std::string>();
    if (fs::exists(pd / "summary.csv")) {
      const auto rows = read_csv(pd / "summary.csv", "summary.csv");
      for (std::size_t r = 1; r < rows.size(); ++r)
        if (rows[r].size() >= 2) f.summaries[rows[r][0]] = rows[r][1];
    }
    if (fs::exists(pd / "checks.csv")) {
      const auto rows = read_csv(pd / "checks.csv", "checks.csv");
      std::size_t ic = 0, ip = 0;
      for (std::size_t c = 0; c < rows[0].size(); ++c) {
        if (rows[0][c] == "check") ic = c;
        if (rows[0][c] == "pass") ip = c;
      }
      for (std::size_t r = 1; r < rows.size(); ++r)
        if (rows[r].size() > std::max(ic, ip)) f.checks.emplace_back(rows[r][ic], rows[r][ip]);
    }
    return f;
  }
  const json fail = read_json_file(dir / "failed" / (hash + ".json"));
  if (fail.is_object()) {
    f.status = "failed";
    f.code = fail.value("exit_code", 1);
    f.error = fail.value("error", "");
    f.manifest = fail;
    return f;
  }
  f.status = "missing";
  return f;
}

struct Collected {
  std::size_t ok = 0, failed = 0, missing = 0;
};

/// sweep.csv and the final manifest.json from what DIR holds; `run_info` joins the manifest.
Collected collect(const fs::path& dir, const Experiment& e, const json& manifest, const json& run_info) {
  const json& def = manifest["definition"];
  const auto& points = def["points"];
  std::vector<PointFiles> files;
  files.reserve(points.size());
  for (const json& p : points) files.push_back(read_point(dir, p));

  std::vector<std::string> summaries;
  for (const SummaryDecl& s : e.outputs.summaries) summaries.push_back(s.name);
  for (const PointFiles& f : files)
    for (const auto& [k, v] : f.summaries)
      if (std::find(summaries.begin(), summaries.end(), k) == summaries.end()) summaries.push_back(k);
  const bool has_checks = e.outputs.table("checks.csv") != nullptr;
  std::vector<std::string> checks;
  std::set<std::string> check_set;
  for (const PointFiles& f : files)
    for (const auto& [id, pass] : f.checks)
      if (check_set.insert(id).second) checks.push_back(id);

  std::vector<std::string> keys = def["keys"].get<std::vector<std::string>>();
  std::string csv;
  std::vector<std::string> head = {"point", "hash"};
  head.insert(head.end(), keys.begin(), keys.end());
  for (const char* c : {"status", "exit_code", "error"}) head.emplace_back(c);
  head.insert(head.end(), summaries.begin(), summaries.end());
  if (has_checks) {
    for (const char* c : {"checks_passed", "checks_failed", "checks_na"}) head.emplace_back(c);
    for (const std::string& c : checks) head.push_back("check:" + c);
  }
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i) csv += ',';
      csv += csv_cell(cells[i]);
    }
    csv += "\n";
  };
  line(head);
  Collected c;
  json status = json::array();
  std::set<std::string> hosts;
  double point_seconds = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const PointFiles& f = files[i];
    const json& p = points[i];
    (f.status == "ok" ? c.ok : f.status == "failed" ? c.failed : c.missing)++;
    std::vector<std::string> row = {std::to_string(p["index"].get<long>()), p["hash"].get<std::string>()};
    for (const std::string& k : keys) row.push_back(p["values"].value(k, ""));
    row.push_back(f.status);
    row.push_back(f.status == "missing" ? "" : std::to_string(f.code));
    row.push_back(f.error);
    for (const std::string& s : summaries) row.push_back(f.summaries.count(s) ? f.summaries.at(s) : "");
    if (has_checks) {
      std::map<std::string, std::string> by(f.checks.begin(), f.checks.end());
      long pass = 0, fail = 0, na = 0;
      for (const auto& [id, v] : f.checks) (v == "true" ? pass : v == "false" ? fail : na)++;
      const bool any = f.status == "ok";
      row.push_back(any ? std::to_string(pass) : ""), row.push_back(any ? std::to_string(fail) : ""), row.push_back(any ? std::to_string(na) : "");
      for (const std::string& id : checks) row.push_back(by.count(id) ? by.at(id) : "");
    }
    line(row);
    json s = {{"point", p["index"]}, {"hash", p["hash"]}, {"status", f.status}};
    if (f.status == "ok") {
      const json sp = f.manifest.value("sweep_point", json::object());
      s["seconds"] = f.manifest.value("wall_time_s", 0.0);
      s["host"] = f.manifest.value("hostname", "");
      if (sp.contains("rank")) s["rank"] = sp["rank"];
      point_seconds += s["seconds"].get<double>();
      hosts.insert(s["host"].get<std::string>());
    } else if (f.status == "failed") {
      s["exit_code"] = f.code;
      s["error"] = f.error;
      if (f.manifest.contains("host")) s["host"] = f.manifest["host"], hosts.insert(f.manifest["host"].get<std::string>());
      if (f.manifest.contains("rank")) s["rank"] = f.manifest["rank"];
    }
    status.push_back(s);
  }
  write_atomic(dir / "sweep.csv", csv);
  std::error_code ec;
  if (fs::is_directory(dir / "failed", ec) && fs::is_empty(dir / "failed", ec)) fs::remove(dir / "failed", ec);
  json m = manifest;
  m["collected_utc"] = utc_now_iso8601();
  m["counts"] = {{"points", files.size()}, {"ok", c.ok}, {"failed", c.failed}, {"missing", c.missing}};
  m["points_seconds"] = point_seconds;
  m["hosts"] = std::vector<std::string>(hosts.begin(), hosts.end());
  m["points"] = status;
  for (const auto& [k, v] : run_info.items()) m[k] = v;
  write_atomic(dir / "manifest.json", m.dump(2) + "\n");
  return c;
}

// ---------------------------------------------------------------------------------------------
// --plot

json parse_plots(const std::vector<std::string>& plots, const Experiment& e, const std::vector<std::string>& keys) {
  json out = json::array();
  std::vector<std::string> names;
  for (const SummaryDecl& s : e.outputs.summaries) names.push_back(s.name);
  for (const std::string& spec : plots) {
    json p = json::object();
    for (const std::string& part : split(spec, ',')) {
      const auto eq = part.find('=');
      const std::string k = eq == std::string::npos ? part : trim(part.substr(0, eq));
      if (eq == std::string::npos || (k != "y" && k != "x" && k != "hue") || p.contains(k))
        throw InputError(fmt::format("--plot '{}': expected y=SUMMARY,x=PARAM[,hue=PARAM]", spec));
      p[k] = trim(part.substr(eq + 1));
    }
    if (!p.contains("y") || !p.contains("x")) throw InputError(fmt::format("--plot '{}': expected y=SUMMARY,x=PARAM[,hue=PARAM]", spec));
    const std::string y = p["y"];
    if (std::find(names.begin(), names.end(), y) == names.end() && std::find(keys.begin(), keys.end(), y) == keys.end())
      throw InputError(fmt::format("--plot y={}: not a scalar summary of preset {}; expected one of {}", y, e.name,
                                   names.empty() ? std::string("(none: the preset declares no summaries)") : fmt::format("{}", fmt::join(names, ", "))));
    for (const char* axis : {"x", "hue"}) {
      if (!p.contains(axis)) continue;
      const std::string k = p[axis];
      if (std::find(keys.begin(), keys.end(), k) == keys.end())
        throw InputError(fmt::format("--plot {}={}: not a swept parameter; expected one of {}", axis, k, fmt::join(keys, ", ")));
    }
    out.push_back(p);
  }
  return out;
}

int draw_plots(const fs::path& dir, const json& plots) {
  if (plots.empty()) return exit_code::ok;
  json m = read_json_file(dir / "manifest.json");
  m["plots"] = plots;
  write_atomic(dir / "manifest.json", m.dump(2) + "\n");
  try {
    draw_figures("sweep", dir);
  } catch (const std::runtime_error& err) {
    std::fflush(stdout);
    std::fprintf(stderr, "tokdyn: %s (sweep.csv is written)\n", message_line(err.what()).c_str());
    return exit_code::figures_failed;
  }
  return exit_code::ok;
}

// ---------------------------------------------------------------------------------------------
// MPI (when found at configure time and launched by mpirun / srun)

struct World {
  int rank = 0, size = 1, local_size = 1;
  bool mpi = false;
  double init_seconds = 0;       ///< MPI_Init and the node split
  double dispatch_seconds = 0;   ///< rank 0: time spent answering requests (receive, record, send)
  long requests = 0;             ///< rank 0: requests answered
};

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

World init_world(int argc, char** argv) {
  World w;
#if TOKDYN_HAVE_MPI
  if (!launched_by_mpi()) return w;
  const auto t0 = std::chrono::steady_clock::now();
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &w.local_size);
  MPI_Comm_free(&local);
  w.mpi = true;
  w.init_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#else
  (void)argc, (void)argv;
  if (launched_by_mpi() && std::getenv("TOKDYN_SWEEP_NO_MPI_WARNING") == nullptr)
    std::fprintf(stderr, "tokdyn: note: launched by mpirun, but this tokdyn was built without MPI: every rank runs the whole sweep\n");
#endif
  return w;
}

void finalize(const World& w) {
#if TOKDYN_HAVE_MPI
  if (w.mpi) MPI_Finalize();
#else
  (void)w;
#endif
}

/// The worst exit code over the ranks (every rank returns it; rank 0 has printed the message).
int agree(const World& w, int code) {
#if TOKDYN_HAVE_MPI
  if (w.mpi) {
    int worst = 0;
    MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return worst;
  }
#else
  (void)w;
#endif
  return code;
}

constexpr int kTagRequest = 1, kTagAssign = 2;

/// Runs `todo` (point indices, largest work first) over the ranks: rank 0 hands out the next
/// point to whichever rank asks (it runs points itself between requests), the others ask,
/// run, report and ask again. Returns this rank's failures (rank 0: all of them).
std::size_t run_ranks(World& w, Runner& runner, const std::vector<long>& todo, Progress& progress) {
#if TOKDYN_HAVE_MPI
  std::size_t failed = 0;
  if (w.rank == 0) {
    std::size_t next = 0;
    int active = w.size - 1;
    std::optional<Child> own;
    while (active > 0 || own || next < todo.size()) {
      bool busy = false;
      if (!own && next < todo.size()) own = runner.start(todo[next++]), busy = true;
      if (own) {
        if (auto o = runner.finish(*own, false)) {
          progress.done(*o, "  (rank 0)");
          own.reset();
          busy = true;
        }
      }
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kTagRequest, MPI_COMM_WORLD, &flag, &st);
      if (flag) {
        const auto d0 = std::chrono::steady_clock::now();
        double msg[3];  // point done (-1: first request), exit code, seconds
        MPI_Recv(msg, 3, MPI_DOUBLE, st.MPI_SOURCE, kTagRequest, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (msg[0] >= 0) {
          Outcome o;
          o.index = static_cast<long>(msg[0]), o.code = static_cast<int>(msg[1]), o.seconds = msg[2];
          if (o.code != 0 && o.code != exit_code::figures_failed)  // the worker wrote failed/<hash>.json
            o.error = read_json_file(runner.dir() / "failed" / (runner.hash(o.index) + ".json")).value("error", "(see sweep.csv)");
          progress.done(o, fmt::format("  (rank {})", st.MPI_SOURCE));
        }
        long assign = next < todo.size() ? todo[next++] : -1;
        if (assign < 0) --active;
        MPI_Send(&assign, 1, MPI_LONG, st.MPI_SOURCE, kTagAssign, MPI_COMM_WORLD);
        busy = true;
        w.dispatch_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - d0).count();
        ++w.requests;
      }
      if (!busy) ::usleep(500);  // idle: poll again in 0.5 ms (a request or rank 0's own point)
    }
    failed = progress.failed();
  } else {
    double msg[3] = {-1, 0, 0};
    for (;;) {
      MPI_Send(msg, 3, MPI_DOUBLE, 0, kTagRequest, MPI_COMM_WORLD);
      long assign = -1;
      MPI_Recv(&assign, 1, MPI_LONG, 0, kTagAssign, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (assign < 0) break;
      const Outcome o = *runner.finish(runner.start(assign), true);
      msg[0] = static_cast<double>(o.index), msg[1] = o.code, msg[2] = o.seconds;
      if (o.code != 0 && o.code != exit_code::figures_failed) ++failed;
    }
  }
  return failed;
#else
  (void)w, (void)runner, (void)todo, (void)progress;
  return 0;
#endif
}

/// Runs `todo` on this machine, `jobs` points at a time.
void run_local(Runner& runner, const std::vector<long>& todo, int jobs, Progress& progress) {
  std::vector<Child> running;
  std::size_t next = 0;
  while (next < todo.size() || !running.empty()) {
    while (static_cast<int>(running.size()) < jobs && next < todo.size()) running.push_back(runner.start(todo[next++]));
    int status = 0;
    pid_t r;
    do r = ::waitpid(-1, &status, 0);  // the sweep's only children are its points
    while (r < 0 && errno == EINTR);
    if (r < 0) throw std::runtime_error(fmt::format("waitpid: {}", errno_text(errno)));
    for (std::size_t i = 0; i < running.size(); ++i) {
      if (running[i].pid != r) continue;
      progress.done(runner.reap(running[i], status));
      running.erase(running.begin() + static_cast<long>(i));
      break;
    }
  }
}

/// "I/N" -> (I, N), 0 <= I < N.
std::pair<long, long> parse_shard(const std::string& s) {
  const auto slash = s.find('/');
  const std::string a = slash == std::string::npos ? "" : s.substr(0, slash), b = slash == std::string::npos ? "" : s.substr(slash + 1);
  if (!is_integer_text(a) || !is_integer_text(b) || a[0] == '-' || b[0] == '-' || a.size() > 9 || b.size() > 9)
    throw InputError(fmt::format("--shard '{}': expected I/N with 0 <= I < N, e.g. --shard 0/4 (a Slurm array: $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)", s));
  const long i = std::stol(a), n = std::stol(b);
  if (n < 1 || i >= n) throw InputError(fmt::format("--shard '{}': expected I/N with 0 <= I < N", s));
  return {i, n};
}

int collect_command(const Options& o) {
  const fs::path dir = o.collect;
  const json m = stored_definition(dir);
  const Experiment* e = find_experiment(m["definition"].value("preset", ""));
  if (!e) throw InputError(fmt::format("--collect '{}': the sweep's preset '{}' is not a preset of this tokdyn", dir.string(), m["definition"].value("preset", "")));
  const json plots = parse_plots(o.plots, *e, m["definition"]["keys"].get<std::vector<std::string>>());
  const Collected c = collect(dir, *e, m, json::object());
  if (!o.quiet)
    fmt::print("wrote {} ({} points: {} ok, {} failed, {} missing)\n", message_line((dir / "sweep.csv").string()), c.ok + c.failed + c.missing, c.ok,
             c.failed, c.missing);
  const int fig = draw_plots(dir, plots);
  if (c.failed + c.missing > 0) return exit_code::points_failed;
  return fig;
}

}  // namespace

int run(const Options& o, int argc, char** argv) {
  if (!o.collect.empty()) {
    if (!o.target.empty() || !o.grids.empty() || !o.zips.empty() || !o.points_file.empty() || !o.sets.empty() || o.out_given || !o.shard.empty() ||
        o.jobs != 1 || o.threads != 0 || o.figures || o.overwrite)
      throw InputError("--collect DIR: builds sweep.csv from the points in DIR and takes only --plot and --quiet; expected no target, --grid, --set, --out, --jobs, --shard");
    return collect_command(o);
  }
  if (o.target.empty()) throw InputError("sweep: no target; expected a preset or a .toml config (or --collect DIR)");
  if (o.out_given && o.out.empty()) throw InputError("--out: an empty path; expected the sweep's folder");
  const unsigned hw_u = std::thread::hardware_concurrency();
  const int hw = hw_u ? static_cast<int>(hw_u) : 1;
  if (o.jobs < 1 || o.jobs > 4 * hw) throw InputError(fmt::format("--jobs: expected an integer from 1 to {} (4 per core), got {}", 4 * hw, o.jobs));

  World w = init_world(argc, argv);
  struct Finalizer {
    const World& w;
    ~Finalizer() { finalize(w); }
  } finalizer{w};

  // Every rank reads the same input into the same definition; only rank 0 reports a problem.
  std::optional<Definition> def;
  json plots;
  std::pair<long, long> shard{0, 1};
  fs::path dir;
  int code = 0;
  std::string message;
  try {
    if (w.mpi && !o.shard.empty()) throw InputError("--shard: not under mpirun (the ranks share the points already); expected one of them");
    if (w.mpi && o.jobs != 1) throw InputError("--jobs: not under mpirun; expected more ranks per node instead (mpirun -np N)");
    if (!o.shard.empty()) shard = parse_shard(o.shard);
    if (shard.second > 1 && !o.plots.empty())
      throw InputError("--plot: not with --shard (a shard has only its own points); draw it with `tokdyn sweep --collect DIR --plot ...`");
    def = define(o);
    dir = o.out.empty() ? fs::path("results") / (def->e->name + "-sweep") : fs::path(o.out);
    plots = parse_plots(o.plots, *def->e, def->keys);
    if (w.rank == 0) {
      // Shards start independently: the first writes the definition, the others find it there.
      if (shard.second > 1 && o.overwrite) throw InputError("--overwrite: not with --shard (the shards share one folder); remove the old sweep first");
      prepare(dir, *def, o.overwrite);
      check_complete_points(dir, *def);
    }
  } catch (...) {
    const Failure f = failure_of(std::current_exception());
    code = f.code, message = f.line;
  }
  code = agree(w, code);
  if (code != 0) {
    if (w.rank == 0 && !message.empty()) {
      std::fflush(stdout);
      std::fprintf(stderr, "tokdyn: %s\n", message.c_str());
    }
    return code;
  }

  const auto t0 = std::chrono::steady_clock::now();
  const std::string started = utc_now_iso8601();
  const int threads = o.threads > 0 ? o.threads : std::max(1, hw / std::max(o.jobs, w.local_size));
  json where = {{"host", host_name()}};
  if (w.mpi) where["rank"] = w.rank, where["ranks"] = w.size;
  if (shard.second > 1) where["shard"] = fmt::format("{}/{}", shard.first, shard.second);
  Runner runner(*def, dir, threads, o.figures, where);

  // The points to run: not complete, resolvable; the largest estimated work first. A point that
  // is bad input is recorded as failed without running.
  std::vector<long> todo;
  std::size_t skipped = 0, bad = 0;
  std::vector<const Point*> order;
  for (const Point& p : def->points) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const Point* a, const Point* b) { return a->work > b->work; });
  long position = 0;
  // Under mpirun only rank 0 looks at the folder (the others ask it for points): one rank's file
  // system checks, not one per rank.
  if (w.mpi && w.rank != 0) order.clear();
  for (const Point* p : order) {
    const bool mine = position++ % shard.second == shard.first;
    if (!mine) continue;
    if (!p->params) {
      if (w.rank == 0) {
        Outcome f;
        f.index = p->index, f.code = exit_code::bad_input, f.error = p->error;
        runner.record_failure(*p, f);
      }
      ++bad;
      continue;
    }
    if (complete(dir, p->hash)) {
      ++skipped;
      continue;
    }
    todo.push_back(p->index);
  }
  if (w.rank == 0 && !o.quiet) {
    fmt::print("sweep {}: {} points{}: {} complete (skipped), {} bad input, {} to run; {} x {} thread{}{}\n", def->e->name, def->points.size(),
               shard.second > 1 ? fmt::format(" (shard {}/{}: {})", shard.first, shard.second, skipped + bad + todo.size()) : "", skipped, bad,
               todo.size(), w.mpi ? fmt::format("{} ranks", w.size) : fmt::format("{} job{}", o.jobs, o.jobs == 1 ? "" : "s"), threads,
               threads == 1 ? "" : "s", w.mpi ? " per rank" : " per point");
    std::fflush(stdout);
  }
  Progress progress(*def, todo.size(), o.quiet || w.rank != 0);
  std::size_t failed = 0;
  if (w.mpi) {
    failed = run_ranks(w, runner, todo, progress);
  } else {
    run_local(runner, todo, o.jobs, progress);
    failed = progress.failed();
  }
  if (w.rank == 0) failed += bad;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int worst = agree(w, failed > 0 ? exit_code::points_failed : exit_code::ok);
  if (w.rank != 0) return worst;

  if (shard.second > 1) {
    fmt::print("shard {}/{}: {} points run in {:.1f} s ({} failed); when every shard is done: tokdyn sweep --collect {}\n", shard.first,
               shard.second, todo.size(), wall, failed, dir.string());
    return worst;
  }
  json info = {{"started_utc", started}, {"wall_time_s", wall}, {"threads_per_point", threads}, {"points_run", todo.size()},
               {"points_skipped", skipped}};
  if (w.mpi) {
    info["ranks"] = w.size;
    info["mpi"] = {{"init_seconds", w.init_seconds}, {"requests", w.requests}, {"dispatch_seconds", w.dispatch_seconds}};
  }
  else info["jobs"] = o.jobs;
  const Collected c = collect(dir, *def->e, stored_definition(dir), info);
  if (!o.quiet)
    fmt::print("wrote {} ({} points: {} ok, {} failed; {:.1f} s)\n", message_line((dir / "sweep.csv").string()), def->points.size(), c.ok, c.failed, wall);
  const int fig = draw_plots(dir, plots);
  if (c.failed + c.missing > 0) return exit_code::points_failed;
  return std::max(worst, fig);
}

}  // namespace tokdyn::sweep
