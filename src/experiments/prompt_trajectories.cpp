// Preset prompt-trajectories: the tokens of a prompt through the depth of a model with token ids
// (GPT-2, GPT-NeoX / Pythia, Llama, Mamba-2; a checkpoint or a fresh model), each token named by
// its piece. Per run: the cosines of the normalised tokens at every layer, and every token's path
// in the plane of the two leading principal directions of all its normalised states over depth
// (one plane per run, so the paths of one figure share their axes).
#include <cmath>
#include <fmt/format.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/symmetric_eigen.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/engine/observers.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/models/decoder/decoder.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/model_registry.hpp"

namespace tokdyn {
namespace preset_prompt_trajectories {

std::vector<std::string> model_names() {
  std::vector<std::string> n;
  for (const decoder::Family* f : decoder::families()) n.push_back(f->name);
  n.push_back("mamba2");
  return n;
}

/// Keeps the normalised tokens after every layer.
class StateKeeper : public Observer {
 public:
  std::vector<Eigen::MatrixXd> states;  ///< per layer: (runs*len) x d, rows normalised
  int runs = 0, len = 0;
  void observe(double, const Batch& Z) override {
    runs = Z.runs;
    len = Z.len;
    Eigen::MatrixXd X = Z.Z;
    for (Eigen::Index i = 0; i < X.rows(); ++i) {
      const double n = X.row(i).norm();
      if (n > 0) X.row(i) /= n;
    }
    states.push_back(std::move(X));
  }
};

void run_prompt_trajectories(const Params& P, RunContext& ctx) {
  const std::string model = P.get_string("model");
  const long depth = P.get_int("depth");
  ModelInstance S = build_model(model, P, ctx);
  StateKeeper keep;
  {
    auto timer = ctx.phase("depth");
    BatchF Z{S.Z0.Z.cast<float>(), S.Z0.runs, S.Z0.len};  // the models' own fp32 state
    iterate(*S.map, Z, depth, {&keep}, {}, [&](double f) {
      if (ctx.progress) ctx.progress(0.9 * f);
    });
  }
  const int R = keep.runs, T = keep.len;
  const std::size_t L = keep.states.size();  // depth + 1
  // Cosines [layer, run, token, token].
  std::vector<double> cos(L * static_cast<std::size_t>(R) * T * T);
  double mean_first = 0, mean_last = 0;
  for (std::size_t l = 0; l < L; ++l)
    for (int r = 0; r < R; ++r) {
      const Eigen::MatrixXd X = keep.states[l].middleRows(static_cast<Eigen::Index>(r) * T, T);
      const Eigen::MatrixXd G = X * X.transpose();
      double off = 0;
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          cos[((l * R + r) * T + i) * T + j] = G(i, j);
          if (i != j) off += G(i, j);
        }
      if (T > 1) off /= static_cast<double>(T) * (T - 1);
      if (l == 0) mean_first += off / R;
      if (l + 1 == L) mean_last += off / R;
    }
  write_npy(ctx.dir / "cosine.npy", cos.data(), {L, static_cast<std::size_t>(R), static_cast<std::size_t>(T), static_cast<std::size_t>(T)});
  // Paths in the plane of the two leading principal directions of each run's states over depth
  // (the centred Gram matrix of the (depth+1) x tokens states; coordinates u_k sqrt(lambda_k)),
  // signs fixed so that the largest coordinate of each direction is positive.
  std::vector<double> proj(L * static_cast<std::size_t>(R) * T * 2, 0.0);
  std::vector<double> explained(static_cast<std::size_t>(R) * 2, 0.0);
  for (int r = 0; r < R; ++r) {
    const Eigen::Index N = static_cast<Eigen::Index>(L) * T;
    Eigen::MatrixXd X(N, keep.states[0].cols());
    for (std::size_t l = 0; l < L; ++l) X.middleRows(static_cast<Eigen::Index>(l) * T, T) = keep.states[l].middleRows(static_cast<Eigen::Index>(r) * T, T);
    X.rowwise() -= X.colwise().mean();
    // The smaller of the Gram matrix X X^T (N x N) and the covariance X^T X (d x d): the same
    // nonzero eigenvalues; coordinates u_k sqrt(lambda_k) = X v_k.
    const bool gram = N <= X.cols();
    const SymmetricEigen E = lapack_symmetric_eigen(gram ? Eigen::MatrixXd(X * X.transpose()) : Eigen::MatrixXd(X.transpose() * X));
    const Eigen::Index M = E.values.size();
    const double total = std::max(E.values.sum(), 1e-300);
    for (int k = 0; k < 2 && k < M; ++k) {
      const Eigen::Index c = M - 1 - k;
      const double lam = std::max(E.values(c), 0.0);
      Eigen::VectorXd u = gram ? Eigen::VectorXd(E.vectors.col(c) * std::sqrt(lam)) : Eigen::VectorXd(X * E.vectors.col(c));
      Eigen::Index at = 0;
      u.cwiseAbs().maxCoeff(&at);
      if (u(at) < 0) u = -u;
      for (std::size_t l = 0; l < L; ++l)
        for (int t = 0; t < T; ++t) proj[((l * R + r) * T + t) * 2 + k] = u(static_cast<Eigen::Index>(l) * T + t);
      explained[static_cast<std::size_t>(r) * 2 + k] = lam / total;
    }
  }
  write_npy(ctx.dir / "projection.npy", proj.data(), {L, static_cast<std::size_t>(R), static_cast<std::size_t>(T), 2});
  for (const char* k : {"model", "synthetic_model", "synthetic_model_note", "model_config", "parameters", "schedule", "update",
                        "initial_tokens"})
    if (S.notes.contains(k)) ctx.notes[k] = S.notes[k];
  ctx.notes["explained_variance"] = explained;  // [run, 2]: share of the variance in the plane's two directions
  ctx.summary("mean_cosine_initial", mean_first);
  ctx.summary("mean_cosine_final", mean_last);
  CheckTable checks(ctx.dir / "checks.csv");
  checks.add("cluster", "tokens cluster through depth: the mean pairwise cosine of the normalised tokens grows",
             "mean cosine at the last layer - at layer 0, mean over runs", mean_last - mean_first, "> 0", mean_last > mean_first,
             qualitative("The Attention Within §VI / rank collapse: tokens align with depth"));
  checks.report(ctx, "prompt-trajectories");
}

OutputDecl outputs() {
  OutputDecl o;
  o.tables = {checks_table()};
  o.arrays = model_arrays("model", model_names());
  o.arrays.push_back({"cosine.npy", "float64 [layer, run, token, token]: cosines of the normalised tokens (layer 0: the embedded tokens)"});
  o.arrays.push_back({"projection.npy", "float64 [layer, run, token, 2]: each normalised token in the plane of the two leading "
                                        "principal directions of its run's states over depth"});
  o.summaries = {{"mean_cosine_initial", "mean pairwise cosine of the normalised tokens at layer 0, mean over runs", "", ""},
                 {"mean_cosine_final", "mean pairwise cosine of the normalised tokens at the last layer, mean over runs", "", ""}};
  o.figures = {{"trajectories.png", "run 0: each token's path over depth in the principal plane, labelled with its piece; the "
                                    "cosine matrices at layer 0 and at the last layer"}};
  return o;
}

std::vector<ParamSpec> params() {
  std::vector<ParamSpec> ps{
      p_string("model", "gpt2", "which model (tokdyn models: those with token ids)", model_names()),
      p_int("tokens", 12, "tokens of the random ids when no prompt is given (a prompt sets its own)", 2, 1 << 20),
      p_int("depth", 12, "depth steps (the model's layers cycled past the last)", 1, 10000),
      p_int("seed", 0, "seed of the token ids drawn when no prompt is given", 0, kMaxSeed)};
  for (ParamSpec& q : model_knobs("model", model_names())) ps.push_back(std::move(q));
  return ps;
}

const ExperimentRegistration reg{with_outputs(
    with_smoke(Experiment{"prompt-trajectories",
                          "A prompt's tokens through the depth of GPT-2, GPT-NeoX, Llama or Mamba-2: each token's path and the "
                          "cosines, labelled with the tokenizer's pieces",
                          params(),
                          run_prompt_trajectories,
                          "prompt-trajectories",
                          [](const Params& P) {
                            const ModelCost c = model_descriptor(P.get_string("model")).cost(P);
                            const double T = static_cast<double>(P.get_int("tokens")), L = static_cast<double>(P.get_int("depth"));
                            // Every layer's tokens (kept, and stacked once more for the principal
                                                            // plane), the cosines, the eigenproblem of min(N, d).
                            const double N = (L + 1) * T, m = std::min(N, c.d);
                            return ResourceEstimate{c.weight_bytes * 2 + 8.0 * (3 * N * c.d + 2 * N * T + 2 * m * m) + 64e6,
                                                    L * T * c.per_row + N * c.d * m + 10 * m * m * m,
                                                    "the model's weights, the normalised tokens of every layer"};
                          }},
               {{"tokens", "4"}, {"depth", "2"}}),
    outputs())};

}  // namespace preset_prompt_trajectories
}  // namespace tokdyn
