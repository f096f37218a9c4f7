#pragma once
// The errors tokdyn reports to its user, each with its own exit code (README, "Exit codes"):
//
//   0   success
//   1   internal error (a bug: please report it)
//   2   bad input: config, CLI, checkpoint, token ids, or a run that cannot fit this machine
//   3   resource failure: disk full (ENOSPC), permission denied (EACCES), I/O error, out of memory
//   4   non-finite state: the dynamics produced NaN or Inf; no result written
//   5   figures failed: the CSV/NPY results were written and kept, the figures were not drawn
//   6   output busy: another tokdyn run is writing the same output folder
//   128 + signal: interrupted (SIGHUP 129, SIGINT 130, SIGTERM 143); nothing half-written kept
//
// Every message names the input (or the path, or the quantity) and says what was expected.
#include <stdexcept>
#include <string>

namespace tokdyn {

namespace exit_code {
inline constexpr int ok = 0;
inline constexpr int internal = 1;
inline constexpr int bad_input = 2;
inline constexpr int resource = 3;
inline constexpr int non_finite = 4;
inline constexpr int figures_failed = 5;
inline constexpr int busy = 6;
}  // namespace exit_code

/// Bad user input (config, CLI, checkpoint, data file). Exit code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The system refused a resource: disk full, permission denied, I/O error. Exit code 3.
class ResourceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The state of a run became NaN or Inf (message: where, e.g. "run 3, layer 17"). Exit code 4.
class NonFiniteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Another tokdyn run holds the output folder's lock. Exit code 6.
class BusyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tokdyn

#include <exception>
#include <string_view>

namespace tokdyn {

/// `s` as one safe terminal line: line breaks become "; ", other control characters (C0, DEL,
/// C1, and bytes that are not UTF-8) are shown escaped as \xNN, and the text is capped at
/// `max_chars` bytes (ending in "...").
std::string message_line(std::string_view s, std::size_t max_chars = 480);

/// `s` on one line: newlines become "; " (a trailing one is dropped), carriage returns are
/// dropped; nothing else changes (for the text of one-line error messages).
std::string one_line(std::string s);

/// How the CLI reports an exception: its exit code and its line ("error: ...", "internal error:
/// ...", "out of memory ..."), per the table at the top of this header.
struct Failure {
  int code = exit_code::internal;
  std::string line;
};
Failure failure_of(std::exception_ptr e);

}  // namespace tokdyn
