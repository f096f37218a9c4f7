#include "tokdyn/models/mamba2/mamba2.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <unistd.h>

#include <fmt/format.h>

#include "tokdyn/models/decoder/decoder.hpp"
#include "tokdyn/core/nn.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/half.hpp"
#include "tokdyn/core/linalg.hpp"

#include "ssd.hpp"
#include "tokdyn/models/parts/parts.hpp"


namespace tokdyn::mamba2 {

// ---------------------------------------------------------------- init

namespace {

float round_half(float x) { return half_to_float(float_to_half(x)); }

constexpr Eigen::Index kInitBlock = 64;  // rows per random stream

/// Fills M with U(-b, b) (uniform) or N(0, b^2) (normal), row block i from stream (seed, ids..., i),
/// optionally rounded to F16.
void fill_blocks(MatF& M, double b, bool normal, bool half, std::uint64_t seed, std::uint64_t a, std::uint64_t c,
                 std::uint64_t e) {
  const Eigen::Index nb = (M.rows() + kInitBlock - 1) / kInitBlock;
#pragma omp parallel for schedule(static) if (M.size() >= (1 << 16))
  for (Eigen::Index blk = 0; blk < nb; ++blk) {
    Rng rng(seed, {a, c, e, static_cast<std::uint64_t>(blk)});
    const Eigen::Index r1 = std::min(M.rows(), (blk + 1) * kInitBlock);
    for (Eigen::Index r = blk * kInitBlock; r < r1; ++r)
      for (Eigen::Index j = 0; j < M.cols(); ++j) {
        const float v = static_cast<float>(normal ? b * rng.normal() : rng.uniform(-b, b));
        M(r, j) = half ? round_half(v) : v;
      }
  }
}

}  // namespace

Layer init_layer(const Config& c, std::uint64_t seed, std::uint64_t layer_id) {
  const int d = c.d_model, di = c.d_inner(), H = c.nheads(), cd = c.conv_dim(), K = c.d_conv;
  Layer L;
  L.norm_w = VecF::Ones(d);
  L.in_proj.resize(c.d_in_proj(), d);
  fill_blocks(L.in_proj, 1.0 / std::sqrt(static_cast<double>(d)), false, true, seed, 1, layer_id, 1);
  MatF conv(cd, K + 1);  // weight columns, then the bias (fan_in = K for both)
  fill_blocks(conv, 1.0 / std::sqrt(static_cast<double>(K)), false, true, seed, 1, layer_id, 2);
  L.conv_w = conv.leftCols(K);
  L.conv_b = conv.col(K);
  Rng rng(seed, {1, layer_id, 3});
  L.dt_bias.resize(H);
  for (int h = 0; h < H; ++h) {
    double dt = std::exp(rng.uniform(std::log(1e-3), std::log(1e-1)));
    dt = std::max(dt, 1e-4);
    L.dt_bias[h] = static_cast<float>(dt + std::log(-std::expm1(-dt)));
  }
  L.A_log.resize(H);
  for (int h = 0; h < H; ++h) L.A_log[h] = static_cast<float>(std::log(rng.uniform(1.0, 16.0)));
  L.D = VecF::Ones(H);
  L.mix_norm_w = VecF::Ones(di);
  L.out_proj.resize(d, di);
  fill_blocks(L.out_proj, 1.0 / std::sqrt(static_cast<double>(di)) / std::sqrt(static_cast<double>(c.n_layer)), false, true,
              seed, 1, layer_id, 4);
  return L;
}

Model init_model(const Config& cfg, std::uint64_t seed) {
  cfg.validate("model config");
  Model m;
  m.cfg = cfg;
  m.generated_by = fmt::format("tokdyn make-checkpoint --seed {} (reference initialisation, d_model {}, {} layers)", seed,
                               cfg.d_model, cfg.n_layer);
  m.source = "synthetic: " + m.generated_by;
  m.embedding.resize(cfg.vocab_padded(), cfg.d_model);
  fill_blocks(m.embedding, 0.02, true, true, seed, 0, 0, 0);
  m.layers.reserve(static_cast<std::size_t>(cfg.n_layer));
  for (int l = 0; l < cfg.n_layer; ++l) m.layers.push_back(init_layer(cfg, seed, static_cast<std::uint64_t>(l)));
  m.norm_f = VecF::Ones(cfg.d_model);
  return m;
}

// ---------------------------------------------------------------- engine

namespace {

inline bool par(long rows, long cols) { return rows_in_parallel(rows, cols); }

/// float(std::exp(x)), given y = a vectorised exp(x) (Eigen's, relative error ~3e-16): when every
/// value within 2^-40 (relative) of y rounds to the same float, so does libm's exp(x) (within an ulp
/// of the true value), and that float is returned; otherwise (about 1 in 50000) libm's exp(x)
/// itself. Either way the bits of float(std::exp(x)).
inline float exp_as_float(double y, double x) {
  const float lo = static_cast<float>(y * (1.0 - 0x1p-40));
  return lo == static_cast<float>(y * (1.0 + 0x1p-40)) ? lo : static_cast<float>(std::exp(x));
}

}  // namespace

// Rows processed in parallel only when there is real work (no thread team for tiny calls).
bool rows_in_parallel(long rows, long cols) { return rows * cols >= (1L << 15); }

Engine::Engine(const Config& cfg, Switches sw) : cfg_(cfg), sw_(sw) { cfg_.validate("model config"); }

double Engine::flops(int runs, int len) const {
  const double RT = static_cast<double>(runs) * len, d = cfg_.d_model, di = cfg_.d_inner();
  const double cols = sw_.gate ? cfg_.d_in_proj() : cfg_.d_in_proj() - di;
  const double T2 = static_cast<double>(len) * len;
  const double ssd = runs * (cfg_.ngroups * T2 * cfg_.d_state + cfg_.nheads() * T2 * cfg_.headdim);
  return 2.0 * (RT * d * cols + RT * di * d + ssd);
}

void Engine::mixer(const Layer& L, const MatF& X, int runs, int len, MatF& out, const MixerTaps& taps) {
  const int d = cfg_.d_model, di = cfg_.d_inner(), H = cfg_.nheads(), Pd = cfg_.headdim, N = cfg_.d_state,
            G = cfg_.ngroups, K = cfg_.d_conv, cd = cfg_.conv_dim();
  const long RT = static_cast<long>(runs) * len;
  if (X.rows() != RT || X.cols() != d) throw std::logic_error("mamba2::Engine::mixer: state has the wrong shape");
  const float eps = static_cast<float>(cfg_.eps);
  // Row-wise SiLU x / (1 + e^{-x}) with Eigen's vectorised exp.
  auto silu_inplace = [](auto seg) { seg = nn::silu(seg); };

  // Rows are taken kRowBlock at a time where their sums of squares are formed (several sequential
  // sums advance together: detail::row_sums_of_squares).
  constexpr long kRowBlock = 8;
  const long row_blocks = (RT + kRowBlock - 1) / kRowBlock;

  // 1. pre-norm: u = x / sqrt(mean(x^2) + eps) * w   (sum of squares in double)
  U_.resize(RT, d);
#pragma omp parallel for schedule(static) if (par(RT, d))
  for (long b = 0; b < row_blocks; ++b) {
    const long i0 = b * kRowBlock;
    const int nr = static_cast<int>(std::min(kRowBlock, RT - i0));
    parts::rms_norm_rows_f32(&X(i0, 0), X.outerStride(), static_cast<int>(d), nr, L.norm_w.data(), eps, &U_(i0, 0), U_.outerStride());
  }

  // 2. in_proj (the z rows are skipped when the gate is off: they would go unused). Fixed tiles,
  // each a single-threaded SGEMM (linalg.hpp): the same bits on any thread count.
  const int xoff = sw_.gate ? di : 0;
  if (sw_.gate) gemm_nt_blocked(U_, L.in_proj, P_);
  else gemm_nt_blocked(U_, L.in_proj.bottomRows(cfg_.d_in_proj() - di), P_);
  const int dtoff = xoff + cd;

  // 3. causal depthwise conv (left zero padding; tap K-1 is the current token) + SiLU;
  // 4. dt = softplus(dt_raw + dt_bias)   (one row: token i)
  convT_ = L.conv_w.transpose();  // K x cd: one contiguous row per tap
  XBC_.resize(RT, cd);
  dt_.resize(RT, H);
  Y_.resize(RT, di);
  auto conv_row = [&](long i) {
    const int t = static_cast<int>(i % len);
    auto o = XBC_.row(i).array();
    if (sw_.conv) {
      o = L.conv_b.transpose().array();
      for (int k = 0; k < K; ++k) {
        const int src = t - (K - 1) + k;
        if (src >= 0) o += convT_.row(k).array() * P_.row(i - t + src).segment(xoff, cd).array();
      }
    } else {
      o = P_.row(i).segment(xoff, cd).array();
    }
    if (sw_.silu_x) silu_inplace(XBC_.row(i).head(di).array());
    if (sw_.silu_bc) silu_inplace(XBC_.row(i).tail(cd - di).array());
    for (int h = 0; h < H; ++h) dt_(i, h) = nn::softplus_thresholded(P_(i, dtoff + h) + L.dt_bias[h]);
  };

  // 5. SSD, quadratic form per run and head (exact; the reference's in-chunk computation):
  //    M_h(t, s) = (C_t . B_s) exp(A_h (cum_t - cum_s)) dt_s for s <= t,  y_h = M_h x_h + D_h x_h.
  //    (one run: rows r*len .. r*len+len-1; needs those rows of XBC_ and dt_)
  const int hpg = H / G;
  using Strided = Eigen::Map<const MatF, 0, Eigen::OuterStride<>>;
  struct SsdWork {
    MatF CB, M;
    Eigen::ArrayXd cum, arg, ex;  // arg, ex: the exponents A (cum_t - cum_s) and their exp, s <= t, row by row
    Eigen::ArrayXf dts;
    explicit SsdWork(int len)
        : CB(len, len), M(len, len), cum(len), arg(static_cast<long>(len) * (len + 1) / 2),
          ex(static_cast<long>(len) * (len + 1) / 2), dts(len) {}
  };
  const bool causal_kernel = detail::causal_head_product_matches_eigen(Pd, len);
  auto ssd_run = [&](int r, SsdWork& w) {
    MatF &CB = w.CB, &M = w.M;
    Eigen::ArrayXd& cum = w.cum;
    Eigen::ArrayXf& dts = w.dts;
    const long r0 = static_cast<long>(r) * len;
    for (int g = 0; g < G; ++g) {
      const Strided B(&XBC_(r0, di + g * N), len, N, Eigen::OuterStride<>(cd));
      const Strided C(&XBC_(r0, di + G * N + g * N), len, N, Eigen::OuterStride<>(cd));
      CB.noalias() = C * B.transpose();
      if (taps.q && g == 0)
        for (int t = 0; t < len; ++t) taps.q[r0 + t] = CB(t, t);
      for (int h = g * hpg; h < (g + 1) * hpg; ++h) {
        const double A = -std::exp(static_cast<double>(L.A_log[h]));
        double acc = 0.0;
        for (int t = 0; t < len; ++t) {
          dts[t] = dt_(r0 + t, h);
          cum[t] = (acc += dts[t]);
        }
        // exp(A (cum_t - cum_s)) in double, rounded to float (vectorised, the same bits as std::exp)
        Eigen::ArrayXd &arg = w.arg, &ex = w.ex;
        for (long t = 0, k = 0; t < len; ++t)
          for (int s = 0; s <= t; ++s, ++k) arg[k] = A * (cum[t] - cum[s]);
        ex = arg.exp();
        for (long t = 0, k = 0; t < len; ++t) {
          float* m = &M(t, 0);
          const float* cb = &CB(t, 0);
          for (int s = 0; s <= t; ++s, ++k) m[s] = cb[s] * exp_as_float(ex[k], arg[k]) * dts[s];
          for (long s = t + 1; s < len; ++s) m[s] = 0.0f;
        }
        // y_h = M_h x_h (+ D_h x_h): the causal product, only the s <= t terms (register-blocked),
        // where it gives the Eigen product's bits (the released head size 64, up to 256 tokens)
        if (causal_kernel) {
          detail::causal_head_product(M.data(), len, &XBC_(r0, h * Pd), cd, Pd, &Y_(r0, h * Pd), di, sw_.d_skip, L.D[h]);
        } else {
          const Strided Xh(&XBC_(r0, h * Pd), len, Pd, Eigen::OuterStride<>(cd));
          Eigen::Map<MatF, 0, Eigen::OuterStride<>> Yh(&Y_(r0, h * Pd), len, Pd, Eigen::OuterStride<>(di));
          Yh.noalias() = M * Xh;
          if (sw_.d_skip) Yh += L.D[h] * Xh;
        }
        if (taps.mixing && !taps.heads.empty()) {
          const auto it = std::find(taps.heads.begin(), taps.heads.end(), h);
          if (it != taps.heads.end()) {
            const long hi = it - taps.heads.begin();
            float* dst = taps.mixing + (static_cast<long>(r) * static_cast<long>(taps.heads.size()) + hi) * len * len;
            Eigen::Map<MatF>(dst, len, len) = M;
          }
        }
      }
    }
  };

  // 6. gate before the norm: v = y * SiLU(z); grouped RMSNorm times w   (rows i0 .. i0+nr-1, nr <= kRowBlock)
  const int gs = di / G;
  auto gate_norm_rows = [&](long i0, int nr) {
    if (sw_.gate)
      for (long i = i0; i < i0 + nr; ++i) {
        const auto z = P_.row(i).head(di).array();
        Y_.row(i).array() *= nn::silu(z);
      }
    if (sw_.mixer_norm)
      for (int g = 0; g < G; ++g)
        parts::rms_norm_rows_f32(&Y_(i0, g * gs), Y_.outerStride(), gs, nr, L.mix_norm_w.data() + g * gs, eps, &Y_(i0, g * gs),
                                 Y_.outerStride());
  };

  // Steps 3-6 run by run (a run's rows stay in cache from the conv to the gated norm, one thread
  // team) when there are enough runs to share; otherwise step by step, the row loops over rows.
  // Every row and run is computed by the same code either way: the bits do not depend on it.
  const bool by_run = runs >= 4 * omp_get_max_threads() && par(RT, static_cast<long>(di) * len);
  if (by_run) {
#pragma omp parallel
    {
      SsdWork w(len);
#pragma omp for schedule(dynamic, 1)
      for (int r = 0; r < runs; ++r) {
        const long r0 = static_cast<long>(r) * len;
        for (long i = r0; i < r0 + len; ++i) conv_row(i);
        ssd_run(r, w);
        for (long i = r0; i < r0 + len; i += kRowBlock)
          gate_norm_rows(i, static_cast<int>(std::min(kRowBlock, r0 + len - i)));
      }
    }
  } else {
#pragma omp parallel for schedule(static) if (par(RT, cd * K))
    for (long i = 0; i < RT; ++i) conv_row(i);
#pragma omp parallel if (par(RT, static_cast<long>(di) * len))
    {
      SsdWork w(len);
#pragma omp for schedule(static)
      for (int r = 0; r < runs; ++r) ssd_run(r, w);
    }
#pragma omp parallel for schedule(static) if (par(RT, di))
    for (long b = 0; b < row_blocks; ++b)
      gate_norm_rows(b * kRowBlock, static_cast<int>(std::min(kRowBlock, RT - b * kRowBlock)));
  }

  // 7. out_proj (fixed tiles, as in_proj)
  gemm_nt_blocked(Y_, L.out_proj, out);
}

// ---------------------------------------------------------------- depth

std::vector<std::int64_t> draw_token_ids(std::uint64_t vocab, int runs, int len, std::uint64_t seed) {
  return decoder::draw_token_ids(vocab, runs, len, seed);  // one definition of the id streams for every model
}

MatF embed(const Model& m, const std::vector<std::int64_t>& ids, Update update) {
  MatF X(static_cast<Eigen::Index>(ids.size()), m.cfg.d_model);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= m.embedding.rows())
      throw std::invalid_argument(fmt::format("token id {}: expected an id in [0, {})", ids[i], m.embedding.rows()));
    X.row(static_cast<Eigen::Index>(i)) = m.embedding.row(ids[i]);
    if (update == Update::Sphere) {
      const double n = X.row(static_cast<Eigen::Index>(i)).cast<double>().norm();
      if (n == 0.0) throw std::invalid_argument(fmt::format("token id {}: its embedding row is zero; cannot place it on the sphere", ids[i]));
      X.row(static_cast<Eigen::Index>(i)) = (X.row(static_cast<Eigen::Index>(i)).cast<double>() / n).cast<float>();
    }
  }
  return X;
}

std::vector<std::shared_ptr<const Layer>> share_layers(Model& m) {
  std::vector<std::shared_ptr<const Layer>> out;
  out.reserve(m.layers.size());
  for (Layer& L : m.layers) out.push_back(std::make_shared<const Layer>(std::move(L)));
  m.layers.clear();
  return out;
}

std::shared_ptr<const LayerSchedule> cycle_layers(const Model& m) {
  std::vector<std::shared_ptr<const Layer>> v;
  for (const Layer& L : m.layers) v.push_back(std::make_shared<const Layer>(L));
  return std::make_shared<const ListSchedule<Layer>>(std::move(v));
}

std::shared_ptr<const LayerSchedule> random_layers(const Config& cfg, std::uint64_t seed) {
  return std::make_shared<const OnDemandSchedule<Layer>>(
      [cfg, seed](long k) { return init_layer(cfg, seed, 1000000ULL + static_cast<std::uint64_t>(k)); });
}

BlockMap::BlockMap(Config cfg, Switches sw, std::shared_ptr<const LayerSchedule> layers, Update update, float tau)
    : cfg_(std::move(cfg)), sw_(sw), layers_(std::move(layers)), update_(update), tau_(tau) {
  cfg_.validate("mamba2::BlockMap");
  if (!layers_) throw std::invalid_argument("mamba2::BlockMap: no layer schedule");
  eng_ = std::make_unique<Engine>(cfg_, sw_);
}
BlockMap::~BlockMap() = default;
BlockMap::BlockMap(BlockMap&&) noexcept = default;

double BlockMap::flops(int runs, int len) const { return eng_->flops(runs, len); }

void BlockMap::apply_float(long k, BatchF& Z) const {
  const std::shared_ptr<const Layer> L = layers_->at_layer(k);
  const long RT = static_cast<long>(Z.runs) * Z.len;
  if (Z.Z.rows() != RT || Z.Z.cols() != cfg_.d_model) throw std::logic_error("mamba2::BlockMap: the state has the wrong shape");
  MixerTaps taps;
  bool want_q = false;
  TapObserver* mixer_watcher = nullptr;
  for (TapObserver* w : watchers_) {
    want_q = want_q || w->wants("q", k);
    if (!w->wants("mixing", k)) continue;
    std::vector<int> heads = w->heads("mixing", k);
    if (heads.empty()) continue;
    if (mixer_watcher) throw std::logic_error("mamba2::BlockMap: two observers want mixing matrices at the same layer");
    mixer_watcher = w;
    taps.heads = std::move(heads);
  }
  if (want_q) {
    q_.resize(static_cast<std::size_t>(RT));
    taps.q = q_.data();
  }
  if (mixer_watcher) {
    mix_.assign(static_cast<std::size_t>(Z.runs) * taps.heads.size() * static_cast<std::size_t>(Z.len) * static_cast<std::size_t>(Z.len), 0.0f);
    taps.mixing = mix_.data();
  }
  eng_->mixer(*L, Z.Z, Z.runs, Z.len, out_, taps);
  const auto runs = static_cast<std::size_t>(Z.runs), len = static_cast<std::size_t>(Z.len);
  if (want_q)
    for (TapObserver* w : watchers_)
      if (w->wants("q", k)) w->tap("q", k, q_.data(), {runs, len});
  if (mixer_watcher) mixer_watcher->tap("mixing", k, mix_.data(), {runs, taps.heads.size(), len, len});
  MatF& S = Z.Z;
  if (update_ == Update::Residual) {
    // Row by row on the thread team (each entry is one float addition: the same bits either way).
#pragma omp parallel for schedule(static) if (rows_in_parallel(RT, cfg_.d_model))
    for (long i = 0; i < RT; ++i) S.row(i) += out_.row(i);
  } else {
#pragma omp parallel for schedule(static) if (rows_in_parallel(RT, cfg_.d_model))
    for (long i = 0; i < RT; ++i) {
      double ss = 0.0;
      for (int j = 0; j < cfg_.d_model; ++j) {
        const float y = S(i, j) + tau_ * out_(i, j);
        S(i, j) = y;
        ss += static_cast<double>(y) * y;
      }
      const float inv = static_cast<float>(1.0 / std::sqrt(ss));
      for (int j = 0; j < cfg_.d_model; ++j) S(i, j) *= inv;
    }
  }
}

void BlockMap::apply(long k, Batch& Z) const {
  BatchF F{Z.Z.cast<float>(), Z.runs, Z.len};
  apply_float(k, F);
  Z.Z = F.Z.cast<double>();
}

}  // namespace tokdyn::mamba2
