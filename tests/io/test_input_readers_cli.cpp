// The input readers through the CLI: every class of bad input (see test_input_readers.cpp) ends
// with exit 2, one line on stderr and no output folder.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "input_bytes.hpp"
#include "test_util.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/json_strict.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/io/safetensors.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"
#include "tokdyn/models/mamba2/checkpoint.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::entries;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;

// ---------------------------------------------------------------------------------------------
// Through the CLI: exit 2, one line on stderr, no output folder

namespace {

struct Cli {
  int code = -1;
  std::string out, err;
  bool timed_out = false;
};

/// Runs tokdyn in `cwd`, killing it after `seconds` (a reader that blocks fails, not hangs).
Cli run_tokdyn(const fs::path& cwd, const std::vector<std::string>& args, double seconds = 60) {
  TempDir cap;
  const std::string out_f = (cap.path() / "out").string(), err_f = (cap.path() / "err").string();
  std::vector<std::string> argv_s = {tokdyn::testing::tokdyn_binary()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    const int o = ::open(out_f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = ::open(err_f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0) ::_exit(126);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  Cli r;
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  while (true) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!r.timed_out && WIFEXITED(status)) r.code = WEXITSTATUS(status);
  r.out = slurp(out_f);
  r.err = slurp(err_f);
  return r;
}

std::vector<std::string> small_run(const std::string& checkpoint, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"run", "mamba2-fig1", "--out", "x", "--no-figures", "--quiet", "--set", "checkpoint=" + checkpoint,
                                "--set", "runs=2", "--set", "tokens=3", "--set", "depth=2"};
  for (auto& e : extra) {
    a.push_back("--set");
    a.push_back(e);
  }
  return a;
}

void expect_cli_refusal(const fs::path& cwd, const std::vector<std::string>& args, const std::string& needle) {
  const auto before = entries(cwd);
  const Cli r = run_tokdyn(cwd, args, 30);
  EXPECT_FALSE(r.timed_out) << "tokdyn blocked: " << needle;
  EXPECT_EQ(r.code, 2) << r.err << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(cwd / "x")) << "an output folder was left";
  EXPECT_EQ(entries(cwd), before) << "something was left behind";
}

// A checkpoint directory `name` with the tiny model's weights and the given config.json text.
void checkpoint_with_config(const fs::path& cwd, const std::string& name, const std::string& config) {
  fs::create_directories(cwd / name);
  fs::copy_file(cwd / "ck" / "model.safetensors", cwd / name / "model.safetensors");
  put(cwd / name / "config.json", config);
}

}  // namespace

TEST(InputCli, EveryReaderRefusesBadInputWithExitTwoOneLineNothingWritten) {
  TempDir d;
  const fs::path w = d.path();
  ASSERT_EQ(run_tokdyn(w, {"make-checkpoint", "--size", "tiny", "--out", "ck"}).code, 0);
  const std::string cfg = slurp(w / "ck" / "config.json");
  ASSERT_EQ(run_tokdyn(w, small_run("ck")).code, 0);  // the good checkpoint runs
  fs::remove_all(w / "x");

  // config.json is a FIFO / a symlink to /dev/zero / too large.
  fs::create_directories(w / "fifo");
  fs::copy_file(w / "ck" / "model.safetensors", w / "fifo" / "model.safetensors");
  ASSERT_EQ(::mkfifo((w / "fifo" / "config.json").c_str(), 0600), 0);
  expect_cli_refusal(w, small_run("fifo"), "fifo/config.json: expected a regular file, got a FIFO");
  fs::create_directories(w / "zero");
  fs::copy_file(w / "ck" / "model.safetensors", w / "zero" / "model.safetensors");
  fs::create_symlink("/dev/zero", w / "zero" / "config.json");
  expect_cli_refusal(w, small_run("zero"), "zero/config.json: expected a regular file, got a character device");
  {
    std::string big = cfg;
    big.resize(2 << 20, ' ');
    checkpoint_with_config(w, "big", big);
  }
  expect_cli_refusal(w, small_run("big"), "big/config.json: expected a file of at most 1.0 MiB, got 2.0 MiB");

  // config.json: duplicate key, NaN, a dt clamp.
  {
    std::string dup = cfg;
    dup.replace(dup.find("\"n_layer\": 4"), 12, "\"n_layer\": 4, \"n_layer\": 2");
    checkpoint_with_config(w, "dup", dup);
  }
  expect_cli_refusal(w, small_run("dup"), "dup/config.json: duplicate key 'n_layer'");
  {
    std::string nested = cfg;
    nested.replace(nested.find("\"layer\": \"Mamba2\""), 17, "\"layer\": \"Mamba2\", \"layer\": \"Mamba2\"");
    checkpoint_with_config(w, "dupn", nested);
  }
  expect_cli_refusal(w, small_run("dupn"), "duplicate key 'layer' in 'ssm_cfg'");
  {
    std::string nan = cfg;
    nan.replace(nan.find("\"layer\": \"Mamba2\""), 17, "\"layer\": \"Mamba2\", \"dt_min\": NaN");
    checkpoint_with_config(w, "nan", nan);
  }
  expect_cli_refusal(w, small_run("nan"), "key 'ssm_cfg.dt_min' is NaN");
  {
    std::string clamp = cfg;
    clamp.replace(clamp.find("\"layer\": \"Mamba2\""), 17, "\"layer\": \"Mamba2\", \"dt_limit\": [0.001, 0.1]");
    checkpoint_with_config(w, "clamp", clamp);
  }
  expect_cli_refusal(w, small_run("clamp"), "tokdyn applies no dt clamp");
  {
    std::string inf = cfg;
    inf.replace(inf.find("\"layer\": \"Mamba2\""), 17, "\"layer\": \"Mamba2\", \"dt_limit\": [0.0, Infinity]");
    checkpoint_with_config(w, "inf", inf);
    const Cli r = run_tokdyn(w, small_run("inf"));
    EXPECT_EQ(r.code, 0) << r.err;  // Infinity as the upper dt limit: accepted
    fs::remove_all(w / "x");
  }

  // model.safetensors is a FIFO / /dev/zero.
  fs::create_directories(w / "stfifo");
  fs::copy_file(w / "ck" / "config.json", w / "stfifo" / "config.json");
  ASSERT_EQ(::mkfifo((w / "stfifo" / "model.safetensors").c_str(), 0600), 0);
  expect_cli_refusal(w, small_run("stfifo"), "model.safetensors: expected a regular file, got a FIFO");
  fs::create_directories(w / "stzero");
  fs::copy_file(w / "ck" / "config.json", w / "stzero" / "config.json");
  fs::create_symlink("/dev/zero", w / "stzero" / "model.safetensors");
  expect_cli_refusal(w, small_run("stzero"), "got a character device");

  // token_ids: a FIFO, /dev/zero, a header lying about its shape, too many ids, keys reordered (fine).
  ASSERT_EQ(::mkfifo((w / "ids.npy").c_str(), 0600), 0);
  expect_cli_refusal(w, small_run("ck", {"token_ids=ids.npy"}), "ids.npy: expected a regular file, got a FIFO");
  fs::create_symlink("/dev/zero", w / "zero.npy");
  expect_cli_refusal(w, small_run("ck", {"token_ids=zero.npy"}), "zero.npy: expected a regular file, got a character device");
  put(w / "lie.npy", npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (1048576, 1048576), }\n", le64(1)));
  expect_cli_refusal(w, small_run("ck", {"token_ids=lie.npy"}),
                     "lie.npy: the header's shape (1048576, 1048576) of dtype '<i8' needs 8796093022208 bytes of data");
  {
    std::vector<std::int64_t> twelve(12, 1);
    write_npy(w / "twelve.npy", twelve.data(), {4, 3});
    expect_cli_refusal(w, small_run("ck", {"token_ids=twelve.npy"}), "twelve.npy: the array has shape (4, 3), 12 values; expected at most 6");
  }
  put(w / "lie2.npy", npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }\n", le64(1)));
  expect_cli_refusal(w, small_run("ck", {"token_ids=lie2.npy"}), "needs 48 bytes of data, but the file holds 8 bytes");
  {
    std::string data;
    for (int i = 0; i < 6; ++i) data += le64(i * 100);
    put(w / "ok.npy", npy_bytes("{\"shape\": (2, 3,), \"descr\": \"<i8\", \"fortran_order\": False,}", data));
    const Cli r = run_tokdyn(w, small_run("ck", {"token_ids=ok.npy"}));
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<std::size_t> shape;
    EXPECT_EQ(read_npy_int(w / "x" / "token_ids.npy", shape), (std::vector<std::int64_t>{0, 100, 200, 300, 400, 500}));
    // The manifest records the vocabulary rule.
    const std::string man = slurp(w / "x" / "manifest.json");
    EXPECT_NE(man.find("\"real_vocab_size\": 1000"), std::string::npos) << man;
    EXPECT_NE(man.find("state-spaces config.json: vocab_size 1000 is the real vocabulary"), std::string::npos);
    fs::remove_all(w / "x");
  }
}
