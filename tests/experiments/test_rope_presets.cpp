// The rope-* presets through the CLI: every preset runs and writes its named files with the
// paper's key numbers; bad input (odd d with RoPE, n < 2, negative beta, non-finite
// frequencies, tolerances <= 0) is one line, exit code 2, nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "thread_util.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/core/linalg.hpp"

namespace fs = std::filesystem;
using tokdyn::gemm_tiling;
using tokdyn::testing::CliResult;
using tokdyn::testing::entries;
using tokdyn::testing::kThreadCounts;
using tokdyn::testing::run_cli;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;

namespace {

/// summary.csv / table2.csv rows as "first column(s)" -> value column.
std::map<std::string, double> read_summary(const fs::path& f, int key_cols, int value_col) {
  std::map<std::string, double> out;
  std::stringstream ss(slurp(f));
  std::string line;
  std::getline(ss, line);  // header
  while (std::getline(ss, line)) {
    std::vector<std::string> cells;
    std::string cell;
    bool q = false;
    for (char c : line) {
      if (c == '"') q = !q;
      else if (c == ',' && !q) cells.push_back(cell), cell.clear();
      else cell += c;
    }
    cells.push_back(cell);
    std::string key;
    for (int k = 0; k < key_cols; ++k) key += (k ? "|" : "") + cells[static_cast<std::size_t>(k)];
    out[key] = std::stod(cells[static_cast<std::size_t>(value_col)]);
  }
  return out;
}

}  // namespace

TEST(RopePresets, SpectraFiguresReproduceThePapersNumbers) {
  TempDir d;
  for (const char* p : {"rope-fig1a", "rope-fig1b", "rope-fig1c", "rope-fig4a", "rope-fig4b", "rope-fig4c"}) {
    std::vector<std::string> args{"run", p, "--out", p, "--no-figures", "--quiet"};
    if (std::string(p) == "rope-fig4b") args.insert(args.end(), {"--set", "ns=256,384", "--set", "points=3"});
    const CliResult r = run_cli(d.path(), args);
    ASSERT_EQ(r.code, 0) << p << ": " << r.err;
  }
  EXPECT_EQ(slurp(d.path() / "rope-fig1a" / "spectrum.csv").rfind("q,lambda,reachable\n", 0), 0u);
  auto s = read_summary(d.path() / "rope-fig1a" / "summary.csv", 1, 1);
  EXPECT_EQ(s["unreachable_modes"], 12);
  EXPECT_LT(s["max_error_bessel_vs_dft"], 1e-14);
  s = read_summary(d.path() / "rope-fig4a" / "summary.csv", 1, 1);
  EXPECT_NEAR(s["gamma(0)"], (35 * std::sqrt(2.0) - 32) / 31, 1e-14);
  EXPECT_NEAR(s["gamma(2/3)"], 0.75, 1e-14);
  const double u = std::pow(2.0, -0.75);
  EXPECT_NEAR(s["gamma(1)"], u * (1 + 2 * u) / (1 + u + u * u), 1e-14);
  // The summaries hold the largest context (n = 384); n = 256 is read from gap_curve.csv (a1 = 0, 1).
  s = read_summary(d.path() / "rope-fig4b" / "summary.csv", 1, 1);
  EXPECT_NEAR(s["largest_n_gamma_low"], 0.112756, 5e-7);
  EXPECT_NEAR(s["largest_n_gamma_high"], 0.135707, 5e-7);
  EXPECT_NEAR(s["largest_n_gamma_equal_mixture"], 0.263105, 5e-7);
  const auto curve = read_summary(d.path() / "rope-fig4b" / "gap_curve.csv", 2, 2);  // "n|a1" -> gamma
  EXPECT_NEAR(curve.at("256|0"), 0.240298, 5e-7);
  EXPECT_NEAR(curve.at("256|1"), 0.134730, 5e-7);
  EXPECT_NEAR(curve.at("384|0.5"), 0.263105, 5e-7);
  s = read_summary(d.path() / "rope-fig4c" / "summary.csv", 1, 1);
  EXPECT_EQ(s["delta1_high_frequency_slower"], 1);
  EXPECT_EQ(s["delta2_high_frequency_faster"], 1);
}

TEST(RopePresets, CircleAndSphereFiguresAndTable2) {
  TempDir d;
  for (const char* p : {"rope-fig2a", "rope-fig2b", "rope-fig2c", "rope-fig3a", "rope-fig3b", "rope-fig3c", "rope-fig4d", "rope-table2"}) {
    std::vector<std::string> args{"run", p, "--out", p, "--no-figures", "--quiet"};
    if (std::string(p) == "rope-fig3a") args.insert(args.end(), {"--set", "points=21"});
    const CliResult r = run_cli(d.path(), args);
    ASSERT_EQ(r.code, 0) << p << ": " << r.err;
  }
  auto s = read_summary(d.path() / "rope-fig3a" / "summary.csv", 1, 1);
  EXPECT_NEAR(s["dE+(0,pi/6,pi/3)"], 1.666364304459315, 1e-13);
  EXPECT_NEAR(s["dE+(0,pi/6,0)"], -0.1296131359239394, 1e-13);
  s = read_summary(d.path() / "rope-fig2c" / "summary.csv", 1, 1);
  EXPECT_NEAR(s["D/pi at tau = 0.719"], 0.967213, 1e-6);
  EXPECT_NEAR(s["bound/pi at tau = 2.158"], 0.864288, 1e-6);
  // Stationary up to round-off: the double nearest pi is not pi, so sin(theta_1 - theta_0) = 1.2e-16
  // drives an ulp-sized drift over the long integration.
  EXPECT_NEAR(s["bipodal D/pi at the end"], 1.0, 1e-15);
  s = read_summary(d.path() / "rope-fig2b" / "summary.csv", 1, 1);
  EXPECT_EQ(s["active unordered pairs at t = 0"], 10);
  EXPECT_LE(s["max (tanh tau - c(t)) over both orientations and steps"], 1e-12);
  const std::string spectra = slurp(d.path() / "rope-fig3b" / "spectra.csv");
  for (const char* m : {"1/2 x2", "0/1 x7", "-1/9 x4", "0/1 x1", "1/9 x3", "1/1 x1"}) EXPECT_NE(spectra.find(m), std::string::npos) << m;
  s = read_summary(d.path() / "rope-fig4d" / "summary.csv", 1, 1);
  EXPECT_LT(s["max relative rate error"], 2e-5);

  // Table 2: the paper's counts and the spec's thresholds (§3.2).
  EXPECT_EQ(slurp(d.path() / "rope-table2" / "table2.csv").rfind("row,quantity,paper,tokdyn,count\n", 0), 0u);
  const auto v = read_summary(d.path() / "rope-table2" / "table2.csv", 2, 3);
  const auto c = read_summary(d.path() / "rope-table2" / "table2.csv", 2, 4);
  const std::string R1 = "Resonant spectrum and local rate|", R2 = "Geometric contraction bounds|", R3 = "Twisted states and drift|",
                    R4 = "Multi-frequency gap|";
  EXPECT_EQ(c.at(R1 + "full-spectrum error"), 144);
  EXPECT_LE(v.at(R1 + "full-spectrum error"), 1e-13);
  EXPECT_LE(v.at(R1 + "Bessel-Fourier gap error"), 1e-13);
  EXPECT_EQ(c.at(R1 + "relative rate error"), 12);
  EXPECT_LE(v.at(R1 + "relative rate error"), 1e-6);
  EXPECT_GE(v.at(R2 + "minimum inequality residual"), -1e-13);
  EXPECT_GE(c.at(R2 + "minimum inequality residual"), 7000);
  EXPECT_LE(v.at(R2 + "maximum trajectory excess"), 2e-8);
  EXPECT_EQ(c.at(R3 + "drift-formula error (nonresonant)"), 50);
  EXPECT_LE(v.at(R3 + "drift-formula error (nonresonant)"), 1e-14);
  EXPECT_EQ(c.at(R3 + "Jacobian error (analytic vs centred FD, h = 2e-7)"), 70);
  EXPECT_LE(v.at(R3 + "Jacobian error (analytic vs centred FD, h = 2e-7)"), 1e-7);
  EXPECT_EQ(c.at(R4 + "gap disagreement (three formulations)"), 9);
  EXPECT_LE(v.at(R4 + "gap disagreement (three formulations)"), 1e-13);
  EXPECT_EQ(c.at(R4 + "PSD stress: min eigenvalue of S"), 320);
  EXPECT_GE(v.at(R4 + "PSD stress: min eigenvalue of S"), -1e-13);
  EXPECT_EQ(c.at(R4 + "relative rate error"), 5);
  EXPECT_LE(v.at(R4 + "relative rate error"), 2e-5);

  // Wall times live in the manifest (notes.part_times_s, one entry per row's part), not in a
  // result file: a second run on another thread count writes the same bytes in every other file.
  const std::string man = slurp(d.path() / "rope-table2" / "manifest.json");
  const auto notes = nlohmann::json::parse(man).at("notes");
  ASSERT_TRUE(notes.contains("part_times_s")) << man;
  ASSERT_EQ(notes.at("part_times_s").size(), 5u);
  for (const auto& p : notes.at("part_times_s")) EXPECT_GE(p.at("seconds").get<double>(), 0.0) << p.dump();
  EXPECT_FALSE(fs::exists(d.path() / "rope-table2" / "timing.csv"));
  // The same parts are the manifest's phases (notes.phase_seconds), with the rest as "other".
  ASSERT_TRUE(notes.contains("phase_seconds")) << man;
  EXPECT_EQ(notes.at("phase_seconds").size(), 6u) << man;
  EXPECT_TRUE(notes.at("phase_seconds").contains("resonant rate fits (12)")) << man;
  EXPECT_TRUE(notes.at("phase_seconds").contains("other")) << man;
  // The grids, fits and trajectories run on every core (one item per thread): the same bytes on
  // 1, 3 and 4 threads as on the default count.
  for (int th : {1, 3, 4}) {
    const std::string out = "table2-t" + std::to_string(th);
    const CliResult r = run_cli(d.path(), {"run", "rope-table2", "--out", out, "--threads", std::to_string(th), "--no-figures", "--quiet"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(entries(d.path() / out), entries(d.path() / "rope-table2"));
    for (const std::string& f : entries(d.path() / out))
      if (f != "manifest.json") {
        EXPECT_EQ(slurp(d.path() / out / f), slurp(d.path() / "rope-table2" / f)) << f << ", " << th << " threads";
      }
  }
}

TEST(RopePresets, BadInputIsOneLineExitTwoNothingWritten) {
  TempDir d;
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--set", "d=5"}, "odd"},
      {{"--set", "n=1"}, "n >= 2"},
      {{"--set", "beta=-1"}, "beta"},
      {{"--set", "freqs=1,nan"}, "finite"},
      {{"--set", "freqs=1,inf"}, "finite"},
      {{"--set", "freqs=1,x"}, "not a number"},
      {{"--set", "integrator=fehlberg78", "--set", "rtol=0"}, "rtol"},
      {{"--set", "integrator=dopri5", "--set", "atol=-1e-9"}, "atol"},
      {{"--set", "h=0"}, "'h'"},
      {{"--set", "heads=3"}, "heads"},
  };
  for (const auto& [extra, needle] : cases) {
    std::vector<std::string> args{"run", "rope-flow", "--out", "x", "--no-figures", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_cli(d.path(), args);
    EXPECT_EQ(r.code, 2) << needle << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_TRUE(entries(d.path()).empty()) << needle;
  }
  // Presets with their own inputs.
  for (const auto& args : std::vector<std::vector<std::string>>{{"run", "rope-fig1a", "--set", "beta=-2"},
                                                                 {"run", "rope-fig1a", "--set", "n=1"},
                                                                 {"run", "rope-fig2b", "--set", "n=4"},
                                                                 {"run", "rope-fig3b", "--set", "m=9"},
                                                                 {"run", "rope-fig1c", "--set", "Ls=2,4"}}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--out", "y", "--no-figures", "--quiet"});
    const CliResult r = run_cli(d.path(), a);
    EXPECT_EQ(r.code, 2) << args[1] << " " << args[3] << ": " << r.err;
    EXPECT_TRUE(entries(d.path()).empty());
  }
}

// rope-flow with every integrator: the same bytes on 1, 2, 3 and 4 threads. Four runs of 40 tokens
// go parallel over runs; one run of 384 tokens (head size 16) goes row-parallel, with its score
// and output products in several tiles of the blocked GEMM spread over threads.
TEST(RopePresets, FlowRunsWithEveryIntegratorAndTheSameBytesOnOneToFourThreads) {
  TempDir d;
  ASSERT_TRUE(gemm_tiling(384, 384, 16).parallel && gemm_tiling(384, 384, 16).tiles() >= 4);
  struct Case {
    std::string integrator, n, runs, t_end;
  };
  for (const Case& c : {Case{"rk4", "40", "4", "1"}, Case{"fehlberg78", "40", "4", "1"}, Case{"discrete", "40", "4", "1"},
                        Case{"rk4", "384", "1", "0.1"}}) {
    const std::string tag = c.integrator + "-n" + c.n;
    for (int th : kThreadCounts) {
      const CliResult r = run_cli(d.path(), {"run", "rope-flow", "--out", tag + "-t" + std::to_string(th), "--threads", std::to_string(th),
                                             "--no-figures", "--quiet", "--set", "integrator=" + c.integrator, "--set", "n=" + c.n,
                                             "--set", "runs=" + c.runs, "--set", "d=32", "--set", "t_end=" + c.t_end, "--set",
                                             "outputs=10", "--set", "beta=2", "--set", "heads=2", "--set", "causal=true"});
      ASSERT_EQ(r.code, 0) << r.err;
    }
    const fs::path ref = d.path() / (tag + "-t1");
    for (int th : kThreadCounts) {
      const fs::path out = d.path() / (tag + "-t" + std::to_string(th));
      EXPECT_EQ(entries(out), entries(ref)) << tag;
      for (const std::string& f : entries(out))
        if (f != "manifest.json") {
          EXPECT_EQ(slurp(out / f), slurp(ref / f)) << tag << " " << f << ", " << th << " threads";
        }
    }
  }
}

// Fixed steps are checked against the local rate: rope-flow (general purpose) refines an unstable
// RK4 step and says so; its discrete step (3) is the model and is reported when it does not
// follow the flow; the paper's steps (Fig. 2b) are inside the region and recorded; step counts
// from a tiny step are refused before they are cast.
TEST(RopePresets, FixedStepsAreCheckedAgainstTheLocalRate) {
  TempDir d;
  const std::vector<std::string> base{"--no-figures", "--quiet", "--set", "t_end=30", "--set", "outputs=10"};
  auto run = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> a{"run", "rope-flow", "--out", out};
    a.insert(a.end(), base.begin(), base.end());
    a.insert(a.end(), extra.begin(), extra.end());
    return run_cli(d.path(), a);
  };
  CliResult r = run("refined", {"--set", "h=3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("tokdyn: note: parameter 'h' = 3: RK4 step refined for stability"), std::string::npos) << r.err;
  std::string m = slurp(d.path() / "refined" / "manifest.json");
  EXPECT_NE(m.find("\"action\": \"refined\""), std::string::npos) << m;
  EXPECT_NE(m.find("\"h_used_max\": 1.5"), std::string::npos) << m;
  EXPECT_NE(m.find("\"warnings\""), std::string::npos) << m;
  r = run("discrete", {"--set", "h=3", "--set", "integrator=discrete"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("outside forward Euler's region"), std::string::npos) << r.err;
  r = run("fine", {});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("note"), std::string::npos) << r.err;
  m = slurp(d.path() / "fine" / "manifest.json");
  EXPECT_NE(m.find("\"action\": \"accepted\""), std::string::npos) << m;
  EXPECT_EQ(m.find("\"warnings\""), std::string::npos) << m;

  r = run_cli(d.path(), {"run", "rope-fig2b", "--out", "fig2b", "--no-figures", "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  m = slurp(d.path() / "fig2b" / "manifest.json");
  EXPECT_NE(m.find("\"inside\": true"), std::string::npos) << m;
  EXPECT_NE(m.find("\"policy\": \"refuse\""), std::string::npos) << m;

  for (const auto& args : std::vector<std::vector<std::string>>{{"run", "rope-flow", "--set", "integrator=discrete", "--set", "h=1e-300"},
                                                                 {"run", "rope-flow", "--set", "h=1e-300"},
                                                                 {"run", "rope-fig2b", "--set", "h=1e-300"},
                                                                 {"run", "rope-fig4d", "--set", "h=1e-300"}}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--out", "tiny", "--no-figures", "--quiet"});
    r = run_cli(d.path(), a);
    EXPECT_EQ(r.code, 2) << args[1] << " " << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find("parameter 'h' = 1e-300"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("steps"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d.path() / "tiny"));
  }
}

// rope-flow's discrete step (3) is a depth model: its state taps are taps/flow/layer_K.npy
// [runs, tokens, d] with unit tokens, layer 0 the start; taps with an integrator is refused.
TEST(RopePresets, DiscreteFlowWritesStateTaps) {
  TempDir d;
  CliResult r = run_cli(d.path(), {"run", "rope-flow", "--out", "o", "--no-figures", "-q", "--set", "integrator=discrete", "--set",
                                   "h=0.1", "--set", "t_end=1", "--set", "n=5", "--set", "runs=2", "--set", "taps=0,5:10:5"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (long k : {0L, 5L, 10L}) {
    std::vector<std::size_t> shape;
    const std::vector<double> x =
        tokdyn::read_npy_double(d.path() / "o" / "taps" / "flow" / ("layer_" + std::to_string(k) + ".npy"), shape);
    ASSERT_EQ(shape, (std::vector<std::size_t>{2, 5, 4})) << k;
    for (std::size_t i = 0; i < 10; ++i) {
      double n2 = 0;
      for (std::size_t j = 0; j < 4; ++j) n2 += x[i * 4 + j] * x[i * 4 + j];
      EXPECT_NEAR(n2, 1.0, 1e-14) << k;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(d.path() / "o" / "taps" / "flow" / "layer_1.npy"));
  r = run_cli(d.path(), {"run", "rope-flow", "--out", "p", "--no-figures", "-q", "--set", "taps=all"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("parameter 'taps' does not apply"), std::string::npos) << r.err;
  r = run_cli(d.path(), {"run", "rope-flow", "--out", "q", "--no-figures", "-q", "--set", "integrator=discrete", "--set", "h=0.1",
                         "--set", "t_end=1", "--set", "taps=11"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("parameter 'taps'"), std::string::npos) << r.err;
}
