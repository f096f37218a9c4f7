// Depth spectra (analysis/depth_spectra.hpp): the matrix-free discrete QR through the models' JVPs
// against dense products of Jacobians (built from T d JVPs, or from central differences of
// apply), singular-value growth, a linear map with known exponents, k-invariance, thread-count
// independence, the R_ii = 0 guard and the library's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include <Eigen/QR>
#include <Eigen/SVD>

#include "ssm_fixtures.hpp"
#include "thread_util.hpp"
#include "tokdyn/analysis/depth_spectra.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/engine/schedule.hpp"

using namespace tokdyn;
using Eigen::MatrixXd;

namespace {

/// A per-token linear map z -> B z (ambient, not on spheres): its depth map's exponents are the
/// log moduli of B's eigenvalues, each T times.
class LinearTokenMap final : public LayerMap {
 public:
  explicit LinearTokenMap(Mat B) : B_(std::move(B)) {}
  void apply(long, Batch& Z) const override { Z.Z = (Z.Z * B_.transpose()).eval(); }
  void jvp(long, const Batch&, const Tokens& V, Tokens& out) const override { out = V * B_.transpose(); }
  bool has_exact_jvp() const override { return true; }
  bool on_sphere() const override { return false; }

 private:
  Mat B_;
};

/// Forwards apply and on_sphere but keeps LayerMap's finite-difference jvp.
class FdOnly final : public LayerMap {
 public:
  explicit FdOnly(const LayerMap& F) : F_(F) {}
  void apply(long k, Batch& Z) const override { F_.apply(k, Z); }
  bool on_sphere() const override { return F_.on_sphere(); }

 private:
  const LayerMap& F_;
};

/// Dense ambient Jacobian (n x n, n = T d) of one layer at Z from n JVPs in ONE call (tiny sizes only).
MatrixXd dense_jacobian_jvp(const LayerMap& F, long l, const Batch& Z) {
  const int len = Z.len, d = Z.dim();
  const Eigen::Index n = static_cast<Eigen::Index>(len) * d;
  Batch Zrep{Z.Z.replicate(n, 1), static_cast<int>(n), len};
  Tokens E = Tokens::Zero(n * len, d);
  for (Eigen::Index j = 0; j < n; ++j) E.data()[j * n + j] = 1.0;  // run j = e_j
  Tokens W;
  F.jvp(l, Zrep, E, W);
  return Eigen::Map<const MatrixXd>(W.data(), n, n);
}

/// Dense ambient Jacobian by central differences of apply, step 1e-6.
MatrixXd dense_jacobian_fd(const LayerMap& F, long l, const Batch& Z) {
  const int len = Z.len, d = Z.dim();
  const Eigen::Index n = static_cast<Eigen::Index>(len) * d;
  const double h = 1e-6;
  MatrixXd J(n, n);
  for (Eigen::Index j = 0; j < n; ++j) {
    Batch P = Z, M = Z;
    P.Z.data()[j] += h;
    M.Z.data()[j] -= h;
    F.apply(l, P);
    F.apply(l, M);
    const Tokens D = (P.Z - M.Z) / (2.0 * h);
    J.col(j) = Eigen::Map<const Eigen::VectorXd>(D.data(), n);
  }
  return J;
}

/// log |R_ii| of the QR of M.
Eigen::VectorXd log_r_diag(const MatrixXd& M) {
  const Eigen::HouseholderQR<MatrixXd> qr(M);
  Eigen::VectorXd out(M.cols());
  for (Eigen::Index i = 0; i < M.cols(); ++i) out[i] = std::log(std::abs(qr.matrixQR()(i, i)));
  return out;
}

/// The tangent projector of (S^{d-1})^T at Z (identity off the spheres).
MatrixXd tangent_projector(const LayerMap& F, const Batch& Z) {
  const int len = Z.len, d = Z.dim();
  const Eigen::Index n = static_cast<Eigen::Index>(len) * d;
  MatrixXd P = MatrixXd::Identity(n, n);
  if (!F.on_sphere()) return P;
  for (int i = 0; i < len; ++i) {
    const Eigen::VectorXd z = Z.Z.row(i).transpose() / Z.Z.row(i).norm();
    P.block(i * d, i * d, d, d) -= z * z.transpose();
  }
  return P;
}

struct DenseCheck {
  Eigen::VectorXd qr_sums;  // log |R_ii| of Phi Q0
  Eigen::VectorXd log_sv;   // log singular values of Phi P0 (descending)
};

/// Phi(depth, 0) along the trajectory of `F` (apply) from Z0, Jacobians from `jac`; Q0 as the library draws it.
template <class Jac>
DenseCheck dense_check(const LayerMap& F, const Batch& Z0, int k, long depth, std::uint64_t seed, Jac jac) {
  const Eigen::Index n = static_cast<Eigen::Index>(Z0.len) * Z0.dim();
  Tokens Q0 = initial_tangents(F, Z0, k, seed);
  MatrixXd Phi = MatrixXd::Identity(n, n);
  Batch Z = Z0;
  for (long l = 1; l <= depth; ++l) {
    Phi = (jac(l, Z) * Phi).eval();
    F.apply(l, Z);
  }
  DenseCheck c;
  c.qr_sums = log_r_diag(Phi * Eigen::Map<const MatrixXd>(Q0.data(), n, k));
  Eigen::JacobiSVD<MatrixXd> svd(Phi * tangent_projector(F, Z0));
  c.log_sv = svd.singularValues().array().log().matrix();
  return c;
}

std::shared_ptr<const WeightSchedule<SsmParams>> ssm_schedule(int n, int m) {
  return std::make_shared<IidSchedule<SsmParams>>([n, m](Rng& rng) { return tokdyn::testing::random_ssm(rng.next_u64(), n, m); }, 11ULL, 1L);
}

Batch sphere_state(int len, int d, std::uint64_t seed) {
  Rng rng(seed);
  return Batch{rng.sphere_tokens(len, d), 1, len};
}

/// Checks the library's exponents (burn_in 0) against a dense product: the cumulative log R_ii
/// equal the QR of Phi Q0 (an identity of the discrete QR method), within `tol` x depth.
template <class Jac>
void expect_matches_dense(const LayerMap& F, const Batch& Z0, int k, long depth, double tol, Jac jac) {
  DepthSpectrumOptions o;
  o.k = k;
  o.depth = depth;
  o.seed = 5;
  const DepthSpectrum S = depth_spectrum(F, Z0, o);
  const DenseCheck c = dense_check(F, Z0, k, depth, o.seed, jac);
  for (int i = 0; i < k; ++i) EXPECT_NEAR(S.mu[i] * static_cast<double>(depth), c.qr_sums[i], tol * static_cast<double>(depth)) << "i = " << i;
}

}  // namespace

TEST(DepthSpectra, LinearMapGivesLogEigenvalueModuli) {
  // B = S diag(2, 1, 0.5, 0.25) S^{-1} (non-normal): exponents ln 2 (x T), 0 (x T), ln 0.5, ...
  Rng rng(3);
  Mat S(4, 4);
  rng.fill_normal(S);
  S += 2.0 * Mat::Identity(4, 4);
  const Mat B = S * Eigen::Vector4d(2.0, 1.0, 0.5, 0.25).asDiagonal() * S.inverse();
  const LinearTokenMap F(B);
  Batch Z0{Tokens::Ones(2, 4), 1, 2};
  DepthSpectrumOptions o;
  o.k = 6;
  o.depth = 300;
  o.burn_in = 50;
  const DepthSpectrum R = depth_spectrum(F, Z0, o);
  const double want[6] = {std::log(2.0), std::log(2.0), 0.0, 0.0, std::log(0.5), std::log(0.5)};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(R.mu[i], want[i], 1e-3) << i;
  EXPECT_EQ(R.dim, 8);
  EXPECT_EQ(R.log_r.rows(), 300);
  EXPECT_EQ(R.mu_running.rows(), 250);
  EXPECT_EQ(R.measured_log_r().rows(), 250);
  EXPECT_NEAR(R.gamma[0], 2.0, 2e-3);
}

TEST(DepthSpectra, SsmMatchesDenseProductOfJvpAndFiniteDifferenceJacobians) {
  SsmOptions so;
  so.tau = 1.0;
  so.silu_bc = true;
  const SsmLayer F(ssm_schedule(4, 6), so);
  const Batch Z0 = sphere_state(3, 4, 1);
  // Exact identity: sum_l log R_l[i,i] = log R_ii(Phi Q0), Jacobians from the model's jvp.
  expect_matches_dense(F, Z0, 5, 10, 1e-10, [&](long l, const Batch& Z) { return dense_jacobian_jvp(F, l, Z); });
  // Jacobians by central differences of apply (about 1e-8 relative each).
  expect_matches_dense(F, Z0, 5, 10, 1e-6, [&](long l, const Batch& Z) { return dense_jacobian_fd(F, l, Z); });
  // The same map with LayerMap's finite-difference jvp in the matrix-free QR.
  const FdOnly G(F);
  expect_matches_dense(G, Z0, 5, 10, 1e-5, [&](long l, const Batch& Z) { return dense_jacobian_jvp(F, l, Z); });
}

TEST(DepthSpectra, RopeStepMatchesDenseProductOfJvpAndFiniteDifferenceJacobians) {
  rope::AttentionParams AP;
  AP.d = 4;
  AP.beta = 2.0;
  const rope::AttentionStep F(AP, 4, 0.3);
  const Batch Z0 = sphere_state(4, 4, 2);
  expect_matches_dense(F, Z0, 6, 10, 1e-10, [&](long l, const Batch& Z) { return dense_jacobian_jvp(F, l, Z); });
  expect_matches_dense(F, Z0, 6, 10, 1e-6, [&](long l, const Batch& Z) { return dense_jacobian_fd(F, l, Z); });
}

TEST(DepthSpectra, TopExponentsApproachLogSingularValueGrowth) {
  // (1/N) sum_{i<=j} log R_ii is the volume growth of a j-dimensional subspace: at most
  // (1/N) sum_{i<=j} log sigma_i(Phi) (exact), and equal to it up to O(1/N) for a generic start.
  rope::AttentionParams AP;
  AP.d = 4;
  AP.beta = 1.0;
  const rope::AttentionStep F(AP, 4, 0.5);
  const Batch Z0 = sphere_state(4, 4, 4);
  const int k = 4;
  const long N = 60;
  DepthSpectrumOptions o;
  o.k = k;
  o.depth = N;
  o.seed = 5;
  const DepthSpectrum S = depth_spectrum(F, Z0, o);
  const DenseCheck c = dense_check(F, Z0, k, N, o.seed, [&](long l, const Batch& Z) { return dense_jacobian_jvp(F, l, Z); });
  double qr = 0.0, sv = 0.0;
  for (int i = 0; i < k; ++i) {
    qr += S.mu[i];
    sv += c.log_sv[i] / static_cast<double>(N);
    EXPECT_LE(qr, sv + 1e-12) << "j = " << i + 1;
    EXPECT_NEAR(S.mu[i], c.log_sv[i] / static_cast<double>(N), 5.0 / static_cast<double>(N)) << "i = " << i;
  }
}

TEST(DepthSpectra, Mamba2MatchesDenseJacobiansOfTheDoubleStep) {
  using namespace mamba2;
  Config c;
  c.d_model = 16;
  c.n_layer = 3;
  c.vocab_size = 50;
  c.d_state = 4;
  c.headdim = 8;
  Model m = init_model(c, 7);
  const std::vector<std::int64_t> ids = draw_token_ids(50, 1, 3, 1);
  for (Update up : {Update::Residual, Update::Sphere}) {
    const MatF X0 = embed(m, ids, up);
    Model mm = m;
    auto sched = std::make_shared<const ListSchedule<Layer>>(share_layers(mm));
    const BlockMap F(c, Switches{}, sched, up, 0.5f);
    const int len = 3, k = 5;
    const long depth = 6;
    const Batch Z0{X0.cast<double>(), 1, len};
    const TangentStep step = [&](long l, const Batch&, const Batch& Zrep, const Tokens& V, Batch& Zn, Tokens& W) {
      Tokens Y;
      F.step_double(l, Zrep, V, Y, W);
      Zn = Batch{Y.topRows(len), 1, len};
    };
    DepthSpectrumOptions o;
    o.k = k;
    o.depth = depth;
    o.seed = 9;
    const DepthSpectrum S = depth_spectrum(F, Z0, o, step);
    // Dense: trajectory by step_double, Jacobian columns from T d JVPs at each state.
    const Eigen::Index n = static_cast<Eigen::Index>(len) * c.d_model;
    Tokens Q0 = initial_tangents(F, Z0, k, o.seed);
    MatrixXd M = Eigen::Map<const MatrixXd>(Q0.data(), n, k);
    Batch Z = Z0;
    for (long l = 1; l <= depth; ++l) {
      M = (dense_jacobian_jvp(F, l, Z) * M).eval();
      Tokens Y, dY;
      F.step_double(l, Z, Tokens::Zero(len, c.d_model), Y, dY);
      Z.Z = Y;
    }
    const Eigen::VectorXd want = log_r_diag(M);
    for (int i = 0; i < k; ++i) EXPECT_NEAR(S.mu[i] * depth, want[i], 1e-9 * depth) << (up == Update::Sphere ? "sphere " : "residual ") << i;
    EXPECT_EQ(S.dim, up == Update::Sphere ? len * (c.d_model - 1) : len * c.d_model);
    EXPECT_LT((S.final_state.Z - Z.Z).norm(), 1e-9 * Z.Z.norm());
  }
}

TEST(DepthSpectra, EulerStepOfAFieldMatchesFiniteDifferences) {
  // The step map of the RoPE flow (5) and of the SSM flow (5) through one retracted Euler step:
  // its exact jvp (field jvp + retraction derivative) against central differences of its apply.
  rope::AttentionParams AP;
  AP.d = 4;
  AP.beta = 1.5;
  const rope::AttentionField field(AP, 4);
  const EulerStepMap F(field, 0.2);
  EXPECT_TRUE(F.has_exact_jvp());
  EXPECT_TRUE(F.on_sphere());
  const Batch Z0 = sphere_state(4, 4, 6);
  expect_matches_dense(F, Z0, 5, 8, 1e-10, [&](long l, const Batch& Z) { return dense_jacobian_jvp(F, l, Z); });
  expect_matches_dense(F, Z0, 5, 8, 1e-6, [&](long l, const Batch& Z) { return dense_jacobian_fd(F, l, Z); });
  SsmOptions so;
  so.silu_bc = true;
  const SsmFlow sf(ssm_schedule(4, 5), so);
  const EulerStepMap G(sf, 0.5);
  expect_matches_dense(G, sphere_state(3, 4, 7), 4, 8, 1e-6, [&](long l, const Batch& Z) { return dense_jacobian_fd(G, l, Z); });
  EXPECT_THROW(EulerStepMap(field, 0.0), std::invalid_argument);
}

TEST(DepthSpectra, TopTwoDoNotDependOnK) {
  SsmOptions so;
  const SsmLayer ssm(ssm_schedule(5, 4), so);
  rope::AttentionParams AP;
  AP.d = 6;
  AP.beta = 1.5;
  const rope::AttentionStep rp(AP, 5, 0.2);
  for (const LayerMap* F : {static_cast<const LayerMap*>(&ssm), static_cast<const LayerMap*>(&rp)}) {
    const Batch Z0 = sphere_state(5, F == &ssm ? 5 : 6, 3);
    DepthSpectrumOptions o;
    o.depth = 40;
    o.burn_in = 10;
    o.k = 2;
    const DepthSpectrum a = depth_spectrum(*F, Z0, o);
    o.k = 4;
    const DepthSpectrum b = depth_spectrum(*F, Z0, o);
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(a.mu[i], b.mu[i], 1e-10) << i;
    EXPECT_LT((a.log_r - b.log_r.leftCols(2)).cwiseAbs().maxCoeff(), 1e-10);
  }
}

TEST(DepthSpectra, BitsDoNotDependOnThreadCount) {
  tokdyn::testing::ThreadCountGuard guard;
  rope::AttentionParams AP;
  AP.d = 8;
  AP.beta = 1.0;
  const rope::AttentionStep rp(AP, 48, 0.2);  // k T = 192 rows: the model's threaded paths
  SsmOptions so;
  so.silu_bc = true;
  const SsmLayer ssm(ssm_schedule(16, 16), so);
  const Batch Zr = sphere_state(48, 8, 1), Zs = sphere_state(24, 16, 2);
  // Mamba-2 "tiny" shapes, k T = 320 rows: the double step's projections are threaded tiles.
  using namespace mamba2;
  const Config c = Config::named("tiny");
  Model m = init_model(c, 2);
  const MatF X0 = embed(m, draw_token_ids(1000, 1, 40, 3), Update::Residual);
  const BlockMap bm(c, Switches{}, std::make_shared<const ListSchedule<Layer>>(share_layers(m)), Update::Residual);
  const TangentStep step = [&](long l, const Batch&, const Batch& Zrep, const Tokens& V, Batch& Zn, Tokens& W) {
    Tokens Y;
    bm.step_double(l, Zrep, V, Y, W);
    Zn = Batch{Y.topRows(40), 1, 40};
  };
  DepthSpectrumOptions o;
  o.k = 4;
  o.depth = 6;
  DepthSpectrumOptions om = o;
  om.k = 8;
  om.depth = 3;
  Mat ref_r, ref_s, ref_m;
  for (int t : {1, 2}) {
    tokdyn::testing::set_threads(t);
    const Mat r = depth_spectrum(rp, Zr, o).log_r, s = depth_spectrum(ssm, Zs, o).log_r;
    const Mat mm = depth_spectrum(bm, Batch{X0.cast<double>(), 1, 40}, om, step).log_r;
    if (t == 1) {
      ref_r = r;
      ref_s = s;
      ref_m = mm;
      continue;
    }
    EXPECT_EQ(r, ref_r) << "rope, threads " << t;
    EXPECT_EQ(s, ref_s) << "ssm, threads " << t;
    EXPECT_EQ(mm, ref_m) << "mamba2, threads " << t;
  }
}

TEST(DepthSpectra, QrStepFlipsSignsAndGuardsZeroDiagonal) {
  MatrixXd W(4, 3);
  W << -2, 0, 1,  //
      0, 0, 2,    //
      0, 0, 3,    //
      0, 0, 4;
  RowVec logs(3);
  qr_log_step(Eigen::Map<MatrixXd>(W.data(), 4, 3), logs);
  EXPECT_NEAR(logs[0], std::log(2.0), 1e-15);
  EXPECT_EQ(logs[1], -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isfinite(logs[2]));
  EXPECT_LT((W.transpose() * W - MatrixXd::Identity(3, 3)).norm(), 1e-14);
  EXPECT_EQ(W(0, 0), -1.0);  // column -2 e_1 = (-e_1) * 2: R_11 = 2 > 0, the sign sits in Q
  // A depth map with a zero direction: growth scale 0 is reported as mu = -inf, gamma = 0.
  Mat B = Mat::Zero(2, 2);
  B(0, 0) = 1.5;
  const LinearTokenMap F(B);
  DepthSpectrumOptions o;
  o.k = 2;
  o.depth = 3;
  o.burn_in = 1;  // after layer 1 the tangents are +-e_1, +-e_2
  const DepthSpectrum R = depth_spectrum(F, Batch{Tokens::Ones(1, 2), 1, 1}, o);
  EXPECT_NEAR(R.mu[0], std::log(1.5), 1e-14);
  EXPECT_EQ(R.mu[1], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(R.gamma[1], 0.0);
}

TEST(DepthSpectra, RefusesBadValues) {
  const rope::AttentionStep F(rope::AttentionParams{}, 3, 0.1);  // d = 2 on spheres: dimension 3
  const Batch Z0 = sphere_state(3, 2, 1);
  DepthSpectrumOptions o;
  o.depth = 5;
  o.k = 4;
  EXPECT_THROW(depth_spectrum(F, Z0, o), std::invalid_argument);  // k > T (d-1) = 3
  o.k = 3;
  EXPECT_NO_THROW(depth_spectrum(F, Z0, o));
  o.k = 0;
  EXPECT_THROW(depth_spectrum(F, Z0, o), std::invalid_argument);
  o.k = 2;
  o.burn_in = 5;
  EXPECT_THROW(depth_spectrum(F, Z0, o), std::invalid_argument);
  o.burn_in = 0;
  o.depth = 0;
  EXPECT_THROW(depth_spectrum(F, Z0, o), std::invalid_argument);
  o.depth = 5;
  Batch two{Z0.Z.replicate(2, 1), 2, 3};
  EXPECT_THROW(depth_spectrum(F, two, o), std::invalid_argument);
  Batch bad = Z0;
  bad.Z(0, 0) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(depth_spectrum(F, bad, o), std::invalid_argument);
  // A map that overflows: non-finite state (exit 4), naming the layer.
  const LinearTokenMap big(Mat::Identity(2, 2) * 1e200);
  try {
    depth_spectrum(big, Batch{Tokens::Ones(1, 2), 1, 1}, o);
    ADD_FAILURE() << "no exception";
  } catch (const NonFiniteError& e) {
    EXPECT_NE(std::string(e.what()).find("at layer 2"), std::string::npos) << e.what();
  }
}
