// Preset coupling-all: the computable content of "Attention is Just Another Name for Coupling?" in
// one command. Runs every coupling-paper preset of both parts (every registered preset named
// coupling-*) at its defaults, each into its own folder <preset>/ with its CSV files, manifest.json
// and figure, and joins their checks.csv tables into summary.csv (check, statement, quantity, value,
// expected, reference_kind, reference, pass; the check id is suffixed with the preset that made it) and presets.csv (one row
// per preset: checks, failed, wall time).
#include <algorithm>
#include <array>
#include <map>
#include <chrono>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokdyn/error.hpp"
#include "tokdyn/experiment.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/io/csv.hpp"

namespace tokdyn {
namespace {

namespace fs = std::filesystem;

/// The coupling presets coupling-all runs, in registry order (coupling-all itself excluded).
std::vector<const Experiment*> coupling_presets() {
  std::vector<const Experiment*> out;
  for (const Experiment* e : experiments())
    if (e->name.rfind("coupling-", 0) == 0 && e->name != "coupling-all") out.push_back(e);
  return out;
}

/// Splits one RFC-4180 CSV record (as CsvWriter writes it: fields quoted only when they contain a
/// comma, quote or line break; quotes doubled). Records of checks.csv never span lines.
std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> f(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') f.back() += '"', ++i;
      else if (ch == '"') quoted = false;
      else f.back() += ch;
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      f.emplace_back();
    } else {
      f.back() += ch;
    }
  }
  return f;
}

void run_all(const Params& p, RunContext& ctx) {
  const std::string want = p.get_string("presets");
  std::vector<const Experiment*> todo;
  const auto all = coupling_presets();
  if (want == "all") {
    todo = all;
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

  const std::vector<std::string> cols = CheckTable::columns();
  CsvWriter summary(ctx.dir / "summary.csv", cols);
  std::map<std::string, std::array<int, 3>> by_kind;  // reference kind -> passed, failed, not applicable
  CsvWriter runs(ctx.dir / "presets.csv", {"preset", "figure_kind", "checks", "failed", "wall_time_s"});
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
    if (ctx.progress) {
      const double a = static_cast<double>(i) / todo.size(), b = static_cast<double>(i + 1) / todo.size();
      sc.progress = [&ctx, a, b](double f) { ctx.progress(a + (b - a) * std::clamp(f, 0.0, 1.0)); };
    }
    const auto t0 = std::chrono::steady_clock::now();
    e.run(sp, sc);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The preset's own manifest (its figure module reads the notes), as run_experiment writes it.
    nlohmann::json m = nlohmann::json::object();
    m["preset"] = e.name;
    m["params"] = sp.to_json();
    m["notes"] = sc.notes;
    m["wall_time_s"] = wall;
    m["figure_kind"] = e.figure_kind;
    if (!sc.warnings.empty()) m["warnings"] = sc.warnings;
    {
      std::ofstream mf(sc.dir / "manifest.json");
      mf << m.dump(2) << "\n";
      if (!mf) throw std::runtime_error(fmt::format("cannot write {}", (sc.dir / "manifest.json").string()));
    }
    for (const std::string& w : sc.warnings) ctx.warnings.push_back(e.name + ": " + w);

    int n = 0, nf = 0, nna = 0;
    std::ifstream in(sc.dir / "checks.csv");
    std::string line;
    bool header = true;
    while (std::getline(in, line)) {
      if (header) {
        header = false;
        continue;
      }
      const auto f = split_csv_line(line);
      if (f.size() != cols.size())
        throw std::logic_error(fmt::format("{}/checks.csv: a row with {} fields (expected {})", e.name, f.size(), cols.size()));
      summary.cell(f[0] + " [" + e.name + "]");
      for (std::size_t c = 1; c < f.size(); ++c) summary.cell(f[c]);
      summary.end_row();
      const std::string& kind = f[5];
      const std::string& pass = f[7];
      if (std::find(kRefKindNames.begin(), kRefKindNames.end(), kind) == kRefKindNames.end())
        throw std::logic_error(fmt::format("{}/checks.csv: reference_kind = '{}'", e.name, kind));
      ++by_kind[kind][pass == "true" ? 0 : pass == "false" ? 1 : 2];
      ++n;
      nf += pass == "false" ? 1 : 0;
      nna += pass == "n/a" ? 1 : 0;
      if (pass != "true" && pass != "false" && pass != "n/a")
        throw std::logic_error(fmt::format("{}/checks.csv: pass = '{}' (expected true, false or n/a)", e.name, pass));
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
  if (na) ctx.warnings.push_back(fmt::format("{} of {} checks not applicable with these parameters: see summary.csv", na, total));
  if (failed) ctx.warnings.push_back(fmt::format("{} of {} checks failed: see summary.csv", failed, total));
}

const ExperimentRegistration reg_coupling_all{with_smoke(Experiment{
    "coupling-all",
    "Coupling paper, everything computable: every coupling-* preset at its defaults, one summary.csv of all checks and every figure",
    {p_string("presets", "all", "'all' or a comma-separated list of coupling presets to run")},
    run_all,
    "coupling-all",
    [](const Params&) {
      // The presets run one after the other: the peak is the largest preset's, the work their sum.
      ResourceEstimate r{0, 0, "the largest coupling preset at its defaults (they run one after another)"};
      for (const Experiment* e : coupling_presets())
        if (e->estimate) {
          const ResourceEstimate s = e->estimate(resolve_params(*e, {}));
          r.bytes = std::max(r.bytes, s.bytes);
          r.flops += s.flops;
        }
      return r;
    }}, {{"presets", "coupling-euler,coupling-looped"}})};

}  // namespace
}  // namespace tokdyn
