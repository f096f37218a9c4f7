#include "tokdyn/models/ssm.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "tokdyn/linalg.hpp"
#include "tokdyn/sphere.hpp"

namespace tokdyn {

double softplus(double x) { return x > 0.0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
double silu(double x) { return x / (1.0 + std::exp(-x)); }

void SsmParams::validate(bool need_gate) const {
  const Eigen::Index nn = alpha.size();
  auto bad = [](const std::string& what) { throw std::invalid_argument("SsmParams: " + what); };
  if (nn < 1) bad("n must be >= 1");
  if (W_delta.rows() != nn || W_delta.cols() != nn) bad("W_delta must be n x n");
  if (b_delta.size() != nn) bad("b_delta must have n entries");
  if (S_B.cols() != nn || S_C.cols() != nn || S_B.rows() != S_C.rows() || S_B.rows() < 1)
    bad("S_B and S_C must both be m x n with m >= 1");
  if (need_gate && (W_g.rows() != nn || W_g.cols() != nn || b_g.size() != nn)) bad("gate needs W_g (n x n) and b_g (n)");
  if (!alpha.allFinite() || !W_delta.allFinite() || !b_delta.allFinite() || !S_B.allFinite() || !S_C.allFinite())
    bad("non-finite entries");
}

void ssm_branches(const SsmParams& p, const SsmOptions& o, const Tokens& Z, SsmBranches& out) {
  // The branch products in fixed tiles (linalg.hpp): the same bits on any thread count.
  gemm_nt_blocked(Z, p.W_delta, out.Delta);
  gemm_nt_blocked(Z, p.S_B, out.Bz);
  gemm_nt_blocked(Z, p.S_C, out.Cz);
  if (o.gate == GateKind::Silu) gemm_nt_blocked(Z, p.W_g, out.G);
  out.A.resize(Z.rows(), Z.cols());
  const Eigen::Index N = Z.rows();
  const auto alpha = p.alpha.transpose().array();
  // Elementwise transcendentals, row by row in parallel (each row independent: same bits on
  // any thread count): Delta = softplus(Z W^T + b) = max(x, 0) + log1p(exp(-|x|)),
  // A = exp(-alpha Delta) (the scalar of A_i^mu = a I_m), SiLU on the branches, the gate.
  // A thread team only pays off for real work: small problems (the theory's 4-dimensional flows
  // call this at every RK4 stage) stay on the calling thread.
#pragma omp parallel for schedule(static) if (N * (Z.cols() + 2 * p.m()) >= 65536)
  for (Eigen::Index i = 0; i < N; ++i) {
    auto d = out.Delta.row(i).array();
    d += p.b_delta.transpose().array();
    d = d.max(0.0) + (-d.abs()).exp().log1p();
    out.A.row(i).array() = (-(d * alpha)).exp();
    if (o.silu_bc) {
      auto b = out.Bz.row(i).array();
      auto c = out.Cz.row(i).array();
      b = b / (1.0 + (-b).exp());
      c = c / (1.0 + (-c).exp());
    }
    if (o.gate == GateKind::Silu) {
      auto g = out.G.row(i).array();
      g += p.b_g.transpose().array();
      g = g / (1.0 + (-g).exp());
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
  RowVec decay(n), acc(n);
  for (int i = 0; i < len; ++i) {
    decay.setOnes();
    acc.setZero();
    for (int j = i; j >= 0; --j) {
      acc += K(i, j) * decay.cwiseProduct(W.row(j));
      if (j > 0) decay = decay.cwiseProduct(a.row(j));
    }
    R.row(row0 + i) = acc;
  }
}

Vec step_sizes(const SsmParams& p, const RowVec& z) {
  Vec d = p.W_delta * z.transpose() + p.b_delta;
  return d.unaryExpr([](double x) { return softplus(x); });
}

Vec io_lambda(const SsmParams& p, const Tokens& Z, int i, int j) {
  if (j > i) throw std::invalid_argument("io_lambda: need j <= i");
  const Vec dj = step_sizes(p, Z.row(j));
  Vec dsum = Vec::Zero(p.n());
  for (int l = j + 1; l <= i; ++l) dsum += step_sizes(p, Z.row(l));
  Vec out(p.n());
  for (int mu = 0; mu < p.n(); ++mu) out[mu] = dj[mu] * std::exp(-p.alpha[mu] * dsum[mu]);
  return out;
}

double interaction_kernel(const SsmParams& p, bool silu_bc, const RowVec& zi, const RowVec& zj) {
  if (!silu_bc) return zi.dot(p.S_BC() * zj.transpose());
  const Vec c = (p.S_C * zi.transpose()).unaryExpr([](double x) { return silu(x); });
  const Vec b = (p.S_B * zj.transpose()).unaryExpr([](double x) { return silu(x); });
  return c.dot(b);
}

SsmLayer::SsmLayer(std::shared_ptr<const WeightSchedule<SsmParams>> sched, SsmOptions opt, SsmForm form)
    : sched_(std::move(sched)), opt_(opt), form_(form) {
  if (!(opt_.tau > 0.0)) throw std::invalid_argument("SsmLayer: tau must be > 0");
}

void SsmLayer::apply(long k, Batch& Z) const {
  const auto p = sched_->at_layer(k);
  SsmBranches br;
  ssm_branches(*p, opt_, Z.Z, br);
  if (sink_) {  // q_i = C_i . B_i of the state entering layer k (§VI-B), from the same branches
    Mat q(Z.runs, Z.len);
    for (int r = 0; r < Z.runs; ++r)
      for (int i = 0; i < Z.len; ++i) {
        const Eigen::Index row = static_cast<Eigen::Index>(r) * Z.len + i;
        q(r, i) = br.Cz.row(row).dot(br.Bz.row(row));
      }
    sink_(k, q);
  }
  Tokens R(Z.Z.rows(), Z.Z.cols());
#pragma omp parallel for schedule(static) if (Z.runs > 1 && Z.Z.size() * Z.len >= 65536)
  for (int r = 0; r < Z.runs; ++r)
    ssm_readout(form_, *p, br, Z.Z, static_cast<Eigen::Index>(r) * Z.len, Z.len, R);
  if (br.G.size() > 0) R = R.cwiseProduct(br.G);
  Z.Z += opt_.tau * R;
  project_rows(Z.Z);
}

void SsmLayer::interaction_terms(long k, const Batch& Z, Mat& q) const {
  const auto p = sched_->at_layer(k);
  Mat Bz, Cz;
  gemm_nt_blocked(Z.Z, p->S_B, Bz);
  gemm_nt_blocked(Z.Z, p->S_C, Cz);
  if (opt_.silu_bc) {
    Bz = Bz.unaryExpr([](double x) { return silu(x); });
    Cz = Cz.unaryExpr([](double x) { return silu(x); });
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

}  // namespace tokdyn
