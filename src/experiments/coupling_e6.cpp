// Preset coupling-e6: the (A6) test of the coupling paper (§4.2 (A6), spec §6.3 E6). At each
// checkpoint of a `tokdyn train` run: the top-k eigenvectors v_i of the held-out loss's Hessian (or
// Gauss-Newton matrix), mapped through W -> dA(l) = d/de D_x F_l(x_l; W + e v_i), decomposed by the
// dichotomy projectors P_±(l) of the model's own tangent cocycle A(l) = D_x F_l(x_l): the fraction
// of each dA that is slow-mode (P_+ dA P_+) and fast-mode (P_- dA), against k random directions.
//
// Split of the work (docs/reproduction.md, E6): the PyTorch half (python/tokdyn_train/e6.py, run as
// `/usr/bin/python3 -m tokdyn_train.e6 step ...` once per checkpoint) computes the curvature
// products, their Lanczos eigenpairs (python/tokdyn_train/lanczos.py), the dense A(l) and dA_i(l)
// by forward mode, and the checks of those; this file reads them and does the dichotomy with
// tokdyn's cocycle machinery (cocycle::find_two_sided_bundles -> P_+(l)), the block fractions
// (analysis/curvature_modes.hpp), the tables, the checks and the (A6) verdict.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/analysis/depth_spectra.hpp"
#include "tokdyn/analysis/curvature_modes.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/interrupt.hpp"
#include "tokdyn/runtime/child_jobs.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/io/tokenizer.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "coupling_e6_schema.hpp"


namespace tokdyn {
namespace coupling_e6 {

namespace fs = std::filesystem;
using cocycle::Matrix;

// ------------------------------------------------------------------------------------------------
// The PyTorch helper as a child process.

/// A folder under TMPDIR removed when the run ends (and on an interrupt).
struct WorkDir {
  fs::path path;
  std::unique_ptr<interrupt::PathGuard> guard;
  WorkDir() {
    const char* t = std::getenv("TMPDIR");
    std::error_code ec;
    const fs::path root = (t && *t && fs::is_directory(t, ec)) ? fs::path(t) : fs::path("/tmp");
    std::string tmpl = (root / "tokdyn-e6-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error(fmt::format("coupling-e6: cannot create a folder in {}: {}", root.string(), std::strerror(errno)));
    path = tmpl;
    guard = std::make_unique<interrupt::PathGuard>(path);
  }
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
};

/// Runs `python3 -m tokdyn_train.e6 ARGS` (PYTHONPATH: python_path(), tokdyn's own folders; one
/// thread). Exit 2: InputError with the helper's one line; any other failure: std::runtime_error.
void run_helper(const std::vector<std::string>& helper_args, const fs::path& work) {
  const char* py_env = std::getenv("TOKDYN_PYTHON");
  const std::string python = (py_env && *py_env) ? py_env : "/usr/bin/python3";
  if (python.find('/') != std::string::npos && ::access(python.c_str(), X_OK) != 0)
    throw InputError(fmt::format("coupling-e6 needs {} with python3-torch (Debian's): cannot run it ({})", python, std::strerror(errno)));
  ChildJob job;
  job.argv = {python, "-m", "tokdyn_train.e6"};
  job.argv.insert(job.argv.end(), helper_args.begin(), helper_args.end());
  job.env = {"PYTHONPATH=" + python_path(), "OMP_NUM_THREADS=1",
             "OPENBLAS_NUM_THREADS=1", "MKL_NUM_THREADS=1"};
  job.stderr_file = work / "helper-stderr.txt";
  const ChildExit ex = run_child(job);
  if (ex.ok()) return;
  std::string last = ex.last_line;
  if (last.rfind("error: ", 0) == 0) last = last.substr(7);
  if (ex.signal == 0 && ex.code == 2) throw InputError(last.empty() ? "coupling-e6: the PyTorch helper refused its input" : last);
  std::ifstream in(job.stderr_file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("No module named 'torch'") != std::string::npos || text.str().find("No module named 'functorch'") != std::string::npos)
    throw InputError("coupling-e6 needs PyTorch for /usr/bin/python3 (apt-get install python3-torch)");
  const std::string why = ex.signal ? fmt::format("killed by signal {}", ex.signal) : fmt::format("exit status {}", ex.code);
  throw std::runtime_error(fmt::format("coupling-e6: the PyTorch helper failed ({}): {}", why, last));
}

// ------------------------------------------------------------------------------------------------
// Inputs: checkpoints and the loss batch.

struct StepDir {
  long step = 0;
  fs::path dir;
};

bool is_checkpoint(const fs::path& d) {
  std::error_code ec;
  return fs::is_regular_file(d / "config.json", ec) && fs::is_regular_file(d / "model.safetensors", ec);
}

/// The checkpoints of a `tokdyn train` folder (checkpoints/step-N, ascending), or the folder itself.
std::vector<StepDir> list_steps(const fs::path& root) {
  std::vector<StepDir> out;
  std::error_code ec;
  const fs::path cdir = root / "checkpoints";
  if (fs::is_directory(cdir, ec)) {
    static const std::regex re("step-([0-9]{1,12})");
    for (const auto& e : fs::directory_iterator(cdir, ec)) {
      std::smatch m;
      const std::string name = e.path().filename().string();
      if (std::regex_match(name, m, re) && is_checkpoint(e.path())) out.push_back({std::stol(m[1].str()), e.path()});
    }
    std::sort(out.begin(), out.end(), [](const StepDir& a, const StepDir& b) { return a.step < b.step; });
  }
  if (out.empty() && is_checkpoint(root)) {
    static const std::regex re("step-([0-9]{1,12})");
    std::smatch m;
    const std::string name = root.filename().string();
    out.push_back({std::regex_match(name, m, re) ? std::stol(m[1].str()) : 0L, root});
  }
  if (out.empty())
    throw InputError(fmt::format("parameter 'checkpoint' = '{}': neither a `tokdyn train` results folder (checkpoints/step-N with config.json and "
                                 "model.safetensors) nor a checkpoint folder", root.string()));
  return out;
}

/// `batch` consecutive windows of `context` ids of the corpus, encoded by the checkpoint's tokenizer.
std::vector<std::int64_t> corpus_ids(const fs::path& corpus, const fs::path& tokenizer_dir, long batch, long context) {
  const Tokenizer tk = Tokenizer::from_file(tokenizer_dir);
  const std::uint64_t need = static_cast<std::uint64_t>(batch * context);
  std::uint64_t bytes = 16 * need + 4096;
  const std::string all = read_regular_file(corpus, std::uint64_t(1) << 30, "parameter 'corpus'");
  while (true) {
    std::string text = all.substr(0, std::min<std::uint64_t>(bytes, all.size()));
    if (text.size() < all.size()) {
      const auto nl = text.find_last_of('\n');
      if (nl != std::string::npos && nl > 0) text.resize(nl + 1);
    }
    Encoding enc = tk.encode(text, false);
    if (enc.ids.size() >= need) {
      enc.ids.resize(need);
      return enc.ids;
    }
    if (text.size() >= all.size())
      throw InputError(fmt::format("parameter 'corpus' = '{}': {} tokens; batch x context = {} x {} = {} needed", corpus.string(), enc.ids.size(),
                                   batch, context, need));
    bytes *= 2;
  }
}

// ------------------------------------------------------------------------------------------------
// One step.

/// A float64 .npy [lead, layers, n, n] (or [layers, n, n]: lead 1) written by the helper.
struct Stack {
  std::vector<double> data;
  long lead = 0, layers = 0, n = 0;
  explicit Stack(const fs::path& file) {
    std::vector<std::size_t> shape;
    data = read_npy_double(file, shape, std::uint64_t(1) << 34);
    if (shape.size() == 3) shape.insert(shape.begin(), 1);
    if (shape.size() != 4 || shape[2] != shape[3]) throw std::runtime_error(fmt::format("coupling-e6: '{}' has an unexpected shape", file.string()));
    lead = static_cast<long>(shape[0]);
    layers = static_cast<long>(shape[1]);
    n = static_cast<long>(shape[2]);
  }
  /// The layers' matrices of entry i (row-major in the file).
  std::vector<Matrix> at(long i) const {
    std::vector<Matrix> out;
    const std::size_t per = static_cast<std::size_t>(n * n);
    for (long l = 0; l < layers; ++l) {
      const double* p = data.data() + static_cast<std::size_t>(i * layers + l) * per;
      out.emplace_back(Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(p, n, n));
    }
    return out;
  }
};

struct Fractions {
  double slow = kNaN, fast = kNaN, pm = kNaN, mp = kNaN, fast_range = kNaN, block_sum = kNaN, slow_share = kNaN, fast_share = kNaN, neutral = kNaN,
         norm = kNaN;
};

struct Stats {
  double mean = kNaN, sd = kNaN;
  long n = 0;
};
Stats stats(const std::vector<double>& x) {
  Stats s;
  s.n = static_cast<long>(x.size());
  if (x.empty()) return s;
  s.mean = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
  double v = 0;
  for (double a : x) v += (a - s.mean) * (a - s.mean);
  s.sd = x.size() > 1 ? std::sqrt(v / static_cast<double>(x.size() - 1)) : 0.0;
  return s;
}

/// a - b against 2 sqrt(sd_a^2 / n_a + sd_b^2 / n_b): yes (above), no (below -), undecided (within).
struct Comparison {
  double diff = kNaN, spread = kNaN;
  cocycle::Verdict verdict = cocycle::Verdict::Undecided;
};
Comparison compare(const Stats& a, const Stats& b) {
  Comparison c;
  c.diff = a.mean - b.mean;
  c.spread = 2.0 * std::sqrt(a.sd * a.sd / static_cast<double>(std::max<long>(1, a.n)) + b.sd * b.sd / static_cast<double>(std::max<long>(1, b.n)));
  c.verdict = c.diff > c.spread ? cocycle::Verdict::Yes : (c.diff < -c.spread ? cocycle::Verdict::No : cocycle::Verdict::Undecided);
  return c;
}

struct StepResult {
  long step = 0;
  bool dichotomy = false;
  std::string why;
  Stats slow_top, slow_rand, fast_top, fast_rand, range_top, range_rand, share_top, share_rand;
};

/// The layer Jacobians against tokdyn's own C++ model of the family (models/decoder: its exact
/// double tangents along its own fp32 trajectory of the same token ids): max over the window's
/// layers and `count` seeded Gaussian tangents v of |J_cpp(l) v - J_torch(l) v| / |J_torch(l) v|.
/// NaN when tokdyn has no model of that name.
double cpp_jacobian_error(const std::string& family, const fs::path& step_dir, const std::vector<std::int64_t>& ids_row, long T, long d,
                          const std::vector<Matrix>& J, long first, const fs::path& work, std::uint64_t seed, int count = 4) {
  const auto names = model_names();
  if (std::find(names.begin(), names.end(), family) == names.end()) return kNaN;
  const ModelDescriptor& desc = model_descriptor(family);
  Params P;
  for (const ParamSpec& ps : desc.knobs) P.values_[ps.key] = ps.def;
  P.values_["tokens"] = T;
  P.values_["seed"] = 0L;
  P.values_["checkpoint"] = step_dir.string();
  const fs::path ids_file = work / "jacobian_ids.npy";
  write_npy(ids_file, ids_row.data(), {1, static_cast<std::size_t>(T)});
  P.values_["token_ids"] = ids_file.string();
  RunContext sub;
  sub.dir = work / "jacobian_model";
  fs::create_directories(sub.dir);
  const ModelInstance inst = build_model(family, P, sub);
  const TangentStep step = inst.step ? inst.step : apply_and_jvp(*inst.map);
  std::mt19937_64 g(seed + 0x6a09e667ULL);
  std::normal_distribution<double> nd(0.0, 1.0);
  Batch Z = inst.Z0, Znext;
  double worst = 0.0;
  const long layers = static_cast<long>(J.size());
  for (long l = 1; l <= first + layers; ++l) {  // tokdyn's layer l is block l - 1
    Tokens V(count * T, d), W;
    for (Eigen::Index i = 0; i < V.size(); ++i) V.data()[i] = nd(g);
    const Batch Zrep{Z.Z.replicate(count, 1), count, static_cast<int>(T)};
    step(l, Z, Zrep, V, Znext, W);
    const long b = l - 1;
    if (b >= first) {
      for (int j = 0; j < count; ++j) {
        const Eigen::Map<const Eigen::VectorXd> v(V.data() + static_cast<std::ptrdiff_t>(j) * T * d, T * d);
        const Eigen::Map<const Eigen::VectorXd> w(W.data() + static_cast<std::ptrdiff_t>(j) * T * d, T * d);
        const Eigen::VectorXd ref = J[static_cast<std::size_t>(b - first)] * v;
        worst = std::max(worst, (w - ref).norm() / std::max(ref.norm(), std::numeric_limits<double>::min()));
      }
    }
    Z = Znext;
  }
  return worst;
}

/// The closest |lambda| to 1 among the eigenvalues of M, as | |lambda| - 1 |.
double unit_margin(const Matrix& M) {
  const Eigen::EigenSolver<Matrix> es(M, false);
  if (es.info() != Eigen::Success) return kNaN;
  return (es.eigenvalues().cwiseAbs().array() - 1.0).abs().minCoeff();
}

void run_e6(const Params& p, RunContext& ctx) {
  const std::string checkpoint = p.get_string("checkpoint");
  const long batch = p.get_int("batch"), context = p.get_int("context"), tokens = p.get_int("tokens");
  const long k = p.get_int("k"), nrand = p.get_int("random"), first = p.get_int("first"), last = p.get_int("last");
  const double proj_tol = p.get_double("proj_tol"), lanczos_tol = p.get_double("lanczos_tol"), margin_tol = p.get_double("unit_margin");
  const std::string curvature = p.get_string("curvature");
  const double max_pnorm = p.get_double("max_projector_norm");
  if (p.get_int("lanczos_max") > 0 && p.get_int("lanczos_max") < k)
    throw InputError(fmt::format("parameter 'lanczos_max' = {}: fewer Lanczos steps than k = {} eigenpairs", p.get_int("lanczos_max"), k));
  if (tokens > context) throw InputError(fmt::format("parameter 'tokens' = {}: longer than 'context' = {}", tokens, context));
  if (last >= 0 && last <= first)
    throw InputError(fmt::format("parameters 'first' = {} and 'last' = {}: expected first < last (or last = -1: the model's depth)", first, last));
  if (!checkpoint.empty() && p.get_string("corpus").empty())
    throw InputError("parameter 'corpus' is required with a checkpoint: a text file whose first batch x context tokens are the loss batch");

  WorkDir work;
  fs::path root;
  fs::path ids_file = work.path / "ids.npy";
  std::vector<StepDir> steps;
  {
    auto t = ctx.phase("inputs");
    if (checkpoint.empty()) {
      root = work.path / "smoke";
      run_helper({"train-smoke", "--out", root.string(), "--steps", std::to_string(p.get_int("smoke_steps")), "--every",
                  std::to_string(p.get_int("smoke_every")), "--seed", std::to_string(p.get_int("seed")), "--batch", std::to_string(batch),
                  "--context", std::to_string(context)},
                 work.path);
      fs::rename(root / "ids.npy", ids_file);
    } else {
      root = checkpoint;
    }
    steps = list_steps(root);
    const std::vector<long>& want = p.get_int_list("steps");
    if (!want.empty()) {
      std::vector<StepDir> chosen;
      for (long s : want) {
        const auto it = std::find_if(steps.begin(), steps.end(), [&](const StepDir& d) { return d.step == s; });
        if (it == steps.end()) {
          std::string have;
          for (const auto& d : steps) have += (have.empty() ? "" : ", ") + std::to_string(d.step);
          throw InputError(fmt::format("parameter 'steps': no checkpoint of step {} in '{}' (steps: {})", s, root.string(), have));
        }
        chosen.push_back(*it);
      }
      steps = chosen;
    }
    if (!checkpoint.empty()) {
      fs::path tok = root / "tokenizer.json";
      std::error_code ec;
      if (!fs::is_regular_file(tok, ec)) tok = steps.front().dir / "tokenizer.json";
      if (!fs::is_regular_file(tok, ec))
        throw InputError(fmt::format("parameter 'checkpoint' = '{}': no tokenizer.json to encode the corpus with", root.string()));
      const std::vector<std::int64_t> ids = corpus_ids(p.get_string("corpus"), tok, batch, context);
      write_npy(ids_file, ids.data(), {static_cast<std::size_t>(batch), static_cast<std::size_t>(context)});
    }
  }

  CsvWriter eig = ctx.table("eigen.csv");
  eig.blank_nonfinite({"residual", "slow_fraction", "fast_fraction", "cross_plus_minus", "cross_minus_plus", "fast_range_fraction", "block_sum", "slow_share", "fast_share"});
  CsvWriter frac = ctx.table("fractions.csv");
  frac.blank_nonfinite({"slow_top_mean", "slow_top_sd", "slow_random_mean", "slow_random_sd", "fast_top_mean", "fast_random_mean",
                        "fast_range_top_mean", "fast_range_random_mean", "slow_share_top_mean", "slow_share_random_mean", "end_margin"});
  CsvWriter proj = ctx.table("projectors.csv");
  proj.blank_nonfinite({"invariance"});
  CheckTable checks(ctx.dir / "checks.csv");

  double worst_cpp = 0;
  std::string cpp_why;
  std::vector<std::int64_t> ids_row;
  {
    std::vector<std::size_t> shape;
    const std::vector<std::int64_t> all = read_npy_int(ids_file, shape);
    if (shape.size() != 2 || static_cast<long>(shape[1]) < tokens) throw std::runtime_error("coupling-e6: ids.npy has an unexpected shape");
    ids_row.assign(all.begin(), all.begin() + tokens);
  }
  double worst_known = 0, worst_angle = 0, worst_dense = 0, worst_sym = 0, worst_fd = 0, worst_dA = 0, worst_res = 0, worst_ones = 0;
  double worst_idem = 0, worst_comp = 0, worst_sum = 0, worst_trace = 0, worst_inv = 0;
  bool all_converged = true, quotient_used = false, any_dichotomy = false;
  std::string fd_what;
  std::vector<StepResult> results;
  nlohmann::json step_notes = nlohmann::json::array();

  for (std::size_t si = 0; si < steps.size(); ++si) {
    const StepDir& sd = steps[si];
    const fs::path out = work.path / fmt::format("step-{}", sd.step);
    {
      auto t = ctx.phase("pytorch");
      std::vector<std::string> a{"step", "--checkpoint", sd.dir.string(), "--ids", ids_file.string(), "--out", out.string(),
                                 "--k", std::to_string(k), "--random", std::to_string(nrand), "--curvature", curvature,
                                 "--first", std::to_string(first), "--last", std::to_string(last), "--tokens", std::to_string(tokens),
                                 "--delta", p.get_string("delta"), "--tol", fmt::format("{:.17g}", lanczos_tol), "--seed",
                                 std::to_string(p.get_int("seed")), "--checks"};
      if (p.get_int("lanczos_max") > 0) {
        a.push_back("--max-iter");
        a.push_back(std::to_string(p.get_int("lanczos_max")));
      }
      run_helper(a, work.path);
    }
    auto t = ctx.phase("dichotomy");
    const nlohmann::json info = nlohmann::json::parse(read_regular_file(out / "info.json", 1 << 24, "coupling-e6 helper info.json"));
    const long T = info.at("tokens").get<long>(), d = info.at("d").get<long>();
    // J.npy: the layer Jacobians D_x F_l(x_l) = I + A(l) (the cocycle's maps B(l)).
    std::vector<Matrix> A;
    long Lw = 0, N = 0;
    {
      const Stack J(out / "J.npy");
      Lw = J.layers;
      N = J.n;
      A = J.at(0);
    }
    // The same Jacobians from tokdyn's C++ model of the family (an independent implementation).
    if (cpp_why.empty()) {
      try {
        const double e = cpp_jacobian_error(info.at("family").get<std::string>(), sd.dir, ids_row, T, d, A, first, work.path,
                                            static_cast<std::uint64_t>(p.get_int("seed")));
        if (std::isnan(e)) cpp_why = fmt::format("tokdyn has no C++ model of the family '{}'", info.at("family").get<std::string>());
        else worst_cpp = std::max(worst_cpp, e);
      } catch (const std::exception& e) {
        cpp_why = fmt::format("tokdyn's C++ model did not load the checkpoint: {}", e.what());
      }
    }
    for (Matrix& M : A) M -= Matrix::Identity(N, N);
    // LayerNorm's neutral directions (F19): the quotient when every A(l) annihilates them.
    const double ones = cocycle::ones_kernel_residual(A, T, d);
    const bool use_q = p.get_string("quotient") == "auto" && ones <= 1e-10;
    quotient_used = quotient_used || use_q;
    if (use_q) worst_ones = std::max(worst_ones, ones);
    const Matrix Q = use_q ? cocycle::ones_complement(T, d) : Matrix(Matrix::Identity(N, N));
    const long n = Q.cols();
    std::vector<Matrix> B;
    // The cocycle gamma^-1 (I + A(l)) on the quotient (gamma = growth_scale: the dichotomy at scale gamma, Thm 5).
    const double gamma = p.get_double("growth_scale");
    for (const Matrix& Al : A) B.push_back((Matrix::Identity(n, n) + Q.transpose() * Al * Q) / gamma);
    const cocycle::Cocycle coc = cocycle::Cocycle::from_matrices(B);
    StepResult r;
    r.step = sd.step;
    std::optional<cocycle::Bundles> bundles;
    const double end_margin = std::min(unit_margin(B.front()), unit_margin(B.back()));
    if (!(end_margin > margin_tol)) {
      r.why = fmt::format("an end map B({}) or B({}) has an eigenvalue with | |lambda| - 1 | = {:.3g} <= unit_margin = {:.3g}: "
                          "not hyperbolic to the tolerance", first, first + Lw - 1, end_margin, margin_tol);
    } else {
      try {
        cocycle::BundlesOutcome found = cocycle::find_two_sided_bundles(coc);
        if (found) bundles = std::move(found.bundles);
        else r.why = found.why_not;
      } catch (const std::exception& e) {
        r.why = std::string("no bundles: ") + e.what();
      }
    }
    r.dichotomy = bundles.has_value();
    if (r.dichotomy) {
      const cocycle::ProjectorResiduals pr = cocycle::projector_residuals(coc, *bundles);
      worst_idem = std::max(worst_idem, pr.idempotence);
      worst_comp = std::max(worst_comp, pr.complement);
      worst_sum = std::max(worst_sum, pr.sum);
      worst_trace = std::max(worst_trace, pr.trace);
      worst_inv = std::max(worst_inv, pr.invariance);
      for (std::size_t j = 0; j < bundles->P_plus.size(); ++j) {
        proj.cell(sd.step).cell(first + static_cast<long>(j)).cell(pr.p_plus_norm[j]).cell(pr.idempotence_l[j])
            .cell(j < pr.invariance_l.size() ? pr.invariance_l[j] : kNaN);
        proj.end_row();
      }
      // Nearly tangent bundles (||P_+|| ~ 1 / sin angle): the split is ill-conditioned, the block
      // norms grow like ||P_+||^2 ||dA||^2, and the fractions say nothing: undecided.
      const double pmax = *std::max_element(pr.p_plus_norm.begin(), pr.p_plus_norm.end());
      if (pmax > max_pnorm) {
        r.dichotomy = false;
        r.why = fmt::format("the bundles are nearly tangent: max ||P_+(l)|| = {:.4g} > max_projector_norm = {:.4g} (the split is "
                            "ill-conditioned)", pmax, max_pnorm);
      }
      any_dichotomy = true;
    }
    // The directions: top-k eigenvectors, then the random baseline.
    const std::vector<double> lam = info.at("eigenvalues").get<std::vector<double>>();
    const std::vector<double> res = info.at("residuals").get<std::vector<double>>();
    const std::vector<double> rq = info.at("random_rayleigh").get<std::vector<double>>();
    std::vector<double> slow_t, slow_r, fast_t, fast_r, range_t, range_r, share_t, share_r;
    for (int set = 0; set < 2; ++set) {
      const fs::path f = out / (set == 0 ? "dA_top.npy" : "dA_random.npy");
      const long count = set == 0 ? static_cast<long>(lam.size()) : static_cast<long>(rq.size());
      const Stack stack(f);
      if (stack.lead != count || stack.layers != Lw || stack.n != N)
        throw std::runtime_error(fmt::format("coupling-e6: '{}' does not match J.npy", f.string()));
      for (long i = 0; i < count; ++i) {
        const std::vector<Matrix> dA = stack.at(i);
        std::vector<Matrix> dq;
        double full = 0, quot = 0;
        for (const Matrix& E : dA) {
          dq.push_back(Q.transpose() * E * Q);
          full += E.squaredNorm();
          quot += dq.back().squaredNorm();
        }
        Fractions fr;
        fr.norm = std::sqrt(full);
        fr.neutral = full > 0 ? 1.0 - quot / full : 0.0;
        if (r.dichotomy && quot > 0) {
          const cocycle::BlockSplit s = cocycle::split_blocks(dq, bundles->P_plus);
          fr.slow = s.slow_fraction();
          fr.fast = s.fast_fraction();
          fr.pm = s.cross_plus_minus();
          fr.mp = s.cross_minus_plus();
          fr.fast_range = s.fast_range_fraction();
          fr.block_sum = s.block_sum();
          fr.slow_share = s.slow_share();
          fr.fast_share = s.fast_share();
          (set == 0 ? share_t : share_r).push_back(fr.slow_share);
          (set == 0 ? slow_t : slow_r).push_back(fr.slow);
          (set == 0 ? fast_t : fast_r).push_back(fr.fast);
          (set == 0 ? range_t : range_r).push_back(fr.fast_range);
        }
        eig.cell(sd.step).cell(std::string(set == 0 ? "top" : "random")).cell(i).cell(set == 0 ? lam[static_cast<std::size_t>(i)] : rq[static_cast<std::size_t>(i)])
            .cell(set == 0 ? res[static_cast<std::size_t>(i)] : kNaN).cell(std::string(r.dichotomy ? "found" : "undecided"))
            .cell(fr.slow).cell(fr.fast).cell(fr.pm).cell(fr.mp).cell(fr.fast_range).cell(fr.block_sum).cell(fr.slow_share)
            .cell(fr.fast_share).cell(fr.neutral).cell(fr.norm);
        eig.end_row();
      }
    }
    r.slow_top = stats(slow_t);
    r.slow_rand = stats(slow_r);
    r.fast_top = stats(fast_t);
    r.fast_rand = stats(fast_r);
    r.range_top = stats(range_t);
    r.range_rand = stats(range_r);
    r.share_top = stats(share_t);
    r.share_rand = stats(share_r);
    const bool converged = info.at("lanczos_converged").get<bool>();
    all_converged = all_converged && converged;
    for (double x : res) worst_res = std::max(worst_res, x);
    frac.cell(sd.step).cell(info.at("loss").get<double>()).cell(std::string(r.dichotomy ? "found" : "undecided")).cell(r.why);
    if (bundles) frac.cell(bundles->k);
    else frac.empty();
    frac.cell(n)        .cell(end_margin).cell(lam.front()).cell(lam.back())
        .cell(r.slow_top.mean).cell(r.slow_top.sd).cell(r.slow_rand.mean).cell(r.slow_rand.sd).cell(r.fast_top.mean).cell(r.fast_rand.mean)
        .cell(r.range_top.mean).cell(r.range_rand.mean).cell(r.share_top.mean).cell(r.share_rand.mean).cell(info.at("lanczos_iterations").get<long>()).cell(std::string(converged ? "true" : "false"));
    frac.end_row();
    // The helper's own checks.
    worst_known = std::max(worst_known, info.at("known_spectrum").at("max_rel_eig_error").get<double>());
    worst_angle = std::max(worst_angle, info.at("known_spectrum").at("max_angle").get<double>());
    worst_dense = std::max(worst_dense, info.at("dense").at("max_rel_eig_error").get<double>());
    worst_sym = std::max(worst_sym, info.at("products").at("symmetry").get<double>());
    worst_fd = std::max(worst_fd, info.at("products").at("fd_rel_error").get<double>());
    fd_what = info.at("products").at("fd_what").get<std::string>();
    worst_dA = std::max(worst_dA, info.at("dA_fd_rel_error").get<double>());
    step_notes.push_back({{"step", sd.step}, {"loss", info.at("loss")}, {"n_params", info.at("n_params")}, {"family", info.at("family")},
                          {"lanczos_iterations", info.at("lanczos_iterations")}, {"ones_kernel_residual", ones}, {"quotient", use_q},
                          {"dichotomy", r.dichotomy}, {"why", r.why}, {"k_plus", bundles ? bundles->k : -1}});
    ctx.notes["model"] = {{"family", info.at("family")}, {"n_params", info.at("n_params")}, {"n_layer", info.at("n_layer")}, {"d", d},
                          {"tokens", T}, {"state_dim", N}, {"quotient_dim", n}, {"window", {info.at("first"), info.at("last")}}};
    results.push_back(r);
    std::error_code ec;
    fs::remove_all(out, ec);
    if (ctx.progress) ctx.progress(static_cast<double>(si + 1) / static_cast<double>(steps.size()));
  }
  ctx.notes["steps"] = step_notes;
  ctx.notes["checkpoint"] = checkpoint.empty() ? std::string("(a tiny gpt2 trained in the run: smoke_steps on a synthetic Markov chain)") : checkpoint;

  // ---- checks --------------------------------------------------------------------------------------
  const std::string lz = "Lanczos with full reorthogonalisation (python/tokdyn_train/lanczos.py)";
  checks.add("E6 Lanczos", lz + ": top-k eigenvalues of Q diag(lam) Q^T (n = 400, lam known)", "max relative eigenvalue error (worst step)",
             worst_known, "<= 1e-10", worst_known <= 1e-10, closed_form("the known diagonal lam (top k: 10 * 0.8^i)"));
  checks.add("E6 Lanczos", lz + ": eigenvectors of Q diag(lam) Q^T", "max angle to the known eigenvectors (rad)", worst_angle, "<= 1e-8",
             worst_angle <= 1e-8, closed_form("the columns of Q"));
  checks.add("E6 Lanczos", lz + " against a dense eigendecomposition of the model's compressed curvature Q_m^T H Q_m",
             "max |lambda_Lanczos - lambda_eigh| / |lambda_1| (worst step)", worst_dense, "<= 1e-9", worst_dense <= 1e-9,
             independent("LAPACK's symmetric eigensolver (numpy eigh) of the same m x m matrix"));
  checks.add("E6 Lanczos", "the top-k Ritz pairs of the curvature are eigenpairs", "max |H v - lambda v| / |lambda_1| over steps and k",
             worst_res, fmt::format("<= {:.3g}{}", std::max(1e-6, 100 * lanczos_tol),
                                    all_converged ? "" : " (some step stopped at lanczos_max before its estimates fell below lanczos_tol: fractions.csv)"),
             worst_res <= std::max(1e-6, 100 * lanczos_tol), closed_form("H v = lambda v, the products recomputed"));
  checks.add("E6 curvature", "the curvature operator is symmetric", "|<u, H w> - <w, H u>| / max |H u| (worst step)", worst_sym, "<= 1e-10",
             worst_sym <= 1e-10, closed_form("symmetry of the Hessian / Gauss-Newton matrix"));
  checks.add("E6 curvature", "the curvature product against finite differences", fd_what + " (worst step)", worst_fd, "<= 1e-6",
             worst_fd <= 1e-6, consistency("central differences of PyTorch gradients / logits"));
  checks.add("E6 dA", "dA(l) = d/de D_x F_l(x_l; W + e v) by forward over forward mode", "|dA - (A(W + h v) - A(W - h v)) / 2h| / |dA|, h = 1e-4, v = v_1 (worst step)",
             worst_dA, "<= 1e-5", worst_dA <= 1e-5, consistency("central differences of the forward-mode Jacobians A(W +- h v)"));
  checks.add_unless(cpp_why, "E6 J", "the layer Jacobians J(l) = D_x F_l(x_l) of the PyTorch model",
                    "max_l,v |J_tokdyn(l) v - J_torch(l) v| / |J_torch(l) v| (4 Gaussian v per layer, worst step)", [&] { return worst_cpp; },
                    "<= 1e-4 (tokdyn's trajectory is fp32, PyTorch's float64)", [](double v) { return v <= 1e-4; },
                    independent("tokdyn's C++ model of the family (models/decoder): exact double tangents along its fp32 trajectory"));
  checks.add_unless(quotient_used ? "" : "no quotient was taken (quotient = none, or a model without LayerNorm's neutral directions)", "F19",
                    "LayerNorm: A(l) (e_t x 1_d) = 0 for every token t (the quotient's premise)", "max_l,t |A(l) u_t| / |A(l)|_F",
                    [&] { return worst_ones; }, "<= 1e-10", [](double v) { return v <= 1e-10; },
                    closed_form("D LayerNorm(x) 1_d = 0 (F19)"));
  const std::string no_dich = any_dichotomy ? "" : "no step has two-sided bundles (see fractions.csv: why)";
  const std::string ps = "P_+(l) of find_two_sided_bundles (two-sided constant extension, App. B.1)";
  checks.add_unless(no_dich, "E6 P", ps + " is a projection", "max ||P_+^2 - P_+|| / ||P_+||", [&] { return worst_idem; },
                    fmt::format("<= proj_tol = {:.3g}", proj_tol), [&](double v) { return v <= proj_tol; }, closed_form("P^2 = P"));
  checks.add_unless(no_dich, "E6 P", "P_+ + P_- = I and P_+ P_- = P_- P_+ = 0", "max (||P_+ P_-|| + ||P_- P_+||) / ||P_+|| + ||P_+ + P_- - I||",
                    [&] { return worst_comp + worst_sum; }, fmt::format("<= proj_tol = {:.3g}", proj_tol), [&](double v) { return v <= proj_tol; },
                    closed_form("complementary projections"));
  checks.add_unless(no_dich, "E6 P", "rank P_+ = dim V_par", "max |trace P_+ - k|", [&] { return worst_trace; }, "<= 1e-8",
                    [](double v) { return v <= 1e-8; }, closed_form("trace of a projection = its rank"));
  checks.add_unless(no_dich, "E6 P", "the bundles are invariant: P_+(l+1) B(l) = B(l) P_+(l)", "max ||P_+(l+1) B - B P_+(l)|| / (||B|| ||P_+||)",
                    [&] { return worst_inv; }, fmt::format("<= proj_tol = {:.3g}", proj_tol), [&](double v) { return v <= proj_tol; },
                    closed_form("invariance (spec §2.9)"));

  // (A6) at the last step: the top-k curvature is more slow-mode than random directions.
  const StepResult& lastr = results.back();
  const std::string a6 = "(A6): late-phase loss curvature lies in slow-mode directions";
  if (!lastr.dichotomy || lastr.slow_top.n == 0 || lastr.slow_rand.n == 0) {
    checks.not_applicable("A6 last step", a6, "mean slow fraction of the top-k minus that of the random directions, last step",
                          fmt::format("undecided: no dichotomy at step {} ({})", lastr.step, lastr.why), qualitative("(A6), §4.2"));
  } else {
    const Comparison c = compare(lastr.slow_top, lastr.slow_rand);
    const std::string q = fmt::format("mean slow fraction, top-k minus random, at step {} (spread 2 sqrt(sd_t^2/k + sd_r^2/r) = {:.3g})", lastr.step, c.spread);
    if (c.verdict == cocycle::Verdict::Undecided)
      checks.not_applicable("A6 last step", a6, q, fmt::format("undecided: |difference| = {:.3g} <= spread {:.3g}", std::abs(c.diff), c.spread),
                            qualitative("(A6), §4.2"));
    else
      checks.add("A6 last step", a6, q, c.diff, "> spread (pass), < -spread (fail)", c.verdict == cocycle::Verdict::Yes,
                 qualitative("(A6), §4.2: slow fraction of the top curvature above the random baseline"));
  }
  // (A6) over training: the fast-mode directions are exhausted early -> the top-k's slow fraction grows.
  {
    std::vector<const StepResult*> with;
    for (const auto& r : results)
      if (r.dichotomy && r.slow_top.n > 0) with.push_back(&r);
    const std::string st = "(A6): the fast-mode directions are exhausted early (the top-k's slow fraction grows over training)";
    if (with.size() < 2) {
      checks.not_applicable("A6 trend", st, "mean slow fraction of the top-k, last minus first step with a dichotomy",
                            "undecided: fewer than two steps have a dichotomy", qualitative("(A6), §4.2"));
    } else {
      const Comparison c = compare(with.back()->slow_top, with.front()->slow_top);
      const std::string q = fmt::format("mean slow fraction of the top-k, step {} minus step {} (spread {:.3g})", with.back()->step, with.front()->step, c.spread);
      if (c.verdict == cocycle::Verdict::Undecided)
        checks.not_applicable("A6 trend", st, q, fmt::format("undecided: |difference| = {:.3g} <= spread {:.3g}", std::abs(c.diff), c.spread),
                              qualitative("(A6), §4.2"));
      else
        checks.add("A6 trend", st, q, c.diff, "> spread (pass), < -spread (fail)", c.verdict == cocycle::Verdict::Yes,
                   qualitative("(A6), §4.2: slow fraction rising with training"));
    }
  }
  checks.report(ctx, "coupling-e6");
  long with = 0;
  for (const auto& r : results) with += r.dichotomy ? 1 : 0;
  ctx.summary("steps", static_cast<long>(results.size()));
  ctx.summary("steps_with_dichotomy", with);
  if (lastr.dichotomy && lastr.slow_top.n > 0) {
    ctx.summary("slow_top_last", lastr.slow_top.mean);
    ctx.summary("slow_random_last", lastr.slow_rand.mean);
  }
}

const ExperimentRegistration reg_coupling_e6{with_outputs(
    with_smoke(Experiment{"coupling-e6",
                          "Coupling paper (A6), E6: top Hessian / Gauss-Newton eigenvectors of a trained model mapped to dA(l) and split by the "
                          "dichotomy projectors P_± (slow vs fast mode) over training, against random directions",
                          e6_params(), run_e6, "coupling-e6"},
               {{"smoke_steps", "2"}, {"smoke_every", "2"}, {"steps", "2"}, {"k", "2"}, {"random", "2"}, {"tokens", "3"}, {"batch", "2"}, {"context", "9"},
                {"lanczos_max", "60"}}),
    e6_outputs())};

}  // namespace coupling_e6
}  // namespace tokdyn
