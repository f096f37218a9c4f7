// Engine::mixer computes steps 3-6 (conv, SSD, gated norm) run by run when there are at least
// 4 runs per thread, else step by step with the row loops over rows: both orders give the same
// bits, with every switch and with taps (q, mixing matrices), including token counts whose SSD
// head product has a partial row block, for a head size computed by the causal kernel (16) and
// one computed by the Eigen product (12; see detail::causal_head_product_matches_eigen).
#include <gtest/gtest.h>
#include <omp.h>

#include "thread_util.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"
#include "tokdyn/core/rng.hpp"
#include "mamba2_fixtures.hpp"

using namespace tokdyn;
using namespace tokdyn::mamba2;
using tokdyn::testing::set_threads;
using tokdyn::testing::ThreadCountGuard;

namespace {

using tokdyn::testing::random_state;

}  // namespace

TEST(Mamba2Engine, RunByRunAndStepByStepGiveTheSameBits) {
  ThreadCountGuard guard;
  for (const int headdim : {16, 12}) {
    Config c = Config::named("tiny");
    c.headdim = headdim;
    c.d_model = 48;  // d_inner 96: 6 or 8 heads
    const Model m = init_model(c, 21);
    const int runs = 12;
    for (const int len : {29, 8}) {
      const long RT = static_cast<long>(runs) * len;
      ASSERT_TRUE(rows_in_parallel(RT, static_cast<long>(c.d_inner()) * len));
      const MatF X = random_state(RT, c.d_model, 7);
      auto mixer = [&](const Switches& sw, int threads, MatF& y, std::vector<float>& q, std::vector<float>& mix) {
        set_threads(threads);
        q.assign(static_cast<std::size_t>(RT), 0.0f);
        mix.assign(static_cast<std::size_t>(runs) * 2 * len * len, 0.0f);
        MixerTaps taps;
        taps.q = q.data();
        taps.heads = {0, 3};
        taps.mixing = mix.data();
        Engine(c, sw).mixer(m.layers[1], X, runs, len, y, taps);
      };
      Switches no_gate;
      no_gate.gate = false;
      Switches bare;
      bare.silu_bc = bare.silu_x = bare.conv = bare.d_skip = bare.mixer_norm = false;
      for (const Switches& sw : {Switches{}, no_gate, bare}) {
        MatF y1, y4;
        std::vector<float> q1, q4, m1, m4;
        mixer(sw, 1, y1, q1, m1);  // 12 runs >= 4 x 1 thread: run by run
        mixer(sw, 4, y4, q4, m4);  // 12 runs < 4 x 4 threads: step by step
        EXPECT_EQ(y1, y4) << "headdim " << headdim << " len " << len << " gate " << sw.gate << " conv " << sw.conv;
        EXPECT_EQ(q1, q4);
        EXPECT_EQ(m1, m4);
        EXPECT_TRUE(y1.allFinite());
      }
    }
  }
}
