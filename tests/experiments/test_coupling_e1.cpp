// Preset coupling-e1 (experiment E1 of the coupling paper, §6): the block-HMM data, the PyTorch
// trainings run as child processes (python/tokdyn_train/e1.py) and the tables built from them.
//   * a quick run (2 q, 2 sizes, both gate modes, 20 steps): every declared table, rows = q x sizes x
//     gates x seeds, excess = held-out - Bayes, Bayes <= gate-off floor, Bayes < unigram entropy, the exponent of a
//     two-size fit equal to the slope through its two points, the curves ending at the final loss,
//     the data checks passing, nothing left of the trainers' work folder, the inputs listed;
//   * determinism: the same parameters with jobs = 1 and jobs = 2 give the same bytes of every table;
//   * bad parameters: exit 2, one line naming the parameter, nothing written;
//   * a failing trainer (a stand-in interpreter, TOKDYN_PYTHON): its exit 4 is exit 4, its refusal of
//     a user parameter is exit 2 naming it, of tokdyn's own arguments exit 1, with its message;
//   * SIGTERM during the trainings: exit 143, the children stopped, nothing left;
//   * CheckTable::undecided: a value with pass = n/a.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/runtime/experiment.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::read_csv_rows;
using tokdyn::testing::run_cli;
using tokdyn::testing::ScopedEnv;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;

namespace {

using Sets = std::vector<std::pair<std::string, std::string>>;

const Sets kQuick = {{"q", "0.5,0.05"},          {"sizes", "s,m"},         {"seeds", "1"},     {"steps", "20"},
                     {"train_sequences", "64"}, {"heldout_sequences", "40"}, {"blocks", "3"},  {"block", "4"},
                     {"states", "4"},           {"vocab", "8"}};
const Sets kTiny = {{"q", "0.5,0.05"},          {"sizes", "s"},             {"seeds", "1"},     {"steps", "10"},
                    {"train_sequences", "32"}, {"heldout_sequences", "16"}, {"blocks", "2"},    {"block", "4"},
                    {"states", "2"},           {"vocab", "4"}};

double d(const std::map<std::string, std::string>& r, const std::string& k) { return std::stod(r.at(k)); }

/// A stand-in for the Python interpreter: a shell script run as `SCRIPT -m tokdyn_train.e1 ...`.
fs::path fake_python(const fs::path& dir, const std::string& body) {
  const fs::path f = dir / "fake-python";
  std::ofstream(f) << "#!/bin/sh\n" << body << "\n";
  fs::permissions(f, fs::perms::owner_all);
  return f;
}

}  // namespace

TEST(CouplingE1Preset, QuickRunTablesAreConsistent) {
  TempDir tmp;
  const Experiment* e = find_experiment("coupling-e1");
  ASSERT_NE(e, nullptr);
  const fs::path out = tmp.path() / "r";
  run_experiment(*e, resolve_params(*e, kQuick), out, 2, /*figures=*/false, /*show_progress=*/false);

  const auto runs = read_csv_rows(out / "runs.csv");
  ASSERT_EQ(runs.size(), 2u * 2u * 2u * 1u);  // q x sizes x gates x seeds
  std::set<std::string> keys;
  for (const auto& r : runs) {
    keys.insert(r.at("q") + "/" + r.at("size") + "/" + r.at("rho") + "/" + r.at("seed"));
    EXPECT_NEAR(d(r, "excess"), d(r, "heldout_loss") - d(r, "bayes_risk"), 1e-12);
    EXPECT_LE(d(r, "bayes_risk"), d(r, "gateoff_risk") + 1e-12);
    EXPECT_LT(d(r, "bayes_risk"), d(r, "unigram_entropy"));
    EXPECT_GT(d(r, "heldout_loss"), 0.0);
    EXPECT_GT(d(r, "params"), d(r, "params_slow"));
    EXPECT_EQ(d(r, "tokens_seen"), 20.0 * 32.0 * 12.0);  // steps x batch x T
    if (r.at("rho") == "off") {
      EXPECT_EQ(d(r, "trained_rho"), 0.0);
      EXPECT_EQ(d(r, "injection_norm"), 0.0);
    }
  }
  EXPECT_EQ(keys.size(), runs.size());

  // The exponent of a fit through two sizes (one seed) is the slope through the two points.
  const auto fits = read_csv_rows(out / "fits.csv");
  ASSERT_EQ(fits.size(), 2u * 2u);  // q x gates
  for (const auto& f : fits) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& r : runs)
      if (r.at("q") == f.at("q") && r.at("rho") == f.at("rho")) pts.push_back({d(r, "params"), d(r, "excess")});
    ASSERT_EQ(pts.size(), 2u);
    if (pts[0].second > 0 && pts[1].second > 0) {
      const double slope = (std::log(pts[1].second) - std::log(pts[0].second)) / (std::log(pts[1].first) - std::log(pts[0].first));
      EXPECT_NEAR(d(f, "alpha"), -slope, 1e-9) << f.at("q") << " " << f.at("rho");
      EXPECT_EQ(f.at("alpha_lo"), "");  // two points: no confidence interval
    }
    // gain = mean over (size, seed) of loss(off) - loss(learn), the same on both rows of a q.
    double g = 0.0;
    for (const auto& r : runs)
      if (r.at("q") == f.at("q")) g += (r.at("rho") == "off" ? 1.0 : -1.0) * d(r, "heldout_loss") / 2.0;
    EXPECT_NEAR(d(f, "gain"), g, 1e-12);
  }

  // Curves: step 0 without a training loss, the last row equal to the final held-out loss.
  const auto curves = read_csv_rows(out / "curves.csv");
  for (const auto& r : runs) {
    std::vector<std::map<std::string, std::string>> c;
    for (const auto& x : curves)
      if (x.at("q") == r.at("q") && x.at("size") == r.at("size") && x.at("rho") == r.at("rho") && x.at("seed") == r.at("seed")) c.push_back(x);
    ASSERT_GE(c.size(), 2u);
    EXPECT_EQ(c.front().at("step"), "0");
    EXPECT_EQ(c.front().at("train_loss"), "");
    EXPECT_EQ(c.back().at("step"), "20");
    EXPECT_EQ(c.back().at("heldout_loss"), r.at("heldout_loss"));
    EXPECT_EQ(c.back().at("heldout_sequences"), "40");
  }

  const auto hmm = read_csv_rows(out / "hmm.csv");
  ASSERT_EQ(hmm.size(), 2u);
  EXPECT_NEAR(d(hmm[0], "gap"), 0.0, 1e-12);  // q = 1/2: nothing to gain across blocks
  EXPECT_GT(d(hmm[1], "gap"), 0.0);            // q = 0.05: the slow path can help
  for (const auto& h : hmm) EXPECT_LE(d(h, "bayes_risk"), d(h, "local_risk") + 1e-12);
  EXPECT_EQ(d(hmm[1], "heldout_tokens"), 40.0 * 8.0);

  // Checks: the data checks pass; every row is a verdict of the declared kinds.
  const auto checks = read_csv_rows(out / "checks.csv");
  ASSERT_GE(checks.size(), 8u);
  int data = 0;
  for (const auto& c : checks) {
    EXPECT_TRUE(c.at("pass") == "true" || c.at("pass") == "false" || c.at("pass") == "n/a");
    if (c.at("check") == "E1 data") {
      EXPECT_EQ(c.at("pass"), "true") << c.at("quantity");
      ++data;
    }
  }
  EXPECT_EQ(data, 3);
  // The inputs: the emission and the token ids of both splits at each q; no work folder left.
  for (const char* f : {"inputs/emission_logits.npy", "inputs/q0.5_train.npy", "inputs/q0.5_heldout.npy", "inputs/q0.05_train.npy",
                        "inputs/q0.05_heldout.npy"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  EXPECT_FALSE(fs::exists(out / "e1-work"));
  const std::string man = slurp(out / "manifest.json");
  EXPECT_NE(man.find("\"inputs/q0.05_train.npy\""), std::string::npos);
  EXPECT_NE(man.find("\"training_seconds\""), std::string::npos);
  const auto summary = read_csv_rows(out / "summary.csv");
  EXPECT_GE(summary.size(), 10u);
}

TEST(CouplingE1Preset, SameBytesWithOneAndTwoJobs) {
  TempDir tmp;
  const Experiment* e = find_experiment("coupling-e1");
  ASSERT_NE(e, nullptr);
  Sets one = kTiny, two = kTiny;
  one.push_back({"jobs", "1"});
  two.push_back({"jobs", "2"});
  run_experiment(*e, resolve_params(*e, one), tmp.path() / "a", 1, false, false);
  run_experiment(*e, resolve_params(*e, two), tmp.path() / "b", 2, false, false);
  for (const char* f : {"runs.csv", "curves.csv", "fits.csv", "hmm.csv", "checks.csv", "summary.csv", "inputs/q0.05_train.npy"})
    EXPECT_EQ(slurp(tmp.path() / "a" / f), slurp(tmp.path() / "b" / f)) << f;
  EXPECT_FALSE(slurp(tmp.path() / "a" / "runs.csv").empty());
}

TEST(CouplingE1Preset, BadParametersExitTwoWithOneLine) {
  TempDir tmp;
  const std::vector<std::pair<Sets, std::string>> cases = {
      {{{"q", "0.6"}}, "q"},
      {{{"q", "0"}}, "q"},
      {{{"q", ""}}, "q"},
      {{{"q", "0.5,0.5"}}, "q"},
      {{{"sizes", "xl"}}, "sizes"},
      {{{"sizes", "s,s"}}, "sizes"},
      {{{"sizes", ""}}, "sizes"},
      {{{"sizes", "s,"}}, "sizes"},
      {{{"rho_modes", "on"}}, "rho_modes"},
      {{{"seeds", "0"}}, "seeds"},
      {{{"blocks", "512"}, {"block", "256"}}, "blocks"},
      {{{"vocab", "1"}}, "vocab"},
      {{{"jobs", "-1"}}, "jobs"},
      {{{"lr", "0"}}, "lr"},
  };
  for (const auto& [sets, key] : cases) {
    std::vector<std::string> args = {"run", "coupling-e1", "--out", "res", "--no-figures"};
    for (const auto& [k, v] : kTiny) {
      bool overridden = false;
      for (const auto& s : sets) overridden = overridden || s.first == k;
      if (!overridden) args.insert(args.end(), {"--set", k + "=" + v});
    }
    for (const auto& [k, v] : sets) args.insert(args.end(), {"--set", k + "=" + v});
    const auto r = run_cli(tmp.path(), args);
    EXPECT_EQ(r.code, 2) << key << ": " << r.err;
    EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(tokdyn::testing::entries(tmp.path()).empty()) << key;
  }
}

TEST(CouplingE1Preset, TrainerFailuresMapToExitCodes) {
  TempDir tmp;
  struct Case {
    std::string body;
    int code;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"echo 'e1: non-finite training loss (nan) at step 3' >&2; exit 4", 4, "non-finite training loss (nan) at step 3"},
      {"echo 'e1: --lr 5.0: expected a finite value > 0' >&2; exit 2", 2, "parameter 'lr'"},
      {"echo 'e1: --vocab 8: expected something else' >&2; exit 2", 1, "refused tokdyn's arguments"},
      {"echo 'Traceback (most recent call last):' >&2; echo \"ModuleNotFoundError: No module named 'torch'\" >&2; exit 1", 1, "python3-torch"},
      {"kill -9 $$", 3, "SIGKILL"},
  };
  for (const Case& c : cases) {
    const fs::path work = tmp.path() / "w";
    fs::create_directories(work);
    const ScopedEnv py("TOKDYN_PYTHON", fake_python(tmp.path(), c.body).string());
    std::vector<std::string> args = {"run", "coupling-e1", "--out", "res", "--no-figures"};
    for (const auto& [k, v] : kTiny) args.insert(args.end(), {"--set", k + "=" + v});
    const auto r = run_cli(work, args);
    EXPECT_EQ(r.code, c.code) << c.body << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("coupling-e1"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(tokdyn::testing::entries(work).empty()) << c.body;
    fs::remove_all(work);
  }
}

TEST(CouplingE1Preset, InterruptStopsTheTrainersAndLeavesNothing) {
  TempDir tmp;
  const fs::path pids = tmp.path() / "pids";
  const fs::path work = tmp.path() / "w";
  fs::create_directories(work);
  const ScopedEnv py("TOKDYN_PYTHON", fake_python(tmp.path(), "echo $$ >> '" + pids.string() + "'; exec sleep 60").string());
  std::vector<std::string> argv_s = {tokdyn::testing::tokdyn_binary(), "run", "coupling-e1", "--out", "res", "--no-figures", "--threads", "2"};
  for (const auto& [k, v] : kTiny) argv_s.insert(argv_s.end(), {"--set", k + "=" + v});
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(work.c_str()) != 0) _exit(126);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  // Wait until both trainers (jobs = threads = 2) are running.
  std::vector<pid_t> children;
  for (int i = 0; i < 600 && children.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    children.clear();
    std::ifstream in(pids);
    for (pid_t c; in >> c;) children.push_back(c);
  }
  ASSERT_EQ(children.size(), 2u);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143);
  for (pid_t c : children) EXPECT_TRUE(::kill(c, 0) != 0 && errno == ESRCH) << "trainer " << c << " still running";
  EXPECT_TRUE(tokdyn::testing::entries(work).empty());
}

TEST(CouplingE1Checks, UndecidedRowKeepsItsValue) {
  TempDir tmp;
  {
    CheckTable t(tmp.path() / "checks.csv");
    t.undecided("X", "a statement", "delta", 0.25, "undecided: the CI reaches both sides", qualitative("a trend"));
    t.add("Y", "another", "v", 1.0, "> 0", true, qualitative("a sign"));
    EXPECT_EQ(t.total(), 2);
    EXPECT_EQ(t.not_applicable_count(), 1);
    EXPECT_EQ(t.failed(), 0);
  }
  const auto rows = read_csv_rows(tmp.path() / "checks.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("value"), "0.25");
  EXPECT_EQ(rows[0].at("pass"), "n/a");
  EXPECT_EQ(rows[1].at("pass"), "true");
}
