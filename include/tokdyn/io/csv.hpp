#pragma once
// Tidy CSV output (one row per observation, named columns) and NumPy .npy arrays.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "tokdyn/core/array_sink.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/io/outputs.hpp"
#include "tokdyn/core/tokens.hpp"

namespace tokdyn {

/// One cell quoted RFC-4180 style when it holds a comma, quote or line break.
std::string csv_cell(const std::string& s);
/// The rows of a CSV file of at most 256 MiB (RFC 4180 quoting); the header is row 0. Throws
/// InputError naming `what` and the file.
std::vector<std::vector<std::string>> read_csv(const std::filesystem::path& file, const std::string& what);

class CsvWriter {
 public:
  CsvWriter(const std::filesystem::path& file, std::vector<std::string> columns);
  /// The declared table `decl` in folder `dir`: its columns from the declaration, and every cell
  /// checked against it (a number in a numeric column, a declared value in a categorical one, an
  /// index not below its base, an empty cell only where the column says what it means); a cell
  /// that breaks the declaration is a bug (std::logic_error naming file and column). `decl` must
  /// outlive the writer (declarations are static).
  CsvWriter(const std::filesystem::path& dir, const TableDecl& decl);
  /// Appends one row; cells are printed with 17 significant digits (doubles), as-is (strings;
  /// quoted RFC-4180 style only when they contain a comma, quote or line break).
  CsvWriter& cell(const std::string& s);
  CsvWriter& cell(double v);
  CsvWriter& cell(long v);
  CsvWriter& cell(int v) { return cell(static_cast<long>(v)); }
  CsvWriter& cell(std::size_t v) { return cell(static_cast<long>(v)); }
  CsvWriter& empty();            ///< an empty cell (e.g. "none")
  /// Declares columns where a value that cannot be computed means "not applicable": a NaN or
  /// infinite double written to them becomes an empty cell (document the meaning with the column).
  /// Any other column prints non-finite values as they are ("nan", "inf"). Unknown names are a
  /// std::logic_error.
  CsvWriter& blank_nonfinite(std::initializer_list<const char*> columns);
  void end_row();                ///< checks the row has one cell per column (std::logic_error)
  ~CsvWriter();

 private:
  std::ofstream out_;
  std::size_t ncol_;
  std::size_t cur_ = 0;
  std::vector<std::string> columns_;
  std::vector<bool> blank_;      ///< per column: non-finite -> empty cell
  std::filesystem::path file_;
  std::string row_;              ///< the row being built; written whole by end_row()
  const TableDecl* decl_ = nullptr;  ///< the declaration cells are checked against (may be null)
  void begin_cell();
  const ColumnDecl* declared_column() const;  ///< the declared column of the next cell, or null
  [[noreturn]] void refuse(const ColumnDecl& c, const std::string& what) const;
};

/// Writes a C-order float64 / float32 / int64 .npy file with the given shape.
void write_npy(const std::filesystem::path& file, const double* data, const std::vector<std::size_t>& shape);
void write_npy(const std::filesystem::path& file, const float* data, const std::vector<std::size_t>& shape);
void write_npy(const std::filesystem::path& file, const std::int64_t* data, const std::vector<std::size_t>& shape);

/// An ArraySink that writes each array to <dir>/<name>.npy (the folder made at the first array).
class NpyFolderSink final : public ArraySink {
 public:
  explicit NpyFolderSink(std::filesystem::path dir) : dir_(std::move(dir)) {}
  void put(const std::string& name, const double* data, const std::vector<std::size_t>& shape) override;
  void put(const std::string& name, const float* data, const std::vector<std::size_t>& shape) override;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// read_npy_int (integer .npy files): see io/npy.hpp.

}  // namespace tokdyn
