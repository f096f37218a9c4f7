// Presets of "Attention is Just Another Name for Coupling?", part 1 (the Transformer depth flow),
// the depth experiments (the checks of the block itself are in coupling_transformer.cpp):
//   coupling-rank-collapse   E2: distance of S(X^(l)) from rank one against depth, slope r_f;
//   coupling-qk-specificity  E4: |alpha^(l) - alpha*| against depth, effect of late W_Q/W_K changes.
// Each writes checks.csv (check, statement, quantity, value, expected, pass), joined by coupling-all.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "tokdyn/analysis/frozen_kernel.hpp"
#include "tokdyn/analysis/transformer_reference.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/estimate.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "tokdyn/models/decoder/decoder.hpp"
#include "tokdyn/models/transformer/setup.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/models/transformer/transformer.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn {
// The namespace of coupling_transformer.cpp (named, not anonymous: its using-directive must not
// reach the other files of a unity batch); its helpers below are defined there.
namespace preset_coupling_transformer {

using namespace tokdyn::tf;

Mat kernel_of(const Config& c, int T);
void rank_collapse_rate(const std::vector<double>& mean_log, int L, RunContext& ctx);

/// The registered decoder families (the models these presets take besides the Transformer).
std::vector<std::string> family_names() {
  std::vector<std::string> n;
  for (const decoder::Family* f : decoder::families()) n.push_back(f->name);
  return n;
}

// ---- coupling-rank-collapse (E2) ----------------------------------------------------------------

/// E2 on a decoder family (GPT-2, GPT-NeoX, Llama; a checkpoint or a fresh model): the model's
/// own layers cycled to depth L on `runs` sequences of T token ids; S(X) is the family's norm
/// without its affine gains (LayerNorm: standardised rows; RMSNorm: rows over their RMS), the
/// normalisation the attention of every layer sees. Returns the mean log ratio per depth.
std::vector<double> rank_collapse_decoder(const Params& p, RunContext& ctx, CsvWriter& csv) {
  const std::string model = p.get_string("model");
  const int L = static_cast<int>(p.get_int("depth")), runs = static_cast<int>(p.get_int("runs"));
  ModelInstance S = build_model(model, p, ctx);
  for (const char* k : {"model", "synthetic_model", "synthetic_model_note", "model_config", "schedule", "update", "initial_tokens"})
    if (S.notes.contains(k)) ctx.notes[k] = S.notes[k];
  const bool rms = S.notes["model_config"].value("model_type", "") == "llama";
  ctx.notes["S"] = rms ? "RMSNorm without gains: x / sqrt(mean x^2 + 1e-6)" : "LayerNorm without gains: (x - mean x) / sqrt(var x + 1e-5)";
  BatchF Z{S.Z0.Z.cast<float>(), S.Z0.runs, S.Z0.len};
  std::vector<double> mean_log(static_cast<std::size_t>(L + 1), 0.0);
  for (int l = 0; l <= L; ++l) {
    if (l > 0) S.map->apply_float(l, Z);
    require_finite(Z, "layer", l);
    for (int r = 0; r < Z.runs; ++r) {
      Mat X = Z.run(r).cast<double>();
      for (Eigen::Index i = 0; i < X.rows(); ++i) {
        if (!rms) X.row(i).array() -= X.row(i).mean();
        X.row(i) /= std::sqrt(X.row(i).squaredNorm() / static_cast<double>(X.cols()) + (rms ? 1e-6 : 1e-5));
      }
      Mat D = X;
      D.rowwise() -= X.colwise().mean();
      const double ratio = D.norm() / X.norm();
      csv.cell(l).cell(r).cell(ratio).cell(static_cast<double>(Z.run(r).rowwise().norm().maxCoeff())).end_row();
      mean_log[static_cast<std::size_t>(l)] += std::log(std::max(ratio, 1e-300)) / runs;
    }
    if (ctx.progress) ctx.progress(static_cast<double>(l) / L);
  }
  return mean_log;
}

void run_rank_collapse(const Params& p, RunContext& ctx) {
  if (p.get_string("model") != "transformer") {
    const int L = static_cast<int>(p.get_int("depth"));
    CsvWriter csv = ctx.table("rank_collapse.csv");
    const std::vector<double> mean_log = rank_collapse_decoder(p, ctx, csv);
    rank_collapse_rate(mean_log, L, ctx);
    return;
  }
  const Transformer tf = transformer_from(p, ctx);
  const Config& c = tf.config();
  const int T = static_cast<int>(p.get_int("tokens")), L = static_cast<int>(p.get_int("depth")), runs = static_cast<int>(p.get_int("runs"));
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const int P = c.mask == Mask::BlockLocal ? c.block : T;  // collapse within blocks for block-local attention
  Batch Z;
  Z.runs = runs;
  Z.len = T;
  Z.Z.resize(static_cast<Eigen::Index>(runs) * T, c.d);
  Rng(seed, {0xc0}).fill_normal(Z.Z, 1.0);
  CsvWriter csv = ctx.table("rank_collapse.csv");
  std::vector<double> mean_log(static_cast<std::size_t>(L + 1), 0.0);
  for (int l = 0; l <= L; ++l) {
    if (l > 0) tf.apply(l, Z);
    require_finite(Z, "layer", l);
    const LayerWeights& W = tf.weights(std::max(1, l));
    for (int r = 0; r < runs; ++r) {
      Mat S;
      apply_norm(c, W.g_attn, W.beta_attn, Z.run(r), S);
      Mat D = S;
      for (int b = 0; b < T; b += P) {
        const int n = std::min(P, T - b);
        const RowVec m = S.middleRows(b, n).colwise().mean();
        D.middleRows(b, n).rowwise() -= m;
      }
      const double ratio = D.norm() / S.norm();
      csv.cell(l).cell(r).cell(ratio).cell(Z.run(r).rowwise().norm().maxCoeff()).end_row();
      mean_log[static_cast<std::size_t>(l)] += std::log(std::max(ratio, 1e-300)) / runs;
    }
    if (ctx.progress) ctx.progress(static_cast<double>(l) / L);
  }
  rank_collapse_rate(mean_log, L, ctx);
}

/// r_f estimate: exp of the least-squares slope of the mean log ratio over the second half of
/// depth; rate.csv, the E2 check and the summaries.
void rank_collapse_rate(const std::vector<double>& mean_log, int L, RunContext& ctx) {
  const int l0 = L / 2;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (int l = l0; l <= L; ++l, ++n) {
    const double y = mean_log[static_cast<std::size_t>(l)];
    sx += l;
    sy += y;
    sxx += static_cast<double>(l) * l;
    sxy += l * y;
  }
  const double slope = n > 1 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : NAN;
  CsvWriter rate = ctx.table("rate.csv");
  rate.cell(l0).cell(L).cell(slope).cell(std::exp(slope)).end_row();
  ctx.notes["r_f_estimate"] = std::exp(slope);
  CheckTable checks(ctx.dir / "checks.csv");
  checks.add("E2", "rank collapse: token states homogenise with depth at rate r_f < 1 (A5)", "r_f estimate (log-slope, second half)",
             std::exp(slope), "< 1", std::exp(slope) < 1.0, qualitative("A5: r_f < 1 (states homogenise with depth)"));
  checks.report(ctx, "coupling-rank-collapse");
  ctx.summary("r_f_estimate", std::exp(slope));
  ctx.summary("log_slope", slope);
  ctx.summary("final_ratio", std::exp(mean_log[static_cast<std::size_t>(L)]));
}

OutputDecl rank_collapse_outputs() {
  OutputDecl o;
  o.tables = {
      checks_table(),
      {"rank_collapse.csv", "one run at one depth: distance of the normalised tokens from rank one",
       {index("layer", "depth l: the state after l blocks (0: the input)", 0), index("run", "run (independent input sequence)", 0),
        real("ratio", "|S(X) - 1 mean^T| / |S(X)| (Frobenius; S the attention norm of block max(1, l); block-local masks: per block; "
                      "decoder families: their norm without gains)"),
        real("stream_norm", "largest token norm max_t |x_t^(l)| of the residual stream")}},
      {"rate.csv", "the rank-collapse rate: least-squares fit of the mean log ratio against depth (one row)",
       {index("from_layer", "first depth of the fit (L/2)", 0), index("to_layer", "last depth of the fit (L)", 0),
        real("log_slope", "slope of the mean over runs of log ratio against l", "1/layer"),
        real("r_f_estimate", "exp(log_slope): the homogenisation rate r_f per block (A5: < 1)")}}};
  o.arrays = model_arrays("model", family_names());
  o.summaries = {{"r_f_estimate", "exp of the log-slope of the ratio over the second half of depth: the rate r_f per block (A5: < 1)"},
                 {"log_slope", "the log-slope itself", "1/layer"},
                 {"final_ratio", "geometric mean over runs of the ratio at depth L"}};
  o.figures = {{"rank_collapse.png", "|S(X) - 1 mean^T| / |S(X)| against depth: each run and their geometric mean; r_f in the title"}};
  return o;
}

// ---- coupling-qk-specificity (E4) ---------------------------------------------------------------

void qk_specificity_decoder(const Params& p, RunContext& ctx);  // coupling_qk_families.cpp
void qk_order_verdict(const std::vector<double>& finals, bool applies, const std::string& statement, RunContext& ctx);

void run_qk_specificity(const Params& p, RunContext& ctx) {
  if (p.get_string("model") != "transformer") return qk_specificity_decoder(p, ctx);
  if (p.get_int("perturb_from") < 1)
    throw InputError("parameter 'perturb_from' = 0: the Transformer's perturbed layers start at a layer 1..depth (0 is the decoder "
                     "families' \"later half\")");
  const Transformer tf = transformer_from(p, ctx);
  const Config& c = tf.config();
  const int T = static_cast<int>(p.get_int("tokens")), L = static_cast<int>(p.get_int("depth")), runs = static_cast<int>(p.get_int("runs"));
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const double s = p.get_double("amplitude"), eta = p.get_double("eta");
  const int from = static_cast<int>(p.get_int("perturb_from"));
  if (from > L) throw InputError(fmt::format("parameter 'perturb_from' = {}: expected <= depth = {}", from, L));
  if (parse_tying(p.get_string("tying")) != Tying::Untied) throw InputError("parameter 'tying': coupling-qk-specificity perturbs single layers; use untied");
  // The perturbed model: W_Q, W_K of layers >= perturb_from changed by eta * Gaussian (relative to their scale).
  Transformer tq = tf;
  for (int l = from; l <= L; ++l) {
    LayerWeights& W = tq.mutable_weights(static_cast<std::size_t>(l - 1));
    Mat E(c.d, c.d);
    Rng(seed, {0x9b, static_cast<std::uint64_t>(l), 1}).fill_normal(E, eta * p.get_double("sigma_w") / std::sqrt(static_cast<double>(c.d)));
    W.W_Q += E;
    Rng(seed, {0x9b, static_cast<std::uint64_t>(l), 2}).fill_normal(E, eta * p.get_double("sigma_w") / std::sqrt(static_cast<double>(c.d)));
    W.W_K += E;
  }
  const Vec x0 = reference_start(c, seed);
  const Mat astar = kernel_of(c, T);
  // Two amplitudes s and s/10: W_Q, W_K act at second order near H (Prop 8), so the state
  // difference they cause should shrink ~100x when s shrinks 10x.
  CsvWriter csv = ctx.table("qk_specificity.csv");
  CsvWriter fin = ctx.table("final.csv");
  int done = 0;
  std::vector<double> finals;
  for (double amp : {s, s / 10.0}) {
    Batch Z;
    Z.runs = runs;
    Z.len = T;
    Z.Z.resize(static_cast<Eigen::Index>(runs) * T, c.d);
    for (int r = 0; r < runs; ++r) {
      Mat dX(T, c.d);
      Rng(seed, {0xde, static_cast<std::uint64_t>(r)}).fill_normal(dX, 1.0);
      Z.run(r) = homogeneous(x0, T) + amp * dX;
    }
    Batch Zq = Z;
    for (int l = 1; l <= L; ++l) {
      for (int v = 0; v < 2; ++v) {
        const Transformer& m = v ? tq : tf;
        Batch& B = v ? Zq : Z;
        const auto al = m.attention(l, B);
        double mean = 0, mx = 0, fl = 0;
        for (int r = 0; r < runs; ++r) {
          const double dist = (al[static_cast<std::size_t>(r)] - astar).norm();
          mean += dist / runs;
          mx = std::max(mx, dist);
          const Mat X = B.run(r);
          fl += fk::fluctuation(X, T).norm() / X.norm() / runs;
        }
        const double sd = v ? (Zq.Z - Z.Z).norm() / std::max(Z.Z.norm(), 1e-300) : 0.0;
        csv.cell(amp).cell(l).cell(std::string(v ? "perturbed" : "base")).cell(mean).cell(mx).cell(sd).cell(fl).end_row();
      }
      tf.apply(l, Z);
      tq.apply(l, Zq);
      require_finite(Z, "layer", l);
      require_finite(Zq, "layer", l, "perturbed");
      if (ctx.progress) ctx.progress((done * L + l) / (2.0 * L));
    }
    finals.push_back((Zq.Z - Z.Z).norm() / Z.Z.norm());
    fin.cell(amp).cell(finals.back()).end_row();
    ++done;
  }
  qk_order_verdict(finals, c.pos == Positional::None, "Prop 8: late W_Q, W_K changes act at second order near H (no positional scheme)", ctx);
}

/// E4's verdict, for the Transformer and the families alike: log10 of the ratio of the final-state
/// changes for s and s/10 (2: second order, Prop 8; 1: first order, as with RoPE / ALiBi), the check
/// row only where a criterion applies (`applies`), the summaries.
void qk_order_verdict(const std::vector<double>& finals, bool applies, const std::string& statement, RunContext& ctx) {
  CheckTable checks(ctx.dir / "checks.csv");
  const double order = finals[1] > 0 ? std::log10(finals[0] / finals[1]) : NAN;
  if (!std::isnan(order)) {
    ctx.notes["qk_final_change_log10_ratio"] = order;
    if (applies)
      checks.add("E4", statement, "log10 of the final-state change ratio for s and s/10", order, ">= 1.5 (2 = second order)",
                 order >= 1.5, qualitative("Prop 8: second order in s (log10 ratio 2 for s -> s/10)"));
  }
  checks.report(ctx, "coupling-qk-specificity");
  ctx.summary("final_change", finals[0]);
  ctx.summary("final_change_tenth", finals[1]);
  ctx.summary("order_log10_ratio", order);
}

OutputDecl qk_specificity_outputs() {
  OutputDecl o;
  o.tables = {
      checks_table(),
      {"qk_specificity.csv", "one amplitude, block and model: the kernel against alpha* and the effect of the W_Q, W_K change (E4)",
       {real("amplitude", "size of the input perturbation X(0) = 1 x0^T + amplitude dX (s, then s/10)"),
        index("layer", "block l, evaluated at its input (the state after l - 1 blocks)", 1),
        category("variant", "which model", {{"base", "the drawn model"},
                                            {"perturbed", "W_Q, W_K of blocks >= perturb_from changed by eta (relative)"}}),
        real("alpha_dist_mean", "|alpha^(l) - alpha*|_F, mean over runs"), real("alpha_dist_max", "its maximum over runs"),
        real("state_diff", "perturbed: |X_perturbed - X_base|_F / |X_base|_F at the block's input (all runs); base: 0"),
        real("fluct_ratio", "|X - 1 x_1^T|_F / |X|_F (fluctuation about the head token), mean over runs")}},
      {"final.csv", "one amplitude: the relative change of the final state caused by the W_Q, W_K change",
       {real("amplitude", "size of the input perturbation (s, then s/10)"),
        real("relative_state_diff", "|X_perturbed(L) - X_base(L)|_F / |X_base(L)|_F")}}};
  o.summaries = {{"final_change", "relative change of the final state caused by the W_Q, W_K change, input amplitude s"},
                 {"final_change_tenth", "the same for input amplitude s/10"},
                 {"order_log10_ratio", "log10(final_change / final_change_tenth): 2 = second order in s (Prop 8), 1 = first order; "
                                       "NaN (empty): the change at s/10 is 0"}};
  o.figures = {{"qk_specificity.png", "|alpha^(l) - alpha*| against depth (base and perturbed); state difference and fluctuation ratio against depth"}};
  o.arrays = model_arrays("model", family_names());
  return o;
}

// The work of E2 / E4 (`e4`): forwards of every run through every layer. The paper's block on one run
// of T tokens (Transformer::forward_run): Q, K, V (6 T d^2), scores and values (4 T^2 d, every pair),
// softmax (about 20 flops per score), the MLP (4 T d d_ff) and its activation. E2: one step per
// layer (runs on every thread). E4: two input amplitudes x two models x (the attention, one run after
// the other, and the step). A decoder family: its own cost per token row (model_descriptor), in fp32,
// through its own layers for E4 (two amplitudes x two models, the attention from the step's tap).
ResourceEstimate depth_estimate(const Params& p, bool e4) {
  const double T = static_cast<double>(p.get_int("tokens")), runs = static_cast<double>(p.get_int("runs"));
  const std::string model = p.get_string("model");
  const double copies = e4 ? 2.0 : 1.0;  // E4: the model and its perturbed copy
  double L = static_cast<double>(p.get_int("depth")), bytes = 64e6, d = 0;
  cost::Work w;
  if (model == "transformer") {
    d = static_cast<double>(p.get_int("d"));
    const double f = static_cast<double>(p.get_int("d_ff")), H = static_cast<double>(p.get_int("heads"));
    const double per_run = 6.0 * T * d * d + 4.0 * T * T * d + 20.0 * T * T * H + 4.0 * T * d * f + 20.0 * T * f;
    const double rate = cost::small_matrix_rate(std::min(T, d)), work = L * runs * per_run;
    w.add((e4 ? 4.0 : 1.0) * work, rate, true).add(e4 ? 4.0 * work : 0.0, rate);
    bytes += 8.0 * L * (3.0 * d * d + 2.0 * d * f + 6.0 * d + f) * copies;  // every layer's weights
  } else {
    const ModelCost c = model_descriptor(model).cost(p);
    d = c.d;
    if (e4) L = std::max(1.0, c.weight_bytes / 4.0 / (12.0 * d * d));  // its own layers: about 12 d^2 parameters each
    w.add((e4 ? 4.0 : 1.0) * L * runs * T * c.per_row, 3e10, true);
    bytes += c.weight_bytes * copies;
  }
  bytes += 8.0 * runs * T * (4.0 * d + T) * copies;  // the states and one run's attention
  const char* passes = !e4 ? "a forward" : model == "transformer" ? "8 forwards" : "4 forwards";
  return w.estimate(bytes, fmt::format("{} of runs x tokens x d through {} layers", passes, L));
}

const ExperimentRegistration reg_rc{tf::with_renamed_keys(with_outputs(with_smoke(Experiment{
    "coupling-rank-collapse",
    "Coupling paper E2: |S(X) - 1 mean^T| / |S(X)| against depth for random stacks or a GPT-2 / NeoX / Llama model, log-slope estimate of r_f",
    [] {
      std::vector<std::string> models{"transformer"};
      for (const decoder::Family* f : decoder::families()) models.push_back(f->name);
      std::vector<ParamSpec> ps{p_string("model", "transformer",
                                         "the coupling paper's random block (4) stack, or a decoder family's layers cycled (a checkpoint "
                                         "or a fresh model; `tokens` token ids per run)", models)};
      for (ParamSpec& q : transformer_params(16, 64, 16, 48, 0.0)) {
        // The block's own knobs apply to model = transformer; tokens, depth and seed to every model.
        if (q.key != "tokens" && q.key != "depth" && q.key != "seed") q.only_when.push_back({"model", {"transformer"}, false});
        ps.push_back(std::move(q));
      }
      ps.push_back(p_int("runs", 8, "random input sequences", 1, 10000));
      std::vector<std::string> fams(models.begin() + 1, models.end());
      for (ParamSpec& q : model_knobs("model", fams)) ps.push_back(std::move(q));
      return ps;
    }(),
    run_rank_collapse, "coupling-rank-collapse",
    [](const Params& p) { return depth_estimate(p, false); }}, {{"depth", "6"}, {"runs", "2"}}), rank_collapse_outputs()))};

const ExperimentRegistration reg_qk{tf::with_renamed_keys(with_outputs(with_smoke(Experiment{
    "coupling-qk-specificity",
    "Coupling paper E4: |alpha^(l) - alpha*| against depth near H, and the effect of late W_Q/W_K perturbations (random stacks or a "
    "GPT-2 / NeoX / Llama model)",
    [] {
      std::vector<std::string> models{"transformer"};
      for (const decoder::Family* f : decoder::families()) models.push_back(f->name);
      std::vector<ParamSpec> ps{p_string("model", "transformer",
                                         "the coupling paper's random block (4) stack, or a decoder family's own layers once each (a "
                                         "checkpoint or a fresh model)", models)};
      for (ParamSpec& q : transformer_params(16, 64, 16, 48, 0.0)) {
        // The block's own knobs (and depth: a family runs its own layers) apply to model = transformer.
        if (q.key != "tokens" && q.key != "seed") q.only_when.push_back({"model", {"transformer"}, false});
        ps.push_back(std::move(q));
      }
      ps.push_back(p_int("runs", 8, "perturbed homogeneous inputs", 1, 10000));
      ps.push_back(p_double("amplitude", 0.1, "size s of the perturbation X(0) = 1 x0^T + s dX (families: s |x0| / sqrt(d))", 0.0, 1e3));
      ps.push_back(p_double("eta", 1.0, "relative size of the W_Q, W_K perturbation", 0.0, 1e3));
      ParamSpec from = p_int("perturb_from", 25, "first (1-based) layer whose W_Q, W_K are perturbed (families: 0 = the later half)", 0, 5000);
      std::vector<std::string> fams(models.begin() + 1, models.end());
      from.def_when.push_back({ParamCondition{"model", fams, false}, ParamValue{0L}});
      ps.push_back(std::move(from));
      // The families' knobs, but the ones E4 sets itself (W_Q / W_K perturbed from perturb_from, each layer once).
      // Nor prompts: E4 starts from one token's embedding row repeated, X(0) = 1 x0^T + s dX (x0 from the
      // first drawn or given id), not from a sequence of tokens.
      auto prompt_key = [](const std::string& k) { return k == "prompt" || k == "prompts" || k == "tokenizer" || k == "add_special_tokens"; };
      for (ParamSpec& q : model_knobs("model", fams)) {
        if (q.key == "qk" || q.key == "qk_sigma" || q.key == "qk_from" || q.key == "layers" || q.key == "layer" || prompt_key(q.key))
          continue;
        std::erase_if(q.only_when, [&](const ParamCondition& c) { return prompt_key(c.key); });
        ps.push_back(std::move(q));
      }
      return ps;
    }(),
    run_qk_specificity, "coupling-qk-specificity",
    [](const Params& p) { return depth_estimate(p, true); }}, {{"depth", "6"}, {"runs", "2"}, {"perturb_from", "4"}}), qk_specificity_outputs()))};


}  // namespace preset_coupling_transformer
}  // namespace tokdyn
