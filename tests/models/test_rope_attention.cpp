// RoPE self-attention on (S^{d-1})^n (spec rope-attention-dynamics.md §1, §2 T3.1, P6.4, §3.5,
// §4.1-4.4): rotation, scores, softmax floor and its sharpness witness, the flow (5), the
// normalised residual step (3), RK4 order, multi-head / causal / Q,K,V extensions, input
// validation and thread-count independence.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <numbers>
#include <string>

#include "thread_util.hpp"
#include "tokdyn/analysis/rope_sphere.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/linalg.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/engine/observers.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/sphere.hpp"
#include "tokdyn/core/constants.hpp"

using namespace tokdyn;
using namespace tokdyn::rope;
using tokdyn::testing::kThreadCounts;
using tokdyn::testing::set_threads;
using tokdyn::testing::ThreadCountGuard;

namespace {

using tokdyn::kPi;
AttentionParams random_params(Rng& rng, int n, int d, double beta) {
  AttentionParams P;
  P.d = d;
  P.beta = beta;
  P.positions.resize(static_cast<std::size_t>(n));
  for (auto& p : P.positions) p = rng.uniform(-5.0, 20.0);
  P.freqs.resize(static_cast<std::size_t>(d / 2));
  for (auto& w : P.freqs) w = rng.uniform(-3.0, 8.0);
  return P;
}

Tokens field(const AttentionParams& P, const Tokens& X) {
  AttentionField F(P, static_cast<int>(X.rows()));
  Batch B{X, 1, static_cast<int>(X.rows())};
  Tokens dZ;
  F.eval(0.0, B, dZ);
  return dZ;
}

/// Explicit R_p (d x d) for one position, from the plane frequencies.
Mat rotation_matrix(const std::vector<double>& w, double p, int d) {
  Mat R = Mat::Zero(d, d);
  for (int g = 0; g < d / 2; ++g) {
    const double c = std::cos(w[static_cast<std::size_t>(g)] * p), s = std::sin(w[static_cast<std::size_t>(g)] * p);
    R(2 * g, 2 * g) = c;
    R(2 * g, 2 * g + 1) = -s;
    R(2 * g + 1, 2 * g) = s;
    R(2 * g + 1, 2 * g + 1) = c;
  }
  return R;
}

}  // namespace

TEST(RopeAttention, StandardFrequenciesAndRotationConvention) {
  const auto w4 = standard_frequencies(4);
  ASSERT_EQ(w4.size(), 2u);
  EXPECT_EQ(w4[0], 1.0);
  EXPECT_NEAR(w4[1], 0.01, 1e-17);
  const auto w6 = standard_frequencies(6);
  EXPECT_NEAR(w6[1], 0.046415888336127795, 1e-16);
  EXPECT_NEAR(w6[2], 0.0021544346900318843, 1e-17);
  const auto w8 = standard_frequencies(8);
  EXPECT_NEAR(w8[3], 0.001, 1e-18);
  EXPECT_NEAR(standard_frequencies(4, 100.0, 1)[0], 0.1, 1e-16);  // base and offset
  // Plane l = (2l, 2l+1), counter-clockwise by omega_l p.
  AttentionParams P;
  P.d = 4;
  P.freqs = {1.0, 2.0};
  P.positions = {0.0, kPi / 2};
  Tokens X(2, 4), Y;
  X << 1, 0, 1, 0, 1, 0, 1, 0;
  rotate(P, X, Y);
  EXPECT_NEAR((Y.row(0) - X.row(0)).norm(), 0.0, 0.0);  // R_0 = I
  EXPECT_NEAR(Y(1, 0), 0.0, 1e-16);
  EXPECT_NEAR(Y(1, 1), 1.0, 1e-16);   // (1,0) -> (0,1) at angle pi/2
  EXPECT_NEAR(Y(1, 2), -1.0, 1e-15);  // angle pi
  EXPECT_NEAR(Y(1, 3), 0.0, 1e-15);
  // R_p^T R_q = R_{q-p}, orthogonality.
  Rng rng(11, {1});
  const Tokens Z = rng.sphere_tokens(2, 4);
  rotate(P, Z, Y);
  EXPECT_NEAR(Y.row(0).norm(), 1.0, 1e-15);
  EXPECT_NEAR(Y.row(1).norm(), 1.0, 1e-15);
  // Without RoPE, rotate is the identity and odd d is allowed.
  AttentionParams Pn;
  Pn.d = 3;
  Pn.rope = false;
  const Tokens Z3 = rng.sphere_tokens(4, 3);
  rotate(Pn, Z3, Y);
  EXPECT_EQ(Y, Z3);
}

TEST(RopeAttention, SoftmaxFloor) {
  for (int n : {2, 3, 10, 1000}) EXPECT_DOUBLE_EQ(softmax_floor(0.0, n), 1.0 / n);
  EXPECT_NEAR(softmax_floor(16.0, 2) / 1.2664165549094015e-14 - 1.0, 0.0, 1e-14);
  for (double beta : {0.01, 0.5, 1.0, 4.0, 16.0})
    for (int n : {2, 5, 64}) {
      const double a = softmax_floor(beta, n);
      EXPECT_GT(a, std::exp(-2.0 * beta) / n);
      EXPECT_NEAR(a * (1.0 + (n - 1) * std::exp(2.0 * beta)), 1.0, 1e-13);
    }
  for (double beta : {400.0, 1e4, 1e6, 1e300}) {
    const double a = softmax_floor(beta, 7);
    EXPECT_TRUE(std::isfinite(a));
    EXPECT_EQ(a, 0.0);  // underflow, never inf/nan
  }
}

// T3.1 structure on random states (direct d = 2 loops, small Eigen products, and the BLAS GEMM).
TEST(RopeAttention, T31StructureOnRandomStates) {
  Rng rng(31, {0});
  struct Case { int n, d; double beta; };
  for (const Case& cs : {Case{2, 2, 1.0}, Case{7, 2, 3.0}, Case{5, 4, 0.0}, Case{9, 6, 2.5}, Case{12, 8, 16.0},
                         Case{64, 128, 1.5}, Case{300, 2, 4.0}}) {
    const AttentionParams P = random_params(rng, cs.n, cs.d, cs.beta);
    const Tokens X = rng.sphere_tokens(cs.n, cs.d);
    Mat A, S;
    attention(P, X, A, &S);
    const double a = softmax_floor(cs.beta, cs.n);
    EXPECT_EQ(S, S.transpose()) << "scores exactly symmetric";
    EXPECT_LE(S.cwiseAbs().maxCoeff(), 1.0 + 1e-14);
    // Scores against the explicit rotation matrices.
    const auto w = P.plane_frequencies();
    for (int i = 0; i < std::min(cs.n, 6); ++i)
      for (int j = 0; j < std::min(cs.n, 6); ++j) {
        const double s = (rotation_matrix(w, P.positions[i], cs.d) * X.row(i).transpose())
                             .dot(rotation_matrix(w, P.positions[j], cs.d) * X.row(j).transpose());
        EXPECT_NEAR(S(i, j), s, 1e-14);
      }
    const Mat W = (cs.beta * (S.array() - 1.0)).exp().matrix();  // globally scaled kernel
    EXPECT_EQ(W, W.transpose());
    const Vec Z = W.rowwise().sum();
    const Vec pi = Z / Z.sum();
    EXPECT_LE((A.rowwise().sum().array() - 1.0).abs().maxCoeff(), 1e-14);
    double db = 0.0, dbscale = 0.0;
    for (int i = 0; i < cs.n; ++i)
      for (int j = 0; j < cs.n; ++j) {
        db = std::max(db, std::abs(pi[i] * A(i, j) - pi[j] * A(j, i)));
        dbscale = std::max(dbscale, pi[i] * A(i, j));
      }
    EXPECT_LE(db, 4e-15 * dbscale) << "detailed balance, n = " << cs.n;
    EXPECT_GE(A.minCoeff(), a * (1.0 - 1e-12));
    const Tokens F = field(P, X);
    for (int i = 0; i < cs.n; ++i) EXPECT_LE(std::abs(X.row(i).dot(F.row(i))), 2e-15);
    if (cs.beta > 0.0 && cs.n > 2) {  // (n = 2 on the sphere: Z_1 = Z_2, A is symmetric)
      EXPECT_GT((A - A.transpose()).cwiseAbs().maxCoeff(), 1e-9) << "A is not symmetric";
    }
  }
}

// T3.1 sharpness: A_ij = a_{beta,n} at the witness, without overflow at beta = 16, 1e4, 1e6.
TEST(RopeAttention, T31SharpnessWitness) {
  Rng rng(32, {0});
  for (double beta : {0.0, 1.0, 4.0, 16.0, 1e4, 1e6})
    for (int d : {2, 4, 8}) {
      const int n = 5, i = 1, j = 3;
      const AttentionParams P = random_params(rng, n, d, beta);
      const RowVec u = rng.sphere_tokens(1, d).row(0);
      const Tokens X = sharpness_witness(P, n, j, u);
      Mat A, S;
      attention(P, X, A, &S);
      EXPECT_TRUE(A.allFinite());
      EXPECT_NEAR(S(i, j), -1.0, 1e-15);
      EXPECT_NEAR(S(i, 0), 1.0, 1e-15);
      EXPECT_LE((A.rowwise().sum().array() - 1.0).abs().maxCoeff(), 1e-14);
      const double a = softmax_floor(beta, n);
      if (beta <= 16.0) {
        EXPECT_NEAR(A(i, j) / a - 1.0, 0.0, 1e-12) << "beta " << beta << " d " << d;
      } else {
        // a_{beta,n} underflows; A_ij is 0 or a subnormal remnant, depending on FMA contraction.
        EXPECT_LE(A(i, j), 1e-300);
        EXPECT_GE(A(i, j), 0.0);
      }
      EXPECT_GE(A.minCoeff(), a * (1.0 - 1e-12));
    }
}

// P6.4: bipodal states x_i = sigma_i u are stationary, for any beta, positions and frequencies.
TEST(RopeAttention, P64BipodalStationary) {
  Rng rng(64, {0});
  for (int trial = 0; trial < 12; ++trial) {
    const int n = 2 + trial % 5, d = 2 * (1 + trial % 4);
    const AttentionParams P = random_params(rng, n, d, rng.uniform(0.0, 16.0));
    const RowVec u = rng.sphere_tokens(1, d).row(0);
    Tokens X(n, d);
    for (int i = 0; i < n; ++i) X.row(i) = (i == 0 ? 1.0 : i == 1 ? -1.0 : (rng.uniform() < 0.5 ? -1.0 : 1.0)) * u;
    EXPECT_LE(field(P, X).cwiseAbs().maxCoeff(), 1e-15);
    AttentionField F(P, n);
    Batch B{X, 1, n};
    Rk4Options o;
    o.h = 0.05;
    integrate_rk4(F, B, 0.0, 5.0, o);
    EXPECT_LE((B.Z - X).cwiseAbs().maxCoeff(), 1e-15);
  }
}

// §3.5 / App. D.5: the step (3) is a first-order discretisation of the flow (5).
TEST(RopeAttention, DiscreteStepConvergesToFlow) {
  Rng rng(35, {0});
  AttentionParams P;
  P.d = 4;
  P.beta = 1.0;
  const Tokens X = rng.sphere_tokens(6, 4);
  const Tokens F = field(P, X);
  double disc[2];
  const double hs[2] = {2e-4, 1e-4};
  for (int k = 0; k < 2; ++k) {
    AttentionStep S(P, 6, hs[k]);
    Batch B{X, 1, 6};
    S.apply(1, B);
    disc[k] = ((B.Z - X) / hs[k] - F).cwiseAbs().maxCoeff();
    EXPECT_LE(max_norm_deviation(B.Z), 1e-15);
  }
  EXPECT_GT(disc[0] / disc[1], 1.9);
  EXPECT_LT(disc[1], 2e-4);
  EXPECT_GT(disc[1], 0.0);
}

// App. D.1: retracted RK4 at h = 0.1, 0.05, 0.025 against a Fehlberg 7(8) reference
// (rtol 1e-13, atol 1e-15; substitute for DOP853) on a sphere state: fourth order.
TEST(RopeAttention, Rk4FourthOrderAgainstFehlberg78) {
  Rng rng(78, {0});
  AttentionParams P;
  P.d = 4;
  P.beta = 1.0;
  const int n = 6;
  const Tokens X = rng.sphere_tokens(n, 4);
  AttentionField F(P, n);
  const double T = 2.0;
  Batch ref{X, 1, n};
  AdaptiveOptions ao;
  ao.method = "fehlberg78";
  ao.rtol = 1e-13;
  ao.atol = 1e-15;
  integrate_adaptive(F, ref, 0.0, T, ao);
  double err[3];
  const double hs[3] = {0.1, 0.05, 0.025};
  for (int k = 0; k < 3; ++k) {
    Batch B{X, 1, n};
    Rk4Options o;
    o.h = hs[k];
    integrate_rk4(F, B, 0.0, T, o);
    err[k] = (B.Z - ref.Z).cwiseAbs().maxCoeff();
    EXPECT_LE(max_norm_deviation(B.Z), 2e-15);
  }
  EXPECT_GT(err[0] / err[1], 14.0) << err[0] << " " << err[1];
  EXPECT_GT(err[1] / err[2], 14.0) << err[1] << " " << err[2];
}

// Multi-head: head h attends with its coordinate block and the block's planes.
TEST(RopeAttention, MultiHeadBlocks) {
  Rng rng(2, {0});
  const int n = 9, d = 8;
  AttentionParams P = random_params(rng, n, d, 2.0);
  P.heads = 2;
  const Tokens X = rng.sphere_tokens(n, d);
  Mat A;
  attention(P, X, A);
  ASSERT_EQ(A.rows(), 2 * n);
  Tokens Y;
  attention_output(P, X, Y);
  for (int h = 0; h < 2; ++h) {
    AttentionParams Ph;
    Ph.d = 4;
    Ph.beta = P.beta;
    Ph.positions = P.positions;
    Ph.freqs = {P.freqs[2 * h], P.freqs[2 * h + 1]};
    const Tokens Xh = X.middleCols(4 * h, 4);
    Mat Ah;
    attention(Ph, Xh, Ah);
    EXPECT_LE((A.middleRows(h * n, n) - Ah).cwiseAbs().maxCoeff(), 1e-15);
    EXPECT_LE((Y.middleCols(4 * h, 4) - Ah * Xh).cwiseAbs().maxCoeff(), 1e-14);
  }
  // Per-head frequencies (d/(2 heads) entries) are shared by every head; default = standard(dh).
  AttentionParams Pd;
  Pd.d = d;
  Pd.heads = 2;
  EXPECT_EQ(Pd.plane_frequencies(), (std::vector<double>{1.0, 0.01, 1.0, 0.01}));
  Pd.freqs = {0.3, 0.7};
  EXPECT_EQ(Pd.plane_frequencies(), (std::vector<double>{0.3, 0.7, 0.3, 0.7}));
  const Tokens F = field(P, X);
  for (int i = 0; i < n; ++i) EXPECT_LE(std::abs(X.row(i).dot(F.row(i))), 1e-15);
}

// Causal mask: token i is unaffected by tokens j > i, bit for bit (direct and GEMM paths).
TEST(RopeAttention, CausalMaskIsBitwise) {
  Rng rng(3, {0});
  for (auto [n, d, heads] : {std::tuple{8, 4, 1}, std::tuple{10, 2, 1}, std::tuple{96, 64, 1}, std::tuple{80, 64, 2}}) {
    AttentionParams P = random_params(rng, n, d, 1.5);
    P.freqs.clear();
    P.causal = true;
    P.heads = heads;
    const Tokens X = rng.sphere_tokens(n, d);
    Mat A;
    attention(P, X, A);
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j) ASSERT_EQ(A(h * n + i, j), 0.0);
    EXPECT_LE((A.rowwise().sum().array() - 1.0).abs().maxCoeff(), 1e-14);
    EXPECT_EQ(A(0, 0), 1.0);
    const Tokens F0 = field(P, X);
    const int cut = n / 2;
    Tokens X2 = X;
    X2.bottomRows(n - cut) = rng.sphere_tokens(n - cut, d);
    const Tokens F1 = field(P, X2);
    EXPECT_EQ(F0.topRows(cut), F1.topRows(cut)) << "n " << n;
    EXPECT_NE(F0.bottomRows(n - cut), F1.bottomRows(n - cut));
  }
}

// Non-identity Q, K, V: s_ij = <R_{p_i} Q x_i, R_{p_j} K x_j>, y_i = sum_j A_ij V x_j.
TEST(RopeAttention, QueryKeyValueMatrices) {
  Rng rng(4, {0});
  for (auto [n, d] : {std::pair{6, 4}, std::pair{40, 96}}) {
    AttentionParams P = random_params(rng, n, d, 0.7);
    P.Q.resize(d, d);
    P.K.resize(d, d);
    P.V.resize(d, d);
    rng.fill_normal(P.Q, 1.0 / std::sqrt(d));
    rng.fill_normal(P.K, 1.0 / std::sqrt(d));
    rng.fill_normal(P.V, 1.0 / std::sqrt(d));
    const Tokens X = rng.sphere_tokens(n, d);
    Mat A, S;
    attention(P, X, A, &S);
    const auto w = P.plane_frequencies();
    Mat q(n, d), k(n, d);
    for (int i = 0; i < n; ++i) {
      const Mat R = rotation_matrix(w, P.positions[i], d);
      q.row(i) = (R * (P.Q * X.row(i).transpose())).transpose();
      k.row(i) = (R * (P.K * X.row(i).transpose())).transpose();
    }
    Mat Sref(n, n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) Sref(i, j) = q.row(i).dot(k.row(j));
    EXPECT_LE((S - Sref).cwiseAbs().maxCoeff(), 1e-13);
    Mat Aref(n, n);
    for (int i = 0; i < n; ++i) {
      const RowVec e = (P.beta * (Sref.row(i).array() - Sref.row(i).maxCoeff())).exp().matrix();
      Aref.row(i) = e / e.sum();
    }
    EXPECT_LE((A - Aref).cwiseAbs().maxCoeff(), 1e-14);
    const Tokens Yref = Aref * X * P.V.transpose();
    Tokens Fref(n, d);
    for (int i = 0; i < n; ++i) Fref.row(i) = Yref.row(i) - X.row(i).dot(Yref.row(i)) * X.row(i);
    EXPECT_LE((field(P, X) - Fref).cwiseAbs().maxCoeff(), 1e-13);
  }
}

// Every validation: std::invalid_argument (InputError, exit 2, once the parameter layer reports it), one line, naming the input.
TEST(RopeAttention, BadInputIsOneLineInputError) {
  auto expect_bad = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no InputError for " << needle;
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      EXPECT_NE(m.find(needle), std::string::npos) << "message '" << m << "' should mention " << needle;
    }
  };
  auto with = [](const std::function<void(AttentionParams&)>& edit, int n = 4) {
    return [edit, n]() {
      AttentionParams P;
      P.d = 4;
      edit(P);
      P.validate(n, "test");
    };
  };
  expect_bad(with([](AttentionParams& P) { P.d = 3; }), "d = 3");
  expect_bad(with([](AttentionParams& P) { P.d = 0; P.rope = false; }), "d = 0");
  expect_bad(with([](AttentionParams& P) { P.d = 6; P.heads = 2; }), "head size");
  expect_bad(with([](AttentionParams& P) { P.heads = 3; }), "heads = 3");
  expect_bad(with([](AttentionParams& P) { P.heads = 0; }), "heads = 0");
  expect_bad(with([](AttentionParams&) {}, 1), "n = 1");
  expect_bad(with([](AttentionParams& P) { P.beta = -1.0; }), "beta");
  expect_bad(with([](AttentionParams& P) { P.beta = std::nan(""); }), "beta");
  expect_bad(with([](AttentionParams& P) { P.beta = INFINITY; }), "beta");
  expect_bad(with([](AttentionParams& P) { P.positions = {0, 1, 2}; }), "positions");
  expect_bad(with([](AttentionParams& P) { P.positions = {0, 1, NAN, 3}; }), "positions");
  expect_bad(with([](AttentionParams& P) { P.freqs = {1, 2, 3}; }), "freqs");
  expect_bad(with([](AttentionParams& P) { P.freqs = {1, INFINITY}; }), "freqs");
  expect_bad(with([](AttentionParams& P) { P.Q = Mat::Identity(3, 3); }), "Q");
  expect_bad(with([](AttentionParams& P) { P.K = Mat::Identity(4, 5); }), "K");
  expect_bad(with([](AttentionParams& P) { P.V = Mat::Identity(2, 2); }), "V");
  expect_bad(with([](AttentionParams& P) { P.V = Mat::Constant(4, 4, NAN); }), "V");
  expect_bad([] { softmax_floor(-0.5, 3); }, "beta");
  expect_bad([] { softmax_floor(1.0, 1); }, "n = 1");
  expect_bad([] { standard_frequencies(5); }, "d = 5");
  expect_bad([] { AttentionParams P; AttentionField F(P, 1); }, "n = 1");
  expect_bad([] { AttentionParams P; AttentionStep S(P, 3, 0.0); }, "h = 0");
  expect_bad([] {
    AttentionParams P;
    AttentionField F(P, 3);
    Batch B{Tokens::Zero(4, 2), 1, 4};
    Tokens dZ;
    F.eval(0.0, B, dZ);
  }, "tokens");
  expect_bad([] {
    AttentionParams P;
    Mat A;
    attention(P, Tokens::Zero(3, 4), A);
  }, "coordinates");
  // rope = false accepts odd d.
  AttentionParams P;
  P.d = 3;
  P.rope = false;
  EXPECT_NO_THROW(P.validate(4, "test"));
}

// The same bits on 1, 2, 3 and 4 threads: parallel over runs, row-parallel heads, the blocked
// GEMM with several tiles spread over threads (full and upper-triangle scores, Q/K/V maps).
TEST(RopeAttention, SameBitsOnOneToFourThreads) {
  ThreadCountGuard guard;
  Rng rng(5, {0});
  struct Case {
    int runs, n, d, heads;
    bool qkv, causal;
  };
  for (const Case& cs : {Case{64, 16, 2, 1, false, false}, Case{3, 128, 64, 1, false, false}, Case{1, 512, 2, 1, false, false},
                         Case{1, 200, 96, 1, false, false}, Case{2, 300, 8, 1, false, false}, Case{1, 400, 64, 2, true, true}}) {
    AttentionParams P;
    P.d = cs.d;
    P.beta = 2.0;
    P.heads = cs.heads;
    P.causal = cs.causal;
    if (cs.qkv) {
      for (Mat* M : {&P.Q, &P.K, &P.V}) {
        M->resize(cs.d, cs.d);
        rng.fill_normal(*M, 1.0 / std::sqrt(static_cast<double>(cs.d)));
      }
    }
    const int dh = cs.d / cs.heads;
    if (cs.runs == 1 && dh > 2) {
      // One run: the products are the blocked GEMM's several tiles, spread over threads.
      const GemmTiling t = gemm_tiling(cs.n, cs.n, dh);
      EXPECT_TRUE(t.parallel && t.tiles() > 1) << "n " << cs.n << " d " << cs.d;
    }
    Batch B{Tokens(cs.runs * cs.n, cs.d), cs.runs, cs.n};
    for (int r = 0; r < cs.runs; ++r) B.run(r) = rng.sphere_tokens(cs.n, cs.d);
    AttentionField F(P, cs.n);
    AttentionStep S(P, cs.n, 0.1);
    Tokens d1;
    Batch s1 = B;
    set_threads(1);
    F.eval(0.0, B, d1);
    S.apply(1, s1);
    for (int th : kThreadCounts) {
      Tokens d2;
      Batch s2 = B;
      set_threads(th);
      F.eval(0.0, B, d2);
      S.apply(1, s2);
      EXPECT_EQ(d1, d2) << th << " threads, runs " << cs.runs << " n " << cs.n << " d " << cs.d;
      EXPECT_EQ(s1.Z, s2.Z) << th << " threads";
      // And run-by-run equals the batch.
      Tokens one;
      Batch b0{Tokens(B.run(cs.runs - 1)), 1, cs.n};
      F.eval(0.0, b0, one);
      EXPECT_EQ(one, d2.bottomRows(cs.n)) << th << " threads";
      EXPECT_EQ(omp_get_max_threads(), th) << "the caller's thread count is left alone";
    }
  }
}

// The step's tap "attention" (dynamics.hpp TapObserver): [runs, heads, n, n] at the state entering
// layer k, equal to attention() of each run's tokens (rows sum to 1);
// watching leaves the step's bits unchanged.
TEST(RopeAttention, StepAttentionTapHandsEveryRunAndHead) {
  AttentionParams P;
  P.d = 4;
  P.heads = 2;
  P.beta = 1.5;
  AttentionStep S(P, 5, 0.2), plain(P, 5, 0.2);
  Batch Z{Tokens(10, 4), 2, 5};
  for (int r = 0; r < 2; ++r) {
    Rng rng(7, {static_cast<std::uint64_t>(r)});
    Z.run(r) = rng.sphere_tokens(5, 4);
  }
  Batch Zp = Z;
  std::vector<long> seen;
  std::vector<double> got;
  std::vector<std::size_t> shape;
  Batch entering;
  CallbackTapObserver obs("attention", [&](long k, const double* data, const std::vector<std::size_t>& s) {
    seen.push_back(k);
    if (k != 2) return;
    shape = s;
    got.assign(data, data + s[0] * s[1] * s[2] * s[3]);
  });
  S.watch(&obs);
  S.apply(1, Z);
  entering = Z;
  S.apply(2, Z);
  S.apply(3, Z);
  ASSERT_EQ(seen, (std::vector<long>{1, 2, 3}));
  ASSERT_EQ(shape, (std::vector<std::size_t>{2, 2, 5, 5}));
  for (int r = 0; r < 2; ++r) {
    Mat A;
    attention(P, entering.run(r), A);  // heads*n x n
    for (int i = 0; i < 10; ++i) {
      double sum = 0;
      for (int j = 0; j < 5; ++j) {
        EXPECT_EQ(got[static_cast<std::size_t>((r * 10 + i) * 5 + j)], A(i, j));
        sum += A(i, j);
      }
      EXPECT_NEAR(sum, 1.0, 1e-14);
    }
  }
  for (long k = 1; k <= 3; ++k) plain.apply(k, Zp);
  EXPECT_EQ(Zp.Z, Z.Z);
}
