// The run lifecycle: resources checked, output folder prepared (output_folder.hpp), the experiment
// run into its temporary folder, manifest.json written, figures drawn, the folder published.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <system_error>

#include <omp.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tokdyn/build_info.hpp"
#include "tokdyn/error.hpp"
#include "tokdyn/experiment.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/output_folder.hpp"

extern "C" void openblas_set_num_threads(int);

namespace tokdyn {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Running

namespace {

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

// A single updating progress line on stderr (only used when stderr is a terminal).
class ProgressLine {
 public:
  explicit ProgressLine(std::string name) : name_(std::move(name)), start_(Clock::now()) {}

  void update(double f) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!(f >= 0.0)) f = 0.0;  // also maps NaN to 0
    f = std::min(f, 1.0);
    best_ = std::max(best_, f);
    const auto now = Clock::now();
    if (shown_ && now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    draw(now);
  }

  void finish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shown_) return;
    best_ = 1.0;
    draw(Clock::now());
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }

  void abandon() {  // leave the line, so that an error message starts on a fresh one
    std::lock_guard<std::mutex> lock(mu_);
    if (!shown_) return;
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;

  void draw(Clock::time_point now) {
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    std::string eta = "?";
    if (best_ > 0.0) eta = fmt::format("{:.1f}s", elapsed * (1.0 - best_) / best_);
    std::fprintf(stderr, "\r[%s] %d%% elapsed %.1fs ETA %s\x1b[K", name_.c_str(), static_cast<int>(best_ * 100.0),
                 elapsed, eta.c_str());
    std::fflush(stderr);
    shown_ = true;
  }

  std::string name_;
  Clock::time_point start_;
  Clock::time_point last_{};
  double best_ = 0.0;
  bool shown_ = false;
  std::mutex mu_;
};

void write_manifest(const fs::path& file, const nlohmann::json& j) {
  std::ofstream out(file, std::ios::out | std::ios::trunc | std::ios::binary);
  if (!out) throw_write_error(file, errno, "create");
  out << j.dump(2) << '\n';
  errno = 0;
  out.close();
  if (!out) throw_write_error(file, errno);
}

std::vector<std::string> files_under(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().filename() != ".tokdyn-temporary")  // OutputFolder's marker
      files.push_back(entry.path().lexically_relative(dir).generic_string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

RunOutcome run_experiment(const Experiment& e, const Params& p, const fs::path& out, int threads, bool figures,
                          bool show_progress, bool overwrite, bool write_inputs) {
  threads = std::max(threads, 1);
  as_input_error([&] { check_resources(e, p, threads, show_progress); });  // runs the preset's estimate
  OutputFolder folder(out, overwrite);
  const fs::path& tmp = folder.tmp();

  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);

  std::unique_ptr<ProgressLine> line;
  if (show_progress && isatty(2)) line = std::make_unique<ProgressLine>(e.name);

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
    check_write_failures();  // a writer that could only record its failure (disk full at close)
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
    m["notes"] = ctx.notes;
    if (!ctx.warnings.empty()) m["warnings"] = ctx.warnings;
    m["files"] = files_under(tmp);  // the experiment's files (manifest.json itself not listed)
    write_manifest(tmp / "manifest.json", m);
    // Figures are drawn from the written results (CSV files and this manifest), then listed. If
    // drawing fails, the results are still published and the failure reported (exit code 5).
    if (figures && !e.figure_kind.empty()) {
      const auto f0 = std::chrono::steady_clock::now();
      try {
        draw_figures(e.figure_kind, tmp);
      } catch (const std::runtime_error& err) {
        outcome.figure_error = one_line(err.what());
        m["figure_error"] = outcome.figure_error;
      }
      m["figure_time_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - f0).count();
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
