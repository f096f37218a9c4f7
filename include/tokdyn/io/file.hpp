#pragma once
// Reading a user's input file safely: regular files only (a FIFO, a device such as /dev/zero, a
// directory or a socket is refused without blocking), a size bound checked before reading, and
// one-line messages that name the file and the cause (no such file, permission denied, symlink
// loop, too large, not a regular file).
#include <cstdint>
#include <filesystem>
#include <string>

namespace tokdyn {

/// Opens `path` for reading without blocking, checks it is a regular file of at most `max_bytes`,
/// and returns its file descriptor (the caller closes it) and size. `what` names the input in
/// messages, e.g. "config file 'run.toml'". Throws InputError.
struct OpenedFile {
  int fd = -1;
  std::uint64_t size = 0;
};
OpenedFile open_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, const std::string& what);

/// The whole content of a regular file of at most `max_bytes`. Throws InputError.
std::string read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, const std::string& what);

/// A failed write as an error: ResourceError "cannot write 'FILE' (no space left on device,
/// ENOSPC)" (exit code 3). `err` is the errno of the failure (0: unknown).
class ResourceError;
[[noreturn]] void throw_write_error(const std::filesystem::path& file, int err, const char* verb = "write");

/// The cause of a failed system call in words with its symbolic name: "no space left on device
/// (ENOSPC)", "permission denied (EACCES)", ...
std::string errno_text(int err);

/// Write failures that could not be thrown where they happened (a writer's destructor flushing its
/// last buffer): recorded here, checked by the run before publishing its results.
void note_write_failure(const std::filesystem::path& file, int err);
/// Throws the first recorded write failure (and clears the record).
void check_write_failures();

/// Why a path cannot be opened, in words: "no such file", "permission denied", "symlink loop", ...
std::string open_failure_text(int err);

}  // namespace tokdyn
