// `tokdyn sweep` (sweep.hpp): the commands. `--collect DIR` rebuilds sweep.csv from the points
// present; a sweep defines its points, prepares --out (rank 0), picks the points to run (not
// complete, resolvable, this shard's, largest work first), runs them serially, --jobs at a time or
// over the ranks of mpirun, and collects sweep.csv. The pieces are in sweep_define.cpp,
// sweep_folder.cpp, sweep_runner.cpp and sweep_collect.cpp (sweep_internal.hpp).
#include "sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/host.hpp"
#include "sweep_internal.hpp"

namespace tokdyn::sweep {

using namespace detail;

namespace {

/// "I/N" -> (I, N), 0 <= I < N.
std::pair<long, long> parse_shard(const std::string& s) {
  const auto slash = s.find('/');
  const std::string a = slash == std::string::npos ? "" : s.substr(0, slash), b = slash == std::string::npos ? "" : s.substr(slash + 1);
  if (!is_integer_text(a) || !is_integer_text(b) || a[0] == '-' || b[0] == '-' || a.size() > 9 || b.size() > 9)
    throw InputError(fmt::format("--shard '{}': expected I/N with 0 <= I < N, e.g. --shard 0/4 (a Slurm array: $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)", s));
  const long i = std::stol(a), n = std::stol(b);
  if (n < 1 || i >= n) throw InputError(fmt::format("--shard '{}': expected I/N with 0 <= I < N", s));
  return {i, n};
}

int collect_command(const Options& o) {
  const fs::path dir = o.collect;
  const json m = stored_definition(dir);
  const Experiment* e = find_experiment(m["definition"].value("preset", ""));
  if (!e) throw InputError(fmt::format("--collect '{}': the sweep's preset '{}' is not a preset of this tokdyn", dir.string(), m["definition"].value("preset", "")));
  const json plots = parse_plots(o.plots, *e, m["definition"]["keys"].get<std::vector<std::string>>());
  const Collected c = collect(dir, *e, m, json::object());
  if (!o.quiet)
    fmt::print("wrote {} ({} points: {} ok, {} failed, {} missing)\n", message_line((dir / "sweep.csv").string()), c.ok + c.failed + c.missing, c.ok,
             c.failed, c.missing);
  const int fig = draw_plots(dir, plots);
  if (c.failed + c.missing > 0) return exit_code::points_failed;
  return fig;
}

}  // namespace

int run(const Options& o, int argc, char** argv) {
  if (!o.collect.empty()) {
    if (!o.target.empty() || !o.grids.empty() || !o.zips.empty() || !o.points_file.empty() || !o.sets.empty() || o.out_given || !o.shard.empty() ||
        o.jobs != 1 || o.threads != 0 || o.figures || o.overwrite)
      throw InputError("--collect DIR: builds sweep.csv from the points in DIR and takes only --plot and --quiet; expected no target, --grid, --set, --out, --jobs, --shard");
    return collect_command(o);
  }
  if (o.target.empty()) throw InputError("sweep: no target; expected a preset or a .toml config (or --collect DIR)");
  if (o.out_given && o.out.empty()) throw InputError("--out: an empty path; expected the sweep's folder");
  const unsigned hw_u = std::thread::hardware_concurrency();
  const int hw = hw_u ? static_cast<int>(hw_u) : 1;
  if (o.jobs < 1 || o.jobs > 4 * hw) throw InputError(fmt::format("--jobs: expected an integer from 1 to {} (4 per core), got {}", 4 * hw, o.jobs));

  World w = init_world(argc, argv);
  struct Finalizer {
    const World& w;
    ~Finalizer() { finalize(w); }
  } finalizer{w};

  // Every rank reads the same input into the same definition; only rank 0 reports a problem.
  std::optional<Definition> def;
  json plots;
  std::pair<long, long> shard{0, 1};
  fs::path dir;
  int code = 0;
  std::string message;
  try {
    if (w.mpi && !o.shard.empty()) throw InputError("--shard: not under mpirun (the ranks share the points already); expected one of them");
    if (w.mpi && o.jobs != 1) throw InputError("--jobs: not under mpirun; expected more ranks per node instead (mpirun -np N)");
    if (!o.shard.empty()) shard = parse_shard(o.shard);
    if (shard.second > 1 && !o.plots.empty())
      throw InputError("--plot: not with --shard (a shard has only its own points); draw it with `tokdyn sweep --collect DIR --plot ...`");
    def = define(o);
    dir = o.out.empty() ? fs::path("results") / (def->e->name + "-sweep") : fs::path(o.out);
    plots = parse_plots(o.plots, *def->e, def->keys);
    if (w.rank == 0) {
      // Shards start independently: the first writes the definition, the others find it there.
      if (shard.second > 1 && o.overwrite) throw InputError("--overwrite: not with --shard (the shards share one folder); remove the old sweep first");
      prepare(dir, *def, o.overwrite);
      check_complete_points(dir, *def);
    }
  } catch (...) {
    const Failure f = failure_of(std::current_exception());
    code = f.code, message = f.line;
  }
  code = agree(w, code);
  if (code != 0) {
    if (w.rank == 0 && !message.empty()) {
      std::fflush(stdout);
      std::fprintf(stderr, "tokdyn: %s\n", message.c_str());
    }
    return code;
  }

  const auto t0 = std::chrono::steady_clock::now();
  const std::string started = utc_now_iso8601();
  const int threads = o.threads > 0 ? o.threads : std::max(1, hw / std::max(o.jobs, w.local_size));
  json where = {{"host", host_name()}};
  if (w.mpi) where["rank"] = w.rank, where["ranks"] = w.size;
  if (shard.second > 1) where["shard"] = fmt::format("{}/{}", shard.first, shard.second);
  Runner runner(*def, dir, threads, o.figures, where);

  // The points to run: not complete, resolvable; the largest estimated work first. A point that
  // is bad input is recorded as failed without running.
  std::vector<long> todo;
  std::size_t skipped = 0, bad = 0;
  std::vector<const Point*> order;
  for (const Point& p : def->points) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const Point* a, const Point* b) { return a->work > b->work; });
  long position = 0;
  // Under mpirun only rank 0 looks at the folder (the others ask it for points): one rank's file
  // system checks, not one per rank.
  if (w.mpi && w.rank != 0) order.clear();
  for (const Point* p : order) {
    const bool mine = position++ % shard.second == shard.first;
    if (!mine) continue;
    if (!p->params) {
      if (w.rank == 0) {
        Outcome f;
        f.index = p->index, f.code = exit_code::bad_input, f.error = p->error;
        runner.record_failure(*p, f);
      }
      ++bad;
      continue;
    }
    if (complete(dir, p->hash)) {
      ++skipped;
      continue;
    }
    todo.push_back(p->index);
  }
  if (w.rank == 0 && !o.quiet) {
    fmt::print("sweep {}: {} points{}: {} complete (skipped), {} bad input, {} to run; {} x {} thread{}{}\n", def->e->name, def->points.size(),
               shard.second > 1 ? fmt::format(" (shard {}/{}: {})", shard.first, shard.second, skipped + bad + todo.size()) : "", skipped, bad,
               todo.size(), w.mpi ? fmt::format("{} ranks", w.size) : fmt::format("{} job{}", o.jobs, o.jobs == 1 ? "" : "s"), threads,
               threads == 1 ? "" : "s", w.mpi ? " per rank" : " per point");
    std::fflush(stdout);
  }
  Progress progress(*def, todo.size(), o.quiet || w.rank != 0);
  std::size_t failed = 0;
  if (w.mpi) {
    failed = run_ranks(w, runner, todo, progress);
  } else {
    run_local(runner, todo, o.jobs, progress);
    failed = progress.failed();
  }
  if (w.rank == 0) failed += bad;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int worst = agree(w, failed > 0 ? exit_code::points_failed : exit_code::ok);
  if (w.rank != 0) return worst;

  if (shard.second > 1) {
    fmt::print("shard {}/{}: {} points run in {:.1f} s ({} failed); when every shard is done: tokdyn sweep --collect {}\n", shard.first,
               shard.second, todo.size(), wall, failed, dir.string());
    return worst;
  }
  json info = {{"started_utc", started}, {"wall_time_s", wall}, {"threads_per_point", threads}, {"points_run", todo.size()},
               {"points_skipped", skipped}};
  if (w.mpi) {
    info["ranks"] = w.size;
    info["mpi"] = {{"init_seconds", w.init_seconds}, {"requests", w.requests}, {"dispatch_seconds", w.dispatch_seconds}};
  }
  else info["jobs"] = o.jobs;
  const Collected c = collect(dir, *def->e, stored_definition(dir), info);
  if (!o.quiet)
    fmt::print("wrote {} ({} points: {} ok, {} failed; {:.1f} s)\n", message_line((dir / "sweep.csv").string()), def->points.size(), c.ok, c.failed, wall);
  const int fig = draw_plots(dir, plots);
  if (c.failed + c.missing > 0) return exit_code::points_failed;
  return std::max(worst, fig);
}

}  // namespace tokdyn::sweep
