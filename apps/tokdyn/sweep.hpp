#pragma once
// `tokdyn sweep`: one preset over a grid of parameters (docs/sweeps.md).
//
//   tokdyn sweep PRESET|FILE.toml --grid beta=0.5,1,2 --grid n=8:64:x2 [--zip k=SPEC ...]
//                [--points FILE.csv] [--set k=v ...] --out DIR [--jobs N] [--threads T]
//                [--shard I/N] [--figures] [--plot y=NAME,x=PARAM[,hue=PARAM]] [--overwrite] [--quiet]
//   tokdyn sweep --collect DIR [--plot ...]
//   mpirun -np N tokdyn sweep ...            (ranks share the points, rank 0 hands them out)
//
// Layout of DIR:
//   manifest.json        the sweep: its definition (preset, sets, axes, every point's parameters
//                        and hash) and, once collected, each point's status, time, rank and host
//   points/<hash>/       one complete `tokdyn run` result per point (named by a hash of the
//                        point's resolved parameters; published atomically, so present = complete)
//   failed/<hash>.json   a point that failed: its exit code and the CLI's one-line error
//   sweep.csv            one row per point: its parameters, status, every declared scalar summary
//                        and check verdict (the same bytes however the points were run)
//   sweep_<y>_vs_<x>.png the --plot figures
//
// Every point runs as its own `tokdyn run` process (isolated: a failing point cannot take the
// sweep down; its exit code and message are the CLI's own). The points' results do not depend on
// --jobs, --threads, the ranks or the shards (tokdyn's runs give the same bits at any thread count).
#include <string>
#include <vector>

namespace tokdyn::sweep {

struct Options {
  std::string target;                ///< preset or .toml config
  std::vector<std::string> grids;     ///< --grid key=SPEC (cartesian product, in the order given)
  std::vector<std::string> zips;      ///< --zip key=SPEC (moved together: one axis)
  std::string points_file;            ///< --points FILE.csv (one axis: the file's rows)
  std::vector<std::string> sets;      ///< --set key=value (every point)
  std::string out;                    ///< --out DIR
  bool out_given = false;
  int jobs = 1;                       ///< --jobs: points run at once on this machine
  int threads = 0;                    ///< --threads per point (0: cores / jobs, or cores / ranks on a node)
  std::string shard;                  ///< --shard I/N: this process runs every N-th point from I
  std::string collect;                ///< --collect DIR: build sweep.csv from the points present
  bool figures = false;               ///< --figures: each point draws its preset's figures
  std::vector<std::string> plots;     ///< --plot y=NAME,x=PARAM[,hue=PARAM]
  bool overwrite = false;             ///< --overwrite: replace a previous sweep of other parameters
  bool quiet = false;                 ///< --quiet: no line per point
};

/// Runs `tokdyn sweep`; returns the exit code (0, or exit_code::points_failed). Bad input throws
/// InputError (exit 2) before any point runs. Under mpirun (Open MPI found at configure time),
/// every rank calls this; rank 0 writes sweep.csv.
int run(const Options& o, int argc, char** argv);

}  // namespace tokdyn::sweep
