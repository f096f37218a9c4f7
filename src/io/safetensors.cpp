// Safetensors reader: validating header parser, mmap'd files, sharded checkpoints, dtype
// conversion on read (the writer: safetensors_writer.cpp).
// Only the standard library, POSIX and nlohmann::json are used, so this file also builds standalone
// for the libFuzzer target (scripts/fuzz.sh).
#include "tokdyn/io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/json_strict.hpp"
#include "safetensors_internal.hpp"

namespace tokdyn::st {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader assumes a little-endian host");

namespace {

using json = nlohmann::json;

constexpr std::uint64_t kMaxHeader = 100'000'000;  // MAX_HEADER_SIZE of the reference parser
constexpr std::size_t kMaxDepth = 64;              // a valid header nests 3 levels
constexpr std::uint64_t kMaxFile = 1ull << 40;     // 1 TiB per .safetensors file (memory-mapped)
constexpr std::uint64_t kMaxIndex = 64ull << 20;   // 64 MiB for model.safetensors.index.json
constexpr std::size_t kMaxShards = 10000;          // distinct shard files named by an index
const char* const kExpectSt =
    "a safetensors file (8-byte little-endian header length N, an N-byte JSON header, then the tensor data)";
const char* const kExpectEntry =
    "{\"dtype\": \"F16\", \"shape\": [d0, d1, ...], \"data_offsets\": [begin, end]}";
const char* const kConvertAdvice =
    "convert it to model.safetensors first: see README 'Converting a PyTorch checkpoint'";

struct DTypeDesc {
  const char* name;
  DType dtype;
  unsigned bits;
};
constexpr DTypeDesc kDTypes[] = {
    {"BOOL", DType::BOOL, 8},      {"U8", DType::U8, 8},          {"I8", DType::I8, 8},
    {"I16", DType::I16, 16},       {"U16", DType::U16, 16},       {"F16", DType::F16, 16},
    {"BF16", DType::BF16, 16},     {"I32", DType::I32, 32},       {"U32", DType::U32, 32},
    {"F32", DType::F32, 32},       {"F64", DType::F64, 64},       {"I64", DType::I64, 64},
    {"U64", DType::U64, 64},       {"F8_E4M3", DType::Other, 8},  {"F8_E5M2", DType::Other, 8},
    {"F8_E8M0", DType::Other, 8},  {"F8_E4M3FNUZ", DType::Other, 8},
    {"F8_E5M2FNUZ", DType::Other, 8}, {"F4", DType::Other, 4},    {"F6_E2M3", DType::Other, 6},
    {"F6_E3M2", DType::Other, 6},  {"C64", DType::Other, 64},
};

const DTypeDesc* lookup_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

std::string known_dtypes() {
  std::string s;
  for (const auto& d : kDTypes) {
    if (!s.empty()) s += ", ";
    s += d.name;
  }
  return s;
}

[[noreturn]] void st_fail(const std::string& what, const std::string& problem, const std::string& expected) {
  throw InputError(one_line(what + ": " + problem + "; expected " + expected));
}

std::uint64_t read_u64le(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A non-negative integer JSON value.
bool as_u64(const json& v, std::uint64_t& out) {
  if (!v.is_number_unsigned()) return false;
  out = v.get<std::uint64_t>();
  return true;
}

}  // namespace

std::uint64_t TensorInfo::numel() const {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;  // unsigned: wraps, no UB; exact for validated tensors
  return n;
}

const TensorInfo* Header::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

unsigned dtype_bits(std::string_view name) {
  const DTypeDesc* d = lookup_dtype(name);
  return d ? d->bits : 0;
}

const char* dtype_name(DType dt) {
  for (const auto& d : kDTypes)
    if (d.dtype == dt && dt != DType::Other) return d.name;
  return "Other";
}

Header parse_header(const std::uint8_t* bytes, std::size_t nbytes, std::uint64_t file_size,
                    const std::string& what) {
  if (nbytes > file_size) nbytes = static_cast<std::size_t>(file_size);
  const bool zip = nbytes >= 4 && bytes[0] == 'P' && bytes[1] == 'K' && bytes[2] == 3 && bytes[3] == 4;
  const bool pickle = nbytes >= 1 && bytes[0] == 0x80;
  // Is the start plausible as safetensors? Only if not do we look for PyTorch magic bytes: a valid
  // safetensors header length can begin with 0x80 (N = 128, 384 ...).
  std::uint64_t n = nbytes >= 8 ? read_u64le(bytes) : 0;
  const bool plausible = nbytes >= 8 && file_size >= 8 && n >= 1 && n <= kMaxHeader && 8 + n <= file_size &&
                         nbytes > 8 && bytes[8] == '{';
  if (!plausible) {
    if (zip)
      st_fail(what, "this is a PyTorch zip checkpoint (pytorch_model.bin), not a safetensors file",
           std::string("a .safetensors file: ") + kConvertAdvice);
    if (pickle)
      st_fail(what, "this is a legacy PyTorch pickle checkpoint (pytorch_model.bin from torch < 1.6), not a safetensors file",
           std::string("a .safetensors file: ") + kConvertAdvice);
    if (file_size < 8)
      st_fail(what, "file is only " + std::to_string(file_size) + " bytes long", kExpectSt);
    if (nbytes < 8)
      st_fail(what, "only " + std::to_string(nbytes) + " bytes of the file were read", "at least the first 8 bytes");
    if (n > kMaxHeader)
      st_fail(what, "header length " + std::to_string(n) + " exceeds the maximum " + std::to_string(kMaxHeader) +
                     " (not a safetensors file?)",
           kExpectSt);
    if (8 + n > file_size)
      st_fail(what, "header length " + std::to_string(n) + " runs past the end of the file (" +
                     std::to_string(file_size) + " bytes)",
           std::string("8 + header length <= file size: ") + kExpectSt);
    if (n == 0) st_fail(what, "header is empty (length 0)", "a JSON object starting with '{'");
    if (nbytes > 8)
      st_fail(what, "header does not start with '{'", std::string("a JSON object: ") + kExpectSt);
  }
  if (nbytes < 8 + n)
    st_fail(what, "only " + std::to_string(nbytes) + " bytes of the file were read",
         "the whole header (" + std::to_string(8 + n) + " bytes)");

  Header h;
  h.header_len = n;
  h.data_start = 8 + n;

  json_strict::Options jopt;
  jopt.max_depth = kMaxDepth;
  const json_strict::Result parsed =
      json_strict::parse(std::string_view(reinterpret_cast<const char*>(bytes + 8), static_cast<std::size_t>(n)), jopt);
  if (parsed.problem == json_strict::Problem::Duplicate) {
    if (parsed.depth == 1)
      st_fail(what, "duplicate key " + quote(parsed.key) + " in the header", "each tensor name once");
    st_fail(what, "duplicate key " + quote(parsed.key) + " inside a header entry", "each field once");
  }
  if (parsed.problem == json_strict::Problem::TooDeep)
    st_fail(what, "header JSON nests deeper than " + std::to_string(kMaxDepth) + " levels",
         "a safetensors header (an object of tensor entries, 3 levels deep)");
  if (parsed.problem != json_strict::Problem::None)
    st_fail(what, "header is not valid JSON (" + parsed.message + ")", "a UTF-8 JSON object");
  const json& root = parsed.value;
  if (!root.is_object()) st_fail(what, "header is not a JSON object", "a JSON object of tensor entries");

  const std::uint64_t data_size = file_size - h.data_start;
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        st_fail(what, "\"__metadata__\" is not an object", "a map of strings to strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string())
          st_fail(what, "\"__metadata__\" value for key " + quote(k) + " is not a string",
               "a map of strings to strings");
        h.metadata.emplace(k, v.get<std::string>());
      }
      continue;
    }
    const std::string tn = "tensor " + quote(name);
    if (!entry.is_object()) st_fail(what, "entry " + quote(name) + " is not an object", kExpectEntry);
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(field))
        st_fail(what, tn + " has no \"" + field + "\" field", std::string("fields dtype, shape, data_offsets: ") + kExpectEntry);
    for (const auto& [field, v] : entry.items()) {
      (void)v;
      if (field != "dtype" && field != "shape" && field != "data_offsets")
        st_fail(what, tn + " has an unexpected field " + quote(field), "only dtype, shape, data_offsets");
    }
    TensorInfo t;
    t.name = name;
    const json& dt = entry["dtype"];
    if (!dt.is_string()) st_fail(what, tn + ": dtype is not a string", "one of " + known_dtypes());
    t.dtype_name = dt.get<std::string>();
    const DTypeDesc* desc = lookup_dtype(t.dtype_name);
    if (!desc) st_fail(what, tn + " has unknown dtype " + quote(t.dtype_name), "one of " + known_dtypes());
    t.dtype = desc->dtype;
    const json& shape = entry["shape"];
    if (!shape.is_array())
      st_fail(what, tn + ": shape is not an array", "an array of non-negative integers, e.g. [768, 1536]");
    t.shape.reserve(shape.size());
    for (const auto& d : shape) {
      std::uint64_t v;
      if (!as_u64(d, v))
        st_fail(what, tn + ": shape has an element that is not a non-negative integer",
             "an array of non-negative integers, e.g. [768, 1536]");
      t.shape.push_back(v);
    }
    const json& offs = entry["data_offsets"];
    if (!offs.is_array() || offs.size() != 2 || !as_u64(offs[0], t.begin) || !as_u64(offs[1], t.end))
      st_fail(what, tn + ": data_offsets is not two non-negative integers", "[begin, end]");
    if (t.begin > t.end)
      st_fail(what, tn + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] has begin > end",
           "begin <= end");
    std::uint64_t numel = 0;
    if (!checked_numel(t.shape, numel) || numel > std::numeric_limits<std::uint64_t>::max() / desc->bits)
      st_fail(what, tn + ": shape " + shape_str(t.shape) + " is too large (its size overflows 64 bits)",
           "a shape whose data fits in the file");
    const std::uint64_t bits = numel * desc->bits;
    if (bits % 8 != 0)
      st_fail(what, tn + ": shape " + shape_str(t.shape) + " of dtype " + t.dtype_name + " is " + std::to_string(bits) +
                     " bits, not a whole number of bytes",
           "numel * bits per element divisible by 8");
    if (t.end - t.begin != bits / 8)
      st_fail(what, tn + " has " + std::to_string(t.end - t.begin) + " bytes of data for shape " + shape_str(t.shape) +
                     " of dtype " + t.dtype_name,
           std::to_string(bits / 8) + " bytes (numel * dtype size)");
    h.tensors.push_back(std::move(t));
  }

  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  std::uint64_t pos = 0;
  const TensorInfo* prev = nullptr;
  for (const auto& t : h.tensors) {
    if (t.begin != pos) {
      if (!prev)
        st_fail(what, "the first tensor " + quote(t.name) + " begins at data offset " + std::to_string(t.begin),
             "the first tensor at offset 0 (no hole before it)");
      if (t.begin > pos)
        st_fail(what, "hole in the data: tensor " + quote(t.name) + " begins at " + std::to_string(t.begin) +
                       " but the previous tensor " + quote(prev->name) + " ends at " + std::to_string(pos),
             "contiguous tensors (each begin == previous end)");
      st_fail(what, "overlapping data: tensor " + quote(t.name) + " begins at " + std::to_string(t.begin) +
                     " before the previous tensor " + quote(prev->name) + " ends at " + std::to_string(pos),
           "contiguous tensors (each begin == previous end)");
    }
    pos = t.end;
    prev = &t;
  }
  if (pos != data_size)
    st_fail(what, "the tensors' data ends at offset " + std::to_string(pos) + " but the data buffer is " +
                   std::to_string(data_size) + " bytes (file size " + std::to_string(file_size) + ")",
         "the last tensor to end exactly at the end of the file");
  return h;
}

// ---------------------------------------------------------------------------------------------
// Conversions

namespace {
const float* half_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) t[i] = half_to_float(static_cast<std::uint16_t>(i));
    return t;
  }();
  return table.data();
}

float double_to_float(double d) {
  if (std::isnan(d)) return std::signbit(d) ? -std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::quiet_NaN();
  if (std::fabs(d) >= 0x1.ffffffp127)  // FLT_MAX + half an ulp and beyond round to inf
    return d > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  return static_cast<float>(d);
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// File

File::File(const std::filesystem::path& path) : path_(path) {
  const std::string what = path.string();
  // A regular file only (a FIFO or a device is refused without blocking), of at most kMaxFile
  // bytes: it is mapped, not copied, so the bound only guards the address space.
  const OpenedFile opened = open_regular_file(path, kMaxFile, what);
  const int fd = opened.fd;
  const std::uint64_t size = opened.size;
  if (size > 0) {
    void* p = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      st_fail(what, std::string("cannot mmap: ") + std::strerror(err), "a readable, mappable .safetensors file");
    }
    map_ = static_cast<const std::uint8_t*>(p);
    map_len_ = static_cast<std::size_t>(size);
  }
  ::close(fd);  // the mapping stays valid
  try {
    static const std::uint8_t empty[1] = {0};
    header_ = parse_header(map_ ? map_ : empty, map_len_, size, what);
  } catch (...) {
    release();
    throw;
  }
}

void File::release() noexcept {
  if (map_) ::munmap(const_cast<std::uint8_t*>(map_), map_len_);
  map_ = nullptr;
  map_len_ = 0;
}

File::~File() { release(); }

File::File(File&& o) noexcept
    : path_(std::move(o.path_)), header_(std::move(o.header_)), map_(o.map_), map_len_(o.map_len_) {
  o.map_ = nullptr;
  o.map_len_ = 0;
}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    header_ = std::move(o.header_);
    map_ = o.map_;
    map_len_ = o.map_len_;
    o.map_ = nullptr;
    o.map_len_ = 0;
  }
  return *this;
}

std::span<const std::uint8_t> File::bytes(const TensorInfo& t) const {
  const std::uint64_t data_size = map_len_ - header_.data_start;
  if (t.begin > t.end || t.end > data_size)
    throw std::invalid_argument(one_line(path_.string() + ": tensor " + quote(t.name) +
                                         " has data offsets outside this file (a TensorInfo of another file?)"));
  if (t.begin == t.end) return {};
  return {map_ + header_.data_start + t.begin, static_cast<std::size_t>(t.end - t.begin)};
}

namespace {
/// Drops the mapped file pages of a converted tensor from memory (they are re-read from the file
/// if touched again), so that loading does not hold the file and its float copy at once.
void drop_pages(std::span<const std::uint8_t> raw) noexcept {
  if (raw.empty()) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto b = reinterpret_cast<std::uintptr_t>(raw.data()) & ~(page - 1);
  const auto e = reinterpret_cast<std::uintptr_t>(raw.data()) + raw.size();
  ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}
}  // namespace

void File::read_float(const TensorInfo& t, float* out) const {
  convert_float(t, out);
  drop_pages(bytes(t));
}

void File::convert_float(const TensorInfo& t, float* out) const {
  const auto raw = bytes(t);
  const std::uint64_t n = t.numel();
  const unsigned bits = dtype_bits(t.dtype_name);
  if (bits == 0 || n * (bits / 8) != raw.size() || bits % 8 != 0)
    throw std::invalid_argument(one_line(path_.string() + ": tensor " + quote(t.name) +
                                         " does not match its data (a TensorInfo of another file?)"));
  const std::uint8_t* p = raw.data();
  switch (t.dtype) {
    case DType::F32:
      if (n) std::memcpy(out, p, n * 4);
      return;
    case DType::F16: {
      const float* table = half_table();
      for (std::uint64_t i = 0; i < n; ++i)
        out[i] = table[static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8))];
      return;
    }
    case DType::BF16:
      for (std::uint64_t i = 0; i < n; ++i)
        out[i] = bf16_to_float(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
      return;
    case DType::F64:
      for (std::uint64_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = double_to_float(d);
      }
      return;
    default:
      st_fail(path_.string(), "tensor " + quote(t.name) + " has dtype " + t.dtype_name + ", which cannot be read as float",
           "a floating-point tensor of dtype F16, BF16, F32 or F64");
  }
}

std::vector<float> File::read_float(const std::string& name) const {
  const TensorInfo* t = header_.find(name);
  if (!t) st_fail(path_.string(), "no tensor named " + quote(name), "the checkpoint to contain it");
  std::vector<float> out(static_cast<std::size_t>(t->numel()));
  read_float(*t, out.data());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Tensors

namespace {
const char* const kExpectIndex =
    "a model.safetensors.index.json like {\"metadata\": {...}, \"weight_map\": {\"tensor name\": \"shard file\"}}";
const char* const kExpectCheckpoint =
    "a .safetensors file, or a directory with model.safetensors or model.safetensors.index.json";
}  // namespace

void Tensors::add_file(const std::filesystem::path& file) {
  files_.emplace_back(file);
}

Tensors::Tensors(const std::filesystem::path& path_or_dir) : path_(path_or_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path_or_dir, ec);
  if (ec || !fs::exists(status)) st_fail(path_or_dir.string(), "no such file or directory", kExpectCheckpoint);

  fs::path index_path;
  if (fs::is_directory(status)) {
    if (fs::exists(path_or_dir / "model.safetensors.index.json")) {
      index_path = path_or_dir / "model.safetensors.index.json";
    } else if (fs::exists(path_or_dir / "model.safetensors")) {
      add_file(path_or_dir / "model.safetensors");
    } else {
      st_fail(path_or_dir.string(), "directory has neither model.safetensors nor model.safetensors.index.json",
           kExpectCheckpoint);
    }
  } else {
    const std::string fname = path_or_dir.filename().string();
    const std::string suffix = ".index.json";
    if (fname.size() > suffix.size() && fname.compare(fname.size() - suffix.size(), suffix.size(), suffix) == 0)
      index_path = path_or_dir;
    else
      add_file(path_or_dir);
  }

  if (index_path.empty()) {
    const Header& h = files_[0].header();
    for (std::size_t i = 0; i < h.tensors.size(); ++i) where_[h.tensors[i].name] = {0, i};
    metadata_ = h.metadata;
    return;
  }

  // Sharded checkpoint.
  const std::string what = index_path.string();
  const std::string text = read_regular_file(index_path, kMaxIndex, what);
  const json_strict::Result parsed = json_strict::parse(text);
  if (parsed.problem == json_strict::Problem::Duplicate)
    st_fail(what, "duplicate key " + quote(parsed.key) + (parsed.path.empty() ? "" : " in " + quote(parsed.path)),
         "each key once: " + std::string(kExpectIndex));
  if (parsed.problem != json_strict::Problem::None) st_fail(what, "not valid JSON (" + parsed.message + ")", kExpectIndex);
  const json& index = parsed.value;
  if (!index.is_object()) st_fail(what, "top level is not a JSON object", kExpectIndex);
  if (!index.contains("weight_map")) st_fail(what, "no \"weight_map\"", kExpectIndex);
  const json& wm = index["weight_map"];
  if (!wm.is_object()) st_fail(what, "\"weight_map\" is not an object", kExpectIndex);

  const fs::path dir = index_path.parent_path();
  std::map<std::string, std::string> shard_of;  // tensor -> shard file name, per the index
  std::set<std::string> shard_names;
  for (const auto& [name, v] : wm.items()) {
    if (!v.is_string())
      st_fail(what, "weight_map value for tensor " + quote(name) + " is not a string", kExpectIndex);
    const std::string shard = v.get<std::string>();
    const fs::path rel(shard);
    bool bad = shard.empty() || rel.is_absolute();
    for (const auto& part : rel)
      if (part == "..") bad = true;
    if (bad)
      st_fail(what, "weight_map names shard " + quote(shard) + " for tensor " + quote(name),
           "a shard file name relative to the index's directory");
    // Existence only: what the shard is (a FIFO, a device ...) is checked when it is opened.
    if (!fs::exists(dir / rel, ec))
      st_fail(what, "shard " + quote(shard) + " (for tensor " + quote(name) + ") does not exist",
           "every shard file next to the index");
    shard_of[name] = shard;
    shard_names.insert(shard);
    if (shard_names.size() > kMaxShards)
      st_fail(what, "the weight_map names more than " + std::to_string(kMaxShards) + " shard files",
           "at most " + std::to_string(kMaxShards) + " shards");
  }

  std::map<std::string, std::size_t> file_index;  // shard name -> files_ index
  for (const auto& shard : shard_names) {
    file_index[shard] = files_.size();
    add_file(dir / shard);
  }
  std::map<std::string, std::string> found_in;  // tensor -> shard that holds it
  for (const auto& shard : shard_names) {  // first pass: each tensor in one shard only
    for (const auto& t : files_[file_index[shard]].header().tensors) {
      auto [it, inserted] = found_in.emplace(t.name, shard);
      if (!inserted)
        st_fail(what, "tensor " + quote(t.name) + " is in two shards, " + quote(it->second) + " and " + quote(shard),
             "each tensor in exactly one shard");
    }
  }
  for (const auto& shard : shard_names) {  // second pass: shards agree with the weight_map
    const std::size_t fi = file_index[shard];
    const Header& h = files_[fi].header();
    for (std::size_t i = 0; i < h.tensors.size(); ++i) {
      const std::string& name = h.tensors[i].name;
      auto s = shard_of.find(name);
      if (s == shard_of.end())
        st_fail(what, "tensor " + quote(name) + " is in shard " + quote(shard) + " but not in the weight_map",
             "the index to list every tensor of its shards");
      if (s->second != shard)
        st_fail(what, "tensor " + quote(name) + " is in shard " + quote(shard) + " but the weight_map says " +
                       quote(s->second),
             "the weight_map to name the shard holding each tensor");
      where_[name] = {fi, i};
    }
    for (const auto& [k, v] : h.metadata) metadata_.emplace(k, v);
  }
  for (const auto& [name, shard] : shard_of)
    if (!found_in.count(name))
      st_fail(what, "tensor " + quote(name) + " is listed in the weight_map but absent from shard " + quote(shard),
           "each listed tensor in its shard");

  if (index.contains("metadata")) {
    const json& md = index["metadata"];
    if (!md.is_object()) st_fail(what, "\"metadata\" is not an object", kExpectIndex);
    for (const auto& [k, v] : md.items()) metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
}

std::vector<std::string> Tensors::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, loc] : where_) out.push_back(name);
  return out;
}

const TensorInfo* Tensors::find(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) return nullptr;
  return &files_[it->second.first].header().tensors[it->second.second];
}

const File* Tensors::file_of(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : &files_[it->second.first];
}

std::vector<float> Tensors::read_float(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) st_fail(path_.string(), "no tensor named " + quote(name), "the checkpoint to contain it");
  const File& f = files_[it->second.first];
  const TensorInfo& t = f.header().tensors[it->second.second];
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  f.read_float(t, out.data());
  return out;
}

}  // namespace tokdyn::st
