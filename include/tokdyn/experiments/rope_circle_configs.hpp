#pragma once
// The fixed configurations of the RoPE paper's circle (d = 2) experiments: the Prop. 3.2 setup
// and Fig. 3a's grid, the 70 + 50 twisted-state configurations of App. D.4, the Thm 6.3 grids
// (3240 Dini rows, 72 integrated comparisons), the recipes of Figs. 2a and 2c, the rate-fit
// triples of App. D.2 and the order-check problems of App. D.1. Parameter sets and recipes only;
// the analyses they feed are in analysis/rope_circle.hpp.
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "tokdyn/analysis/rope_circle.hpp"

namespace tokdyn::rope {

// Natural energy (RoPE paper Prop. 3.2, Fig. 3a).

/// Prop. 3.2 setup: n = 3, p = (0,1,2), beta = 1, omega = pi; states (0, pi/6, pi/3), (0, pi/6, 0).
PhaseParams prop32_params();
Vec prop32_state_plus();
Vec prop32_state_minus();

/// Fig. 3a: dE+/dt at theta = (0, axis[i], axis[j]) (Prop. 3.2 parameters), axis = `points`
/// equally spaced values on [-pi, pi] (both ends included). rate(i, j): theta_1 = axis[i], theta_2 = axis[j].
struct EnergyGrid {
  Vec axis;
  Mat rate;
};
EnergyGrid energy_rate_grid(int points = 401);

// Twisted states (RoPE paper App. D.4: the 70 + 50 configurations).

/// The 70 equilibrium configurations: n = 3..12 with every m = 1..n-1 (65, omega = 2 pi m / n),
/// then omega = pi for n = 3,5,7,9,11 (5); beta = 2.
std::vector<TwistedRow> twisted_equilibrium_grid(double beta = 2.0);
/// The 50 nonresonant configurations: omega in {0.37, 0.73, 1.11, sqrt 2, 2.17} x n in
/// kNonresonantN (decision: the paper lists no n; 10 values log-spaced from 10 to 200,
/// round(10 * 20^{k/9})); beta = 2 (the drift is beta-independent). The FD Jacobian is skipped
/// for n > fd_max_n (it costs 2n field evaluations of O(n^2)).
inline const std::vector<int> kNonresonantN = {10, 14, 19, 27, 38, 53, 74, 103, 143, 200};
std::vector<double> nonresonant_omegas();
std::vector<TwistedRow> twisted_nonresonant_grid(double beta = 2.0, int fd_max_n = 1 << 30);

// Strict semicircle contraction (RoPE paper Thm 6.3; the 3240-row Dini grid, the 72 integrated
// comparisons, Figs. 2a and 2c).

/// Seed of the circle grids and seeded states.
inline constexpr std::uint64_t kCircleSeed = 630;
struct CircleDiniGridSpec {
  std::vector<int> n{2, 5, 10};
  std::vector<double> beta{0.5, 1, 2, 4, 8, 16};
  std::vector<double> omega{0.0, 0.7, std::numbers::pi};
  std::vector<double> D0{std::numbers::pi / 2, 0.9 * std::numbers::pi, std::numbers::pi - 1e-6};
  int configs = 20;  ///< configuration c uses ties = c % 4
  std::uint64_t seed = kCircleSeed;
  double tie_tol = 1e-14;
};
struct CircleDiniRow {
  int n = 0, config = 0, ties = 0;
  double beta = 0, omega = 0, D0 = 0;
  DiameterDini dini;
};
/// Default spec: 3 x 6 x 3 x 3 x 20 = 3240 rows.
std::vector<CircleDiniRow> circle_dini_grid(const CircleDiniGridSpec& spec = {});

struct ContractionGridSpec {
  std::vector<int> n{2, 6};
  std::vector<double> beta{0, 1, 2, 4};
  std::vector<double> omega{0.0, 0.7, std::numbers::pi};
  std::vector<double> D0{std::numbers::pi / 2, 0.9 * std::numbers::pi, std::numbers::pi - 1e-3};
  std::uint64_t seed = kCircleSeed;
  ContractionOptions options{};
};
/// Default spec: 2 x 4 x 3 x 3 = 72 trajectories, one seeded state each (ties = 0).
std::vector<ContractionTrajectory> circle_contraction_grid(const ContractionGridSpec& spec = {});

/// Fig. 2a: (n=2, beta=0, D0=0.9 pi) [exact q0 e^{-t}], (n=6, beta=1, omega=0.7, D0=0.9 pi, seeded),
/// (n=2, beta=2, omega=0, D0=pi-0.05); tau in [0, 5], stopped once q/q0 < 1e-10.
std::vector<ContractionTrajectory> fig2a_trajectories(int samples = 501);

/// Fig. 2c: n = 2, beta = 2, omega = 0, theta(0) = (0, D0). D(t)/pi and the comparison
/// 2 atan(tan(D0/2) e^{-tau}) / pi at the requested times.
struct Fig2cPoint {
  double t = 0, tau = 0, D_over_pi = 0, bound_over_pi = 0;
};
std::vector<Fig2cPoint> fig2c_curve(double D0, const std::vector<double>& times,
                                    const AdaptiveOptions& opt = {"fehlberg78", 1e-10, 1e-12, 1e-3, false});
/// The paper's marked points: t = 20, 40, 60 (tau = 0.719, 1.439, 2.158) for D0 = pi - 0.05.
std::vector<Fig2cPoint> fig2c_checkpoints();

// Nonlinear slow-mode rate fits (RoPE paper App. D.2).

/// App. D.2: (8,0,2) (8,1,2) (8,2,2) (8,4,2) (16,1,1) (16,4,4) (16,8,4) (32,2,2) (32,8,2) (32,16,2)
/// (64,16,1) (128,64,1): the triples of rate_fit_triples (experiments/rope_spectra_configs.hpp).
std::vector<CircleRateTriple> circle_rate_fit_triples();

// Integrator order checks (RoPE paper App. D.1).

/// The RK4 order-check circle problem (App. D.1 leaves it unspecified; our choice): n = 6,
/// beta = 1, omega = 0.7, seeded state with lifted diameter 0.9 pi.
PhaseParams order_check_params();
Vec order_check_state();
/// The Fehlberg 7(8) order problem: the same state with beta = 4 (larger error constants, so the
/// h^8 regime sits well above the ~1e-14 roundoff floor at h = 0.5, 0.25, 0.125 over T = 4).
PhaseParams rk78_order_params();

/// App. D.1's RK4 order check: order_check_params / order_check_state, T = 5, h = 0.1, 0.05, 0.025.
OrderCheck rk4_order_check_d1();
/// The Fehlberg 7(8) order check: rk78_order_params / order_check_state, T = 4, h = 0.5, 0.25, 0.125.
OrderCheck rk78_order_check_d1();

}  // namespace tokdyn::rope
