// Cocycle library (coupling paper §2.4, Thm 4, Thm 5, (A4), C.1): discrete QR against dense
// products, Lyapunov / Bohl spectra (R9, R10), bundles and projectors, the dichotomy constant,
// the time-ordered exponential (R8) and the looped LTI model (R25).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <omp.h>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "thread_util.hpp"

using namespace tokdyn::cocycle;

namespace {

double norm2(const Matrix& M) { return Eigen::JacobiSVD<Matrix>(M).singularValues()(0); }
double rho(const Matrix& M) { return Eigen::EigenSolver<Matrix>(M, false).eigenvalues().cwiseAbs().maxCoeff(); }

const std::vector<double> kSigma = {0.2, 0.1, -0.3, -0.5};

}  // namespace

TEST(CocycleQr, ReconstructsTheDenseProduct) {
  // Phi(L, 0) = Q_L R_{L-1} ... R_0 (Q_0 = I), and sum_i log R_ii = sum_l log |det B(l)| (the
  // dense product itself has lost its small directions to round-off: never form it for spectra).
  const Cocycle c = Cocycle::from_matrices(family_g5(30, 5, 0.5, 0.3, 0, 11));
  QrOptions opt;
  opt.keep_factors = true;
  const QrResult q = qr_iterate(c, opt);
  Matrix Rprod = Matrix::Identity(5, 5);
  for (const auto& R : q.R) Rprod = (R * Rprod).eval();
  const Matrix Phi = dense_product(c, 30, 0);
  EXPECT_LE(norm2(q.Q_final * Rprod - Phi), 1e-12 * norm2(Phi));
  double logdet = 0;
  for (long l = 0; l < 30; ++l) logdet += std::log(std::abs(c.matrix(l).determinant()));
  EXPECT_NEAR(q.log_diag.sum(), logdet, 1e-10);
  for (const auto& R : q.R) EXPECT_GT(R.diagonal().minCoeff(), 0.0);
}

TEST(CocycleQr, ExponentsMatchDenseSingularValues) {
  // Short window: the finite-time singular values from the QR factors equal those of the dense
  // product (which is still accurate at this length).
  const Cocycle c5 = Cocycle::from_matrices(family_g5(12, 4, 0.5, 0.3, 0, 3));
  const FiniteTimeSvd f = finite_time_svd(c5, 12, 1);
  const Eigen::VectorXd sv5 = Eigen::JacobiSVD<Matrix>(dense_product(c5, 12, 0)).singularValues();
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f.log_sv_rate(0, i), std::log(sv5(i)) / 12.0, 1e-12) << i;
  // Long window, weight-tied: the QR exponents and (1/L) log sigma_i(Phi(L,0)) of the two leading
  // directions share their limits (the dense product has lost the small ones to round-off).
  const Cocycle c = Cocycle::from_matrices(family_g1(200, kSigma, 3.0, 2));
  const LyapunovSpectrum s = lyapunov_spectrum(qr_iterate(c).log_diag);
  const Eigen::VectorXd sv = Eigen::JacobiSVD<Matrix>(dense_product(c, 200, 0)).singularValues();
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(s.mu(i), std::log(sv(i)) / 200.0, 0.02) << i;
}

TEST(CocycleQr, TopKEqualsLeadingColumnsOfTheFullRun) {
  const Cocycle c = Cocycle::from_matrices(family_g5(100, 6, 0.5, 0.2, 0, 4));
  QrOptions full, top;
  top.k = 2;
  const Matrix a = qr_iterate(c, full).log_diag, b = qr_iterate(c, top).log_diag;
  EXPECT_LE((a.leftCols(2) - b).cwiseAbs().maxCoeff(), 1e-12);
}

TEST(CocycleQr, ReorthEveryQStepsKeepsTheExponents) {
  const Cocycle c = Cocycle::from_matrices(family_g1(400, kSigma, 3.0, 5));
  QrOptions q4;
  q4.reorth_every = 4;
  const auto a = lyapunov_spectrum(qr_iterate(c).log_diag), b = lyapunov_spectrum(qr_iterate(c, q4).log_diag);
  EXPECT_LE((a.mu - b.mu).cwiseAbs().maxCoeff(), 1e-9);
}

TEST(CocycleQr, SingularFactorGivesGrowthScaleZeroNotNan) {
  std::vector<Matrix> B(20, Matrix::Identity(3, 3) * 1.1);
  B[7](2, 2) = 0.0;  // R_ii = 0 at layer 7
  const QrResult q = qr_iterate(Cocycle::from_matrices(B));
  EXPECT_FALSE(q.log_diag.hasNaN());
  EXPECT_TRUE(std::isinf(q.log_diag(7, 2)) && q.log_diag(7, 2) < 0);
  const LyapunovSpectrum s = lyapunov_spectrum(q.log_diag);
  EXPECT_EQ(s.gamma(2), 0.0);
  EXPECT_NEAR(s.gamma(0), 1.1, 1e-14);
  for (const auto& iv : bohl_intervals(q.log_diag, 5)) {
    EXPECT_FALSE(std::isnan(iv.lower) || std::isnan(iv.upper));
  }
  const auto iv = bohl_intervals(q.log_diag, 5);
  EXPECT_EQ(iv[2].lower, 0.0);
  EXPECT_NEAR(iv[2].upper, 1.1, 1e-14);
  EXPECT_FALSE(separation(q.log_diag, 5).hasNaN());
}

TEST(CocycleR9, NonNormalPairGrowsAtSqrtRhoOfTheProduct) {
  const auto B = nonnormal_pair(400);
  const double target = std::sqrt(rho(B[1] * B[0]));
  EXPECT_NEAR(target, 2.1180, 1e-4);
  EXPECT_EQ(rho(B[0]), 0.5);
  const auto s = lyapunov_spectrum(qr_iterate(Cocycle::from_matrices(B)).log_diag, 100);
  EXPECT_NEAR(s.gamma(0), target, 1e-10);
  // Transient growth: ||Phi(20, 0)|| >> prod rho = 0.5^20.
  EXPECT_GT(norm2(dense_product(Cocycle::from_matrices(B), 20, 0)), 1e6);
}

TEST(CocycleR10, WeightTiedSpectrumIsPointsAtAbsOnePlusSigma) {
  const Cocycle c = Cocycle::from_matrices(family_g1(2000, kSigma, 10.0, 1));
  const QrResult q = qr_iterate(c);
  const auto s = lyapunov_spectrum(q.log_diag, 200);
  const double expect[4] = {1.2, 1.1, 0.7, 0.5};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(s.gamma(i), expect[i], 2e-3) << i;
  const auto merged = merge_intervals(bohl_intervals(q.log_diag, 600, 200));
  ASSERT_EQ(merged.size(), 4u);
  for (const auto& iv : merged) EXPECT_LT(iv.upper / iv.lower - 1.0, 5e-3);
  EXPECT_TRUE(hyperbolic(merged));
  EXPECT_GT(separation(q.log_diag, 600, 200).minCoeff(), 0.0);
}

TEST(CocycleR10, IntervalsAtMostDAndInsideZeroOnePlusA) {
  const Cocycle c = Cocycle::from_matrices(family_g5(300, 6, 0.6, 0.4, 0, 9));
  const double a = c.sup_norm_A();
  const QrResult q = qr_iterate(c);
  for (long H : {10L, 40L, 150L}) {
    const auto m = merge_intervals(bohl_intervals(q.log_diag, H, 20));
    EXPECT_LE(m.size(), 6u);
    for (const auto& iv : m) {
      EXPECT_GT(iv.lower, 0.0);
      EXPECT_LE(iv.upper, 1.0 + a + 1e-12);
    }
  }
}

TEST(CocycleR10, SwitchingSequenceSpectrumApproachesTheFullInterval) {
  // Runs 1, 2, 4, ..., 512 (high on even runs): the longest high run is 256, the longest low 512.
  const auto B = switching_scalar(1023, 0.9, 1.2, 1);
  const QrResult q = qr_iterate(Cocycle::from_matrices(B));
  for (long H : {8L, 64L, 256L}) {
    const auto iv = bohl_intervals(q.log_diag, H);
    EXPECT_NEAR(iv[0].lower, 0.9, 1e-12) << H;
    EXPECT_NEAR(iv[0].upper, 1.2, 1e-12) << H;
    EXPECT_FALSE(hyperbolic(iv));
  }
  // Windows longer than every run see only averages strictly inside [0.9, 1.2].
  const QrResult shortq = qr_iterate(Cocycle::from_matrices(switching_scalar(127, 0.9, 1.2, 1)));
  const auto iv = bohl_intervals(shortq.log_diag, 100);
  EXPECT_GT(iv[0].lower, 0.9 + 1e-3);
  EXPECT_LT(iv[0].upper, 1.2 - 1e-3);
  // The rank function sees the jump between 0.9 and 1.2 at scale 1: k_min = 0 < k_max = 1.
  const auto f = finite_time_svd(Cocycle::from_matrices(B), 64, 16);
  EXPECT_EQ(rank_function(f, 1.0), (std::pair<long, long>{0, 1}));
  EXPECT_EQ(rank_function(f, 1.25), (std::pair<long, long>{0, 0}));
  EXPECT_EQ(rank_function(f, 0.85), (std::pair<long, long>{1, 1}));
  // Ends with different unstable dimensions: no two-sided dichotomy.
  EXPECT_THROW(two_sided_bundles(Cocycle::from_matrices(B)), std::domain_error);
}

TEST(CocycleR10, HyperbolicCaseHasABoundedGreenOperator) {
  // R10(d): 1 is not in the spectrum of G1, so ||G|| stays bounded as the window grows.
  auto G = [](long L) {
    const Cocycle c = Cocycle::from_matrices(family_g1(L, kSigma, 3.0, 6));
    return green_norm(c, two_sided_bundles(c));
  };
  // Row sums near the middle converge like max(0.7, 1/1.1)^(L/2).
  const double g200 = G(200), g400 = G(400);
  EXPECT_LT(std::abs(g400 - g200), 1e-4 * g400);
  EXPECT_LT(g400, 3.0 * (1.0 / 0.3 + 1.0 / 0.1));  // C (1/m_- + 1/m_+) with C <= kappa(S) = 3
}

TEST(CocycleBundles, TwoSidedProjectorsAreInvariantToRoundoff) {
  for (const auto& B : {family_g4(120, {-0.6, -0.6, -0.5, -0.5}, {0.8, 0.8, 0.2, 0.2}, 1.0, 0.05, 3),
                        family_g3(120, {1.3, 1.1, 0.8, 0.6}, "switching", 0.1, 8, 4, 2.0, 3)}) {
    const Cocycle c = Cocycle::from_matrices(B);
    const Bundles b = two_sided_bundles(c);
    EXPECT_EQ(b.k, 2);
    const auto g = bundle_diagnostics(c, b);
    for (long l = 0; l < 120; ++l) {
      const double scale = g.p_plus_norm(l) * norm2(c.matrix(l));
      EXPECT_LE(g.invariance(l), 1e-13 * scale) << l;
      const Matrix& P = b.P_plus[static_cast<std::size_t>(l)];
      EXPECT_LE(norm2(P * P - P), 1e-12 * g.p_plus_norm(l) * g.p_plus_norm(l));
    }
  }
}

TEST(CocycleBundles, WeightTiedProjectorIsTheSpectralProjectorAndCIsBounded) {
  const double kappa = 8.0;
  const Cocycle c = Cocycle::from_matrices(family_g1(150, kSigma, kappa, 7));
  const Bundles b = two_sided_bundles(c);
  const Matrix S = family_g1_basis(4, kappa, 7);
  const Matrix E = Eigen::Vector4d(1, 1, 0, 0).asDiagonal();
  const Matrix Pspec = S * E * S.inverse();
  for (long l = 0; l <= 150; l += 30) EXPECT_LE(norm2(b.P_plus[static_cast<std::size_t>(l)] - Pspec), 1e-10 * norm2(Pspec));
  const auto env = growth_envelope(c, b, 5);
  const double C = std::max(constant_minus(env, 0.7), constant_plus(env, 1.1));
  const double proj = std::max(norm2(Pspec), norm2(Matrix::Identity(4, 4) - Pspec));
  EXPECT_GE(C, proj * (1 - 1e-12));
  EXPECT_LE(C, kappa * (1 + 1e-9));
  // Looser rates need no larger constant (trade-off curve monotone).
  EXPECT_LE(constant_minus(env, 0.9), constant_minus(env, 0.7) * (1 + 1e-12));
}

TEST(CocycleBundles, CovariantVectorsAgreeWithTwoSidedBundles) {
  for (const auto& B : {family_g1(300, kSigma, 5.0, 8),
                        family_g4(300, {-0.6, -0.6, -0.5, -0.5}, {0.8, 0.8, 0.2, 0.2}, 1.0, 0.02, 8)}) {
    const Cocycle c = Cocycle::from_matrices(B);
    const Bundles two = two_sided_bundles(c), clv = clv_bundles(c, 100);
    EXPECT_EQ(clv.k, 2);
    for (long l = 100; l <= 200; l += 20) {
      const Matrix& P2 = two.P_plus[static_cast<std::size_t>(l)];
      EXPECT_LE(norm2(clv.P_plus[static_cast<std::size_t>(l - 100)] - P2), 1e-8 * norm2(P2)) << l;
    }
  }
}

TEST(CocycleR8, EulerStepWithinThm4BoundAndGlobalSlopeOne) {
  const long L = 6, d = 3;
  const auto B = family_g5(L, d, 0.3, 0.2, 2, 5);
  std::vector<Matrix> A;
  for (const auto& b : B) A.push_back(b - Matrix::Identity(d, d));
  double a = 0, jump = 0;
  for (long r = 0; r < L; ++r) {
    a = std::max(a, norm2(A[static_cast<std::size_t>(r)]));
    if (r + 1 < L) jump = std::max(jump, norm2(A[static_cast<std::size_t>(r + 1)] - A[static_cast<std::size_t>(r)]));
  }
  const auto Af = piecewise_linear(A);
  for (int h = 0; h <= 6; ++h) {
    const double D = std::ldexp(1.0, -h);
    const double bound = D * jump * D + 0.5 * a * a * D * D * std::exp(a * D);
    for (long l = 0; l + 1 < L; ++l) {
      const Matrix Pc = time_ordered_exp(Af, static_cast<double>(l), static_cast<double>(l) + D);
      EXPECT_LE(norm2(Pc - (Matrix::Identity(d, d) + D * A[static_cast<std::size_t>(l)])), bound) << D << " " << l;
    }
  }
  // The time-ordered exponential of a constant A is expm(A).
  const Matrix A0 = A[0];
  Matrix ex = Matrix::Identity(d, d), term = ex;
  for (int k = 1; k < 30; ++k) {
    term = (term * A0 / k).eval();
    ex += term;
  }
  EXPECT_LE(norm2(time_ordered_exp([&](double) { return A0; }, 0.0, 1.0) - ex), 1e-12);
  // Global Euler error over [0, L-1] falls like Delta (slope 1 on a log-log fit).
  Matrix exact = Matrix::Identity(d, d);
  for (long l = 0; l + 1 < L; ++l) exact = (time_ordered_exp(Af, static_cast<double>(l), static_cast<double>(l + 1)) * exact).eval();
  std::vector<double> lx, ly;
  for (int h = 2; h <= 7; ++h) {
    const long n = (L - 1) << h;
    const double D = std::ldexp(1.0, -h);
    Matrix E = Matrix::Identity(d, d);
    for (long j = 0; j < n; ++j) E = ((Matrix::Identity(d, d) + D * Af(static_cast<double>(j) * D)) * E).eval();
    lx.push_back(std::log(D));
    ly.push_back(std::log(norm2(E - exact)));
  }
  const double n = static_cast<double>(lx.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < lx.size(); ++i) {
    sx += lx[i];
    sy += ly[i];
    sxx += lx[i] * lx[i];
    sxy += lx[i] * ly[i];
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  EXPECT_NEAR(slope, 1.0, 0.05);
}

TEST(CocycleR25, LoopedLtiAttractsAtRhoAndGreenNormIsOneOverOneMinusRho) {
  const long d = 5;
  const Eigen::VectorXd ab = family_g2_diagonal(d, -3.0, 1.0, 4);
  const double r = ab.maxCoeff();
  Eigen::VectorXd e = Eigen::VectorXd::LinSpaced(d, -1.0, 2.0), h = Eigen::VectorXd::Constant(d, 5.0);
  const Eigen::VectorXd hstar = (e.array() / (1.0 - ab.array())).matrix();
  const double d0 = (h - hstar).norm();
  for (int t = 0; t <= 200; ++t) {
    EXPECT_LE((h - hstar).norm(), std::pow(r, t) * d0 * (1 + 1e-12) + 1e-13) << t;
    h = (ab.array() * h.array()).matrix() + e;
  }
  const long L = 300;
  const Cocycle c = Cocycle::from_matrices(family_g2(L, d, -3.0, 1.0, 4));
  const Bundles b = two_sided_bundles(c);
  EXPECT_EQ(b.k, 0);
  const double G = green_norm(c, b);
  EXPECT_NEAR(G, (1 - std::pow(r, static_cast<double>(L))) / (1 - r), 1e-10 * G);
  EXPECT_NEAR(G, 1 / (1 - r), std::pow(r, static_cast<double>(L)) / (1 - r) + 1e-10 * G);
}

TEST(CocycleApi, CallbackCocycleGivesTheSameSpectrum) {
  const auto B = family_g5(60, 4, 0.5, 0.2, 3, 2);
  const Cocycle dense = Cocycle::from_matrices(B);
  const Cocycle cb(60, 4, [&](long l, const Matrix& Q, Matrix& out) { out = B[static_cast<std::size_t>(l)] * Q; });
  QrOptions o;
  o.k = 2;
  EXPECT_EQ(qr_iterate(dense, o).log_diag, qr_iterate(cb, o).log_diag);
  EXPECT_THROW(two_sided_bundles(cb), std::logic_error);  // no transpose callback
  EXPECT_THROW(bohl_intervals(qr_iterate(dense, o).log_diag, 61), std::invalid_argument);
  EXPECT_THROW(lyapunov_spectrum(qr_iterate(dense, o).log_diag, 60), std::invalid_argument);
  std::vector<Matrix> bad = B;
  bad[3](1, 1) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(Cocycle::from_matrices(bad), std::invalid_argument);
}

TEST(CocycleQr, LargeFramesThroughLapackAgreeAndAreThreadIndependent) {
  // The blocked Householder QR of large frames (32-column panels by dgeqrt3, block-reflector
  // updates in fixed 64-column parts spread over the threads), square (d = 96) and tall with a partial last panel
  // (200 x 70), against Eigen's unblocked Householder QR (an independent implementation): Q R = Z,
  // Q^T Q = I, diag R >= 0, the same R; and the same bits on 1 to 4 threads.
  tokdyn::testing::ThreadCountGuard guard;
  const auto B = family_g5(12, 96, 0.5, 0.2, 0, 21);
  Eigen::MatrixXd tall = family_g5(1, 200, 0.5, 0.2, 0, 22)[0].leftCols(70);
  for (const Matrix& Z : {Matrix(B[0]), Matrix(tall)}) {
    Matrix Q, R;
    qr_signfixed(Z, Q, R);
    const long k = Z.cols();
    EXPECT_LE(norm2(Q * R - Z), 1e-13 * norm2(Z));
    EXPECT_LE(norm2(Q.transpose() * Q - Matrix::Identity(k, k)), 1e-13);
    EXPECT_GE(R.diagonal().minCoeff(), 0.0);
    EXPECT_EQ(Matrix(R.triangularView<Eigen::StrictlyLower>()), Matrix::Zero(k, k));
    Eigen::HouseholderQR<Matrix> qr(Z);
    Matrix Re = qr.matrixQR().topRows(k).triangularView<Eigen::Upper>();
    for (long i = 0; i < k; ++i)
      if (Re(i, i) < 0) Re.row(i) *= -1.0;
    EXPECT_LE(norm2(Re - R), 1e-12 * norm2(R));
    for (int t : tokdyn::testing::kThreadCounts) {
      tokdyn::testing::set_threads(t);
      Matrix Qt, Rt;
      qr_signfixed(Z, Qt, Rt);
      EXPECT_EQ(Qt, Q) << t << " threads";
      EXPECT_EQ(Rt, R) << t << " threads";
    }
  }
  const Cocycle c = Cocycle::from_matrices(B);
  tokdyn::testing::set_threads(1);
  const Matrix a = qr_iterate(c).log_diag;
  for (int t : tokdyn::testing::kThreadCounts) {
    tokdyn::testing::set_threads(t);
    EXPECT_EQ(qr_iterate(c).log_diag, a) << t << " threads";
  }
}

TEST(CocycleQr, CompactWyFramesAgreeWithAnExplicitEigenLoop) {
  // Large stored cocycles keep the frame in compact WY form and form B Q from B's rows and the block
  // reflectors. Against a loop written here with Eigen's unblocked Householder QR and explicit Q
  // (an independent implementation): the same log R_ii and final frame, for k = d, for k = 60 of
  // d = 96 (the last panel partial), with reorth_every = 3, and with a Q0; the same bits on 1-4 threads.
  tokdyn::testing::ThreadCountGuard guard;
  const long L = 20, d = 96;
  const auto B = family_g5(L, d, 0.5, 0.2, 0, 31);
  const Cocycle c = Cocycle::from_matrices(B);
  const Matrix Q0 = Eigen::HouseholderQR<Matrix>(family_g5(1, d, 0.5, 0.2, 0, 32)[0]).householderQ() * Matrix::Identity(d, 70);
  struct Case { long k, every; bool q0; };
  for (const Case& cs : {Case{d, 1, false}, Case{60, 1, false}, Case{d, 3, false}, Case{70, 1, true}}) {
    QrOptions o;
    o.k = cs.k;
    o.reorth_every = cs.every;
    if (cs.q0) o.Q0 = Q0;
    tokdyn::testing::set_threads(2);
    const QrResult q = qr_iterate(c, o);
    Matrix Q = cs.q0 ? Q0 : Matrix(Matrix::Identity(d, cs.k));
    Matrix Z = Q;
    Matrix ref(L, cs.k);
    long start = 0;
    for (long l = 0; l < L; ++l) {
      Z = B[static_cast<std::size_t>(l)] * Z;
      if ((l + 1 - start) != cs.every && l != L - 1) continue;
      Eigen::HouseholderQR<Matrix> h(Z);
      Matrix R = h.matrixQR().topRows(cs.k).triangularView<Eigen::Upper>();
      Q = h.householderQ() * Matrix::Identity(d, cs.k);
      for (long i = 0; i < cs.k; ++i)
        if (R(i, i) < 0) Q.col(i) *= -1.0;
      for (long i = 0; i < cs.k; ++i)
        for (long j = start; j <= l; ++j) ref(j, i) = std::log(std::abs(R(i, i))) / static_cast<double>(l + 1 - start);
      start = l + 1;
      Z = Q;
    }
    EXPECT_LE((q.log_diag - ref).cwiseAbs().maxCoeff(), 1e-12) << "k " << cs.k << " every " << cs.every;
    EXPECT_LE((q.Q_final - Q).cwiseAbs().maxCoeff(), 1e-11) << "k " << cs.k << " every " << cs.every;
    for (int t : tokdyn::testing::kThreadCounts) {
      tokdyn::testing::set_threads(t);
      const QrResult qt = qr_iterate(c, o);
      EXPECT_EQ(qt.log_diag, q.log_diag) << t << " threads, k " << cs.k;
      EXPECT_EQ(qt.Q_final, q.Q_final) << t << " threads, k " << cs.k;
    }
  }
}

// "No dichotomy" as a value: a neutral end (a rotation) gives no bundles and says why; a saddle
// gives the same bundles as the throwing call; a bad argument still throws.
TEST(Bundles, FindTwoSidedBundlesIsAValue) {
  const double a = 0.3;
  Matrix rot(2, 2);
  rot << std::cos(a), -std::sin(a), std::sin(a), std::cos(a);
  const BundlesOutcome none = find_two_sided_bundles(Cocycle::from_matrices(std::vector<Matrix>(6, rot)));
  EXPECT_FALSE(none);
  EXPECT_NE(none.why_not.find("within"), std::string::npos) << none.why_not;
  Matrix saddle(2, 2);
  saddle << 2.0, 0.3, 0.0, 0.5;
  const Cocycle c = Cocycle::from_matrices(std::vector<Matrix>(6, saddle));
  const BundlesOutcome found = find_two_sided_bundles(c);
  ASSERT_TRUE(found);
  EXPECT_TRUE(found.why_not.empty());
  EXPECT_EQ(found.bundles->k, 1);
  const Bundles thrown = two_sided_bundles(c);
  for (std::size_t l = 0; l < thrown.P_plus.size(); ++l) EXPECT_EQ(found.bundles->P_plus[l], thrown.P_plus[l]);
  EXPECT_THROW(unstable_subspace(Matrix(2, 3)), std::invalid_argument);
}

// Family G5 draws its layers (and its knots, smooth > 0) on every core, each from its own stream:
// the same bits on 1 to 4 threads, and a smoothed layer is exactly the knots' linear interpolation
// (1 - w) E0 + w E1 read back from the layers that sit on the knots (w = 0).
TEST(CocycleFamilies, G5SameBitsOnOneToFourThreadsAndSmoothInterpolates) {
  tokdyn::testing::ThreadCountGuard guard;
  for (long smooth : {0L, 3L}) {
    std::vector<Matrix> ref;
    for (int t : tokdyn::testing::kThreadCounts) {
      tokdyn::testing::set_threads(t);
      const std::vector<Matrix> B = family_g5(40, 6, 0.5, 0.3, smooth, 9);
      ASSERT_EQ(B.size(), 40u);
      if (ref.empty()) ref = B;
      for (std::size_t l = 0; l < B.size(); ++l) EXPECT_TRUE((B[l].array() == ref[l].array()).all()) << "layer " << l << ", " << t << " threads";
    }
    if (smooth == 3) {
      // Layers 3 and 6 sit on knots 1 and 2; layer 4 is 2/3 of knot 1 plus 1/3 of knot 2 (the
      // identity and A0 cancel in the combination).
      const Matrix expect = (2.0 / 3.0) * ref[3] + (1.0 / 3.0) * ref[6];
      EXPECT_LE((ref[4] - expect).cwiseAbs().maxCoeff(), 1e-14);
    }
  }
}
