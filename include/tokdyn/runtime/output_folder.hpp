#pragma once
// The folder a run writes: user paths are never lost.
//
// `--out DIR` may name
//   - a path that does not exist (created, with its missing parents),
//   - an empty directory, or
//   - a previous tokdyn result — a directory whose manifest.json says so and whose contents are
//     exactly the files that manifest lists — and then only with `--overwrite`.
// Anything else is refused (InputError, exit 2) and left untouched: a non-empty folder tokdyn did
// not write, the working directory or any folder containing it, a symbolic link, a file.
//
// The run writes into `<DIR>.tmp-<pid>` next to DIR, registered for removal on interrupt. commit()
// publishes it atomically (rename, or an atomic exchange with the previous result, which is then
// removed). A lock (`.<name>.tokdyn-lock` beside DIR, flock) keeps two runs off the same DIR: the
// second gets BusyError (exit 6). Temporary folders of dead tokdyn processes are removed on the
// next run into the same DIR.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tokdyn/core/interrupt.hpp"

namespace tokdyn {

/// What an existing path holds, for the rules above.
enum class FolderKind { Missing, EmptyDir, TokdynResult, Other };
/// Classifies `dir` (a previous result must match its manifest exactly). `why` says what makes
/// it Other (e.g. "holds 'thesis.tex' and 3 other entries"), and for a result which preset wrote it.
FolderKind classify_folder(const std::filesystem::path& dir, std::string* why = nullptr);

class OutputFolder {
 public:
  /// Checks `out` by the rules, takes the lock, removes stale temporary folders, creates the
  /// temporary folder. `what` names the input in messages ("output directory", "--out").
  OutputFolder(const std::filesystem::path& out, bool overwrite, std::string what = "output directory");
  ~OutputFolder();  ///< removes the temporary folder and created parents unless committed; unlocks
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  const std::filesystem::path& tmp() const { return tmp_; }
  const std::filesystem::path& target() const { return target_; }
  /// True when a previous result will be (or was) replaced.
  bool replaces() const { return replaces_; }
  /// Publishes the temporary folder as the target (atomically; replaces a previous result).
  void commit();

 private:
  std::filesystem::path target_, parent_, tmp_, lock_path_, first_created_;
  std::string shown_;
  bool overwrite_ = false;
  bool replaces_ = false;
  bool committed_ = false;
  int lock_fd_ = -1;
  std::unique_ptr<interrupt::PathGuard> tmp_guard_, lock_guard_;
  void check_target();
  void remove_created_parents();
};

/// Removes `<dir>.tmp-<pid>...` and `<dir>.old-<pid>` folders beside `dir` whose process is dead.
/// Returns how many were removed.
int remove_stale_temporaries(const std::filesystem::path& dir);

}  // namespace tokdyn
