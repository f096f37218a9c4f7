#pragma once
// Reading and writing .safetensors checkpoints (the Hugging Face safetensors format):
// bytes 0..8 hold N (u64 little-endian), bytes 8..8+N a UTF-8 JSON header, then the tensor data.
// Every violation of the format is reported as one InputError line naming the file and what was
// expected. This file and src/io/safetensors.cpp use only the standard library and nlohmann::json,
// so the parser can be built standalone (the libFuzzer target in fuzz/ does that).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokdyn/core/half.hpp"

namespace tokdyn::st {

enum class DType { BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, Other };

struct TensorInfo {
  std::string name;
  std::string dtype_name;          ///< as in the file, e.g. "F16", "F8_E4M3"
  DType dtype = DType::Other;      ///< Other for dtypes parsed but not convertible (F8_*, F4, F6_*, C64 ...)
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;  ///< data_offsets, relative to the data buffer start
  /// Product of the dimensions (1 for a scalar). Exact for every tensor of a parsed header.
  std::uint64_t numel() const;
};

struct Header {
  std::uint64_t header_len = 0;    ///< N
  std::uint64_t data_start = 8;    ///< 8 + N
  std::vector<TensorInfo> tensors; ///< in file order of data_offsets (ties: by name)
  std::map<std::string, std::string> metadata;  ///< "__metadata__" (string -> string only)
  const TensorInfo* find(const std::string& name) const;  ///< nullptr if absent
};

/// Bits per element of a dtype string as the format defines them (F4 = 4, F6_* = 6, F16 = 16 ...);
/// 0 for an unknown dtype string.
unsigned dtype_bits(std::string_view dtype_name);
/// The file spelling of a DType ("F16" ...); "Other" for DType::Other.
const char* dtype_name(DType d);

/// Validates and parses a header. `bytes` holds the first `nbytes` bytes of the file (at least 8 + N
/// when valid), `file_size` is the whole file's size, `what` names the file in messages.
/// Throws InputError "<what>: <problem>; expected <...>" (one line) on any violation.
Header parse_header(const std::uint8_t* bytes, std::size_t nbytes, std::uint64_t file_size,
                    const std::string& what);

/// One .safetensors file, memory-mapped read-only (no second copy of the file in memory).
class File {
 public:
  explicit File(const std::filesystem::path& path);  ///< InputError: missing, not safetensors, PyTorch .bin ...
  ~File();
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const Header& header() const { return header_; }
  const std::filesystem::path& path() const { return path_; }
  /// The raw little-endian bytes of one tensor of this file (possibly unaligned).
  std::span<const std::uint8_t> bytes(const TensorInfo& t) const;
  /// Converts one tensor to float (F16, BF16, F32, F64; other dtypes -> InputError naming tensor and
  /// dtype). `out` must hold t.numel() floats. The tensor's mapped pages are released afterwards.
  void read_float(const TensorInfo& t, float* out) const;
  std::vector<float> read_float(const std::string& name) const;  ///< InputError if absent

 private:
  std::filesystem::path path_;
  Header header_;
  const std::uint8_t* map_ = nullptr;
  std::size_t map_len_ = 0;
  void release() noexcept;
  void convert_float(const TensorInfo& t, float* out) const;
};

/// A checkpoint's tensors: a single .safetensors file, a directory with model.safetensors, or a
/// directory with model.safetensors.index.json ({"metadata": {...}, "weight_map": {name: shard}})
/// (the index file itself may also be given). Shards are opened, and cross-checked, at once.
class Tensors {
 public:
  explicit Tensors(const std::filesystem::path& path_or_dir);
  std::vector<std::string> names() const;  ///< all tensor names, sorted
  const TensorInfo* find(const std::string& name) const;
  std::vector<float> read_float(const std::string& name) const;  ///< InputError if absent
  /// Of the single file; or the shards' metadata merged (first shard in name order wins), then the
  /// index "metadata" on top (non-string values stringified as JSON).
  std::map<std::string, std::string> metadata() const { return metadata_; }
  /// The file holding a tensor (nullptr if absent).
  const File* file_of(const std::string& name) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::vector<File> files_;
  std::map<std::string, std::pair<std::size_t, std::size_t>> where_;  ///< name -> (file, tensor index)
  std::map<std::string, std::string> metadata_;
  void add_file(const std::filesystem::path& file);
};

/// One tensor to write: float data (numel(shape) values, C order) stored as F16, BF16 or F32, or
/// double data (`data64`) stored exactly as F64.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<std::uint64_t> shape;
  const float* data = nullptr;
  const double* data64 = nullptr;  ///< the data when dtype is F64
};

/// Writes the reference layout: header JSON ("__metadata__" first if any, then the tensors) padded
/// with spaces to a multiple of 8; tensors laid out sorted by (dtype alignment descending, then name);
/// data little-endian. Writes "<path>.tmp-<pid>" then renames it, so nothing half-written remains.
/// Throws std::invalid_argument for bad tensors (duplicate/reserved name, unsupported dtype, null
/// data for a non-empty tensor, invalid UTF-8) and ResourceError (exit code 3, a std::runtime_error)
/// for I/O failures: disk full, permission denied, an I/O error, named with their errno.
void write_file(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                const std::map<std::string, std::string>& metadata = {});

/// Writes a checkpoint folder: config.json (`config_text`) and model.safetensors (write_file), into
/// "<dir>.tmp-<pid>", renamed to `dir` when both are complete; nothing is left behind on error.
/// `dir` must not exist or be empty (InputError otherwise); I/O failures are ResourceError.
void write_checkpoint_dir(const std::filesystem::path& dir, const std::string& config_text,
                          const std::vector<TensorToWrite>& tensors, const std::map<std::string, std::string>& metadata);

/// IEEE binary16 <-> float (round to nearest even, subnormals, inf, nan), bf16 <-> float: core's
/// (half.hpp), named here too for the readers of this format.
using tokdyn::bf16_to_float;
using tokdyn::float_to_bf16;
using tokdyn::float_to_half;
using tokdyn::half_to_float;

}  // namespace tokdyn::st
