// The RoPE paper's circle configurations (see include/tokdyn/experiments/rope_circle_configs.hpp).
#include "tokdyn/experiments/rope_circle_configs.hpp"

#include <cmath>
#include <numbers>
#include <string>

#include "tokdyn/core/error.hpp"
#include "tokdyn/experiments/rope_spectra_configs.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/core/parallel.hpp"

namespace tokdyn::rope {

namespace {

using tokdyn::kPi;
}  // namespace

PhaseParams prop32_params() { return PhaseParams{1.0, kPi, {0.0, 1.0, 2.0}}; }
Vec prop32_state_plus() { return Vec{{0.0, kPi / 6.0, kPi / 3.0}}; }
Vec prop32_state_minus() { return Vec{{0.0, kPi / 6.0, 0.0}}; }

EnergyGrid energy_rate_grid(int points) {
  if (points < 2) throw InputError("energy_rate_grid: need at least 2 points per axis, got " + std::to_string(points));
  EnergyGrid g;
  g.axis = Vec::LinSpaced(points, -kPi, kPi);
  g.rate.resize(points, points);
  const PhaseParams p = prop32_params();
  Vec th(3);
  for (int i = 0; i < points; ++i)
    for (int j = 0; j < points; ++j) {
      th << 0.0, g.axis[i], g.axis[j];
      g.rate(i, j) = energy_rate(p, th);
    }
  return g;
}

// The grids below evaluate independent points on every core (parallel_map: one point per thread,
// the same bits at any thread count), in the order of their loops.

std::vector<TwistedRow> twisted_equilibrium_grid(double beta) {
  struct Point {
    int n;
    long m;  // 0: odd antipodal
  };
  std::vector<Point> pts;
  for (int n = 3; n <= 12; ++n)
    for (long m = 1; m <= n - 1; ++m) pts.push_back({n, m});
  for (int n = 3; n <= 11; n += 2) pts.push_back({n, 0});
  return parallel_map(static_cast<long>(pts.size()), [&](long i) {
    const Point& p = pts[static_cast<std::size_t>(i)];
    return p.m > 0 ? twisted_check("resonant", p.n, TwistOmega::resonant(p.n, p.m), beta, p.m)
                   : twisted_check("odd_antipodal", p.n, TwistOmega::odd_antipodal(), beta);
  });
}

std::vector<double> nonresonant_omegas() { return {0.37, 0.73, 1.11, std::sqrt(2.0), 2.17}; }

std::vector<TwistedRow> twisted_nonresonant_grid(double beta, int fd_max_n) {
  std::vector<std::pair<double, int>> pts;
  for (double om : nonresonant_omegas())
    for (int n : kNonresonantN) pts.emplace_back(om, n);
  return parallel_map(static_cast<long>(pts.size()), [&](long i) {
    const auto [om, n] = pts[static_cast<std::size_t>(i)];
    return twisted_check("nonresonant", n, TwistOmega::outside_pi_q(om), beta, 0, n <= fd_max_n);
  });
}

std::vector<CircleDiniRow> circle_dini_grid(const CircleDiniGridSpec& spec) {
  struct Point {
    int n;
    std::size_t bi, wi, di;
    int c;
  };
  std::vector<Point> pts;
  for (int n : spec.n)
    for (std::size_t bi = 0; bi < spec.beta.size(); ++bi)
      for (std::size_t wi = 0; wi < spec.omega.size(); ++wi)
        for (std::size_t di = 0; di < spec.D0.size(); ++di)
          for (int c = 0; c < spec.configs; ++c) pts.push_back({n, bi, wi, di, c});
  return parallel_map(static_cast<long>(pts.size()), [&](long i) {
    const Point& p = pts[static_cast<std::size_t>(i)];
    CircleDiniRow r;
    r.n = p.n;
    r.config = p.c;
    r.ties = p.c % 4;
    r.beta = spec.beta[p.bi];
    r.omega = spec.omega[p.wi];
    r.D0 = spec.D0[p.di];
    const Vec th = circle_state_with_diameter(
        p.n, r.D0, spec.seed, {static_cast<std::uint64_t>(p.n), p.bi, p.wi, p.di, static_cast<std::uint64_t>(p.c)}, r.ties);
    r.dini = diameter_dini(PhaseParams{r.beta, r.omega, {}}, th, spec.tie_tol);
    return r;
  });
}

std::vector<ContractionTrajectory> circle_contraction_grid(const ContractionGridSpec& spec) {
  struct Point {
    int n;
    std::size_t bi, wi, di;
  };
  std::vector<Point> pts;
  for (int n : spec.n)
    for (std::size_t bi = 0; bi < spec.beta.size(); ++bi)
      for (std::size_t wi = 0; wi < spec.omega.size(); ++wi)
        for (std::size_t di = 0; di < spec.D0.size(); ++di) pts.push_back({n, bi, wi, di});
  return parallel_map(static_cast<long>(pts.size()), [&](long i) {
    const Point& p = pts[static_cast<std::size_t>(i)];
    const Vec th = circle_state_with_diameter(p.n, spec.D0[p.di], spec.seed, {1000u + static_cast<std::uint64_t>(p.n), p.bi, p.wi, p.di}, 0);
    return circle_contraction(PhaseParams{spec.beta[p.bi], spec.omega[p.wi], {}}, th, spec.options);
  });
}

std::vector<ContractionTrajectory> fig2a_trajectories(int samples) {
  ContractionOptions o;
  o.samples = samples;
  std::vector<ContractionTrajectory> out;
  out.push_back(circle_contraction(PhaseParams{0.0, 0.0, {}}, Vec{{0.0, 0.9 * kPi}}, o));
  out.push_back(circle_contraction(PhaseParams{1.0, 0.7, {}}, circle_state_with_diameter(6, 0.9 * kPi, kCircleSeed, {2, 1}), o));
  out.push_back(circle_contraction(PhaseParams{2.0, 0.0, {}}, Vec{{0.0, kPi - 0.05}}, o));
  return out;
}

std::vector<Fig2cPoint> fig2c_curve(double D0, const std::vector<double>& times, const AdaptiveOptions& opt) {
  const PhaseParams p{2.0, 0.0, {}};
  const double a = softmax_floor(p.beta, 2);
  PhaseField f(p, 2);
  Batch B = phase_batch(Vec{{0.0, D0}});
  std::vector<Fig2cPoint> out;
  double t = 0.0;
  for (double tk : times) {
    if (!(tk >= t)) throw InputError("fig2c_curve: times must be nondecreasing and >= 0");
    if (tk > t) integrate_adaptive(f, B, t, tk, opt);
    t = tk;
    Fig2cPoint pt;
    pt.t = tk;
    pt.tau = 2.0 * a * tk;
    pt.D_over_pi = lifted_diameter(B.Z.col(0)) / kPi;
    pt.bound_over_pi = 2.0 * std::atan(std::tan(0.5 * D0) * std::exp(-pt.tau)) / kPi;
    out.push_back(pt);
  }
  return out;
}

std::vector<Fig2cPoint> fig2c_checkpoints() { return fig2c_curve(kPi - 0.05, {20.0, 40.0, 60.0}); }

std::vector<CircleRateTriple> circle_rate_fit_triples() {
  std::vector<CircleRateTriple> out;
  for (const RingConfig& c : rate_fit_triples()) out.push_back({c.n, c.m, c.beta});
  return out;
}

PhaseParams order_check_params() { return PhaseParams{1.0, 0.7, {}}; }
PhaseParams rk78_order_params() { return PhaseParams{4.0, 0.7, {}}; }
Vec order_check_state() { return circle_state_with_diameter(6, 0.9 * kPi, kCircleSeed, {3, 1}); }

OrderCheck rk4_order_check_d1() {
  return circle_rk4_order_check(order_check_params(), order_check_state(), 5.0, {0.1, 0.05, 0.025});
}

OrderCheck rk78_order_check_d1() {
  return circle_rk78_order_check(rk78_order_params(), order_check_state(), 4.0, {0.5, 0.25, 0.125});
}

}  // namespace tokdyn::rope
