// Reliability of runs (docs/reliability.md), interrupted, concurrent and failing runs: a signal
// removes the temporary folder (and stops the plotter) and exits with 128 + signal, a second run
// into a busy folder is refused, a figure failure keeps the results, and a full disk or a denied
// permission is reported with its cause and its own exit code, leaving nothing behind.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reliability_fixtures.hpp"
#include "test_util.hpp"
#include "tokdyn/runtime/output_folder.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::entries;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;
using tokdyn::testing::reliability::expect_one_line;
using tokdyn::testing::reliability::finish;
using tokdyn::testing::reliability::kQuick;
using tokdyn::testing::reliability::Proc;
using tokdyn::testing::reliability::Result;
using tokdyn::testing::reliability::run;
using tokdyn::testing::reliability::run_in;
using tokdyn::testing::reliability::Spawn;
using tokdyn::testing::reliability::start;
using tokdyn::testing::reliability::write_file;

namespace {

/// Waits until `pred` holds (at most `seconds`).
template <class F>
bool wait_for(F pred, double seconds = 20.0) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

bool has_entry_starting(const fs::path& dir, const std::string& prefix) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  return false;
}

/// A run that takes long enough to be interrupted: rope-flow over a long horizon.
std::vector<std::string> long_run(const std::string& out) {
  return {"run", "rope-flow", "--out", out, "--no-figures", "--threads", "1", "--set", "t_end=100000", "--set", "n=24",
          "--set", "d=8", "--set", "runs=8", "--set", "outputs=10"};
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// 5. Interrupted and concurrent runs

class Interrupt : public ::testing::TestWithParam<int> {};

TEST_P(Interrupt, RemovesTheTemporaryFolderAndExitsWith128PlusSignal) {
  const int sig = GetParam();
  TempDir d, cap;
  const Proc p = start(Spawn{long_run("r"), d.path(), {}, false}, cap.path());
  ASSERT_TRUE(wait_for([&] { return has_entry_starting(d.path(), "r.tmp-"); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  kill(p.pid, sig);
  const Result r = finish(p);
  EXPECT_EQ(r.code, 128 + sig) << r.err;
  expect_one_line(r.err.substr(r.err.rfind("tokdyn: interrupted")));
  EXPECT_TRUE(entries(d.path()).empty()) << entries(d.path()).size();
}

INSTANTIATE_TEST_SUITE_P(Signals, Interrupt, ::testing::Values(SIGINT, SIGTERM, SIGHUP));

// A fatal signal (a bug: here sent from outside, as a crash would raise it) is one line naming it,
// the temporary folder and the lock are removed, and the exit code is 128 + signal.
class Crash : public ::testing::TestWithParam<int> {};

TEST_P(Crash, IsOneLineAndLeavesNothing) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the sanitizers report crashes themselves (tokdyn's handler is not installed)";
#endif
  const int sig = GetParam();
  TempDir d, cap;
  const Proc p = start(Spawn{long_run("r"), d.path(), {}, false}, cap.path());
  ASSERT_TRUE(wait_for([&] { return has_entry_starting(d.path(), "r.tmp-"); }));
  kill(p.pid, sig);
  const Result r = finish(p);
  EXPECT_EQ(r.code, 128 + sig) << r.err;
  EXPECT_NE(r.err.find("tokdyn: internal error: " + std::string(sig == SIGSEGV ? "SIGSEGV" : "SIGABRT")), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("partial results removed"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(d.path()).empty()) << entries(d.path()).size();
}

INSTANTIATE_TEST_SUITE_P(Signals, Crash, ::testing::Values(SIGSEGV, SIGABRT));

TEST(Interrupt, DuringFiguresStopsThePlotterAndRemovesItsFolder) {
  TempDir d, cap, tmp;
  const fs::path script = d.path() / "slow_plot.sh";
  write_file(script, "echo $$ > \"$TOKDYN_TEST_PIDFILE\"\nexec sleep 60\n");
  const fs::path pidfile = d.path() / "plot.pid";
  const Proc p = start(Spawn{{"run", kQuick, "--out", "r"},
                             d.path(),
                             {"TOKDYN_PYTHON=/bin/sh", "TOKDYN_PLOT_SCRIPT=" + script.string(),
                              "TOKDYN_TEST_PIDFILE=" + pidfile.string(), "TMPDIR=" + tmp.path().string()},
                             false},
                       cap.path());
  ASSERT_TRUE(wait_for([&] { return !slurp(pidfile).empty(); }));
  const pid_t plotter = static_cast<pid_t>(std::stol(slurp(pidfile)));
  EXPECT_TRUE(has_entry_starting(tmp.path(), "tokdyn-plot-"));
  kill(p.pid, SIGTERM);
  const Result r = finish(p);
  EXPECT_EQ(r.code, 143) << r.err;
  EXPECT_TRUE(wait_for([&] { return kill(plotter, 0) != 0; }, 5.0)) << "the plotter still runs";
  EXPECT_TRUE(entries(tmp.path()).empty());
  EXPECT_EQ(entries(d.path()), (std::vector<std::string>{"plot.pid", "slow_plot.sh"}));
}

TEST(Concurrent, SecondRunIntoTheSameFolderIsRefusedAsBusy) {
  TempDir d, cap;
  const Proc a = start(Spawn{long_run("r"), d.path(), {}, false}, cap.path());
  ASSERT_TRUE(wait_for([&] { return has_entry_starting(d.path(), "r.tmp-"); }));
  const Result b = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures", "--overwrite"});
  EXPECT_EQ(b.code, 6) << b.err;
  expect_one_line(b.err);
  EXPECT_NE(b.err.find("another tokdyn run"), std::string::npos) << b.err;
  kill(a.pid, SIGTERM);
  EXPECT_EQ(finish(a).code, 143);
  EXPECT_TRUE(entries(d.path()).empty());
}

TEST(Concurrent, HeldLockMakesTheRunWaitForNothingAndLeaveNothing) {
  TempDir d;
  const fs::path lock = d.path() / ".r.tokdyn-lock";
  const int fd = open(lock.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"});
  close(fd);
  EXPECT_EQ(r.code, 6) << r.err;
  EXPECT_EQ(entries(d.path()), std::vector<std::string>{".r.tokdyn-lock"});
}

TEST(Figures, FailureKeepsTheResultsAndExitsWithItsOwnCode) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r"}, {"TOKDYN_PYTHON=/bin/false"});
  EXPECT_EQ(r.code, 5) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("results are kept"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(d.path() / "r" / "spectrum.csv"));
  const auto m = nlohmann::json::parse(slurp(d.path() / "r" / "manifest.json"));
  EXPECT_TRUE(m.contains("figure_error"));
  EXPECT_EQ(tokdyn::classify_folder(d.path() / "r"), tokdyn::FolderKind::TokdynResult);
}

// ------------------------------------------------------------------------------------------------
// Disk full, permission denied

/// An 8 KiB tmpfs at `path` (a full disk after a few files), unmounted on destruction.
struct SmallTmpfs {
  fs::path path;
  bool mounted = false;
  explicit SmallTmpfs(fs::path p) : path(std::move(p)) {
    fs::create_directories(path);
    mounted = mount("tmpfs", path.c_str(), "tmpfs", 0, "size=8k") == 0;
  }
  ~SmallTmpfs() {
    if (mounted) umount2(path.c_str(), MNT_DETACH);
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;
};

TEST(Resources, DiskFullIsReportedWithItsCauseAndLeavesNothing) {
  if (getuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  TempDir d;
  const SmallTmpfs small(d.path() / "small");
  if (!small.mounted) GTEST_SKIP() << "cannot mount a tmpfs here";
  const fs::path& mnt = small.path;
  const Result r = run_in(d.path(), {"run", kQuick, "--out", (mnt / "r").string(), "--no-figures", "--set", "n=2000"});
  EXPECT_EQ(r.code, 3) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("ENOSPC"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(mnt).empty());
}

// The safetensors writer (make-checkpoint, a run's inputs/tf_weights.safetensors) reports a full
// disk as a resource failure (exit 3, ENOSPC), not an internal error, and leaves nothing behind.
TEST(Resources, DiskFullWhileWritingSafetensorsIsAResourceFailure) {
  if (getuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  TempDir d;
  const SmallTmpfs small(d.path() / "small");
  if (!small.mounted) GTEST_SKIP() << "cannot mount a tmpfs here";
  const fs::path& mnt = small.path;
  const Result r = run_in(d.path(), {"make-checkpoint", "--size", "tiny", "--out", (mnt / "ck").string()});
  EXPECT_EQ(r.code, 3) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("ENOSPC"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(mnt).empty());
}

TEST(Resources, PermissionDeniedIsReportedWithItsCause) {
  TempDir d;
  chmod(d.path().c_str(), 0755);
  const fs::path ro = d.path() / "ro";
  fs::create_directories(ro);
  chmod(ro.c_str(), 0555);
  // A copy of the binary in a folder everyone can read (the build folder may be private).
  const fs::path bin = d.path() / "tokdyn";
  fs::copy_file(tokdyn::testing::tokdyn_binary(), bin);
  chmod(bin.c_str(), 0755);
  const Result r = run(Spawn{{"run", kQuick, "--out", (ro / "r").string(), "--no-figures"}, "/", {}, true, bin.string()});
  EXPECT_EQ(r.code, 3) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("permission denied"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(ro).empty());
}
