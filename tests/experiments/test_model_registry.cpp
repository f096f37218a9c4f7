// The model registry (runtime/model_registry.hpp): every model builds from its knobs alone,
// its knobs reach depth-spectra once each and only for the models that declare them, and
// `tokdyn models` lists them.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "tokdyn/models/mamba2/checkpoint.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"

namespace tokdyn {
namespace {

using testing::TempDir;

TEST(ModelRegistry, NamesAreTheBuiltInModelsThenTheRegisteredFamilies) {
  EXPECT_EQ(model_names(), (std::vector<std::string>{"ssm", "rope", "mamba2", "transformer", "hierarchical", "gpt2", "llama", "neox"}));
  EXPECT_EQ(models_with_tap("attention"), (std::vector<std::string>{"rope", "transformer", "gpt2", "llama", "neox"}));
  EXPECT_THROW(model_descriptor("gpt3"), std::invalid_argument);
  for (const ModelDescriptor& m : model_registry()) {
    EXPECT_FALSE(m.description.empty()) << m.name;
    EXPECT_FALSE(m.knobs.empty()) << m.name;
    std::set<std::string> keys;
    for (const ParamSpec& q : m.knobs) EXPECT_TRUE(keys.insert(q.key).second) << m.name << " declares " << q.key << " twice";
  }
}

TEST(ModelRegistry, DepthSpectraTakesEveryKnobOnceForItsModelsOnly) {
  const Experiment* e = find_experiment("depth-spectra");
  ASSERT_NE(e, nullptr);
  for (const ModelDescriptor& m : model_registry())
    for (const ParamSpec& q : m.knobs) {
      const auto n = std::count_if(e->params.begin(), e->params.end(), [&](const ParamSpec& p) { return p.key == q.key; });
      ASSERT_EQ(n, 1) << q.key;
      const ParamSpec& p = *std::find_if(e->params.begin(), e->params.end(), [&](const ParamSpec& x) { return x.key == q.key; });
      const auto c = std::find_if(p.only_when.begin(), p.only_when.end(), [](const ParamCondition& x) { return x.key == "model"; });
      ASSERT_NE(c, p.only_when.end()) << q.key;
      EXPECT_NE(std::find(c->values.begin(), c->values.end(), m.name), c->values.end()) << q.key << " for " << m.name;
      EXPECT_NE(p.help.find(m.name + ": "), std::string::npos) << q.key;
    }
  // A knob of one model set for another is refused before anything runs (the parameter layer).
  EXPECT_THROW(resolve_params(*e, {{"model", "rope"}, {"n", "8"}}), InputError);
  EXPECT_THROW(resolve_params(*e, {{"model", "ssm"}, {"attention", "3"}}), InputError);
  // The hierarchical model's refresh rule does not apply when the summaries are held for the pass.
  EXPECT_THROW(resolve_params(*e, {{"model", "hierarchical"}, {"refresh_every", "0"}, {"refresh", "relax"}}), InputError);
  EXPECT_NO_THROW(resolve_params(*e, {{"model", "hierarchical"}, {"refresh_every", "2"}, {"refresh", "relax"}}));
  EXPECT_NO_THROW(resolve_params(*e, {{"model", "transformer"}, {"d", "8"}, {"attention", "3"}}));
}

// Each model built from the defaults of depth-spectra (Mamba-2 from a tiny fresh checkpoint): a
// map whose start state is one run of `tokens` tokens, and a step that moves it.
TEST(ModelRegistry, EveryModelBuildsFromItsKnobs) {
  TempDir tmp;
  const auto ck = tmp.path() / "ck";
  mamba2::save(mamba2::init_model(mamba2::Config::named("tiny"), 3), ck);
  const Experiment* e = find_experiment("depth-spectra");
  ASSERT_NE(e, nullptr);
  for (const ModelDescriptor& m : model_registry()) {
    std::vector<std::pair<std::string, std::string>> sets{{"model", m.name}, {"tokens", "5"}};
    if (m.name == "mamba2") sets.push_back({"checkpoint", ck.string()});
    const Params P = resolve_params(*e, sets);
    RunContext ctx;
    ctx.dir = tmp.path() / ("run_" + m.name);
    std::filesystem::create_directories(ctx.dir);
    ModelInstance S = m.build(P, ctx);
    ASSERT_TRUE(S.map) << m.name;
    EXPECT_EQ(S.Z0.runs, 1) << m.name;
    // The hierarchical model's state carries the held block summaries after the tokens (5 tokens in
    // blocks of 4: 2 summaries).
    const int rows = m.name == "hierarchical" ? 5 + 2 : 5;
    EXPECT_EQ(S.Z0.len, rows) << m.name;
    EXPECT_EQ(S.Z0.Z.rows(), rows) << m.name;
    EXPECT_TRUE(S.Z0.Z.allFinite()) << m.name;
    // The descriptor lists exactly the taps the built map offers (names before the shape).
    std::vector<std::string> offered;
    for (const std::string& t : S.map->tap_names()) offered.push_back(t.substr(0, t.find(' ')));
    EXPECT_EQ(offered, m.taps) << m.name;
    Batch Z = S.Z0;
    S.map->apply(1, Z);
    EXPECT_TRUE(Z.Z.allFinite()) << m.name;
    EXPECT_GT((Z.Z - S.Z0.Z).norm(), 0.0) << m.name << ": one layer did not move the state";
    const ModelCost c = m.cost(P);
    EXPECT_GT(c.d, 0.0) << m.name;
    EXPECT_GT(c.per_row, 0.0) << m.name;
    EXPECT_FALSE(S.notes.value("model", nlohmann::json()).is_null()) << m.name;
  }
}

TEST(ModelRegistry, CliListsModelsAndTheirKnobs) {
  TempDir tmp;
  const testing::CliResult all = testing::run_cli(tmp.path(), {"models"});
  EXPECT_EQ(all.code, 0) << all.err;
  for (const std::string& n : model_names()) EXPECT_NE(all.out.find(n + " "), std::string::npos) << n;
  const testing::CliResult one = testing::run_cli(tmp.path(), {"models", "ssm"});
  EXPECT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find("redraw"), std::string::npos);
  EXPECT_EQ(one.out.find("checkpoint"), std::string::npos);  // mamba2's, not the SSM's
  const testing::CliResult bad = testing::run_cli(tmp.path(), {"models", "gpt3"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_NE(bad.err.find("gpt3"), std::string::npos);
}

}  // namespace
}  // namespace tokdyn
