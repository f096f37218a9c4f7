// State taps (experiments/taps.hpp): the layer-selection syntax, and the one layout
// taps/<variant>/layer_K.npy for every depth model.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli_checks.hpp"
#include "test_util.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/experiments/taps.hpp"
#include "tokdyn/io/npy.hpp"

namespace tokdyn {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(Taps, SelectionSyntax) {
  EXPECT_TRUE(parse_taps("", 10).empty());
  EXPECT_EQ(parse_taps("all", 3), (std::vector<long>{0, 1, 2, 3}));
  EXPECT_EQ(parse_taps("7", 10), (std::vector<long>{7}));
  EXPECT_EQ(parse_taps("0:200:10", 200).size(), 21u);
  EXPECT_EQ(parse_taps("0:200:10", 200).back(), 200);
  EXPECT_EQ(parse_taps("2:9:3", 10), (std::vector<long>{2, 5, 8}));
  EXPECT_EQ(parse_taps("5,0:4:2,5,3:4", 10), (std::vector<long>{0, 2, 3, 4, 5}));  // sorted, each once
  for (const char* bad : {"x", "1,", ",1", "1:", ":3", "1:2:3:4", "3:1", "0:4:0", "-1", "11", "0:11", "1.5", "all,1", " 1"}) {
    try {
      parse_taps(bad, 10);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("parameter 'taps'"), std::string::npos) << e.what();
    }
  }
}

// ssm-random-silu and depth-spectra write taps/<variant>/layer_K.npy: the start state at layer 0
// (unit tokens), and the shape [runs, tokens, d].
TEST(Taps, EveryDepthModelWritesOneLayout) {
  TempDir d;
  auto r = testing::run_cli(d.path(), {"run", "ssm-random-silu", "--out", "s", "--no-figures", "--quiet", "--set", "runs=2",
                                       "--set", "depth=6", "--set", "tokens=3", "--set", "n=4", "--set", "m=2", "--set",
                                       "taps=0,4:6:2"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* v : {"silu", "no_silu"})
    for (int k : {0, 4, 6}) {
      std::vector<std::size_t> shape;
      const auto x = read_npy_double(d.path() / "s" / "taps" / v / ("layer_" + std::to_string(k) + ".npy"), shape);
      EXPECT_EQ(shape, (std::vector<std::size_t>{2, 3, 4})) << v << k;
      double n0 = 0;
      for (int j = 0; j < 4; ++j) n0 += x[static_cast<std::size_t>(j)] * x[static_cast<std::size_t>(j)];
      EXPECT_NEAR(n0, 1.0, 1e-12) << v << k;  // tokens on the sphere
    }
  EXPECT_FALSE(fs::exists(d.path() / "s" / "taps" / "silu" / "layer_2.npy"));
  for (const char* model : {"ssm", "rope", "transformer"}) {
    const std::string out = std::string("ds_") + model;
    r = testing::run_cli(d.path(), {"run", "depth-spectra", "--out", out, "--no-figures", "--quiet", "--set",
                                    std::string("model=") + model, "--set", "depth=8", "--set", "burn_in=2", "--set", "k=2",
                                    "--set", "tokens=3", "--set", "taps=all", "--set", "trajectory=true"});
    ASSERT_EQ(r.code, 0) << model << ": " << r.err;
    std::vector<std::size_t> ts, shape;
    const auto traj = read_npy_double(d.path() / out / "trajectory.npy", ts);
    for (long k = 0; k <= 8; ++k) {
      const auto x = read_npy_double(d.path() / out / "taps" / model / ("layer_" + std::to_string(k) + ".npy"), shape);
      ASSERT_EQ(shape.size(), 3u);
      EXPECT_EQ(shape[0], 1u);
      const std::size_t n = shape[1] * shape[2];
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], traj[static_cast<std::size_t>(k) * n + i]) << model << " layer " << k;
    }
  }
  // A selection outside the run, or bad syntax: exit 2, one line, nothing written.
  testing::expect_bad_runs(d.path(), {{"ssm-random-silu", "depth=4", "taps=5"},
                                      {"ssm-random-silu", "taps=0:x"},
                                      {"depth-spectra", "depth=8", "burn_in=2", "taps=0:9"}});
}

}  // namespace
}  // namespace tokdyn
