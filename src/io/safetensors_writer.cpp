// Safetensors writer: validated layout (dtype alignment descending, then name), F16/BF16/F32
// data, written to a temporary file and renamed into place. Standard library, POSIX and
// nlohmann::json only.
#include "tokdyn/io/safetensors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "safetensors_internal.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"

namespace tokdyn::st {

// ---------------------------------------------------------------------------------------------
// Writer

namespace {

using json = nlohmann::json;

unsigned write_size(DType d) {
  switch (d) {
    case DType::F16:
    case DType::BF16: return 2;
    case DType::F32: return 4;
    case DType::F64: return 8;
    default: return 0;
  }
}

std::string json_string(const std::string& s, const std::string& file, const char* role) {
  try {
    return json(s).dump();
  } catch (const json::exception&) {
    throw std::invalid_argument(one_line(file + ": " + role + " " + quote(s) + " is not valid UTF-8"));
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void write_all(int fd, const void* data, std::size_t n, const std::string& file) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_write_error(file, errno);  // ResourceError (exit 3): disk full, permission, I/O
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

}  // namespace

void write_file(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                const std::map<std::string, std::string>& metadata) {
  const std::string file = path.string();
  // Validate, and lay out: dtype alignment (= element size) descending, then name.
  std::vector<std::size_t> order(tensors.size());
  std::vector<std::uint64_t> numels(tensors.size());
  std::set<std::string> seen;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    order[i] = i;
    if (t.name == "__metadata__")
      throw std::invalid_argument(one_line(file + ": tensor name '__metadata__' is reserved"));
    if (!seen.insert(t.name).second)
      throw std::invalid_argument(one_line(file + ": tensor name " + quote(t.name) + " given twice"));
    if (!write_size(t.dtype))
      throw std::invalid_argument(one_line(file + ": tensor " + quote(t.name) + ": cannot store dtype " +
                                           dtype_name(t.dtype) + " (only F16, BF16, F32, F64)"));
    if (!checked_numel(t.shape, numels[i]) || numels[i] > (std::numeric_limits<std::uint64_t>::max() >> 3))
      throw std::invalid_argument(one_line(file + ": tensor " + quote(t.name) + ": shape " + shape_str(t.shape) +
                                           " is too large"));
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const unsigned sa = write_size(tensors[a].dtype), sb = write_size(tensors[b].dtype);
    if (sa != sb) return sa > sb;
    return tensors[a].name < tensors[b].name;
  });

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header += ',';
      first = false;
      header += json_string(k, file, "metadata key") + ":" + json_string(v, file, "metadata value");
    }
    header += "}";
  }
  std::uint64_t offset = 0;
  for (std::size_t i : order) {
    const auto& t = tensors[i];
    if (header.size() > 1) header += ',';
    header += json_string(t.name, file, "tensor name");
    header += ":{\"dtype\":\"";
    header += dtype_name(t.dtype);
    header += "\",\"shape\":[";
    for (std::size_t k = 0; k < t.shape.size(); ++k) {
      if (k) header += ',';
      header += std::to_string(t.shape[k]);
    }
    const std::uint64_t nb = numels[i] * write_size(t.dtype);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + nb) + "]}";
    offset += nb;
  }
  header += '}';
  while (header.size() % 8 != 0) header += ' ';

  const std::string tmp = file + ".tmp-" + std::to_string(::getpid());
  Fd out;
  out.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out.fd < 0)
    throw_write_error(tmp, errno, "create");
  try {
    std::uint8_t len[8];
    std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(n >> (8 * i));
    write_all(out.fd, len, 8, tmp);
    write_all(out.fd, header.data(), header.size(), tmp);
    std::vector<std::uint8_t> buf(1 << 20);
    for (std::size_t i : order) {
      const auto& t = tensors[i];
      const std::uint64_t total = numels[i];
      if (total == 0) continue;
      if (t.dtype == DType::F64 ? !t.data64 : !t.data)
        throw std::invalid_argument(one_line(file + ": tensor " + quote(t.name) + " has shape " + shape_str(t.shape) +
                                             " but no data"));
      if (t.dtype == DType::F64) {  // exact: the doubles' little-endian bytes
        write_all(out.fd, t.data64, static_cast<std::size_t>(total * 8), tmp);
        continue;
      }
      if (t.dtype == DType::F32) {
        write_all(out.fd, t.data, static_cast<std::size_t>(total * 4), tmp);
        continue;
      }
      const std::size_t per_chunk = buf.size() / 2;
      for (std::uint64_t done = 0; done < total;) {
        const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(per_chunk, total - done));
        for (std::size_t j = 0; j < k; ++j) {
          const float v = t.data[done + j];
          const std::uint16_t h = t.dtype == DType::F16 ? float_to_half(v) : float_to_bf16(v);
          buf[2 * j] = static_cast<std::uint8_t>(h & 0xff);
          buf[2 * j + 1] = static_cast<std::uint8_t>(h >> 8);
        }
        write_all(out.fd, buf.data(), 2 * k, tmp);
        done += k;
      }
    }
    const int fd = out.fd;
    out.fd = -1;
    if (::close(fd) != 0) throw_write_error(tmp, errno);
    if (::rename(tmp.c_str(), file.c_str()) != 0)
      throw_write_error(file, errno, "move the finished temporary file into");
  } catch (...) {
    if (out.fd >= 0) {
      ::close(out.fd);
      out.fd = -1;
    }
    ::unlink(tmp.c_str());
    throw;
  }
}

void write_checkpoint_dir(const std::filesystem::path& dir, const std::string& config_text,
                          const std::vector<TensorToWrite>& tensors, const std::map<std::string, std::string>& metadata) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
    throw InputError(dir.string() + ": already exists and is not empty; expected a new directory for the checkpoint");
  // The one folder this function ever deletes is the temporary it created itself: a path of that
  // name that already exists (not ours) is refused, never removed.
  const fs::path tmp = dir.string() + ".tmp-" + std::to_string(static_cast<long>(::getpid()));
  if (fs::exists(fs::symlink_status(tmp, ec)))
    throw InputError(tmp.string() + ": already exists; expected no such path (tokdyn writes the checkpoint there first)");
  try {
    fs::create_directories(tmp);
    write_text_file(tmp / "config.json", config_text);
    write_file(tmp / "model.safetensors", tensors, metadata);
    fs::remove(dir, ec);  // an empty directory may stand in the way
    fs::rename(tmp, dir);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw ResourceError(dir.string() + ": cannot write the checkpoint: " + e.code().message());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace tokdyn::st
