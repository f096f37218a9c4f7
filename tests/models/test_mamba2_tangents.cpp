// mamba2::BlockMap::step_double_tangents: the value of the double step computed once per run, m
// tangents sharing it. It must be step_double on the state replicated m times (value of every
// replica and every tangent, to round-off), for every update and the ablation switches, and give
// the same bits on any thread count.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "mamba2_fixtures.hpp"
#include "thread_util.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/engine/schedule.hpp"

using namespace tokdyn;
using namespace tokdyn::mamba2;

namespace {

/// A float-representable state (as in a depth run): Gaussian rows, unit rows for the sphere update.
Tokens test_state(long rows, int d, Update up, std::uint64_t seed) {
  Tokens Z = tokdyn::testing::random_state(rows, d, seed).cast<double>();
  if (up == Update::Sphere) {
    Z.rowwise().normalize();
    Z = Z.cast<float>().cast<double>();
  }
  return Z;
}

Tokens gaussian(long rows, int d, std::uint64_t seed) {
  Rng rng(seed, {0x7a});
  Tokens V(rows, d);
  for (Eigen::Index i = 0; i < V.size(); ++i) V.data()[i] = rng.normal();
  return V;
}

/// Z stacked m times (rows j R T .. of block j = Z).
Tokens replicate(const Tokens& Z, int m) {
  Tokens Zr(Z.rows() * m, Z.cols());
  for (int j = 0; j < m; ++j) Zr.middleRows(j * Z.rows(), Z.rows()) = Z;
  return Zr;
}

double rel_err(const Tokens& got, const Tokens& want) { return (got - want).norm() / want.norm(); }

struct Case {
  std::string name;
  Config cfg;
  Switches sw;
  Update update;
};

}  // namespace

TEST(Mamba2Tangents, EqualsStepDoubleOnTheReplicatedState) {
  Config tiny = Config::named("tiny");
  Config grouped = tiny;  // two groups of B, C (heads 0-3 and 4-7)
  grouped.ngroups = 2;
  grouped.d_state = 8;
  Switches nogate, noconv, nosilu, bare;
  nogate.gate = false;
  noconv.conv = false;
  nosilu.silu_bc = false;
  nosilu.silu_x = false;
  bare.conv = false, bare.gate = false, bare.d_skip = false, bare.mixer_norm = false;
  const std::vector<Case> cases = {{"reference residual", tiny, Switches{}, Update::Residual},
                                   {"reference sphere", tiny, Switches{}, Update::Sphere},
                                   {"gate off residual", tiny, nogate, Update::Residual},
                                   {"gate off sphere", tiny, nogate, Update::Sphere},
                                   {"conv off sphere", tiny, noconv, Update::Sphere},
                                   {"silu off residual", tiny, nosilu, Update::Residual},
                                   {"bare sphere", tiny, bare, Update::Sphere},
                                   {"two groups residual", grouped, Switches{}, Update::Residual}};
  for (const Case& c : cases) {
    const Model model = init_model(c.cfg, 5);
    const BlockMap F(c.cfg, c.sw, cycle_layers(model), c.update, 0.5f);
    const int d = c.cfg.d_model;
    for (const auto& [runs, len, m] : std::vector<std::array<int, 3>>{{1, 7, 1}, {1, 9, 4}, {2, 5, 3}}) {
      const std::string what = c.name + ", runs " + std::to_string(runs) + ", len " + std::to_string(len) +
                               ", m " + std::to_string(m);
      const long RT = static_cast<long>(runs) * len;
      const Tokens Z = test_state(RT, d, c.update, 11);
      const Tokens V = gaussian(m * RT, d, 12);
      for (long l : {1L, 3L}) {  // two different blocks
        Tokens Y, dY, Yr, dYr;
        F.step_double_tangents(l, Batch{Z, runs, len}, V, Y, dY);
        F.step_double(l, Batch{replicate(Z, m), m * runs, len}, V, Yr, dYr);
        ASSERT_EQ(Y.rows(), RT) << what;
        ASSERT_EQ(Y.cols(), d) << what;
        ASSERT_EQ(dY.rows(), m * RT) << what;
        ASSERT_EQ(dY.cols(), d) << what;
        for (int j = 0; j < m; ++j) {
          EXPECT_LT(rel_err(Y, Yr.middleRows(j * RT, RT)), 1e-13) << what << ", value of replica " << j;
          EXPECT_LT(rel_err(dY.middleRows(j * RT, RT), dYr.middleRows(j * RT, RT)), 1e-12) << what << ", tangent " << j;
        }
        if (c.update == Update::Sphere) {  // tangents of the sphere are orthogonal to the new state
          for (long q = 0; q < dY.rows(); ++q) EXPECT_LT(std::abs(Y.row(q % RT).dot(dY.row(q))), 1e-12) << what;
        }
      }
    }
  }
}

TEST(Mamba2Tangents, LinearInTheDirectionsAndTheirOrderDoesNotMatter) {
  // Tangent j depends on direction j alone: swapping two directions swaps their tangents (to the
  // round-off of the GEMM kernels, whose bits may depend on a row's position in the product), and a
  // combination of directions gives the combination of tangents.
  const Config c = Config::named("tiny");
  const Model model = init_model(c, 3);
  const BlockMap F(c, Switches{}, cycle_layers(model), Update::Residual);
  const int len = 6, d = c.d_model;
  const Tokens Z = test_state(len, d, Update::Residual, 21);
  const Tokens V = gaussian(3 * len, d, 22);
  Tokens Vs = V;
  Vs.topRows(len) = V.middleRows(2 * len, len);
  Vs.middleRows(2 * len, len) = V.topRows(len);
  Tokens Y, dY, Ys, dYs;
  F.step_double_tangents(2, Batch{Z, 1, len}, V, Y, dY);
  F.step_double_tangents(2, Batch{Z, 1, len}, Vs, Ys, dYs);
  EXPECT_EQ((Y - Ys).norm(), 0.0);
  EXPECT_LT(rel_err(dYs.middleRows(2 * len, len), dY.topRows(len)), 1e-14);
  EXPECT_LT(rel_err(dYs.topRows(len), dY.middleRows(2 * len, len)), 1e-14);
  EXPECT_LT(rel_err(dYs.middleRows(len, len), dY.middleRows(len, len)), 1e-14);
  Tokens Vc(len, d);
  Vc = 2.0 * V.topRows(len) - 0.5 * V.middleRows(len, len);
  Tokens Yc, dYc;
  F.step_double_tangents(2, Batch{Z, 1, len}, Vc, Yc, dYc);
  const Tokens want = 2.0 * dY.topRows(len) - 0.5 * dY.middleRows(len, len);
  EXPECT_LT(rel_err(dYc, want), 1e-12);
}

TEST(Mamba2Tangents, BitsDoNotDependOnThreadCount) {
  tokdyn::testing::ThreadCountGuard guard;
  // "tiny" shapes with 8 tangents of 40 tokens (320 tangent rows): the tangent loops and the
  // projections run threaded; 2 runs of 20 tokens: the value loops too.
  const Config c = Config::named("tiny");
  const Model model = init_model(c, 8);
  ASSERT_TRUE(rows_in_parallel(320, c.d_inner()));
  ASSERT_TRUE(rows_in_parallel(320, static_cast<long>(c.d_inner()) * 40));
  for (Update up : {Update::Residual, Update::Sphere}) {
    const BlockMap F(c, Switches{}, cycle_layers(model), up, 0.5f);
    for (const auto& [runs, len] : std::vector<std::array<int, 2>>{{1, 40}, {2, 20}}) {
      const Tokens Z = test_state(40, c.d_model, up, 31);
      const Tokens V = gaussian(8 * 40, c.d_model, 32);
      Tokens Y0, dY0;
      for (int t : tokdyn::testing::kThreadCounts) {
        tokdyn::testing::set_threads(t);
        Tokens Y, dY;
        F.step_double_tangents(1, Batch{Z, runs, len}, V, Y, dY);
        if (t == 1) {
          Y0 = Y;
          dY0 = dY;
          continue;
        }
        EXPECT_EQ((Y - Y0).cwiseAbs().maxCoeff(), 0.0) << t << " threads, runs " << runs;
        EXPECT_EQ((dY - dY0).cwiseAbs().maxCoeff(), 0.0) << t << " threads, runs " << runs;
      }
    }
  }
}

TEST(Mamba2Tangents, RejectsDirectionsOfTheWrongShape) {
  const Config c = Config::named("tiny");
  const Model model = init_model(c, 1);
  const BlockMap F(c, Switches{}, cycle_layers(model), Update::Residual);
  const int len = 4, d = c.d_model;
  const Batch Z{test_state(len, d, Update::Residual, 1), 1, len};
  Tokens Y, dY;
  EXPECT_THROW(F.step_double_tangents(1, Z, Tokens::Zero(len + 1, d), Y, dY), std::logic_error);   // not m blocks
  EXPECT_THROW(F.step_double_tangents(1, Z, Tokens::Zero(0, d), Y, dY), std::logic_error);         // m = 0
  EXPECT_THROW(F.step_double_tangents(1, Z, Tokens::Zero(2 * len, d + 1), Y, dY), std::logic_error);  // width
  EXPECT_THROW(F.step_double_tangents(1, Batch{Z.Z, 2, len}, Tokens::Zero(len, d), Y, dY), std::logic_error);  // state
}
