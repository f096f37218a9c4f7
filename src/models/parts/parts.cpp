// Transformer parts with their exact tangents (models/parts/parts.hpp).
#include "tokdyn/models/parts/parts.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace tokdyn::parts {

template <class S>
S act_value(Act a, S u) {
  switch (a) {
    case Act::Gelu:  // u Phi(u) with Phi through erfc: no cancellation for negative u
      return S(0.5) * u * std::erfc(-u * S(0.70710678118654752440));
    case Act::GeluTanh: {
      const S c = S(0.79788456080286535588);  // sqrt(2/pi)
      return S(0.5) * u * (S(1) + std::tanh(c * (u + S(0.044715) * u * u * u)));
    }
    case Act::Silu:
      return u / (S(1) + std::exp(-u));
    case Act::Relu:
      return u > S(0) ? u : S(0);
    case Act::Tanh:
      return std::tanh(u);
  }
  return u;
}

template <class S>
S act_derivative(Act a, S u) {
  switch (a) {
    case Act::Gelu: {
      const S Phi = S(0.5) * std::erfc(-u * S(0.70710678118654752440));
      const S phi = S(0.39894228040143267794) * std::exp(S(-0.5) * u * u);
      return Phi + u * phi;
    }
    case Act::GeluTanh: {
      const S c = S(0.79788456080286535588);
      const S t = std::tanh(c * (u + S(0.044715) * u * u * u));
      return S(0.5) * (S(1) + t) + S(0.5) * u * (S(1) - t * t) * c * (S(1) + S(3) * S(0.044715) * u * u);
    }
    case Act::Silu: {
      const S s = S(1) / (S(1) + std::exp(-u));
      return s * (S(1) + u * (S(1) - s));
    }
    case Act::Relu:
      return u > S(0) ? S(1) : S(0);
    case Act::Tanh: {
      const S t = std::tanh(u);
      return S(1) - t * t;
    }
  }
  return S(1);
}

template float act_value<float>(Act, float);
template double act_value<double>(Act, double);
template float act_derivative<float>(Act, float);
template double act_derivative<double>(Act, double);

template <class S>
void norm_rows(NormKind kind, const MatT<S>& X, const VecT<S>& w, const VecT<S>& b, double eps, MatT<S>& Y, long r0, long r1,
               S* inv) {
  const Eigen::Index d = X.cols();
  const S e = static_cast<S>(eps);
  const bool bias = b.size() == d;
  for (long i = r0; i < r1; ++i) {
    const S* x = X.data() + i * d;
    S* y = Y.data() + i * d;
    if (kind == NormKind::LayerNorm) {
      S mu = 0;
      for (Eigen::Index j = 0; j < d; ++j) mu += x[j];
      mu /= static_cast<S>(d);
      S var = 0;
      for (Eigen::Index j = 0; j < d; ++j) var += (x[j] - mu) * (x[j] - mu);
      var /= static_cast<S>(d);
      const S r = S(1) / std::sqrt(var + e);
      if (inv) inv[i] = r;
      for (Eigen::Index j = 0; j < d; ++j) y[j] = (x[j] - mu) * r * w[j] + (bias ? b[j] : S(0));
    } else {
      S ms = 0;
      for (Eigen::Index j = 0; j < d; ++j) ms += x[j] * x[j];
      ms /= static_cast<S>(d);
      const S r = S(1) / std::sqrt(ms + e);
      if (inv) inv[i] = r;
      for (Eigen::Index j = 0; j < d; ++j) y[j] = w[j] * (x[j] * r);
    }
  }
}

template void norm_rows<float>(NormKind, const MatF&, const VecF&, const VecF&, double, MatF&, long, long, float*);
template void norm_rows<double>(NormKind, const Mat&, const Vec&, const Vec&, double, Mat&, long, long, double*);

void norm_tangent_rows(NormKind kind, const Mat& X, const double* inv, const Vec& w, const Mat& dX, Mat& dY, long r0, long r1) {
  const Eigen::Index d = X.cols(), RT = X.rows();
  std::vector<double> n(static_cast<std::size_t>(d)), dx(static_cast<std::size_t>(d));
  for (long j = r0; j < r1; ++j) {
    const long i = j % RT;
    const double* x = X.data() + i * d;
    const double* v = dX.data() + j * d;
    double* y = dY.data() + j * d;
    const double r = inv[i];
    if (kind == NormKind::LayerNorm) {
      double mu = 0, mv = 0;
      for (Eigen::Index c = 0; c < d; ++c) {
        mu += x[c];
        mv += v[c];
      }
      mu /= static_cast<double>(d);
      mv /= static_cast<double>(d);
      double s = 0;
      for (Eigen::Index c = 0; c < d; ++c) {
        n[c] = (x[c] - mu) * r;
        dx[c] = v[c] - mv;
        s += n[c] * dx[c];
      }
      s /= static_cast<double>(d);
      for (Eigen::Index c = 0; c < d; ++c) y[c] = w[c] * r * (dx[c] - n[c] * s);
    } else {
      double s = 0;
      for (Eigen::Index c = 0; c < d; ++c) {
        n[c] = x[c] * r;
        s += n[c] * v[c];
      }
      s /= static_cast<double>(d);
      for (Eigen::Index c = 0; c < d; ++c) y[c] = w[c] * r * (v[c] - n[c] * s);
    }
  }
}

std::vector<double> rotary_frequencies(int rot_dims, double theta) {
  if (rot_dims <= 0 || rot_dims % 2) throw std::invalid_argument("rotary_frequencies: expected an even positive number of dimensions");
  std::vector<double> f(static_cast<std::size_t>(rot_dims / 2));
  for (int i = 0; i < rot_dims / 2; ++i) f[static_cast<std::size_t>(i)] = std::pow(theta, -2.0 * i / rot_dims);
  return f;
}

RotaryTable::RotaryTable(const std::vector<double>& freqs, int T, bool inter)
    : rot_dims(static_cast<int>(2 * freqs.size())), interleaved(inter) {
  const Eigen::Index P = static_cast<Eigen::Index>(freqs.size());
  cos.resize(T, P);
  sin.resize(T, P);
  for (int p = 0; p < T; ++p)
    for (Eigen::Index i = 0; i < P; ++i) {
      const double a = p * freqs[static_cast<std::size_t>(i)];
      cos(p, i) = std::cos(a);
      sin(p, i) = std::sin(a);
    }
}

RotaryTable::RotaryTable(const std::vector<double>& freqs, const std::vector<double>& positions, bool inter)
    : rot_dims(static_cast<int>(2 * freqs.size())), interleaved(inter) {
  const Eigen::Index P = static_cast<Eigen::Index>(freqs.size()), T = static_cast<Eigen::Index>(positions.size());
  cos.resize(T, P);
  sin.resize(T, P);
  for (Eigen::Index p = 0; p < T; ++p)
    for (Eigen::Index i = 0; i < P; ++i) {
      const double a = freqs[static_cast<std::size_t>(i)] * positions[static_cast<std::size_t>(p)];
      cos(p, i) = std::cos(a);
      sin(p, i) = std::sin(a);
    }
}

Mat score_bias(const MaskSpec& m, int T) {
  const double ninf = -std::numeric_limits<double>::infinity();
  const double leak = m.kind == MaskKind::Leaky ? std::log(m.eps_leak) : 0.0;
  Mat B = Mat::Zero(T, T);
  for (int t = 0; t < T; ++t)
    for (int s = 0; s < T; ++s) {
      bool allowed = true;
      double b = 0.0;
      switch (m.kind) {
        case MaskKind::Causal: allowed = s <= t; break;
        case MaskKind::Bidirectional: break;
        case MaskKind::Block: allowed = s <= t && s / m.block == t / m.block; break;
        case MaskKind::Sliding: allowed = s <= t && t - s < m.window; break;
        case MaskKind::Leaky:
          if (s > t) b = leak;
          break;
      }
      if (m.alibi_slope != 0.0) b -= m.alibi_slope * std::abs(t - s);
      B(t, s) = allowed ? b : ninf;
    }
  return B;
}

template <class S>
void rotary_rows(const RotaryTable& R, MatT<S>& M, long c0, int heads, int hd, int T, long r0, long r1, bool inverse) {
  const int half = R.rot_dims / 2;
  for (long row = r0; row < r1; ++row) {
    const long p = row % T;
    S* m = M.data() + row * M.cols();
    for (int h = 0; h < heads; ++h) {
      S* x = m + c0 + static_cast<long>(h) * hd;
      for (int i = 0; i < half; ++i) {
        const S c = static_cast<S>(R.cos(p, i)), s = inverse ? -static_cast<S>(R.sin(p, i)) : static_cast<S>(R.sin(p, i));
        const int a = R.interleaved ? 2 * i : i, b = R.interleaved ? 2 * i + 1 : i + half;
        const S xa = x[a], xb = x[b];
        x[a] = xa * c - xb * s;
        x[b] = xb * c + xa * s;
      }
    }
  }
}

template void rotary_rows<float>(const RotaryTable&, MatF&, long, int, int, int, long, long, bool);
template void rotary_rows<double>(const RotaryTable&, Mat&, long, int, int, int, long, long, bool);

}  // namespace tokdyn::parts
