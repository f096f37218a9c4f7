// `tokdyn sweep` (sweep.hpp): running the points. Each point is a child `tokdyn run` process
// (its own process group, its stderr kept for the failure record, killed with the sweep); the
// points run on this machine (serially or --jobs at a time) or over the ranks of mpirun (rank 0
// hands them out); one progress line per finished point.
#include "sweep_internal.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"

#if TOKDYN_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C interface only
#include <mpi.h>
#endif

extern char** environ;

namespace tokdyn::sweep::detail {

namespace {

// ---------------------------------------------------------------------------------------------
// Running a point: a child `tokdyn run` process

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw ResourceError(fmt::format("cannot find the tokdyn binary (/proc/self/exe): {}", ec.message()));
  return p.string();
}

}  // namespace

Runner::Runner(const Definition& d, fs::path dir, int threads, bool figures, json where)
    : d_(d), dir_(std::move(dir)), threads_(threads), figures_(figures), where_(std::move(where)), exe_(self_exe()) {
  fs::create_directories(dir_ / "failed");
  // A killed sweep's point logs (.<hash>.stderr-<pid> of a pid no longer running) are removed.
  for (const auto& entry : fs::directory_iterator(dir_ / "failed")) {
    const std::string n = entry.path().filename().string();
    const auto at = n.rfind(".stderr-");
    if (n.empty() || n[0] != '.' || at == std::string::npos) continue;
    const std::string pid = n.substr(at + 8);
    if (is_integer_text(pid) && ::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) {
      std::error_code ec;
      fs::remove(entry.path(), ec);
    }
  }
}

Child Runner::start(long i) {
  if (interrupt::interrupting()) interrupt::wait_for_exit();  // the handler is stopping the points
  const Point& p = d_.points[static_cast<std::size_t>(i)];
  Child c;
  c.index = i;
  c.start = std::chrono::steady_clock::now();
  c.err = dir_ / "failed" / fmt::format(".{}.stderr-{}", p.hash, ::getpid());
  std::vector<std::string> args = {exe_, "run", d_.target, "--out", (dir_ / "points" / p.hash).string(), "--threads", std::to_string(threads_),
                                   "--quiet"};
  if (!figures_) args.emplace_back("--no-figures");
  for (const auto& [k, v] : d_.base) args.push_back("--set"), args.push_back(k + "=" + v);
  for (const auto& [k, v] : p.values) args.push_back("--set"), args.push_back(k + "=" + v);
  json note = where_;
  note["sweep"] = fs::absolute(dir_).lexically_normal().string();
  note["point"] = p.index;
  note["hash"] = p.hash;
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "TOKDYN_SWEEP_POINT=", 19) != 0) env.emplace_back(*e);
  env.push_back("TOKDYN_SWEEP_POINT=" + note.dump());
  std::vector<char*> argv, envp;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  // From creating the point's log to registering it and the child for clean-up, an interrupt waits: one that came
  // in between would leave the log (or the child) behind.
  const interrupt::CriticalSection starting;
  const int err_fd = ::open(c.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (err_fd < 0) throw ResourceError(fmt::format("'{}': {}", c.err.string(), errno_text(errno)));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(err_fd);
    throw ResourceError(fmt::format("cannot start a point (fork): {}", errno_text(errno)));
  }
  if (pid == 0) {
    // The child: its own process group (the sweep's interrupt handler stops it), killed with
    // the sweep (SIGTERM, which `tokdyn run` turns into a clean exit), stdout discarded.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) ::dup2(null_fd, 1);
    ::dup2(err_fd, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(err_fd);
  ::setpgid(pid, pid);
  c.pid = pid;
  guards_.emplace(pid, std::make_unique<interrupt::ChildGuard>(pid));
  err_guards_.emplace(pid, std::make_unique<interrupt::PathGuard>(c.err));  // removed if the sweep is interrupted
  return c;
}


std::optional<Outcome> Runner::finish(const Child& c, bool block) {
  int status = 0;
  pid_t r;
  do r = ::waitpid(c.pid, &status, block ? 0 : WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  return reap(c, r < 0 ? -1 : status);
}

Outcome Runner::reap(const Child& c, int status) {
  // A point stopped by the sweep's own interrupt is not a failure to record: the handler is
  // removing the partial results and ends the process.
  if (interrupt::interrupting()) interrupt::wait_for_exit();
  guards_.erase(c.pid);
  err_guards_.erase(c.pid);
  Outcome o;
  o.index = c.index;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
  o.code = status < 0 ? exit_code::internal : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::string last;
  {
    std::ifstream in(c.err);
    for (std::string line; std::getline(in, line);)
      if (!trim(line).empty()) last = trim(line);
  }
  std::error_code ec;
  fs::remove(c.err, ec);
  if (last.rfind("tokdyn: ", 0) == 0) last = last.substr(8);
  const Point& p = d_.points[static_cast<std::size_t>(c.index)];
  if (o.code == 0 || o.code == exit_code::figures_failed) {
    fs::remove(dir_ / "failed" / (p.hash + ".json"), ec);
    if (o.code == exit_code::figures_failed) o.error = last;
    if (!complete(dir_, p.hash)) o.code = exit_code::internal, o.error = "the point's run ended without a result";
  } else {
    o.error = last.empty() ? (status >= 0 && WIFSIGNALED(status) ? fmt::format("killed by {}", interrupt::signal_name(WTERMSIG(status))) : "no message")
                           : last;
  }
  if (o.code != 0 && o.code != exit_code::figures_failed) record_failure(p, o);
  return o;
}

void Runner::record_failure(const Point& p, const Outcome& o) const {
  json f = where_;
  f["point"] = p.index;
  f["hash"] = p.hash;
  f["exit_code"] = o.code;
  f["error"] = o.error;
  f["seconds"] = o.seconds;
  write_atomic(dir_ / "failed" / (p.hash + ".json"), f.dump(2) + "\n");
}

/// One line per finished point (stdout, flushed: a batch job's log shows progress).
void Progress::done(const Outcome& o, const std::string& who) {
  ++n_;
  if (o.code != 0 && o.code != exit_code::figures_failed) ++failed_;
  if (quiet_) return;
  const Point& p = d_.points[static_cast<std::size_t>(o.index)];
  const int w = static_cast<int>(std::to_string(todo_).size());
  if (o.code == 0)
    fmt::print("[{:>{}}/{}] {}  ok  {:.2f} s{}\n", n_, w, todo_, point_label(p), o.seconds, who);
  else if (o.code == exit_code::figures_failed)  // the results are there; only its figures failed
    fmt::print("[{:>{}}/{}] {}  ok  {:.2f} s{} (figures failed: {})\n", n_, w, todo_, point_label(p), o.seconds, who, o.error);
  else
    fmt::print("[{:>{}}/{}] {}  failed (exit {}): {}{}\n", n_, w, todo_, point_label(p), o.code, o.error, who);
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// MPI (when found at configure time and launched by mpirun / srun)

namespace {

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

}  // namespace

World init_world(int argc, char** argv) {
  World w;
#if TOKDYN_HAVE_MPI
  if (!launched_by_mpi()) return w;
  const auto t0 = std::chrono::steady_clock::now();
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &w.local_size);
  MPI_Comm_free(&local);
  w.mpi = true;
  w.init_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#else
  (void)argc, (void)argv;
  if (launched_by_mpi() && std::getenv("TOKDYN_SWEEP_NO_MPI_WARNING") == nullptr)
    std::fprintf(stderr, "tokdyn: note: launched by mpirun, but this tokdyn was built without MPI: every rank runs the whole sweep\n");
#endif
  return w;
}

void finalize(const World& w) {
#if TOKDYN_HAVE_MPI
  if (w.mpi) MPI_Finalize();
#else
  (void)w;
#endif
}

/// The worst exit code over the ranks (every rank returns it; rank 0 has printed the message).
int agree(const World& w, int code) {
#if TOKDYN_HAVE_MPI
  if (w.mpi) {
    int worst = 0;
    MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return worst;
  }
#else
  (void)w;
#endif
  return code;
}

namespace {

constexpr int kTagRequest = 1, kTagAssign = 2;

}  // namespace

/// Runs `todo` (point indices, largest work first) over the ranks: rank 0 hands out the next
/// point to whichever rank asks (it runs points itself between requests), the others ask,
/// run, report and ask again. Returns this rank's failures (rank 0: all of them).
std::size_t run_ranks(World& w, Runner& runner, const std::vector<long>& todo, Progress& progress) {
#if TOKDYN_HAVE_MPI
  std::size_t failed = 0;
  if (w.rank == 0) {
    std::size_t next = 0;
    int active = w.size - 1;
    std::optional<Child> own;
    while (active > 0 || own || next < todo.size()) {
      bool busy = false;
      if (!own && next < todo.size()) own = runner.start(todo[next++]), busy = true;
      if (own) {
        if (auto o = runner.finish(*own, false)) {
          progress.done(*o, "  (rank 0)");
          own.reset();
          busy = true;
        }
      }
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kTagRequest, MPI_COMM_WORLD, &flag, &st);
      if (flag) {
        const auto d0 = std::chrono::steady_clock::now();
        double msg[3];  // point done (-1: first request), exit code, seconds
        MPI_Recv(msg, 3, MPI_DOUBLE, st.MPI_SOURCE, kTagRequest, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (msg[0] >= 0) {
          Outcome o;
          o.index = static_cast<long>(msg[0]), o.code = static_cast<int>(msg[1]), o.seconds = msg[2];
          if (o.code != 0 && o.code != exit_code::figures_failed)  // the worker wrote failed/<hash>.json
            o.error = read_json_file(runner.dir() / "failed" / (runner.hash(o.index) + ".json")).value("error", "(see sweep.csv)");
          progress.done(o, fmt::format("  (rank {})", st.MPI_SOURCE));
        }
        long assign = next < todo.size() ? todo[next++] : -1;
        if (assign < 0) --active;
        MPI_Send(&assign, 1, MPI_LONG, st.MPI_SOURCE, kTagAssign, MPI_COMM_WORLD);
        busy = true;
        w.dispatch_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - d0).count();
        ++w.requests;
      }
      if (!busy) ::usleep(500);  // idle: poll again in 0.5 ms (a request or rank 0's own point)
    }
    failed = progress.failed();
  } else {
    double msg[3] = {-1, 0, 0};
    for (;;) {
      MPI_Send(msg, 3, MPI_DOUBLE, 0, kTagRequest, MPI_COMM_WORLD);
      long assign = -1;
      MPI_Recv(&assign, 1, MPI_LONG, 0, kTagAssign, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (assign < 0) break;
      const Outcome o = *runner.finish(runner.start(assign), true);
      msg[0] = static_cast<double>(o.index), msg[1] = o.code, msg[2] = o.seconds;
      if (o.code != 0 && o.code != exit_code::figures_failed) ++failed;
    }
  }
  return failed;
#else
  (void)w, (void)runner, (void)todo, (void)progress;
  return 0;
#endif
}

/// Runs `todo` on this machine, `jobs` points at a time.
void run_local(Runner& runner, const std::vector<long>& todo, int jobs, Progress& progress) {
  std::vector<Child> running;
  std::size_t next = 0;
  while (next < todo.size() || !running.empty()) {
    while (static_cast<int>(running.size()) < jobs && next < todo.size()) running.push_back(runner.start(todo[next++]));
    int status = 0;
    pid_t r;
    do r = ::waitpid(-1, &status, 0);  // the sweep's only children are its points
    while (r < 0 && errno == EINTR);
    if (r < 0) throw std::runtime_error(fmt::format("waitpid: {}", errno_text(errno)));
    for (std::size_t i = 0; i < running.size(); ++i) {
      if (running[i].pid != r) continue;
      progress.done(runner.reap(running[i], status));
      running.erase(running.begin() + static_cast<long>(i));
      break;
    }
  }
}

}  // namespace tokdyn::sweep::detail
