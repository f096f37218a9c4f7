// The fixed-step guard: the local-rate estimate (power iteration on Jacobian-vector products)
// against fields with known eigenvalues, refusal and refinement of steps outside RK4's stability
// region, bit-identical results when the step is inside it, and refused step counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/models/ssm/designs.hpp"
#include "tokdyn/engine/observers.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/sphere.hpp"

using namespace tokdyn;

namespace {

/// dz/dt = scale(run) z A^T, off the sphere: the Jacobian of run r is scale(r) A.
class Linear final : public VectorField {
 public:
  explicit Linear(Mat A, bool exact_jvp = false) : A_(std::move(A)), exact_(exact_jvp) {}
  void eval(double, const Batch& Z, Tokens& dZ) const override {
    dZ = Z.Z * A_.transpose();
    for (int r = 0; r < Z.runs; ++r) dZ.middleRows(static_cast<Eigen::Index>(r) * Z.len, Z.len) *= scale(r);
  }
  void jvp(double t, const Batch& Z, const Tokens& V, Tokens& out) const override {
    if (!exact_) return VectorField::jvp(t, Z, V, out);
    Batch B{V, Z.runs, Z.len};
    eval(t, B, out);
  }
  bool on_sphere() const override { return false; }
  static double scale(int r) { return 1.0 + r; }

 private:
  Mat A_;
  bool exact_;
};

/// Oja's flow on the sphere, dz/dt = (I - z z^T) A z: at the eigenvector e_1 of A = diag(a), the
/// tangential Jacobian has the eigenvalues a_j - a_1 (j > 1); the normal direction adds -2 a_1.
class Oja final : public VectorField {
 public:
  explicit Oja(Vec a) : a_(std::move(a)) {}
  void eval(double, const Batch& Z, Tokens& dZ) const override {
    dZ = Z.Z * a_.asDiagonal();
    for (Eigen::Index i = 0; i < dZ.rows(); ++i) dZ.row(i) -= Z.Z.row(i).dot(dZ.row(i)) * Z.Z.row(i);
  }

 private:
  Vec a_;
};

/// dz/dt = -k(t) z with k(t) = k0 + slope t (off the sphere): a rate that grows along the run.
class Stiffening final : public VectorField {
 public:
  Stiffening(double k0, double slope) : k0_(k0), slope_(slope) {}
  void eval(double t, const Batch& Z, Tokens& dZ) const override { dZ = -(k0_ + slope_ * t) * Z.Z; }
  bool on_sphere() const override { return false; }
  double exact(double t) const { return std::exp(-(k0_ * t + 0.5 * slope_ * t * t)); }

 private:
  double k0_, slope_;
};

Batch ones(int runs, int len, int d) { return Batch{Tokens::Ones(static_cast<Eigen::Index>(runs) * len, d), runs, len}; }

bool same_bits(const Tokens& a, const Tokens& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<std::size_t>(a.size())) == 0;
}

// The library refuses a bad step with std::invalid_argument (run_experiment reports it as bad
// input, exit 2: error.hpp).
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Known spectra: real, complex pair, non-normal (similar to a diagonal matrix), per-run maximum,
// with the exact JVP and with the default finite-difference JVP.
TEST(StepGuard, LocalRateMatchesTheLargestEigenvalueOfALinearField) {
  Mat Dg = Mat::Zero(3, 3);
  Dg.diagonal() << -1.0, -5.0, -30.0;
  Mat Cx = Mat::Zero(3, 3);  // eigenvalues -2 +- 7i (|.| = sqrt 53) and -3
  Cx << -2.0, 7.0, 0.0, -7.0, -2.0, 0.0, 0.0, 0.0, -3.0;
  Mat S(3, 3);  // non-normal: S diag(-4, 2, -9) S^{-1}
  S << 1.0, 2.0, 0.5, 0.0, 1.0, 3.0, 0.0, 0.0, 1.0;
  Mat Dn = Mat::Zero(3, 3);
  Dn.diagonal() << -4.0, 2.0, -9.0;
  const Mat Nn = S * Dn * S.inverse();
  const std::vector<std::pair<Mat, double>> cases = {{Dg, 30.0}, {Cx, std::sqrt(53.0)}, {Nn, 9.0}};
  for (bool exact : {true, false})
    for (const auto& [A, rho] : cases) {
      const Linear f(A, exact);
      for (int runs : {1, 3}) {
        const Batch Z = ones(runs, 1, 3);
        Tokens v;
        const double est = local_rate(f, 0.0, Z, false, 60, v);
        const double want = rho * Linear::scale(runs - 1);  // the largest run's Jacobian
        EXPECT_NEAR(est, want, 2e-3 * want) << "rho " << rho << " runs " << runs << " exact jvp " << exact;
        // A warm start converges in a few iterations.
        EXPECT_NEAR(local_rate(f, 0.0, Z, false, 4, v), want, 2e-3 * want) << "warm start, rho " << rho;
      }
    }
}

// On the spheres only the tangential Jacobian matters (the retraction removes the normal
// direction): Oja's flow at e_1 with a = (10, 9, 8) has tangential rates 1, 2 and normal -20.
TEST(StepGuard, LocalRateOnTheSphereIsTheTangentialOne) {
  Vec a(3);
  a << 10.0, 9.0, 8.0;
  const Oja f(a);
  Batch Z{Tokens::Zero(1, 3), 1, 1};
  Z.Z(0, 0) = 1.0;
  Tokens v;
  EXPECT_NEAR(local_rate(f, 0.0, Z, true, 40, v), 2.0, 1e-4);
  v.resize(0, 0);
  EXPECT_NEAR(local_rate(f, 0.0, Z, false, 40, v), 20.0, 1e-3);
}

// h x rate = 5 for rate 100, h = 0.05: RK4's |R(-5)| = 13.7, the unguarded run explodes; the
// guard refuses with the parameter, the rate and the largest safe step, or refines to a step
// inside the region and gets the right answer.
TEST(StepGuard, UnstableStepIsRefusedOrRefinedNeverSilentlyWrong) {
  Mat A = Mat::Zero(2, 2);
  A.diagonal() << -100.0, -1.0;
  const Linear f(A, true);
  Rk4Options o;
  o.h = 0.05;
  o.guard.policy = StepPolicy::Off;
  Batch Z = ones(1, 1, 2);
  integrate_rk4(f, Z, 0.0, 1.0, o);
  EXPECT_GT(std::abs(Z.Z(0, 0)), 1e10);  // what an unguarded run silently returns

  o.guard.policy = StepPolicy::Refuse;
  o.guard.fix = "--set integrator=dopri5";
  Z = ones(1, 1, 2);
  const std::string msg = message_of([&] { integrate_rk4(f, Z, 0.0, 1.0, o); });
  EXPECT_NE(msg.find("parameter 'h' = 0.05"), std::string::npos) << msg;
  EXPECT_NE(msg.find("local rate"), std::string::npos) << msg;
  EXPECT_NE(msg.find(" 100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("largest safe step is about 0.02"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--set h=0.02"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--set integrator=dopri5"), std::string::npos) << msg;

  o.guard.policy = StepPolicy::Refine;
  StepReport rep;
  o.report = &rep;
  Z = ones(1, 1, 2);
  integrate_rk4(f, Z, 0.0, 1.0, o);
  EXPECT_NEAR(Z.Z(0, 0), std::exp(-100.0), 1e-12);
  EXPECT_NEAR(Z.Z(0, 1), std::exp(-1.0), 1e-7);
  EXPECT_TRUE(rep.refined());
  EXPECT_EQ(rep.refined_steps, rep.steps);
  EXPECT_DOUBLE_EQ(rep.h_max, 0.0125);  // 0.05 / 4: the first halving inside h x 100 <= 2
  EXPECT_LE(rep.max_h_rate, kRk4MaxHRate);
  EXPECT_NEAR(rep.max_rate, 100.0, 0.1);
}

// The rate is watched along the run, not only at the start: k(t) = 1 + 200 t passes h x k = 2
// at t ~ 1 for h = 0.01.
TEST(StepGuard, RateGrowingAlongTheRunIsCaught) {
  const Stiffening f(1.0, 200.0);
  Rk4Options o;
  o.h = 0.01;
  Batch Z = ones(1, 1, 1);
  const std::string msg = message_of([&] { integrate_rk4(f, Z, 0.0, 2.0, o); });
  ASSERT_NE(msg.find("parameter 'h'"), std::string::npos) << msg;
  const auto at = msg.find("estimated at t = ");
  ASSERT_NE(at, std::string::npos) << msg;
  const double t_refused = std::stod(msg.substr(at + 17));
  EXPECT_GT(t_refused, 0.99);   // refused once h k(t) exceeds 2 (t > 0.995) ...
  EXPECT_LT(t_refused, 1.302);  // ... and before it leaves RK4's region (h k = 2.6156 at t = 1.3028)

  // Unguarded, h k(t) leaves the region at t = 1.30 and the decaying solution blows up by t = 3
  // (|R(-6)| = 31 per step); refined,
  // it decays monotonically like the exact one (RK4's accuracy at h k <= 2 is that of a stiff
  // decayed mode: the guard is about stability).
  o.guard.policy = StepPolicy::Off;
  Z = ones(1, 1, 1);
  integrate_rk4(f, Z, 0.0, 3.0, o);
  EXPECT_GT(std::abs(Z.Z(0, 0)), 1.0);
  o.guard.policy = StepPolicy::Refine;
  StepReport rep;
  o.report = &rep;
  Z = ones(1, 1, 1);
  double last = 1.0;
  CallbackObserver obs([&](double t, const Batch& B) {
    EXPECT_LE(std::abs(B.Z(0, 0)), last) << t;
    if (t >= 0.5) {
      EXPECT_LT(std::abs(B.Z(0, 0)), 1e-10) << t;
    }
    if (t <= 0.2) {
      EXPECT_NEAR(B.Z(0, 0), f.exact(t), 1e-3 * f.exact(t)) << t;
    }
    last = std::abs(B.Z(0, 0));
  });
  integrate_rk4(f, Z, 0.0, 3.0, o, {&obs}, 0.1);
  EXPECT_LT(std::abs(Z.Z(0, 0)), 1e-100);
  EXPECT_TRUE(rep.refined());
  EXPECT_LE(rep.max_h_rate, kRk4MaxHRate);
  EXPECT_GT(rep.max_rate, 500.0);
  EXPECT_LT(rep.max_rate, 601.5);
  EXPECT_LE(rep.h_min, 2.0 / 500.0);
}

// A rate that jumps between two periodic checks (k = 1 before t = 1, 300 after, not reported as
// a switching time) is caught by the step's own stage differences at the next step.
TEST(StepGuard, RateJumpBetweenChecksIsCaughtByTheStageEstimate) {
  class Jumping final : public VectorField {
   public:
    void eval(double t, const Batch& Z, Tokens& dZ) const override { dZ = -(t < 1.0 ? 1.0 : 300.0) * Z.Z; }
    bool on_sphere() const override { return false; }
  } f;
  Rk4Options o;
  o.h = 0.01;
  Batch Z = ones(1, 1, 1);
  const std::string msg = message_of([&] { integrate_rk4(f, Z, 0.0, 2.0, o); });
  const auto at = msg.find("estimated at t = ");
  ASSERT_NE(at, std::string::npos) << msg;
  EXPECT_LE(std::stod(msg.substr(at + 17)), 1.0201) << msg;  // within two steps of the jump
  o.guard.policy = StepPolicy::Refine;
  StepReport rep;
  o.report = &rep;
  Z = ones(1, 1, 1);
  integrate_rk4(f, Z, 0.0, 2.0, o);
  EXPECT_TRUE(rep.refined());
  EXPECT_LT(std::abs(Z.Z(0, 0)), 1e-100);  // decayed, as e^{-1 - 300 (t - 1)}; unguarded it would grow by 1.375 per step
  EXPECT_GT(rep.max_stage_h_rate, 0.25 * kRk4MaxHRate);  // what triggered the check
}

// A guarded step inside the region changes nothing: bit-identical states and observations to
// the unguarded loop, for the SSM flow (S-ANI2, stiff) and the RoPE attention flow.
TEST(StepGuard, StableStepIsAcceptedBitIdentically) {
  const SsmSchedulePtr s = design_s_ani2(80.0, 400.0);
  const SsmFlow ssm(s, SsmOptions{});
  rope::AttentionParams AP;
  AP.d = 4;
  AP.beta = 4.0;
  AP.freqs = {1.0, 0.01};
  const rope::AttentionField att(AP, 8);
  Rng rng(7);
  struct Case {
    const VectorField* f;
    Batch Z0;
    double h, t1;
  };
  const std::vector<Case> cases = {{&ssm, Batch{rng.sphere_tokens(6 * 2, 2), 6, 2}, 0.004, 3.0},
                                   {&att, Batch{rng.sphere_tokens(2 * 8, 4), 2, 8}, 0.01, 5.0}};
  for (const Case& c : cases) {
    std::vector<Tokens> seen[2];
    Batch out[2] = {c.Z0, c.Z0};
    StepReport rep;
    for (int guarded = 0; guarded < 2; ++guarded) {
      Rk4Options o;
      o.h = c.h;
      o.guard.policy = guarded ? StepPolicy::Refuse : StepPolicy::Off;
      o.report = &rep;
      CallbackObserver obs([&](double, const Batch& B) { seen[guarded].push_back(B.Z); });
      integrate_rk4(*c.f, out[guarded], 0.0, c.t1, o, {&obs}, 0.25);
    }
    EXPECT_TRUE(same_bits(out[0].Z, out[1].Z));
    ASSERT_EQ(seen[0].size(), seen[1].size());
    for (std::size_t k = 0; k < seen[0].size(); ++k) EXPECT_TRUE(same_bits(seen[0][k], seen[1][k])) << k;
    EXPECT_FALSE(rep.refined());
    EXPECT_GT(rep.checks, 0);
    EXPECT_LE(rep.max_h_rate, kRk4MaxHRate);
  }
}

// Step and output counts derived from tiny values are refused before they are cast.
TEST(StepGuard, HugeStepCountsAreRefused) {
  const Stiffening f(1.0, 0.0);
  Batch Z = ones(1, 1, 1);
  Rk4Options o;
  o.h = 1e-300;
  std::string msg = message_of([&] { integrate_rk4(f, Z, 0.0, 1.0, o); });
  EXPECT_NE(msg.find("parameter 'h' = 1e-300"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1e+300 steps"), std::string::npos) << msg;
  o.h = 0.1;
  msg = message_of([&] { integrate_rk4(f, Z, 0.0, 1.0, o, {}, 1e-300); });
  EXPECT_NE(msg.find("output interval"), std::string::npos) << msg;
  msg = message_of([&] { integrate_adaptive(f, Z, 0.0, 1.0, AdaptiveOptions{}, {}, 1e-300); });
  EXPECT_NE(msg.find("output interval"), std::string::npos) << msg;
  EXPECT_EQ(message_of([] { checked_step_count("h", 1e-8, 0.0, 1.0); }), "");
  EXPECT_NE(message_of([] { checked_step_count("h", 1e-10, 0.0, 1000.0); }), "");
  EXPECT_NE(message_of([] { checked_step_count("h", std::numeric_limits<double>::denorm_min(), 0.0, 1.0); }), "");
}
