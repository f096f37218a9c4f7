// Top-k Lyapunov spectrum of a depth map by discrete QR through the model's JVP
// (analysis/depth_spectra.hpp; coupling paper eq. (10), growth scales of §2.9).
#include "tokdyn/analysis/depth_spectra.hpp"

#include <cmath>
#include <fmt/format.h>

#include "tokdyn/core/error.hpp"
#include <limits>
#include <stdexcept>


#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/sphere.hpp"

namespace tokdyn {

namespace {

bool all_finite(const Tokens& M) { return M.allFinite(); }

/// Removes each token's component along z_i (tangent space of (S^{d-1})^T at Z) from every run of V.
void project_tangent(const Tokens& Z, int runs, int len, Tokens& V) {
  for (int r = 0; r < runs; ++r)
    for (int i = 0; i < len; ++i) {
      const Eigen::Index row = static_cast<Eigen::Index>(r) * len + i;
      const double zz = Z.row(i).squaredNorm();
      if (zz > 0.0) V.row(row) -= (Z.row(i).dot(V.row(row)) / zz) * Z.row(i);
    }
}

}  // namespace

EulerStepMap::EulerStepMap(const VectorField& f, double h, double t0) : f_(f), h_(h), t0_(t0) {
  if (!(h > 0.0) || !std::isfinite(h)) throw std::invalid_argument(fmt::format("EulerStepMap: h: expected a finite step > 0, got {}", h));
  if (!std::isfinite(t0)) throw std::invalid_argument("EulerStepMap: t0: expected a finite time");
}

void EulerStepMap::apply(long l, Batch& Z) const {
  Tokens F;
  f_.eval(t0_ + static_cast<double>(l - 1) * h_, Z, F);
  Z.Z += h_ * F;
  if (f_.on_sphere()) project_rows(Z.Z);
}

void EulerStepMap::jvp(long l, const Batch& Z, const Tokens& V, Tokens& out) const {
  const double t = t0_ + static_cast<double>(l - 1) * h_;
  Tokens dF;
  f_.jvp(t, Z, V, dF);
  out = V + h_ * dF;
  if (!f_.on_sphere()) return;
  Tokens F;
  f_.eval(t, Z, F);
  const Tokens U = Z.Z + h_ * F;  // the step before the retraction
  retraction_derivative_rows(U, out);
}

TangentStep apply_and_jvp(const LayerMap& F) {
  return [&F](long l, const Batch& Z, const Batch& Zrep, const Tokens& V, Batch& Znext, Tokens& W) {
    Znext = Z;
    F.apply(l, Znext);
    F.jvp(l, Zrep, V, W);
  };
}

long tangent_dimension(const LayerMap& F, const Batch& Z) {
  const long d = Z.dim();
  return static_cast<long>(Z.len) * (F.on_sphere() ? d - 1 : d);
}

void qr_log_step(Eigen::Map<Eigen::MatrixXd> W, Eigen::Ref<RowVec> log_diag, std::vector<long>* unresolved, long step) {
  const Eigen::Index n = W.rows(), k = W.cols();
  if (k > n || log_diag.size() != k) throw std::logic_error("qr_log_step: expected rows >= k and k diagonal entries");
  // The cocycles' Benettin step (cocycle::benettin_step): sign fix diag(R) >= 0, R_ii = 0 exactly is
  // growth scale 0 (coupling paper §7.4: the spectrum may extend to 0), power-of-two scaling of far
  // images, LAPACK above a size, round-off columns flagged.
  cocycle::Matrix Z = W, Q, R;
  std::vector<long> none(static_cast<std::size_t>(k), -1);
  cocycle::benettin_step(Z, Q, R, log_diag, unresolved ? *unresolved : none, step);
  W = Q;
}

Tokens initial_tangents(const LayerMap& F, const Batch& Z, int k, std::uint64_t seed) {
  const long dim = tangent_dimension(F, Z);
  if (k < 1 || k > dim)
    throw std::invalid_argument(fmt::format("depth spectrum: k: expected 1 <= k <= the tangent dimension {}, got {}", dim, k));
  const int len = Z.len, d = Z.dim();
  Rng rng(seed, {0xd5ec});
  Tokens V(static_cast<Eigen::Index>(k) * len, d);
  rng.fill_normal(V);
  if (F.on_sphere()) project_tangent(Z.Z, k, len, V);
  RowVec logs(k);
  // Column j of the (T d) x k column-major view is run j of V (row-major, contiguous).
  qr_log_step(Eigen::Map<Eigen::MatrixXd>(V.data(), static_cast<Eigen::Index>(len) * d, k), logs);
  return V;
}

DepthSpectrum depth_spectrum(const LayerMap& F, const Batch& Z0, const DepthSpectrumOptions& opt, const TangentStep& step_in,
                             const ProgressFn& progress) {
  if (Z0.runs != 1 || Z0.len < 1 || Z0.Z.rows() != Z0.len)
    throw std::invalid_argument(fmt::format("depth spectrum: expected one run of tokens, got {} runs of {}", Z0.runs, Z0.len));
  if (!all_finite(Z0.Z)) throw std::invalid_argument("depth spectrum: the initial state is not finite");
  if (opt.depth < 1) throw std::invalid_argument(fmt::format("depth spectrum: depth: expected >= 1, got {}", opt.depth));
  if (opt.burn_in < 0 || opt.burn_in >= opt.depth)
    throw std::invalid_argument(
        fmt::format("depth spectrum: burn_in: expected 0 <= burn_in < depth = {}, got {}", opt.depth, opt.burn_in));
  const int k = opt.k, len = Z0.len, d = Z0.dim();
  DepthSpectrum S;
  S.k = k;
  S.depth = opt.depth;
  S.burn_in = opt.burn_in;
  S.dim = tangent_dimension(F, Z0);
  // The initial frame before projection and orthonormalisation (written by callers as v0.npy, so that
  // feeding it back repeats the same operations: the same bits): given, or Gaussian from the stream
  // (seed, 0xd5ec) exactly as initial_tangents() draws it.
  if (k < 1 || k > S.dim)
    throw std::invalid_argument(fmt::format("depth spectrum: k: expected 1 <= k <= the tangent dimension {}, got {}", S.dim, k));
  Tokens V;
  if (opt.tangents) {
    if (opt.tangents->rows() != static_cast<Eigen::Index>(k) * len || opt.tangents->cols() != d)
      throw std::invalid_argument(fmt::format("the initial tangent frame has {} x {} entries; expected k x tokens x d = {} x {} x {}",
                                              opt.tangents->rows() / std::max(len, 1), opt.tangents->cols(), k, len, d));
    if (!all_finite(*opt.tangents)) throw std::invalid_argument("the initial tangent frame is not finite");
    V = *opt.tangents;
  } else {
    V.resize(static_cast<Eigen::Index>(k) * len, d);
    Rng(opt.seed, {0xd5ec}).fill_normal(V);
  }
  S.tangents0 = V;
  if (F.on_sphere()) project_tangent(Z0.Z, k, len, V);
  {
    Eigen::Map<Eigen::MatrixXd> Vm(V.data(), static_cast<Eigen::Index>(len) * d, k);
    double scale = 0.0;
    for (Eigen::Index j = 0; j < k; ++j) scale = std::max(scale, Vm.col(j).norm());
    RowVec logs(k);
    qr_log_step(Vm, logs);
    for (int j = 0; j < k; ++j)
      if (!(scale > 0.0) || !(logs[j] > std::log(scale) + std::log(1e-10)))
        throw std::invalid_argument(fmt::format("the initial tangent frame is rank-deficient{}: tangent {} is (to 1e-10) a combination of "
                                                "the ones before it; expected k independent tangent vectors",
                                                F.on_sphere() ? " on the tangent space of the sphere" : "", j + 1));
  }
  const TangentStep step = step_in ? step_in : apply_and_jvp(F);
  const Eigen::Index n = static_cast<Eigen::Index>(len) * d;

  S.log_r.resize(opt.depth, k);
  Batch Z = Z0, Znext, Zrep{Tokens(), k, len};
  Tokens W;
  S.unresolved_at.assign(static_cast<std::size_t>(k), -1);
  if (opt.keep_states) S.states.push_back(Z0.Z);
  for (long l = 1; l <= opt.depth; ++l) {
    Zrep.Z = Z.Z.replicate(k, 1);
    step(l, Z, Zrep, V, Znext, W);
    if (Znext.runs != 1 || Znext.len != len || Znext.Z.rows() != len || Znext.Z.cols() != d || W.rows() != V.rows() ||
        W.cols() != d)
      throw std::logic_error("depth spectrum: the tangent step returned the wrong shapes");
    // Non-finite dynamics are not bad input: exit 4 (NonFiniteError), naming layer, run and token.
    if (!all_finite(Znext.Z)) {
      Eigen::Index row = 0;
      while (row + 1 < Znext.Z.rows() && Znext.Z.row(row).allFinite()) ++row;
      throw NonFiniteError(fmt::format("the state became non-finite (NaN or Inf) at layer {} (run 0, token {}): the dynamics "
                                       "overflowed; check the weights and the step size. No result was written", l, row + 1));
    }
    if (!all_finite(W)) {
      Eigen::Index col = 0;
      while (col + 1 < W.cols() && W.col(col).allFinite()) ++col;
      throw NonFiniteError(fmt::format("tangent vector {} became non-finite (NaN or Inf) at layer {} (run 0): the linearisation "
                                       "overflowed; check the weights and the step size. No result was written", col + 1, l));
    }
    qr_log_step(Eigen::Map<Eigen::MatrixXd>(W.data(), n, k), S.log_r.row(l - 1), &S.unresolved_at, l);
    std::swap(V, W);
    std::swap(Z, Znext);
    if (opt.keep_states) S.states.push_back(Z.Z);
    if (progress) progress(static_cast<double>(l) / static_cast<double>(opt.depth));
  }

  // Finite-time exponents (coupling paper §7.5): running means of log R_ii after the burn-in.
  const long N = opt.depth - opt.burn_in;
  S.mu_running.resize(N, k);
  RowVec acc = RowVec::Zero(k);
  for (long j = 0; j < N; ++j) {
    acc += S.log_r.row(opt.burn_in + j);
    S.mu_running.row(j) = acc / static_cast<double>(j + 1);
  }
  S.mu = S.mu_running.row(N - 1).transpose();
  // Element by element with std::exp: exp(-inf) = 0 exactly (growth scale 0). Eigen's vectorised
  // exp clamps its argument and returns a denormal (~5.6e-309) there.
  S.gamma.resize(S.mu.size());
  for (Eigen::Index i = 0; i < S.mu.size(); ++i) S.gamma[i] = std::exp(S.mu[i]);
  S.final_state = std::move(Z);
  return S;
}

}  // namespace tokdyn
