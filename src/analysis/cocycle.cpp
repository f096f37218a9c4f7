// Cocycles: the generator, discrete QR (Benettin), Lyapunov exponents, Bohl / Steklov intervals
// of the QR diagonal (the dichotomy spectrum of Thm 5 on a window), integral separation and the
// finite-time singular-value rank function. See analysis/cocycle.hpp.
#include "tokdyn/analysis/cocycle.hpp"
#include "tokdyn/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <cblas.h>
#include <omp.h>
#include <fmt/format.h>

#include "tokdyn/core/linalg.hpp"
#include "tokdyn/core/norms.hpp"
#include "tokdyn/core/parallel.hpp"

// LAPACK from the linked OpenBLAS (the blocked Householder QR of large frames; singular values).
extern "C" {
void dgeqrt3_(const int* m, const int* n, double* a, const int* lda, double* t, const int* ldt, int* info);
void dlarfb_(const char* side, const char* trans, const char* direct, const char* storev, const int* m, const int* n, const int* k,
             const double* v, const int* ldv, const double* t, const int* ldt, double* c, const int* ldc, double* work, const int* ldwork,
             std::size_t, std::size_t, std::size_t, std::size_t);
void dgesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
             const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* info, std::size_t, std::size_t);
}

namespace tokdyn::cocycle {

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Frames of at least this many d k^2 multiply-adds go through our blocked Householder QR on
// OpenBLAS/LAPACK kernels (below); smaller ones through Eigen on the calling thread.
constexpr double kLapackMinWork = 1 << 18;

bool use_lapack(long d, long k) { return static_cast<double>(d) * static_cast<double>(k) * static_cast<double>(k) >= kLapackMinWork; }

// The blocked Householder QR of large frames and the products with its Q, on every core with the
// same bits at any thread count: the work is cut into pieces whose shapes depend on (d, k) alone
// (panels of kPanel columns; column blocks of kCols; row blocks of kRows), each piece one call of
// single-threaded OpenBLAS/LAPACK, and the pieces are spread over the threads. A piece computes
// the same bits whichever thread runs it, so the thread count never changes a result.
constexpr long kPanel = 32;  // columns per Householder panel (LAPACK's dgeqrf uses 32 too)
constexpr long kCols = 64;   // columns per block of a trailing update / of the explicit Q
constexpr long kRows = 64;   // rows of B per block of the product B Q

// for (b = 0; b < blocks; ++b) f(b), spread over the threads when there are several blocks and we
// are not already inside a parallel region; each f runs single-threaded BLAS. An exception (e.g.
// std::bad_alloc) is rethrown after the loop.
template <class F>
void for_blocks(long blocks, F&& f) {
  ParallelErrors errors;
#pragma omp parallel for schedule(static) if (blocks > 1 && !omp_in_parallel())
  for (long b = 0; b < blocks; ++b) try {
    single_threaded_blas([&] { f(b); });
  } catch (...) {
    errors.capture();
  }
  errors.rethrow();
}

// A frame's QR in compact WY form: A = Z overwritten by R (on and above the diagonal) and the
// Householder vectors (below it), T[p] the kPanel x kPanel triangular factor of panel p, so that
// Q = prod_p (I - V_p T_p V_p^T).
struct WyQr {
  Matrix A;
  std::vector<Matrix> T;
  long panels() const { return static_cast<long>(T.size()); }
};

void lapack_larfb(const char* side, const char* trans, int m, int n, int k, const double* v, int ldv, const double* t, int ldt,
                  double* c, int ldc) {
  thread_local std::vector<double> work;
  const int ldwork = side[0] == 'L' ? n : m;
  work.resize(static_cast<std::size_t>(ldwork) * static_cast<std::size_t>(k));
  dlarfb_(side, trans, "F", "C", &m, &n, &k, v, &ldv, t, &ldt, c, &ldc, work.data(), &ldwork, 1, 1, 1, 1);
}

// Z (d x k, d >= k) = Q R in compact WY form: each panel by LAPACK's recursive dgeqrt3 (on the
// calling thread), the trailing columns updated by the panel's block reflector in column blocks.
void wy_qr(const Matrix& Z, WyQr& f) {
  const long d = Z.rows(), k = Z.cols();
  f.A = Z;
  f.T.assign(static_cast<std::size_t>((k + kPanel - 1) / kPanel), Matrix());
  const int lda = static_cast<int>(d);
  for (long p = 0, j = 0; j < k; ++p, j += kPanel) {
    const int m = static_cast<int>(d - j), jb = static_cast<int>(std::min(kPanel, k - j));
    Matrix& T = f.T[static_cast<std::size_t>(p)];
    T.setZero(jb, jb);
    int info = 0;
    single_threaded_blas([&] { dgeqrt3_(&m, &jb, &f.A(j, j), &lda, T.data(), &jb, &info); });
    if (info != 0) throw std::logic_error(fmt::format("qr: LAPACK dgeqrt3 returned info = {}", info));
    const long rest = k - j - jb;
    const long blocks = (rest + kCols - 1) / kCols;
    for_blocks(blocks, [&](long b) {
      const long c0 = j + jb + b * kCols;
      lapack_larfb("L", "T", m, static_cast<int>(std::min(kCols, k - c0)), jb, &f.A(j, j), lda, T.data(), jb, &f.A(j, c0), lda);
    });
  }
}

// The first k columns of Q (d x k) times diag(sign): Q e_c for column c is the block reflectors of
// the panels starting at or before c applied to e_c (later panels leave it alone), last panel first.
void wy_form_q(const WyQr& f, const Eigen::VectorXd& sign, Matrix& Q) {
  const long d = f.A.rows(), k = f.A.cols();
  Q.setZero(d, k);
  const int lda = static_cast<int>(d);
  for_blocks((k + kCols - 1) / kCols, [&](long b) {
    const long c0 = b * kCols, cb = std::min(kCols, k - c0);
    for (long c = 0; c < cb; ++c) Q(c0 + c, c0 + c) = 1.0;
    for (long p = (c0 + cb - 1) / kPanel; p >= 0; --p) {
      const long j = p * kPanel;
      const int jb = static_cast<int>(f.T[static_cast<std::size_t>(p)].rows());
      lapack_larfb("L", "N", static_cast<int>(d - j), static_cast<int>(cb), jb, &f.A(j, j), lda, f.T[static_cast<std::size_t>(p)].data(), jb,
                   &Q(j, c0), lda);
    }
    for (long c = 0; c < cb; ++c) Q.col(c0 + c) *= sign(c0 + c);
  });
}

// out (d x k) = B Q_k diag(sign), Q_k the first k columns of the frame's Q, without forming Q: each
// block of kRows rows of B times the panels' block reflectors from the right. 2 d k (2d - k) flops:
// at k = d, 2 d^3 against 2 d^3 for a GEMM with Q plus 4/3 d^3 for forming Q.
void wy_right_apply(const Matrix& B, const WyQr& f, const Eigen::VectorXd& sign, Matrix& out) {
  const long d = f.A.rows(), k = f.A.cols();
  out.resize(d, k);
  const int lda = static_cast<int>(d);
  for_blocks((d + kRows - 1) / kRows, [&](long b) {
    const long r0 = b * kRows, rb = std::min(kRows, d - r0);
    thread_local Matrix C;
    C = B.middleRows(r0, rb);
    for (long p = 0; p < f.panels(); ++p) {
      const long j = p * kPanel;
      const int jb = static_cast<int>(f.T[static_cast<std::size_t>(p)].rows());
      lapack_larfb("R", "N", static_cast<int>(rb), static_cast<int>(d - j), jb, &f.A(j, j), lda, f.T[static_cast<std::size_t>(p)].data(), jb,
                   &C(0, j), static_cast<int>(rb));
    }
    out.middleRows(r0, rb) = C.leftCols(k) * sign.asDiagonal();
  });
}

// The diagonal signs S = diag(+-1) that make diag(R) >= 0 (Z = (Q S)(S R)); R = S R when asked.
Eigen::VectorXd wy_signs(const WyQr& f, Matrix* R = nullptr) {
  const long k = f.A.cols();
  Eigen::VectorXd sign(k);
  for (long i = 0; i < k; ++i) sign(i) = f.A(i, i) < 0 ? -1.0 : 1.0;
  if (R) *R = sign.asDiagonal() * Matrix(f.A.topRows(k).triangularView<Eigen::Upper>());
  return sign;
}

// out = A B by single-threaded GEMMs on fixed column blocks of B.
void blas_gemm(const Matrix& A, const Matrix& B, Matrix& C) {
  C.resize(A.rows(), B.cols());
  const long n = B.cols();
  for_blocks((n + kCols - 1) / kCols, [&](long b) {
    const long c0 = b * kCols;
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(A.rows()), static_cast<int>(std::min(kCols, n - c0)),
                static_cast<int>(A.cols()), 1.0, A.data(), static_cast<int>(A.rows()), &B(0, c0), static_cast<int>(B.rows()), 0.0,
                &C(0, c0), static_cast<int>(C.rows()));
  });
}

// The window [begin, end) of a log_diag with `rows` rows; end < 0 means rows.
std::pair<long, long> window_of(long rows, long begin, long end, const char* who) {
  if (end < 0) end = rows;
  if (begin < 0 || begin >= end || end > rows)
    throw std::invalid_argument(fmt::format("{}: window [{}, {}) is empty or outside the {} rows; expected 0 <= begin < end <= rows",
                                            who, begin, end, rows));
  return {begin, end};
}
}  // namespace

// ------------------------------------------------------------------------------------------------

Cocycle Cocycle::from_matrices(std::vector<Matrix> B) {
  if (B.empty()) throw std::invalid_argument("cocycle: no layer matrices; expected at least one d x d matrix");
  const long d = B[0].rows();
  if (d < 1) throw std::invalid_argument("cocycle: empty layer matrix; expected d >= 1");
  for (std::size_t l = 0; l < B.size(); ++l) {
    if (B[l].rows() != d || B[l].cols() != d)
      throw std::invalid_argument(fmt::format("cocycle: layer {} is {} x {}; expected {} x {} like layer 0", l, B[l].rows(),
                                              B[l].cols(), d, d));
    if (!B[l].allFinite()) throw std::invalid_argument(fmt::format("cocycle: layer {} has a non-finite entry; expected finite values", l));
  }
  Cocycle c;
  c.L_ = static_cast<long>(B.size());
  c.d_ = d;
  c.B_ = std::move(B);
  return c;
}

Cocycle::Cocycle(long L, long d, ApplyFn apply, ApplyFn apply_transpose)
    : L_(L), d_(d), apply_(std::move(apply)), apply_t_(std::move(apply_transpose)) {
  if (L < 1 || d < 1) throw std::invalid_argument(fmt::format("cocycle: L = {}, d = {}; expected both >= 1", L, d));
  if (!apply_) throw std::invalid_argument("cocycle: empty apply callback; expected a function applying B(l)");
}

void Cocycle::check_layer(long l) const {
  if (l < 0 || l >= L_) throw std::invalid_argument(fmt::format("cocycle: layer {} outside 0..{}", l, L_ - 1));
}

void Cocycle::apply(long l, const Matrix& Q, Matrix& out) const {
  check_layer(l);
  if (Q.rows() != d_) throw std::invalid_argument(fmt::format("cocycle: applying B({}) to {} rows; expected {}", l, Q.rows(), d_));
  if (has_matrices()) {
    if (use_lapack(d_, Q.cols())) {
      blas_gemm(B_[static_cast<std::size_t>(l)], Q, out);
    } else {
      out.resize(d_, Q.cols());
      out.noalias() = B_[static_cast<std::size_t>(l)] * Q;
    }
  } else {
    apply_(l, Q, out);
    if (out.rows() != d_ || out.cols() != Q.cols())
      throw std::logic_error(fmt::format("cocycle: the apply callback returned {} x {}; expected {} x {}", out.rows(), out.cols(), d_, Q.cols()));
  }
}

void Cocycle::apply_transpose(long l, const Matrix& Q, Matrix& out) const {
  check_layer(l);
  if (Q.rows() != d_) throw std::invalid_argument(fmt::format("cocycle: applying B({})^T to {} rows; expected {}", l, Q.rows(), d_));
  if (has_matrices()) {
    out.resize(d_, Q.cols());
    out.noalias() = B_[static_cast<std::size_t>(l)].transpose() * Q;
  } else if (apply_t_) {
    apply_t_(l, Q, out);
    if (out.rows() != d_ || out.cols() != Q.cols()) throw std::logic_error("cocycle: the transpose callback returned a wrong shape");
  } else {
    throw std::logic_error("cocycle: no transpose callback; two-sided bundles need B(l)^T");
  }
}

Matrix Cocycle::matrix(long l) const {
  check_layer(l);
  if (has_matrices()) return B_[static_cast<std::size_t>(l)];
  Matrix out;
  apply(l, Matrix::Identity(d_, d_), out);
  return out;
}

double Cocycle::sup_norm_A() const {
  double a = 0;
  for (long l = 0; l < L_; ++l) {
    Matrix A = matrix(l) - Matrix::Identity(d_, d_);
    a = std::max(a, spectral_norm(A));  // divide and conquer from d = 64 (Jacobi: 0.6 s at d = 256)
  }
  return a;
}

// ------------------------------------------------------------------------------------------------

void qr_signfixed(const Matrix& Z, Matrix& Q, Matrix& R) {
  const long d = Z.rows(), k = Z.cols();
  if (k > d) throw std::invalid_argument(fmt::format("qr: {} x {} has more columns than rows", d, k));
  if (k > 0 && use_lapack(d, k)) {
    WyQr f;
    wy_qr(Z, f);
    wy_form_q(f, wy_signs(f, &R), Q);
    return;
  }
  Eigen::HouseholderQR<Matrix> qr(Z);
  Q = qr.householderQ() * Matrix::Identity(d, k);
  R = qr.matrixQR().topRows(k).triangularView<Eigen::Upper>();
  for (long i = 0; i < k; ++i)
    if (R(i, i) < 0) {  // flip so that diag(R) >= 0: Z = (Q S)(S R), S = diag(+-1)
      R.row(i) *= -1.0;
      Q.col(i) *= -1.0;
    }
}

namespace {
// An image far from 1 in size is scaled by a power of two (exact) so that its QR (and the products
// of a block) cannot overflow or underflow: Z = 2^e Z', log R_ii = log R'_ii + e log 2. Images of
// ordinary size are left alone (the same bits as without scaling). Returns e.
long scale_to_unit(Matrix& Z) {
  const double zmax = Z.size() > 0 ? Z.cwiseAbs().maxCoeff() : 0.0;
  if (!(zmax > 0 && (zmax > 0x1p200 || zmax < 0x1p-200))) return 0;
  int e2 = 0;
  std::frexp(zmax, &e2);
  // entry by entry: 2^-e2 alone overflows for a denormal zmax (e2 down to -1073)
  Z = Z.unaryExpr([e2](double v) { return std::ldexp(v, -e2); });
  return e2;
}

// log_r[i] = log R_ii + e2 log 2 (-inf where R_ii = 0); a column whose R_ii fell to round-off of
// the image (|Z|_F = znorm) is marked unresolved from this step.
void log_diagonal(const Eigen::VectorXd& rdiag, double znorm, long e2, Eigen::Ref<Eigen::RowVectorXd> log_r, std::vector<long>& unresolved,
                  long step) {
  const double shift = static_cast<double>(e2) * std::log(2.0);
  for (long i = 0; i < rdiag.size(); ++i) {
    // R_ii = 0: growth scale 0. R_ii at round-off of the image: the column is unresolved from here.
    const double rii = rdiag(i);
    if (unresolved[static_cast<std::size_t>(i)] < 0 && rii > 0 && rii <= 64.0 * std::numeric_limits<double>::epsilon() * znorm)
      unresolved[static_cast<std::size_t>(i)] = step;
    log_r[i] = rii > 0 ? (shift == 0 ? std::log(rii) : std::log(rii) + shift) : kNegInf;
  }
}
}  // namespace

void benettin_step(Matrix& Z, Matrix& Q, Matrix& R, Eigen::Ref<Eigen::RowVectorXd> log_r, std::vector<long>& unresolved,
                   long step, long extra_e2) {
  const long k = Z.cols();
  if (log_r.size() != k || static_cast<long>(unresolved.size()) != k)
    throw std::logic_error("benettin_step: expected k log entries and k unresolved flags");
  const long e2 = extra_e2 + scale_to_unit(Z);
  const double znorm = Z.norm();
  qr_signfixed(Z, Q, R);
  log_diagonal(R.diagonal(), znorm, e2, log_r, unresolved, step);
}

QrResult qr_iterate(const Cocycle& c, const QrOptions& opt) {
  const long L = c.length(), d = c.dim();
  const long first = opt.first, last = opt.last < 0 ? L : opt.last;
  if (first < 0 || first >= last || last > L)
    throw std::invalid_argument(fmt::format("qr_iterate: window [{}, {}) of a cocycle of length {}; expected 0 <= first < last <= L", first, last, L));
  const long k = opt.k == 0 ? d : opt.k;
  if (k < 1 || k > d) throw std::invalid_argument(fmt::format("qr_iterate: k = {}; expected 1 <= k <= d = {}", k, d));
  if (opt.reorth_every < 1) throw std::invalid_argument("qr_iterate: reorth_every must be >= 1");
  Matrix Q;
  if (opt.Q0.size() == 0) {
    Q = Matrix::Identity(d, k);
  } else {
    if (opt.Q0.rows() != d || opt.Q0.cols() != k)
      throw std::invalid_argument(fmt::format("qr_iterate: Q0 is {} x {}; expected {} x {}", opt.Q0.rows(), opt.Q0.cols(), d, k));
    Q = opt.Q0;
  }
  QrResult res;
  const long N = last - first;
  res.log_diag.resize(N, k);
  res.unresolved_at.assign(static_cast<std::size_t>(k), -1);
  if (opt.keep_factors) {
    if (opt.reorth_every != 1) throw std::invalid_argument("qr_iterate: keep_factors needs reorth_every = 1");
    res.Q.reserve(static_cast<std::size_t>(N + 1));
    res.R.reserve(static_cast<std::size_t>(N));
    res.Q.push_back(Q);
  }
  Matrix Z, R;
  Eigen::RowVectorXd logs(k);
  // Stored matrices and frames of at least half the dimension keep Q in compact WY form between
  // steps: the next image B Q comes from B's rows times the block reflectors (wy_right_apply: no
  // explicit Q, a third fewer flops at k = d), on every core with fixed blocks.
  const bool wy = c.has_matrices() && use_lapack(d, k) && 2 * k >= d && !opt.keep_factors;
  WyQr frame;
  Eigen::VectorXd sign;
  bool implicit = false;  // the frame is `frame` and `sign`, not Q
  long block_start = 0;  // row of the first step of the current block of reorth_every steps
  long block_e2 = 0;     // power of two taken out of the current block's product
  for (long r = 0; r < N; ++r) {
    if (implicit)
      wy_right_apply(c.matrices()[static_cast<std::size_t>(first + r)], frame, sign, Z);
    else
      c.apply(first + r, Q, Z);
    implicit = false;
    const double zmax = Z.cwiseAbs().maxCoeff();
    if (!std::isfinite(zmax))
      throw NonFiniteError(fmt::format("qr_iterate: the image B({}) Q is not finite (largest entry {}): the generators overflow "
                                       "double precision or the layer map returned NaN; expected finite products",
                                       first + r, zmax));
    block_e2 += scale_to_unit(Z);
    const bool reorth = (r + 1 - block_start) == opt.reorth_every || r == N - 1;
    if (!reorth) {
      Q = Z;
      continue;
    }
    if (wy) {
      const double znorm = Z.norm();
      wy_qr(Z, frame);
      sign = wy_signs(frame);
      log_diagonal(sign.asDiagonal() * frame.A.topRows(k).diagonal(), znorm, block_e2, logs, res.unresolved_at, r);
      implicit = true;
    } else {
      benettin_step(Z, Q, R, logs, res.unresolved_at, r, block_e2);
    }
    const long q = r + 1 - block_start;
    block_e2 = 0;
    for (long i = 0; i < k; ++i)
      for (long j = block_start; j <= r; ++j) res.log_diag(j, i) = logs[i] / static_cast<double>(q);
    block_start = r + 1;
    if (opt.keep_factors) {
      res.Q.push_back(Q);
      res.R.push_back(R);
    }
  }
  if (implicit) wy_form_q(frame, sign, Q);
  res.Q_final = Q;
  return res;
}

LyapunovSpectrum lyapunov_spectrum(const Matrix& log_diag, long burn_in) {
  const auto [b, e] = window_of(log_diag.rows(), burn_in, -1, "lyapunov_spectrum");
  LyapunovSpectrum s;
  s.window = e - b;
  s.mu = log_diag.middleRows(b, e - b).colwise().sum().transpose() / static_cast<double>(e - b);
  // std::exp element by element: exp(-inf) = 0 exactly (Eigen's vectorised exp clamps its
  // argument and gives a denormal there).
  s.gamma.resize(s.mu.size());
  for (Eigen::Index i = 0; i < s.mu.size(); ++i) s.gamma(i) = std::exp(s.mu(i));
  return s;
}

Matrix running_exponents(const Matrix& log_diag, long burn_in) {
  const auto [b, e] = window_of(log_diag.rows(), burn_in, -1, "running_exponents");
  Matrix out = Matrix::Zero(log_diag.rows(), log_diag.cols());
  Eigen::RowVectorXd sum = Eigen::RowVectorXd::Zero(log_diag.cols());
  for (long r = b; r < e; ++r) {
    sum += log_diag.row(r);
    out.row(r) = sum / static_cast<double>(r - b + 1);
  }
  return out;
}

// ------------------------------------------------------------------------------------------------

namespace {
// Steklov averages (1/H) sum_{r=s}^{s+H-1} x(r) of one column over every window in [b, e): the
// finite part by prefix sums, -inf entries counted separately (so no -inf - -inf = NaN).
template <class F>
void steklov_scan(const Eigen::Ref<const Eigen::VectorXd>& x, long H, long b, long e, F&& visit) {
  const long n = e - b;
  std::vector<double> pre(static_cast<std::size_t>(n + 1), 0.0);
  std::vector<long> ninf(static_cast<std::size_t>(n + 1), 0);
  for (long r = 0; r < n; ++r) {
    const double v = x(b + r);
    const bool neg_inf = std::isinf(v) && v < 0;
    pre[static_cast<std::size_t>(r + 1)] = pre[static_cast<std::size_t>(r)] + (neg_inf ? 0.0 : v);
    ninf[static_cast<std::size_t>(r + 1)] = ninf[static_cast<std::size_t>(r)] + (neg_inf ? 1 : 0);
  }
  for (long s = 0; s + H <= n; ++s) {
    const auto i0 = static_cast<std::size_t>(s), i1 = static_cast<std::size_t>(s + H);
    const double m = ninf[i1] > ninf[i0] ? kNegInf : (pre[i1] - pre[i0]) / static_cast<double>(H);
    visit(m);
  }
}
}  // namespace

std::vector<Interval> bohl_intervals(const Matrix& log_diag, long H, long begin, long end) {
  const auto [b, e] = window_of(log_diag.rows(), begin, end, "bohl_intervals");
  if (H < 1 || H > e - b)
    throw std::invalid_argument(fmt::format("bohl_intervals: Steklov window H = {}; expected 1 <= H <= {} (the window length)", H, e - b));
  std::vector<Interval> out;
  for (long i = 0; i < log_diag.cols(); ++i) {
    double lo = std::numeric_limits<double>::infinity(), hi = kNegInf;
    steklov_scan(log_diag.col(i), H, b, e, [&](double m) {
      lo = std::min(lo, m);
      hi = std::max(hi, m);
    });
    out.push_back(Interval{std::exp(lo), std::exp(hi), {i}});
  }
  return out;
}

std::vector<Interval> merge_intervals(std::vector<Interval> iv, double rel_tol) {
  std::sort(iv.begin(), iv.end(), [](const Interval& a, const Interval& b) {
    return a.lower < b.lower || (a.lower == b.lower && a.upper < b.upper);
  });
  std::vector<Interval> out;
  for (auto& x : iv) {
    if (!out.empty() && x.lower <= out.back().upper * (1.0 + rel_tol)) {
      out.back().upper = std::max(out.back().upper, x.upper);
      out.back().columns.insert(out.back().columns.end(), x.columns.begin(), x.columns.end());
    } else {
      out.push_back(std::move(x));
    }
  }
  for (auto& x : out) std::sort(x.columns.begin(), x.columns.end());
  return out;
}

Eigen::VectorXd separation(const Matrix& log_diag, long H, long begin, long end) {
  const auto [b, e] = window_of(log_diag.rows(), begin, end, "separation");
  if (H < 1 || H > e - b) throw std::invalid_argument(fmt::format("separation: H = {}; expected 1 <= H <= {}", H, e - b));
  const long k = log_diag.cols();
  Eigen::VectorXd sep = Eigen::VectorXd::Zero(std::max<long>(k - 1, 0));
  for (long i = 0; i + 1 < k; ++i) {
    // A -inf in column i+1 separates infinitely; a -inf in column i (only) never.
    Eigen::VectorXd diff(e - b);
    for (long r = b; r < e; ++r) {
      const double x = log_diag(r, i), y = log_diag(r, i + 1);
      const bool xi = std::isinf(x), yi = std::isinf(y);
      diff(r - b) = yi ? (xi ? 0.0 : std::numeric_limits<double>::max() / static_cast<double>(e - b + 1)) : (xi ? kNegInf : x - y);
    }
    double lo = std::numeric_limits<double>::infinity();
    steklov_scan(diff, H, 0, e - b, [&](double m) { lo = std::min(lo, m); });
    sep(i) = lo;
  }
  return sep;
}

bool hyperbolic(const std::vector<Interval>& merged) {
  for (const auto& x : merged)
    if (x.lower <= 1.0 && 1.0 <= x.upper) return false;
  return true;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Yes: return "yes";
    case Verdict::No: return "no";
    case Verdict::Undecided: return "undecided";
  }
  return "undecided";
}

SpectrumError spectrum_error(const Matrix& log_diag, long begin, long end) {
  const auto [b, e] = window_of(log_diag.rows(), begin, end, "spectrum_error");
  const long k = log_diag.cols(), N = e - b;
  SpectrumError out;
  double big = 0;
  for (long i = 0; i < k; ++i)
    for (long r = b; r < e; ++r)
      if (std::isfinite(log_diag(r, i))) big = std::max(big, std::abs(log_diag(r, i)));
  out.roundoff = 16.0 * std::numeric_limits<double>::epsilon() * static_cast<double>(k + 1) * (1.0 + big);
  for (long i = 0; i < k; ++i) {
    bool finite = true;
    double mean = 0;
    for (long r = b; r < e; ++r) {
      finite = finite && std::isfinite(log_diag(r, i));
      mean += log_diag(r, i);
    }
    if (!finite || N == 0) continue;  // a -inf column: growth scale 0, far from 1 (no bias to speak of)
    mean /= static_cast<double>(N);
    double S = 0, osc = 0;
    for (long r = b; r < e; ++r) {
      S += log_diag(r, i) - mean;
      osc = std::max(osc, std::abs(S));
    }
    out.window_bias = std::max(out.window_bias, osc / static_cast<double>(N));
  }
  return out;
}

HyperbolicDecision decide_hyperbolic(const std::vector<Interval>& merged, double tolerance) {
  if (!(tolerance >= 0)) throw std::invalid_argument(fmt::format("decide_hyperbolic: tolerance {}; expected >= 0", tolerance));
  HyperbolicDecision d;
  d.tolerance = tolerance;
  double outside = std::numeric_limits<double>::infinity(), inside = 0;
  bool contained = false;
  for (const auto& x : merged) {
    const double a = x.lower > 0 ? std::log(x.lower) : kNegInf, b = x.upper > 0 ? std::log(x.upper) : kNegInf;
    if (a <= 0 && 0 <= b) {
      contained = true;
      inside = std::max(inside, std::min(-a, b));
    } else {
      outside = std::min(outside, a > 0 ? a : -b);
    }
  }
  d.margin = contained ? -inside : outside;
  d.verdict = d.margin > tolerance ? Verdict::Yes : (d.margin < -tolerance ? Verdict::No : Verdict::Undecided);
  return d;
}

// ------------------------------------------------------------------------------------------------

namespace {
/// The singular values of a square matrix, largest first, by LAPACK's robust driver (dgesvd,
/// values only), on the calling thread. ConvergenceError if its QR iteration does not converge.
Eigen::VectorXd singular_values(Matrix A) {
  const int n = static_cast<int>(A.rows());
  Eigen::VectorXd sv(n);
  int info = 0, lwork = -1, one = 1;
  double wq = 0, dummy = 0;
  single_threaded_blas([&] {
    dgesvd_("N", "N", &n, &n, A.data(), &n, sv.data(), &dummy, &one, &dummy, &one, &wq, &lwork, &info, 1, 1);
    lwork = std::max(1, static_cast<int>(wq));
    std::vector<double> work(static_cast<std::size_t>(lwork));
    dgesvd_("N", "N", &n, &n, A.data(), &n, sv.data(), &dummy, &one, &dummy, &one, work.data(), &lwork, &info, 1, 1);
  });
  if (info > 0) throw ConvergenceError(fmt::format("finite-time singular values: LAPACK dgesvd did not converge ({} superdiagonals)", info));
  if (info < 0) throw std::logic_error(fmt::format("dgesvd: argument {} is invalid", -info));
  return sv;
}
}  // namespace

FiniteTimeSvd finite_time_svd(const Cocycle& c, long N, long stride, long begin, long end) {
  const long L = c.length(), d = c.dim();
  if (end < 0) end = L;
  if (N < 1 || stride < 1 || begin < 0 || end > L || begin + N > end)
    throw std::invalid_argument(fmt::format("finite_time_svd: N = {}, stride = {} on [{}, {}); expected N >= 1, stride >= 1 and begin + N <= end <= {}",
                                            N, stride, begin, end, L));
  FiniteTimeSvd f;
  f.N = N;
  for (long s = begin; s + N <= end; s += stride) f.starts.push_back(s);
  const long windows = static_cast<long>(f.starts.size());
  f.log_sv_rate.resize(windows, d);
  // The windows are independent: spread over the threads when the cocycle is a stack of matrices
  // (a callback may not be thread-safe). Each window is computed on one thread with single-threaded
  // BLAS, so the bits do not depend on the thread count.
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic) if (c.has_matrices() && windows > 1 && !omp_in_parallel())
  for (long j = 0; j < windows; ++j) {
    try {
      // Phi(s+N, s) = Q_N (R_{N-1} ... R_0): the singular values are those of the triangular
      // product (upper triangular products: half the work), kept with a running scale so that long
      // windows neither overflow nor underflow.
      Matrix Z, Q = Matrix::Identity(d, d), R;
      Matrix P = Matrix::Identity(d, d);
      double log_scale = 0;
      for (long r = 0; r < N; ++r) {
        c.apply(f.starts[static_cast<std::size_t>(j)] + r, Q, Z);
        qr_signfixed(Z, Q, R);
        P = (R.triangularView<Eigen::Upper>() * P).eval();
        const double nrm = P.cwiseAbs().maxCoeff();
        if (nrm > 0) {
          P /= nrm;
          log_scale += std::log(nrm);
        }
      }
      const Eigen::VectorXd sv = singular_values(P);
      for (long i = 0; i < d; ++i) f.log_sv_rate(j, i) = (sv(i) > 0 ? std::log(sv(i)) + log_scale : kNegInf) / static_cast<double>(N);
    } catch (...) {
      errors.capture();
    }
  }
  errors.rethrow();
  return f;
}

std::pair<long, long> rank_function(const FiniteTimeSvd& f, double gamma) {
  if (!(gamma > 0)) throw std::invalid_argument("rank_function: gamma must be > 0");
  const double lg = std::log(gamma);
  long kmin = std::numeric_limits<long>::max(), kmax = 0;
  for (long j = 0; j < f.log_sv_rate.rows(); ++j) {
    long k = 0;
    for (long i = 0; i < f.log_sv_rate.cols(); ++i) k += f.log_sv_rate(j, i) > lg ? 1 : 0;
    kmin = std::min(kmin, k);
    kmax = std::max(kmax, k);
  }
  if (f.log_sv_rate.rows() == 0) kmin = 0;
  return {kmin, kmax};
}

}  // namespace tokdyn::cocycle
