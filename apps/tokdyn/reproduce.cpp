// `tokdyn reproduce` (reproduce.hpp): every preset of a paper, one folder, one report.
#include "reproduce.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <cmath>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report.hpp"
#include "tokdyn/build_info.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/host.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/output_folder.hpp"

namespace tokdyn::reproduce_cli {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

using Sets = std::vector<std::pair<std::string, std::string>>;

/// One preset of a paper and the sizes --quick runs it at (reduced, still through every check).
struct Step {
  const char* preset;
  Sets quick;
};

struct Paper {
  const char* name;
  const char* title;
  std::vector<Step> steps;
};

// The quick sizes: fewer runs, tokens, samples or grid points, never a smaller depth, model or time
// span than the checks are stated at (a check the reduced size cannot decide would say n/a and why),
// so --quick decides the same rows as the full run; `all` takes about 1.5 minutes on 2 cores. The
// coupling presets run at their defaults (seconds) except coupling-data's Monte Carlo.
const std::vector<Paper>& paper_table() {
  static const std::vector<Paper> t = {
      {"attention-within",
       "The Attention Within (selective SSMs / Mamba-2 drive tokens to consensus)",
       {{"ssm-lemma-silu-bias", {{"draws", "20000"}}},
        {"ssm-theorem-pe", {{"runs", "4"}}},
        {"ssm-theorem-pd", {{"runs", "8"}, {"doa_runs", "40"}}},
        {"ssm-random-silu", {{"runs", "4"}}},
        {"mamba2-fig1", {{"runs", "2"}, {"tokens", "16"}}},
        {"mamba2-fig2", {{"runs", "2"}, {"tokens", "16"}}},
        {"mamba2-fig3", {{"runs", "2"}, {"tokens", "16"}}},
        {"mamba2-fig4", {{"runs", "2"}, {"tokens", "16"}}},
        {"mamba2-fig5", {{"runs", "2"}, {"tokens", "16"}}},
        {"mamba2-fig6", {{"runs", "2"}, {"tokens", "16"}}}}},
      {"rope",
       "Self-Attention Dynamics with RoPE (consensus spectra, twisted states, contraction rates)",
       {{"rope-fig1a", {}},
        {"rope-fig1b", {{"points", "41"}}},
        {"rope-fig1c", {{"points", "41"}}},
        {"rope-fig2a", {{"samples", "101"}}},
        {"rope-fig2b", {}},
        {"rope-fig2c", {{"samples", "51"}}},
        {"rope-fig3a", {{"points", "61"}}},
        {"rope-fig3b", {}},
        {"rope-fig3c", {}},
        {"rope-fig4a", {{"points", "61"}}},
        {"rope-fig4b", {{"ns", "32,64"}, {"points", "11"}}},
        {"rope-fig4c", {}},
        {"rope-fig4d", {}},
        {"rope-table2", {{"fd_max_n", "64"}}}}},
      {"coupling",
       "Attention is Just Another Name for Coupling? (depth flow, cocycles, dichotomy spectra)",
       {{"coupling-frozen-kernel", {}},
        {"coupling-bounded-step", {}},
        {"coupling-euler", {}},
        {"coupling-looped", {}},
        {"cocycle-spectra", {}},
        {"coupling-dichotomy", {}},
        {"coupling-duality", {}},
        {"coupling-thm9", {}},
        {"coupling-fast-slow", {}},
        {"coupling-gate-intervention", {}},
        {"coupling-green", {}},
        {"coupling-margin", {}},
        {"coupling-trajectory", {}},
        {"coupling-data", {{"sequences", "20000"}, {"suff_sequences", "4000"}}},
        {"coupling-rank-collapse", {}},
        {"coupling-qk-specificity", {}},
        {"coupling-e7", {}},
        {"depth-spectra", {{"depth", "60"}, {"burn_in", "10"}, {"k", "4"}}}}},
  };
  return t;
}

/// The paper's presets that train models (coupling-e1, coupling-e6: minutes to an hour) are listed
/// by `--presets` only, as in coupling-all.
const std::array<const char*, 2> kTraining = {"coupling-e1", "coupling-e6"};

std::string quote_arg(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,:/+") == std::string::npos)
    return s;
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string command_of(const std::string& preset, const Sets& sets) {
  std::string c = "tokdyn run " + preset;
  for (const auto& [k, v] : sets) c += " --set " + quote_arg(k + "=" + v);
  return c;
}

/// A paper value as one number ("12", "5.6e-16", "≈ 0.88", "~35"), or nullopt ("> 14", "none", a band).
std::optional<double> single_number(std::string s) {
  for (const char* p : {"\u2248", "~", "="}) {
    const std::string pre(p);
    if (s.rfind(pre, 0) == 0) s = s.substr(pre.size());
  }
  const auto b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  if (b == std::string::npos) return std::nullopt;
  s = s.substr(b, e - b + 1);
  try {
    std::size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

/// The number a check compares against, when there is one: the reference itself for a paper value
/// printed as one number, or the X of a criterion "X within TOL".
std::optional<double> reference_number(const std::string& kind, const std::string& reference, const std::string& expected) {
  if (kind == "paper")
    if (auto v = single_number(reference)) return v;
  const auto w = expected.find(" within ");
  if (w != std::string::npos && w > 0) return single_number(expected.substr(0, w));
  return std::nullopt;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) out.push_back(x);
  return out;
}

std::vector<std::string> files_below(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_regular_file(ec) && name != ".tokdyn-temporary" && name.find(".tokdyn-lock") == std::string::npos)
      out.push_back(it->path().lexically_relative(dir).generic_string());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::remove(out.begin(), out.end(), "manifest.json"), out.end());
  return out;
}

/// The columns of reproduction.csv.
const TableDecl& reproduction_table() {
  static const TableDecl t{
      "reproduction.csv",
      "one number the paper prints beside tokdyn's, or one verdict row of a preset's checks.csv",
      {text("paper", "the paper (attention-within, rope, coupling)"), text("preset", "the preset that computed it"),
       category("source", "where the row comes from", {{"check", "a row of the preset's checks.csv (a criterion and a verdict)"},
                                                       {"summary", "a summary with the paper's value beside it (summary.csv), no criterion"}}),
       text("id", "the check's id, or the summary's name"), text("statement", "the paper's claim (checks) or what the number is (summaries)"),
       text("reference", "the paper's value as the paper prints it (summaries), or what the check compares against, named (checks)"),
       real("tokdyn_value", "tokdyn's value").may_be_empty("not computable in this run"),
       real("difference", "tokdyn's value minus the reference: the paper's number, or the X of a criterion 'X within TOL'")
           .may_be_empty("the reference is not one number (a band, a bound, a trend)"),
       text("expected", "the criterion with its tolerance (checks; empty for summaries)"),
       text("reference_kind", "what the value is compared against (experiments/checks.hpp; 'paper' for summaries)"),
       category("verdict", "the outcome", {{"pass", "the criterion holds"}, {"fail", "it does not"},
                                           {"n/a", "not applicable in this run, or undecided"},
                                           {"side-by-side", "a summary shown beside the paper's value, without a criterion"}}),
       text("command", "the command that reruns this preset alone at these sizes")}};
  return t;
}

std::vector<std::vector<std::string>> read_if_present(const fs::path& f) {
  std::error_code ec;
  return fs::is_regular_file(f, ec) ? read_csv(f, f.filename().string()) : std::vector<std::vector<std::string>>{};
}

struct PresetResult {
  std::string name;
  int checks = 0, failed = 0, na = 0, paper_numbers = 0;
  double wall = 0;
};

}  // namespace

std::vector<std::string> papers() {
  std::vector<std::string> out;
  for (const Paper& p : paper_table()) out.push_back(p.name);
  out.push_back("all");
  return out;
}

int run(const Options& o) {
  std::vector<const Paper*> chosen;
  for (const Paper& p : paper_table())
    if (o.paper == "all" || o.paper == p.name) chosen.push_back(&p);
  if (chosen.empty())
    throw InputError(fmt::format("reproduce: unknown paper '{}'; expected one of {}", o.paper, fmt::join(papers(), ", ")));
  if (o.out_given && o.out.empty()) throw InputError("--out: an empty path; expected a folder for the reproduction");
  if (o.threads < 1) throw InputError(fmt::format("--threads: expected an integer >= 1, got {}", o.threads));

  // The steps: (paper, preset, sets); --presets narrows them (and is how the training presets run).
  struct Todo {
    const Paper* paper;
    const Experiment* e;
    Sets sets;
  };
  std::vector<Todo> todo;
  const std::vector<std::string> only = o.presets.empty() ? std::vector<std::string>{} : split_list(o.presets);
  std::set<std::string> found;
  for (const Paper* p : chosen) {
    std::vector<Step> steps = p->steps;
    if (std::string(p->name) == "coupling")
      for (const char* t : kTraining) steps.push_back({t, {}});
    for (const Step& s : steps) {
      const bool trains = std::find_if(kTraining.begin(), kTraining.end(), [&](const char* t) { return s.preset == std::string(t); }) != kTraining.end();
      const bool listed = std::find(only.begin(), only.end(), s.preset) != only.end();
      if (only.empty() ? trains : !listed) continue;
      const Experiment* e = find_experiment(s.preset);
      if (e == nullptr) throw std::logic_error(fmt::format("reproduce: preset {} is not registered", s.preset));
      Sets sets = o.quick ? s.quick : Sets{};
      if (o.quick && trains) sets = e->smoke;  // the training presets' quick size is their smoke size
      todo.push_back({p, e, sets});
      found.insert(s.preset);
    }
  }
  for (const std::string& n : only)
    if (!found.count(n)) {
      std::vector<std::string> names;
      for (const Paper* p : chosen)
        for (const Step& s : p->steps) names.push_back(s.preset);
      throw InputError(fmt::format("--presets: '{}' is not a preset of {}; expected a comma-separated list of: {}{}", n, o.paper,
                                   fmt::join(names, ", "), o.paper == "coupling" || o.paper == "all" ? ", coupling-e1, coupling-e6" : ""));
    }
  // Every preset's parameters before anything runs: a bad one is refused with nothing written.
  std::vector<Params> params;
  for (const Todo& t : todo) params.push_back(resolve_params(*t.e, t.sets));
  for (std::size_t i = 0; i < todo.size(); ++i) check_resources(*todo[i].e, params[i], o.threads, /*announce=*/false);

  const fs::path out = o.out.empty() ? fs::path("results") / ("reproduce-" + o.paper + (o.quick ? "-quick" : "")) : fs::path(o.out);
  OutputFolder folder(out, o.overwrite, "--out");
  const fs::path tmp = folder.tmp();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string started = utc_now_iso8601();

  auto rows_ptr = std::make_unique<CsvWriter>(tmp, reproduction_table());
  CsvWriter& rows = *rows_ptr;
  std::map<std::string, std::array<int, 4>> by_kind;  // kind -> pass, fail, n/a, side-by-side
  std::vector<PresetResult> results;
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const Todo& t = todo[i];
    const std::string cmd = command_of(t.e->name, t.sets);
    std::fprintf(stderr, "tokdyn reproduce %s: [%zu/%zu] %s\n", o.paper.c_str(), i + 1, todo.size(), cmd.c_str());
    std::fflush(stderr);
    const fs::path dir = tmp / t.e->name;
    const auto s0 = std::chrono::steady_clock::now();
    const RunOutcome r = run_experiment(*t.e, params[i], dir, o.threads, !o.no_figures, /*show_progress=*/true);
    PresetResult pr{t.e->name};
    pr.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    if (!r.figure_error.empty()) throw std::runtime_error(fmt::format("{}: figures failed: {}", t.e->name, r.figure_error));

    // Summaries with the paper's value beside them.
    const std::map<std::string, std::string> meaning = [&] {
      std::map<std::string, std::string> m;
      for (const SummaryDecl& s : t.e->outputs.summaries) m[s.name] = s.meaning;
      return m;
    }();
    const auto summary = read_if_present(dir / "summary.csv");
    for (std::size_t k = 1; k < summary.size(); ++k) {
      const auto& row = summary[k];
      if (row.size() < 3 || row[2].empty()) continue;
      rows.cell(t.paper->name).cell(t.e->name).cell(std::string("summary")).cell(row[0]);
      const auto it = meaning.find(row[0]);
      rows.cell(it == meaning.end() ? std::string() : it->second).cell(row[2]);
      const double v = row[1].empty() ? NAN : std::stod(row[1]);
      if (std::isfinite(v)) rows.cell(v); else rows.empty();
      const auto pv = single_number(row[2]);
      if (pv && std::isfinite(v)) rows.cell(v - *pv); else rows.empty();
      rows.cell(std::string()).cell(std::string("paper")).cell(std::string("side-by-side")).cell(cmd).end_row();
      ++by_kind["paper"][3];
      ++pr.paper_numbers;
    }
    // Every verdict row.
    const auto checks = read_if_present(dir / "checks.csv");
    for (std::size_t k = 1; k < checks.size(); ++k) {
      const auto& c = checks[k];  // check, statement, quantity, value, expected, reference_kind, reference, pass
      if (c.size() < 8) throw std::logic_error(fmt::format("{}: checks.csv row {} has {} cells", t.e->name, k, c.size()));
      const std::string verdict = c[7] == "true" ? "pass" : c[7] == "false" ? "fail" : "n/a";
      rows.cell(t.paper->name).cell(t.e->name).cell(std::string("check")).cell(c[0]).cell(c[1]).cell(c[6]);
      const double v = c[3].empty() ? NAN : std::stod(c[3]);
      if (std::isfinite(v)) rows.cell(v); else rows.empty();
      const auto pv = reference_number(c[5], c[6], c[4]);
      if (pv && std::isfinite(v)) rows.cell(v - *pv); else rows.empty();
      rows.cell(c[4]).cell(c[5]).cell(verdict).cell(cmd).end_row();
      ++by_kind[c[5]][verdict == "pass" ? 0 : verdict == "fail" ? 1 : 2];
      ++pr.checks;
      pr.failed += verdict == "fail";
      pr.na += verdict == "n/a";
      pr.paper_numbers += c[5] == "paper";
    }
    results.push_back(pr);
  }
  rows_ptr.reset();  // reproduction.csv complete

  TableDecl presets_decl{"presets.csv", "one preset the reproduction ran",
                         {text("paper", "the paper"), text("preset", "the preset (its results are in the sub-folder of that name)"),
                          integer("checks", "verdict rows it wrote"), integer("failed", "of them failed"),
                          integer("not_applicable", "of them n/a or undecided"), integer("paper_numbers", "rows beside a number the paper prints"),
                          real("wall_time_s", "its wall time, figures included", "s"), text("command", "the command that reruns it alone")}};
  {
    CsvWriter pw(tmp, presets_decl);
    for (std::size_t i = 0; i < results.size(); ++i)
      pw.cell(todo[i].paper->name).cell(results[i].name).cell(results[i].checks).cell(results[i].failed).cell(results[i].na)
          .cell(results[i].paper_numbers).cell(results[i].wall).cell(command_of(todo[i].e->name, todo[i].sets)).end_row();
  }

  json m = {{"kind", "tokdyn-reproduction"}, {"preset", "reproduce"}, {"paper", o.paper}, {"quick", o.quick},
            {"version", TOKDYN_VERSION}, {"started_utc", started}, {"threads", o.threads}, {"hostname", host_name()}};
  json kinds = json::object();
  int total = 0, failed = 0, na = 0, side = 0;
  for (const auto& [k, c] : by_kind) {
    kinds[k] = {{"passed", c[0]}, {"failed", c[1]}, {"not_applicable", c[2]}, {"side_by_side", c[3]}};
    total += c[0] + c[1] + c[2];
    failed += c[1];
    na += c[2];
    side += c[3];
  }
  m["checks_by_kind"] = kinds;
  m["checks"] = total;
  m["checks_failed"] = failed;
  m["checks_not_applicable"] = na;
  m["paper_numbers_side_by_side"] = side;
  json pj = json::array();
  for (std::size_t i = 0; i < results.size(); ++i)
    pj.push_back({{"paper", todo[i].paper->name}, {"preset", results[i].name}, {"checks", results[i].checks}, {"failed", results[i].failed},
                  {"not_applicable", results[i].na}, {"paper_numbers", results[i].paper_numbers}, {"wall_time_s", results[i].wall},
                  {"command", command_of(todo[i].e->name, todo[i].sets)}});
  m["presets"] = pj;
  json titles = json::object();
  for (const Paper* p : chosen) titles[p->name] = p->title;
  m["papers"] = titles;
  m["files"] = files_below(tmp);
  m["wall_time_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();  // the runs (the report follows)
  write_text_file(tmp / "manifest.json", m.dump(2) + "\n");

  // The report, inside the reproduction's folder (its links to the results are relative).
  report_cli::Options ro;
  ro.dirs = {tmp.string()};
  ro.out = (tmp / "report").string();
  ro.out_given = true;
  ro.title = fmt::format("tokdyn reproduce {}{}", o.paper, o.quick ? " --quick" : "");
  ro.quiet = true;
  report_cli::run(ro);
  m["wall_time_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m["files"] = files_below(tmp);
  write_text_file(tmp / "manifest.json", m.dump(2) + "\n");
  folder.commit();

  fmt::print("wrote {} ({} presets, {:.1f} s)\n", message_line(out.string()), results.size(),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::string kinds_text;
  for (const auto& [k, c] : by_kind)
    if (c[0] + c[1] + c[2] > 0) kinds_text += fmt::format("{}{} {}/{}", kinds_text.empty() ? "" : ", ", k, c[0], c[0] + c[1] + c[2]);
  fmt::print("checks: {} passed, {} failed, {} n/a; by reference (passed/made): {}; paper numbers side by side: {}\n", total - failed - na,
             failed, na, kinds_text, side);
  fmt::print("report: {}\n", message_line((out / "report" / "index.html").string()));
  return 0;
}

}  // namespace tokdyn::reproduce_cli
