// Preset coupling-e7: the coupling paper's open experiment E7 (§6 "Identification in practice";
// spec §6.3): estimate the dichotomy spectrum and the dichotomy constant C of a model's depth cocycle
// from activation trajectories alone (no weights, no JVPs), and judge the estimate against tokdyn's
// exact JVP spectra of the same model along the same base trajectory.
//
//   1. A model from the registry (as depth-spectra: knob `model` and the union of the models' knobs)
//      and its start state X_0; E_max perturbed starts X_0 + eps |X_0|_F v_e / |v_e|_F (v_e Gaussian,
//      stream (seed, 0xe7, 1, e); on spheres each token renormalised); every trajectory over `depth`
//      layers by the model's own step (analysis/trajectory_spectra.hpp record_ensemble).
//   2. The reference: depth_spectrum (the model's exact JVP, matrix-free discrete QR) from the frame
//      of the first k perturbation directions; for C and the full intervals the dense Jacobians (n
//      JVPs per layer, n = rows x d <= 256; on spheres times the tangent projector) through
//      trajectory_spectra::dichotomy.
//   3. For every noise level sigma and ensemble size E: the observed states are the first 1 + E
//      trajectories plus sigma rms(X_l) xi (xi standard normal, stream (seed, 0xe7, 2, l), the same
//      draws for every sigma and E: common random numbers); the estimator fits Â_l and runs the same
//      QR, intervals and C (trajectory_spectra::estimate).
//   4. A linear cocycle with closed-form exponents (G1 weight-tied, B = I + S diag(sigma) S^-1, n = the
//      number of linear_sigma entries)
//      through the same estimator at noise 0 and the largest E: exact to round-off.
// Outputs: spectra.csv, error.csv, intervals.csv, linear.csv, checks.csv; summaries; figure coupling-e7.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/analysis/depth_spectra.hpp"
#include "tokdyn/analysis/trajectory_spectra.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/norms.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/inputs.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "tokdyn/models/transformer/setup.hpp"

namespace tokdyn {
namespace {

namespace ts = trajectory_spectra;
using cocycle::Matrix;
using tokdyn::kNaN;

/// Largest n = rows x d for which the exact dense Jacobians (n JVPs per layer) and the full-dimension
/// dichotomy (O(depth^2 n^3)) are computed.
constexpr long kE7DenseMax = 256;


/// Max over the first k entries of |a_i - b_i| (NaN when any is not finite).
double e7_max_abs_diff(const Eigen::VectorXd& a, const Eigen::VectorXd& b, long k) {
  double m = 0;
  for (long i = 0; i < k; ++i) {
    const double d = std::abs(a(i) - b(i));
    if (!std::isfinite(d)) return kNaN;
    m = std::max(m, d);
  }
  return m;
}

/// Largest |log| difference of the ends of per-column intervals (NaN when an end is 0 on one side only).
double e7_interval_error(const std::vector<cocycle::Interval>& a, const std::vector<cocycle::Interval>& b) {
  double m = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    for (const auto& [x, y] : {std::pair{a[i].lower, b[i].lower}, std::pair{a[i].upper, b[i].upper}}) {
      if (x == y) continue;
      const double d = std::abs(std::log(x) - std::log(y));
      if (!std::isfinite(d)) return kNaN;
      m = std::max(m, d);
    }
  return m;
}

struct E7Row {
  long E = 0;
  double noise = 0;
  double err = kNaN, err_intervals = kNaN, err_full = kNaN, C = kNaN, C_err = kNaN;
  std::string verdict;   ///< empty: no full-dimension spectrum of the estimate
  std::string why_no_C;  ///< the estimate's reason for no C
};

/// The linear check (closed form): G1 weight-tied B, trajectories X_(l+1) = B X_l, the estimator at
/// noise 0 with E members from the frame of B's eigenvectors (then every R_ii = |1 + sigma_i|).
struct E7Linear {
  double fit_err = kNaN, exp_err = kNaN, C = kNaN, C_exact = kNaN, proj = kNaN, kappa_S = kNaN, max_cond = kNaN;
  Eigen::VectorXd mu_hat, mu_exact;
  std::string why_no_C;
};

E7Linear e7_linear(RunContext& ctx, const std::vector<double>& sigma, long E, long L, double kappa, std::uint64_t seed, long H) {
  const long d = static_cast<long>(sigma.size());
  const std::vector<Matrix> Bs = cocycle::family_g1(L, sigma, kappa, seed);
  const Matrix& B = Bs[0];
  write_input_matrix(ctx, "linear_B.npy", B, "the linear check's weight-tied generator B = I + S diag(sigma) S^-1 (G1)");
  // The base trajectory is the cocycle's fixed point 0 and member e starts at a unit Gaussian
  // direction (stream (seed, 0xe7, 4, e)): the differences are the trajectories themselves, with no
  // cancellation against a large base state (that round-off is the nonlinear model's, not the
  // estimator's).
  std::vector<Matrix> states(static_cast<std::size_t>(L + 1), Matrix(d, E + 1));
  Matrix cur = Matrix::Zero(d, E + 1);
  for (long e = 1; e <= E; ++e) {
    Tokens v(1, d);
    Rng(seed, {0xe7, 4, static_cast<std::uint64_t>(e)}).fill_normal(v);
    cur.col(e) = Eigen::Map<const Eigen::VectorXd>(v.data(), d) / v.norm();
  }
  for (long l = 0; l <= L; ++l) {
    states[static_cast<std::size_t>(l)] = cur;
    cur = B * cur;
  }
  const std::vector<Matrix> D = ts::differences(states);
  // Frame: B's eigenvectors by decreasing growth scale |1 + sigma_i| (a nested invariant flag, so the
  // QR's R_ii are |1 + sigma_i| at every layer: exponents log |1 + sigma_i| with no transient).
  const Matrix S = cocycle::family_g1_basis(d, kappa, seed);
  std::vector<long> order(static_cast<std::size_t>(d));
  for (long i = 0; i < d; ++i) order[static_cast<std::size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&sigma](long a, long b) {
    return std::abs(1 + sigma[static_cast<std::size_t>(a)]) > std::abs(1 + sigma[static_cast<std::size_t>(b)]);
  });
  Matrix F(d, d);
  E7Linear out;
  out.mu_exact.resize(d);
  for (long i = 0; i < d; ++i) {
    F.col(i) = S.col(order[static_cast<std::size_t>(i)]);
    out.mu_exact(i) = std::log(std::abs(1 + sigma[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])]));
  }
  Matrix Q, R;
  Eigen::RowVectorXd logs(d);
  std::vector<long> unresolved(static_cast<std::size_t>(d), -1);
  cocycle::benettin_step(F, Q, R, logs, unresolved, 0);
  ts::EstimateOptions o;
  o.k = d;
  o.Q0 = Q;
  o.H = H;
  o.with_dichotomy = true;
  const ts::Estimate est = ts::estimate(D, o);
  out.fit_err = 0;
  for (const ts::LayerFit& f : est.fits) out.fit_err = std::max(out.fit_err, spectral_norm(f.matrix() - B) / spectral_norm(B));
  out.max_cond = est.max_cond;
  out.mu_hat = est.spectrum.mu;
  out.exp_err = e7_max_abs_diff(est.spectrum.mu, out.mu_exact, d);
  out.C = est.dich.C;
  out.why_no_C = est.dich.why_no_C;
  out.C_exact = ts::dichotomy(cocycle::Cocycle::from_matrices(Bs), H).C;
  // Thm 5 step (6): max |P_±| <= C <= kappa(S), P_+ the spectral projector of the growing eigenvalues.
  Eigen::VectorXd up(d);
  for (long i = 0; i < d; ++i) up(i) = std::abs(1 + sigma[static_cast<std::size_t>(i)]) > 1 ? 1.0 : 0.0;
  const Matrix Sinv = S.inverse();
  const Matrix Pp = S * up.asDiagonal() * Sinv, Pm = Matrix::Identity(d, d) - Pp;
  out.proj = std::max(spectral_norm(Pp), spectral_norm(Pm));
  out.kappa_S = spectral_norm(S) * spectral_norm(Sinv);
  return out;
}

void run_e7(const Params& P, RunContext& ctx) {
  const std::string model = P.get_string("model");
  const long depth = P.get_int("depth"), burn_in = P.get_int("burn_in"), k = P.get_int("k");
  const double eps = P.get_double("amplitude"), split = P.get_double("split");
  const auto seed = static_cast<std::uint64_t>(P.get_int("seed"));
  std::vector<long> Es = P.get_int_list("ensembles");
  std::vector<double> noises = P.get_double_list("noise");
  if (burn_in >= depth) throw InputError(fmt::format("parameter 'burn_in': expected burn_in < depth = {}, got {}", depth, burn_in));
  const long N = depth - burn_in;
  const long H = P.get_int("H") == 0 ? std::max(1L, N / 4) : P.get_int("H");
  if (H > N)
    throw InputError(fmt::format("parameter 'H': Steklov window {} is longer than the measured window depth - burn_in = {}", H, N));
  for (long E : Es)
    if (E < k)
      throw InputError(fmt::format("parameter 'ensembles': ensemble size {} is below k = {}; expected every size >= k (the QR frame "
                                   "of k directions must lie in the span of the perturbations)", E, k));
  std::sort(Es.begin(), Es.end());
  std::sort(noises.begin(), noises.end());
  const long E_max = Es.back();

  ModelInstance S = build_model(model, P, ctx);
  if (S.Z0.runs != 1)
    throw InputError(fmt::format("parameter 'token_ids': {} runs of token ids; coupling-e7 follows one base trajectory, expected [1, tokens]",
                                 S.Z0.runs));
  const int len = S.Z0.len, d = S.Z0.dim();
  const long n = static_cast<long>(len) * d;
  const bool sphere = S.map->on_sphere();
  const long dim = tangent_dimension(*S.map, S.Z0);
  if (k > dim)
    throw InputError(fmt::format("parameter 'k': expected at most the tangent dimension {} of model={}, got {}", dim, model, k));
  const TangentStep step = S.step ? S.step : apply_and_jvp(*S.map);

  // ---- the ensemble ------------------------------------------------------------------------------------
  const double x0norm = S.Z0.Z.norm();
  if (!(x0norm > 0)) throw InputError(fmt::format("model={}: the start state is 0; the perturbations are relative to |X_0|", model));
  std::vector<Tokens> dirs, starts;
  std::vector<Matrix> dir_mats;
  for (long e = 1; e <= E_max; ++e) {
    Tokens v(len, d);
    Rng(seed, {0xe7, 1, static_cast<std::uint64_t>(e)}).fill_normal(v);
    Tokens X = S.Z0.Z + (eps * x0norm / v.norm()) * v;
    if (sphere)
      for (Eigen::Index i = 0; i < X.rows(); ++i) X.row(i) /= X.row(i).norm();
    dir_mats.emplace_back(v);
    dirs.push_back(std::move(v));
    starts.push_back(std::move(X));
  }
  write_input_stack(ctx, "perturbations.npy", dir_mats,
                    "[E_max, rows, d]: the Gaussian directions v_e; member e starts at X_0 + eps |X_0|_F v_e / |v_e|_F"
                    " (each token renormalised on spheres)");
  std::vector<Matrix> states;
  {
    auto t = ctx.phase("trajectories");
    states = ts::record_ensemble(ts::value_of(step), S.Z0, starts, depth);
  }
  // Standard normal observation noise xi_l (n x (1 + E_max)), the same draws for every level and size.
  std::vector<Matrix> xi(static_cast<std::size_t>(depth + 1));
  std::vector<Matrix> xi_rows;
  Eigen::VectorXd rms(depth + 1);
  for (long l = 0; l <= depth; ++l) {
    Tokens z(E_max + 1, n);
    Rng(seed, {0xe7, 2, static_cast<std::uint64_t>(l)}).fill_normal(z);
    xi[static_cast<std::size_t>(l)] = z.transpose();
    xi_rows.emplace_back(z);
    rms(l) = states[static_cast<std::size_t>(l)].col(0).norm() / std::sqrt(static_cast<double>(n));
  }
  if (noises.back() > 0)
    write_input_stack(ctx, "noise.npy", xi_rows,
                      "[depth + 1, 1 + E_max, rows x d]: standard normal xi; the observation of trajectory m (0: the base) at layer l "
                      "is X + noise rms(X_l) xi[l, m]");

  // ---- the reference: the exact JVP spectrum from the frame of the first k directions ----------------------
  DepthSpectrumOptions o;
  o.k = static_cast<int>(k);
  o.depth = depth;
  o.burn_in = burn_in;
  Tokens frame(k * len, d);
  for (long i = 0; i < k; ++i) frame.middleRows(i * len, len) = dirs[static_cast<std::size_t>(i)];
  o.tangents = &frame;
  DepthSpectrum ref;
  {
    auto t = ctx.phase("exact spectrum");
    ref = depth_spectrum(*S.map, S.Z0, o, S.step, {});
  }
  const Matrix ref_log = ref.log_r;  // depth x k (layer l = row l-1), the same rows as the estimate's
  const std::vector<cocycle::Interval> ref_iv = cocycle::bohl_intervals(ref_log, H, burn_in);
  // The dense reference for C and the full-dimension intervals (small n).
  const bool dense = n <= kE7DenseMax;
  const std::string why_no_dense = dense ? "" : fmt::format("n = rows x d = {} > {}: no dense Jacobians", n, kE7DenseMax);
  ts::Dichotomy ref_dich;
  double dense_vs_jvp = kNaN;
  const long stride = std::max(1L, depth / 32);
  if (dense) {
    auto t = ctx.phase("exact dichotomy");
    std::vector<Matrix> J = ts::dense_jacobians(step, S.Z0, depth);
    // On spheres the cocycle is that of the tangent bundle, extended by 0 on the radial directions:
    // J_l P_l, P_l the tangent projector at the base state entering the layer (the estimate's
    // differences are projected the same way, so the two cocycles are of one object).
    if (sphere)
      for (long l = 0; l < depth; ++l) J[static_cast<std::size_t>(l)] *= ts::tangent_projector(states[static_cast<std::size_t>(l)].col(0), d);
    const cocycle::Cocycle cj = cocycle::Cocycle::from_matrices(J);
    cocycle::QrOptions q;
    q.k = k;
    // The frame depth_spectrum started from: its first k directions, projected (spheres) and orthonormalised.
    q.Q0 = Eigen::Map<const Eigen::MatrixXd>(frame.data(), n, k);
    if (sphere) {
      const Matrix Pt = ts::tangent_projector(states[0].col(0), d);
      q.Q0 = Pt * q.Q0;
    }
    Matrix Qf, Rf;
    Eigen::RowVectorXd lg(k);
    std::vector<long> un(static_cast<std::size_t>(k), -1);
    cocycle::benettin_step(q.Q0, Qf, Rf, lg, un, 0);
    q.Q0 = Qf;
    const auto dq = cocycle::lyapunov_spectrum(cocycle::qr_iterate(cj, q).log_diag, burn_in);
    dense_vs_jvp = e7_max_abs_diff(dq.mu, ref.mu, k);
    ref_dich = ts::dichotomy(cj, H, split, burn_in, stride);
  }

  // ---- the estimates ---------------------------------------------------------------------------------------
  CsvWriter sp = ctx.table("spectra.csv");
  sp.blank_nonfinite({"mu_exact", "mu_estimate", "error"});
  CsvWriter er = ctx.table("error.csv");
  er.blank_nonfinite({"error", "error_intervals", "error_full_intervals", "C_estimate", "C_exact", "C_error", "cond_max"});
  CsvWriter ivs = ctx.table("intervals.csv");
  for (std::size_t i = 0; i < ref_iv.size(); ++i) {
    ivs.cell(std::string("exact")).empty().empty().cell(static_cast<long>(i)).cell(ref_iv[i].lower).cell(ref_iv[i].upper);
    ivs.end_row();
  }
  // Every direction's Bohl interval (the full QR of the n x n cocycles), for the dichotomy and C.
  std::optional<CsvWriter> full;
  if (dense) full.emplace(ctx.dir, *ctx.outputs->table("dichotomy.csv"));  // (ctx.table, held conditionally)
  auto write_full = [&](const std::string& source, long E, double sigma, const ts::Dichotomy& dc) {
    for (std::size_t i = 0; i < dc.columns.size(); ++i) {
      full->cell(source);
      if (source == "exact") full->empty().empty();
      else full->cell(E).cell(sigma);
      full->cell(static_cast<long>(i)).cell(dc.columns[i].lower).cell(dc.columns[i].upper);
      full->end_row();
    }
  };
  if (dense) write_full("exact", 0, 0.0, ref_dich);
  std::vector<E7Row> rows;
  ts::EstimateOptions eo;
  eo.k = k;
  eo.burn_in = burn_in;
  eo.rcond = P.get_double("rcond");
  eo.H = H;
  eo.with_dichotomy = dense;
  eo.split = split;
  eo.stride = stride;
  const long total = static_cast<long>(Es.size() * noises.size());
  long done = 0;
  {
    auto t = ctx.phase("estimates");
    for (double sigma : noises)
      for (long E : Es) {
        std::vector<Matrix> obs(static_cast<std::size_t>(depth + 1));
        for (long l = 0; l <= depth; ++l) {
          const auto li = static_cast<std::size_t>(l);
          obs[li] = states[li].leftCols(E + 1);
          if (sigma > 0) obs[li] += (sigma * rms(l)) * xi[li].leftCols(E + 1);
        }
        const ts::Estimate est = ts::estimate(ts::differences(obs, sphere ? d : 0), eo);
        E7Row r;
        r.E = E;
        r.noise = sigma;
        r.err = e7_max_abs_diff(est.spectrum.mu, ref.mu, k);
        r.err_intervals = e7_interval_error(est.intervals, ref_iv);
        for (long i = 0; i < k; ++i) {
          sp.cell(E).cell(sigma).cell(i).cell(ref.mu(i)).cell(est.spectrum.mu(i)).cell(est.spectrum.mu(i) - ref.mu(i));
          sp.end_row();
        }
        for (std::size_t i = 0; i < est.intervals.size(); ++i) {
          ivs.cell(std::string("estimate")).cell(E).cell(sigma).cell(static_cast<long>(i)).cell(est.intervals[i].lower)
              .cell(est.intervals[i].upper);
          ivs.end_row();
        }
        r.why_no_C = est.dich.why_no_C;
        if (est.has_dichotomy) {
          write_full("estimate", E, sigma, est.dich);
          r.err_full = e7_interval_error(est.dich.columns, ref_dich.columns);
          r.C = est.dich.C;
          r.C_err = std::abs(est.dich.C - ref_dich.C) / ref_dich.C;
          r.verdict = cocycle::verdict_name(est.dich.decision.verdict);
        }
        er.cell(E).cell(sigma).cell(r.err).cell(r.err_intervals).cell(r.err_full).cell(est.min_rank).cell(est.max_cond > 0 ? est.max_cond : kNaN);
        er.cell(r.C).cell(dense ? ref_dich.C : kNaN).cell(r.C_err);
        if (est.has_dichotomy) er.cell(r.verdict);
        else er.empty();
        if (dense) er.cell(std::string(cocycle::verdict_name(ref_dich.decision.verdict)));
        else er.empty();
        er.end_row();
        rows.push_back(r);
        if (ctx.progress) ctx.progress(static_cast<double>(++done) / static_cast<double>(total));
      }
  }

  // ---- the linear check --------------------------------------------------------------------------------------
  const long lin_L = P.get_int("linear_depth");
  const std::vector<double>& lin_sigma = P.get_double_list("linear_sigma");
  for (double v : lin_sigma)
    if (std::abs(std::abs(1.0 + v) - 1.0) < 1e-9 || std::abs(1.0 + v) < 1e-9)
      throw InputError(fmt::format("parameter 'linear_sigma': entry {} gives the growth scale |1 + sigma| = {:g}; expected growth scales "
                                   "away from 1 (a dichotomy) and from 0 (an invertible generator)", v, std::abs(1.0 + v)));
  const long lin_n = static_cast<long>(lin_sigma.size());
  const std::string lin_na = E_max < lin_n ? fmt::format("the largest ensemble E = {} is below n = {} of the linear cocycle", E_max, lin_n) : "";
  E7Linear lin;
  if (lin_na.empty()) {
    auto t = ctx.phase("linear check");
    lin = e7_linear(ctx, lin_sigma, E_max, lin_L, P.get_double("linear_kappa"), seed, std::max(1L, lin_L / 4));
    CsvWriter lc = ctx.table("linear.csv");
    for (Eigen::Index i = 0; i < lin.mu_exact.size(); ++i) {
      lc.cell(static_cast<long>(i)).cell(lin.mu_exact(i)).cell(lin.mu_hat(i)).cell(lin.mu_hat(i) - lin.mu_exact(i));
      lc.end_row();
    }
  }

  // ---- checks ----------------------------------------------------------------------------------------------
  CheckTable checks(ctx.dir / "checks.csv");
  const double eps_m = std::numeric_limits<double>::epsilon();
  // Round-off of a least-squares fit: eps_machine x cond of the data, with room for the n columns.
  const double lin_tol = 1e3 * eps_m * std::max(1.0, lin.max_cond);
  checks.add_unless(lin_na, "E7 linear fit", "E7: on a linear cocycle the per-layer least-squares maps are the generator itself (noise 0, E >= n)",
                    "max_l |Â_l - B|_2 / |B|_2", [&] { return lin.fit_err; }, fmt::format("<= 1e3 eps cond(D) = {:.3g}", lin_tol),
                    [&](double v) { return v <= lin_tol; },
                    closed_form(fmt::format("B = I + S diag(sigma) S^-1 (G1, sigma = {}, kappa(S) = {:g}): the generator of the trajectories",
                                            fmt::join(lin_sigma, ", "), P.get_double("linear_kappa"))));
  checks.add_unless(lin_na, "E7 linear exponents", "E7: on a linear cocycle the estimated exponents are log |1 + sigma_i| (noise 0, E >= n)",
                    "max_i |mu_hat_i - log |1 + sigma_i||", [&] { return lin.exp_err; }, "<= 1e-9", [](double v) { return v <= 1e-9; },
                    closed_form("log |1 + sigma_i|: every R_ii of the QR from B's eigenvector flag is |1 + sigma_i| (Thm 5, weight-tied)"));
  checks.add_unless(lin_na.empty() && std::isnan(lin.C) ? "no constant from the estimate: " + lin.why_no_C : lin_na, "E7 linear C",
                    "Thm 5 step (6): the estimated dichotomy constant lies between the projector norms and kappa(S)", "C estimate",
                    [&] { return lin.C; }, fmt::format("in [{:.6g}, {:.6g}]", lin.proj, lin.kappa_S),
                    [&](double v) { return v >= lin.proj * (1 - 1e-9) && v <= lin.kappa_S * (1 + 1e-9); },
                    bound("Thm 5 step (6): max |P_±| <= C <= kappa(S)"));
  checks.add_unless(lin_na.empty() && (std::isnan(lin.C) || std::isnan(lin.C_exact)) ? "no constant: " + lin.why_no_C : lin_na,
                    "E7 linear C = C(B)", "E7: the estimated dichotomy constant is the generator's own (same window, H and split)",
                    "|C_hat - C(B)| / C(B)", [&] { return std::abs(lin.C - lin.C_exact) / lin.C_exact; }, "<= 1e-6",
                    [](double v) { return v <= 1e-6; },
                    consistency("trajectory_spectra::dichotomy of the generator B itself (the same routine as the estimate's)"));

  // The model: smallest noise, largest ensemble.
  const E7Row* best = nullptr;
  for (const E7Row& r : rows)
    if (r.noise == noises.front() && r.E == E_max) best = &r;
  const double tol = P.get_double("tolerance");
  checks.add_unless(why_no_dense, "E7 exact reference",
                    "the dense-Jacobian cocycle's top-k QR exponents equal the matrix-free JVP spectrum's (same frame)",
                    "max_i |mu_dense - mu_jvp|", [&] { return dense_vs_jvp; }, "<= 1e-10", [](double v) { return v <= 1e-10; },
                    consistency("depth_spectrum (batched jvp) vs qr_iterate on dense_jacobians (n jvp columns per layer)"));
  checks.add("E7 exponents", fmt::format("E7: the top-{} exponents from trajectories alone match the exact JVP spectrum (noise {:g}, E = {})",
                                         k, noises.front(), E_max),
             "max_i |mu_hat_i - mu_i| (1/layer)", best->err, fmt::format("<= tolerance = {:g}", tol), best->err <= tol,
             independent("depth_spectrum: the model's exact JVP along the base trajectory (the estimator uses no JVP)"));
  checks.add("E7 intervals", fmt::format("E7: the Bohl intervals (H = {}) of the top-{} QR columns match the exact ones (noise {:g}, E = {})", H, k,
                                         noises.front(), E_max),
             "max |log end_hat - log end| (1/layer)", best->err_intervals, fmt::format("<= tolerance = {:g}", tol), best->err_intervals <= tol,
             independent("bohl_intervals of depth_spectrum's log R_ii (exact JVP)"));
  std::string why_no_C = !dense ? why_no_dense : (std::isnan(ref_dich.C) ? "no exact constant: " + ref_dich.why_no_C : "");
  if (why_no_C.empty() && best->verdict.empty()) why_no_C = "no estimate of the full spectrum: " + best->why_no_C;
  checks.add_unless(why_no_C, "E7 constant", fmt::format("E7: the dichotomy constant C at growth scale {:g} from trajectories matches the exact one", split),
                    "|C_hat - C| / C", [&] { return best->C_err; }, fmt::format("<= tolerance_C = {:g}", P.get_double("tolerance_C")),
                    [&](double v) { return v <= P.get_double("tolerance_C"); },
                    independent("trajectory_spectra::dichotomy of the dense exact Jacobians (n jvp columns per layer)"));
  {
    std::string na = !dense ? why_no_dense : "";
    if (na.empty() && best->verdict.empty()) na = "no estimate of the full spectrum: " + best->why_no_C;
    if (na.empty() && (best->verdict == "undecided" || ref_dich.decision.verdict == cocycle::Verdict::Undecided))
      na = fmt::format("undecided: the margin of {:g} from the spectrum is within the estimate's tolerance (exact {}, estimate {})", split,
                       cocycle::verdict_name(ref_dich.decision.verdict), best->verdict);
    checks.add_unless(na, "E7 hyperbolicity", fmt::format("E7: the estimate decides hyperbolicity at {:g} as the exact spectrum does", split),
                      "estimate's verdict = exact verdict (1 = same)",
                      [&] { return best->verdict == cocycle::verdict_name(ref_dich.decision.verdict) ? 1.0 : 0.0; }, "1",
                      [](double v) { return v == 1.0; }, independent("decide_hyperbolic on the dense exact Jacobians' Bohl intervals"));
  }
  {
    const std::string na = noises.size() < 2 ? "one noise level: no trend" : "";
    double lo = kNaN, hi = kNaN;
    for (const E7Row& r : rows) {
      if (r.E != E_max) continue;
      if (r.noise == noises.front()) lo = r.err;
      if (r.noise == noises.back()) hi = r.err;
    }
    checks.add_unless(na, "E7 noise", "E7: the estimate degrades with observation noise (largest E)",
                      fmt::format("error at noise {:g} / error at noise {:g}", noises.back(), noises.front()),
                      [&] { return hi / std::max(lo, 1e-300); }, "> 1", [](double v) { return v > 1.0; },
                      qualitative("observation noise enters the fitted maps: the error grows with it"));
  }
  checks.report(ctx, "coupling-e7");

  for (auto it = S.notes.begin(); it != S.notes.end(); ++it) ctx.notes[it.key()] = it.value();
  ctx.notes["n"] = n;
  ctx.notes["tangent_dimension"] = dim;
  ctx.notes["H"] = H;
  ctx.notes["estimator"] = "Â_l = D_(l+1) D_l^+ (complete orthogonal decomposition of D_l^T, minimum norm: ridge-free least squares "
                           "for E >= n, the span of the perturbations for E < n), then cocycle::qr_iterate from the first k differences";
  ctx.notes["noise_model"] = "observation = X + noise rms(X_l) xi, rms over the base state's entries at layer l; xi in inputs/noise.npy";
  ctx.notes["dense_reference"] = dense ? std::string("dense Jacobians, n jvp columns per layer") : why_no_dense;
  if (dense) {
    ctx.notes["exact_dichotomy"] = {{"r_minus", ref_dich.r_minus}, {"r_plus_min", ref_dich.r_plus_min}, {"r_plus_max", ref_dich.r_plus_max},
                                    {"hyperbolic", cocycle::verdict_name(ref_dich.decision.verdict)}, {"C", ref_dich.C},
                                    {"why_no_C", ref_dich.why_no_C}};
    nlohmann::json merged = nlohmann::json::array(), cols = nlohmann::json::array();
    for (const cocycle::Interval& iv : ref_dich.merged) merged.push_back({iv.lower, iv.upper});
    for (const cocycle::Interval& iv : ref_dich.columns) cols.push_back({iv.lower, iv.upper});
    ctx.notes["exact_dichotomy"]["merged"] = merged;
    ctx.notes["exact_dichotomy"]["columns"] = cols;
  }
  ctx.notes["linear"] = {{"fit_error", lin.fit_err}, {"exponent_error", lin.exp_err}, {"C", lin.C}, {"C_from_B", lin.C_exact},
                         {"projector_norm", lin.proj}, {"kappa_S", lin.kappa_S}, {"cond_max", lin.max_cond}, {"depth", lin_L}};
  ctx.summary("mu_max_exact", ref.mu.maxCoeff());
  ctx.summary("error_best", best->err);
  double worst = 0;
  for (const E7Row& r : rows) worst = std::max(worst, std::isfinite(r.err) ? r.err : 0.0);
  ctx.summary("error_worst", worst);
  ctx.summary("C_exact", dense ? ref_dich.C : kNaN);
  ctx.summary("C_estimate_best", best->C);
  ctx.summary("linear_exponent_error", lin.exp_err);
}

std::vector<ParamSpec> e7_params() {
  std::vector<ParamSpec> ps{
      p_string("model", "transformer", "which model's depth map (tokdyn models lists them)", model_names()),
      p_int("depth", 24, "layers applied", 1, 100000),
      p_int("burn_in", 0, "first layers not averaged (< depth)", 0, 100000),
      p_int("tokens", 4, "tokens of the trajectory (T)", 1, 4096),
      p_int("seed", 0, "seed of the start tokens (and the random weights), the perturbations and the noise", 0, kMaxSeed),
      p_int("k", 4, "exponents compared (QR columns), <= every ensemble size and the tangent dimension", 1, 4096),
      p_int_list("ensembles", {4, 8, 16, 32, 64}, "ensemble sizes E (each >= k; the smaller ensembles are the first E members of the largest)",
                 1, 4096).distinct_entries(),
      p_double("amplitude", 1e-4, "perturbation amplitude eps relative to |X_0|_F", 0.0, 1.0, true),
      p_double_list("noise", {0.0, 1e-8, 1e-6, 1e-4}, "observation noise levels: Gaussian noise of std noise x rms(X_l) added to every observed state",
                    0.0, 1.0).distinct_entries(),
      p_int("H", 0, "Steklov window of the Bohl intervals (0: (depth - burn_in) / 4)", 0, 100000),
      p_double("split", 1.0, "growth scale at which the dichotomy and C are taken (1: the paper's)", 0.0, 1e6, true),
      p_double("rcond", 0.0, "rank threshold of the least-squares fit, relative to the largest pivot (0: max(n, E) x machine epsilon)", 0.0, 1.0),
      p_double("tolerance", 1e-3, "the exponent check's tolerance (1/layer)", 0.0, 1e6, true),
      p_double("tolerance_C", 0.1, "the constant check's relative tolerance", 0.0, 1e6, true),
      p_double_list("linear_sigma", {0.2, 0.1, -0.1, -0.2}, "the linear check's eigenvalues sigma_i of the weight-tied G1 generator "
                    "A = S diag(sigma) S^-1 (growth scales |1 + sigma_i|, away from 1 and 0; n = their number)", -1e3, 1e3).items(1, 64),
      p_int("linear_depth", 32, "the linear check's depth", 1, 10000),
      p_double("linear_kappa", 3.0, "the linear check's eigenbasis condition number kappa(S)", 1.0, 1e8)};
  for (ParamSpec& q : model_knobs()) ps.push_back(std::move(q));
  return ps;
}

OutputDecl e7_outputs() {
  OutputDecl o;
  o.tables = {
      checks_table(),
      {"spectra.csv", "one exponent (QR column) of one estimate: ensemble size E and noise level",
       {integer("ensemble", "ensemble size E"), real("noise", "observation noise level (std relative to rms(X_l))"),
        index("index", "QR column (the exact and the estimated QR start from the same k directions)", 0),
        real("mu_exact", "exact exponent: depth_spectrum through the model's JVP", "1/layer")
            .may_be_empty("R_ii = 0 at some layer: growth scale 0 (-inf, not finite)"),
        real("mu_estimate", "estimated exponent: QR of the fitted maps Â_l", "1/layer").may_be_empty("R_ii = 0: growth scale 0 (not finite)"),
        real("error", "mu_estimate - mu_exact", "1/layer").may_be_empty("mu_estimate or mu_exact empty")}},
      {"error.csv", "one estimate: ensemble size E and noise level",
       {integer("ensemble", "ensemble size E"), real("noise", "observation noise level (std relative to rms(X_l))"),
        real("error", "max_i |mu_estimate_i - mu_exact_i| over the top k", "1/layer").may_be_empty("an exponent not finite"),
        real("error_intervals", "max |log end_estimate - log end_exact| of the top-k Bohl intervals", "1/layer")
            .may_be_empty("an end at growth scale 0 on one side only"),
        real("error_full_intervals", "max |log end_estimate - log end_exact| of the Bohl intervals of all n QR columns (dichotomy.csv)",
             "1/layer").may_be_empty("no dense reference (rows x d > 256), a fit of rank < n (E < n: the directions outside the perturbations' "
                                     "span are not estimated), or an end at growth scale 0 on one side only"),
        integer("rank_min", "smallest numerical rank of the per-layer fits"),
        real("cond_max", "largest condition estimate of the differences D_l on their range").may_be_empty("no perturbation survived"),
        real("C_estimate", "dichotomy constant at growth scale split of the Â cocycle (all n directions)")
            .may_be_empty("no dense reference (n > 256), a fit of rank < n (E < n: no full-dimension spectrum), or no constant "
                          "(split not outside the estimated spectrum, no bundles)"),
        real("C_exact", "the same of the dense exact Jacobians").may_be_empty("no dense reference, or no exact constant"),
        real("C_error", "|C_estimate - C_exact| / C_exact").may_be_empty("either constant empty"),
        category("hyperbolic_estimate", "split outside the estimated spectrum (against its own tolerance)",
                 {{"yes", "margin > tolerance"}, {"no", "margin < -tolerance"}, {"undecided", "|margin| <= tolerance"}})
            .may_be_empty("no dense reference, or a fit of rank < n (E < n: no full-dimension spectrum)"),
        category("hyperbolic_exact", "split outside the exact spectrum",
                 {{"yes", "margin > tolerance"}, {"no", "margin < -tolerance"}, {"undecided", "|margin| <= tolerance"}})
            .may_be_empty("no dense reference")}},
      {"intervals.csv", "one Bohl interval (Steklov window H) of one top-k QR column, exact or estimated",
       {category("source", "which spectrum", {{"exact", "depth_spectrum's log R_ii"}, {"estimate", "the fitted maps' QR"}}),
        integer("ensemble", "ensemble size E").may_be_empty("source = exact"),
        real("noise", "observation noise level").may_be_empty("source = exact"), index("index", "QR column", 0),
        real("lower", "lower end (growth scale per layer)"), real("upper", "upper end (growth scale per layer)")}},
      {"dichotomy.csv", "the Bohl interval (Steklov window H) of one of all n QR columns of the full cocycle, exact or estimated: the "
       "spectrum the dichotomy at split and C are read from",
       {category("source", "which cocycle", {{"exact", "the dense exact Jacobians"}, {"estimate", "the fitted maps Â_l"}}),
        integer("ensemble", "ensemble size E").may_be_empty("source = exact"),
        real("noise", "observation noise level").may_be_empty("source = exact"),
        index("index", "QR column of the full QR from the identity frame", 0),
        real("lower", "lower end (growth scale per layer; 0: R_ii = 0, a direction the fit or the layer annihilates)"),
        real("upper", "upper end (growth scale per layer)")},
       "rows x d <= 256 (the dense reference); estimate rows for the fits of full rank n (E >= n)"},
      {"linear.csv", "one exponent of the linear check (G1 weight-tied, n = the entries of linear_sigma, noise 0, the largest E)",
       {index("index", "QR column (B's eigenvectors by decreasing |1 + sigma_i|)", 0),
        real("mu_closed_form", "log |1 + sigma_i|", "1/layer"), real("mu_estimate", "estimated exponent", "1/layer"),
        real("error", "mu_estimate - mu_closed_form", "1/layer")},
       "the largest ensemble size is at least the linear cocycle's n (the entries of linear_sigma)"}};
  for (ArrayDecl& a : model_arrays()) o.arrays.push_back(std::move(a));  // the models' own files (token_ids.npy)
  o.summaries = {{"mu_max_exact", "largest of the k exact exponents", "1/layer"},
                 {"error_best", "max |mu_hat - mu| over the top k at the smallest noise and the largest E", "1/layer"},
                 {"error_worst", "the largest such error over every (E, noise)", "1/layer"},
                 {"C_exact", "exact dichotomy constant at growth scale split (NaN: none)"},
                 {"C_estimate_best", "its estimate at the smallest noise and the largest E (NaN: none)"},
                 {"linear_exponent_error", "the linear check's max |mu_hat - log |1 + sigma||", "1/layer"}};
  o.figures = {{"e7.png", "exponent error against ensemble size per noise level; exact and estimated exponents; C"}};
  return o;
}

const ExperimentRegistration reg_coupling_e7{tf::with_renamed_keys(with_outputs(with_smoke(Experiment{
    "coupling-e7",
    "Coupling paper E7 (open): Lyapunov / Sacker-Sell spectra and the dichotomy constant C of a model's depth cocycle from activation "
    "trajectories alone, against its exact JVP spectra",
    e7_params(),
    run_e7,
    "coupling-e7",
    [](const Params& P) {
      const std::string model = P.get_string("model");
      const ModelCost c = model_descriptor(model).cost(P);
      const double T = static_cast<double>(P.get_int("tokens")), depth = static_cast<double>(P.get_int("depth"));
      const double n = T * c.d, k = static_cast<double>(P.get_int("k"));
      double E = 1;
      for (long e : P.get_int_list("ensembles")) E = std::max(E, static_cast<double>(e));
      const double fits = static_cast<double>(P.get_int_list("ensembles").size() * P.get_double_list("noise").size());
      const bool dense = n <= kE7DenseMax;
      // States, noise draws and one observed copy; the fits (n x n, or the factors 2 n E when E < n);
      // the dense reference (Jacobians, their rescaled copy, the bundles' projectors) when n <= 256.
      const double fit_bytes = 8.0 * depth * std::min(n * n, 2.0 * n * E) * 2.0;
      const double bytes = 8.0 * (depth + 1) * n * (E + 1) * 4.0 + fit_bytes + (dense ? 8.0 * depth * n * n * 4.0 : 0.0) +
                           c.weight_bytes + 8.0 * 30.0 * k * T * c.d + 64e6;
      const double flops = depth * (2.0 * (E + 1) + k + (dense ? n : 0.0)) * T * c.per_row +
                           fits * depth * (4.0 * E * E * n + (dense ? depth * n * n * n : 0.0));
      return ResourceEstimate{bytes, flops, "the ensemble's states at every layer and one fitted map per layer (its factors when E < n)"};
    }},
    {{"depth", "4"}, {"k", "2"}, {"tokens", "2"}, {"ensembles", "2,3"}, {"noise", "0,1e-6"}, {"linear_sigma", "0.2,-0.2"},
     {"linear_depth", "8"}}), e7_outputs()))};

}  // namespace
}  // namespace tokdyn
