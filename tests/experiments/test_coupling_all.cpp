// coupling-all: every coupling preset at its defaults into its own folder, their checks.csv tables
// joined into checks.csv; every part-1 check passes at the defaults; bad preset lists exit 2.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_checks.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::CliResult;
using tokdyn::testing::lines_of;
using tokdyn::testing::run_cli;
using tokdyn::testing::TempDir;

namespace {

TEST(CouplingAll, PartOnePresetsJoinedAndPassing) {
  TempDir d;
  const std::vector<std::string> presets = {"coupling-frozen-kernel", "coupling-bounded-step", "coupling-rank-collapse",
                                            "coupling-qk-specificity", "coupling-euler", "coupling-looped"};
  std::string list;
  for (const auto& p : presets) list += (list.empty() ? "" : ",") + p;
  const CliResult r = run_cli(d.path(), {"run", "coupling-all", "--out", "all", "--no-figures", "--quiet", "--set", "presets=" + list});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto summary = lines_of(d.path() / "all" / "checks.csv");
  ASSERT_FALSE(summary.empty());
  EXPECT_EQ(summary[0], "preset,check,statement,quantity,value,expected,reference_kind,reference,pass");
  std::size_t rows = 0;
  for (const auto& p : presets) {
    EXPECT_TRUE(fs::exists(d.path() / "all" / p / "manifest.json")) << p;
    const auto c = lines_of(d.path() / "all" / p / "checks.csv");
    ASSERT_GE(c.size(), 2u) << p << ": no checks";
    rows += c.size() - 1;
    // Every row of the preset's table is in the joined table, byte for byte, after the preset's name.
    for (std::size_t i = 1; i < c.size(); ++i) {
      const std::string tagged = p + "," + c[i];
      EXPECT_TRUE(std::find(summary.begin(), summary.end(), tagged) != summary.end()) << tagged;
    }
  }
  EXPECT_EQ(summary.size() - 1, rows);
  for (std::size_t i = 1; i < summary.size(); ++i)
    EXPECT_TRUE(summary[i].size() > 5 && summary[i].substr(summary[i].size() - 5) == ",true") << summary[i];
  // The scalar summaries count the same rows.
  const auto scalars = lines_of(d.path() / "all" / "summary.csv");
  ASSERT_GE(scalars.size(), 3u);
  EXPECT_EQ(scalars[0], "quantity,value,paper");
  EXPECT_EQ(scalars[2], fmt::format("checks,{},", rows));
  const auto per = lines_of(d.path() / "all" / "presets.csv");
  EXPECT_EQ(per.size(), presets.size() + 1);
  // The verdicts are counted by reference kind, with the share of independent references.
  const std::string m = tokdyn::testing::slurp(d.path() / "all" / "manifest.json");
  EXPECT_NE(m.find("\"checks_by_kind\""), std::string::npos) << m;
  EXPECT_NE(m.find("\"independent_reference_share\""), std::string::npos) << m;
  EXPECT_NE(r.out.find("by reference (passed/made): "), std::string::npos) << r.out;
}

TEST(CouplingAll, BadPresetListExitsTwo) {
  TempDir d;
  for (const char* v : {"coupling-nonexistent", "coupling-all", "coupling-euler,mamba2-fig1", ","}) {
    const CliResult r = run_cli(d.path(), {"run", "coupling-all", "--out", "o", "--no-figures", "--quiet", "--set", std::string("presets=") + v});
    EXPECT_EQ(r.code, 2) << v << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("presets"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d.path() / "o"));
  }
}

}  // namespace
