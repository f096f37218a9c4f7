// Dichotomy spectra estimated from activation trajectories (analysis/trajectory_spectra.hpp;
// coupling paper §6 E7, spec §7.4–§7.7): per-layer least-squares maps of the ensemble's differences,
// then the cocycles' own discrete QR, Bohl intervals, bundles and constant.
#include "tokdyn/analysis/trajectory_spectra.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <Eigen/QR>
#include <fmt/format.h>

#include "tokdyn/core/constants.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/parallel.hpp"

namespace tokdyn::trajectory_spectra {

namespace {

/// Column `col` of `out` = the run Z (one run, len x d, row-major) as a vector of R^(len d).
void put_run(const Batch& Z, Matrix& out, Eigen::Index col) {
  out.col(col) = Eigen::Map<const Eigen::VectorXd>(Z.Z.data(), Z.Z.size());
}

/// The first non-finite row of a run (for messages), 0-based.
Eigen::Index first_bad_row(const Tokens& X) {
  Eigen::Index row = 0;
  while (row + 1 < X.rows() && X.row(row).allFinite()) ++row;
  return row;
}

/// Growth-scale edges of Bohl intervals around `split` (as coupling-dichotomy's R11 reads them).
void read_edges(Dichotomy& out) {
  out.r_minus = out.r_plus_min = out.r_plus_max = kNaN;
  out.k_plus = out.k_neutral = 0;
  for (const cocycle::Interval& iv : out.columns) {
    if (iv.upper < out.split) {
      out.r_minus = std::isnan(out.r_minus) ? iv.upper : std::max(out.r_minus, iv.upper);
    } else if (iv.lower > out.split) {
      out.r_plus_min = std::isnan(out.r_plus_min) ? iv.lower : std::min(out.r_plus_min, iv.lower);
      ++out.k_plus;
    } else {
      ++out.k_neutral;
    }
    out.r_plus_max = std::isnan(out.r_plus_max) ? iv.upper : std::max(out.r_plus_max, iv.upper);
  }
}

}  // namespace

ValueStep value_of(const TangentStep& step) {
  if (!step) throw std::invalid_argument("value_of: expected a tangent step");
  return [step](long l, const Batch& Z, Batch& Znext) {
    const Tokens V = Tokens::Zero(Z.Z.rows(), Z.Z.cols());
    Tokens W;
    step(l, Z, Z, V, Znext, W);
  };
}

std::vector<Matrix> record_ensemble(const ValueStep& step, const Batch& Z0, const std::vector<Tokens>& starts, long depth) {
  if (Z0.runs != 1 || Z0.len < 1 || Z0.Z.rows() != Z0.len)
    throw std::invalid_argument(fmt::format("record_ensemble: expected one run of tokens, got {} runs of {}", Z0.runs, Z0.len));
  if (depth < 1) throw std::invalid_argument(fmt::format("record_ensemble: depth: expected >= 1, got {}", depth));
  if (!Z0.Z.allFinite()) throw std::invalid_argument("record_ensemble: the base state is not finite");
  const long E = static_cast<long>(starts.size());
  for (long e = 0; e < E; ++e) {
    const Tokens& S = starts[static_cast<std::size_t>(e)];
    if (S.rows() != Z0.Z.rows() || S.cols() != Z0.Z.cols())
      throw std::invalid_argument(fmt::format("record_ensemble: start {} is {} x {}; expected the base's {} x {}", e + 1, S.rows(),
                                              S.cols(), Z0.Z.rows(), Z0.Z.cols()));
    if (!S.allFinite()) throw std::invalid_argument(fmt::format("record_ensemble: start {} is not finite", e + 1));
  }
  const Eigen::Index n = Z0.Z.size();
  std::vector<Batch> cur;
  cur.reserve(static_cast<std::size_t>(E + 1));
  cur.push_back(Z0);
  for (const Tokens& S : starts) cur.push_back(Batch{S, 1, Z0.len});
  std::vector<Matrix> out(static_cast<std::size_t>(depth + 1), Matrix(n, E + 1));
  for (long m = 0; m <= E; ++m) put_run(cur[static_cast<std::size_t>(m)], out[0], m);
  Batch next;
  for (long l = 1; l <= depth; ++l)
    for (long m = 0; m <= E; ++m) {
      Batch& Z = cur[static_cast<std::size_t>(m)];
      step(l, Z, next);
      if (next.runs != 1 || next.Z.rows() != Z.Z.rows() || next.Z.cols() != Z.Z.cols())
        throw std::logic_error("record_ensemble: the step returned the wrong shape");
      if (!next.Z.allFinite())
        throw NonFiniteError(fmt::format("the {} became non-finite (NaN or Inf) at layer {} (token {}): the dynamics overflowed. "
                                         "No result was written",
                                         m == 0 ? std::string("base trajectory") : fmt::format("trajectory of ensemble member {}", m),
                                         l, first_bad_row(next.Z) + 1));
      std::swap(Z, next);
      put_run(Z, out[static_cast<std::size_t>(l)], m);
    }
  return out;
}

std::vector<Matrix> dense_jacobians(const TangentStep& step, const Batch& Z0, long depth) {
  if (Z0.runs != 1 || Z0.len < 1 || Z0.Z.rows() != Z0.len)
    throw std::invalid_argument(fmt::format("dense_jacobians: expected one run of tokens, got {} runs of {}", Z0.runs, Z0.len));
  if (depth < 1) throw std::invalid_argument(fmt::format("dense_jacobians: depth: expected >= 1, got {}", depth));
  const int len = Z0.len, d = Z0.dim();
  const Eigen::Index n = static_cast<Eigen::Index>(len) * d;
  if (n > 100000) throw std::invalid_argument(fmt::format("dense_jacobians: n = {} tangents per layer; expected at most 100000", n));
  Tokens I = Tokens::Zero(n * len, d);
  for (Eigen::Index j = 0; j < n; ++j) I.data()[j * n + j] = 1.0;  // run j (rows j len .. ) = e_j
  std::vector<Matrix> out;
  out.reserve(static_cast<std::size_t>(depth));
  Batch Z = Z0, Znext, Zrep{Tokens(), static_cast<int>(n), len};
  Tokens W;
  for (long l = 1; l <= depth; ++l) {
    Zrep.Z = Z.Z.replicate(n, 1);
    step(l, Z, Zrep, I, Znext, W);
    if (W.rows() != I.rows() || W.cols() != d || Znext.Z.rows() != len || Znext.Z.cols() != d)
      throw std::logic_error("dense_jacobians: the tangent step returned the wrong shapes");
    if (!Znext.Z.allFinite() || !W.allFinite())
      throw NonFiniteError(fmt::format("the state or its Jacobian became non-finite (NaN or Inf) at layer {}: the dynamics "
                                       "overflowed. No result was written", l));
    // Column j of the n x n Jacobian is run j of W: the column-major view of W's row-major data.
    out.emplace_back(Eigen::Map<const Eigen::MatrixXd>(W.data(), n, n));
    std::swap(Z, Znext);
  }
  return out;
}

std::vector<Matrix> differences(const std::vector<Matrix>& states, long sphere_d) {
  if (states.empty()) throw std::invalid_argument("differences: expected at least one layer of states");
  const Eigen::Index n = states[0].rows(), cols = states[0].cols();
  if (cols < 2) throw std::invalid_argument("differences: expected the base and at least one ensemble member (2 or more columns)");
  if (sphere_d < 0 || (sphere_d > 0 && n % sphere_d != 0))
    throw std::invalid_argument(fmt::format("differences: sphere_d = {}; expected 0 or a divisor of n = {}", sphere_d, n));
  std::vector<Matrix> D;
  D.reserve(states.size());
  for (const Matrix& X : states) {
    if (X.rows() != n || X.cols() != cols)
      throw std::invalid_argument(fmt::format("differences: a layer of {} x {} states; expected {} x {}", X.rows(), X.cols(), n, cols));
    Matrix Dl = X.rightCols(cols - 1).colwise() - X.col(0);
    if (sphere_d > 0)
      for (Eigen::Index t = 0; t < n; t += sphere_d) {
        const Eigen::VectorXd z = X.col(0).segment(t, sphere_d);
        const double zz = z.squaredNorm();
        if (zz > 0)
          for (Eigen::Index e = 0; e < Dl.cols(); ++e) Dl.col(e).segment(t, sphere_d) -= (z.dot(Dl.col(e).segment(t, sphere_d)) / zz) * z;
      }
    D.push_back(std::move(Dl));
  }
  return D;
}

Matrix tangent_projector(const Eigen::VectorXd& x, long d) {
  const Eigen::Index n = x.size();
  if (d < 1 || n % d != 0)
    throw std::invalid_argument(fmt::format("tangent_projector: d = {}; expected a divisor of n = {}", d, n));
  Matrix P = Matrix::Identity(n, n);
  for (Eigen::Index t = 0; t < n; t += d) {
    const Eigen::VectorXd z = x.segment(t, d);
    const double zz = z.squaredNorm();
    if (zz > 0) P.block(t, t, d, d) -= z * z.transpose() / zz;
  }
  return P;
}

LayerFit fit_layer(const Matrix& D0, const Matrix& D1, double rcond) {
  if (D0.rows() != D1.rows() || D0.cols() != D1.cols() || D0.cols() < 1 || D0.rows() < 1)
    throw std::invalid_argument(fmt::format("fit_layer: differences of {} x {} and {} x {}; expected equal shapes n x E, E >= 1",
                                            D0.rows(), D0.cols(), D1.rows(), D1.cols()));
  if (!(rcond >= 0) || !std::isfinite(rcond)) throw std::invalid_argument(fmt::format("fit_layer: rcond = {}; expected >= 0", rcond));
  if (!D0.allFinite() || !D1.allFinite()) throw std::invalid_argument("fit_layer: the differences are not finite");
  LayerFit f;
  const Eigen::Index n = D0.rows(), E = D0.cols();
  const bool dense = E >= n;
  if (D0.isZero(0.0)) {  // no perturbation survived: the data determine nothing (Â = 0)
    if (dense) f.A = Matrix::Zero(n, n);
    else f.U = Matrix::Zero(n, E);
    f.cond = kNaN;
    f.residual = D1.isZero(0.0) ? 0.0 : 1.0;
    return f;
  }
  // Complete orthogonal decompositions (column-pivoted Householder QR, then a QR of the rank rows):
  // E >= n: D0^T (E x n), and Â^T = the minimum-norm solution X of min ||D0^T X - D1^T||_F;
  // E < n:  D0 (n x E), kept, and Â Q = D1 C with C the minimum-norm solution of min ||D0 C - Q||_F.
  Eigen::CompleteOrthogonalDecomposition<Matrix> cod;
  if (rcond > 0) cod.setThreshold(rcond);
  if (dense) {
    cod.compute(D0.transpose());
    f.A = cod.solve(D1.transpose()).transpose();
  } else {
    cod.compute(D0);
    f.U = D1;
  }
  f.rank = static_cast<long>(cod.rank());
  if (f.rank > 0) {
    const Eigen::VectorXd t = cod.matrixT().diagonal().head(f.rank).cwiseAbs();
    f.cond = t.maxCoeff() / t.minCoeff();
  } else {
    f.cond = kNaN;
  }
  if (!dense) f.D0 = std::move(cod);
  const double d1 = D1.norm();
  Matrix AD0;
  f.apply(D0, AD0);
  f.residual = d1 > 0 ? (AD0 - D1).norm() / d1 : 0.0;
  return f;
}

std::vector<LayerFit> fit_layers(const std::vector<Matrix>& D, double rcond) {
  if (D.size() < 2) throw std::invalid_argument("fit_layers: expected the differences of at least two layers");
  return parallel_map(static_cast<long>(D.size()) - 1, [&](long l) {
    return fit_layer(D[static_cast<std::size_t>(l)], D[static_cast<std::size_t>(l) + 1], rcond);
  });
}

Matrix frame_from(const Matrix& D0, long k) {
  if (k < 1 || k > D0.cols() || k > D0.rows())
    throw std::invalid_argument(fmt::format("frame_from: k = {}; expected 1 <= k <= min(n, E) = {}", k, std::min(D0.rows(), D0.cols())));
  Matrix Z = D0.leftCols(k), Q, R;
  double scale = 0;
  for (long j = 0; j < k; ++j) scale = std::max(scale, Z.col(j).norm());
  Eigen::RowVectorXd logs(k);
  std::vector<long> unresolved(static_cast<std::size_t>(k), -1);
  cocycle::benettin_step(Z, Q, R, logs, unresolved, 0);
  for (long j = 0; j < k; ++j)
    if (!(scale > 0) || !(logs[j] > std::log(scale) + std::log(1e-10)))
      throw std::invalid_argument(fmt::format("the first {} differences are rank-deficient: difference {} is (to 1e-10) a combination of "
                                              "the ones before it; expected k independent perturbations",
                                              k, j + 1));
  return Q;
}

Dichotomy dichotomy(const cocycle::Cocycle& c, long H, double split, long burn_in, long stride) {
  if (!(split > 0) || !std::isfinite(split))
    throw std::invalid_argument(fmt::format("dichotomy: split = {}; expected a finite growth scale > 0", split));
  if (stride < 1) throw std::invalid_argument(fmt::format("dichotomy: stride = {}; expected >= 1", stride));
  const long L = c.length();
  std::vector<Matrix> B;
  B.reserve(static_cast<std::size_t>(L));
  for (long l = 0; l < L; ++l) B.push_back(c.has_matrices() ? c.matrices()[static_cast<std::size_t>(l)] / split : c.matrix(l) / split);
  const cocycle::Cocycle cs = cocycle::Cocycle::from_matrices(std::move(B));
  Dichotomy out;
  out.split = split;
  out.H = H;
  const cocycle::QrResult qr = cocycle::qr_iterate(cs);
  // Intervals of the rescaled cocycle, reported as growth scales of the cocycle itself.
  out.columns = cocycle::bohl_intervals(qr.log_diag, H, burn_in);
  out.merged = cocycle::merge_intervals(out.columns);
  out.decision = cocycle::decide_hyperbolic(out.merged, cocycle::spectrum_error(qr.log_diag, burn_in).tolerance());
  for (auto* ivs : {&out.columns, &out.merged})
    for (cocycle::Interval& iv : *ivs) {
      iv.lower *= split;
      iv.upper *= split;
    }
  read_edges(out);
  out.C = kNaN;
  if (out.decision.verdict != cocycle::Verdict::Yes) {
    out.why_no_C = fmt::format("the growth scale {} is not outside the spectrum (hyperbolic: {}, margin {:.3g} against tolerance {:.3g})",
                               split, cocycle::verdict_name(out.decision.verdict), out.decision.margin, out.decision.tolerance);
  } else if (!(out.r_minus > 0)) {
    out.why_no_C = std::isnan(out.r_minus) ? "no spectral interval below the split" : "the intervals below the split are at growth scale 0";
  } else if (const cocycle::BundlesOutcome found = cocycle::find_two_sided_bundles(cs)) {
    const cocycle::Bundles& b = *found.bundles;
    const cocycle::GrowthEnvelope env = cocycle::growth_envelope(cs, b, stride);
    double C = cocycle::constant_minus(env, out.r_minus / split);
    if (b.k > 0 && out.r_plus_min > 0) C = std::max(C, cocycle::constant_plus(env, out.r_plus_min / split));
    if (std::isfinite(C)) out.C = C;
    else out.why_no_C = "the constant is not finite";
  } else {
    out.why_no_C = "no two-sided bundles: " + found.why_not;
  }
  return out;
}

Estimate estimate(const std::vector<Matrix>& D, const EstimateOptions& opt) {
  if (D.size() < 2) throw std::invalid_argument("estimate: expected the differences of at least two layers (L >= 1)");
  const long L = static_cast<long>(D.size()) - 1;
  const Eigen::Index n = D[0].rows(), E = D[0].cols();
  for (const Matrix& Dl : D)
    if (Dl.rows() != n || Dl.cols() != E)
      throw std::invalid_argument(fmt::format("estimate: differences of {} x {} and {} x {}; expected one shape n x E", n, E, Dl.rows(),
                                              Dl.cols()));
  if (opt.k < 1 || opt.k > std::min(n, E))
    throw std::invalid_argument(fmt::format("estimate: k = {}; expected 1 <= k <= min(n, E) = min({}, {})", opt.k, n, E));
  if (opt.burn_in < 0 || opt.burn_in >= L)
    throw std::invalid_argument(fmt::format("estimate: burn_in = {}; expected 0 <= burn_in < L = {}", opt.burn_in, L));
  if (opt.H < 0 || opt.H > L - opt.burn_in)
    throw std::invalid_argument(fmt::format("estimate: H = {}; expected 0 <= H <= L - burn_in = {}", opt.H, L - opt.burn_in));
  if (opt.with_dichotomy && opt.H < 1) throw std::invalid_argument("estimate: the dichotomy needs a Steklov window H >= 1");
  Estimate est;
  est.fits = fit_layers(D, opt.rcond);
  est.min_rank = n;
  for (const LayerFit& f : est.fits) {
    est.min_rank = std::min(est.min_rank, f.rank);
    if (std::isfinite(f.cond)) est.max_cond = std::max(est.max_cond, f.cond);
  }
  // The Â cocycle as a callback (no n x n matrix when E < n); dense only for the full-dimension dichotomy.
  const std::vector<LayerFit>& fits = est.fits;
  const cocycle::Cocycle c(L, n, [&fits](long l, const Matrix& Q, Matrix& out) { fits[static_cast<std::size_t>(l)].apply(Q, out); });
  cocycle::QrOptions q;
  q.k = opt.k;
  if (opt.Q0.size() == 0) {
    q.Q0 = frame_from(D[0], opt.k);
  } else {
    if (opt.Q0.rows() != n || opt.Q0.cols() != opt.k)
      throw std::invalid_argument(fmt::format("estimate: Q0 is {} x {}; expected n x k = {} x {}", opt.Q0.rows(), opt.Q0.cols(), n, opt.k));
    q.Q0 = opt.Q0;
  }
  est.qr = cocycle::qr_iterate(c, q);
  est.spectrum = cocycle::lyapunov_spectrum(est.qr.log_diag, opt.burn_in);
  if (opt.H > 0) est.intervals = cocycle::bohl_intervals(est.qr.log_diag, opt.H, opt.burn_in);
  if (opt.with_dichotomy && est.min_rank == n) {
    est.dich = dichotomy(c, opt.H, opt.split, opt.burn_in, opt.stride);
    est.has_dichotomy = true;
  } else if (opt.with_dichotomy) {
    est.dich.C = kNaN;
    est.dich.why_no_C = fmt::format("a fit of rank {} < n = {}: the directions outside the perturbations' span are not estimated",
                                    est.min_rank, n);
  }
  return est;
}

}  // namespace tokdyn::trajectory_spectra
