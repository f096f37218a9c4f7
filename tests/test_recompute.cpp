// Inputs that let anyone recompute (issue 17): depth-spectra writes the start state it used to
// x0.npy and takes one back with x0 = FILE.npy; the same start gives the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "test_util.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/npy.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::CliResult;
using tokdyn::testing::run_cli;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;

namespace {

std::vector<std::string> depth_args(const std::string& out, std::vector<std::string> sets) {
  std::vector<std::string> a{"run", "depth-spectra", "--no-figures", "--quiet", "--out", out, "--set", "model=ssm", "--set", "n=4",
                             "--set", "m=4", "--set", "tokens=5", "--set", "depth=30", "--set", "burn_in=5", "--set", "k=3"};
  for (auto& s : sets) {
    a.push_back("--set");
    a.push_back(s);
  }
  return a;
}

}  // namespace

TEST(Recompute, DepthSpectraStartStateRoundTripsThroughX0) {
  TempDir d;
  CliResult r = run_cli(d.path(), depth_args("a", {}));
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::exists(d.path() / "a" / "x0.npy"));
  std::vector<std::size_t> shape;
  const std::vector<double> x0 = tokdyn::read_npy_double(d.path() / "a" / "x0.npy", shape);
  EXPECT_EQ(shape, (std::vector<std::size_t>{5, 4}));
  // Feeding the written start back gives the same exponents, to the bit.
  fs::copy_file(d.path() / "a" / "x0.npy", d.path() / "start.npy");
  r = run_cli(d.path(), depth_args("b", {"x0=start.npy"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(d.path() / "a" / "lyapunov.csv"), slurp(d.path() / "b" / "lyapunov.csv"));
  EXPECT_EQ(slurp(d.path() / "a" / "x0.npy"), slurp(d.path() / "b" / "x0.npy"));
  // A start off the sphere is normalised token by token (the model lives on the sphere): 3 x0 = x0.
  std::vector<double> scaled = x0;
  for (double& v : scaled) v *= 3.0;
  tokdyn::write_npy(d.path() / "scaled.npy", scaled.data(), {5, 4});
  r = run_cli(d.path(), depth_args("c", {"x0=scaled.npy"}));
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::size_t> s2;
  const std::vector<double> used = tokdyn::read_npy_double(d.path() / "c" / "x0.npy", s2);
  for (std::size_t i = 0; i < used.size(); ++i) EXPECT_NEAR(used[i], x0[i], 1e-15);
}

TEST(Recompute, DepthSpectraRefusesAStartOfTheWrongShape) {
  TempDir d;
  std::vector<double> v(12, 0.5);
  tokdyn::write_npy(d.path() / "bad.npy", v.data(), {3, 4});
  const CliResult r = run_cli(d.path(), depth_args("o", {"x0=bad.npy"}));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("parameter 'x0' (bad.npy): shape [3, 4]; expected [tokens, d] = [5, 4]"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d.path() / "o"));
}

TEST(Recompute, FrozenKernelTakesAnyListOfN) {
  TempDir d;
  CliResult r = run_cli(d.path(), {"run", "coupling-frozen-kernel", "--no-figures", "--quiet", "--out", "k", "--set", "L=3", "--set", "T=4",
                                   "--set", "d=4", "--set", "d_ff=8", "--set", "kappa_n=5,7,64"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string k = slurp(d.path() / "k" / "kappa.csv");
  EXPECT_EQ(std::count(k.begin(), k.end(), '\n'), 4) << k;  // header + 3 rows
  EXPECT_EQ(k.find("\n5,"), k.find('\n')) << k;
  EXPECT_NE(k.find("\n7,"), std::string::npos) << k;
  EXPECT_NE(k.find("\n64,"), std::string::npos) << k;
  r = run_cli(d.path(), {"run", "coupling-frozen-kernel", "--no-figures", "--quiet", "--out", "k2", "--set", "kappa_n=5,5"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("kappa_n"), std::string::npos) << r.err;
}
