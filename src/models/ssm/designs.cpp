#include "tokdyn/models/ssm/designs.hpp"

#include <Eigen/Eigenvalues>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include "tokdyn/core/constants.hpp"

namespace tokdyn {

namespace {

using tokdyn::kPi;
SsmParams channels(std::initializer_list<double> alpha, std::initializer_list<double> b) {
  const int n = static_cast<int>(alpha.size());
  SsmParams p;
  p.alpha.resize(n);
  p.b_delta.resize(n);
  int k = 0;
  for (double a : alpha) p.alpha[k++] = a;
  k = 0;
  for (double v : b) p.b_delta[k++] = v;
  p.W_delta = Mat::Zero(n, n);
  p.S_B = Mat::Identity(n, n);
  p.S_C = Mat::Identity(n, n);
  return p;
}

}  // namespace

SsmParams design_g1() { return channels({0.0, 0.5, 0.5, 0.5}, {1.0, -1.0, -1.5, -2.0}); }

SsmParams design_g1_decay(double alpha_principal) {
  SsmParams p = design_g1();
  p.alpha[0] = alpha_principal;
  return p;
}

SsmParams design_g1_perturbed(Rng& rng, double w_sd) {
  SsmParams p = design_g1();
  rng.fill_normal(p.W_delta, w_sd);
  return p;
}

SsmParams design_tie_channels() { return channels({0.0, 0.0, 0.5, 0.5}, {1.0, 1.0, -1.5, -2.0}); }

Mat ani2_kernel(double k, double d) {
  Mat S(2, 2);
  S << 1.0, k, -k, d;
  return S;
}

SsmParams design_ani2(double k, double d) {
  SsmParams p = channels({0.0, 0.5}, {1.0, -1.0});
  set_interaction_kernel(p, ani2_kernel(k, d));
  return p;
}

void set_interaction_kernel(SsmParams& p, const Mat& S_BC, int m, const Mat& Q) {
  const int n = p.n();
  if (S_BC.rows() != n || S_BC.cols() != n) throw std::logic_error("set_interaction_kernel: expected S_BC n x n");
  if (m == 0) m = Q.size() ? static_cast<int>(Q.rows()) : n;
  if (m < n)
    throw std::invalid_argument("set_interaction_kernel: a prescribed S_BC expected m >= n = " + std::to_string(n) +
                                ", got m = " + std::to_string(m));
  // S_C = Q [I_n; 0], S_B = Q [S_BC; 0] (our design): S_C^T S_B = [I 0] Q^T Q [S_BC; 0] = S_BC.
  Mat C = Mat::Zero(m, n), B = Mat::Zero(m, n);
  C.topRows(n).setIdentity();
  B.topRows(n) = S_BC;
  if (Q.size()) {
    if (Q.rows() != m || Q.cols() != m) throw std::logic_error("set_interaction_kernel: expected Q m x m");
    p.S_C.noalias() = Q * C;
    p.S_B.noalias() = Q * B;
  } else {
    p.S_C = std::move(C);
    p.S_B = std::move(B);
  }
}

SkewRotation::SkewRotation(const Mat& K0) {
  const Eigen::Index m = K0.rows();
  if (K0.cols() != m) throw std::logic_error("SkewRotation: expected a square K0");
  if ((K0 + K0.transpose()).cwiseAbs().maxCoeff() > 1e-12 * std::max(1.0, K0.cwiseAbs().maxCoeff()))
    throw std::invalid_argument("SkewRotation: expected a skew-symmetric K0");
  if (m == 0) return;
  // Real Schur form K0 = U T U^T; T is block diagonal for a normal matrix, with 2x2 blocks
  // [[a, b], [c, a]], a ~ 0, c ~ -b: exp(t T) is a rotation by omega = (b - c)/2 per block.
  Eigen::RealSchur<Eigen::MatrixXd> rs(Eigen::MatrixXd(K0), true);
  U_ = rs.matrixU();
  const Eigen::MatrixXd& T = rs.matrixT();
  for (Eigen::Index k = 0; k < m;) {
    if (k + 1 < m && std::abs(T(k + 1, k)) > 0.0) {
      block_start_.push_back(static_cast<int>(k));
      omega_.push_back(0.5 * (T(k, k + 1) - T(k + 1, k)));
      k += 2;
    } else {
      k += 1;  // a zero eigenvalue: exp = 1
    }
  }
}

Mat SkewRotation::at(double t) const {
  const Eigen::Index m = U_.rows();
  Mat R = Mat::Identity(m, m);
  for (std::size_t b = 0; b < omega_.size(); ++b) {
    const int k = block_start_[b];
    const double c = std::cos(omega_[b] * t), s = std::sin(omega_[b] * t);
    R(k, k) = c;
    R(k, k + 1) = s;
    R(k + 1, k) = -s;
    R(k + 1, k + 1) = c;
  }
  return U_ * R * U_.transpose();
}

Mat random_skew(Rng& rng, int m, double scale) {
  Mat A(m, m);
  rng.fill_normal(A, scale);
  return 0.5 * (A - A.transpose());
}

double g_iso(double t) { return 1.0 + 0.5 * std::sin(t); }
double g_pe(double t) { return 1.0 + 1.2 * std::sin(2.0 * kPi * t); }
double g_pef(double t) { return 1.0 + 2.0 * std::sin(2.0 * kPi * t); }
double G_iso(double t) { return t + 0.5 * (1.0 - std::cos(t)); }
double G_pe(double t) { return t + 1.2 / (2.0 * kPi) * (1.0 - std::cos(2.0 * kPi * t)); }
double G_pef(double t) { return t + (1.0 / kPi) * (1.0 - std::cos(2.0 * kPi * t)); }

namespace {

/// Builds the parameters at time t: channels of `base`, kernel S_BC(t), realised with Q(t).
std::function<SsmParams(double)> realiser(SsmParams base, KernelFn S_BC, const KernelRealisation& r) {
  auto rot = std::make_shared<SkewRotation>(r.K0.size() ? SkewRotation(r.K0) : SkewRotation());
  const int m = r.m ? r.m : (r.K0.size() ? static_cast<int>(r.K0.rows()) : base.n());
  if (rot->dim() != 0 && rot->dim() != m) throw std::logic_error("KernelRealisation: expected K0 m x m");
  if (m < base.n())
    throw std::invalid_argument("KernelRealisation: a prescribed S_BC expected m >= n = " + std::to_string(base.n()) +
                                ", got m = " + std::to_string(m));
  return [base = std::move(base), S_BC = std::move(S_BC), rot, m](double t) {
    SsmParams p = base;
    set_interaction_kernel(p, S_BC(t), m, rot->empty() ? Mat() : rot->at(t));
    return p;
  };
}

KernelFn isotropic(ScalarFn g, int n) {
  return [g = std::move(g), n](double t) { return Mat(g(t) * Mat::Identity(n, n)); };
}

}  // namespace

SsmSchedulePtr prescribed_kernel_schedule(SsmParams base, KernelFn S_BC, const KernelRealisation& r) {
  return std::make_shared<FunctionSchedule<SsmParams>>(realiser(std::move(base), std::move(S_BC), r));
}

SsmSchedulePtr design_s_iso(SsmParams base, ScalarFn g, const KernelRealisation& r) {
  const int n = base.n();
  return prescribed_kernel_schedule(std::move(base), isotropic(std::move(g), n), r);
}

SsmSchedulePtr design_s_pe(SsmParams base, const KernelRealisation& r) { return design_s_iso(std::move(base), g_pe, r); }

SsmSchedulePtr design_s_pef(SsmParams base, const KernelRealisation& r) {
  return design_s_iso(std::move(base), g_pef, r);
}

Mat s_cap_kernel(double t, double k0) {
  Mat S = Mat::Zero(4, 4);
  S.diagonal() << 1.0, -0.5, -0.5, -0.5;
  S(0, 1) += k0 * std::sin(t);
  S(1, 0) -= k0 * std::sin(t);
  return S;
}

SsmSchedulePtr design_s_cap(double k0, const KernelRealisation& r) {
  return prescribed_kernel_schedule(design_g1(), [k0](double t) { return s_cap_kernel(t, k0); }, r);
}

SsmSchedulePtr design_s_ani2(double k, double d, const KernelRealisation& r) {
  SsmParams base = design_ani2(k, d);
  const Mat S = ani2_kernel(k, d);
  return prescribed_kernel_schedule(std::move(base), [S](double) { return S; }, r);
}

SsmSchedulePtr design_s_tie(ScalarFn g, const KernelRealisation& r) {
  return design_s_iso(design_tie_channels(), std::move(g), r);
}

TimeSwitchSchedule::TimeSwitchSchedule(std::function<SsmParams(double)> before, std::function<SsmParams(double)> after,
                                       double t_s)
    : before_(std::move(before)), after_(std::move(after)), t_s_(t_s) {}

std::shared_ptr<const SsmParams> TimeSwitchSchedule::at_layer(long k) const {
  return at_time(static_cast<double>(k - 1) * this->period_);
}

std::shared_ptr<const SsmParams> TimeSwitchSchedule::at_time(double t) const {
  return std::make_shared<const SsmParams>(t < t_s_ ? before_(t) : after_(t));
}

std::vector<double> TimeSwitchSchedule::switching_times(double t0, double t1) const {
  if (t_s_ > t0 && t_s_ < t1) return {t_s_};
  return {};
}

SsmSchedulePtr design_s_sw(double t_s, ScalarFn g, const KernelRealisation& r) {
  SsmParams before = design_g1();
  SsmParams after = before;
  std::swap(after.b_delta[0], after.b_delta[1]);
  std::swap(after.alpha[0], after.alpha[1]);
  const int n = before.n();
  KernelFn S = isotropic(std::move(g), n);
  return std::make_shared<TimeSwitchSchedule>(realiser(std::move(before), S, r), realiser(std::move(after), S, r), t_s);
}

SsmSchedulePtr design_s_rnd(SsmParams base, int m, double s, std::uint64_t seed) {
  const int n = base.n();
  auto gen = [base = std::move(base), m, n, s](Rng& rng) {
    SsmParams p = base;
    p.S_B.resize(m, n);
    p.S_C.resize(m, n);
    rng.fill_normal(p.S_B, s);
    rng.fill_normal(p.S_C, s);
    return p;
  };
  return std::make_shared<IidSchedule<SsmParams>>(gen, seed);
}

SsmSchedulePtr design_by_name(const std::string& name, const KernelRealisation& r) {
  if (name == "s-iso") return design_s_iso(design_g1(), g_iso, r);
  if (name == "s-pe") return design_s_pe(design_g1(), r);
  if (name == "s-pef") return design_s_pef(design_g1(), r);
  if (name == "s-cap") return design_s_cap(0.5, r);
  if (name == "s-tie") return design_s_tie(g_iso, r);
  if (name == "s-sw") return design_s_sw(5.0, g_iso, r);
  if (name == "s-ani2") return design_s_ani2(11.0, 25.0, r);
  throw std::invalid_argument("design_by_name: expected s-iso, s-pe, s-pef, s-cap, s-tie, s-sw or s-ani2, got '" + name + "'");
}

}  // namespace tokdyn
