// Dichotomy spectra from trajectories (analysis/trajectory_spectra.hpp): the per-layer least-squares
// maps recover a linear cocycle to round-off (also from fewer members than dimensions, when the QR
// frame lies in their span), the exponents and Bohl intervals of a diagonal depth-varying cocycle are
// the closed-form means and Steklov extremes, observation noise increases the error, a nonlinear map's
// estimate approaches its exact JVP spectrum, the bits do not depend on the thread count, and the
// library refuses bad shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "thread_util.hpp"
#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/analysis/depth_spectra.hpp"
#include "tokdyn/analysis/trajectory_spectra.hpp"
#include "tokdyn/core/norms.hpp"
#include "tokdyn/core/rng.hpp"

using namespace tokdyn;
namespace ts = tokdyn::trajectory_spectra;
using Eigen::MatrixXd;
using Eigen::VectorXd;

namespace {

/// States of a linear cocycle B(0..L-1) from x0 and x0 + amp v_e (v_e Gaussian, stream (seed, e)):
/// result[l] is n x (1 + E), column 0 the base. zero_base: x0 = 0 (the cocycle's fixed point; the
/// differences are then the trajectories themselves, with no cancellation against the base).
std::vector<MatrixXd> linear_states(const std::vector<MatrixXd>& B, long E, double amp, std::uint64_t seed, bool zero_base = false) {
  const long n = B[0].rows();
  Tokens x = Tokens::Zero(1, n);
  if (!zero_base) Rng(seed, {0}).fill_normal(x);
  MatrixXd cur(n, E + 1);
  cur.col(0) = Eigen::Map<const VectorXd>(x.data(), n);
  for (long e = 1; e <= E; ++e) {
    Tokens v(1, n);
    Rng(seed, {static_cast<std::uint64_t>(e)}).fill_normal(v);
    cur.col(e) = cur.col(0) + amp * Eigen::Map<const VectorXd>(v.data(), n);
  }
  std::vector<MatrixXd> out;
  for (const MatrixXd& b : B) {
    out.push_back(cur);
    cur = b * cur;
  }
  out.push_back(cur);
  return out;
}

/// Observation noise of relative size sigma (std sigma x |column 0| / sqrt(n)), stream (seed, 99, l).
std::vector<MatrixXd> noisy(std::vector<MatrixXd> X, double sigma, std::uint64_t seed) {
  for (std::size_t l = 0; l < X.size(); ++l) {
    Tokens z(X[l].cols(), X[l].rows());
    Rng(seed, {99, l}).fill_normal(z);
    X[l] += sigma * X[l].col(0).norm() / std::sqrt(static_cast<double>(X[l].rows())) * MatrixXd(z.transpose());
  }
  return X;
}

/// The orthonormalised flag of B's eigenvectors S[:, order]: a frame whose QR diagonal is the moduli.
MatrixXd eigen_flag(const MatrixXd& S, const std::vector<long>& order) {
  MatrixXd F(S.rows(), static_cast<long>(order.size()));
  for (std::size_t i = 0; i < order.size(); ++i) F.col(static_cast<long>(i)) = S.col(order[i]);
  return Eigen::HouseholderQR<MatrixXd>(F).householderQ() * MatrixXd::Identity(S.rows(), F.cols());
}

/// A per-token nonlinear residual map z -> z + a tanh(W z + b) (ambient), with its exact jvp.
class TanhResidual final : public LayerMap {
 public:
  TanhResidual(long d, double a, std::uint64_t seed) : a_(a), W_(d, d), b_(1, d) {
    Rng r(seed, {7});
    r.fill_normal(W_, 1.0 / std::sqrt(static_cast<double>(d)));
    r.fill_normal(b_, 0.3);
  }
  void apply(long, Batch& Z) const override {
    Mat U = Z.Z * W_.transpose();
    U.rowwise() += b_.row(0);
    Z.Z += a_ * U.array().tanh().matrix();
  }
  void jvp(long, const Batch& Z, const Tokens& V, Tokens& out) const override {
    Mat U = Z.Z * W_.transpose();
    U.rowwise() += b_.row(0);
    const Mat s = (1.0 - U.array().tanh().square()).matrix();
    out = V + a_ * (s.array() * (V * W_.transpose()).array()).matrix();
  }
  bool has_exact_jvp() const override { return true; }
  bool on_sphere() const override { return false; }

 private:
  double a_;
  Mat W_, b_;
};

}  // namespace

TEST(TrajectorySpectra, LinearCocycleRecoveredToRoundOff) {
  const std::vector<double> sigma = {0.2, 0.1, -0.1, -0.2};
  const long L = 32, d = 4;
  const auto B = cocycle::family_g1(L, sigma, 3.0, 3);
  const auto D = ts::differences(linear_states(B, 8, 1.0, 1, /*zero_base=*/true));
  const auto fits = ts::fit_layers(D);
  ASSERT_EQ(fits.size(), static_cast<std::size_t>(L));
  for (const auto& f : fits) {
    EXPECT_EQ(f.rank, d);
    EXPECT_LT(spectral_norm(f.matrix() - B[0]) / spectral_norm(B[0]), 1e-13 * f.cond);
    EXPECT_LT(f.residual, 1e-12);
  }
  // From the eigenvector flag every R_ii is |1 + sigma_i|: the exponents are log |1 + sigma_i| exactly.
  const MatrixXd S = cocycle::family_g1_basis(d, 3.0, 3);
  ts::EstimateOptions o;
  o.k = d;
  o.Q0 = eigen_flag(S, {0, 1, 2, 3});
  o.H = 8;
  o.with_dichotomy = true;
  const ts::Estimate est = ts::estimate(D, o);
  for (long i = 0; i < d; ++i) EXPECT_NEAR(est.spectrum.mu(i), std::log(std::abs(1 + sigma[i])), 1e-10) << i;
  // Point intervals, and the same dichotomy (r_-, r_+, C) as the generator's own cocycle.
  for (const auto& iv : est.intervals) EXPECT_NEAR(iv.upper / iv.lower, 1.0, 1e-10);
  const ts::Dichotomy exact = ts::dichotomy(cocycle::Cocycle::from_matrices(B), 8);
  ASSERT_TRUE(std::isfinite(exact.C));
  EXPECT_NEAR(est.dich.C / exact.C, 1.0, 1e-8);
  EXPECT_NEAR(est.dich.r_minus, exact.r_minus, 1e-10);
  EXPECT_NEAR(est.dich.r_plus_min, exact.r_plus_min, 1e-10);
  EXPECT_EQ(est.dich.decision.verdict, cocycle::Verdict::Yes);
}

TEST(TrajectorySpectra, WeakDirectionsSinkBelowTheBasesRoundOff) {
  // The spec's G1 (growth scales 1.2, 1.1, 0.7, 0.5) seen as states X = x0 + delta around a base of
  // size 1: the differences carry the states' round-off, 1e-16 |X_l|, while the weakest direction
  // of delta shrinks like 0.5^l. The leading exponents stay exact; the weakest one degrades.
  const std::vector<double> sigma = {0.2, 0.1, -0.3, -0.5};
  const long L = 24, d = 4;
  const auto B = cocycle::family_g1(L, sigma, 10.0, 3);
  ts::EstimateOptions o;
  o.k = d;
  o.Q0 = eigen_flag(cocycle::family_g1_basis(d, 10.0, 3), {0, 1, 2, 3});
  const ts::Estimate est = ts::estimate(ts::differences(linear_states(B, 8, 1e-5, 1)), o);
  EXPECT_NEAR(est.spectrum.mu(0), std::log(1.2), 1e-9);
  EXPECT_NEAR(est.spectrum.mu(1), std::log(1.1), 1e-9);
  EXPECT_GT(std::abs(est.spectrum.mu(3) - std::log(0.5)), 1e-7);
  EXPECT_GT(est.max_cond, 1e8);
}

TEST(TrajectorySpectra, FewerMembersThanDimensionsWhenTheFrameIsInTheirSpan) {
  // n = 6, E = 2: the fit is determined on the span of the two perturbations only (rank 2, 0 on the
  // rest), yet the top-2 exponents from the frame of those perturbations are the generator's own.
  const long L = 30, n = 6;
  const auto B = cocycle::family_g5(L, n, 0.4, 0.2, 0, 11);
  const auto X = linear_states(B, 2, 1e-4, 5);
  const auto D = ts::differences(X);
  ts::EstimateOptions o;
  o.k = 2;
  const ts::Estimate est = ts::estimate(D, o);
  EXPECT_EQ(est.min_rank, 2);
  cocycle::QrOptions q;
  q.k = 2;
  q.Q0 = ts::frame_from(D[0], 2);
  const auto exact = cocycle::lyapunov_spectrum(cocycle::qr_iterate(cocycle::Cocycle::from_matrices(B), q).log_diag);
  for (long i = 0; i < 2; ++i) EXPECT_NEAR(est.spectrum.mu(i), exact.mu(i), 1e-9) << i;
  // The fitted map is not B: only its action on the span is.
  EXPECT_GT(spectral_norm(est.fits[0].matrix() - B[0]), 0.1);
  EXPECT_LT(spectral_norm(est.fits[0].matrix() * D[0] - B[0] * D[0]) / D[0].norm(), 1e-12);
}

TEST(TrajectorySpectra, DiagonalCocycleExponentsAndBohlIntervalsAreClosedForms) {
  // B(l) = diag(a_i(l)), a_i(l) = exp(c_i + 0.2 sin(0.7 l + i)): from the identity frame R_ii(l) = a_i(l),
  // so mu_i = mean_l log a_i(l) and the Bohl interval of column i is [exp(min), exp(max)] of its
  // Steklov averages, evaluated directly here.
  const long L = 40, n = 3, H = 8;
  const VectorXd c = (VectorXd(n) << 0.15, -0.05, -0.4).finished();
  std::vector<MatrixXd> B;
  MatrixXd loga(L, n);
  for (long l = 0; l < L; ++l) {
    for (long i = 0; i < n; ++i) loga(l, i) = c(i) + 0.2 * std::sin(0.7 * static_cast<double>(l) + static_cast<double>(i));
    B.push_back(loga.row(l).array().exp().matrix().asDiagonal());
  }
  const auto D = ts::differences(linear_states(B, 5, 1e-3, 2));
  ts::EstimateOptions o;
  o.k = n;
  o.Q0 = MatrixXd::Identity(n, n);
  o.H = H;
  const ts::Estimate est = ts::estimate(D, o);
  for (long i = 0; i < n; ++i) {
    EXPECT_NEAR(est.spectrum.mu(i), loga.col(i).mean(), 1e-11) << i;
    double lo = 1e300, hi = -1e300;
    for (long s = 0; s + H <= L; ++s) {
      const double m = loga.col(i).segment(s, H).mean();
      lo = std::min(lo, m);
      hi = std::max(hi, m);
    }
    EXPECT_NEAR(std::log(est.intervals[static_cast<std::size_t>(i)].lower), lo, 1e-11) << i;
    EXPECT_NEAR(std::log(est.intervals[static_cast<std::size_t>(i)].upper), hi, 1e-11) << i;
  }
}

TEST(TrajectorySpectra, ObservationNoiseIncreasesTheError) {
  const std::vector<double> sigma = {0.2, 0.1, -0.3, -0.5};
  const long L = 24, d = 4;
  const auto B = cocycle::family_g1(L, sigma, 10.0, 3);
  const auto X = linear_states(B, 16, 1e-3, 1);
  const MatrixXd Q0 = eigen_flag(cocycle::family_g1_basis(d, 10.0, 3), {0, 1, 2, 3});
  std::vector<double> err;
  for (double s : {0.0, 1e-10, 1e-8, 1e-6}) {
    ts::EstimateOptions o;
    o.k = 2;  // the top two: resolved against the noise at every level
    o.Q0 = Q0.leftCols(2);
    const ts::Estimate est = ts::estimate(ts::differences(noisy(X, s, 4)), o);
    double e = 0;
    for (long i = 0; i < 2; ++i) e = std::max(e, std::abs(est.spectrum.mu(i) - std::log(std::abs(1 + sigma[i]))));
    err.push_back(e);
  }
  for (std::size_t j = 1; j < err.size(); ++j) EXPECT_GT(err[j], err[j - 1]) << "noise level " << j;
  EXPECT_LT(err[0], 1e-12);
  EXPECT_GT(err.back(), 1e-6);
}

TEST(TrajectorySpectra, NonlinearMapApproachesItsExactJvpSpectrum) {
  // Tokens of a per-token tanh residual map: the estimate from E = n + 8 trajectories against
  // depth_spectrum (the exact jvp) from the same frame; the error is first order in eps.
  const long len = 2, d = 3, n = len * d, L = 20, k = 3;
  const TanhResidual F(d, 0.8, 1);
  Tokens x0(len, d);
  Rng(1, {1}).fill_normal(x0);
  const Batch Z0{x0, 1, static_cast<int>(len)};
  std::vector<Tokens> dirs;
  for (long e = 0; e < n + 8; ++e) {
    Tokens v(len, d);
    Rng(1, {2, static_cast<std::uint64_t>(e)}).fill_normal(v);
    dirs.push_back(v);
  }
  Tokens frame(k * len, d);
  for (long i = 0; i < k; ++i) frame.middleRows(i * len, len) = dirs[static_cast<std::size_t>(i)];
  DepthSpectrumOptions o;
  o.k = static_cast<int>(k);
  o.depth = L;
  o.tangents = &frame;
  const DepthSpectrum ref = depth_spectrum(F, Z0, o);
  std::vector<double> err;
  for (double eps : {1e-3, 1e-5}) {
    std::vector<Tokens> starts;
    for (const Tokens& v : dirs) starts.push_back(x0 + eps * v);
    const auto X = ts::record_ensemble(ts::value_of(apply_and_jvp(F)), Z0, starts, L);
    ASSERT_EQ(X.size(), static_cast<std::size_t>(L + 1));
    ts::EstimateOptions eo;
    eo.k = k;
    const ts::Estimate est = ts::estimate(ts::differences(X), eo);
    double e = 0;
    for (long i = 0; i < k; ++i) e = std::max(e, std::abs(est.spectrum.mu(i) - ref.mu(i)));
    err.push_back(e);
  }
  EXPECT_LT(err[1], 1e-5);
  EXPECT_GT(err[0] / err[1], 20.0);  // ~100: first order in eps
  // The dense Jacobians are the jvp's columns: their QR from the same frame gives the same spectrum.
  const auto J = ts::dense_jacobians(apply_and_jvp(F), Z0, L);
  cocycle::QrOptions q;
  q.k = k;
  MatrixXd F0 = Eigen::Map<const MatrixXd>(frame.data(), n, k), Q, R;
  Eigen::RowVectorXd lg(k);
  std::vector<long> un(static_cast<std::size_t>(k), -1);
  cocycle::benettin_step(F0, Q, R, lg, un, 0);
  q.Q0 = Q;
  const auto dq = cocycle::lyapunov_spectrum(cocycle::qr_iterate(cocycle::Cocycle::from_matrices(J), q).log_diag);
  for (long i = 0; i < k; ++i) EXPECT_NEAR(dq.mu(i), ref.mu(i), 1e-12) << i;
}

TEST(TrajectorySpectra, SameBitsAtOneAndTwoThreads) {
  const auto B = cocycle::family_g5(16, 5, 0.5, 0.3, 0, 2);
  const auto D = ts::differences(noisy(linear_states(B, 12, 1e-3, 8), 1e-7, 9));
  ts::EstimateOptions o;
  o.k = 3;
  o.H = 4;
  o.with_dichotomy = true;
  tokdyn::testing::ThreadCountGuard guard;
  std::vector<ts::Estimate> runs;
  for (int t : {1, 2}) {
    tokdyn::testing::set_threads(t);
    runs.push_back(ts::estimate(D, o));
  }
  for (std::size_t l = 0; l < runs[0].fits.size(); ++l) EXPECT_TRUE(runs[0].fits[l].matrix() == runs[1].fits[l].matrix()) << l;
  EXPECT_TRUE(runs[0].qr.log_diag == runs[1].qr.log_diag);
  EXPECT_EQ(std::isnan(runs[0].dich.C), std::isnan(runs[1].dich.C));
  if (!std::isnan(runs[0].dich.C)) {
    EXPECT_EQ(runs[0].dich.C, runs[1].dich.C);
  }
}

TEST(TrajectorySpectra, RefusesBadShapes) {
  const MatrixXd a = MatrixXd::Random(4, 3), b = MatrixXd::Random(4, 2);
  EXPECT_THROW(ts::fit_layer(a, b), std::invalid_argument);
  EXPECT_THROW(ts::fit_layer(a, a, -1.0), std::invalid_argument);
  EXPECT_THROW(ts::fit_layers({a}), std::invalid_argument);
  ts::EstimateOptions o;
  o.k = 4;  // > E = 3
  EXPECT_THROW(ts::estimate({a, a}, o), std::invalid_argument);
  o.k = 2;
  o.burn_in = 1;  // >= L = 1
  EXPECT_THROW(ts::estimate({a, a}, o), std::invalid_argument);
  MatrixXd twin = a;
  twin.col(1) = 2.0 * twin.col(0);
  EXPECT_THROW(ts::frame_from(twin, 2), std::invalid_argument);
  EXPECT_THROW(ts::differences({MatrixXd::Zero(4, 1)}), std::invalid_argument);
  EXPECT_THROW(ts::differences({MatrixXd::Zero(4, 2)}, 3), std::invalid_argument);
  // A layer where no perturbation survives: the data determine nothing, the fit is 0.
  const ts::LayerFit z = ts::fit_layer(MatrixXd::Zero(4, 3), a);
  EXPECT_EQ(z.rank, 0);
  EXPECT_TRUE(z.matrix().isZero(0.0));
}
