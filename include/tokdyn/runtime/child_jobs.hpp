#pragma once
// Child processes a preset runs (e.g. coupling-e1's PyTorch trainings): a list of commands, at most
// N at a time, each in its own process group with its stderr in a file, registered with the
// interrupt handler (core/interrupt.hpp: Ctrl-C, SIGTERM or SIGHUP stop every running child and the
// run), polled from the calling thread. When a job's callback throws (a failed job), the other
// running children are stopped (SIGTERM to their groups, SIGKILL after 2 s) and reaped before the
// exception leaves. Children start with an empty signal mask and default handlers, stdin and
// stdout on /dev/null.
//
// `python_command` gives the interpreter and environment for tokdyn's own Python packages, as the
// figures use them (runtime/figures.cpp): TOKDYN_PYTHON or /usr/bin/python3, PYTHONPATH = the
// folders of `python_paths()` before the parent's PYTHONPATH. `python_paths()` finds them beside
// the running program first (an installed tokdyn, `cmake --install BUILD --prefix P`: P/bin/tokdyn
// or P/lib/python3/dist-packages/tokdyn/_core*.so, with P/share/tokdyn/python), and only then in
// the source and build trees it was compiled from, so that an installed tokdyn runs without them.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace tokdyn {

struct ChildJob {
  std::vector<std::string> argv;         ///< argv[0]: the program (an absolute path, or a name searched on PATH)
  std::vector<std::string> env;          ///< "KEY=VALUE" entries replacing the parent's of the same key
  std::filesystem::path stderr_file;     ///< the child's stderr (created or truncated; its folder must exist)
};

struct ChildExit {
  int code = 0;           ///< exit status (meaningful when signal == 0)
  int signal = 0;         ///< the signal that ended the child, 0 when it exited
  std::string last_line;  ///< the last non-empty line of its stderr (trimmed; may be empty)
  bool ok() const { return signal == 0 && code == 0; }
};

/// Runs `jobs` in index order, at most `parallel` (>= 1) at a time, and calls on_done(index, exit)
/// in the calling thread as each one ends (completion order). std::runtime_error when a child
/// cannot be started (naming the program); exceptions of on_done propagate after the other running
/// children were stopped. On an interrupt (interrupt::interrupting()) it never returns: the
/// handler stops the children and ends the process.
void run_child_jobs(const std::vector<ChildJob>& jobs, int parallel,
                    const std::function<void(std::size_t, const ChildExit&)>& on_done);

/// One child, waited for: run_child_jobs({job}, 1, ...)'s exit (the same errors and interrupts).
ChildExit run_child(const ChildJob& job);

/// Where this program's Python lives. `sources`: the folder with plot.py, tokdyn_plot and
/// tokdyn_train (P/share/tokdyn/python installed, else <source>/python); `package`: the folder
/// holding the package tokdyn with its module _core (P/lib/python3/dist-packages installed, else
/// <build>/python; empty for an installation without it). `installed`: found beside the program.
struct PythonPaths {
  std::filesystem::path sources;
  std::filesystem::path package;
  bool installed = false;
};
/// Looked up once: the installation prefix of /proc/self/exe (P/bin/tokdyn), then of the shared
/// object holding this code (P/lib/python3/dist-packages/tokdyn/_core*.so), then the compile-time
/// source and build folders.
const PythonPaths& python_paths();

/// A PYTHONPATH value: python_paths()'s package and sources folders, then `parent` when non-empty.
std::string python_path(const std::string& parent = "");

/// The argv prefix {python, "-m", module} and environment entries (PYTHONPATH with tokdyn's
/// folders first, python_path()) for running one of tokdyn's Python modules.
struct PythonCommand {
  std::vector<std::string> argv;
  std::vector<std::string> env;
};
PythonCommand python_command(const std::string& module);

}  // namespace tokdyn
