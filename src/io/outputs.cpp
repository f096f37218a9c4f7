// Output declarations (outputs.hpp): builders, lookups, and the text, Markdown and JSON renderings
// of `tokdyn show` and docs/outputs.md.
#include "tokdyn/io/outputs.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace tokdyn {

ColumnDecl real(std::string name, std::string meaning, std::string unit) {
  ColumnDecl c;
  c.name = std::move(name);
  c.meaning = std::move(meaning);
  c.unit = std::move(unit);
  return c;
}

ColumnDecl integer(std::string name, std::string meaning) {
  ColumnDecl c = real(std::move(name), std::move(meaning));
  c.kind = ColumnKind::Integer;
  return c;
}

ColumnDecl index(std::string name, std::string meaning, int base) {
  ColumnDecl c = integer(std::move(name), std::move(meaning));
  c.index_base = base;
  return c;
}

ColumnDecl text(std::string name, std::string meaning) {
  ColumnDecl c = real(std::move(name), std::move(meaning));
  c.kind = ColumnKind::Text;
  return c;
}

ColumnDecl category(std::string name, std::string meaning, std::vector<std::pair<std::string, std::string>> values) {
  ColumnDecl c = real(std::move(name), std::move(meaning));
  c.kind = ColumnKind::Category;
  c.values = std::move(values);
  return c;
}

ColumnDecl flag(std::string name, std::string meaning_of_true) {
  std::string m = meaning_of_true;
  return category(std::move(name), std::move(m), {{"true", "yes"}, {"false", "no"}});
}

std::vector<std::string> TableDecl::column_names() const {
  std::vector<std::string> n;
  n.reserve(columns.size());
  for (const ColumnDecl& c : columns) n.push_back(c.name);
  return n;
}

const ColumnDecl* TableDecl::column(const std::string& name) const {
  for (const ColumnDecl& c : columns)
    if (c.name == name) return &c;
  return nullptr;
}

const TableDecl* OutputDecl::table(const std::string& file) const {
  for (const TableDecl& t : tables)
    if (t.file == file) return &t;
  return nullptr;
}

const SummaryDecl* OutputDecl::summary(const std::string& name) const {
  for (const SummaryDecl& s : summaries)
    if (s.name == name) return &s;
  return nullptr;
}

TableDecl summary_table() {
  return {"summary.csv",
          "the scalar summaries of the run (listed below), one row each: what a sweep tabulates and a report shows",
          {text("quantity", "the summary's name (see the summaries of the preset)"),
           real("value", "its value in this run").may_be_empty("not defined for this run (e.g. no window admissible)"),
           text("paper", "the paper's value where the paper prints one").may_be_empty("the paper prints none")}};
}

bool path_matches(const std::string& pattern, const std::string& path) {
  // <name> matches one or more characters other than '/'; everything else literally.
  std::size_t i = 0, j = 0;
  if (pattern.find('<') == std::string::npos) return pattern == path;
  const std::size_t lt = pattern.find('<');
  const std::size_t gt = pattern.find('>', lt);
  if (gt == std::string::npos) return pattern == path;
  const std::string head = pattern.substr(0, lt), rest = pattern.substr(gt + 1);
  if (path.compare(0, head.size(), head) != 0) return false;
  i = head.size();
  for (j = i + 1; j <= path.size(); ++j) {
    if (path[j - 1] == '/') return false;
    if (path_matches(rest, path.substr(j))) return true;
  }
  return false;
}

namespace {

std::string kind_text(const ColumnDecl& c) {
  switch (c.kind) {
    case ColumnKind::Real: return "real";
    case ColumnKind::Integer: return c.index_base >= 0 ? fmt::format("index from {}", c.index_base) : "integer";
    case ColumnKind::Text: return "text";
    case ColumnKind::Category: return "category";
  }
  return "";
}

std::string values_text(const ColumnDecl& c, const char* sep) {
  std::string s;
  for (const auto& [v, m] : c.values) s += fmt::format("{}{}: {}", s.empty() ? "" : sep, v, m);
  return s;
}

/// The column's meaning with its categorical values and empty / non-finite cases, one paragraph.
std::string column_text(const ColumnDecl& c, const char* sep) {
  std::string s = c.meaning;
  if (c.kind == ColumnKind::Category) s += fmt::format(" ({})", values_text(c, sep));
  if (!c.empty.empty()) s += fmt::format("{}empty: {}", sep, c.empty);
  if (!c.nonfinite.empty()) s += fmt::format("{}non-finite: {}", sep, c.nonfinite);
  return s;
}

std::string md_cell(std::string s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|') out += "\\|";
    else if (ch == '\n') out += ' ';
    else out += ch;
  }
  return out;
}

}  // namespace

nlohmann::json outputs_json(const OutputDecl& o) {
  using nlohmann::json;
  json tables = json::array();
  for (const TableDecl& t : o.tables) {
    json cols = json::array();
    for (const ColumnDecl& c : t.columns) {
      json jc = {{"name", c.name}, {"meaning", c.meaning}, {"unit", c.unit}, {"kind", kind_text(c)}};
      if (c.index_base >= 0) jc["index_base"] = c.index_base;
      if (c.kind == ColumnKind::Category) {
        json v = json::object();
        for (const auto& [k, m] : c.values) v[k] = m;
        jc["values"] = v;
      }
      if (!c.empty.empty()) jc["empty"] = c.empty;
      if (!c.nonfinite.empty()) jc["nonfinite"] = c.nonfinite;
      cols.push_back(jc);
    }
    tables.push_back({{"file", t.file}, {"description", t.description}, {"when", t.when}, {"columns", cols}});
  }
  json arrays = json::array();
  for (const ArrayDecl& a : o.arrays) arrays.push_back({{"pattern", a.pattern}, {"description", a.description}, {"when", a.when}});
  json sums = json::array();
  for (const SummaryDecl& s : o.summaries)
    sums.push_back({{"name", s.name}, {"meaning", s.meaning}, {"unit", s.unit}, {"when", s.when}});
  json figs = json::array();
  for (const FigureDecl& f : o.figures) figs.push_back({{"file", f.file}, {"description", f.description}, {"when", f.when}});
  json j = {{"tables", tables}, {"arrays", arrays}, {"summaries", sums}, {"figures", figs}};
  if (!o.subruns.empty()) j["subruns"] = o.subruns;
  return j;
}

std::string outputs_markdown(const OutputDecl& o) {
  std::string s;
  if (!o.subruns.empty()) s += fmt::format("Sub-folders: {}\n\n", o.subruns);
  for (const TableDecl& t : o.tables) {
    s += fmt::format("**`{}`**{}: {}\n\n", t.file, t.when.empty() ? "" : fmt::format(" (when {})", t.when), md_cell(t.description));
    s += "| column | kind | unit | meaning |\n|---|---|---|---|\n";
    for (const ColumnDecl& c : t.columns)
      s += fmt::format("| `{}` | {} | {} | {} |\n", c.name, kind_text(c), md_cell(c.unit), md_cell(column_text(c, "; ")));
    s += "\n";
  }
  if (!o.arrays.empty()) {
    s += "Arrays:\n\n";
    for (const ArrayDecl& a : o.arrays)
      s += fmt::format("- `{}`{}: {}\n", a.pattern, a.when.empty() ? "" : fmt::format(" (when {})", a.when), md_cell(a.description));
    s += "\n";
  }
  if (!o.summaries.empty()) {
    s += "Scalar summaries (`summary.csv`, `manifest.json` \"summaries\"):\n\n| quantity | unit | meaning |\n|---|---|---|\n";
    for (const SummaryDecl& m : o.summaries)
      s += fmt::format("| `{}` | {} | {}{} |\n", m.name, md_cell(m.unit), md_cell(m.meaning),
                       m.when.empty() ? "" : fmt::format(" (when {})", md_cell(m.when)));
    s += "\n";
  }
  if (!o.figures.empty()) {
    s += "Figures:\n\n";
    for (const FigureDecl& f : o.figures)
      s += fmt::format("- `{}`{}: {}\n", f.file, f.when.empty() ? "" : fmt::format(" (when {})", f.when), md_cell(f.description));
    s += "\n";
  }
  return s;
}

std::string outputs_text(const OutputDecl& o) {
  std::string s;
  if (!o.subruns.empty()) s += fmt::format("  sub-folders: {}\n", o.subruns);
  for (const TableDecl& t : o.tables) {
    s += fmt::format("  {}{}\n      {}\n", t.file, t.when.empty() ? "" : fmt::format("  (when {})", t.when), t.description);
    std::size_t w = 0;
    for (const ColumnDecl& c : t.columns) w = std::max(w, c.name.size());
    for (const ColumnDecl& c : t.columns) {
      std::string unit = c.unit.empty() ? "" : fmt::format(" [{}]", c.unit);
      s += fmt::format("      {:<{}}  {}{}: {}\n", c.name, w, kind_text(c), unit, column_text(c, "; "));
    }
  }
  for (const ArrayDecl& a : o.arrays)
    s += fmt::format("  {}{}\n      {}\n", a.pattern, a.when.empty() ? "" : fmt::format("  (when {})", a.when), a.description);
  if (!o.summaries.empty()) {
    s += "  summaries (summary.csv):\n";
    std::size_t w = 0;
    for (const SummaryDecl& m : o.summaries) w = std::max(w, m.name.size());
    for (const SummaryDecl& m : o.summaries)
      s += fmt::format("      {:<{}}  {}{}{}\n", m.name, w, m.meaning, m.unit.empty() ? "" : fmt::format(" [{}]", m.unit),
                       m.when.empty() ? "" : fmt::format(" (when {})", m.when));
  }
  if (!o.figures.empty()) {
    s += "  figures:\n";
    for (const FigureDecl& f : o.figures)
      s += fmt::format("      {}{}: {}\n", f.file, f.when.empty() ? "" : fmt::format(" (when {})", f.when), f.description);
  }
  return s;
}

}  // namespace tokdyn
