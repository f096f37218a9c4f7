#pragma once
// Helpers shared by the tests: a self-removing temporary directory and whole-file reads.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tokdyn/io/csv.hpp"

namespace tokdyn::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tokdyn-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Names in `dir` (sorted), except those in `except`.
inline std::vector<std::string> entries(const std::filesystem::path& dir, const std::vector<std::string>& except = {}) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (std::find(except.begin(), except.end(), name) == except.end()) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Regular files under `dir`, recursively, as sorted paths relative to `dir`.
inline std::vector<std::string> files_under(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(std::filesystem::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

struct CliResult {
  int code = -1;
  std::string out, err;
};

/// The tokdyn binary of this build: it sits next to the test binary.
inline std::string tokdyn_binary() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "tokdyn").string();
}

/// The argument vector of `tokdyn args...` for execv, built before a fork (no allocation in the child).
struct TokdynArgv {
  std::vector<std::string> strings;
  std::vector<char*> argv;
  explicit TokdynArgv(const std::vector<std::string>& args) : strings{tokdyn_binary()} {
    strings.insert(strings.end(), args.begin(), args.end());
    for (auto& s : strings) argv.push_back(s.data());
    argv.push_back(nullptr);
  }
  /// In the child: runs tokdyn in `cwd` (exit 126 when cwd is unusable, 127 when exec fails).
  [[noreturn]] void exec_in(const std::filesystem::path& cwd) {
    if (chdir(cwd.c_str()) != 0) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
};

/// Runs the tokdyn binary with `args` in directory `cwd`; captures stdout and stderr.
inline CliResult run_cli(const std::filesystem::path& cwd, const std::vector<std::string>& args) {
  TempDir cap;
  const std::string out_f = (cap.path() / "out").string();
  const std::string err_f = (cap.path() / "err").string();
  TokdynArgv argv(args);
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out_f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = open(err_f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    argv.exec_in(cwd);
  }
  CliResult r;
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)) r.code = WEXITSTATUS(status);
  r.out = slurp(out_f);
  r.err = slurp(err_f);
  return r;
}

/// Rows of a CSV file with a header (RFC 4180 quoting, as CsvWriter writes it), each a map from
/// column name to cell.
inline std::vector<std::map<std::string, std::string>> read_csv_rows(const std::filesystem::path& f) {
  const std::vector<std::vector<std::string>> lines = read_csv(f, "test table");  // io/csv.hpp
  std::vector<std::map<std::string, std::string>> rows;
  for (std::size_t r = 1; r < lines.size(); ++r) {
    std::map<std::string, std::string> m;
    for (std::size_t k = 0; k < lines[0].size() && k < lines[r].size(); ++k) m[lines[0][k]] = lines[r][k];
    rows.push_back(std::move(m));
  }
  return rows;
}

/// The row of a checks.csv whose `check` is `id` (empty map when absent).
inline std::map<std::string, std::string> check_row(const std::vector<std::map<std::string, std::string>>& rows, const std::string& id) {
  for (const auto& r : rows)
    if (r.count("check") && r.at("check") == id) return r;
  return {};
}

/// Sets (or, with nullptr, unsets) an environment variable for the scope; restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ScopedEnv(const char* name, const std::string& value) : ScopedEnv(name, value.c_str()) {}
  ~ScopedEnv() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace tokdyn::testing
