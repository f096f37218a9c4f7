#pragma once
// The errors tokdyn reports to its user, each with its own exit code (README, "Exit codes"):
//
//   0   success
//   1   internal error (a bug: please report it)
//   2   bad input: config, CLI, checkpoint, token ids, a parameter value the library refuses, or a
//       run that cannot fit this machine
//   3   resource failure: disk full (ENOSPC), permission denied (EACCES), I/O error, out of memory
//   4   non-finite state: the dynamics produced NaN or Inf; no result written
//   5   figures failed: the CSV/NPY results were written and kept, the figures were not drawn
//   6   output busy: another tokdyn run is writing the same output folder
//   7   no convergence: a numerical method (Newton, an eigenvalue iteration, a fixed-point chain,
//       step halving) did not reach its tolerance for these parameters; no result written
//   128 + signal: interrupted (SIGHUP 129, SIGINT 130, SIGTERM 143); nothing half-written kept
//
// Every message names the input (or the path, or the quantity) and says what was expected.
//
// Who throws what (docs/reliability.md, "One error convention"):
//
//  * The library (models, drivers, analyses, linalg, schedules) does not know where its values
//    come from. It refuses a bad argument value with std::invalid_argument (std::domain_error for
//    a value outside a mathematical domain), one line: "<function or quantity>: expected X, got Y".
//  * A broken internal invariant, a condition no parameter value can produce (a shape or index
//    tokdyn computed itself, a writer used out of order, a malformed preset schema), is a bug:
//    std::logic_error (the base class itself, or std::out_of_range / std::length_error), never
//    std::invalid_argument. It stays exit 1, "internal error".
//  * The parameter layer turns a user's input into a run: params.cpp / registry.cpp (schema and
//    TOML checks), the presets (src/experiments: combinations the schema cannot express, naming
//    the parameter), run.cpp, the CLI (apps/tokdyn/main.cpp), and the readers of user files
//    (src/io: config.json, safetensors, .npy, output folders). It throws InputError directly.
//  * run_experiment calls the preset's estimate and run through as_input_error: every value a
//    preset passes to the library comes from the user's parameters or files, so a
//    std::invalid_argument / std::domain_error escaping them is a bad parameter value: InputError,
//    exit 2, with the library's message unchanged. Everything else keeps its own code.
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
inline constexpr int no_convergence = 7;
/// `tokdyn sweep`: some points failed (their rows in sweep.csv name the error and exit code) or are
/// missing (--collect of an unfinished sweep); the other points' results are written.
inline constexpr int points_failed = 8;
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

/// A numerical method did not reach its tolerance (Newton, an eigenvalue iteration, a fixed-point
/// chain, step halving): neither a bug nor bad input, a property of the numerics at these
/// parameters. Exit code 7. A std::domain_error, so that code which can go on without the answer
/// (a continuation that stops, a check that becomes n/a) catches it as before; as_input_error
/// lets it through unchanged.
class ConvergenceError : public std::domain_error {
 public:
  using std::domain_error::domain_error;
};

/// Another tokdyn run holds the output folder's lock. Exit code 6.
class BusyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tokdyn

#include <exception>
#include <functional>
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
/// Runs f; a std::invalid_argument or std::domain_error escaping it becomes an InputError with
/// the same (one-line) message. For calls whose every argument value comes from the user's input
/// (run_experiment: a preset's estimate and run). Other exceptions pass through unchanged.
void as_input_error(const std::function<void()>& f);

struct Failure {
  int code = exit_code::internal;
  std::string line;
};
Failure failure_of(std::exception_ptr e);

}  // namespace tokdyn
