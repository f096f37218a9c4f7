// Parameter validation, the experiment registry, run_experiment's temporary-directory protocol,
// draw_figures, and the CLI's handling of bad input (exit 2, one line, nothing left behind).
// Longer than 700 lines on purpose: one short test per input rule of the CLI contract, sharing the
// echo preset and the CLI runner above them; splitting would copy those helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tokdyn/build_info.hpp"
#include "tokdyn/error.hpp"
#include "tokdyn/experiment.hpp"
#include "tokdyn/io/csv.hpp"

#include "test_util.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::TempDir;
using tokdyn::testing::slurp;
using tokdyn::testing::run_cli;
using tokdyn::testing::CliResult;
using tokdyn::testing::entries;
using namespace tokdyn;

namespace {

// ---------------------------------------------------------------------------------------------
// A test-only experiment: writes `count` rows of (i, scale*i) to echo.csv and a nested file;
// with fail=input|internal it throws half-way through.

void echo_run(const Params& p, RunContext& ctx) {
  const long count = p.get_int("count");
  const std::string& fail = p.get_string("fail");
  CsvWriter w(ctx.dir / "echo.csv", {"i", "value"});
  for (long i = 0; i < count; ++i) {
    if (fail != "none" && i == count / 2) {
      if (fail == "input") throw InputError("test-echo: bad combination");
      throw std::runtime_error("test-echo: internal failure");
    }
    w.cell(i).cell(p.get_double("scale") * static_cast<double>(i)).end_row();
    if (ctx.progress) ctx.progress(static_cast<double>(i + 1) / static_cast<double>(count));
  }
  fs::create_directory(ctx.dir / "sub");
  std::ofstream(ctx.dir / "sub" / "note.txt") << "hello\n";
  ctx.notes["threads_seen"] = ctx.threads;
  ctx.notes["figures_seen"] = ctx.figures;
}

const ExperimentRegistration echo_registration{Experiment{
    "test-echo",
    "test-only: echoes its parameters into a CSV",
    {p_int("count", 4, "rows to write", 1, 1000000), p_double("scale", 1.0, "value multiplier", 0.0, {}, true),
     p_double("frac", 0.5, "a fraction", 0.0, 1.0), p_bool("flag", false, "a switch"),
     p_string("mode", "a", "a choice", {"a", "b"}), p_int_list("taps", {1, 2}, "layers to tap (may be empty)", 0, 1000000).items(0),
     p_int("seed", 7, "random seed", 0, kMaxSeed), p_string("fail", "none", "throw midway", {"none", "input", "internal"})},
    echo_run}};

const Experiment& echo() {
  const Experiment* e = find_experiment("test-echo");
  if (!e) throw std::logic_error("test-echo not registered");
  return *e;
}



void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// The InputError message of f(), or "" when it does not throw InputError.
template <class F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

using Sets = std::vector<std::pair<std::string, std::string>>;

std::string set_error(const Sets& sets) {
  return input_error_of([&] { resolve_params(echo(), sets); });
}

// Names in `dir` (not recursive) other than `except`.
}  // namespace

// ---------------------------------------------------------------------------------------------
// resolve_params

TEST(Params, DefaultsWhenNothingIsSet) {
  const Params p = resolve_params(echo(), {});
  EXPECT_EQ(p.get_int("count"), 4);
  EXPECT_EQ(p.get_double("scale"), 1.0);
  EXPECT_FALSE(p.get_bool("flag"));
  EXPECT_EQ(p.get_string("mode"), "a");
  EXPECT_EQ(p.get_int_list("taps"), (std::vector<long>{1, 2}));
}

TEST(Params, SetOverridesDefault) {
  const Params p = resolve_params(echo(), {{"count", "9"}, {"scale", "2.5"}, {"mode", "b"}});
  EXPECT_EQ(p.get_int("count"), 9);
  EXPECT_EQ(p.get_double("scale"), 2.5);
  EXPECT_EQ(p.get_string("mode"), "b");
}

TEST(Params, SameKeySetTwiceIsRefused) {
  EXPECT_EQ(set_error({{"count", "2"}, {"count", "3"}}),
            "parameter 'count' is set twice (--set count=2 and --set count=3); give it once");
}

TEST(Params, UnknownKeyNamesKeyPresetAndKnownKeys) {
  const std::string msg = set_error({{"foo", "1"}});
  EXPECT_NE(msg.find("unknown parameter 'foo' for preset 'test-echo'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(known: count, scale, frac, flag, mode, taps, seed, fail)"), std::string::npos) << msg;
}

TEST(Params, IntRejectsText) {
  EXPECT_EQ(set_error({{"count", "abc"}}), "parameter 'count': expected an integer, got 'abc'");
}

TEST(Params, IntRejectsFraction) {
  EXPECT_EQ(set_error({{"count", "1.5"}}), "parameter 'count': expected an integer, got '1.5'");
}

TEST(Params, IntRejectsOverflow) {
  EXPECT_NE(set_error({{"count", "99999999999999999999999"}}).find("expected an integer"), std::string::npos);
}

TEST(Params, IntBelowMinimumNamesBound) {
  EXPECT_EQ(set_error({{"count", "0"}}), "parameter 'count': expected an integer >= 1 and <= 1000000, got 0");
}

TEST(Params, DoubleRejectsNan) {
  EXPECT_EQ(set_error({{"scale", "nan"}}), "parameter 'scale': expected a finite number, got 'nan'");
}

TEST(Params, DoubleRejectsInfinity) {
  EXPECT_EQ(set_error({{"scale", "inf"}}), "parameter 'scale': expected a finite number, got 'inf'");
  EXPECT_EQ(set_error({{"scale", "1e999"}}), "parameter 'scale': expected a finite number, got '1e999'");
}

TEST(Params, DoubleRejectsText) {
  EXPECT_EQ(set_error({{"scale", "x1"}}), "parameter 'scale': expected a number, got 'x1'");
}

TEST(Params, DoubleExclusiveMinimumRejectsBound) {
  EXPECT_EQ(set_error({{"scale", "0"}}), "parameter 'scale': expected a number > 0, got '0'");
  EXPECT_EQ(set_error({{"scale", "-1"}}), "parameter 'scale': expected a number > 0, got '-1'");
}

TEST(Params, DoubleClosedRangeAcceptsEndsRejectsOutside) {
  EXPECT_EQ(resolve_params(echo(), {{"frac", "1"}}).get_double("frac"), 1.0);
  EXPECT_EQ(resolve_params(echo(), {{"frac", "0"}}).get_double("frac"), 0.0);
  EXPECT_EQ(set_error({{"frac", "1.5"}}), "parameter 'frac': expected a number >= 0 and <= 1, got '1.5'");
}

TEST(Params, DoubleAcceptsExponentAndPlusSign) {
  EXPECT_EQ(resolve_params(echo(), {{"scale", "+2e-3"}}).get_double("scale"), 2e-3);
}

TEST(Params, BoolAcceptsAllSpellings) {
  for (const char* t : {"true", "1", "yes", "on", "TRUE", "Yes"})
    EXPECT_TRUE(resolve_params(echo(), {{"flag", t}}).get_bool("flag")) << t;
  for (const char* f : {"false", "0", "no", "off", "False"})
    EXPECT_FALSE(resolve_params(echo(), {{"flag", f}}).get_bool("flag")) << f;
}

TEST(Params, BoolRejectsOtherWords) {
  EXPECT_NE(set_error({{"flag", "maybe"}}).find("parameter 'flag': expected true or false"), std::string::npos);
}

TEST(Params, StringOutsideChoicesListsChoices) {
  EXPECT_EQ(set_error({{"mode", "c"}}), "parameter 'mode': expected one of: a, b (got 'c')");
}

TEST(Params, IntListParsesCommaSeparatedValues) {
  EXPECT_EQ(resolve_params(echo(), {{"taps", "1, 2,30"}}).get_int_list("taps"), (std::vector<long>{1, 2, 30}));
}

TEST(Params, IntListEmptyStringIsEmptyList) {
  EXPECT_TRUE(resolve_params(echo(), {{"taps", ""}}).get_int_list("taps").empty());
}

TEST(Params, IntListChecksEveryEntryRange) {
  EXPECT_EQ(set_error({{"taps", "1,-2"}}), "parameter 'taps' entry 2: expected an integer >= 0 and <= 1000000, got -2");
}

TEST(Params, IntListRejectsNonIntegerEntry) {
  EXPECT_EQ(set_error({{"taps", "1,x"}}), "parameter 'taps' entry 2: expected an integer, got 'x'");
}

TEST(Params, ErrorMessagesAreOneLine) {
  const std::string msg = set_error({{"mode", "a\nb"}});
  ASSERT_FALSE(msg.empty());
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(Params, GetterOfKeyNotInSchemaIsLogicError) {
  const Params p = resolve_params(echo(), {});
  EXPECT_THROW(p.get_int("nope"), std::logic_error);
}

TEST(Params, GetterOfWrongTypeIsLogicError) {
  const Params p = resolve_params(echo(), {});
  EXPECT_THROW(p.get_double("count"), std::logic_error);
}

TEST(Params, ToJsonHoldsEveryKeyWithItsType) {
  const nlohmann::json j = resolve_params(echo(), {{"taps", "3,4"}}).to_json();
  EXPECT_EQ(j.size(), echo().params.size());
  EXPECT_EQ(j.at("count"), 4);
  EXPECT_TRUE(j.at("scale").is_number_float());
  EXPECT_EQ(j.at("flag"), false);
  EXPECT_EQ(j.at("mode"), "a");
  EXPECT_EQ(j.at("taps"), nlohmann::json::array({3, 4}));
}

TEST(ParseSet, SplitsAtFirstEquals) {
  EXPECT_EQ(parse_set("taps=1=2"), (std::pair<std::string, std::string>{"taps", "1=2"}));
}

TEST(ParseSet, WithoutEqualsThrowsInputError) {
  EXPECT_EQ(input_error_of([] { parse_set("depth"); }), "--set 'depth': expected key=value");
}

TEST(ParseSet, EmptyKeyThrowsInputError) {
  EXPECT_NE(input_error_of([] { parse_set("=3"); }), "");
}

// ---------------------------------------------------------------------------------------------
// TOML configs

TEST(ParamsToml, KeysAreApplied) {
  TempDir d;
  write_text(d.path() / "c.toml",
             "preset = \"test-echo\"\ncount = 6\nscale = 3\nflag = true\nmode = \"b\"\ntaps = [0, 5]\n");
  const Params p = resolve_params(echo(), {}, d.path() / "c.toml");
  EXPECT_EQ(p.get_int("count"), 6);
  EXPECT_EQ(p.get_double("scale"), 3.0);  // a TOML integer is accepted for a double
  EXPECT_TRUE(p.get_bool("flag"));
  EXPECT_EQ(p.get_string("mode"), "b");
  EXPECT_EQ(p.get_int_list("taps"), (std::vector<long>{0, 5}));
}

TEST(ParamsToml, SetOverridesToml) {
  TempDir d;
  write_text(d.path() / "c.toml", "preset = \"test-echo\"\ncount = 6\n");
  EXPECT_EQ(resolve_params(echo(), {{"count", "8"}}, d.path() / "c.toml").get_int("count"), 8);
}

TEST(ParamsToml, UnknownKeyNamesFileLineAndKey) {
  TempDir d;
  const fs::path f = d.path() / "c.toml";
  write_text(f, "preset = \"test-echo\"\n\nfoo = 1\n");
  const std::string msg = input_error_of([&] { resolve_params(echo(), {}, f); });
  EXPECT_NE(msg.find("config file '" + f.string() + "' line 3: unknown parameter 'foo' for preset 'test-echo'"),
            std::string::npos)
      << msg;
}

TEST(ParamsToml, StringWhereIntegerExpectedIsRejected) {
  TempDir d;
  const fs::path f = d.path() / "c.toml";
  write_text(f, "count = \"3\"\n");
  const std::string msg = input_error_of([&] { resolve_params(echo(), {}, f); });
  EXPECT_NE(msg.find("parameter 'count': expected an integer, got '3' (a string)"), std::string::npos) << msg;
  EXPECT_NE(msg.find(f.string()), std::string::npos) << msg;
}

TEST(ParamsToml, FloatWhereIntegerExpectedIsRejected) {
  TempDir d;
  write_text(d.path() / "c.toml", "count = 2.0\n");
  const std::string msg = input_error_of([&] { resolve_params(echo(), {}, d.path() / "c.toml"); });
  EXPECT_NE(msg.find("parameter 'count': expected an integer, got 2.0"), std::string::npos) << msg;
}

TEST(ParamsToml, NanIsRejected) {
  TempDir d;
  write_text(d.path() / "c.toml", "scale = nan\n");
  const std::string msg = input_error_of([&] { resolve_params(echo(), {}, d.path() / "c.toml"); });
  EXPECT_NE(msg.find("parameter 'scale': expected a finite number"), std::string::npos) << msg;
}

TEST(ParamsToml, OutOfRangeIsRejected) {
  TempDir d;
  write_text(d.path() / "c.toml", "count = 0\n");
  const std::string msg = input_error_of([&] { resolve_params(echo(), {}, d.path() / "c.toml"); });
  EXPECT_NE(msg.find("parameter 'count': expected an integer >= 1 and <= 1000000, got 0"), std::string::npos) << msg;
}

TEST(ParamsToml, IntListEntriesAreChecked) {
  TempDir d;
  write_text(d.path() / "c.toml", "taps = [1, \"x\"]\n");
  const std::string msg = input_error_of([&] { resolve_params(echo(), {}, d.path() / "c.toml"); });
  EXPECT_NE(msg.find("parameter 'taps' entry 2: expected an integer, got 'x' (a string)"), std::string::npos) << msg;
}

TEST(ExperimentOfToml, ReturnsTheNamedPreset) {
  TempDir d;
  write_text(d.path() / "c.toml", "preset = \"test-echo\"\n");
  EXPECT_EQ(&experiment_of_toml(d.path() / "c.toml"), &echo());
}

TEST(ExperimentOfToml, MissingFileNamesFile) {
  EXPECT_EQ(input_error_of([] { experiment_of_toml("no-such-dir/x.toml"); }),
            "config file 'no-such-dir/x.toml': cannot open (no such file); expected a readable regular file");
}

TEST(ExperimentOfToml, ParseErrorNamesFileAndLineOnOneLine) {
  TempDir d;
  const fs::path f = d.path() / "bad.toml";
  write_text(f, "preset = \"test-echo\"\ncount = = 3\n");
  const std::string msg = input_error_of([&] { experiment_of_toml(f); });
  EXPECT_EQ(msg.rfind("config file '" + f.string() + "' line 2", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(ExperimentOfToml, MissingPresetKeyNamesFile) {
  TempDir d;
  const fs::path f = d.path() / "c.toml";
  write_text(f, "count = 3\n");
  const std::string msg = input_error_of([&] { experiment_of_toml(f); });
  EXPECT_NE(msg.find("config file '" + f.string() + "': missing key 'preset'"), std::string::npos) << msg;
}

TEST(ExperimentOfToml, UnknownPresetNamesFileAndPreset) {
  TempDir d;
  const fs::path f = d.path() / "c.toml";
  write_text(f, "preset = \"nope\"\n");
  const std::string msg = input_error_of([&] { experiment_of_toml(f); });
  EXPECT_NE(msg.find(f.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown preset 'nope'"), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------------------
// Registry

TEST(Registry, ExperimentsAreSortedByName) {
  const auto all = experiments();
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end(),
                             [](const Experiment* a, const Experiment* b) { return a->name < b->name; }));
}

TEST(Registry, FindsRegisteredAndNotUnknown) {
  EXPECT_NE(find_experiment("test-echo"), nullptr);
  EXPECT_EQ(find_experiment("no-such-preset"), nullptr);
}

TEST(Registry, DuplicateNameIsRejected) {
  Experiment dup{"test-echo", "again", {}, echo_run};
  EXPECT_THROW(ExperimentRegistration{dup}, std::logic_error);
}

TEST(Registry, EveryPresetsDefaultsSatisfyItsOwnSchema) {
  // Round-trips every default through the --set parser, so a default outside its own range
  // (or a choice missing from its list) is caught here rather than by a user.
  // Keys that do not apply under the other defaults are left out (setting them is refused).
  for (const Experiment* e : experiments()) {
    Sets sets;
    for (const ParamSpec& s : e->params) {
      bool applies = true;
      for (const ParamCondition& c : s.only_when) {
        std::string now;
        for (const ParamSpec& t : e->params)
          if (t.key == c.key) now = value_text(t.def);
        const bool listed = std::find(c.values.begin(), c.values.end(), now) != c.values.end();
        applies = applies && listed != c.negate;
      }
      if (applies) sets.emplace_back(s.key, value_text(s.def));
    }
    EXPECT_NO_THROW(resolve_params(*e, sets)) << e->name;
  }
}

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

namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

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

// ---------------------------------------------------------------------------------------------
// The CLI binary: bad input -> exit 2, exactly one line on stderr, nothing left behind.

namespace {

// Runs `args` in a fresh directory holding `files` and checks the bad-input contract.
void expect_input_error(const std::vector<std::string>& args, const std::string& needle,
                        const std::vector<std::pair<std::string, std::string>>& files = {}) {
  TempDir d;
  std::vector<std::string> names;
  for (const auto& [name, text] : files) {
    write_text(d.path() / name, text);
    names.push_back(name);
  }
  const CliResult r = run_cli(d.path(), args);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("tokdyn: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_TRUE(entries(d.path(), names).empty()) << "left behind: " << entries(d.path(), names).front();
}

const std::string kPreset = "ssm-random-silu";

// `run ssm-random-silu` at a tiny size followed by one bad `--set` (the last setting of a key
// wins), so that a validation regression makes the test fail quickly instead of running the
// full-size experiment.
std::vector<std::string> run_with(const std::string& bad_set) {
  // A small run with one bad value; the small default of the same key is left out (a key is set once).
  std::vector<std::string> args = {"run", kPreset, "--no-figures"};
  const std::string key = bad_set.substr(0, bad_set.find('='));
  for (const char* s : {"runs=1", "depth=1", "tokens=2", "n=2", "m=1"})
    if (std::string(s).rfind(key + "=", 0) != 0) {
      args.push_back("--set");
      args.push_back(s);
    }
  args.push_back("--set");
  args.push_back(bad_set);
  return args;
}

}  // namespace

TEST(CliInput, UnknownKey) {
  expect_input_error(run_with("foo=1"), "unknown parameter 'foo'");
}

TEST(CliInput, WrongType) {
  expect_input_error(run_with("depth=abc"),
                     "parameter 'depth': expected an integer, got 'abc'");
}

TEST(CliInput, NonFiniteNumber) {
  expect_input_error(run_with("tau=nan"), "parameter 'tau': expected a finite number");
}

TEST(CliInput, DepthOutOfRange) {
  expect_input_error(run_with("depth=0"), "parameter 'depth': expected an integer >= 1");
}

TEST(CliInput, TokensOutOfRange) {
  expect_input_error(run_with("tokens=0"), "parameter 'tokens': expected an integer >= 1 and <= 100000, got 0");
}

TEST(CliInput, TauOutOfRange) {
  expect_input_error(run_with("tau=-1"), "parameter 'tau': expected a number > 0");
}

TEST(CliInput, UnknownPreset) {
  expect_input_error({"run", "no-such-preset"}, "unknown preset 'no-such-preset' (see `tokdyn presets`)");
}

TEST(CliInput, MissingConfigFile) {
  expect_input_error({"run", "missing.toml"}, "config file 'missing.toml': cannot open (no such file)");
}

TEST(CliInput, MalformedTomlFile) {
  expect_input_error({"run", "bad.toml"}, "config file 'bad.toml' line 2",
                     {{"bad.toml", "preset = \"ssm-random-silu\"\ndepth = = 3\n"}});
}

TEST(CliInput, TomlWithUnknownKey) {
  expect_input_error({"run", "c.toml", "--no-figures"}, "config file 'c.toml' line 2: unknown parameter 'foo'",
                     {{"c.toml", "preset = \"ssm-random-silu\"\nfoo = 1\nruns = 1\ndepth = 1\ntokens = 2\nn = 2\nm = 1\n"}});
}

TEST(CliInput, SetWithoutEquals) {
  expect_input_error({"run", kPreset, "--set", "depth"}, "--set 'depth': expected key=value");
}

TEST(CliInput, UnknownOption) { expect_input_error({"run", kPreset, "--bogus"}, "--bogus"); }

TEST(CliInput, MissingOptionArgument) { expect_input_error({"run", kPreset, "--out"}, "--out"); }

TEST(CliInput, ShowUnknownPreset) { expect_input_error({"show", "no-such-preset"}, "unknown preset 'no-such-preset'"); }

// A bad value that only the library can refuse, on each side: exit 2 and one line, like a
// schema violation (the step guard and the step count of drivers.cpp throw std::invalid_argument).
TEST(CliInput, SsmValueRefusedByTheLibrary) {
  expect_input_error({"run", "ssm-theorem-pe", "--no-figures", "--set", "runs=1", "--set", "variants=pe", "--set",
                      "integrator=rk4", "--set", "every=1", "--set", "h=0.3"},
                     "parameter 'h' = 0.3: the RK4 step is outside its stability region");
}

TEST(CliInput, RopeValueRefusedByTheLibrary) {
  // --quiet: without it, the estimated work of so long a run is announced on stderr first.
  expect_input_error({"run", "rope-flow", "--no-figures", "--quiet", "--set", "n=4", "--set", "runs=1", "--set", "h=1e-300"},
                     "parameter 'h' = 1e-300: RK4 would take 2e+301 steps over [0, 20]");
}

TEST(CliInput, HugeWorkIsAnnouncedInReadableUnits) {
  // Without --quiet the estimate comes first: in scientific notation and as a time, never a
  // 300-digit FLOP count; then the one-line refusal.
  TempDir d;
  const CliResult r = run_cli(d.path(), {"run", "rope-flow", "--no-figures", "--set", "n=4", "--set", "runs=1", "--set", "h=1e-300"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("more than a century"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("e+"), std::string::npos) << r.err;
  int run = 0, longest = 0;
  for (char ch : r.err) {
    run = std::isdigit(static_cast<unsigned char>(ch)) ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  EXPECT_LT(longest, 12) << r.err;
}

TEST(Cli, VersionPrintsVersion) {
  TempDir d;
  const CliResult r = run_cli(d.path(), {"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find(TOKDYN_VERSION), std::string::npos) << r.out;
}

TEST(Cli, PresetsExitsZero) {
  TempDir d;
  const CliResult r = run_cli(d.path(), {"presets"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}
