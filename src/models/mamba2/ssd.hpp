#pragma once
// Private kernels of mamba2::Engine::mixer (src/models/mamba2/mamba2.cpp): the products of the SSD
// quadratic form and the sums of squares of the norms. Every output entry is computed by the same
// code on whichever thread calls it: the bits depend on the data and the shapes only.

namespace tokdyn::mamba2::detail {

/// Y[t, 0:P] = sum_{s <= t} M[t, s] X[s, 0:P] (+ D X[t, 0:P] when d_skip) for t < T: the causal
/// (lower-triangular) product of one head. M is T x T row-major and zero above the diagonal (the
/// entries right of the diagonal inside a block of rows are read and multiply X like the others);
/// X and Y are T x P with row strides ldx, ldy. Each entry is a sum over s in increasing order
/// (fused multiply-adds where the build has them), then the D term is added.
void causal_head_product(const float* M, int T, const float* X, long ldx, int P, float* Y, long ldy, bool d_skip, float D);

/// Whether causal_head_product gives the bits of the Eigen product it replaced (Y = M X, then
/// Y += D X) for heads of P channels and T tokens in this build: Eigen 3.4's float kernel with
/// 8-float packets sums each entry in order when P is covered by its 24- and 16-row panels
/// (P mod 24 = 0 or 16) and T fits one depth block (T <= 256); elsewhere it splits the sums (a
/// panel of 8 rows alternates two accumulators, longer sums are blocked). The mixer uses the
/// kernel only where this holds, so its output bits are those of the Eigen product everywhere.
bool causal_head_product_matches_eigen(int P, int T);


}  // namespace tokdyn::mamba2::detail
