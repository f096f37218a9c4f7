// Preset coupling-all: the computable content of "Attention is Just Another Name for Coupling?" in
// one command. Runs every coupling-paper preset of both parts (every registered preset named
// coupling-*, except coupling-e1 and coupling-e6, which train models and run only when listed) at its defaults, each into its own folder <preset>/ with its CSV files, manifest.json
// and figure, and joins their verdict tables into checks.csv (preset, then each preset's columns: check,
// statement, quantity, value, expected, reference_kind, reference, pass) and presets.csv (one row
// per preset: checks, failed, wall time).
#include <algorithm>
#include <array>
#include <map>
#include <chrono>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/csv.hpp"

namespace tokdyn {
namespace {

namespace fs = std::filesystem;

/// Coupling presets that train models (minutes to an hour at their defaults): run only when listed
/// by name, not by `presets=all`.
bool coupling_trains(const Experiment* e) { return e->name == "coupling-e1" || e->name == "coupling-e6"; }

/// The coupling presets coupling-all can run, in registry order (coupling-all itself excluded).
std::vector<const Experiment*> coupling_presets() {
  std::vector<const Experiment*> out;
  for (const Experiment* e : experiments())
    if (e->name.rfind("coupling-", 0) == 0 && e->name != "coupling-all") out.push_back(e);
  return out;
}

void run_all(const Params& p, RunContext& ctx) {
  const std::string want = p.get_string("presets");
  std::vector<const Experiment*> todo;
  const auto all = coupling_presets();
  if (want == "all") {
    for (const Experiment* e : all)
      if (!coupling_trains(e)) todo.push_back(e);
  } else {
    std::stringstream ss(want);
    std::string name;
    while (std::getline(ss, name, ',')) {
      const auto it = std::find_if(all.begin(), all.end(), [&](const Experiment* e) { return e->name == name; });
      if (it == all.end()) {
        std::string names;
        for (const Experiment* e : all) names += (names.empty() ? "" : ", ") + e->name;
        throw InputError(fmt::format("parameter 'presets': '{}' is not a coupling preset; expected 'all' or a comma-separated list of: {}",
                                     name, names));
      }
      if (std::find(todo.begin(), todo.end(), *it) != todo.end())
        throw InputError(fmt::format("parameter 'presets': '{}' is listed twice; expected each preset once", name));
      todo.push_back(*it);
    }
    if (!want.empty() && want.back() == ',')
      throw InputError("parameter 'presets': a trailing comma; expected 'all' or a comma-separated list of coupling presets");
    if (todo.empty()) throw InputError("parameter 'presets': empty list; expected 'all' or a comma-separated list of coupling presets");
  }

  CsvWriter summary = ctx.table("checks.csv");
  std::map<std::string, std::array<int, 3>> by_kind;  // reference kind -> passed, failed, not applicable
  CsvWriter runs = ctx.table("presets.csv");
  int total = 0, failed = 0, na = 0;
  nlohmann::json per = nlohmann::json::object();
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const Experiment& e = *todo[i];
    const Params sp = resolve_params(e, {});
    RunContext sc;
    sc.dir = ctx.dir / e.name;
    fs::create_directory(sc.dir);
    sc.threads = ctx.threads;
    sc.figures = ctx.figures;
    sc.outputs = &e.outputs;
    sc.preset = e.name;
    if (ctx.progress) {
      const double a = static_cast<double>(i) / todo.size(), b = static_cast<double>(i + 1) / todo.size();
      sc.progress = [&ctx, a, b](double f) { ctx.progress(a + (b - a) * std::clamp(f, 0.0, 1.0)); };
    }
    const auto t0 = std::chrono::steady_clock::now();
    e.run(sp, sc);
    finish_outputs(e, sc);  // its summary.csv, and its folder checked against its declaration
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The preset's own manifest (its figure module reads the notes), as run_experiment writes it.
    nlohmann::json m = nlohmann::json::object();
    m["preset"] = e.name;
    m["params"] = sp.to_json();
    m["notes"] = sc.notes;
    m["notes"]["phase_seconds"] = phase_seconds_json(sc, wall);
    ctx.add_phase(e.name, wall);
    if (!sc.summaries.empty()) m["summaries"] = summaries_json(sc);
    m["wall_time_s"] = wall;
    m["figure_kind"] = e.figure_kind;
    if (!sc.warnings.empty()) m["warnings"] = sc.warnings;
    write_text_file(sc.dir / "manifest.json", m.dump(2) + "\n");
    for (const std::string& w : sc.warnings) ctx.warnings.push_back(e.name + ": " + w);

    // The preset's verdicts, as its CheckTable recorded them (the same cells as its checks.csv).
    int n = 0, nf = 0, nna = 0;
    for (const std::vector<std::string>& f : sc.check_rows) {
      summary.cell(e.name).cell(f[0]).cell(f[1]).cell(f[2]);
      if (f[3].empty()) summary.empty(); else summary.cell(std::stod(f[3]));
      summary.cell(f[4]).cell(f[5]).cell(f[6]).cell(f[7]).end_row();
      const std::string& kind = f[5];
      const std::string& pass = f[7];
      ++by_kind[kind][pass == "true" ? 0 : pass == "false" ? 1 : 2];
      ++n;
      nf += pass == "false" ? 1 : 0;
      nna += pass == "n/a" ? 1 : 0;
    }
    runs.cell(e.name).cell(e.figure_kind).cell(n).cell(nf).cell(wall).end_row();
    per[e.name] = {{"checks", n}, {"failed", nf}, {"not_applicable", nna}, {"wall_time_s", wall}};
    total += n;
    failed += nf;
    na += nna;
  }
  ctx.notes["presets"] = per;
  ctx.notes["checks"] = total;
  ctx.notes["checks_failed"] = failed;
  ctx.notes["checks_not_applicable"] = na;
  // The verdicts by what they compare against; the share whose reference does not share tokdyn's
  // code (paper, closed form, independent implementation).
  nlohmann::json kinds = nlohmann::json::object();
  int indep = 0;
  for (const auto& [k, c] : by_kind) {
    kinds[k] = {{"passed", c[0]}, {"failed", c[1]}, {"not_applicable", c[2]}};
    if (k == "paper" || k == "closed_form" || k == "independent") indep += c[0] + c[1] + c[2];
  }
  ctx.notes["checks_by_kind"] = kinds;
  ctx.notes["independent_reference_share"] = total > 0 ? static_cast<double>(indep) / total : 0.0;
  ctx.summary("presets", static_cast<long>(todo.size()));
  ctx.summary("checks", static_cast<long>(total));
  ctx.summary("checks_failed", static_cast<long>(failed));
  ctx.summary("checks_not_applicable", static_cast<long>(na));
  ctx.summary("independent_reference_share", total > 0 ? static_cast<double>(indep) / total : 0.0);
  if (na) ctx.warnings.push_back(fmt::format("{} of {} checks not applicable with these parameters: see checks.csv", na, total));
  if (failed) ctx.warnings.push_back(fmt::format("{} of {} checks failed: see checks.csv", failed, total));
}

OutputDecl coupling_all_outputs() {
  OutputDecl o;
  TableDecl joined = checks_table();
  joined.description = "one check of one coupling preset: every preset's checks.csv joined, the preset in the first column";
  joined.columns.insert(joined.columns.begin(), text("preset", "the coupling preset that made the check (its results are in the sub-folder of that name)"));
  o.tables = {joined,
              {"presets.csv", "one coupling preset that was run",
               {text("preset", "the preset's name (its results are in the sub-folder of that name)"),
                text("figure_kind", "its figure kind (python/tokdyn_plot)"), integer("checks", "checks it made"),
                integer("failed", "checks that failed"), real("wall_time_s", "its wall time", "s")}}};
  o.subruns = "<preset>/: each coupling preset's own results (its files as `tokdyn show PRESET` lists them, and its manifest.json)";
  o.summaries = {{"presets", "coupling presets run", "", ""},
                 {"checks", "checks made by all of them", "", ""},
                 {"checks_failed", "checks that failed", "", ""},
                 {"checks_not_applicable", "checks not applicable with these parameters", "", ""},
                 {"independent_reference_share", "share of the checks whose reference does not share tokdyn's code (paper, closed form, independent)", "", ""}};
  o.figures = {{"coupling_all.png", "the verdicts by preset and reference kind", ""}};
  return o;
}

const ExperimentRegistration reg_coupling_all{with_outputs(with_smoke(Experiment{
    "coupling-all",
    "Coupling paper, everything computable: every coupling-* preset at its defaults, one summary.csv of all checks and every figure",
    {p_string("presets", "all", "'all' (every coupling preset except coupling-e1 and coupling-e6, which train models: list them by name) or a comma-separated list of coupling presets to run")},
    run_all,
    "coupling-all",
    [](const Params& p) {
      // The presets run one after the other: the peak is the largest preset's, the work their sum.
      double bytes = 0;
      cost::Work w;
      const std::string want = p.get_string("presets");
      for (const Experiment* e : coupling_presets())
        if (e->estimate && (want == "all" ? !coupling_trains(e) : ("," + want + ",").find("," + e->name + ",") != std::string::npos)) {
          const ResourceEstimate s = e->estimate(resolve_params(*e, {}));
          bytes = std::max(bytes, s.bytes);
          w.add(s);
        }
      return w.estimate(bytes, "the largest coupling preset at its defaults (they run one after another)");
    }}, {{"presets", "coupling-euler,coupling-looped"}}), coupling_all_outputs())};

}  // namespace
}  // namespace tokdyn
