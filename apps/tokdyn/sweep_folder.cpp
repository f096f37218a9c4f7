// `tokdyn sweep` (sweep.hpp): the results folder's state. --out checked and the sweep's manifest
// (its definition) written, or the same sweep resumed, or a previous sweep replaced with
// --overwrite (only what a sweep writes, each entry checked); the stored definition; complete
// points checked against their parameters; files published atomically.
#include "sweep_internal.hpp"

#include <set>
#include <sstream>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/build_info.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/runtime/output_folder.hpp"

namespace tokdyn::sweep::detail {

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

// ---------------------------------------------------------------------------------------------
// The result folder

json read_json_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return json();
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str(), nullptr, false);
}

namespace {

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

}  // namespace

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

}  // namespace tokdyn::sweep::detail
