#pragma once
// Experiments: named, fully parameterised reproductions. Each declares its parameters (name,
// type, default, range, help); the CLI and TOML configs are validated against that schema
// before anything runs. An experiment writes into a RunContext's temporary directory; the
// directory is renamed to its final place only when the run (and its figures) completed.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/outputs.hpp"

namespace tokdyn {

enum class ParamType { Int, Double, Bool, String, IntList, DoubleList };

using ParamValue = std::variant<long, double, bool, std::string, std::vector<long>, std::vector<double>>;

/// What a string parameter names on disk: nothing, a file, or a directory. A path parameter given
/// explicitly (non-empty) is checked when the parameters are resolved: it must exist and be of that
/// kind, whatever the other options are (a path that does not apply is refused, see `only_when`).
enum class PathKind { None, File, Directory };

/// A parameter applies only when another parameter's value (as `value_text` writes it) is one of
/// `values` (or, with `negate`, is none of them). Setting it explicitly otherwise is bad input.
struct ParamCondition {
  std::string key;
  std::vector<std::string> values;
  bool negate = false;
};

struct ParamSpec {
  std::string key;
  ParamType type;
  ParamValue def;
  std::string help;
  std::optional<double> min;            ///< numeric lower bound (Int/Double; each entry of a list)
  std::optional<double> max;            ///< numeric upper bound
  bool min_exclusive = false;           ///< true: value must be > min (e.g. tau > 0)
  std::vector<std::string> choices;     ///< allowed values for String (empty: any)
  // Lists (IntList, DoubleList): how many entries, and whether repeats / any order make sense.
  std::size_t min_items = 1;            ///< fewest entries (0: an empty list is meaningful, see help)
  std::size_t max_items = 100000;       ///< most entries
  bool distinct = false;                ///< true: a repeated entry is refused
  bool ascending = false;               ///< true: entries must be strictly increasing (implies distinct)
  bool max_exclusive = false;           ///< true: value must be < max
  PathKind path = PathKind::None;       ///< String: names a file or directory
  std::vector<ParamCondition> only_when;  ///< the parameter applies only when all of these hold
  /// Defaults that depend on another parameter: when the key is not set, the first entry whose
  /// condition holds gives its value (else `def`). A knob several models share with their own
  /// defaults (size: mamba2 130m, gpt2 tiny) is one spec with one entry per other default.
  std::vector<std::pair<ParamCondition, ParamValue>> def_when;

  // Fluent refinements, e.g. p_double_list(...).distinct_entries().when("psi", {"affine"}).
  ParamSpec&& items(std::size_t lo, std::size_t hi = 100000) && { min_items = lo; max_items = hi; return std::move(*this); }
  ParamSpec&& distinct_entries() && { distinct = true; return std::move(*this); }
  ParamSpec&& increasing() && { ascending = true; distinct = true; return std::move(*this); }
  ParamSpec&& below_max() && { max_exclusive = true; return std::move(*this); }
  ParamSpec&& file() && { path = PathKind::File; return std::move(*this); }
  ParamSpec&& directory() && { path = PathKind::Directory; return std::move(*this); }
  /// Applies only when `key` is one of `values`.
  ParamSpec&& when(std::string k, std::vector<std::string> values) && {
    only_when.push_back({std::move(k), std::move(values), false});
    return std::move(*this);
  }
  /// Applies only when `key` is none of `values` (e.g. when_not("weights", {""}): only with a file).
  ParamSpec&& when_not(std::string k, std::vector<std::string> values) && {
    only_when.push_back({std::move(k), std::move(values), true});
    return std::move(*this);
  }
};

/// Upper bound of seed parameters (2^53 - 1: every seed is exact in the schema's double bounds).
inline constexpr double kMaxSeed = 9007199254740991.0;
/// Most entries an int-list parameter takes.
inline constexpr std::size_t kMaxListLength = 100000;

/// Convenience constructors for schemas. Every integer parameter declares its upper bound (the
/// registry refuses a schema without one), so no value is ever narrowed or overflows.
ParamSpec p_int(std::string key, long def, std::string help, std::optional<double> min = {},
                std::optional<double> max = {});
ParamSpec p_double(std::string key, double def, std::string help, std::optional<double> min = {},
                   std::optional<double> max = {}, bool min_exclusive = false);
ParamSpec p_bool(std::string key, bool def, std::string help);
ParamSpec p_string(std::string key, std::string def, std::string help,
                   std::vector<std::string> choices = {});
/// An int list; an empty default means the empty list is meaningful (min_items 0), else >= 1 entry.
ParamSpec p_int_list(std::string key, std::vector<long> def, std::string help,
                     std::optional<double> min = {}, std::optional<double> max = {});
/// A list of finite doubles (`--set k=0.2,0.1,-0.3`, a TOML array of numbers, or a TOML string
/// with the same comma-separated text); same rules as p_int_list.
ParamSpec p_double_list(std::string key, std::vector<double> def, std::string help,
                        std::optional<double> min = {}, std::optional<double> max = {}, bool min_exclusive = false);

/// Validated parameter values of one run (every key of the schema is present).
class Params {
 public:
  long get_int(const std::string& key) const;
  double get_double(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const std::vector<long>& get_int_list(const std::string& key) const;
  const std::vector<double>& get_double_list(const std::string& key) const;
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  /// True when the value came from a config file or `--set`, not from the schema's default.
  bool is_explicit(const std::string& key) const { return explicit_.count(key) != 0; }
  nlohmann::json to_json() const;
  std::map<std::string, ParamValue> values_;
  std::set<std::string> explicit_;  ///< keys set by a config file or `--set`
  std::string config_file;          ///< the TOML file the values came from (empty: none)
};

/// What an experiment writes into, and how it reports.
struct RunContext {
  std::filesystem::path dir;        ///< temporary results directory (exists, empty at start)
  int threads = 1;                  ///< worker threads for this run
  bool figures = true;              ///< figures will be drawn after the run (see Experiment::figure_kind)
  bool write_inputs = false;        ///< write every drawn input, however large (--inputs; runtime/inputs.hpp)
  ProgressFn progress;              ///< fraction done in [0, 1]; may be empty
  nlohmann::json notes = nlohmann::json::object();  ///< extra facts for manifest.json
  /// Things the user must know about how the run was done (e.g. a step refined for stability):
  /// written to manifest.json ("warnings") and printed on stderr after the run.
  std::vector<std::string> warnings;
  /// What the running preset declares it writes (set by run_experiment; see outputs.hpp).
  const OutputDecl* outputs = nullptr;
  std::string preset;
  /// Opens the declared table `file` (its columns and checks come from the declaration);
  /// std::logic_error when the preset does not declare it.
  CsvWriter table(const std::string& file) const;
  /// A scalar summary (declared in the preset's outputs): a row of summary.csv, written with
  /// manifest.json after the run. `paper`: the paper's value, as the paper prints it.
  void summary(const std::string& name, double value, const std::string& paper = "");
  void summary(const std::string& name, long value, const std::string& paper = "");
  void summary(const std::string& name, int value, const std::string& paper = "") { summary(name, static_cast<long>(value), paper); }
  void summary(const std::string& name, std::size_t value, const std::string& paper = "") { summary(name, static_cast<long>(value), paper); }
  struct SummaryEntry {
    std::string name;
    double value = 0;
    long integer = 0;
    bool is_integer = false;
    std::string paper;
  };
  std::vector<SummaryEntry> summaries;
  /// Where the run's time goes: wall seconds per named phase, in the order each phase first ran
  /// (a phase timed twice adds up). run_experiment writes them to manifest.json as
  /// notes.phase_seconds, with "other" (the rest of the run: set-up, output files) and "figures".
  std::vector<std::pair<std::string, double>> phase_seconds;
  /// Times one phase: `{ auto t = ctx.phase("qr"); ... }` adds the scope's wall time to
  /// phase_seconds["qr"] when it ends (or earlier, at stop()).
  class PhaseTimer {
   public:
    PhaseTimer(RunContext& ctx, std::string name) : ctx_(&ctx), name_(std::move(name)), t0_(std::chrono::steady_clock::now()) {}
    PhaseTimer(const PhaseTimer&) = delete;
    PhaseTimer& operator=(const PhaseTimer&) = delete;
    ~PhaseTimer() { stop(); }
    /// Ends the phase now; returns its seconds (0 when already stopped).
    double stop();

   private:
    RunContext* ctx_;
    std::string name_;
    std::chrono::steady_clock::time_point t0_;
  };
  [[nodiscard]] PhaseTimer phase(std::string name) { return PhaseTimer(*this, std::move(name)); }
  /// Adds `seconds` to phase `name` (for phases timed elsewhere, e.g. inside a parallel loop).
  void add_phase(const std::string& name, double seconds);
  /// The verdict rows of checks.csv (experiments/checks.hpp CheckTable::report), for callers that
  /// run presets themselves (coupling-all); empty when the preset makes no checks.
  std::vector<std::vector<std::string>> check_rows;
};

/// What a run will need, estimated from its parameters before anything is allocated.
struct ResourceEstimate {
  double bytes = 0;    ///< peak memory (state, weights, buffers)
  double flops = 0;    ///< arithmetic work, counted from the dominant loops (0: unknown / negligible)
  std::string what;    ///< what dominates, e.g. "runs x tokens x d_model floats per variant"
  /// Wall time on one thread when the preset knows the rates of its kinds of work (small-matrix
  /// loops run far below BLAS-3 speed; runtime/estimate.hpp Work); 0: flops at a conservative
  /// BLAS-3 rate (estimate.hpp kRateDefault).
  double seconds = 0;
  /// The share of `seconds` that the run's threads divide (1: all; 0: a sequential recurrence).
  double parallel = 1;
};

struct Experiment {
  std::string name;         ///< preset name, e.g. "ssm-random-silu"
  std::string description;  ///< one line for `tokdyn presets`
  std::vector<ParamSpec> params;
  /// Runs the experiment: writes CSV files into ctx.dir.
  /// Throws InputError for bad parameter combinations the schema cannot express.
  std::function<void(const Params&, RunContext&)> run;
  /// Figure kind for python/plot.py; drawn by run_experiment after manifest.json is written
  /// (unless figures are off). Empty: the experiment has no figures.
  std::string figure_kind = {};
  /// Peak memory and work of a run with these parameters (checked against the machine before the
  /// run starts). Empty: the experiment's size is bounded by its schema alone.
  std::function<ResourceEstimate(const Params&)> estimate = {};
  /// The parameters of a smoke run: the smallest run that still goes through the preset's code
  /// (seconds at most). Used by the schema-driven edge test (tests/scripts/param_edges.py) as the
  /// base of every probe, and listed by `tokdyn show PRESET --json`.
  std::vector<std::pair<std::string, std::string>> smoke = {};
  /// Result columns that may hold a non-finite number, and why ({"file.csv:column", "meaning"}),
  /// e.g. an exponent of -inf for an exactly singular layer. Every other CSV cell is finite or
  /// empty (empty: not applicable, documented with the column); the edge test holds presets to it.
  std::vector<std::pair<std::string, std::string>> nonfinite_ok = {};
  /// What the preset writes: tables, arrays, scalar summaries, figures (outputs.hpp).
  OutputDecl outputs = {};
  /// Keys the preset knew under another name, {old, new} (e.g. {"T", "tokens"}): an old name given
  /// with `--set`, in a TOML file or as a sweep axis is refused with one line naming the new one
  /// ("parameter 'T' was renamed 'tokens' (--set tokens=8)"), never taken as an unknown key without
  /// a hint. `new` is a key of params; `old` is none (the registry refuses either mistake).
  std::vector<std::pair<std::string, std::string>> renamed = {};
};

/// `e` with its output declaration.
inline Experiment with_outputs(Experiment e, OutputDecl o) {
  e.outputs = std::move(o);
  return e;
}

/// `e` with the keys it renamed, {old, new} (see Experiment::renamed).
inline Experiment with_renamed(Experiment e, std::vector<std::pair<std::string, std::string>> renamed) {
  e.renamed = std::move(renamed);
  return e;
}

/// The new name of `key` when preset `e` renamed it (Experiment::renamed), else nullopt.
std::optional<std::string> renamed_to(const Experiment& e, const std::string& key);

/// Checks a finished results folder against the preset's declaration and writes summary.csv from
/// ctx.summaries: every CSV file declared with its declared header, every table written unless it
/// is conditional, every array file matching a declared pattern, every declared summary written
/// once and no other. A mismatch is a bug of the preset (std::logic_error naming the file).
void finish_outputs(const Experiment& e, const RunContext& ctx);
/// ctx.summaries as manifest.json's "summaries" object (name -> value; null when not finite).
nlohmann::json summaries_json(const RunContext& ctx);
/// ctx.phase_seconds as manifest.json's notes.phase_seconds (name -> seconds), with "other": the
/// rest of `wall` (set-up, output files; a preset that times no phase has only "other").
nlohmann::json phase_seconds_json(const RunContext& ctx, double wall);

/// `e` with its smoke parameters (see Experiment::smoke): `ExperimentRegistration reg{with_smoke(Experiment{...}, {{"L", "8"}})}`.
inline Experiment with_smoke(Experiment e, std::vector<std::pair<std::string, std::string>> smoke,
                             std::vector<std::pair<std::string, std::string>> nonfinite_ok = {}) {
  e.smoke = std::move(smoke);
  e.nonfinite_ok = std::move(nonfinite_ok);
  return e;
}

/// All registered experiments (registered by the experiment translation units).
std::vector<const Experiment*> experiments();
const Experiment* find_experiment(const std::string& name);
/// "unknown preset 'NAME' (see `tokdyn presets`)", with "; did you mean 'X'?" for a near miss.
std::string unknown_preset_message(const std::string& name);
/// Registers at static-initialisation time: `static ExperimentRegistration reg{...};`
struct ExperimentRegistration {
  explicit ExperimentRegistration(Experiment e);
};

/// Builds validated Params from defaults, an optional TOML file's keys and `--set k=v`
/// overrides (in that order). Throws InputError naming the key/file and what was expected.
Params resolve_params(const Experiment& e, const std::vector<std::pair<std::string, std::string>>& sets,
                      const std::optional<std::filesystem::path>& toml_file = {});

/// Splits one `--set key=value` argument. Throws InputError when there is no '=' or no key.
std::pair<std::string, std::string> parse_set(const std::string& arg);

/// For listings (`tokdyn show`): a type's name ("int", "double", "bool", "string", "int list"),
/// a value as it would be written after `--set key=`, and a spec's range ("> 0", ">= 1 and <= 8",
/// "io | recurrence"; empty when unconstrained).
std::string type_name(ParamType t);
/// The schema of one preset as JSON (key, type, default, bounds, choices, list rules, path kind,
/// conditions, help; plus its smoke parameters): `tokdyn show PRESET --json`.
nlohmann::json schema_json(const Experiment& e);
std::string value_text(const ParamValue& v);
std::string range_text(const ParamSpec& s);

/// Parses a TOML config: returns the experiment it names (key `preset`) and its other keys
/// as strings for resolve_params. Throws InputError.
const Experiment& experiment_of_toml(const std::filesystem::path& file);

/// What run_experiment did.
struct RunOutcome {
  std::filesystem::path dir;   ///< the published results folder
  std::size_t files = 0;       ///< files in it (manifest.json included)
  bool replaced = false;       ///< a previous tokdyn result was replaced (--overwrite)
  std::string figure_error;    ///< non-empty: figures failed; results were published without them
  /// For a preset with a verdict table: "checks: 40 passed, 1 failed, 2 n/a; by reference: paper 3/3,
  /// closed_form 10/10, ..." (passed / made, per reference kind); empty otherwise.
  std::string checks_line;
};

/// Runs an experiment end to end: checks the resources it needs (threads, memory; prints the
/// estimated work of long runs), prepares the output folder (output_folder.hpp: never replaces
/// anything but a previous tokdyn result, and that only with `overwrite`), runs into
/// `<out>.tmp-<pid>`, writes manifest.json (config, seed, version, wall time, threads), draws the
/// figures, and publishes the folder atomically. On any error nothing is left behind.
/// How run_experiment shows progress when asked to (show_progress): Auto (the default) draws a bar
/// when stderr is a terminal and writes a plain line every few seconds otherwise
/// (TOKDYN_PROGRESS_SECONDS, default 5); Bar, Lines and None force one (`tokdyn run --progress`).
enum class ProgressMode { Auto, Bar, Lines, None };
void set_progress_mode(ProgressMode mode);

RunOutcome run_experiment(const Experiment& e, const Params& p, const std::filesystem::path& out, int threads,
                          bool figures, bool show_progress, bool overwrite = false, bool write_inputs = false);

/// Refuses a run that cannot fit this machine (InputError with the estimate) and, when
/// `announce`, prints the estimated work of a long run on stderr.
void check_resources(const Experiment& e, const Params& p, int threads, bool announce);

/// Physical memory available to this process (the smaller of RAM and a cgroup limit), bytes.
double machine_memory_bytes();

/// Draws figures: runs `/usr/bin/python3 python/plot.py KIND DIR` (the interpreter can be
/// overridden by TOKDYN_PYTHON). Throws std::runtime_error when plotting fails.
/// How figures are saved (`--figure-format`, `--dpi`): formats from png, svg, pdf (each figure once per
/// format, same base name); dpi 0 keeps each figure's own. Process-wide, like the progress mode.
struct FigureOptions {
  std::vector<std::string> formats = {"png"};
  int dpi = 0;
};
void set_figure_options(FigureOptions o);
const FigureOptions& figure_options();
/// Parses "png,svg,pdf" (a non-empty list of distinct formats). Throws InputError naming `option`.
std::vector<std::string> parse_figure_formats(const std::string& option, const std::string& text);
/// Returns the versions of the plotting stack that drew them ({python, numpy, matplotlib}; null if
/// the script did not say).
nlohmann::json draw_figures(const std::string& kind, const std::filesystem::path& dir);

}  // namespace tokdyn

namespace tokdyn {

/// manifest.json's record of a guarded fixed-step run ("step_check"): method, policy, step asked
/// for and used, the largest local rate and step x rate seen, the bound, whether the run stayed
/// inside it, and what tokdyn did (accepted / refined).
nlohmann::json step_report_json(const StepReport& r, StepPolicy policy);

/// The user-facing note of a refined run ("parameter 'h' = ...: refined to ... because ...").
std::string step_refined_note(const StepReport& r, const std::string& param);

}  // namespace tokdyn
