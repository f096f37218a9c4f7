#pragma once
// GoogleTest checks shared by the CLI tests of the presets: bad input exits 2 with one line and
// leaves nothing on disk; the lines of a result file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace tokdyn::testing {

/// Each entry {PRESET, "key=value", ...} runs `tokdyn run PRESET --out outN --no-figures --quiet
/// --set key=value ...` in `dir`: it must exit 2, print exactly one line, and leave outN absent.
inline void expect_bad_runs(const std::filesystem::path& dir, const std::vector<std::vector<std::string>>& bad) {
  int i = 0;
  for (const auto& b : bad) {
    const std::string out = "out" + std::to_string(i++);
    std::vector<std::string> a = {"run", b[0], "--out", out, "--no-figures", "--quiet"};
    for (std::size_t k = 1; k < b.size(); ++k) {
      a.push_back("--set");
      a.push_back(b[k]);
    }
    const CliResult r = run_cli(dir, a);
    const std::string what = b[0] + (b.size() > 1 ? " " + b[1] : std::string());
    EXPECT_EQ(r.code, 2) << what << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / out)) << what;
  }
}

/// The lines of a text file (empty when it cannot be read).
inline std::vector<std::string> lines_of(const std::filesystem::path& f) {
  std::ifstream in(f);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace tokdyn::testing
