// `tokdyn report` (report.hpp): HTML pages of runs, sweeps and folders of them.
#include "report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report_html.hpp"
#include "tokdyn/build_info.hpp"
#include "tokdyn/core/host.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/output_folder.hpp"

namespace tokdyn::report_cli {

namespace fs = std::filesystem;
using json = nlohmann::json;
using html::esc;

namespace {

constexpr std::uintmax_t kMaxFigureBytes = std::uintmax_t{32} << 20;  ///< larger figures are linked, not embedded
constexpr std::size_t kMaxEntries = 20000;                            ///< runs in one report at most
constexpr int kMaxDepth = 6;                                          ///< folder levels searched for runs
constexpr std::size_t kTableRows = 25;                                ///< rows of a results table shown

enum class Kind { Run, Sweep };

struct Entry {
  Kind kind;
  fs::path dir;
  json manifest;
  std::string name;  ///< the folder relative to the DIR given (or its name)
};

json read_manifest(const fs::path& dir) {
  try {
    const json m = json::parse(read_regular_file(dir / "manifest.json", std::uint64_t{64} << 20, "manifest.json"));
    return m.is_object() ? m : json();
  } catch (const std::exception&) {
    return json();
  }
}

std::optional<Entry> entry_at(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / "manifest.json", ec)) return std::nullopt;
  json m = read_manifest(dir);
  if (m.is_null()) return std::nullopt;
  if (m.value("kind", "") == "tokdyn-sweep") return Entry{Kind::Sweep, dir, std::move(m), ""};
  if (m.value("kind", "") != "tokdyn-report" && m.contains("preset") && m["preset"].is_string() && m.contains("params"))
    return Entry{Kind::Run, dir, std::move(m), ""};
  return std::nullopt;
}

/// A sweep's definition (preset, axes, sets) is under "definition"; a run's fields are at the top.
json definition_of(const Entry& e) {
  return e.kind == Kind::Sweep && e.manifest.contains("definition") && e.manifest["definition"].is_object() ? e.manifest["definition"]
                                                                                                       : e.manifest;
}
std::string preset_of(const Entry& e) { return definition_of(e).value("preset", ""); }

bool is_temporary_name(const std::string& n) { return n.empty() || n[0] == '.' || n.find(".tmp-") != std::string::npos; }

void discover(const fs::path& root, const fs::path& dir, int depth, std::vector<Entry>& out) {
  if (out.size() >= kMaxEntries) return;
  if (auto e = entry_at(dir)) {
    e->name = dir == root ? root.filename().string() : dir.lexically_relative(root).generic_string();
    out.push_back(std::move(*e));
    return;
  }
  if (depth == 0) return;
  std::error_code ec;
  std::vector<fs::path> subs;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const auto st = it->symlink_status(ec);
    if (!ec && fs::is_directory(st) && !is_temporary_name(it->path().filename().string())) subs.push_back(it->path());
  }
  std::sort(subs.begin(), subs.end());
  for (const fs::path& s : subs) discover(root, s, depth - 1, out);
}

/// A file name safe for a page: letters, digits, '-', '_', '.'; others become '_'.
std::string slug(const std::string& s) {
  std::string o;
  for (unsigned char c : s) o += (std::isalnum(c) || c == '-' || c == '_' || c == '.') ? static_cast<char>(c) : '_';
  return o.empty() ? std::string("run") : o;
}

std::string cell_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string o;
    for (std::size_t i = 0; i < v.size(); ++i) o += (i ? "," : "") + cell_text(v[i]);
    return o;
  }
  return v.dump();
}

std::size_t column_of(const std::vector<std::string>& head, const std::string& name) {
  const auto it = std::find(head.begin(), head.end(), name);
  return it == head.end() ? head.size() : static_cast<std::size_t>(it - head.begin());
}

// ---------------------------------------------------------------------------------------------
// Verdicts

struct Counts {
  long pass = 0, fail = 0, na = 0;
  long total() const { return pass + fail + na; }
};

std::string verdict_class(const std::string& pass) { return pass == "true" ? "pass" : pass == "false" ? "fail" : "na"; }

std::string check_row_class(const std::vector<std::string>& head, const std::vector<std::string>& row) {
  const std::size_t j = column_of(head, "pass");
  return j < row.size() ? verdict_class(row[j]) : "";
}

std::string status_row_class(const std::vector<std::string>& head, const std::vector<std::string>& row) {
  const std::size_t s = column_of(head, "status"), f = column_of(head, "checks_failed");
  if (s < row.size() && row[s] != "ok") return "fail";
  if (f < row.size() && !row[f].empty() && row[f] != "0") return "fail";
  return "";
}

std::string badges(const Counts& c) {
  if (c.total() == 0) return "<span class=\"na\">no checks</span>";
  return fmt::format("<span class=\"pass\">{} pass</span> <span class=\"fail\">{} fail</span> <span class=\"na\">{} n/a</span>",
                     c.pass, c.fail, c.na);
}

std::vector<std::vector<std::string>> read_rows(const fs::path& f) {
  try {
    return read_csv(f, f.filename().string());
  } catch (const std::exception&) {
    return {};
  }
}

Counts count_checks(const std::vector<std::vector<std::string>>& rows) {
  Counts c;
  if (rows.empty()) return c;
  const std::size_t j = column_of(rows[0], "pass");
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (j >= rows[i].size()) continue;
    (rows[i][j] == "true" ? c.pass : rows[i][j] == "false" ? c.fail : c.na)++;
  }
  return c;
}

/// The verdict table: every row, coloured, then the counts by reference kind.
std::string verdicts_section(const std::vector<std::vector<std::string>>& rows, const OutputDecl* decl) {
  if (rows.size() < 2) return "";
  std::string o = "<h2 id=\"verdicts\">Verdicts</h2>\n";
  const Counts c = count_checks(rows);
  o += fmt::format("<p class=\"badges\">{} checks: {}</p>\n", c.total(), badges(c));
  // By reference kind: what each check is compared against.
  const std::size_t k = column_of(rows[0], "reference_kind"), p = column_of(rows[0], "pass");
  std::map<std::string, Counts> by;
  for (std::size_t i = 1; i < rows.size(); ++i)
    if (k < rows[i].size() && p < rows[i].size()) {
      Counts& x = by[rows[i][k]];
      (rows[i][p] == "true" ? x.pass : rows[i][p] == "false" ? x.fail : x.na)++;
    }
  o += "<table class=\"kinds\"><thead><tr><th>reference kind</th><th>pass</th><th>fail</th><th>n/a</th></tr></thead><tbody>\n";
  for (const auto& [kind, x] : by) o += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", esc(kind), x.pass, x.fail, x.na);
  o += "</tbody></table>\n";
  html::TableStyle st;
  st.row_class = check_row_class;
  st.table_class = "checks";
  if (decl)
    if (const TableDecl* t = decl->table("checks.csv"))
      for (const std::string& col : rows[0]) st.tips.push_back(t->column(col) ? t->column(col)->meaning : "");
  o += html::csv_table(rows, rows.size(), st);
  return o;
}

// ---------------------------------------------------------------------------------------------
// A run's page

std::string files_list(const fs::path& page_dir, const fs::path& dir, const json& files) {
  std::string o = "<h2 id=\"files\">Files</h2>\n<ul>\n";
  std::vector<std::string> names = {"manifest.json"};
  for (const json& f : files)
    if (f.is_string()) names.push_back(f.get<std::string>());
  for (const std::string& n : names) {
    std::error_code ec;
    const auto size = fs::file_size(dir / n, ec);
    o += fmt::format("<li><a href=\"{}\">{}</a> <span class=\"note\">{}</span></li>\n", html::href(page_dir, dir / n), esc(n),
                     ec ? std::string("missing") : html::bytes_text(size));
  }
  return o + "</ul>\n";
}

std::string run_body(const Entry& e, const fs::path& page_dir, const std::string& heading) {
  const json& m = e.manifest;
  const std::string preset = m.value("preset", "");
  const Experiment* ex = find_experiment(preset);
  const OutputDecl* decl = ex ? &ex->outputs : nullptr;
  const json files = m.value("files", json::array());
  std::string o = fmt::format("<h1>{}</h1>\n", esc(heading));
  if (ex) o += fmt::format("<p class=\"desc\">{}</p>\n", esc(ex->description));
  o += fmt::format("<p class=\"meta\">folder <a href=\"{}\"><code>{}</code></a> &middot; started {} &middot; {:.1f} s on {} thread{} &middot; "
                   "tokdyn {} &middot; host {}</p>\n",
                   html::href(page_dir, e.dir), esc(e.dir.string()), esc(m.value("started_utc", "?")), m.value("wall_time_s", 0.0),
                   m.value("threads", 0), m.value("threads", 0) == 1 ? "" : "s", esc(m.value("version", "?")),
                   esc(m.value("hostname", "?")));
  const auto checks = read_rows(e.dir / "checks.csv");
  if (checks.size() >= 2) o += fmt::format("<p class=\"badges\"><a href=\"#verdicts\">verdicts</a>: {}</p>\n", badges(count_checks(checks)));
  if (m.contains("figure_error")) o += fmt::format("<p class=\"fail\">figures failed: {}</p>\n", esc(cell_text(m["figure_error"])));
  for (const json& w : m.value("warnings", json::array())) o += fmt::format("<p class=\"note\">note: {}</p>\n", esc(cell_text(w)));

  // Parameters: those given explicitly first (marked), then the defaults.
  o += "<h2 id=\"parameters\">Parameters</h2>\n<table class=\"params\"><thead><tr><th>parameter</th><th>value</th><th></th></tr></thead><tbody>\n";
  const json set = m.value("set", json::object());
  std::vector<std::string> keys;
  const json j_params = m.value("params", json::object());
  for (const auto& [k, v] : j_params.items()) keys.push_back(k);
  std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) { return set.contains(a) > set.contains(b); });
  for (const std::string& k : keys) {
    std::string tip;
    if (ex)
      for (const ParamSpec& s : ex->params)
        if (s.key == k) tip = s.help;
    o += fmt::format("<tr><td title=\"{}\">{}</td><td>{}</td><td>{}</td></tr>\n", esc(tip), esc(k), esc(cell_text(m["params"][k])),
                     set.contains(k) ? "set" : "<span class=\"note\">default</span>");
  }
  o += "</tbody></table>\n";

  o += verdicts_section(checks, decl);

  // Summaries beside the paper's values.
  const auto summary = read_rows(e.dir / "summary.csv");
  if (summary.size() >= 2) {
    o += "<h2 id=\"summaries\">Summaries</h2>\n";
    html::TableStyle st;
    st.tips = {"the summary's name", "tokdyn's value", "the paper's value, where it prints one"};
    std::vector<std::vector<std::string>> rows = {{"quantity", "value", "paper", "meaning"}};
    for (std::size_t i = 1; i < summary.size(); ++i) {
      std::vector<std::string> r = summary[i];
      r.resize(3);
      const SummaryDecl* s = decl ? decl->summary(r[0]) : nullptr;
      r.push_back(s ? s->meaning + (s->unit.empty() ? "" : " [" + s->unit + "]") : "");
      rows.push_back(std::move(r));
    }
    o += html::csv_table(rows, rows.size(), st);
  }

  // Figures, embedded.
  std::string figs;
  for (const json& f : files) {
    if (!f.is_string()) continue;
    const fs::path rel = f.get<std::string>();
    const std::string ext = rel.extension().string();
    if (ext != ".png" && ext != ".svg" && ext != ".pdf") continue;
    std::string caption;
    if (decl)
      for (const FigureDecl& d : decl->figures)
        if (d.file == rel.generic_string()) caption = d.description;
    const std::string link = html::href(page_dir, e.dir / rel);
    const std::string uri = ext == ".pdf" ? "" : html::image_data_uri(e.dir / rel, kMaxFigureBytes);
    figs += "<figure>";
    if (!uri.empty()) figs += fmt::format("<a href=\"{}\"><img src=\"{}\" alt=\"{}\"></a>", link, uri, esc(rel.generic_string()));
    figs += fmt::format("<figcaption><a href=\"{}\"><code>{}</code></a>{}{}</figcaption></figure>\n", link, esc(rel.generic_string()),
                        caption.empty() ? "" : ": ", esc(caption));
  }
  if (!figs.empty()) o += "<h2 id=\"figures\">Figures</h2>\n" + figs;

  // Tables: every CSV but the two above, first rows, column meanings as tooltips.
  std::string tables;
  for (const json& f : files) {
    if (!f.is_string()) continue;
    const std::string rel = f.get<std::string>();
    if (fs::path(rel).extension() != ".csv" || rel == "checks.csv" || rel == "summary.csv") continue;
    const auto rows = read_rows(e.dir / rel);
    const TableDecl* t = decl ? decl->table(rel) : nullptr;
    tables += fmt::format("<h3><a href=\"{}\"><code>{}</code></a></h3>\n", html::href(page_dir, e.dir / rel), esc(rel));
    if (t) tables += fmt::format("<p class=\"note\">one row: {}</p>\n", esc(t->description));
    html::TableStyle st;
    if (t && !rows.empty())
      for (const std::string& col : rows[0]) {
        const ColumnDecl* c = t->column(col);
        st.tips.push_back(c ? c->meaning + (c->unit.empty() ? "" : " [" + c->unit + "]") : "");
      }
    if (rel.find("checks") != std::string::npos) st.row_class = check_row_class;
    tables += html::csv_table(rows, kTableRows, st);
  }
  if (!tables.empty()) o += "<h2 id=\"tables\">Tables</h2>\n" + tables;

  // Provenance and notes.
  o += "<h2 id=\"provenance\">Provenance</h2>\n<table class=\"params\"><tbody>\n";
  if (m.contains("command")) o += fmt::format("<tr><td>command</td><td><code>{}</code></td></tr>\n", esc(cell_text(m["command"])));
  o += fmt::format("<tr><td>seed</td><td>{}</td></tr>\n", esc(cell_text(m.value("seed", json()))));
  if (m.contains("blas_core")) o += fmt::format("<tr><td>OpenBLAS kernels</td><td>{}</td></tr>\n", esc(cell_text(m["blas_core"])));
  if (m.contains("config_file"))
    o += fmt::format("<tr><td>config file</td><td><code>{}</code> sha256 {}</td></tr>\n", esc(m["config_file"].value("path", "")),
                     esc(cell_text(m["config_file"].value("sha256", json()))));
  for (const json& in : m.value("input_files", json::array()))
    o += fmt::format("<tr><td>input ({})</td><td><code>{}</code> {} &middot; sha256 {}</td></tr>\n", esc(in.value("param", "")),
                     esc(in.value("path", "")), html::bytes_text(in.value("size", std::uintmax_t{0})), esc(cell_text(in.value("sha256", json()))));
  const json j_versions = m.value("versions", json::object());
  for (const auto& [k, v] : j_versions.items())
    o += fmt::format("<tr><td>version: {}</td><td>{}</td></tr>\n", esc(k), esc(v.is_object() ? v.dump() : cell_text(v)));
  o += "</tbody></table>\n";
  if (m.contains("notes")) o += fmt::format("<details><summary>notes (manifest.json)</summary><pre>{}</pre></details>\n", esc(m["notes"].dump(2)));
  o += files_list(page_dir, e.dir, files);
  return o;
}

// ---------------------------------------------------------------------------------------------
// A sweep's page and its points

/// Where pages go: written under the temporary folder, linked as from the final one.
struct Written {
  fs::path final_dir, tmp;
  std::vector<std::string> files;  ///< relative to the report folder
  long pages = 0;
};

/// Writes the page whose final path is `page` (under w.final_dir) into the temporary folder.
void write_page(Written& w, const fs::path& page, const std::string& text) {
  const fs::path rel = page.lexically_relative(w.final_dir);
  std::error_code ec;
  fs::create_directories((w.tmp / rel).parent_path(), ec);
  write_text_file(w.tmp / rel, text);
  w.files.push_back(rel.generic_string());
  ++w.pages;
}

void write_sweep(Written& w, const Entry& e, const fs::path& page, const std::string& back, const std::string& back_text) {
  const json& m = e.manifest;
  const json def = definition_of(e);
  const fs::path page_dir = page.parent_path();
  const std::string preset = preset_of(e);
  const Experiment* ex = find_experiment(preset);
  std::string o = fmt::format("<h1>sweep of {}</h1>\n", esc(preset));
  if (ex) o += fmt::format("<p class=\"desc\">{}</p>\n", esc(ex->description));
  o += fmt::format("<p class=\"meta\">folder <a href=\"{}\"><code>{}</code></a></p>\n", html::href(page_dir, e.dir), esc(e.dir.string()));
  // The definition: axes and fixed parameters.
  o += "<h2>Definition</h2>\n<table class=\"params\"><tbody>\n";
  for (const json& a : def.value("axes", json::array())) {
    const std::string kind = a.value("kind", "");
    const std::string t = kind == "grid" ? a.value("key", "") + " = " + a.value("spec", "") : kind == "zip" ? "zip " + a.value("specs", json()).dump()
                                                                                                         : "points from a file";
    o += fmt::format("<tr><td>axis</td><td><code>{}</code></td></tr>\n", esc(t));
  }
  const json j_sets = def.value("sets", json::object());
  for (const auto& [k, v] : j_sets.items())
    o += fmt::format("<tr><td>--set</td><td><code>{}={}</code></td></tr>\n", esc(k), esc(cell_text(v)));
  for (const char* k : {"wall_time_s", "started_utc", "version"})
    if (m.contains(k)) o += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", k, esc(cell_text(m[k])));
  o += "</tbody></table>\n";

  std::error_code ec;
  std::string figs;
  for (auto it = fs::directory_iterator(e.dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind("sweep_", 0) != 0 || (it->path().extension() != ".png" && it->path().extension() != ".svg")) continue;
    const std::string uri = html::image_data_uri(it->path(), kMaxFigureBytes);
    if (!uri.empty())
      figs += fmt::format("<figure><img src=\"{}\" alt=\"{}\"><figcaption><code>{}</code></figcaption></figure>\n", uri, esc(n), esc(n));
  }
  if (!figs.empty()) o += "<h2>Figures</h2>\n" + figs;

  // sweep.csv with a page per complete point.
  const auto rows = read_rows(e.dir / "sweep.csv");
  html::TableStyle st;
  st.row_class = status_row_class;
  if (!rows.empty()) {
    const std::size_t h = column_of(rows[0], "hash");
    Counts c;
    for (std::size_t i = 1; i < rows.size(); ++i) {
      std::string link;
      const std::string hash = h < rows[i].size() ? rows[i][h] : "";
      const fs::path pd = e.dir / "points" / hash;
      if (!hash.empty() && fs::is_regular_file(pd / "manifest.json", ec)) {
        if (auto pe = entry_at(pd); pe && pe->kind == Kind::Run) {
          const fs::path pp = page_dir / "points" / (slug(hash) + ".html");
          const std::string title = fmt::format("{} point {}", preset, rows[i][0]);
          write_page(w, pp, html::page(title, "../index.html", "the sweep", run_body(*pe, pp.parent_path(), title)));
          link = html::href(page_dir, pp);
          const Counts pc = count_checks(read_rows(pd / "checks.csv"));
          c.pass += pc.pass, c.fail += pc.fail, c.na += pc.na;
        }
      }
      st.row_links.push_back(link);
    }
    o += fmt::format("<h2>Points</h2>\n<p class=\"badges\">{} points; checks over all points: {}</p>\n", rows.size() - 1, badges(c));
    o += fmt::format("<p class=\"note\">the whole table: <a href=\"{}\"><code>sweep.csv</code></a>; a point's page from its number.</p>\n",
                     html::href(page_dir, e.dir / "sweep.csv"));
    o += html::csv_table(rows, 5000, st);
  }
  write_page(w, page, html::page("sweep of " + preset, back, back_text, o));
}

// ---------------------------------------------------------------------------------------------
// A reproduction (`tokdyn reproduce`): every paper number and verdict, then the runs

std::string verdict_row_class(const std::vector<std::string>& head, const std::vector<std::string>& row) {
  const std::size_t j = column_of(head, "verdict");
  if (j >= row.size()) return "";
  return row[j] == "pass" ? "pass" : row[j] == "fail" ? "fail" : row[j] == "n/a" ? "na" : "";
}

std::string reproduction_body(const fs::path& root, const fs::path& page_dir, const json& m, const std::vector<Entry>& entries, const std::vector<std::string>& links) {
  const std::string paper = m.value("paper", "");
  std::string o = fmt::format("<h1>Reproduction: {}{}</h1>\n", esc(paper), m.value("quick", false) ? " (--quick: reduced sizes)" : "");
  const json titles = m.value("papers", json::object());
  for (const auto& [k, v] : titles.items()) o += fmt::format("<p class=\"desc\"><b>{}</b>: {}</p>\n", esc(k), esc(cell_text(v)));
  o += fmt::format("<p class=\"meta\">tokdyn {}, started {} on {}, {} thread(s), {:.1f} s</p>\n", esc(m.value("version", "")),
                   esc(m.value("started_utc", "")), esc(m.value("hostname", "")), m.value("threads", 0), m.value("wall_time_s", 0.0));
  o += "<h2>Verdicts by reference kind</h2>\n<table class=\"kinds\"><thead><tr><th>reference kind</th><th>pass</th><th>fail</th>"
       "<th>n/a</th><th>paper numbers side by side</th></tr></thead><tbody>\n";
  const json kinds = m.value("checks_by_kind", json::object());
  for (const auto& [k, c] : kinds.items())
    o += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", esc(k), c.value("passed", 0), c.value("failed", 0),
                     c.value("not_applicable", 0), c.value("side_by_side", 0));
  o += "</tbody></table>\n";
  // The presets, each linked to its run's page.
  auto presets = read_rows(root / "presets.csv");
  if (!presets.empty()) {
    html::TableStyle st;
    const std::size_t pc = column_of(presets[0], "preset");
    for (std::size_t i = 1; i < presets.size(); ++i) {
      std::string link;
      for (std::size_t k = 0; k < entries.size(); ++k)
        if (pc < presets[i].size() && entries[k].name == presets[i][pc]) link = links[k];
      st.row_links.push_back(link);
    }
    // The preset column first, so that its cell carries the link.
    for (auto& r : presets)
      if (pc < r.size()) std::rotate(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(pc), r.begin() + static_cast<std::ptrdiff_t>(pc) + 1);
    o += "<h2>Presets</h2>\n" + html::csv_table(presets, presets.size(), st);
  }
  auto rows = read_rows(root / "reproduction.csv");
  if (!rows.empty()) {
    // Shown without the paper (in the heading) and the command (in the presets table).
    std::vector<std::size_t> keep;
    for (std::size_t j = 0; j < rows[0].size(); ++j)
      if (rows[0][j] != "paper" && rows[0][j] != "command") keep.push_back(j);
    std::vector<std::vector<std::string>> shown;
    for (const auto& r : rows) {
      std::vector<std::string> s;
      for (std::size_t j : keep) s.push_back(j < r.size() ? r[j] : "");
      shown.push_back(std::move(s));
    }
    html::TableStyle st;
    st.row_class = verdict_row_class;
    st.table_class = "checks";
    o += fmt::format("<h2>Every paper number and verdict</h2>\n<p class=\"note\">{} rows; the whole table: <a href=\"{}\"><code>reproduction.csv</code></a></p>\n",
                     rows.size() - 1, html::href(page_dir, root / "reproduction.csv"));
    o += html::csv_table(shown, shown.size(), st);
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// The index of several runs

std::string key_parameters(const json& m) {
  std::string o;
  const json j_set = m.value("set", json::object());
  for (const auto& [k, v] : j_set.items()) o += (o.empty() ? "" : ", ") + k + "=" + cell_text(v);
  return o;
}

std::string index_body(const std::vector<Entry>& entries, const std::vector<std::string>& links, const std::vector<std::string>& given) {
  std::string o = fmt::format("<h1>tokdyn results</h1>\n<p class=\"meta\">{} result{} under {}</p>\n", entries.size(),
                              entries.size() == 1 ? "" : "s", esc(fmt::format("{}", fmt::join(given, ", "))));
  Counts all;
  std::string rows;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    const json& m = e.manifest;
    Counts c;
    std::string wall = m.contains("wall_time_s") ? fmt::format("{:.1f}", m.value("wall_time_s", 0.0)) : "";
    std::string params = key_parameters(m);
    if (e.kind == Kind::Run) {
      c = count_checks(read_rows(e.dir / "checks.csv"));
    } else {
      const auto sr = read_rows(e.dir / "sweep.csv");
      if (!sr.empty()) {
        const std::size_t p = column_of(sr[0], "checks_passed"), f = column_of(sr[0], "checks_failed"), n = column_of(sr[0], "checks_na");
        for (std::size_t r = 1; r < sr.size(); ++r) {
          auto num = [&](std::size_t j) { return j < sr[r].size() && !sr[r][j].empty() ? std::atol(sr[r][j].c_str()) : 0L; };
          c.pass += num(p), c.fail += num(f), c.na += num(n);
        }
        params = fmt::format("{} points; ", sr.size() - 1) + params;
      }
      for (const json& a : definition_of(e).value("axes", json::array()))
        if (a.value("kind", "") == "grid") params += (params.empty() ? "" : ", ") + a.value("key", "") + "=" + a.value("spec", "");
    }
    all.pass += c.pass, all.fail += c.fail, all.na += c.na;
    rows += fmt::format("<tr class=\"{}\"><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>\n",
                        c.fail > 0 ? "fail" : "", links[i], esc(e.name), e.kind == Kind::Run ? "run" : "sweep",
                        esc(preset_of(e)), esc(m.value("started_utc", "")), esc(params), badges(c), wall);
  }
  o += fmt::format("<p class=\"badges\">checks over every result: {}</p>\n", badges(all));
  o += "<table class=\"index\"><thead><tr><th>result</th><th>kind</th><th>preset</th><th>started (UTC)</th><th>parameters set</th>"
       "<th>verdicts</th><th>wall time (s)</th></tr></thead><tbody>\n" +
       rows + "</tbody></table>\n";
  return o;
}

}  // namespace

int run(const Options& o) {
  if (o.dirs.empty()) throw InputError("report: expected at least one results folder (tokdyn report DIR... [--out REPORT])");
  std::vector<Entry> entries;
  std::vector<fs::path> roots;
  for (const std::string& d : o.dirs) {
    std::error_code ec;
    const fs::path p = fs::path(d).lexically_normal();
    if (!fs::exists(p, ec)) throw InputError(fmt::format("report: '{}' does not exist; expected a results folder", d));
    if (!fs::is_directory(p, ec)) throw InputError(fmt::format("report: '{}' is not a folder; expected a results folder", d));
    const fs::path root = p.has_filename() ? p : p.parent_path();
    const std::size_t before = entries.size();
    discover(root, root, kMaxDepth, entries);
    if (entries.size() == before)
      throw InputError(fmt::format("report: '{}' holds no tokdyn result (no run's or sweep's manifest.json in it or {} levels below)", d,
                                   kMaxDepth));
    roots.push_back(root);
  }
  if (o.out_given && o.out.empty()) throw InputError("--out: an empty path; expected a folder for the report");
  if (!o.out_given && o.dirs.size() > 1) throw InputError("report: several folders need --out REPORT (the report's folder)");
  fs::path out = o.out_given ? fs::path(o.out) : fs::path(roots[0].string() + "-report");
  // A previous report is replaced; anything else in the way is refused: a run's or a sweep's results
  // here, and (OutputFolder) any folder tokdyn did not write.
  if (std::error_code e; fs::exists(out / "manifest.json", e) && read_manifest(out).value("kind", "") != "tokdyn-report")
    throw InputError(fmt::format("--out '{}': holds tokdyn results, not a previous report; a report is written to a folder of its "
                                 "own (choose another --out)", out.string()));
  OutputFolder folder(out, /*overwrite=*/true, "--out");
  const fs::path tmp = folder.tmp();
  std::error_code ec;
  fs::remove(tmp / ".tokdyn-temporary", ec);
  Written w{folder.target(), tmp, {}, 0};
  const fs::path& final_dir = w.final_dir;
  const json root_manifest = roots.size() == 1 ? read_manifest(roots[0]) : json();
  const bool reproduction = root_manifest.is_object() && root_manifest.value("kind", "") == "tokdyn-reproduction";
  if (entries.size() == 1 && entries[0].kind == Kind::Run && !reproduction) {
    const std::string title = entries[0].manifest.value("preset", "run");
    write_page(w, final_dir / "index.html", html::page(title, "", "", run_body(entries[0], final_dir, title)));
  } else if (entries.size() == 1 && !reproduction) {
    write_sweep(w, entries[0], final_dir / "index.html", "", "");
  } else {
    std::vector<std::string> links;
    std::set<std::string> used;
    for (const Entry& e : entries) {
      std::string s = slug(e.name);
      for (int k = 2; !used.insert(s).second; ++k) s = slug(e.name) + "-" + std::to_string(k);
      if (e.kind == Kind::Run) {
        const fs::path page = final_dir / "runs" / (s + ".html");
        const std::string title = e.name + " (" + preset_of(e) + ")";
        write_page(w, page, html::page(title, "../index.html", "every result", run_body(e, page.parent_path(), title)));
        links.push_back(html::href(final_dir, page));
      } else {
        const fs::path page = final_dir / "sweeps" / s / "index.html";
        write_sweep(w, e, page, "../../index.html", "every result");
        links.push_back(html::href(final_dir, page));
      }
    }
    std::vector<std::string> given;
    for (const std::string& d : o.dirs) {
      // A folder being written (NAME.tmp-PID, e.g. by tokdyn reproduce) is shown by its final name.
      const auto t = d.find(".tmp-");
      given.push_back(t == std::string::npos ? d : d.substr(0, t));
    }
    std::string body;
    if (reproduction)
      body = reproduction_body(roots[0], final_dir, root_manifest, entries, links) + "<h2>Runs</h2>\n";
    std::string index = index_body(entries, links, given);
    if (reproduction) index = index.substr(index.find("</h1>\n") + 6);  // under the reproduction's heading
    body += index;
    const std::string title = o.title.empty() ? std::string("tokdyn results") : o.title;
    write_page(w, final_dir / "index.html", html::page(title, "", "", body));
  }
  // The report's own manifest: what it was made from (and so that a rerun may replace it).
  json m = {{"kind", "tokdyn-report"}, {"preset", "report"}, {"version", TOKDYN_VERSION}, {"created_utc", utc_now_iso8601()}};
  json sources = json::array();
  for (const Entry& e : entries) sources.push_back(fs::absolute(e.dir).lexically_normal().string());
  m["sources"] = sources;
  std::sort(w.files.begin(), w.files.end());
  m["files"] = w.files;
  write_text_file(tmp / "manifest.json", m.dump(2) + "\n");
  folder.commit();
  if (!o.quiet)
    fmt::print("wrote {} ({} page{} for {} result{})\n", message_line((out / "index.html").string()), w.pages, w.pages == 1 ? "" : "s",
             entries.size(), entries.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace tokdyn::report_cli
