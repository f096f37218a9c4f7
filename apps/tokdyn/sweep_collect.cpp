// `tokdyn sweep` (sweep.hpp): collecting the results. Each point's files read (its manifest,
// summary.csv and checks.csv, or its failure record), sweep.csv written with one row per point
// (the same bytes however the points were run) and the final manifest with the points' status,
// time, rank and host; the --plot figures checked and drawn.
#include "sweep_internal.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/host.hpp"

namespace tokdyn::sweep::detail {

namespace {

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

}  // namespace

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

}  // namespace tokdyn::sweep::detail
