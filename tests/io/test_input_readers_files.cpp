// The input readers never hang and never eat memory: regular files only (FIFO, /dev/zero symlink,
// directory refused at once, missing and unreadable files named), size bounds checked before
// reading or allocating, and the same for the files a safetensors index names (the same classes
// through the CLI: test_input_readers_cli.cpp).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "input_bytes.hpp"
#include "input_readers_fixtures.hpp"
#include "test_util.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/models/mamba2/checkpoint.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/io/safetensors.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::TempDir;
using tokdyn::testing::input_readers::error_of;
using tokdyn::testing::input_readers::kSsSmall;

namespace {

/// Runs `fn` in a child process, which must end (within `seconds`) by throwing InputError whose
/// message contains `needle` and is one line. A reader that blocks fails the test instead of
/// hanging it: the child is killed.
void expect_refused_quickly(const std::function<void()>& fn, const std::string& needle, double seconds = 10) {
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    std::string msg;
    int code = 3;
    try {
      fn();
      msg = "accepted";
    } catch (const InputError& e) {
      msg = e.what();
      code = 0;
    } catch (const std::exception& e) {
      msg = std::string("not an InputError: ") + e.what();
    }
    (void)!::write(pipefd[1], msg.data(), msg.size());
    ::_exit(code);
  }
  ::close(pipefd[1]);
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  bool done = false;
  while (!done) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      done = true;
      break;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ::close(pipefd[0]);
    FAIL() << "the reader blocked for more than " << seconds << " s (expected a refusal containing '" << needle << "')";
  }
  std::string msg;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<std::size_t>(n));
  ::close(pipefd[0]);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << msg;
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_LT(took, 2.0) << "a refusal should be immediate";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Regular files only, size-bounded

TEST(InputFiles, FifoIsRefusedWithoutBlocking) {
  TempDir d;
  const fs::path fifo = d.path() / "config.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused_quickly([&] { mamba2::parse_config(fifo); }, "expected a regular file, got a FIFO");
  expect_refused_quickly([&] { read_regular_file(fifo, 100, "x"); }, "got a FIFO");
  const fs::path ids = d.path() / "ids.npy";
  ASSERT_EQ(::mkfifo(ids.c_str(), 0600), 0);
  expect_refused_quickly([&] {
    std::vector<std::size_t> shape;
    read_npy_int(ids, shape);
  }, "ids.npy: expected a regular file, got a FIFO");
  const fs::path st_fifo = d.path() / "model.safetensors";
  ASSERT_EQ(::mkfifo(st_fifo.c_str(), 0600), 0);
  expect_refused_quickly([&] { st::File f(st_fifo); }, "got a FIFO");
  const fs::path index_fifo = d.path() / "model.safetensors.index.json";
  ASSERT_EQ(::mkfifo(index_fifo.c_str(), 0600), 0);
  expect_refused_quickly([&] { st::Tensors t(d.path()); }, "model.safetensors.index.json: expected a regular file, got a FIFO");
  // The whole checkpoint: config.json is a FIFO.
  expect_refused_quickly([&] { mamba2::load(d.path()); }, "config.json: expected a regular file, got a FIFO");
}

TEST(InputFiles, SymlinkToDevZeroIsRefused) {
  TempDir d;
  for (const char* name : {"config.json", "ids.npy", "model.safetensors", "model.safetensors.index.json"})
    fs::create_symlink("/dev/zero", d.path() / name);
  expect_refused_quickly([&] { mamba2::parse_config(d.path() / "config.json"); }, "got a character device");
  expect_refused_quickly([&] {
    std::vector<std::size_t> shape;
    read_npy_int(d.path() / "ids.npy", shape);
  }, "got a character device");
  expect_refused_quickly([&] { st::File f(d.path() / "model.safetensors"); }, "got a character device");
  expect_refused_quickly([&] { st::Tensors t(d.path()); }, "got a character device");
}

TEST(InputFiles, DirectoryMissingAndUnreadableAreNamed) {
  TempDir d;
  fs::create_directories(d.path() / "dir.json");
  EXPECT_NE(error_of([&] { mamba2::parse_config(d.path() / "dir.json"); }).find("expected a regular file, got a directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] { mamba2::parse_config(d.path() / "none.json"); }).find("cannot open (no such file)"), std::string::npos);
  fs::create_symlink("loop", d.path() / "loop");
  EXPECT_NE(error_of([&] { read_regular_file(d.path() / "loop", 10, "loop"); }).find("symlink loop"), std::string::npos);
  // A path with a newline stays one line in the message.
  const fs::path odd = d.path() / "odd\nname.json";
  EXPECT_NE(error_of([&] { mamba2::parse_config(odd); }).find("odd\\x0aname.json"), std::string::npos);
}

TEST(InputFiles, OversizedFilesAreRefusedBeforeReading) {
  TempDir d;
  // Sparse files: the size is checked from fstat, nothing is read.
  auto sparse = [&](const fs::path& p, std::uint64_t size) {
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
    ::close(fd);
  };
  sparse(d.path() / "config.json", mamba2::kMaxConfigBytes + 1);
  EXPECT_NE(error_of([&] { mamba2::parse_config(d.path() / "config.json"); }).find("expected a file of at most 1.0 MiB, got 1.0 MiB"),
            std::string::npos);
  sparse(d.path() / "model.safetensors.index.json", (64ull << 20) + 1);
  EXPECT_NE(error_of([&] { st::Tensors t(d.path()); }).find("expected a file of at most 64.0 MiB"), std::string::npos);
  sparse(d.path() / "huge.safetensors", (1ull << 40) + 1);
  EXPECT_NE(error_of([&] { st::File f(d.path() / "huge.safetensors"); }).find("expected a file of at most 1024.0 GiB"),
            std::string::npos);
  // token ids: at most header + 8 bytes per id the run uses.
  std::vector<std::int64_t> ids(12, 1);
  write_npy(d.path() / "ids.npy", ids.data(), {3, 4});
  std::vector<std::size_t> shape;
  EXPECT_EQ(read_npy_int(d.path() / "ids.npy", shape, 12), ids);
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "ids.npy", shape, 11); }).find("expected at most 11 values"), std::string::npos);
  sparse(d.path() / "big.npy", 10 * 8 + npy::kMaxPreamble + npy::kMaxHeaderLen + 1);
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "big.npy", shape, 10); }).find("expected a file of at most"), std::string::npos);
  // A config.json that is exactly at the bound is read.
  std::string cfg = std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16}})";
  cfg.resize(mamba2::kMaxConfigBytes, ' ');
  put(d.path() / "edge.json", cfg);
  EXPECT_EQ(mamba2::parse_config(d.path() / "edge.json").d_model, 64);
}

TEST(InputFiles, ModelTooLargeForMemoryIsRefusedBeforeAllocating) {
  // A checkpoint whose config and (sparse) safetensors file agree on a 16M-token vocabulary with
  // d_model 4096: 256 GiB as float32. Refused from the shapes, before any tensor is allocated.
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0 || static_cast<double>(pages) * static_cast<double>(page) > 200e9)
    GTEST_SKIP() << "this machine has 200 GB of RAM or more";
  TempDir d;
  mamba2::Config c;
  c.d_model = 4096, c.n_layer = 1, c.vocab_size = 1 << 24;
  put(d.path() / "config.json", c.to_json().dump());
  const auto D = static_cast<std::uint64_t>(c.d_model), V = static_cast<std::uint64_t>(c.vocab_padded()),
             dip = static_cast<std::uint64_t>(c.d_in_proj()), cd = static_cast<std::uint64_t>(c.conv_dim()),
             H = static_cast<std::uint64_t>(c.nheads()), di = static_cast<std::uint64_t>(c.d_inner());
  const std::vector<std::pair<std::string, std::vector<std::uint64_t>>> tensors = {
      {"backbone.embedding.weight", {V, D}},           {"backbone.norm_f.weight", {D}},
      {"backbone.layers.0.norm.weight", {D}},          {"backbone.layers.0.mixer.in_proj.weight", {dip, D}},
      {"backbone.layers.0.mixer.conv1d.weight", {cd, 1, 4}}, {"backbone.layers.0.mixer.conv1d.bias", {cd}},
      {"backbone.layers.0.mixer.dt_bias", {H}},        {"backbone.layers.0.mixer.A_log", {H}},
      {"backbone.layers.0.mixer.D", {H}},              {"backbone.layers.0.mixer.norm.weight", {di}},
      {"backbone.layers.0.mixer.out_proj.weight", {D, di}}};
  std::string header = "{";
  std::uint64_t off = 0;
  for (const auto& [name, shape] : tensors) {
    std::uint64_t n = 1;
    std::string dims;
    for (auto x : shape) {
      n *= x;
      if (!dims.empty()) dims += ',';
      dims += std::to_string(x);
    }
    if (header.size() > 1) header += ',';
    header += "\"" + name + "\":{\"dtype\":\"F8_E4M3\",\"shape\":[" + dims + "],\"data_offsets\":[" + std::to_string(off) +
              "," + std::to_string(off + n) + "]}";
    off += n;
  }
  header += "}";
  std::string start(8, '\0');
  for (int i = 0; i < 8; ++i) start[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  put(d.path() / "model.safetensors", start + header);
  ASSERT_EQ(::truncate((d.path() / "model.safetensors").c_str(), static_cast<off_t>(8 + header.size() + off)), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string m = error_of([&] { mamba2::load(d.path()); });
  EXPECT_NE(m.find(": the model needs 256.4 GiB as float32 in memory, and this machine has"), std::string::npos) << m;
  EXPECT_NE(m.find("expected a checkpoint that fits in memory"), std::string::npos) << m;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

// ---------------------------------------------------------------------------------------------
// Safetensors index

TEST(SafetensorsIndexStrict, DuplicateKeysInTheIndexAreRefused) {
  TempDir d;
  std::vector<float> v{1, 2};
  st::write_file(d.path() / "a.safetensors", {{"x", st::DType::F32, {2}, v.data()}});
  put(d.path() / "model.safetensors.index.json",
      R"({"metadata": {}, "weight_map": {"x": "a.safetensors", "x": "a.safetensors"}})");
  const std::string m = error_of([&] { st::Tensors t(d.path()); });
  EXPECT_NE(m.find("duplicate key 'x' in 'weight_map'"), std::string::npos) << m;
  fs::remove(d.path() / "model.safetensors.index.json");
  fs::create_symlink("/dev/zero", d.path() / "b.safetensors");
  put(d.path() / "model.safetensors.index.json", R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})");
  expect_refused_quickly([&] { st::Tensors t(d.path()); }, "b.safetensors: expected a regular file, got a character device");
}
