// Analyses of the RoPE circle phase model: natural energy (Prop. 3.2, (11), Fig. 3a), twisted
// states (Props. 4.2, 7.1, 7.2, App. D.4, Figs. 3b/3c), strict semicircle contraction (Thm 6.3,
// Prop. 6.4, Lemma C.1, Figs. 2a/2c), resonant slow-mode rate fits (App. D.2) and integrator
// order checks (App. D.1). Achieved values are printed as "[rope-circle] ..." lines.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>

#include "tokdyn/analysis/rope_circle.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/experiments/rope_circle_configs.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/constants.hpp"

namespace {

using namespace tokdyn;
using namespace tokdyn::rope;
using tokdyn::kPi;
double max_abs(const Mat& m) { return m.cwiseAbs().maxCoeff(); }

template <class F>
bool one_line_input_error(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {  // the library's refusal
    return std::string(e.what()).find('\n') == std::string::npos;
  } catch (const InputError& e) {  // a paper configuration's (experiments layer)
    return std::string(e.what()).find('\n') == std::string::npos;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Energy.

TEST(RopeCircleEnergy, Prop32WitnessesMatchClosedFormsWithOppositeSigns) {
  const PhaseParams p = prop32_params();
  const double plus = energy_rate(p, prop32_state_plus()), minus = energy_rate(p, prop32_state_minus());
  std::printf("[rope-circle] Prop 3.2: dE+/dt = %.16g (closed %.16g), %.16g (closed %.16g)\n", plus,
              energy_witness_plus_closed(), minus, energy_witness_minus_closed());
  EXPECT_NEAR(energy_witness_plus_closed(), 1.666364304459315, 1e-14);
  EXPECT_NEAR(energy_witness_minus_closed(), -0.1296131359239394, 1e-15);
  EXPECT_NEAR(plus, energy_witness_plus_closed(), 1e-13);
  EXPECT_NEAR(minus, energy_witness_minus_closed(), 1e-13);
  EXPECT_GT(plus, 0.0);
  EXPECT_LT(minus, 0.0);
}

TEST(RopeCircleEnergy, IdentityAgreesWithCentredDifferenceAlongTheField) {
  const PhaseParams p = prop32_params();
  for (const Vec& th : {prop32_state_plus(), prop32_state_minus()}) {
    const double a = energy_rate(p, th), fd = energy_rate_fd(p, th, 1e-6);
    std::printf("[rope-circle] energy FD: |identity - FD| = %.3e\n", std::abs(a - fd));
    EXPECT_LE(std::abs(a - fd), 2e-8);
    EXPECT_LE(std::abs(a - fd), 2e-8 * std::abs(a));
  }
  // Random states and parameters too.
  Rng rng(31, {0});
  for (int k = 0; k < 20; ++k) {
    const int n = 2 + k % 6;
    PhaseParams q{rng.uniform(0.0, 3.0), rng.uniform(-3.0, 3.0), {}};
    Vec th(n);
    for (int i = 0; i < n; ++i) th[i] = rng.uniform(-kPi, kPi);
    const double a = energy_rate(q, th), fd = energy_rate_fd(q, th);
    // Roundoff of the centred difference is ~ eps E+ / h: scale with the energy itself.
    EXPECT_LE(std::abs(a - fd), 2e-8 * std::max(1.0, std::abs(a)) + 1e-9 * energy_plus(q, th));
  }
}

TEST(RopeCircleEnergy, GradientAndVelocityIdentitiesOfA1) {
  const PhaseParams p{1.4, 0.9, {0.0, 0.5, 2.0, 3.5}};
  const Vec th{{0.3, -1.0, 2.2, 0.7}};
  const EnergyTerms e = energy_terms(p, th);
  Vec F;
  phase_velocity(p, th, F);
  for (int i = 0; i < 4; ++i) {
    Vec tp = th, tm = th;
    tp[i] += 1e-6;
    tm[i] -= 1e-6;
    const double g = (energy_plus(p, tp) - energy_plus(p, tm)) / 2e-6;
    EXPECT_NEAR(g, -2.0 * p.beta * e.u[i], 1e-7 * std::abs(e.E));  // dE+/dtheta_i = -2 beta u_i
    EXPECT_NEAR(F[i], -e.v[i] / e.Z[i], 1e-15);                    // dtheta_i = -v_i / Z_i
  }
}

TEST(RopeCircleEnergy, RateIsNonnegativeAtOmegaZero) {
  Rng rng(32, {0});
  double worst = INFINITY;
  for (int k = 0; k < 200; ++k) {
    const int n = 2 + k % 9;
    PhaseParams p{rng.uniform(0.0, 5.0), 0.0, {}};
    if (k % 2) {
      p.positions.resize(static_cast<std::size_t>(n));
      for (auto& x : p.positions) x = rng.uniform(-5.0, 5.0);
    }
    Vec th(n);
    for (int i = 0; i < n; ++i) th[i] = rng.uniform(-6.0, 6.0);
    const EnergyTerms e = energy_terms(p, th);
    EXPECT_LE((e.u - e.v).cwiseAbs().maxCoeff(), 1e-12 * e.E);  // u = v at omega = 0
    worst = std::min(worst, e.rate);
  }
  std::printf("[rope-circle] (11): min dE+/dt over 200 random omega=0 states = %.3e\n", worst);
  EXPECT_GE(worst, -1e-14);
}

TEST(RopeCircleEnergy, Fig3aGridContainsTheWitnessesAndBothSigns) {
  const EnergyGrid g = energy_rate_grid(13);  // step pi/6: pi/6 and pi/3 are nodes 7 and 8
  ASSERT_EQ(g.axis.size(), 13);
  EXPECT_DOUBLE_EQ(g.axis[0], -kPi);
  EXPECT_DOUBLE_EQ(g.axis[12], kPi);
  EXPECT_NEAR(g.rate(7, 8), energy_witness_plus_closed(), 1e-12);
  EXPECT_NEAR(g.rate(7, 6), energy_witness_minus_closed(), 1e-12);
  EXPECT_LT(g.rate.minCoeff(), 0.0);
  EXPECT_GT(g.rate.maxCoeff(), 0.0);
  EXPECT_LT(max_abs(g.rate), 4.0);  // the figure's colour range is about [-3, 3]
}

// ---------------------------------------------------------------------------------------------
// Twisted states.

TEST(RopeCircleTwisted, EquilibriumIsDecidedFromIntegersAndMatchesTheRhs) {
  for (int n = 3; n <= 12; ++n) {
    for (long m = 0; m < n; ++m) EXPECT_TRUE(is_twisted_equilibrium(n, TwistOmega::resonant(n, m)));
    EXPECT_EQ(is_twisted_equilibrium(n, TwistOmega::odd_antipodal(3)), true);  // 7 pi
    EXPECT_FALSE(is_twisted_equilibrium(n, TwistOmega::outside_pi_q(0.37)));
    // omega = pi / (n + 1): in pi*Q but neither in pi Z nor with n omega in 2 pi Z.
    const TwistOmega w = TwistOmega::pi_rational(1, n + 1);
    EXPECT_FALSE(is_twisted_equilibrium(n, w));
    const PhaseParams p{2.0, w.value(), {}};
    Vec F;
    phase_velocity(p, twisted_state(n, w.value()), F);
    EXPECT_GT(F.cwiseAbs().maxCoeff(), 1e-3) << n;  // clearly nonzero outside (16)
  }
  EXPECT_TRUE(is_twisted_equilibrium(4, TwistOmega::pi_rational(1, 2)));   // 4 * pi/2 = 2 pi
  EXPECT_FALSE(is_twisted_equilibrium(3, TwistOmega::pi_rational(1, 2)));
  EXPECT_TRUE(is_twisted_equilibrium(6, TwistOmega::pi_rational(-2, 6)));  // -pi/3, reduced
  EXPECT_TRUE(is_twisted_equilibrium(5, TwistOmega::odd_antipodal()));     // pi with n odd: bipodal
}

TEST(RopeCircleTwisted, SeventyEquilibriaMatchTheirExactSpectraAndFdJacobians) {
  const TwistedSummary s = summarize_twisted(twisted_equilibrium_grid(2.0));
  int resonant = 0, antipodal = 0;
  for (const auto& r : s.rows) {
    resonant += r.family == "resonant";
    antipodal += r.family == "odd_antipodal";
    EXPECT_TRUE(r.equilibrium);
  }
  std::printf("[rope-circle] 70 equilibria: count %d, max RHS %.3e, drift err %.3e, Jacobian FD err %.3e "
              "(paper 3.070e-9), general-vs-(B-4) %.3e, spectrum err %.3e\n",
              s.count, s.max_rhs, s.max_drift_error, s.max_jacobian_fd_error, s.max_jacobian_general_error,
              s.max_spectrum_error);
  EXPECT_EQ(s.count, 70);
  EXPECT_EQ(resonant, 65);
  EXPECT_EQ(antipodal, 5);
  EXPECT_LE(s.max_rhs, 1e-14);
  EXPECT_LE(s.max_drift_error, 1e-14);
  EXPECT_LE(s.max_jacobian_fd_error, 1e-7);
  EXPECT_LE(s.max_jacobian_general_error, 1e-14);
  EXPECT_LE(s.max_spectrum_error, 1e-12);
}

TEST(RopeCircleTwisted, NonresonantDriftMatchesA5AndObeysTheBounds) {
  // All 50 rows for the drift; the FD Jacobian only up to n = 40 here (the preset runs all).
  const TwistedSummary s = summarize_twisted(twisted_nonresonant_grid(2.0, 40));
  std::printf("[rope-circle] 50 nonresonant: count %d, drift err %.3e (paper 3.764e-16), Jacobian FD err (n<=40) %.3e\n",
              s.count, s.max_drift_error, s.max_jacobian_fd_error);
  EXPECT_EQ(s.count, 50);
  EXPECT_TRUE(s.bounds_ok);
  EXPECT_LE(s.max_drift_error, 1e-14);
  EXPECT_LE(s.max_jacobian_fd_error, 1e-7);
  for (const auto& r : s.rows) {
    EXPECT_FALSE(r.equilibrium);
    EXPECT_GT(r.rhs_max, 1e-6);  // a genuine drift
  }
}

TEST(RopeCircleTwisted, DriftClosedFormEqualsTheLiteralSumA4) {
  for (double om : nonresonant_omegas())
    for (int n : {2, 5, 17, 64}) EXPECT_LE((twisted_drift(n, om) - twisted_drift_sum(n, om)).cwiseAbs().maxCoeff(), 1e-14);
}

TEST(RopeCircleTwisted, Fig3bMultiplicities) {
  const auto generic = eigenvalue_multiplicities(twisted_jacobian(9, 2.0 * kPi * 2.0 / 9.0));
  ASSERT_EQ(generic.size(), 2u);
  EXPECT_NEAR(generic[0].first, 0.0, 1e-12);
  EXPECT_EQ(generic[0].second, 7);
  EXPECT_NEAR(generic[1].first, 0.5, 1e-12);
  EXPECT_EQ(generic[1].second, 2);
  const auto anti = eigenvalue_multiplicities(twisted_jacobian(9, kPi));
  ASSERT_EQ(anti.size(), 4u);
  const double want[4] = {-1.0 / 9.0, 0.0, 1.0 / 9.0, 1.0};
  const int mult[4] = {4, 1, 3, 1};
  for (int k = 0; k < 4; ++k) {
    EXPECT_NEAR(anti[k].first, want[k], 1e-12);
    EXPECT_EQ(anti[k].second, mult[k]);
  }
  // The same multisets from integers.
  const auto ex = twisted_spectrum_exact(9, TwistOmega::odd_antipodal());
  ASSERT_EQ(ex.size(), 4u);
  EXPECT_EQ(ex[0].num, -1);
  EXPECT_EQ(ex[0].den, 9);
  EXPECT_EQ(ex[0].mult, 4);
  EXPECT_EQ(ex[2].mult, 3);
  const auto even = twisted_spectrum_exact(8, TwistOmega::resonant(8, 4));  // (42)
  EXPECT_EQ(even.back().num, 1);
  EXPECT_EQ(even.back().mult, 1);
  EXPECT_EQ(even.front().mult, 7);
  const auto cons = twisted_spectrum_exact(5, TwistOmega::resonant(5, 10));  // m = 0 mod n: consensus
  EXPECT_EQ(cons.front().num, -1);
  EXPECT_EQ(cons.front().mult, 4);
}

TEST(RopeCircleTwisted, JacobianIsIndependentOfBeta) {
  for (int m : {1, 3}) {
    const double om = 2.0 * kPi * m / 10.0;
    Mat J0;
    phase_jacobian(PhaseParams{0.0, om, {}}, twisted_state(10, om, 0.4), J0);
    for (double beta : {0.5, 2.0, 16.0}) {
      Mat J;
      phase_jacobian(PhaseParams{beta, om, {}}, twisted_state(10, om, 0.4), J);
      EXPECT_LE(max_abs(J - J0), 1e-14);  // roundoff of delta_ij ~ 1e-16 times beta
      EXPECT_LE(max_abs(phase_jacobian_fd(PhaseParams{beta, om, {}}, twisted_state(10, om, 0.4)) - J0), 1e-7);
    }
  }
}

TEST(RopeCircleTwisted, DriftConstantIsNotUniformAsOmegaApproachesZero) {
  // omega_n = pi / n, i = 0: F_0 = -(1/n) sum_j sin(pi j / n) -> -2/pi.
  const int n = 1000;
  const double om = kPi / n;
  Vec F;
  phase_velocity(PhaseParams{2.0, om, {}}, twisted_state(n, om), F);
  const double f0 = twisted_drift(n, om)[0];
  std::printf("[rope-circle] omega = pi/n, n = 1000: F_0 = %.8f (direct %.8f), -2/pi = %.8f\n", f0, F[0], -2.0 / kPi);
  EXPECT_NEAR(f0, -2.0 / kPi, 1e-5);
  EXPECT_NEAR(F[0], f0, 1e-13);
  EXPECT_LE(std::abs(f0), drift_bound_sharp(n, om) + 1e-15);
}

TEST(RopeCircleTwisted, ExactSpectrumRejectsNonEquilibria) {
  EXPECT_TRUE(one_line_input_error([] { twisted_spectrum_exact(6, TwistOmega::outside_pi_q(1.11)); }));
  EXPECT_TRUE(one_line_input_error([] { twisted_spectrum_exact(3, TwistOmega::pi_rational(1, 2)); }));
  EXPECT_TRUE(one_line_input_error([] { TwistOmega::pi_rational(1, 0); }));
  EXPECT_TRUE(one_line_input_error([] { TwistOmega::outside_pi_q(0.0); }));
  EXPECT_TRUE(one_line_input_error([] { TwistOmega::outside_pi_q(NAN); }));
  EXPECT_TRUE(one_line_input_error([] { twisted_state(1, 0.5); }));
}

// ---------------------------------------------------------------------------------------------
// Semicircle contraction.

TEST(RopeCircleContraction, FloorAndDiameterStates) {
  EXPECT_DOUBLE_EQ(softmax_floor(0.0, 4), 0.25);
  EXPECT_NEAR(softmax_floor(2.0, 3), 1.0 / (1.0 + 2.0 * std::exp(4.0)), 1e-17);
  for (int ties = 0; ties < 4; ++ties) {
    const Vec th = circle_state_with_diameter(6, 0.9 * kPi, 1, {7}, ties);
    EXPECT_EQ(lifted_diameter(th), 0.9 * kPi);
    EXPECT_EQ((th.array() == 0.0).count(), 1 + (ties & 1));
    EXPECT_EQ((th.array() == 0.9 * kPi).count(), 1 + ((ties & 2) >> 1));
  }
}

TEST(RopeCircleContraction, CircleDiniGridHasNonnegativeResiduals) {
  const auto rows = circle_dini_grid();
  double min_c2 = INFINITY, min_direct = INFINITY, agree = 0.0;
  int tied = 0;
  for (const auto& r : rows) {
    ASSERT_EQ(r.dini.D, r.D0);  // lifted diameter exactly D0
    min_c2 = std::min(min_c2, r.dini.residual_c2);
    min_direct = std::min(min_direct, r.dini.residual_direct);
    agree = std::max(agree, std::abs(r.dini.dini_c2 - r.dini.dini_direct));
    tied += (r.dini.active_max > 1 || r.dini.active_min > 1);
  }
  std::printf("[rope-circle] circle Dini grid: %zu rows, min residual (C-2) %.3e, direct %.3e, |C-2 - direct| %.3e, tied rows %d\n",
              rows.size(), min_c2, min_direct, agree, tied);
  EXPECT_EQ(rows.size(), 3240u);
  EXPECT_GE(min_c2, -1e-13);
  EXPECT_GE(min_direct, -1e-13);
  EXPECT_LE(agree, 1e-14);
  EXPECT_GT(tied, 1000);
}

TEST(RopeCircleContraction, ActiveSetDiniEqualsOneSidedDifferenceWithTies) {
  // Lemma C.1 on the flow: D+D from the active sets vs [D(theta + h F) - D(theta)] / h.
  const PhaseParams p{1.5, 0.7, {}};
  for (int ties = 0; ties < 4; ++ties) {
    const Vec th = circle_state_with_diameter(7, 2.0, 5, {static_cast<std::uint64_t>(ties)}, ties);
    const DiameterDini d = diameter_dini(p, th);
    Vec F;
    phase_velocity(p, th, F);
    const double h = 1e-7;
    const double one_sided = (lifted_diameter(th + h * F) - lifted_diameter(th)) / h;
    EXPECT_NEAR(d.dini_c2, one_sided, 1e-6) << "ties " << ties;
    EXPECT_EQ(d.active_min, 1 + (ties & 1));
    EXPECT_EQ(d.active_max, 1 + ((ties & 2) >> 1));
  }
}

TEST(RopeCircleContraction, SeventyTwoIntegratedComparisonsStayBelowTheEnvelope) {
  const auto tr = circle_contraction_grid();
  double worst = -INFINITY, worst_abs = -INFINITY;
  long steps = 0;
  for (const auto& t : tr) {
    worst = std::max(worst, t.max_excess);
    worst_abs = std::max(worst_abs, t.max_excess_abs);
    steps += t.stats.accepted;
    EXPECT_EQ(t.method, "fehlberg78");
    EXPECT_EQ(t.samples.front().q_ratio, 1.0);
  }
  std::printf("[rope-circle] 72 integrated: max excess q/q0 - e^-tau = %.3e (abs q - q0 e^-tau %.3e; paper 2.961e-10), %ld steps\n",
              worst, worst_abs, steps);
  EXPECT_EQ(tr.size(), 72u);
  EXPECT_LE(worst, 2e-8);
}

TEST(RopeCircleContraction, Fig2aExactCaseAndStopRule) {
  const auto tr = fig2a_trajectories(101);
  ASSERT_EQ(tr.size(), 3u);
  // (n = 2, beta = 0): q = q0 e^{-t} exactly, tau = t.
  double err = 0.0;
  for (const auto& s : tr[0].samples) {
    EXPECT_DOUBLE_EQ(s.tau, s.t);
    err = std::max(err, std::abs(s.q_ratio - std::exp(-s.t)));
  }
  std::printf("[rope-circle] Fig 2a: exact-case max |q/q0 - e^-t| = %.3e; excesses %.3e %.3e %.3e; third stopped at tau %.3f\n",
              err, tr[0].max_excess, tr[1].max_excess, tr[2].max_excess, tr[2].samples.back().tau);
  EXPECT_LE(err, 1e-9);
  EXPECT_EQ(tr[0].samples.size(), 101u);
  EXPECT_FALSE(tr[0].stopped);
  for (const auto& t : tr) EXPECT_LE(t.max_excess, 2e-8);
  EXPECT_TRUE(tr[2].stopped);  // q/q0 < 1e-10 before tau = 5
  EXPECT_LT(tr[2].samples.back().q_ratio, 1e-10);
  EXPECT_GE(tr[2].samples[tr[2].samples.size() - 2].q_ratio, 1e-10);
}

TEST(RopeCircleContraction, Fig2cBipodalIsStationaryAndNearBoundaryContracts) {
  const auto pts = fig2c_checkpoints();
  const double D[3] = {0.967213, 0.931714, 0.850085}, B[3] = {0.967343, 0.933133, 0.864288},
               tau[3] = {0.719, 1.439, 2.158};
  for (int k = 0; k < 3; ++k) {
    std::printf("[rope-circle] Fig 2c: t = %.0f tau = %.6f D/pi = %.7f bound/pi = %.7f\n", pts[k].t, pts[k].tau,
                pts[k].D_over_pi, pts[k].bound_over_pi);
    EXPECT_NEAR(pts[k].tau, tau[k], 5e-4);
    EXPECT_NEAR(pts[k].D_over_pi, D[k], 5e-7);
    EXPECT_NEAR(pts[k].bound_over_pi, B[k], 5e-7);
    EXPECT_LT(pts[k].D_over_pi, pts[k].bound_over_pi);
  }
  // D0 = pi: the bipodal state (Prop. 6.4) stays put; the only motion is sin(fl(pi)) ~ 1.2e-16 roundoff.
  const auto stay = fig2c_curve(kPi, {0.0, 20.0, 40.0, 69.5});
  for (const auto& s : stay) EXPECT_NEAR(s.D_over_pi, 1.0, 1e-14);
  std::printf("[rope-circle] Fig 2c: D0 = pi, |D/pi - 1| at tau = 2.5: %.3e\n", std::abs(stay.back().D_over_pi - 1.0));
}

TEST(RopeCircleContraction, BipodalStatesAreStationaryForEveryBetaAndFrequency) {
  // Prop. 6.4: theta_i in {c, c + pi} with both present; lifted diameter pi.
  Rng rng(64, {0});
  double worst = 0.0;
  for (int k = 0; k < 50; ++k) {
    const int n = 2 + k % 7;
    PhaseParams p{rng.uniform(0.0, 16.0), rng.uniform(-5.0, 5.0), {}};
    p.positions.resize(static_cast<std::size_t>(n));
    for (auto& x : p.positions) x = rng.uniform(-4.0, 4.0);
    Vec th = Vec::Zero(n);
    for (int i = 0; i < n; ++i) th[i] = (i == 0 || (i > 1 && rng.uniform() < 0.5)) ? 0.0 : kPi;
    EXPECT_EQ(lifted_diameter(th), kPi);
    Vec F;
    phase_velocity(p, th, F);
    worst = std::max(worst, F.cwiseAbs().maxCoeff());
  }
  EXPECT_LE(worst, 1e-15);  // sin(fl(pi)) ~ 1.2e-16 is the only residue
}

TEST(RopeCircleContraction, TailBoundAndRateBookkeepingHoldWhileConverging) {
  const TailCheck tc =
      circle_tail_check(PhaseParams{0.5, 0.7, {}}, circle_state_with_diameter(6, 0.9 * kPi, 9, {1}), 80.0, 161);
  std::printf("[rope-circle] C6.5/(37): final D %.2e; excess tail %.2e coarse %.2e D %.2e Y %.2e chord %.2e speed %.2e; "
              "|Y - L^2/2| %.1e\n",
              tc.final_D, tc.max_tail_excess, tc.max_coarse_excess, tc.max_D_excess, tc.max_Y_excess, tc.max_chord_excess,
              tc.max_speed_excess, tc.max_identity_error);
  EXPECT_EQ(tc.samples, 161);
  EXPECT_LT(tc.final_D, 1e-10);
  for (double e : {tc.max_tail_excess, tc.max_coarse_excess, tc.max_D_excess, tc.max_Y_excess, tc.max_chord_excess,
                   tc.max_speed_excess})
    EXPECT_LE(e, 2e-8);
  EXPECT_LE(tc.max_identity_error, 1e-15);
}

// ---------------------------------------------------------------------------------------------
// Rate fits and order checks.

TEST(RopeCircleRates, ConsensusGapFromThePhaseSoftmax) {
  // L = 2 (16, 8, 4): gamma = 2e^{-2 beta} / (1 + e^{-2 beta}) (26); L = 1: gamma = 1.
  const auto g2 = phase_consensus_gap(PhaseParams{4.0, 2.0 * kPi * 8.0 / 16.0, {}}, 16);
  EXPECT_NEAR(g2.gamma / (2.0 * std::exp(-8.0) / (1.0 + std::exp(-8.0))), 1.0, 1e-11);
  const auto g1 = phase_consensus_gap(PhaseParams{2.0, 0.0, {}}, 8);
  EXPECT_NEAR(g1.gamma, 1.0, 1e-14);
  EXPECT_NEAR(g1.eigenvalues[0], 1.0, 1e-14);
  // The slow mode is a right eigenvector of A* for lambda_2.
  const auto g = phase_consensus_gap(PhaseParams{1.0, 2.0 * kPi / 16.0, {}}, 16);
  EXPECT_LE((g.A * g.slow_mode - g.eigenvalues[1] * g.slow_mode).cwiseAbs().maxCoeff(), 1e-14);
  EXPECT_DOUBLE_EQ(g.slow_mode.cwiseAbs().maxCoeff(), 1.0);
}

TEST(RopeCircleRates, TwelveResonantSlowModeFitsRecoverTheGap) {
  double worst = 0.0;
  const auto triples = circle_rate_fit_triples();
  ASSERT_EQ(triples.size(), 12u);
  for (const auto& c : triples) {
    const RateFit r = circle_rate_fit(c);
    std::printf("[rope-circle] rate fit (%d,%ld,%g): gamma %.10g fit %.10g rel err %.3e (%d points, %ld steps)\n", c.n,
                c.m, c.beta, r.gamma, r.gamma_fit, r.rel_error, r.fit_points, r.stats.accepted);
    worst = std::max(worst, r.rel_error);
    EXPECT_GT(r.fit_points, 250);
  }
  std::printf("[rope-circle] 12 rate fits: max relative error %.3e (paper 1.059e-7)\n", worst);
  EXPECT_LE(worst, 1e-6);
}

TEST(RopeCircleRates, Rk4IsFourthOrderAgainstTheAdaptiveReference) {
  const OrderCheck oc = rk4_order_check_d1();
  std::printf("[rope-circle] RK4 errors %.3e %.3e %.3e ratios %.3f %.3f (reference ~%.1e)\n", oc.errors[0], oc.errors[1],
              oc.errors[2], oc.ratios[0], oc.ratios[1], oc.reference_error_estimate);
  ASSERT_EQ(oc.ratios.size(), 2u);
  EXPECT_GT(oc.ratios[0], 14.0);
  EXPECT_GT(oc.ratios[1], 14.0);
  EXPECT_LT(oc.ratios[1], 18.0);
  EXPECT_LT(oc.reference_error_estimate, 1e-3 * oc.errors.back());
}

TEST(RopeCircleRates, FixedStepFehlberg78ConvergesAtHighOrder) {
  const OrderCheck oc = rk78_order_check_d1();
  std::printf("[rope-circle] RK78 errors %.3e %.3e %.3e ratios %.1f %.1f (2^7 = 128, 2^8 = 256)\n", oc.errors[0],
              oc.errors[1], oc.errors[2], oc.ratios[0], oc.ratios[1]);
  ASSERT_EQ(oc.ratios.size(), 2u);
  for (double r : oc.ratios) {
    EXPECT_GT(r, 100.0);
    EXPECT_LT(r, 400.0);
  }
  EXPECT_LT(oc.reference_error_estimate, 0.1 * oc.errors.back());
}

TEST(RopeCircleRates, BadInputRaisesOneLineInputError) {
  EXPECT_TRUE(one_line_input_error([] { energy_rate_grid(1); }));
  EXPECT_TRUE(one_line_input_error([] { energy_rate_fd(prop32_params(), prop32_state_plus(), 0.0); }));
  EXPECT_TRUE(one_line_input_error([] { softmax_floor(-1.0, 3); }));
  EXPECT_TRUE(one_line_input_error([] { softmax_floor(1.0, 1); }));
  EXPECT_TRUE(one_line_input_error([] { circle_state_with_diameter(1, 1.0, 1, {}); }));
  EXPECT_TRUE(one_line_input_error([] { circle_contraction(PhaseParams{1.0, 0.0, {}}, Vec{{0.0, kPi}}); }));
  EXPECT_TRUE(one_line_input_error([] { diameter_dini(PhaseParams{-1.0, 0.0, {}}, Vec{{0.0, 1.0}}); }));
  EXPECT_TRUE(one_line_input_error([] { phase_consensus_gap(PhaseParams{1.0, 0.0, {}}, 1); }));
}

}  // namespace
