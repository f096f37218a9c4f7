#pragma once
// Runs a preset in-process at a test's reduced size: the test's small settings, each extra value
// replacing the small one of the same key (a key is set once), results in a folder of a TempDir.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "test_util.hpp"
#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn::testing {

using Sets = std::vector<std::pair<std::string, std::string>>;

/// `small` with `extra` merged in (extra wins on a shared key).
inline Sets merged_sets(Sets small, const Sets& extra) {
  for (const auto& kv : extra) {
    auto it = std::find_if(small.begin(), small.end(), [&](const auto& s) { return s.first == kv.first; });
    if (it != small.end())
      it->second = kv.second;
    else
      small.push_back(kv);
  }
  return small;
}

/// Runs `preset` with `sets` (no figures, no progress) into dir/name; returns that folder.
inline std::filesystem::path run_preset(const std::filesystem::path& dir, const std::string& preset, const std::string& name,
                                        int threads, const Sets& sets) {
  const Experiment* e = find_experiment(preset);
  EXPECT_NE(e, nullptr) << preset;
  const std::filesystem::path out = dir / name;
  if (e) run_experiment(*e, resolve_params(*e, sets), out, threads, /*figures=*/false, /*show_progress=*/false);
  return out;
}

}  // namespace tokdyn::testing
