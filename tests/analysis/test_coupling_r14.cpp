// Check R14 of the coupling paper (§4.2, the decomposition of a generator perturbation by the
// dichotomy projectors): delta A(l) = P+(l+1) dA P+(l) + P+(l+1) dA P-(l) + P-(l+1) dA P+(l)
// + P-(l+1) dA P-(l) (persistent, two skew, decaying blocks); the fast-mode construction
// eta P-(l+1) E(l) and the slow-mode construction eta P+(l+1) E(l) P+(l) are what they claim; and at
// the Transformer level dA = grad_W A [dW] through x*(l) (central differences of the generators
// along the reference trajectory) is exactly 0 for W_Q, W_K (Prop 8) and not for W_V, W_1.
#include <gtest/gtest.h>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/models/transformer/transformer.hpp"
#include "tokdyn/core/rng.hpp"

using namespace tokdyn;
using cocycle::Matrix;

namespace {

double max_abs(const Matrix& M) { return M.cwiseAbs().maxCoeff(); }

Matrix random_matrix(long d, std::uint64_t seed, std::uint64_t id) {
  Mat M(d, d);
  Rng(seed, {id}).fill_normal(M, 1.0);
  return M;
}

}  // namespace

TEST(CouplingR14, ProjectorBlocksSumToThePerturbationAndModesAreWhatTheyClaim) {
  // A non-autonomous saddle (family G4, slowly rotating, r_- ~ 0.7 < 1 < r_+ ~ 1.2) and its two-sided bundles.
  const long L = 40, d = 4;
  const auto B = cocycle::family_g4(L, {-0.6, -0.6, -0.5, -0.5}, {0.8, 0.8, 0.2, 0.2}, 1.0, 0.05, 7);
  const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(B);
  const cocycle::Bundles b = cocycle::two_sided_bundles(c);
  ASSERT_EQ(b.k, 2);
  const Matrix I = Matrix::Identity(d, d);
  const double eta = 0.1;
  for (long l = 0; l < L; ++l) {
    const Matrix& P0 = b.P_plus[static_cast<std::size_t>(l)];
    const Matrix& P1 = b.P_plus[static_cast<std::size_t>(l + 1)];
    const Matrix M0 = I - P0, M1 = I - P1;
    const Matrix dA = random_matrix(d, 11, static_cast<std::uint64_t>(l));
    const Matrix sum = P1 * dA * P0 + P1 * dA * M0 + M1 * dA * P0 + M1 * dA * M0;
    EXPECT_LT(max_abs(sum - dA), 1e-12 * (1 + max_abs(dA)) * (1 + max_abs(P0)) * (1 + max_abs(P1))) << l;
    // Fast mode: range in the decaying bundle, P-(l+1) dA = dA, P+(l+1) dA = 0.
    const Matrix fast = eta * M1 * dA;
    EXPECT_LT(max_abs(M1 * fast - fast), 1e-12 * (1 + max_abs(P1) * max_abs(P1))) << l;
    EXPECT_LT(max_abs(P1 * fast), 1e-12 * (1 + max_abs(P1) * max_abs(P1))) << l;
    // Slow mode: P+(l+1) dA P+(l) = dA; it annihilates V_perp(l) and maps into V_par(l+1).
    const Matrix slow = eta * P1 * dA * P0;
    EXPECT_LT(max_abs(P1 * slow * P0 - slow), 1e-12 * (1 + std::pow(max_abs(P1) * max_abs(P0), 2))) << l;
    EXPECT_LT(max_abs(slow * M0), 1e-12 * (1 + std::pow(max_abs(P1) * max_abs(P0), 2))) << l;
    // Generic dA has all four blocks.
    EXPECT_GT(max_abs(P1 * dA * M0), 1e-3) << l;
    EXPECT_GT(max_abs(M1 * dA * P0), 1e-3) << l;
  }
}

TEST(CouplingR14, GeneratorPerturbationThroughTheReferenceIsBlindToQK) {
  tf::Config c;
  c.d = 4;
  c.d_ff = 8;
  const int L = 6;
  std::vector<tf::LayerWeights> w;
  for (int r = 0; r < L; ++r) w.push_back(tf::random_weights(c, r, 1.0, 0.1, 3));
  Vec x0(c.d);
  Rng(5, {1}).fill_normal(x0, 1.0);
  // dA(l) = d/ds A(l; W + s dW) at s = 0 by central differences, through x*(l) (every layer's
  // generator moves when an earlier layer's weights move).
  const auto generators = [&](const std::vector<tf::LayerWeights>& ws) {
    const tf::Transformer m(c, ws);
    return tf::tangent_sequence(tf::reference_trajectory(m, x0, L), tf::Form::Exact);
  };
  const auto dA = [&](Mat tf::LayerWeights::*field, double h) {
    std::vector<tf::LayerWeights> wp = w, wm = w;
    Mat E((w[1].*field).rows(), (w[1].*field).cols());
    Rng(9, {2}).fill_normal(E, 1.0);
    wp[1].*field += h * E;  // perturb layer index 1 only
    wm[1].*field -= h * E;
    const auto Ap = generators(wp), Am = generators(wm);
    std::vector<Mat> out;
    for (int l = 0; l < L; ++l) out.push_back((Ap[static_cast<std::size_t>(l)] - Am[static_cast<std::size_t>(l)]) / (2 * h));
    return out;
  };
  for (auto field : {&tf::LayerWeights::W_Q, &tf::LayerWeights::W_K}) {
    const auto d = dA(field, 1e-3);
    for (int l = 0; l < L; ++l) EXPECT_EQ(max_abs(d[static_cast<std::size_t>(l)]), 0.0) << l;  // Prop 8: exactly 0
  }
  for (auto field : {&tf::LayerWeights::W_V, &tf::LayerWeights::W_1}) {
    const auto d = dA(field, 1e-5);
    EXPECT_EQ(max_abs(d[0]), 0.0);  // layer 0 comes before the perturbed layer 1
    for (int l = 1; l < L; ++l) EXPECT_GT(max_abs(d[static_cast<std::size_t>(l)]), 1e-4) << l;  // layer 1 and, through x*, later ones
  }
}
