// Inputs that let anyone recompute (issue 17): depth-spectra writes the start state it used to
// x0.npy and takes one back with x0 = FILE.npy; the same start gives the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "test_util.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/runtime/inputs.hpp"

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
  CliResult r = run_cli(d.path(), {"run", "coupling-frozen-kernel", "--no-figures", "--quiet", "--out", "k", "--set", "depth=3", "--set", "tokens=4",
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

TEST(Recompute, DepthSpectraTangentFrameTrajectoryAndAttention) {
  TempDir d;
  CliResult r = run_cli(d.path(), depth_args("a", {"trajectory=true"}));
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::size_t> shape;
  const std::vector<double> v0 = tokdyn::read_npy_double(d.path() / "a" / "v0.npy", shape);
  EXPECT_EQ(shape, (std::vector<std::size_t>{3, 5, 4}));
  const std::vector<double> traj = tokdyn::read_npy_double(d.path() / "a" / "trajectory.npy", shape);
  EXPECT_EQ(shape, (std::vector<std::size_t>{31, 5, 4}));
  const std::vector<double> x0 = tokdyn::read_npy_double(d.path() / "a" / "x0.npy", shape);
  EXPECT_TRUE(std::equal(x0.begin(), x0.end(), traj.begin()));  // x(0) is the start
  // The frame written back as v0 gives the same exponents to the bit (it is already orthonormal).
  fs::copy_file(d.path() / "a" / "v0.npy", d.path() / "frame.npy");
  r = run_cli(d.path(), depth_args("b", {"v0=frame.npy"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(d.path() / "a" / "lyapunov.csv"), slurp(d.path() / "b" / "lyapunov.csv"));
  // A rank-deficient frame (tangent 3 = tangent 1 + tangent 2) is refused, naming the parameter.
  std::vector<double> bad = v0;
  for (std::size_t i = 0; i < 20; ++i) bad[40 + i] = v0[i] + v0[20 + i];
  tokdyn::write_npy(d.path() / "bad.npy", bad.data(), {3, 5, 4});
  r = run_cli(d.path(), depth_args("c", {"v0=bad.npy"}));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("parameter 'v0' (bad.npy): the initial tangent frame is rank-deficient"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d.path() / "c"));
  // tangent_seed beside a given frame would be ignored: refused.
  r = run_cli(d.path(), depth_args("e", {"v0=frame.npy", "tangent_seed=3"}));
  EXPECT_EQ(r.code, 2) << r.err;
  // Attention weights on request (rope): rows are probability vectors; the SSM has none (refused).
  r = run_cli(d.path(), {"run", "depth-spectra", "--no-figures", "--quiet", "--out", "att", "--set", "model=rope", "--set", "d=4",
                         "--set", "tokens=6", "--set", "depth=10", "--set", "burn_in=2", "--set", "k=2", "--set", "attention=1,10"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* f : {"layer_1.npy", "layer_10.npy"}) {
    const std::vector<double> a = tokdyn::read_npy_double(d.path() / "att" / "attention" / f, shape);
    ASSERT_EQ(shape, (std::vector<std::size_t>{1, 1, 6, 6})) << f;  // [runs, heads, tokens, tokens]
    for (int t = 0; t < 6; ++t) {
      double sum = 0;
      for (int s = 0; s < 6; ++s) sum += a[static_cast<std::size_t>(t * 6 + s)];
      EXPECT_NEAR(sum, 1.0, 1e-14) << f << " row " << t;
    }
  }
  r = run_cli(d.path(), depth_args("f", {"attention=2"}));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("attention"), std::string::npos) << r.err;
}

// The drawn inputs are written (inputs/, listed in the manifest) and rerunning on them gives the
// same bits: a cocycle family, and a random Transformer stack.
TEST(Recompute, DrawnInputsAreWrittenAndRerunOnThem) {
  TempDir d;
  CliResult r = run_cli(d.path(), {"run", "cocycle-spectra", "--no-figures", "--quiet", "--out", "a", "--set", "family=G2", "--set", "d=4",
                                   "--set", "depth=60", "--set", "rank=false"});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::exists(d.path() / "a" / "inputs" / "generators.npy"));
  EXPECT_NE(slurp(d.path() / "a" / "manifest.json").find("\"inputs/generators.npy\""), std::string::npos);
  r = run_cli(d.path(), {"run", "cocycle-spectra", "--no-figures", "--quiet", "--out", "b", "--set", "generators=a/inputs/generators.npy",
                         "--set", "rank=false"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(d.path() / "a" / "lyapunov.csv"), slurp(d.path() / "b" / "lyapunov.csv"));

  const std::vector<std::string> fk{"run", "coupling-frozen-kernel", "--no-figures", "--quiet", "--set", "depth=3", "--set", "tokens=4",
                                    "--set", "d=4", "--set", "d_ff=8"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = fk;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  r = run_cli(d.path(), with({"--out", "t1"}));
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::exists(d.path() / "t1" / "inputs" / "tf_weights.safetensors"));
  r = run_cli(d.path(), with({"--out", "t2", "--set", "tf_weights=t1/inputs/tf_weights.safetensors"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(d.path() / "t1" / "jacobian.csv"), slurp(d.path() / "t2" / "jacobian.csv"));
  EXPECT_FALSE(fs::exists(d.path() / "t2" / "inputs"));  // nothing drawn: nothing to write
}

// Large inputs are listed but written only on request (--inputs sets RunContext::write_inputs).
TEST(Recompute, LargeInputsAreListedAndWrittenOnRequest) {
  TempDir d;
  const std::vector<Eigen::MatrixXd> big(33, Eigen::MatrixXd::Ones(256, 256));  // 33 x 512 KiB > 16 MiB
  const std::vector<Eigen::MatrixXd> small(2, Eigen::MatrixXd::Identity(3, 3));
  for (bool on_request : {false, true}) {
    tokdyn::RunContext ctx;
    ctx.dir = d.path() / (on_request ? "on" : "off");
    fs::create_directories(ctx.dir);
    ctx.write_inputs = on_request;
    tokdyn::write_input_stack(ctx, "big.npy", big, "a big stack");
    tokdyn::write_input_stack(ctx, "small.npy", small, "a small stack");
    EXPECT_TRUE(fs::exists(ctx.dir / "inputs" / "small.npy"));
    EXPECT_EQ(fs::exists(ctx.dir / "inputs" / "big.npy"), on_request);
    EXPECT_EQ(ctx.notes["inputs"]["inputs/big.npy"]["written"], on_request);
    if (!on_request) {
      EXPECT_NE(ctx.notes["inputs"]["inputs/big.npy"]["not_written"].get<std::string>().find("--inputs"), std::string::npos);
    }
    std::vector<std::size_t> shape;
    const std::vector<double> s = tokdyn::read_npy_double(ctx.dir / "inputs" / "small.npy", shape);
    EXPECT_EQ(shape, (std::vector<std::size_t>{2, 3, 3}));
    EXPECT_EQ(s[0], 1.0);
    EXPECT_EQ(s[1], 0.0);
    EXPECT_EQ(s[4], 1.0);
  }
}
