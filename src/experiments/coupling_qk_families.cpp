// coupling-qk-specificity (E4) on a decoder family (GPT-2, GPT-NeoX, Llama; a checkpoint or a fresh
// model): the model's own layers, once each, from inputs near the homogeneous state H
// (X(0) = 1 x0^T + s |x0|/sqrt(d) dX, x0 the embedding of one token), the attention of every layer
// against the causal uniform kernel alpha*_ts = 1/t (what softmax gives at H without a positional
// scheme inside the layers), and the effect of perturbing W_Q and W_K of the later layers: second
// order in s near H (Prop 8) unless rotary positions act inside the layers.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "tokdyn/analysis/frozen_kernel.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/models/decoder/decoder.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/model_registry.hpp"

namespace tokdyn {
namespace preset_coupling_transformer {

namespace {

/// The attention probabilities [runs, heads, T, T] of the state entering each layer.
class AttentionCapture final : public TapObserver {
 public:
  bool wants(const std::string& name, long) const override { return name == "attention"; }
  void tap(const std::string&, long, const double* data, const std::vector<std::size_t>& shape) override {
    shape_ = shape;
    std::size_t n = 1;
    for (std::size_t s : shape) n *= s;
    data_.assign(data, data + n);
  }
  using TapObserver::tap;  // the float overload widens and calls the one above
  /// Mean over heads of |alpha_h - alpha*|_F for run r (alpha*_ts = 1/(t+1), s <= t, 0-based).
  double distance(std::size_t r) const {
    const std::size_t H = shape_.at(1), T = shape_.at(2);
    double sum = 0;
    for (std::size_t h = 0; h < H; ++h) {
      const double* a = data_.data() + (r * H + h) * T * T;
      double d2 = 0;
      for (std::size_t t = 0; t < T; ++t)
        for (std::size_t s = 0; s < T; ++s) {
          const double star = s <= t ? 1.0 / static_cast<double>(t + 1) : 0.0;
          d2 += (a[t * T + s] - star) * (a[t * T + s] - star);
        }
      sum += std::sqrt(d2);
    }
    return sum / static_cast<double>(H);
  }
  bool empty() const { return data_.empty(); }
  void clear() { data_.clear(); }

 private:
  std::vector<double> data_;
  std::vector<std::size_t> shape_;
};

}  // namespace

void qk_order_verdict(const std::vector<double>& finals, bool applies, const std::string& statement, RunContext& ctx);

void qk_specificity_decoder(const Params& p, RunContext& ctx) {
  const std::string model = p.get_string("model");
  const int T = static_cast<int>(p.get_int("tokens")), runs = static_cast<int>(p.get_int("runs"));
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const double s = p.get_double("amplitude"), eta = p.get_double("eta");
  // One start token is all the model needs (x0); the preset's runs are the perturbations dX.
  Params q = p;
  q.values_["runs"] = 1L;
  q.values_["depth"] = 1L;
  // The knobs E4 sets itself (the preset does not offer them): each layer once, W_Q / W_K as loaded.
  q.values_["layers"] = std::string("cycle");
  q.values_["layer"] = 0L;
  q.values_["qk"] = std::string("checkpoint");
  q.values_["qk_sigma"] = eta;
  q.values_["qk_from"] = 0L;
  ModelInstance base = build_model(model, q, ctx);
  const auto* bm = dynamic_cast<const decoder::DecoderMap*>(base.map.get());
  if (!bm) throw std::logic_error("coupling-qk-specificity: a decoder family's map is not a DecoderMap");
  const decoder::Arch& a = bm->arch();
  const int L = a.n_layer;
  int from = static_cast<int>(p.get_int("perturb_from"));
  if (from == 0) from = L / 2 + 1;  // the later half of the layers
  if (from > L)
    throw InputError(fmt::format("parameter 'perturb_from' = {}: the model has {} layers (1..{}; 0: the later half)", from, L, L));
  Params qp = q;
  qp.values_["qk"] = std::string("perturbed");
  qp.values_["qk_sigma"] = eta;
  qp.values_["qk_from"] = static_cast<long>(from - 1);
  ModelInstance pert = build_model(model, qp, ctx);
  for (const char* k : {"model", "synthetic_model", "synthetic_model_note", "model_config", "update"})
    if (base.notes.contains(k)) ctx.notes[k] = base.notes[k];
  const bool rotary_inside = a.positions == decoder::Positions::Rotary && p.get_bool("use_positions");
  ctx.notes["depth"] = L;
  ctx.notes["perturb_from"] = from;
  ctx.notes["alpha_star"] = "causal uniform: alpha*_ts = 1/t for s <= t (1-based t), the kernel at H without positions inside the layers";
  ctx.notes["positions_inside_layers"] = rotary_inside ? "rotary (no criterion: first order expected)" : "none";
  ctx.notes["initial_tokens"] = "X(0) = 1 x0^T + amplitude |x0|/sqrt(d) dX, x0 the first start token of the model (its embedding row), "
                                "dX standard normal from stream (seed, 0xde, run)";
  ctx.notes["perturbation"] = fmt::format("W_Q, W_K of layers {}..{} (1-based) + eta rms(W) N(0, 1), eta = {}", from, L, eta);
  ctx.notes["precision"] = "fp32 forward (the model's own precision); attention from the layers' tap";

  const Eigen::Index d = base.Z0.Z.cols();
  const RowVec x0 = base.Z0.Z.row(0);
  const double scale = x0.norm() / std::sqrt(static_cast<double>(d));
  AttentionCapture cb, cp;
  base.map->watch(&cb);
  pert.map->watch(&cp);
  CsvWriter csv = ctx.table("qk_specificity.csv");
  CsvWriter fin = ctx.table("final.csv");
  std::vector<double> finals;
  int done = 0;
  for (double amp : {s, s / 10.0}) {
    Batch Z;
    Z.runs = runs;
    Z.len = T;
    Z.Z.resize(static_cast<Eigen::Index>(runs) * T, d);
    for (int r = 0; r < runs; ++r) {
      Mat dX(T, d);
      Rng(seed, {0xde, static_cast<std::uint64_t>(r)}).fill_normal(dX, 1.0);
      Z.run(r) = x0.replicate(T, 1) + amp * scale * dX;
    }
    Batch Zq = Z;
    for (int l = 1; l <= L; ++l) {
      const double sd = (Zq.Z - Z.Z).norm() / std::max(Z.Z.norm(), 1e-300);
      double fl_b = 0, fl_q = 0;
      for (int r = 0; r < runs; ++r) {
        const Mat X = Z.run(r), Xq = Zq.run(r);
        fl_b += fk::fluctuation(X, T).norm() / X.norm() / runs;
        fl_q += fk::fluctuation(Xq, T).norm() / Xq.norm() / runs;
      }
      cb.clear();
      cp.clear();
      base.map->apply(l, Z);  // the taps hold the attention of the state entering layer l
      pert.map->apply(l, Zq);
      if (cb.empty() || cp.empty()) throw std::logic_error("coupling-qk-specificity: the decoder layer gave no attention tap");
      for (int v = 0; v < 2; ++v) {
        const AttentionCapture& c = v ? cp : cb;
        double mean = 0, mx = 0;
        for (int r = 0; r < runs; ++r) {
          const double dist = c.distance(static_cast<std::size_t>(r));
          mean += dist / runs;
          mx = std::max(mx, dist);
        }
        csv.cell(amp).cell(l).cell(std::string(v ? "perturbed" : "base")).cell(mean).cell(mx).cell(v ? sd : 0.0).cell(v ? fl_q : fl_b).end_row();
      }
      require_finite(Z, "layer", l);
      require_finite(Zq, "layer", l, "perturbed");
      if (ctx.progress) ctx.progress((done * L + l) / (2.0 * L));
    }
    finals.push_back((Zq.Z - Z.Z).norm() / Z.Z.norm());
    fin.cell(amp).cell(finals.back()).end_row();
    ++done;
  }
  qk_order_verdict(finals, !rotary_inside,
                   fmt::format("Prop 8 on {}: late W_Q, W_K changes act at second order near H (no positions inside the layers)", model),
                   ctx);
}

}  // namespace preset_coupling_transformer
}  // namespace tokdyn
