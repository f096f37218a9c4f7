// CsvWriter (header, 17-digit doubles, cell counts) and write_npy (NPY 1.0 header and data).
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "tokdyn/io/csv.hpp"

#include "test_util.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::TempDir;
using tokdyn::testing::slurp;
using tokdyn::CsvWriter;

namespace {



std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST(Csv, FirstLineIsTheColumnNames) {
  TempDir d;
  { CsvWriter w(d.path() / "a.csv", {"run", "layer", "lambda1"}); }
  EXPECT_EQ(slurp(d.path() / "a.csv"), "run,layer,lambda1\n");
}

TEST(Csv, DoublesRoundTripExactlyWith17Digits) {
  TempDir d;
  const std::vector<double> values = {0.1, 1.0 / 3.0, M_PI, 1e-300, -2.5e300, 5e-324, 0.30000000000000004,
                                      std::nextafter(1.0, 2.0)};
  {
    CsvWriter w(d.path() / "a.csv", {"x"});
    for (double v : values) {
      w.cell(v);
      w.end_row();
    }
  }
  const auto lines = lines_of(slurp(d.path() / "a.csv"));
  ASSERT_EQ(lines.size(), values.size() + 1);
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(std::strtod(lines[i + 1].c_str(), nullptr), values[i]) << lines[i + 1];
  }
}

TEST(Csv, DoubleUsesPrintfG17Format) {
  TempDir d;
  {
    CsvWriter w(d.path() / "a.csv", {"x"});
    w.cell(0.1).end_row();
  }
  EXPECT_EQ(lines_of(slurp(d.path() / "a.csv")).at(1), "0.10000000000000001");
}

// The writer prints with std::to_chars (fast); its text must stay that of printf("%.17g") byte for
// byte over magnitudes, subnormals, signed zeros, infinities and NaN (results written before compare
// equal), and integers that of "%ld".
TEST(Csv, DoublesAreThePrintfG17TextForAnyValue) {
  std::vector<double> values = {0.0, -0.0, 1.0, -1.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                                1e16, 1e17, 123456789012345678.0, 1e-5, 1e-4, 0.5, 100.0, 1e21, 1e22,
                                std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN()};
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 20000; ++i) {  // bit patterns over the whole range (xorshift), finite ones kept
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double v;
    std::memcpy(&v, &x, sizeof v);
    if (std::isfinite(v)) values.push_back(v);
    values.push_back(static_cast<double>(static_cast<std::int64_t>(x >> 20)) * 1e-6);
  }
  TempDir d;
  const std::vector<long> ints = {0, -1, 42, LONG_MAX, LONG_MIN};
  {
    CsvWriter w(d.path() / "a.csv", {"x"});
    for (double v : values) w.cell(v).end_row();
    for (long v : ints) w.cell(v).end_row();
  }
  const auto lines = lines_of(slurp(d.path() / "a.csv"));
  ASSERT_EQ(lines.size(), values.size() + ints.size() + 1);
  char buf[64];
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%.17g", values[i]);
    ASSERT_EQ(lines[i + 1], buf) << i;
  }
  for (std::size_t i = 0; i < ints.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%ld", ints[i]);
    ASSERT_EQ(lines[values.size() + i + 1], buf);
  }
}

TEST(Csv, IntegersArePrintedExactly) {
  TempDir d;
  {
    CsvWriter w(d.path() / "a.csv", {"a", "b", "c"});
    w.cell(LONG_MAX).cell(-7).cell(std::size_t{12}).end_row();
  }
  EXPECT_EQ(lines_of(slurp(d.path() / "a.csv")).at(1), "9223372036854775807,-7,12");
}

TEST(Csv, EmptyWritesAnEmptyCell) {
  TempDir d;
  {
    CsvWriter w(d.path() / "a.csv", {"a", "b", "c"});
    w.cell(1).empty().cell(std::string("x")).end_row();
    w.empty().empty().empty().end_row();
  }
  const auto lines = lines_of(slurp(d.path() / "a.csv"));
  EXPECT_EQ(lines.at(1), "1,,x");
  EXPECT_EQ(lines.at(2), ",,");
}

TEST(Csv, StringsAreWrittenAsIs) {
  TempDir d;
  {
    CsvWriter w(d.path() / "a.csv", {"model"});
    w.cell(std::string("pre-ln")).end_row();
  }
  EXPECT_EQ(lines_of(slurp(d.path() / "a.csv")).at(1), "pre-ln");
}

TEST(Csv, StringWithSeparatorIsQuoted) {
  TempDir d;
  {
    CsvWriter w(d.path() / "a.csv", {"a", "b"});
    w.cell(std::string("x,\"y\"")).cell(2).end_row();
  }
  EXPECT_EQ(lines_of(slurp(d.path() / "a.csv")).at(1), "\"x,\"\"y\"\"\",2");
}

TEST(Csv, EndRowThrowsOnTooFewCells) {
  TempDir d;
  CsvWriter w(d.path() / "a.csv", {"a", "b"});
  w.cell(1);
  EXPECT_THROW(w.end_row(), std::logic_error);
}

TEST(Csv, EndRowThrowsOnTooManyCells) {
  TempDir d;
  CsvWriter w(d.path() / "a.csv", {"a", "b"});
  w.cell(1).cell(2).cell(3);
  EXPECT_THROW(w.end_row(), std::logic_error);
}

TEST(Csv, RejectedRowIsNotWritten) {
  TempDir d;
  {
    CsvWriter w(d.path() / "a.csv", {"a", "b"});
    w.cell(1);
    EXPECT_THROW(w.end_row(), std::logic_error);
    w.cell(3).cell(4).end_row();
  }
  EXPECT_EQ(slurp(d.path() / "a.csv"), "a,b\n3,4\n");
}

TEST(Csv, UnwritableFileThrows) {
  TempDir d;
  EXPECT_THROW(CsvWriter(d.path() / "no-such-dir" / "a.csv", {"a"}), std::runtime_error);
}

// ---------------------------------------------------------------------------------------------
// .npy

namespace {

struct Npy {
  std::string magic;     // first 6 bytes
  int major = 0, minor = 0;
  std::size_t header_len = 0;
  std::string header;    // the dict, padding and newline
  std::string data;      // the bytes after the header
  std::size_t total_header = 0;
};

Npy read_npy(const fs::path& p) {
  const std::string bytes = slurp(p);
  Npy n;
  if (bytes.size() < 10) return n;
  n.magic = bytes.substr(0, 6);
  n.major = static_cast<unsigned char>(bytes[6]);
  n.minor = static_cast<unsigned char>(bytes[7]);
  n.header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  n.total_header = 10 + n.header_len;
  n.header = bytes.substr(10, n.header_len);
  n.data = bytes.substr(std::min(bytes.size(), n.total_header));
  return n;
}

std::string dict_of(const Npy& n) {  // header without trailing padding and newline
  std::string h = n.header;
  while (!h.empty() && (h.back() == ' ' || h.back() == '\n')) h.pop_back();
  return h;
}

}  // namespace

TEST(Npy, Float64HasMagicVersionAndDescr) {
  TempDir d;
  const double x[6] = {1, 2, 3, 4, 5, 6};
  tokdyn::write_npy(d.path() / "a.npy", x, {2, 3});
  const Npy n = read_npy(d.path() / "a.npy");
  EXPECT_EQ(n.magic, std::string("\x93NUMPY"));
  EXPECT_EQ(n.major, 1);
  EXPECT_EQ(n.minor, 0);
  EXPECT_EQ(dict_of(n), "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }");
}

TEST(Npy, HeaderIsPaddedToMultipleOf64EndingInNewline) {
  TempDir d;
  const double x[24] = {};
  const std::vector<std::vector<std::size_t>> shapes = {{24}, {2, 12}, {2, 3, 4}, {1, 1, 1, 24}, {}};
  for (const auto& shape : shapes) {
    tokdyn::write_npy(d.path() / "a.npy", x, shape);
    const Npy n = read_npy(d.path() / "a.npy");
    EXPECT_EQ(n.total_header % 64, 0u) << shape.size();
    ASSERT_FALSE(n.header.empty());
    EXPECT_EQ(n.header.back(), '\n');
  }
}

TEST(Npy, OneDimensionalShapeIsAOneTuple) {
  TempDir d;
  const double x[5] = {};
  tokdyn::write_npy(d.path() / "a.npy", x, {5});
  EXPECT_EQ(dict_of(read_npy(d.path() / "a.npy")), "{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }");
}

TEST(Npy, Float64DataIsRawLittleEndianInCOrder) {
  TempDir d;
  const double x[6] = {0.1, -2.0, 3.5, 1e-300, 5.0, 6.25};
  tokdyn::write_npy(d.path() / "a.npy", x, {3, 2});
  const Npy n = read_npy(d.path() / "a.npy");
  ASSERT_EQ(n.data.size(), sizeof x);
  EXPECT_EQ(std::memcmp(n.data.data(), x, sizeof x), 0);
}

TEST(Npy, Float32UsesF4) {
  TempDir d;
  const float x[3] = {1.5f, -2.0f, 0.1f};
  tokdyn::write_npy(d.path() / "a.npy", x, {3});
  const Npy n = read_npy(d.path() / "a.npy");
  EXPECT_EQ(dict_of(n), "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
  ASSERT_EQ(n.data.size(), sizeof x);
  EXPECT_EQ(std::memcmp(n.data.data(), x, sizeof x), 0);
}

TEST(Npy, Int64UsesI8) {
  TempDir d;
  const std::int64_t x[4] = {1, -2, INT64_MAX, INT64_MIN};
  tokdyn::write_npy(d.path() / "a.npy", x, {2, 2});
  const Npy n = read_npy(d.path() / "a.npy");
  EXPECT_EQ(dict_of(n), "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }");
  ASSERT_EQ(n.data.size(), sizeof x);
  EXPECT_EQ(std::memcmp(n.data.data(), x, sizeof x), 0);
}

TEST(Npy, NumpyLoadsTheSameValues) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no numpy";
  TempDir d;
  const double x[6] = {0.1, -2.0, 3.5, 1e-300, 5.0, 6.25};
  tokdyn::write_npy(d.path() / "a.npy", x, {2, 3});
  const std::string cmd = "/usr/bin/python3 -c \"import numpy as np, sys; a = np.load(sys.argv[1]); "
                          "assert a.shape == (2, 3) and a.dtype == np.float64; "
                          "assert (a == np.array([[0.1, -2.0, 3.5], [1e-300, 5.0, 6.25]])).all()\" " +
                          (d.path() / "a.npy").string();
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

TEST(Csv, BlankNonfiniteColumnsWriteEmptyCellsOthersKeepNan) {
  TempDir d;
  {
    CsvWriter w(d.path() / "t.csv", {"a", "b", "c"});
    w.blank_nonfinite({"b"});
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    w.cell(nan).cell(nan).cell(1.5).end_row();
    w.cell(inf).cell(-inf).cell(2.0).end_row();
    w.cell(0.5).cell(0.25).cell(nan).end_row();
  }
  EXPECT_EQ(slurp(d.path() / "t.csv"), "a,b,c\nnan,,1.5\ninf,,2\n0.5,0.25,nan\n");
  CsvWriter w(d.path() / "u.csv", {"a"});
  EXPECT_THROW(w.blank_nonfinite({"nope"}), std::logic_error);
}
