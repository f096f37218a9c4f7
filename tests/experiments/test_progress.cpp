// Progress when stderr is not a terminal (issue 38): plain lines every TOKDYN_PROGRESS_SECONDS, a
// last line when the run ends, nothing with --quiet or --progress=none, and the option's input
// checks. TOKDYN_PROGRESS_SECONDS=0 writes the "running" line as the run starts, so the test depends
// on no clock: whatever the machine's speed, the lines are the same.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"

using tokdyn::testing::CliResult;
using tokdyn::testing::run_cli;
using tokdyn::testing::TempDir;

namespace {

std::vector<std::string> lines_of_text(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

struct Env {
  Env() { ::setenv("TOKDYN_PROGRESS_SECONDS", "0", 1); }
  ~Env() { ::unsetenv("TOKDYN_PROGRESS_SECONDS"); }
};

std::vector<std::string> run_args(const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> a = {"run", "coupling-dichotomy", "--out", out, "--no-figures", "--threads", "1", "--set", "depth=120",
                                "--set", "R11_window=60", "--set", "H=5,20", "--set", "green_L=40", "--set", "switch_L=500"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace

TEST(Progress, PlainLinesWhenStderrIsNotATerminal) {
  TempDir d;
  Env env;
  for (const std::vector<std::string>& how : {std::vector<std::string>{}, std::vector<std::string>{"--progress=lines"}}) {
    const std::string out = how.empty() ? "auto" : "lines";
    const CliResult r = run_cli(d.path(), run_args(out, how));
    ASSERT_EQ(r.code, 0) << r.err;
    const auto lines = lines_of_text(r.err);
    ASSERT_EQ(lines.size(), 2u) << r.err;
    EXPECT_EQ(lines[0].rfind("tokdyn: coupling-dichotomy running 0% elapsed ", 0), 0u) << lines[0];
    EXPECT_EQ(lines.back().rfind("tokdyn: coupling-dichotomy done 100% elapsed ", 0), 0u) << lines.back();
    EXPECT_EQ(r.err.find('\r'), std::string::npos);  // no bar redrawing in a file
  }
}

TEST(Progress, NothingWithQuietOrNone) {
  TempDir d;
  Env env;
  for (const char* flag : {"--quiet", "--progress=none"}) {
    const CliResult r = run_cli(d.path(), run_args(std::string("q") + flag, {flag}));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "") << flag;
  }
}

TEST(Progress, BadOptionsExitTwoWithOneLine) {
  TempDir d;
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--progress=sometimes"},
                                               std::vector<std::string>{"--quiet", "--progress=lines"}}) {
    const CliResult r = run_cli(d.path(), run_args("bad", extra));
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(lines_of_text(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find("--progress"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(tokdyn::testing::entries(d.path()).empty());
}
