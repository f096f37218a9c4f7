// Preset transformer-clustering: the clustering of tokens through the depth of a real decoder
// family (GPT-2, GPT-NeoX / Pythia, Llama; a checkpoint, or a freshly initialised model of a
// named size), measured as The Attention Within measures it (§VI): the normalised Gram spectrum
// lambda_bar_1, the participation ratio r and the distance to the attention models' consensus
// manifold {(x, ..., x)}, mean and std over runs, with positional information on against off.
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "tokdyn/experiments/output_tables.hpp"
#include "tokdyn/io/reports.hpp"
#include "tokdyn/models/decoder/decoder.hpp"
#include "tokdyn/engine/observers.hpp"

namespace tokdyn {
namespace preset_transformer_clustering {

std::vector<std::string> family_names() {
  std::vector<std::string> n;
  for (const decoder::Family* f : decoder::families()) n.push_back(f->name);
  return n;
}

std::vector<std::string> variants_of(const Params& P) {
  const std::string v = P.get_string("variants");
  if (v == "both") return {"positions_on", "positions_off"};
  return {v == "on" ? "positions_on" : "positions_off"};
}

void run_transformer_clustering(const Params& P, RunContext& ctx) {
  const std::string model = P.get_string("model");
  const long depth = P.get_int("depth");
  const std::vector<std::string> vars = variants_of(P);
  std::vector<GramObserver> gram(vars.size(), GramObserver(ConsensusSet::Diagonal));
  nlohmann::json notes = nlohmann::json::object();
  decoder::Positions positions = decoder::Positions::None;
  for (std::size_t v = 0; v < vars.size(); ++v) {
    Params q = P;
    q.values_["use_positions"] = vars[v] == "positions_on";
    ModelInstance S = build_model(model, q, ctx);
    if (v == 0) notes = S.notes;
    if (const auto* dm = dynamic_cast<const decoder::DecoderMap*>(S.map.get())) positions = dm->arch().positions;
    BatchF Z{S.Z0.Z.cast<float>(), S.Z0.runs, S.Z0.len};
    auto timer = ctx.phase(vars[v]);
    iterate(*S.map, Z, depth, {&gram[v]}, {}, [&](double f) {
      if (ctx.progress) ctx.progress((static_cast<double>(v) + f) / static_cast<double>(vars.size()));
    });
  }
  std::vector<std::pair<std::string, const Observer*>> mv;
  for (std::size_t v = 0; v < vars.size(); ++v) mv.emplace_back(vars[v], &gram[v]);
  write_tables(ctx.dir, mv);
  for (const char* k : {"model", "synthetic_model", "synthetic_model_note", "model_config", "parameters", "schedule", "update",
                        "initial_tokens"})
    if (notes.contains(k)) ctx.notes[k] = notes[k];
  ctx.notes["variants"] = vars;

  // Verdicts: the field's qualitative claim (tokens cluster through depth: lambda_bar_1 grows,
  // r falls), per variant; and a closed property for the rotary families: positions enter only
  // through the rotation, so layer 0 (the embedded tokens) is the same with them on or off.
  CheckTable checks(ctx.dir / "checks.csv");
  for (std::size_t v = 0; v < vars.size(); ++v) {
    double l0 = 0, sd = 0, lL = 0, r0 = 0, rL = 0;
    gram[v].lambda1_stats(0, l0, sd);
    gram[v].lambda1_stats(gram[v].times().size() - 1, lL, sd);
    gram[v].pr_stats(0, r0, sd);
    gram[v].pr_stats(gram[v].times().size() - 1, rL, sd);
    ctx.summary("lambda1_final_" + vars[v], lL);
    ctx.summary("pr_final_" + vars[v], rL);
    checks.add("cluster " + vars[v], "tokens cluster through depth (rank collapse): lambda_bar_1 grows from layer 0 to the last",
               "lambda_bar_1(depth) - lambda_bar_1(0), mean over runs", lL - l0, "> 0", lL - l0 > 0,
               qualitative("The Attention Within §VI / rank collapse: lambda_bar_1 -> 1 with depth"));
  }
  const bool rotary = positions == decoder::Positions::Rotary;
  if (vars.size() == 2 && rotary) {
    double a = 0, b = 0, sd = 0;
    gram[0].lambda1_stats(0, a, sd);
    gram[1].lambda1_stats(0, b, sd);
    checks.add("layer0 positions", "rotary positions act inside attention only: the embedded tokens do not depend on them",
               "|lambda_bar_1(0) on - off|", std::abs(a - b), "== 0", a == b,
               closed_form("rotary families: x(0) = embedding rows, no position term"));
  } else {
    checks.not_applicable("layer0 positions", "rotary positions act inside attention only: the embedded tokens do not depend on them",
                          "|lambda_bar_1(0) on - off|",
                          vars.size() == 2 ? "learned positions are added to the embedding (no rotary positions)" : "needs variants = both",
                          closed_form("rotary families: x(0) = embedding rows, no position term"));
  }
  checks.report(ctx, "transformer-clustering");
}

OutputDecl outputs() {
  const ColumnDecl variant = variant_column({{"positions_on", "the model as published: learned or rotary positions"},
                                             {"positions_off", "positional information removed (no position rows / no rotation)"}});
  OutputDecl o;
  o.tables = {metrics_table(variant), metrics_runs_table(variant), checks_table()};
  o.arrays = {{"token_ids.npy", "int64 [runs, tokens]: the token ids whose embeddings are the initial tokens"}};
  o.summaries = {{"lambda1_final_positions_on", "lambda_bar_1 at the last layer, mean over runs, positions on", "", "variants = both or on"},
                 {"pr_final_positions_on", "participation ratio r at the last layer, mean over runs, positions on", "", "variants = both or on"},
                 {"lambda1_final_positions_off", "lambda_bar_1 at the last layer, mean over runs, positions off", "", "variants = both or off"},
                 {"pr_final_positions_off", "participation ratio r at the last layer, mean over runs, positions off", "", "variants = both or off"}};
  o.figures = {{"clustering.png", "lambda_bar_1, r and the consensus distance against depth (mean +- std over runs), positions on and off"}};
  return o;
}

std::vector<ParamSpec> params() {
  std::vector<ParamSpec> ps{
      p_string("model", "gpt2", "which decoder family (tokdyn models)", family_names()),
      p_int("runs", 8, "independent sequences of token ids", 1, 65536),
      p_int("tokens", 32, "tokens per sequence (at most the model's context)", 2, 1 << 20),
      p_int("depth", 48, "depth steps (the model's layers cycled past the last, as layers = cycle)", 1, 1000000),
      p_int("seed", 0, "seed of the token ids (run r from stream (seed, r))", 0, kMaxSeed),
      p_string("variants", "both", "positions on and off, or one of them", {"both", "on", "off"})};
  for (ParamSpec& q : model_knobs("model", family_names()))
    if (q.key != "use_positions") ps.push_back(std::move(q));
  return ps;
}

const ExperimentRegistration reg{with_outputs(
    with_smoke(Experiment{"transformer-clustering",
                          "Clustering of tokens through the depth of GPT-2, GPT-NeoX or Llama (a checkpoint or a fresh model): "
                          "lambda_bar_1, r and consensus distance, positions on against off",
                          params(),
                          run_transformer_clustering,
                          "transformer-clustering",
                          [](const Params& P) {
                            const ModelCost c = model_descriptor(P.get_string("model")).cost(P);
                            const double R = static_cast<double>(P.get_int("runs")), T = static_cast<double>(P.get_int("tokens"));
                            const double nv = P.get_string("variants") == "both" ? 2.0 : 1.0;
                            return ResourceEstimate{c.weight_bytes * 2 + 4.0 * R * T * (8 * c.d) + 64e6,
                                                    nv * static_cast<double>(P.get_int("depth")) * R * T * c.per_row,
                                                    "the model's fp32 weights, runs x tokens x d_model activations"};
                          }},
               {{"runs", "2"}, {"tokens", "4"}, {"depth", "3"}}),
    outputs())};

}  // namespace preset_transformer_clustering
}  // namespace tokdyn
