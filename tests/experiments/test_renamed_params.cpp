// Renamed parameters (Experiment::renamed): the coupling presets speak the model registry's
// vocabulary (tokens, depth, tf_weights, block, refresh_every) and refuse their old names (T, L,
// weights, P, L_r, exact_P) with one line naming the new one, from `--set`, a TOML file and a sweep
// axis alike: exit 2, nothing written. The first tests hold the mechanism on a test-only schema;
// the table below is every rename of every coupling preset, so a preset that drops one fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/model_registry.hpp"

#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::CliResult;
using tokdyn::testing::run_cli;
using tokdyn::testing::TempDir;

namespace {

Experiment toy() {
  Experiment e;
  e.name = "toy-renamed";
  e.params = {p_int("tokens", 4, "tokens", 1, 512), p_int("depth", 10, "depth", 1, 5000)};
  e.renamed = {{"T", "tokens"}, {"L", "depth"}};
  e.run = [](const Params&, RunContext&) {};
  return e;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void write(const fs::path& f, const std::string& text) {
  std::ofstream(f) << text;
}

// {preset, {{old, new}, ...}}: every coupling preset's renamed keys.
const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> kRenamed = {
    {"coupling-frozen-kernel", {{"T", "tokens"}, {"L", "depth"}, {"weights", "tf_weights"}, {"P", "block"}}},
    {"coupling-bounded-step", {{"T", "tokens"}, {"L", "depth"}, {"weights", "tf_weights"}, {"P", "block"}}},
    {"coupling-rank-collapse", {{"T", "tokens"}, {"L", "depth"}, {"weights", "tf_weights"}, {"P", "block"}}},
    {"coupling-qk-specificity", {{"T", "tokens"}, {"L", "depth"}, {"weights", "tf_weights"}, {"P", "block"}}},
    {"coupling-dichotomy", {{"T", "tokens"}, {"L", "depth"}, {"weights", "tf_weights"}, {"P", "block"}}},
    {"coupling-green", {{"L", "depth"}, {"weights", "tf_weights"}, {"P", "block"}}},
    {"coupling-duality", {{"T", "tokens"}, {"L", "depth"}, {"weights", "tf_weights"}, {"P", "block"}, {"L_r", "refresh_every"}}},
    {"coupling-thm9", {{"T", "tokens"}, {"P", "block"}}},
    {"coupling-gate-intervention",
     {{"T", "tokens"}, {"L", "depth"}, {"weights", "tf_weights"}, {"P", "block"}, {"L_r", "refresh_every"}}},
    {"coupling-fast-slow", {{"L", "depth"}}},
    {"coupling-margin", {{"L", "depth"}}},
    {"coupling-trajectory", {{"L", "depth"}}},
    {"coupling-data", {{"P", "block"}, {"exact_P", "exact_block"}}},
    {"coupling-e7", {{"T", "tokens"}, {"L", "depth"}, {"P", "block"}}},
};

// A value the new key accepts, for the hint (the old key is refused before any value is read).
std::string value_for(const std::string& key) { return key == "tf_weights" ? "w.safetensors" : "8"; }

}  // namespace

TEST(RenamedParams, SetAndTomlNameTheNewKey) {
  const Experiment e = toy();
  EXPECT_EQ(error_of([&] { resolve_params(e, {{"T", "8"}}); }), "parameter 'T' was renamed 'tokens' (--set tokens=8)");
  EXPECT_EQ(error_of([&] { resolve_params(e, {{"tokens", "2"}, {"L", "30"}}); }), "parameter 'L' was renamed 'depth' (--set depth=30)");
  TempDir d;
  const fs::path f = d.path() / "c.toml";
  write(f, "tokens = 2\nT = 8\n");
  EXPECT_EQ(error_of([&] { resolve_params(e, {}, f); }),
            fmt::format("config file '{}' line 2: parameter 'T' was renamed 'tokens' (write tokens = 8)", f.string()));
  // A key that was never a parameter is still unknown, listing the known ones.
  const std::string unknown = error_of([&] { resolve_params(e, {{"Q", "1"}}); });
  EXPECT_NE(unknown.find("unknown parameter 'Q'"), std::string::npos) << unknown;
  EXPECT_EQ(unknown.find("was renamed"), std::string::npos) << unknown;
  // The new names resolve.
  const Params p = resolve_params(e, {{"tokens", "8"}, {"depth", "30"}});
  EXPECT_EQ(p.get_int("tokens"), 8);
  EXPECT_EQ(p.get_int("depth"), 30);
}

TEST(RenamedParams, TheRegistryRefusesAMisdeclaredRename) {
  Experiment keeps_old = toy();
  keeps_old.name = "toy-renamed-keeps-old";
  keeps_old.params.push_back(p_int("T", 1, "still a parameter", 1, 2));
  EXPECT_THROW(ExperimentRegistration{keeps_old}, std::logic_error);
  Experiment no_new = toy();
  no_new.name = "toy-renamed-no-new";
  no_new.renamed.push_back({"P", "block"});  // block is not a parameter
  EXPECT_THROW(ExperimentRegistration{no_new}, std::logic_error);
  Experiment twice = toy();
  twice.name = "toy-renamed-twice";
  twice.renamed.push_back({"T", "depth"});
  EXPECT_THROW(ExperimentRegistration{twice}, std::logic_error);
  for (const char* n : {"toy-renamed-keeps-old", "toy-renamed-no-new", "toy-renamed-twice"}) EXPECT_EQ(find_experiment(n), nullptr) << n;
}

TEST(RenamedParams, EveryCouplingPresetDeclaresItsRenames) {
  for (const auto& [preset, renames] : kRenamed) {
    const Experiment* e = find_experiment(preset);
    ASSERT_NE(e, nullptr) << preset;
    std::map<std::string, std::string> want(renames.begin(), renames.end()), got(e->renamed.begin(), e->renamed.end());
    EXPECT_EQ(got, want) << preset;
    const nlohmann::json j = schema_json(*e);
    for (const auto& [from, to] : renames) EXPECT_EQ(j.at("renamed").at(from), to) << preset << " " << from;
  }
  // No coupling preset has a knob named by an old name (the grep of the task, held by a test).
  for (const Experiment* e : experiments()) {
    if (e->name.rfind("coupling-", 0) != 0) continue;
    for (const ParamSpec& s : e->params)
      for (const char* old : {"T", "L", "P", "L_r", "exact_P"}) EXPECT_NE(s.key, old) << e->name;
  }
}

TEST(RenamedParams, OldNamesExitTwoFromSetAndToml) {
  TempDir d;
  for (const auto& [preset, renames] : kRenamed)
    for (const auto& [from, to] : renames) {
      const std::string v = value_for(to);
      const CliResult r = run_cli(d.path(), {"run", preset, "--out", "r", "--no-figures", "--quiet", "--set", from + "=" + v});
      EXPECT_EQ(r.code, 2) << preset << " " << from << ": " << r.err;
      EXPECT_EQ(r.err, fmt::format("tokdyn: error: parameter '{}' was renamed '{}' (--set {}={})\n", from, to, to, v)) << preset;
      EXPECT_TRUE(tokdyn::testing::entries(d.path()).empty()) << preset << " " << from;

      const fs::path cfg = d.path() / "cfg.toml";
      const bool text = to == "tf_weights";
      write(cfg, fmt::format("preset = \"{}\"\n{} = {}\n", preset, from, text ? "\"" + v + "\"" : v));
      const CliResult t = run_cli(d.path(), {"run", "cfg.toml", "--out", "r", "--no-figures", "--quiet"});
      EXPECT_EQ(t.code, 2) << preset << " " << from << ": " << t.err;
      EXPECT_NE(t.err.find(fmt::format("cfg.toml' line 2: parameter '{}' was renamed '{}' (write {} = {})", from, to, to, text ? "\"" + v + "\"" : v)),
                std::string::npos)
          << t.err;
      EXPECT_EQ(std::count(t.err.begin(), t.err.end(), '\n'), 1) << t.err;
      EXPECT_EQ(tokdyn::testing::entries(d.path()), std::vector<std::string>{"cfg.toml"}) << preset << " " << from;
      fs::remove(cfg);
    }
}

TEST(RenamedParams, SweepAxesNameTheNewKey) {
  TempDir d;
  const CliResult r = run_cli(d.path(), {"sweep", "coupling-margin", "--out", "s", "--grid", "L=30,40"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("parameter 'L' was renamed 'depth'"), std::string::npos) << r.err;
  EXPECT_TRUE(tokdyn::testing::entries(d.path()).empty());
}

TEST(RenamedParams, CouplingGateTakesTheSlowPathKnobsFromTheRegistry) {
  const Experiment* e = find_experiment("coupling-gate-intervention");
  ASSERT_NE(e, nullptr);
  for (const char* k : {"topk", "injection", "psi_hidden", "psi_scale", "refresh_every", "refresh", "pooled", "slow_loop", "site"}) {
    const ParamSpec want = model_knob("hierarchical", k);
    const auto it = std::find_if(e->params.begin(), e->params.end(), [&](const ParamSpec& s) { return s.key == k; });
    ASSERT_NE(it, e->params.end()) << k;
    EXPECT_EQ(it->type, want.type) << k;
    EXPECT_EQ(it->min, want.min) << k;
    EXPECT_EQ(it->max, want.max) << k;
    EXPECT_EQ(it->min_exclusive, want.min_exclusive) << k;
    EXPECT_EQ(it->choices, want.choices) << k;
    EXPECT_TRUE(it->def == want.def) << k;
  }
  // compression keeps the preset's own spec: the model has no multi-level compression.
  const auto c = std::find_if(e->params.begin(), e->params.end(), [](const ParamSpec& s) { return s.key == "compression"; });
  ASSERT_NE(c, e->params.end());
  EXPECT_NE(std::find(c->choices.begin(), c->choices.end(), "multi"), c->choices.end());
  // The registry's range: psi_hidden up to 4096 (the preset's own spec stopped at 1024).
  EXPECT_NO_THROW(resolve_params(*e, {{"psi_hidden", "4096"}}));
}
