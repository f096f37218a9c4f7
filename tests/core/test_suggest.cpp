// "Did you mean" (core/suggest.hpp): the distance against hand-counted cases, the thresholds, and
// the CLI's messages for a misspelt preset, parameter and choice (issue 38).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_checks.hpp"
#include "test_util.hpp"
#include "tokdyn/core/suggest.hpp"

using namespace tokdyn;
using tokdyn::testing::CliResult;
using tokdyn::testing::run_cli;
using tokdyn::testing::TempDir;

TEST(Suggest, EditDistanceCountsEachKindOfEdit) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("depth", "depth"), 0u);
  EXPECT_EQ(edit_distance("depht", "depth"), 1u);    // adjacent transposition
  EXPECT_EQ(edit_distance("dept", "depth"), 1u);     // deletion
  EXPECT_EQ(edit_distance("deepth", "depth"), 1u);   // insertion
  EXPECT_EQ(edit_distance("dopth", "depth"), 1u);    // substitution
  EXPECT_EQ(edit_distance("DEPTH", "depth"), 0u);    // case-insensitive
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);          // optimal string alignment (not Damerau's 2)
}

TEST(Suggest, SuggestsOnlyNearMisses) {
  const std::vector<std::string> presets = {"coupling-dichotomy", "coupling-duality", "rope-flow", "rope-fig1a", "mamba2-fig1"};
  EXPECT_EQ(closest_name("coupling-dichotomie", presets), "coupling-dichotomy");
  EXPECT_EQ(closest_name("rope-flw", presets), "rope-flow");
  EXPECT_EQ(closest_name("rope-fig1", presets), "rope-fig1a");
  EXPECT_EQ(closest_name("coupling-duality", presets), "");  // exact: nothing to suggest
  EXPECT_EQ(closest_name("zzzzqq", presets), "");
  EXPECT_EQ(closest_name("coupling", presets), "");          // a prefix of two: no single guess
  EXPECT_EQ(closest_name("mamba2", presets), "mamba2-fig1");  // the prefix of exactly one
  EXPECT_EQ(closest_name("abc", {"xyz", "abd"}), "abd");
  EXPECT_EQ(closest_name("ab", {"xy", "ac"}), "");            // a 1- or 2-letter word: any edit is half of it
  EXPECT_EQ(closest_name("c", {"a", "b"}), "");
  EXPECT_EQ(did_you_mean("hesian", {"hessian", "gauss-newton"}), "; did you mean 'hessian'?");
  EXPECT_EQ(did_you_mean("newton", {"hessian"}), "");
}

TEST(Suggest, TheCliSuggestsPresetsKeysAndChoices) {
  TempDir d;
  const struct {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"run", "coupling-dichotomie", "--out", "a"}, "unknown preset 'coupling-dichotomie' (see `tokdyn presets`); did you mean 'coupling-dichotomy'?"},
      {{"sweep", "rope-flw", "--grid", "seed=0:1", "--out", "b"}, "did you mean 'rope-flow'?"},
      {{"run", "rope-flow", "--set", "bta=2", "--out", "c"}, "unknown parameter 'bta' for preset 'rope-flow'; did you mean 'beta'?"},
      {{"run", "transformer-clustering", "--set", "model=lama", "--out", "e"}, "(got 'lama'); did you mean 'llama'?"},
  };
  for (const auto& c : cases) {
    const CliResult r = run_cli(d.path(), c.args);
    EXPECT_EQ(r.code, 2) << c.args[1];
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  const CliResult far = run_cli(d.path(), {"run", "zzzzqq", "--out", "f"});
  EXPECT_EQ(far.code, 2);
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
  EXPECT_TRUE(tokdyn::testing::entries(d.path()).empty());
}
