// Interrupt handling: one sigwait thread, registered paths and child process groups (interrupt.hpp).
#include "tokdyn/core/interrupt.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tokdyn::interrupt {

namespace fs = std::filesystem;

namespace {

struct State {
  std::mutex mu;                       // guards the registries
  std::mutex commit;                   // held by CriticalSection
  std::map<std::string, int> paths;    // path -> registrations
  std::map<pid_t, int> children;       // process group -> registrations
  std::atomic<bool> installed{false};
  std::atomic<bool> interrupting{false};
  std::atomic<int> crash{0};           // a fatal signal (SIGSEGV, ...) being handled: its number
};

State& state() {
  static State* s = new State;  // never destroyed: the handler thread may use it at exit
  return *s;
}

void remove_path_and_suffixes(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  const std::string prefix = p.filename().string() + ".tmp-";  // only our nested temporaries
  for (auto it = fs::directory_iterator(parent, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) == 0) {
      std::error_code ignore;
      fs::remove_all(it->path(), ignore);
    }
  }
  fs::remove_all(p, ec);  // again: a worker may have recreated something in between
}

void stop_children(const std::map<pid_t, int>& children) {
  for (const auto& [pg, n] : children) ::kill(-pg, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (const auto& [pg, n] : children) {
    for (;;) {
      const pid_t r = ::waitpid(-pg, nullptr, WNOHANG);
      if (r < 0) break;  // no child left in the group
      if (r == 0) {
        if (std::chrono::steady_clock::now() > until) {
          ::kill(-pg, SIGKILL);
          ::waitpid(-pg, nullptr, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
}

void handler_loop(sigset_t set) {
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    State& s = state();
    s.interrupting = true;
    std::lock_guard<std::mutex> commit(s.commit);  // let a running commit finish
    std::lock_guard<std::mutex> lock(s.mu);
    stop_children(s.children);
    for (const auto& [p, n] : s.paths) remove_path_and_suffixes(p);
    const int crash = s.crash.load();
    const std::string msg = crash != 0 ? std::string("tokdyn: partial results removed\n")
                                       : std::string(isatty(2) ? "\n" : "") + "tokdyn: interrupted (" + signal_name(sig) +
                                             "); partial results removed\n";
    (void)!::write(2, msg.data(), msg.size());
    ::_exit(128 + (crash != 0 ? crash : sig));
  }
}

/// A fatal signal in any thread (a bug): one line on stderr, then the handler thread removes the
/// run's temporary folders and lock files as on an interrupt and exits with 128 + the signal (139
/// for SIGSEGV). Should the clean-up not finish within 5 s (e.g. the crash holds the registry's
/// lock), the process ends by the signal's default action.
void on_fatal_signal(int sig) {
  static std::atomic<bool> once{false};
  if (once.exchange(true)) return;  // another thread crashed too: the first one reports
  state().crash.store(sig);
  const char* name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGFPE ? "SIGFPE" : sig == SIGILL ? "SIGILL" : "SIGABRT";
  for (const char* part : {"tokdyn: internal error: ", name, " (a bug in tokdyn: please report it with the command line)\n"})
    (void)!::write(2, part, std::char_traits<char>::length(part));
  ::kill(::getpid(), SIGTERM);  // the handler thread (sigwait) cleans up and exits
  for (int i = 0; i < 500; ++i) {
    struct timespec ts {0, 10000000};
    ::nanosleep(&ts, nullptr);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(sig);
  }
}

void install() {
  State& s = state();
  if (s.installed.exchange(true)) return;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(handler_loop, set).detach();
#if !defined(__SANITIZE_ADDRESS__)  // the sanitizers report crashes themselves
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &sa, nullptr);
#endif
}

bool installed() { return state().installed.load(); }

bool interrupting() { return state().interrupting.load(); }

void wait_for_exit() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

PathGuard::PathGuard(fs::path p) : path_(std::move(p)) {
  std::lock_guard<std::mutex> lock(state().mu);
  ++state().paths[path_.string()];
}

PathGuard::~PathGuard() {
  std::lock_guard<std::mutex> lock(state().mu);
  auto it = state().paths.find(path_.string());
  if (it != state().paths.end() && --it->second <= 0) state().paths.erase(it);
}

ChildGuard::ChildGuard(pid_t pgid) : pgid_(pgid) {
  std::lock_guard<std::mutex> lock(state().mu);
  ++state().children[pgid_];
}

ChildGuard::~ChildGuard() {
  std::lock_guard<std::mutex> lock(state().mu);
  auto it = state().children.find(pgid_);
  if (it != state().children.end() && --it->second <= 0) state().children.erase(it);
}

CriticalSection::CriticalSection() { state().commit.lock(); }
CriticalSection::~CriticalSection() { state().commit.unlock(); }

}  // namespace tokdyn::interrupt
