#pragma once
// Outputs that describe themselves: what a preset writes, declared once next to the preset. A
// declaration names each table (file, columns with meaning, unit, index base, the meaning of each
// categorical value, when it may be empty or non-finite), each array file, each scalar summary and
// each figure. The CSV writer takes a table's columns from its declaration and checks every cell
// against it (io/csv.hpp `declared_table`); run_experiment checks the finished folder against the
// whole declaration (every file declared, every header as declared, every summary written);
// `tokdyn show PRESET` prints it and docs/outputs.md is generated from it.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tokdyn {

/// What a column holds: a real number, an integer (a count or an index), free text, or one of a
/// declared set of values (a category; true/false flags are categories too).
enum class ColumnKind { Real, Integer, Text, Category };

struct ColumnDecl {
  std::string name;
  std::string meaning;
  std::string unit;                 ///< e.g. "1/layer", "rad"; empty: dimensionless or not a quantity
  ColumnKind kind = ColumnKind::Real;
  int index_base = -1;              ///< an index counted from 0 or 1; -1: not an index
  std::vector<std::pair<std::string, std::string>> values;  ///< Category: value -> meaning
  std::string empty;                ///< non-empty: the column may hold an empty cell, meaning this
  std::string nonfinite;            ///< non-empty: the column may hold inf / -inf / nan, meaning this

  ColumnDecl&& unit_of(std::string u) && { unit = std::move(u); return std::move(*this); }
  /// The column may be empty; `why` says what an empty cell means.
  ColumnDecl&& may_be_empty(std::string why) && { empty = std::move(why); return std::move(*this); }
  /// The column may hold a non-finite number; `why` says when and what it means.
  ColumnDecl&& may_be_nonfinite(std::string why) && { nonfinite = std::move(why); return std::move(*this); }
};

/// A real number with its meaning and unit.
ColumnDecl real(std::string name, std::string meaning, std::string unit = "");
/// An integer quantity (a count, a size).
ColumnDecl integer(std::string name, std::string meaning);
/// An index counted from `base` (0 or 1), e.g. index("layer", "layer (0: the initial tokens)", 0).
ColumnDecl index(std::string name, std::string meaning, int base);
/// Free text (an id, a statement, a formula).
ColumnDecl text(std::string name, std::string meaning);
/// One of the listed values, each with its meaning.
ColumnDecl category(std::string name, std::string meaning, std::vector<std::pair<std::string, std::string>> values);
/// true or false, with what true means.
ColumnDecl flag(std::string name, std::string meaning_of_true);

struct TableDecl {
  TableDecl(std::string f, std::string d, std::vector<ColumnDecl> c, std::string w = "")
      : file(std::move(f)), description(std::move(d)), columns(std::move(c)), when(std::move(w)) {}
  std::string file;                 ///< path in the results folder, e.g. "lyapunov.csv"
  std::string description;          ///< one row is ...
  std::vector<ColumnDecl> columns;
  std::string when;                 ///< empty: always written; else when it is (e.g. "bundles != none")

  std::vector<std::string> column_names() const;
  const ColumnDecl* column(const std::string& name) const;
  TableDecl&& only_when(std::string w) && { when = std::move(w); return std::move(*this); }
};

/// Array files (.npy) matching a pattern: `<name>` stands for one path component (or part of one),
/// e.g. "taps/<variant>/layer_<K>.npy".
struct ArrayDecl {
  ArrayDecl(std::string p, std::string d, std::string w = "") : pattern(std::move(p)), description(std::move(d)), when(std::move(w)) {}
  std::string pattern;
  std::string description;          ///< dtype, shape with named axes, what it holds
  std::string when;                 ///< when it is written
};

/// A scalar summary: one row of summary.csv (quantity, value, paper) and one entry of
/// manifest.json's "summaries". Summaries are what a sweep tabulates and a report shows.
struct SummaryDecl {
  SummaryDecl(std::string n, std::string m, std::string u = "", std::string w = "")
      : name(std::move(n)), meaning(std::move(m)), unit(std::move(u)), when(std::move(w)) {}
  std::string name;
  std::string meaning;
  std::string unit;
  std::string when;                 ///< empty: always written
};

/// A figure file python/tokdyn_plot draws from the results.
struct FigureDecl {
  FigureDecl(std::string f, std::string d, std::string w = "") : file(std::move(f)), description(std::move(d)), when(std::move(w)) {}
  std::string file;
  std::string description;
  std::string when;
};

struct OutputDecl {
  std::vector<TableDecl> tables;
  std::vector<ArrayDecl> arrays;
  std::vector<SummaryDecl> summaries;
  std::vector<FigureDecl> figures;
  /// Non-empty: the preset runs other presets into sub-folders named after them (coupling-all);
  /// each sub-folder is checked against that preset's own declaration. The text says which.
  std::string subruns;

  const TableDecl* table(const std::string& file) const;
  const SummaryDecl* summary(const std::string& name) const;
};

/// The table every preset writes its scalar summaries to (summary.csv: quantity, value, paper).
TableDecl summary_table();

/// True when `path` (generic form, relative to the results folder) matches `pattern`, where each
/// `<name>` matches one or more characters other than '/'.
bool path_matches(const std::string& pattern, const std::string& path);

/// The declaration as JSON (`tokdyn show PRESET --json`).
nlohmann::json outputs_json(const OutputDecl& o);
/// The declaration as Markdown: tables with their columns, arrays, summaries, figures.
std::string outputs_markdown(const OutputDecl& o);
/// The declaration as plain text for a terminal (`tokdyn show PRESET`).
std::string outputs_text(const OutputDecl& o);

}  // namespace tokdyn
