#pragma once
// The checks table every coupling-paper preset writes (checks.csv: one row per numerical check of a
// statement of the paper, columns check, statement, quantity, value, expected, pass), and the run's
// bookkeeping of failures (manifest note "checks_failed" and a warning). `coupling-all` joins the
// tables of every coupling preset into its summary.csv with the same columns.
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
    csv_.cell(check).cell(statement).cell(quantity).cell(value).cell(expected).cell(std::string(pass ? "true" : "false"));
    csv_.end_row();
    ++total_;
    failed_ += pass ? 0 : 1;
  }
  int failed() const { return failed_; }
  int total() const { return total_; }
  /// Records the outcome in the manifest (checks, checks_failed) and warns about failures.
  void report(RunContext& ctx, const std::string& preset) const {
    ctx.notes["checks"] = total_;
    ctx.notes["checks_failed"] = failed_;
    if (failed_)
      ctx.warnings.push_back(fmt::format("{} check(s) of {} failed: see checks.csv", failed_, preset));
  }

 private:
  CsvWriter csv_;
  int failed_ = 0, total_ = 0;
};

}  // namespace tokdyn
