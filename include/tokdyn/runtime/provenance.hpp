#pragma once
// Provenance of a run (issue 38): what a manifest records so that a run can be traced and replayed.
//   "command"      the exact command line of the process that ran it (when the CLI set one), and
//   "working_directory"  the folder it ran in (relative paths in the command and parameters)
//   "set"          the parameters given explicitly (a config file or --set), as JSON values
//   "config_file"  {path, size, sha256} of the TOML file the parameters came from
//   "input_files"  one {param, path, size, sha256} per file a path parameter names (a directory:
//                  each regular file in it); sha256 is null above the hashing budget
//   "versions"     tokdyn, the compiler and the libraries it was built with; "plotting" (python,
//                  numpy, matplotlib) is added by the figure process
// and `tokdyn run DIR/manifest.json` replays a manifest: the same preset and parameters, after
// checking that every recorded input is unchanged.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn {

/// Records this process's command line (shell-quoted) for the manifests it writes. Called by the
/// CLI's main(); library callers that never call it get no "command" entry.
void set_command_line(int argc, const char* const* argv);
/// The recorded command line ("" when none).
const std::string& command_line();
/// One argument quoted for a POSIX shell when it needs it.
std::string shell_quote(const std::string& arg);

/// The provenance entries of a run of `e` with `p` ("command", "set", "config_file", "input_files",
/// "versions"), merged into its manifest by run_experiment.
nlohmann::json provenance_json(const Experiment& e, const Params& p);
/// tokdyn's version and the libraries it was built with.
nlohmann::json versions_json();
/// {path, size, sha256} of one file (sha256 null when the file is larger than `max_hash_bytes`).
nlohmann::json file_fingerprint(const std::filesystem::path& file, std::uintmax_t max_hash_bytes);

/// A manifest to replay: its preset and the `--set` pairs that reproduce its parameters.
struct Replay {
  const Experiment* experiment = nullptr;
  std::vector<std::pair<std::string, std::string>> sets;
  nlohmann::json manifest;
};
/// True when `target` names a manifest to replay (a .json file).
bool is_manifest_target(const std::string& target);
/// Reads `file` (a run's manifest.json), checks that the inputs it records are unchanged, and
/// returns what to run. `overrides` (--set key=value) replace recorded values. Throws InputError
/// naming the file and what was expected (a sweep's manifest, an unknown preset, a changed input,
/// parameters that cannot be reproduced by this version of tokdyn).
Replay replay_of_manifest(const std::filesystem::path& file,
                          const std::vector<std::pair<std::string, std::string>>& overrides);

}  // namespace tokdyn
