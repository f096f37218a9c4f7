// OpenBLAS's kernels (blas_core.hpp): where OpenBLAS does not know the CPU and falls back to its
// generic kernels, tokdyn asks for the ones the CPU supports; a user's OPENBLAS_CORETYPE and
// TOKDYN_BLAS_CORE=keep are left alone. The reference is OpenBLAS's own report
// (openblas_get_corename) in processes started with each environment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "tokdyn/core/blas_core.hpp"

using namespace tokdyn;
using tokdyn::testing::CliResult;
using tokdyn::testing::run_cli;
using tokdyn::testing::ScopedEnv;
using tokdyn::testing::TempDir;

namespace {

nlohmann::json machine(const std::filesystem::path& dir) {
  const CliResult r = run_cli(dir, {"machine", "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

bool avx2_kernels(const std::string& core) {
  for (const char* c : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator"})
    if (core == c) return true;
  return false;
}

}  // namespace

TEST(BlasCore, ThisProcessRunsKernelsTheCpuSupports) {
  // tests/main.cpp called ensure_blas_core first: nothing is left to upgrade.
  EXPECT_FALSE(blas_core().empty());
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr || !blas_core_detected().empty()) {
    EXPECT_EQ(blas_core_upgrade(), "") << "OpenBLAS runs " << blas_core();
  }
  if (!blas_core_detected().empty()) {
    EXPECT_EQ(blas_core(), std::string(std::getenv("OPENBLAS_CORETYPE")));
    EXPECT_TRUE(avx2_kernels(blas_core())) << blas_core();
  }
}

TEST(BlasCore, MachineReportsTheKernelsAndKeepsTheUsersChoice) {
  TempDir d;
  ScopedEnv clear_detected("TOKDYN_BLAS_CORE_DETECTED", nullptr);
  nlohmann::json own, kept, user;
  {
    ScopedEnv unset("OPENBLAS_CORETYPE", nullptr);
    own = machine(d.path());  // tokdyn's choice
    ScopedEnv keep("TOKDYN_BLAS_CORE", "keep");
    kept = machine(d.path());  // OpenBLAS's own choice
  }
  {
    ScopedEnv set("OPENBLAS_CORETYPE", "Prescott");
    user = machine(d.path());  // the user's choice
  }
  EXPECT_FALSE(own.at("cpu").get<std::string>().empty());
  EXPECT_GE(own.at("logical_cpus").get<long>(), 1);
  // keep: OpenBLAS's own detection, the one tokdyn saw before replacing it.
  EXPECT_FALSE(kept.at("blas_core_replaced").get<bool>());
  EXPECT_EQ(kept.at("blas_core"), own.at("blas_core_detected"));
  if (own.at("blas_core_replaced").get<bool>()) {
    EXPECT_FALSE(avx2_kernels(kept.at("blas_core").get<std::string>())) << kept.dump();
    EXPECT_TRUE(avx2_kernels(own.at("blas_core").get<std::string>())) << own.dump();
  } else {
    EXPECT_EQ(own.at("blas_core"), kept.at("blas_core"));
  }
  // A user's OPENBLAS_CORETYPE is never replaced.
  EXPECT_EQ(user.at("blas_core"), "Prescott") << user.dump();
  EXPECT_FALSE(user.at("blas_core_replaced").get<bool>());
}

// TOKDYN_BLAS_CORE takes only "keep": another value is refused with one line naming it, exit 2.
TEST(BlasCore, AnotherTokdynBlasCoreValueIsRefused) {
  TempDir d;
  ScopedEnv bad("TOKDYN_BLAS_CORE", "SkylakeX");
  const CliResult r = run_cli(d.path(), {"presets"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("TOKDYN_BLAS_CORE='SkylakeX': expected 'keep'"), std::string::npos) << r.err;
}
