// Child processes of a preset, at most N at a time (child_jobs.hpp).
#include "tokdyn/runtime/child_jobs.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tokdyn/build_info.hpp"
#include "tokdyn/core/interrupt.hpp"

extern char** environ;

namespace tokdyn {

namespace {

/// The last non-empty line of a file, trimmed ("" when there is none or it cannot be read).
std::string child_last_line(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!text.empty() && blank(text.back())) text.pop_back();
  const auto nl = text.find_last_of('\n');
  std::string last = nl == std::string::npos ? text : text.substr(nl + 1);
  std::size_t b = 0;
  while (b < last.size() && blank(last[b])) ++b;
  return last.substr(b);
}

/// The parent's environment with `over` ("KEY=VALUE") replacing entries of the same key.
std::vector<std::string> child_environment(const std::vector<std::string>& over) {
  const auto key_of = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv(*e);
    bool replaced = false;
    for (const std::string& o : over) replaced = replaced || key_of(o) == key_of(kv);
    if (!replaced) env.push_back(kv);
  }
  env.insert(env.end(), over.begin(), over.end());
  return env;
}

struct RunningChild {
  std::size_t index = 0;
  pid_t pid = 0;
  std::unique_ptr<interrupt::ChildGuard> guard;
};

/// Starts job `j` in its own process group; the child is registered with the interrupt handler
/// before an interrupt can see it (the spawn runs inside a critical section, as figures.cpp does).
RunningChild start_child(const ChildJob& j, std::size_t index) {
  if (j.argv.empty()) throw std::logic_error("run_child_jobs: a job without a program");
  const int err_fd = ::open(j.stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (err_fd < 0) throw std::runtime_error(fmt::format("cannot create '{}': {}", j.stderr_file.string(), std::strerror(errno)));
  std::vector<std::string> env = child_environment(j.env), args = j.argv;
  std::vector<char*> envp, argv;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  RunningChild c;
  c.index = index;
  int rc = 0;
  {
    interrupt::CriticalSection cs;  // an interrupt sees either no child or a registered one
    rc = args[0].find('/') == std::string::npos ? posix_spawnp(&c.pid, argv[0], &fa, &attr, argv.data(), envp.data())
                                                : posix_spawn(&c.pid, argv[0], &fa, &attr, argv.data(), envp.data());
    if (rc == 0) c.guard = std::make_unique<interrupt::ChildGuard>(c.pid);
  }
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(err_fd);
  if (rc != 0) throw std::runtime_error(fmt::format("cannot run '{}': {}", args[0], std::strerror(rc)));
  return c;
}

/// SIGTERM to every running child's group, SIGKILL to those still there after 2 s; all reaped.
void stop_children(std::vector<RunningChild>& running) {
  for (const RunningChild& c : running) ::kill(-c.pid, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (RunningChild& c : running) {
    for (;;) {
      const pid_t r = ::waitpid(c.pid, nullptr, WNOHANG);
      if (r != 0 && !(r < 0 && errno == EINTR)) break;  // reaped, or no longer our child
      if (std::chrono::steady_clock::now() > until) {
        ::kill(-c.pid, SIGKILL);
        while (::waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  running.clear();
}

}  // namespace

void run_child_jobs(const std::vector<ChildJob>& jobs, int parallel, const std::function<void(std::size_t, const ChildExit&)>& on_done) {
  if (parallel < 1) throw std::logic_error(fmt::format("run_child_jobs: expected >= 1 parallel jobs, got {}", parallel));
  std::vector<RunningChild> running;
  std::size_t next = 0;
  try {
    while (next < jobs.size() || !running.empty()) {
      if (interrupt::interrupting()) interrupt::wait_for_exit();
      while (static_cast<int>(running.size()) < parallel && next < jobs.size()) {
        running.push_back(start_child(jobs[next], next));
        ++next;
      }
      bool ended = false;
      for (std::size_t i = 0; i < running.size();) {
        int status = 0;
        const pid_t r = ::waitpid(running[i].pid, &status, WNOHANG);
        if (r == 0 || (r < 0 && errno == EINTR)) {
          ++i;
          continue;
        }
        if (r < 0) {
          // The interrupt handler reaps the children it stops; anything else is a bug.
          if (interrupt::interrupting()) interrupt::wait_for_exit();
          throw std::logic_error(fmt::format("run_child_jobs: waitpid: {}", std::strerror(errno)));
        }
        if (interrupt::interrupting()) interrupt::wait_for_exit();  // a child the handler stopped
        ChildExit ex;
        if (WIFSIGNALED(status)) ex.signal = WTERMSIG(status);
        else ex.code = WEXITSTATUS(status);
        const std::size_t index = running[i].index;
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
        ex.last_line = child_last_line(jobs[index].stderr_file);
        ended = true;
        on_done(index, ex);
      }
      if (!ended && !running.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (...) {
    stop_children(running);
    throw;
  }
}

ChildExit run_child(const ChildJob& job) {
  ChildExit out;
  run_child_jobs({job}, 1, [&](std::size_t, const ChildExit& ex) { out = ex; });
  return out;
}

namespace {

/// An installation under `prefix` (cmake --install): P/share/tokdyn/python with plot.py and
/// tokdyn_plot, and P/lib/python3/dist-packages/tokdyn when the Python package was installed.
std::optional<PythonPaths> installed_python(const std::filesystem::path& prefix) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path sources = prefix / "share" / "tokdyn" / "python";
  if (!fs::is_regular_file(sources / "plot.py", ec) || !fs::is_regular_file(sources / "tokdyn_plot" / "__init__.py", ec))
    return std::nullopt;
  PythonPaths p;
  p.sources = fs::weakly_canonical(sources, ec);
  if (ec) p.sources = sources;
  const fs::path package = prefix / "lib" / "python3" / "dist-packages";
  if (fs::is_regular_file(package / "tokdyn" / "__init__.py", ec)) {
    p.package = fs::weakly_canonical(package, ec);
    if (ec) p.package = package;
  }
  p.installed = true;
  return p;
}

const int g_python_paths_anchor = 0;  // an object of this code, whose file dladdr names

}  // namespace

const PythonPaths& python_paths() {
  namespace fs = std::filesystem;
  static const PythonPaths paths = [] {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec && !exe.empty())  // P/bin/tokdyn
      if (auto p = installed_python(exe.parent_path().parent_path())) return *p;
    Dl_info info{};  // P/lib/python3/dist-packages/tokdyn/_core*.so: tokdyn's Python module in any interpreter
    if (::dladdr(&g_python_paths_anchor, &info) != 0 && info.dli_fname && *info.dli_fname) {
      const fs::path so = fs::weakly_canonical(info.dli_fname, ec);
      if (!ec && so != exe && so.has_parent_path())
        if (auto p = installed_python(so.parent_path() / ".." / ".." / ".." / "..")) return *p;
    }
    return PythonPaths{fs::path(TOKDYN_SOURCE_DIR) / "python", fs::path(TOKDYN_BINARY_DIR) / "python", false};
  }();
  return paths;
}

std::string python_path(const std::string& parent) {
  const PythonPaths& p = python_paths();
  std::string path = p.package.empty() ? "" : p.package.string() + ":";
  path += p.sources.string();
  if (!parent.empty()) path += ":" + parent;
  return path;
}

PythonCommand python_command(const std::string& module) {
  const char* py_env = std::getenv("TOKDYN_PYTHON");
  const std::string python = (py_env && *py_env) ? py_env : "/usr/bin/python3";
  const char* pp = std::getenv("PYTHONPATH");
  return {{python, "-m", module}, {"PYTHONPATH=" + python_path(pp ? pp : "")}};
}

}  // namespace tokdyn
