// Tidy CSV output and NumPy .npy arrays (format version 1.0). The .npy reader is io/npy.cpp.
#include "tokdyn/io/csv.hpp"

#include <bit>
#include <charconv>
#include <cmath>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include <cctype>
#include "tokdyn/core/error.hpp"
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
    : out_(file, std::ios::out | std::ios::trunc | std::ios::binary), ncol_(columns.size()), columns_(columns),
      blank_(columns.size(), false), file_(file) {
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

CsvWriter::CsvWriter(const std::filesystem::path& dir, const TableDecl& decl) : CsvWriter(dir / decl.file, decl.column_names()) {
  decl_ = &decl;
}

const ColumnDecl* CsvWriter::declared_column() const {
  return decl_ != nullptr && cur_ < decl_->columns.size() ? &decl_->columns[cur_] : nullptr;
}

void CsvWriter::refuse(const ColumnDecl& c, const std::string& what) const {
  throw std::logic_error(fmt::format("CSV '{}', column '{}': {} (not as declared)", file_.string(), c.name, what));
}

void CsvWriter::begin_cell() {
  if (cur_) row_ += ',';
  ++cur_;
}

CsvWriter& CsvWriter::cell(const std::string& s) {
  if (const ColumnDecl* c = declared_column()) {
    if (c->kind == ColumnKind::Real || c->kind == ColumnKind::Integer) refuse(*c, fmt::format("text '{}' in a numeric column", s));
    if (c->kind == ColumnKind::Category) {
      bool known = false;
      for (const auto& v : c->values) known = known || v.first == s;
      if (!known) refuse(*c, fmt::format("value '{}' is not one of its declared values", s));
    }
  }
  begin_cell();
  append_field(row_, s);
  return *this;
}

CsvWriter& CsvWriter::blank_nonfinite(std::initializer_list<const char*> columns) {
  for (const char* c : columns) {
    std::size_t i = 0;
    while (i < columns_.size() && columns_[i] != c) ++i;
    if (i == columns_.size()) throw std::logic_error(fmt::format("CSV '{}': no column '{}'", file_.string(), c));
    blank_[i] = true;
  }
  return *this;
}

CsvWriter& CsvWriter::cell(double v) {
  if (cur_ < blank_.size() && blank_[cur_] && !std::isfinite(v)) return empty();
  if (const ColumnDecl* c = declared_column()) {
    if (c->kind == ColumnKind::Text || c->kind == ColumnKind::Category) refuse(*c, fmt::format("a number ({}) in a text column", v));
    if (c->kind == ColumnKind::Integer && std::isfinite(v) && v != std::floor(v)) refuse(*c, fmt::format("{} in an integer column", v));
    if (c->index_base >= 0 && v < c->index_base) refuse(*c, fmt::format("index {} below its base {}", v, c->index_base));
  }
  begin_cell();
  // As printf's "%.17g" in the C locale (the standard's definition of to_chars with a precision), at a
  // fraction of its cost: tables of millions of rows (bundles.csv of a long cocycle) print in a blink.
  char buf[64];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 17);
  row_.append(buf, static_cast<std::size_t>(r.ptr - buf));
  return *this;
}

CsvWriter& CsvWriter::cell(long v) {
  if (const ColumnDecl* c = declared_column()) {
    if (c->kind == ColumnKind::Category) return cell(std::to_string(v));
    if (c->kind == ColumnKind::Text) refuse(*c, fmt::format("a number ({}) in a text column", v));
    if (c->index_base >= 0 && v < c->index_base) refuse(*c, fmt::format("index {} below its base {}", v, c->index_base));
  }
  begin_cell();
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v);
  row_.append(buf, static_cast<std::size_t>(r.ptr - buf));
  return *this;
}

CsvWriter& CsvWriter::empty() {
  if (const ColumnDecl* c = declared_column(); c != nullptr && c->empty.empty()) refuse(*c, "an empty cell, which the column does not allow");
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

void NpyFolderSink::put(const std::string& name, const double* data, const std::vector<std::size_t>& shape) {
  std::filesystem::create_directories(dir_);
  write_npy(dir_ / (name + ".npy"), data, shape);
}
void NpyFolderSink::put(const std::string& name, const float* data, const std::vector<std::size_t>& shape) {
  std::filesystem::create_directories(dir_);
  write_npy(dir_ / (name + ".npy"), data, shape);
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

/// The rows of a CSV file (RFC 4180 quoting); the header is row 0.
std::vector<std::vector<std::string>> read_csv(const std::filesystem::path& file, const std::string& what) {
  const std::string text = read_regular_file(file, std::uint64_t{256} << 20, what);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string cell;
  bool quoted = false, any = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') cell += '"', ++i;
      else if (c == '"') quoted = false;
      else cell += c;
      continue;
    }
    if (c == '"') quoted = true, any = true;
    else if (c == ',') row.push_back(cell), cell.clear(), any = true;
    else if (c == '\r') continue;
    else if (c == '\n') {
      row.push_back(cell), cell.clear();
      if (!(row.size() == 1 && row[0].empty() && !any)) rows.push_back(row);
      row.clear(), any = false;
    } else cell += c, any = true;
  }
  if (quoted) throw InputError(fmt::format("{} '{}': an unterminated quoted cell; expected CSV", what, file.string()));
  if (any || !cell.empty()) row.push_back(cell), rows.push_back(row);
  return rows;
}

}  // namespace tokdyn
