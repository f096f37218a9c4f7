#pragma once
// Reading a user's input file safely: regular files only (a FIFO, a device such as /dev/zero, a
// directory or a socket is refused without blocking, and without being opened at all unless it
// is swapped in between the check and the open), a size bound checked before reading, and
// one-line messages that name the file and say what was expected (no such file, permission
// denied, symlink loop, not a regular file, too large, changed while being read).
//
// The bounds tokdyn uses (README, "Input files"):
//   Mamba-2 config.json                      1 MiB  (a real one is under 2 KiB)
//   model.safetensors.index.json            64 MiB  (a 2.7b index is ~ 40 KiB)
//   .safetensors file (memory-mapped)        1 TiB  (mapped, not copied; the header <= 100 MB)
//   token_ids .npy                 header + 8 bytes per id the run uses (+ 64 KiB for the header)
#include <cstdint>
#include <filesystem>
#include <string>

namespace tokdyn {

inline constexpr std::uint64_t kKiB = 1024, kMiB = 1024 * kKiB, kGiB = 1024 * kMiB;

/// Opens `path` for reading without blocking, checks it is a regular file of at most `max_bytes`,
/// and returns its file descriptor (the caller closes it) and size. `what` names the input in
/// messages, e.g. the path. Throws InputError.
struct OpenedFile {
  int fd = -1;
  std::uint64_t size = 0;
};
OpenedFile open_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, const std::string& what);

/// The whole content of a regular file of at most `max_bytes`. Throws InputError (also when the
/// file grows or shrinks while it is read).
std::string read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, const std::string& what);

/// A failed write as an error: ResourceError "cannot write 'FILE' (no space left on device,
/// ENOSPC)" (exit code 3). `err` is the errno of the failure (0: unknown).
class ResourceError;
[[noreturn]] void throw_write_error(const std::filesystem::path& file, int err, const char* verb = "write");

/// Writes `text` to `file` (created or truncated); a failure to create, write or close it (a full
/// disk, permissions) is a ResourceError naming the file (exit 3).
void write_text_file(const std::filesystem::path& file, const std::string& text);

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

/// A byte count in words: "512 bytes", "1.0 MiB", "2.5 GiB".
std::string bytes_text(std::uint64_t bytes);

}  // namespace tokdyn
