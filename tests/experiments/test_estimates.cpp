// Issue 38 §4: defaults cost what was asked, and long work is announced before it starts. The
// presets' estimates count the work of their algorithms (doubling the depth doubles it; doubling d
// multiplies dense d x d work by about 8 and per-token products by about 4), runs estimated at more
// than a few seconds are announced on stderr before they start (check_resources, and the CLI before
// it allocates anything), and small runs say nothing. No test times anything: the estimates are
// pure functions of the parameters.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/SVD>
#include <fmt/format.h>

#include "test_util.hpp"
#include "tokdyn/core/norms.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"

using tokdyn::Experiment;
using tokdyn::Params;
using tokdyn::ResourceEstimate;
using tokdyn::testing::CliResult;
using tokdyn::testing::run_cli;
using tokdyn::testing::TempDir;
namespace cost = tokdyn::cost;

namespace {

using Sets = std::vector<std::pair<std::string, std::string>>;

const Experiment& preset(const std::string& name) {
  const Experiment* e = tokdyn::find_experiment(name);
  if (e == nullptr || !e->estimate) throw std::runtime_error("no estimate for " + name);
  return *e;
}

ResourceEstimate estimate(const std::string& name, const Sets& sets) {
  const Experiment& e = preset(name);
  return e.estimate(tokdyn::resolve_params(e, sets));
}

double flops(const std::string& name, const Sets& sets) { return estimate(name, sets).flops; }

Sets with(Sets s, const std::string& k, const std::string& v) {
  s.emplace_back(k, v);
  return s;
}

/// What check_resources(announce = true) prints on stderr for this run on `threads` threads.
std::string announcement(const std::string& name, const Sets& sets, int threads = 2) {
  const Experiment& e = preset(name);
  const Params p = tokdyn::resolve_params(e, sets);
  ::testing::internal::CaptureStderr();
  tokdyn::check_resources(e, p, threads, true);
  return ::testing::internal::GetCapturedStderr();
}

// The configurations of the issue: L = 5000, T = 512, d = 256 (its memory, 9-60 GiB, is refused on
// smaller machines: the announcement tests use d = 64 or 32, minutes of work in 1 GiB or so), and
// G5 at scale 1e6, d = 512, L = 50.
const Sets kIssueTransformer = {{"depth", "5000"}, {"tokens", "512"}, {"d", "256"}};
const Sets kBigTransformer = {{"depth", "5000"}, {"tokens", "512"}, {"d", "64"}};
const Sets kBigDichotomy = {{"depth", "5000"}, {"tokens", "512"}, {"d", "32"}};
const Sets kBigSpectra = {{"family", "G5"}, {"scale", "1e6"}, {"d", "512"}, {"depth", "50"}};

}  // namespace

TEST(Estimates, SecondsFromRatesAndThreads) {
  // Flops alone: the default rate on every thread.
  const ResourceEstimate plain{0, 4e11, "x"};
  EXPECT_DOUBLE_EQ(cost::estimated_seconds(plain, 1), 4e11 / cost::kRateDefault);
  EXPECT_DOUBLE_EQ(cost::estimated_seconds(plain, 4), 4e11 / cost::kRateDefault / 4);
  // A sequential part is not shared by threads, a parallel one is.
  cost::Work w;
  w.add(2e10, 1e10).add(4e10, 1e10, true);
  const ResourceEstimate r = w.estimate(0, "y");
  EXPECT_DOUBLE_EQ(r.flops, 6e10);
  EXPECT_DOUBLE_EQ(cost::estimated_seconds(r, 1), 6.0);
  EXPECT_DOUBLE_EQ(cost::estimated_seconds(r, 2), 4.0);
  EXPECT_DOUBLE_EQ(cost::estimated_seconds(r, 4), 3.0);
  // An estimate added to another keeps its own rates and shares.
  cost::Work sum;
  sum.add(r).add(plain);
  EXPECT_DOUBLE_EQ(cost::estimated_seconds(sum.estimate(0, "z"), 2), 4.0 + 4e11 / cost::kRateDefault / 2);
  EXPECT_TRUE(std::isinf(cost::estimated_seconds(ResourceEstimate{0, INFINITY, "inf"}, 2)));
}

TEST(Estimates, DurationsReadInSecondsAndMinutes) {
  EXPECT_EQ(cost::duration_text(0.3), "under a second");
  EXPECT_EQ(cost::duration_text(7.4), "about 7 s");
  EXPECT_EQ(cost::duration_text(89), "about 89 s");
  EXPECT_EQ(cost::duration_text(200), "about 3 min 20 s");
  EXPECT_EQ(cost::duration_text(180), "about 3 min");
  EXPECT_EQ(cost::duration_text(1500), "about 25 min");
  EXPECT_EQ(cost::duration_text(5 * 3600.0), "about 5 h");
  EXPECT_EQ(cost::duration_text(1e12), "more than a century");
}

TEST(Estimates, SpectralNormOfLargeMatricesAgreesWithJacobi) {
  // From 64 rows on spectral_norm is the divide-and-conquer SVD; both give sigma_max to round-off.
  for (const int n : {63, 64, 100}) {
    tokdyn::Mat M(n, n);
    tokdyn::Rng(7, {static_cast<std::uint64_t>(n)}).fill_normal(M, 1.0);
    const Eigen::MatrixXd A = M;
    const double ref = Eigen::JacobiSVD<Eigen::MatrixXd>(A).singularValues()(0);
    EXPECT_NEAR(tokdyn::spectral_norm(A), ref, 1e-13 * ref) << n;
  }
}

TEST(Estimates, GreenScalesLikeItsAlgorithm) {
  // The BVP alone: O(L d^3).
  const Sets solve = {{"validate", "false"}};
  EXPECT_NEAR(flops("coupling-green", with(solve, "depth", "4000")) / flops("coupling-green", with(solve, "depth", "2000")), 2.0, 1e-9);
  const double r = flops("coupling-green", with(solve, "d", "128")) / flops("coupling-green", with(solve, "d", "64"));
  EXPECT_GT(r, 7.8);
  EXPECT_LE(r, 8.0);
  // The validation, once the explicit sum and the certificate are out of reach, is linear in L too
  // (every push ends once negligible, Lemma 17's envelope has about 200 starts per window); sized
  // from a generators file's header beyond the family's depth.
  TempDir dir;
  auto file = [&](long L) {
    const std::string f = (dir.path() / fmt::format("g{}.npy", L)).string();
    const std::vector<double> maps(static_cast<std::size_t>(L) * 64, 0.0);
    tokdyn::write_npy(f, maps.data(), {static_cast<std::size_t>(L), 8, 8});
    return f;
  };
  const ResourceEstimate a = estimate("coupling-green", {{"generators", file(5000)}}),
                         b = estimate("coupling-green", {{"generators", file(10000)}});
  EXPECT_NEAR(b.flops / a.flops, 2.0, 0.02);
  EXPECT_NEAR(cost::estimated_seconds(b, 2) / cost::estimated_seconds(a, 2), 2.0, 0.02);
  EXPECT_DOUBLE_EQ(a.flops, flops("coupling-green", {{"d", "8"}, {"depth", "5000"}}));
  // The explicit sum is O(L^2 d^2), counted only up to explicit_max_L.
  const double with_sum = flops("coupling-green", {{"depth", "1000"}, {"d", "8"}, {"explicit_max_L", "1000"}});
  const double without = flops("coupling-green", {{"depth", "1000"}, {"d", "8"}, {"explicit_max_L", "999"}});
  EXPECT_NEAR(with_sum - without, 3.0 * 1000 * 1000 * 64, 1.0);
}

TEST(Estimates, DichotomyScalesLikeItsAlgorithm) {
  // Linear in depth (whole R11 windows): equal steps of depth add equal work.
  const Sets base = {{"d", "16"}, {"d_ff", "32"}, {"tokens", "64"}};
  const double f1 = flops("coupling-dichotomy", with(base, "depth", "1000")), f2 = flops("coupling-dichotomy", with(base, "depth", "2000")),
               f4 = flops("coupling-dichotomy", with(base, "depth", "4000"));
  EXPECT_NEAR((f4 - f2) / (f2 - f1), 2.0, 1e-9);
  // Dense d x d work: d -> 2d multiplies it by about 8 once d dominates d_ff.
  const Sets wide = {{"depth", "1000"}, {"d_ff", "16"}, {"tokens", "512"}};
  const double r = flops("coupling-dichotomy", with(wide, "d", "256")) / flops("coupling-dichotomy", with(wide, "d", "128"));
  EXPECT_GT(r, 7.0);
  EXPECT_LT(r, 8.1);
}

TEST(Estimates, RankCollapseAndQkSpecificityScaleLikeTheirForwards) {
  for (const char* name : {"coupling-rank-collapse", "coupling-qk-specificity"}) {
    EXPECT_NEAR(flops(name, {{"depth", "2000"}}) / flops(name, {{"depth", "1000"}}), 2.0, 1e-12) << name;
    EXPECT_NEAR(flops(name, {{"runs", "16"}}) / flops(name, {{"runs", "8"}}), 2.0, 1e-12) << name;
    // Per token the projections are d^2 (one token: d -> 2d is x4), the attention T^2 (x4 at d << T).
    const double rd = flops(name, {{"tokens", "1"}, {"d_ff", "1"}, {"d", "256"}}) / flops(name, {{"tokens", "1"}, {"d_ff", "1"}, {"d", "128"}});
    EXPECT_GT(rd, 3.9) << name;
    EXPECT_LE(rd, 4.0) << name;
    const double rt = flops(name, {{"tokens", "512"}, {"d", "4"}, {"d_ff", "4"}}) / flops(name, {{"tokens", "256"}, {"d", "4"}, {"d_ff", "4"}});
    EXPECT_GT(rt, 3.9) << name;
    EXPECT_LE(rt, 4.0) << name;
  }
  // E4 runs two amplitudes x two models x (attention, step): eight times E2's forwards.
  EXPECT_NEAR(flops("coupling-qk-specificity", kBigTransformer) / flops("coupling-rank-collapse", kBigTransformer), 8.0, 1e-12);
}

TEST(Estimates, CocycleSpectraScalesLikeItsAlgorithm) {
  const Sets qr_only = {{"family", "G5"}, {"bundles", "none"}, {"rank", "false"}};
  EXPECT_NEAR(flops("cocycle-spectra", with(with(qr_only, "d", "256"), "depth", "1000")) /
                  flops("cocycle-spectra", with(with(qr_only, "d", "256"), "depth", "500")),
              2.0, 1e-9);
  const double r = flops("cocycle-spectra", with(with(qr_only, "d", "512"), "depth", "50")) /
                   flops("cocycle-spectra", with(with(qr_only, "d", "256"), "depth", "50"));
  EXPECT_GT(r, 7.9);
  EXPECT_LE(r, 8.0);
  // With the bundles and the constant (about 100 starts, each across the window): still linear in L.
  const Sets all = {{"family", "G5"}, {"d", "32"}};
  EXPECT_NEAR(flops("cocycle-spectra", with(all, "depth", "4000")) / flops("cocycle-spectra", with(all, "depth", "2000")), 2.0, 0.02);
  // A generators file is sized from its header: L = 3000, d = 8 as if the family had them.
  TempDir dir;
  const std::string f = (dir.path() / "g.npy").string();
  std::vector<double> maps(3000 * 8 * 8, 0.0);
  tokdyn::write_npy(f, maps.data(), {3000, 8, 8});
  EXPECT_DOUBLE_EQ(flops("cocycle-spectra", {{"generators", f}, {"rank", "false"}}),
                   flops("cocycle-spectra", {{"family", "G5"}, {"d", "8"}, {"depth", "3000"}, {"rank", "false"}}));
}

TEST(Estimates, TheIssuesConfigurationsAreLongOrTooBig) {
  // L = 5000, T = 512, d = 256: E2 about 8 min, E4 and the dichotomy hours on 2 threads; the
  // dichotomy also holds every layer's generators of two models (about 57 GiB).
  for (const char* name : {"coupling-rank-collapse", "coupling-qk-specificity", "coupling-dichotomy"})
    EXPECT_GT(cost::estimated_seconds(estimate(name, kIssueTransformer), 2), 240.0) << name;
  EXPECT_GT(estimate("coupling-dichotomy", kIssueTransformer).bytes, 40e9);
  EXPECT_LT(estimate("coupling-rank-collapse", kIssueTransformer).bytes, 12e9);
  // G5 at d = 512: about 45 s (the constant's pushes: 256 x 256 norms in the bundles' coordinates).
  EXPECT_GT(cost::estimated_seconds(estimate("cocycle-spectra", kBigSpectra), 2), 20.0);
}

TEST(Estimates, BigRunsAreAnnouncedInSecondsOrMinutes) {
  for (const auto& [name, sets] : std::vector<std::pair<std::string, Sets>>{
           {"coupling-rank-collapse", kBigTransformer},
           {"coupling-qk-specificity", kBigTransformer},
           {"coupling-dichotomy", kBigDichotomy},
           {"cocycle-spectra", kBigSpectra},
           {"coupling-green", {{"d", "16"}, {"depth", "5000"}}}}) {
    const std::string err = announcement(name, sets);
    EXPECT_EQ(err.rfind("tokdyn: " + name + ": estimated time about ", 0), 0u) << name << ": " << err;
    EXPECT_NE(err.find(" on 2 threads (work "), std::string::npos) << err;
    EXPECT_TRUE(err.find(" s on ") != std::string::npos || err.find(" min on ") != std::string::npos ||
                err.find(" h on ") != std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(announcement(name, sets, 1).find(" on 1 thread (work "), std::string::npos) << name;
  }
  // Without announce nothing is printed, however long the run.
  ::testing::internal::CaptureStderr();
  const Experiment& e = preset("coupling-rank-collapse");
  tokdyn::check_resources(e, tokdyn::resolve_params(e, kBigTransformer), 2, false);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(Estimates, SmallDefaultRunsSayNothing) {
  // Every preset whose default run takes a few seconds at most (the long ones, e.g. the full-size
  // Mamba-2 figures and trainings, are announced at their defaults too, as they should be).
  for (const char* name : {"cocycle-spectra", "coupling-bounded-step", "coupling-dichotomy", "coupling-duality", "coupling-e7",
                           "coupling-euler", "coupling-fast-slow", "coupling-frozen-kernel", "coupling-gate-intervention",
                           "coupling-green", "coupling-looped", "coupling-margin", "coupling-qk-specificity",
                           "coupling-rank-collapse", "coupling-thm9", "coupling-trajectory", "depth-spectra", "prompt-trajectories",
                           "rope-fig2a", "rope-fig2c", "rope-flow", "rope-table2", "ssm-theorem-pe", "transformer-clustering"}) {
    const Experiment* e = tokdyn::find_experiment(name);
    ASSERT_NE(e, nullptr) << name;
    if (!e->estimate) continue;  // bounded by the schema alone
    const ResourceEstimate r = e->estimate(tokdyn::resolve_params(*e, {}));
    EXPECT_LT(cost::estimated_seconds(r, 1), cost::kAnnounceSeconds) << name << ": " << r.what;
    EXPECT_EQ(announcement(name, {}, 1), "") << name;
  }
}

namespace {

/// Runs the CLI with stderr on a pipe and waits for its first line (or the end of the run); then
/// stops the run (SIGTERM) if it is still going. The line, not a time: no clock in the test.
std::string first_stderr_line(const std::filesystem::path& cwd, const std::vector<std::string>& args) {
  int fd[2];
  if (::pipe(fd) != 0) return "pipe failed";
  tokdyn::testing::TokdynArgv argv(args);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(fd[1], 2);
    ::close(fd[0]);
    argv.exec_in(cwd);
  }
  ::close(fd[1]);
  std::string line;
  char c = 0;
  while (::read(fd[0], &c, 1) == 1 && c != '\n') line += c;
  ::kill(pid, SIGTERM);
  ::close(fd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return line;
}

}  // namespace

TEST(Estimates, TheCliAnnouncesBeforeTheRunStarts) {
  TempDir d;
  std::vector<std::string> args = {"run", "coupling-rank-collapse", "--no-figures", "--threads", "2", "--out", "big"};
  for (const auto& [k, v] : kBigTransformer) args.insert(args.end(), {"--set", k + "=" + v});
  const std::string line = first_stderr_line(d.path(), args);
  EXPECT_EQ(line.rfind("tokdyn: coupling-rank-collapse: estimated time about ", 0), 0u) << line;
  // The default run: no announcement (its progress lines only).
  const CliResult r = run_cli(d.path(), {"run", "coupling-rank-collapse", "--no-figures", "--out", "small"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("estimated time"), std::string::npos) << r.err;
}
