// The depth-spectra preset through the CLI: outputs of each model (ssm, rope, mamba2 from a
// make-checkpoint checkpoint), agreement with the library, and bad input (exit 2, one line,
// nothing left behind).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "test_util.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::CliResult;
using tokdyn::testing::entries;
using tokdyn::testing::run_cli;
using tokdyn::testing::TempDir;

namespace {

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& sets) {
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  args.push_back("--no-figures");
  args.push_back("--quiet");
  return args;
}

/// Rows of a CSV file (header first), cells split on commas (these files have no quoted cells).
std::vector<std::vector<std::string>> csv_rows(const fs::path& f) {
  std::ifstream in(f);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ',')) cells.push_back(c);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    rows.push_back(cells);
  }
  return rows;
}

void expect_bad(const fs::path& cwd, const std::vector<std::string>& args, const std::string& needle) {
  const auto before = entries(cwd);
  const CliResult r = run_cli(cwd, args);
  EXPECT_EQ(r.code, 2) << r.err << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(entries(cwd), before) << "something was left behind";
}

void expect_outputs(const fs::path& dir, int k, long depth, long burn_in) {
  const auto ly = csv_rows(dir / "lyapunov.csv");
  ASSERT_EQ(ly.size(), static_cast<std::size_t>(k) + 1);
  EXPECT_EQ(ly[0], (std::vector<std::string>{"i", "mu", "gamma", "resolved", "unresolved_from_layer"}));
  for (int i = 1; i <= k; ++i) {
    EXPECT_EQ(ly[i][0], std::to_string(i - 1));  // exponent indices count from 0, as in cocycle-spectra
    EXPECT_EQ(ly[i][3], "true");
    EXPECT_NEAR(std::exp(std::stod(ly[i][1])), std::stod(ly[i][2]), 1e-12 * std::stod(ly[i][2]));
  }
  const auto gr = csv_rows(dir / "running.csv");
  ASSERT_EQ(gr.size(), static_cast<std::size_t>(k * depth) + 1);
  EXPECT_EQ(gr[0], (std::vector<std::string>{"layer", "i", "log_r", "mu_running"}));
  // The last layer's running exponents are the spectrum; burn-in layers have none.
  for (int i = 1; i <= k; ++i) EXPECT_EQ(gr[gr.size() - static_cast<std::size_t>(k) + i - 1][3], ly[i][1]);
  if (burn_in > 0) {
    EXPECT_EQ(gr[1][3], "");
  }
  EXPECT_NE(gr[static_cast<std::size_t>(burn_in * k) + 1][3], "");
}

}  // namespace

TEST(DepthSpectraCli, EveryModelWritesTheSpectrumAndItsGrowth) {
  TempDir d;
  CliResult r = run_cli(d.path(), with({"run", "depth-spectra", "--out", "ssm"},
                                       {"model=ssm", "n=6", "m=4", "tokens=4", "k=3", "depth=12", "burn_in=2"}));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_outputs(d.path() / "ssm", 3, 12, 2);
  r = run_cli(d.path(), with({"run", "depth-spectra", "--out", "rope"},
                             {"model=rope", "d=4", "tokens=5", "k=4", "depth=10", "burn_in=0", "causal=true"}));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_outputs(d.path() / "rope", 4, 10, 0);
  r = run_cli(d.path(), {"make-checkpoint", "--size", "tiny", "--seed", "1", "--out", "ck"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_cli(d.path(), with({"run", "depth-spectra", "--out", "m2"},
                             {"model=mamba2", "checkpoint=ck", "tokens=3", "k=2", "depth=5", "burn_in=1"}));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_outputs(d.path() / "m2", 2, 5, 1);
  EXPECT_TRUE(fs::exists(d.path() / "m2" / "token_ids.npy"));
  r = run_cli(d.path(), with({"run", "depth-spectra", "--out", "m2s"},
                             {"model=mamba2", "checkpoint=ck", "tokens=3", "k=2", "depth=4", "burn_in=1", "layers=single",
                              "layer=3", "update=sphere", "tau=0.5"}));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_outputs(d.path() / "m2s", 2, 4, 1);
  r = run_cli(d.path(), with({"run", "depth-spectra", "--out", "hier"},
                             {"model=hierarchical", "tokens=6", "block=3", "k=3", "depth=6", "burn_in=1", "rho=0.5"}));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_outputs(d.path() / "hier", 3, 6, 1);
}

TEST(DepthSpectraCli, BadInputExitsTwoWithOneLine) {
  TempDir d;
  const auto run = [](std::vector<std::string> sets) { return with({"run", "depth-spectra", "--out", "o"}, sets); };
  // k above the tangent dimension T (d - 1) = 2 x 3 of the RoPE step on spheres.
  expect_bad(d.path(), run({"model=rope", "d=4", "tokens=2", "k=7"}), "parameter 'k'");
  expect_bad(d.path(), run({"model=ssm", "n=4", "tokens=2", "depth=5", "burn_in=5"}), "parameter 'burn_in'");
  expect_bad(d.path(), run({"model=mamba2", "size=9b", "tokens=2"}), "parameter 'size'");
  // A knob two models share with different conditions: the SSM's tau always applies, Mamba-2's only
  // with update=sphere (refused by the model's own condition, not silently ignored).
  expect_bad(d.path(), run({"model=mamba2", "size=tiny", "tau=0.5", "tokens=2"}), "parameter 'tau' does not apply to model=mamba2");
  expect_bad(d.path(), run({"model=mamba2", "checkpoint=nowhere", "tokens=2"}), "nowhere");
  expect_bad(d.path(), run({"model=ssm", "checkpoint=x"}), "parameter 'checkpoint'");
  expect_bad(d.path(), run({"model=rope", "freqs=1,x"}), "parameter 'freqs'");
  expect_bad(d.path(), run({"model=rope", "d=3"}), "depth-spectra");  // odd d with RoPE: the model's refusal
  expect_bad(d.path(), run({"model=unknown"}), "model");
  expect_bad(d.path(), run({"model=transformer", "d=3", "positional=rope"}), "parameter 'd'");
  expect_bad(d.path(), run({"model=transformer", "depth=30", "burn_in=10", "H=21"}), "parameter 'H'");
  expect_bad(d.path(), run({"k=0"}), "k");
  CliResult r = run_cli(d.path(), {"make-checkpoint", "--size", "tiny", "--seed", "1", "--out", "ck"});
  ASSERT_EQ(r.code, 0) << r.err;
  expect_bad(d.path(), run({"model=mamba2", "checkpoint=ck", "layers=single", "layer=4"}), "parameter 'layer'");
  expect_bad(d.path(), run({"model=mamba2", "checkpoint=ck", "vocab=5000"}), "parameter 'vocab'");
  expect_bad(d.path(), run({"model=mamba2", "checkpoint=ck", "size=tiny"}), "parameter 'size'");  // only without a checkpoint
  // make-checkpoint writes only the registry's models that read checkpoints, in their sizes.
  expect_bad(d.path(), {"make-checkpoint", "--model", "rope", "--out", "ck2"}, "--model");
  EXPECT_FALSE(std::filesystem::exists(d.path() / "ck2"));
}

// Without a checkpoint, model=mamba2 is a freshly initialised model of `size` (make-checkpoint's):
// the same exponents as the same model written by make-checkpoint and read back.
TEST(DepthSpectraCli, Mamba2WithoutCheckpointIsTheMakeCheckpointModel) {
  TempDir d;
  ASSERT_EQ(run_cli(d.path(), {"make-checkpoint", "--size", "tiny", "--seed", "2", "--out", "ck"}).code, 0);
  CliResult a = run_cli(d.path(), with({"run", "depth-spectra", "--out", "a"},
                                       {"model=mamba2", "tokens=3", "k=2", "depth=4", "burn_in=1", "size=tiny", "model_seed=2"}));
  ASSERT_EQ(a.code, 0) << a.err;
  CliResult b = run_cli(d.path(), with({"run", "depth-spectra", "--out", "b"},
                                       {"model=mamba2", "tokens=3", "k=2", "depth=4", "burn_in=1", "checkpoint=ck"}));
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(tokdyn::testing::slurp(d.path() / "a" / "lyapunov.csv"), tokdyn::testing::slurp(d.path() / "b" / "lyapunov.csv"));
}
