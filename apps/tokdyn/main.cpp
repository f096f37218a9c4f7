// tokdyn: the command line. Parses arguments, looks experiments up in the registry, validates
// parameters and runs; no science here. Bad input -> one line on stderr, exit code 2.
#include <algorithm>
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

#include "tokdyn/build_info.hpp"
#include "tokdyn/error.hpp"
#include "tokdyn/experiment.hpp"
#include "tokdyn/models/mamba2.hpp"

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

void show_preset(const std::string& name) {
  const Experiment& e = preset_or_throw(name);
  fmt::print("{}: {}\n\n", e.name, e.description);
  struct Row {
    std::string key, type, def, range, help;
  };
  std::vector<Row> rows;
  rows.push_back({"key", "type", "default", "range", "help"});
  for (const ParamSpec& s : e.params) rows.push_back({s.key, type_name(s.type), value_text(s.def), range_text(s), s.help});
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

bool is_config_file(const std::string& target) {
  if (target.size() > 5 && target.compare(target.size() - 5, 5, ".toml") == 0) return true;
  std::error_code ec;
  return fs::is_regular_file(target, ec);
}

std::size_t count_files(const fs::path& dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file()) ++n;
  return n;
}

struct RunArgs {
  std::string target;
  std::string out;
  std::vector<std::string> sets;
  int threads = 1;
  bool no_figures = false;
  bool quiet = false;
};

void run_command(const RunArgs& a) {
  if (a.threads < 1) throw InputError(fmt::format("--threads: expected an integer >= 1, got {}", a.threads));
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
  const fs::path out = a.out.empty() ? fs::path("results") / e->name : fs::path(a.out);

  const auto t0 = std::chrono::steady_clock::now();
  run_experiment(*e, p, out, a.threads, !a.no_figures, !a.quiet);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("wrote {} ({} files, {:.1f} s)\n", out.string(), count_files(out), secs);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokdyn: token dynamics in deep sequence models"};
  app.set_version_flag("--version", std::string(TOKDYN_VERSION));
  app.require_subcommand(0, 1);  // none: reported below, so that `tokdyn bogus` names "bogus"

  app.add_subcommand("presets", "List the registered experiments (presets)");

  std::string show_name;
  CLI::App* show = app.add_subcommand("show", "List a preset's parameters: key, type, default, range, help");
  show->add_option("preset", show_name, "Preset name")->required();

  RunArgs ra;
  const unsigned hw = std::thread::hardware_concurrency();
  ra.threads = hw ? static_cast<int>(hw) : 1;
  CLI::App* run = app.add_subcommand("run", "Run a preset or a TOML config file");
  run->add_option("target", ra.target, "Preset name or config file (.toml)")->required();
  run->add_option("--out,-o", ra.out, "Results directory (default: results/<preset>)");
  run->add_option("--set,-s", ra.sets, "Override a parameter: key=value (repeatable)")->allow_extra_args(false);
  run->add_option("--threads,-j", ra.threads, "Worker threads (default: hardware concurrency)")->capture_default_str();
  run->add_flag("--no-figures", ra.no_figures, "Do not draw figures");
  run->add_flag("--quiet,-q", ra.quiet, "No progress line");

  std::string mc_size = "130m", mc_out;
  long mc_seed = 0;
  CLI::App* mk = app.add_subcommand("make-checkpoint",
                                    "Write a freshly initialised Mamba-2 checkpoint (config.json + model.safetensors) "
                                    "in the reference layout");
  mk->add_option("--size", mc_size, "tiny, 130m, 370m, 780m, 1.3b or 2.7b")->capture_default_str();
  mk->add_option("--seed", mc_seed, "Seed of the initialisation")->capture_default_str();
  mk->add_option("--out,-o", mc_out, "New directory to write")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tokdyn: error: %s (see `tokdyn --help`)\n", one_line(e.what()).c_str());
    return 2;
  }

  try {
    if (app.got_subcommand("presets")) {
      list_presets();
    } else if (app.got_subcommand("show")) {
      show_preset(show_name);
    } else if (app.got_subcommand("run")) {
      run_command(ra);
    } else if (app.got_subcommand("make-checkpoint")) {
      if (mc_seed < 0) throw InputError(fmt::format("--seed: expected an integer >= 0, got {}", mc_seed));
      const auto t0 = std::chrono::steady_clock::now();
      const mamba2::Model m = mamba2::init_model(mamba2::Config::named(mc_size), static_cast<std::uint64_t>(mc_seed));
      mamba2::save(m, mc_out);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fmt::print("wrote {} (mamba2 {}, seed {}, {} layers, d_model {}; {:.1f} s)\n", mc_out, mc_size, mc_seed, m.cfg.n_layer,
                 m.cfg.d_model, secs);
    } else {
      std::fprintf(stderr, "tokdyn: error: a command is required: presets, show, run or make-checkpoint (see `tokdyn --help`)\n");
      return 2;
    }
  } catch (const InputError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tokdyn: error: %s\n", one_line(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tokdyn: internal error: %s\n", one_line(e.what()).c_str());
    return 1;
  }
  return 0;
}
