// The output folder of a run: rules, lock, temporary folder, atomic commit (output_folder.hpp).
#include "tokdyn/runtime/output_folder.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <system_error>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"

namespace tokdyn {

namespace fs = std::filesystem;

namespace {

bool is_resource_errno(int e) {
  return e == ENOSPC || e == EACCES || e == EPERM || e == EROFS || e == EDQUOT || e == EIO || e == EMFILE ||
         e == ENFILE || e == ENOMEM || e == EFBIG;
}

/// Process `pid` is alive (or exists but is not ours to signal).
bool process_alive(long pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) == 0) return true;
  return errno == EPERM;
}

/// The pid in "<prefix><digits>[rest]", or -1.
long pid_after(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  long pid = 0;
  std::size_t i = prefix.size();
  if (!std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    pid = pid * 10 + (name[i] - '0');
    if (pid > (1L << 31)) return -1;
  }
  return pid;
}

}  // namespace

FolderKind classify_folder(const fs::path& dir, std::string* why) {
  std::error_code ec;
  const auto st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return FolderKind::Missing;
  if (!fs::is_directory(st)) {
    if (why) *why = fs::is_symlink(st) ? "is a symbolic link" : "exists and is not a directory";
    return FolderKind::Other;
  }
  // Top-level entries (for the message and the empty case).
  std::vector<std::string> names;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) {
    if (why) *why = fmt::format("cannot be read ({})", ec.message());
    return FolderKind::Other;
  }
  if (names.empty()) return FolderKind::EmptyDir;
  std::sort(names.begin(), names.end());
  auto other = [&](const std::string& first) {
    if (why) {
      *why = names.size() == 1 ? fmt::format("holds '{}'", first)
                               : fmt::format("holds '{}' and {} other entr{}", first, names.size() - 1,
                                             names.size() == 2 ? "y" : "ies");
    }
    return FolderKind::Other;
  };
  const std::string first_user = [&] {
    for (const auto& n : names)
      if (n != "manifest.json") return n;
    return names.front();
  }();

  // A tokdyn result: manifest.json (regular file) naming the preset, version and its files.
  nlohmann::json m;
  try {
    const std::string text = read_regular_file(dir / "manifest.json", 64u << 20, "manifest.json");
    m = nlohmann::json::parse(text);
  } catch (...) {
    return other(first_user);
  }
  if (!m.is_object() || !m.contains("preset") || !m["preset"].is_string() || !m.contains("version") ||
      !m["version"].is_string() || !m.contains("files") || !m["files"].is_array())
    return other(first_user);
  std::set<std::string> listed{"manifest.json"};
  std::set<std::string> dirs;
  for (const auto& f : m["files"]) {
    if (!f.is_string()) return other(first_user);
    const std::string s = f.get<std::string>();
    if (s.empty() || s.front() == '/' || s.find("..") != std::string::npos) return other(first_user);
    listed.insert(s);
    for (fs::path a = fs::path(s).parent_path(); !a.empty(); a = a.parent_path()) dirs.insert(a.generic_string());
  }
  // Exactly those files, their folders, nothing else (no symlinks, no extra files).
  std::size_t seen = 0;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(dir).generic_string();
    const auto s = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_directory(s) && !fs::is_symlink(s)) {
      if (!dirs.count(rel)) return other(rel);
      continue;
    }
    if (!fs::is_regular_file(s) || !listed.count(rel)) return other(rel);
    ++seen;
  }
  if (ec) {
    if (why) *why = fmt::format("cannot be read ({})", ec.message());
    return FolderKind::Other;
  }
  if (seen != listed.size()) return other(first_user);  // a listed file is missing: not intact
  if (why) *why = fmt::format("holds a previous tokdyn result (preset {})", m["preset"].get<std::string>());
  return FolderKind::TokdynResult;
}

/// Marks a folder as tokdyn's own temporary folder: only marked folders are ever removed as stale.
constexpr const char* kTempMarker = ".tokdyn-temporary";

int remove_stale_temporaries(const fs::path& dir) {
  const fs::path parent = dir.parent_path();
  const std::string name = dir.filename().string();
  int removed = 0;
  std::error_code ec;
  const bool target_exists = fs::exists(fs::symlink_status(dir, ec));
  for (auto it = fs::directory_iterator(parent, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string n = it->path().filename().string();
    long pid = pid_after(n, name + ".tmp-");
    bool old = false;
    if (pid < 0) {
      pid = pid_after(n, name + ".old-");  // earlier versions moved a replaced result aside
      old = pid >= 0;
    }
    if (pid < 0 || process_alive(pid)) continue;
    if (old && !target_exists) continue;  // the only copy of a previous result: keep it
    std::error_code mk;
    if (!old && !fs::is_regular_file(fs::symlink_status(it->path() / kTempMarker, mk))) continue;  // not ours
    std::error_code rm;
    fs::remove_all(it->path(), rm);
    if (!rm) ++removed;
  }
  return removed;
}

OutputFolder::OutputFolder(const fs::path& out, bool overwrite, std::string what)
    : shown_(std::move(what)), overwrite_(overwrite) {
  const std::string shown_path = out.string();
  shown_ = fmt::format("{} '{}'", shown_, shown_path);
  if (out.empty()) throw InputError(fmt::format("{}: empty path; expected a folder name", shown_));
  std::error_code ec;
  fs::path t = fs::absolute(out, ec).lexically_normal();
  if (ec) throw InputError(fmt::format("{}: {}", shown_, ec.message()));
  if (!t.has_filename() && t.has_parent_path() && t != t.root_path()) t = t.parent_path();  // "x/" -> "x"
  if (t == t.root_path() || !t.has_filename() || t.filename() == ".." || t.filename() == ".")
    throw InputError(fmt::format("{}: not a usable folder (the root or a relative step); expected a new folder name", shown_));
  target_ = t;
  parent_ = t.parent_path();

  // The working directory, or any folder containing it, is never a run folder.
  const fs::path cwd = fs::canonical(fs::current_path(ec), ec);
  const fs::path real = fs::weakly_canonical(target_, ec);
  if (!cwd.empty() && !real.empty()) {
    auto [a, b] = std::mismatch(real.begin(), real.end(), cwd.begin(), cwd.end());
    if (a == real.end())
      throw InputError(fmt::format("{}: contains the working directory; expected a new folder for the results", shown_));
  }

  // Parents: create what is missing, remembering the topmost created (removed again on failure).
  for (fs::path a = parent_; !a.empty() && !fs::exists(fs::symlink_status(a, ec)); a = a.parent_path()) {
    first_created_ = a;
    if (a == a.parent_path()) break;
  }
  fs::create_directories(parent_, ec);
  if (ec) {
    const int e = ec.value();
    remove_created_parents();
    const std::string msg = fmt::format("{}: cannot create '{}' ({})", shown_, parent_.string(), open_failure_text(e));
    if (is_resource_errno(e)) throw ResourceError(msg);
    throw InputError(msg);
  }
  if (!fs::is_directory(parent_, ec)) {
    remove_created_parents();
    throw InputError(fmt::format("{}: '{}' is not a directory", shown_, parent_.string()));
  }

  // The lock: one run at a time per output folder. Created and registered for removal inside a
  // critical section: an interrupt between the open and the registration would leave the file.
  lock_path_ = parent_ / ("." + target_.filename().string() + ".tokdyn-lock");
  {
    const interrupt::CriticalSection creating;
    for (int attempt = 0;; ++attempt) {
      lock_fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (lock_fd_ < 0) {
        const int e = errno;
        remove_created_parents();
        const std::string msg =
            fmt::format("{}: cannot create the lock file '{}' ({})", shown_, lock_path_.string(), open_failure_text(e));
        if (is_resource_errno(e)) throw ResourceError(msg);
        throw InputError(msg);
      }
      if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
        char buf[32] = {0};
        const ssize_t n = ::pread(lock_fd_, buf, sizeof buf - 1, 0);
        ::close(lock_fd_);
        lock_fd_ = -1;
        const std::string holder = n > 0 ? fmt::format(" (pid {})", std::string(buf, static_cast<std::size_t>(n))) : "";
        throw BusyError(fmt::format("{}: another tokdyn run is writing it{}; wait for it to finish or choose another folder",
                                    shown_, holder));
      }
      // The file may have been unlinked by its previous holder between our open and our lock.
      struct stat a {}, b {};
      if (::fstat(lock_fd_, &a) == 0 && ::stat(lock_path_.c_str(), &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
        break;
      ::close(lock_fd_);
      lock_fd_ = -1;
      if (attempt > 100) throw BusyError(fmt::format("{}: cannot take the lock '{}'", shown_, lock_path_.string()));
    }
    lock_guard_ = std::make_unique<interrupt::PathGuard>(lock_path_);
  }
  const std::string pid = std::to_string(static_cast<long>(::getpid()));
  if (::ftruncate(lock_fd_, 0) == 0) (void)!::pwrite(lock_fd_, pid.data(), pid.size(), 0);

  try {
    check_target();
    remove_stale_temporaries(target_);
    tmp_ = parent_ / (target_.filename().string() + ".tmp-" + pid);
    if (fs::exists(fs::symlink_status(tmp_, ec))) {  // an earlier process with our pid, or a user's folder
      if (!fs::is_regular_file(fs::symlink_status(tmp_ / kTempMarker, ec)))
        throw InputError(fmt::format("{}: '{}' exists and is not a tokdyn temporary folder; move it away", shown_, tmp_.string()));
      fs::remove_all(tmp_, ec);
    }
    tmp_guard_ = std::make_unique<interrupt::PathGuard>(tmp_);
    if (!fs::create_directory(tmp_, ec) || ec) {
      const int e = ec ? ec.value() : EEXIST;
      const std::string msg = fmt::format("{}: cannot create '{}' ({})", shown_, tmp_.string(), open_failure_text(e));
      if (is_resource_errno(e)) throw ResourceError(msg);
      throw InputError(msg);
    }
    std::ofstream(tmp_ / kTempMarker).put('\n');
  } catch (...) {
    tmp_guard_.reset();
    if (!tmp_.empty()) fs::remove_all(tmp_, ec);
    ::unlink(lock_path_.c_str());
    ::close(lock_fd_);
    lock_fd_ = -1;
    lock_guard_.reset();
    remove_created_parents();
    throw;
  }
}

void OutputFolder::check_target() {
  std::string why;
  switch (classify_folder(target_, &why)) {
    case FolderKind::Missing: replaces_ = false; return;
    case FolderKind::EmptyDir: replaces_ = false; return;
    case FolderKind::TokdynResult:
      if (!overwrite_)
        throw InputError(fmt::format("{}: {}; pass --overwrite to replace it, or choose another folder", shown_, why));
      replaces_ = true;
      return;
    case FolderKind::Other:
      throw InputError(fmt::format("{}: {}; tokdyn only replaces its own results, choose a new folder", shown_, why));
  }
}

void OutputFolder::remove_created_parents() {
  if (first_created_.empty()) return;
  std::error_code ignore;
  for (fs::path a = parent_;; a = a.parent_path()) {
    if (!fs::remove(a, ignore)) break;  // stops at the first non-empty directory
    if (a == first_created_ || a == a.parent_path()) break;
  }
  first_created_.clear();
}

void OutputFolder::commit() {
  interrupt::CriticalSection cs;  // an interrupt waits until the result is in place
  check_target();                 // the folder may have changed during the run
  std::error_code ec;
  fs::remove(tmp_ / kTempMarker, ec);  // the published folder holds exactly the results
  const bool exists = fs::exists(fs::symlink_status(target_, ec));
  if (exists && replaces_) {
    // Atomic exchange: the new result takes the name, the previous one moves to our tmp name.
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) == 0) {
      committed_ = true;
      fs::remove_all(tmp_, ec);  // the previous result
      return;
    }
    if (errno != EINVAL && errno != ENOSYS) {
      const int e = errno;
      const std::string msg = fmt::format("{}: cannot put the results in place ({})", shown_, open_failure_text(e));
      if (is_resource_errno(e)) throw ResourceError(msg);
      throw std::runtime_error(msg);
    }
    // File system without RENAME_EXCHANGE: move the previous result aside, then rename.
    const fs::path old = parent_ / (target_.filename().string() + ".tmp-" + std::to_string(::getpid()) + ".old");
    fs::rename(target_, old, ec);
    if (ec) throw ResourceError(fmt::format("{}: cannot move the previous result aside ({})", shown_, ec.message()));
    fs::rename(tmp_, target_, ec);
    if (ec) {
      std::error_code ignore;
      fs::rename(old, target_, ignore);
      throw ResourceError(fmt::format("{}: cannot put the results in place ({})", shown_, ec.message()));
    }
    committed_ = true;
    fs::remove_all(old, ec);
    return;
  }
  // Missing or empty: a plain rename (replaces an empty directory atomically).
  fs::rename(tmp_, target_, ec);
  if (ec) {
    const int e = ec.value();
    const std::string msg = fmt::format("{}: cannot put the results in place ({})", shown_, open_failure_text(e));
    if (is_resource_errno(e)) throw ResourceError(msg);
    throw InputError(msg);
  }
  committed_ = true;
}

OutputFolder::~OutputFolder() {
  std::error_code ec;
  if (!committed_ && !tmp_.empty()) fs::remove_all(tmp_, ec);
  tmp_guard_.reset();
  if (lock_fd_ >= 0) {
    ::unlink(lock_path_.c_str());  // while still holding it (see the inode check in the constructor)
    ::close(lock_fd_);
  }
  lock_guard_.reset();
  if (!committed_) remove_created_parents();
}

}  // namespace tokdyn
