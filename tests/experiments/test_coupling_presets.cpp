// The coupling-paper presets of part 1 through the CLI: each runs at a small size and writes its
// files; bad input of each kind exits 2 with one line and leaves nothing behind; safetensors
// weights are read back bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tokdyn/io/safetensors.hpp"
#include "tokdyn/models/transformer/weights_file.hpp"
#include "tokdyn/models/transformer/transformer.hpp"

#include "cli_checks.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::CliResult;
using tokdyn::testing::expect_bad_runs;
using tokdyn::testing::run_cli;
using tokdyn::testing::TempDir;

namespace {

TEST(CouplingPresets, RunSmall) {
  TempDir d;
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"coupling-frozen-kernel", {"--set", "depth=3", "--set", "tokens=4", "--set", "d=4", "--set", "d_ff=8"}},
      {"coupling-bounded-step", {"--set", "depth=3", "--set", "samples=2", "--set", "ascent_steps=3"}},
      {"coupling-rank-collapse", {"--set", "depth=6", "--set", "runs=2", "--set", "mask=block", "--set", "block=4"}},
      {"coupling-qk-specificity", {"--set", "depth=6", "--set", "runs=2", "--set", "perturb_from=4"}}};
  for (const auto& [name, sets] : runs) {
    std::vector<std::string> a = {"run", name, "--out", name, "--no-figures", "--quiet"};
    a.insert(a.end(), sets.begin(), sets.end());
    const CliResult r = run_cli(d.path(), a);
    ASSERT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_TRUE(fs::exists(d.path() / name / "manifest.json")) << name;
  }
  EXPECT_TRUE(fs::exists(d.path() / "coupling-frozen-kernel" / "jacobian.csv"));
  EXPECT_TRUE(fs::exists(d.path() / "coupling-bounded-step" / "singular.csv"));
  EXPECT_TRUE(fs::exists(d.path() / "coupling-rank-collapse" / "rate.csv"));
  EXPECT_TRUE(fs::exists(d.path() / "coupling-qk-specificity" / "final.csv"));
  // R1 and R4 (issue 17: every checkable statement has rows), against closed forms and a reduced
  // formula evaluated without attention; R5 against the closed-form kernel 1/t.
  const auto rows = tokdyn::testing::read_csv_rows(d.path() / "coupling-frozen-kernel" / "checks.csv");
  int r1 = 0, r4 = 0, r5 = 0;
  for (const auto& row : rows) {
    const std::string id = row.at("check");
    if (id != "R1" && id != "R4" && id != "R5") continue;
    EXPECT_NE(row.at("reference_kind"), "consistency") << id << ": " << row.at("statement");
    const double v = std::stod(row.at("value"));
    if (id == "R1") {
      ++r1;
      EXPECT_TRUE(row.at("reference_kind") == "bound" ? v >= 0 : v <= 1e-12) << row.at("quantity");
    }
    if (id == "R4") {
      ++r4;
      EXPECT_LE(v, 1e-13) << row.at("quantity");
    }
    if (id == "R5" && row.at("quantity") == "max |alpha - alpha*|") {
      ++r5;
      EXPECT_LE(v, 1e-14);
    }
  }
  EXPECT_EQ(r1, 3);
  EXPECT_EQ(r4, 2);
  EXPECT_EQ(r5, 1);
}

TEST(CouplingPresets, BadInputExitsTwo) {
  TempDir d;
  const std::vector<std::vector<std::string>> bad = {
      {"coupling-frozen-kernel", "mask=diagonal"},
      {"coupling-frozen-kernel", "d=0"},
      {"coupling-frozen-kernel", "placement=post"},
      {"coupling-frozen-kernel", "positional=rope"},
      {"coupling-bounded-step", "norm=none"},
      {"coupling-bounded-step", "eps_leak=0"},
      {"coupling-rank-collapse", "positional=rope", "d=5"},
      {"coupling-rank-collapse", "tf_weights=/nonexistent/w.safetensors"},
      {"coupling-qk-specificity", "perturb_from=100", "depth=10"},
      {"coupling-qk-specificity", "tying=tied"},
      {"coupling-qk-specificity", "sigma_w=-1"}};
  expect_bad_runs(d.path(), bad);
}

// Weights written to a safetensors file (F32) are read back; a wrong shape is an InputError (exit 2).
TEST(CouplingPresets, SafetensorsWeights) {
  using namespace tokdyn;
  TempDir d;
  tf::Config c;
  c.d = 4;
  c.d_ff = 6;
  std::vector<std::vector<float>> store;
  std::vector<st::TensorToWrite> ts;
  std::vector<tf::LayerWeights> ref;
  for (int l = 0; l < 2; ++l) {
    tf::LayerWeights W = tf::random_weights(c, l, 1.0, 0.3, 7);
    auto add = [&](const std::string& n, const Mat& M) {
      std::vector<float> v(static_cast<std::size_t>(M.size()));
      for (Eigen::Index i = 0; i < M.size(); ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(M.data()[i]);
      store.push_back(v);
      const std::vector<std::uint64_t> shape =
          M.cols() == 1 ? std::vector<std::uint64_t>{static_cast<std::uint64_t>(M.rows())}
                        : std::vector<std::uint64_t>{static_cast<std::uint64_t>(M.rows()), static_cast<std::uint64_t>(M.cols())};
      ts.push_back({"layers." + std::to_string(l) + "." + n, st::DType::F32, shape, nullptr});
    };
    add("W_Q", W.W_Q);
    add("W_K", W.W_K);
    add("W_V", W.W_V);
    add("W_1", W.W_1);
    add("W_2", W.W_2);
    add("b_1", Mat(W.b_1));
    add("b_2", Mat(W.b_2));
    ref.push_back(W);
  }
  for (std::size_t i = 0; i < ts.size(); ++i) ts[i].data = store[i].data();
  const fs::path f = d.path() / "w.safetensors";
  st::write_file(f, ts);
  EXPECT_EQ(tf::count_layers(f.string()), 2);
  const auto w = tf::load_weights(f.string(), c);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[1].W_1, ref[1].W_1.cast<float>().cast<double>());
  EXPECT_EQ(w[0].b_2, ref[0].b_2.cast<float>().cast<double>());
  EXPECT_EQ(w[0].g_mlp, Vec::Ones(4));
  const CliResult ok = run_cli(d.path(), {"run", "coupling-rank-collapse", "--out", "ok", "--no-figures", "--quiet", "--set", "tf_weights=w.safetensors",
                                          "--set", "d=4", "--set", "d_ff=6", "--set", "depth=2", "--set", "tokens=4", "--set", "runs=1"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  const CliResult r = run_cli(d.path(), {"run", "coupling-rank-collapse", "--out", "o", "--no-figures", "--quiet", "--set", "tf_weights=w.safetensors",
                                         "--set", "d=5", "--set", "depth=2"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("layers.0.W_Q"), std::string::npos) << r.err;
  const CliResult r2 = run_cli(d.path(), {"run", "coupling-rank-collapse", "--out", "o", "--no-figures", "--quiet", "--set", "tf_weights=w.safetensors",
                                          "--set", "d=4", "--set", "d_ff=6", "--set", "depth=3"});
  EXPECT_EQ(r2.code, 2) << r2.err;
  // Every weight set and every tensor of the file is used, or the run is refused (issue 17).
  auto refused = [&](const std::vector<std::string>& extra, const std::string& needle) {
    std::vector<std::string> a{"run", "coupling-rank-collapse", "--out", "o", "--no-figures", "--quiet", "--set", "d=4"};
    if (std::find(extra.begin(), extra.end(), "d_ff=7") == extra.end()) a.insert(a.end(), {"--set", "d_ff=6"});
    a.insert(a.end(), extra.begin(), extra.end());
    const CliResult x = run_cli(d.path(), a);
    EXPECT_EQ(x.code, 2) << needle << ": " << x.err;
    EXPECT_NE(x.err.find(needle), std::string::npos) << x.err;
    EXPECT_FALSE(fs::exists(d.path() / "o")) << needle;
  };
  refused({"--set", "tf_weights=w.safetensors", "--set", "depth=1"}, "expected exactly depth = 1");
  refused({"--set", "tf_weights=w.safetensors", "--set", "depth=2", "--set", "tying=tied"}, "tying = tied uses exactly one");
  refused({"--set", "tf_weights=w.safetensors", "--set", "tying=looped", "--set", "loop=3"}, "loop");
  refused({"--set", "tf_weights=w.safetensors", "--set", "depth=2", "--set", "sigma_w=2"}, "sigma_w");
  refused({"--set", "tf_weights=w.safetensors", "--set", "depth=2", "--set", "d_ff=7"}, "d_ff = 6");
  // A misspelt and a foreign tensor beside the real ones.
  for (const std::string extra : {"layers.0.g_atn", "layers.0.W_O", "foo"}) {
    std::vector<st::TensorToWrite> more = ts;
    std::vector<float> four(4, 1.0f);
    more.push_back({extra, st::DType::F32, {4}, four.data()});
    const fs::path g = d.path() / "extra.safetensors";
    st::write_file(g, more);
    refused({"--set", "tf_weights=extra.safetensors", "--set", "depth=2"}, "tensor '" + extra + "' is not a weight");
  }
  // depth-spectra names its own key.
  const CliResult ds = run_cli(d.path(), {"run", "depth-spectra", "--out", "o", "--no-figures", "--quiet", "--set", "model=transformer",
                                          "--set", "tf_weights=w.safetensors", "--set", "d=4", "--set", "d_ff=6", "--set", "depth=3",
                                          "--set", "burn_in=1"});
  EXPECT_EQ(ds.code, 2) << ds.err;
  EXPECT_NE(ds.err.find("parameter 'tf_weights'"), std::string::npos) << ds.err;
}

}  // namespace
