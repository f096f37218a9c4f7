#pragma once
// The real Mamba-2 block (state-spaces/mamba, `Mamba2` + pre-norm `Block`), exactly as the
// reference computes it, in fp32 with fp16/bf16 weights widened on load; batched over runs
// and tokens (The Attention Within §II-B). Per token t of one sequence:
//   u        = RMSNorm(x; w_norm, 1e-5)
//   [z|xBC|dt_raw] = W_in u                              (rows z, x, B, C, dt)
//   xBC'     = SiLU(causal depthwise conv(xBC) + b)      (left zero padding; SiLU on x, B, C)
//   dt       = softplus(dt_raw + dt_bias)  (threshold 20),  A = -exp(A_log)
//   y_t[h]   = sum_{s<=t} (C_t . B_s) exp(A_h sum_{r=s+1..t} dt_r) dt_s x_s[h] + D_h x_t[h]
//              (B, C of group g(h) = h / (H/G); the quadratic "SSD" form of the recurrence,
//              which is what the reference's chunked kernel computes within a chunk)
//   o        = RMSNorm_groups(y * SiLU(z)) * w_mix       (gate before the norm)
//   mixer(u) = W_out o
// Depth update: residual  x <- x + mixer(RMSNorm(x))  (the true residual stream), or
//               sphere    z <- pi(z + tau * mixer(RMSNorm(z)))  (the paper's model (2)).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokdyn/core/array_sink.hpp"
#include "tokdyn/engine/dynamics.hpp"
#include "tokdyn/models/mamba2/config.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/engine/schedule.hpp"
#include "tokdyn/core/tokens.hpp"

namespace tokdyn::mamba2 {

using VecF = Eigen::VectorXf;

/// One block's weights, widened to float. Shapes as in the checkpoint.
struct Layer {
  VecF norm_w;     ///< [d]            backbone.layers.l.norm.weight
  MatF in_proj;    ///< [d_in_proj, d] mixer.in_proj.weight
  MatF conv_w;     ///< [conv_dim, K]  mixer.conv1d.weight (stored [conv_dim, 1, K])
  VecF conv_b;     ///< [conv_dim]     mixer.conv1d.bias
  VecF dt_bias;    ///< [H]
  VecF A_log;      ///< [H]
  VecF D;          ///< [H]
  VecF mix_norm_w; ///< [d_inner]      mixer.norm.weight
  MatF out_proj;   ///< [d, d_inner]   mixer.out_proj.weight
};

struct Model {
  Config cfg;
  MatF embedding;  ///< [vocab_padded, d]
  std::vector<Layer> layers;
  VecF norm_f;     ///< [d]
  std::string source;  ///< checkpoint path, or a description of the synthetic model
  /// Non-empty for a freshly initialised model (in memory, or a checkpoint written by
  /// make-checkpoint, which records it in the file's __metadata__ under "tokdyn").
  std::string generated_by;
};

/// A fresh layer, initialised as the reference initialises a new MambaLMHeadModel:
/// in_proj U(+-1/sqrt(d)); conv weight and bias U(+-1/sqrt(K)); dt = exp(U(ln 1e-3, ln 1e-1))
/// floored at 1e-4, dt_bias = dt + ln(-expm1(-dt)); A_log = ln U(1, 16); D = 1; norm weights 1;
/// out_proj U(+-1/sqrt(d_inner)) / sqrt(n_layer) (the prenorm-residual rescaling). Tensors
/// stored as F16 hold F16-representable values. Drawn from streams (seed, 1, layer_id, ...) in
/// row blocks (threaded; the same bits on any thread count).
Layer init_layer(const Config& cfg, std::uint64_t seed, std::uint64_t layer_id);
/// A fresh model: layer l is init_layer(cfg, seed, l); embedding N(0, 0.02^2) from (seed, 0, ...).
Model init_model(const Config& cfg, std::uint64_t seed);

/// Ablation switches of The Attention Within §VI, at exactly the points where they act. Defaults: reference.
struct Switches {
  bool gate = true;        ///< off: v = y (the gated RMSNorm stays)
  bool silu_bc = true;     ///< off: B and C are conv + bias (no SiLU); x keeps its SiLU
  bool silu_x = true;      ///< off: no SiLU on the x channels
  bool conv = true;        ///< off: identity conv (current-token tap 1, others 0, bias 0)
  bool d_skip = true;      ///< off: no D x term
  bool mixer_norm = true;  ///< off: no gated RMSNorm (o = v)
};

/// What one mixer call reports besides its output (all optional).
struct MixerTaps {
  float* q = nullptr;         ///< [runs*len]: q_i = C_i . B_i of group 0, as the block uses them
  std::vector<int> heads;     ///< heads whose mixing matrices are wanted
  float* mixing = nullptr;    ///< [runs][heads.size()][len][len]: (C_t.B_s) exp(A sum dt) dt_s, s <= t (0 above)
};

/// Whether the mixer's loops over `rows` rows of `cols` entries each (norms, conv, gate, the
/// sphere update; the SSD loop over runs with cols = d_inner * len) run on a thread team. A
/// function of the shapes only; every row is computed by the same code either way, so the bits
/// do not depend on it. Exposed so that tests can check that they exercise the threaded loops.
bool rows_in_parallel(long rows, long cols);

/// The mixer with its working buffers (reused across calls; one engine per concurrent caller).
/// Its projections are tokdyn::gemm_nt_blocked (fixed tiles), its other loops are over rows or
/// runs with one result each: the output has the same bits on any thread count.
class Engine {
 public:
  Engine(const Config& cfg, Switches sw);
  /// out = mixer(RMSNorm(X; L.norm_w)) for (runs*len) x d tokens, runs of `len` consecutive rows.
  void mixer(const Layer& L, const MatF& X, int runs, int len, MatF& out, const MixerTaps& taps = {});
  const Switches& switches() const { return sw_; }
  /// Multiply-adds of one mixer call (GEMMs + SSD), for throughput reports.
  double flops(int runs, int len) const;

 private:
  Config cfg_;
  Switches sw_;
  MatF U_, P_, XBC_, Y_, convT_;
  Eigen::MatrixXf dt_;  // (runs*len) x H, column-major unimportant
};

/// Token update across depth.
enum class Update { Residual, Sphere };

/// Which block acts at depth step k: a WeightSchedule of layers (schedule.hpp). The model's
/// blocks cycled (ListSchedule over all of them), one block repeated or a list cycled
/// (ListSchedule with an index list), or a fresh reference initialisation at every depth step
/// (random_layers).
using LayerSchedule = WeightSchedule<Layer>;
/// The model's blocks as shared layers (moved out of the model, no copy), for a ListSchedule.
std::vector<std::shared_ptr<const Layer>> share_layers(Model& m);
/// The model's blocks cycled (block (k-1) mod n_layer at step k), copied out of the model.
std::shared_ptr<const LayerSchedule> cycle_layers(const Model& m);
/// Fresh reference initialisation at every depth step k: init_layer(cfg, seed, 1000000 + k), made on
/// demand (the last few cached, so lanes in lock step draw each layer once).
std::shared_ptr<const LayerSchedule> random_layers(const Config& cfg, std::uint64_t seed);

// The block's taps (dynamics.hpp TapObserver), of the state entering layer k, in float:
//   "q"       q_i = C_i . B_i (group 0) as the block uses them: [runs, tokens];
//   "mixing"  the mixing matrices of the heads the observer asks for (TapObserver::heads):
//             [runs, heads, tokens, tokens], entry (t, s): (C_t.B_s) exp(A sum dt) dt_s for s <= t, 0 above.

/// One depth step of the block as a LayerMap over a float batch (src/models/mamba2/mamba2.cpp): the
/// mixer (fp32 Engine::mixer of the schedule's layer k) and the residual or sphere update in fp32:
///   residual  x <- x + mixer(RMSNorm(x));   sphere  z <- pi(z + tau mixer(RMSNorm(z))).
/// apply() on a double batch rounds it to float on entry (a state of a depth run is float-
/// representable, so the result is the same). Holds its Engine (working buffers): one BlockMap
/// per concurrent caller.
/// jvp() (src/models/mamba2/jvp.cpp) is exact forward mode of the same step evaluated in double at Z
/// as given: value and tangent are propagated together through RMSNorm, in_proj, conv, SiLU,
/// softplus dt, the SSD quadratic form, the gated RMSNorm and out_proj (weights widened to double).
/// The tangent is computed in double because an fp32 tangent would carry ~1e-7 relative noise per
/// operation; the double step agrees with the fp32 one to fp32 round-off. Cost: about two double
/// forward passes; never a dense Jacobian.
class BlockMap final : public LayerMap {
 public:
  BlockMap(Config cfg, Switches sw, std::shared_ptr<const LayerSchedule> layers, Update update, float tau = 1.0f);
  ~BlockMap() override;
  BlockMap(BlockMap&&) noexcept;
  void apply(long k, Batch& Z) const override;
  void apply_float(long k, BatchF& Z) const override;
  bool float_state() const override { return true; }
  std::string overflow_hint() const override {
    return "the block overflowed; check the checkpoint's weights (e.g. A_log, dt_bias)";
  }
  void jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const override;
  bool has_exact_jvp() const override { return true; }
  bool on_sphere() const override { return update_ == Update::Sphere; }
  /// The step in double (Y = F_k(Z), Z not rounded) and its tangent dY = D F_k(Z)[V]: the case
  /// m = 1 of step_double_tangents (one definition of the double forward).
  void step_double(long k, const Batch& Z, const Tokens& V, Tokens& Y, Tokens& dY) const;
  /// The step in double at Z (R runs) and its tangents along m directions per run, sharing the
  /// value: V is (m R T) x d, m blocks of the shape of Z (block j, rows j R T .. (j+1) R T - 1, is
  /// direction j of every run), m = V.rows() / (R T) >= 1. Y = F_k(Z) (shape of Z), dY = D F_k(Z)[V]
  /// (shape of V). Equal, up to round-off (~1e-15 relative), to the step on Z stacked m times
  /// with one tangent each; but every primal quantity (projections, conv, SiLU, softplus, the SSD matrices, norms)
  /// is computed once per run and only the tangents m times: about (1 + m) / (2 m) of its work.
  /// The same bits on any thread count.
  void step_double_tangents(long k, const Batch& Z, const Tokens& V, Tokens& Y, Tokens& dY) const;
  std::vector<std::string> tap_names() const override {
    return {"q [runs, tokens]", "mixing [runs, heads, tokens, tokens]"};
  }
  const Config& config() const { return cfg_; }
  const Switches& switches() const { return sw_; }
  /// Multiply-adds of one step over `runs` sequences of `len` tokens.
  double flops(int runs, int len) const;

 private:
  Config cfg_;
  Switches sw_;
  std::shared_ptr<const LayerSchedule> layers_;
  Update update_;
  float tau_;
  std::unique_ptr<Engine> eng_;  // mutable working buffers
  mutable MatF out_;
  mutable std::vector<float> q_, mix_;
};

/// Default token ids: run r draws `len` ids iid uniform in [0, vocab) from stream (seed, r);
/// [runs*len], run-major. Use cfg.vocab_size (the real vocabulary, the same for a model in
/// either config layout) unless the user asks for another range.
std::vector<std::int64_t> draw_token_ids(std::uint64_t vocab, int runs, int len, std::uint64_t seed);

/// Initial tokens: embedding rows of `ids` ([runs*len]), in the update's space (sphere: unit rows).
MatF embed(const Model& m, const std::vector<std::int64_t>& ids, Update update);

}  // namespace tokdyn::mamba2
