// Reliability of runs (docs/reliability.md): user folders are never lost, interrupted and
// concurrent runs leave nothing behind, resource failures and non-finite states have their own
// exit codes, numbers are never silently narrowed, inputs never hang, messages are one safe line.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "tokdyn/error.hpp"
#include "tokdyn/experiment.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/output_folder.hpp"
#include "tokdyn/parallel.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::entries;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;

namespace {

constexpr const char* kQuick = "rope-fig1a";  // a preset that runs in milliseconds

struct Proc {
  pid_t pid = -1;
  fs::path out_file, err_file;
};

struct Spawn {
  std::vector<std::string> args;
  fs::path cwd;
  std::vector<std::string> env;  // extra NAME=value
  bool drop_to_nobody = false;
  std::string binary = {};  // empty: this build's tokdyn
};

/// Starts tokdyn (its stdout and stderr go to files in `cap`).
Proc start(const Spawn& s, const fs::path& cap) {
  Proc p;
  p.out_file = cap / "stdout";
  p.err_file = cap / "stderr";
  std::vector<std::string> argv_s = {s.binary.empty() ? tokdyn::testing::tokdyn_binary() : s.binary};
  argv_s.insert(argv_s.end(), s.args.begin(), s.args.end());
  p.pid = fork();
  if (p.pid == 0) {
    setpgid(0, 0);
    if (chdir(s.cwd.c_str()) != 0) _exit(126);
    for (const auto& e : s.env) putenv(const_cast<char*>(e.c_str()));
    const int o = open(p.out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    const int e = open(p.err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (o < 0 || e < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    if (s.drop_to_nobody && getuid() == 0) {
      if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(125);
    }
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return p;
}

struct Result {
  int code = -1;  ///< exit code, or 128 + signal when killed by a signal
  std::string out, err;
};

Result finish(const Proc& p) {
  int status = 0;
  Result r;
  if (waitpid(p.pid, &status, 0) == p.pid) {
    if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.code = 128 + WTERMSIG(status);
  }
  r.out = slurp(p.out_file);
  r.err = slurp(p.err_file);
  return r;
}

Result run(const Spawn& s) {
  TempDir cap;
  chmod(cap.path().c_str(), 0777);
  return finish(start(s, cap.path()));
}

Result run_in(const fs::path& cwd, std::vector<std::string> args, std::vector<std::string> env = {}) {
  return run(Spawn{std::move(args), cwd, std::move(env), false});
}

/// Exactly one line on stderr.
void expect_one_line(const std::string& err) {
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.back(), '\n') << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << err;
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

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
// 1. --out never deletes what it points at

TEST(OutputFolder, DotIsRefusedAndTheFolderIsUntouched) {
  TempDir d;
  write_file(d.path() / "thesis.tex", "precious");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", ".", "--no-figures"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("working directory"), std::string::npos) << r.err;
  EXPECT_EQ(entries(d.path()), std::vector<std::string>{"thesis.tex"});
  EXPECT_EQ(slurp(d.path() / "thesis.tex"), "precious");
}

TEST(OutputFolder, ParentAndAncestorsOfTheWorkingDirectoryAreRefused) {
  TempDir d;
  fs::create_directories(d.path() / "a" / "b");
  write_file(d.path() / "a" / "notes.txt", "mine");
  for (const std::string& out : std::vector<std::string>{"..", "../", "../../a", (d.path() / "a").string()}) {
    const Result r = run_in(d.path() / "a" / "b", {"run", kQuick, "--out", out, "--no-figures"});
    EXPECT_EQ(r.code, 2) << out << ": " << r.err;
    expect_one_line(r.err);
  }
  EXPECT_EQ(slurp(d.path() / "a" / "notes.txt"), "mine");
  EXPECT_TRUE(fs::is_directory(d.path() / "a" / "b"));
}

TEST(OutputFolder, NonEmptyUserFolderIsRefusedAndUntouched) {
  TempDir d;
  fs::create_directories(d.path() / "thesis" / "ch1");
  write_file(d.path() / "thesis" / "main.tex", "text");
  write_file(d.path() / "thesis" / "ch1" / "a.tex", "more");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "thesis", "--no-figures", "--overwrite"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("only replaces its own results"), std::string::npos) << r.err;
  EXPECT_EQ(entries(d.path() / "thesis"), (std::vector<std::string>{"ch1", "main.tex"}));
  EXPECT_EQ(slurp(d.path() / "thesis" / "ch1" / "a.tex"), "more");
  EXPECT_EQ(entries(d.path()), std::vector<std::string>{"thesis"});  // no temporary folder left
}

TEST(OutputFolder, FolderWithAFakeManifestIsNotAResult) {
  TempDir d;
  fs::create_directories(d.path() / "r");
  write_file(d.path() / "r" / "manifest.json", R"({"preset": "x", "version": "1", "files": ["a.csv"]})");
  write_file(d.path() / "r" / "a.csv", "1\n");
  write_file(d.path() / "r" / "data.bin", "user data");  // not listed: not a tokdyn result
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures", "--overwrite"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("data.bin"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(d.path() / "r" / "data.bin"), "user data");
}

TEST(OutputFolder, SymlinkIsRefusedAndItsTargetUntouched) {
  TempDir d;
  fs::create_directories(d.path() / "elsewhere");
  write_file(d.path() / "elsewhere" / "keep.txt", "keep");
  fs::create_directory_symlink(d.path() / "elsewhere", d.path() / "link");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "link", "--no-figures", "--overwrite"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("symbolic link"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_symlink(d.path() / "link"));
  EXPECT_EQ(entries(d.path() / "elsewhere"), std::vector<std::string>{"keep.txt"});
}

TEST(OutputFolder, EmptyFolderIsUsed) {
  TempDir d;
  fs::create_directories(d.path() / "r");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(d.path() / "r" / "manifest.json"));
}

TEST(OutputFolder, RerunNeedsOverwriteThenReplacesExactly) {
  TempDir d;
  Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("--overwrite"), std::string::npos) << r.err;
  r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures", "--overwrite", "--set", "n=12"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("replaced the previous result"), std::string::npos) << r.out;
  const auto m = nlohmann::json::parse(slurp(d.path() / "r" / "manifest.json"));
  EXPECT_EQ(m["params"]["n"], 12);
  EXPECT_EQ(entries(d.path()), std::vector<std::string>{"r"});  // no .tmp, .old or lock left
}

TEST(OutputFolder, ResultWithAUserFileAddedIsNotReplaced) {
  TempDir d;
  ASSERT_EQ(run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"}).code, 0);
  write_file(d.path() / "r" / "my_notes.md", "notes");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures", "--overwrite"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("my_notes.md"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(d.path() / "r" / "my_notes.md"), "notes");
}

TEST(OutputFolder, PathThatIsAFileIsRefused) {
  TempDir d;
  write_file(d.path() / "f", "x");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "f", "--no-figures", "--overwrite"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(slurp(d.path() / "f"), "x");
}

TEST(OutputFolder, ClassifyRecognisesOnlyExactResults) {
  TempDir d;
  EXPECT_EQ(tokdyn::classify_folder(d.path() / "none"), tokdyn::FolderKind::Missing);
  fs::create_directories(d.path() / "e");
  EXPECT_EQ(tokdyn::classify_folder(d.path() / "e"), tokdyn::FolderKind::EmptyDir);
  fs::create_directories(d.path() / "r" / "sub");
  write_file(d.path() / "r" / "manifest.json", R"({"preset": "p", "version": "v", "files": ["a.csv", "sub/b.npy"]})");
  write_file(d.path() / "r" / "a.csv", "");
  write_file(d.path() / "r" / "sub" / "b.npy", "");
  EXPECT_EQ(tokdyn::classify_folder(d.path() / "r"), tokdyn::FolderKind::TokdynResult);
  fs::remove(d.path() / "r" / "sub" / "b.npy");  // a listed file missing: not intact
  EXPECT_EQ(tokdyn::classify_folder(d.path() / "r"), tokdyn::FolderKind::Other);
}

TEST(OutputFolder, StaleTemporaryFoldersOfDeadProcessesAreRemoved) {
  TempDir d;
  // A pid that is not running (pid_max is at most 2^22).
  const long dead = 4194304 + 17;
  fs::create_directories(d.path() / ("r.tmp-" + std::to_string(dead)) / "x");
  write_file(d.path() / ("r.tmp-" + std::to_string(dead)) / ".tokdyn-temporary", "\n");
  const std::string users = "r.tmp-" + std::to_string(dead + 1) + "-mine";  // same shape, not ours
  fs::create_directories(d.path() / users);
  write_file(d.path() / users / "keep.txt", "keep");
  const std::string live = "r.tmp-" + std::to_string(static_cast<long>(getpid()));
  fs::create_directories(d.path() / live);
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"});
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::string> want{"r", live, users};
  std::sort(want.begin(), want.end());  // entries() is sorted; the order of live and users depends on the pid
  EXPECT_EQ(entries(d.path()), want);
  EXPECT_EQ(slurp(d.path() / users / "keep.txt"), "keep");
  EXPECT_FALSE(fs::exists(d.path() / "r" / ".tokdyn-temporary"));
}

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

// ------------------------------------------------------------------------------------------------
// 3. Numbers never silently wrong

TEST(Numbers, IntegersBeyondTheDocumentedBoundAreRefused) {
  TempDir d;
  for (const std::string v : {"4294967298", "2147483648", "9223372036854775807", "99999999999999999999"}) {
    const Result r = run_in(d.path(), {"run", "ssm-random-silu", "--out", "r", "--no-figures", "--set", "runs=" + v});
    EXPECT_EQ(r.code, 2) << v << ": " << r.err;
    expect_one_line(r.err);
    EXPECT_NE(r.err.find("runs"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(entries(d.path()).empty());
}

TEST(Numbers, EveryIntegerParameterOfEveryPresetHasAnUpperBound) {
  for (const tokdyn::Experiment* e : tokdyn::experiments())
    for (const tokdyn::ParamSpec& s : e->params)
      if (s.type == tokdyn::ParamType::Int || s.type == tokdyn::ParamType::IntList) {
        EXPECT_TRUE(s.max.has_value()) << e->name << " " << s.key;
        EXPECT_TRUE(s.min.has_value()) << e->name << " " << s.key;
      }
}

TEST(Numbers, SchemaWithoutAnUpperBoundCannotBeRegistered) {
  tokdyn::Experiment e{"reliability-unbounded", "x", {tokdyn::p_int("n", 1, "n", 0)}, [](const tokdyn::Params&, tokdyn::RunContext&) {}};
  EXPECT_THROW(tokdyn::ExperimentRegistration{e}, std::logic_error);
}

TEST(Numbers, RunThatCannotFitInMemoryIsRefusedWithTheEstimate) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", "ssm-random-silu", "--out", "r", "--no-figures", "--set", "runs=1000000",
                                     "--set", "tokens=100000"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("needs about"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("this machine has"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(d.path()).empty());
}

TEST(Numbers, EveryPresetWithSizesEstimatesItsMemory) {
  for (const char* name : {"ssm-random-silu", "ssm-theorem-pe", "ssm-theorem-pd", "ssm-lemma-silu-bias", "rope-flow",
                           "rope-fig1a", "rope-fig3b", "mamba2-fig1", "mamba2-fig2", "mamba2-fig3", "mamba2-fig4",
                           "mamba2-fig5", "mamba2-fig6"}) {
    const tokdyn::Experiment* e = tokdyn::find_experiment(name);
    ASSERT_NE(e, nullptr) << name;
    ASSERT_TRUE(static_cast<bool>(e->estimate)) << name;
    const tokdyn::ResourceEstimate r = e->estimate(tokdyn::resolve_params(*e, {}));
    EXPECT_GT(r.bytes, 0.0) << name;
    EXPECT_LT(r.bytes, 4e9) << name << ": the defaults fit a small machine";
  }
}

TEST(Numbers, TooManyThreadsIsRefused) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures", "--threads", "100000"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--threads"), std::string::npos) << r.err;
}

TEST(Numbers, NonFiniteStateStopsWithItsOwnCodeAndWritesNothing) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", "ssm-random-silu", "--out", "r", "--no-figures", "--set", "runs=2", "--set",
                                     "depth=3", "--set", "tokens=4", "--set", "n=8", "--set", "m=4", "--set",
                                     "weights=gaussian", "--set", "sigma=1e300", "--set", "diagnostics=false"});
  EXPECT_EQ(r.code, 4) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("non-finite"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(d.path()).empty());
}

// ------------------------------------------------------------------------------------------------
// 4. Inputs that would hang or eat memory

TEST(Inputs, FifoAsConfigFileIsRefusedWithoutBlocking) {
  TempDir d;
  ASSERT_EQ(mkfifo((d.path() / "run.toml").c_str(), 0644), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = run_in(d.path(), {"run", "run.toml", "--out", "r"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("FIFO"), std::string::npos) << r.err;
}

TEST(Inputs, DeviceAsConfigFileIsRefused) {
  TempDir d;
  fs::create_symlink("/dev/zero", d.path() / "zero.toml");
  const Result r = run_in(d.path(), {"run", "zero.toml", "--out", "r"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("character device"), std::string::npos) << r.err;
}

TEST(Inputs, OversizedConfigFileIsRefused) {
  TempDir d;
  write_file(d.path() / "big.toml", "preset = \"rope-fig1a\"\n" + std::string(2u << 20, '#'));
  const Result r = run_in(d.path(), {"run", "big.toml", "--out", "r"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("at most"), std::string::npos) << r.err;
}

TEST(Inputs, SymlinkLoopIsNamedAsSuch) {
  TempDir d;
  fs::create_symlink("loop.toml", d.path() / "loop.toml");
  const Result r = run_in(d.path(), {"run", "loop.toml", "--out", "r"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("symlink loop"), std::string::npos) << r.err;
}

TEST(Inputs, ReadRegularFileBoundsItsSize) {
  TempDir d;
  write_file(d.path() / "f", std::string(100, 'x'));
  EXPECT_EQ(tokdyn::read_regular_file(d.path() / "f", 100, "f").size(), 100u);
  EXPECT_THROW(tokdyn::read_regular_file(d.path() / "f", 99, "f"), tokdyn::InputError);
  EXPECT_THROW(tokdyn::read_regular_file(d.path(), 99, "dir"), tokdyn::InputError);
}

// ------------------------------------------------------------------------------------------------
// 6. Messages

TEST(Messages, ControlCharactersAreEscaped) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--set", "\x1b[31mkey\x07=1"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.err.find('\x07'), std::string::npos);
  EXPECT_NE(r.err.find("\\x1b[31mkey\\x07"), std::string::npos) << r.err;
}

TEST(Messages, LongMessagesAreCapped) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--set", std::string(10000, 'k') + "=1"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_LT(r.err.size(), 600u);
}

TEST(Messages, MessageLineEscapesC1AndInvalidUtf8ButKeepsUtf8) {
  EXPECT_EQ(tokdyn::message_line("a\nb"), "a; b");
  EXPECT_EQ(tokdyn::message_line("\xc2\x9b" "1m"), "\\xc2\\x9b1m");  // C1 CSI
  EXPECT_EQ(tokdyn::message_line("\xff"), "\\xff");
  EXPECT_EQ(tokdyn::message_line("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");  // été
  EXPECT_EQ(tokdyn::message_line(std::string(1000, 'x'), 10), "xxxxxxx...");
}

TEST(Messages, PresetNameWinsOverASameNamedFile) {
  TempDir d;
  write_file(d.path() / kQuick, "not a toml file");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"});
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(Messages, ExitCodesOfEachFailureKind) {
  using tokdyn::failure_of;
  EXPECT_EQ(failure_of(std::make_exception_ptr(tokdyn::InputError("x"))).code, 2);
  EXPECT_EQ(failure_of(std::make_exception_ptr(tokdyn::ResourceError("x"))).code, 3);
  EXPECT_EQ(failure_of(std::make_exception_ptr(tokdyn::NonFiniteError("x"))).code, 4);
  EXPECT_EQ(failure_of(std::make_exception_ptr(tokdyn::BusyError("x"))).code, 6);
  EXPECT_EQ(failure_of(std::make_exception_ptr(std::bad_alloc())).code, 3);
  EXPECT_EQ(failure_of(std::make_exception_ptr(std::logic_error("x"))).code, 1);
  EXPECT_EQ(failure_of(std::make_exception_ptr(
                           fs::filesystem_error("w", "/p", std::make_error_code(std::errc::no_space_on_device))))
                .code,
            3);
}

TEST(Cli, ExtraArgumentsAreCountedInOrder) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", kQuick, "b", "c", "--out", "r"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("2 unexpected arguments: 'b', 'c'"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(d.path()).empty());
}

TEST(Cli, ThreadsThatAreNotANumberNameTheOption) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--threads", "x"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--threads: expected an integer from 1 to"), std::string::npos) << r.err;
}

TEST(MakeCheckpoint, FollowsTheOutputFolderRules) {
  TempDir d;
  fs::create_directories(d.path() / "ck");
  write_file(d.path() / "ck" / "mine.txt", "x");
  Result r = run_in(d.path(), {"make-checkpoint", "--size", "tiny", "--out", "ck"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(slurp(d.path() / "ck" / "mine.txt"), "x");
  r = run_in(d.path(), {"make-checkpoint", "--size", "tiny", "--out", "."});
  EXPECT_EQ(r.code, 2) << r.err;
  r = run_in(d.path(), {"make-checkpoint", "--size", "tiny", "--out", "new"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(entries(d.path() / "new"), (std::vector<std::string>{"config.json", "model.safetensors"}));
  EXPECT_EQ(entries(d.path()), (std::vector<std::string>{"ck", "new"}));
}

TEST(Numbers, OutputIntervalThatWouldFillMemoryIsRefused) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", "ssm-theorem-pd", "--out", "r", "--no-figures", "--threads", "2", "--set",
                                     "every=1e-300", "--set", "runs=8", "--set", "doa_runs=2"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("'every'"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(d.path()).empty());
}

TEST(Numbers, ExceptionsLeaveParallelLoopsAndAreRethrownAfterThem) {
  tokdyn::ParallelErrors errors;
  std::atomic<int> ran{0};
#pragma omp parallel for schedule(dynamic) num_threads(4)
  for (int i = 0; i < 64; ++i) try {
    ++ran;
    if (i % 16 == 5) throw tokdyn::NonFiniteError("iteration " + std::to_string(i));
  } catch (...) {
    errors.capture();
  }
  EXPECT_EQ(ran.load(), 64);
  EXPECT_TRUE(errors.failed());
  EXPECT_THROW(errors.rethrow(), tokdyn::NonFiniteError);
  tokdyn::ParallelErrors none;
  EXPECT_NO_THROW(none.rethrow());
}
