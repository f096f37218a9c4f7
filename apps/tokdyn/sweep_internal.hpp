#pragma once
// What the translation units of `tokdyn sweep` share (apps/tokdyn/sweep*.cpp): the text and CSV
// helpers and the definition of a sweep (its points) from sweep_define.cpp, the results folder's
// state from sweep_folder.cpp, the runner of points as child processes and the MPI world from
// sweep_runner.cpp, sweep.csv and the plots from sweep_collect.cpp; the commands are in sweep.cpp.
// Internal to the tokdyn binary; everything in tokdyn::sweep::detail, each defined once.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include "sweep.hpp"
#include "tokdyn/core/interrupt.hpp"
#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn::sweep::detail {

namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Text and CSV helpers (sweep_define.cpp)

std::string trim(const std::string& s);
std::vector<std::string> split(const std::string& s, char sep);
bool is_integer_text(const std::string& s);

// ---------------------------------------------------------------------------------------------
// The definition (sweep_define.cpp)

struct Point {
  long index = 0;
  std::vector<std::pair<std::string, std::string>> values;  ///< the axes' values (key, text)
  std::optional<Params> params;                               ///< resolved (none: the point is bad input)
  std::string error;                                          ///< why it could not be resolved
  std::string hash;
  double work = 0;                                            ///< the preset's estimated flops (ordering)
};

/// A file the sweep writes for its points and removes when it ends (or is interrupted).
struct TempFile {
  explicit TempFile(fs::path p) : path(std::move(p)), guard(path) {}
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  fs::path path;
  interrupt::PathGuard guard;
};

struct Definition {
  const Experiment* e = nullptr;
  std::string target;                                   ///< as given (preset or config file)
  std::optional<fs::path> config;                       ///< the config file the points resolve (without [sweep])
  std::optional<fs::path> config_given;                 ///< the config file as given (the definition names it)
  std::shared_ptr<TempFile> config_file;         ///< a written config without [sweep], removed with the sweep
  std::vector<std::pair<std::string, std::string>> base;  ///< --set
  json axes = json::array();
  std::vector<std::string> keys;                         ///< the axes' keys, in order
  std::vector<Point> points;

  json to_json() const {
    json pts = json::array();
    for (const Point& p : points) {
      json v = json::object();
      for (const auto& [k, x] : p.values) v[k] = x;
      pts.push_back({{"index", p.index}, {"hash", p.hash}, {"values", v}});
    }
    json sets = json::object();
    for (const auto& [k, v] : base) sets[k] = v;
    json d = {{"preset", e->name}, {"sets", sets}, {"axes", axes}, {"keys", keys}, {"points", pts}};
    if (config_given) d["config"] = fs::absolute(*config_given).lexically_normal().string();
    return d;
  }
};

Definition define(const Options& o);
std::string point_label(const Point& p);

// ---------------------------------------------------------------------------------------------
// The result folder (sweep_folder.cpp)

/// Writes `text` to `file` atomically (a temporary file beside it, then rename).
void write_atomic(const fs::path& file, const std::string& text);
json read_json_file(const fs::path& file);
/// Checks --out and writes the sweep's manifest (definition) unless the same sweep is there.
void prepare(const fs::path& dir, const Definition& d, bool overwrite);
/// The sweep's definition as written in DIR (for --collect, and for shards joining a sweep).
json stored_definition(const fs::path& dir);
bool complete(const fs::path& dir, const std::string& hash);
/// A complete point is skipped only when its result was made with exactly its parameters.
void check_complete_points(const fs::path& dir, const Definition& d);

// ---------------------------------------------------------------------------------------------
// Running the points: child `tokdyn run` processes (sweep_runner.cpp)

struct Child {
  pid_t pid = -1;
  long index = -1;
  std::chrono::steady_clock::time_point start;
  fs::path err;
};

struct Outcome {
  long index = -1;
  int code = 0;
  std::string error;
  double seconds = 0;
};

class Runner {
 public:
  Runner(const Definition& d, fs::path dir, int threads, bool figures, json where);

  /// Starts point `i` as a child process.
  Child start(long i);

  /// Waits for `c` (blocking, or not: nullopt while it runs) and records its outcome.
  std::optional<Outcome> finish(const Child& c, bool block);

  /// The outcome of `c`, which ended with wait status `status` (-1: lost).
  Outcome reap(const Child& c, int status);

  const fs::path& dir() const { return dir_; }
  const std::string& hash(long i) const { return d_.points[static_cast<std::size_t>(i)].hash; }

  /// A point that failed (or could not be resolved): failed/<hash>.json.
  void record_failure(const Point& p, const Outcome& o) const;

 private:
  const Definition& d_;
  fs::path dir_;
  int threads_;
  bool figures_;
  json where_;
  std::string exe_;
  std::map<pid_t, std::unique_ptr<interrupt::ChildGuard>> guards_;
  std::map<pid_t, std::unique_ptr<interrupt::PathGuard>> err_guards_;
};

/// One line per finished point (stdout, flushed: a batch job's log shows progress).
class Progress {
 public:
  Progress(const Definition& d, std::size_t todo, bool quiet) : d_(d), todo_(todo), quiet_(quiet) {}
  void done(const Outcome& o, const std::string& who = "");
  std::size_t failed() const { return failed_; }

 private:
  const Definition& d_;
  std::size_t todo_, n_ = 0, failed_ = 0;
  bool quiet_;
};

// ---------------------------------------------------------------------------------------------
// MPI (sweep_runner.cpp)

struct World {
  int rank = 0, size = 1, local_size = 1;
  bool mpi = false;
  double init_seconds = 0;       ///< MPI_Init and the node split
  double dispatch_seconds = 0;   ///< rank 0: time spent answering requests (receive, record, send)
  long requests = 0;             ///< rank 0: requests answered
};

World init_world(int argc, char** argv);
void finalize(const World& w);
/// The worst exit code over the ranks (every rank returns it; rank 0 has printed the message).
int agree(const World& w, int code);
/// Runs `todo` (point indices, largest work first) over the ranks: rank 0 hands out the next
/// point to whichever rank asks (it runs points itself between requests), the others ask,
/// run, report and ask again. Returns this rank's failures (rank 0: all of them).
std::size_t run_ranks(World& w, Runner& runner, const std::vector<long>& todo, Progress& progress);
/// Runs `todo` on this machine, `jobs` points at a time.
void run_local(Runner& runner, const std::vector<long>& todo, int jobs, Progress& progress);

// ---------------------------------------------------------------------------------------------
// sweep.csv, the final manifest and --plot (sweep_collect.cpp)

struct Collected {
  std::size_t ok = 0, failed = 0, missing = 0;
};

/// sweep.csv and the final manifest.json from what DIR holds; `run_info` joins the manifest.
Collected collect(const fs::path& dir, const Experiment& e, const json& manifest, const json& run_info);
json parse_plots(const std::vector<std::string>& plots, const Experiment& e, const std::vector<std::string>& keys);
int draw_plots(const fs::path& dir, const json& plots);

}  // namespace tokdyn::sweep::detail
