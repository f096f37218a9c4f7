#include "tokdyn/models/rope/attention.hpp"

#include "tokdyn/models/parts/parts.hpp"

#include <stdexcept>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/linalg.hpp"
#include "tokdyn/core/nn.hpp"
#include "tokdyn/core/sphere.hpp"

namespace tokdyn::rope {

namespace {

/// One row of the attention matrix (7) over its unmasked entries: a = softmax(beta s) with the row
/// maximum subtracted (exact for beta -> infinity, no overflow). `a` may be `s` itself.
template <class In, class Out>
void softmax_row(double beta, const In& s, Out&& a) {
  nn::scaled_softmax_row(beta, s, std::forward<Out>(a));
}

[[noreturn]] void attention_bad(const std::string& what, const std::string& msg) {
  throw std::invalid_argument(one_line(fmt::format("{}: {}", what, msg)));
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

void check_matrix(const Mat& M, const char* name, int d, const std::string& what) {
  if (M.size() == 0) return;
  if (M.rows() != d || M.cols() != d)
    attention_bad(what, fmt::format("{} is {} x {}; expected {} x {} (or empty for the identity)", name, M.rows(), M.cols(), d, d));
  if (!M.allFinite()) attention_bad(what, fmt::format("{} has non-finite entries; expected finite numbers", name));
}

// Work above which the softmax rows of one run are split over OpenMP threads, and above which the
// runs of a batch are (each run then single-threaded). Counted in n^2 dh per head.
constexpr double kRowParallelWork = 1 << 16;
constexpr double kRunParallelWork = 1 << 15;

}  // namespace

std::vector<double> standard_frequencies(int d, double base, int offset) {
  if (d < 2 || d % 2 != 0) attention_bad("standard_frequencies", fmt::format("d = {}; expected an even d >= 2", d));
  if (!(base > 0.0) || !std::isfinite(base))
    attention_bad("standard_frequencies", fmt::format("base = {}; expected a finite base > 0", base));
  std::vector<double> w(static_cast<std::size_t>(d / 2));
  for (int l = 0; l < d / 2; ++l) w[static_cast<std::size_t>(l)] = std::pow(base, -2.0 * (l + offset) / d);
  return w;
}

// a_{beta,n} = e^{-2 beta} / (n - 1 + e^{-2 beta}): the RoPE paper's softmax floor, eq. (7).
double softmax_floor(double beta, int n) {
  if (n < 2) attention_bad("softmax_floor", fmt::format("n = {}; expected n >= 2 tokens", n));
  if (!(beta >= 0.0) || !std::isfinite(beta))
    attention_bad("softmax_floor", fmt::format("beta = {}; expected a finite beta >= 0", beta));
  const double e = std::exp(-2.0 * beta);
  return e / (static_cast<double>(n - 1) + e);
}

void AttentionParams::validate(int n, const std::string& what) const {
  if (d < 1) attention_bad(what, fmt::format("d = {}; expected a token dimension d >= 1", d));
  if (heads < 1) attention_bad(what, fmt::format("heads = {}; expected heads >= 1", heads));
  if (d % heads != 0) attention_bad(what, fmt::format("heads = {} does not divide d = {}; expected a divisor of d", heads, d));
  const int dh = d / heads;
  if (rope && d % 2 != 0) attention_bad(what, fmt::format("d = {} is odd; expected an even d with RoPE (rope = true)", d));
  if (rope && dh % 2 != 0)
    attention_bad(what, fmt::format("head size d/heads = {} is odd; expected an even head size with RoPE", dh));
  if (n < 2) attention_bad(what, fmt::format("n = {}; expected n >= 2 tokens", n));
  if (!(beta >= 0.0) || !std::isfinite(beta)) attention_bad(what, fmt::format("beta = {}; expected a finite beta >= 0", beta));
  if (!positions.empty() && static_cast<int>(positions.size()) != n)
    attention_bad(what, fmt::format("positions has {} entries; expected n = {} (or none for 0..n-1)", positions.size(), n));
  if (!all_finite(positions)) attention_bad(what, "positions has non-finite entries; expected finite positions");
  if (rope && !freqs.empty() && static_cast<int>(freqs.size()) != d / 2 && static_cast<int>(freqs.size()) != dh / 2)
    attention_bad(what, fmt::format("freqs has {} entries; expected d/2 = {} (every plane) or d/(2 heads) = {} (per head), or none",
                          freqs.size(), d / 2, dh / 2));
  if (!all_finite(freqs)) attention_bad(what, "freqs has non-finite entries; expected finite frequencies");
  check_matrix(Q, "Q", d, what);
  check_matrix(K, "K", d, what);
  check_matrix(V, "V", d, what);
}

std::vector<double> AttentionParams::plane_frequencies() const {
  if (!rope) return {};
  const int dh = head_dim();
  std::vector<double> base = freqs;
  if (base.empty()) base = standard_frequencies(dh);
  std::vector<double> w(static_cast<std::size_t>(d / 2));
  for (int g = 0; g < d / 2; ++g)
    w[static_cast<std::size_t>(g)] =
        static_cast<int>(base.size()) == d / 2 ? base[static_cast<std::size_t>(g)] : base[static_cast<std::size_t>(g % (dh / 2))];
  return w;
}

namespace detail {

struct Resolved {
  int n = 0, d = 0, dh = 0, heads = 1;
  double beta = 0.0;
  bool rope = true, causal = false, symmetric = true;
  Mat Q, K, V;  // empty = identity
  parts::RotaryTable rot;  // the rotation of token i by its position p_i, planes (2g, 2g+1) (empty without RoPE)
};

}  // namespace detail

using detail::Resolved;

namespace {

Resolved resolve(const AttentionParams& P, int n, const std::string& what) {
  P.validate(n, what);
  Resolved R;
  R.n = n;
  R.d = P.d;
  R.heads = P.heads;
  R.dh = P.d / P.heads;
  R.beta = P.beta;
  R.rope = P.rope;
  R.causal = P.causal;
  R.Q = P.Q;
  R.K = P.K;
  R.V = P.V;
  // Scores are symmetric by construction when queries and keys use the same map.
  R.symmetric = (P.Q.size() == 0 && P.K.size() == 0) || (P.Q.size() != 0 && P.K.size() != 0 && P.Q == P.K);
  if (P.rope) {
    std::vector<double> pos(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) pos[static_cast<std::size_t>(i)] = P.position(i);
    R.rot = parts::RotaryTable(P.plane_frequencies(), pos, true);
  }
  return R;
}

/// M_i <- R_{p_i} M_i in place (planes (2g, 2g+1), counter-clockwise; parts::rotary_rows with one
/// "head" of all d dimensions: the planes' frequencies span d/2 planes).
void rotate_rows(const Resolved& R, Tokens& M) {
  if (R.rope) parts::rotary_rows<double>(R.rot, M, 0, 1, R.d, R.n, 0, M.rows());
}

/// S <- its upper triangle mirrored (exact symmetry), in cache-friendly tiles.
void mirror_upper(Mat& S) {
  constexpr Eigen::Index B = 64;
  const Eigen::Index n = S.rows();
  for (Eigen::Index ib = 0; ib < n; ib += B)
    for (Eigen::Index jb = 0; jb <= ib; jb += B)
      for (Eigen::Index i = ib; i < std::min(ib + B, n); ++i)
        for (Eigen::Index j = jb; j < std::min({jb + B, n, i}); ++j) S(i, j) = S(j, i);
}

struct Work {
  Tokens q, k, ut, yh;  // rotated queries, keys (n x d); values transposed (d x n); one head's output
  Mat S;                // one head's scores, then its attention (n x n)
  RowVec kt0, kt1;      // key coordinates of a 2-dimensional head (direct loops)
};

/// Attention output Y (n x d) of one run X; optionally A and the scores (heads*n x n).
/// inner_par: split the rows of each head over OpenMP threads when the work is large.
void attend(const Resolved& R, const Eigen::Ref<const Tokens>& X, Tokens& Y, Work& w, bool inner_par, Mat* Aout,
            Mat* Sout) {
  const int n = R.n, d = R.d, dh = R.dh;
  Y.resize(n, d);
  const bool par = inner_par && static_cast<double>(n) * n * std::max(dh, 2) >= kRowParallelWork;
  // Queries and keys: Q x_i, K x_j (identity when empty), then rotated.
  if (R.Q.size() != 0) gemm_nt_blocked(X, R.Q, w.q, par);
  else w.q = X;
  rotate_rows(R, w.q);
  const bool shared_keys = R.Q.size() == 0 && R.K.size() == 0;
  if (!shared_keys) {
    if (R.K.size() != 0) gemm_nt_blocked(X, R.K, w.k, par);
    else w.k = X;
    rotate_rows(R, w.k);
  }
  const Tokens& keys = shared_keys ? w.q : w.k;
  // Values, transposed: (X V^T)^T = V X^T (d x n).
  if (R.V.size() != 0) gemm_nt_blocked(R.V, X, w.ut, par);
  else w.ut = X.transpose();

  for (int h = 0; h < R.heads; ++h) {
    const Eigen::Index c0 = static_cast<Eigen::Index>(h) * dh;
    Mat& S = w.S;
    if (dh == 2) {
      // Direct loops: s_ij = q_i0 k_j0 + q_i1 k_j1 (exactly symmetric when q = k).
      w.kt0 = keys.col(c0).transpose();
      w.kt1 = keys.col(c0 + 1).transpose();
      S.resize(n, n);
#pragma omp parallel for schedule(static) if (par)
      for (int i = 0; i < n; ++i)
        S.row(i).array() = w.q(i, c0) * w.kt0.array() + w.q(i, c0 + 1) * w.kt1.array();
    } else {
      gemm_nt_blocked(w.q.middleCols(c0, dh), keys.middleCols(c0, dh), S, par, R.symmetric ? GemmPart::Upper : GemmPart::Full);
      if (R.symmetric) mirror_upper(S);
    }
    if (Sout) Sout->middleRows(static_cast<Eigen::Index>(h) * n, n) = S;
    // Row softmax with the row maximum subtracted; masked entries exactly 0. For a head of size
    // <= 2 the output rows are formed here too (dot products over the unmasked entries).
#pragma omp parallel for schedule(static) if (par)
    for (int i = 0; i < n; ++i) {
      const Eigen::Index len = R.causal ? i + 1 : n;
      auto row = S.row(i).head(len);
      softmax_row(R.beta, row, row);
      if (len < n) S.row(i).tail(n - len).setZero();
      if (dh <= 2)
        for (int c = 0; c < dh; ++c) Y(i, c0 + c) = row.dot(w.ut.row(c0 + c).head(len));
    }
    if (Aout) Aout->middleRows(static_cast<Eigen::Index>(h) * n, n) = S;
    if (dh > 2) {
      gemm_nt_blocked(S, w.ut.middleRows(c0, dh), w.yh, par);  // A U_h: GEMM for large n d
      Y.middleCols(c0, dh) = w.yh;
    }
  }
}

void check_batch(const Batch& Z, int n, int d, const char* who) {
  if (Z.len != n || Z.dim() != d || Z.runs < 1 || Z.Z.rows() != static_cast<Eigen::Index>(Z.runs) * Z.len)
    throw std::invalid_argument(fmt::format("{}: batch of {} runs x {} tokens x {} coordinates ({} rows); expected {} tokens of "
                                 "dimension {} per run",
                                 who, Z.runs, Z.len, Z.dim(), Z.Z.rows(), n, d));
}

/// Calls body(r, Y) with Y = the attention output of run r, for every run: in parallel over runs
/// when there are several and the work is large, else run by run with row-parallel heads.
template <class Body>
void for_each_run(const Resolved& R, const Batch& Z, Body&& body) {
  const double work = static_cast<double>(R.n) * R.n * std::max(R.dh, 2) * R.heads;
  const bool par_runs = Z.runs > 1 && work * Z.runs >= kRunParallelWork;
  if (par_runs) {
#pragma omp parallel
    {
      Work w;
      Tokens Y;
#pragma omp for schedule(static)
      for (int r = 0; r < Z.runs; ++r) {
        attend(R, Z.run(r), Y, w, false, nullptr, nullptr);
        body(r, Y);
      }
    }
  } else {
    Work w;
    Tokens Y;
    for (int r = 0; r < Z.runs; ++r) {
      attend(R, Z.run(r), Y, w, true, nullptr, nullptr);
      body(r, Y);
    }
  }
}

/// Attention output Y of one run X and its exact tangent dY along dX (per head; masked entries
/// 0). Plain Eigen products: a tangent needs no bit-exactness with attend().
void attend_tangent(const Resolved& R, const Eigen::Ref<const Tokens>& X, const Eigen::Ref<const Tokens>& dX, Tokens& Y,
                    Tokens& dY) {
  const int n = R.n, d = R.d, dh = R.dh;
  auto lin = [](const Mat& M, const Eigen::Ref<const Tokens>& A) { return M.size() != 0 ? Tokens(A * M.transpose()) : Tokens(A); };
  Tokens q = lin(R.Q, X), dq = lin(R.Q, dX), k = lin(R.K, X), dk = lin(R.K, dX);
  rotate_rows(R, q);
  rotate_rows(R, dq);
  rotate_rows(R, k);
  rotate_rows(R, dk);
  const Tokens u = lin(R.V, X), du = lin(R.V, dX);
  Y.resize(n, d);
  dY.resize(n, d);
  Mat S, dS, A(n, n), dA(n, n);
  for (int h = 0; h < R.heads; ++h) {
    const Eigen::Index c0 = static_cast<Eigen::Index>(h) * dh;
    S.noalias() = q.middleCols(c0, dh) * k.middleCols(c0, dh).transpose();
    dS.noalias() = dq.middleCols(c0, dh) * k.middleCols(c0, dh).transpose();
    dS.noalias() += q.middleCols(c0, dh) * dk.middleCols(c0, dh).transpose();
    A.setZero();
    for (int i = 0; i < n; ++i) {
      const Eigen::Index len = R.causal ? i + 1 : n;
      auto a = A.row(i).head(len);
      softmax_row(R.beta, S.row(i).head(len), a);
    }
    dA = dS;
    parts::softmax_tangent_rows(A, dA, R.beta, R.causal);
    Y.middleCols(c0, dh).noalias() = A * u.middleCols(c0, dh);
    dY.middleCols(c0, dh).noalias() = dA * u.middleCols(c0, dh);
    dY.middleCols(c0, dh).noalias() += A * du.middleCols(c0, dh);
  }
}

/// M_i <- R_{p_i}^T M_i in place (the transpose of rotate_rows).
void rotate_rows_transpose(const Resolved& R, Tokens& M) {
  if (R.rope) parts::rotary_rows<double>(R.rot, M, 0, 1, R.d, R.n, 0, M.rows(), true);
}

/// Y = attention output of one run X, and Gx = (D Y(X))^T G (reverse mode of attend_tangent).
void attend_transpose(const Resolved& R, const Eigen::Ref<const Tokens>& X, const Tokens& G, Tokens& Y, Tokens& Gx) {
  const int n = R.n, d = R.d, dh = R.dh;
  auto lin = [](const Mat& M, const Eigen::Ref<const Tokens>& A) { return M.size() != 0 ? Tokens(A * M.transpose()) : Tokens(A); };
  Tokens q = lin(R.Q, X), k = lin(R.K, X);
  rotate_rows(R, q);
  rotate_rows(R, k);
  const Tokens u = lin(R.V, X);
  Y.resize(n, d);
  Tokens gq = Tokens::Zero(n, d), gk = Tokens::Zero(n, d), gu = Tokens::Zero(n, d);
  Mat S, A(n, n), gA, gS(n, n);
  for (int h = 0; h < R.heads; ++h) {
    const Eigen::Index c0 = static_cast<Eigen::Index>(h) * dh;
    S.noalias() = q.middleCols(c0, dh) * k.middleCols(c0, dh).transpose();
    A.setZero();
    for (int i = 0; i < n; ++i) {
      const Eigen::Index len = R.causal ? i + 1 : n;
      auto a = A.row(i).head(len);
      softmax_row(R.beta, S.row(i).head(len), a);
    }
    Y.middleCols(c0, dh).noalias() = A * u.middleCols(c0, dh);
    // y = A u: gA = G u^T, gu = A^T G; softmax rows: gS_ij = beta a_ij (gA_ij - sum_k a_ik gA_ik).
    gA.noalias() = G.middleCols(c0, dh) * u.middleCols(c0, dh).transpose();
    gu.middleCols(c0, dh).noalias() = A.transpose() * G.middleCols(c0, dh);
    gS = gA;  // the softmax row's Jacobian is symmetric: its reverse mode is its tangent
    parts::softmax_tangent_rows(A, gS, R.beta, R.causal);
    // S = q k^T: gq = gS k, gk = gS^T q.
    gq.middleCols(c0, dh).noalias() = gS * k.middleCols(c0, dh);
    gk.middleCols(c0, dh).noalias() = gS.transpose() * q.middleCols(c0, dh);
  }
  rotate_rows_transpose(R, gq);
  rotate_rows_transpose(R, gk);
  auto lin_t = [](const Mat& M, const Tokens& B) { return M.size() != 0 ? Tokens(B * M) : B; };
  Gx = lin_t(R.Q, gq) + lin_t(R.K, gk) + lin_t(R.V, gu);
}

void check_direction(const Batch& Z, const Tokens& V, const char* who) {
  if (V.rows() != Z.Z.rows() || V.cols() != Z.Z.cols())
    throw std::invalid_argument(fmt::format("{}: direction is {} x {}; expected the shape of the batch, {} x {}", who, V.rows(),
                                 V.cols(), Z.Z.rows(), Z.Z.cols()));
}

/// The forward-mode loop shared by the field's and the step's jvp: checks the batch and the
/// direction V, sizes out, and calls token(row, x, v, y, dy) for every token of every run, with
/// y = attention output and dy its tangent along V (attend_tangent), one run at a time.
template <class Token>
void for_each_token_tangent(const Resolved& R, int n, int d, const Batch& Z, const Tokens& V, Tokens& out,
                            const char* who, Token&& token) {
  check_batch(Z, n, d, who);
  check_direction(Z, V, who);
  out.resize(Z.Z.rows(), Z.Z.cols());
  Tokens Y, dY;
  for (int r = 0; r < Z.runs; ++r) {
    const Eigen::Index r0 = static_cast<Eigen::Index>(r) * n;
    attend_tangent(R, Z.run(r), V.middleRows(r0, n), Y, dY);
    for (int i = 0; i < n; ++i) token(r0 + i, Z.Z.row(r0 + i), V.row(r0 + i), Y.row(i), dY.row(i));
  }
}

}  // namespace

void rotate(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, Tokens& Y) {
  const int n = static_cast<int>(X.rows());
  const Resolved R = resolve(P, n, "rope::rotate");
  if (X.cols() != P.d) attention_bad("rope::rotate", fmt::format("tokens have {} coordinates; expected d = {}", X.cols(), P.d));
  Y = X;
  rotate_rows(R, Y);
}

void attention(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, Mat& A, Mat* scores) {
  const int n = static_cast<int>(X.rows());
  const Resolved R = resolve(P, n, "rope::attention");
  if (X.cols() != P.d) attention_bad("rope::attention", fmt::format("tokens have {} coordinates; expected d = {}", X.cols(), P.d));
  A.resize(static_cast<Eigen::Index>(R.heads) * n, n);
  if (scores) scores->resize(A.rows(), n);
  Work w;
  Tokens Y;
  attend(R, X, Y, w, true, &A, scores);
}

void attention_output(const AttentionParams& P, const Eigen::Ref<const Tokens>& X, Tokens& Y) {
  const int n = static_cast<int>(X.rows());
  const Resolved R = resolve(P, n, "rope::attention_output");
  if (X.cols() != P.d)
    attention_bad("rope::attention_output", fmt::format("tokens have {} coordinates; expected d = {}", X.cols(), P.d));
  Work w;
  attend(R, X, Y, w, true, nullptr, nullptr);
}

// ---- AttentionField ----

AttentionField::AttentionField(AttentionParams P, int n)
    : P_(std::move(P)), n_(n), R_(std::make_unique<const Resolved>(resolve(P_, n, "rope::AttentionField"))) {}

AttentionField::~AttentionField() = default;

void AttentionField::eval(double, const Batch& Z, Tokens& dZ) const {
  check_batch(Z, n_, P_.d, "rope::AttentionField");
  dZ.resize(Z.Z.rows(), Z.Z.cols());
  for_each_run(*R_, Z, [&](int r, const Tokens& Y) {
    const Eigen::Index r0 = static_cast<Eigen::Index>(r) * n_;
    for (int i = 0; i < n_; ++i) {
      const auto x = Z.Z.row(r0 + i);
      dZ.row(r0 + i) = Y.row(i) - x.dot(Y.row(i)) * x;  // P_perp(x_i) y_i
    }
  });
}

void AttentionField::jvp(double, const Batch& Z, const Tokens& V, Tokens& out) const {
  for_each_token_tangent(*R_, n_, P_.d, Z, V, out, "rope::AttentionField::jvp",
                         [&](Eigen::Index k, const auto& x, const auto& v, const auto& y, const auto& dy) {
                           // d(y - <x, y> x) = dy - (<v, y> + <x, dy>) x - <x, y> v
                           out.row(k) = dy - (v.dot(y) + x.dot(dy)) * x - x.dot(y) * v;
                         });
}

// ---- AttentionStep ----

AttentionStep::AttentionStep(AttentionParams P, int n, double h)
    : P_(std::move(P)), n_(n), h_(h), R_(std::make_unique<const Resolved>(resolve(P_, n, "rope::AttentionStep"))) {
  if (!(h > 0.0) || !std::isfinite(h)) attention_bad("rope::AttentionStep", fmt::format("h = {}; expected a finite step h > 0", h));
}

AttentionStep::~AttentionStep() = default;

void AttentionStep::apply(long k, Batch& Z) const {
  check_batch(Z, n_, P_.d, "rope::AttentionStep");
  bool want_attention = false;
  for (TapObserver* w : watchers_) want_attention = want_attention || w->wants("attention", k);
  if (want_attention) {  // [runs, heads, n, n]: attention() gives heads*n x n per run, row-major = [heads, n, n]
    std::vector<double> packed;
    packed.reserve(static_cast<std::size_t>(Z.runs) * static_cast<std::size_t>(P_.heads) * static_cast<std::size_t>(n_) *
                   static_cast<std::size_t>(n_));
    Mat A;
    for (int r = 0; r < Z.runs; ++r) {
      attention(P_, Z.run(r), A);
      for (Eigen::Index i = 0; i < A.rows(); ++i)
        for (Eigen::Index j = 0; j < A.cols(); ++j) packed.push_back(A(i, j));
    }
    const std::vector<std::size_t> shape{static_cast<std::size_t>(Z.runs), static_cast<std::size_t>(A.rows() / n_),
                                         static_cast<std::size_t>(n_), static_cast<std::size_t>(n_)};
    for (TapObserver* w : watchers_)
      if (w->wants("attention", k)) w->tap("attention", k, packed.data(), shape);
  }
  // Every run's output is computed from its input before any of its tokens moves.
  Tokens Znew(Z.Z.rows(), Z.Z.cols());
  for_each_run(*R_, Z, [&](int r, const Tokens& Y) {
    const Eigen::Index r0 = static_cast<Eigen::Index>(r) * n_;
    for (int i = 0; i < n_; ++i) {
      RowVec v = Z.Z.row(r0 + i) + h_ * Y.row(i);
      const double nrm = v.norm();
      Znew.row(r0 + i) = nrm > 0.0 ? RowVec(v / nrm) : v;
    }
  });
  Z.Z.swap(Znew);
}

void AttentionStep::vjp(long, const Batch& Z, const Tokens& W, Tokens& out) const {
  check_batch(Z, n_, P_.d, "rope::AttentionStep::vjp");
  check_direction(Z, W, "rope::AttentionStep::vjp");
  out.resize(Z.Z.rows(), Z.Z.cols());
  Tokens Y, G(n_, P_.d), Gx;
  for (int r = 0; r < Z.runs; ++r) {
    const Eigen::Index r0 = static_cast<Eigen::Index>(r) * n_;
    // Y first (the forward output), then the projections' transposes (Dpi(u) is symmetric).
    Tokens dummy = Tokens::Zero(n_, P_.d);
    attend_transpose(*R_, Z.run(r), dummy, Y, Gx);
    for (int i = 0; i < n_; ++i) {
      const RowVec u = Z.Z.row(r0 + i) + h_ * Y.row(i);
      const double nu = u.norm();
      G.row(i) = W.row(r0 + i);
      if (nu > 0.0) retraction_derivative(u / nu, nu, G.row(i));
    }
    attend_transpose(*R_, Z.run(r), G, Y, Gx);
    out.middleRows(r0, n_) = G + h_ * Gx;
  }
}

void AttentionStep::jvp(long, const Batch& Z, const Tokens& V, Tokens& out) const {
  for_each_token_tangent(*R_, n_, P_.d, Z, V, out, "rope::AttentionStep::jvp",
                         [&](Eigen::Index k, const auto& x, const auto& v, const auto& y, const auto& dy) {
                           const RowVec u = x + h_ * y;
                           const RowVec du = v + h_ * dy;
                           const double nu = u.norm();
                           out.row(k) = du;  // apply() leaves a zero vector unnormalised
                           if (nu > 0.0) retraction_derivative(u / nu, nu, out.row(k));
                         });
}

}  // namespace tokdyn::rope
