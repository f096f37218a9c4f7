#pragma once
// Shared by the test_cli_input_*.cpp tests: the test-only preset `test-echo`, a file writer, and
// the InputError message of a call.
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/io/csv.hpp"

namespace tokdyn::testing {

// ---------------------------------------------------------------------------------------------
// A test-only experiment: writes `count` rows of (i, scale*i) to echo.csv and a nested file;
// with fail=input|internal it throws half-way through.

inline void echo_run(const Params& p, RunContext& ctx) {
  namespace fs = std::filesystem;
  const long count = p.get_int("count");
  const std::string& fail = p.get_string("fail");
  CsvWriter w(ctx.dir / "echo.csv", {"i", "value"});
  for (long i = 0; i < count; ++i) {
    if (fail != "none" && i == count / 2) {
      if (fail == "input") throw InputError("test-echo: bad combination");
      throw std::runtime_error("test-echo: internal failure");
    }
    w.cell(i).cell(p.get_double("scale") * static_cast<double>(i)).end_row();
    if (ctx.progress) ctx.progress(static_cast<double>(i + 1) / static_cast<double>(count));
  }
  fs::create_directory(ctx.dir / "sub");
  std::ofstream(ctx.dir / "sub" / "note.txt") << "hello\n";
  ctx.notes["threads_seen"] = ctx.threads;
  ctx.notes["figures_seen"] = ctx.figures;
}

// Registered once for the whole test binary: an inline variable has one definition however many
// of the test files include this header.
inline const ExperimentRegistration echo_registration{Experiment{
    "test-echo",
    "test-only: echoes its parameters into a CSV",
    {p_int("count", 4, "rows to write", 1, 1000000), p_double("scale", 1.0, "value multiplier", 0.0, {}, true),
     p_double("frac", 0.5, "a fraction", 0.0, 1.0), p_bool("flag", false, "a switch"),
     p_string("mode", "a", "a choice", {"a", "b"}), p_int_list("taps", {1, 2}, "layers to tap (may be empty)", 0, 1000000).items(0),
     p_int("seed", 7, "random seed", 0, kMaxSeed), p_string("fail", "none", "throw midway", {"none", "input", "internal"})},
    echo_run}};

inline const Experiment& echo() {
  const Experiment* e = find_experiment("test-echo");
  if (!e) throw std::logic_error("test-echo not registered");
  return *e;
}

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// The InputError message of f(), or "" when it does not throw InputError.
template <class F>
inline std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

using Sets = std::vector<std::pair<std::string, std::string>>;

}  // namespace tokdyn::testing
