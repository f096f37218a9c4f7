// The hierarchical model (C1)-(C2), eq. (11) of the coupling paper: see models/hierarchical/hierarchical.hpp.
#include "tokdyn/models/hierarchical/hierarchical.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/norms.hpp"

namespace tokdyn::hier {
namespace {

template <class E>
E pick(const std::string& what, const std::string& s, std::initializer_list<std::pair<const char*, E>> table) {
  std::string names;
  for (const auto& [n, v] : table) {
    if (s == n) return v;
    names += names.empty() ? n : std::string(", ") + n;
  }
  throw std::invalid_argument(fmt::format("{} '{}': expected one of {}", what, s, names));
}

// One level of a linear compression on the rows of X (groups of g rows, the last one possibly shorter).
Mat level(PiKind k, const Mat& X, int g) {
  const Eigen::Index n = X.rows(), groups = (n + g - 1) / g;
  Mat Y(groups, X.cols());
  for (Eigen::Index i = 0; i < groups; ++i) {
    const Eigen::Index a = i * g, len = std::min<Eigen::Index>(g, n - a);
    switch (k) {
      case PiKind::Mean: Y.row(i) = X.middleRows(a, len).colwise().mean(); break;
      case PiKind::Stride: Y.row(i) = X.row(a + len - 1); break;
      case PiKind::Head: Y.row(i) = X.row(a); break;
      default: throw std::logic_error("compression level: not a linear level kind");
    }
  }
  return Y;
}

// The rows the top-k selector picks (the k largest norms, ties to the earlier row), sorted.
std::vector<Eigen::Index> topk_rows(const Eigen::Ref<const Mat>& block, int k) {
  std::vector<Eigen::Index> idx(static_cast<std::size_t>(block.rows()));
  std::iota(idx.begin(), idx.end(), Eigen::Index{0});
  const Eigen::VectorXd nrm = block.rowwise().norm();
  std::stable_sort(idx.begin(), idx.end(), [&](Eigen::Index a, Eigen::Index b) { return nrm(a) > nrm(b); });
  idx.resize(std::min<std::size_t>(idx.size(), static_cast<std::size_t>(k)));
  std::sort(idx.begin(), idx.end());
  return idx;
}

// Pi applied to rows D, with the top-k selection taken at `block`.
Vec compress_at(const Compression& c, const Eigen::Ref<const Mat>& block, const Eigen::Ref<const Mat>& D) {
  switch (c.kind) {
    case PiKind::Mean: return D.colwise().mean().transpose();
    case PiKind::Stride: return D.row(D.rows() - 1).transpose();
    case PiKind::Head: return D.row(0).transpose();
    case PiKind::TopK: {
      const auto rows = topk_rows(block, c.topk);
      Vec s = Vec::Zero(D.cols());
      for (Eigen::Index r : rows) s += D.row(r).transpose();
      return s / static_cast<double>(rows.size());
    }
    case PiKind::Multi: {
      Mat Y = D;
      for (std::size_t j = 0; j < c.levels.size(); ++j) Y = level(c.level_kinds[j], Y, c.levels[j]);
      if (Y.rows() != 1) throw std::logic_error("multi-level compression: more than one summary left");
      return Y.row(0).transpose();
    }
  }
  throw std::logic_error("compression: unknown kind");
}

}  // namespace

PiKind parse_pi(const std::string& s) {
  return pick<PiKind>("compression", s,
                      {{"mean", PiKind::Mean}, {"stride", PiKind::Stride}, {"head", PiKind::Head}, {"topk", PiKind::TopK}, {"multi", PiKind::Multi}});
}
PsiKind parse_psi(const std::string& s) {
  return pick<PsiKind>("injection", s,
                       {{"identity", PsiKind::Identity}, {"linear", PsiKind::Linear}, {"affine", PsiKind::Affine}, {"tanh-mlp", PsiKind::TanhMlp}});
}
Refresh parse_refresh(const std::string& s) {
  return pick<Refresh>("refresh", s, {{"hold", Refresh::SampleHold}, {"relax", Refresh::Relaxation}});
}
Pooled parse_pooled(const std::string& s) { return pick<Pooled>("pooled", s, {{"raw", Pooled::Raw}, {"normalised", Pooled::Normalised}}); }
Loop parse_loop(const std::string& s) { return pick<Loop>("loop", s, {{"chain", Loop::Chain}, {"self", Loop::SelfLoop}}); }
Site parse_site(const std::string& s) { return pick<Site>("injection site", s, {{"additive", Site::Additive}, {"inside", Site::InsideNorm}}); }
std::string pi_name(PiKind k) {
  switch (k) {
    case PiKind::Mean: return "mean";
    case PiKind::Stride: return "stride";
    case PiKind::Head: return "head";
    case PiKind::TopK: return "topk";
    case PiKind::Multi: return "multi";
  }
  return "?";
}

void Compression::validate(int P, int T) const {
  if (kind == PiKind::TopK && topk < 1) throw std::invalid_argument(fmt::format("compression topk = {}: expected >= 1", topk));
  if (kind != PiKind::Multi) return;
  if (levels.empty() || levels.size() != level_kinds.size())
    throw std::invalid_argument(fmt::format("multi-level compression: {} level sizes and {} level kinds, expected as many (>= 1)",
                                            levels.size(), level_kinds.size()));
  long prod = 1;
  for (int g : levels) {
    if (g < 1) throw std::invalid_argument(fmt::format("multi-level compression: level size {}, expected >= 1", g));
    prod *= g;
    if (prod > 1'000'000) break;
  }
  if (prod != P)
    throw std::invalid_argument(fmt::format("multi-level compression: the level sizes multiply to {}, expected the block length P = {}", prod, P));
  if (T % P)
    throw std::invalid_argument(fmt::format("multi-level compression: T = {} is not a multiple of P = {} (the levels must divide every block)", T, P));
  for (PiKind k : level_kinds)
    if (k != PiKind::Mean && k != PiKind::Stride && k != PiKind::Head)
      throw std::invalid_argument(fmt::format("multi-level compression: level kind {}, expected mean, stride or head", pi_name(k)));
}

Vec compress(const Compression& c, const Eigen::Ref<const Mat>& block) { return compress_at(c, block, block); }

Vec compress_tangent(const Compression& c, const Eigen::Ref<const Mat>& block, const Eigen::Ref<const Mat>& dblock) {
  return compress_at(c, block, dblock);
}

Mat compression_matrix(const Compression& c, const Eigen::Ref<const Mat>& block) {
  const Eigen::Index n = block.rows(), d = block.cols();
  Mat Pm(d, n * d);
  Mat E = Mat::Zero(n, d);
  for (Eigen::Index t = 0; t < n; ++t)
    for (Eigen::Index i = 0; i < d; ++i) {
      E(t, i) = 1.0;
      Pm.col(t * d + i) = compress_at(c, block, E);
      E(t, i) = 0.0;
    }
  return Pm;
}

void Injection::validate(int d) const {
  auto need = [&](const Mat& M, Eigen::Index r, Eigen::Index cols, const char* name) {
    if (M.rows() != r || M.cols() != cols)
      throw std::invalid_argument(fmt::format("injection psi: {} of shape [{}, {}], expected [{}, {}] (d = {})", name, M.rows(), M.cols(), r, cols, d));
    if (!M.allFinite()) throw std::invalid_argument(fmt::format("injection psi: {} has a non-finite entry", name));
  };
  auto needv = [&](const Vec& v, Eigen::Index n, const char* name) {
    if (v.size() != n) throw std::invalid_argument(fmt::format("injection psi: {} of size {}, expected {} (d = {})", name, v.size(), n, d));
    if (!v.allFinite()) throw std::invalid_argument(fmt::format("injection psi: {} has a non-finite entry", name));
  };
  switch (kind) {
    case PsiKind::Identity: break;
    case PsiKind::Linear: need(B, d, d, "B"); break;
    case PsiKind::Affine: need(B, d, d, "B"); needv(c, d, "c"); break;
    case PsiKind::TanhMlp:
      if (W1.rows() < 1) throw std::invalid_argument("injection psi: tanh-MLP W_1 has no rows (hidden width >= 1 expected)");
      need(W1, W1.rows(), d, "W_1");
      needv(b1, W1.rows(), "b_1");
      need(W2, d, W1.rows(), "W_2");
      needv(c, d, "c");
      break;
  }
}

Vec Injection::operator()(const Vec& u) const {
  switch (kind) {
    case PsiKind::Identity: return u;
    case PsiKind::Linear: return B * u;
    case PsiKind::Affine: return c + B * u;
    case PsiKind::TanhMlp: return c + W2 * (W1 * u + b1).array().tanh().matrix();
  }
  return u;
}

Mat Injection::jacobian(const Vec& u) const {
  switch (kind) {
    case PsiKind::Identity: return Mat::Identity(u.size(), u.size());
    case PsiKind::Linear:
    case PsiKind::Affine: return B;
    case PsiKind::TanhMlp: {
      const Vec th = (W1 * u + b1).array().tanh().matrix();
      const Vec dt = (1.0 - th.array().square()).matrix();
      return W2 * dt.asDiagonal() * W1;
    }
  }
  return Mat();
}

double Injection::lipschitz() const {
  switch (kind) {
    case PsiKind::Identity: return 1.0;
    case PsiKind::Linear:
    case PsiKind::Affine: return spectral_norm(B);
    case PsiKind::TanhMlp: return spectral_norm(W2) * spectral_norm(W1);
  }
  return 0.0;
}

Injection make_injection(PsiKind kind, int d, int hidden, double scale, std::uint64_t seed) {
  Injection f;
  f.kind = kind;
  auto gauss = [&](Eigen::Index r, Eigen::Index c, std::uint64_t tag, double s) {
    Mat M(r, c);
    Rng(seed, {0x5103, tag}).fill_normal(M, s);
    return M;
  };
  auto gaussv = [&](Eigen::Index n, std::uint64_t tag, double s) {
    Vec v(n);
    Rng(seed, {0x5103, tag}).fill_normal(v, s);
    return v;
  };
  const double sd = scale / std::sqrt(static_cast<double>(d));
  switch (kind) {
    case PsiKind::Identity: break;
    case PsiKind::Linear: f.B = gauss(d, d, 1, sd); break;
    case PsiKind::Affine:
      f.B = gauss(d, d, 1, sd);
      f.c = gaussv(d, 2, sd);
      break;
    case PsiKind::TanhMlp:
      if (hidden < 1) throw std::invalid_argument(fmt::format("injection psi: tanh-MLP hidden width {}, expected >= 1", hidden));
      f.W1 = gauss(hidden, d, 3, sd);
      f.b1 = gaussv(hidden, 4, sd);
      f.W2 = gauss(d, hidden, 5, scale / std::sqrt(static_cast<double>(hidden)));
      f.c = gaussv(d, 2, sd);
      break;
  }
  return f;
}

// ------------------------------------------------------------------------------------------------

namespace {
// The injection the Transformer's hook adds during HierarchicalModel::apply (set on the calling
// thread only for the duration of that call: Transformer::apply calls its hook on the calling thread).
thread_local const Mat* t_injection = nullptr;
}  // namespace

HierarchicalModel::HierarchicalModel(tf::Transformer model, SlowPath slow, int T) : tf_(std::move(model)), s_(std::move(slow)), T_(T) {
  const tf::Config& c = tf_.config();
  if (T < 1) throw std::invalid_argument(fmt::format("hierarchical model: T = {}, expected >= 1", T));
  if (c.mask != tf::Mask::BlockLocal)
    throw std::invalid_argument("hierarchical model: the slow path (C2) needs the block-local mask (C1), got another mask");
  if (s_.P < 1 || s_.P > T)
    throw std::invalid_argument(fmt::format("hierarchical model: block length P = {}, expected 1 <= P <= T = {}", s_.P, T));
  if (c.block != s_.P)
    throw std::invalid_argument(fmt::format("hierarchical model: the mask's block length {} differs from the slow path's P = {}", c.block, s_.P));
  if (!std::isfinite(s_.rho)) throw std::invalid_argument("hierarchical model: rho is not finite");
  if (s_.L_r < 0) throw std::invalid_argument(fmt::format("hierarchical model: L_r = {}, expected >= 0 (0: infinity)", s_.L_r));
  s_.pi.validate(s_.P, T);
  s_.psi.validate(c.d);
  if (s_.y0.size() == 0) s_.y0 = Vec::Zero(c.d);
  if (s_.y0.size() != c.d || !s_.y0.allFinite())
    throw std::invalid_argument(fmt::format("hierarchical model: y0 of size {}, expected d = {} finite entries", s_.y0.size(), c.d));
  if (s_.site == Site::InsideNorm && c.placement != tf::Placement::PreLN)
    throw std::invalid_argument("hierarchical model: the inside-S injection site is defined for Pre-LN blocks only");
  K_ = (T + s_.P - 1) / s_.P;
  unit_ = c;
  tf_.set_injection([](long, const Batch& in, Tokens& add) {
    if (!t_injection) return;  // a call of the Transformer outside HierarchicalModel::apply: no slow path
    if (t_injection->rows() != in.Z.rows()) throw std::logic_error("hierarchical injection: shape mismatch");
    add = *t_injection;
  });
}

Mat HierarchicalModel::pooled_rows(const Eigen::Ref<const Mat>& X) const {
  if (s_.pooled == Pooled::Raw) return X;
  const Vec ones = Vec::Ones(X.cols()), zero = Vec::Zero(X.cols());
  Mat Z;
  tf::apply_norm(unit_, ones, zero, X, Z);
  return Z;
}

Mat HierarchicalModel::pooled_tangent(const Eigen::Ref<const Mat>& X, const Eigen::Ref<const Mat>& dX) const {
  if (s_.pooled == Pooled::Raw) return dX;
  const Vec ones = Vec::Ones(X.cols());
  Mat dZ(dX.rows(), dX.cols());
  for (Eigen::Index t = 0; t < X.rows(); ++t)
    dZ.row(t) = (tf::norm_jacobian(unit_, ones, X.row(t).transpose()) * dX.row(t).transpose()).transpose();
  return dZ;
}

Mat HierarchicalModel::pool(const Eigen::Ref<const Mat>& X) const {
  const Mat Zp = pooled_rows(X);
  Mat Y(K_, X.cols());
  for (int b = 0; b < K_; ++b) {
    const int a = b * s_.P, n = std::min(s_.P, T_ - a);
    Y.row(b) = compress(s_.pi, Zp.middleRows(a, n)).transpose();
  }
  return Y;
}

bool HierarchicalModel::refreshes(long k) const {
  if (s_.refresh != Refresh::SampleHold) return false;
  const long l = k - 1;
  return s_.L_r == 0 ? l == 0 : l % s_.L_r == 0;
}

Mat HierarchicalModel::held(long k, const Eigen::Ref<const Mat>& run) const {
  if (refreshes(k)) return pool(run.topRows(T_));
  return run.bottomRows(K_);
}

Mat HierarchicalModel::injection_from(const Mat& yhat) const {
  const int d = static_cast<int>(yhat.cols());
  Mat add(T_, d);
  for (int b = 0; b < K_; ++b) {
    Vec src;
    if (s_.loop == Loop::SelfLoop) src = yhat.row(b).transpose();
    else src = b == 0 ? s_.y0 : Vec(yhat.row(b - 1).transpose());
    const RowVec v = (s_.rho * s_.psi(src)).transpose();
    const int a = b * s_.P, n = std::min(s_.P, T_ - a);
    for (int t = a; t < a + n; ++t) add.row(t) = v;  // (C2): the same vector for every token of block b
  }
  return add;
}

Mat HierarchicalModel::injection(long k, const Eigen::Ref<const Mat>& run) const { return injection_from(held(k, run)); }

Batch HierarchicalModel::initial_state(const Mat& X, int runs) const {
  if (runs < 1 || X.rows() != static_cast<Eigen::Index>(runs) * T_ || X.cols() != tf_.config().d)
    throw std::invalid_argument(fmt::format("hierarchical model: initial tokens of shape [{}, {}], expected [{} x {}, {}]", X.rows(), X.cols(),
                                            runs, T_, tf_.config().d));
  Batch Z;
  Z.runs = runs;
  Z.len = rows();
  Z.Z.resize(static_cast<Eigen::Index>(runs) * rows(), X.cols());
  for (int r = 0; r < runs; ++r) {
    const auto x = X.middleRows(static_cast<Eigen::Index>(r) * T_, T_);
    Z.run(r).topRows(T_) = x;
    Z.run(r).bottomRows(K_) = pool(x);
  }
  return Z;
}

Mat HierarchicalModel::token_rows(const Batch& Z) const {
  Mat X(static_cast<Eigen::Index>(Z.runs) * T_, Z.Z.cols());
  for (int r = 0; r < Z.runs; ++r) X.middleRows(static_cast<Eigen::Index>(r) * T_, T_) = Z.run(r).topRows(T_);
  return X;
}

Mat HierarchicalModel::summary_rows(const Batch& Z) const {
  Mat Y(static_cast<Eigen::Index>(Z.runs) * K_, Z.Z.cols());
  for (int r = 0; r < Z.runs; ++r) Y.middleRows(static_cast<Eigen::Index>(r) * K_, K_) = Z.run(r).bottomRows(K_);
  return Y;
}

Batch HierarchicalModel::tokens_batch(const Batch& Z) const {
  if (Z.len != rows() || Z.dim() != tf_.config().d)
    throw std::invalid_argument(fmt::format("hierarchical model: state of {} rows per run and dimension {}, expected T + K = {} rows and d = {}",
                                            Z.len, Z.dim(), rows(), tf_.config().d));
  Batch X;
  X.runs = Z.runs;
  X.len = T_;
  X.Z = token_rows(Z);
  return X;
}

void HierarchicalModel::apply(long k, Batch& Z) const {
  Batch X = tokens_batch(Z);
  Mat add(X.Z.rows(), X.Z.cols()), Ynew(static_cast<Eigen::Index>(Z.runs) * K_, X.Z.cols());
  const double eps = s_.L_r == 0 ? 0.0 : 1.0 / s_.L_r;
  for (int r = 0; r < Z.runs; ++r) {
    const Mat y = held(k, Z.run(r));
    add.middleRows(static_cast<Eigen::Index>(r) * T_, T_) = injection_from(y);
    // Sample-and-hold keeps what the layer read; the relaxation takes one Euler step of (12).
    Ynew.middleRows(static_cast<Eigen::Index>(r) * K_, K_) =
        s_.refresh == Refresh::SampleHold ? y : Mat(y + eps * (pool(Z.run(r).topRows(T_)) - y));
  }
  if (s_.site == Site::InsideNorm) {
    X.Z += add;  // F(x; a) = F~(x + a) - a: the plain block (no additive term) at the shifted state
    tf_.apply(k, X);
    X.Z -= add;
  } else {
    struct Guard {
      explicit Guard(const Mat* m) { t_injection = m; }
      ~Guard() { t_injection = nullptr; }
    } guard(&add);
    tf_.apply(k, X);
  }
  for (int r = 0; r < Z.runs; ++r) {
    Z.run(r).topRows(T_) = X.run(r);
    Z.run(r).bottomRows(K_) = Ynew.middleRows(static_cast<Eigen::Index>(r) * K_, K_);
  }
}

void HierarchicalModel::jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const {
  Batch X = tokens_batch(Z);
  if (V.rows() != Z.Z.rows() || V.cols() != Z.Z.cols())
    throw std::invalid_argument(fmt::format("hierarchical jvp: tangent of shape [{}, {}], expected [{}, {}]", V.rows(), V.cols(), Z.Z.rows(),
                                            Z.Z.cols()));
  const double eps = s_.L_r == 0 ? 0.0 : 1.0 / s_.L_r;
  const bool refresh = refreshes(k);
  const Eigen::Index n = X.Z.rows();
  Mat dX(n, X.Z.cols()), da(n, X.Z.cols()), add(n, X.Z.cols());
  std::vector<Mat> dys(static_cast<std::size_t>(Z.runs));
  for (int r = 0; r < Z.runs; ++r) {
    const auto run = Z.run(r);
    const auto x = run.topRows(T_);
    const auto dx = V.middleRows(static_cast<Eigen::Index>(r) * rows(), T_);
    const auto dyst = V.middleRows(static_cast<Eigen::Index>(r) * rows() + T_, K_);
    dX.middleRows(static_cast<Eigen::Index>(r) * T_, T_) = dx;
    // d(pooled summaries) = DPi(pooled(x)) [Dpooled(x) dx], block by block.
    Mat dpool(K_, x.cols());
    if (refresh || s_.refresh == Refresh::Relaxation) {
      const Mat zp = pooled_rows(x), dz = pooled_tangent(x, dx);
      for (int b = 0; b < K_; ++b) {
        const int a = b * s_.P, len = std::min(s_.P, T_ - a);
        dpool.row(b) = compress_tangent(s_.pi, zp.middleRows(a, len), dz.middleRows(a, len)).transpose();
      }
    }
    const Mat y = held(k, run);
    const Mat dy = refresh ? dpool : Mat(dyst);
    add.middleRows(static_cast<Eigen::Index>(r) * T_, T_) = injection_from(y);
    // da: the injection's tangent rho Dpsi(ŷ_src) dŷ_src, constant within each block.
    auto dab = da.middleRows(static_cast<Eigen::Index>(r) * T_, T_);
    dab.setZero();
    for (int b = 0; b < K_; ++b) {
      const int src = s_.loop == Loop::SelfLoop ? b : b - 1;
      if (src < 0) continue;  // block 1 reads the fixed ŷ_0
      const RowVec v = (s_.rho * (s_.psi.jacobian(y.row(src).transpose()) * dy.row(src).transpose())).transpose();
      const int a = b * s_.P, len = std::min(s_.P, T_ - a);
      for (int t = a; t < a + len; ++t) dab.row(t) = v;
    }
    dys[static_cast<std::size_t>(r)] = s_.refresh == Refresh::SampleHold ? dy : Mat((1.0 - eps) * dyst + eps * dpool);
  }
  Tokens dF;
  if (s_.site == Site::InsideNorm) {
    X.Z += add;  // DF~(x + a)[dx + da] - da
    tf_.jvp(k, X, dX + da, dF);
    dF -= da;
  } else {
    tf_.jvp(k, X, dX, dF);  // the block's tangent (the additive injection is state-independent for the Transformer)
    dF += da;
  }
  out.resize(V.rows(), V.cols());
  for (int r = 0; r < Z.runs; ++r) {
    out.middleRows(static_cast<Eigen::Index>(r) * rows(), T_) = dF.middleRows(static_cast<Eigen::Index>(r) * T_, T_);
    out.middleRows(static_cast<Eigen::Index>(r) * rows() + T_, K_) = dys[static_cast<std::size_t>(r)];
  }
}

}  // namespace tokdyn::hier
