#pragma once
// `tokdyn reproduce PAPER [--quick] [--out DIR]`: every preset of a paper, one folder, one report.
//
// PAPER is attention-within, rope, coupling or all. Each preset runs at its defaults (the paper's
// sizes) or, with --quick, at the reduced sizes listed in reproduce.cpp, into DIR/<preset>/ (its
// own results folder, manifest and figures, exactly as `tokdyn run` writes it). Then
//   DIR/reproduction.csv   every number the paper prints beside tokdyn's (the presets' summaries
//                          with a paper value) and every verdict row of the presets' checks.csv:
//                          paper value, tokdyn's value, difference, criterion, reference kind,
//                          verdict and the command that reruns that preset alone
//   DIR/presets.csv        one row per preset: checks made, failed, n/a, paper numbers, wall time
//   DIR/report/index.html  the report (`tokdyn report`): the reproduction table, then a page per run
//   DIR/manifest.json      kind "tokdyn-reproduction": paper, quick, counts by reference kind
// DIR is published atomically like a run's folder (runtime/output_folder.hpp); scripts/
// reproduction_tables.py turns reproduction.csv into docs/reproduction.md's generated tables.
#include <string>
#include <vector>

namespace tokdyn::reproduce_cli {

struct Options {
  std::string paper;
  bool quick = false;
  std::string out;
  bool out_given = false;
  bool overwrite = false;
  bool no_figures = false;
  int threads = 1;
  std::string presets;  ///< --presets a,b: only these presets of the paper (empty: all)
};

/// The papers `tokdyn reproduce` knows (all included).
std::vector<std::string> papers();

/// Runs the reproduction; prints the folder, the counts and the report's path. Throws InputError.
int run(const Options& o);

}  // namespace tokdyn::reproduce_cli
