// The CLI binary's handling of bad input (exit 2, one line, nothing left behind), one short test
// per input rule of the CLI contract, and its --version and presets commands.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "tokdyn/build_info.hpp"

#include "cli_input_fixtures.hpp"
#include "test_util.hpp"

using tokdyn::testing::TempDir;
using tokdyn::testing::run_cli;
using tokdyn::testing::CliResult;
using tokdyn::testing::entries;
using tokdyn::testing::write_text;

// ---------------------------------------------------------------------------------------------
// The CLI binary: bad input -> exit 2, exactly one line on stderr, nothing left behind.

namespace {

// Runs `args` in a fresh directory holding `files` and checks the bad-input contract.
void expect_input_error(const std::vector<std::string>& args, const std::string& needle,
                        const std::vector<std::pair<std::string, std::string>>& files = {}) {
  TempDir d;
  std::vector<std::string> names;
  for (const auto& [name, text] : files) {
    write_text(d.path() / name, text);
    names.push_back(name);
  }
  const CliResult r = run_cli(d.path(), args);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("tokdyn: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_TRUE(entries(d.path(), names).empty()) << "left behind: " << entries(d.path(), names).front();
}

const std::string kPreset = "ssm-random-silu";

// `run ssm-random-silu` at a tiny size followed by one bad `--set` (the last setting of a key
// wins), so that a validation regression makes the test fail quickly instead of running the
// full-size experiment.
std::vector<std::string> run_with(const std::string& bad_set) {
  // A small run with one bad value; the small default of the same key is left out (a key is set once).
  std::vector<std::string> args = {"run", kPreset, "--no-figures"};
  const std::string key = bad_set.substr(0, bad_set.find('='));
  for (const char* s : {"runs=1", "depth=1", "tokens=2", "n=2", "m=1"})
    if (std::string(s).rfind(key + "=", 0) != 0) {
      args.push_back("--set");
      args.push_back(s);
    }
  args.push_back("--set");
  args.push_back(bad_set);
  return args;
}

}  // namespace

TEST(CliInput, UnknownKey) {
  expect_input_error(run_with("foo=1"), "unknown parameter 'foo'");
}

TEST(CliInput, WrongType) {
  expect_input_error(run_with("depth=abc"),
                     "parameter 'depth': expected an integer, got 'abc'");
}

TEST(CliInput, NonFiniteNumber) {
  expect_input_error(run_with("tau=nan"), "parameter 'tau': expected a finite number");
}

TEST(CliInput, DepthOutOfRange) {
  expect_input_error(run_with("depth=0"), "parameter 'depth': expected an integer >= 1");
}

TEST(CliInput, TokensOutOfRange) {
  expect_input_error(run_with("tokens=0"), "parameter 'tokens': expected an integer >= 1 and <= 100000, got 0");
}

TEST(CliInput, TauOutOfRange) {
  expect_input_error(run_with("tau=-1"), "parameter 'tau': expected a number > 0");
}

TEST(CliInput, UnknownPreset) {
  expect_input_error({"run", "no-such-preset"}, "unknown preset 'no-such-preset' (see `tokdyn presets`)");
}

TEST(CliInput, MissingConfigFile) {
  expect_input_error({"run", "missing.toml"}, "config file 'missing.toml': cannot open (no such file)");
}

TEST(CliInput, MalformedTomlFile) {
  expect_input_error({"run", "bad.toml"}, "config file 'bad.toml' line 2",
                     {{"bad.toml", "preset = \"ssm-random-silu\"\ndepth = = 3\n"}});
}

TEST(CliInput, TomlWithUnknownKey) {
  expect_input_error({"run", "c.toml", "--no-figures"}, "config file 'c.toml' line 2: unknown parameter 'foo'",
                     {{"c.toml", "preset = \"ssm-random-silu\"\nfoo = 1\nruns = 1\ndepth = 1\ntokens = 2\nn = 2\nm = 1\n"}});
}

TEST(CliInput, SetWithoutEquals) {
  expect_input_error({"run", kPreset, "--set", "depth"}, "--set 'depth': expected key=value");
}

TEST(CliInput, UnknownOption) { expect_input_error({"run", kPreset, "--bogus"}, "--bogus"); }

TEST(CliInput, MissingOptionArgument) { expect_input_error({"run", kPreset, "--out"}, "--out"); }

TEST(CliInput, ShowUnknownPreset) { expect_input_error({"show", "no-such-preset"}, "unknown preset 'no-such-preset'"); }

// A bad value that only the library can refuse, on each side: exit 2 and one line, like a
// schema violation (the step guard and the step count of drivers.cpp throw std::invalid_argument).
TEST(CliInput, SsmValueRefusedByTheLibrary) {
  expect_input_error({"run", "ssm-theorem-pe", "--no-figures", "--set", "runs=1", "--set", "variants=pe", "--set",
                      "integrator=rk4", "--set", "every=1", "--set", "h=0.3"},
                     "parameter 'h' = 0.3: the RK4 step is outside its stability region");
}

TEST(CliInput, RopeValueRefusedByTheLibrary) {
  // --quiet: without it, the estimated work of so long a run is announced on stderr first.
  expect_input_error({"run", "rope-flow", "--no-figures", "--quiet", "--set", "n=4", "--set", "runs=1", "--set", "h=1e-300"},
                     "parameter 'h' = 1e-300: RK4 would take 2e+301 steps over [0, 20]");
}

TEST(CliInput, HugeWorkIsAnnouncedInReadableUnits) {
  // Without --quiet the estimate comes first: in scientific notation and as a time, never a
  // 300-digit FLOP count; then the one-line refusal.
  TempDir d;
  const CliResult r = run_cli(d.path(), {"run", "rope-flow", "--no-figures", "--set", "n=4", "--set", "runs=1", "--set", "h=1e-300"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("more than a century"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("e+"), std::string::npos) << r.err;
  int run = 0, longest = 0;
  for (char ch : r.err) {
    run = std::isdigit(static_cast<unsigned char>(ch)) ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  EXPECT_LT(longest, 12) << r.err;
}

TEST(Cli, VersionPrintsVersion) {
  TempDir d;
  const CliResult r = run_cli(d.path(), {"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find(TOKDYN_VERSION), std::string::npos) << r.out;
}

TEST(Cli, PresetsExitsZero) {
  TempDir d;
  const CliResult r = run_cli(d.path(), {"presets"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}
