// The Transformer block of the coupling paper (§2, eqs. (1)-(5)) with its exact forward-mode JVP.
// See include/tokdyn/models/transformer/transformer.hpp for the equations and conventions.
#include "tokdyn/models/transformer/transformer.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <fmt/format.h>
#include <limits>
#include <stdexcept>
#include <utility>

#include "tokdyn/models/parts/parts.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/core/nn.hpp"
#include "tokdyn/core/parallel.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn::tf {

namespace {


template <class E>
E pick(const std::string& what, const std::string& s, std::initializer_list<std::pair<const char*, E>> opts) {
  std::string all;
  for (const auto& [n, e] : opts) {
    if (s == n) return e;
    all += (all.empty() ? "" : " | ") + std::string(n);
  }
  throw std::invalid_argument(fmt::format("{}: expected {}, got '{}'", what, all, s));
}

parts::NormKind norm_kind(Norm n) { return n == Norm::Layer ? parts::NormKind::LayerNorm : parts::NormKind::RMSNorm; }

// The shared parts' activation of each of the block's activations.
parts::Act act_of(Activation a) {
  switch (a) {
    case Activation::GeluExact: return parts::Act::Gelu;
    case Activation::GeluTanh: return parts::Act::GeluTanh;
    case Activation::Silu: return parts::Act::Silu;
    case Activation::Tanh: return parts::Act::Tanh;
    case Activation::Relu: return parts::Act::Relu;
  }
  return parts::Act::Gelu;
}

// Row-wise tangent of the norm: dZ = DS(X)[dX] (parts::norm_tangent_rows, §2.2 formulas). dX may
// stack several tangents of the same state: its row i is taken at the state row i mod X.rows().
void norm_tangent(const Config& c, const Vec& g, const Eigen::Ref<const Mat>& X, const Eigen::Ref<const Mat>& dX,
                  Eigen::Ref<Mat> dZ) {
  if (c.norm == Norm::None) {
    dZ = dX;
    return;
  }
  const Mat Xm = X, dXm = dX;
  Mat N(Xm.rows(), Xm.cols()), dY(dXm.rows(), dXm.cols());
  std::vector<double> inv(static_cast<std::size_t>(Xm.rows()));
  parts::norm_rows<double>(norm_kind(c.norm), Xm, g, Vec(), c.eps, N, 0, Xm.rows(), inv.data());
  parts::norm_tangent_rows(norm_kind(c.norm), Xm, inv.data(), g, dXm, dY, 0, dXm.rows());
  dZ = dY;
}

}  // namespace

Norm parse_norm(const std::string& s) {
  return pick<Norm>("norm", s, {{"rms", Norm::RMS}, {"layer", Norm::Layer}, {"none", Norm::None}});
}
Placement parse_placement(const std::string& s) {
  return pick<Placement>("placement", s, {{"pre", Placement::PreLN}, {"post", Placement::PostLN}});
}
Activation parse_activation(const std::string& s) {
  return pick<Activation>("activation", s,
                          {{"gelu", Activation::GeluExact}, {"gelu-tanh", Activation::GeluTanh}, {"silu", Activation::Silu},
                           {"tanh", Activation::Tanh}, {"relu", Activation::Relu}});
}
Mask parse_mask(const std::string& s) {
  return pick<Mask>("mask", s,
                    {{"causal", Mask::Causal}, {"bidirectional", Mask::Bidirectional}, {"block", Mask::BlockLocal},
                     {"sliding", Mask::Sliding}, {"leaky", Mask::Leaky}});
}
Positional parse_positional(const std::string& s) {
  return pick<Positional>("positional", s, {{"none", Positional::None}, {"rope", Positional::Rope}, {"alibi", Positional::Alibi}});
}
Tying parse_tying(const std::string& s) {
  return pick<Tying>("tying", s, {{"untied", Tying::Untied}, {"tied", Tying::Tied}, {"looped", Tying::Looped}});
}

void Config::validate() const {
  auto bad = [](const std::string& m) { throw std::invalid_argument("transformer: " + m); };
  if (d < 1) bad(fmt::format("d: expected >= 1, got {}", d));
  if (d_ff < 1) bad(fmt::format("d_ff: expected >= 1, got {}", d_ff));
  if (!(eps >= 0.0) || !std::isfinite(eps)) bad(fmt::format("eps: expected a finite value >= 0, got {}", eps));
  if (!(temperature >= 0.0) || !std::isfinite(temperature))
    bad(fmt::format("temperature: expected a finite value > 0 (0 = sqrt(d)), got {}", temperature));
  if (block < 1) bad(fmt::format("block length P: expected >= 1, got {}", block));
  if (window < 1) bad(fmt::format("window w: expected >= 1, got {}", window));
  if (!(eps_leak > 0.0 && eps_leak <= 1.0)) bad(fmt::format("eps_leak: expected a value in (0, 1], got {}", eps_leak));
  if (heads < 1 || d % heads != 0) bad(fmt::format("heads: expected a divisor of d = {}, got {}", d, heads));
  if (pos == Positional::Rope && (d / std::max(heads, 1)) % 2 != 0)
    bad(fmt::format("RoPE needs an even head size d/heads, got d = {}, heads = {}", d, heads));
  if (!(rope_base > 1.0) || !std::isfinite(rope_base)) bad(fmt::format("rope_base: expected a finite value > 1, got {}", rope_base));
  if (!(alibi_slope >= 0.0) || !std::isfinite(alibi_slope))
    bad(fmt::format("alibi_slope: expected a finite value >= 0, got {}", alibi_slope));
}

double Config::tau() const { return temperature > 0.0 ? temperature : std::sqrt(static_cast<double>(d / heads)); }

std::vector<std::string> Config::warnings() const {
  std::vector<std::string> w;
  if (phi == Activation::Relu)
    w.push_back("activation relu is not C^1: assumption (A3) of the paper fails; its Jacobian uses phi'(0) = 0");
  if (norm != Norm::None && eps == 0.0)
    w.push_back("eps = 0: the norm is singular at x = 0 (RMSNorm) or on span(1) (LayerNorm)");
  return w;
}

void LayerWeights::check(const Config& c, const std::string& what) const {
  auto shape = [&](const Mat& M, Eigen::Index r, Eigen::Index k, const char* n) {
    if (M.rows() != r || M.cols() != k)
      throw std::invalid_argument(fmt::format("{}: {} has shape [{}, {}], expected [{}, {}]", what, n, M.rows(), M.cols(), r, k));
    if (!M.allFinite()) throw std::invalid_argument(fmt::format("{}: {} has a non-finite entry", what, n));
  };
  auto vshape = [&](const Vec& v, Eigen::Index r, const char* n) {
    if (v.size() != r) throw std::invalid_argument(fmt::format("{}: {} has length {}, expected {}", what, n, v.size(), r));
    if (!v.allFinite()) throw std::invalid_argument(fmt::format("{}: {} has a non-finite entry", what, n));
  };
  shape(W_Q, c.d, c.d, "W_Q");
  shape(W_K, c.d, c.d, "W_K");
  shape(W_V, c.d, c.d, "W_V");
  shape(W_1, c.d_ff, c.d, "W_1");
  shape(W_2, c.d, c.d_ff, "W_2");
  vshape(b_1, c.d_ff, "b_1");
  vshape(b_2, c.d, "b_2");
  vshape(g_attn, c.d, "g_attn");
  vshape(beta_attn, c.d, "beta_attn");
  vshape(g_mlp, c.d, "g_mlp");
  vshape(beta_mlp, c.d, "beta_mlp");
}

LayerWeights random_weights(const Config& c, int r, double sigma_w, double sigma_b, std::uint64_t seed) {
  if (!(sigma_w >= 0.0) || !std::isfinite(sigma_w)) throw std::invalid_argument(fmt::format("sigma_w: expected >= 0, got {}", sigma_w));
  if (!(sigma_b >= 0.0) || !std::isfinite(sigma_b)) throw std::invalid_argument(fmt::format("sigma_b: expected >= 0, got {}", sigma_b));
  LayerWeights W;
  const auto ur = static_cast<std::uint64_t>(r);
  auto mat = [&](Mat& M, int rows, int cols, std::uint64_t id) {
    M.resize(rows, cols);
    Rng(seed, {ur, id}).fill_normal(M, sigma_w / std::sqrt(static_cast<double>(cols)));
  };
  mat(W.W_Q, c.d, c.d, 1);
  mat(W.W_K, c.d, c.d, 2);
  mat(W.W_V, c.d, c.d, 3);
  mat(W.W_1, c.d_ff, c.d, 4);
  mat(W.W_2, c.d, c.d_ff, 5);
  W.b_1.resize(c.d_ff);
  W.b_2.resize(c.d);
  Rng(seed, {ur, 6}).fill_normal(W.b_1, sigma_b);
  Rng(seed, {ur, 7}).fill_normal(W.b_2, sigma_b);
  W.g_attn = Vec::Ones(c.d);
  W.g_mlp = Vec::Ones(c.d);
  W.beta_attn = Vec::Zero(c.d);
  W.beta_mlp = Vec::Zero(c.d);
  return W;
}

double activation(Activation a, double z) { return parts::act_value<double>(act_of(a), z); }

double activation_derivative(Activation a, double z) { return parts::act_derivative<double>(act_of(a), z); }

double activation_lipschitz(Activation a) {
  // sup |phi'| (§2.2): GELU exact phi'(sqrt 2) = Phi(sqrt 2) + sqrt 2 phi_N(sqrt 2) = 1.12837...;
  // the others were maximised on a fine grid (GELU-tanh 1.1295 at z ~ 1.47, SiLU 1.0998 at z ~ 2.40).
  switch (a) {
    case Activation::GeluExact: return activation_derivative(a, std::sqrt(2.0));
    case Activation::GeluTanh: {
      double best = 0.0;
      for (double z = 1.0; z < 2.0; z += 1e-5) best = std::max(best, std::abs(activation_derivative(a, z)));
      return best;
    }
    case Activation::Silu: {
      double best = 0.0;
      for (double z = 2.0; z < 3.0; z += 1e-5) best = std::max(best, std::abs(activation_derivative(a, z)));
      return best;
    }
    case Activation::Tanh: return 1.0;
    case Activation::Relu: return 1.0;
  }
  return 1.0;
}

Mat score_bias(const Config& c, int T) {
  parts::MaskSpec m;
  switch (c.mask) {
    case Mask::Causal: m.kind = parts::MaskKind::Causal; break;
    case Mask::Bidirectional: m.kind = parts::MaskKind::Bidirectional; break;
    case Mask::BlockLocal: m.kind = parts::MaskKind::Block; break;
    case Mask::Sliding: m.kind = parts::MaskKind::Sliding; break;
    case Mask::Leaky: m.kind = parts::MaskKind::Leaky; break;
  }
  m.block = c.block;
  m.window = c.window;
  m.eps_leak = c.eps_leak;
  if (c.pos == Positional::Alibi) m.alibi_slope = c.alibi_slope;
  return parts::score_bias(m, T);
}

void apply_norm(const Config& c, const Vec& g, const Vec& beta, const Eigen::Ref<const Mat>& X, Mat& Z) {
  Z.resize(X.rows(), X.cols());
  if (c.norm == Norm::None) {
    Z = X;
    return;
  }
  const Mat Xm = X;
  parts::norm_rows<double>(norm_kind(c.norm), Xm, g, c.norm == Norm::Layer ? beta : Vec(), c.eps, Z, 0, Xm.rows());
}

Mat norm_jacobian(const Config& c, const Vec& g, const Vec& x) {
  const Eigen::Index n = x.size();
  const double d = static_cast<double>(n);
  if (c.norm == Norm::None) return Mat::Identity(n, n);
  Vec xc = x;
  Mat P = Mat::Identity(n, n);
  if (c.norm == Norm::Layer) {
    xc.array() -= x.mean();
    P.array() -= 1.0 / d;
  }
  const double r = nn::rms_inverse(xc, c.eps);  // 1/sigma
  // RMS: diag(g)(I r - x x^T r^3/d); LN: diag(g) r (I - 11^T/d - x~x~^T r^2/d) (§2.2).
  Mat D = P * r - xc * xc.transpose() * (r * r * r / d);
  return g.asDiagonal() * D;
}

// ---------------------------------------------------------------------------------------------

struct Transformer::Cache {
  Mat X, A_in, Q, K, Vv, alpha, R1, Xh, M_in, H, Y;
};

Transformer::Transformer(Config c, std::vector<LayerWeights> weights, Tying tying)
    : cfg_(c), w_(std::move(weights)), tying_(tying) {
  cfg_.validate();
  if (w_.empty()) throw std::invalid_argument("transformer: expected at least one set of layer weights, got none");
  for (std::size_t i = 0; i < w_.size(); ++i) w_[i].check(cfg_, fmt::format("transformer weights {}", i));
}

const LayerWeights& Transformer::weights(long k) const {
  if (k < 1) throw std::out_of_range(fmt::format("transformer: layer index k = {} < 1", k));
  const auto n = static_cast<long>(w_.size());
  switch (tying_) {
    case Tying::Tied: return w_[0];
    case Tying::Looped: return w_[static_cast<std::size_t>((k - 1) % n)];
    case Tying::Untied:
      // Stepping past the depth the model was built for is a bad argument (the caller's 'depth'), not a bug.
      if (k > n)
        throw std::invalid_argument(fmt::format("layer {}: the model was built with untied weights for depth = {} layers; expected "
                                                "a layer in 1..{} (build it with a larger 'depth', or tying=tied / looped)",
                                                k, n, n));
      return w_[static_cast<std::size_t>(k - 1)];
  }
  return w_[0];
}

void Transformer::forward_run(const LayerWeights& W, const Mat& B, const Eigen::Ref<const Mat>& X, Mat& out,
                              Cache* cache) const {
  const bool pre = cfg_.placement == Placement::PreLN;
  const Eigen::Index T = X.rows();
  Cache local;
  Cache& c = cache ? *cache : local;
  c.X = X;
  if (pre) apply_norm(cfg_, W.g_attn, W.beta_attn, X, c.A_in);
  else c.A_in = X;
  c.Q.noalias() = c.A_in * W.W_Q.transpose();
  c.K.noalias() = c.A_in * W.W_K.transpose();
  c.Vv.noalias() = c.A_in * W.W_V.transpose();
  const int H = cfg_.heads, dh = cfg_.d / H;
  if (cfg_.pos == Positional::Rope) {  // interleaved planes (2l, 2l+1) of each head, angle omega_l t
    const parts::RotaryTable R(rope::standard_frequencies(dh, cfg_.rope_base), static_cast<int>(T), true);
    parts::rotary_rows<double>(R, c.Q, 0, H, dh, static_cast<int>(T), 0, T);
    parts::rotary_rows<double>(R, c.K, 0, H, dh, static_cast<int>(T), 0, T);
  }
  c.alpha.resize(T, static_cast<Eigen::Index>(H) * T);
  c.R1 = X;
  for (int h = 0; h < H; ++h) {
    const Mat U = c.Q.middleCols(h * dh, dh) * c.K.middleCols(h * dh, dh).transpose() / cfg_.tau() + B;
    auto a = c.alpha.middleCols(static_cast<Eigen::Index>(h) * T, T);
    for (Eigen::Index t = 0; t < T; ++t) nn::masked_softmax_row(U.row(t), a.row(t));
    c.R1.middleCols(h * dh, dh).noalias() += a * c.Vv.middleCols(h * dh, dh);  // eq. (4): x + sum_s alpha_ts v_s
  }
  if (pre) {
    c.Xh = c.R1;
    apply_norm(cfg_, W.g_mlp, W.beta_mlp, c.Xh, c.M_in);
  } else {
    apply_norm(cfg_, W.g_attn, W.beta_attn, c.R1, c.Xh);
    c.M_in = c.Xh;
  }
  c.H.noalias() = c.M_in * W.W_1.transpose();
  c.H.rowwise() += W.b_1.transpose();
  Mat act = c.H.unaryExpr([this](double z) { return activation(cfg_.phi, z); });
  c.Y.noalias() = act * W.W_2.transpose();
  c.Y.rowwise() += W.b_2.transpose();
  c.Y += c.Xh;   // eq. (4), second line
  if (pre) out = c.Y;
  else apply_norm(cfg_, W.g_mlp, W.beta_mlp, c.Y, out);
}

void Transformer::tangent_run(const LayerWeights& W, const Cache& c, const Eigen::Ref<const Mat>& dX, Mat& dout) const {
  // dX stacks g tangents (g T rows) at the one state of the cache: the projections and the MLP are
  // one product for all g, the softmax tangent is per tangent.
  const bool pre = cfg_.placement == Placement::PreLN;
  const Eigen::Index T = c.X.rows(), g = dX.rows() / T;
  Mat dA(dX.rows(), dX.cols());
  if (pre) norm_tangent(cfg_, W.g_attn, c.X, dX, dA);
  else dA = dX;
  Mat dQ = dA * W.W_Q.transpose(), dK = dA * W.W_K.transpose(), dV = dA * W.W_V.transpose();
  const int H = cfg_.heads, dh = cfg_.d / H;
  if (cfg_.pos == Positional::Rope) {  // the rotation is linear: the tangent is rotated alike (row i at position i mod T)
    const parts::RotaryTable R(rope::standard_frequencies(dh, cfg_.rope_base), static_cast<int>(T), true);
    parts::rotary_rows<double>(R, dQ, 0, H, dh, static_cast<int>(T), 0, dQ.rows());
    parts::rotary_rows<double>(R, dK, 0, H, dh, static_cast<int>(T), 0, dK.rows());
  }
  // Softmax tangent per head (parts::softmax_tangent_rows): d alpha_t = alpha_t ⊙ (du_t - <alpha_t, du_t>)
  // with du = (dQ K^T + Q dK^T) / tau; (Q dK_r^T) is the transpose of the block r of dK Q^T.
  Mat dR1 = dX;
  Mat dAl(dX.rows(), T);
  for (int h = 0; h < H; ++h) {
    const auto a = c.alpha.middleCols(static_cast<Eigen::Index>(h) * T, T);
    const Mat dU1 = dQ.middleCols(h * dh, dh) * c.K.middleCols(h * dh, dh).transpose();
    const Mat dU2 = dK.middleCols(h * dh, dh) * c.Q.middleCols(h * dh, dh).transpose();
    for (Eigen::Index r = 0; r < g; ++r) {
      auto blk = dAl.middleRows(r * T, T);
      blk = dU1.middleRows(r * T, T) + dU2.middleRows(r * T, T).transpose();
      parts::softmax_tangent_rows(a, blk, 1.0 / cfg_.tau(), false);
      dR1.block(r * T, h * dh, T, dh).noalias() += a * dV.block(r * T, h * dh, T, dh);
    }
    dR1.middleCols(h * dh, dh).noalias() += dAl * c.Vv.middleCols(h * dh, dh);
  }
  Mat dXh(dX.rows(), dX.cols()), dM(dX.rows(), dX.cols());
  if (pre) {
    dXh = dR1;
    norm_tangent(cfg_, W.g_mlp, c.Xh, dXh, dM);
  } else {
    norm_tangent(cfg_, W.g_attn, c.R1, dR1, dXh);
    dM = dXh;
  }
  Mat dH = dM * W.W_1.transpose();
  const Mat dphi = c.H.unaryExpr([this](double z) { return activation_derivative(cfg_.phi, z); });
  for (Eigen::Index r = 0; r < g; ++r) dH.middleRows(r * T, T).array() *= dphi.array();
  Mat dY = dH * W.W_2.transpose() + dXh;
  if (pre) dout = dY;
  else {
    dout.resize(dY.rows(), dY.cols());
    norm_tangent(cfg_, W.g_mlp, c.Y, dY, dout);
  }
}

void Transformer::apply(long k, Batch& Z) const {
  const LayerWeights& W = weights(k);
  if (Z.dim() != cfg_.d) throw std::invalid_argument(fmt::format("transformer: token dimension {}, expected d = {}", Z.dim(), cfg_.d));
  bool want_attention = false;
  for (TapObserver* w : watchers_) want_attention = want_attention || w->wants("attention", k);
  if (want_attention) {  // the tap "attention" of the state entering layer k: [runs, heads, T, T]
    const std::vector<Mat> A = attention_heads(k, Z);  // per run T x (H T), head h in columns [h T, (h+1) T)
    const std::size_t T = static_cast<std::size_t>(Z.len), H = A.empty() ? 0 : static_cast<std::size_t>(A.front().cols()) / T;
    std::vector<double> packed;
    packed.reserve(A.size() * H * T * T);
    for (const Mat& a : A)
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t t = 0; t < T; ++t)
          for (std::size_t s = 0; s < T; ++s)
            packed.push_back(a(static_cast<Eigen::Index>(t), static_cast<Eigen::Index>(h * T + s)));
    for (TapObserver* w : watchers_)
      if (w->wants("attention", k)) w->tap("attention", k, packed.data(), {A.size(), H, T, T});
  }
  const Mat B = score_bias(cfg_, Z.len);
  Tokens add;
  if (inject_) {
    add = Tokens::Zero(Z.Z.rows(), Z.Z.cols());
    inject_(k, Z, add);
  }
  bool want_mid = false;
  for (TapObserver* w : watchers_) want_mid = want_mid || w->wants("residual_mid", k);
  const std::size_t run_size = static_cast<std::size_t>(Z.len) * static_cast<std::size_t>(cfg_.d);
  std::vector<double> mid(want_mid ? static_cast<std::size_t>(Z.runs) * run_size : 0);
  ParallelErrors errors;
  // Threads only where a run is big enough to pay for the parallel region.
  const bool par = static_cast<double>(Z.runs) * Z.len * Z.dim() * (Z.len + cfg_.d_ff) > 2e5 && Z.runs > 1;
#pragma omp parallel for schedule(static) if (par)
  for (int r = 0; r < Z.runs; ++r) try {
      Mat out;
      Cache c;
      forward_run(W, B, Z.run(r), out, want_mid ? &c : nullptr);
      if (want_mid)  // row-major [tokens, d] of run r
        for (Eigen::Index t = 0; t < c.Xh.rows(); ++t)
          for (Eigen::Index j = 0; j < c.Xh.cols(); ++j)
            mid[static_cast<std::size_t>(r) * run_size + static_cast<std::size_t>(t * c.Xh.cols() + j)] = c.Xh(t, j);
      Z.run(r) = out;
    } catch (...) {
      errors.capture();
    }
  errors.rethrow();
  if (want_mid)
    for (TapObserver* w : watchers_)
      if (w->wants("residual_mid", k))
        w->tap("residual_mid", k, mid.data(),
               {static_cast<std::size_t>(Z.runs), static_cast<std::size_t>(Z.len), static_cast<std::size_t>(cfg_.d)});
  if (inject_) Z.Z += add;
}

void Transformer::step_update(long k, const Batch& Z, Tokens& N) const {
  Batch Y = Z;
  apply(k, Y);
  N = Y.Z - Z.Z;
}

void Transformer::jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const {
  const LayerWeights& W = weights(k);
  if (V.rows() != Z.Z.rows() || V.cols() != Z.Z.cols())
    throw std::invalid_argument(fmt::format("transformer jvp: tangent of shape [{}, {}], expected [{}, {}]", V.rows(), V.cols(),
                                            Z.Z.rows(), Z.Z.cols()));
  const Mat B = score_bias(cfg_, Z.len);
  out.resize(V.rows(), V.cols());
  ParallelErrors errors;
  // Chunks fixed by the data alone (never by the thread count): consecutive runs with the same state
  // (k tangents of one state batched as k runs), at most kChunk per chunk, share one forward pass and
  // one set of products; chunks are spread over the threads.
  constexpr int kChunk = 32;
  std::vector<std::pair<int, int>> chunks;  // (first run, count)
  for (int r = 0; r < Z.runs; ++r) {
    if (!chunks.empty() && chunks.back().second < kChunk && Z.run(r) == Z.run(chunks.back().first)) ++chunks.back().second;
    else chunks.emplace_back(r, 1);
  }
  const int nc = static_cast<int>(chunks.size());
  const bool par = static_cast<double>(Z.runs) * Z.len * Z.dim() * (Z.len + cfg_.d_ff) > 1e5 && nc > 1;
#pragma omp parallel for schedule(static) if (par)
  for (int i = 0; i < nc; ++i) try {
      const auto [r0, n] = chunks[static_cast<std::size_t>(i)];
      Cache c;
      Mat y, dy;
      forward_run(W, B, Z.run(r0), y, &c);
      const Eigen::Index rows = static_cast<Eigen::Index>(n) * Z.len, at = static_cast<Eigen::Index>(r0) * Z.len;
      tangent_run(W, c, V.middleRows(at, rows), dy);
      out.middleRows(at, rows) = dy;
    } catch (...) {
      errors.capture();
    }
  errors.rethrow();
}

std::vector<Mat> Transformer::attention(long k, const Batch& Z) const {
  std::vector<Mat> out = attention_heads(k, Z);
  const Eigen::Index T = Z.len;
  for (Mat& a : out) {
    Mat m = Mat::Zero(T, T);
    for (int h = 0; h < cfg_.heads; ++h) m += a.middleCols(static_cast<Eigen::Index>(h) * T, T);
    a = cfg_.heads == 1 ? Mat(a) : Mat(m / cfg_.heads);
  }
  return out;
}

std::vector<Mat> Transformer::attention_heads(long k, const Batch& Z) const {
  const LayerWeights& W = weights(k);
  const Mat B = score_bias(cfg_, Z.len);
  std::vector<Mat> out(static_cast<std::size_t>(Z.runs));
  for (int r = 0; r < Z.runs; ++r) {
    Cache c;
    Mat y;
    forward_run(W, B, Z.run(r), y, &c);
    out[static_cast<std::size_t>(r)] = c.alpha;
  }
  return out;
}

Vec Transformer::reduced_map(long k, const Vec& x) const {
  // Lemma 2: on H every row of alpha averages identical values, so the common token follows the
  // block on a single token (T = 1: alpha = 1 for every mask and positional scheme).
  const LayerWeights& W = weights(k);
  Mat X = x.transpose(), out;
  forward_run(W, Mat::Zero(1, 1), X, out, nullptr);
  return out.row(0).transpose();
}

}  // namespace tokdyn::tf
