#pragma once
// The checks table every coupling-paper preset writes (checks.csv: one row per numerical check of a
// statement of the paper, columns check, statement, quantity, value, expected, pass), and the run's
// bookkeeping of failures (manifest note "checks_failed" and a warning). `pass` is "true", "false"
// or "n/a": a check whose value cannot be computed (not finite) is neither passed nor failed; its
// value cell is empty and `expected` says why it is not applicable. `coupling-all` joins the
// tables of every coupling preset into its summary.csv with the same columns.
#include <cmath>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "tokdyn/experiment.hpp"
#include "tokdyn/io/csv.hpp"

namespace tokdyn {

class CheckTable {
 public:
  explicit CheckTable(const std::filesystem::path& file)
      : csv_(file, {"check", "statement", "quantity", "value", "expected", "pass"}) {}
  /// One check: `check` is its id (e.g. "R17 residual"), `statement` the paper's claim,
  /// `quantity` what was measured, `value` the number, `expected` the criterion in words.
  void add(const std::string& check, const std::string& statement, const std::string& quantity, double value,
           const std::string& expected, bool pass) {
    if (!std::isfinite(value)) {
      not_applicable(check, statement, quantity,
                     fmt::format("not computable here: the value is {} ({})", value, expected));
      return;
    }
    csv_.cell(check).cell(statement).cell(quantity).cell(value).cell(expected).cell(std::string(pass ? "true" : "false"));
    csv_.end_row();
    ++total_;
    failed_ += pass ? 0 : 1;
  }
  /// A check that does not apply to this run (its value cannot be computed): `why` says so.
  void not_applicable(const std::string& check, const std::string& statement, const std::string& quantity,
                      const std::string& why) {
    csv_.cell(check).cell(statement).cell(quantity).empty().cell(why).cell(std::string("n/a"));
    csv_.end_row();
    ++total_;
    ++na_;
  }
  int failed() const { return failed_; }
  int total() const { return total_; }
  int not_applicable_count() const { return na_; }
  /// Records the outcome in the manifest (checks, checks_failed, checks_not_applicable) and warns
  /// about failures and checks that could not be made.
  void report(RunContext& ctx, const std::string& preset) const {
    ctx.notes["checks"] = total_;
    ctx.notes["checks_failed"] = failed_;
    ctx.notes["checks_not_applicable"] = na_;
    if (failed_)
      ctx.warnings.push_back(fmt::format("{} check(s) of {} failed: see checks.csv", failed_, preset));
    if (na_)
      ctx.warnings.push_back(
          fmt::format("{} check(s) of {} not applicable with these parameters: see checks.csv", na_, preset));
  }

 private:
  CsvWriter csv_;
  int failed_ = 0, total_ = 0, na_ = 0;
};

}  // namespace tokdyn
