// Sphere-side geometry of RoPE self-attention (spec rope-attention-dynamics.md §2 P4.1, T4.3,
// P6.1, T6.2, C6.5, R37, T7.3, LC.1; §3.5-3.6; §4.9-4.13): observables, generators, the App. D.3
// Dini grids (full size), trajectory-vs-bound comparisons, the consensus kernel and its tangent
// Jacobian, and the five nonlinear slow-mode rate fits of Fig. 4d.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numbers>

#include "tokdyn/analysis/rope_sphere.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/experiments/rope_sphere_configs.hpp"
#include "tokdyn/core/sphere.hpp"

using namespace tokdyn;
using namespace tokdyn::rope;

namespace {

Tokens field(const AttentionParams& P, const Tokens& X) {
  AttentionField F(P, static_cast<int>(X.rows()));
  Batch B{X, 1, static_cast<int>(X.rows())};
  Tokens dZ;
  F.eval(0.0, B, dZ);
  return dZ;
}

AttentionParams params(int d, double beta) {
  AttentionParams P;
  P.d = d;
  P.beta = beta;
  return P;
}

}  // namespace

TEST(RopeSphere, Observables) {
  Tokens X(3, 2);
  X << 1, 0, 0, 1, std::sqrt(0.5), std::sqrt(0.5);
  const SphereObservables o = observe(X, RowVec::Unit(2, 0));
  EXPECT_EQ(o.m_w, 0.0);
  EXPECT_NEAR(o.c, 0.0, 0.0);
  EXPECT_DOUBLE_EQ(o.rho, 1.0);
  EXPECT_NEAR(o.D_S, std::numbers::pi / 2, 1e-15);
  EXPECT_NEAR(o.L_ch, std::sqrt(2.0), 1e-15);
  EXPECT_NEAR(o.Y, 0.5 * o.L_ch * o.L_ch, 1e-15);
  EXPECT_DOUBLE_EQ(floor_time(0.0, 2, 3.0), 3.0);
  EXPECT_NEAR(geodesic(X.row(0), X.row(2)), std::numbers::pi / 4, 1e-15);
  EXPECT_EQ(rho_of(-1.0), INFINITY);
}

TEST(RopeSphere, Generators) {
  Rng rng(1, {0});
  for (int k = 0; k < 50; ++k) {
    int redraws = -1;
    const Tokens X = acute_state(rng, 10, 2 + 2 * (k % 4), 0.05, 0.45, &redraws);
    EXPECT_EQ(redraws, 0);
    EXPECT_GT(min_pairwise_inner(X), 0.0);
    EXPECT_LE(max_norm_deviation(X), 4.5e-16);
  }
  for (int k = 0; k < 60; ++k) {
    const int d = 2 * (1 + k % 4);
    const HemisphereState s = hemisphere_state(rng, 5, d, k % 2 == 1);
    EXPECT_GE(s.margin, 0.02);
    EXPECT_LE(s.margin, 0.8);
    if (k % 2 == 1) {
      ASSERT_GE(s.boundary, 0);
      EXPECT_EQ(s.X.row(s.boundary).dot(s.w), 0.0) << "boundary token exactly on the boundary";
      EXPECT_EQ(hemisphere_min(s.X, s.w), 0.0);
    } else {
      EXPECT_GE(hemisphere_min(s.X, s.w), s.margin - 1e-15);
    }
  }
  // Equiangular: exact ties plane-aligned; rotated by an orthogonal matrix.
  for (double c0 : {0.0, 1e-12, 0.5}) {
    const Tokens X = equiangular_state(5, c0);
    const Mat G = X * X.transpose();
    for (int i = 0; i < 5; ++i)
      for (int j = i + 1; j < 5; ++j) EXPECT_EQ(G(i, j), G(0, 1));
    const Tokens R = equiangular_rotated(5, c0, kGridSeed);
    EXPECT_LE((R * R.transpose() - G).cwiseAbs().maxCoeff(), 1e-15);
  }
  const Mat O = seeded_orthogonal(6, 7);
  EXPECT_LE((O * O.transpose() - Mat::Identity(6, 6)).cwiseAbs().maxCoeff(), 1e-15);
  EXPECT_EQ(O, seeded_orthogonal(6, 7));
}

// App. D.3 grids at full size: 1800 + 1800 + 120 configurations, every residual >= -1e-13
// (paper min -3.886e-16), (C-3)/(C-5) against the direct field, active sets as constructed.
TEST(RopeSphere, DiniGridsAppD3) {
  const DiniGrid no = nonobtuse_grid(), he = hemisphere_grid(), eq = equiangular_grid();
  EXPECT_EQ(no.count, 1800);
  EXPECT_EQ(he.count, 1800);
  EXPECT_EQ(eq.count, 120);
  double maxdiff = 0.0;
  for (const DiniGrid* g : {&no, &he, &eq}) {
    EXPECT_GE(g->min_residual, -1e-13);
    EXPECT_EQ(g->active_mismatches, 0);
    for (const auto& r : g->rows) maxdiff = std::max(maxdiff, std::abs(r.residual_formula - r.residual_direct));
  }
  EXPECT_LE(maxdiff, 1e-13);
  int boundary = 0;
  for (const auto& r : he.rows) boundary += r.variant == "boundary" && r.value == 0.0 && r.active == 1;
  EXPECT_EQ(boundary, 900);
  std::printf("[ D.3 ] counts %ld + %ld + %ld = %ld; min residual %.3e (paper -3.886e-16); max |C-form - direct| %.2e\n",
              no.count, he.count, eq.count, no.count + he.count + eq.count,
              std::min({no.min_residual, he.min_residual, eq.min_residual}), maxdiff);
  // Exact vs near ties: with tol = 0 a rotated equiangular state loses active pairs.
  const Tokens R = equiangular_rotated(7, 0.1, kGridSeed);
  EXPECT_LT(nonobtuse_dini_c5(params(8, 2.0), R, 0.0).active, 21);
  EXPECT_EQ(nonobtuse_dini_c5(params(8, 2.0), R, kNearTieTol).active, 21);
}

// Lemma C.1 on the flow: the active-set D+ equals the one-sided difference of the minimum.
TEST(RopeSphere, DiniMatchesOneSidedDifference) {
  Rng rng(2, {0});
  for (int k = 0; k < 6; ++k) {
    const AttentionParams P = params(4, 1.0 + k);
    const HemisphereState s = hemisphere_state(rng, 5, 4, true);
    const DiniValue v = hemisphere_dini_direct(P, s.X, s.w);
    AttentionField F(P, 5);
    const double h = 1e-6;
    Batch B{s.X, 1, 5};
    rk4_step(F, 0.0, h, B, true);
    const double fd = (hemisphere_min(B.Z, s.w) - v.value) / h;
    EXPECT_NEAR(fd, v.dini, 1e-5 * std::max(1.0, std::abs(v.dini)));
    // Pairwise: an equiangular state, all pairs tied.
    const Tokens X = equiangular_state(5, 0.2);
    const DiniValue g = nonobtuse_dini_direct(params(6, 0.5 + k), X);
    EXPECT_EQ(g.active, 10);
    Batch E{X, 1, 5};
    AttentionField F6(params(6, 0.5 + k), 5);
    rk4_step(F6, 0.0, h, E, true);
    EXPECT_NEAR((min_pairwise_inner(E.Z) - g.value) / h, g.dini, 1e-5);
  }
}

// T6.2 / C6.5 / R37 along retracted RK4: excess <= 2e-8 (paper 2.961e-10).
TEST(RopeSphere, TrajectoryBounds) {
  double worst = -INFINITY;
  // Exact two-token case: n = 2, beta = 0 gives rho(t) = rho0 e^{-4at} exactly.
  {
    Tokens X(2, 2);
    X << 1, 0, std::cos(1.2), std::sin(1.2);
    TrajectoryOptions o;
    o.t_end = 8.0;
    const TrajectoryReport r = sphere_trajectory_bounds(params(2, 0.0), X, o);
    EXPECT_LE(std::abs(r.rho.abs), 1e-10) << "the bound is attained (up to the RK4 error)";
    worst = std::max(worst, r.max_excess());
  }
  // Fig. 2b: five orthogonal tokens in d = 6, beta = 1, both orientations: c(t) >= tanh(2at).
  for (int orient = 0; orient < 2; ++orient) {
    const Tokens X = orient == 0 ? equiangular_state(5, 0.0) : equiangular_rotated(5, 0.0, kGridSeed);
    if (orient == 0) {
      EXPECT_EQ(nonobtuse_dini_c5(params(6, 1.0), X, 0.0).active, 10);
    }
    TrajectoryOptions o;
    o.t_end = 1.2 / (2.0 * softmax_floor(1.0, 5));
    o.tail = false;
    const TrajectoryReport r = sphere_trajectory_bounds(params(6, 1.0), X, o);
    if (orient == 0) {
      EXPECT_FALSE(std::isnan(r.tanh_c.abs));
    }
    worst = std::max(worst, r.max_excess());
    EXPECT_LE(r.max_norm_deviation, 1e-15);
  }
  // Acute states and a hemisphere state, with the C6.5 tail (beta small, run to convergence).
  Rng rng(3, {0});
  for (int k = 0; k < 3; ++k) {
    const HemisphereState s = hemisphere_state(rng, 4, 4, true);
    const Tokens X = k == 0 ? s.X : acute_state(rng, 4, 4);
    TrajectoryOptions o;
    o.t_end = 40.0;
    o.h = 0.02;
    o.w = s.w;
    const TrajectoryReport r = sphere_trajectory_bounds(params(4, 0.5 * k), X, o);
    if (k > 0) {
      // D_S = arccos(c) cannot resolve below sqrt(2 eps) ~ 2.1e-8 (c rounds to 1 - eps or 1,
      // depending on FMA contraction): converged means at that floor.
      EXPECT_LT(r.final_diameter, 3e-8);
      EXPECT_FALSE(std::isnan(r.tail.abs));
    }
    worst = std::max(worst, r.max_excess());
  }
  EXPECT_LE(worst, 2e-8);
  std::printf("[ T6.2/C6.5/R37 ] max trajectory excess %.3e (paper 2.961e-10, tolerance 2e-8)\n", worst);
}

// P4.1: consensus is an equilibrium and W* depends only on the plane energies.
TEST(RopeSphere, P41ConsensusAttention) {
  Rng rng(41, {0});
  for (int k = 0; k < 5; ++k) {
    const int n = 6 + k, r = 1 + k % 3, d = 2 * r;
    AttentionParams P = params(d, rng.uniform(0.0, 6.0));
    P.positions.resize(n);
    for (auto& p : P.positions) p = rng.uniform(-4.0, 9.0);
    P.freqs.resize(r);
    for (auto& w : P.freqs) w = rng.uniform(-2.0, 4.0);
    std::vector<double> a(r), phi1(r), phi2(r);
    double sum = 0.0;
    for (auto& x : a) sum += (x = rng.uniform());
    for (auto& x : a) x /= sum;
    a.back() = 1.0;
    for (int l = 0; l + 1 < r; ++l) a.back() -= a[l];
    for (int l = 0; l < r; ++l) {
      phi1[l] = rng.uniform(0.0, 6.3);
      phi2[l] = rng.uniform(0.0, 6.3);
    }
    const RowVec x1 = consensus_point(a, phi1), x2 = consensus_point(a, phi2);
    EXPECT_LE(field(P, x1.replicate(n, 1)).cwiseAbs().maxCoeff(), 1e-15);
    const ConsensusAttention K1 = consensus_attention(P, n, x1), K2 = consensus_attention(P, n, x2);
    EXPECT_LE((K1.W - K2.W).cwiseAbs().maxCoeff(), 1e-14);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        double Ka = 0.0;
        for (int l = 0; l < r; ++l) Ka += a[l] * std::cos(P.freqs[l] * (P.positions[i] - P.positions[j]));
        EXPECT_NEAR(K1.W(i, j), std::exp(P.beta * (Ka - 1.0)), 1e-14 * std::exp(P.beta * (Ka - 1.0)) + 1e-300);
      }
    EXPECT_LE(K1.a_consistency, 1e-15);
    EXPECT_NEAR(K1.lambda[0], 1.0, 1e-14);
    EXPECT_GE(K1.lambda[n - 1], -1e-13);
    EXPECT_GE(K1.gamma, n * softmax_floor(P.beta, n) * (1 - 1e-12));  // (38)
  }
}

// T4.3: the FD Jacobian at consensus is (A* - I) ⊗ I_{d-1}; the pi-mean of the linear system is
// conserved.
TEST(RopeSphere, T43TangentJacobianAtConsensus) {
  Rng rng(43, {0});
  const int n = 5, d = 4;
  AttentionParams P = params(d, 1.5);
  P.freqs = {0.9, 2.3};
  const RowVec xs = consensus_point({0.35, 0.65}, {0.4, 1.9});
  const ConsensusAttention K = consensus_attention(P, n, xs);
  const Mat E = tangent_basis(xs);
  ASSERT_EQ(E.rows(), d - 1);
  EXPECT_LE((E * E.transpose() - Mat::Identity(d - 1, d - 1)).cwiseAbs().maxCoeff(), 1e-15);
  EXPECT_LE((E * xs.transpose()).cwiseAbs().maxCoeff(), 1e-15);
  const double h = 1e-6;
  const Tokens X = xs.replicate(n, 1);
  double err = 0.0, radial = 0.0;
  for (int j = 0; j < n; ++j)
    for (int b = 0; b < d - 1; ++b) {
      Tokens Xp = X, Xm = X;
      Xp.row(j) = (xs + h * E.row(b)).normalized();
      Xm.row(j) = (xs - h * E.row(b)).normalized();
      const Tokens D = (field(P, Xp) - field(P, Xm)) / (2 * h);
      for (int i = 0; i < n; ++i) {
        for (int c = 0; c < d - 1; ++c) {
          const double expect = (b == c) ? K.A(i, j) - (i == j) : 0.0;
          err = std::max(err, std::abs(D.row(i).dot(E.row(c)) - expect));
        }
        radial = std::max(radial, std::abs(D.row(i).dot(xs)));
      }
    }
  EXPECT_LE(err, 1e-8);
  EXPECT_LE(radial, 1e-8);
  // Linear system xi' = (A* - I) xi (n x (d-1)), RK4: sum_i pi_i xi_i is conserved.
  Mat xi(n, d - 1);
  rng.fill_normal(xi);
  const Mat J = K.A - Mat::Identity(n, n);
  const RowVec m0 = K.pi.transpose() * xi;
  const double dt = 0.01;
  for (int s = 0; s < 500; ++s) {
    const Mat k1 = J * xi, k2 = J * (xi + 0.5 * dt * k1), k3 = J * (xi + 0.5 * dt * k2), k4 = J * (xi + dt * k3);
    xi += dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4);
  }
  EXPECT_LE((K.pi.transpose() * xi - m0).cwiseAbs().maxCoeff(), 1e-13);
}

// T7.3 / Fig. 4d: the five nonlinear slow-mode fits (n = 16, beta = 4, freqs (1, 0.01), d = 4).
TEST(RopeSphere, T73SlowModeRateFits) {
  const auto fits = multifrequency_rate_fits();
  ASSERT_EQ(fits.size(), 5u);
  double worst = 0.0;
  for (const auto& f : fits) {
    EXPECT_GT(f.gamma, 0.0);
    EXPECT_LE(f.gamma, 1.0);
    EXPECT_GT(f.samples, 200);
    EXPECT_LE(f.rel_error, 2e-5) << "a = " << f.energy_high;
    worst = std::max(worst, f.rel_error);
    std::printf("[ Fig4d ] a = %.2f  gamma = %.10f  fit = %.10f  rel = %.3e\n", f.energy_high, f.gamma, f.gamma_fit,
                f.rel_error);
  }
  std::printf("[ Fig4d ] max relative rate error %.3e (paper 2.805e-6, tolerance 2e-5)\n", worst);
  // Step halving (App. D.1): h = 2e-2 vs 1e-2 changes the fit by << gamma.
  SlowModeOptions o2;
  o2.h = 2e-2;
  const auto f2 = multifrequency_rate_fits(o2, {4});
  EXPECT_LE(std::abs(f2[0].gamma_fit - fits[4].gamma_fit) / fits[4].gamma, 1e-6);
}

TEST(RopeSphere, BadInput) {
  AttentionParams P = params(4, 1.0);
  P.causal = true;
  const Tokens X = equiangular_state(3, 0.1);
  EXPECT_THROW(nonobtuse_dini_c5(P, X), std::invalid_argument);
  EXPECT_THROW(nonobtuse_dini_c5(params(6, 1.0), X), std::invalid_argument);  // d mismatch
  EXPECT_THROW(hemisphere_dini_c3(params(4, 1.0), X, RowVec::Ones(3)), std::invalid_argument);
  EXPECT_THROW(consensus_point({0.5, 0.6}), std::invalid_argument);
  EXPECT_THROW(consensus_point({-0.1, 1.1}), std::invalid_argument);
  EXPECT_THROW(equiangular_state(3, 1.0), std::invalid_argument);
  Rng rng(1);
  EXPECT_THROW(acute_state(rng, 3, 4, 0.5, 1.5), std::invalid_argument);
  EXPECT_THROW(multifrequency_rate_fits({}, {7}), InputError);
}

// GeometryObserver: per run and observation, c = min_{i<j} <x_i, x_j> and m = min_i <x_i, e_1>,
// against closed forms: three tokens at angles 0, pi/3, 2 pi/3 in the (e_1, e_2) plane give
// c = cos(2 pi/3) = -1/2 and m = -1/2; the same tokens rotated by pi/6 give c = -1/2, m = cos(5 pi/6).
TEST(RopeSphere, GeometryObserverRecordsEveryRunAtEveryObservation) {
  const auto ring = [](double phase) {
    Tokens X = Tokens::Zero(3, 3);
    for (int i = 0; i < 3; ++i) {
      X(i, 0) = std::cos(phase + i * std::numbers::pi / 3);
      X(i, 1) = std::sin(phase + i * std::numbers::pi / 3);
    }
    return X;
  };
  Batch Z{Tokens(6, 3), 2, 3};
  Z.run(0) = ring(0.0);
  Z.run(1) = ring(std::numbers::pi / 6);
  RowVec e1 = RowVec::Zero(3);
  e1[0] = 1.0;
  tokdyn::rope::GeometryObserver g(e1);
  EXPECT_TRUE(std::isnan(g.last_min_c()));
  g.observe(0.0, Z);
  g.observe(0.5, Z);
  ASSERT_EQ(g.rows().size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& row = g.rows()[i];
    EXPECT_EQ(row.t, i < 2 ? 0.0 : 0.5);
    EXPECT_EQ(row.run, static_cast<int>(i % 2));
    EXPECT_NEAR(row.min_inner_c, -0.5, 1e-15);
    EXPECT_NEAR(row.hemisphere_min, row.run == 0 ? -0.5 : std::cos(5 * std::numbers::pi / 6), 1e-15);
  }
  EXPECT_NEAR(g.last_min_c(), -0.5, 1e-15);
}
