#pragma once
// The verdict table every checking preset writes (checks.csv: one row per numerical check of a
// statement of a paper). Columns:
//   check           id, e.g. "R17 residual"
//   statement       the paper's claim (with its source: theorem, lemma, equation)
//   quantity        what was measured
//   value           the number (empty when not computable: pass = n/a)
//   expected        the criterion with its tolerance, in words
//   reference_kind  what the value is compared against (issue 17), one of
//                     paper        a number printed in the paper
//                     closed_form  a formula evaluated independently of the code under test
//                     independent  a separate implementation in the repository (named)
//                     consistency  two code paths of tokdyn that share most of their code
//                     bound        an inequality of the paper (the value must lie below / above it)
//                     qualitative  a sign, an ordering or a trend the paper states
//   reference       the reference itself, named (e.g. "-A^{-1} h", "green_explicit (kernel sum)")
//   pass            true, false or n/a (last, as before the reference columns were added); n/a with a
//                   value is a three-way decision at a boundary that came out undecided (CheckTable::undecided)
// A quantity without a criterion is not a check: it goes to the preset's own CSV or the manifest.
// `coupling-all` joins the tables into summary.csv with the same columns and counts the rows by kind.
#include <array>
#include <stdexcept>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/io/csv.hpp"

namespace tokdyn {

/// What a check's value is compared against (see the table at the top of this file).
enum class RefKind { Paper, ClosedForm, Independent, Consistency, Bound, Qualitative };
inline constexpr std::array<const char*, 6> kRefKindNames = {"paper", "closed_form", "independent", "consistency", "bound", "qualitative"};
inline const char* ref_kind_name(RefKind k) { return kRefKindNames[static_cast<std::size_t>(k)]; }
/// Kinds whose reference does not share the code that computed the value.
inline bool ref_is_independent(RefKind k) { return k == RefKind::Paper || k == RefKind::ClosedForm || k == RefKind::Independent; }

/// A check's reference: its kind and the reference named.
struct Ref {
  RefKind kind;
  std::string what;
};
inline Ref paper(std::string what) { return {RefKind::Paper, std::move(what)}; }
inline Ref closed_form(std::string what) { return {RefKind::ClosedForm, std::move(what)}; }
inline Ref independent(std::string what) { return {RefKind::Independent, std::move(what)}; }
inline Ref consistency(std::string what) { return {RefKind::Consistency, std::move(what)}; }
inline Ref bound(std::string what) { return {RefKind::Bound, std::move(what)}; }
inline Ref qualitative(std::string what) { return {RefKind::Qualitative, std::move(what)}; }

/// The declaration of checks.csv (the same in every preset; coupling-all's joined table too).
inline const TableDecl& checks_table() {
  static const TableDecl t{
      "checks.csv",
      "one numerical check of a statement of a paper (the verdict table; see experiments/checks.hpp)",
      {text("check", "the check's id, e.g. 'R17 residual'"),
       text("statement", "the paper's claim, with its source (theorem, lemma, equation)"),
       text("quantity", "what was measured"),
       real("value", "the measured number").may_be_empty("not computable in this run (pass = n/a), or a failed criterion without a value"),
       text("expected", "the criterion with its tolerance, in words"),
       category("reference_kind", "what the value is compared against",
                {{"paper", "a number printed in the paper"},
                 {"closed_form", "a formula evaluated independently of the code under test"},
                 {"independent", "a separate implementation in the repository (named)"},
                 {"consistency", "two code paths of tokdyn that share most of their code"},
                 {"bound", "an inequality of the paper"},
                 {"qualitative", "a sign, an ordering or a trend the paper states"}}),
       text("reference", "the reference itself, named"),
       category("pass", "the verdict", {{"true", "the criterion holds"}, {"false", "it does not"},
                 {"n/a", "not applicable in this run (value empty), or a three-way decision that came out undecided (value given)"}})}};
  return t;
}

class CheckTable {
 public:
  static std::vector<std::string> columns() { return checks_table().column_names(); }
  /// Writes `file`, which must be <results folder>/checks.csv.
  explicit CheckTable(const std::filesystem::path& file) : csv_(folder_of(file), checks_table()) {}
  /// One check: `check` is its id (e.g. "R17 residual"), `statement` the paper's claim,
  /// `quantity` what was measured, `value` the number, `expected` the criterion in words, `ref`
  /// what the value is compared against.
  void add(const std::string& check, const std::string& statement, const std::string& quantity, double value,
           const std::string& expected, bool pass, const Ref& ref) {
    if (!std::isfinite(value)) {
      not_applicable(check, statement, quantity,
                     fmt::format("not computable here: the value is {} ({})", value, expected), ref);
      return;
    }
    csv_.cell(check).cell(statement).cell(quantity).cell(value).cell(expected);
    csv_.cell(std::string(ref_kind_name(ref.kind))).cell(ref.what).cell(std::string(pass ? "true" : "false"));
    csv_.end_row();
    rows_.push_back({check, statement, quantity, fmt::format("{:.17g}", value), expected, ref_kind_name(ref.kind), ref.what, pass ? "true" : "false"});
    ++total_;
    failed_ += pass ? 0 : 1;
    count(ref.kind, pass ? 0 : 1);
  }
  /// A check that may not apply to this run: n/a with `why_not` when it is non-empty (its value is
  /// then not computed), else `value()` judged by `passes(value)`.
  template <class Value, class Passes>
  void add_unless(const std::string& why_not, const std::string& check, const std::string& statement, const std::string& quantity,
                  Value&& value, const std::string& expected, Passes&& passes, const Ref& ref) {
    if (!why_not.empty()) {
      not_applicable(check, statement, quantity, why_not, ref);
      return;
    }
    const double v = value();
    add(check, statement, quantity, v, expected, passes(v), ref);
  }
  /// A check whose criterion needs a value that does not exist (e.g. "T* exists and is <= 20" when
  /// no window is admissible): the value cell is empty, `why` says what is missing, pass = false.
  void failed_without_value(const std::string& check, const std::string& statement, const std::string& quantity,
                            const std::string& expected, const std::string& why, const Ref& ref) {
    csv_.cell(check).cell(statement).cell(quantity).empty().cell(fmt::format("{} (failed: {})", expected, why));
    csv_.cell(std::string(ref_kind_name(ref.kind))).cell(ref.what).cell(std::string("false"));
    csv_.end_row();
    rows_.push_back({check, statement, quantity, "", fmt::format("{} (failed: {})", expected, why), ref_kind_name(ref.kind), ref.what, "false"});
    ++total_;
    ++failed_;
    count(ref.kind, 1);
  }
  /// A three-way decision at a boundary that came out "undecided" (the value's confidence interval
  /// reaches both sides of the criterion within its tolerance): the value is written, pass = n/a,
  /// and `expected` should say why neither verdict is reached.
  void undecided(const std::string& check, const std::string& statement, const std::string& quantity, double value,
                 const std::string& expected, const Ref& ref) {
    if (!std::isfinite(value)) {
      not_applicable(check, statement, quantity, fmt::format("not computable here: the value is {} ({})", value, expected), ref);
      return;
    }
    csv_.cell(check).cell(statement).cell(quantity).cell(value).cell(expected);
    csv_.cell(std::string(ref_kind_name(ref.kind))).cell(ref.what).cell(std::string("n/a"));
    csv_.end_row();
    rows_.push_back({check, statement, quantity, fmt::format("{:.17g}", value), expected, ref_kind_name(ref.kind), ref.what, "n/a"});
    ++total_;
    ++na_;
    ++undecided_;
    count(ref.kind, 2);
  }
  /// A check that does not apply to this run (its value cannot be computed): `why` says so.
  void not_applicable(const std::string& check, const std::string& statement, const std::string& quantity,
                      const std::string& why, const Ref& ref) {
    csv_.cell(check).cell(statement).cell(quantity).empty().cell(why);
    csv_.cell(std::string(ref_kind_name(ref.kind))).cell(ref.what).cell(std::string("n/a"));
    csv_.end_row();
    rows_.push_back({check, statement, quantity, "", why, ref_kind_name(ref.kind), ref.what, "n/a"});
    ++total_;
    ++na_;
    count(ref.kind, 2);
  }
  int failed() const { return failed_; }
  int total() const { return total_; }
  int not_applicable_count() const { return na_; }
  /// Records the outcome in the manifest (checks, checks_failed, checks_not_applicable) and warns
  /// about failures and checks that could not be made.
  void report(RunContext& ctx, const std::string& preset) const {
    ctx.check_rows = rows_;
    ctx.notes["checks"] = total_;
    ctx.notes["checks_failed"] = failed_;
    ctx.notes["checks_not_applicable"] = na_;
    // By kind: {"paper": {"passed": p, "failed": f, "not_applicable": n}, ...} (run.cpp prints it).
    nlohmann::json by = nlohmann::json::object();
    for (std::size_t k = 0; k < kRefKindNames.size(); ++k)
      if (by_kind_[k][0] + by_kind_[k][1] + by_kind_[k][2] > 0)
        by[kRefKindNames[k]] = {{"passed", by_kind_[k][0]}, {"failed", by_kind_[k][1]}, {"not_applicable", by_kind_[k][2]}};
    ctx.notes["checks_by_kind"] = by;
    if (failed_)
      ctx.warnings.push_back(fmt::format("{} check(s) of {} failed: see checks.csv (docs/reproduction.md explains each known difference "
                                         "from the papers)", failed_, preset));
    if (na_ > undecided_)
      ctx.warnings.push_back(
          fmt::format("{} check(s) of {} not applicable with these parameters: see checks.csv", na_ - undecided_, preset));
    if (undecided_)
      ctx.warnings.push_back(fmt::format("{} check(s) of {} undecided (pass = n/a: the confidence interval reaches both verdicts): see checks.csv",
                                         undecided_, preset));
  }

 private:
  void count(RefKind k, int outcome) { ++by_kind_[static_cast<std::size_t>(k)][static_cast<std::size_t>(outcome)]; }
  static std::filesystem::path folder_of(const std::filesystem::path& file) {
    if (file.filename() != "checks.csv") throw std::logic_error("CheckTable writes checks.csv, not " + file.string());
    return file.parent_path();
  }
  CsvWriter csv_;
  std::vector<std::vector<std::string>> rows_;  ///< the rows as written (value with 17 digits, as CsvWriter prints it)
  int failed_ = 0, total_ = 0, na_ = 0, undecided_ = 0;
  std::array<std::array<int, 3>, 6> by_kind_{};  ///< per kind: passed, failed, not applicable
};

}  // namespace tokdyn
