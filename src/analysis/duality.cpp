// The depth–coarse-grain duality (coupling paper Thm 6, Remark 6, App. B.2): see analysis/duality.hpp.
#include "tokdyn/analysis/duality.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/analysis/frozen_kernel.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/norms.hpp"

namespace tokdyn::duality {
namespace {


void check_layers(const SectorFlow& f, long l0, long l1, const char* what) {
  if (l0 < 0 || l1 < l0 || l1 > f.length())
    throw std::invalid_argument(fmt::format("{}: layers [{}, {}] outside the flow's depth 0..{}", what, l0, l1, f.length()));
}

void check_P(int P, long T, const char* what) {
  if (P < 1 || P > T) throw std::invalid_argument(fmt::format("{}: block length P = {}, expected 1 <= P <= T = {}", what, P, T));
}

}  // namespace

Matrix SectorFlow::sector(long l, double lambda) const {
  return B0.at(static_cast<std::size_t>(l)) + lambda * B1.at(static_cast<std::size_t>(l));
}

std::vector<Matrix> SectorFlow::sector_sequence(double lambda, long first, long last) const {
  if (last < 0) last = length();
  std::vector<Matrix> out;
  for (long l = first; l < last; ++l) out.push_back(sector(l, lambda));
  return out;
}

cocycle::Cocycle SectorFlow::tangent() const { return cocycle::Cocycle::from_matrices(sector_sequence(1.0)); }

SectorFlow from_reference(const tf::Reference& ref, tf::Form form) {
  SectorFlow f;
  for (const auto& g : ref.layers) {
    const long d = g.V.rows();
    const Matrix I = Matrix::Identity(d, d);
    if (form == tf::Form::Exact) {
      const Matrix IM = I + Matrix(g.M_tilde);
      f.B0.push_back(IM);
      f.B1.push_back(IM * Matrix(g.V));
    } else {
      f.B0.push_back(I + Matrix(g.M_paper));
      f.B1.push_back(Matrix(g.V));
    }
  }
  if (f.B0.empty()) throw std::invalid_argument("sector flow: the reference has no layers");
  return f;
}

SectorFlow from_g4(long L, const std::vector<double>& m, const std::vector<double>& v, double omega, std::uint64_t seed) {
  const auto B0 = cocycle::family_g4(L, m, v, 0.0, omega, seed);
  const auto B1 = cocycle::family_g4(L, m, v, 1.0, omega, seed);
  SectorFlow f;
  for (std::size_t l = 0; l < B0.size(); ++l) {
    f.B0.push_back(B0[l]);
    f.B1.push_back(B1[l] - B0[l]);  // V(l) = (I + M + V) - (I + M)
  }
  return f;
}

Mat full_step(const SectorFlow& f, long l, int P, const Mat& dX) {
  check_P(P, dX.rows(), "full_step");
  const Mat B0 = f.B0.at(static_cast<std::size_t>(l)), B1 = f.B1.at(static_cast<std::size_t>(l));
  // alpha*_blk dX: within each block, row t (1-based in the block) is the mean of rows 1..t.
  Mat A(dX.rows(), dX.cols());
  for (Eigen::Index a = 0; a < dX.rows(); a += P) {
    RowVec s = RowVec::Zero(dX.cols());
    const Eigen::Index n = std::min<Eigen::Index>(P, dX.rows() - a);
    for (Eigen::Index t = 0; t < n; ++t) {
      s += dX.row(a + t);
      A.row(a + t) = s / static_cast<double>(t + 1);
    }
  }
  Mat out = dX * B0.transpose() + A * B1.transpose();
  // Every depth loop of the coupling presets advances through here: an overflow is exit 4, not NaN rows.
  if (!out.allFinite())
    throw NonFiniteError(fmt::format("duality::full_step: the tangent state became non-finite (NaN or Inf) at layer {}: the "
                                     "cocycle overflowed; use a shorter depth L or a smaller weight scale",
                                     l + 1));
  return out;
}

Mat full_flow(const SectorFlow& f, int P, const Mat& dX, long l0, long l1) {
  check_layers(f, l0, l1, "full_flow");
  Mat X = dX;
  for (long l = l0; l < l1; ++l) X = full_step(f, l, P, X);
  return X;
}

Matrix full_matrix(const SectorFlow& f, int n, long l0, long l1) {
  check_layers(f, l0, l1, "full_matrix");
  const long d = f.dim();
  Matrix M(n * d, n * d);
  Mat E = Mat::Zero(n, d);
  for (int t = 0; t < n; ++t)
    for (long i = 0; i < d; ++i) {
      E(t, i) = 1.0;
      const Mat Y = full_flow(f, n, E, l0, l1);
      E(t, i) = 0.0;
      M.col(t * d + i) = Eigen::Map<const Eigen::VectorXd>(Y.data(), n * d);  // row-major vec
    }
  return M;
}

Matrix tangent_product(const SectorFlow& f, long l0, long l1) {
  check_layers(f, l0, l1, "tangent_product");
  Matrix P = Matrix::Identity(f.dim(), f.dim());
  for (long l = l0; l < l1; ++l) P = f.sector(l, 1.0) * P;
  return P;
}

Mat heads(const Mat& dX, int P) { return fk::head_tokens(dX, P); }
Mat homogeneous_part(const Mat& dX, int P) { return dX - fk::fluctuation(dX, P); }

Mat iota(const Mat& Y, int T, int P) {
  check_P(P, T, "iota");
  const int K = (T + P - 1) / P;
  if (Y.rows() != K) throw std::invalid_argument(fmt::format("iota: {} block values, expected K = {}", Y.rows(), K));
  Mat X(T, Y.cols());
  for (int t = 0; t < T; ++t) X.row(t) = Y.row(t / P);
  return X;
}

Mat compress_blocks(const hier::Compression& c, const Mat& X, int P) {
  check_P(P, X.rows(), "compress_blocks");
  const int T = static_cast<int>(X.rows()), K = (T + P - 1) / P;
  Mat Y(K, X.cols());
  for (int b = 0; b < K; ++b) {
    const int a = b * P, n = std::min(P, T - a);
    Y.row(b) = hier::compress(c, X.middleRows(a, n)).transpose();
  }
  return Y;
}

Matrix iota_matrix(int n, long d) {
  Matrix I(n * d, d);
  for (int t = 0; t < n; ++t) I.middleRows(t * d, d) = Matrix::Identity(d, d);
  return I;
}

Envelope envelope(const std::vector<Matrix>& B, long H, long stride) {
  if (B.empty()) throw std::invalid_argument("envelope: empty cocycle");
  const cocycle::Cocycle c = cocycle::Cocycle::from_matrices(B);
  cocycle::QrOptions o;
  o.k = 1;
  const auto qr = cocycle::qr_iterate(c, o);
  Envelope e;
  e.r = cocycle::bohl_intervals(qr.log_diag, std::min<long>(H, static_cast<long>(B.size()))).at(0).upper;
  const long L = static_cast<long>(B.size());
  for (long s = 0; s < L; s += std::max<long>(1, stride)) {
    Matrix P = Matrix::Identity(B[0].rows(), B[0].cols());
    for (long n = 1; s + n <= L; ++n) {
      P = B[static_cast<std::size_t>(s + n - 1)] * P;
      e.C = std::max(e.C, spectral_norm(P) / std::pow(e.r, static_cast<double>(n)));
    }
  }
  return e;
}

Envelope fluctuation_envelope(const SectorFlow& f, int P, long H, long stride) {
  if (P < 2) throw std::invalid_argument(fmt::format("fluctuation_envelope: P = {}, expected >= 2 (no fluctuation sector)", P));
  Envelope out;
  for (int j = 2; j <= P; ++j) {
    const Envelope e = envelope(f.sector_sequence(1.0 / j), H, stride);
    out.r = std::max(out.r, e.r);
  }
  // One C_f for the common rate r_f: max_j max_{s,n} |Phi_j(s+n, s)| / r_f^n.
  const long L = f.length();
  for (int j = 2; j <= P; ++j) {
    const auto S = f.sector_sequence(1.0 / j);
    for (long s = 0; s < L; s += std::max<long>(1, stride)) {
      Matrix Pm = Matrix::Identity(f.dim(), f.dim());
      for (long n = 1; s + n <= L; ++n) {
        Pm = S[static_cast<std::size_t>(s + n - 1)] * Pm;
        out.C = std::max(out.C, spectral_norm(Pm) / std::pow(out.r, static_cast<double>(n)));
      }
    }
  }
  return out;
}

std::vector<double> sharp_constant(const SectorFlow& f, int T, int P) {
  check_P(P, T, "sharp_constant");
  std::vector<int> lengths = {P};
  if (T % P) lengths.push_back(T % P);
  const long L = f.length(), d = f.dim();
  std::vector<double> out(static_cast<std::size_t>(L + 1), 0.0);
  for (int n : lengths) {
    if (n < 2) continue;  // a one-token block has no fluctuation
    // The fluctuation subspace {head = 0} of one block: the unit vectors at positions 2..n.
    Matrix F = Matrix::Zero(n * d, (n - 1) * d);
    for (long c = 0; c < (n - 1) * d; ++c) F(d + c, c) = 1.0;
    for (long l = 0; l <= L; ++l) {
      out[static_cast<std::size_t>(l)] = std::max(out[static_cast<std::size_t>(l)], spectral_norm(F));
      if (l == L) break;
      Matrix G(F.rows(), F.cols());
      for (long c = 0; c < F.cols(); ++c) {
        Mat X = Eigen::Map<const Mat>(F.col(c).data(), n, d);  // row-major vec -> n x d
        const Mat Y = full_step(f, l, n, X);
        G.col(c) = Eigen::Map<const Eigen::VectorXd>(Y.data(), n * d);
      }
      F = G;
    }
  }
  return out;
}

double remark6_error(const SectorFlow& f, const hier::Compression& pi, int n, long l, long l0) {
  if (l0 < 0 || l0 > l) throw std::invalid_argument(fmt::format("remark6_error: l0 = {}, expected 0 <= l0 <= l = {}", l0, l));
  const long d = f.dim();
  const Matrix full = full_matrix(f, n, 0, l), head = full_matrix(f, n, 0, l0);
  const Matrix Pi = hier::compression_matrix(pi, Mat::Zero(n, d));
  const Matrix E = full - iota_matrix(n, d) * tangent_product(f, l0, l) * Pi * head;
  return spectral_norm(E);
}

std::vector<Matrix> aligned_same_index(const cocycle::Bundles& b, double c_plus, double c_minus) {
  std::vector<Matrix> out;
  for (const Matrix& Pp : b.P_plus) out.push_back(c_plus * Pp + c_minus * (Matrix::Identity(Pp.rows(), Pp.cols()) - Pp));
  if (!out.empty()) out.pop_back();  // layers 0..L-1
  return out;
}

std::vector<Matrix> aligned_intertwining(const std::vector<Matrix>& B, const cocycle::Bundles& b, double c_plus, double c_minus) {
  if (b.P_plus.size() != B.size() + 1)
    throw std::invalid_argument(fmt::format("aligned_intertwining: {} projectors for {} layers, expected L + 1", b.P_plus.size(), B.size()));
  const std::vector<Matrix> D = aligned_same_index(b, c_plus, c_minus);
  std::vector<Matrix> out;
  for (std::size_t l = 0; l < B.size(); ++l) out.push_back(B[l] * D[l]);
  return out;
}

double intertwining_residual(const std::vector<Matrix>& M, const cocycle::Bundles& b) {
  if (b.P_plus.size() != M.size() + 1)
    throw std::invalid_argument(fmt::format("intertwining_residual: {} projectors for {} layers, expected L + 1", b.P_plus.size(), M.size()));
  double r = 0.0;
  for (std::size_t l = 0; l < M.size(); ++l) r = std::max(r, spectral_norm(b.P_plus[l + 1] * M[l] - M[l] * b.P_plus[l]));
  return r;
}

}  // namespace tokdyn::duality
