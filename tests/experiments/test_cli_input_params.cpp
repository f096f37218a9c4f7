// Parameter validation: resolve_params and --set parsing, TOML configs, and the experiment
// registry (the test-only preset `test-echo` of cli_input_fixtures.hpp stands in for a real one).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"

#include "cli_input_fixtures.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::TempDir;
using tokdyn::testing::Sets;
using tokdyn::testing::echo;
using tokdyn::testing::echo_run;
using tokdyn::testing::input_error_of;
using tokdyn::testing::write_text;
using namespace tokdyn;

namespace {

std::string set_error(const Sets& sets) {
  return input_error_of([&] { resolve_params(echo(), sets); });
}

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
