// Synthetic cocycle families G1–G5, the R9 non-normal pair and the R10(c) switching sequence.
// See analysis/cocycle_families.hpp.
#include "tokdyn/analysis/cocycle_families.hpp"

#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "tokdyn/core/parallel.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn::cocycle {

namespace {
// Stream tags: one per family, so that two families never share random numbers.
constexpr std::uint64_t kG1 = 0xc0c1, kG2 = 0xc0c2, kG3 = 0xc0c3, kG4 = 0xc0c4, kG5 = 0xc0c5;

Matrix gaussian(long r, long c, Rng& rng) {
  Matrix M(r, c);
  for (long j = 0; j < c; ++j)
    for (long i = 0; i < r; ++i) M(i, j) = rng.normal();
  return M;
}

Matrix random_orthogonal(long d, Rng& rng) {
  Matrix Q, R;
  qr_signfixed(gaussian(d, d, rng), Q, R);  // Haar with the sign fix diag(R) > 0
  return Q;
}

// exp(X) by scaling and squaring with a Taylor polynomial (small matrices, ||X|| moderate).
Matrix expm(const Matrix& X) {
  const double n = X.cwiseAbs().rowwise().sum().maxCoeff();
  int s = 0;
  while (n / std::ldexp(1.0, s) > 0.25) ++s;
  const Matrix Y = X / std::ldexp(1.0, s);
  Matrix E = Matrix::Identity(X.rows(), X.cols()), term = E;
  for (int k = 1; k <= 20; ++k) {
    term = (term * Y / static_cast<double>(k)).eval();
    E += term;
  }
  for (int i = 0; i < s; ++i) E = (E * E).eval();
  return E;
}

void check_L(long L, const char* who) {
  if (L < 1) throw std::invalid_argument(fmt::format("{}: L = {}; expected L >= 1", who, L));
}
}  // namespace

Matrix family_g1_basis(long d, double kappa, std::uint64_t seed) {
  if (d < 1 || !(kappa >= 1.0)) throw std::invalid_argument(fmt::format("family G1: d = {}, kappa = {}; expected d >= 1 and kappa >= 1", d, kappa));
  Rng rng(seed, {kG1});
  const Matrix Q1 = random_orthogonal(d, rng), Q2 = random_orthogonal(d, rng);
  Eigen::VectorXd s(d);
  for (long i = 0; i < d; ++i) s(i) = d == 1 ? 1.0 : std::pow(kappa, -static_cast<double>(i) / static_cast<double>(d - 1));
  return Q1 * s.asDiagonal() * Q2;
}

std::vector<Matrix> family_g1(long L, const std::vector<double>& sigma, double kappa, std::uint64_t seed) {
  check_L(L, "family G1");
  const long d = static_cast<long>(sigma.size());
  const Matrix S = family_g1_basis(d, kappa, seed);
  const Eigen::VectorXd sg = Eigen::Map<const Eigen::VectorXd>(sigma.data(), d);
  const Matrix B = Matrix::Identity(d, d) + S * sg.asDiagonal() * S.inverse();
  return std::vector<Matrix>(static_cast<std::size_t>(L), B);
}

Eigen::VectorXd family_g2_diagonal(long d, double a_lo, double a_hi, std::uint64_t seed) {
  if (d < 1 || !(a_lo <= a_hi)) throw std::invalid_argument(fmt::format("family G2: d = {}, a in [{}, {}]; expected d >= 1 and a_lo <= a_hi", d, a_lo, a_hi));
  Rng rng(seed, {kG2});
  Eigen::VectorXd a(d);
  for (long i = 0; i < d; ++i) a(i) = std::exp(-std::exp(rng.uniform(a_lo, a_hi)));
  return a;
}

std::vector<Matrix> family_g2(long L, long d, double a_lo, double a_hi, std::uint64_t seed) {
  check_L(L, "family G2");
  const Matrix B = family_g2_diagonal(d, a_lo, a_hi, seed).asDiagonal();
  return std::vector<Matrix>(static_cast<std::size_t>(L), B);
}

std::vector<Matrix> family_g3(long L, const std::vector<double>& base, const std::string& mode, double amp, long period,
                              long run0, double b, std::uint64_t seed) {
  check_L(L, "family G3");
  const long d = static_cast<long>(base.size());
  if (d < 1) throw std::invalid_argument("family G3: empty diagonal; expected at least one base level");
  if (!(amp >= 0 && amp < 1)) throw std::invalid_argument(fmt::format("family G3: amp = {}; expected 0 <= amp < 1", amp));
  if (mode != "constant" && mode != "periodic" && mode != "switching")
    throw std::invalid_argument("family G3: mode '" + mode + "'; expected constant, periodic or switching");
  if (period < 2 || run0 < 1) throw std::invalid_argument("family G3: expected period >= 2 and run0 >= 1");
  Rng rng(seed, {kG3});
  std::vector<Matrix> out;
  out.reserve(static_cast<std::size_t>(L));
  long run_len = run0, run_pos = 0;
  bool high = true;
  for (long l = 0; l < L; ++l) {
    double f = 1.0;  // factor applied to every base level at this layer
    if (mode == "periodic") f = (l % period) < period / 2 ? 1.0 + amp : 1.0 - amp;
    if (mode == "switching") {
      f = high ? 1.0 + amp : 1.0 - amp;
      if (++run_pos == run_len) {
        run_pos = 0;
        run_len *= 2;
        high = !high;
      }
    }
    Matrix B = Matrix::Zero(d, d);
    for (long i = 0; i < d; ++i) {
      B(i, i) = base[static_cast<std::size_t>(i)] * f;
      for (long j = i + 1; j < d; ++j) B(i, j) = rng.uniform(-b, b);
    }
    out.push_back(std::move(B));
  }
  return out;
}

std::vector<Matrix> family_g4(long L, const std::vector<double>& m, const std::vector<double>& v, double lambda,
                              double omega, std::uint64_t seed) {
  check_L(L, "family G4");
  const long d = static_cast<long>(m.size());
  if (d < 1 || static_cast<long>(v.size()) != d)
    throw std::invalid_argument(fmt::format("family G4: {} values of m and {} of v; expected the same number >= 1", m.size(), v.size()));
  Rng rng(seed, {kG4});
  Matrix K = gaussian(d, d, rng);
  K = (K - K.transpose()).eval();
  const double kn = d > 1 ? Eigen::JacobiSVD<Matrix>(K).singularValues()(0) : 0.0;
  if (kn > 0) K /= kn;
  const Eigen::VectorXd mv = Eigen::Map<const Eigen::VectorXd>(m.data(), d), vv = Eigen::Map<const Eigen::VectorXd>(v.data(), d);
  std::vector<Matrix> out;
  out.reserve(static_cast<std::size_t>(L));
  for (long l = 0; l < L; ++l) {
    const Matrix R = expm(omega * static_cast<double>(l) * K);
    const Matrix M = R * mv.asDiagonal() * R.transpose(), V = R * vv.asDiagonal() * R.transpose();
    out.push_back(Matrix::Identity(d, d) + M + lambda * V);
  }
  return out;
}

std::vector<Matrix> family_g5(long L, long d, double scale, double delta, long smooth, std::uint64_t seed) {
  check_L(L, "family G5");
  if (d < 1 || smooth < 0) throw std::invalid_argument(fmt::format("family G5: d = {}, smooth = {}; expected d >= 1, smooth >= 0", d, smooth));
  const double rs = 1.0 / std::sqrt(static_cast<double>(d));
  Rng base(seed, {kG5, 0});
  const Matrix A0 = scale * rs * gaussian(d, d, base);
  auto draw = [&](long idx) {  // E drawn from its own stream: layer order and threads do not matter
    Rng rng(seed, {kG5, 1, static_cast<std::uint64_t>(idx)});
    return Matrix(rs * gaussian(d, d, rng));
  };
  // On every core (parallel_map: one matrix per thread; every draw has its own stream, so the bits
  // do not depend on the thread count): the knots (smooth > 0), then the layers.
  std::vector<Matrix> knots;
  if (smooth > 0) knots = parallel_map((L - 1) / smooth + 2, draw);
  return parallel_map(L, [&](long l) {
    Matrix E;
    if (smooth == 0) {
      E = draw(l);
    } else {
      const long kidx = l / smooth;
      const Matrix& E0 = knots[static_cast<std::size_t>(kidx)];
      const Matrix& E1 = knots[static_cast<std::size_t>(kidx + 1)];
      const double w = static_cast<double>(l % smooth) / static_cast<double>(smooth);
      E = (1.0 - w) * E0 + w * E1;
    }
    return Matrix(Matrix::Identity(d, d) + A0 + delta * E);
  });
}

std::vector<Matrix> nonnormal_pair(long L) {
  check_L(L, "nonnormal_pair");
  Matrix B1(2, 2), B2(2, 2);
  B1 << 0.5, 2.0, 0.0, 0.5;
  B2 << 0.5, 0.0, 2.0, 0.5;
  std::vector<Matrix> out;
  for (long l = 0; l < L; ++l) out.push_back(l % 2 == 0 ? B1 : B2);
  return out;
}

std::vector<Matrix> switching_scalar(long L, double lo, double hi, long run0) {
  check_L(L, "switching_scalar");
  if (run0 < 1) throw std::invalid_argument("switching_scalar: run0 must be >= 1");
  std::vector<Matrix> out;
  long run_len = run0, pos = 0;
  bool high = true;
  for (long l = 0; l < L; ++l) {
    out.push_back(Matrix::Constant(1, 1, high ? hi : lo));
    if (++pos == run_len) {
      pos = 0;
      run_len *= 2;
      high = !high;
    }
  }
  return out;
}


}  // namespace tokdyn::cocycle
