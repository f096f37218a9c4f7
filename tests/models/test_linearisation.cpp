// Linearisation (issue 9): exact Jacobian-vector products of every model's layer step and flow,
// checked against central finite differences, linearity in V, independence of runs, the phase
// model's analytic Jacobian, and the fp32 Mamba-2 step.
//
// Finite-difference check: e(h) = |(F(Z + hV) - F(Z - hV))/2h - JV| / |JV| over h = 1e-2 ... 1e-6.
// For a smooth map e(h) = c h^2 + O(eps |F| / h): it must fall like h^2 (ratio e(1e-2)/e(1e-3)
// in [30, 300], ideal 100, asserted whenever e(1e-3) is well above round-off), and its minimum
// over h must be below 1e-7 (truncation at h ~ 1e-4 is ~1e-8 c, round-off ~1e-16/1e-4 = 1e-12;
// 1e-7 leaves room for c ~ 10 and ill-conditioned rows). An error in any derivative term shows up
// as e(h) -> a constant (no h^2 decay), far above 1e-7.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ssm_fixtures.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/models/rope/phase.hpp"
#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/engine/schedule.hpp"

namespace tokdyn {
namespace {

using MapFn = std::function<void(const Tokens& Z, Tokens& out)>;

struct FdResult {
  std::vector<double> h, err;
  double min_err() const { return *std::min_element(err.begin(), err.end()); }
};

FdResult fd_errors(const MapFn& F, const Tokens& Z, const Tokens& V, const Tokens& JV) {
  FdResult r;
  const double scale = std::max(JV.norm(), 1e-300);
  for (double h : {1e-2, 1e-3, 1e-4, 1e-5, 1e-6}) {
    Tokens fp, fm;
    F(Z + h * V, fp);
    F(Z - h * V, fm);
    r.h.push_back(h);
    r.err.push_back(((fp - fm) / (2.0 * h) - JV).norm() / scale);
  }
  return r;
}

void expect_fd(const FdResult& r, const std::string& what, double tol = 1e-7) {
  std::string line;
  char buf[48];
  for (std::size_t i = 0; i < r.h.size(); ++i) {
    std::snprintf(buf, sizeof buf, " %.0e:%.1e", r.h[i], r.err[i]);
    line += buf;
  }
  std::printf("[fd] %-48s%s\n", what.c_str(), line.c_str());
  EXPECT_LT(r.min_err(), tol) << what << line;
  if (r.err[1] > 1e-9) {
    const double ratio = r.err[0] / r.err[1];
    EXPECT_GT(ratio, 30.0) << what << ": no h^2 decay" << line;
    EXPECT_LT(ratio, 300.0) << what << ": no h^2 decay" << line;
  }
}

/// J(a V + b W) = a J V + b J W to round-off.
void expect_linear(const std::function<void(const Tokens&, Tokens&)>& J, const Tokens& V, const Tokens& W,
                   const std::string& what) {
  Tokens jv, jw, jc;
  J(V, jv);
  J(W, jw);
  J(0.7 * V - 1.3 * W, jc);
  EXPECT_LE((jc - (0.7 * jv - 1.3 * jw)).norm(), 1e-12 * (jv.norm() + jw.norm())) << what;
}

Batch make_batch(const Tokens& Z, int runs, int len) {
  Batch B;
  B.Z = Z;
  B.runs = runs;
  B.len = len;
  return B;
}

MapFn layer_fn(const LayerMap& F, long k, int runs, int len) {
  return [&F, k, runs, len](const Tokens& Z, Tokens& out) {
    Batch B = make_batch(Z, runs, len);
    F.apply(k, B);
    out = B.Z;
  };
}

MapFn field_fn(const VectorField& f, double t, int runs, int len) {
  return [&f, t, runs, len](const Tokens& Z, Tokens& out) { f.eval(t, make_batch(Z, runs, len), out); };
}

Tokens sphere_rows(Rng& rng, int rows, int d) { return rng.sphere_tokens(rows, d); }

Tokens normal(Rng& rng, int rows, int d) {
  Mat M(rows, d);
  rng.fill_normal(M, 1.0);
  return M;
}

/// Runs are independent: a direction supported on run 0 leaves run 1's tangent zero.
template <class J>
void expect_runs_independent(const J& jvp, const Tokens& V, int len, const std::string& what) {
  Tokens V0 = V, out;
  V0.bottomRows(V.rows() - len).setZero();
  jvp(V0, out);
  EXPECT_EQ(out.bottomRows(V.rows() - len).norm(), 0.0) << what;
  EXPECT_GT(out.topRows(len).norm(), 0.0) << what;
}

// ---------------------------------------------------------------- interface

TEST(Linearisation, DefaultLayerMapJvpIsCentralDifference) {
  // A linear layer Z -> Z M^T: the default's central difference is exact up to round-off.
  struct Lin final : LayerMap {
    Mat M;
    void apply(long, Batch& Z) const override { Z.Z = Tokens(Z.Z * M.transpose()); }
  } F;
  Rng rng(1, {1});
  F.M = normal(rng, 4, 4);
  const Batch Z = make_batch(normal(rng, 6, 4), 2, 3);
  const Tokens V = normal(rng, 6, 4);
  Tokens out;
  F.jvp(1, Z, V, out);
  EXPECT_FALSE(F.has_exact_jvp());
  EXPECT_FALSE(F.has_vjp());
  EXPECT_LE((out - V * F.M.transpose()).norm(), 1e-8 * out.norm());
  EXPECT_THROW(F.vjp(1, Z, V, out), std::logic_error);
  F.jvp(1, Z, Tokens::Zero(6, 4), out);
  EXPECT_EQ(out.norm(), 0.0);
}

// ---------------------------------------------------------------- SSM

struct SsmCase {
  bool silu_bc;
  GateKind gate;
  SsmForm form;
};

TEST(Linearisation, SsmLayerAndFlowMatchFiniteDifferences) {
  const int n = 6, m = 5, runs = 2, len = 5;
  const auto sched = std::make_shared<ConstantSchedule<SsmParams>>(testing::random_ssm(11, n, m));
  const std::vector<SsmCase> cases = {{false, GateKind::Off, SsmForm::InputOutput},
                                      {true, GateKind::Off, SsmForm::InputOutput},
                                      {false, GateKind::Silu, SsmForm::Recurrence},
                                      {true, GateKind::Silu, SsmForm::InputOutput},
                                      {true, GateKind::Constant, SsmForm::Recurrence}};
  Rng rng(3, {2});
  for (const SsmCase& c : cases) {
    SsmOptions o;
    o.tau = 0.4;
    o.silu_bc = c.silu_bc;
    o.gate = c.gate;
    o.gate_const = 0.8;
    const std::string what = std::string("ssm silu_bc=") + (c.silu_bc ? "1" : "0") + " gate=" +
                             std::to_string(static_cast<int>(c.gate)) + " form=" + std::to_string(static_cast<int>(c.form));
    const Tokens Z = sphere_rows(rng, runs * len, n), V = normal(rng, runs * len, n), W = normal(rng, runs * len, n);
    const Batch B = make_batch(Z, runs, len);

    SsmLayer F(sched, o, c.form);
    EXPECT_TRUE(F.has_exact_jvp());
    Tokens JV;
    F.jvp(1, B, V, JV);
    expect_fd(fd_errors(layer_fn(F, 1, runs, len), Z, V, JV), "layer " + what);
    const auto jl = [&](const Tokens& X, Tokens& out) { F.jvp(1, B, X, out); };
    expect_linear(jl, V, W, "layer " + what);
    expect_runs_independent(jl, V, len, "layer " + what);

    SsmFlow f(sched, o);
    EXPECT_TRUE(f.has_exact_jvp());
    f.jvp(0.3, B, V, JV);
    expect_fd(fd_errors(field_fn(f, 0.3, runs, len), Z, V, JV), "flow " + what);
    expect_linear([&](const Tokens& X, Tokens& out) { f.jvp(0.3, B, X, out); }, V, W, "flow " + what);
    // Off the sphere (inside adaptive stages) the flow's extension is differentiated too.
    const Batch B2 = make_batch(1.3 * Z, runs, len);
    f.jvp(0.3, B2, V, JV);
    expect_fd(fd_errors(field_fn(f, 0.3, runs, len), B2.Z, V, JV), "flow off-sphere " + what);
  }
}

// ---------------------------------------------------------------- RoPE attention

TEST(Linearisation, RopeFieldAndStepMatchFiniteDifferences) {
  using namespace rope;
  const int n = 6, d = 8, runs = 2;
  Rng rng(5, {3});
  struct Case {
    bool rope, causal, qkv;
    int heads;
  };
  const std::vector<Case> cases = {{true, false, false, 1}, {false, false, false, 1}, {true, true, false, 1},
                                   {true, false, false, 2}, {true, true, true, 2},   {false, true, true, 4}};
  for (const Case& c : cases) {
    AttentionParams P;
    P.d = d;
    P.beta = 1.7;
    P.rope = c.rope;
    P.causal = c.causal;
    P.heads = c.heads;
    if (c.qkv) {
      P.Q = normal(rng, d, d) / std::sqrt(d);
      P.K = normal(rng, d, d) / std::sqrt(d);
      P.V = normal(rng, d, d) / std::sqrt(d);
    }
    P.freqs = {};
    const std::string what = std::string("rope=") + (c.rope ? "1" : "0") + " causal=" + (c.causal ? "1" : "0") +
                             " qkv=" + (c.qkv ? "1" : "0") + " heads=" + std::to_string(c.heads);
    const Tokens Z = sphere_rows(rng, runs * n, d), V = normal(rng, runs * n, d), W = normal(rng, runs * n, d);
    const Batch B = make_batch(Z, runs, n);

    AttentionField f(P, n);
    EXPECT_TRUE(f.has_exact_jvp());
    Tokens JV;
    f.jvp(0.0, B, V, JV);
    expect_fd(fd_errors(field_fn(f, 0.0, runs, n), Z, V, JV), "rope field " + what);
    const auto jf = [&](const Tokens& X, Tokens& out) { f.jvp(0.0, B, X, out); };
    expect_linear(jf, V, W, "rope field " + what);
    expect_runs_independent(jf, V, n, "rope field " + what);

    AttentionStep F(P, n, 0.3);
    EXPECT_TRUE(F.has_exact_jvp());
    F.jvp(1, B, V, JV);
    expect_fd(fd_errors(layer_fn(F, 1, runs, n), Z, V, JV), "rope step " + what);
    expect_linear([&](const Tokens& X, Tokens& out) { F.jvp(1, B, X, out); }, V, W, "rope step " + what);
    // Transpose product: <W, J V> = <J^T W, V> to round-off.
    EXPECT_TRUE(F.has_vjp());
    Tokens JtW;
    F.vjp(1, B, W, JtW);
    const double lhs = (W.array() * JV.array()).sum(), rhs = (JtW.array() * V.array()).sum();
    std::printf("[vjp] rope step %-36s <W,JV> - <JtW,V> = %.1e (|W||JV| = %.1e)\n", what.c_str(), lhs - rhs, W.norm() * JV.norm());
    EXPECT_LE(std::abs(lhs - rhs), 1e-13 * W.norm() * JV.norm()) << what;
  }
}

TEST(Linearisation, RopeFieldJvpAgreesWithPhaseJacobianOnTheCircle) {
  // d = 2, one head, frequency omega: the Cartesian field is the phase model (9). A phase
  // perturbation phi moves x_i along x_i^perp, and (J_phase phi)_i = <Df(x)[x^perp phi]_i, x_i^perp>
  // (the term <f_i, d x_i^perp> = -phi_i <f_i, x_i> vanishes: f is tangent).
  using namespace rope;
  const int n = 7;
  for (double beta : {0.5, 3.0}) {
    const double omega = 0.7;
    PhaseParams pp{beta, omega, {}};
    AttentionParams P;
    P.d = 2;
    P.beta = beta;
    P.freqs = {omega};
    AttentionField f(P, n);
    Rng rng(8, {static_cast<std::uint64_t>(beta * 10)});
    Vec th(n), phi(n);
    for (int i = 0; i < n; ++i) th[i] = rng.uniform(-3.0, 3.0), phi[i] = rng.normal();
    Mat J;
    phase_jacobian(pp, th, J);
    const Vec want = J * phi;
    Tokens X(n, 2), V(n, 2), JV;
    for (int i = 0; i < n; ++i) {
      X(i, 0) = std::cos(th[i]), X(i, 1) = std::sin(th[i]);
      V(i, 0) = -std::sin(th[i]) * phi[i], V(i, 1) = std::cos(th[i]) * phi[i];
    }
    f.jvp(0.0, make_batch(X, 1, n), V, JV);
    Vec got(n);
    for (int i = 0; i < n; ++i) got[i] = -std::sin(th[i]) * JV(i, 0) + std::cos(th[i]) * JV(i, 1);
    EXPECT_LE((got - want).norm(), 1e-12 * (1.0 + want.norm())) << "beta " << beta;
  }
}

// ---------------------------------------------------------------- Mamba-2

TEST(Linearisation, Mamba2BlockMatchesFiniteDifferencesAndFp32Step) {
  using namespace mamba2;
  const Config cfg = Config::named("tiny");
  const Model model = init_model(cfg, 4);
  const auto layer = cycle_layers(model);
  const int runs = 2, len = 5, d = cfg.d_model;
  struct Case {
    const char* name;
    Switches sw;
    Update update;
  };
  Switches noconv, nogate, nosilu, bare;
  noconv.conv = false;
  nogate.gate = false;
  nosilu.silu_bc = false;
  bare.conv = false, bare.gate = false, bare.d_skip = false, bare.mixer_norm = false;
  const std::vector<Case> cases = {{"reference residual", Switches{}, Update::Residual},
                                   {"reference sphere", Switches{}, Update::Sphere},
                                   {"conv off residual", noconv, Update::Residual},
                                   {"gate off sphere", nogate, Update::Sphere},
                                   {"silu_bc off residual", nosilu, Update::Residual},
                                   {"bare sphere", bare, Update::Sphere}};
  Rng rng(6, {4});
  for (const Case& c : cases) {
    BlockMap F(cfg, c.sw, layer, c.update, 0.5f);
    EXPECT_TRUE(F.has_exact_jvp());
    EXPECT_EQ(F.on_sphere(), c.update == Update::Sphere);
    // A float-representable state, as in a depth run.
    Tokens Z = c.update == Update::Sphere ? sphere_rows(rng, runs * len, d) : normal(rng, runs * len, d);
    Z = Z.cast<float>().cast<double>();
    const Tokens V = normal(rng, runs * len, d), W = normal(rng, runs * len, d);
    const Batch B = make_batch(Z, runs, len);
    Tokens Y, JV;
    F.step_double(2, B, V, Y, JV);
    Tokens J2;
    F.jvp(2, B, V, J2);
    EXPECT_EQ((J2 - JV).norm(), 0.0);
    const MapFn Fd = [&](const Tokens& X, Tokens& out) {
      Tokens dummy;
      F.step_double(2, make_batch(X, runs, len), Tokens::Zero(X.rows(), X.cols()), out, dummy);
    };
    expect_fd(fd_errors(Fd, Z, V, JV), std::string("mamba2 ") + c.name);
    const auto jm = [&](const Tokens& X, Tokens& out) { F.jvp(2, B, X, out); };
    expect_linear(jm, V, W, std::string("mamba2 ") + c.name);
    expect_runs_independent(jm, V, len, std::string("mamba2 ") + c.name);
    // The double step is the fp32 step to fp32 round-off.
    Batch Bf = B;
    F.apply(2, Bf);
    const double rel = (Bf.Z - Y).norm() / Y.norm();
    std::printf("[fp32] mamba2 %-24s |F32 - F64|/|F64| = %.2e\n", c.name, rel);
    EXPECT_LT(rel, 1e-5) << c.name;
  }
}

// ---------------------------------------------------------------- cost

TEST(Linearisation, JvpCostsAFewForwardSteps) {
  // Reported, loosely bounded (shared machines): a JVP is never a dense Jacobian. Each time is the
  // fastest of 5 calls, so that another process taking the core during one call (the suite runs
  // tests in parallel, sanitizer builds are slow) does not decide the ratio.
  using clock = std::chrono::steady_clock;
  auto time_of = [](const std::function<void()>& f) {
    f();
    double best = 1e300;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = clock::now();
      f();
      best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
    }
    return best;
  };
  Rng rng(9, {5});
  {
    const int n = 16, runs = 4, len = 32;
    const auto sched = std::make_shared<ConstantSchedule<SsmParams>>(testing::random_ssm(2, n, 8));
    SsmOptions o;
    o.silu_bc = true;
    o.gate = GateKind::Silu;
    SsmLayer F(sched, o);
    const Batch B = make_batch(sphere_rows(rng, runs * len, n), runs, len);
    const Tokens V = normal(rng, runs * len, n);
    Tokens out;
    const double tf = time_of([&] { Batch C = B; F.apply(1, C); });
    const double tj = time_of([&] { F.jvp(1, B, V, out); });
    std::printf("[cost] ssm layer n=%d len=%d runs=%d: jvp / forward = %.2f\n", n, len, runs, tj / tf);
    EXPECT_LT(tj, 50.0 * tf + 5e-3);
  }
  {
    const int n = 64, d = 32, runs = 2;
    rope::AttentionParams P;
    P.d = d;
    P.heads = 2;
    rope::AttentionStep F(P, n, 0.2);
    const Batch B = make_batch(sphere_rows(rng, runs * n, d), runs, n);
    const Tokens V = normal(rng, runs * n, d);
    Tokens out;
    const double tf = time_of([&] { Batch C = B; F.apply(1, C); });
    const double tj = time_of([&] { F.jvp(1, B, V, out); });
    std::printf("[cost] rope step n=%d d=%d runs=%d: jvp / forward = %.2f\n", n, d, runs, tj / tf);
    EXPECT_LT(tj, 50.0 * tf + 5e-3);
  }
  {
    using namespace mamba2;
    const Config cfg = Config::named("tiny");
    const Model model = init_model(cfg, 4);
    BlockMap F(cfg, Switches{}, std::make_shared<ConstantSchedule<Layer>>(model.layers[0]), Update::Residual);
    const int runs = 2, len = 32;
    const Batch B = make_batch(normal(rng, runs * len, cfg.d_model), runs, len);
    const Tokens V = normal(rng, runs * len, cfg.d_model);
    Tokens out;
    const double tf = time_of([&] { Batch C = B; F.apply(1, C); });
    const double tj = time_of([&] { F.jvp(1, B, V, out); });
    std::printf("[cost] mamba2 tiny len=%d runs=%d: jvp (double) / forward (fp32) = %.2f\n", len, runs, tj / tf);
    EXPECT_LT(tj, 50.0 * tf + 5e-3);
  }
}

}  // namespace
}  // namespace tokdyn
