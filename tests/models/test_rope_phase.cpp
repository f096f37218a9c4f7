// The circle (d = 2) phase model (9) of RoPE self-attention: velocity, attention, analytic
// Jacobian, the VectorField over stacked one-column runs, and input validation.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

#include "tokdyn/analysis/rope_circle.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/models/rope/phase.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/constants.hpp"

namespace {

using namespace tokdyn;
using namespace tokdyn::rope;
using tokdyn::kPi;
/// Random parameters and lifted phases (some well outside [-pi, pi]).
struct Case {
  PhaseParams p;
  Vec theta;
};
Case random_case(std::uint64_t id, int n, double beta) {
  Rng rng(4242, {id});
  Case c;
  c.p.beta = beta;
  c.p.omega = rng.uniform(-4.0, 4.0);
  if (id % 2 == 0) {
    c.p.positions.resize(static_cast<std::size_t>(n));
    for (auto& x : c.p.positions) x = rng.uniform(-3.0, 7.0);
  }
  c.theta.resize(n);
  for (int i = 0; i < n; ++i) c.theta[i] = rng.uniform(-9.0, 9.0);
  return c;
}

double max_abs(const Mat& m) { return m.cwiseAbs().maxCoeff(); }

template <class F>
std::string input_error_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no InputError>";
}

TEST(RopePhase, VelocityEqualsCartesianSphereFieldWithD2) {
  double err = 0.0;
  for (std::uint64_t id = 0; id < 40; ++id) {
    const Case c = random_case(id, 2 + static_cast<int>(id % 9), 0.25 * static_cast<double>(id % 17));
    Vec a, b;
    phase_velocity(c.p, c.theta, a);
    phase_velocity_cartesian(c.p, c.theta, b);
    err = std::max(err, (a - b).cwiseAbs().maxCoeff());
  }
  EXPECT_LE(err, 1e-14);
}

TEST(RopePhase, VelocityIsAttentionWeightedSineSum) {
  const Case c = random_case(7, 7, 1.3);
  Mat A;
  phase_attention(c.p, c.theta, A);
  Vec F;
  phase_velocity(c.p, c.theta, F);
  for (int i = 0; i < 7; ++i) {
    double s = 0.0;
    for (int j = 0; j < 7; ++j) s += A(i, j) * std::sin(c.theta[j] - c.theta[i]);
    EXPECT_NEAR(F[i], s, 1e-15);
  }
  // Literal softmax of beta cos(delta_ij) (no max subtraction; beta is small here).
  for (int i = 0; i < 7; ++i) {
    double Z = 0.0;
    for (int j = 0; j < 7; ++j)
      Z += std::exp(c.p.beta * std::cos(c.theta[i] - c.theta[j] + c.p.omega * (c.p.position(i) - c.p.position(j))));
    for (int j = 0; j < 7; ++j) {
      const double d = c.theta[i] - c.theta[j] + c.p.omega * (c.p.position(i) - c.p.position(j));
      EXPECT_NEAR(A(i, j), std::exp(c.p.beta * std::cos(d)) / Z, 1e-15);
    }
  }
}

TEST(RopePhase, AttentionIsRowStochasticAboveTheSharpFloor) {
  for (double beta : {0.0, 0.5, 2.0, 8.0, 16.0}) {
    const Case c = random_case(11, 6, beta);
    Mat A;
    phase_attention(c.p, c.theta, A);
    EXPECT_LE((A.rowwise().sum().array() - 1.0).abs().maxCoeff(), 1e-14);
    EXPECT_GE(A.minCoeff(), softmax_floor(beta, 6) * (1.0 - 1e-12));
  }
}

TEST(RopePhase, VelocityStaysFiniteAndAccurateAtHugeBeta) {
  // beta = 1e4 near a twisted state (all delta_ij ~ 1e-2, so the weights exp(-2 beta sin^2(delta/2))
  // are O(1) and nontrivial): no overflow, and the two independent routes agree.
  const PhaseParams p{1e4, 0.7, {}};
  Vec th = twisted_state(5, 0.7, 1.0);
  Rng rng(5, {5});
  for (int i = 0; i < 5; ++i) th[i] += rng.uniform(-0.01, 0.01);
  Vec a, b;
  phase_velocity(p, th, a);
  phase_velocity_cartesian(p, th, b);
  ASSERT_TRUE(a.allFinite());
  EXPECT_GT(a.cwiseAbs().maxCoeff(), 1e-4);
  EXPECT_LE((a - b).cwiseAbs().maxCoeff(), 1e-10);
  Mat A;
  phase_attention(p, th, A);
  EXPECT_TRUE(A.allFinite());
  EXPECT_LE((A.rowwise().sum().array() - 1.0).abs().maxCoeff(), 1e-14);
  EXPECT_GT(A.minCoeff(), 1e-3);
}

TEST(RopePhase, AnalyticJacobianMatchesCentredDifferences) {
  double worst = 0.0;
  for (std::uint64_t id = 0; id < 24; ++id) {
    const double beta = std::vector<double>{0.0, 0.5, 2.0, 8.0}[id % 4];
    const Case c = random_case(100 + id, 3 + static_cast<int>(id % 6), beta);
    Mat J;
    phase_jacobian(c.p, c.theta, J);
    const Mat Jfd = phase_jacobian_fd(c.p, c.theta, 1e-6);
    worst = std::max(worst, max_abs(J - Jfd) / std::max(1.0, max_abs(J)));
  }
  EXPECT_LE(worst, 1e-7);
}

TEST(RopePhase, JacobianAnnihilatesGlobalRotation) {
  const Case c = random_case(21, 9, 3.0);
  Mat J;
  phase_jacobian(c.p, c.theta, J);
  EXPECT_LE(J.rowwise().sum().cwiseAbs().maxCoeff(), 1e-13);
  // and the field itself is equivariant: theta + c1 has the same velocity
  Vec a, b;
  phase_velocity(c.p, c.theta, a);
  phase_velocity(c.p, (c.theta.array() + 0.731).matrix(), b);
  EXPECT_LE((a - b).cwiseAbs().maxCoeff(), 1e-14);
}

TEST(RopePhase, JacobianAtTwistedStateIsB4ForEveryBeta) {
  for (double beta : {0.0, 1.0, 5.0, 40.0}) {
    const PhaseParams p{beta, 0.9, {}};
    Mat J;
    phase_jacobian(p, twisted_state(7, 0.9, 0.3), J);
    EXPECT_LE(max_abs(J - twisted_jacobian(7, 0.9)), 1e-14) << "beta " << beta;  // delta roundoff x beta
  }
}

TEST(RopePhase, FieldEvaluatesStackedOneColumnRuns) {
  const int n = 5, runs = 3;
  const PhaseParams p{1.7, 0.4, {}};
  PhaseField f(p, n);
  EXPECT_FALSE(f.on_sphere());
  Batch B;
  B.runs = runs;
  B.len = n;
  B.Z.resize(n * runs, 1);
  Rng rng(9, {1});
  for (int k = 0; k < n * runs; ++k) B.Z(k, 0) = rng.uniform(-4.0, 4.0);
  Tokens dZ, V(n * runs, 1), JV, JVfd;
  f.eval(0.0, B, dZ);
  for (int k = 0; k < n * runs; ++k) V(k, 0) = rng.normal();
  f.jvp(0.0, B, V, JV);
  f.VectorField::jvp(0.0, B, V, JVfd);  // the base class's central difference
  for (int r = 0; r < runs; ++r) {
    Vec v;
    const Vec th = batch_phases(B, r);
    phase_velocity(p, th, v);
    EXPECT_LE((dZ.middleRows(r * n, n).col(0) - v).cwiseAbs().maxCoeff(), 0.0);
    Mat J;
    phase_jacobian(p, th, J);
    EXPECT_LE((JV.middleRows(r * n, n).col(0) - J * V.middleRows(r * n, n).col(0)).cwiseAbs().maxCoeff(), 1e-14);
  }
  EXPECT_LE(max_abs(JV - JVfd), 1e-7);
}

TEST(RopePhase, IntegrationKeepsLiftedPhasesUnwrapped) {
  // Tokens far from [-pi, pi] and a diameter near pi: the integrator must not retract or wrap.
  const PhaseParams p{0.5, 0.7, {}};
  PhaseField f(p, 3);
  Batch B = phase_batch(Vec{{20.0, 20.0 + 3.0, 20.0 + 1.0}});
  integrate_rk4(f, B, 0.0, 2.0, Rk4Options{0.01, true});
  const Vec th = batch_phases(B);
  EXPECT_GT(th.minCoeff(), 19.0);
  EXPECT_LT(th.maxCoeff(), 24.0);
  EXPECT_LT(lifted_diameter(th), 3.0);  // contracted (Thm 6.3), measured on lifts
  EXPECT_GT(lifted_diameter(th), 0.1);
}

TEST(RopePhase, BadInputRaisesOneLineInputError) {
  const Vec th2 = Vec::Zero(2);
  const auto one_line = [](const std::string& m) { return m.find('\n') == std::string::npos && m != "<no InputError>"; };
  Vec out;
  EXPECT_TRUE(one_line(input_error_message([&] { phase_velocity(PhaseParams{1.0, 0.0, {}}, Vec::Zero(1), out); })));
  EXPECT_TRUE(one_line(input_error_message([&] { phase_velocity(PhaseParams{-1.0, 0.0, {}}, th2, out); })));
  EXPECT_TRUE(one_line(input_error_message([&] { phase_velocity(PhaseParams{NAN, 0.0, {}}, th2, out); })));
  EXPECT_TRUE(one_line(input_error_message([&] { phase_velocity(PhaseParams{INFINITY, 0.0, {}}, th2, out); })));
  EXPECT_TRUE(one_line(input_error_message([&] { phase_velocity(PhaseParams{1.0, INFINITY, {}}, th2, out); })));
  EXPECT_TRUE(one_line(input_error_message([&] { phase_velocity(PhaseParams{1.0, 0.0, {0.0, NAN}}, th2, out); })));
  EXPECT_TRUE(one_line(input_error_message([&] { phase_velocity(PhaseParams{1.0, 0.0, {0.0, 1.0, 2.0}}, th2, out); })));
  const std::string msg = input_error_message([&] { PhaseParams{-2.0, 0.0, {}}.validate(3, "my model"); });
  EXPECT_NE(msg.find("my model"), std::string::npos);
  EXPECT_NE(msg.find("beta"), std::string::npos);
  EXPECT_TRUE(one_line(input_error_message([&] { PhaseField(PhaseParams{1.0, 0.0, {}}, 1); })));
  PhaseField f(PhaseParams{1.0, 0.0, {}}, 3);
  Tokens dZ;
  // A batch of the wrong shape is tokdyn's own bug, not bad input (error.hpp): std::logic_error.
  Batch wide{Tokens::Zero(3, 2), 1, 3};
  EXPECT_THROW(f.eval(0.0, wide, dZ), std::logic_error);
  Batch shortb{Tokens::Zero(2, 1), 1, 2};
  EXPECT_THROW(f.eval(0.0, shortb, dZ), std::logic_error);
}

}  // namespace
