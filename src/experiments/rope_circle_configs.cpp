// The RoPE paper's circle configurations (see include/tokdyn/experiments/rope_circle_configs.hpp).
#include "tokdyn/experiments/rope_circle_configs.hpp"

#include <cmath>
#include <numbers>
#include <string>

#include "tokdyn/error.hpp"
#include "tokdyn/experiments/rope_spectra_configs.hpp"
#include "tokdyn/constants.hpp"

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

std::vector<TwistedRow> twisted_equilibrium_grid(double beta) {
  std::vector<TwistedRow> rows;
  for (int n = 3; n <= 12; ++n)
    for (long m = 1; m <= n - 1; ++m) rows.push_back(twisted_check("resonant", n, TwistOmega::resonant(n, m), beta, m));
  for (int n = 3; n <= 11; n += 2) rows.push_back(twisted_check("odd_antipodal", n, TwistOmega::odd_antipodal(), beta));
  return rows;
}

std::vector<double> nonresonant_omegas() { return {0.37, 0.73, 1.11, std::sqrt(2.0), 2.17}; }

std::vector<TwistedRow> twisted_nonresonant_grid(double beta, int fd_max_n) {
  std::vector<TwistedRow> rows;
  for (double om : nonresonant_omegas())
    for (int n : kNonresonantN)
      rows.push_back(twisted_check("nonresonant", n, TwistOmega::outside_pi_q(om), beta, 0, n <= fd_max_n));
  return rows;
}

std::vector<CircleDiniRow> circle_dini_grid(const CircleDiniGridSpec& spec) {
  std::vector<CircleDiniRow> rows;
  for (int n : spec.n)
    for (std::size_t bi = 0; bi < spec.beta.size(); ++bi)
      for (std::size_t wi = 0; wi < spec.omega.size(); ++wi)
        for (std::size_t di = 0; di < spec.D0.size(); ++di)
          for (int c = 0; c < spec.configs; ++c) {
            CircleDiniRow r;
            r.n = n;
            r.config = c;
            r.ties = c % 4;
            r.beta = spec.beta[bi];
            r.omega = spec.omega[wi];
            r.D0 = spec.D0[di];
            const Vec th = circle_state_with_diameter(
                n, r.D0, spec.seed,
                {static_cast<std::uint64_t>(n), bi, wi, di, static_cast<std::uint64_t>(c)}, r.ties);
            r.dini = diameter_dini(PhaseParams{r.beta, r.omega, {}}, th, spec.tie_tol);
            rows.push_back(r);
          }
  return rows;
}

std::vector<ContractionTrajectory> circle_contraction_grid(const ContractionGridSpec& spec) {
  std::vector<ContractionTrajectory> out;
  for (int n : spec.n)
    for (std::size_t bi = 0; bi < spec.beta.size(); ++bi)
      for (std::size_t wi = 0; wi < spec.omega.size(); ++wi)
        for (std::size_t di = 0; di < spec.D0.size(); ++di) {
          const Vec th = circle_state_with_diameter(n, spec.D0[di], spec.seed,
                                                    {1000u + static_cast<std::uint64_t>(n), bi, wi, di}, 0);
          out.push_back(circle_contraction(PhaseParams{spec.beta[bi], spec.omega[wi], {}}, th, spec.options));
        }
  return out;
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
