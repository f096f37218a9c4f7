// Tidy CSV output and NumPy .npy arrays (format version 1.0).
#include "tokdyn/io/csv.hpp"

#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include <cctype>
#include "tokdyn/error.hpp"
#include "tokdyn/io/file.hpp"

namespace tokdyn {

namespace {

// A CSV field: written as-is unless it contains a separator, a quote or a line break, in which
// case it is quoted with inner quotes doubled (RFC 4180).
void append_field(std::string& row, const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) {
    row += s;
    return;
  }
  row += '"';
  for (char c : s) {
    if (c == '"') row += '"';
    row += c;
  }
  row += '"';
}

}  // namespace

CsvWriter::CsvWriter(const std::filesystem::path& file, std::vector<std::string> columns)
    : out_(file, std::ios::out | std::ios::trunc | std::ios::binary), ncol_(columns.size()), file_(file) {
  if (!out_) throw_write_error(file, errno, "create");
  if (columns.empty()) throw std::logic_error(fmt::format("CSV '{}': no columns", file.string()));
  std::string header;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (i) header += ',';
    append_field(header, columns[i]);
  }
  header += '\n';
  out_ << header;
  if (!out_) throw_write_error(file, errno);
}

void CsvWriter::begin_cell() {
  if (cur_) row_ += ',';
  ++cur_;
}

CsvWriter& CsvWriter::cell(const std::string& s) {
  begin_cell();
  append_field(row_, s);
  return *this;
}

CsvWriter& CsvWriter::cell(double v) {
  begin_cell();
  char buf[64];
  int len = std::snprintf(buf, sizeof buf, "%.17g", v);
  row_.append(buf, static_cast<std::size_t>(len));
  return *this;
}

CsvWriter& CsvWriter::cell(long v) {
  begin_cell();
  char buf[32];
  int len = std::snprintf(buf, sizeof buf, "%ld", v);
  row_.append(buf, static_cast<std::size_t>(len));
  return *this;
}

CsvWriter& CsvWriter::empty() {
  begin_cell();
  return *this;
}

void CsvWriter::end_row() {
  if (cur_ != ncol_) {
    const std::size_t got = cur_;
    row_.clear();  // the malformed row is dropped, the file stays well-formed
    cur_ = 0;
    throw std::logic_error(fmt::format("CSV '{}': row has {} cells, expected {}", file_.string(), got, ncol_));
  }
  row_ += '\n';
  out_ << row_;
  row_.clear();
  cur_ = 0;
  if (!out_) throw_write_error(file_, errno);
}

CsvWriter::~CsvWriter() {
  // An unfinished row is discarded. The last buffer is flushed here, where nothing can be thrown:
  // a failure (disk full) is recorded and reported by the run before it publishes anything.
  errno = 0;
  out_.close();
  if (!out_) note_write_failure(file_, errno);
}

namespace {

template <class T>
void write_npy_impl(const std::filesystem::path& file, const T* data, const std::vector<std::size_t>& shape,
                    const char* descr) {
  static_assert(std::endian::native == std::endian::little, "write_npy assumes a little-endian host");
  std::size_t count = 1;
  std::string dims;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    count *= shape[i];
    if (i) dims += ", ";
    dims += std::to_string(shape[i]);
  }
  if (shape.size() == 1) dims += ',';  // a Python 1-tuple
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  // Magic (6) + version (2) + header length (2) + header, padded with spaces so that the total
  // is a multiple of 64, the last byte being a newline.
  const std::size_t preamble = 10;
  std::size_t total = preamble + header.size() + 1;
  total = (total + 63) / 64 * 64;
  header.append(total - preamble - header.size() - 1, ' ');
  header += '\n';
  if (header.size() > 65535) throw std::logic_error(fmt::format("npy '{}': shape too long for format 1.0", file.string()));

  std::ofstream out(file, std::ios::out | std::ios::trunc | std::ios::binary);
  if (!out) throw_write_error(file, errno, "create");
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.write(reinterpret_cast<const char*>(magic), sizeof magic);
  const auto hlen = static_cast<std::uint16_t>(header.size());
  const unsigned char len_le[2] = {static_cast<unsigned char>(hlen & 0xff), static_cast<unsigned char>(hlen >> 8)};
  out.write(reinterpret_cast<const char*>(len_le), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (count) out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(T)));
  out.close();
  if (!out) throw_write_error(file, errno);
}

}  // namespace

void write_npy(const std::filesystem::path& file, const double* data, const std::vector<std::size_t>& shape) {
  write_npy_impl(file, data, shape, "<f8");
}
void write_npy(const std::filesystem::path& file, const float* data, const std::vector<std::size_t>& shape) {
  write_npy_impl(file, data, shape, "<f4");
}
void write_npy(const std::filesystem::path& file, const std::int64_t* data, const std::vector<std::size_t>& shape) {
  write_npy_impl(file, data, shape, "<i8");
}

std::vector<std::int64_t> read_npy_int(const std::filesystem::path& file, std::vector<std::size_t>& shape) {
  const std::string what = file.string();
  auto bad = [&](const std::string& m) { return InputError(fmt::format("{}: {}; expected a C-order integer .npy array", what, m)); };
  std::ifstream in(file, std::ios::binary);
  if (!in) throw bad("cannot open the file");
  unsigned char pre[10];
  in.read(reinterpret_cast<char*>(pre), 8);
  if (in.gcount() != 8 || pre[0] != 0x93 || std::memcmp(pre + 1, "NUMPY", 5) != 0) throw bad("not a .npy file (bad magic)");
  std::size_t hlen = 0;
  if (pre[6] == 1) {
    unsigned char l[2];
    in.read(reinterpret_cast<char*>(l), 2);
    if (in.gcount() != 2) throw bad("truncated header");
    hlen = l[0] | (static_cast<std::size_t>(l[1]) << 8);
  } else if (pre[6] == 2 || pre[6] == 3) {
    unsigned char l[4];
    in.read(reinterpret_cast<char*>(l), 4);
    if (in.gcount() != 4) throw bad("truncated header");
    hlen = l[0] | (static_cast<std::size_t>(l[1]) << 8) | (static_cast<std::size_t>(l[2]) << 16) | (static_cast<std::size_t>(l[3]) << 24);
  } else {
    throw bad(fmt::format("unsupported .npy version {}", static_cast<int>(pre[6])));
  }
  if (hlen > (1u << 20)) throw bad("header too long");
  std::string h(hlen, '\0');
  in.read(h.data(), static_cast<std::streamsize>(hlen));
  if (static_cast<std::size_t>(in.gcount()) != hlen) throw bad("truncated header");
  auto field = [&](const std::string& key) -> std::string {
    const auto p = h.find("'" + key + "'");
    if (p == std::string::npos) throw bad(fmt::format("header has no '{}'", key));
    auto c = h.find(':', p);
    if (c == std::string::npos) throw bad("malformed header");
    ++c;
    while (c < h.size() && h[c] == ' ') ++c;
    if (c >= h.size()) throw bad("malformed header");
    if (h[c] == '\'') {
      const auto e = h.find('\'', c + 1);
      if (e == std::string::npos) throw bad("malformed header");
      return h.substr(c + 1, e - c - 1);
    }
    if (h[c] == '(') {
      const auto e = h.find(')', c);
      if (e == std::string::npos) throw bad("malformed header");
      return h.substr(c + 1, e - c - 1);
    }
    const auto e = h.find_first_of(",}", c);
    return h.substr(c, e == std::string::npos ? std::string::npos : e - c);
  };
  const std::string descr = field("descr"), fortran = field("fortran_order"), shp = field("shape");
  if (fortran.rfind("False", 0) != 0) throw bad("Fortran-order arrays are not supported");
  shape.clear();
  std::size_t count = 1;
  {
    std::size_t i = 0;
    while (i < shp.size()) {
      while (i < shp.size() && (shp[i] == ' ' || shp[i] == ',')) ++i;
      if (i >= shp.size()) break;
      std::size_t j = i;
      while (j < shp.size() && std::isdigit(static_cast<unsigned char>(shp[j]))) ++j;
      if (j == i || j - i > 12) throw bad("malformed shape");
      const std::size_t v = std::stoull(shp.substr(i, j - i));
      shape.push_back(v);
      if (v && count > (std::size_t(1) << 40) / v) throw bad("array too large");
      count *= v;
      i = j;
    }
  }
  int size = 0;
  bool is_signed = true;
  if (descr == "<i8") size = 8;
  else if (descr == "<i4") size = 4;
  else if (descr == "<u4") size = 4, is_signed = false;
  else if (descr == "<i2") size = 2;
  else if (descr == "<u2") size = 2, is_signed = false;
  else if (descr == "|i1") size = 1;
  else if (descr == "|u1") size = 1, is_signed = false;
  else throw bad(fmt::format("dtype '{}' is not an integer type", descr));
  std::vector<unsigned char> raw(count * static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  if (static_cast<std::size_t>(in.gcount()) != raw.size()) throw bad("file shorter than its shape says");
  std::vector<std::int64_t> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    const unsigned char* b = raw.data() + i * static_cast<std::size_t>(size);
    std::uint64_t u = 0;
    for (int k = 0; k < size; ++k) u |= static_cast<std::uint64_t>(b[k]) << (8 * k);
    if (is_signed && size < 8 && (u >> (8 * size - 1)) & 1) u |= ~std::uint64_t(0) << (8 * size);
    out[i] = static_cast<std::int64_t>(u);
  }
  return out;
}

}  // namespace tokdyn
