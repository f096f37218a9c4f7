// The Green operator of an exponential dichotomy (Lemma 17): the boundary-value problem of the
// two-sided constant extension solved by a block-banded LU, the explicit Green sum for validation,
// ||G|| estimates, the interior exclusion depth and the weight-tied closed form. See analysis/green.hpp.
#include "tokdyn/analysis/green.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>
#include <vector>

#include <sys/mman.h>

#include <cblas.h>
#include <fmt/format.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/linalg.hpp"

#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/core/rng.hpp"

// LAPACK from the linked OpenBLAS: partial-pivoting LU of the tall (2d-k) x d panel of each layer.
extern "C" {
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
}

namespace tokdyn::green {

namespace {

bool all_finite(const Matrix& M) { return M.allFinite(); }

// Orthonormal basis of the orthogonal complement of span(U) (U d x k orthonormal): d x (d - k).
Matrix complement(const Matrix& U) {
  const long d = U.rows(), k = U.cols();
  if (k == 0) return Matrix::Identity(d, d);
  Eigen::HouseholderQR<Matrix> qr(U);
  const Matrix Q = qr.householderQ() * Matrix::Identity(d, d);
  return Q.rightCols(d - k);
}

// Panels of at least this many multiply-adds go through LAPACK / BLAS (on the calling thread
// only, as in cocycle.cpp: bits independent of the thread count); smaller ones through Eigen.
constexpr double kBlasMinWork = 1 << 15;

/// LU of one panel; empty, or why the BVP is singular there.
std::string panel_lu(Eigen::Map<Matrix> P, std::vector<int>& ipiv, long layer) {
  const int m = static_cast<int>(P.rows()), n = static_cast<int>(P.cols());
  ipiv.assign(static_cast<std::size_t>(n), 0);
  int info = 0;
  single_threaded_blas([&] {
    dgetrf_(&m, &n, P.data(), &m, ipiv.data(), &info);
  });
  if (info < 0) throw std::logic_error(fmt::format("green::Bvp: dgetrf returned info = {}", info));
  if (info > 0)
    return fmt::format("green::Bvp: the boundary-value problem is singular at layer {} (zero pivot): the "
                       "cocycle has no transversal bundles, so the bounded solution is not unique",
                       layer);
  for (int& p : ipiv) --p;  // 0-based
  return {};
}

// C -= A B (dense), through BLAS for large products.
void gemm_sub(const Eigen::Ref<const Matrix>& A, const Eigen::Ref<const Matrix>& B, Eigen::Ref<Matrix> C) {
  if (static_cast<double>(A.rows()) * static_cast<double>(A.cols()) * static_cast<double>(B.cols()) >= kBlasMinWork) {
    single_threaded_blas([&] {
      cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(A.rows()), static_cast<int>(B.cols()),
                  static_cast<int>(A.cols()), -1.0, A.data(), static_cast<int>(A.outerStride()), B.data(),
                  static_cast<int>(B.outerStride()), 1.0, C.data(), static_cast<int>(C.outerStride()));
    });
  } else {
    C.noalias() -= A * B;
  }
}

// T's strictly lower part := that of the inverse of its unit lower triangle (the strict upper part
// is left as it was). Recursive halves, L = [A 0; C D] -> L^{-1} = [A^{-1} 0; -D^{-1} C A^{-1} D^{-1}],
// so the work is triangular matrix products; at d = 64 it takes half the time of OpenBLAS's dtrtri,
// whose small sizes run matrix-vector loops (measured: 13 against 22-28 us).
void triangular_inverse_unit_lower(Eigen::Ref<Matrix> T) {
  const Eigen::Index d = T.rows();
  if (d <= 16) {
    Matrix I = Matrix::Identity(d, d);
    T.triangularView<Eigen::UnitLower>().solveInPlace(I);
    T.triangularView<Eigen::StrictlyLower>() = I;
    return;
  }
  const Eigen::Index h = d / 2;
  triangular_inverse_unit_lower(T.topLeftCorner(h, h));
  triangular_inverse_unit_lower(T.bottomRightCorner(d - h, d - h));
  const Matrix CA = T.bottomLeftCorner(d - h, h) * T.topLeftCorner(h, h).triangularView<Eigen::UnitLower>();
  T.bottomLeftCorner(d - h, h).noalias() = -(T.bottomRightCorner(d - h, d - h).triangularView<Eigen::UnitLower>() * CA);
}

// The factor stores of a continuation (one BVP per step, ~L (2d-k+d) d doubles each) are larger
// than malloc's mmap threshold: each new store was fresh pages that the kernel zeroed again, 11-18 %
// of a rho-continuation's time (perf). Released stores are kept here (at most kKeep of them, at most
// kMaxBytes in all) and handed to the next Bvp of the same size. Every entry of a store is written
// by factorise() before it is read, so a reused store gives the same bits as a fresh one.
class StorePool {
 public:
  static StorePool& instance() {
    static StorePool* pool = new StorePool;  // never destroyed: stores may be released at exit
    return *pool;
  }
  std::shared_ptr<double> take(std::size_t need) {
    constexpr std::size_t kHuge = std::size_t(1) << 21;
    const std::size_t align = need >= kHuge ? kHuge : 64;  // small problems: no 2 MiB rounding
    const std::size_t bytes = (need + align - 1) / align * align;
    void* mem = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (std::size_t i = 0; i < free_.size(); ++i)
        if (free_[i].bytes == bytes) {
          mem = free_[i].p;
          kept_ -= bytes;
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
    }
    if (!mem) {
      mem = std::aligned_alloc(align, bytes);
      if (!mem) throw std::bad_alloc();
      if (align == kHuge) madvise(mem, bytes, MADV_HUGEPAGE);  // a hint: without THP the pages are ordinary
    }
    return std::shared_ptr<double>(static_cast<double*>(mem), [this, bytes](double* q) { give_back(q, bytes); });
  }

 private:
  static constexpr std::size_t kKeep = 2, kMaxBytes = std::size_t(512) << 20;
  struct Entry {
    std::size_t bytes;
    void* p;
  };
  void give_back(void* p, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes < (std::size_t(1) << 20) || bytes > kMaxBytes) {  // small: malloc reuses it anyway; huge: not held
      std::free(p);
      return;
    }
    while (!free_.empty() && (free_.size() >= kKeep || kept_ + bytes > kMaxBytes)) {  // the oldest goes first
      kept_ -= free_.front().bytes;
      std::free(free_.front().p);
      free_.erase(free_.begin());
    }
    free_.push_back({bytes, p});
    kept_ += bytes;
  }
  std::mutex mu_;
  std::vector<Entry> free_;
  std::size_t kept_ = 0;
};

void check_seq(const Seq& s, long d, long n, const char* who, const char* what) {
  if (s.rows() != d || s.cols() != n)
    throw std::invalid_argument(fmt::format("{}: {} is {} x {}; expected {} x {}", who, what, s.rows(), s.cols(), d, n));
  if (!s.allFinite()) throw std::invalid_argument(fmt::format("{}: {} has non-finite entries", who, what));
}

}  // namespace

// ------------------------------------------------------------------------------------------------

Ends make_ends(const Matrix& B_left, const Matrix& B_right, double tol) {
  EndsOutcome o = find_ends(B_left, B_right, tol);
  if (!o) throw std::domain_error(o.why_not);
  return std::move(*o.ends);
}

EndsOutcome find_ends(const Matrix& B_left, const Matrix& B_right, double tol) {
  const long d = B_left.rows();
  if (d < 1 || B_left.cols() != d || B_right.rows() != d || B_right.cols() != d)
    throw std::invalid_argument(fmt::format("green::make_ends: B_left is {} x {} and B_right {} x {}; expected two non-empty "
                                            "square matrices of the same size",
                                            B_left.rows(), B_left.cols(), B_right.rows(), B_right.cols()));
  if (!all_finite(B_left) || !all_finite(B_right)) throw std::invalid_argument("green::make_ends: non-finite entries");
  if (!(tol >= 0)) throw std::invalid_argument("green::make_ends: tol must be >= 0");
  EndsOutcome out;
  // E^u(B_left) (bounded backward solutions of the left tail live there) and E^s(B_right)^perp =
  // E^u(B_right^T) (the left eigenvectors of the unstable eigenvalues).
  cocycle::SubspaceOutcome Uu = cocycle::find_unstable_subspace(B_left, tol);
  if (!Uu) {
    out.why_not = "green::make_ends: B_left: " + Uu.why_not;
    return out;
  }
  cocycle::SubspaceOutcome Zu = cocycle::find_unstable_subspace(B_right.transpose(), tol);
  if (!Zu) {
    out.why_not = "green::make_ends: B_right: " + Zu.why_not;
    return out;
  }
  if (Uu.basis->cols() != Zu.basis->cols()) {
    out.why_not = fmt::format("green::make_ends: B_left has {} unstable directions and B_right {}; expected the same number",
                              Uu.basis->cols(), Zu.basis->cols());
    return out;
  }
  Ends e;
  e.B_left = B_left;
  e.B_right = B_right;
  e.k = Uu.basis->cols();
  e.left_rows = complement(*Uu.basis).transpose();
  e.right_rows = Zu.basis->transpose();
  out.ends = std::move(e);
  return out;
}

// ------------------------------------------------------------------------------------------------
// Bvp. Unknowns u(0..L); rows: the d-k left rows, the d rows of each layer equation, the k right
// rows. Eliminating the columns of u(l) involves only the m = d-k rows carried from the previous
// step (X_l, columns of u(l) alone) and the rows of layer l ([-B(l), I] on u(l), u(l+1)): a tall
// (m+d) x d panel, LU with partial pivoting (the pivot rows become U11, U12), the m rows left over
// carry X_{l+1} = R_bot - L21 U12 on u(l+1). The last step is the square [X_L; right_rows].

Bvp::Bvp(std::vector<Matrix> B, Ends ends) : Bvp(Unfactored{}, std::move(B), std::move(ends)) {
  if (std::string why = factorise(); !why.empty()) throw std::domain_error(why);
}

BvpOutcome Bvp::factor(std::vector<Matrix> B, Ends ends) {
  BvpOutcome o;
  Bvp b(Unfactored{}, std::move(B), std::move(ends));
  o.why_not = b.factorise();
  if (o.why_not.empty()) o.bvp.emplace(std::move(b));
  return o;
}

Bvp::Bvp(Unfactored, std::vector<Matrix> B, Ends ends) : B_(std::move(B)), ends_(std::move(ends)) {
  d_ = ends_.B_left.rows();
  L_ = static_cast<long>(B_.size());
  if (L_ < 1) throw std::invalid_argument("green::Bvp: no layer maps (L = 0); expected L >= 1");
  if (d_ < 1 || ends_.B_left.cols() != d_ || ends_.B_right.rows() != d_ || ends_.B_right.cols() != d_)
    throw std::invalid_argument("green::Bvp: the end maps are not square of one size");
  const long k = ends_.k;
  if (k < 0 || k > d_ || ends_.left_rows.rows() != d_ - k || ends_.left_rows.cols() != d_ || ends_.right_rows.rows() != k ||
      ends_.right_rows.cols() != d_)
    throw std::invalid_argument(fmt::format("green::Bvp: end rows are {} x {} and {} x {} with k = {}, d = {}; expected (d-k) x d and k x d",
                                            ends_.left_rows.rows(), ends_.left_rows.cols(), ends_.right_rows.rows(),
                                            ends_.right_rows.cols(), k, d_));
  for (long l = 0; l < L_; ++l) {
    const Matrix& Bl = B_[static_cast<std::size_t>(l)];
    if (Bl.rows() != d_ || Bl.cols() != d_)
      throw std::invalid_argument(fmt::format("green::Bvp: B({}) is {} x {}; expected {} x {}", l, Bl.rows(), Bl.cols(), d_, d_));
    if (!all_finite(Bl)) throw std::invalid_argument(fmt::format("green::Bvp: B({}) has non-finite entries", l));
  }
}

std::string Bvp::factorise() {
  const long k = ends_.k;
  m_ = d_ - k;
  const Matrix I = Matrix::Identity(d_, d_);
  lu_left_ = Eigen::PartialPivLU<Matrix>(I - ends_.B_left);
  lu_right_ = Eigen::PartialPivLU<Matrix>(I - ends_.B_right);

  ipiv_.resize(static_cast<std::size_t>(L_));
  const long n = m_ + d_;
  stride_ = n * d_ + d_ * d_;
  store_ = StorePool::instance().take(static_cast<std::size_t>(L_ * stride_) * sizeof(double));
  Matrix X = ends_.left_rows;  // m x d carried rows on u(l)
  Matrix Linv(d_, d_);
  std::vector<long> at(static_cast<std::size_t>(n));  // at[i]: the original row now at row i
  for (long l = 0; l < L_; ++l) {
    Eigen::Map<Matrix> P = panel_(l);
    P.topRows(m_) = X;
    P.bottomRows(d_) = -B_[static_cast<std::size_t>(l)];
    std::vector<int>& piv = ipiv_[static_cast<std::size_t>(l)];
    if (std::string why = panel_lu(P, piv, l); !why.empty()) return why;
    // Row i of the pivoted [0; I] (n x d) is e_c where original row m + c ended at i, else zero.
    for (long i = 0; i < n; ++i) at[static_cast<std::size_t>(i)] = i;
    for (long i = 0; i < d_; ++i) std::swap(at[static_cast<std::size_t>(i)], at[static_cast<std::size_t>(piv[static_cast<std::size_t>(i)])]);
    // U12 = L11^{-1} (rows 0..d-1 of it): column c is column i of L11^{-1} when row m + c ended at
    // i < d, else zero. One triangular inverse (d^3/3 flops) instead of a triangular solve with d
    // right-hand sides (d^3 flops).
    Linv = P.topRows(d_);
    triangular_inverse_unit_lower(Linv);
    Eigen::Map<Matrix> U12 = U12_(l);
    U12.setZero();
    X.setZero();
    for (long i = 0; i < n; ++i) {
      const long c = at[static_cast<std::size_t>(i)] - m_;
      if (c < 0) continue;
      if (i < d_) {
        U12(i, c) = 1.0;
        U12.col(c).tail(d_ - i - 1) = Linv.col(i).tail(d_ - i - 1);
      } else {
        X(i - d_, c) = 1.0;
      }
    }
    if (m_ > 0) gemm_sub(P.bottomRows(m_), U12, X);
  }
  Matrix S(d_, d_);
  S.topRows(m_) = X;
  S.bottomRows(k) = ends_.right_rows;
  last_ = Eigen::PartialPivLU<Matrix>(S);
  // PartialPivLU does not report singularity: check the pivots of U.
  const Eigen::VectorXd piv = last_.matrixLU().diagonal().cwiseAbs();
  if (!(piv.minCoeff() > 1e-14 * std::max(1.0, piv.maxCoeff())))
    return "green::Bvp: the boundary-value problem is singular at the right end (zero pivot): the "
           "interior cocycle maps E^u(B_left) onto a space meeting E^s(B_right), so the bounded solution is not unique";
  return {};
}

double Bvp::factor_flops() const {
  const double d = static_cast<double>(d_), m = static_cast<double>(m_), n = m + d;
  // dgetrf of n x d: n d^2 - d^3/3; unit-lower inverse: d^3/3; Schur update: 2 m d^2.
  const double per = n * d * d - d * d * d / 3.0 + d * d * d / 3.0 + 2.0 * m * d * d;
  return static_cast<double>(L_) * per + 2.0 / 3.0 * d * d * d;
}

Seq Bvp::solve_full(const Eigen::VectorXd& gL, const Seq& h, const Eigen::VectorXd& gR) const {
  const long n = m_ + d_;
  Seq Z(d_, L_);
  Eigen::VectorXd c = gL, v(n);
  for (long l = 0; l < L_; ++l) {
    const Eigen::Map<Matrix> P = panel_(l);
    const std::vector<int>& piv = ipiv_[static_cast<std::size_t>(l)];
    v.head(m_) = c;
    v.tail(d_) = h.col(l);
    for (long i = 0; i < d_; ++i)
      if (piv[static_cast<std::size_t>(i)] != i) std::swap(v(i), v(piv[static_cast<std::size_t>(i)]));
    Eigen::VectorXd z = P.topRows(d_).triangularView<Eigen::UnitLower>().solve(v.head(d_));
    c = v.tail(m_);
    if (m_ > 0) c.noalias() -= P.bottomRows(m_) * z;
    Z.col(l) = z;
  }
  Eigen::VectorXd f(d_);
  f.head(m_) = c;
  f.tail(d_ - m_) = gR;
  Seq u(d_, L_ + 1);
  u.col(L_) = last_.solve(f);
  for (long l = L_ - 1; l >= 0; --l) {
    const Eigen::Map<Matrix> P = panel_(l);
    Eigen::VectorXd r = Z.col(l);
    r.noalias() -= U12_(l) * u.col(l + 1);
    u.col(l) = P.topRows(d_).triangularView<Eigen::Upper>().solve(r);
  }
  // An overflow in the back substitution (a nearly singular window) is exit 4, never NaN in a table.
  if (!u.allFinite())
    throw NonFiniteError(fmt::format("green::Bvp: the bounded solution became non-finite (NaN or Inf) on a window of {} layers: the "
                                     "boundary-value problem is too ill-conditioned in double precision",
                                     L_));
  return u;
}

void Bvp::solve_full_transpose(const Seq& ubar, Eigen::VectorXd& gL, Seq& hbar, Eigen::VectorXd& gR) const {
  const long n = m_ + d_;
  // Adjoint of the back substitution u(l) = U11^{-1} (z_l - U12 u(l+1)), u(L) = S^{-1} f.
  Seq Q(d_, L_);
  Eigen::VectorXd acc = ubar.col(0);
  for (long l = 0; l < L_; ++l) {
    const Eigen::Map<Matrix> P = panel_(l);
    Q.col(l) = P.topRows(d_).triangularView<Eigen::Upper>().transpose().solve(acc);
    acc = ubar.col(l + 1);
    acc.noalias() -= U12_(l).transpose() * Q.col(l);
  }
  const Eigen::VectorXd fbar = Eigen::VectorXd(last_.transpose().solve(acc));
  gR = fbar.tail(d_ - m_);
  Eigen::VectorXd c = fbar.head(m_), v(n);
  hbar.resize(d_, L_);
  // Adjoint of the forward elimination, layer by layer backwards.
  for (long l = L_ - 1; l >= 0; --l) {
    const Eigen::Map<Matrix> P = panel_(l);
    const std::vector<int>& piv = ipiv_[static_cast<std::size_t>(l)];
    Eigen::VectorXd t = Q.col(l);
    if (m_ > 0) t.noalias() -= P.bottomRows(m_).transpose() * c;
    v.head(d_) = P.topRows(d_).triangularView<Eigen::UnitLower>().transpose().solve(t);
    v.tail(m_) = c;
    for (long i = d_ - 1; i >= 0; --i)
      if (piv[static_cast<std::size_t>(i)] != i) std::swap(v(i), v(piv[static_cast<std::size_t>(i)]));
    c = v.head(m_);
    hbar.col(l) = v.tail(d_);
  }
  gL = c;
}

Seq Bvp::solve(const Seq& h, Tails tails) const {
  check_seq(h, d_, L_, "green::Bvp::solve", "the forcing h");
  Eigen::VectorXd gL = Eigen::VectorXd::Zero(m_), gR = Eigen::VectorXd::Zero(d_ - m_);
  if (tails == Tails::Constant) {
    gL = ends_.left_rows * lu_left_.solve(h.col(0));
    gR = ends_.right_rows * lu_right_.solve(h.col(L_ - 1));
  }
  return solve_full(gL, h, gR);
}

Seq Bvp::solve_transpose(const Seq& ubar, Tails tails) const {
  check_seq(ubar, d_, L_ + 1, "green::Bvp::solve_transpose", "ubar");
  Eigen::VectorXd gL, gR;
  Seq hbar;
  solve_full_transpose(ubar, gL, hbar, gR);
  if (tails == Tails::Constant) {
    const Eigen::VectorXd wl = ends_.left_rows.transpose() * gL, wr = ends_.right_rows.transpose() * gR;
    hbar.col(0) += Eigen::VectorXd(lu_left_.transpose().solve(wl));
    hbar.col(L_ - 1) += Eigen::VectorXd(lu_right_.transpose().solve(wr));
  }
  return hbar;
}

double Bvp::residual(const Seq& u, const Seq& h) const {
  check_seq(u, d_, L_ + 1, "green::Bvp::residual", "u");
  check_seq(h, d_, L_, "green::Bvp::residual", "h");
  double r = 0;
  for (long l = 0; l < L_; ++l)
    r = std::max(r, (u.col(l + 1) - B_[static_cast<std::size_t>(l)] * u.col(l) - h.col(l)).norm());
  return r;
}

double Bvp::boundary_residual(const Seq& u, const Seq& h, Tails tails) const {
  check_seq(u, d_, L_ + 1, "green::Bvp::boundary_residual", "u");
  check_seq(h, d_, L_, "green::Bvp::boundary_residual", "h");
  Eigen::VectorXd ul = Eigen::VectorXd::Zero(d_), ur = Eigen::VectorXd::Zero(d_);
  if (tails == Tails::Constant) {
    ul = lu_left_.solve(h.col(0));
    ur = lu_right_.solve(h.col(L_ - 1));
  }
  const double a = m_ > 0 ? (ends_.left_rows * (u.col(0) - ul)).norm() : 0.0;
  const double b = m_ < d_ ? (ends_.right_rows * (u.col(L_) - ur)).norm() : 0.0;
  return std::max(a, b);
}

double Bvp::smallest_singular_value_estimate(int iterations) const {
  if (iterations < 1) throw std::invalid_argument("green::Bvp::smallest_singular_value_estimate: iterations must be >= 1");
  Rng rng(20261201, {0x5167});
  Eigen::VectorXd gL(m_), gR(d_ - m_);
  Seq h(d_, L_);
  for (long i = 0; i < m_; ++i) gL(i) = rng.normal();
  for (long i = 0; i < d_ - m_; ++i) gR(i) = rng.normal();
  for (long j = 0; j < L_; ++j)
    for (long i = 0; i < d_; ++i) h(i, j) = rng.normal();
  double best = 0;  // largest ||M^{-1} x|| over unit x seen
  for (int it = 0; it < iterations; ++it) {
    const double nx = std::sqrt(gL.squaredNorm() + h.squaredNorm() + gR.squaredNorm());
    if (!(nx > 0)) break;
    gL /= nx;
    h /= nx;
    gR /= nx;
    const Seq y = solve_full(gL, h, gR);
    const double ny = y.norm();
    if (!std::isfinite(ny)) return 0.0;
    best = std::max(best, ny);
    solve_full_transpose(y / ny, gL, h, gR);
  }
  return best > 0 ? 1.0 / best : std::numeric_limits<double>::infinity();
}

Matrix Bvp::dense_matrix() const {
  const long N = (L_ + 1) * d_;
  Matrix M = Matrix::Zero(N, N);
  if (m_ > 0) M.block(0, 0, m_, d_) = ends_.left_rows;
  for (long l = 0; l < L_; ++l) {
    M.block(m_ + l * d_, l * d_, d_, d_) = -B_[static_cast<std::size_t>(l)];
    M.block(m_ + l * d_, (l + 1) * d_, d_, d_) = Matrix::Identity(d_, d_);
  }
  if (d_ - m_ > 0) M.block(m_ + L_ * d_, L_ * d_, d_ - m_, d_) = ends_.right_rows;
  return M;
}

Bvp::SigmaMinCertificate Bvp::smallest_singular_value_certificate(long dense_max, double max_flops) const {
  const long N = (L_ + 1) * d_;
  const double eps = std::numeric_limits<double>::epsilon();
  if (N <= dense_max) {
    Eigen::BDCSVD<Matrix> svd(dense_matrix());
    if (svd.info() == Eigen::Success) {
      const Eigen::VectorXd& sv = svd.singularValues();
      return {std::max(0.0, sv(N - 1) - 4.0 * static_cast<double>(N) * eps * sv(0)), "exact"};
    }
  }
  const double flops = static_cast<double>(N) * 6.0 * static_cast<double>(L_) * static_cast<double>(d_) * static_cast<double>(d_);
  if (flops > max_flops) return {std::numeric_limits<double>::quiet_NaN(), "none"};
  // Columns of M^{-1}, one solve each: the largest column 1-norm and the largest row 1-norm.
  Eigen::VectorXd row_sums = Eigen::VectorXd::Zero(N);
  double col_max = 0;
  Eigen::VectorXd gL = Eigen::VectorXd::Zero(m_), gR = Eigen::VectorXd::Zero(d_ - m_);
  Seq h = Seq::Zero(d_, L_);
  for (long j = 0; j < N; ++j) {
    double* slot = j < m_ ? &gL(j) : (j < m_ + L_ * d_ ? &h((j - m_) % d_, (j - m_) / d_) : &gR(j - m_ - L_ * d_));
    *slot = 1.0;
    const Seq y = solve_full(gL, h, gR);
    *slot = 0.0;
    const Eigen::Map<const Eigen::VectorXd> v(y.data(), N);
    col_max = std::max(col_max, v.cwiseAbs().sum());
    row_sums += v.cwiseAbs();
  }
  const double bound = col_max * row_sums.maxCoeff();
  if (!std::isfinite(bound)) return {0.0, "lower bound"};
  return {bound > 0 ? 1.0 / std::sqrt(bound) * (1.0 - 4.0 * static_cast<double>(N) * eps) : std::numeric_limits<double>::infinity(),
          "lower bound"};
}

// ------------------------------------------------------------------------------------------------

Seq green_explicit(const cocycle::Cocycle& c, const cocycle::Bundles& b, const Seq& h, Tails tails) {
  const long L = c.length(), d = c.dim(), k = b.k;
  if (b.method != "two-sided" || b.first != 0 || static_cast<long>(b.P_plus.size()) != L + 1 ||
      static_cast<long>(b.T.size()) != L || static_cast<long>(b.U.size()) != L + 1)
    throw std::invalid_argument("green_explicit: expected the two-sided bundles (cocycle::two_sided_bundles) of the same cocycle");
  check_seq(h, d, L, "green_explicit", "the forcing h");
  const Matrix I = Matrix::Identity(d, d);
  // Q(j) = P_-(j+1) B(j): the forward step on V_perp, re-projected (exact by invariance, and keeps
  // the round-off of the growing part out).
  std::vector<Matrix> Q(static_cast<std::size_t>(L));
  std::vector<Eigen::PartialPivLU<Matrix>> Tinv(static_cast<std::size_t>(k > 0 ? L : 0));
  for (long j = 0; j < L; ++j) {
    Q[static_cast<std::size_t>(j)] = (I - b.P_plus[static_cast<std::size_t>(j + 1)]) * c.matrix(j);
    if (k > 0) Tinv[static_cast<std::size_t>(j)] = Eigen::PartialPivLU<Matrix>(b.T[static_cast<std::size_t>(j)]);
  }
  Seq u = Seq::Zero(d, L + 1);
  auto push_forward = [&](Eigen::VectorXd x, long from) {  // adds Phi(l, from) x for l >= from (x in V_perp(from))
    u.col(from) += x;
    for (long j = from; j < L; ++j) {
      x = Q[static_cast<std::size_t>(j)] * x;
      u.col(j + 1) += x;
    }
  };
  auto pull_back = [&](const Eigen::VectorXd& x, long from, long last, double sign) {
    // adds sign Phi(l, from) P_+(from) x for l = last, last-1, ..., 0 (restricted inverse on V_par)
    Eigen::VectorXd w = b.U[static_cast<std::size_t>(from)].transpose() * (b.P_plus[static_cast<std::size_t>(from)] * x);
    for (long j = from - 1; j >= 0; --j) {
      w = Tinv[static_cast<std::size_t>(j)].solve(w);
      if (j <= last) u.col(j) += sign * (b.U[static_cast<std::size_t>(j)] * w);
    }
  };
  if (tails == Tails::Constant) {
    // Closed-form tails: sum_{s<0} Phi(l,s+1) P_-(s+1) h_- = Phi(l,0) P_-(0) (I - B_left)^{-1} h_-, and
    // -sum_{s>=L} Phi(l,s+1) P_+(s+1) h_+ = Phi(l,L) P_+(L) (I - B_right)^{-1} h_+ (geometric series on
    // E^s(B_left) resp. E^u(B_right); the other spectral part is annihilated by P_-(0) resp. P_+(L)).
    const Eigen::VectorXd ubm = (I - c.matrix(0)).partialPivLu().solve(h.col(0));
    const Eigen::VectorXd ubp = (I - c.matrix(L - 1)).partialPivLu().solve(h.col(L - 1));
    push_forward((I - b.P_plus[0]) * ubm, 0);
    if (k > 0) {
      u.col(L) += b.P_plus[static_cast<std::size_t>(L)] * ubp;
      pull_back(ubp, L, L - 1, 1.0);
    }
  }
  for (long s = 0; s < L; ++s) {
    push_forward((I - b.P_plus[static_cast<std::size_t>(s + 1)]) * h.col(s), s + 1);
    if (k > 0) pull_back(h.col(s), s + 1, s, -1.0);
  }
  return u;
}

NormEstimate green_norm_estimate(const cocycle::Cocycle& c, const cocycle::Bundles& b, long pad, int max_iter,
                                 std::uint64_t seed) {
  if (pad < 0) throw std::invalid_argument("green_norm_estimate: pad must be >= 0");
  if (max_iter < 1) throw std::invalid_argument("green_norm_estimate: max_iter must be >= 1");
  const long L = c.length(), d = c.dim();
  std::vector<Matrix> B(static_cast<std::size_t>(L));
  for (long l = 0; l < L; ++l) B[static_cast<std::size_t>(l)] = c.matrix(l);
  NormEstimate est;
  if (pad == 0) {
    est.upper = cocycle::green_norm(c, b);
  } else {
    std::vector<Matrix> Bp;
    Bp.reserve(static_cast<std::size_t>(L + 2 * pad));
    for (long i = 0; i < pad; ++i) Bp.push_back(B.front());
    for (const Matrix& M : B) Bp.push_back(M);
    for (long i = 0; i < pad; ++i) Bp.push_back(B.back());
    const cocycle::Cocycle cp = cocycle::Cocycle::from_matrices(std::move(Bp));
    est.upper = cocycle::green_norm(cp, cocycle::two_sided_bundles(cp));
  }
  const Bvp bvp(B, make_ends(B.front(), B.back()));
  Rng rng(seed, {0x6e6f726d});
  Seq h(d, L);
  for (long j = 0; j < L; ++j) {
    for (long i = 0; i < d; ++i) h(i, j) = rng.normal();
    h.col(j).normalize();
  }
  double best = 0;
  for (int it = 0; it < max_iter; ++it) {
    const Seq u = bvp.solve(h, Tails::Zero);
    long lstar = 0;
    const double val = u.colwise().norm().maxCoeff(&lstar);
    est.iterations = it + 1;
    if (it > 0 && val <= best * (1 + 1e-12)) {
      best = std::max(best, val);
      break;
    }
    best = std::max(best, val);
    if (!(val > 0)) break;
    Seq ubar = Seq::Zero(d, L + 1);
    ubar.col(lstar) = u.col(lstar) / val;
    const Seq g = bvp.solve_transpose(ubar, Tails::Zero);
    for (long j = 0; j < L; ++j) {
      const double n = g.col(j).norm();
      h.col(j) = n > 0 ? Eigen::VectorXd(g.col(j) / n) : Eigen::VectorXd::Zero(d);
    }
  }
  est.lower = best;
  return est;
}

Lemma17Bound lemma17_bound(const cocycle::Cocycle& c, const cocycle::Bundles& b, long stride) {
  const cocycle::GrowthEnvelope g = cocycle::growth_envelope(c, b, stride);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const bool has_minus = b.k < c.dim(), has_plus = b.k > 0;
  Lemma17Bound best{std::numeric_limits<double>::infinity(), nan, nan, nan};
  for (int i = 1; i <= 49; ++i) {
    const double rm = 0.02 * i;
    for (int j = 1; j <= 50; ++j) {
      const double rp = 1.0 + 0.02 * j;
      const double C = std::max(has_minus ? cocycle::constant_minus(g, rm) : 1.0, has_plus ? cocycle::constant_plus(g, rp) : 1.0);
      const double bound = C * ((has_minus ? 1 / (1 - rm) : 0.0) + (has_plus ? 1 / (rp - 1) : 0.0));
      if (bound < best.bound) best = {bound, C, has_minus ? rm : nan, has_plus ? rp : nan};
      if (!has_plus) break;
    }
    if (!has_minus) break;
  }
  return best;
}

long exclusion_depth(double C, double r_minus, double r_plus, double tol) {
  if (!(C >= 1) || !std::isfinite(C) || !(r_minus > 0 && r_minus < 1) || !(r_plus > 1) || !(tol > 0))
    throw std::invalid_argument(fmt::format("green::exclusion_depth: C = {}, r_- = {}, r_+ = {}, tol = {}; expected C >= 1, "
                                            "0 < r_- < 1 < r_+, tol > 0",
                                            C, r_minus, r_plus, tol));
  const double r = std::max(r_minus, 1.0 / r_plus);
  return std::max(0L, static_cast<long>(std::ceil(std::log(C / tol) / std::log(1.0 / r))));
}

Eigen::VectorXd weight_tied_constant(const Matrix& A, const Eigen::VectorXd& h) {
  if (A.rows() < 1 || A.cols() != A.rows() || h.size() != A.rows())
    throw std::invalid_argument("green::weight_tied_constant: expected a non-empty square A and h of its size");
  Eigen::FullPivLU<Matrix> lu(A);
  if (!lu.isInvertible()) throw std::domain_error("green::weight_tied_constant: A is singular (1 is a growth scale of I + A)");
  return -lu.solve(h);
}

double sup_norm(const Seq& u, long first, long last) {
  if (last < 0) last = u.cols();
  if (first < 0 || first > last || last > u.cols())
    throw std::invalid_argument(fmt::format("green::sup_norm: columns [{}, {}) outside 0..{}", first, last, u.cols()));
  if (first == last) return 0.0;
  return u.middleCols(first, last - first).colwise().norm().maxCoeff();
}

std::pair<std::vector<double>, std::vector<double>> g4_sectors(long d) {
  if (d < 1) throw std::invalid_argument("green::g4_sectors: d must be >= 1");
  const long kp = (d + 1) / 2;
  std::vector<double> m(static_cast<std::size_t>(d)), v(static_cast<std::size_t>(d));
  for (long i = 0; i < d; ++i) {
    m[static_cast<std::size_t>(i)] = i < kp ? -0.6 : -0.5;
    v[static_cast<std::size_t>(i)] = i < kp ? 0.8 : 0.2;
  }
  return {m, v};
}

std::vector<Matrix> saddle_family(const std::string& family, long d, long L, double knob, std::uint64_t seed) {
  if (d < 1 || L < 1) throw std::invalid_argument(fmt::format("green::saddle_family: d = {}, L = {}; expected both >= 1", d, L));
  const long kp = (d + 1) / 2;
  if (family == "g1") {
    std::vector<double> sigma(static_cast<std::size_t>(d));
    for (long i = 0; i < d; ++i) {
      const double t = i < kp ? (kp > 1 ? static_cast<double>(i) / static_cast<double>(kp - 1) : 0.0)
                              : (d - kp > 1 ? static_cast<double>(i - kp) / static_cast<double>(d - kp - 1) : 0.0);
      sigma[static_cast<std::size_t>(i)] = i < kp ? 0.25 - 0.15 * t : -0.3 - 0.2 * t;
    }
    return cocycle::family_g1(L, sigma, knob, seed);
  }
  if (family == "g3") {
    std::vector<double> base(static_cast<std::size_t>(d));
    // Distinct levels (a repeated diagonal entry of a triangular end map would be a defective
    // eigenvalue): persistent 1.2..1.5 on the even indices, decaying 0.7..0.4 on the odd ones.
    const long np = (d + 1) / 2, nm = d / 2;
    for (long i = 0; i < d; ++i) {
      const long j = i / 2;
      base[static_cast<std::size_t>(i)] = i % 2 == 0 ? 1.2 + 0.3 * static_cast<double>(j) / static_cast<double>(std::max(1L, np - 1))
                                                     : 0.7 - 0.3 * static_cast<double>(j) / static_cast<double>(std::max(1L, nm - 1));
    }
    // Alternating levels interleave persistent and decaying directions through the triangle
    // (non-normal coupling in both orders); d odd: one more persistent.
    return cocycle::family_g3(L, base, "periodic", 0.1, 6, 3, knob, seed);
  }
  if (family == "g4") {
    const auto [m, v] = g4_sectors(d);
    return cocycle::family_g4(L, m, v, 1.0, knob, seed);
  }
  throw std::invalid_argument(fmt::format("green::saddle_family: unknown family '{}'; expected g1, g3 or g4", family));
}

}  // namespace tokdyn::green
