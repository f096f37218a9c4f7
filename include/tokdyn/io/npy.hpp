#pragma once
// Reading NumPy .npy files (format versions 1.0, 2.0 and 3.0). The header is a Python dict
// literal, parsed here by a small parser of exactly the literals numpy writes:
//   {'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }
// keys in any order, each exactly once, no other keys; single or double quotes; any whitespace
// between tokens (newlines too); trailing commas in the dict and the tuple; a 1-tuple (n,) and
// the empty tuple () of a scalar; Python 2's long suffix (3L) on dimensions.
// The descr is a simple dtype: byte order '<' (little), '>' (big), '=' (native = little here) or
// '|' (1-byte types only), kind b/i/u/f/c, and a size numpy knows; structured, string and object
// dtypes are refused. The shape's element count is computed overflow-safe and checked against the
// file size BEFORE anything is allocated for the data. Errors are one InputError line naming the
// file and what was expected. The parser uses the standard library only (the libFuzzer target in
// fuzz/ builds it standalone, with io/file.cpp).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tokdyn::npy {

/// Longest header accepted (numpy itself refuses more than 10000 bytes unless told otherwise).
inline constexpr std::size_t kMaxHeaderLen = 65536;
/// Bytes before the header dict: magic (6), version (2), header length (2 in 1.0, 4 in 2.0/3.0).
inline constexpr std::size_t kMaxPreamble = 12;

struct Header {
  int major = 1, minor = 0;       ///< format version
  std::string descr;              ///< as written, e.g. "<i8"
  char byte_order = '<';          ///< '<' little, '>' big ('=' and '|' are stored as '<')
  char kind = 'i';                ///< b (bool), i (signed int), u (unsigned int), f (float), c (complex)
  unsigned item_size = 8;         ///< bytes per element
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
  std::uint64_t count = 1;        ///< product of the shape (1 for a scalar, 0 with a zero dimension)
  std::uint64_t data_offset = 0;  ///< where the data begins: preamble + header length
  std::uint64_t data_bytes = 0;   ///< count * item_size, equal to file size - data_offset
};

/// Validates and parses the preamble and the header dict. `bytes` holds the first `nbytes` bytes
/// of the file (at least the whole header when valid), `file_size` is the whole file's size.
/// Checks count * item_size == file_size - data_offset (no data allocated or read).
/// Throws InputError "<what>: <problem>; expected <...>" (one line).
Header parse_header(const unsigned char* bytes, std::size_t nbytes, std::uint64_t file_size, const std::string& what);

/// The data of an integer array (kind i or u, any size and byte order) as int64 in C order
/// (a Fortran-order array is transposed to C order). `data` holds h.data_bytes bytes.
/// InputError for a non-integer dtype or an unsigned 64-bit value above INT64_MAX.
std::vector<std::int64_t> decode_int(const Header& h, const unsigned char* data, const std::string& what);

/// The data of a float64 array ('<f8' or '>f8') as double in C order (Fortran order transposed).
/// InputError for any other dtype.
std::vector<double> decode_double(const Header& h, const unsigned char* data, const std::string& what);

}  // namespace tokdyn::npy

namespace tokdyn {

/// Reads an integer .npy file (i1/i2/i4/i8, u1/u2/u4/u8, either byte order, C or Fortran order)
/// into int64 in C order, with its shape. Regular files only (a FIFO or a device is refused
/// without blocking); at most `max_elements` values (checked from the header, before allocating;
/// the file itself may be at most header + 8 * max_elements bytes). Throws InputError naming the file.
std::vector<std::int64_t> read_npy_int(const std::filesystem::path& file, std::vector<std::size_t>& shape,
                                       std::uint64_t max_elements = std::uint64_t(1) << 27);

/// Reads a float64 .npy file ('<f8' or '>f8', C or Fortran order) into double in C order, with
/// its shape; the same file rules and size checks as read_npy_int. Non-finite values are
/// returned as they are (the caller decides). Throws InputError naming the file.
std::vector<double> read_npy_double(const std::filesystem::path& file, std::vector<std::size_t>& shape,
                                    std::uint64_t max_elements = std::uint64_t(1) << 27);

}  // namespace tokdyn
