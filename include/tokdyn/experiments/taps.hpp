#pragma once
// State taps, one convention for every depth model: a `taps` parameter selects layers ("all",
// ranges "a:b:s", lists "0,5,10", or combinations "0,10:200:10"), and the state after each selected
// layer is written as taps/<variant>/layer_K.npy, shape [runs, tokens, d], in the model's
// precision (StateTapObserver into an NpyFolderSink). Layer 0 is the start state.
#include <filesystem>
#include <string>
#include <vector>

#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn {

/// The layers `text` selects in 0..depth, sorted, each once. "" selects none; "all" every layer;
/// "a:b" the layers a..b; "a:b:s" every s-th from a up to b; items joined by commas. InputError
/// naming parameter `key` for bad syntax, a step < 1, b < a, or a layer outside [0, depth].
std::vector<long> parse_taps(const std::string& text, long depth, const std::string& key = "taps");

/// The `taps` parameter (a string in the syntax above); `what` says what a tap holds.
ParamSpec taps_param(const std::string& what);

/// taps/<variant> under a results folder: the one layout of state taps.
inline std::filesystem::path taps_dir(const std::filesystem::path& out, const std::string& variant) {
  return out / "taps" / variant;
}

}  // namespace tokdyn
