// Figures: `python/plot.py KIND DIR` in a child process of its own process group, with a private
// temporary folder (`$TMPDIR/tokdyn-plot-XXXXXX`: its stderr and matplotlib's cache) that is
// removed afterwards and on interrupt; an interrupt also stops the child.
#include <cerrno>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tokdyn/build_info.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/core/interrupt.hpp"

extern char** environ;

namespace tokdyn {

namespace fs = std::filesystem;

namespace {

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

fs::path temp_root() {
  const char* t = std::getenv("TMPDIR");
  std::error_code ec;
  if (t && *t && fs::is_directory(t, ec)) return t;
  return "/tmp";
}

}  // namespace

void draw_figures(const std::string& kind, const fs::path& dir) {
  const char* py_env = std::getenv("TOKDYN_PYTHON");
  const char* script_env = std::getenv("TOKDYN_PLOT_SCRIPT");
  const std::string python = (py_env && *py_env) ? py_env : "/usr/bin/python3";
  const std::string script = (script_env && *script_env) ? script_env : TOKDYN_SOURCE_DIR "/python/plot.py";
  const std::string dir_s = dir.string();
  const std::string fail = fmt::format("figure '{}' failed: ", kind);

  std::string tmpl = (temp_root() / "tokdyn-plot-XXXXXX").string();
  if (!::mkdtemp(tmpl.data()))
    throw std::runtime_error(fail + fmt::format("cannot create a folder in {}: {}", temp_root().string(), std::strerror(errno)));
  const fs::path work = tmpl;
  interrupt::PathGuard guard(work);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{work};
  const std::string err_path = (work / "stderr.txt").string();
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (err_fd < 0) throw std::runtime_error(fail + fmt::format("cannot create '{}': {}", err_path, std::strerror(errno)));

  // Environment: the parent's, with MPLBACKEND=Agg and matplotlib's cache in our folder.
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "MPLBACKEND=", 11) != 0 && std::strncmp(*e, "MPLCONFIGDIR=", 13) != 0) env.emplace_back(*e);
  env.emplace_back("MPLBACKEND=Agg");
  env.emplace_back("MPLCONFIGDIR=" + (work / "mpl").string());
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<std::string> args = {python, script, kind, dir_s};
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  // The child: its own process group (a terminal's Ctrl-C reaches tokdyn, which stops it), an
  // empty signal mask and default handlers (tokdyn's threads block the interrupt signals).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGHUP);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  const bool search_path = python.find('/') == std::string::npos;
  int rc = 0;
  std::unique_ptr<interrupt::ChildGuard> child;
  {
    interrupt::CriticalSection cs;  // an interrupt sees either no child or a registered one
    rc = search_path ? posix_spawnp(&pid, python.c_str(), &fa, &attr, argv.data(), envp.data())
                     : posix_spawn(&pid, python.c_str(), &fa, &attr, argv.data(), envp.data());
    if (rc == 0) child = std::make_unique<interrupt::ChildGuard>(pid);
  }
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(err_fd);
  if (rc != 0) throw std::runtime_error(fail + fmt::format("cannot run '{}': {}", python, std::strerror(rc)));

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      if (interrupt::interrupting()) interrupt::wait_for_exit();
      throw std::runtime_error(fail + "waitpid: " + std::strerror(errno));
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (interrupt::interrupting()) interrupt::wait_for_exit();

  std::string text;
  {
    std::ifstream in(err_path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  const auto nl = text.find_last_of('\n');
  std::string last = trimmed(nl == std::string::npos ? text : text.substr(nl + 1));
  std::string why;
  if (WIFSIGNALED(status))
    why = fmt::format("killed by signal {}", WTERMSIG(status));
  else
    why = fmt::format("exit status {}", WEXITSTATUS(status));
  throw std::runtime_error(fail + (last.empty() ? why : last));
}

}  // namespace tokdyn
