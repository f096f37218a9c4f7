#pragma once
// Interrupts (SIGINT, SIGTERM, SIGHUP) end a run cleanly: the figure subprocess is stopped, the
// run's temporary folders are removed, and the process exits with 128 + signal (130, 143, 129).
//
// install() blocks the three signals in the calling thread before any other thread exists (so
// every thread, OpenMP's and BLAS's included, inherits the mask) and starts one thread that
// waits for them with sigwait. Code that creates something to clean up registers it for its
// lifetime with a Guard; a commit (the rename that publishes a complete result) runs inside a
// CriticalSection, so an interrupt either comes before it (nothing published) or after it
// (complete result kept), never in between. A fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT:
// a bug) is reported in one line and cleaned up the same way, exit 128 + signal (not under the
// sanitizers, which report crashes themselves).
#include <filesystem>
#include <string>
#include <sys/types.h>

namespace tokdyn::interrupt {

/// Installs the handler thread. Call once, first thing in main(). Idempotent.
void install();
/// True once a handler is installed (library users who never call install() get default signals).
bool installed();
/// True once an interrupt is being handled: the caller should stop and let the handler exit.
bool interrupting();
/// Never returns: the handler is cleaning up and will end the process.
[[noreturn]] void wait_for_exit();

/// Registers a path to remove (recursively; symlinks are removed, not followed) on interrupt.
/// Paths that start with the registered path's name plus any suffix are removed too
/// (e.g. "out.tmp-12" also removes "out.tmp-12.tmp-12").
class PathGuard {
 public:
  explicit PathGuard(std::filesystem::path p);
  ~PathGuard();
  PathGuard(const PathGuard&) = delete;
  PathGuard& operator=(const PathGuard&) = delete;

 private:
  std::filesystem::path path_;
};

/// Registers a child process group to terminate on interrupt (SIGTERM, then SIGKILL).
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pgid);
  ~ChildGuard();
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;

 private:
  pid_t pgid_;
};

/// While alive, an interrupt waits (the handler blocks until the section ends).
class CriticalSection {
 public:
  CriticalSection();
  ~CriticalSection();
  CriticalSection(const CriticalSection&) = delete;
  CriticalSection& operator=(const CriticalSection&) = delete;
};

/// The name of a signal for messages: "SIGINT", "SIGTERM", "SIGHUP", else "signal N".
std::string signal_name(int sig);

}  // namespace tokdyn::interrupt
