// The input readers never hang, never eat memory, never accept wrong numbers: regular files only
// (FIFO, /dev/zero symlink, directory refused at once), size bounds, the .npy header parser, the
// strict config.json reader (duplicate keys, NaN/Infinity, fields tokdyn does not apply), the
// real vocabulary in both config layouts (the same classes through the CLI:
// test_input_readers_cli.cpp).
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
#include "tokdyn/error.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/json_strict.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/io/safetensors.hpp"
#include "tokdyn/models/mamba2.hpp"
#include "tokdyn/io/mamba2_checkpoint.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;
using tokdyn::testing::entries;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;

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

/// The InputError message of `fn` (or a failure when it does not throw one).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m;
  }
  ADD_FAILURE() << "accepted";
  return {};
}

void expect_config_refused(const std::string& text, const std::string& needle) {
  const std::string m = error_of([&] { mamba2::parse_config_text(text, "cfg.json"); });
  EXPECT_EQ(m.rfind("cfg.json: ", 0), 0u) << m;
  EXPECT_NE(m.find(needle), std::string::npos) << "config: " << text << "\nmessage: " << m;
  EXPECT_NE(m.find("expected"), std::string::npos) << m;
}

// A .npy file: magic, version, header length, the header text as given, then `data`.
const char* const kSs130m =
    R"({"d_model": 768, "d_intermediate": 0, "n_layer": 24, "vocab_size": 50277, "ssm_cfg": {"layer": "Mamba2"},
        "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": true, "residual_in_fp32": true, "fused_add_norm": true,
        "pad_vocab_size_multiple": 16, "tie_embeddings": true})";
// The Hugging Face port's config of the same model (as the HF conversion script writes it).
const char* const kHf130m =
    R"({"architectures": ["Mamba2ForCausalLM"], "bos_token_id": 0, "chunk_size": 256, "conv_kernel": 4,
        "eos_token_id": 0, "expand": 2, "head_dim": 64, "hidden_act": "silu", "hidden_size": 768,
        "initializer_range": 0.1, "layer_norm_epsilon": 1e-05, "model_type": "mamba2", "n_groups": 1,
        "num_heads": 24, "num_hidden_layers": 24, "pad_token_id": 0, "rescale_prenorm_residual": false,
        "residual_in_fp32": true, "rms_norm": true, "state_size": 128, "tie_word_embeddings": true,
        "time_step_floor": 0.0001, "time_step_limit": [0.0, Infinity], "time_step_max": 0.1, "time_step_min": 0.001,
        "time_step_rank": 48, "torch_dtype": "float32", "transformers_version": "4.44.0", "use_bias": false,
        "use_cache": true, "use_conv_bias": true, "vocab_size": 50288})";
const std::string kHfSmall =
    R"("hidden_size": 64, "num_heads": 8, "head_dim": 16, "n_groups": 1, "state_size": 16, "num_hidden_layers": 2, "vocab_size": 1008)";
const std::string kSsSmall = R"("d_model": 64, "n_layer": 2, "vocab_size": 1000)";

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
// .npy header parser

TEST(NpyHeader, KeysInAnyOrderQuotesSpacesAndTrailingCommas) {
  TempDir d;
  const std::string data = le64(5) + le64(-7) + le64(123456789012345) + le64(0) + le64(1) + le64(2);
  const std::vector<std::int64_t> expect{5, -7, 123456789012345, 0, 1, 2};
  const char* dicts[] = {
      "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }          \n",
      "{'shape': (2, 3), 'descr': '<i8', 'fortran_order': False}\n",
      "{\"fortran_order\":False,\"shape\":(2,3,),\"descr\":\"<i8\",}",
      "{ 'descr' : '<i8' ,\n 'fortran_order' : False ,\t'shape' : ( 2 , 3 ) }",
      "{'descr': '<i8', 'fortran_order': False, 'shape': (2L, 3L), }\n",
  };
  for (const char* dict : dicts) {
    for (int major : {1, 2, 3}) {
      put(d.path() / "a.npy", npy_bytes(dict, data, major));
      std::vector<std::size_t> shape;
      EXPECT_EQ(read_npy_int(d.path() / "a.npy", shape), expect) << dict << " v" << major;
      EXPECT_EQ(shape, (std::vector<std::size_t>{2, 3})) << dict;
    }
  }
}

TEST(NpyHeader, LyingShapeIsRefusedBeforeAllocating) {
  TempDir d;
  // 130 bytes claiming 2^40 int64 values: refused from the header (no 8 TiB allocation).
  std::string dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (1048576, 1048576), }";
  dict.resize(118, ' ');
  dict += '\n';
  const std::string file = npy_bytes(dict, std::string(1, '\0'));
  ASSERT_EQ(file.size(), 130u);
  put(d.path() / "lie.npy", file);
  std::vector<std::size_t> shape;
  const std::string m = error_of([&] { read_npy_int(d.path() / "lie.npy", shape, std::uint64_t(1) << 62); });
  EXPECT_NE(m.find("shape (1048576, 1048576) of dtype '<i8' needs 8796093022208 bytes of data, but the file holds 1 bytes"),
            std::string::npos) << m;
  // A shape whose product overflows 64 bits.
  put(d.path() / "ovf.npy", npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }\n", ""));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "ovf.npy", shape); }).find("more than 2^64 bytes"), std::string::npos);
  // Short and long data.
  put(d.path() / "short.npy", npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }\n", std::string(8, '\0')));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "short.npy", shape); }).find("needs 12 bytes of data, but the file holds 8"),
            std::string::npos);
  put(d.path() / "long.npy", npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }\n", std::string(8, '\0')));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "long.npy", shape); }).find("needs 4 bytes of data, but the file holds 8"),
            std::string::npos);
  // A header length past the end of the file.
  std::string cut = npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }\n", "");
  put(d.path() / "cut.npy", cut.substr(0, 30));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "cut.npy", shape); }).find("runs past the end of the file"), std::string::npos);
}

TEST(NpyHeader, MalformedDictsAreRefusedWithTheirPosition) {
  const std::string base = "'fortran_order': False, 'shape': (1,)";
  struct Case {
    std::string dict, needle;
  };
  const Case cases[] = {
      {"{'descr': '<i8', 'descr': '<i8', " + base + "}", "key 'descr' given twice"},
      {"{'descr': '<i8', " + base + ", 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<i8', 'fortran_order': False}", "has no 'shape'"},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (1)}", "shape (1) is an integer, not a tuple"},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': [1]}", "a tuple of integers"},
      {"{'descr': '<i8', 'fortran_order': false, 'shape': (1,)}", "True or False"},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (-1,)}", "a non-negative integer"},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (01,)}", "leading zero"},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (18446744073709551616,)}", "above 2^64 - 1"},
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (1,)} x", "after the dict"},
      {"{'descr': '<i8' 'fortran_order': False, 'shape': (1,)}", "',' or '}'"},
      {"{'descr': '<i\\x38', " + base + "}", "inside a string"},
      {"{'descr': [('a', '<i8')], " + base + "}", "a quoted dtype string"},
      {"{'descr': '<U8', " + base + "}", "not a simple numeric dtype"},
      {"{'descr': '|O', " + base + "}", "not a simple numeric dtype"},
      {"{'descr': '|i8', " + base + "}", "no byte order ('|')"},
      {"{'descr': '<i3', " + base + "}", "not a simple numeric dtype"},
      {"{'descr': '<i8', " + base, "',' or '}'"},
  };
  for (const Case& c : cases) {
    const std::string file = npy_bytes(c.dict + "\n", std::string(8, '\0'));
    const std::string m = error_of([&] {
      npy::parse_header(reinterpret_cast<const unsigned char*>(file.data()), file.size(), file.size(), "t.npy");
    });
    EXPECT_EQ(m.rfind("t.npy: ", 0), 0u) << m;
    EXPECT_NE(m.find(c.needle), std::string::npos) << c.dict << "\n" << m;
    EXPECT_NE(m.find("expected"), std::string::npos) << m;
  }
  // Preamble problems.
  for (auto [bytes, needle] : {std::pair<std::string, std::string>{"PK\x03\x04", "no \\x93NUMPY magic"},
                               {std::string("\x93NUMPY\x04\x00\x10\x00", 10), "version 4.0"},
                               {std::string("\x93NUMPY\x01\x01\x10\x00", 10), "version 1.1"},
                               {std::string("\x93NUMPY\x02\x00\x00\x00\x00\x01", 12), "above the maximum 65536"},
                               {std::string("\x93NUMPY\x01", 7), "ends inside the preamble"}}) {
    const std::string m = error_of([&] {
      npy::parse_header(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), bytes.size(), "t.npy");
    });
    EXPECT_NE(m.find(needle), std::string::npos) << m;
  }
}

TEST(NpyHeader, DtypesByteOrderAndFortranOrder) {
  TempDir d;
  std::vector<std::size_t> shape;
  // Big-endian int32, 2 x 2, Fortran order: file order (0,0), (1,0), (0,1), (1,1).
  const std::string be = std::string("\x00\x00\x00\x01", 4) + std::string("\xff\xff\xff\xfe", 4) +
                         std::string("\x00\x00\x00\x03", 4) + std::string("\x80\x00\x00\x00", 4);
  put(d.path() / "be.npy", npy_bytes("{'descr': '>i4', 'fortran_order': True, 'shape': (2, 2), }\n", be));
  EXPECT_EQ(read_npy_int(d.path() / "be.npy", shape), (std::vector<std::int64_t>{1, 3, -2, -2147483648LL}));
  // 3-D Fortran order, little-endian uint16: value = f-order position.
  std::string le;
  for (int i = 0; i < 12; ++i) le += std::string{static_cast<char>(i), '\0'};
  put(d.path() / "f3.npy", npy_bytes("{'descr': '<u2', 'fortran_order': True, 'shape': (2, 3, 2), }\n", le));
  const auto f3 = read_npy_int(d.path() / "f3.npy", shape);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 2; ++k)
        EXPECT_EQ(f3[(i * 3 + j) * 2 + k], static_cast<std::int64_t>(i + 2 * j + 6 * k));
  // Unsigned 64-bit above INT64_MAX, floats, bools: refused by name.
  put(d.path() / "u8.npy", npy_bytes("{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }\n", std::string(8, '\xff')));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "u8.npy", shape); }).find("above 2^63 - 1"), std::string::npos);
  put(d.path() / "f8.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n", std::string(8, '\0')));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "f8.npy", shape); }).find("dtype '<f8' is not an integer type"),
            std::string::npos);
  put(d.path() / "b1.npy", npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }\n", std::string(1, '\1')));
  EXPECT_NE(error_of([&] { read_npy_int(d.path() / "b1.npy", shape); }).find("not an integer type"), std::string::npos);
  // Scalars and empty arrays.
  put(d.path() / "s.npy", npy_bytes("{'descr': '|i1', 'fortran_order': False, 'shape': (), }\n", "\xfe"));
  EXPECT_EQ(read_npy_int(d.path() / "s.npy", shape), (std::vector<std::int64_t>{-2}));
  EXPECT_TRUE(shape.empty());
  put(d.path() / "z.npy", npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 18446744073709551615), }\n", ""));
  EXPECT_TRUE(read_npy_int(d.path() / "z.npy", shape).empty());
}

TEST(NpyHeader, NumpyWrittenFilesReadTheSame) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no numpy";
  TempDir d;
  const std::string script =
      "import numpy as np, sys\n"
      "a = np.arange(24, dtype=np.int64).reshape(2, 3, 4) * 1000003 - 5000\n"
      "d = sys.argv[1]\n"
      "for t in ['<i8', '>i8', '<i4', '>u4', '<i2', '|u1', '|i1', '<u8']:\n"
      "    np.save(d + '/c' + t[1:] + ('be' if t[0] == '>' else '') + '.npy', (a % 100 if t[1:] in ('u1', 'i1') else a if t[1] != 'u' else abs(a)).astype(t))\n"
      "np.save(d + '/fortran.npy', np.asfortranarray(a))\n"
      "np.lib.format.write_array(open(d + '/v2.npy', 'wb'), a, version=(2, 0))\n"
      "np.lib.format.write_array(open(d + '/v3.npy', 'wb'), a, version=(3, 0))\n";
  put(d.path() / "w.py", script);
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (d.path() / "w.py").string() + " " + d.path().string()).c_str()), 0);
  std::vector<std::int64_t> a(24);
  for (int i = 0; i < 24; ++i) a[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(i) * 1000003 - 5000;
  std::vector<std::size_t> shape;
  for (const char* f : {"ci8.npy", "ci8be.npy", "ci4.npy", "fortran.npy", "v2.npy", "v3.npy"}) {
    EXPECT_EQ(read_npy_int(d.path() / f, shape), a) << f;
    EXPECT_EQ(shape, (std::vector<std::size_t>{2, 3, 4})) << f;
  }
  for (const char* f : {"cu4be.npy", "cu8.npy"}) {
    std::vector<std::int64_t> b(a);
    for (auto& v : b) v = std::abs(v);
    EXPECT_EQ(read_npy_int(d.path() / f, shape), b) << f;
  }
  {
    std::vector<std::int64_t> b(a);
    for (auto& v : b) v = static_cast<std::int64_t>(static_cast<std::uint16_t>(v));  // astype('<i2') wraps
    for (auto& v : b) v = static_cast<std::int16_t>(v);
    EXPECT_EQ(read_npy_int(d.path() / "ci2.npy", shape), b);
  }
}

// ---------------------------------------------------------------------------------------------
// Strict JSON

TEST(JsonStrict, DuplicatesDepthAndPythonTokens) {
  using json_strict::Problem;
  json_strict::Options py;
  py.python_nonfinite = true;
  auto r = json_strict::parse(R"({"a": {"b": [1, {"c": 1, "c": 2}]}})");
  EXPECT_EQ(r.problem, Problem::Duplicate);
  EXPECT_EQ(r.key, "c");
  EXPECT_EQ(r.path, "a.b[1]");
  EXPECT_EQ(json_strict::parse(R"({"a": 1, "a": 1})").problem, Problem::Duplicate);
  EXPECT_EQ(json_strict::parse(std::string(65, '[') + std::string(65, ']')).problem, Problem::TooDeep);
  // Python's tokens only on request, and only as whole tokens.
  EXPECT_EQ(json_strict::parse("[Infinity]").problem, Problem::Syntax);
  r = json_strict::parse(R"([1, Infinity, -Infinity, NaN, "Infinity", 2.5e3, -0])", py);
  ASSERT_EQ(r.problem, Problem::None) << r.message;
  EXPECT_TRUE(std::isinf(r.value[1].get<double>()) && r.value[1].get<double>() > 0);
  EXPECT_TRUE(std::isinf(r.value[2].get<double>()) && r.value[2].get<double>() < 0);
  EXPECT_TRUE(std::isnan(r.value[3].get<double>()));
  EXPECT_EQ(r.value[4], "Infinity");
  EXPECT_EQ(r.value[5].get<double>(), 2500.0);
  for (const char* bad : {"[-NaN]", "[1NaN]", "[Infinity5]", "[NaNe5]", "[Infinityy]", "[--Infinity]", "[1e400]"})
    EXPECT_EQ(json_strict::parse(bad, py).problem, Problem::Syntax) << bad;
  // Messages keep the file's line and column although the tokens were replaced.
  r = json_strict::parse("{\"a\": [1],\n \"b\": [Infinity, NaN, x]}", py);
  EXPECT_EQ(r.message.rfind("parse error at line 2, column 23: syntax error while parsing value - invalid literal", 0), 0u)
      << r.message;
  EXPECT_EQ(r.message.find("last read"), std::string::npos) << r.message;  // it would show the replacement
  EXPECT_EQ(json_strict::brief(json_strict::parse("[Infinity, NaN]", py).value), "[Infinity, NaN]");
}

// ---------------------------------------------------------------------------------------------
// config.json

TEST(Mamba2ConfigStrict, DuplicateKeysAreRefusedAtAnyDepth) {
  expect_config_refused(std::string("{") + kSsSmall + R"(, "n_layer": 3, "ssm_cfg": {"layer": "Mamba2", "headdim": 16}})",
                        "duplicate key 'n_layer'; expected each key once");
  expect_config_refused(std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16, "headdim": 32}})",
                        "duplicate key 'headdim' in 'ssm_cfg'");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "vocab_size": 50288})", "duplicate key 'vocab_size'");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "extra": {"x": [{"k": 1, "k": 2}]}})",
                        "duplicate key 'k' in 'extra.x[0]'");
}

TEST(Mamba2ConfigStrict, NanAndInfinityAreRefusedInNumericFields) {
  expect_config_refused(std::string("{") + kHfSmall + R"(, "layer_norm_epsilon": NaN})",
                        "key 'layer_norm_epsilon' is NaN; expected a finite number");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "layer_norm_epsilon": Infinity})", "is Infinity");
  expect_config_refused(R"({"hidden_size": Infinity, "num_hidden_layers": 2, "vocab_size": 10, "n_groups": 1})",
                        "key 'hidden_size' is Infinity");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_min": -Infinity})", "key 'time_step_min' is -Infinity");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": [NaN, Infinity]})",
                        "key 'time_step_limit[0]' is NaN");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": [0.0, -Infinity]})", "is -Infinity");
  expect_config_refused(std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16, "d_state": NaN}})",
                        "key 'ssm_cfg.d_state' is NaN");
  // state-spaces: Infinity only as the upper end of ssm_cfg.dt_limit, not of a HF key.
  expect_config_refused(std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16, "dt_max": Infinity}})",
                        "key 'ssm_cfg.dt_max' is Infinity");
  // Numbers that overflow a double are not a way around it.
  expect_config_refused(std::string("{") + kHfSmall + R"(, "layer_norm_epsilon": 1e999})", "not valid JSON");
}

TEST(Mamba2ConfigStrict, InfinityInTimeStepLimitIsAccepted) {
  const mamba2::Config hf = mamba2::parse_config_text(kHf130m, "hf.json");
  EXPECT_EQ(hf.format, "hf");
  EXPECT_EQ(hf.d_in_proj(), 3352);
  const mamba2::Config ss = mamba2::parse_config_text(
      std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16, "dt_limit": [0.0, Infinity]}})", "ss.json");
  EXPECT_EQ(ss.headdim, 16);
  // Absent limits are the default (0, inf): no clamp either.
  EXPECT_EQ(mamba2::parse_config_text(std::string("{") + kHfSmall + "}", "x").d_model, 64);
}

TEST(Mamba2ConfigStrict, DtClampIsRefusedBecauseTokdynAppliesNone) {
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": [0.001, 0.1]})",
                        "key 'time_step_limit': [0.001, 0.1] would clamp dt after the softplus, and tokdyn applies no dt clamp");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": [0.0, 100.0]})", "applies no dt clamp");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": [0.0])", "not valid JSON");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": [0.0]})", "expected two numbers [low, high]");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": "none"})", "expected two numbers");
  expect_config_refused(
      std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16, "dt_limit": [0.001, 0.1]}})",
      "key 'ssm_cfg.dt_limit': [0.001, 0.1] would clamp dt");
}

TEST(Mamba2ConfigStrict, FieldsTokdynDoesNotApplyAreRefused) {
  const std::string ss = std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16)";
  expect_config_refused(ss + R"(, "conv_bias": false}})", "key 'ssm_cfg.conv_bias': false is not supported");
  expect_config_refused(ss + R"(, "bias": true}})", "key 'ssm_cfg.bias': true is not supported");
  expect_config_refused(ss + R"(, "norm_before_gate": true}})", "norm_before_gate");
  expect_config_refused(ss + R"(, "D_has_hdim": true}})", "D_has_hdim");
  expect_config_refused(ss + R"(, "rmsnorm": false}})", "rmsnorm");
  expect_config_refused(ss + R"(, "d_ssm": 64}})", "would put only part of the channels through the SSM");
  expect_config_refused(ss + R"(, "activation": "relu"}})", "unknown key 'ssm_cfg.activation' (the reference Mamba2 module");
  expect_config_refused(ss + R"(}, "norm_epsilon": 1e-6})", "unknown key 'norm_epsilon' (the reference MambaConfig");
  expect_config_refused(ss + R"(}, "d_intermediate": 128})", "MLP blocks are not supported");
  expect_config_refused(ss + R"(}, "attn_layer_idx": [1]})", "attention layers are not supported");
  expect_config_refused(ss + R"(}, "rms_norm": false})", "key 'rms_norm': false is not supported");
  expect_config_refused(std::string("{") + kSsSmall + R"(, "ssm_cfg": {"headdim": 16}})", "an absent layer means Mamba1");
  // Accepted: d_ssm null or d_inner, init-only and kernel fields.
  EXPECT_EQ(mamba2::parse_config_text(ss + R"(, "d_ssm": 128, "dt_min": 0.01, "chunk_size": 64, "A_init_range": [1, 16]}})", "x")
                .d_inner(),
            128);
  const std::string hf = std::string("{") + kHfSmall;
  expect_config_refused(hf + R"(, "hidden_act": "gelu"})", "key 'hidden_act': \"gelu\" is not supported");
  expect_config_refused(hf + R"(, "use_conv_bias": false})", "key 'use_conv_bias': false is not supported");
  expect_config_refused(hf + R"(, "use_bias": true})", "use_bias");
  expect_config_refused(hf + R"(, "rms_norm": false})", "rms_norm");
  expect_config_refused(hf + R"(, "norm_before_gate": true})", "norm_before_gate");
  expect_config_refused(hf + R"(, "model_type": "mamba"})", "expected \"mamba2\"");
  expect_config_refused(hf + R"(, "layer_norm_epsilon": -1e-5})", "expected a number > 0");
  expect_config_refused(hf + R"(, "layer_norm_epsilon": "1e-5"})", "expected a number");
  expect_config_refused(R"({"hidden_size": 64, "head_dim": 16, "n_groups": 1, "state_size": 16, "num_hidden_layers": 2, "vocab_size": 10})",
                        "num_heads = 128 (the HF default); expected expand * hidden_size / head_dim = 8");
  expect_config_refused(R"({"hidden_size": 64, "num_heads": 8, "head_dim": 16, "num_hidden_layers": 2, "vocab_size": 10})",
                        "missing key 'n_groups'");
  expect_config_refused(std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16.0}})",
                        "key 'ssm_cfg.headdim': expected an integer, got 16.0");
  expect_config_refused(R"({"d_model": 4294967296, "n_layer": 2, "vocab_size": 10, "ssm_cfg": {"layer": "Mamba2"}})",
                        "expected an integer in the int range");
  // The HF layer_norm_epsilon is applied (it is the block's norm epsilon).
  EXPECT_EQ(mamba2::parse_config_text(hf + R"(, "layer_norm_epsilon": 1e-6})", "x").eps, 1e-6);
}

// ---------------------------------------------------------------------------------------------
// Vocabulary

TEST(Mamba2Vocab, BothLayoutsOfAReleasedModelDrawTheSameIds) {
  const mamba2::Config ss = mamba2::parse_config_text(kSs130m, "ss.json");
  const mamba2::Config hf = mamba2::parse_config_text(kHf130m, "hf.json");
  EXPECT_EQ(ss.vocab_size, 50277);
  EXPECT_EQ(hf.vocab_size, 50277);
  EXPECT_EQ(ss.vocab_padded(), 50288);
  EXPECT_EQ(hf.vocab_padded(), 50288);
  EXPECT_NE(hf.vocab_rule.find("state-spaces/mamba2-130m"), std::string::npos) << hf.vocab_rule;
  const auto a = mamba2::draw_token_ids(static_cast<std::uint64_t>(ss.vocab_size), 50, 50, 0);
  const auto b = mamba2::draw_token_ids(static_cast<std::uint64_t>(hf.vocab_size), 50, 50, 0);
  EXPECT_EQ(a, b);
  // Every released size, in both layouts.
  for (const std::string size : {"130m", "370m", "780m", "1.3b", "2.7b"}) {
    const mamba2::Config n = mamba2::Config::named(size);
    const std::string hf_text = "{\"hidden_size\": " + std::to_string(n.d_model) + ", \"num_hidden_layers\": " +
                                std::to_string(n.n_layer) + ", \"num_heads\": " + std::to_string(n.nheads()) +
                                ", \"n_groups\": 1, \"vocab_size\": 50288, \"time_step_limit\": [0.0, Infinity]}";
    const mamba2::Config h = mamba2::parse_config_text(hf_text, "hf");
    const mamba2::Config s = mamba2::parse_config_text(n.to_json().dump(), "ss");
    EXPECT_EQ(h.vocab_size, 50277) << size;
    EXPECT_EQ(s.vocab_size, 50277) << size;
    EXPECT_EQ(mamba2::draw_token_ids(static_cast<std::uint64_t>(h.vocab_size), 3, 7, 11),
              mamba2::draw_token_ids(static_cast<std::uint64_t>(s.vocab_size), 3, 7, 11));
  }
  // Ids really reach the top of the vocabulary and never the padding rows.
  const auto many = mamba2::draw_token_ids(50277, 400, 500, 1);
  EXPECT_EQ(*std::max_element(many.begin(), many.end()) < 50277, true);
  EXPECT_GT(*std::max_element(many.begin(), many.end()), 50277 - 50);
}

TEST(Mamba2Vocab, OtherHuggingFaceConfigsKeepTheirVocabSize) {
  // Not a released model (other sizes): the whole embedding counts, and the rule says so.
  const mamba2::Config c = mamba2::parse_config_text(std::string("{") + kHfSmall + "}", "x");
  EXPECT_EQ(c.vocab_size, 1008);
  EXPECT_EQ(c.vocab_padded(), 1008);
  EXPECT_NE(c.vocab_rule.find("unknown to tokdyn"), std::string::npos) << c.vocab_rule;
  // A released size with a different vocabulary is not in the table either.
  const mamba2::Config o = mamba2::parse_config_text(
      R"({"hidden_size": 768, "num_hidden_layers": 24, "num_heads": 24, "n_groups": 1, "vocab_size": 32000})", "x");
  EXPECT_EQ(o.vocab_size, 32000);
  // Nor one with other state sizes.
  const mamba2::Config g = mamba2::parse_config_text(
      R"({"hidden_size": 768, "num_hidden_layers": 24, "num_heads": 24, "n_groups": 2, "vocab_size": 50288})", "x");
  EXPECT_EQ(g.vocab_size, 50288);
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
