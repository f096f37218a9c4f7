// tokdyn._core's analyses as functions of NumPy arrays (see module.cpp): Gram metrics of token
// states, the spectra of a cocycle (Lyapunov, Bohl, dichotomy; bundles and constants), the depth
// spectrum of a registry model or of a model the user defines by Python callbacks, persistency of
// excitation, the consensus spectra of RoPE attention and the Green operator of a dichotomy.
#include "module_internal.hpp"
#include "module_interrupt.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/depth_spectra.hpp"
#include "tokdyn/analysis/green.hpp"
#include "tokdyn/analysis/pe_window.hpp"
#include "tokdyn/analysis/rope_spectra.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/engine/dynamics.hpp"
#include "tokdyn/engine/observers.hpp"

namespace tokdyn::python {
namespace {

using cocycle::Matrix;

// ---- analyses ----

py::dict gram(const Array& X) {
  if (X.ndim() != 3 && X.ndim() != 2)
    throw InputError(fmt::format("X: shape {}; expected [runs, tokens, d] or [tokens, d]", shape_text(X)));
  const py::ssize_t runs = X.ndim() == 3 ? X.shape(0) : 1, len = X.shape(X.ndim() - 2), d = X.shape(X.ndim() - 1);
  if (len < 1 || d < 1) throw InputError(fmt::format("X: shape {}; expected at least one token of dimension >= 1", shape_text(X)));
  std::vector<double> l1(static_cast<std::size_t>(runs)), pr(l1), mc(l1), cd(l1), cdd(l1);
  {
    const Eigen::Map<const Tokens> all(X.data(), runs * len, d);  // zero-copy view
    py::gil_scoped_release release;
    for (py::ssize_t r = 0; r < runs; ++r) {
      const auto Zr = all.middleRows(r * len, len);
      const GramMetrics g = gram_metrics(Zr);
      const auto i = static_cast<std::size_t>(r);
      l1[i] = g.lambda1;
      pr[i] = g.participation;
      mc[i] = g.min_cosine;
      cd[i] = consensus_distance(Zr).distance;
      cdd[i] = diagonal_consensus_distance(Zr).distance;
    }
  }
  py::dict out;
  const std::vector<std::size_t> shape{static_cast<std::size_t>(runs)};
  out["lambda1"] = to_numpy(l1.data(), shape);
  out["participation"] = to_numpy(pr.data(), shape);
  out["min_cosine"] = to_numpy(mc.data(), shape);
  out["consensus_dist_axes"] = to_numpy(cd.data(), shape);
  out["consensus_dist_diagonal"] = to_numpy(cdd.data(), shape);
  return out;
}

/// The spectra of a log-diagonal of the triangularised cocycle: Lyapunov exponents, Bohl intervals
/// (Steklov window H), merged dichotomy spectrum and the hyperbolicity decision.
/// Rows [begin, end) of log_diag are measured (begin: the burn-in), as cocycle-spectra computes them.
py::dict spectra_of(const Matrix& log_diag, long begin, long H, const std::vector<long>& unresolved) {
  const cocycle::LyapunovSpectrum ls = cocycle::lyapunov_spectrum(log_diag, begin);
  const std::vector<cocycle::Interval> iv = cocycle::bohl_intervals(log_diag, H, begin);
  const std::vector<cocycle::Interval> merged = cocycle::merge_intervals(iv);
  const cocycle::SpectrumError err = cocycle::spectrum_error(log_diag, begin);
  const cocycle::HyperbolicDecision dec = cocycle::decide_hyperbolic(merged, err.tolerance());
  py::dict out;
  out["mu"] = to_numpy(ls.mu.data(), {static_cast<std::size_t>(ls.mu.size())});
  std::vector<std::pair<double, double>> bohl, spec;
  for (const auto& i : iv) bohl.emplace_back(i.lower, i.upper);
  for (const auto& i : merged) spec.emplace_back(i.lower, i.upper);
  out["bohl_intervals"] = bohl;
  out["dichotomy_spectrum"] = spec;
  out["hyperbolic"] = cocycle::verdict_name(dec.verdict);
  out["margin"] = dec.margin;
  out["tolerance"] = dec.tolerance;
  out["H"] = H;
  out["unresolved_at"] = unresolved;
  const Mat ld = log_diag.bottomRows(log_diag.rows() - begin);  // the measured rows, row-major for NumPy
  out["log_diag"] = to_numpy(ld.data(), {static_cast<std::size_t>(ld.rows()), static_cast<std::size_t>(ld.cols())});
  return out;
}

long default_window(long n) { return std::max(1L, n / 4); }

py::dict cocycle_spectra(const Array& B, long k, long H, long burn_in, bool bundles, double slack) {
  if (B.ndim() != 3 || B.shape(1) != B.shape(2) || B.shape(0) < 1 || B.shape(1) < 1)
    throw InputError(fmt::format("B: shape {}; expected [L, d, d] with L, d >= 1", shape_text(B)));
  const long L = static_cast<long>(B.shape(0)), d = static_cast<long>(B.shape(1));
  if (k < 0 || k > d) throw InputError(fmt::format("k: expected 0 (all d = {}) to d, got {}", d, k));
  if (burn_in < 0 || burn_in >= L) throw InputError(fmt::format("burn_in: expected 0 <= burn_in < L = {}, got {}", L, burn_in));
  if (!(slack > 0 && slack <= 1)) throw InputError(fmt::format("slack: expected 0 < slack <= 1, got {}", slack));
  const long N = L - burn_in;
  if (H == 0) H = default_window(N);
  if (H < 1 || H > N) throw InputError(fmt::format("H: expected a Steklov window from 1 to L - burn_in = {}, got {}", N, H));
  std::vector<Matrix> mats;
  mats.reserve(static_cast<std::size_t>(L));
  for (long l = 0; l < L; ++l)  // C order [l, i, j] is row-major d x d
    mats.emplace_back(Eigen::Map<const Mat>(B.data() + l * d * d, d, d));
  std::optional<cocycle::Cocycle> c;
  cocycle::QrResult q;
  {
    py::gil_scoped_release release;
    checked([&] {
      c.emplace(cocycle::Cocycle::from_matrices(std::move(mats)));
      cocycle::QrOptions o;
      o.k = k;
      q = cocycle::qr_iterate(*c, o);
    });
  }
  py::dict out = checked([&] { return spectra_of(q.log_diag, burn_in, H, q.unresolved_at); });
  if (!bundles) return out;
  // Bundles (two-sided constant extension) and the dichotomy constants at rates just inside the
  // spectrum's gap, r = (edge)^(1 - slack), as cocycle-spectra computes them (Thm 5 / (A4)).
  out["bundles"] = py::none();
  out["constants"] = py::none();
  if (out["hyperbolic"].cast<std::string>() != "yes") {
    out["why_not"] = "not hyperbolic (1 lies in, or within the tolerance of, the dichotomy spectrum): no bundles or constants";
    return out;
  }
  double g_lo = 0, g_hi = std::numeric_limits<double>::infinity();
  for (const auto& iv : out["dichotomy_spectrum"].cast<std::vector<std::pair<double, double>>>()) {
    if (iv.second < 1) g_lo = std::max(g_lo, iv.second);
    if (iv.first > 1) g_hi = std::min(g_hi, iv.first);
  }
  cocycle::BundlesOutcome found;
  cocycle::BundleDiagnostics diag;
  double r_minus = 0, r_plus = 0, Cm = 0, Cp = 0;
  {
    py::gil_scoped_release release;
    checked([&] {
      found = cocycle::find_two_sided_bundles(*c);
      if (!found) return;
      const cocycle::Bundles& b = *found.bundles;
      diag = cocycle::bundle_diagnostics(*c, b);
      r_minus = g_lo > 0 ? std::exp((1 - slack) * std::log(g_lo)) : slack;
      r_plus = std::isfinite(g_hi) ? std::exp((1 - slack) * std::log(g_hi)) : std::exp(slack);
      const long stride = std::max<long>(1, static_cast<long>(b.P_plus.size()) / 100);
      const auto env = cocycle::growth_envelope(*c, b, stride);
      Cm = cocycle::constant_minus(env, r_minus);
      Cp = cocycle::constant_plus(env, r_plus);
    });
  }
  if (!found) {
    out["why_not"] = found.why_not;
    return out;
  }
  py::dict b;
  b["k"] = found.bundles->k;
  b["angle"] = to_numpy(diag.angle.data(), {static_cast<std::size_t>(diag.angle.size())});
  b["p_plus_norm"] = to_numpy(diag.p_plus_norm.data(), {static_cast<std::size_t>(diag.p_plus_norm.size())});
  out["bundles"] = b;
  py::dict cs;
  cs["r_minus"] = r_minus;
  cs["r_plus"] = r_plus;
  cs["C_minus"] = Cm;
  cs["C_plus"] = Cp;
  cs["C"] = std::max(Cm, Cp);
  out["constants"] = cs;
  out["why_not"] = py::none();
  return out;
}

/// A LayerMap whose layers are Python callables: step(X [rows, d], l) -> X', jvp(X, V [k, rows, d], l) -> W.
class CallbackMap final : public LayerMap {
 public:
  CallbackMap(py::function step, py::function jvp, bool sphere, int rows, int d)
      : step_(std::move(step)), jvp_(std::move(jvp)), sphere_(sphere), rows_(rows), d_(d) {}
  void apply(long k, Batch& Z) const override {
    py::gil_scoped_acquire gil;
    for (int r = 0; r < Z.runs; ++r) {
      const Tokens X = Z.run(r);
      const py::array_t<double> in = to_numpy(X.data(), {static_cast<std::size_t>(rows_), static_cast<std::size_t>(d_)});
      const Array out = Array::ensure(step_(in, k));
      if (!out || out.ndim() != 2 || out.shape(0) != rows_ || out.shape(1) != d_)
        throw InputError(fmt::format("step(X, {}): returned {}; expected an array of shape [{}, {}]", k,
                                     out ? shape_text(out) : std::string("no array"), rows_, d_));
      Z.run(r) = Eigen::Map<const Tokens>(out.data(), rows_, d_);
    }
  }
  void jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const override {
    py::gil_scoped_acquire gil;
    // Z holds the one state replicated per tangent (depth_spectrum's Zrep): run 0 is the state.
    const Tokens X = Z.run(0);
    const int kt = static_cast<int>(V.rows() / rows_);
    const py::array_t<double> x = to_numpy(X.data(), {static_cast<std::size_t>(rows_), static_cast<std::size_t>(d_)});
    const py::array_t<double> v = to_numpy(V.data(), {static_cast<std::size_t>(kt), static_cast<std::size_t>(rows_),
                                                      static_cast<std::size_t>(d_)});
    const Array w = Array::ensure(jvp_(x, v, k));
    if (!w || w.ndim() != 3 || w.shape(0) != kt || w.shape(1) != rows_ || w.shape(2) != d_)
      throw InputError(fmt::format("jvp(X, V, {}): returned {}; expected an array of shape [{}, {}, {}]", k,
                                   w ? shape_text(w) : std::string("no array"), kt, rows_, d_));
    out = Eigen::Map<const Tokens>(w.data(), static_cast<Eigen::Index>(kt) * rows_, d_);
  }
  bool has_exact_jvp() const override { return true; }
  bool on_sphere() const override { return sphere_; }

 private:
  py::function step_, jvp_;
  bool sphere_;
  int rows_, d_;
};

py::dict spectrum_result(const DepthSpectrum& R, long H) {
  const Matrix measured = R.measured_log_r();
  py::dict out = spectra_of(measured, 0, H, R.unresolved_at);
  out["mu"] = to_numpy(R.mu.data(), {static_cast<std::size_t>(R.mu.size())});
  out["gamma"] = to_numpy(R.gamma.data(), {static_cast<std::size_t>(R.gamma.size())});  // e^mu, the CLI's lyapunov.csv bits
  out["depth"] = R.depth;
  out["burn_in"] = R.burn_in;
  const Mat run = R.mu_running;
  out["mu_running"] = to_numpy(run.data(), {static_cast<std::size_t>(run.rows()), static_cast<std::size_t>(run.cols())});
  out["dim"] = R.dim;
  const Tokens& F = R.final_state.Z;
  out["final_state"] = to_numpy(F.data(), {static_cast<std::size_t>(F.rows()), static_cast<std::size_t>(F.cols())});
  return out;
}

DepthSpectrumOptions spectrum_options(long depth, int k, long burn_in, std::uint64_t seed, long& H) {
  if (depth < 1) throw InputError(fmt::format("depth: expected an integer >= 1, got {}", depth));
  if (k < 1) throw InputError(fmt::format("k: expected an integer >= 1, got {}", k));
  if (burn_in < 0 || burn_in >= depth) throw InputError(fmt::format("burn_in: expected 0 <= burn_in < depth = {}, got {}", depth, burn_in));
  const long N = depth - burn_in;
  if (H == 0) H = default_window(N);
  if (H < 1 || H > N) throw InputError(fmt::format("H: expected a Steklov window from 1 to depth - burn_in = {}, got {}", N, H));
  DepthSpectrumOptions o;
  o.k = k;
  o.depth = depth;
  o.burn_in = burn_in;
  o.seed = seed;
  return o;
}

/// A given initial tangent frame V0 [k, rows, d] as the library's k*rows x d stack (nullopt: drawn).
std::optional<Tokens> frame_of(const std::optional<Array>& V0, int k, int rows, int d) {
  if (!V0) return std::nullopt;
  if (V0->ndim() != 3 || V0->shape(0) != k || V0->shape(1) != rows || V0->shape(2) != d)
    throw InputError(fmt::format("V0: shape {}; expected [k, rows, d] = [{}, {}, {}]", shape_text(*V0), k, rows, d));
  return Tokens(Eigen::Map<const Tokens>(V0->data(), static_cast<Eigen::Index>(k) * rows, d));
}

py::dict depth_spectrum_callbacks(py::function step, py::function jvp, const Array& X0, long depth, int k, long burn_in,
                                  bool on_sphere, std::uint64_t seed, long H, std::optional<Array> V0) {
  if (X0.ndim() != 2 || X0.shape(0) < 1 || X0.shape(1) < 1)
    throw InputError(fmt::format("X0: shape {}; expected [rows, d]", shape_text(X0)));
  const int rows = static_cast<int>(X0.shape(0)), d = static_cast<int>(X0.shape(1));
  DepthSpectrumOptions o = spectrum_options(depth, k, burn_in, seed, H);
  const long dim = static_cast<long>(rows) * (on_sphere ? d - 1 : d);
  if (k > dim) throw InputError(fmt::format("k: expected at most the tangent dimension {}, got {}", dim, k));
  const std::optional<Tokens> frame = frame_of(V0, k, rows, d);
  if (frame) o.tangents = &*frame;
  const CallbackMap F(std::move(step), std::move(jvp), on_sphere, rows, d);
  const Batch Z0{Eigen::Map<const Tokens>(X0.data(), rows, d), 1, rows};
  DepthSpectrum R;
  SignalWatch watch;  // Ctrl-C between callbacks (inside one, Python raises KeyboardInterrupt itself)
  watch.run([&] {
    py::gil_scoped_release release;
    checked([&] { R = depth_spectrum(F, Z0, o, {}, watch.hook()); });
  });
  return checked([&] { return spectrum_result(R, H); });
}

py::dict depth_spectrum_model(const Model& m, long depth, int k, long burn_in, std::uint64_t seed, long H, std::optional<Array> X0,
                              std::optional<Array> V0) {
  DepthSpectrumOptions o = spectrum_options(depth, k, burn_in, seed, H);
  const ModelInstance& S = m.instance();
  Batch Z0 = S.Z0;
  if (X0) {
    if (X0->ndim() != 2 || X0->shape(0) != Z0.len || X0->shape(1) != Z0.Z.cols())
      throw InputError(fmt::format("X0: shape {}; expected [rows, d] = [{}, {}]", shape_text(*X0), Z0.len, Z0.Z.cols()));
    Z0.Z = Eigen::Map<const Tokens>(X0->data(), Z0.len, Z0.Z.cols());
  }
  const long dim = tangent_dimension(*S.map, Z0);
  if (k > dim) throw InputError(fmt::format("k: expected at most the tangent dimension {} of model {}, got {}", dim, m.name(), k));
  const std::optional<Tokens> frame = frame_of(V0, k, Z0.len, static_cast<int>(Z0.Z.cols()));
  if (frame) o.tangents = &*frame;
  DepthSpectrum R;
  SignalWatch watch;  // Ctrl-C: KeyboardInterrupt within a layer or 50 ms (module_interrupt.hpp)
  watch.run([&] {
    py::gil_scoped_release release;
    checked([&] { R = depth_spectrum(*S.map, Z0, o, S.step, watch.hook()); });
  });
  return checked([&] { return spectrum_result(R, H); });
}

// ---- persistency of excitation (The Attention Within eq. (23)) ----

py::dict pe_window(const Array& q) {
  if (q.ndim() != 1 || q.shape(0) < 1) throw InputError(fmt::format("q: shape {}; expected a series [kappa], kappa >= 1", shape_text(q)));
  const std::vector<double> v(q.data(), q.data() + q.shape(0));
  for (double x : v)
    if (!std::isfinite(x)) throw InputError("q: expected finite values");
  const std::vector<double> W = worst_window_average(v);
  const std::optional<int> t = smallest_admissible_window(W);
  py::dict out;
  out["W"] = to_numpy(W.data(), {W.size()});
  out["t_star"] = t ? py::object(py::int_(*t)) : py::none();
  return out;
}

py::dict pe_readings_of(const Array& q) {
  if (q.ndim() != 3 || q.shape(0) < 1 || q.shape(1) < 1 || q.shape(2) < 1)
    throw InputError(fmt::format("q: shape {}; expected [runs, tokens, depth]", shape_text(q)));
  QRecord rec(static_cast<std::size_t>(q.shape(0)));
  for (py::ssize_t r = 0; r < q.shape(0); ++r)
    for (py::ssize_t t = 0; t < q.shape(1); ++t) {
      const double* p = q.data() + (r * q.shape(1) + t) * q.shape(2);
      rec[static_cast<std::size_t>(r)].emplace_back(p, p + q.shape(2));
    }
  const PeReadings R = checked([&] { return pe_readings(rec); });
  const auto reading = [](const PeReadings::Reading& x) {
    py::dict d;
    d["t_star"] = x.t_star ? py::object(py::int_(*x.t_star)) : py::none();
    d["run"] = x.run;
    d["token"] = x.token;
    return d;
  };
  py::dict out;
  out["text"] = reading(R.text);
  out["caption"] = reading(R.caption);
  out["envelope"] = reading(R.envelope);
  out["envelope_first_token"] = reading(R.envelope_first_token);
  py::list ts;
  for (const auto& run : R.t_star) {
    py::list row;
    for (const auto& t : run) row.append(t ? py::object(py::int_(*t)) : py::none());
    ts.append(row);
  }
  out["t_star"] = ts;
  return out;
}

// ---- consensus spectra of RoPE attention (RoPE paper eqs. (13)-(14), Thm 7.3) ----

py::dict consensus_spectrum_of(const std::vector<double>& positions, const std::vector<double>& freqs,
                               const std::vector<double>& energies, double beta, const std::string& method) {
  rope::GapMethod m = rope::GapMethod::Similarity;
  if (method == "laplacian") m = rope::GapMethod::Laplacian;
  else if (method == "generalized") m = rope::GapMethod::Generalized;
  else if (method != "similarity")
    throw InputError(fmt::format("method: expected similarity, laplacian or generalized, got '{}'", method));
  rope::KernelSpectrum sp;
  Mat K;
  {
    py::gil_scoped_release release;
    checked([&] {
      const rope::ConsensusKernel k = rope::consensus_kernel(positions, freqs, energies, beta);
      sp = rope::consensus_spectrum(k, m);
      K = k.K;
    });
  }
  py::dict out;
  out["eigenvalues"] = to_numpy(sp.eigenvalues.data(), {static_cast<std::size_t>(sp.eigenvalues.size())});
  out["gap"] = sp.gap;
  out["K"] = to_numpy(K.data(), {static_cast<std::size_t>(K.rows()), static_cast<std::size_t>(K.cols())});
  return out;
}

// ---- the Green operator of a dichotomy (coupling paper Lemma 17) ----

py::dict green_solve(const Array& B, const Array& h, const std::string& tails) {
  if (B.ndim() != 3 || B.shape(1) != B.shape(2) || B.shape(0) < 1 || B.shape(1) < 1)
    throw InputError(fmt::format("B: shape {}; expected [L, d, d] with L, d >= 1", shape_text(B)));
  const long L = static_cast<long>(B.shape(0)), d = static_cast<long>(B.shape(1));
  if (h.ndim() != 2 || h.shape(0) != L || h.shape(1) != d)
    throw InputError(fmt::format("h: shape {}; expected [L, d] = [{}, {}]", shape_text(h), L, d));
  if (tails != "constant" && tails != "zero") throw InputError(fmt::format("tails: expected constant or zero, got '{}'", tails));
  std::vector<Matrix> mats;
  for (long l = 0; l < L; ++l) mats.emplace_back(Eigen::Map<const Mat>(B.data() + l * d * d, d, d));
  green::Seq hs(d, L);
  for (long l = 0; l < L; ++l)
    for (long i = 0; i < d; ++i) hs(i, l) = h.data()[l * d + i];
  py::dict out;
  green::Seq u;
  double res = 0;
  std::string why;
  {
    py::gil_scoped_release release;
    checked([&] {
      green::EndsOutcome e = green::find_ends(mats.front(), mats.back());
      if (!e) {
        why = e.why_not;
        return;
      }
      green::BvpOutcome b = green::Bvp::factor(mats, std::move(*e.ends));
      if (!b) {
        why = b.why_not;
        return;
      }
      u = b.bvp->solve(hs, tails == "zero" ? green::Tails::Zero : green::Tails::Constant);
      res = b.bvp->residual(u, hs);
    });
  }
  if (!why.empty()) {
    out["u"] = py::none();
    out["why_not"] = why;
    return out;
  }
  const Mat ut = u.transpose();  // [L+1, d] row-major
  out["u"] = to_numpy(ut.data(), {static_cast<std::size_t>(ut.rows()), static_cast<std::size_t>(ut.cols())});
  out["residual"] = res;
  out["why_not"] = py::none();
  return out;
}
}  // namespace

void bind_analyses(py::module_& mod) {
  mod.def("gram_metrics", &gram, py::arg("X"));
  mod.def("pe_window", &pe_window, py::arg("q"));
  mod.def("pe_readings", &pe_readings_of, py::arg("q"));
  mod.def("consensus_spectrum", &consensus_spectrum_of, py::arg("positions"), py::arg("freqs"), py::arg("energies"),
          py::arg("beta"), py::arg("method"));
  mod.def("green_solve", &green_solve, py::arg("B"), py::arg("h"), py::arg("tails"));
  mod.def("cocycle_spectra", &cocycle_spectra, py::arg("B"), py::arg("k"), py::arg("H"), py::arg("burn_in"), py::arg("bundles"),
          py::arg("slack"));
  mod.def("depth_spectrum_callbacks", &depth_spectrum_callbacks, py::arg("step"), py::arg("jvp"), py::arg("X0"), py::arg("depth"),
          py::arg("k"), py::arg("burn_in"), py::arg("on_sphere"), py::arg("seed"), py::arg("H"), py::arg("V0"));
  mod.def("depth_spectrum_model", &depth_spectrum_model, py::arg("model"), py::arg("depth"), py::arg("k"), py::arg("burn_in"),
          py::arg("seed"), py::arg("H"), py::arg("X0"), py::arg("V0"));
}

}  // namespace tokdyn::python
