// The run lifecycle: resources checked, output folder prepared (output_folder.hpp), the experiment
// run into its temporary folder, manifest.json written, figures drawn, the folder published.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <thread>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <cmath>
#include <set>

#include <omp.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tokdyn/core/blas_core.hpp"
#include "tokdyn/build_info.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/core/host.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/runtime/output_folder.hpp"
#include "tokdyn/runtime/provenance.hpp"
#include "tokdyn/runtime/training_record.hpp"

extern "C" void openblas_set_num_threads(int);

namespace tokdyn {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Running

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

namespace {

std::atomic<int> g_progress_mode{static_cast<int>(ProgressMode::Auto)};

/// Seconds between two plain progress lines (TOKDYN_PROGRESS_SECONDS, default 5; 0: one line as the
/// run starts and none after it until the last, a state tests can wait for without a clock).
double progress_interval() {
  const char* v = std::getenv("TOKDYN_PROGRESS_SECONDS");
  if (v && *v) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end && *end == '\0' && s >= 0 && std::isfinite(s)) return s;
  }
  return 5.0;
}

// Progress on stderr. Bar: one line redrawn in place (a terminal). Lines: a plain line every few
// seconds, written by a heartbeat thread so that a phase without fraction updates still shows
// (batch jobs, Slurm, notebooks); a last line when the run ends if any was written.
class ProgressLine {
 public:
  ProgressLine(std::string name, bool lines) : name_(std::move(name)), lines_(lines), start_(Clock::now()) {
    if (lines_) heartbeat_ = std::thread([this] { beat(); });
  }
  ~ProgressLine() { stop(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void update(double f) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!(f >= 0.0)) f = 0.0;  // also maps NaN to 0
    f = std::min(f, 1.0);
    best_ = std::max(best_, f);
    if (lines_) return;  // the heartbeat writes
    const auto now = Clock::now();
    if (shown_ && now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    draw(now);
  }

  void finish() {
    stop();
    std::lock_guard<std::mutex> lock(mu_);
    if (!shown_) return;
    best_ = 1.0;
    if (lines_) {
      write_line(Clock::now(), "done");
      return;
    }
    draw(Clock::now());
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }

  void abandon() {  // leave the line, so that an error message starts on a fresh one
    stop();
    std::lock_guard<std::mutex> lock(mu_);
    if (!shown_ || lines_) return;
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;

  std::string eta_text(double elapsed) const {
    return best_ > 0.0 ? fmt::format("{:.1f}s", elapsed * (1.0 - best_) / best_) : std::string("?");
  }

  void draw(Clock::time_point now) {
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "\r[%s] %d%% elapsed %.1fs ETA %s\x1b[K", name_.c_str(), static_cast<int>(best_ * 100.0), elapsed,
                 eta_text(elapsed).c_str());
    std::fflush(stderr);
    shown_ = true;
  }

  void write_line(Clock::time_point now, const char* what) {
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const std::string line = fmt::format("tokdyn: {} {} {}% elapsed {:.1f}s ETA {}\n", name_, what, static_cast<int>(best_ * 100.0),
                                         elapsed, best_ >= 1.0 ? std::string("0s") : eta_text(elapsed));
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    shown_ = true;
  }

  void beat() {
    const double seconds = progress_interval();
    std::unique_lock<std::mutex> lock(mu_);
    if (seconds == 0.0) {
      write_line(Clock::now(), "running");
      wake_.wait(lock, [this] { return stopping_; });
      return;
    }
    const auto every = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (!stopping_) {
      if (wake_.wait_for(lock, every, [this] { return stopping_; })) break;
      write_line(Clock::now(), "running");
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (heartbeat_.joinable()) heartbeat_.join();
  }

  std::string name_;
  bool lines_ = false;
  Clock::time_point start_;
  Clock::time_point last_{};
  double best_ = 0.0;
  bool shown_ = false;
  bool stopping_ = false;
  std::mutex mu_;
  std::condition_variable wake_;
  std::thread heartbeat_;
};

void write_manifest(const fs::path& file, const nlohmann::json& j) { write_text_file(file, j.dump(2) + "\n"); }

std::vector<std::string> files_under(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().filename() != ".tokdyn-temporary")  // OutputFolder's marker
      files.push_back(entry.path().lexically_relative(dir).generic_string());
  std::sort(files.begin(), files.end());
  return files;
}

/// Problems of the files under `dir` (paths relative to it, shown with `prefix`) against `o`.
void check_folder(const OutputDecl& o, const fs::path& dir, const std::string& prefix, std::vector<std::string>& problems) {
  std::set<std::string> tables_seen;
  std::set<std::string> subruns_seen;
  for (const std::string& rel : files_under(dir)) {
    if (rel == "manifest.json" || rel.rfind("inputs/", 0) == 0) continue;
    const std::size_t slash = rel.find('/');
    if (!o.subruns.empty() && slash != std::string::npos) {
      const std::string sub = rel.substr(0, slash);
      if (const Experiment* se = find_experiment(sub); se != nullptr) {
        if (subruns_seen.insert(sub).second && (!se->outputs.tables.empty() || !se->outputs.summaries.empty()))
          check_folder(se->outputs, dir / sub, prefix + sub + "/", problems);
        continue;
      }
    }
    const std::string ext = fs::path(rel).extension().string();
    if (ext == ".png" || ext == ".pdf" || ext == ".svg") continue;  // figures: python/tokdyn_plot, checked by its test
    if (ext == ".csv") {
      const TableDecl summary = summary_table();
      const TableDecl* t = rel == "summary.csv" ? &summary : o.table(rel);
      if (t == nullptr) {
        problems.push_back(fmt::format("{}{}: not declared", prefix, rel));
        continue;
      }
      tables_seen.insert(rel);
      std::ifstream in(dir / rel, std::ios::binary);
      std::string head;
      std::getline(in, head);
      std::string want;
      for (const std::string& c : t->column_names()) want += (want.empty() ? "" : ",") + c;
      if (head != want) problems.push_back(fmt::format("{}{}: header '{}', declared '{}'", prefix, rel, head, want));
      continue;
    }
    bool declared = false;
    for (const ArrayDecl& a : o.arrays) declared = declared || path_matches(a.pattern, rel);
    if (!declared) problems.push_back(fmt::format("{}{}: not declared", prefix, rel));
  }
  for (const TableDecl& t : o.tables)
    if (t.when.empty() && tables_seen.count(t.file) == 0) problems.push_back(fmt::format("{}{}: declared, not written", prefix, t.file));
}

/// Problems of the figure files under `dir` against `o` (after drawing): every .png/.pdf/.svg
/// declared, every unconditional figure drawn; sub-runs against their own presets.
void check_figures(const OutputDecl& o, const fs::path& dir, const std::string& prefix, std::vector<std::string>& problems) {
  std::set<std::string> seen;
  for (const std::string& rel : files_under(dir)) {
    const std::string ext = fs::path(rel).extension().string();
    if (ext != ".png" && ext != ".pdf" && ext != ".svg") continue;
    const std::size_t slash = rel.find('/');
    if (!o.subruns.empty() && slash != std::string::npos) {
      const std::string sub = rel.substr(0, slash);
      if (const Experiment* se = find_experiment(sub); se != nullptr) {
        if (seen.insert("/" + sub).second && !se->outputs.figures.empty())
          check_figures(se->outputs, dir / sub, prefix + sub + "/", problems);
        continue;
      }
    }
    // Declared as .png; drawn in any of the formats asked for (--figure-format).
    const std::string as_declared = fs::path(rel).replace_extension(".png").string();
    bool declared = false;
    for (const FigureDecl& f : o.figures)
      if (path_matches(f.file, as_declared)) {
        declared = true;
        seen.insert(f.file);
      }
    if (!declared) problems.push_back(fmt::format("{}{}: not declared", prefix, rel));
  }
  for (const FigureDecl& f : o.figures)
    if (f.when.empty() && seen.count(f.file) == 0) problems.push_back(fmt::format("{}{}: declared, not drawn", prefix, f.file));
}

}  // namespace

CsvWriter RunContext::table(const std::string& file) const {
  const TableDecl* t = outputs != nullptr ? outputs->table(file) : nullptr;
  if (t == nullptr) throw std::logic_error(fmt::format("preset '{}' writes {} without declaring it", preset, file));
  return CsvWriter(dir, *t);
}

double RunContext::PhaseTimer::stop() {
  if (ctx_ == nullptr) return 0.0;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  ctx_->add_phase(name_, s);
  ctx_ = nullptr;
  return s;
}

void RunContext::add_phase(const std::string& name, double seconds) {
  for (auto& [n, s] : phase_seconds)
    if (n == name) {
      s += seconds;
      return;
    }
  phase_seconds.emplace_back(name, seconds);
}

void RunContext::summary(const std::string& name, double value, const std::string& paper) {
  summaries.push_back({name, value, 0, false, paper});
}

void RunContext::summary(const std::string& name, long value, const std::string& paper) {
  summaries.push_back({name, static_cast<double>(value), value, true, paper});
}

void finish_outputs(const Experiment& e, const RunContext& ctx) {
  const OutputDecl& o = e.outputs;
  std::vector<std::string> problems;
  std::set<std::string> names;
  for (const RunContext::SummaryEntry& s : ctx.summaries) {
    if (o.summary(s.name) == nullptr) problems.push_back(fmt::format("summary '{}': not declared", s.name));
    if (!names.insert(s.name).second) problems.push_back(fmt::format("summary '{}': written twice", s.name));
  }
  for (const SummaryDecl& s : o.summaries)
    if (s.when.empty() && names.count(s.name) == 0) problems.push_back(fmt::format("summary '{}': declared, not written", s.name));
  if (!ctx.summaries.empty()) {
    if (fs::exists(ctx.dir / "summary.csv")) problems.push_back("summary.csv: written by the preset itself besides its summaries");
    const TableDecl t = summary_table();
    CsvWriter w(ctx.dir, t);
    for (const RunContext::SummaryEntry& s : ctx.summaries) {
      w.cell(s.name);
      if (s.is_integer) w.cell(s.integer);
      else if (std::isfinite(s.value)) w.cell(s.value);
      else w.empty();
      w.cell(s.paper).end_row();
    }
  }
  if (!o.tables.empty() || !o.summaries.empty() || !o.subruns.empty()) check_folder(o, ctx.dir, "", problems);
  if (!problems.empty()) {
    std::string list;
    for (std::size_t i = 0; i < problems.size() && i < 6; ++i) list += (i ? "; " : "") + problems[i];
    if (problems.size() > 6) list += fmt::format("; and {} more", problems.size() - 6);
    throw std::logic_error(fmt::format("preset '{}': results do not match its output declaration: {}", e.name, list));
  }
}

nlohmann::json summaries_json(const RunContext& ctx) {
  nlohmann::json j = nlohmann::json::object();
  for (const RunContext::SummaryEntry& s : ctx.summaries) {
    if (s.is_integer) j[s.name] = s.integer;
    else if (std::isfinite(s.value)) j[s.name] = s.value;
    else j[s.name] = nullptr;
  }
  return j;
}

nlohmann::json phase_seconds_json(const RunContext& ctx, double wall) {
  nlohmann::json ph = nlohmann::json::object();
  double timed = 0.0;
  for (const auto& [name, sec] : ctx.phase_seconds) {
    ph[name] = sec;
    timed += sec;
  }
  ph["other"] = std::max(0.0, wall - timed);
  return ph;
}

void set_progress_mode(ProgressMode m) { g_progress_mode = static_cast<int>(m); }

RunOutcome run_experiment(const Experiment& e, const Params& p, const fs::path& out, int threads, bool figures,
                          bool show_progress, bool overwrite, bool write_inputs) {
  threads = std::max(threads, 1);
  as_input_error([&] { check_resources(e, p, threads, show_progress); });  // runs the preset's estimate
  OutputFolder folder(out, overwrite);
  const fs::path& tmp = folder.tmp();

  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);

  std::unique_ptr<ProgressLine> line;
  const auto mode = static_cast<ProgressMode>(g_progress_mode.load());
  if (show_progress && mode != ProgressMode::None) {
    const bool bar = mode == ProgressMode::Bar || (mode == ProgressMode::Auto && isatty(2));
    line = std::make_unique<ProgressLine>(e.name, !bar);
  }

  RunOutcome outcome;
  outcome.dir = folder.target();
  outcome.replaced = folder.replaces();
  std::vector<std::string> ctx_warnings;
  try {
    RunContext ctx;
    ctx.dir = tmp;
    ctx.threads = threads;
    ctx.figures = figures;
    ctx.write_inputs = write_inputs;
    ctx.outputs = &e.outputs;
    ctx.preset = e.name;
    if (line) {
      ProgressLine* l = line.get();
      ctx.progress = [l](double f) { l->update(f); };
    }

    const std::string started = utc_now_iso8601();
    const auto t0 = std::chrono::steady_clock::now();
    try {
      check_write_failures();  // forget failures of an earlier run in this process
    } catch (const ResourceError&) {
    }
    as_input_error([&] { e.run(p, ctx); });
    // A checkpoint `tokdyn train` made: how it was trained (model, tokens seen, held-out loss).
    if (p.has("checkpoint"))
      if (auto rec = training_record(p.get_string("checkpoint")); !rec.is_null()) ctx.notes["trained_by"] = rec;
    finish_outputs(e, ctx);   // summary.csv, and the folder checked against the declaration
    check_write_failures();  // a writer that could only record its failure (disk full at close)
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // notes.phase_seconds: the preset's phases in the order they ran, "other" the rest of the run
    // (set-up, output files; a preset that times no phase has only "other"), "figures" added below.
    ctx.notes["phase_seconds"] = phase_seconds_json(ctx, wall);
    if (line) line->finish();
    line.reset();
    ctx_warnings = ctx.warnings;

    if (fs::exists(tmp / "manifest.json"))
      throw std::logic_error(fmt::format("experiment '{}' wrote its own manifest.json", e.name));
    const nlohmann::json params = p.to_json();
    nlohmann::json m = nlohmann::json::object();
    m["preset"] = e.name;
    m["params"] = params;
    m["seed"] = params.contains("seed") ? params["seed"] : nlohmann::json(nullptr);
    m["version"] = TOKDYN_VERSION;
    m["wall_time_s"] = wall;
    m["threads"] = threads;
    m["started_utc"] = started;
    m["hostname"] = host_name();
    m["blas_core"] = blas_core();  // OpenBLAS's kernels (blas_core.hpp): results' last bits depend on them
    if (!blas_core_detected().empty()) m["blas_core_detected"] = blas_core_detected();
    m["notes"] = ctx.notes;
    // A point of `tokdyn sweep` (apps/tokdyn/sweep_runner.cpp): which sweep, point, rank and host ran it.
    if (const char* sp = std::getenv("TOKDYN_SWEEP_POINT"); sp != nullptr && *sp != '\0') {
      nlohmann::json point = nlohmann::json::parse(sp, nullptr, /*allow_exceptions=*/false);
      if (point.is_object()) m["sweep_point"] = std::move(point);
    }
    nlohmann::json provenance = provenance_json(e, p);  // command, set, inputs, versions
    for (auto& [k, v] : provenance.items()) m[k] = std::move(v);
    if (!ctx.summaries.empty()) m["summaries"] = summaries_json(ctx);
    if (!ctx.warnings.empty()) m["warnings"] = ctx.warnings;
    m["files"] = files_under(tmp);  // the experiment's files (manifest.json itself not listed)
    write_manifest(tmp / "manifest.json", m);
    // Figures are drawn from the written results (CSV files and this manifest), then listed. If
    // drawing fails, the results are still published and the failure reported (exit code 5).
    if (figures && !e.figure_kind.empty()) {
      const auto f0 = std::chrono::steady_clock::now();
      try {
        if (nlohmann::json v = draw_figures(e.figure_kind, tmp); !v.is_null()) m["versions"]["plotting"] = std::move(v);
        // The figures drawn against the declaration (a mismatch is a bug: reported as a figure
        // failure, exit 5, with the results published).
        std::vector<std::string> problems;
        if (!e.outputs.figures.empty()) check_figures(e.outputs, tmp, "", problems);
        if (!problems.empty()) {
          std::string list;
          for (std::size_t i = 0; i < problems.size() && i < 6; ++i) list += (i ? "; " : "") + problems[i];
          throw std::runtime_error(fmt::format("the figures do not match the declaration of '{}': {}", e.name, list));
        }
      } catch (const std::runtime_error& err) {
        outcome.figure_error = one_line(err.what());
        m["figure_error"] = outcome.figure_error;
      }
      m["figure_time_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - f0).count();
      m["notes"]["phase_seconds"]["figures"] = m["figure_time_s"];
      m["files"] = files_under(tmp);
      write_manifest(tmp / "manifest.json", m);
    }
    outcome.files = m["files"].size() + 1;
    if (ctx.notes.contains("checks_by_kind") && ctx.notes.contains("checks")) {
      const int total = ctx.notes["checks"].get<int>(), failed = ctx.notes.value("checks_failed", 0),
                na = ctx.notes.value("checks_not_applicable", 0);
      std::string kinds;
      for (const auto& [k, c] : ctx.notes["checks_by_kind"].items()) {
        const int made = c.value("passed", 0) + c.value("failed", 0);
        kinds += fmt::format("{}{} {}/{}", kinds.empty() ? "" : ", ", k, c.value("passed", 0), made);
      }
      outcome.checks_line = fmt::format("checks: {} passed, {} failed, {} n/a; by reference (passed/made): {}", total - failed - na,
                                        failed, na, kinds.empty() ? "none" : kinds);
    }
    folder.commit();
    for (const std::string& w : ctx_warnings) std::fprintf(stderr, "tokdyn: note: %s\n", message_line(w).c_str());
  } catch (...) {
    if (line) line->abandon();
    throw;
  }
  return outcome;
}

/// The message on one line: newlines become "; " (carriage returns dropped).
}  // namespace tokdyn
