// The two spectrum engines agree on the Transformer (coupling paper block (4)): the matrix-free
// depth spectrum (k tangents through the block's exact JVP, analysis/depth_spectra) equals the
// discrete QR of the cocycle of dense block Jacobians along the same trajectory
// (analysis/cocycle), started from the same frame; and the preset depth-spectra runs
// model = transformer with its dichotomy intervals, refusing a Steklov window longer than the run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.hpp"
#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/depth_spectra.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/models/transformer/transformer.hpp"
#include "tokdyn/core/rng.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;

TEST(DepthSpectraTransformer, MatrixFreeEqualsDenseCocycleQr) {
  tf::Config c;
  c.d = 4;
  c.d_ff = 8;
  const int T = 3, depth = 30, k = T * c.d;
  std::vector<tf::LayerWeights> w;
  for (int r = 0; r < depth; ++r) w.push_back(tf::random_weights(c, r, 1.0, 0.1, 5));
  const tf::Transformer model(c, w);
  Tokens X(T, c.d);
  Rng(3, {1}).fill_normal(X, 1.0);
  const Batch Z0{X, 1, T};
  DepthSpectrumOptions o;
  o.k = k;
  o.depth = depth;
  o.seed = 9;
  const DepthSpectrum ds = depth_spectrum(model, Z0, o);

  // The same cocycle as dense Td x Td Jacobians of the block along the trajectory.
  std::vector<cocycle::Matrix> J;
  Batch Z = Z0;
  for (long l = 1; l <= depth; ++l) {
    J.emplace_back(tf::block_jacobian(model, l, Z.Z));
    model.apply(l, Z);
  }
  const Tokens V0 = initial_tangents(model, Z0, k, o.seed);  // k runs of T x d
  cocycle::QrOptions q;
  q.Q0.resize(T * c.d, k);
  for (int j = 0; j < k; ++j)
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < c.d; ++i) q.Q0(t * c.d + i, j) = V0(j * T + t, i);
  const auto qr = cocycle::qr_iterate(cocycle::Cocycle::from_matrices(J), q);
  const auto ly = cocycle::lyapunov_spectrum(qr.log_diag);
  ASSERT_EQ(ly.mu.size(), ds.mu.size());
  for (int i = 0; i < k; ++i) EXPECT_NEAR(ds.mu[i], ly.mu[i], 1e-10) << i;
  EXPECT_NEAR((ds.log_r - qr.log_diag).cwiseAbs().maxCoeff(), 0.0, 1e-9);
}

TEST(DepthSpectraTransformer, PresetWritesLyapunovAndDichotomy) {
  tokdyn::testing::TempDir tmp;
  const auto r = tokdyn::testing::run_cli(tmp.path(), {"run", "depth-spectra", "--out", "res", "--no-figures", "--set", "model=transformer",
                                               "--set", "depth=60", "--set", "burn_in=10", "--set", "k=4", "--set", "tokens=4",
                                               "--set", "H=10,25"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream dich(tmp.path() / "res" / "dichotomy.csv");
  std::string head;
  std::getline(dich, head);
  EXPECT_EQ(head, "H,interval,lower,upper,columns");
  int rows = 0;
  for (std::string l; std::getline(dich, l);) ++rows;
  EXPECT_GE(rows, 2);  // at least one interval per H
  const auto bad = tokdyn::testing::run_cli(tmp.path(), {"run", "depth-spectra", "--out", "bad", "--no-figures", "--set", "model=transformer",
                                                 "--set", "depth=60", "--set", "burn_in=10", "--set", "H=51"});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("'H'"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(tmp.path() / "bad"));
  const auto knob = tokdyn::testing::run_cli(tmp.path(), {"run", "depth-spectra", "--out", "bad", "--no-figures", "--set", "model=ssm",
                                                  "--set", "d_ff=8"});
  EXPECT_EQ(knob.code, 2) << knob.err;
  EXPECT_NE(knob.err.find("d_ff"), std::string::npos) << knob.err;
}
