// The hierarchical model (C1)-(C2), eq. (11) of the coupling paper (P0 checks of §3's C1, C2 rows and
// R4's block version): attention mass outside the block is exactly 0; the injection is the same vector
// for every token of a block; at rho = 0 the output is the block-local Transformer's, bit for bit;
// H_P is invariant at every layer, each block following the reduced map plus rho psi(ŷ_{k-1}); the
// exact JVP of the coupled (x, ŷ) system against central differences for every compression, injection,
// refresh mode and loop; the refresh semantics; bad values refused. The preset coupling-gate-intervention
// (E3, Prop 11): every check passes at small size; bad input exits 2 with one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "test_util.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/models/hierarchical/hierarchical.hpp"
#include "tokdyn/core/rng.hpp"

using namespace tokdyn;
using namespace tokdyn::hier;

namespace {

tf::Transformer block_model(int d, int P, int L, std::uint64_t seed, tf::Norm norm = tf::Norm::RMS) {
  tf::Config c;
  c.d = d;
  c.d_ff = 2 * d;
  c.mask = tf::Mask::BlockLocal;
  c.block = P;
  c.norm = norm;
  std::vector<tf::LayerWeights> w;
  for (int r = 0; r < L; ++r) w.push_back(tf::random_weights(c, r, 1.0, 0.3, seed));
  return tf::Transformer(c, w);
}

SlowPath slow(int d, int P, double rho, PsiKind psi = PsiKind::TanhMlp) {
  SlowPath s;
  s.P = P;
  s.rho = rho;
  s.psi = make_injection(psi, d, 5, 1.0, 7);
  return s;
}

Mat random_tokens(int rows, int d, std::uint64_t id) {
  Mat X(rows, d);
  Rng(11, {id}).fill_normal(X, 1.0);
  return X;
}

}  // namespace

TEST(CouplingHierarchical, C1AttentionMassOutsideTheBlockIsZero) {
  const int T = 10, P = 4, d = 4;  // K = 3, the last block partial (2 tokens)
  const HierarchicalModel m(block_model(d, P, 2, 1), slow(d, P, 0.5), T);
  Batch Z = m.initial_state(random_tokens(T, d, 1));
  for (long k = 1; k <= 2; ++k) {
    Batch X;
    X.len = T;
    X.Z = m.token_rows(Z);
    const Mat a = m.transformer().attention(k, X).at(0);
    for (int t = 0; t < T; ++t) {
      double inside = 0.0;
      for (int s = 0; s < T; ++s) {
        if (s / P != t / P || s > t) EXPECT_EQ(a(t, s), 0.0) << t << "," << s;
        else inside += a(t, s);
      }
      EXPECT_NEAR(inside, 1.0, 1e-15);
    }
    m.apply(k, Z);
  }
}

TEST(CouplingHierarchical, C2InjectionIsConstantWithinEachBlock) {
  const int T = 10, P = 4, d = 4;
  for (Loop loop : {Loop::Chain, Loop::SelfLoop}) {
    SlowPath s = slow(d, P, 0.7);
    s.loop = loop;
    s.y0 = Vec::LinSpaced(d, -1.0, 1.0);
    const HierarchicalModel m(block_model(d, P, 1, 2), s, T);
    const Batch Z = m.initial_state(random_tokens(T, d, 2));
    const Mat add = m.injection(1, Z.run(0));
    const Mat y = m.pool(random_tokens(T, d, 2));
    for (int t = 0; t < T; ++t) EXPECT_EQ(add.row(t), add.row((t / P) * P)) << t;
    // Chain: block 1 reads ŷ_0, block k reads ŷ_{k-1}; self-loop: block k reads ŷ_k (eq. (15)).
    const Vec want0 = loop == Loop::Chain ? Vec(0.7 * s.psi(s.y0)) : Vec(0.7 * s.psi(y.row(0).transpose()));
    EXPECT_LT((add.row(0).transpose() - want0).norm(), 1e-15);
    const Vec want2 = 0.7 * s.psi(y.row(loop == Loop::Chain ? 1 : 2).transpose());
    EXPECT_LT((add.row(8).transpose() - want2).norm(), 1e-15);
  }
}

TEST(CouplingHierarchical, RhoZeroIsTheBlockLocalTransformerBitForBit) {
  const int T = 12, P = 4, d = 5, L = 4;
  const tf::Transformer plain = block_model(d, P, L, 3);
  for (PiKind pk : {PiKind::Mean, PiKind::Stride, PiKind::TopK}) {
    SlowPath s = slow(d, P, 0.0, PsiKind::Affine);
    s.pi.kind = pk;
    s.pi.topk = 2;
    const HierarchicalModel m(block_model(d, P, L, 3), s, T);
    const Mat X0 = random_tokens(T, d, 3);
    Batch Z = m.initial_state(X0);
    Batch X;
    X.len = T;
    X.Z = X0;
    for (long k = 1; k <= L; ++k) {
      m.apply(k, Z);
      plain.apply(k, X);
      EXPECT_TRUE(m.token_rows(Z) == X.Z) << "layer " << k;
    }
  }
}

TEST(CouplingHierarchical, BlockwiseHomogeneousStatesStayInHP) {
  const int T = 12, P = 4, d = 4, L = 5, K = 3;
  for (Refresh rf : {Refresh::SampleHold, Refresh::Relaxation}) {
    SlowPath s = slow(d, P, 0.4);
    s.refresh = rf;
    s.L_r = 2;
    const HierarchicalModel m(block_model(d, P, L, 4), s, T);
    const Mat Y = random_tokens(K, d, 4);
    Mat X0(T, d);
    for (int t = 0; t < T; ++t) X0.row(t) = Y.row(t / P);
    Batch Z = m.initial_state(X0);
    for (long k = 1; k <= L; ++k) {
      const Mat y = m.held(k, Z.run(0));
      const Mat before = m.token_rows(Z);
      m.apply(k, Z);
      const Mat X = m.token_rows(Z);
      for (int t = 0; t < T; ++t)
        EXPECT_LT((X.row(t) - X.row((t / P) * P)).norm(), 1e-13 * X.norm()) << "layer " << k << " token " << t;
      // Each block follows the reduced map (Lemma 2) plus rho psi(ŷ_{k-1}).
      for (int b = 0; b < K; ++b) {
        const Vec src = b == 0 ? Vec(Vec::Zero(d)) : Vec(y.row(b - 1).transpose());
        const Vec want = m.transformer().reduced_map(k, before.row(b * P).transpose()) + 0.4 * s.psi(src);
        EXPECT_LT((X.row(b * P).transpose() - want).norm(), 1e-12 * want.norm()) << "layer " << k << " block " << b;
      }
    }
  }
}

TEST(CouplingHierarchical, RefreshSemantics) {
  const int T = 8, P = 4, d = 3;
  SlowPath s = slow(d, P, 0.3);
  s.L_r = 3;
  const HierarchicalModel m(block_model(d, P, 7, 5), s, T);
  EXPECT_TRUE(m.refreshes(1));   // depth 0
  EXPECT_FALSE(m.refreshes(2));
  EXPECT_TRUE(m.refreshes(4));   // depth 3
  SlowPath inf = s;
  inf.L_r = 0;                   // L_r = infinity: held from depth 0 for the whole pass
  const HierarchicalModel mi(block_model(d, P, 7, 5), inf, T);
  EXPECT_TRUE(mi.refreshes(1));
  for (long k = 2; k <= 7; ++k) EXPECT_FALSE(mi.refreshes(k));
  Batch Z = mi.initial_state(random_tokens(T, d, 5));
  const Mat y0 = mi.summary_rows(Z);
  for (long k = 1; k <= 7; ++k) mi.apply(k, Z);
  EXPECT_TRUE(mi.summary_rows(Z) == y0);
  // Continuous relaxation with epsilon = 1/L_r: one Euler step of dŷ/dl = epsilon (Pi(x) - ŷ).
  SlowPath rx = s;
  rx.refresh = Refresh::Relaxation;
  const HierarchicalModel mr(block_model(d, P, 7, 5), rx, T);
  Batch R = mr.initial_state(random_tokens(T, d, 5));
  R.run(0).bottomRows(2).setConstant(0.25);
  const Mat pooled = mr.pool(mr.token_rows(R));
  const Mat y = mr.summary_rows(R);
  mr.apply(1, R);
  EXPECT_LT((mr.summary_rows(R) - (y + (pooled - y) / 3.0)).norm(), 1e-15);
}

TEST(CouplingHierarchical, ExactJvpMatchesCentralDifferences) {
  const int T = 7, P = 3, d = 4;  // K = 3, last block of one token
  struct Case {
    PiKind pi;
    PsiKind psi;
    Refresh rf;
    Pooled pool;
    Loop loop;
    int L_r;
    Site site;
  };
  const Case cases[] = {{PiKind::Mean, PsiKind::TanhMlp, Refresh::SampleHold, Pooled::Normalised, Loop::Chain, 1, Site::InsideNorm},
                        {PiKind::Multi, PsiKind::Affine, Refresh::Relaxation, Pooled::Raw, Loop::Chain, 2, Site::InsideNorm},
                        {PiKind::Mean, PsiKind::TanhMlp, Refresh::SampleHold, Pooled::Normalised, Loop::Chain, 1, Site::Additive},
                        {PiKind::Stride, PsiKind::Affine, Refresh::SampleHold, Pooled::Raw, Loop::SelfLoop, 2, Site::Additive},
                        {PiKind::Head, PsiKind::Linear, Refresh::Relaxation, Pooled::Normalised, Loop::Chain, 2, Site::Additive},
                        {PiKind::TopK, PsiKind::Identity, Refresh::Relaxation, Pooled::Raw, Loop::SelfLoop, 3, Site::Additive},
                        {PiKind::Mean, PsiKind::TanhMlp, Refresh::SampleHold, Pooled::Normalised, Loop::Chain, 2, Site::Additive}};
  for (const Case& c : cases) {
    SlowPath s = slow(d, P, 0.6, c.psi);
    s.pi.kind = c.pi;
    s.pi.topk = 2;
    s.refresh = c.rf;
    s.pooled = c.pool;
    s.loop = c.loop;
    s.L_r = c.L_r;
    s.site = c.site;
    const int Pm = c.pi == PiKind::Multi ? 4 : P, Tm = c.pi == PiKind::Multi ? 8 : T;  // multi-level needs whole blocks
    s.P = Pm;
    s.pi.levels = {2, 2};
    s.pi.level_kinds = {PiKind::Head, PiKind::Mean};
    const HierarchicalModel m(block_model(d, Pm, 3, 6, tf::Norm::Layer), s, Tm);
    const int K = m.blocks();
    Batch Z = m.initial_state(random_tokens(Tm, d, 6));
    Z.run(0).bottomRows(K) += random_tokens(K, d, 7);  // held summaries off the pool
    const Mat V = random_tokens(Tm + K, d, 8);
    for (long k : {1L, 2L}) {  // a refresh layer and (for L_r > 1) a hold layer
      Tokens J;
      m.jvp(k, Z, V, J);
      const double h = 1e-5;
      Batch Zp = Z, Zm = Z;
      Zp.Z += h * V;
      Zm.Z -= h * V;
      m.apply(k, Zp);
      m.apply(k, Zm);
      const Mat fd = (Zp.Z - Zm.Z) / (2 * h);
      EXPECT_LT((J - fd).norm(), 1e-7 * std::max(1.0, J.norm())) << pi_name(c.pi) << " layer " << k;
    }
  }
}

TEST(CouplingHierarchical, InsideNormSiteFeedsBothNormsAndNotTheStream) {
  // One-token blocks (P = 1): attention is the identity, so the inside-S block is, token by token,
  // x' = x + W_V S_1(x + a) + W_2 phi(W_1 S_2(x + W_V S_1(x + a) + a) + b_1) + b_2.
  const int T = 3, d = 4;
  SlowPath s = slow(d, 1, 0.8);
  s.site = Site::InsideNorm;
  s.y0 = Vec::LinSpaced(d, 0.5, -0.5);
  const HierarchicalModel m(block_model(d, 1, 1, 12), s, T);
  const Mat X0 = random_tokens(T, d, 12);
  Batch Z = m.initial_state(X0);
  const Mat add = m.injection(1, Z.run(0));
  m.apply(1, Z);
  const tf::LayerWeights& W = m.transformer().weights(1);
  const tf::Config& c = m.transformer().config();
  for (int t = 0; t < T; ++t) {
    Mat z1, z2;
    tf::apply_norm(c, W.g_attn, W.beta_attn, Mat(X0.row(t) + add.row(t)), z1);
    const RowVec xh = X0.row(t) + (W.W_V * z1.row(0).transpose()).transpose();
    tf::apply_norm(c, W.g_mlp, W.beta_mlp, Mat(xh + add.row(t)), z2);
    Vec h = W.W_1 * z2.row(0).transpose() + W.b_1;
    for (Eigen::Index i = 0; i < h.size(); ++i) h(i) = tf::activation(c.phi, h(i));
    const RowVec want = xh + (W.W_2 * h + W.b_2).transpose();
    EXPECT_LT((m.token_rows(Z).row(t) - want).norm(), 1e-13 * want.norm()) << t;
  }
  SlowPath post = s;
  tf::Config pc = c;
  pc.placement = tf::Placement::PostLN;
  EXPECT_THROW(HierarchicalModel(tf::Transformer(pc, {tf::random_weights(pc, 0, 1, 0, 1)}), post, T), std::invalid_argument);
}

TEST(CouplingHierarchical, CompressionsAndInjections) {
  Mat B(4, 2);
  B << 1, 2, 3, 4, 5, 6, -7, 8;
  Compression c;
  EXPECT_TRUE(compress(c, B).isApprox(Vec((Vec(2) << 0.5, 5.0).finished())));
  c.kind = PiKind::Stride;
  EXPECT_EQ(compress(c, B), Vec((Vec(2) << -7, 8).finished()));
  c.kind = PiKind::Head;
  EXPECT_EQ(compress(c, B), Vec((Vec(2) << 1, 2).finished()));
  c.kind = PiKind::TopK;
  c.topk = 2;  // norms sqrt(5), 5, sqrt(61), sqrt(113): rows 2 and 3
  EXPECT_EQ(compress(c, B), Vec((Vec(2) << -1, 7).finished()));
  EXPECT_FALSE(c.smooth());
  c.kind = PiKind::Multi;
  c.levels = {2, 2};
  c.level_kinds = {PiKind::Head, PiKind::Mean};  // heads of (1,2),(3,4): rows 1 and 3, then their mean
  EXPECT_EQ(compress(c, B), Vec((Vec(2) << 3, 4).finished()));
  EXPECT_NO_THROW(c.validate(4, 8));
  EXPECT_THROW(c.validate(4, 10), std::invalid_argument);  // partial block
  c.levels = {3, 2};
  EXPECT_THROW(c.validate(4, 8), std::invalid_argument);   // sizes not multiplying to P
  // psi: Jacobian of the tanh-MLP against central differences; Lipschitz bound holds.
  const Injection f = make_injection(PsiKind::TanhMlp, 3, 4, 1.3, 9);
  const Vec u = Vec::LinSpaced(3, -0.5, 0.8), v = Vec::LinSpaced(3, 1.0, -0.2);
  const Vec fd = (f(Vec(u + 1e-6 * v)) - f(Vec(u - 1e-6 * v))) / 2e-6;
  EXPECT_LT((f.jacobian(u) * v - fd).norm(), 1e-8);
  EXPECT_LE((f(u) - f(v)).norm(), f.lipschitz() * (u - v).norm());
  Injection bad = f;
  bad.W2 = Mat::Zero(2, 4);
  EXPECT_THROW(bad.validate(3), std::invalid_argument);
}

TEST(CouplingHierarchical, BadValuesAreRefused) {
  const int d = 4;
  EXPECT_THROW(HierarchicalModel(block_model(d, 4, 1, 1), slow(d, 4, 0.1), 3), std::invalid_argument);   // P > T
  EXPECT_THROW(HierarchicalModel(block_model(d, 4, 1, 1), slow(d, 2, 0.1), 8), std::invalid_argument);   // P differs from the mask's
  tf::Config c;
  c.d = d;
  c.d_ff = 8;
  c.mask = tf::Mask::Causal;
  EXPECT_THROW(HierarchicalModel(tf::Transformer(c, {tf::random_weights(c, 0, 1, 0, 1)}), slow(d, 4, 0.1), 8), std::invalid_argument);
  SlowPath s = slow(d, 4, std::nan(""));
  EXPECT_THROW(HierarchicalModel(block_model(d, 4, 1, 1), s, 8), std::invalid_argument);
  s = slow(d, 4, 0.1);
  s.psi = make_injection(PsiKind::Linear, d + 1, 1, 1.0, 1);  // psi of the wrong dimension
  EXPECT_THROW(HierarchicalModel(block_model(d, 4, 1, 1), s, 8), std::invalid_argument);
  s = slow(d, 4, 0.1);
  s.L_r = -1;
  EXPECT_THROW(HierarchicalModel(block_model(d, 4, 1, 1), s, 8), std::invalid_argument);
  s = slow(d, 4, 0.1);
  s.y0 = Vec::Zero(d + 2);
  EXPECT_THROW(HierarchicalModel(block_model(d, 4, 1, 1), s, 8), std::invalid_argument);
}

// ---- Preset coupling-gate-intervention (E3, Prop 11) ------------------------------------------------

namespace {

std::vector<std::string> file_lines(const std::filesystem::path& f) {
  std::ifstream in(f);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

const std::vector<std::pair<std::string, std::string>> kGateSmall = {{"g4_L", "40"}, {"depth", "12"}, {"rho", "1e-4,1e-3,1e-2"}};

}  // namespace

TEST(CouplingGateIntervention, EveryCheckPassesAndTheShiftIsLinearInRho) {
  tokdyn::testing::TempDir tmp;
  const Experiment* e = find_experiment("coupling-gate-intervention");
  ASSERT_NE(e, nullptr);
  const auto out = tmp.path() / "g";
  run_experiment(*e, resolve_params(*e, kGateSmall), out, 2, false, false);
  const auto rows = file_lines(out / "checks.csv");
  ASSERT_GE(rows.size(), 9u);
  for (std::size_t i = 1; i < rows.size(); ++i) EXPECT_EQ(rows[i].substr(rows[i].rfind(',') + 1), "true") << rows[i];
  const auto gate = file_lines(out / "gate.csv");
  EXPECT_EQ(gate.size(), 1u + 3u + 3u);  // two levels x three gates
  EXPECT_EQ(gate[0], "level,mode,rho,shift_par,prediction,ratio,deviation");
}

TEST(CouplingGateIntervention, BadInputExitsTwoWithOneLine) {
  tokdyn::testing::TempDir tmp;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--set", "rho="}, "rho"},
      {{"--set", "rho=1e-3,nan"}, "rho"},
      {{"--set", "rho=0"}, "rho"},
      {{"--set", "mask=causal", "--set", "level=transformer"}, "mask"},
      {{"--set", "block=12", "--set", "level=transformer"}, "block"},
      {{"--set", "compression=multi", "--set", "levels=3,2", "--set", "level=transformer"}, "multi-level"},
      {{"--set", "y0=0.1,0.2", "--set", "level=transformer"}, "y0"},
  };
  for (const auto& [sets, key] : cases) {
    std::vector<std::string> args = {"run", "coupling-gate-intervention", "--out", "res", "--no-figures"};
    args.insert(args.end(), sets.begin(), sets.end());
    const auto r = tokdyn::testing::run_cli(tmp.path(), args);
    EXPECT_EQ(r.code, 2) << key << ": " << r.err;
    EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp.path() / "res")) << key;
  }
}
