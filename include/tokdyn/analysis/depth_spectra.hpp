#pragma once
// Top-k Lyapunov spectrum of the depth map of any model, matrix-free through its JVP.
//
// The depth map of a LayerMap, Z_l = F_l(Z_{l-1}), linearised along one trajectory, is the
// cocycle Phi(l, 0) = DF_l(Z_{l-1}) ... DF_1(Z_0) of the linearised depth dynamics (coupling
// paper eq. (10), Thm 4; its growth scales gamma = e^mu are the paper's convention, §2.9).
// Its top-k exponents are computed by discrete QR (Benettin / Eckmann-Ruelle; McDonald & Higham,
// ETNA 12 (2001)): k orthonormal tangent vectors Q (the columns of a (T d) x k matrix) are pushed
// through one layer by the model's own jvp, W = DF_l(Z_{l-1}) Q, and re-orthonormalised by a thin
// Householder QR, W = Q' R with diag(R) > 0; then
//   mu_i = (1/N) sum_{l = burn_in+1}^{depth} log R_l[i, i],   N = depth - burn_in,   gamma_i = e^{mu_i}.
// Nothing of size (T d) x (T d) is ever formed: one layer costs one batched jvp of k tangents
// plus an O(T d k^2) QR.
//
// Batching: the k tangents are ONE jvp call. The trajectory's state Z (one run of T tokens) is
// replicated into k runs of a Batch and the k tangents are stacked as the V of those runs: the
// LayerMap contract makes runs independent, so run j of the output is DF(Z)[q_j], and the model's
// matrix products see k T rows instead of T.
//
// Models on spheres (SSM layer (2), RoPE step (3), Mamba-2 with update=sphere): the state lives on
// the product of spheres (S^{d-1})^T; the initial tangents are projected onto its tangent space
// (each token's component along z_i removed) and the JVP of a normalised step maps into the tangent
// space again (Dpi(u)[w] is orthogonal to pi(u)). The radial directions are absent, so the spectrum
// is that of the cocycle on the T (d-1)-dimensional tangent bundle, and k is at most T (d-1). Off
// the spheres (Mamba-2's residual stream) the tangent space is all of R^{T d}.
#include <cstdint>
#include <functional>
#include <vector>

#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/engine/dynamics.hpp"
#include "tokdyn/core/tokens.hpp"

namespace tokdyn {

/// One layer of the trajectory and of its tangents. Given layer index l, the state Z (one run of
/// T tokens), Zrep (Z replicated into k runs) and V (k T x d: tangent j is run j), writes
/// Znext = F_l(Z) (one run) and W = DF_l(Z)[V] (k T x d, run j = tangent j).
using TangentStep =
    std::function<void(long l, const Batch& Z, const Batch& Zrep, const Tokens& V, Batch& Znext, Tokens& W)>;

/// The default step of a LayerMap on a double state: Znext by F.apply (the model's own forward
/// map), W by ONE F.jvp call on (Zrep, V). Float-state models (Mamba-2) should use a step that
/// computes value and tangent in double together instead (mamba2::BlockMap::step_double_tangents:
/// the value once, the k tangents sharing it), so that the trajectory and its linearisation are the same map.
TangentStep apply_and_jvp(const LayerMap& F);

struct DepthSpectrumOptions {
  int k = 4;               ///< number of exponents (tangent vectors)
  long depth = 100;        ///< layers applied
  long burn_in = 0;        ///< first layers whose log R_ii are not averaged (0 <= burn_in < depth)
  std::uint64_t seed = 0;  ///< initial tangents: Gaussian, stream (seed, 0xd5ec), projected, orthonormalised
  /// A given initial tangent frame instead (k * len x d: tangent i is rows i*len..(i+1)*len-1),
  /// projected onto the tangent space and orthonormalised like the drawn one; std::invalid_argument
  /// when it has the wrong shape, is not finite or is (numerically) rank-deficient there.
  const Tokens* tangents = nullptr;
  bool keep_states = false;  ///< keep the trajectory x(0..depth) in DepthSpectrum::states
};

struct DepthSpectrum {
  int k = 0;
  long depth = 0, burn_in = 0;
  long dim = 0;          ///< tangent-space dimension (T d, or T (d-1) on spheres)
  Vec mu;                ///< k finite-time Lyapunov exponents (in QR order: column i of Q)
  Vec gamma;             ///< growth scales e^{mu_i} (0 where some R_ii was exactly 0)
  Tokens tangents0;      ///< the initial frame before projection and orthonormalisation (k * len x d)
  std::vector<Tokens> states;  ///< x(0..depth) when keep_states
  Mat log_r;             ///< depth x k: log R_l[i, i] of every layer l = 1..depth (burn-in included); -inf where R_ii = 0
  Mat mu_running;        ///< (depth - burn_in) x k: row j = exponents over layers burn_in+1 .. burn_in+1+j
  Batch final_state;     ///< Z_depth
  /// Per exponent: the first layer at which its R_ii fell to round-off of the frame's image (the
  /// exponent from there on is round-off, not growth: a rank-deficient layer), or -1.
  std::vector<long> unresolved_at;
  /// The measured rows of log_r (layers burn_in+1..depth): the diagonal sequence a_i(l) = R_l[i, i]
  /// of the triangularised cocycle, whose Bohl / Steklov intervals give the dichotomy spectrum.
  Mat measured_log_r() const { return log_r.bottomRows(depth - burn_in); }
};

/// The step map of a VectorField through one fixed explicit (forward-Euler) step, as a LayerMap:
/// layer l maps Z at time t = t0 + (l-1) h to Z + h f(t, Z), retracted onto the spheres
/// (u -> u/|u| per token) when the field is on_sphere(). Its jvp is exact when the field's is:
/// W = V + h Df(t, Z)[V], then Dpi(u)[W] = (W - pi <pi, W>)/|u| on spheres. Holds a reference to
/// the field (which must outlive it). std::invalid_argument for h <= 0 or non-finite h, t0.
class EulerStepMap final : public LayerMap {
 public:
  EulerStepMap(const VectorField& f, double h, double t0 = 0.0);
  void apply(long l, Batch& Z) const override;
  void jvp(long l, const Batch& Z, const Tokens& V, Tokens& out) const override;
  bool has_exact_jvp() const override { return f_.has_exact_jvp(); }
  bool on_sphere() const override { return f_.on_sphere(); }

 private:
  const VectorField& f_;
  double h_, t0_;
};

/// Dimension of the tangent space at Z (one run): T d, or T (d-1) when F.on_sphere().
long tangent_dimension(const LayerMap& F, const Batch& Z);

/// The k initial tangents at Z (one run): k T x d, run j = tangent j, orthonormal as vectors of
/// R^{T d}, tangent to the spheres when F.on_sphere(). Deterministic in `seed`.
Tokens initial_tangents(const LayerMap& F, const Batch& Z, int k, std::uint64_t seed);

/// In place: the columns of the (rows x k) column-major view `W` are replaced by the thin Q of the
/// cocycles' Benettin step (cocycle::benettin_step: diag(R) >= 0, power-of-two scaling of far
/// images, LAPACK above a size), and log_diag[i] = log R_ii (-inf when R_ii = 0 exactly: growth
/// scale 0, Q's column i stays a unit vector orthogonal to the others). `unresolved` (k entries,
/// -1 = resolved), when given, receives `step` for a column whose R_ii fell to round-off.
void qr_log_step(Eigen::Map<Eigen::MatrixXd> W, Eigen::Ref<RowVec> log_diag, std::vector<long>* unresolved = nullptr,
                 long step = 0);

/// The top-k spectrum of F along the trajectory from Z0 (one run). `step` defaults to
/// apply_and_jvp(F). std::invalid_argument for k < 1, k > tangent_dimension, depth < 1,
/// burn_in outside [0, depth), Z0 with runs != 1 or not finite; std::domain_error (naming the
/// layer) when the state or a tangent stops being finite.
DepthSpectrum depth_spectrum(const LayerMap& F, const Batch& Z0, const DepthSpectrumOptions& opt,
                             const TangentStep& step = {}, const ProgressFn& progress = {});

}  // namespace tokdyn
