#pragma once
// Shared by the reliability tests (test_reliability_*.cpp, docs/reliability.md): start this
// build's tokdyn in a folder and collect its exit code, stdout and stderr.
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.hpp"

namespace tokdyn::testing::reliability {

namespace fs = std::filesystem;

inline constexpr const char* kQuick = "rope-fig1a";  // a preset that runs in milliseconds

struct Proc {
  pid_t pid = -1;
  fs::path out_file, err_file;
};

struct Spawn {
  std::vector<std::string> args;
  fs::path cwd;
  std::vector<std::string> env;  // extra NAME=value
  bool drop_to_nobody = false;
  std::string binary = {};  // empty: this build's tokdyn
};

/// Starts tokdyn (its stdout and stderr go to files in `cap`).
inline Proc start(const Spawn& s, const fs::path& cap) {
  Proc p;
  p.out_file = cap / "stdout";
  p.err_file = cap / "stderr";
  std::vector<std::string> argv_s = {s.binary.empty() ? tokdyn::testing::tokdyn_binary() : s.binary};
  argv_s.insert(argv_s.end(), s.args.begin(), s.args.end());
  p.pid = fork();
  if (p.pid == 0) {
    setpgid(0, 0);
    if (chdir(s.cwd.c_str()) != 0) _exit(126);
    for (const auto& e : s.env) putenv(const_cast<char*>(e.c_str()));
    const int o = open(p.out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    const int e = open(p.err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (o < 0 || e < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    if (s.drop_to_nobody && getuid() == 0) {
      if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(125);
    }
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return p;
}

struct Result {
  int code = -1;  ///< exit code, or 128 + signal when killed by a signal
  std::string out, err;
};

inline Result finish(const Proc& p) {
  int status = 0;
  Result r;
  if (waitpid(p.pid, &status, 0) == p.pid) {
    if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.code = 128 + WTERMSIG(status);
  }
  r.out = slurp(p.out_file);
  r.err = slurp(p.err_file);
  return r;
}

inline Result run(const Spawn& s) {
  TempDir cap;
  chmod(cap.path().c_str(), 0777);
  return finish(start(s, cap.path()));
}

inline Result run_in(const fs::path& cwd, std::vector<std::string> args, std::vector<std::string> env = {}) {
  return run(Spawn{std::move(args), cwd, std::move(env), false});
}

/// Exactly one line on stderr.
inline void expect_one_line(const std::string& err) {
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.back(), '\n') << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << err;
}

inline void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

}  // namespace tokdyn::testing::reliability
