// LAPACK's robust symmetric drivers (dsyevr, dsyevd) on the calling thread. See symmetric_eigen.hpp.
#include "tokdyn/core/symmetric_eigen.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tokdyn/core/linalg.hpp"

extern "C" {
void dsyevr_(const char* jobz, const char* range, const char* uplo, const int* n, double* a, const int* lda,
             const double* vl, const double* vu, const int* il, const int* iu, const double* abstol, int* m, double* w,
             double* z, const int* ldz, int* isuppz, double* work, const int* lwork, int* iwork, const int* liwork,
             int* info);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info);
}

namespace tokdyn {

namespace {

void check_input(const Eigen::MatrixXd& A, const char* who) {
  if (A.rows() != A.cols())
    throw std::invalid_argument(fmt::format("{}: expected a square matrix, got {} x {}", who, A.rows(), A.cols()));
  if (A.rows() > 46340)  // n^2 must fit LAPACK's 32-bit integers
    throw std::invalid_argument(fmt::format("{}: n = {} is above LAPACK's 32-bit limit 46340", who, A.rows()));
  if (!A.allFinite()) throw std::invalid_argument(fmt::format("{}: the matrix has non-finite entries", who));
}

// dsyevr on a copy of A; vectors when Z != nullptr; with largest_only, only the largest
// eigenvalue (RANGE = 'I', IL = IU = n: bisection on the tridiagonal form) into w(0). Returns
// LAPACK's info.
int syevr(const Eigen::MatrixXd& A, Eigen::VectorXd& w, Eigen::MatrixXd* Z, bool largest_only = false) {
  const int n = static_cast<int>(A.rows());
  Eigen::MatrixXd a = A;
  w.resize(n);
  const char jobz = Z ? 'V' : 'N', range = largest_only ? 'I' : 'A', uplo = 'L';
  const double vl = 0, vu = 0, abstol = 0;  // abstol 0: LAPACK's own safe default accuracy
  const int il = largest_only ? n : 0, iu = largest_only ? n : 0, lda = std::max(1, n);
  int m = 0, info = 0;
  if (Z) Z->resize(n, n);
  const int ldz = std::max(1, n);
  std::vector<int> isuppz(static_cast<std::size_t>(2 * std::max(1, n)));
  double* z = Z ? Z->data() : nullptr;
  double dummy_z = 0;
  if (!z) z = &dummy_z;
  single_threaded_blas([&] {
    int lwork = -1, liwork = -1, iwq = 0;
    double wq = 0;
    dsyevr_(&jobz, &range, &uplo, &n, a.data(), &lda, &vl, &vu, &il, &iu, &abstol, &m, w.data(), z, &ldz,
            isuppz.data(), &wq, &lwork, &iwq, &liwork, &info);
    if (info == 0) {
      lwork = std::max(1, static_cast<int>(wq));
      liwork = std::max(1, iwq);
      std::vector<double> work(static_cast<std::size_t>(lwork));
      std::vector<int> iwork(static_cast<std::size_t>(liwork));
      dsyevr_(&jobz, &range, &uplo, &n, a.data(), &lda, &vl, &vu, &il, &iu, &abstol, &m, w.data(), z, &ldz,
              isuppz.data(), work.data(), &lwork, iwork.data(), &liwork, &info);
    }
  });
  if (info == 0 && m != (largest_only ? 1 : n)) info = -1000;  // as many as were asked for
  return info;
}

int syevd(const Eigen::MatrixXd& A, Eigen::VectorXd& w, Eigen::MatrixXd& Z) {
  const int n = static_cast<int>(A.rows());
  Z = A;
  w.resize(n);
  const char jobz = 'V', uplo = 'L';
  const int lda = std::max(1, n);
  int info = 0;
  single_threaded_blas([&] {
    int lwork = -1, liwork = -1, iwq = 0;
    double wq = 0;
    dsyevd_(&jobz, &uplo, &n, Z.data(), &lda, w.data(), &wq, &lwork, &iwq, &liwork, &info);
    if (info == 0) {
      lwork = std::max(1, static_cast<int>(wq));
      liwork = std::max(1, iwq);
      std::vector<double> work(static_cast<std::size_t>(lwork));
      std::vector<int> iwork(static_cast<std::size_t>(liwork));
      dsyevd_(&jobz, &uplo, &n, Z.data(), &lda, w.data(), work.data(), &lwork, iwork.data(), &liwork, &info);
    }
  });
  return info;
}

}  // namespace

Eigen::VectorXd lapack_symmetric_eigenvalues(const Eigen::MatrixXd& A) {
  check_input(A, "symmetric eigenvalues");
  Eigen::VectorXd w;
  if (A.rows() == 0) return w;
  const int info = syevr(A, w, nullptr);
  // dsyevr falls back to bisection by itself; a nonzero info here means LAPACK broke its contract.
  if (info != 0) throw std::logic_error(fmt::format("symmetric eigenvalues: LAPACK dsyevr returned info = {} (n = {})", info, A.rows()));
  return w;
}

double lapack_symmetric_largest_eigenvalue(const Eigen::MatrixXd& A) {
  check_input(A, "largest symmetric eigenvalue");
  if (A.rows() == 0) throw std::invalid_argument("largest symmetric eigenvalue: expected n >= 1, got an empty matrix");
  Eigen::VectorXd w;
  const int info = syevr(A, w, nullptr, true);
  if (info != 0)
    throw std::logic_error(fmt::format("largest symmetric eigenvalue: LAPACK dsyevr returned info = {} (n = {})", info, A.rows()));
  return w(0);
}

SymmetricEigen lapack_symmetric_eigen(const Eigen::MatrixXd& A) {
  check_input(A, "symmetric eigen-decomposition");
  SymmetricEigen out;
  if (A.rows() == 0) return out;
  int info = syevd(A, out.values, out.vectors);
  if (info != 0) {
    const int info2 = syevr(A, out.values, &out.vectors);
    if (info2 != 0)
      throw std::logic_error(fmt::format("symmetric eigen-decomposition: LAPACK dsyevd info = {}, dsyevr info = {} (n = {})",
                                         info, info2, A.rows()));
  }
  return out;
}

Eigen::VectorXd lapack_diagonal_pencil_eigenvalues(const Eigen::MatrixXd& A, const Eigen::VectorXd& D) {
  if (D.size() != A.rows())
    throw std::invalid_argument(fmt::format("pencil eigenvalues: D has {} entries for a {} x {} matrix", D.size(), A.rows(), A.cols()));
  if (!(D.array() > 0).all() || !D.allFinite())
    throw std::invalid_argument("pencil eigenvalues: expected a finite positive diagonal D");
  const Eigen::VectorXd s = D.cwiseSqrt().cwiseInverse();
  const Eigen::MatrixXd B = s.asDiagonal() * A * s.asDiagonal();
  return lapack_symmetric_eigenvalues(B);
}

}  // namespace tokdyn
