// ssm-lemma-silu-bias: the CSV agrees with Lemma IV.1's closed form within its standard errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokdyn/runtime/experiment.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;

TEST(LemmaSiluBiasPreset, BilinearMeanIsZeroAndSiluMeanMatchesClosedForm) {
  const Experiment* e = find_experiment("ssm-lemma-silu-bias");
  ASSERT_NE(e, nullptr);
  const fs::path out = fs::temp_directory_path() / ("tokdyn_test_lemma_" + std::to_string(::getpid()));
  run_experiment(*e, resolve_params(*e, {{"draws", "20000"}}), out, 2, false, false);
  std::ifstream in(out / "lemma_iv1.csv");
  std::string line;
  std::getline(in, line);
  int rows = 0;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::vector<std::string> c;
    for (std::string x; std::getline(ss, x, ',');) c.push_back(x);
    ASSERT_GE(c.size(), 7u);
    const double mean = std::stod(c[3]), se = std::stod(c[4]);
    if (c[2] == "bilinear") {
      EXPECT_LT(std::abs(mean), 4 * se) << line;
    }
    if (c[2] == "silu") {
      EXPECT_GT(mean / se, 100.0) << line;
      if (!c[6].empty()) {
        EXPECT_LT(std::abs(mean - std::stod(c[6])), 4 * se) << line;
      }
    }
    ++rows;
  }
  EXPECT_EQ(rows, 8);
  fs::remove_all(out);
}
