// The consensus distance is defined per model (issue 17): the SSM paper's axis-aligned sets for the
// SSM / Mamba-2 presets, the attention models' diagonal {(x, ..., x)} for rope-flow. References:
// closed forms (a configuration at one point of the sphere, two antipodal tokens, tokens on one
// axis with random signs), and the collapse of rope-flow at beta = 0 (uniform attention: every
// token moves to the normalised mean).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "test_util.hpp"
#include "tokdyn/engine/observers.hpp"

using tokdyn::testing::CliResult;
using tokdyn::testing::run_cli;
using tokdyn::testing::slurp;
using tokdyn::testing::TempDir;

TEST(DiagonalConsensus, ZeroAtOnePointOfTheSphereInAnyDirection) {
  tokdyn::Tokens Z(5, 3);
  for (int i = 0; i < 5; ++i) Z.row(i) << 0.3 * (i + 1), -0.5 * (i + 1), 0.8 * (i + 1);  // one direction, any lengths
  EXPECT_NEAR(tokdyn::diagonal_consensus_distance(Z).distance, 0.0, 1e-7);
  // The axis-aligned distance of the same configuration is far from 0: it is not on an axis.
  EXPECT_GT(tokdyn::consensus_distance(Z).distance, 1.0);
}

TEST(DiagonalConsensus, AntipodalPairIsAtDistanceTwo) {
  // min_x |e1 - x|^2 + |-e1 - x|^2 = 4 for every unit x: distance 2 (closed form).
  tokdyn::Tokens Z(2, 4);
  Z.setZero();
  Z(0, 0) = 1.0;
  Z(1, 0) = -1.0;
  EXPECT_NEAR(tokdyn::diagonal_consensus_distance(Z).distance, 2.0, 1e-15);
  // ... while it is an SSM consensus configuration (one axis, signs s_i = +-1): distance 0.
  EXPECT_NEAR(tokdyn::consensus_distance(Z).distance, 0.0, 1e-15);
}

TEST(DiagonalConsensus, RopeFlowAtBetaZeroReadsAsConsensus) {
  // beta = 0: uniform attention, the tokens collapse to their normalised mean (min cosine -> 1).
  TempDir d;
  const CliResult r = run_cli(d.path(), {"run", "rope-flow", "--out", "o", "--no-figures", "--quiet", "--set", "beta=0", "--set",
                                         "t_end=10", "--set", "n=16", "--set", "d=4", "--set", "runs=2"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(slurp(d.path() / "o" / "metrics.csv"));
  std::string header, line, last;
  std::getline(in, header);
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  std::vector<std::string> cols, vals;
  for (std::istringstream h(header); std::getline(h, line, ',');) cols.push_back(line);
  for (std::istringstream v(last); std::getline(v, line, ',');) vals.push_back(line);
  ASSERT_EQ(cols.size(), vals.size());
  double cd = -1, mc = -1;
  for (std::size_t i = 0; i < cols.size(); ++i) {
    if (cols[i] == "consensus_dist_mean") cd = std::stod(vals[i]);
    if (cols[i] == "min_cosine_mean") mc = std::stod(vals[i]);
  }
  EXPECT_GT(mc, 0.999);
  EXPECT_LT(cd, 0.05) << last;  // it read 3.44 with the axis-aligned definition
  EXPECT_NE(slurp(d.path() / "o" / "manifest.json").find("\"consensus_dist\""), std::string::npos);
}
