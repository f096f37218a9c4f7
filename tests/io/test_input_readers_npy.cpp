// The .npy header parser never accepts wrong numbers: keys in any order, a shape that lies about
// the data is refused before allocating, malformed dicts are refused with their position, dtypes,
// byte order and Fortran order are honoured, and files written by numpy read the same.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "input_bytes.hpp"
#include "input_readers_fixtures.hpp"
#include "test_util.hpp"
#include "tokdyn/io/npy.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::TempDir;
using tokdyn::testing::input_readers::error_of;

// ---------------------------------------------------------------------------------------------
// .npy header parser

TEST(NpyHeader, KeysInAnyOrderQuotesSpacesAndTrailingCommas) {
  TempDir d;
  const std::string data = le64(5) + le64(-7) + le64(123456789012345) + le64(0) + le64(1) + le64(2);
  const std::vector<std::int64_t> expect{5, -7, 123456789012345, 0, 1, 2};
  const char* dicts[] = {
      "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }          \n",
      "{'shape': (2, 3), 'descr': '<i8', 'fortran_order': False}\n",
      "{\"fortran_order\":False,\"shape\":(2,3,),\"descr\":\"<i8\",}",
      "{ 'descr' : '<i8' ,\n 'fortran_order' : False ,\t'shape' : ( 2 , 3 ) }",
      "{'descr': '<i8', 'fortran_order': False, 'shape': (2L, 3L), }\n",
  };
  for (const char* dict : dicts) {
    for (int major : {1, 2, 3}) {
      put(d.path() / "a.npy", npy_bytes(dict, data, major));
      std::vector<std::size_t> shape;
      EXPECT_EQ(read_npy_int(d.path() / "a.npy", shape), expect) << dict << " v" << major;
      EXPECT_EQ(shape, (std::vector<std::size_t>{2, 3})) << dict;
    }
  }
}

TEST(NpyHeader, LyingShapeIsRefusedBeforeAllocating) {
  TempDir d;
  // 130 bytes claiming 2^40 int64 values: refused from the header (no 8 TiB allocation).
  std::string dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (1048576, 1048576), }";
  dict.resize(118, ' ');
  dict += '\n';
  const std::string file = npy_bytes(dict, std::string(1, '\0'));
  ASSERT_EQ(file.size(), 130u);
  put(d.path() / "lie.npy", file);
  std::vector<std::size_t> shape;
  const std::string m = error_of([&] { read_npy_int(d.path() / "lie.npy", shape, std::uint64_t(1) << 62); });
  EXPECT_NE(m.find("shape (1048576, 1048576) of dtype '<i8' needs 8796093022208 bytes of data, but the file holds 1 bytes"),
            std::string::npos) << m;
  // A shape whose product overflows 64 bits.
  put(d.path() / "ovf.npy", npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }\n", ""));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "ovf.npy", shape); }).find("more than 2^64 bytes"), std::string::npos);
  // Short and long data.
  put(d.path() / "short.npy", npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }\n", std::string(8, '\0')));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "short.npy", shape); }).find("needs 12 bytes of data, but the file holds 8"),
            std::string::npos);
  put(d.path() / "long.npy", npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }\n", std::string(8, '\0')));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "long.npy", shape); }).find("needs 4 bytes of data, but the file holds 8"),
            std::string::npos);
  // A header length past the end of the file.
  std::string cut = npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }\n", "");
  put(d.path() / "cut.npy", cut.substr(0, 30));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "cut.npy", shape); }).find("runs past the end of the file"), std::string::npos);
}

TEST(NpyHeader, MalformedDictsAreRefusedWithTheirPosition) {
  const std::string base = "'fortran_order': False, 'shape': (1,)";
  struct Case {
    std::string dict, needle;
  };
  const Case cases[] = {
      {"{'descr': '<i8', 'descr': '<i8', " + base + "}", "key 'descr' given twice"},
      {"{'descr': '<i8', " + base + ", 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<i8', 'fortran_order': False}", "has no 'shape'"},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (1)}", "shape (1) is an integer, not a tuple"},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': [1]}", "a tuple of integers"},
      {"{'descr': '<i8', 'fortran_order': false, 'shape': (1,)}", "True or False"},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (-1,)}", "a non-negative integer"},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (01,)}", "leading zero"},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (18446744073709551616,)}", "above 2^64 - 1"},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (1,)} x", "after the dict"},
      {"{'descr': '<i8' 'fortran_order': False, 'shape': (1,)}", "',' or '}'"},
      {"{'descr': '<i\\x38', " + base + "}", "inside a string"},
      {"{'descr': [('a', '<i8')], " + base + "}", "a quoted dtype string"},
      {"{'descr': '<U8', " + base + "}", "not a simple numeric dtype"},
      {"{'descr': '|O', " + base + "}", "not a simple numeric dtype"},
      {"{'descr': '|i8', " + base + "}", "no byte order ('|')"},
      {"{'descr': '<i3', " + base + "}", "not a simple numeric dtype"},
      {"{'descr': '<i8', " + base, "',' or '}'"},
  };
  for (const Case& c : cases) {
    const std::string file = npy_bytes(c.dict + "\n", std::string(8, '\0'));
    const std::string m = error_of([&] {
      npy::parse_header(reinterpret_cast<const unsigned char*>(file.data()), file.size(), file.size(), "t.npy");
    });
    EXPECT_EQ(m.rfind("t.npy: ", 0), 0u) << m;
    EXPECT_NE(m.find(c.needle), std::string::npos) << c.dict << "\n" << m;
    EXPECT_NE(m.find("expected"), std::string::npos) << m;
  }
  // Preamble problems.
  for (auto [bytes, needle] : {std::pair<std::string, std::string>{"PK\x03\x04", "no \\x93NUMPY magic"},
                               {std::string("\x93NUMPY\x04\x00\x10\x00", 10), "version 4.0"},
                               {std::string("\x93NUMPY\x01\x01\x10\x00", 10), "version 1.1"},
                               {std::string("\x93NUMPY\x02\x00\x00\x00\x00\x01", 12), "above the maximum 65536"},
                               {std::string("\x93NUMPY\x01", 7), "ends inside the preamble"}}) {
    const std::string m = error_of([&] {
      npy::parse_header(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), bytes.size(), "t.npy");
    });
    EXPECT_NE(m.find(needle), std::string::npos) << m;
  }
}

TEST(NpyHeader, DtypesByteOrderAndFortranOrder) {
  TempDir d;
  std::vector<std::size_t> shape;
  // Big-endian int32, 2 x 2, Fortran order: file order (0,0), (1,0), (0,1), (1,1).
  const std::string be = std::string("\x00\x00\x00\x01", 4) + std::string("\xff\xff\xff\xfe", 4) +
                         std::string("\x00\x00\x00\x03", 4) + std::string("\x80\x00\x00\x00", 4);
  put(d.path() / "be.npy", npy_bytes("{'descr': '>i4', 'fortran_order': True, 'shape': (2, 2), }\n", be));
  EXPECT_EQ(read_npy_int(d.path() / "be.npy", shape), (std::vector<std::int64_t>{1, 3, -2, -2147483648LL}));
  // 3-D Fortran order, little-endian uint16: value = f-order position.
  std::string le;
  for (int i = 0; i < 12; ++i) le += std::string{static_cast<char>(i), '\0'};
  put(d.path() / "f3.npy", npy_bytes("{'descr': '<u2', 'fortran_order': True, 'shape': (2, 3, 2), }\n", le));
  const auto f3 = read_npy_int(d.path() / "f3.npy", shape);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 2; ++k)
        EXPECT_EQ(f3[(i * 3 + j) * 2 + k], static_cast<std::int64_t>(i + 2 * j + 6 * k));
  // Unsigned 64-bit above INT64_MAX, floats, bools: refused by name.
  put(d.path() / "u8.npy", npy_bytes("{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }\n", std::string(8, '\xff')));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "u8.npy", shape); }).find("above 2^63 - 1"), std::string::npos);
  put(d.path() / "f8.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n", std::string(8, '\0')));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "f8.npy", shape); }).find("dtype '<f8' is not an integer type"),
            std::string::npos);
  put(d.path() / "b1.npy", npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }\n", std::string(1, '\1')));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "b1.npy", shape); }).find("not an integer type"), std::string::npos);
  // Scalars and empty arrays.
  put(d.path() / "s.npy", npy_bytes("{'descr': '|i1', 'fortran_order': False, 'shape': (), }\n", "\xfe"));
  EXPECT_EQ(read_npy_int(d.path() / "s.npy", shape), (std::vector<std::int64_t>{-2}));
  EXPECT_TRUE(shape.empty());
  put(d.path() / "z.npy", npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 18446744073709551615), }\n", ""));
  EXPECT_TRUE(read_npy_int(d.path() / "z.npy", shape).empty());
}

TEST(NpyHeader, NumpyWrittenFilesReadTheSame) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no numpy";
  TempDir d;
  const std::string script =
      "import numpy as np, sys\n"
      "a = np.arange(24, dtype=np.int64).reshape(2, 3, 4) * 1000003 - 5000\n"
      "d = sys.argv[1]\n"
      "for t in ['<i8', '>i8', '<i4', '>u4', '<i2', '|u1', '|i1', '<u8']:\n"
      "    np.save(d + '/c' + t[1:] + ('be' if t[0] == '>' else '') + '.npy', (a % 100 if t[1:] in ('u1', 'i1') else a if t[1] != 'u' else abs(a)).astype(t))\n"
      "np.save(d + '/fortran.npy', np.asfortranarray(a))\n"
      "np.lib.format.write_array(open(d + '/v2.npy', 'wb'), a, version=(2, 0))\n"
      "np.lib.format.write_array(open(d + '/v3.npy', 'wb'), a, version=(3, 0))\n";
  put(d.path() / "w.py", script);
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (d.path() / "w.py").string() + " " + d.path().string()).c_str()), 0);
  std::vector<std::int64_t> a(24);
  for (int i = 0; i < 24; ++i) a[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(i) * 1000003 - 5000;
  std::vector<std::size_t> shape;
  for (const char* f : {"ci8.npy", "ci8be.npy", "ci4.npy", "fortran.npy", "v2.npy", "v3.npy"}) {
    EXPECT_EQ(read_npy_int(d.path() / f, shape), a) << f;
    EXPECT_EQ(shape, (std::vector<std::size_t>{2, 3, 4})) << f;
  }
  for (const char* f : {"cu4be.npy", "cu8.npy"}) {
    std::vector<std::int64_t> b(a);
    for (auto& v : b) v = std::abs(v);
    EXPECT_EQ(read_npy_int(d.path() / f, shape), b) << f;
  }
  {
    std::vector<std::int64_t> b(a);
    for (auto& v : b) v = static_cast<std::int64_t>(static_cast<std::uint16_t>(v));  // astype('<i2') wraps
    for (auto& v : b) v = static_cast<std::int16_t>(v);
    EXPECT_EQ(read_npy_int(d.path() / "ci2.npy", shape), b);
  }
}
