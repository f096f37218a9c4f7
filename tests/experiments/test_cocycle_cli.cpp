// read_npy_double and the cocycle presets through the CLI: a good run of each preset (tiny
// sizes) and every kind of bad input of cocycle-spectra (exit 2, one line, nothing left behind).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/npy.hpp"

#include "test_util.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::CliResult;
using tokdyn::testing::run_cli;
using tokdyn::testing::TempDir;

namespace {

// A float64 .npy written by hand: big-endian or little-endian, C or Fortran order.
void write_f8(const fs::path& p, const std::vector<double>& v, const std::string& shape, bool big, bool fortran) {
  std::string dict = std::string("{'descr': '") + (big ? ">" : "<") + "f8', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  for (double x : v) {
    unsigned char b[8];
    std::memcpy(b, &x, 8);
    if (big) std::reverse(b, b + 8);
    out.append(reinterpret_cast<const char*>(b), 8);
  }
  std::ofstream(p, std::ios::binary) << out;
}

std::vector<std::string> spectra_args(std::vector<std::string> sets) {
  std::vector<std::string> a = {"run", "cocycle-spectra", "--no-figures", "--out", "res"};
  for (auto& s : sets) {
    a.push_back("--set");
    a.push_back(s);
  }
  return a;
}

void expect_bad(const fs::path& dir, const std::vector<std::string>& args, const std::string& needle) {
  const CliResult r = run_cli(dir, args);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "res"));
}

}  // namespace

TEST(CocycleNpy, ReadsFloat64InEveryByteOrderAndLayout) {
  TempDir d;
  const std::vector<double> c_order = {1.5, -2.0, 3.25, 4.0, 5.0, -6.5};  // shape (2, 3)
  std::vector<std::size_t> shape;
  tokdyn::write_npy(d.path() / "a.npy", c_order.data(), {2, 3});
  EXPECT_EQ(tokdyn::read_npy_double(d.path() / "a.npy", shape), c_order);
  EXPECT_EQ(shape, (std::vector<std::size_t>{2, 3}));
  write_f8(d.path() / "b.npy", c_order, "(2, 3)", true, false);
  EXPECT_EQ(tokdyn::read_npy_double(d.path() / "b.npy", shape), c_order);
  // Fortran order: the file holds columns first.
  write_f8(d.path() / "f.npy", {1.5, 4.0, -2.0, 5.0, 3.25, -6.5}, "(2, 3)", false, true);
  EXPECT_EQ(tokdyn::read_npy_double(d.path() / "f.npy", shape), c_order);
  write_f8(d.path() / "fb.npy", {1.5, 4.0, -2.0, 5.0, 3.25, -6.5}, "(2, 3)", true, true);
  EXPECT_EQ(tokdyn::read_npy_double(d.path() / "fb.npy", shape), c_order);
  // Integer files are refused by the float reader and float files by the integer reader.
  const std::vector<std::int64_t> ints = {1, 2};
  tokdyn::write_npy(d.path() / "i.npy", ints.data(), {2});
  EXPECT_THROW(tokdyn::read_npy_double(d.path() / "i.npy", shape), tokdyn::InputError);
  EXPECT_THROW(tokdyn::read_npy_int(d.path() / "a.npy", shape), tokdyn::InputError);
  EXPECT_EQ(tokdyn::read_npy_int(d.path() / "i.npy", shape), ints);
  // More values than allowed: refused from the header.
  EXPECT_THROW(tokdyn::read_npy_double(d.path() / "a.npy", shape, 5), tokdyn::InputError);
}

TEST(CocycleCli, PresetsRunAtTinySizes) {
  TempDir d;
  // A weight-tied generator file: B = diag(1.2, 0.7) for 40 layers.
  std::vector<double> g;
  for (int l = 0; l < 40; ++l) g.insert(g.end(), {1.2, 0.0, 0.0, 0.7});
  tokdyn::write_npy(d.path() / "g.npy", g.data(), {40, 2, 2});
  CliResult r = run_cli(d.path(), spectra_args({"generators=g.npy", "burn_in=5", "H=5,10"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string ly = tokdyn::testing::slurp(d.path() / "res" / "lyapunov.csv");
  EXPECT_NE(ly.find("0,0.18232155679395"), std::string::npos) << ly;  // log 1.2
  for (const char* f : {"dichotomy.csv", "bundles.csv", "constants.csv", "tradeoff.csv", "summary.csv", "manifest.json"})
    EXPECT_TRUE(fs::exists(d.path() / "res" / f)) << f;
  // dichotomy.csv: the QR columns merged into each interval (as depth-spectra's).
  const std::string dich = tokdyn::testing::slurp(d.path() / "res" / "dichotomy.csv");
  EXPECT_EQ(dich.rfind("H,interval,lower,upper,columns\n", 0), 0u) << dich;
  r = run_cli(d.path(), {"run", "coupling-euler", "--no-figures", "--out", "e", "--set", "depth=3", "--set", "halvings=2",
                         "--set", "nn_depth=10"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The non-normal pair's scalars are summaries (summary.csv), not a table of their own.
  EXPECT_FALSE(fs::exists(d.path() / "e" / "nonnormal_summary.csv"));
  const std::string sum = tokdyn::testing::slurp(d.path() / "e" / "summary.csv");
  EXPECT_NE(sum.find("\nrho_B2B1,4.48606797749"), std::string::npos) << sum;
  EXPECT_NE(sum.find("\nsqrt_rho_B2B1,2.11803398874"), std::string::npos) << sum;
  r = run_cli(d.path(), {"run", "coupling-looped", "--no-figures", "--out", "lp", "--set", "d=2", "--set", "loops=20",
                         "--set", "green_window=20"});
  ASSERT_EQ(r.code, 0) << r.err;
}

TEST(CocycleCli, BadGeneratorFilesAndWindowsExit2) {
  TempDir d;
  const std::vector<double> flat = {1, 2, 3, 4, 5, 6};
  tokdyn::write_npy(d.path() / "flat.npy", flat.data(), {2, 3});
  expect_bad(d.path(), spectra_args({"generators=flat.npy"}), "expected [L, d, d]");
  tokdyn::write_npy(d.path() / "rect.npy", flat.data(), {1, 2, 3});
  expect_bad(d.path(), spectra_args({"generators=rect.npy"}), "expected [L, d, d]");
  const std::vector<std::int64_t> ints = {1, 0, 0, 1};
  tokdyn::write_npy(d.path() / "int.npy", ints.data(), {1, 2, 2});
  expect_bad(d.path(), spectra_args({"generators=int.npy"}), "not float64");
  std::vector<double> nan = {1, 0, 0, 1, 1, std::numeric_limits<double>::quiet_NaN(), 0, 1};
  tokdyn::write_npy(d.path() / "nan.npy", nan.data(), {2, 2, 2});
  expect_bad(d.path(), spectra_args({"generators=nan.npy", "burn_in=0"}), "generators[1, 0, 1]");
  expect_bad(d.path(), spectra_args({"generators=missing.npy"}), "missing.npy");
  expect_bad(d.path(), spectra_args({"depth=20", "burn_in=20"}), "parameter 'burn_in' = 20");
  expect_bad(d.path(), spectra_args({"depth=20", "burn_in=5", "H=16"}), "parameter 'H': Steklov window 16");
  expect_bad(d.path(), spectra_args({"family=G5", "d=3", "k=4", "depth=20", "burn_in=0"}), "parameter 'k' = 4");
  expect_bad(d.path(), spectra_args({"sigma=0.2,abc"}), "parameter 'sigma'");
  expect_bad(d.path(), spectra_args({"family=G4", "m=-0.5", "v=0.1,0.2"}), "parameters 'm' and 'v'");
}
