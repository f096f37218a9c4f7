// Decoder-only transformer families and their depth map (models/decoder/decoder.hpp).
#include "tokdyn/models/decoder/decoder.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numbers>
#include <stdexcept>

#include <fmt/format.h>

#include "tokdyn/core/linalg.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn::decoder {

// ---------------------------------------------------------------- the architecture

std::vector<double> Arch::frequencies() const {
  std::vector<double> f = rotary_frequencies(rotary_dims, rope_theta);
  if (rope_scaling == "linear") {
    for (double& x : f) x /= rope_factor;
  } else if (rope_scaling == "llama3") {
    // Llama 3.1's frequency-dependent scaling: long wavelengths divided by `factor`, short ones
    // kept, the band between interpolated in 1/wavelength.
    const double low_wl = rope_original_max / rope_low_freq_factor, high_wl = rope_original_max / rope_high_freq_factor;
    for (double& x : f) {
      const double wl = 2 * std::numbers::pi / x;
      if (wl < high_wl) continue;
      if (wl > low_wl) {
        x /= rope_factor;
        continue;
      }
      const double s = (rope_original_max / wl - rope_low_freq_factor) / (rope_high_freq_factor - rope_low_freq_factor);
      x = (1 - s) * x / rope_factor + s * x;
    }
  }
  return f;
}

double Arch::parameters() const {
  const double d = d_model;
  const double norms = (norm_bias ? 2.0 : 1.0) * d;
  double layer = 2 * norms + static_cast<double>(qkv_rows()) * d + (qkv_bias ? qkv_rows() : 0) + d * q_rows() +
                 (out_bias ? d : 0) + (gated_mlp ? 3.0 : 2.0) * d * d_ff + (mlp_bias ? d_ff + d : 0);
  double p = n_layer * layer + static_cast<double>(vocab_size) * d + norms;
  if (positions == Positions::Learned) p += static_cast<double>(max_positions) * d;
  if (!tied_embeddings) p += static_cast<double>(vocab_size) * d;
  return p;
}

void Arch::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
  };
  need(d_model >= 1 && d_model <= (1 << 16), fmt::format("hidden size {}: expected 1..65536", d_model));
  need(n_layer >= 1 && n_layer <= 4096, fmt::format("number of layers {}: expected 1..4096", n_layer));
  need(n_head >= 1 && n_head <= 4096, fmt::format("attention heads {}: expected 1..4096", n_head));
  need(n_kv_head >= 1 && n_head % n_kv_head == 0,
       fmt::format("key-value heads {}: expected a divisor of the attention heads {}", n_kv_head, n_head));
  need(head_dim >= 1 && head_dim <= 4096, fmt::format("head dimension {}: expected 1..4096", head_dim));
  need(d_ff >= 1 && d_ff <= (1 << 20), fmt::format("MLP width {}: expected 1..1048576", d_ff));
  need(vocab_size >= 1 && vocab_size <= (1 << 24), fmt::format("vocabulary size {}: expected 1..16777216", vocab_size));
  need(max_positions >= 1 && max_positions <= (1 << 24), fmt::format("max positions {}: expected 1..16777216", max_positions));
  need(norm_eps > 0 && norm_eps < 1, fmt::format("norm epsilon {}: expected in (0, 1)", norm_eps));
  if (positions == Positions::Rotary) {
    need(rotary_dims >= 2 && rotary_dims % 2 == 0 && rotary_dims <= head_dim,
         fmt::format("rotary dimensions {}: expected an even number in 2..head dimension {}", rotary_dims, head_dim));
    need(rope_theta > 1 && std::isfinite(rope_theta), fmt::format("rotary base {}: expected > 1", rope_theta));
    need(rope_factor >= 1 && std::isfinite(rope_factor), fmt::format("rope_scaling factor {}: expected >= 1", rope_factor));
    if (rope_scaling == "llama3")
      need(rope_high_freq_factor > rope_low_freq_factor && rope_low_freq_factor > 0 && rope_original_max >= 1,
           "rope_scaling llama3: expected high_freq_factor > low_freq_factor > 0 and original_max_position_embeddings >= 1");
  }
  need(init_std > 0 && init_std < 10, fmt::format("initializer_range {}: expected in (0, 10)", init_std));
}

template <class S>
static VecT<double> wv(const VecT<S>& v) {
  return v.template cast<double>();
}

LayerT<double> widen(const Layer& L) {
  LayerT<double> W;
  W.ln1_w = wv(L.ln1_w);
  W.ln1_b = wv(L.ln1_b);
  W.ln2_w = wv(L.ln2_w);
  W.ln2_b = wv(L.ln2_b);
  W.qkv_w = L.qkv_w.cast<double>();
  W.qkv_b = wv(L.qkv_b);
  W.o_w = L.o_w.cast<double>();
  W.o_b = wv(L.o_b);
  W.up_w = L.up_w.cast<double>();
  W.up_b = wv(L.up_b);
  W.down_w = L.down_w.cast<double>();
  W.down_b = wv(L.down_b);
  return W;
}

// ---------------------------------------------------------------- the families

namespace {
std::map<std::string, const Family*>& family_table() {
  static std::map<std::string, const Family*> t;
  return t;
}
}  // namespace

FamilyRegistration::FamilyRegistration(const Family* f) {
  if (!family_table().emplace(f->name, f).second) throw std::logic_error("decoder family registered twice: " + f->name);
}

std::vector<const Family*> families() {
  std::vector<const Family*> v;
  for (const auto& [n, f] : family_table()) v.push_back(f);
  return v;
}

const Family* find_family(const std::string& name) {
  const auto it = family_table().find(name);
  return it == family_table().end() ? nullptr : it->second;
}

Model allocate(const Arch& a) {
  Model m;
  m.arch = a;
  const Eigen::Index d = a.d_model;
  m.wte = MatF::Zero(a.vocab_size, d);
  if (a.positions == Positions::Learned) m.wpe = MatF::Zero(a.max_positions, d);
  m.lnf_w = VecF::Ones(d);
  if (a.norm_bias) m.lnf_b = VecF::Zero(d);
  if (!a.tied_embeddings) m.lm_head = MatF::Zero(a.vocab_size, d);
  m.layers.resize(static_cast<std::size_t>(a.n_layer));
  for (Layer& L : m.layers) {
    L.ln1_w = VecF::Ones(d);
    L.ln2_w = VecF::Ones(d);
    if (a.norm_bias) {
      L.ln1_b = VecF::Zero(d);
      L.ln2_b = VecF::Zero(d);
    }
    L.qkv_w = MatF::Zero(a.qkv_rows(), d);
    if (a.qkv_bias) L.qkv_b = VecF::Zero(a.qkv_rows());
    L.o_w = MatF::Zero(d, a.q_rows());
    if (a.out_bias) L.o_b = VecF::Zero(d);
    L.up_w = MatF::Zero((a.gated_mlp ? 2 : 1) * static_cast<Eigen::Index>(a.d_ff), d);
    if (a.mlp_bias) {
      L.up_b = VecF::Zero((a.gated_mlp ? 2 : 1) * static_cast<Eigen::Index>(a.d_ff));
      L.down_b = VecF::Zero(d);
    }
    L.down_w = MatF::Zero(d, a.d_ff);
  }
  return m;
}

Model init_model(const Family& f, const Arch& a, std::uint64_t seed) {
  Model m = allocate(a);
  const std::vector<TensorSlot> slots = f.tensors(a);
  const long n = static_cast<long>(slots.size());
  std::vector<std::vector<float>> vals(slots.size());
#pragma omp parallel for schedule(dynamic)
  for (long i = 0; i < n; ++i) {
    const TensorSlot& s = slots[static_cast<std::size_t>(i)];
    std::uint64_t numel = 1;
    for (auto x : s.shape) numel *= x;
    std::vector<float>& v = vals[static_cast<std::size_t>(i)];
    v.assign(numel, 0.0f);
    if (s.init == "ones") {
      std::fill(v.begin(), v.end(), 1.0f);
    } else if (s.init == "normal") {
      const double sd = s.init_std > 0 ? s.init_std : a.init_std;
      // Row blocks of 4096 values, each from its own stream: the same draws on any thread count.
      for (std::uint64_t b = 0; b * 4096 < numel; ++b) {
        Rng rng(seed, {1, static_cast<std::uint64_t>(i), b});
        for (std::uint64_t j = b * 4096; j < std::min<std::uint64_t>(numel, (b + 1) * 4096); ++j)
          v[j] = static_cast<float>(sd * rng.normal());
      }
    }
  }
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i].load(m, vals[i].data());
  m.generated_by = fmt::format("tokdyn make-checkpoint --model {} (seed {}): {} initialised as {} initialises a fresh model", f.name,
                               seed, a.family, f.hf_class);
  m.source = m.generated_by;
  return m;
}

// ---------------------------------------------------------------- the depth map

namespace {

/// Rows in blocks of 64 over the thread team when there is enough work; each row computed by the
/// same code either way.
template <class F>
void for_rows(long rows, long cols, F&& f) {
  const long B = 64, nb = (rows + B - 1) / B;
  const bool par = rows * cols >= (1L << 15) && nb > 1;
#pragma omp parallel for schedule(static) if (par)
  for (long b = 0; b < nb; ++b) f(b * B, std::min(rows, (b + 1) * B));
}

/// [Top; Bottom] W^T as one product (the value rows and the tangent rows of a step share the
/// weights: one larger GEMM runs closer to the peak than two), split back into its two parts.
void stacked_product(const Mat& top, const Mat& bottom, const Mat& W, Mat& out_top, Mat& out_bottom) {
  Mat in(top.rows() + bottom.rows(), top.cols()), out;
  in.topRows(top.rows()) = top;
  in.bottomRows(bottom.rows()) = bottom;
  gemm_nt_blocked(in, W, out);
  out_top = out.topRows(top.rows());
  out_bottom = out.bottomRows(bottom.rows());
}

template <class S>
void add_bias(MatT<S>& Y, const VecT<S>& b) {
  if (b.size() == 0) return;
  for_rows(Y.rows(), Y.cols(), [&](long r0, long r1) {
    for (long i = r0; i < r1; ++i) Y.row(i) += b.transpose();
  });
}

}  // namespace

DecoderMap::DecoderMap(Arch a, Switches sw, std::shared_ptr<const LayerSchedule> layers, Update update, double tau, int len)
    : arch_(std::move(a)), sw_(sw), layers_(std::move(layers)), update_(update), tau_(tau), len_(len) {
  if (arch_.positions == Positions::Rotary) rot_ = RotaryTable(arch_.frequencies(), len, arch_.rotary_interleaved);
}

double DecoderMap::flops(int runs) const {
  const double RT = static_cast<double>(runs) * len_, d = arch_.d_model;
  double f = 0;
  if (sw_.attention)
    f += RT * d * (arch_.qkv_rows() + arch_.q_rows()) + 2.0 * runs * arch_.n_head * static_cast<double>(len_) * len_ * arch_.head_dim;
  if (sw_.mlp) f += RT * d * arch_.d_ff * (arch_.gated_mlp ? 3.0 : 2.0);
  return f;
}

template <class S>
void DecoderMap::increment(const LayerT<S>& L, const MatT<S>& X, int runs, MatT<S>& D, long k, bool taps) const {
  const Arch& a = arch_;
  const long RT = X.rows(), d = X.cols(), T = len_;
  D.setZero(RT, d);
  MatT<S> H(RT, d), A;
  const bool want_att = taps && !watchers_.empty();
  if (sw_.attention) {
    for_rows(RT, d, [&](long r0, long r1) { norm_rows<S>(a.norm, X, L.ln1_w, L.ln1_b, a.norm_eps, H, r0, r1); });
    MatT<S> QKV;
    gemm_nt_blocked(H, L.qkv_w, QKV);
    add_bias(QKV, L.qkv_b);
    if (a.positions == Positions::Rotary && sw_.positions)
      for_rows(RT, QKV.cols(), [&](long r0, long r1) {
        rotary_rows<S>(rot_, QKV, 0, a.n_head, a.head_dim, static_cast<int>(T), r0, r1);
        rotary_rows<S>(rot_, QKV, a.q_rows(), a.n_kv_head, a.head_dim, static_cast<int>(T), r0, r1);
      });
    MatT<S> O(RT, a.q_rows());
    const double scale = sw_.beta / std::sqrt(static_cast<double>(a.head_dim));
    const int group = a.n_head / a.n_kv_head, hd = a.head_dim;
    // Attention probabilities wanted by an observer: [runs, heads, T, T] of the heads asked for.
    std::vector<int> heads;
    std::vector<S> att;
    if (want_att)
      for (TapObserver* w : watchers_)
        if (w->wants("attention", k)) {
          heads = w->heads("attention", k);
          if (heads.empty())
            for (int h = 0; h < a.n_head; ++h) heads.push_back(h);
          for (int h : heads)
            if (h < 0 || h >= a.n_head)
              throw std::invalid_argument(fmt::format("attention tap: head {} out of range [0, {})", h, a.n_head));
          att.assign(static_cast<std::size_t>(runs) * heads.size() * T * T, S(0));
          break;
        }
    const long pairs = static_cast<long>(runs) * a.n_head;
#pragma omp parallel for schedule(dynamic) if (pairs > 1 && RT * d >= (1L << 14))
    for (long p = 0; p < pairs; ++p) {
      const long r = p / a.n_head;
      const int h = static_cast<int>(p % a.n_head), g = h / group;
      MatT<S> P(T, T);
      auto Q = QKV.block(r * T, static_cast<long>(h) * hd, T, hd);
      auto K = QKV.block(r * T, a.q_rows() + static_cast<long>(g) * hd, T, hd);
      auto V = QKV.block(r * T, a.q_rows() + a.kv_rows() + static_cast<long>(g) * hd, T, hd);
      attention_head<S>(Q, K, V, scale, sw_.causal, P, O.block(r * T, static_cast<long>(h) * hd, T, hd));
      if (!att.empty()) {
        const auto it = std::find(heads.begin(), heads.end(), h);
        if (it != heads.end()) {
          const std::size_t hi = static_cast<std::size_t>(it - heads.begin());
          std::copy(P.data(), P.data() + T * T, att.data() + (static_cast<std::size_t>(r) * heads.size() + hi) * T * T);
        }
      }
    }
    gemm_nt_blocked(O, L.o_w, A);
    add_bias(A, L.o_b);
    D += A;
    if (!att.empty())
      for (TapObserver* w : watchers_)
        if (w->wants("attention", k))
          w->tap("attention", k, att.data(),
                 {static_cast<std::size_t>(runs), heads.size(), static_cast<std::size_t>(T), static_cast<std::size_t>(T)});
  }
  if (taps && !watchers_.empty())
    for (TapObserver* w : watchers_)
      if (w->wants("residual_mid", k)) {
        MatT<S> mid = X + D;
        w->tap("residual_mid", k, mid.data(), {static_cast<std::size_t>(runs), static_cast<std::size_t>(T), static_cast<std::size_t>(d)});
      }
  if (sw_.mlp) {
    if (a.layout == Layout::Sequential) {
      MatT<S> X1 = X + D;
      for_rows(RT, d, [&](long r0, long r1) { norm_rows<S>(a.norm, X1, L.ln2_w, L.ln2_b, a.norm_eps, H, r0, r1); });
    } else {
      for_rows(RT, d, [&](long r0, long r1) { norm_rows<S>(a.norm, X, L.ln2_w, L.ln2_b, a.norm_eps, H, r0, r1); });
    }
    MatT<S> U, M;
    gemm_nt_blocked(H, L.up_w, U);
    add_bias(U, L.up_b);
    const long F = a.d_ff;
    MatT<S> G(RT, F);
    for_rows(RT, F, [&](long r0, long r1) {
      auto g = G.middleRows(r0, r1 - r0).array();
      act_block<S>(a.act, U.middleRows(r0, r1 - r0).leftCols(F).array(), g);
      if (a.gated_mlp) g *= U.middleRows(r0, r1 - r0).rightCols(F).array();
    });
    gemm_nt_blocked(G, L.down_w, M);
    add_bias(M, L.down_b);
    D += M;
  }
}

template void DecoderMap::increment<float>(const LayerT<float>&, const MatF&, int, MatF&, long, bool) const;
template void DecoderMap::increment<double>(const LayerT<double>&, const Mat&, int, Mat&, long, bool) const;

void DecoderMap::apply_float(long k, BatchF& Z) const {
  if (Z.len != len_)
    throw std::invalid_argument(fmt::format("decoder step: {} tokens per run; the model was built for {}", Z.len, len_));
  const std::shared_ptr<const Layer> L = layers_->at_layer(k);
  MatF D;
  increment<float>(*L, Z.Z, Z.runs, D, k, true);
  const long RT = Z.Z.rows(), d = Z.Z.cols();
  if (update_ == Update::Residual) {
    for_rows(RT, d, [&](long r0, long r1) { Z.Z.middleRows(r0, r1 - r0) += D.middleRows(r0, r1 - r0); });
  } else {
    const float tau = static_cast<float>(tau_);
    for_rows(RT, d, [&](long r0, long r1) {
      for (long i = r0; i < r1; ++i) {
        Z.Z.row(i) += tau * D.row(i);
        const float n = Z.Z.row(i).norm();
        if (n > 0) Z.Z.row(i) /= n;
      }
    });
  }
}

void DecoderMap::apply(long k, Batch& Z) const {
  BatchF F{Z.Z.cast<float>(), Z.runs, Z.len};
  apply_float(k, F);
  Z.Z = F.Z.cast<double>();
}

std::shared_ptr<const LayerT<double>> DecoderMap::widened(long k) const {
  const std::shared_ptr<const Layer> L = layers_->at_layer(k);
  std::lock_guard<std::mutex> lock(wide_mu_);
  for (const auto& [src, w] : wide_)
    if (src.get() == L.get()) return w;
  auto w = std::make_shared<const LayerT<double>>(widen(*L));
  // Keep the widened layers while they fit in 2 GiB (a model's layers cycled: each widened once).
  const double bytes = 8.0 * (w->qkv_w.size() + w->o_w.size() + w->up_w.size() + w->down_w.size());
  if (static_cast<double>(wide_.size() + 1) * bytes > 2.0 * 1024 * 1024 * 1024 && !wide_.empty()) wide_.erase(wide_.begin());
  wide_.emplace_back(L, w);
  return w;
}

void DecoderMap::jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const {
  Tokens Y;
  step_double_tangents(k, Z, V, Y, out);
}

void DecoderMap::step_double_tangents(long k, const Batch& Z, const Tokens& V, Tokens& Y, Tokens& dY) const {
  const Arch& a = arch_;
  const long RT = Z.Z.rows(), d = Z.Z.cols(), T = len_;
  if (Z.len != len_ || RT != static_cast<long>(Z.runs) * T)
    throw std::invalid_argument(fmt::format("decoder step: {} tokens per run; the model was built for {}", Z.len, len_));
  if (V.cols() != d || V.rows() % RT != 0 || V.rows() == 0)
    throw std::invalid_argument("decoder jvp: expected tangents of m blocks of the state's shape");
  const long MR = V.rows(), m = MR / RT;
  const std::shared_ptr<const LayerT<double>> Lp = widened(k);
  const LayerT<double>& L = *Lp;
  const Mat& X = Z.Z;
  Mat D = Mat::Zero(RT, d), dD = Mat::Zero(MR, d);
  Mat H(RT, d), dH(MR, d);
  std::vector<double> inv(static_cast<std::size_t>(RT));
  if (sw_.attention) {
    for_rows(RT, d, [&](long r0, long r1) { norm_rows<double>(a.norm, X, L.ln1_w, L.ln1_b, a.norm_eps, H, r0, r1, inv.data()); });
    for_rows(MR, d, [&](long r0, long r1) { norm_tangent_rows(a.norm, X, inv.data(), L.ln1_w, V, dH, r0, r1); });
    Mat QKV, dQKV;
    stacked_product(H, dH, L.qkv_w, QKV, dQKV);
    add_bias(QKV, L.qkv_b);
    if (a.positions == Positions::Rotary && sw_.positions) {
      for (Mat* M : {&QKV, &dQKV})
        for_rows(M->rows(), M->cols(), [&](long r0, long r1) {
          rotary_rows<double>(rot_, *M, 0, a.n_head, a.head_dim, static_cast<int>(T), r0, r1);
          rotary_rows<double>(rot_, *M, a.q_rows(), a.n_kv_head, a.head_dim, static_cast<int>(T), r0, r1);
        });
    }
    Mat O(RT, a.q_rows()), dO(MR, a.q_rows());
    const double scale = sw_.beta / std::sqrt(static_cast<double>(a.head_dim));
    const int group = a.n_head / a.n_kv_head, hd = a.head_dim;
    const long pairs = static_cast<long>(Z.runs) * a.n_head;
#pragma omp parallel for schedule(dynamic) if (pairs > 1)
    for (long p = 0; p < pairs; ++p) {
      const long r = p / a.n_head;
      const int h = static_cast<int>(p % a.n_head), g = h / group;
      const long cq = static_cast<long>(h) * hd, ck = a.q_rows() + static_cast<long>(g) * hd,
                 cv = a.q_rows() + a.kv_rows() + static_cast<long>(g) * hd;
      Mat P(T, T);
      auto Q = QKV.block(r * T, cq, T, hd);
      auto K = QKV.block(r * T, ck, T, hd);
      auto Vv = QKV.block(r * T, cv, T, hd);
      attention_head<double>(Q, K, Vv, scale, sw_.causal, P, O.block(r * T, cq, T, hd));
      for (long j = 0; j < m; ++j) {
        const long row = j * RT + r * T;
        attention_head_tangent(Q, K, Vv, P, dQKV.block(row, cq, T, hd), dQKV.block(row, ck, T, hd), dQKV.block(row, cv, T, hd),
                               scale, sw_.causal, dO.block(row, cq, T, hd));
      }
    }
    Mat A, dA;
    stacked_product(O, dO, L.o_w, A, dA);
    add_bias(A, L.o_b);
    D += A;
    dD += dA;
  }
  if (sw_.mlp) {
    Mat X1, dX1;
    const Mat* base = &X;
    const Mat* dbase = &V;
    if (a.layout == Layout::Sequential) {
      X1 = X + D;
      dX1 = V + dD;
      base = &X1;
      dbase = &dX1;
    }
    for_rows(RT, d, [&](long r0, long r1) { norm_rows<double>(a.norm, *base, L.ln2_w, L.ln2_b, a.norm_eps, H, r0, r1, inv.data()); });
    for_rows(MR, d, [&](long r0, long r1) { norm_tangent_rows(a.norm, *base, inv.data(), L.ln2_w, *dbase, dH, r0, r1); });
    Mat U, dU;
    stacked_product(H, dH, L.up_w, U, dU);
    add_bias(U, L.up_b);
    const long F = a.d_ff;
    // The activation and its derivative at U once per value row (act0 = act(gate rows); gated: G =
    // act0 * up), then every tangent row from them: d act = act'(u) du (gated: + act0 d up).
    Mat G(RT, F), act0(RT, F), der(RT, F), dG(MR, F);
    for_rows(RT, F, [&](long r0, long r1) {
      for (long i = r0; i < r1; ++i)
        for (long j = 0; j < F; ++j) {
          act0(i, j) = act_value<double>(a.act, U(i, j));
          der(i, j) = act_derivative<double>(a.act, U(i, j));
        }
      auto g = G.middleRows(r0, r1 - r0).array();
      g = act0.middleRows(r0, r1 - r0).array();
      if (a.gated_mlp) g *= U.middleRows(r0, r1 - r0).rightCols(F).array();
    });
    if (a.gated_mlp)  // d(act0 * up) = act'(gate) d gate * up + act0 d up
      der.array() *= U.rightCols(F).array();
    for_rows(MR, F, [&](long r0, long r1) {
      for (long i = r0; i < r1; ++i) {
        const long iv = i % RT;
        dG.row(i).array() = der.row(iv).array() * dU.row(i).head(F).array();
        if (a.gated_mlp) dG.row(i).array() += act0.row(iv).array() * dU.row(i).tail(F).array();
      }
    });
    Mat M, dM;
    stacked_product(G, dG, L.down_w, M, dM);
    add_bias(M, L.down_b);
    D += M;
    dD += dM;
  }
  Y.resize(RT, d);
  dY.resize(MR, d);
  if (update_ == Update::Residual) {
    Y = X + D;
    dY = V + dD;
  } else {
    Mat W = X + tau_ * D;
    std::vector<double> nrm(static_cast<std::size_t>(RT));
    for (long i = 0; i < RT; ++i) {
      nrm[static_cast<std::size_t>(i)] = W.row(i).norm();
      Y.row(i) = W.row(i) / nrm[static_cast<std::size_t>(i)];
    }
    for_rows(MR, d, [&](long r0, long r1) {
      for (long i = r0; i < r1; ++i) {
        const long iv = i % RT;
        const RowVec dw = V.row(i) + tau_ * dD.row(i);
        dY.row(i) = (dw - Y.row(iv) * Y.row(iv).dot(dw)) / nrm[static_cast<std::size_t>(iv)];
      }
    });
  }
}

// ---------------------------------------------------------------- tokens

std::vector<std::int64_t> draw_token_ids(std::uint64_t vocab, int runs, int len, std::uint64_t seed) {
  if (vocab == 0 || runs < 0 || len < 0) throw std::invalid_argument("draw_token_ids: vocab must be positive");
  std::vector<std::int64_t> ids(static_cast<std::size_t>(runs) * static_cast<std::size_t>(len));
  for (int r = 0; r < runs; ++r) {
    Rng rng(seed, {static_cast<std::uint64_t>(r)});
    for (int i = 0; i < len; ++i)
      ids[static_cast<std::size_t>(r) * static_cast<std::size_t>(len) + static_cast<std::size_t>(i)] =
          static_cast<std::int64_t>(rng.below(vocab));
  }
  return ids;
}

MatF embed(const Model& m, const std::vector<std::int64_t>& ids, int len, const Switches& sw, Update update) {
  MatF X(static_cast<Eigen::Index>(ids.size()), m.arch.d_model);
  const bool pos = m.arch.positions == Positions::Learned && sw.positions;
  if (pos && len > m.wpe.rows())
    throw std::invalid_argument(fmt::format("tokens {}: the model has {} learned positions", len, m.wpe.rows()));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= m.wte.rows())
      throw std::invalid_argument(fmt::format("token id {}: expected an id in [0, {})", ids[i], m.wte.rows()));
    X.row(static_cast<Eigen::Index>(i)) = m.wte.row(ids[i]);
    if (pos) X.row(static_cast<Eigen::Index>(i)) += m.wpe.row(static_cast<Eigen::Index>(i % static_cast<std::size_t>(len)));
    if (update == Update::Sphere) {
      const float n = X.row(static_cast<Eigen::Index>(i)).norm();
      if (n > 0) X.row(static_cast<Eigen::Index>(i)) /= n;
    }
  }
  return X;
}

}  // namespace tokdyn::decoder
