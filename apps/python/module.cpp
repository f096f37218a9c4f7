// tokdyn._core: the library from Python (pybind11). The presets and their results, the registry's
// models (step, jvp, trajectory, taps), and the analyses as functions of NumPy arrays, including
// the depth spectrum of a model the user defines by Python callbacks. The package python/tokdyn
// wraps this module (pandas tables, named axes, docstrings); docs/python.md explains it.
//
// Conventions: arrays are float64 C-contiguous (converted when not: pybind11's forcecast); the GIL
// is released while the library computes (callbacks take it back); errors are the CLI's one-line
// messages, ValueError for bad input (exit code 2) and RuntimeError for the rest (resource,
// non-finite state, no convergence, internal).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/depth_spectra.hpp"
#include "tokdyn/analysis/green.hpp"
#include "tokdyn/analysis/pe_window.hpp"
#include "tokdyn/analysis/rope_spectra.hpp"
#include "tokdyn/core/array_sink.hpp"
#include "tokdyn/build_info.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "tokdyn/experiments/taps.hpp"
#include "tokdyn/engine/observers.hpp"
#include "tokdyn/io/outputs.hpp"
#include "tokdyn/io/tokenizer.hpp"

namespace py = pybind11;

namespace tokdyn::python {
namespace {

using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;
using cocycle::Matrix;

const ModelDescriptor& descriptor(const std::string& name) {
  try {
    return model_descriptor(name);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
}

std::size_t element_count(const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (std::size_t x : shape) n *= x;
  return n;
}

/// A float64 array of `shape` holding a copy of `data`.
py::array_t<double> to_numpy(const double* data, const std::vector<std::size_t>& shape) {
  std::vector<py::ssize_t> s(shape.begin(), shape.end());
  py::array_t<double> a(s);
  std::copy(data, data + element_count(shape), a.mutable_data());
  return a;
}

std::vector<std::size_t> shape_of(const py::array& a) {
  std::vector<std::size_t> s;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s.push_back(static_cast<std::size_t>(a.shape(i)));
  return s;
}

std::string shape_text(const py::array& a) { return fmt::format("[{}]", fmt::join(shape_of(a), ", ")); }

/// Library refusals of values (std::invalid_argument / domain_error) as InputError, so that they
/// reach Python as ValueError with the library's message.
template <class F>
auto checked(F&& f) {
  using R = decltype(f());
  if constexpr (std::is_void_v<R>) {
    as_input_error([&] { f(); });
  } else {
    std::optional<R> out;
    as_input_error([&] { out.emplace(f()); });
    return std::move(*out);
  }
}

const Experiment& preset_named(const std::string& name) {
  if (const Experiment* e = find_experiment(name)) return *e;
  std::vector<std::string> names;
  for (const Experiment* e : experiments()) names.push_back(e->name);
  throw InputError(fmt::format("preset '{}': unknown; expected one of {} (tokdyn.presets())", name, fmt::join(names, ", ")));
}

// ---- presets ----

std::vector<std::pair<std::string, std::string>> list_presets() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Experiment* e : experiments()) out.emplace_back(e->name, e->description);
  return out;
}

std::string show_json(const std::string& name) { return schema_json(preset_named(name)).dump(); }

py::dict run_preset(const std::string& name, const std::string& out, const std::map<std::string, std::string>& sets,
                    int threads, bool figures, bool overwrite, bool inputs) {
  const Experiment& e = preset_named(name);
  const std::vector<std::pair<std::string, std::string>> v(sets.begin(), sets.end());
  const Params P = resolve_params(e, v);
  if (threads < 1) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  RunOutcome r;
  {
    py::gil_scoped_release release;
    r = run_experiment(e, P, out, threads, figures, /*show_progress=*/false, overwrite, inputs);
  }
  py::dict d;
  d["dir"] = r.dir.string();
  d["files"] = r.files;
  d["replaced"] = r.replaced;
  d["checks_line"] = r.checks_line;
  d["figure_error"] = r.figure_error;
  return d;
}

// ---- models ----

/// Keeps the arrays a run hands to it, in memory (the package's taps).
class MemorySink final : public ArraySink {
 public:
  void put(const std::string& name, const double* data, const std::vector<std::size_t>& shape) override {
    arrays[name] = {std::vector<double>(data, data + element_count(shape)), shape};
  }
  void put(const std::string& name, const float* data, const std::vector<std::size_t>& shape) override {
    arrays[name] = {std::vector<double>(data, data + element_count(shape)), shape};  // fp32 values, exactly widened
  }
  std::map<std::string, std::pair<std::vector<double>, std::vector<std::size_t>>> arrays;
};

/// Captures one tap at one layer while armed (a model keeps one, watching from its construction).
class CaptureTap final : public TapObserver {
 public:
  void arm(std::string name, long k, std::vector<int> heads) {
    name_ = std::move(name), k_ = k, heads_ = std::move(heads);
    value.clear(), shape.clear();
  }
  void disarm() { name_.clear(); }
  bool wants(const std::string& name, long k) const override { return !name_.empty() && name == name_ && k == k_; }
  std::vector<int> heads(const std::string& name, long) const override { return name == name_ ? heads_ : std::vector<int>{}; }
  void tap(const std::string&, long, const double* data, const std::vector<std::size_t>& s) override {
    value.assign(data, data + element_count(s));
    shape = s;
  }
  void tap(const std::string&, long, const float* data, const std::vector<std::size_t>& s) override {
    value.assign(data, data + element_count(s));
    shape = s;
  }
  std::vector<double> value;
  std::vector<std::size_t> shape;

 private:
  std::string name_;
  long k_ = 0;
  std::vector<int> heads_;
};

/// The parameters a model is built from: its knobs, and the tokens, seed and depth every builder reads.
Experiment model_schema(const ModelDescriptor& m) {
  Experiment e;
  e.name = "model " + m.name;
  e.params = m.knobs;
  e.params.push_back(p_int("tokens", 8, "tokens per sequence", 1, 1 << 20));
  e.params.push_back(p_int("seed", 0, "seed of the start tokens and random weights", 0, kMaxSeed));
  e.params.push_back(p_int("depth", 100, "layers the model is built for (untied random Transformer weights)", 1, 10000000));
  return e;
}

class Model {
 public:
  Model(const std::string& name, const std::map<std::string, std::string>& knobs, const std::string& dir) : name_(name) {
    const ModelDescriptor& m = descriptor(name);
    const Experiment e = model_schema(m);
    const std::vector<std::pair<std::string, std::string>> v(knobs.begin(), knobs.end());
    P_ = resolve_params(e, v);
    RunContext ctx;
    ctx.dir = dir;
    S_ = checked([&] { return build_model(name, P_, ctx); });
    notes_ = S_.notes.dump();
    capture_ = std::make_unique<CaptureTap>();
    if (!S_.map->tap_names().empty()) S_.map->watch(capture_.get());
  }

  const std::string& name() const { return name_; }
  std::vector<std::string> tap_names() const { return S_.map->tap_names(); }
  bool on_sphere() const { return S_.map->on_sphere(); }
  std::string notes() const { return notes_; }
  py::dict knobs() const {
    py::dict d;
    for (const auto& [k, v] : P_.values_) d[py::str(k)] = value_text(v);
    return d;
  }

  /// [rows, d], or [runs, rows, d] for a model built from several runs of token ids.
  py::array_t<double> x0() const {
    if (S_.Z0.runs > 1)
      return to_numpy(S_.Z0.Z.data(), {static_cast<std::size_t>(S_.Z0.runs), static_cast<std::size_t>(S_.Z0.len), dim()});
    return to_numpy(S_.Z0.Z.data(), {static_cast<std::size_t>(S_.Z0.len), dim()});
  }

  /// X [runs, rows, d] or [rows, d] -> the state after layer `layer` (same shape).
  py::array_t<double> step(const Array& X, long layer) const {
    Batch Z = batch_of(X, "X");
    check_layer(layer);
    {
      py::gil_scoped_release release;
      checked([&] { apply(layer, Z); });
    }
    return to_numpy(Z.Z.data(), shape_of(X));
  }

  /// The tangent map of layer `layer` at X [rows, d] applied to k tangents V [k, rows, d].
  py::array_t<double> jvp(const Array& X, const Array& V, long layer) const {
    const Batch Z = batch_of(X, "X");
    if (Z.runs != 1) throw InputError(fmt::format("X: shape {}; expected one state [rows, d] for jvp", shape_text(X)));
    check_layer(layer);
    if (V.ndim() != 3 || static_cast<int>(V.shape(1)) != Z.len || V.shape(2) != Z.Z.cols())
      throw InputError(fmt::format("V: shape {}; expected [k, rows, d] = [k, {}, {}]", shape_text(V), Z.len, Z.Z.cols()));
    const auto k = static_cast<int>(V.shape(0));
    Tokens Vt = Eigen::Map<const Tokens>(V.data(), static_cast<Eigen::Index>(k) * Z.len, Z.Z.cols());
    Tokens W;
    {
      py::gil_scoped_release release;
      checked([&] {
        const Batch Zrep{Z.Z.replicate(k, 1), k, Z.len};
        if (S_.step) {
          Batch next;
          S_.step(layer, Z, Zrep, Vt, next, W);
        } else {
          S_.map->jvp(layer, Zrep, Vt, W);
        }
      });
    }
    return to_numpy(W.data(), shape_of(V));
  }

  /// Layers 1..depth from X0 [runs, rows, d] (or [rows, d]); returns {layer: state} for the layers
  /// `taps` selects (parse_taps syntax: "all", "0,10:100:10"), in the model's precision widened to double.
  py::dict trajectory(const Array& X0, long depth, const std::string& taps) const {
    if (depth < 1) throw InputError(fmt::format("depth: expected an integer >= 1, got {}", depth));
    const std::vector<long> layers = parse_taps(taps, depth);
    auto sink = std::make_shared<MemorySink>();
    {
      Batch Z = batch_of(X0, "X0");
      py::gil_scoped_release release;
      checked([&] {
        StateTapObserver obs(sink, layers);
        if (S_.map->float_state()) {
          BatchF ZF{Z.Z.cast<float>(), Z.runs, Z.len};
          iterate(*S_.map, ZF, depth, {&obs});
        } else {
          iterate(*S_.map, Z, depth, {&obs});
        }
      });
    }
    py::dict out;
    for (long k : layers) {
      const auto& [data, shape] = sink->arrays.at(fmt::format("layer_{}", k));
      out[py::int_(k)] = to_numpy(data.data(), shape);
    }
    return out;
  }

  /// The internal quantity `name` of layer `layer` at the state X entering it ([runs, rows, d]).
  py::array_t<double> tap(const std::string& name, const Array& X, long layer, const std::vector<int>& heads) const {
    bool offered = false;
    std::vector<std::string> names;
    for (const std::string& t : S_.map->tap_names()) {
      names.push_back(t.substr(0, t.find(' ')));
      offered = offered || names.back() == name;
    }
    if (!offered)
      throw InputError(fmt::format("tap '{}': model {} offers {}", name, name_, names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
    Batch Z = batch_of(X, "X");
    check_layer(layer);
    CaptureTap& cap = *capture_;
    cap.arm(name, layer, heads);
    {
      py::gil_scoped_release release;
      try {
        checked([&] { apply(layer, Z); });
      } catch (...) {
        cap.disarm();
        throw;
      }
    }
    cap.disarm();
    if (cap.shape.empty()) throw InputError(fmt::format("tap '{}': model {} did not hand it out at layer {}", name, name_, layer));
    return to_numpy(cap.value.data(), cap.shape);
  }

  const ModelInstance& instance() const { return S_; }
  std::size_t dim() const { return static_cast<std::size_t>(S_.Z0.Z.cols()); }

 private:
  std::string name_;
  Params P_;
  ModelInstance S_;
  std::string notes_;
  std::unique_ptr<CaptureTap> capture_;  // watches the map from construction; armed by tap()

  void check_layer(long layer) const {
    if (layer < 1) throw InputError(fmt::format("layer: expected an integer >= 1 (layer 1 maps x(0) to x(1)), got {}", layer));
  }

  void apply(long layer, Batch& Z) const {
    if (S_.map->float_state()) {
      BatchF ZF{Z.Z.cast<float>(), Z.runs, Z.len};
      S_.map->apply_float(layer, ZF);
      Z.Z = ZF.Z.cast<double>();
    } else {
      S_.map->apply(layer, Z);
    }
  }

  Batch batch_of(const Array& X, const char* what) const {
    const auto rows = static_cast<std::size_t>(S_.Z0.len);
    if (X.ndim() == 2 && static_cast<std::size_t>(X.shape(0)) == rows && static_cast<std::size_t>(X.shape(1)) == dim())
      return Batch{Eigen::Map<const Tokens>(X.data(), X.shape(0), X.shape(1)), 1, static_cast<int>(rows)};
    if (X.ndim() == 3 && static_cast<std::size_t>(X.shape(1)) == rows && static_cast<std::size_t>(X.shape(2)) == dim() && X.shape(0) >= 1)
      return Batch{Eigen::Map<const Tokens>(X.data(), X.shape(0) * X.shape(1), X.shape(2)), static_cast<int>(X.shape(0)),
                   static_cast<int>(rows)};
    throw InputError(fmt::format("{}: shape {}; expected [rows, d] or [runs, rows, d] with rows = {}, d = {} for model {}", what,
                                 shape_text(X), rows, dim(), name_));
  }
};

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
  {
    py::gil_scoped_release release;
    checked([&] { R = depth_spectrum(F, Z0, o); });
  }
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
  {
    py::gil_scoped_release release;
    checked([&] { R = depth_spectrum(*S.map, Z0, o, S.step); });
  }
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

// ---- tokenizers (io/tokenizer.hpp) ----

std::string type_name(const py::handle& obj) { return py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>(); }

/// A text argument as UTF-8 bytes: a str (a lone surrogate passes through as its 3 bytes, which the
/// tokenizer then refuses as invalid UTF-8, with the byte offset) or bytes (taken as UTF-8).
std::string text_of(const py::handle& obj, const std::string& what) {
  if (PyBytes_Check(obj.ptr())) return std::string(PyBytes_AS_STRING(obj.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(obj.ptr())));
  if (!PyUnicode_Check(obj.ptr()))
    throw InputError(fmt::format("{}: type {}; expected a str", what, type_name(obj)));
  py::object b = py::reinterpret_steal<py::object>(PyUnicode_AsEncodedString(obj.ptr(), "utf-8", "surrogatepass"));
  if (!b) throw py::error_already_set();
  return std::string(PyBytes_AS_STRING(b.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(b.ptr())));
}

/// Token ids from a list (or any sequence) of ints or a 1-D NumPy integer array.
std::vector<std::int64_t> ids_of(const py::handle& obj) {
  std::vector<std::int64_t> ids;
  if (py::isinstance<py::array>(obj)) {
    const auto a = py::reinterpret_borrow<py::array>(obj);
    const char kind = a.dtype().kind();
    if (kind != 'i' && kind != 'u')
      throw InputError(fmt::format("ids: a NumPy array of dtype {}; expected integer token ids", py::str(a.dtype()).cast<std::string>()));
    if (a.ndim() != 1) throw InputError(fmt::format("ids: shape {}; expected one sequence of token ids [n]", shape_text(a)));
    if (kind == 'u' && a.itemsize() == 8) {
      const auto u = py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
      for (py::ssize_t k = 0; k < u.shape(0); ++k) {
        if (u.data()[k] > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
          throw InputError(fmt::format("ids[{}] is {}; expected a token id of the vocabulary", k, u.data()[k]));
        ids.push_back(static_cast<std::int64_t>(u.data()[k]));
      }
      return ids;
    }
    const auto c = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    ids.assign(c.data(), c.data() + c.shape(0));
    return ids;
  }
  if (PyUnicode_Check(obj.ptr()) || PyBytes_Check(obj.ptr()) || !PySequence_Check(obj.ptr()))
    throw InputError(fmt::format("ids: type {}; expected a list or a NumPy array of integer token ids", type_name(obj)));
  const auto seq = py::reinterpret_borrow<py::sequence>(obj);
  ids.reserve(seq.size());
  for (std::size_t k = 0; k < seq.size(); ++k) {
    const py::object x = seq[k];
    py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(x.ptr()));
    if (!i) {
      PyErr_Clear();
      throw InputError(fmt::format("ids[{}]: type {}; expected an integer token id", k, type_name(x)));
    }
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (overflow != 0)
      throw InputError(fmt::format("ids[{}] is {}; expected a token id of the vocabulary", k, py::str(i).cast<std::string>()));
    ids.push_back(static_cast<std::int64_t>(v));
  }
  return ids;
}

/// One encoded text as Python sees it; `texts` (each piece decoded alone) is computed when first read.
class PyEncoding {
 public:
  PyEncoding(Encoding e, Tokenizer t) : e_(std::move(e)), t_(std::move(t)) {}

  py::array_t<std::int64_t> ids() const {
    py::array_t<std::int64_t> a(static_cast<py::ssize_t>(e_.ids.size()));
    std::copy(e_.ids.begin(), e_.ids.end(), a.mutable_data());
    return a;
  }
  const std::vector<std::string>& pieces() const { return e_.pieces; }
  std::vector<bool> special() const { return std::vector<bool>(e_.special.begin(), e_.special.end()); }
  const std::vector<std::string>& unknown() const { return e_.unknown; }
  /// piece_text of each id: the labels. A piece whose id the vocabulary lacks (a template's special
  /// token outside it) keeps its piece string.
  const std::vector<std::string>& texts() const {
    if (!texts_) {
      std::vector<std::string> v;
      v.reserve(e_.ids.size());
      for (std::size_t k = 0; k < e_.ids.size(); ++k) {
        try {
          v.push_back(t_.piece_text(e_.ids[k]));
        } catch (const InputError&) {
          v.push_back(e_.pieces[k]);
        }
      }
      texts_ = std::move(v);
    }
    return *texts_;
  }
  std::size_t size() const { return e_.ids.size(); }
  bool equals(const PyEncoding& o) const {
    return e_.ids == o.e_.ids && e_.pieces == o.e_.pieces && e_.special == o.e_.special && e_.unknown == o.e_.unknown;
  }
  std::string repr() const {
    constexpr std::size_t shown = 12;
    const std::size_t n = e_.ids.size();
    std::vector<std::string> ids, pieces;
    for (std::size_t k = 0; k < std::min(n, shown); ++k) {
      ids.push_back(std::to_string(e_.ids[k]));
      pieces.push_back(py::repr(py::str(e_.pieces[k])).cast<std::string>());
    }
    const std::string more = n > shown ? ", ..." : "";
    std::string s = fmt::format("Encoding({} token{}: ids=[{}{}], pieces=[{}{}]", n, n == 1 ? "" : "s", fmt::join(ids, ", "), more,
                                fmt::join(pieces, ", "), more);
    if (!e_.unknown.empty()) s += fmt::format(", unknown={}", py::repr(py::cast(e_.unknown)).cast<std::string>());
    return s + ")";
  }

 private:
  Encoding e_;
  Tokenizer t_;
  mutable std::optional<std::vector<std::string>> texts_;
};

Tokenizer tokenizer_from_checkpoint(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw InputError(fmt::format("{}: {}; expected a checkpoint folder holding a tokenizer.json (Tokenizer.from_file reads a file)",
                                 dir.string(), std::filesystem::exists(dir, ec) ? "not a folder" : "no such folder"));
  if (!std::filesystem::is_regular_file(dir / "tokenizer.json", ec))
    throw InputError(fmt::format("no tokenizer.json in {}; expected a checkpoint folder holding the tokenizer's tokenizer.json",
                                 dir.string()));
  return Tokenizer::from_file(dir);
}

PyEncoding tokenizer_encode(const Tokenizer& t, const py::object& text, bool add_special_tokens) {
  const std::string s = text_of(text, "text");
  Encoding e;
  {
    py::gil_scoped_release release;
    e = t.encode(s, add_special_tokens);
  }
  return PyEncoding(std::move(e), t);
}

std::vector<PyEncoding> tokenizer_encode_batch(const Tokenizer& t, const py::object& texts, bool add_special_tokens, int threads) {
  if (PyUnicode_Check(texts.ptr()) || PyBytes_Check(texts.ptr()))
    throw InputError(fmt::format("texts: type {}; expected a list of str (encode takes one text)", type_name(texts)));
  if (threads < 0) throw InputError(fmt::format("threads: expected 0 (every core) or a positive count, got {}", threads));
  if (!py::isinstance<py::iterable>(texts))
    throw InputError(fmt::format("texts: type {}; expected a list of str", type_name(texts)));
  std::vector<std::string> v;
  for (const py::handle x : py::iter(texts)) v.push_back(text_of(x, fmt::format("texts[{}]", v.size())));
  std::vector<Encoding> r;
  {
    py::gil_scoped_release release;
    for (std::size_t k = 0; k < v.size(); ++k) require_utf8(v[k], fmt::format("texts[{}]", k));  // name the text
    r = t.encode_batch(v, add_special_tokens, threads);
  }
  std::vector<PyEncoding> out;
  out.reserve(r.size());
  for (Encoding& e : r) out.emplace_back(std::move(e), t);
  return out;
}

std::string tokenizer_repr(const Tokenizer& t) {
  return fmt::format("tokdyn.Tokenizer({}, vocab_size={}: {})", py::repr(py::str(t.source())).cast<std::string>(), t.vocab_size(),
                     t.summary());
}

}  // namespace
}  // namespace tokdyn::python

PYBIND11_MODULE(_core, mod) {
  using namespace tokdyn;
  using namespace tokdyn::python;
  mod.doc() = "tokdyn's C++ core (see the package tokdyn for the documented interface)";
  mod.attr("__version__") = std::string(TOKDYN_VERSION);

  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const py::builtin_exception&) {
      throw;
    } catch (const py::error_already_set&) {
      throw;
    } catch (...) {
      const Failure f = failure_of(std::current_exception());
      PyErr_SetString(f.code == exit_code::bad_input ? PyExc_ValueError : PyExc_RuntimeError, f.line.c_str());
    }
  });

  mod.def("presets", &list_presets);
  mod.def("show_json", &show_json, py::arg("preset"));
  mod.def("run", &run_preset, py::arg("preset"), py::arg("out"), py::arg("sets"), py::arg("threads"), py::arg("figures"),
          py::arg("overwrite"), py::arg("inputs"));
  mod.def("model_names", &model_names);
  mod.def("model_schema_json", [](const std::string& name) {
    nlohmann::json j = schema_json(model_schema(descriptor(name)));
    j["description"] = model_descriptor(name).description;
    j["taps"] = model_descriptor(name).taps;
    j["schedule_knobs"] = model_descriptor(name).schedule_knobs;
    return j.dump();
  });

  py::class_<Model>(mod, "Model")
      .def(py::init<const std::string&, const std::map<std::string, std::string>&, const std::string&>(), py::arg("name"),
           py::arg("knobs"), py::arg("dir"))
      .def_property_readonly("name", &Model::name)
      .def_property_readonly("tap_names", &Model::tap_names)
      .def_property_readonly("on_sphere", &Model::on_sphere)
      .def_property_readonly("notes_json", &Model::notes)
      .def_property_readonly("knobs", &Model::knobs)
      .def("x0", &Model::x0)
      .def("step", &Model::step, py::arg("X"), py::arg("layer"))
      .def("jvp", &Model::jvp, py::arg("X"), py::arg("V"), py::arg("layer"))
      .def("trajectory", &Model::trajectory, py::arg("X0"), py::arg("depth"), py::arg("taps"))
      .def("tap", &Model::tap, py::arg("name"), py::arg("X"), py::arg("layer"), py::arg("heads"));

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

  py::class_<PyEncoding>(mod, "Encoding", "One encoded text (Tokenizer.encode): ids, pieces, special, unknown, texts.")
      .def_property_readonly("ids", &PyEncoding::ids, "The token ids (a new NumPy int64 array at each read).")
      .def_property_readonly("pieces", &PyEncoding::pieces, "The vocabulary strings of the ids (Hugging Face's tokens).")
      .def_property_readonly("special", &PyEncoding::special,
                             "Per token: an added special token, or one the post-processor's template added.")
      .def_property_readonly("unknown", &PyEncoding::unknown,
                             "The spans of the text the vocabulary could not produce (unknown token or dropped).")
      .def_property_readonly("texts", &PyEncoding::texts, "Each token decoded alone (Tokenizer.piece_text): labels.")
      .def("__len__", &PyEncoding::size)
      .def("__eq__", [](const PyEncoding& a, const py::object& b) -> py::object {
        if (!py::isinstance<PyEncoding>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        return py::bool_(a.equals(b.cast<const PyEncoding&>()));
      })
      .def("__repr__", &PyEncoding::repr);

  py::class_<Tokenizer>(mod, "Tokenizer", "A checkpoint's tokenizer read from its tokenizer.json (see tokdyn.Tokenizer).")
      .def_static("from_file", &Tokenizer::from_file, py::arg("path"),
                  "Reads a tokenizer.json, or the tokenizer.json of a checkpoint folder (ValueError naming the file when it is "
                  "missing, malformed or uses something tokdyn does not implement).")
      .def_static("from_checkpoint", &tokenizer_from_checkpoint, py::arg("dir"),
                  "The tokenizer.json of a checkpoint folder (ValueError \"no tokenizer.json in DIR\" when it has none).")
      .def_static("from_json", [](const py::object& text, const std::string& name) { return Tokenizer::from_json(text_of(text, "json"), name); },
                  py::arg("text"), py::arg("name") = "tokenizer.json",
                  "Parses the text of a tokenizer.json; `name` is the source named in messages.")
      .def("encode", &tokenizer_encode, py::arg("text"), py::arg("add_special_tokens") = true,
           "Encodes one text (str, or bytes holding UTF-8) as Hugging Face's encode(text, add_special_tokens): "
           "add_special_tokens applies the post-processor's template (BOS / EOS). Returns an Encoding.")
      .def("encode_batch", &tokenizer_encode_batch, py::arg("texts"), py::arg("add_special_tokens") = true, py::arg("threads") = 0,
           "Encodes a list of texts on `threads` threads (0: every core) without the GIL; the same Encodings as "
           "encode one by one, whatever the thread count.")
      .def("decode", [](const Tokenizer& t, const py::object& ids, bool skip) {
        const std::vector<std::int64_t> v = ids_of(ids);
        py::gil_scoped_release release;
        return t.decode(v, skip);
      }, py::arg("ids"), py::arg("skip_special_tokens") = false,
           "Decodes token ids (a list or a 1-D NumPy integer array) as Hugging Face's decode(ids, skip_special_tokens); "
           "ValueError for an id outside the vocabulary.")
      .def("piece_text", &Tokenizer::piece_text, py::arg("id"),
           "One id decoded alone: the piece as text, for labels (' world' for GPT-2's 'Ġworld').")
      .def("token_to_id", [](const Tokenizer& t, const std::string& token) { return t.token_to_id(token); }, py::arg("token"),
           "The id of a vocabulary string (added tokens included), or None.")
      .def("id_to_token", &Tokenizer::id_to_token, py::arg("id"),
           "The vocabulary string of an id (added tokens included); ValueError when there is none.")
      .def("is_special", &Tokenizer::is_special, py::arg("id"), "Whether the id is an added special token.")
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size, "One past the largest id (added tokens included).")
      .def_property_readonly("source", &Tokenizer::source, "The path it was read from (or the name given to from_json).")
      .def_property_readonly("summary", &Tokenizer::summary, "One line: the model and the pipeline.")
      .def_property_readonly("sha256", &Tokenizer::sha256, "SHA-256 of the tokenizer.json bytes (hex), for manifests.")
      .def("__repr__", &tokenizer_repr);
}
