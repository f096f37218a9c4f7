// Decisions at a boundary (issue 17): hyperbolicity is yes / no / undecided, with the margin of 1
// from the estimated dichotomy spectrum and the estimate's own error beside it. References: closed
// forms (a constant diagonal cocycle's spectrum, a neutral cocycle's spectrum {1}, the partial-sum
// oscillation of an alternating column).
#include <gtest/gtest.h>

#include <cmath>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/core/error.hpp"

namespace {

using namespace tokdyn::cocycle;

Matrix rotation(double t) {
  Matrix R(2, 2);
  R << std::cos(t), -std::sin(t), std::sin(t), std::cos(t);
  return R;
}

}  // namespace

TEST(HyperbolicDecision, ExactlyNeutralCocycleIsNeverCalledHyperbolic) {
  // B = S U S^{-1}, U = R(0.7) (+) 1 (+) -1: every eigenvalue has modulus 1, so the dichotomy
  // spectrum is {1} (closed form) and the cocycle is not hyperbolic. The estimate sits within
  // round-off and the window's bias of 1: the verdict may be "undecided" or "no", never "yes".
  const long d = 4, L = 3000;
  Matrix U = Matrix::Zero(d, d);
  U.topLeftCorner(2, 2) = rotation(0.7);
  U(2, 2) = 1.0;
  U(3, 3) = -1.0;
  Matrix S = Matrix::Identity(d, d);
  for (long i = 0; i < d; ++i)
    for (long j = 0; j < d; ++j) S(i, j) += 0.3 * std::sin(1.0 + 3.0 * static_cast<double>(i) + 7.0 * static_cast<double>(j));
  const Matrix B = S * U * S.inverse();
  const Cocycle c = Cocycle::from_matrices(std::vector<Matrix>(static_cast<std::size_t>(L), B));
  const QrResult q = qr_iterate(c);
  for (long H : {50L, 400L, 2500L}) {
    const auto merged = merge_intervals(bohl_intervals(q.log_diag, H, 200));
    const SpectrumError err = spectrum_error(q.log_diag, 200);
    const HyperbolicDecision dec = decide_hyperbolic(merged, err.tolerance());
    EXPECT_NE(dec.verdict, Verdict::Yes) << "H = " << H << ": margin " << dec.margin << ", tolerance " << dec.tolerance;
    EXPECT_GT(err.tolerance(), 0.0);
  }
}

TEST(HyperbolicDecision, AnIntervalEndingOneUlpBelowOneIsUndecided) {
  // The case found from outside: every interval tops out at 0.9999999999999987 (log = -1.3e-15).
  const std::vector<Interval> merged = {Interval{0.5, 0.9999999999999987, {0}}};
  EXPECT_TRUE(hyperbolic(merged));  // the tolerance-free test calls it hyperbolic
  // Round-off of a 4-column QR diagonal with |log R| <= 1: 16 eps 5 (1 + 1) = 3.6e-14.
  Matrix log_diag = Matrix::Zero(100, 4);
  log_diag.col(0).setConstant(-1.0);
  const SpectrumError err = spectrum_error(log_diag);
  EXPECT_DOUBLE_EQ(err.roundoff, 16.0 * std::numeric_limits<double>::epsilon() * 5.0 * 2.0);
  const HyperbolicDecision dec = decide_hyperbolic(merged, err.tolerance());
  EXPECT_EQ(dec.verdict, Verdict::Undecided);
  EXPECT_NEAR(dec.margin, -std::log(0.9999999999999987), 1e-20);
  EXPECT_STREQ(verdict_name(dec.verdict), "undecided");
}

TEST(HyperbolicDecision, ConstantDiagonalIsHyperbolicWithMarginLogTwo) {
  // B = diag(2, 0.5): spectrum {0.5, 2} (closed form), margin log 2, no window bias at all.
  Matrix B = Matrix::Zero(2, 2);
  B(0, 0) = 2.0;
  B(1, 1) = 0.5;
  const QrResult q = qr_iterate(Cocycle::from_matrices(std::vector<Matrix>(200, B)));
  const SpectrumError err = spectrum_error(q.log_diag);
  EXPECT_LE(err.window_bias, 1e-14);  // 0 in exact arithmetic; the mean's rounding leaves ~1e-15
  const HyperbolicDecision dec = decide_hyperbolic(merge_intervals(bohl_intervals(q.log_diag, 20)), err.tolerance());
  EXPECT_EQ(dec.verdict, Verdict::Yes);
  EXPECT_NEAR(dec.margin, std::log(2.0), 1e-14);
}

TEST(HyperbolicDecision, OneInsideAnIntervalIsNoWithTheDepthAsMargin) {
  // Switching 0.9 / 1.2 on long runs: the Bohl interval at H = 8 is [0.9, 1.2] (R10c), so 1 is
  // inside by min(log 1.2, -log 0.9) = -log 0.9.
  const auto B = switching_scalar(1023, 0.9, 1.2, 1);
  const QrResult q = qr_iterate(Cocycle::from_matrices(B));
  const HyperbolicDecision dec =
      decide_hyperbolic(merge_intervals(bohl_intervals(q.log_diag, 8)), spectrum_error(q.log_diag).tolerance());
  EXPECT_EQ(dec.verdict, Verdict::No);
  EXPECT_NEAR(dec.margin, std::log(0.9), 1e-12);
}

TEST(HyperbolicDecision, WindowBiasIsThePartialSumOscillationOverN) {
  // A column alternating +a, -a: partial sums about the mean 0 oscillate between a and 0, so the
  // bias is a / N (closed form); a constant column has none.
  const double a = 0.25;
  const long N = 400;
  Matrix log_diag(N, 2);
  for (long r = 0; r < N; ++r) {
    log_diag(r, 0) = (r % 2 == 0) ? a : -a;
    log_diag(r, 1) = -0.3;
  }
  EXPECT_NEAR(spectrum_error(log_diag).window_bias, a / static_cast<double>(N), 1e-16);
  EXPECT_THROW(decide_hyperbolic({}, -1.0), std::invalid_argument);
  EXPECT_EQ(decide_hyperbolic({}, 0.0).verdict, Verdict::Yes);  // no directions: nothing at 1
}

TEST(QrScaling, GeneratorsNearTheTopOfDoubleGiveTheirExactExponents) {
  // B = 1e160 diag(1.2, 0.7): exponents log 1.2 + 160 log 10 and log 0.7 + 160 log 10 (closed
  // form, about +369): the Householder norms of B Q would overflow without the power-of-two scaling.
  Matrix B = Matrix::Zero(2, 2);
  B(0, 0) = 1.2e160;
  B(1, 1) = 0.7e160;
  B(0, 1) = 0.3e160;  // upper triangular: the QR diagonal is exactly the diagonal
  const QrResult q = qr_iterate(Cocycle::from_matrices(std::vector<Matrix>(50, B)));
  const LyapunovSpectrum s = lyapunov_spectrum(q.log_diag);
  EXPECT_NEAR(s.mu(0), std::log(1.2) + 160 * std::log(10.0), 1e-12 * 369);
  EXPECT_NEAR(s.mu(1), std::log(0.7) + 160 * std::log(10.0), 1e-12 * 369);
  // And tiny generators: 1e-200 diag(1.2, 0.7) gives log 1.2 - 200 log 10 (no underflow to -inf).
  const QrResult t = qr_iterate(Cocycle::from_matrices(std::vector<Matrix>(50, (B * 1e-180) * 1e-180)));
  EXPECT_NEAR(lyapunov_spectrum(t.log_diag).mu(0), std::log(1.2) - 200 * std::log(10.0), 1e-12 * 461);
}

TEST(QrScaling, AnImageThatOverflowsStopsAsNonFiniteNamingTheLayer) {
  // Every entry 1.5e308: B e_1 is finite, B (e_1 + e_2)/sqrt 2 = 2.1e308 overflows at layer 1.
  const Matrix B = Matrix::Constant(2, 2, 1.5e308);
  try {
    qr_iterate(Cocycle::from_matrices(std::vector<Matrix>(5, B)));
    FAIL() << "expected NonFiniteError";
  } catch (const tokdyn::NonFiniteError& e) {
    EXPECT_NE(std::string(e.what()).find("B(1)"), std::string::npos) << e.what();
  }
}

TEST(QrResolution, ARankDeficientLayerLeavesItsColumnUnresolved) {
  // Layer 50 of 200 is S diag(1, 0) S^-1 (rank one, not axis-aligned): the product has rank one, so
  // the second growth scale is exactly 0 (closed form); round-off in R_22 would report a small
  // positive number. The column is flagged from layer 50; the first column is not.
  Matrix S(2, 2);
  S << 1.0, 0.4, 0.3, 1.0;
  Matrix P = Matrix::Zero(2, 2);
  P(0, 0) = 1.0;
  const Matrix singular = S * P * S.inverse();
  std::vector<Matrix> B(200, Matrix::Identity(2, 2) * 1.05);
  for (long l = 0; l < 200; ++l) B[static_cast<std::size_t>(l)].topRightCorner(1, 1)(0, 0) = 0.2;
  B[50] = singular;
  const QrResult q = qr_iterate(Cocycle::from_matrices(B));
  ASSERT_EQ(q.unresolved_at.size(), 2u);
  EXPECT_EQ(q.unresolved_at[0], -1);
  EXPECT_EQ(q.unresolved_at[1], 50);
  // A full-rank cocycle flags nothing.
  EXPECT_EQ(qr_iterate(Cocycle::from_matrices(switching_scalar(100, 0.9, 1.2, 1))).unresolved_at, std::vector<long>{-1});
}

// ---- the same, through the CLI -----------------------------------------------------------------

#include "test_util.hpp"
#include "tokdyn/io/csv.hpp"

namespace {

std::vector<double> diagonal_generators(long L, double a, double b, double scale) {
  std::vector<double> g;
  for (long l = 0; l < L; ++l) g.insert(g.end(), {a * scale, 0.0, 0.0, b * scale});
  return g;
}

}  // namespace

TEST(CocycleCliDecisions, HugeGeneratorsGiveTheirExponentsAndOverflowIsExitFour) {
  tokdyn::testing::TempDir d;
  auto g = diagonal_generators(40, 1.2, 0.7, 1e160);
  tokdyn::write_npy(d.path() / "big.npy", g.data(), {40, 2, 2});
  auto r = tokdyn::testing::run_cli(d.path(), {"run", "cocycle-spectra", "--no-figures", "--quiet", "--out", "big", "--set",
                                               "generators=big.npy", "--set", "burn_in=5", "--set", "H=5,10", "--set", "bundles=none"});
  ASSERT_EQ(r.code, 0) << r.err;
  // log 1.2 + 160 log 10 = 368.59...: the exponent, not -inf.
  const std::string ly = tokdyn::testing::slurp(d.path() / "big" / "lyapunov.csv");
  EXPECT_NE(ly.find("0,368.59"), std::string::npos) << ly;
  EXPECT_EQ(ly.find("inf"), std::string::npos) << ly;
  // Entries of 1.5e308 in every position: the image overflows, exit 4 and nothing written.
  std::vector<double> full(40 * 4, 1.5e308);
  tokdyn::write_npy(d.path() / "over.npy", full.data(), {40, 2, 2});
  r = tokdyn::testing::run_cli(d.path(), {"run", "cocycle-spectra", "--no-figures", "--quiet", "--out", "over", "--set", "generators=over.npy",
                                          "--set", "burn_in=5", "--set", "H=5,10", "--set", "bundles=none"});
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("not finite"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(d.path() / "over"));
}

TEST(CocycleCliDecisions, NeutralGeneratorsAreNotReportedHyperbolic) {
  // B = rotation by 0.7 (an exactly neutral map): the manifest's verdict is never "yes".
  tokdyn::testing::TempDir d;
  std::vector<double> g;
  for (int l = 0; l < 200; ++l) g.insert(g.end(), {std::cos(0.7), -std::sin(0.7), std::sin(0.7), std::cos(0.7)});
  tokdyn::write_npy(d.path() / "rot.npy", g.data(), {200, 2, 2});
  const auto r = tokdyn::testing::run_cli(d.path(), {"run", "cocycle-spectra", "--no-figures", "--quiet", "--out", "o", "--set",
                                                     "generators=rot.npy", "--set", "bundles=none"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string m = tokdyn::testing::slurp(d.path() / "o" / "manifest.json");
  EXPECT_EQ(m.find("\"hyperbolic\": \"yes\""), std::string::npos) << m;
  EXPECT_NE(m.find("\"hyperbolic_margin\""), std::string::npos) << m;
}

TEST(CocycleCliDecisions, OneLayerGeneratorsFileForGreenIsBadInputNamingTheFile) {
  tokdyn::testing::TempDir d;
  auto g = diagonal_generators(1, 1.2, 0.7, 1.0);
  tokdyn::write_npy(d.path() / "one.npy", g.data(), {1, 2, 2});
  const auto r = tokdyn::testing::run_cli(d.path(), {"run", "coupling-green", "--no-figures", "--quiet", "--out", "o", "--set",
                                                     "generators=one.npy"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("parameter 'generators' (one.npy): generators have shape (1, 2, 2); expected [L, d, d] with L >= 2"),
            std::string::npos) << r.err;
}

TEST(QrScaling, DenormalGeneratorsGiveTheirExponent) {
  // B = 5e-324 (the smallest denormal): exponent log(5e-324) = -744.44 (closed form), not inf.
  const QrResult q = qr_iterate(Cocycle::from_matrices(std::vector<Matrix>(10, Matrix::Constant(1, 1, 5e-324))));
  EXPECT_NEAR(lyapunov_spectrum(q.log_diag).mu(0), std::log(5e-324), 1e-12 * 745);
}
