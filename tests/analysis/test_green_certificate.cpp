// The uniqueness certificate of Lemma 17(3) (issue 17): sigma_min of the Green BVP matrix must be
// a value not above the true one. References: the dense matrix's singular values by Eigen's
// two-sided Jacobi SVD (a different algorithm from the certificate's divide and conquer), the
// closed form of a weight-tied scalar BVP, and the power estimate it replaces (which approaches the
// true value from above, so it is not a certificate).
#include <gtest/gtest.h>

#include <cmath>

#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/analysis/green.hpp"
#include "tokdyn/core/rng.hpp"

using namespace tokdyn;
using green::Matrix;
using green::Seq;

namespace {

green::Bvp make_bvp(const std::vector<Matrix>& B) { return green::Bvp(B, green::make_ends(B.front(), B.back())); }

double jacobi_sigma_min(const Matrix& M) {
  const Eigen::VectorXd sv = Eigen::JacobiSVD<Matrix>(M).singularValues();
  return sv(sv.size() - 1);
}

}  // namespace

TEST(GreenCertificate, DenseMatrixIsTheSystemTheSolverSolves) {
  // Zero tails: M vec(u) = (0, vec(h), 0).
  const auto B = cocycle::family_g1(30, {0.2, -0.3, 0.1}, 5.0, 7);
  const green::Bvp bvp = make_bvp(B);
  const long L = 30, d = 3;
  Rng rng(11, {1});
  Seq h(d, L);
  for (long j = 0; j < L; ++j)
    for (long i = 0; i < d; ++i) h(i, j) = rng.normal();
  const Seq u = bvp.solve(h, green::Tails::Zero);
  const Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(u.data(), (L + 1) * d);
  const Eigen::VectorXd r = bvp.dense_matrix() * x;
  const long m = d - bvp.ends().k;
  EXPECT_LT(r.head(m).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LT((r.segment(m, L * d) - Eigen::Map<const Eigen::VectorXd>(h.data(), L * d)).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LT(r.tail(d - m).cwiseAbs().maxCoeff(), 1e-12);
}

TEST(GreenCertificate, ExactCertificateIsNotAboveTheTrueValueWhileThePowerEstimateIs) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const auto B = cocycle::family_g4(60, {-0.6, -0.6, -0.5, -0.5}, {0.8, 0.8, 0.2, 0.2}, 1.0, 0.05, seed);
    const green::Bvp bvp = make_bvp(B);
    const double truth = jacobi_sigma_min(bvp.dense_matrix());
    const auto cert = bvp.smallest_singular_value_certificate();
    EXPECT_EQ(cert.method, "exact");
    EXPECT_LE(cert.value, truth) << seed;
    EXPECT_NEAR(cert.value, truth, 1e-10 * (1 + truth)) << seed;
    // The power estimate approaches from above (a lower estimate of ||M^-1||): never below the truth.
    EXPECT_GE(bvp.smallest_singular_value_estimate() * (1 + 1e-12), truth) << seed;
  }
}

TEST(GreenCertificate, NormBoundIsALowerBoundWithinSqrtN) {
  const auto B = cocycle::family_g4(40, {-0.6, -0.6, -0.5, -0.5}, {0.8, 0.8, 0.2, 0.2}, 1.0, 0.05, 5);
  const green::Bvp bvp = make_bvp(B);
  const double truth = jacobi_sigma_min(bvp.dense_matrix());
  const auto bound = bvp.smallest_singular_value_certificate(/*dense_max=*/0);
  EXPECT_EQ(bound.method, "lower bound");
  const double N = static_cast<double>(bvp.dense_matrix().rows());
  EXPECT_LE(bound.value, truth);
  EXPECT_GE(bound.value, truth / std::sqrt(N));  // ||X||_1 ||X||_inf <= N ||X||_2^2
  const auto none = bvp.smallest_singular_value_certificate(0, /*max_flops=*/1.0);
  EXPECT_EQ(none.method, "none");
  EXPECT_TRUE(std::isnan(none.value));
}

#include "test_util.hpp"

TEST(GreenCertificate, PresetWritesTheCertificateAndTheVerdictLine) {
  tokdyn::testing::TempDir d;
  const auto r = tokdyn::testing::run_cli(d.path(), {"run", "coupling-green", "--no-figures", "--quiet", "--out", "g", "--set", "depth=40"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The run ends with the verdicts by reference kind.
  EXPECT_NE(r.out.find("checks: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("by reference (passed/made): "), std::string::npos) << r.out;
  const std::string checks = tokdyn::testing::slurp(d.path() / "g" / "checks.csv");
  EXPECT_EQ(checks.rfind("check,statement,quantity,value,expected,reference_kind,reference,pass\n", 0), 0u) << checks;
  EXPECT_NE(checks.find("sigma_min(BVP matrix), exact"), std::string::npos) << checks;
  const std::string m = tokdyn::testing::slurp(d.path() / "g" / "manifest.json");
  EXPECT_NE(m.find("\"power_estimate\""), std::string::npos) << m;
  EXPECT_NE(m.find("\"checks_by_kind\""), std::string::npos) << m;
}
