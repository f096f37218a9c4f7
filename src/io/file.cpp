// Safe reading of user-named input files (see io/file.hpp).
#include "tokdyn/io/file.hpp"

#include <cerrno>
#include <cstring>
#include <mutex>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tokdyn/error.hpp"

namespace tokdyn {

std::string errno_text(int err) {
  switch (err) {
    case ENOSPC: return "no space left on device (ENOSPC)";
    case EDQUOT: return "disk quota exceeded (EDQUOT)";
    case EACCES: return "permission denied (EACCES)";
    case EPERM: return "operation not permitted (EPERM)";
    case EROFS: return "read-only file system (EROFS)";
    case EIO: return "input/output error (EIO)";
    case EFBIG: return "file too large (EFBIG)";
    case EMFILE: return "too many open files (EMFILE)";
    case ENOENT: return "no such file or directory (ENOENT)";
    case 0: return "unknown cause";
    default: return std::strerror(err);
  }
}

void throw_write_error(const std::filesystem::path& file, int err, const char* verb) {
  throw ResourceError(fmt::format("cannot {} '{}': {}", verb, file.string(), errno_text(err)));
}

namespace {
std::mutex& failure_mu() {
  static std::mutex m;
  return m;
}
std::string& failure_text() {
  static std::string s;
  return s;
}
}  // namespace

void note_write_failure(const std::filesystem::path& file, int err) {
  std::lock_guard<std::mutex> lock(failure_mu());
  if (failure_text().empty()) failure_text() = fmt::format("cannot write '{}': {}", file.string(), errno_text(err));
}

void check_write_failures() {
  std::string msg;
  {
    std::lock_guard<std::mutex> lock(failure_mu());
    msg.swap(failure_text());
  }
  if (!msg.empty()) throw ResourceError(msg);
}

std::string open_failure_text(int err) {
  switch (err) {
    case ENOENT: return "no such file";
    case EACCES: return "permission denied";
    case ENOSPC: return "no space left on device (ENOSPC)";
    case ELOOP: return "symlink loop";
    case ENOTDIR: return "a component of the path is not a directory";
    case ENAMETOOLONG: return "path too long";
    case EISDIR: return "it is a directory";
    default: return std::strerror(err);
  }
}

namespace {

std::string bytes_text(std::uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(b) / (1ull << 10));
  return fmt::format("{} bytes", b);
}

}  // namespace

OpenedFile open_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, const std::string& what) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    throw InputError(fmt::format("{}: cannot open ({})", what, open_failure_text(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw InputError(fmt::format("{}: cannot read ({})", what, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    throw InputError(fmt::format("{}: expected a regular file, got {}", what, kind));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    throw InputError(fmt::format("{}: expected a file of at most {}, got {}", what, bytes_text(max_bytes), bytes_text(size)));
  }
  // Back to blocking reads for a regular file (O_NONBLOCK has no effect on them, but be explicit).
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return {fd, size};
}

std::string read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, const std::string& what) {
  const OpenedFile f = open_regular_file(path, max_bytes, what);
  std::string out;
  out.resize(f.size);
  std::uint64_t got = 0;
  while (got < f.size) {
    const ssize_t r = ::read(f.fd, out.data() + got, f.size - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(f.fd);
      throw InputError(fmt::format("{}: cannot read ({})", what, std::strerror(err)));
    }
    if (r == 0) break;  // the file shrank while we read it
    got += static_cast<std::uint64_t>(r);
  }
  // A file that grew while we read it is read up to its size at open time plus one probe byte.
  char probe = 0;
  const ssize_t extra = ::read(f.fd, &probe, 1);
  ::close(f.fd);
  if (extra > 0) throw InputError(fmt::format("{}: the file changed while being read", what));
  out.resize(got);
  return out;
}

}  // namespace tokdyn
