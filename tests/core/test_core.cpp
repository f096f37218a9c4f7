// Core: sphere projection and tangent map (spec T1), RNG streams, weight schedules, drivers.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/engine/schedule.hpp"
#include "tokdyn/core/sphere.hpp"

using namespace tokdyn;

TEST(Sphere, TangentMapIsTheDerivativeOfTheProjection) {
  Rng rng(1);
  Vec x(8), X(8);
  rng.fill_normal(x);
  rng.fill_normal(X);
  auto pi = [](const Vec& v) { return Vec(v / v.norm()); };
  const double h = 1e-6;
  const Vec fd = (pi(x + h * X) - pi(x - h * X)) / (2 * h);
  const Vec tm = tangent_map(x, X);
  EXPECT_LT((fd - tm).norm() / tm.norm(), 1e-8);
  const Vec z = pi(x);
  EXPECT_LT(std::abs(z.dot(tangent_map(z, X))), 1e-15);
}

TEST(Sphere, GeodesicDistanceOfOrthogonalAndAntipodalPoints) {
  Tokens A = Tokens::Identity(2, 3), B(2, 3);
  B << 0, 1, 0, -1, 0, 0;  // row 0 orthogonal (pi/2), row 1 ... <e2, -e1> = 0 too
  EXPECT_NEAR(geodesic_distance(A, B), std::sqrt(2.0) * M_PI / 2, 1e-15);
  Tokens C = -A;
  EXPECT_NEAR(geodesic_distance(A, C), std::sqrt(2.0) * M_PI, 1e-15);
}

TEST(Rng, StreamsDependOnlyOnSeedAndIds) {
  Rng a(42, {3, 7}), b(42, {3, 7}), c(42, {7, 3}), d(43, {3, 7});
  const auto x = a.next_u64();
  EXPECT_EQ(x, b.next_u64());
  EXPECT_NE(x, c.next_u64());
  EXPECT_NE(x, d.next_u64());
  // Drawing in another thread gives the same stream.
  std::uint64_t y = 0;
  std::thread t([&] { y = Rng(42, {3, 7}).next_u64(); });
  t.join();
  EXPECT_EQ(x, y);
}

TEST(Rng, NormalsHaveUnitVarianceAndUniformsAreInRange) {
  Rng rng(5);
  double s = 0, s2 = 0;
  const int N = 200000;
  for (int i = 0; i < N; ++i) {
    const double z = rng.normal();
    s += z;
    s2 += z * z;
  }
  EXPECT_NEAR(s / N, 0.0, 4.0 / std::sqrt(N));
  EXPECT_NEAR(s2 / N, 1.0, 4.0 * std::sqrt(2.0 / N));
  for (int i = 0; i < 1000; ++i) {
    const double u = rng.uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    EXPECT_LT(rng.below(7), 7u);
  }
  const Tokens Z = rng.sphere_tokens(5, 4);
  EXPECT_LT(max_norm_deviation(Z), 1e-15);
}

namespace {
struct Tag {
  long id;
};
}  // namespace

TEST(Schedule, CycleUsesLayerKMinusOneModSize) {
  CycleSchedule<Tag> s({{0}, {1}, {2}});
  EXPECT_EQ(s.at_layer(1)->id, 0);
  EXPECT_EQ(s.at_layer(3)->id, 2);
  EXPECT_EQ(s.at_layer(4)->id, 0);
  EXPECT_EQ(s.at_layer(200)->id, (200 - 1) % 3);
  EXPECT_EQ(s.at_time(2.5)->id, 2);  // t in [2, 3) is layer 3
}

TEST(Schedule, IidRedrawsEveryLLayersReproducibly) {
  auto gen = [](Rng& r) { return Tag{static_cast<long>(r.next_u64() >> 1)}; };
  IidSchedule<Tag> every1(gen, 9, 1), every3(gen, 9, 3);
  EXPECT_NE(every1.at_layer(1)->id, every1.at_layer(2)->id);
  EXPECT_EQ(every3.at_layer(1)->id, every3.at_layer(3)->id);
  EXPECT_NE(every3.at_layer(3)->id, every3.at_layer(4)->id);
  // Any order, fresh object: same draw for the same layer.
  IidSchedule<Tag> again(gen, 9, 1);
  const long l7 = again.at_layer(7)->id;
  for (long k = 1; k <= 10; ++k) every1.at_layer(k);
  EXPECT_EQ(every1.at_layer(7)->id, l7);
  const auto sw = every3.switching_times(0.0, 10.0);
  ASSERT_EQ(sw.size(), 3u);
  EXPECT_DOUBLE_EQ(sw[0], 3.0);
}

namespace {
/// dz/dt = A z on the circle (rotation): exact solution known; on_sphere.
class Rotation final : public VectorField {
 public:
  void eval(double, const Batch& Z, Tokens& dZ) const override {
    dZ.resize(Z.Z.rows(), 2);
    dZ.col(0) = -Z.Z.col(1);
    dZ.col(1) = Z.Z.col(0);
  }
};
/// Non-autonomous, off the sphere: dz/dt = cos(t) z, z(t) = z0 exp(sin t).
class Growth final : public VectorField {
 public:
  void eval(double t, const Batch& Z, Tokens& dZ) const override { dZ = std::cos(t) * Z.Z; }
  bool on_sphere() const override { return false; }
};
/// Piecewise constant in t with a jump at t = 1: dz/dt = 1 for t < 1, -2 after.
class Jump final : public VectorField {
 public:
  void eval(double t, const Batch& Z, Tokens& dZ) const override {
    dZ = Tokens::Constant(Z.Z.rows(), Z.Z.cols(), t < 1.0 ? 1.0 : -2.0);
  }
  bool on_sphere() const override { return false; }
  std::vector<double> switching_times(double t0, double t1) const override {
    return (t0 < 1.0 && 1.0 < t1) ? std::vector<double>{1.0} : std::vector<double>{};
  }
};
Batch one(double a, double b) {
  Batch B{Tokens(1, 2), 1, 1};
  B.Z << a, b;
  return B;
}
}  // namespace

TEST(Drivers, Rk4IsFourthOrder) {
  std::vector<double> err;
  for (double h : {0.2, 0.1, 0.05}) {
    Batch Z = one(1.0, 0.0);
    integrate_rk4(Growth(), Z, 0.0, 2.0, Rk4Options{h});
    err.push_back(std::abs(Z.Z(0, 0) - std::exp(std::sin(2.0))));
  }
  EXPECT_NEAR(std::log2(err[0] / err[1]), 4.0, 0.2);
  EXPECT_NEAR(std::log2(err[1] / err[2]), 4.0, 0.2);
}

TEST(Drivers, RetractedRk4StaysOnTheSphere) {
  Batch Z = one(1.0, 0.0);
  integrate_rk4(Rotation(), Z, 0.0, 10.0, Rk4Options{0.3});
  EXPECT_LT(max_norm_deviation(Z.Z), 1e-15);
  EXPECT_NEAR(Z.Z(0, 0), std::cos(10.0), 1e-3);
}

TEST(Drivers, Rk4LandsExactlyOnSwitchingTimes) {
  Batch Z = one(0.0, 0.0);
  integrate_rk4(Jump(), Z, 0.0, 2.0, Rk4Options{0.3});  // 0.3 does not divide 1
  EXPECT_NEAR(Z.Z(0, 0), 1.0 - 2.0, 1e-14);
}

TEST(Drivers, AdaptiveMethodsMeetTheirTolerance) {
  for (const char* m : {"dopri5", "cash_karp54", "fehlberg78"}) {
    for (double tol : {1e-6, 1e-10}) {
      Batch Z = one(1.0, 0.0);
      AdaptiveOptions o;
      o.method = m;
      o.rtol = tol;
      o.atol = tol;
      const auto st = integrate_adaptive(Growth(), Z, 0.0, 3.0, o);
      EXPECT_LT(std::abs(Z.Z(0, 0) - std::exp(std::sin(3.0))), 200 * tol) << m << " tol " << tol;
      EXPECT_GT(st.accepted, 0);
    }
  }
}

TEST(Drivers, BulirschStoerInterpolatesOutputsWithoutLandingOnThem) {
  for (double tol : {1e-6, 1e-10}) {
    Batch Z = one(1.0, 0.0);
    AdaptiveOptions o;
    o.method = "bulirsch_stoer";
    o.rtol = o.atol = tol;
    o.retract = false;
    double worst = 0.0;
    long outputs = 0;
    CallbackObserver obs([&](double t, const Batch& B) {
      worst = std::max(worst, std::abs(B.Z(0, 0) - std::exp(std::sin(t))));
      ++outputs;
    });
    const auto st = integrate_adaptive(Growth(), Z, 0.0, 3.0, o, {&obs}, 3.0 / 360.0);
    EXPECT_EQ(outputs, 361);
    EXPECT_LT(worst, 200 * tol) << tol;          // dense output at every output time
    EXPECT_LT(st.accepted, 120) << tol;          // far fewer steps than outputs
    EXPECT_NEAR(Z.Z(0, 0), std::exp(std::sin(3.0)), 200 * tol);
  }
  AdaptiveOptions o;
  o.method = "bulirsch_stoer";
  Batch R = one(0.6, 0.8);
  EXPECT_THROW(integrate_adaptive(Rotation(), R, 0.0, 1.0, o), std::invalid_argument);  // would need retraction
  o.retract = false;
  Batch J = one(0.0, 0.0);
  EXPECT_THROW(integrate_adaptive(Jump(), J, 0.0, 2.0, o), std::invalid_argument);  // switching time inside
}

TEST(Drivers, AdaptiveStopsAtSwitchingTimesAndRetracts) {
  Batch Z = one(0.0, 0.0);
  integrate_adaptive(Jump(), Z, 0.0, 2.0, AdaptiveOptions{});
  EXPECT_NEAR(Z.Z(0, 0), -1.0, 1e-12);
  Batch R = one(0.6, 0.8);
  AdaptiveOptions o;
  o.rtol = o.atol = 1e-11;
  integrate_adaptive(Rotation(), R, 0.0, 5.0, o);
  EXPECT_LT(max_norm_deviation(R.Z), 1e-15);
  EXPECT_NEAR(R.Z(0, 0), 0.6 * std::cos(5.0) - 0.8 * std::sin(5.0), 1e-9);
}

TEST(Drivers, ObserversSeeInitialAndEveryOutputTime) {
  std::vector<double> seen;
  CallbackObserver obs([&](double t, const Batch&) { seen.push_back(t); });
  Batch Z = one(1.0, 0.0);
  integrate_rk4(Rotation(), Z, 0.0, 1.0, Rk4Options{0.01}, {&obs}, 0.25);
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_DOUBLE_EQ(seen.front(), 0.0);
  EXPECT_NEAR(seen[2], 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(seen.back(), 1.0);
}

