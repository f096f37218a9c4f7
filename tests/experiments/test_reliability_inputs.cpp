// Reliability of runs (docs/reliability.md), what the user gives: numbers are never silently
// narrowed (bounded parameters, memory estimates, thread counts, non-finite states, parallel
// exceptions), inputs never hang or eat memory, messages are one safe line with the exit code of
// their kind, and command-line mistakes are named.
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>

#include "reliability_fixtures.hpp"
#include "test_util.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/core/parallel.hpp"

namespace fs = std::filesystem;
using tokdyn::testing::entries;
using tokdyn::testing::TempDir;
using tokdyn::testing::reliability::expect_one_line;
using tokdyn::testing::reliability::kQuick;
using tokdyn::testing::reliability::Result;
using tokdyn::testing::reliability::run_in;
using tokdyn::testing::reliability::write_file;

// ------------------------------------------------------------------------------------------------
// 3. Numbers never silently wrong

TEST(Numbers, IntegersBeyondTheDocumentedBoundAreRefused) {
  TempDir d;
  for (const std::string v : {"4294967298", "2147483648", "9223372036854775807", "99999999999999999999"}) {
    const Result r = run_in(d.path(), {"run", "ssm-random-silu", "--out", "r", "--no-figures", "--set", "runs=" + v});
    EXPECT_EQ(r.code, 2) << v << ": " << r.err;
    expect_one_line(r.err);
    EXPECT_NE(r.err.find("runs"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(entries(d.path()).empty());
}

TEST(Numbers, EveryIntegerParameterOfEveryPresetHasAnUpperBound) {
  for (const tokdyn::Experiment* e : tokdyn::experiments())
    for (const tokdyn::ParamSpec& s : e->params)
      if (s.type == tokdyn::ParamType::Int || s.type == tokdyn::ParamType::IntList) {
        EXPECT_TRUE(s.max.has_value()) << e->name << " " << s.key;
        EXPECT_TRUE(s.min.has_value()) << e->name << " " << s.key;
      }
}

TEST(Numbers, SchemaWithoutAnUpperBoundCannotBeRegistered) {
  tokdyn::Experiment e{"reliability-unbounded", "x", {tokdyn::p_int("n", 1, "n", 0)}, [](const tokdyn::Params&, tokdyn::RunContext&) {}};
  EXPECT_THROW(tokdyn::ExperimentRegistration{e}, std::logic_error);
}

TEST(Numbers, RunThatCannotFitInMemoryIsRefusedWithTheEstimate) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", "ssm-random-silu", "--out", "r", "--no-figures", "--set", "runs=1000000",
                                     "--set", "tokens=100000"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("needs about"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("this machine has"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(d.path()).empty());
}

TEST(Numbers, EveryPresetWithSizesEstimatesItsMemory) {
  for (const char* name : {"ssm-random-silu", "ssm-theorem-pe", "ssm-theorem-pd", "ssm-lemma-silu-bias", "rope-flow",
                           "rope-fig1a", "rope-fig3b", "mamba2-fig1", "mamba2-fig2", "mamba2-fig3", "mamba2-fig4",
                           "mamba2-fig5", "mamba2-fig6"}) {
    const tokdyn::Experiment* e = tokdyn::find_experiment(name);
    ASSERT_NE(e, nullptr) << name;
    ASSERT_TRUE(static_cast<bool>(e->estimate)) << name;
    const tokdyn::ResourceEstimate r = e->estimate(tokdyn::resolve_params(*e, {}));
    EXPECT_GT(r.bytes, 0.0) << name;
    EXPECT_LT(r.bytes, 4e9) << name << ": the defaults fit a small machine";
  }
}

TEST(Numbers, TooManyThreadsIsRefused) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures", "--threads", "100000"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--threads"), std::string::npos) << r.err;
}

TEST(Numbers, NonFiniteStateStopsWithItsOwnCodeAndWritesNothing) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", "ssm-random-silu", "--out", "r", "--no-figures", "--set", "runs=2", "--set",
                                     "depth=3", "--set", "tokens=4", "--set", "n=8", "--set", "m=4", "--set",
                                     "weights=gaussian", "--set", "sigma=1e300", "--set", "diagnostics=false"});
  EXPECT_EQ(r.code, 4) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("non-finite"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(d.path()).empty());
}

// ------------------------------------------------------------------------------------------------
// 4. Inputs that would hang or eat memory

TEST(Inputs, FifoAsConfigFileIsRefusedWithoutBlocking) {
  TempDir d;
  ASSERT_EQ(mkfifo((d.path() / "run.toml").c_str(), 0644), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = run_in(d.path(), {"run", "run.toml", "--out", "r"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("FIFO"), std::string::npos) << r.err;
}

TEST(Inputs, DeviceAsConfigFileIsRefused) {
  TempDir d;
  fs::create_symlink("/dev/zero", d.path() / "zero.toml");
  const Result r = run_in(d.path(), {"run", "zero.toml", "--out", "r"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("character device"), std::string::npos) << r.err;
}

TEST(Inputs, OversizedConfigFileIsRefused) {
  TempDir d;
  write_file(d.path() / "big.toml", "preset = \"rope-fig1a\"\n" + std::string(2u << 20, '#'));
  const Result r = run_in(d.path(), {"run", "big.toml", "--out", "r"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("at most"), std::string::npos) << r.err;
}

TEST(Inputs, SymlinkLoopIsNamedAsSuch) {
  TempDir d;
  fs::create_symlink("loop.toml", d.path() / "loop.toml");
  const Result r = run_in(d.path(), {"run", "loop.toml", "--out", "r"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("symlink loop"), std::string::npos) << r.err;
}

TEST(Inputs, ReadRegularFileBoundsItsSize) {
  TempDir d;
  write_file(d.path() / "f", std::string(100, 'x'));
  EXPECT_EQ(tokdyn::read_regular_file(d.path() / "f", 100, "f").size(), 100u);
  EXPECT_THROW(tokdyn::read_regular_file(d.path() / "f", 99, "f"), tokdyn::InputError);
  EXPECT_THROW(tokdyn::read_regular_file(d.path(), 99, "dir"), tokdyn::InputError);
}

// ------------------------------------------------------------------------------------------------
// 6. Messages

TEST(Messages, ControlCharactersAreEscaped) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--set", "\x1b[31mkey\x07=1"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.err.find('\x07'), std::string::npos);
  EXPECT_NE(r.err.find("\\x1b[31mkey\\x07"), std::string::npos) << r.err;
}

TEST(Messages, LongMessagesAreCapped) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--set", std::string(10000, 'k') + "=1"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_LT(r.err.size(), 600u);
}

TEST(Messages, MessageLineEscapesC1AndInvalidUtf8ButKeepsUtf8) {
  EXPECT_EQ(tokdyn::message_line("a\nb"), "a; b");
  EXPECT_EQ(tokdyn::message_line("\xc2\x9b" "1m"), "\\xc2\\x9b1m");  // C1 CSI
  EXPECT_EQ(tokdyn::message_line("\xff"), "\\xff");
  EXPECT_EQ(tokdyn::message_line("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");  // été
  EXPECT_EQ(tokdyn::message_line(std::string(1000, 'x'), 10), "xxxxxxx...");
}

TEST(Messages, PresetNameWinsOverASameNamedFile) {
  TempDir d;
  write_file(d.path() / kQuick, "not a toml file");
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--no-figures"});
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(Messages, ExitCodesOfEachFailureKind) {
  using tokdyn::failure_of;
  EXPECT_EQ(failure_of(std::make_exception_ptr(tokdyn::InputError("x"))).code, 2);
  EXPECT_EQ(failure_of(std::make_exception_ptr(tokdyn::ResourceError("x"))).code, 3);
  EXPECT_EQ(failure_of(std::make_exception_ptr(tokdyn::NonFiniteError("x"))).code, 4);
  EXPECT_EQ(failure_of(std::make_exception_ptr(tokdyn::BusyError("x"))).code, 6);
  EXPECT_EQ(failure_of(std::make_exception_ptr(std::bad_alloc())).code, 3);
  EXPECT_EQ(failure_of(std::make_exception_ptr(std::logic_error("x"))).code, 1);
  EXPECT_EQ(failure_of(std::make_exception_ptr(
                           fs::filesystem_error("w", "/p", std::make_error_code(std::errc::no_space_on_device))))
                .code,
            3);
}

TEST(Cli, ExtraArgumentsAreCountedInOrder) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", kQuick, "b", "c", "--out", "r"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("2 unexpected arguments: 'b', 'c'"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(d.path()).empty());
}

TEST(Cli, ThreadsThatAreNotANumberNameTheOption) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", kQuick, "--out", "r", "--threads", "x"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--threads: expected an integer from 1 to"), std::string::npos) << r.err;
}

TEST(Numbers, OutputIntervalThatWouldFillMemoryIsRefused) {
  TempDir d;
  const Result r = run_in(d.path(), {"run", "ssm-theorem-pd", "--out", "r", "--no-figures", "--threads", "2", "--set",
                                     "every=1e-300", "--set", "runs=8", "--set", "doa_runs=2"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_line(r.err);
  EXPECT_NE(r.err.find("'every'"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(d.path()).empty());
}

TEST(Numbers, ExceptionsLeaveParallelLoopsAndAreRethrownAfterThem) {
  tokdyn::ParallelErrors errors;
  std::atomic<int> ran{0};
#pragma omp parallel for schedule(dynamic) num_threads(4)
  for (int i = 0; i < 64; ++i) try {
    ++ran;
    if (i % 16 == 5) throw tokdyn::NonFiniteError("iteration " + std::to_string(i));
  } catch (...) {
    errors.capture();
  }
  EXPECT_EQ(ran.load(), 64);
  EXPECT_TRUE(errors.failed());
  EXPECT_THROW(errors.rethrow(), tokdyn::NonFiniteError);
  tokdyn::ParallelErrors none;
  EXPECT_NO_THROW(none.rethrow());
}
