// Provenance of a run and the replay of a manifest (provenance.hpp).
#include "tokdyn/runtime/provenance.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <Eigen/Core>
#include <boost/version.hpp>
#include <fmt/format.h>
#include <omp.h>

#include "tokdyn/build_info.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/sha256.hpp"
#include "tokdyn/io/file.hpp"

extern "C" char* openblas_get_config(void);

namespace tokdyn {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::mutex g_mu;
std::string g_command;

/// Files hashed for one run at most (bytes): a larger input is recorded by size only.
constexpr std::uintmax_t kHashBudget = std::uintmax_t{16} << 30;
/// Files listed for one directory parameter at most.
constexpr std::size_t kMaxListed = 4096;

/// A JSON parameter value as it would be written after `--set key=`.
std::string set_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number_unsigned()) return std::to_string(v.get<unsigned long long>());
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());
  if (v.is_array()) {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      out += set_text(v[i]);
    }
    return out;
  }
  return v.dump();
}

}  // namespace

std::string shell_quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") ==
                          std::string::npos)
    return arg;
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void set_command_line(int argc, const char* const* argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += shell_quote(argv[i]);
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_command = std::move(s);
}

const std::string& command_line() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_command;
}

namespace {

/// Files from this size on have their SHA-256 remembered (a checkpoint's weights are hashed once,
/// not by every run and sweep point that reads them).
constexpr std::uint64_t kCacheFrom = std::uint64_t{16} << 20;

/// The cache: ${XDG_CACHE_HOME:-$HOME/.cache}/tokdyn/sha256.tsv, one line per hashed file
/// "sha256 TAB device TAB inode TAB size TAB mtime_ns TAB absolute path", appended with O_APPEND (one
/// write per line: concurrent runs do not interleave); a file whose device, inode, size or mtime
/// changed is hashed again. Unwritable: no cache.
fs::path cache_file() {
  const char* x = std::getenv("XDG_CACHE_HOME");
  const char* h = std::getenv("HOME");
  if (x && *x) return fs::path(x) / "tokdyn" / "sha256.tsv";
  if (h && *h) return fs::path(h) / ".cache" / "tokdyn" / "sha256.tsv";
  return {};
}

std::string cache_key(const struct stat& st, const fs::path& abs) {
  return fmt::format("{}\t{}\t{}\t{}\t{}", static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino),
                     static_cast<long long>(st.st_size),
                     static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + static_cast<long long>(st.st_mtim.tv_nsec), abs.string());
}

std::string cached_sha(const std::string& key) {
  const fs::path f = cache_file();
  std::string found;
  if (f.empty()) return found;
  std::ifstream in(f);
  for (std::string line; std::getline(in, line);)
    if (line.size() > 65 && line[64] == '\t' && line.compare(65, std::string::npos, key) == 0) found = line.substr(0, 64);
  return found;
}

void remember_sha(const std::string& key, const std::string& sha) {
  const fs::path f = cache_file();
  if (f.empty()) return;
  std::error_code ec;
  fs::create_directories(f.parent_path(), ec);
  const int fd = ::open(f.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string line = sha + "\t" + key + "\n";
  (void)!::write(fd, line.data(), line.size());
  ::close(fd);
}

}  // namespace

json file_fingerprint(const fs::path& file, std::uintmax_t max_hash_bytes) {
  const OpenedFile f = open_regular_file(file, ~std::uint64_t{0}, fmt::format("input '{}'", file.string()));
  json j = {{"path", file.string()}, {"size", f.size}, {"sha256", nullptr}};
  std::error_code ec;
  j["absolute"] = fs::absolute(file, ec).lexically_normal().string();
  std::string key;
  if (struct stat st {}; f.size >= kCacheFrom && f.size <= max_hash_bytes && ::fstat(f.fd, &st) == 0) {
    key = cache_key(st, j["absolute"].get<std::string>());
    if (const std::string sha = cached_sha(key); !sha.empty()) {
      ::close(f.fd);
      j["sha256"] = sha;
      return j;
    }
  }
  if (f.size <= max_hash_bytes) {
    Sha256 h;
    std::string buf(std::size_t{1} << 20, '\0');
    std::uint64_t got = 0;
    for (;;) {
      const ssize_t n = ::read(f.fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      h.update(std::string_view(buf.data(), static_cast<std::size_t>(n)));
      got += static_cast<std::uint64_t>(n);
    }
    ::close(f.fd);
    if (got != f.size) throw InputError(fmt::format("input '{}': changed size while it was read", file.string()));
    j["sha256"] = h.hex();
    if (!key.empty()) remember_sha(key, j["sha256"].get<std::string>());
  } else {
    ::close(f.fd);
  }
  return j;
}

json versions_json() {
  json v = json::object();
  v["tokdyn"] = TOKDYN_VERSION;
#if defined(__clang__)
  v["compiler"] = fmt::format("clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  v["compiler"] = fmt::format("gcc {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#endif
  v["eigen"] = fmt::format("{}.{}.{}", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION);
  v["openblas"] = std::string(openblas_get_config());
  v["openmp"] = _OPENMP;
  v["fmt"] = fmt::format("{}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100);
  v["nlohmann_json"] = fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH);
  v["boost"] = fmt::format("{}.{}.{}", BOOST_VERSION / 100000, BOOST_VERSION / 100 % 1000, BOOST_VERSION % 100);
  return v;
}

json provenance_json(const Experiment& e, const Params& p) {
  json out = json::object();
  if (const std::string& c = command_line(); !c.empty()) {
    out["command"] = c;
    std::error_code ec;
    out["working_directory"] = fs::current_path(ec).string();  // where relative paths in it point
  }
  const json all = p.to_json();
  json set = json::object();
  for (const std::string& k : p.explicit_)
    if (all.contains(k)) set[k] = all[k];
  out["set"] = set;
  std::uintmax_t budget = kHashBudget;
  auto fingerprint = [&](const fs::path& f) {
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(f, ec);
    json j = file_fingerprint(f, ec || size > budget ? 0 : budget);
    if (!j["sha256"].is_null()) budget -= std::min(budget, j["size"].get<std::uintmax_t>());
    return j;
  };
  if (!p.config_file.empty()) out["config_file"] = fingerprint(p.config_file);
  json inputs = json::array();
  for (const ParamSpec& s : e.params) {
    if (s.path == PathKind::None || !p.has(s.key)) continue;
    const std::string& v = p.get_string(s.key);
    if (v.empty()) continue;
    std::error_code ec;
    if (fs::is_regular_file(v, ec)) {
      json j = fingerprint(v);
      j["param"] = s.key;
      inputs.push_back(std::move(j));
    } else if (fs::is_directory(v, ec)) {
      std::vector<fs::path> files;
      for (auto it = fs::recursive_directory_iterator(v, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(ec)) files.push_back(it->path());
      std::sort(files.begin(), files.end());
      if (files.size() > kMaxListed) files.resize(kMaxListed);
      for (const fs::path& f : files) {
        json j = fingerprint(f);
        j["param"] = s.key;
        inputs.push_back(std::move(j));
      }
    }
  }
  if (!inputs.empty()) out["input_files"] = std::move(inputs);
  out["versions"] = versions_json();
  return out;
}

bool is_manifest_target(const std::string& target) {
  return target.size() > 5 && target.compare(target.size() - 5, 5, ".json") == 0;
}

Replay replay_of_manifest(const fs::path& file, const std::vector<std::pair<std::string, std::string>>& overrides) {
  const std::string name = fmt::format("manifest '{}'", file.string());
  json m;
  try {
    m = json::parse(read_regular_file(file, 64u << 20, name));
  } catch (const json::exception& err) {
    throw InputError(fmt::format("{}: not valid JSON ({}); expected a run's manifest.json", name, one_line(err.what())));
  }
  if (!m.is_object()) throw InputError(fmt::format("{}: expected a JSON object (a run's manifest.json)", name));
  if (m.value("kind", "") == "tokdyn-sweep")
    throw InputError(fmt::format("{}: the manifest of a sweep; rerun the sweep with `tokdyn sweep` (it resumes), or replay one "
                                 "point's manifest (DIR/points/HASH/manifest.json)", name));
  if (m.value("kind", "") == "tokdyn-report")
    throw InputError(fmt::format("{}: the manifest of a report (tokdyn report); expected a run's manifest.json", name));
  if (!m.contains("preset") || !m["preset"].is_string() || !m.contains("params") || !m["params"].is_object())
    throw InputError(fmt::format("{}: expected a run's manifest.json with 'preset' and 'params'", name));
  const std::string preset = m["preset"].get<std::string>();
  const Experiment* e = find_experiment(preset);
  if (!e) throw InputError(fmt::format("{}: {}", name, unknown_preset_message(preset)));

  // Every recorded input unchanged (same bytes), or the replay would not be the same run.
  for (const json& in : m.value("input_files", json::array())) {
    if (!in.is_object() || !in.contains("path") || !in["path"].is_string()) continue;
    const std::string path = in["path"].get<std::string>();
    const std::string param = in.value("param", "");
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      throw InputError(fmt::format("{}: input '{}' of parameter '{}' is missing; expected the file the run read", name, path, param));
    const json now = file_fingerprint(path, in.contains("sha256") && in["sha256"].is_string() ? ~std::uintmax_t{0} : 0);
    if (now["size"] != in.value("size", json()) || (in["sha256"].is_string() && now["sha256"] != in["sha256"]))
      throw InputError(fmt::format("{}: input '{}' of parameter '{}' changed since the run (size {} and sha256 {} recorded, "
                                   "size {} and sha256 {} now); expected the same file",
                                   name, path, param, in.value("size", json()).dump(), in.value("sha256", json()).dump(),
                                   now["size"].dump(), now["sha256"].dump()));
  }

  // The explicit parameters (or, from a manifest without "set", none), then whatever still
  // differs from the recorded values, until the resolved parameters are the recorded ones.
  const json& rec = m["params"];
  std::map<std::string, std::string> sets;
  const json j_set = m.value("set", json::object());
  for (const auto& [k, v] : j_set.items()) sets[k] = set_text(v);
  std::set<std::string> overridden;
  for (const auto& [k, v] : overrides) sets[k] = v, overridden.insert(k);
  for (const auto& [k, v] : rec.items())
    if (std::none_of(e->params.begin(), e->params.end(), [&k = k](const ParamSpec& s) { return s.key == k; }))
      throw InputError(fmt::format("{}: parameter '{}' is not a parameter of '{}' in this version of tokdyn ({}); expected a "
                                   "manifest of this version", name, k, preset, TOKDYN_VERSION));
  for (int round = 0; round < 8; ++round) {
    std::vector<std::pair<std::string, std::string>> list(sets.begin(), sets.end());
    const json now = resolve_params(*e, list).to_json();
    std::vector<std::string> differ;
    for (const auto& [k, v] : rec.items())
      if (!overridden.count(k) && now.value(k, json()) != v) differ.push_back(k);
    if (differ.empty()) return Replay{e, list, m};
    for (const std::string& k : differ) sets[k] = set_text(rec[k]);
    if (round == 7)
      throw InputError(fmt::format("{}: this version of tokdyn cannot reproduce the recorded value of '{}' ({})", name,
                                   differ.front(), rec[differ.front()].dump()));
  }
  throw InputError(fmt::format("{}: cannot reproduce its parameters", name));
}

}  // namespace tokdyn
