// The parameter layer's rules beyond types and bounds: number lists (count, repeats, order, stray
// commas, TOML arrays and strings), parameters that apply only under some options, path
// parameters checked whenever given, a key set twice, and the JSON schema `tokdyn show --json`
// writes. Each test resolves a test-only schema, so it fails when the rule breaks, whatever the
// presets declare; the CLI tests at the end run real presets.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/checks.hpp"

#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::TempDir;
using tokdyn::testing::run_cli;
using tokdyn::testing::CliResult;

namespace {

Experiment rules_schema() {
  Experiment e;
  e.name = "test-rules";
  e.description = "parameter rules";
  e.params = {
      p_double_list("rates", {0.1, 0.2}, "any reals, repeats allowed", -10.0, 10.0),
      p_double_list("grid", {0.01, 0.1}, "increasing, in (0, 1)", 0.0, 1.0, true).below_max().increasing().items(2),
      p_int_list("windows", {10, 20}, "distinct", 1, 100).distinct_entries(),
      p_int_list("taps", {}, "may be empty", 0, 100),
      p_string("psi", "affine", "kind", {"identity", "linear", "affine"}),
      p_double("psi_scale", 1.0, "not for identity", 0.0, 10.0, true).when_not("psi", {"identity"}),
      p_string("file", "", "a file").file(),
      p_int("steps", 3, "only with a file", 1, 10).when_not("file", {""}),
      p_bool("extra", false, "switch"),
      p_double("extra_tol", 1e-3, "only with extra", 0.0, 1.0, true).when("extra", {"true"}),
  };
  e.run = [](const Params&, RunContext&) {};
  return e;
}

Params resolve(const std::vector<std::pair<std::string, std::string>>& sets) { return resolve_params(rules_schema(), sets); }

std::string refusal(const std::vector<std::pair<std::string, std::string>>& sets) {
  try {
    resolve(sets);
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m;
  }
  ADD_FAILURE() << "accepted";
  return {};
}

}  // namespace

TEST(ParamRules, NumberListsParseFromSetTextWithBrackets) {
  EXPECT_EQ(resolve({{"rates", "0.5, -2,1e-3"}}).get_double_list("rates"), (std::vector<double>{0.5, -2.0, 1e-3}));
  EXPECT_EQ(resolve({{"rates", "[3]"}}).get_double_list("rates"), (std::vector<double>{3.0}));
  EXPECT_EQ(resolve({}).get_double_list("grid"), (std::vector<double>{0.01, 0.1}));
}

TEST(ParamRules, EmptyListIsRefusedUnlessTheSchemaAllowsIt) {
  EXPECT_NE(refusal({{"rates", ""}}).find("the list is empty"), std::string::npos);
  EXPECT_NE(refusal({{"windows", "[]"}}).find("'windows'"), std::string::npos);
  EXPECT_TRUE(resolve({{"taps", ""}}).get_int_list("taps").empty());
}

TEST(ParamRules, StrayCommasAreRefusedNamingTheEntry) {
  EXPECT_NE(refusal({{"rates", "0.1,0.2,"}}).find("entry 3: empty"), std::string::npos);
  EXPECT_NE(refusal({{"rates", ",0.1"}}).find("entry 1: empty"), std::string::npos);
  EXPECT_NE(refusal({{"windows", "10,,20"}}).find("entry 2: empty"), std::string::npos);
}

TEST(ParamRules, NonFiniteAndOutOfRangeEntriesAreRefused) {
  EXPECT_NE(refusal({{"rates", "0.1,nan"}}).find("entry 2"), std::string::npos);
  EXPECT_NE(refusal({{"rates", "inf"}}).find("finite"), std::string::npos);
  EXPECT_NE(refusal({{"rates", "0.1,11"}}).find("<= 10"), std::string::npos);
  EXPECT_NE(refusal({{"grid", "0.1,1"}}).find("< 1"), std::string::npos);   // max excluded
  EXPECT_NE(refusal({{"grid", "0,0.5"}}).find("> 0"), std::string::npos);   // min excluded
  EXPECT_NE(refusal({{"windows", "10,1e3"}}).find("entry 2"), std::string::npos);
}

TEST(ParamRules, RepeatsAreRefusedWhereTheyMakeNoSenseAndKeptWhereTheyDo) {
  EXPECT_NE(refusal({{"windows", "10,20,10"}}).find("entry 3 repeats entry 1"), std::string::npos);
  EXPECT_EQ(resolve({{"rates", "0.5,0.5"}}).get_double_list("rates").size(), 2u);  // multiplicities
}

TEST(ParamRules, OrderIsEnforcedWhereDeclared) {
  EXPECT_NE(refusal({{"grid", "0.5,0.1"}}).find("strictly increasing"), std::string::npos);
  EXPECT_NE(refusal({{"grid", "0.5"}}).find("at least 2 entries"), std::string::npos);
  EXPECT_EQ(resolve({{"rates", "3,1,2"}}).get_double_list("rates"), (std::vector<double>{3, 1, 2}));
}

TEST(ParamRules, DenormalsAreNumbersAndOverflowIsNot) {
  EXPECT_EQ(resolve({{"rates", "5e-324"}}).get_double_list("rates").front(), 5e-324);
  EXPECT_GT(resolve({{"psi_scale", "5e-324"}}).get_double("psi_scale"), 0.0);
  EXPECT_NE(refusal({{"psi_scale", "1e999"}}).find("finite"), std::string::npos);
}

TEST(ParamRules, AParameterThatDoesNotApplyIsRefusedNamingTheOption) {
  const std::string m = refusal({{"psi", "identity"}, {"psi_scale", "0.5"}});
  EXPECT_NE(m.find("'psi_scale' does not apply when psi = identity"), std::string::npos) << m;
  EXPECT_NE(refusal({{"steps", "4"}}).find("'steps' does not apply when file = '' (empty)"), std::string::npos);
  EXPECT_NE(refusal({{"extra_tol", "0.1"}}).find("applies only when extra is true"), std::string::npos);
  // Under the option that enables it, the same value is accepted; unset, the default is harmless.
  EXPECT_EQ(resolve({{"extra", "true"}, {"extra_tol", "0.1"}}).get_double("extra_tol"), 0.1);
  EXPECT_NO_THROW(resolve({{"psi", "identity"}}));
}

TEST(ParamRules, PathParametersAreCheckedWheneverGiven) {
  TempDir d;
  EXPECT_NE(refusal({{"file", (d.path() / "nothing.npy").string()}}).find("no such file"), std::string::npos);
  EXPECT_NE(refusal({{"file", d.path().string()}}).find("got a directory"), std::string::npos);
  std::ofstream(d.path() / "f.npy") << "x";
  EXPECT_EQ(resolve({{"file", (d.path() / "f.npy").string()}, {"steps", "5"}}).get_int("steps"), 5);
}

TEST(ParamRules, AKeySetTwiceIsRefused) {
  const std::string m = refusal({{"steps", "2"}, {"psi", "linear"}, {"psi", "affine"}});
  EXPECT_NE(m.find("'psi' is set twice"), std::string::npos) << m;
}

TEST(ParamRules, TomlArraysAndStringsGiveTheSameLists) {
  TempDir d;
  const fs::path a = d.path() / "a.toml", b = d.path() / "b.toml", c = d.path() / "c.toml";
  std::ofstream(a) << "preset = \"test-rules\"\nrates = [0.5, -2, 1e-3]\nwindows = [3, 4]\n";
  std::ofstream(b) << "preset = \"test-rules\"\nrates = \"0.5,-2,1e-3\"\nwindows = \"3,4\"\n";
  std::ofstream(c) << "preset = \"test-rules\"\nwindows = [3, 3]\n";
  const Experiment e = rules_schema();
  const Params pa = resolve_params(e, {}, a), pb = resolve_params(e, {}, b);
  EXPECT_EQ(pa.get_double_list("rates"), pb.get_double_list("rates"));
  EXPECT_EQ(pa.get_int_list("windows"), pb.get_int_list("windows"));
  try {
    resolve_params(e, {}, c);
    ADD_FAILURE() << "a repeated window was accepted from TOML";
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what()).find("c.toml"), std::string::npos) << err.what();
  }
}

TEST(ParamRules, SchemaJsonCarriesTheRules) {
  Experiment e = rules_schema();
  e.smoke = {{"steps", "1"}};
  const nlohmann::json j = schema_json(e);
  ASSERT_EQ(j.at("params").size(), e.params.size());
  const auto& grid = j.at("params").at(1);
  EXPECT_EQ(grid.at("type"), "number list");
  EXPECT_EQ(grid.at("min_items"), 2);
  EXPECT_TRUE(grid.at("ascending").get<bool>());
  EXPECT_TRUE(grid.at("max_exclusive").get<bool>());
  const auto& scale = j.at("params").at(5);
  EXPECT_EQ(scale.at("only_when").at(0).at("key"), "psi");
  EXPECT_TRUE(scale.at("only_when").at(0).at("negate").get<bool>());
  EXPECT_EQ(j.at("params").at(6).at("path"), "file");
  EXPECT_EQ(j.at("smoke").at("steps"), "1");
}

// ---- the same rules on real presets, through the CLI -------------------------------------------

TEST(ParamRulesCli, IgnoredKnobsOfThePresetsAreRefused) {
  TempDir d;
  struct Case {
    std::vector<std::string> sets;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"psi=identity", "psi_scale=0.5"}, "'psi_scale' does not apply when psi = identity"},     // coupling-margin
      {{"bench_steps=10"}, "'bench_steps' does not apply"},                                      // benchmark-only knob
      {{"psi=linear", "psi_offset=0.2"}, "'psi_offset' does not apply when psi = linear"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string out = fmt::format("o{}", i++);
    std::vector<std::string> a = {"run", "coupling-margin", "--out", out, "--no-figures", "--quiet"};
    for (const auto& s : c.sets) {
      a.push_back("--set");
      a.push_back(s);
    }
    const CliResult r = run_cli(d.path(), a);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  const CliResult g = run_cli(d.path(), {"run", "coupling-green", "--out", "g", "--no-figures", "--quiet", "--set",
                                         "tf_weights=/nonexistent.npy"});
  EXPECT_EQ(g.code, 2);
  EXPECT_NE(g.err.find("'tf_weights' does not apply when tlevel = false"), std::string::npos) << g.err;
  const CliResult m = run_cli(d.path(), {"run", "depth-spectra", "--out", "m", "--no-figures", "--quiet", "--set", "beta=2"});
  EXPECT_EQ(m.code, 2);
  EXPECT_NE(m.err.find("'beta' does not apply when model = ssm"), std::string::npos) << m.err;
  EXPECT_EQ(tokdyn::testing::entries(d.path()).size(), 0u);
}

TEST(ParamRulesCli, EmptyListsThatCrashedAreRefused) {
  TempDir d;
  for (const auto& [preset, set] : std::vector<std::pair<std::string, std::string>>{
           {"coupling-dichotomy", "H="}, {"coupling-duality", "levels="}, {"coupling-all", "presets=coupling-euler,coupling-euler"}}) {
    const CliResult r = run_cli(d.path(), {"run", preset, "--out", "r", "--no-figures", "--quiet", "--set", set});
    EXPECT_EQ(r.code, 2) << preset << " " << set << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(tokdyn::testing::entries(d.path()).size(), 0u) << preset;  // no lock, no temporary folder
  }
}

TEST(ParamRulesCli, DefaultsThatDependOnOtherParametersScale) {
  TempDir d;
  // exclude defaults to depth/5: a short window needs no second knob.
  const CliResult r = run_cli(d.path(), {"run", "coupling-margin", "--out", "m", "--no-figures", "--quiet", "--set", "depth=30"});
  EXPECT_EQ(r.code, 0) << r.err;
  std::ifstream in(d.path() / "m" / "manifest.json");
  const nlohmann::json man = nlohmann::json::parse(in);
  EXPECT_EQ(man.at("notes").at("exclude"), 6);
}

TEST(ParamRulesCli, ShowJsonListsConditionsAndSmokeParameters) {
  TempDir d;
  const CliResult r = run_cli(d.path(), {"show", "coupling-margin", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("preset"), "coupling-margin");
  bool found = false;
  for (const auto& p : j.at("params"))
    if (p.at("key") == "psi_scale") found = p.at("only_when").at(0).at("key") == "psi";
  EXPECT_TRUE(found);
  EXPECT_FALSE(j.at("smoke").empty());
  const CliResult o = run_cli(d.path(), {"run", "coupling-margin", "--out", "", "--quiet"});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--out: an empty path"), std::string::npos) << o.err;
}

TEST(ParamRulesCli, NonFiniteDynamicsAreExitFourEverywhere) {
  TempDir d;
  const std::vector<std::vector<std::string>> runs = {
      {"depth-spectra", "model=ssm", "weights=gaussian", "sigma=1e300", "depth=4", "burn_in=1", "k=2", "tokens=3", "n=4", "m=4"},
      {"depth-spectra", "model=transformer", "sigma_w=100", "norm=none", "depth=400", "burn_in=1", "k=2", "tokens=3"},
      {"coupling-qk-specificity", "depth=6", "runs=2", "perturb_from=4", "temperature=5e-324"},
  };
  int i = 0;
  for (const auto& r : runs) {
    const std::string out = fmt::format("o{}", i++);
    std::vector<std::string> a = {"run", r[0], "--out", out, "--no-figures", "--quiet"};
    for (std::size_t k = 1; k < r.size(); ++k) {
      a.push_back("--set");
      a.push_back(r[k]);
    }
    const CliResult c = run_cli(d.path(), a);
    EXPECT_EQ(c.code, 4) << r[1] << ": " << c.err;
    EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
    EXPECT_NE(c.err.find("layer"), std::string::npos) << c.err;
  }
  EXPECT_EQ(tokdyn::testing::entries(d.path()).size(), 0u);
}

// ---- a check whose value cannot be computed is neither passed nor failed ------------------------

TEST(CheckRows, NonFiniteValueIsNotApplicableNotPassOrFail) {
  TempDir d;
  RunContext ctx;
  {
    CheckTable t(d.path() / "checks.csv");
    t.add("A", "statement", "q", 0.5, "<= 1", true, tokdyn::closed_form("x = 1/2"));
    t.add("B", "statement", "q", std::numeric_limits<double>::quiet_NaN(), "<= 1", true, tokdyn::bound("Lemma 1"));
    t.add("C", "statement", "q", std::numeric_limits<double>::infinity(), ">= 0", false, tokdyn::paper("Table 9: 0"));
    t.not_applicable("D", "statement", "q", "no dichotomy at these parameters", tokdyn::consistency("two paths"));
    EXPECT_EQ(t.total(), 4);
    EXPECT_EQ(t.failed(), 0);
    EXPECT_EQ(t.not_applicable_count(), 3);
    t.report(ctx, "test");
  }
  const std::string csv = tokdyn::testing::slurp(d.path() / "checks.csv");
  EXPECT_EQ(csv.rfind("check,statement,quantity,value,expected,reference_kind,reference,pass\n", 0), 0u) << csv;
  EXPECT_NE(csv.find("A,statement,q,0.5,<= 1,closed_form,x = 1/2,true\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("B,statement,q,,not computable here: the value is nan (<= 1),bound,Lemma 1,n/a\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("C,statement,q,,not computable here: the value is inf (>= 0),paper,Table 9: 0,n/a\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("D,statement,q,,no dichotomy at these parameters,consistency,two paths,n/a\n"), std::string::npos) << csv;
  EXPECT_EQ(ctx.notes.at("checks_not_applicable"), 3);
  EXPECT_EQ(ctx.notes.at("checks_by_kind").at("closed_form").at("passed"), 1);
  EXPECT_EQ(ctx.notes.at("checks_by_kind").at("paper").at("not_applicable"), 1);
  EXPECT_EQ(ctx.notes.at("checks_failed"), 0);
}

TEST(ParamRules, ConfigFilesKeepNonAsciiToCommentLines) {
  TempDir d;
  const Experiment e = rules_schema();
  const fs::path ok = d.path() / "ok.toml", bad = d.path() / "bad.toml", val = d.path() / "val.toml";
  std::ofstream(ok) << "# caf\xc3\xa9: a comment may say anything\npreset = \"test-rules\"\n  # \xc7\x9e indented comment\n"
                    << "psi = \"linear\"\n";
  std::ofstream(bad) << "preset = \"test-rules\"\nrates = [0.5, 1\xc7\x9e]\n";
  std::ofstream(val) << "preset = \"test-rules\"\npsi = \"affine\" # caf\xc3\xa9\n";
  EXPECT_EQ(resolve_params(e, {}, ok).get_string("psi"), "linear");
  for (const fs::path& f : {bad, val}) {
    try {
      resolve_params(e, {}, f);
      ADD_FAILURE() << f << " accepted";
    } catch (const InputError& err) {
      EXPECT_NE(std::string(err.what()).find("line 2"), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find("non-ASCII"), std::string::npos) << err.what();
    }
  }
}
