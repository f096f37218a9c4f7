// .npy reader: preamble, a small parser of the header's Python dict literal, size checks before
// allocation, integer decoding (see io/npy.hpp). Standard library and POSIX only.
#include "tokdyn/io/npy.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/printable.hpp"

namespace tokdyn::npy {

static_assert(std::endian::native == std::endian::little, "the .npy reader maps '=' (native) to little-endian");

namespace {

const char* const kExpectDict =
    "a .npy header dict like {'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }";

// Any text made printable on one line: control bytes, DEL and non-ASCII bytes become \xNN.
std::string printable(const std::string& s) { return escape_bytes(s, true); }

// A user-supplied string in quotes for a message, shortened if long.
std::string in_quotes(const std::string& s) {
  constexpr std::size_t kMax = 40;
  std::string out(1, '\'');
  out += printable(s.size() <= kMax ? s : s.substr(0, kMax));
  out += s.size() <= kMax ? "'" : "...'";
  return out;
}

[[noreturn]] void npy_fail(const std::string& what, const std::string& problem, const std::string& expected) {
  throw InputError(printable(what) + ": " + problem + "; expected " + expected);
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    if (i == 8) {
      s += "... " + std::to_string(shape.size()) + " dims";
      break;
    }
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ',';
  return s + ")";
}

// The header dict, parsed by recursive descent over exactly the literals numpy writes.
class DictParser {
 public:
  DictParser(const std::string& text, std::size_t base, const std::string& what)
      : s_(text), base_(base), what_(what) {}

  void parse(Header& h) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    ws();
    expect('{', "'{' opening the dict");
    ws();
    while (peek() != '}') {
      const std::size_t key_pos = i_;
      const std::string key = string_literal("a quoted key");
      ws();
      expect(':', "':' after the key");
      ws();
      bool* seen = key == "descr" ? &have_descr : key == "fortran_order" ? &have_fortran : key == "shape" ? &have_shape : nullptr;
      if (!seen) {
        i_ = key_pos;
        bad("unexpected key " + in_quotes(key), "only the keys 'descr', 'fortran_order' and 'shape'");
      }
      if (*seen) {
        i_ = key_pos;
        bad("key " + in_quotes(key) + " given twice", "each key once");
      }
      *seen = true;
      if (key == "descr") h.descr = string_literal("a quoted dtype string such as '<i8'");
      else if (key == "fortran_order") h.fortran_order = boolean();
      else h.shape = tuple();
      ws();
      if (peek() == ',') {
        ++i_;
        ws();
        continue;
      }
      if (peek() != '}') bad("found " + here() + " after a value", "',' or '}'");
    }
    ++i_;  // '}'
    ws();
    if (i_ < s_.size()) bad("found " + here() + " after the dict", "only spaces and a newline after the closing '}'");
    if (!have_descr || !have_fortran || !have_shape) {
      std::string missing;
      for (auto [have, name] : {std::pair{have_descr, "'descr'"}, {have_fortran, "'fortran_order'"}, {have_shape, "'shape'"}})
        if (!have) missing += std::string(missing.empty() ? "" : ", ") + name;
      npy_fail(what_, "the header dict has no " + missing, kExpectDict);
    }
  }

 private:
  const std::string& s_;
  std::size_t base_;  // file offset of the dict, for messages
  const std::string& what_;
  std::size_t i_ = 0;

  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool at_end() const { return i_ >= s_.size(); }
  std::string here() const {
    if (at_end()) return "the end of the header";
    const auto c = static_cast<unsigned char>(s_[i_]);
    if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
    static const char* hex = "0123456789abcdef";
    return std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
  }
  [[noreturn]] void bad(const std::string& problem, const std::string& expected) const {
    npy_fail(what_, "header dict: " + problem + " at byte " + std::to_string(base_ + i_), expected + " (" + kExpectDict + ")");
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\f' ||
                              s_[i_] == '\v'))
      ++i_;
  }
  void expect(char c, const char* expected) {
    if (peek() != c || at_end()) bad("found " + here(), expected);
    ++i_;
  }
  static bool ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  std::string string_literal(const char* expected) {
    const char q = peek();
    if (at_end() || (q != '\'' && q != '"')) bad("found " + here(), expected);
    ++i_;
    std::string out;
    while (true) {
      if (at_end()) bad("unterminated string", std::string("a closing ") + q);
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == static_cast<unsigned char>(q)) break;
      if (c == '\\' || c < 0x20 || c >= 0x7f) bad("found " + here() + " inside a string", "plain ASCII keys and dtypes");
      out += static_cast<char>(c);
      ++i_;
    }
    ++i_;
    return out;
  }
  bool boolean() {
    for (auto [word, value] : {std::pair{"True", true}, {"False", false}}) {
      const std::size_t n = std::strlen(word);
      if (s_.compare(i_, n, word) == 0 && (i_ + n >= s_.size() || !ident_char(s_[i_ + n]))) {
        i_ += n;
        return value;
      }
    }
    bad("found " + here() + " as 'fortran_order'", "True or False");
  }
  std::uint64_t integer() {
    const std::size_t start = i_;
    if (!(peek() >= '0' && peek() <= '9') || at_end()) bad("found " + here() + " in the shape", "a non-negative integer");
    std::uint64_t v = 0;
    while (!at_end() && s_[i_] >= '0' && s_[i_] <= '9') {
      const auto d = static_cast<std::uint64_t>(s_[i_] - '0');
      if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) {
        i_ = start;
        bad("a dimension above 2^64 - 1 in the shape", "dimensions that fit 64 bits");
      }
      v = v * 10 + d;
      ++i_;
    }
    if (i_ - start > 1 && s_[start] == '0') {
      i_ = start;
      bad("a dimension with a leading zero in the shape", "decimal integers as Python writes them");
    }
    if (peek() == 'L' || peek() == 'l') ++i_;  // Python 2 long
    if (!at_end() && ident_char(s_[i_])) bad("found " + here() + " after a dimension", "',' or ')'");
    return v;
  }
  std::vector<std::uint64_t> tuple() {
    if (peek() != '(' || at_end()) bad("found " + here() + " as 'shape'", "a tuple of integers such as (2, 3) or (5,)");
    ++i_;
    std::vector<std::uint64_t> dims;
    ws();
    bool comma_after_last = false;
    while (peek() != ')' || at_end()) {
      if (at_end()) bad("unterminated shape tuple", "a closing ')'");
      if (dims.size() >= 64) bad("more than 64 dimensions in the shape", "at most 64 dimensions (numpy's limit)");
      dims.push_back(integer());
      ws();
      comma_after_last = false;
      if (peek() == ',' && !at_end()) {
        ++i_;
        comma_after_last = true;
        ws();
        continue;
      }
      if (peek() != ')' || at_end()) bad("found " + here() + " in the shape", "',' or ')'");
    }
    if (dims.size() == 1 && !comma_after_last)
      bad("shape (" + std::to_string(dims[0]) + ") is an integer, not a tuple", "a 1-tuple written (" + std::to_string(dims[0]) + ",)");
    ++i_;  // ')'
    return dims;
  }
};

// Parses descr into byte order, kind and size; only simple numeric dtypes.
void parse_descr(Header& h, const std::string& what) {
  const std::string& d = h.descr;
  const std::string expected =
      "a simple numeric dtype: byte order '<', '>', '=' or '|', kind b/i/u/f/c and its size, such as '<i8'";
  std::size_t i = 0;
  char order = '=';
  if (i < d.size() && (d[i] == '<' || d[i] == '>' || d[i] == '|' || d[i] == '=')) order = d[i++];
  if (i >= d.size()) npy_fail(what, "dtype " + in_quotes(d) + " is not a simple numeric dtype", expected);
  const char kind = d[i++];
  unsigned size = 0;
  const std::size_t digits_at = i;
  while (i < d.size() && d[i] >= '0' && d[i] <= '9' && size < 1000) size = size * 10 + static_cast<unsigned>(d[i++] - '0');
  bool ok = i == d.size() && i > digits_at && d[digits_at] != '0';
  switch (kind) {
    case 'b': ok = ok && size == 1; break;
    case 'i':
    case 'u': ok = ok && (size == 1 || size == 2 || size == 4 || size == 8); break;
    case 'f': ok = ok && (size == 2 || size == 4 || size == 8 || size == 16); break;
    case 'c': ok = ok && (size == 8 || size == 16 || size == 32); break;
    default: ok = false;
  }
  if (!ok) npy_fail(what, "dtype " + in_quotes(d) + " is not a simple numeric dtype (strings, objects, dates and structured arrays are not read)", expected);
  if (order == '|' && size != 1)
    npy_fail(what, "dtype " + in_quotes(d) + " has no byte order ('|') but " + std::to_string(size) + "-byte elements",
         "'<' or '>' for multi-byte elements");
  h.byte_order = order == '>' ? '>' : '<';
  h.kind = kind;
  h.item_size = size;
}

// Fortran order: the first index varies fastest in the file. Walks the file order with a
// multi-index counter and places each value at its C-order position.
template <class T>
std::vector<T> fortran_to_c(const Header& h, std::vector<T> vals) {
  const std::size_t n = vals.size();
  if (!h.fortran_order || h.shape.size() < 2 || n == 0) return vals;
  const std::size_t rank = h.shape.size();
  std::vector<std::uint64_t> c_stride(rank), idx(rank, 0);
  c_stride[rank - 1] = 1;
  for (std::size_t k = rank - 1; k-- > 0;) c_stride[k] = c_stride[k + 1] * h.shape[k + 1];
  std::vector<T> out(n);
  std::uint64_t c_pos = 0;
  for (std::size_t f = 0; f < n; ++f) {
    out[static_cast<std::size_t>(c_pos)] = vals[f];
    for (std::size_t k = 0; k < rank; ++k) {  // increment the multi-index, first index fastest
      if (++idx[k] < h.shape[k]) {
        c_pos += c_stride[k];
        break;
      }
      c_pos -= (h.shape[k] - 1) * c_stride[k];
      idx[k] = 0;
    }
  }
  return out;
}

}  // namespace

Header parse_header(const unsigned char* bytes, std::size_t nbytes, std::uint64_t file_size, const std::string& what) {
  if (nbytes > file_size) nbytes = static_cast<std::size_t>(file_size);
  const std::string expect_file = "a NumPy .npy file (\\x93NUMPY, version, header length, header dict, data)";
  if (nbytes < 6 || bytes[0] != 0x93 || std::memcmp(bytes + 1, "NUMPY", 5) != 0)
    npy_fail(what, "not a .npy file (no \\x93NUMPY magic at the start)", expect_file);
  if (nbytes < 8) npy_fail(what, "the file ends inside the preamble", expect_file);
  Header h;
  h.major = bytes[6];
  h.minor = bytes[7];
  if (h.major < 1 || h.major > 3 || h.minor != 0)
    npy_fail(what, "unsupported .npy format version " + std::to_string(h.major) + "." + std::to_string(h.minor),
         "version 1.0, 2.0 or 3.0");
  const std::size_t pre = h.major == 1 ? 10 : 12;
  if (nbytes < pre) npy_fail(what, "the file ends inside the preamble", expect_file);
  std::uint64_t hlen = 0;
  for (std::size_t k = pre; k-- > 8;) hlen = (hlen << 8) | bytes[k];
  if (hlen > kMaxHeaderLen)
    npy_fail(what, "header length " + std::to_string(hlen) + " is above the maximum " + std::to_string(kMaxHeaderLen),
         "a header of at most " + std::to_string(kMaxHeaderLen) + " bytes");
  h.data_offset = pre + hlen;
  if (h.data_offset > file_size)
    npy_fail(what, "the header (" + std::to_string(hlen) + " bytes) runs past the end of the file (" +
                   std::to_string(file_size) + " bytes)",
         expect_file);
  if (nbytes < h.data_offset)
    npy_fail(what, "only " + std::to_string(nbytes) + " bytes of the file were read", "the whole header");
  const std::string dict(reinterpret_cast<const char*>(bytes + pre), static_cast<std::size_t>(hlen));
  DictParser(dict, pre, what).parse(h);
  parse_descr(h, what);

  // Element count and data size, overflow-checked, against the file size: nothing is allocated
  // for a header that lies about its shape.
  bool zero = false;
  for (auto d : h.shape) zero = zero || d == 0;
  std::uint64_t count = zero ? 0 : 1;
  bool overflow = false;
  if (!zero)
    for (auto d : h.shape)
      if (__builtin_mul_overflow(count, d, &count)) overflow = true;
  std::uint64_t data_bytes = 0;
  if (!overflow && __builtin_mul_overflow(count, static_cast<std::uint64_t>(h.item_size), &data_bytes)) overflow = true;
  const std::uint64_t have = file_size - h.data_offset;
  if (overflow || data_bytes != have)
    npy_fail(what,
         "the header's shape " + shape_text(h.shape) + " of dtype " + in_quotes(h.descr) + " needs " +
             (overflow ? std::string("more than 2^64 bytes") : std::to_string(data_bytes) + " bytes") +
             " of data, but the file holds " + std::to_string(have) + " bytes after the header",
         "the data size to match the header's shape and dtype");
  h.count = count;
  h.data_bytes = data_bytes;
  return h;
}

std::vector<std::int64_t> decode_int(const Header& h, const unsigned char* data, const std::string& what) {
  if (h.kind != 'i' && h.kind != 'u')
    npy_fail(what, "dtype " + in_quotes(h.descr) + " is not an integer type", "integers: i1, i2, i4, i8, u1, u2, u4 or u8");
  const std::size_t n = static_cast<std::size_t>(h.count);
  const unsigned size = h.item_size;
  std::vector<std::int64_t> vals(n);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char* b = data + i * size;
    std::uint64_t u = 0;
    for (unsigned k = 0; k < size; ++k) {
      const unsigned char byte = h.byte_order == '>' ? b[k] : b[size - 1 - k];
      u = (u << 8) | byte;
    }
    if (h.kind == 'i') {
      if (size < 8 && ((u >> (8 * size - 1)) & 1)) u |= ~std::uint64_t(0) << (8 * size);
    } else if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      npy_fail(what, "value " + std::to_string(u) + " at flat index " + std::to_string(i) + " is above 2^63 - 1",
           "integers that fit int64");
    }
    vals[i] = static_cast<std::int64_t>(u);
  }
  return fortran_to_c(h, std::move(vals));
}

std::vector<double> decode_double(const Header& h, const unsigned char* data, const std::string& what) {
  if (h.kind != 'f' || h.item_size != 8)
    npy_fail(what, "dtype " + in_quotes(h.descr) + " is not float64", "float64 values: dtype '<f8' or '>f8'");
  const std::size_t n = static_cast<std::size_t>(h.count);
  std::vector<double> vals(n);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char* b = data + i * 8;
    std::uint64_t u = 0;
    for (unsigned k = 0; k < 8; ++k) u = (u << 8) | (h.byte_order == '>' ? b[k] : b[7 - k]);
    vals[i] = std::bit_cast<double>(u);
  }
  return fortran_to_c(h, std::move(vals));
}

}  // namespace tokdyn::npy

namespace tokdyn {

namespace {

// Opens `file`, parses and checks its header against the file size, refuses more than
// max_elements values or a dtype `accept` refuses (by calling decode on an empty header), then
// reads the data bytes.
template <class Decode>
auto read_npy_as(const std::filesystem::path& file, std::vector<std::size_t>& shape, std::uint64_t max_elements,
                 bool (*accept)(const npy::Header&), Decode decode) {
  const std::string what = file.string();
  // The file may hold at most the largest header and 8 bytes per allowed value.
  std::uint64_t max_bytes = 0;
  if (__builtin_mul_overflow(max_elements, std::uint64_t(8), &max_bytes) ||
      __builtin_add_overflow(max_bytes, std::uint64_t(npy::kMaxPreamble + npy::kMaxHeaderLen), &max_bytes))
    max_bytes = std::numeric_limits<std::uint64_t>::max();
  const OpenedFile f = open_regular_file(file, max_bytes, what);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{f.fd};
  auto read_at = [&](unsigned char* buf, std::size_t n, std::uint64_t off) {
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(f.fd, buf + got, n - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0)
        throw InputError(npy::printable(what) + ": cannot read (" + std::strerror(errno) + "); expected a readable .npy file");
      if (r == 0) throw InputError(npy::printable(what) + ": the file changed while being read; expected a file that stays unchanged");
      got += static_cast<std::size_t>(r);
    }
  };
  // The header first (bounded), then the data, once the header agrees with the file size.
  std::vector<unsigned char> head(static_cast<std::size_t>(std::min<std::uint64_t>(f.size, npy::kMaxPreamble + npy::kMaxHeaderLen)));
  read_at(head.data(), head.size(), 0);
  const npy::Header h = npy::parse_header(head.data(), head.size(), f.size, what);
  if (!accept(h)) decode(h, nullptr, what);  // throws: the wrong dtype
  if (h.count > max_elements)
    throw InputError(npy::printable(what) + ": the array has shape " + npy::shape_text(h.shape) + ", " +
                     std::to_string(h.count) + " values; expected at most " + std::to_string(max_elements) + " values");
  std::vector<unsigned char> data(static_cast<std::size_t>(h.data_bytes));
  read_at(data.data(), data.size(), h.data_offset);
  auto out = decode(h, data.data(), what);
  shape.assign(h.shape.begin(), h.shape.end());
  return out;
}

}  // namespace

std::vector<std::int64_t> read_npy_int(const std::filesystem::path& file, std::vector<std::size_t>& shape,
                                       std::uint64_t max_elements) {
  return read_npy_as(file, shape, max_elements, [](const npy::Header& h) { return h.kind == 'i' || h.kind == 'u'; },
                     npy::decode_int);
}

std::vector<double> read_npy_double(const std::filesystem::path& file, std::vector<std::size_t>& shape,
                                    std::uint64_t max_elements) {
  return read_npy_as(file, shape, max_elements, [](const npy::Header& h) { return h.kind == 'f' && h.item_size == 8; },
                     npy::decode_double);
}

}  // namespace tokdyn
