// The three forms of the selective-SSM model (The Attention Within, (1)-(2), Lemma II.1, (5)).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <omp.h>

#include "ssm_fixtures.hpp"
#include "thread_util.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/linalg.hpp"
#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/core/sphere.hpp"

using namespace tokdyn;
using tokdyn::testing::kThreadCounts;
using tokdyn::testing::random_ssm;
using tokdyn::testing::set_threads;
using tokdyn::testing::ThreadCountGuard;

namespace {

std::shared_ptr<ConstantSchedule<SsmParams>> constant(const SsmParams& p) {
  return std::make_shared<ConstantSchedule<SsmParams>>(p);
}

Batch random_batch(std::uint64_t seed, int runs, int len, int n) {
  Rng rng(seed, {1});
  return Batch{rng.sphere_tokens(runs * len, n), runs, len};
}

struct Variant {
  bool silu;
  GateKind gate;
};

class FormsAgree : public ::testing::TestWithParam<Variant> {};

}  // namespace

// Lemma II.1: the recurrence (1)-(2) and the input-output form give the same map, T2.
TEST_P(FormsAgree, RecurrenceEqualsInputOutputToRoundOff) {
  const Variant v = GetParam();
  const SsmParams p = random_ssm(11);
  SsmOptions o;
  o.tau = 0.3;
  o.silu_bc = v.silu;
  o.gate = v.gate;
  Batch a = random_batch(3, 2, 12, 8), b = a;
  SsmLayer rec(constant(p), o, SsmForm::Recurrence), io(constant(p), o, SsmForm::InputOutput);
  for (long k = 1; k <= 20; ++k) {
    rec.apply(k, a);
    io.apply(k, b);
  }
  EXPECT_LT((a.Z - b.Z).cwiseAbs().maxCoeff(), 1e-13);
  EXPECT_GT((a.Z - random_batch(3, 2, 12, 8).Z).norm(), 1e-2);  // the tokens did move
}

INSTANTIATE_TEST_SUITE_P(Variants, FormsAgree,
                         ::testing::Values(Variant{false, GateKind::Off}, Variant{true, GateKind::Off},
                                           Variant{false, GateKind::Silu}, Variant{true, GateKind::Silu}));

// The readout equals the literal Lemma II.1 sum with lambda_ij = Delta_j exp(d_ij).
TEST(SsmModel, ReadoutMatchesLemmaII1Definitions) {
  const SsmParams p = random_ssm(5);
  Rng rng(9);
  const Tokens Z = rng.sphere_tokens(10, 8);
  for (bool s : {false, true}) {
    SsmOptions o;
    o.silu_bc = s;
    SsmBranches br;
    ssm_branches(p, o, Z, br);
    Tokens R(10, 8);
    ssm_readout(SsmForm::Recurrence, p, br, Z, 0, 10, R);
    for (int i = 0; i < 10; ++i) {
      RowVec r = RowVec::Zero(8);
      for (int j = 0; j <= i; ++j)
        r += interaction_kernel(p, s, Z.row(i), Z.row(j)) * io_lambda(p, Z, i, j).transpose().cwiseProduct(Z.row(j));
      EXPECT_LT((r - R.row(i)).cwiseAbs().maxCoeff(), 1e-13) << "token " << i << " silu " << s;
    }
  }
}

// Long sequences with large alpha*Delta: exp(d) underflows to 0, never NaN (T2, second part).
TEST(SsmModel, UnderflowingDecayGivesNoNaN) {
  SsmParams p = random_ssm(6);
  p.alpha.setConstant(400.0);
  p.b_delta.setConstant(3.0);
  SsmOptions o;
  o.tau = 0.3;
  Batch a = random_batch(4, 1, 200, 8), b = a;
  SsmLayer(constant(p), o, SsmForm::Recurrence).apply(1, a);
  SsmLayer(constant(p), o, SsmForm::InputOutput).apply(1, b);
  EXPECT_TRUE(a.Z.allFinite());
  EXPECT_LT((a.Z - b.Z).cwiseAbs().maxCoeff(), 1e-13);
}

// Causality: token i never depends on a later token j > i (T3).
TEST(SsmModel, TokenIgnoresLaterTokens) {
  const SsmParams p = random_ssm(12);
  SsmOptions o;
  o.tau = 0.3;
  o.silu_bc = true;
  o.gate = GateKind::Silu;
  for (SsmForm form : {SsmForm::Recurrence, SsmForm::InputOutput}) {
    Batch a = random_batch(5, 1, 12, 8), b = a;
    Rng rng(77);
    b.Z.bottomRows(6) = rng.sphere_tokens(6, 8);  // perturb tokens 7..12
    SsmLayer L(constant(p), o, form);
    L.apply(1, a);
    L.apply(1, b);
    EXPECT_EQ(a.Z.topRows(6), b.Z.topRows(6));  // bitwise
    EXPECT_GT((a.Z.bottomRows(6) - b.Z.bottomRows(6)).norm(), 1e-3);
  }
  SsmFlow f(constant(p), SsmOptions{});
  Batch a = random_batch(5, 1, 12, 8), b = a;
  Rng rng(78);
  b.Z.bottomRows(6) = rng.sphere_tokens(6, 8);
  Tokens fa, fb;
  f.eval(0.0, a, fa);
  f.eval(0.0, b, fb);
  EXPECT_LT((fa.topRows(6) - fb.topRows(6)).cwiseAbs().maxCoeff(), 1e-15);
}

// Unit norms are preserved by the discrete map; the field is tangent (T4).
TEST(SsmModel, PreservesUnitNormsAndFieldIsTangent) {
  const SsmParams p = random_ssm(13);
  SsmOptions o;
  o.tau = 0.3;
  o.silu_bc = true;
  Batch a = random_batch(6, 3, 12, 8);
  SsmLayer L(constant(p), o);
  for (long k = 1; k <= 100; ++k) L.apply(k, a);
  EXPECT_LT(max_norm_deviation(a.Z), 1e-14);
  Tokens dZ;
  SsmFlow(constant(p), o).eval(0.0, a, dZ);
  for (Eigen::Index i = 0; i < dZ.rows(); ++i) EXPECT_LT(std::abs(a.Z.row(i).dot(dZ.row(i))), 1e-14);
}

// §II-D: the discrete map is a first-order approximation of the flow: one-step error ~ tau^2
// and the discrepancy over a fixed horizon halves when tau halves (T5).
TEST(SsmModel, DiscreteMapApproachesFlowToFirstOrder) {
  const SsmParams p = random_ssm(14, 4, 6);
  const Batch Z0 = random_batch(7, 1, 3, 4);
  auto sched = constant(p);
  SsmFlow flow(sched, SsmOptions{});
  std::vector<double> local, global;
  for (double tau : {0.025, 0.0125, 0.00625, 0.003125}) {
    SsmOptions o;
    o.tau = tau;
    SsmLayer L(sched, o);
    Batch d = Z0, f = Z0;
    L.apply(1, d);
    integrate_rk4(flow, f, 0.0, tau, Rk4Options{tau / 50});
    local.push_back(geodesic_distance(d.Z, f.Z));
    Batch dg = Z0, fg = Z0;
    const long N = std::lround(1.0 / tau);
    for (long k = 1; k <= N; ++k) L.apply(k, dg);
    integrate_rk4(flow, fg, 0.0, 1.0, Rk4Options{1e-3});
    global.push_back(geodesic_distance(dg.Z, fg.Z));
  }
  for (std::size_t i = 1; i < local.size(); ++i) {
    EXPECT_NEAR(std::log2(local[i - 1] / local[i]), 2.0, 0.05) << "local, tau index " << i;
    EXPECT_NEAR(std::log2(global[i - 1] / global[i]), 1.0, 0.1) << "global, tau index " << i;
  }
}

// With time-varying weights (layer k at time (k-1) tau) the global error still halves.
TEST(SsmModel, FirstOrderWithTimeVaryingWeights) {
  const SsmParams p0 = random_ssm(15, 4, 6);
  auto g = [](double t) { return 1.0 + 1.2 * std::sin(2.0 * M_PI * t); };
  const Batch Z0 = random_batch(8, 1, 3, 4);
  std::vector<double> global;
  Batch ref = Z0;
  {
    auto fs = std::make_shared<FunctionSchedule<SsmParams>>([&](double t) {
      SsmParams q = p0;
      q.S_B *= g(t);
      return q;
    });
    integrate_rk4(SsmFlow(fs, SsmOptions{}), ref, 0.0, 1.0, Rk4Options{1e-4});
  }
  for (double tau : {0.05, 0.025, 0.0125}) {
    auto fs = std::make_shared<FunctionSchedule<SsmParams>>([&](double t) {
      SsmParams q = p0;
      q.S_B *= g(t);
      return q;
    });
    fs->set_period(tau);
    SsmOptions o;
    o.tau = tau;
    SsmLayer L(fs, o);
    Batch d = Z0;
    for (long k = 1; k <= std::lround(1.0 / tau); ++k) L.apply(k, d);
    global.push_back(geodesic_distance(d.Z, ref.Z));
  }
  for (std::size_t i = 1; i < global.size(); ++i) EXPECT_NEAR(std::log2(global[i - 1] / global[i]), 1.0, 0.15);
}

// Determinism: bit-identical results on 1, 2, 3 and 4 threads (both readout forms, the gate, the
// q sink, the interaction terms and the flow), at sizes where the branch products are several
// tiles of the blocked GEMM spread over threads and the row and run loops go parallel.
TEST(SsmModel, SameBitsOnOneToFourThreads) {
  ThreadCountGuard guard;
  const int n = 64, m = 64, runs = 10, len = 60;
  const SsmParams p = random_ssm(16, n, m);
  const Batch Z0 = random_batch(9, runs, len, n);
  const GemmTiling t = gemm_tiling(runs * len, m, n);
  ASSERT_TRUE(t.parallel && t.tiles() >= 4) << "the branch products must be several tiles spread over threads";
  ASSERT_GE(static_cast<double>(runs) * len * (n + 2 * m), 65536.0) << "the branch row loop must go parallel";
  struct Out {
    std::vector<Tokens> states;
    std::vector<Mat> q;
    Tokens flow;
  };
  auto run = [&](SsmForm form, int threads) {
    set_threads(threads);
    SsmOptions o;
    o.silu_bc = true;
    o.gate = GateKind::Silu;
    o.tau = 0.2;
    SsmLayer L(constant(p), o, form);
    Out out;
    // The layer's tap "q" [runs, tokens] (row-major, as Mat is).
    CallbackTapObserver qtap("q", [&](long, const double* q, const std::vector<std::size_t>& shape) {
      out.q.push_back(Eigen::Map<const Mat>(q, static_cast<Eigen::Index>(shape[0]), static_cast<Eigen::Index>(shape[1])));
    });
    L.watch(&qtap);
    Batch b = Z0;
    for (long k = 1; k <= 6; ++k) {
      L.apply(k, b);
      out.states.push_back(b.Z);
      Mat q;
      L.interaction_terms(k, b, q);
      out.q.push_back(q);
    }
    SsmFlow(constant(p), o).eval(0.0, b, out.flow);
    return out;
  };
  for (const SsmForm form : {SsmForm::InputOutput, SsmForm::Recurrence}) {
    const Out ref = run(form, 1);
    for (int th : kThreadCounts) {
      const Out o = run(form, th);
      EXPECT_EQ(o.states, ref.states) << th << " threads, form " << static_cast<int>(form);
      EXPECT_EQ(o.q, ref.q) << th << " threads";
      EXPECT_EQ(o.flow, ref.flow) << th << " threads";
    }
  }
}
