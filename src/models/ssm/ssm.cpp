#include "tokdyn/models/ssm/ssm.hpp"

#include <cmath>
#include <type_traits>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokdyn/core/linalg.hpp"
#include "tokdyn/core/nn.hpp"
#include "tokdyn/core/parallel.hpp"
#include "tokdyn/core/sphere.hpp"

namespace tokdyn {

void SsmParams::validate(bool need_gate) const {
  const Eigen::Index nn = alpha.size();
  // The shapes are built by tokdyn (designs, random draws): a mismatch is a bug (std::logic_error,
  // error.hpp). The entries' values come from the user's parameters: std::invalid_argument.
  auto bad_shape = [](const std::string& what) { throw std::logic_error("SsmParams: " + what); };
  if (nn < 1) bad_shape("expected n >= 1, got 0");
  if (W_delta.rows() != nn || W_delta.cols() != nn) bad_shape("expected W_delta n x n");
  if (b_delta.size() != nn) bad_shape("expected b_delta with n entries");
  if (S_B.cols() != nn || S_C.cols() != nn || S_B.rows() != S_C.rows() || S_B.rows() < 1)
    bad_shape("expected S_B and S_C both m x n with m >= 1");
  if (need_gate && (W_g.rows() != nn || W_g.cols() != nn || b_g.size() != nn))
    bad_shape("the gate expected W_g (n x n) and b_g (n)");
  if (!alpha.allFinite() || !W_delta.allFinite() || !b_delta.allFinite() || !S_B.allFinite() || !S_C.allFinite())
    throw std::invalid_argument("SsmParams: expected finite weights, got NaN or Inf entries");
}

void ssm_branches(const SsmParams& p, const SsmOptions& o, const Tokens& Z, SsmBranches& out) {
  const Eigen::Index n = p.n(), m = p.m(), N = Z.rows();
  const bool gate = o.gate == GateKind::Silu;
  // The branch products as one product with the stacked weights [W_delta; S_B; S_C (; W_g)], in
  // fixed tiles (linalg.hpp): the same bits on any thread count. One N x (n + 2m) product instead of
  // three is 13 % faster at the ssm-random-silu preset's size (2500 x 1024 x 768: 38 against 44 ms
  // on 2 threads), since the m = 128 column products alone run at 70 % of the large one's rate.
  Mat Ws(n + 2 * m + (gate ? n : 0), n);
  Ws.topRows(n) = p.W_delta;
  Ws.middleRows(n, m) = p.S_B;
  Ws.middleRows(n + m, m) = p.S_C;
  if (gate) Ws.bottomRows(n) = p.W_g;
  Mat S;
  gemm_nt_blocked(Z, Ws, S);
  out.Delta.resize(N, n);
  out.A.resize(N, n);
  out.Bz.resize(N, m);
  out.Cz.resize(N, m);
  if (gate) out.G.resize(N, n);
  const auto alpha = p.alpha.transpose().array();
  // Elementwise transcendentals, row by row in parallel (each row independent: same bits on
  // any thread count), reading the stacked product's row and writing the branches:
  // Delta = softplus(Z W^T + b) = max(x, 0) + log1p(exp(-|x|)),
  // A = exp(-alpha Delta) (the scalar of A_i^mu = a I_m), SiLU on the branches, the gate.
  // A thread team only pays off for real work: small problems (the theory's 4-dimensional flows
  // call this at every RK4 stage) stay on the calling thread.
#pragma omp parallel for schedule(static) if (N * (Z.cols() + 2 * p.m()) >= 65536)
  for (Eigen::Index i = 0; i < N; ++i) {
    const auto s = S.row(i);
    auto d = out.Delta.row(i).array();
    d = s.head(n).array() + p.b_delta.transpose().array();
    d = nn::softplus(d);
    out.A.row(i).array() = (-(d * alpha)).exp();
    auto b = out.Bz.row(i).array();
    auto c = out.Cz.row(i).array();
    b = s.segment(n, m).array();
    c = s.segment(n + m, m).array();
    if (o.silu_bc) {
      b = nn::silu(b);
      c = nn::silu(c);
    }
    if (gate) {
      auto g = out.G.row(i).array();
      g = s.tail(n).array() + p.b_g.transpose().array();
      g = nn::silu(g);
    }
  }
  if (o.gate == GateKind::Constant) {
    out.G.setConstant(Z.rows(), Z.cols(), o.gate_const);
  } else if (o.gate == GateKind::Off) {
    out.G.resize(0, 0);
  }
}

void ssm_readout(SsmForm form, const SsmParams& p, const SsmBranches& br, const Tokens& Z,
                 Eigen::Index row0, int len, Tokens& R) {
  const int n = p.n(), m = p.m();
  // a_l^mu = exp(-alpha^mu Delta_l^mu): the scalar of A_l^mu = a I_m.
  const auto a = br.A.middleRows(row0, len);
  if (form == SsmForm::Recurrence) {
    // (1): h_i^mu = a_i^mu h_{i-1}^mu + Delta_i^mu z_i^mu B_i,  r_i^mu = C_i . h_i^mu,
    // with h_0 = 0; H holds h^mu as row mu (n x m).
    Mat H = Mat::Zero(n, m);
    for (int i = 0; i < len; ++i) {
      const Eigen::Index row = row0 + i;
      for (int mu = 0; mu < n; ++mu) {
        const double in = br.Delta(row, mu) * Z(row, mu);
        H.row(mu) = a(i, mu) * H.row(mu) + in * br.Bz.row(row);
      }
      R.row(row).noalias() = (H * br.Cz.row(row).transpose()).transpose();
    }
    return;
  }
  // Lemma II.1: r_i = sum_{j<=i} K_ij (lambda_ij ⊙ z_j), K_ij = C_i . B_j (= z_i^T S_BC z_j
  // without SiLU), lambda_ij^mu = Delta_j^mu prod_{l=j+1}^{i} a_l^mu (running product, so
  // underflow goes to 0 gracefully and no exp of a difference of prefix sums is needed).
  const Mat K = br.Cz.middleRows(row0, len) * br.Bz.middleRows(row0, len).transpose();
  Mat W(len, n);  // w_j = Delta_j ⊙ z_j
  for (int j = 0; j < len; ++j) W.row(j) = br.Delta.row(row0 + j).cwiseProduct(Z.row(row0 + j));
  // Channel by channel the sums are independent: blocks of kBlock channels keep their running
  // decay and sum in registers across the (i, j) pairs instead of reading and writing two rows of
  // n doubles per pair. The same operations in the same order for every channel, whatever the block.
  constexpr int kBlock = 32;
  auto block = [&](int c0, auto width) {
    constexpr int cb = decltype(width)::value;
    for (int i = 0; i < len; ++i) {
      double acc[cb], decay[cb];
      for (int c = 0; c < cb; ++c) {
        acc[c] = 0.0;
        decay[c] = 1.0;
      }
      for (int j = i; j >= 0; --j) {
        const double kij = K(i, j);
        const double* w = &W(j, c0);
        for (int c = 0; c < cb; ++c) acc[c] += kij * (decay[c] * w[c]);
        if (j > 0) {
          const double* aj = &br.A(row0 + j, c0);
          for (int c = 0; c < cb; ++c) decay[c] *= aj[c];
        }
      }
      double* out = &R(row0 + i, c0);
      for (int c = 0; c < cb; ++c) out[c] = acc[c];
    }
  };
  int c0 = 0;
  for (; c0 + kBlock <= n; c0 += kBlock) block(c0, std::integral_constant<int, kBlock>{});
  for (; c0 < n; ++c0) block(c0, std::integral_constant<int, 1>{});
}

Vec step_sizes(const SsmParams& p, const RowVec& z) {
  Vec d = p.W_delta * z.transpose() + p.b_delta;
  return d.unaryExpr([](double x) { return nn::softplus(x); });
}

Vec io_lambda(const SsmParams& p, const Tokens& Z, int i, int j) {
  if (j > i) throw std::logic_error("io_lambda: expected j <= i, got j = " + std::to_string(j) + ", i = " + std::to_string(i));
  const Vec dj = step_sizes(p, Z.row(j));
  Vec dsum = Vec::Zero(p.n());
  for (int l = j + 1; l <= i; ++l) dsum += step_sizes(p, Z.row(l));
  Vec out(p.n());
  for (int mu = 0; mu < p.n(); ++mu) out[mu] = dj[mu] * std::exp(-p.alpha[mu] * dsum[mu]);
  return out;
}

double interaction_kernel(const SsmParams& p, bool silu_bc, const RowVec& zi, const RowVec& zj) {
  if (!silu_bc) return zi.dot(p.S_BC() * zj.transpose());
  const Vec c = (p.S_C * zi.transpose()).unaryExpr([](double x) { return nn::silu(x); });
  const Vec b = (p.S_B * zj.transpose()).unaryExpr([](double x) { return nn::silu(x); });
  return c.dot(b);
}

SsmLayer::SsmLayer(std::shared_ptr<const WeightSchedule<SsmParams>> sched, SsmOptions opt, SsmForm form)
    : sched_(std::move(sched)), opt_(opt), form_(form) {
  if (!(opt_.tau > 0.0)) throw std::invalid_argument("SsmLayer: expected tau > 0, got " + std::to_string(opt_.tau));
}

void SsmLayer::apply(long k, Batch& Z) const {
  const auto p = sched_->at_layer(k);
  SsmBranches br;
  ssm_branches(*p, opt_, Z.Z, br);
  bool want_q = false;
  for (TapObserver* w : watchers_) want_q = want_q || w->wants("q", k);
  if (want_q) {  // q_i = C_i . B_i of the state entering layer k (§VI-B), from the same branches
    Mat q(Z.runs, Z.len);
    for (int r = 0; r < Z.runs; ++r)
      for (int i = 0; i < Z.len; ++i) {
        const Eigen::Index row = static_cast<Eigen::Index>(r) * Z.len + i;
        q(r, i) = br.Cz.row(row).dot(br.Bz.row(row));
      }
    for (TapObserver* w : watchers_)
      if (w->wants("q", k)) w->tap("q", k, q.data(), {static_cast<std::size_t>(Z.runs), static_cast<std::size_t>(Z.len)});
  }
  Tokens R(Z.Z.rows(), Z.Z.cols());
  ParallelErrors errors;  // e.g. std::bad_alloc: it must not leave the parallel region
  // Run by run: the readout reads only its own run's rows of Z, so each run's rows are updated
  // (gate, z + tau r, back onto the sphere) right after, on the same thread, while they are in cache.
#pragma omp parallel for schedule(static) if (Z.runs > 1 && Z.Z.size() * Z.len >= 65536)
  for (int r = 0; r < Z.runs; ++r) try {
    const Eigen::Index row0 = static_cast<Eigen::Index>(r) * Z.len;
    ssm_readout(form_, *p, br, Z.Z, row0, Z.len, R);
    auto Rr = R.middleRows(row0, Z.len);
    if (br.G.size() > 0) Rr = Rr.cwiseProduct(br.G.middleRows(row0, Z.len));
    Z.Z.middleRows(row0, Z.len) += opt_.tau * Rr;
    project_rows(Z.Z.middleRows(row0, Z.len));
  } catch (...) {
    errors.capture();
  }
  errors.rethrow();
}

void SsmLayer::interaction_terms(long k, const Batch& Z, Mat& q) const {
  const auto p = sched_->at_layer(k);
  Mat Bz, Cz;
  gemm_nt_blocked(Z.Z, p->S_B, Bz);
  gemm_nt_blocked(Z.Z, p->S_C, Cz);
  if (opt_.silu_bc) {
    Bz = Bz.unaryExpr([](double x) { return nn::silu(x); });
    Cz = Cz.unaryExpr([](double x) { return nn::silu(x); });
  }
  q.resize(Z.runs, Z.len);
  for (int r = 0; r < Z.runs; ++r)
    for (int i = 0; i < Z.len; ++i) {
      const Eigen::Index row = static_cast<Eigen::Index>(r) * Z.len + i;
      q(r, i) = Cz.row(row).dot(Bz.row(row));
    }
}

SsmFlow::SsmFlow(std::shared_ptr<const WeightSchedule<SsmParams>> sched, SsmOptions opt)
    : sched_(std::move(sched)), opt_(opt) {}

void SsmFlow::eval(double t, const Batch& Z, Tokens& dZ) const {
  const auto p = sched_->at_time(t);
  SsmBranches br;
  ssm_branches(*p, opt_, Z.Z, br);
  dZ.resize(Z.Z.rows(), Z.Z.cols());
  for (int r = 0; r < Z.runs; ++r)
    ssm_readout(SsmForm::InputOutput, *p, br, Z.Z, static_cast<Eigen::Index>(r) * Z.len, Z.len, dZ);
  if (br.G.size() > 0) dZ = dZ.cwiseProduct(br.G);
  // (5): the tangent projection at z_i, (I - z_i z_i^T) on the sphere; off the sphere (inside
  // adaptive stages) the norm-preserving extension (I - x x^T/|x|^2).
  for (Eigen::Index i = 0; i < dZ.rows(); ++i)
    dZ.row(i) -= (Z.Z.row(i).dot(dZ.row(i)) / Z.Z.row(i).squaredNorm()) * Z.Z.row(i);
}


// ---------------------------------------------------------------- linearisation

namespace {


}  // namespace

void ssm_tangent(const SsmParams& p, const SsmOptions& o, const Batch& Zb, const Tokens& V, Tokens& Y, Tokens& dY) {
  const Tokens& Z = Zb.Z;
  if (V.rows() != Z.rows() || V.cols() != Z.cols()) throw std::logic_error("ssm_tangent: expected V with the shape of Z");
  const int n = p.n();
  const Eigen::Index N = Z.rows();
  // Pre-activations and their tangents (the maps are linear in z before the nonlinearity).
  const Mat xD = (Z * p.W_delta.transpose()).rowwise() + p.b_delta.transpose(), dxD = V * p.W_delta.transpose();
  Mat B = Z * p.S_B.transpose(), dB = V * p.S_B.transpose();
  Mat C = Z * p.S_C.transpose(), dC = V * p.S_C.transpose();
  if (o.silu_bc) {
    for (Eigen::Index i = 0; i < B.size(); ++i) {
      dB.data()[i] *= nn::silu_derivative(B.data()[i]);
      B.data()[i] = nn::silu(B.data()[i]);
      dC.data()[i] *= nn::silu_derivative(C.data()[i]);
      C.data()[i] = nn::silu(C.data()[i]);
    }
  }
  Mat Delta(N, n), dDelta(N, n), A(N, n), dlogA(N, n);
  for (Eigen::Index i = 0; i < N; ++i)
    for (int mu = 0; mu < n; ++mu) {
      const double x = xD(i, mu);
      Delta(i, mu) = nn::softplus(x);
      dDelta(i, mu) = nn::sigmoid(x) * dxD(i, mu);
      A(i, mu) = std::exp(-p.alpha[mu] * Delta(i, mu));
      dlogA(i, mu) = -p.alpha[mu] * dDelta(i, mu);
    }
  Y.resize(N, n);
  dY.resize(N, n);
  // r_i = sum_{j<=i} K_ij (lambda_ij ⊙ w_j), w_j = Delta_j ⊙ z_j, lambda_ij = prod_{l=j+1..i} a_l:
  // dr_i = sum_j [dK_ij lambda w_j + K_ij lambda ⊙ (dlog lambda_ij ⊙ w_j + dw_j)].
  for (int r = 0; r < Zb.runs; ++r) {
    const Eigen::Index r0 = static_cast<Eigen::Index>(r) * Zb.len;
    const int len = Zb.len;
    const Mat K = C.middleRows(r0, len) * B.middleRows(r0, len).transpose();
    const Mat dK = dC.middleRows(r0, len) * B.middleRows(r0, len).transpose() +
                   C.middleRows(r0, len) * dB.middleRows(r0, len).transpose();
    Mat W(len, n), dW(len, n);
    for (int j = 0; j < len; ++j) {
      W.row(j) = Delta.row(r0 + j).cwiseProduct(Z.row(r0 + j));
      dW.row(j) = dDelta.row(r0 + j).cwiseProduct(Z.row(r0 + j)) + Delta.row(r0 + j).cwiseProduct(V.row(r0 + j));
    }
    RowVec decay(n), dlog(n), acc(n), dacc(n);
    for (int i = 0; i < len; ++i) {
      decay.setOnes();
      dlog.setZero();
      acc.setZero();
      dacc.setZero();
      for (int j = i; j >= 0; --j) {
        const RowVec lw = decay.cwiseProduct(W.row(j));
        acc += K(i, j) * lw;
        dacc += dK(i, j) * lw + K(i, j) * decay.cwiseProduct(dlog.cwiseProduct(W.row(j)) + dW.row(j));
        if (j > 0) {
          decay = decay.cwiseProduct(A.row(r0 + j));
          dlog += dlogA.row(r0 + j);
        }
      }
      Y.row(r0 + i) = acc;
      dY.row(r0 + i) = dacc;
    }
  }
  if (o.gate == GateKind::Silu) {
    const Mat xg = (Z * p.W_g.transpose()).rowwise() + p.b_g.transpose(), dxg = V * p.W_g.transpose();
    for (Eigen::Index i = 0; i < N; ++i)
      for (int mu = 0; mu < n; ++mu) {
        const double g = nn::silu(xg(i, mu)), dg = nn::silu_derivative(xg(i, mu)) * dxg(i, mu);
        dY(i, mu) = dY(i, mu) * g + Y(i, mu) * dg;
        Y(i, mu) *= g;
      }
  } else if (o.gate == GateKind::Constant) {
    Y *= o.gate_const;
    dY *= o.gate_const;
  }
}

void SsmLayer::jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const {
  const auto p = sched_->at_layer(k);
  Tokens Y, dY;
  ssm_tangent(*p, opt_, Z, V, Y, dY);
  const Tokens U = Z.Z + opt_.tau * Y;
  const Tokens dU = V + opt_.tau * dY;
  out = dU;
  retraction_derivative_rows(U, out);
}

void SsmFlow::jvp(double t, const Batch& Z, const Tokens& V, Tokens& out) const {
  const auto p = sched_->at_time(t);
  Tokens Y, dY;
  ssm_tangent(*p, opt_, Z, V, Y, dY);
  // f = y - (<x, y>/|x|^2) x:  df = dy - c v - dc x,  c = <x, y>/|x|^2,
  // dc = (<v, y> + <x, dy>)/|x|^2 - 2 <x, y> <x, v>/|x|^4.
  out.resize(Z.Z.rows(), Z.Z.cols());
  for (Eigen::Index i = 0; i < Y.rows(); ++i) {
    const auto x = Z.Z.row(i);
    const auto v = V.row(i);
    const double xx = x.squaredNorm(), xy = x.dot(Y.row(i));
    const double c = xy / xx;
    const double dc = (v.dot(Y.row(i)) + x.dot(dY.row(i))) / xx - 2.0 * xy * x.dot(v) / (xx * xx);
    out.row(i) = dY.row(i) - c * v - dc * x;
  }
}

}  // namespace tokdyn
