// tokdyn: the command line. Parses arguments, looks experiments up in the registry, validates
// parameters and runs; no science here. Bad input -> one line on stderr, exit code 2.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/build_info.hpp"
#include "tokdyn/error.hpp"
#include "tokdyn/experiment.hpp"
#include "tokdyn/interrupt.hpp"
#include "tokdyn/models/mamba2.hpp"
#include "tokdyn/experiments/model_registry.hpp"
#include "tokdyn/io/mamba2_checkpoint.hpp"
#include "tokdyn/output_folder.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;

namespace {


const Experiment& preset_or_throw(const std::string& name) {
  const Experiment* e = find_experiment(name);
  if (!e) throw InputError(fmt::format("unknown preset '{}' (see `tokdyn presets`)", name));
  return *e;
}

void list_presets() {
  const auto all = experiments();
  std::size_t w = 0;
  for (const Experiment* e : all) w = std::max(w, e->name.size());
  for (const Experiment* e : all) fmt::print("{:<{}}  {}\n", e->name, w, e->description);
}

/// The table of `tokdyn show` and `tokdyn models NAME`: key, type, default, range, help.
void print_params(const std::vector<ParamSpec>& params) {
  struct Row {
    std::string key, type, def, range, help;
  };
  std::vector<Row> rows;
  rows.push_back({"key", "type", "default", "range", "help"});
  for (const ParamSpec& s : params) {
    std::string help = s.help;
    for (const ParamCondition& c : s.only_when) {
      std::vector<std::string> vs;
      for (const std::string& v : c.values) vs.push_back(v.empty() ? "empty" : v);
      help += fmt::format(" [only when {} is {}{}]", c.key, c.negate ? "not " : "", fmt::join(vs, c.negate ? " nor " : " or "));
    }
    rows.push_back({s.key, type_name(s.type), value_text(s.def), range_text(s), help});
  }
  std::size_t wk = 0, wt = 0, wd = 0, wr = 0;
  for (const Row& r : rows) {
    wk = std::max(wk, r.key.size());
    wt = std::max(wt, r.type.size());
    wd = std::max(wd, r.def.size());
    wr = std::max(wr, r.range.size());
  }
  for (const Row& r : rows)
    fmt::print("  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", r.key, wk, r.type, wt, r.def, wd, r.range, wr, r.help);
}

void show_preset(const std::string& name, bool json) {
  const Experiment& e = preset_or_throw(name);
  if (json) {
    fmt::print("{}\n", schema_json(e).dump(2));
    return;
  }
  fmt::print("{}: {}\n\n", e.name, e.description);
  print_params(e.params);
}

/// `tokdyn models`: the model registry; with a name, that model's knobs.
void list_models(const std::string& name) {
  if (name.empty()) {
    std::size_t w = 0;
    for (const ModelDescriptor& m : model_registry()) w = std::max(w, m.name.size());
    for (const ModelDescriptor& m : model_registry())
      fmt::print("{:<{}}  {}{}\n", m.name, w, m.description,
                 m.taps.empty() ? std::string() : fmt::format(" [taps: state, {}]", fmt::join(m.taps, ", ")));
    fmt::print("\nThe knobs of one: tokdyn models NAME. Presets that take any model: depth-spectra (--set model=NAME).\n");
    return;
  }
  const ModelDescriptor* m = nullptr;
  for (const ModelDescriptor& x : model_registry())
    if (x.name == name) m = &x;
  if (!m) throw InputError(fmt::format("unknown model '{}'; expected one of {} (see `tokdyn models`)", name, fmt::join(model_names(), ", ")));
  fmt::print("{}: {}\ntaps: state{}{}\n\n", m->name, m->description, m->taps.empty() ? "" : ", ", fmt::join(m->taps, ", "));
  print_params(m->knobs);
}

/// A run target is a config file when it ends in .toml, or when it names no preset but an
/// existing path (a preset name always wins over a same-named file in the working directory).
bool is_config_file(const std::string& target) {
  if (target.size() > 5 && target.compare(target.size() - 5, 5, ".toml") == 0) return true;
  if (find_experiment(target)) return false;
  std::error_code ec;
  return fs::exists(fs::symlink_status(target, ec));
}

/// At most this many worker threads: more than a few per core only adds contention.
int max_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return 4 * static_cast<int>(hw ? hw : 1);
}

struct RunArgs {
  std::string target;
  std::string out;
  bool out_given = false;  ///< --out was on the command line (an empty value is refused)
  std::vector<std::string> sets;
  int threads = 1;
  bool overwrite = false;
  bool no_figures = false;
  bool quiet = false;
  bool inputs = false;
};

/// An integer option: one line naming the option and the expected range.
long parse_count(const char* option, const std::string& text, long lo, long hi) {
  long v = 0;
  const char* b = text.data();
  const char* e = text.data() + text.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || text.empty() || v < lo || v > hi)
    throw InputError(fmt::format("{}: expected an integer from {} to {}, got '{}'", option, lo, hi, text));
  return v;
}

int run_command(const RunArgs& a) {
  if (a.threads < 1 || a.threads > max_threads())
    throw InputError(fmt::format("--threads: expected an integer from 1 to {} (4 per core), got {}", max_threads(),
                                 a.threads));
  std::vector<std::pair<std::string, std::string>> sets;
  for (const std::string& s : a.sets) sets.push_back(parse_set(s));

  const Experiment* e = nullptr;
  std::optional<fs::path> config;
  if (is_config_file(a.target)) {
    config = fs::path(a.target);
    e = &experiment_of_toml(*config);
  } else {
    e = &preset_or_throw(a.target);
  }
  const Params p = resolve_params(*e, sets, config);
  if (a.out_given && a.out.empty())
    throw InputError("--out: an empty path; expected a results folder (or no --out for results/<preset>)");
  const fs::path out = a.out.empty() ? fs::path("results") / e->name : fs::path(a.out);

  const auto t0 = std::chrono::steady_clock::now();
  const RunOutcome r = run_experiment(*e, p, out, a.threads, !a.no_figures, !a.quiet, a.overwrite, a.inputs);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("wrote {} ({} files, {:.1f} s{})\n", message_line(out.string()), r.files, secs,
             r.replaced ? ", replaced the previous result" : "");
  if (!r.checks_line.empty()) fmt::print("{}\n", r.checks_line);
  if (!r.figure_error.empty()) {
    std::fflush(stdout);
    std::fprintf(stderr, "tokdyn: %s (the results are kept; rerun the figures with `%s`)\n",
                 message_line(r.figure_error).c_str(), "python3 python/plot.py KIND DIR");
    return exit_code::figures_failed;
  }
  return exit_code::ok;
}

}  // namespace

int report_exception(std::exception_ptr e) {
  const Failure f = failure_of(e);
  std::fflush(stdout);
  std::fprintf(stderr, "tokdyn: %s\n", f.line.c_str());
  return f.code;
}

int fail(int code, const char* kind, const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "tokdyn: %s%s\n", kind, message_line(what).c_str());
  return code;
}

int main(int argc, char** argv) {
  // First, before any thread exists: interrupts end runs cleanly (interrupt.hpp).
  interrupt::install();
  CLI::App app{"tokdyn: token dynamics in deep sequence models"};
  app.set_version_flag("--version", std::string(TOKDYN_VERSION));
  app.require_subcommand(0, 1);  // none: reported below, so that `tokdyn bogus` names "bogus"

  CLI::App* presets = app.add_subcommand("presets", "List the registered experiments (presets)");
  std::string model_name;
  CLI::App* models = app.add_subcommand("models", "List the registered models (with a name: its knobs)");
  models->add_option("model", model_name, "Model name");

  std::string show_name;
  CLI::App* show = app.add_subcommand("show", "List a preset's parameters: key, type, default, range, help");
  show->add_option("preset", show_name, "Preset name")->required();
  bool show_json = false;
  show->add_flag("--json", show_json, "The schema as JSON (types, bounds, list rules, conditions, smoke parameters)");

  RunArgs ra;
  const unsigned hw = std::thread::hardware_concurrency();
  ra.threads = hw ? static_cast<int>(hw) : 1;
  CLI::App* run = app.add_subcommand("run", "Run a preset or a TOML config file");
  run->add_option("target", ra.target, "Preset name or config file (.toml)")->required();
  run->add_option("--out,-o", ra.out, "Results directory (default: results/<preset>)");
  run->add_option("--set,-s", ra.sets, "Override a parameter: key=value (repeatable)")->allow_extra_args(false);
  std::string threads_text = std::to_string(ra.threads);
  run->add_option("--threads,-j", threads_text, "Worker threads, 1 to 4 per core (default: hardware concurrency)")
      ->capture_default_str();
  run->add_flag("--overwrite", ra.overwrite, "Replace the previous tokdyn result in the output directory");
  run->add_flag("--no-figures", ra.no_figures, "Do not draw figures");
  run->add_flag("--quiet,-q", ra.quiet, "No progress line");
  run->add_flag("--inputs", ra.inputs,
                "Write every randomly drawn input to inputs/ however large (by default only files up to 16 MiB)");

  std::string mc_size = "130m", mc_out;
  long mc_seed = 0;
  CLI::App* mk = app.add_subcommand("make-checkpoint",
                                    "Write a freshly initialised Mamba-2 checkpoint (config.json + model.safetensors) "
                                    "in the reference layout");
  mk->add_option("--size", mc_size, "tiny, 130m, 370m, 780m, 1.3b or 2.7b")->capture_default_str();
  std::string seed_text = "0";
  mk->add_option("--seed", seed_text, "Seed of the initialisation")->capture_default_str();
  mk->add_option("--out,-o", mc_out, "New directory to write")->required();

  // Extra arguments are reported by us, with their count and in order.
  for (CLI::App* sub : {presets, models, show, run, mk}) sub->allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(exit_code::bad_input, "error: ", std::string(e.what()) + " (see `tokdyn --help`)");
  }

  try {
    for (CLI::App* sub : {presets, models, show, run, mk}) {
      const std::vector<std::string> extra = sub->remaining();
      if (!sub->parsed() || extra.empty()) continue;
      std::string list;
      for (std::size_t i = 0; i < extra.size() && i < 5; ++i) list += fmt::format("{}'{}'", i ? ", " : "", extra[i]);
      if (extra.size() > 5) list += ", ...";
      const char* takes = sub == run ? "one target (a preset or a .toml file) and options"
                          : sub == show ? "one preset name"
                          : sub == models ? "at most one model name"
                          : sub == mk  ? "options only"
                                       : "no arguments";
      throw InputError(fmt::format("{}: {} unexpected argument{}: {}; it takes {} (see `tokdyn {} --help`)", sub->get_name(),
                                   extra.size(), extra.size() == 1 ? "" : "s", list, takes, sub->get_name()));
    }
    if (run->parsed()) ra.out_given = run->count("--out") > 0;
    if (run->parsed()) ra.threads = static_cast<int>(parse_count("--threads", threads_text, 1, max_threads()));
    if (mk->parsed()) mc_seed = parse_count("--seed", seed_text, 0, 9007199254740991L);
    if (app.got_subcommand("presets")) {
      list_presets();
    } else if (app.got_subcommand("models")) {
      list_models(model_name);
    } else if (app.got_subcommand("show")) {
      show_preset(show_name, show_json);
    } else if (app.got_subcommand("run")) {
      return run_command(ra);
    } else if (app.got_subcommand("make-checkpoint")) {
      if (mc_seed < 0) throw InputError(fmt::format("--seed: expected an integer >= 0, got {}", mc_seed));
      const auto t0 = std::chrono::steady_clock::now();
      const std::vector<std::string> sizes = mamba2::Config::sizes();
      if (std::find(sizes.begin(), sizes.end(), mc_size) == sizes.end())
        throw InputError(fmt::format("--size: expected one of {}, got '{}'", fmt::join(sizes, ", "), mc_size));
      const mamba2::Config cfg = mamba2::Config::named(mc_size);
      OutputFolder folder(mc_out, /*overwrite=*/false, "--out");
      const mamba2::Model m = mamba2::init_model(cfg, static_cast<std::uint64_t>(mc_seed));
      std::filesystem::remove(folder.tmp() / ".tokdyn-temporary");  // save() wants an empty folder
      mamba2::save(m, folder.tmp());
      folder.commit();
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fmt::print("wrote {} (mamba2 {}, seed {}, {} layers, d_model {}; {:.1f} s)\n", message_line(mc_out), mc_size,
                 mc_seed, m.cfg.n_layer, m.cfg.d_model, secs);
    } else {
      return fail(exit_code::bad_input, "error: ",
                  "a command is required: presets, models, show, run or make-checkpoint (see `tokdyn --help`)");
    }
  } catch (...) {
    if (interrupt::interrupting()) interrupt::wait_for_exit();  // the handler reports and exits
    return report_exception(std::current_exception());
  }
  return exit_code::ok;
}
