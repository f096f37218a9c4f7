// Preset depth-spectra: the top-k Lyapunov exponents of the depth map of any tokdyn model along
// one trajectory (coupling paper eq. (10): the linearised depth dynamics; growth scales gamma = e^mu
// of §2.9), by discrete QR through the model's own JVP (analysis/depth_spectra.hpp).
//
// The models come from the model registry (runtime/model_registry.hpp): this preset has no
// per-model code. Adding a model there adds it here, with its knobs (each refused for another model).
#include <algorithm>
#include <filesystem>
#include <functional>
#include <cmath>
#include <optional>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <map>
#include <memory>
#include <sstream>

#include "tokdyn/analysis/depth_spectra.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "tokdyn/experiments/output_tables.hpp"
#include "tokdyn/experiments/taps.hpp"

namespace tokdyn {
namespace {

void run_depth_spectra(const Params& P, RunContext& ctx) {
  const std::string model = P.get_string("model");
  DepthSpectrumOptions o;
  o.k = static_cast<int>(P.get_int("k"));
  o.depth = P.get_int("depth");
  o.burn_in = P.get_int("burn_in");
  o.seed = static_cast<std::uint64_t>(P.get_int("tangent_seed"));
  if (o.burn_in >= o.depth)
    throw InputError(fmt::format("parameter 'burn_in': expected burn_in < depth = {}, got {}", o.depth, o.burn_in));
  std::vector<long> Hs = P.get_int_list("H");
  if (Hs.empty()) {
    const long N = o.depth - o.burn_in;
    for (long div : {8, 4, 2})
      if (Hs.empty() || std::max(1L, N / div) != Hs.back()) Hs.push_back(std::max(1L, N / div));
  }
  for (long H : Hs)
    if (H > o.depth - o.burn_in)
      throw InputError(fmt::format("parameter 'H': Steklov window {} is longer than the measured window depth - burn_in = {}", H,
                                   o.depth - o.burn_in));
  ModelInstance S = build_model(model, P, ctx);
  if (S.Z0.runs != 1)
    throw InputError(fmt::format("parameter 'token_ids': {} runs of token ids; depth-spectra follows one trajectory, expected [1, tokens]",
                                 S.Z0.runs));
  // A start state from the user (x0 = FILE.npy) replaces the drawn or embedded tokens; either way the
  // start actually used is written to x0.npy, so that anyone can recompute the trajectory.
  if (const std::string& x0 = P.get_string("x0"); !x0.empty()) {
    std::vector<std::size_t> shape;
    const std::vector<double> v = read_npy_double(x0, shape);
    const auto T = static_cast<std::size_t>(S.Z0.len), d = static_cast<std::size_t>(S.Z0.Z.cols());
    if (shape.size() != 2 || shape[0] != T || shape[1] != d)
      throw InputError(fmt::format("parameter 'x0' ({}): shape [{}]; expected [tokens, d] = [{}, {}] for model={}", x0,
                                   fmt::join(shape, ", "), T, d, model));
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        throw InputError(fmt::format("parameter 'x0' ({}): entry [{}, {}] is {}; expected finite numbers", x0, i / d, i % d, v[i]));
    Tokens X = Eigen::Map<const Tokens>(v.data(), static_cast<Eigen::Index>(T), static_cast<Eigen::Index>(d));
    if (S.map->on_sphere()) {  // the model's state lives on (S^{d-1})^T: each token is normalised
      for (Eigen::Index i = 0; i < X.rows(); ++i) {
        const double nrm = X.row(i).norm();
        if (!(nrm > 0))
          throw InputError(fmt::format("parameter 'x0' ({}): token {} is zero; model={} needs tokens on the unit sphere", x0, i, model));
        if (std::abs(nrm - 1.0) > 4.0 * std::numeric_limits<double>::epsilon()) X.row(i) /= nrm;  // on it already: kept
      }
      S.notes["x0"] = fmt::format("{} (each token normalised: model={} lives on the sphere)", x0, model);
    } else {
      S.notes["x0"] = x0;
    }
    S.Z0 = Batch{X, 1, S.Z0.len};
  }
  write_npy(ctx.dir / "x0.npy", S.Z0.Z.data(), {static_cast<std::size_t>(S.Z0.len), static_cast<std::size_t>(S.Z0.Z.cols())});
  const long dim = tangent_dimension(*S.map, S.Z0);
  if (o.k > dim)
    throw InputError(fmt::format("parameter 'k': expected at most the tangent dimension {} = tokens x {} of model={}, got {}", dim,
                                 dim / S.Z0.len, model, o.k));
  // A tangent frame from the user (v0 = FILE.npy [k, tokens, d]) replaces the Gaussian one.
  Tokens frame;
  const std::string v0 = P.get_string("v0");
  if (!v0.empty()) {
    std::vector<std::size_t> shape;
    const std::vector<double> v = read_npy_double(v0, shape);
    const std::size_t len = static_cast<std::size_t>(S.Z0.len), dd = static_cast<std::size_t>(S.Z0.Z.cols());
    if (shape.size() != 3 || shape[0] != static_cast<std::size_t>(o.k) || shape[1] != len || shape[2] != dd)
      throw InputError(fmt::format("parameter 'v0' ({}): shape [{}]; expected [k, tokens, d] = [{}, {}, {}] for model={}", v0,
                                   fmt::join(shape, ", "), o.k, len, dd, model));
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        throw InputError(fmt::format("parameter 'v0' ({}): entry {} is {}; expected finite numbers", v0, i, v[i]));
    frame = Eigen::Map<const Tokens>(v.data(), static_cast<Eigen::Index>(o.k) * S.Z0.len, S.Z0.Z.cols());
    o.tangents = &frame;
    S.notes["v0"] = fmt::format("{} (then projected onto the tangent space and orthonormalised; v0.npy: the frame given)", v0);
  }
  const std::vector<long> att = P.get_int_list("attention");
  for (long k : att)
    if (k > o.depth) throw InputError(fmt::format("parameter 'attention': expected layers in [1, depth = {}], got {}", o.depth, k));
  const std::vector<long> tap_layers = parse_taps(P.get_string("taps"), o.depth);
  o.keep_states = P.get_bool("trajectory") || !tap_layers.empty();
  // The attention weights through the model's tap (dynamics.hpp TapObserver): computed by the model
  // at the state entering each listed layer, as it moves the state, and handed to the sink.
  std::optional<ArrayTapObserver> att_tap;
  if (!att.empty()) {
    att_tap.emplace(std::make_shared<NpyFolderSink>(ctx.dir / "attention"), "attention", att);
    S.map->watch(&*att_tap);
    S.notes["attention"] =
        "attention/layer_K.npy [runs = 1, heads, tokens, tokens]: the attention weights of layer K at the state entering it, x(K-1)";
  }
  DepthSpectrum R;
  try {
    auto t = ctx.phase("spectrum");
    R = depth_spectrum(*S.map, S.Z0, o, S.step, ctx.progress);
  } catch (const std::invalid_argument& e) {
    if (!v0.empty() && std::string(e.what()).rfind("the initial tangent frame", 0) == 0)
      throw InputError(fmt::format("parameter 'v0' ({}): {}", v0, e.what()));
    throw;
  }
  write_npy(ctx.dir / "v0.npy", R.tangents0.data(),
            {static_cast<std::size_t>(o.k), static_cast<std::size_t>(S.Z0.len), static_cast<std::size_t>(S.Z0.Z.cols())});
  if (!tap_layers.empty()) {
    NpyFolderSink sink(taps_dir(ctx.dir, model));
    for (long k : tap_layers) {
      const Tokens& X = R.states[static_cast<std::size_t>(k)];
      sink.put(fmt::format("layer_{}", k), X.data(), {1, static_cast<std::size_t>(X.rows()), static_cast<std::size_t>(X.cols())});
    }
  }
  if (P.get_bool("trajectory")) {
    std::vector<double> buf;
    buf.reserve(R.states.size() * static_cast<std::size_t>(R.states.front().size()));
    for (const Tokens& X : R.states) buf.insert(buf.end(), X.data(), X.data() + X.size());
    write_npy(ctx.dir / "trajectory.npy", buf.data(),
              {R.states.size(), static_cast<std::size_t>(S.Z0.len), static_cast<std::size_t>(S.Z0.Z.cols())});
  }

  {
    CsvWriter ly = ctx.table("lyapunov.csv");
    ly.blank_nonfinite({"unresolved_from_layer"});
    std::vector<long> unresolved;
    for (int i = 0; i < R.k; ++i) {
      const long at = R.unresolved_at.empty() ? -1 : R.unresolved_at[static_cast<std::size_t>(i)];
      if (at >= 0) unresolved.push_back(i);
      ly.cell(i).cell(R.mu[i]).cell(R.gamma[i]).cell(std::string(at >= 0 ? "false" : "true"));
      if (at >= 0) ly.cell(at); else ly.empty();
      ly.end_row();
    }
    S.notes["unresolved_columns"] = unresolved;
    if (!unresolved.empty())
      ctx.warnings.push_back(fmt::format("{} QR column(s) fell to round-off: their exponents are unresolved (a rank-deficient "
                                         "layer); see lyapunov.csv:resolved", unresolved.size()));
  }
  CsvWriter gr = ctx.table("running.csv");
  for (long l = 1; l <= R.depth; ++l)
    for (int i = 0; i < R.k; ++i) {
      gr.cell(l).cell(i).cell(R.log_r(l - 1, i));
      if (l > R.burn_in) gr.cell(R.mu_running(l - 1 - R.burn_in, i)); else gr.empty();
      gr.end_row();
    }
  // Dichotomy (Sacker-Sell) intervals of the top-k QR diagonal (Thm 5): Bohl intervals of each
  // column with Steklov window H, merged where they overlap.
  CsvWriter dich = ctx.table("dichotomy.csv");
  for (long H : Hs) {
    const auto merged = cocycle::merge_intervals(cocycle::bohl_intervals(R.measured_log_r(), H));
    for (std::size_t j = 0; j < merged.size(); ++j) {
      dich.cell(H).cell(static_cast<long>(j)).cell(merged[j].lower).cell(merged[j].upper).cell(static_cast<long>(merged[j].columns.size()));
      dich.end_row();
    }
  }
  ctx.notes = S.notes;
  ctx.notes["tangent_dimension"] = dim;
  ctx.notes["tangent_space"] = S.map->on_sphere()
                                   ? "product of the tangent spaces of (S^{d-1})^T: radial directions absent (the step is normalised)"
                                   : "R^{T d} (the state is not normalised)";
  ctx.notes["exact_jvp"] = S.map->has_exact_jvp();
  ctx.notes["method"] = "discrete QR (Benettin): k tangents pushed by one batched jvp per layer, thin Householder QR with "
                        "diag(R) > 0, mu_i = mean of log R_ii over layers burn_in+1..depth, in QR order";
  ctx.notes["sum_mu"] = R.mu.sum();
  ctx.summary("mu_max", R.mu.maxCoeff());
  ctx.summary("mu_min", R.mu.minCoeff());
  ctx.summary("sum_mu", R.mu.sum());
  ctx.summary("unresolved_exponents", static_cast<long>(S.notes["unresolved_columns"].size()));
}

OutputDecl depth_spectra_outputs() {
  OutputDecl o;
  o.tables = spectrum_tables("of the depth map", index("layer", "layer l (maps x(l-1) to x(l))", 1), "burn_in+1..depth",
                             "burn_in+1..l", "l <= burn_in: not averaged yet", 1, "");
  // rows: the state's rows per run: the tokens (hierarchical: the tokens, then the held block summaries).
  o.arrays = {{"x0.npy", "float64 [rows, d]: the start state used (rows: the tokens; model = hierarchical: then the held block summaries)", ""},
              {"v0.npy", "float64 [k, rows, d]: the initial tangent frame before projection and orthonormalisation", ""},
              {"trajectory.npy", "float64 [depth + 1, rows, d]: the states x(0..depth)", "trajectory = true"},
              {"attention/layer_<K>.npy", "float64 [runs, heads, tokens, tokens]: attention weights of layer K at x(K-1) (runs = 1)", "attention lists K"},
              {"taps/<model>/layer_<K>.npy", "float64 [1, rows, d]: the state after layer K", "taps lists K"}};
  for (ArrayDecl& a : model_arrays()) o.arrays.push_back(std::move(a));  // the models' own files (token_ids.npy)
  o.summaries = {{"mu_max", "the largest of the k exponents computed", "1/layer", ""},
                 {"mu_min", "the smallest of the k exponents computed", "1/layer", ""},
                 {"sum_mu", "sum of the k exponents (volume growth of a k-frame)", "1/layer", ""},
                 {"unresolved_exponents", "exponents whose QR column fell to round-off", "", ""}};
  o.figures = {{"depth_spectra.png", "exponents, running exponents and dichotomy intervals", ""}};
  return o;
}

std::vector<ParamSpec> depth_spectra_params() {
  std::vector<ParamSpec> ps{
     p_string("model", "ssm", "which model's depth map (tokdyn models lists them)", model_names()),
     p_int_list("H", {}, "Steklov windows H of the dichotomy intervals, each <= depth - burn_in (empty: N/8, N/4, N/2 of the measured N layers)", 1, 10000000),
     p_int("k", 8, "number of Lyapunov exponents (tangent vectors)", 1, 100000),
     p_int("depth", 200, "layers applied", 1, 10000000),
     p_int("burn_in", 20, "first layers not averaged (< depth)", 0, 10000000),
     p_int("tokens", 16, "tokens of the trajectory (T)", 1, 100000),
     p_int("seed", 0, "seed of the initial tokens / token ids (and of the SSM weights)", 0, kMaxSeed),
     p_int("tangent_seed", 0, "seed of the initial tangent vectors", 0, kMaxSeed).when("v0", {""}),
     p_string("v0", "", "float64 .npy [k, tokens, d]: the initial tangent frame (projected onto the tangent space and "
              "orthonormalised; empty: Gaussian from tangent_seed); the frame before that step is always written to v0.npy").file(),
     p_bool("trajectory", false, "write the trajectory x(0..depth) to trajectory.npy [depth + 1, tokens, d]"),
     taps_param("[1, tokens, d] float64 (<variant>: the model; the trajectory the spectrum is taken along)"),
     p_int_list("attention", {}, fmt::format("{}: write the attention weights of these layers to attention/layer_K.npy "
                "[runs = 1, heads, tokens, tokens]", fmt::join(models_with_tap("attention"), ", ")), 1, 10000000),
     p_string("x0", "", "float64 .npy [tokens, d]: the start state (empty: the model's drawn or embedded tokens); "
              "the start used is always written to x0.npy").file()};
  // Every model's knobs from the registry, each applying only to the models that declare it.
  for (ParamSpec& q : model_knobs()) ps.push_back(std::move(q));
  for (ParamSpec& q : ps)
    if (q.key == "attention") q.only_when.push_back({"model", models_with_tap("attention"), false});
  return ps;
}

const ExperimentRegistration reg_depth_spectra{with_outputs(with_smoke(Experiment{
    "depth-spectra",
    "Coupling paper eq. (10): top-k Lyapunov exponents and dichotomy intervals of the depth map of any registered model (tokdyn models) via its JVP",
    depth_spectra_params(),
    run_depth_spectra,
    "depth-spectra",
    [](const Params& P) {
      const double k = static_cast<double>(P.get_int("k")), T = static_cast<double>(P.get_int("tokens"));
      const double depth = static_cast<double>(P.get_int("depth"));
      const std::string model = P.get_string("model");
      // Every model mixes tokens through T x T matrices (the SSM's io form, attention): a few per run
      // of the k + 1 (value and tangents).
      const double mixing = 8.0 * 3.0 * T * T * (k + 1.0);
      const ModelCost c = model_descriptor(model).cost(P);
      const double d = c.d, per_row = c.per_row, weights = c.weight_bytes;
      // Kept states (trajectory, or the states the attention weights are read at) and the .npy buffer.
      const bool keep = P.get_bool("trajectory") || !P.get_int_list("attention").empty() || !P.get_string("taps").empty();
      const double traj = keep ? 2.0 * 8.0 * (depth + 1.0) * T * d : 0.0;
      const double bytes = 8.0 * (8.0 * k * T * d + 2.0 * k * T * k + depth * k * 2.0) + 8.0 * 30.0 * k * T * d + weights + mixing + traj + 64e6;
      const double flops = depth * (k * T * per_row + 4.0 * T * d * k * k);
      return ResourceEstimate{bytes, flops, "k replicas of the T x d state and their tangents, one jvp per layer"};
    }}, {{"depth", "12"}, {"burn_in", "2"}, {"k", "2"}, {"tokens", "4"}, {"n", "4"}, {"m", "4"}}), depth_spectra_outputs())};

}  // namespace
}  // namespace tokdyn
