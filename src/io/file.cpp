// Safe reading of user-named input files (see io/file.hpp). Standard library and POSIX only, so
// the libFuzzer targets can link it as it is.
#include "tokdyn/io/file.hpp"

#include <fstream>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/json_strict.hpp"

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

void write_text_file(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::out | std::ios::trunc | std::ios::binary);
  if (!out) throw_write_error(file, errno, "create");
  out << text;
  errno = 0;
  out.close();
  if (!out) throw_write_error(file, errno);
}

void throw_write_error(const std::filesystem::path& file, int err, const char* verb) {
  throw ResourceError(std::string("cannot ") + verb + " '" + file.string() + "': " + errno_text(err));
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
  if (failure_text().empty()) failure_text() = "cannot write '" + file.string() + "': " + errno_text(err);
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

std::string bytes_text(std::uint64_t b) {
  char buf[64];
  if (b >= kGiB) std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / static_cast<double>(kGiB));
  else if (b >= kMiB) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / static_cast<double>(kMiB));
  else if (b >= kKiB) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / static_cast<double>(kKiB));
  else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(b));
  return buf;
}

namespace {

// The input's name on one line (a path may hold a newline): control bytes and DEL become \xNN.
std::string printable(const std::string& s) { return json_strict::one_line(s); }

const char* kind_of(mode_t m) {
  return S_ISDIR(m)    ? "a directory"
         : S_ISFIFO(m) ? "a FIFO (named pipe)"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

[[noreturn]] void refuse(const std::string& what, const std::string& text) {
  throw InputError(printable(what) + ": " + text);
}

}  // namespace

OpenedFile open_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, const std::string& what) {
  // First look without opening: opening a device can have effects of its own, and opening a
  // FIFO for reading waits for a writer.
  struct stat before {};
  if (::stat(path.c_str(), &before) != 0) {
    const int err = errno;
    refuse(what, "cannot open (" + open_failure_text(err) + "); expected a readable regular file");
  }
  if (!S_ISREG(before.st_mode)) refuse(what, std::string("expected a regular file, got ") + kind_of(before.st_mode));
  // O_NONBLOCK: should the path have been swapped for a FIFO since, the open still returns at once.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    refuse(what, "cannot open (" + open_failure_text(err) + "); expected a readable regular file");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    refuse(what, std::string("cannot read (") + std::strerror(err) + "); expected a readable regular file");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    refuse(what, std::string("expected a regular file, got ") + kind_of(st.st_mode));
  }
  if (st.st_dev != before.st_dev || st.st_ino != before.st_ino) {
    ::close(fd);
    refuse(what, "the file was replaced while being opened; expected a file that stays in place");
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    refuse(what, "expected a file of at most " + bytes_text(max_bytes) + ", got " + bytes_text(size));
  }
  // Back to blocking reads (O_NONBLOCK has no effect on a regular file, but be explicit).
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
      refuse(what, std::string("cannot read (") + std::strerror(err) + "); expected a readable regular file");
    }
    if (r == 0) break;  // the file shrank while we read it
    got += static_cast<std::uint64_t>(r);
  }
  // A file that grew while we read it: read up to its size at open time plus one probe byte.
  char probe = 0;
  ssize_t extra;
  do extra = ::read(f.fd, &probe, 1);
  while (extra < 0 && errno == EINTR);
  ::close(f.fd);
  if (got != f.size || extra > 0)
    refuse(what, "the file changed while being read; expected a file that stays unchanged");
  return out;
}

}  // namespace tokdyn
