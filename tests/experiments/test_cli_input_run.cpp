// run_experiment's temporary-directory protocol and manifest, the one error convention while a
// preset runs (library refusals, no convergence, broken invariants), and draw_figures.
#include <gtest/gtest.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokdyn/build_info.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"

#include "cli_input_fixtures.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::TempDir;
using tokdyn::testing::slurp;
using tokdyn::testing::entries;
using tokdyn::testing::Sets;
using tokdyn::testing::echo;
using tokdyn::testing::input_error_of;
using tokdyn::testing::write_text;
using namespace tokdyn;

// ---------------------------------------------------------------------------------------------
// run_experiment

namespace {

bool has_sibling_with(const fs::path& dir, const std::string& part) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(RunExperiment, WritesExperimentFilesAndManifest) {
  TempDir d;
  const fs::path out = d.path() / "res";
  run_experiment(echo(), resolve_params(echo(), {{"count", "3"}}), out, 1, false, false);
  EXPECT_EQ(slurp(out / "echo.csv"), "i,value\n0,0\n1,1\n2,2\n");
  const auto m = nlohmann::json::parse(slurp(out / "manifest.json"));
  EXPECT_EQ(m.at("preset"), "test-echo");
  EXPECT_EQ(m.at("params").at("count"), 3);
  EXPECT_EQ(m.at("seed"), 7);
  EXPECT_EQ(m.at("version"), TOKDYN_VERSION);
  EXPECT_EQ(m.at("threads"), 1);
  EXPECT_TRUE(m.at("wall_time_s").is_number());
  EXPECT_TRUE(m.at("hostname").is_string());
  EXPECT_EQ(m.at("files"), nlohmann::json::array({"echo.csv", "sub/note.txt"}));
}

TEST(RunExperiment, StartedUtcIsIso8601) {
  TempDir d;
  run_experiment(echo(), resolve_params(echo(), {}), d.path() / "res", 1, false, false);
  const std::string t = nlohmann::json::parse(slurp(d.path() / "res" / "manifest.json")).at("started_utc");
  ASSERT_EQ(t.size(), 20u) << t;
  EXPECT_EQ(t[4], '-');
  EXPECT_EQ(t[10], 'T');
  EXPECT_EQ(t.back(), 'Z');
}

TEST(RunExperiment, ContextCarriesThreadsFiguresAndNotes) {
  TempDir d;
  run_experiment(echo(), resolve_params(echo(), {}), d.path() / "res", 2, true, false);
  const auto m = nlohmann::json::parse(slurp(d.path() / "res" / "manifest.json"));
  EXPECT_EQ(m.at("threads"), 2);
  EXPECT_EQ(m.at("notes").at("threads_seen"), 2);
  EXPECT_EQ(m.at("notes").at("figures_seen"), true);
}

TEST(RunExperiment, CreatesMissingParentDirectories) {
  TempDir d;
  run_experiment(echo(), resolve_params(echo(), {}), d.path() / "a" / "b" / "res", 1, false, false);
  EXPECT_TRUE(fs::exists(d.path() / "a" / "b" / "res" / "manifest.json"));
}

TEST(RunExperiment, TrailingSlashStillRenamesToTheDirectory) {
  TempDir d;
  run_experiment(echo(), resolve_params(echo(), {}), (d.path() / "res").string() + "/", 1, false, false);
  EXPECT_TRUE(fs::exists(d.path() / "res" / "echo.csv"));
  EXPECT_EQ(entries(d.path()), std::vector<std::string>{"res"});
}

TEST(RunExperiment, ReplacesPreviousResultsWithoutLeftovers) {
  TempDir d;
  const fs::path out = d.path() / "res";
  run_experiment(echo(), resolve_params(echo(), {{"count", "5"}}), out, 1, false, false);
  const RunOutcome r = run_experiment(echo(), resolve_params(echo(), {{"count", "1"}}), out, 1, false, false, true);
  EXPECT_TRUE(r.replaced);
  EXPECT_EQ(slurp(out / "echo.csv"), "i,value\n0,0\n");
  EXPECT_EQ(entries(d.path()), std::vector<std::string>{"res"});
}

TEST(RunExperiment, PreviousResultIsNotReplacedWithoutOverwrite) {
  TempDir d;
  const fs::path out = d.path() / "res";
  run_experiment(echo(), resolve_params(echo(), {{"count", "2"}}), out, 1, false, false);
  const std::string before = slurp(out / "echo.csv");
  EXPECT_THROW(run_experiment(echo(), resolve_params(echo(), {}), out, 1, false, false), InputError);
  EXPECT_EQ(slurp(out / "echo.csv"), before);
}

TEST(RunExperiment, FolderHoldingOtherFilesIsNeverReplaced) {
  TempDir d;
  const fs::path out = d.path() / "res";
  fs::create_directory(out);
  write_text(out / "stale.txt", "old");
  EXPECT_THROW(run_experiment(echo(), resolve_params(echo(), {}), out, 1, false, false, true), InputError);
  EXPECT_EQ(slurp(out / "stale.txt"), "old");
  EXPECT_EQ(entries(d.path()), std::vector<std::string>{"res"});
}

TEST(RunExperiment, InternalFailureRemovesTemporaryDirectory) {
  TempDir d;
  EXPECT_THROW(run_experiment(echo(), resolve_params(echo(), {{"fail", "internal"}}), d.path() / "res", 1, false,
                              false),
               std::runtime_error);
  EXPECT_TRUE(entries(d.path()).empty());
}

TEST(RunExperiment, InputErrorDuringRunRemovesTemporaryDirectory) {
  TempDir d;
  EXPECT_THROW(
      run_experiment(echo(), resolve_params(echo(), {{"fail", "input"}}), d.path() / "res", 1, false, false),
      InputError);
  EXPECT_FALSE(has_sibling_with(d.path(), ".tmp-"));
  EXPECT_FALSE(fs::exists(d.path() / "res"));
}

// ---------------------------------------------------------------------------------------------
// One error convention (error.hpp, docs/reliability.md): the library refuses a value with
// std::invalid_argument / std::domain_error; while a preset runs, run_experiment reports it as
// InputError (exit 2) with the library's message; a broken invariant (std::logic_error and its
// other kinds) stays an internal error (exit 1).

namespace {

void throwing_run(const Params& p, RunContext&) {
  const std::string& k = p.get_string("kind");
  if (k == "invalid_argument") throw std::invalid_argument("lib_fn: expected x > 0, got -1");
  if (k == "domain_error") throw std::domain_error("lib_fn: expected beta in [0, 700], got 800");
  if (k == "convergence") throw ConvergenceError("solver_fn: Newton did not converge at rho = 0.5");
  if (k == "logic_error") throw std::logic_error("lib_fn: expected A and B with the same number of columns, got 2 and 3");
  throw std::out_of_range("vector::_M_range_check");
}

const ExperimentRegistration throwing_registration{Experiment{
    "test-library-throws",
    "test-only: the library refuses a value (or breaks an invariant) during the run or the estimate",
    {p_string("kind", "invalid_argument", "what the run throws", {"invalid_argument", "domain_error", "convergence", "logic_error", "out_of_range"}),
     p_bool("in_estimate", false, "throw std::invalid_argument from the estimate instead")},
    throwing_run, "",
    [](const Params& p) {
      if (p.get_bool("in_estimate")) throw std::invalid_argument("estimate_fn: expected n >= 2, got 1");
      return ResourceEstimate{};
    }}};

const Experiment& throwing() { return *find_experiment("test-library-throws"); }

}  // namespace

TEST(RunExperiment, LibraryValueRefusalIsInputErrorWithTheSameMessage) {
  TempDir d;
  const auto msg = [&](const Sets& sets) {
    return input_error_of([&] { run_experiment(throwing(), resolve_params(throwing(), sets), d.path() / "res", 1, false, false); });
  };
  EXPECT_EQ(msg({{"kind", "invalid_argument"}}), "lib_fn: expected x > 0, got -1");
  EXPECT_EQ(msg({{"kind", "domain_error"}}), "lib_fn: expected beta in [0, 700], got 800");
  EXPECT_EQ(msg({{"in_estimate", "true"}}), "estimate_fn: expected n >= 2, got 1");
  EXPECT_TRUE(entries(d.path()).empty());
  const Failure f = failure_of([&] {
    try {
      run_experiment(throwing(), resolve_params(throwing(), {}), d.path() / "res", 1, false, false);
    } catch (...) {
      return std::current_exception();
    }
    return std::exception_ptr();
  }());
  EXPECT_EQ(f.code, exit_code::bad_input);
  EXPECT_EQ(f.line, "error: lib_fn: expected x > 0, got -1");
}

// A numerical method that did not converge is neither bad input nor a bug: exit 7, its message,
// nothing written (a ConvergenceError is a std::domain_error, which as_input_error lets through).
TEST(RunExperiment, NoConvergenceIsItsOwnExitCode) {
  TempDir d;
  std::exception_ptr e;
  try {
    run_experiment(throwing(), resolve_params(throwing(), {{"kind", "convergence"}}), d.path() / "res", 1, false, false);
  } catch (...) {
    e = std::current_exception();
  }
  ASSERT_TRUE(e);
  EXPECT_EQ(failure_of(e).code, exit_code::no_convergence);
  EXPECT_EQ(failure_of(e).line, "error: solver_fn: Newton did not converge at rho = 0.5");
  EXPECT_TRUE(entries(d.path()).empty());
  try {
    std::rethrow_exception(e);
  } catch (const std::domain_error&) {  // code that can go on without the answer still catches it
    SUCCEED();
  }
}

TEST(RunExperiment, BrokenInvariantStaysAnInternalError) {
  TempDir d;
  for (const char* kind : {"logic_error", "out_of_range"}) {
    std::exception_ptr e;
    try {
      run_experiment(throwing(), resolve_params(throwing(), {{"kind", kind}}), d.path() / "res", 1, false, false);
    } catch (...) {
      e = std::current_exception();
    }
    ASSERT_TRUE(e) << kind;
    EXPECT_EQ(failure_of(e).code, exit_code::internal) << kind;
    EXPECT_EQ(failure_of(e).line.rfind("internal error: ", 0), 0u) << failure_of(e).line;
  }
  EXPECT_TRUE(entries(d.path()).empty());
}

TEST(AsInputError, MapsOnlyValueRefusals) {
  EXPECT_THROW(as_input_error([] { throw std::invalid_argument("a"); }), InputError);
  EXPECT_THROW(as_input_error([] { throw std::domain_error("b"); }), InputError);
  EXPECT_THROW(as_input_error([] { throw std::logic_error("c"); }), std::logic_error);
  EXPECT_THROW(as_input_error([] { throw std::length_error("d"); }), std::length_error);
  EXPECT_THROW(as_input_error([] { throw std::runtime_error("e"); }), std::runtime_error);
  EXPECT_THROW(as_input_error([] { throw NonFiniteError("f"); }), NonFiniteError);
  EXPECT_EQ(input_error_of([] { as_input_error([] { throw std::invalid_argument("two\nlines\n"); }); }), "two; lines");
  EXPECT_NO_THROW(as_input_error([] {}));
}

TEST(RunExperiment, FailureKeepsPreviousResultsIntact) {
  TempDir d;
  const fs::path out = d.path() / "res";
  run_experiment(echo(), resolve_params(echo(), {{"count", "2"}}), out, 1, false, false);
  const std::string before = slurp(out / "echo.csv");
  const std::string manifest = slurp(out / "manifest.json");
  EXPECT_THROW(run_experiment(echo(), resolve_params(echo(), {{"fail", "internal"}}), out, 1, false, false, true),
               std::runtime_error);
  EXPECT_EQ(slurp(out / "echo.csv"), before);
  EXPECT_EQ(slurp(out / "manifest.json"), manifest);
  EXPECT_EQ(entries(d.path()), std::vector<std::string>{"res"});
}

TEST(RunExperiment, FailureRemovesParentDirectoriesItCreated) {
  TempDir d;
  EXPECT_THROW(run_experiment(echo(), resolve_params(echo(), {{"fail", "internal"}}), d.path() / "a" / "b" / "res",
                              1, false, false),
               std::runtime_error);
  EXPECT_TRUE(entries(d.path()).empty());
}

TEST(RunExperiment, OutputPathThatIsAFileIsInputError) {
  TempDir d;
  write_text(d.path() / "res", "x");
  EXPECT_THROW(run_experiment(echo(), resolve_params(echo(), {}), d.path() / "res", 1, false, false), InputError);
  EXPECT_EQ(slurp(d.path() / "res"), "x");
}

TEST(RunExperiment, NoProgressOutputWhenStderrIsNotATerminal) {
  TempDir d;
  ::testing::internal::CaptureStderr();  // stderr becomes a file: isatty(2) is false
  run_experiment(echo(), resolve_params(echo(), {}), d.path() / "res", 1, false, true);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

// ---------------------------------------------------------------------------------------------
// draw_figures (with /bin/sh standing in for python)

using tokdyn::testing::ScopedEnv;

TEST(DrawFigures, PassesKindDirectoryAndAggBackend) {
  TempDir d;
  write_text(d.path() / "plot.sh", "printf '%s %s %s' \"$1\" \"$2\" \"$MPLBACKEND\" > \"$2/args.txt\"\n");
  ScopedEnv py("TOKDYN_PYTHON", "/bin/sh");
  ScopedEnv script("TOKDYN_PLOT_SCRIPT", (d.path() / "plot.sh").string());
  ScopedEnv backend("MPLBACKEND", "TkAgg");
  draw_figures("my-kind", d.path());
  EXPECT_EQ(slurp(d.path() / "args.txt"), "my-kind " + d.path().string() + " Agg");
}

TEST(DrawFigures, FailureReportsLastLineOfStderr) {
  TempDir d;
  write_text(d.path() / "plot.sh", "echo 'Traceback' >&2\necho 'ValueError: boom' >&2\nexit 3\n");
  ScopedEnv py("TOKDYN_PYTHON", "/bin/sh");
  ScopedEnv script("TOKDYN_PLOT_SCRIPT", (d.path() / "plot.sh").string());
  try {
    draw_figures("k1", d.path());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "figure 'k1' failed: ValueError: boom");
  }
}

TEST(DrawFigures, MissingInterpreterIsRuntimeError) {
  ScopedEnv py("TOKDYN_PYTHON", "/no/such/python");
  EXPECT_THROW(draw_figures("k", "/tmp"), std::runtime_error);
}
