#pragma once
// `tokdyn report DIR... [--out REPORT]`: static, self-contained HTML pages of results folders.
//
// DIR may be one run (a folder with a run's manifest.json), a sweep (its manifest says
// "tokdyn-sweep"), or any folder holding runs and sweeps below it. The report is a folder of its own
// (default: DIR-report beside DIR; with several DIRs --out is required), never written into the
// results, which stay exactly what the run published:
//   REPORT/index.html            the run's page, the sweep's page, or an index of every run found
//   REPORT/runs/NAME.html        one page per run (index reports)
//   REPORT/sweeps/NAME/index.html, .../points/HASH.html   a sweep and its points
// A run's page: its parameters, verdicts (checks.csv: value, criterion, reference kind, reference,
// pass/fail), summaries beside the paper's values, every figure (embedded), every table (the first
// rows), notes, provenance and links to every raw file. No script, no network: it opens from disk.
// A reproduction (`tokdyn reproduce`, manifest kind "tokdyn-reproduction") gets its table of every
// paper number and verdict at the top of the index, then the index of its runs.
// Rerunning replaces the previous report (and only a previous report).
#include <string>
#include <vector>

namespace tokdyn::report_cli {

struct Options {
  std::vector<std::string> dirs;
  std::string out;
  bool out_given = false;
  std::string title;   ///< the index page's title (default "tokdyn results")
  bool quiet = false;  ///< no "wrote ..." line (a caller reports)
};

/// Writes the report; prints "wrote REPORT/index.html (...)". Throws InputError on bad input.
int run(const Options& o);

}  // namespace tokdyn::report_cli
