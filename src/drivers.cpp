#include "tokdyn/drivers.hpp"

#include <algorithm>
#include <boost/numeric/odeint.hpp>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "tokdyn/error.hpp"
#include "tokdyn/sphere.hpp"

namespace tokdyn {

void require_finite(const Batch& Z, const char* clock, double t) {
  if (Z.Z.allFinite()) return;
  Eigen::Index row = 0;
  for (; row < Z.Z.rows(); ++row)
    if (!Z.Z.row(row).allFinite()) break;
  const long len = std::max(1L, static_cast<long>(Z.len));
  throw NonFiniteError(fmt::format("the state became non-finite (NaN or Inf) at {} {} (run {}, token {}): the "
                                   "dynamics overflowed; check the weights and the step size. No result was written",
                                   clock, t, static_cast<long>(row) / len, static_cast<long>(row) % len + 1));
}

void iterate(const LayerMap& F, Batch& Z, long depth, const std::vector<Observer*>& post,
             const std::vector<Observer*>& pre, const ProgressFn& progress) {
  for (auto* o : post) o->observe(0.0, Z);
  for (long k = 1; k <= depth; ++k) {
    for (auto* o : pre) o->observe(static_cast<double>(k - 1), Z);
    F.apply(k, Z);
    require_finite(Z, "layer", static_cast<double>(k));
    for (auto* o : post) o->observe(static_cast<double>(k), Z);
    if (progress) progress(static_cast<double>(k) / static_cast<double>(depth));
  }
}

void rk4_step(const VectorField& f, double t, double h, Batch& Z, bool retract) {
  rk4_step_until(f, t, h, Z, retract, t + h);
}

void rk4_step_until(const VectorField& f, double t, double h, Batch& Z, bool retract, double t_last) {
  const bool proj = retract && f.on_sphere();
  Tokens k1, k2, k3, k4;
  Batch S = Z;
  f.eval(t, Z, k1);
  S.Z = Z.Z + 0.5 * h * k1;
  if (proj) project_rows(S.Z);
  f.eval(t + 0.5 * h, S, k2);
  S.Z = Z.Z + 0.5 * h * k2;
  if (proj) project_rows(S.Z);
  f.eval(t + 0.5 * h, S, k3);
  S.Z = Z.Z + h * k3;
  if (proj) project_rows(S.Z);
  f.eval(t_last, S, k4);
  Z.Z += (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
  if (proj) project_rows(Z.Z);
}

namespace {

/// Sorted stop times in (t0, t1]: switching times of the field, output times, and t1.
std::vector<double> stop_times(const VectorField& f, double t0, double t1, double every) {
  std::vector<double> s = f.switching_times(t0, t1);
  // Output times are stored: bound their number before making them (every = 1e-300 would fill memory).
  constexpr double kMaxOutputs = 1e7;
  if (every > 0.0 && (t1 - t0) / every > kMaxOutputs)
    throw InputError(fmt::format("observation interval {} over [{}, {}] gives {:.3g} output times; expected at most {:.0f} "
                                 "(raise the interval)", every, t0, t1, (t1 - t0) / every, kMaxOutputs));
  if (every > 0.0)
    for (long k = 1;; ++k) {
      const double t = t0 + k * every;
      if (t >= t1 - 1e-12 * std::max(1.0, std::abs(t1))) break;
      s.push_back(t);
    }
  s.push_back(t1);
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end(), [](double a, double b) { return std::abs(a - b) < 1e-13 * std::max(1.0, std::abs(a)); }), s.end());
  return s;
}

bool is_output(double t, double t0, double every) {
  if (every <= 0.0) return false;
  const double k = (t - t0) / every;
  return std::abs(k - std::round(k)) < 1e-9;
}

}  // namespace

long integrate_rk4(const VectorField& f, Batch& Z, double t0, double t1, const Rk4Options& opt,
                   const std::vector<Observer*>& obs, double observe_every, const ProgressFn& progress) {
  if (!(opt.h > 0.0)) throw std::invalid_argument("integrate_rk4: step must be > 0");
  for (auto* o : obs) o->observe(t0, Z);
  long steps = 0;
  double t = t0;
  for (double stop : stop_times(f, t0, t1, observe_every)) {
    const double span = stop - t;
    const long n = std::max(1L, static_cast<long>(std::ceil(span / opt.h - 1e-9)));
    const double h = span / static_cast<double>(n);
    // The segment [t, stop) belongs to one piece of a piecewise-constant schedule: the last
    // stage of its last step is evaluated one ulp before `stop`, never on the next piece.
    const double inside = std::nextafter(stop, t);
    for (long s = 0; s < n; ++s) {
      const double ts = t + s * h;
      rk4_step_until(f, ts, h, Z, opt.retract, s + 1 == n ? inside : ts + h);
      ++steps;
    }
    t = stop;
    require_finite(Z, "t =", t);
    if (stop == t1 || is_output(stop, t0, observe_every))
      for (auto* o : obs) o->observe(t, Z);
    if (progress) progress((t - t0) / (t1 - t0));
  }
  return steps;
}

namespace {

namespace ode = boost::numeric::odeint;
using State = std::vector<double>;

template <class Controlled>
void adaptive_segment(Controlled& ctl, const VectorField& f, Batch& Z, double& t, double stop, double& dt,
                      const AdaptiveOptions& opt, AdaptiveStats& st) {
  const Eigen::Index rows = Z.Z.rows(), cols = Z.Z.cols();
  const bool proj = opt.retract && f.on_sphere();
  // Stages never reach `stop` itself: it belongs to the next piece of a piecewise schedule.
  const double inside = std::nextafter(stop, t);
  auto sys = [&](const State& x, State& dxdt, double tt) {
    Batch B{Eigen::Map<const Tokens>(x.data(), rows, cols), Z.runs, Z.len};
    Tokens d;
    f.eval(std::min(tt, inside), B, d);
    dxdt.assign(d.data(), d.data() + d.size());
  };
  State x(Z.Z.data(), Z.Z.data() + Z.Z.size());
  if constexpr (requires { ctl.reset(); }) ctl.reset();  // no FSAL derivative across segments
  while (t < stop) {
    if (st.accepted + st.rejected > opt.max_steps) throw std::runtime_error("integrate_adaptive: too many steps");
    bool last = false;
    double h = dt;
    if (t + h >= stop) {
      h = stop - t;
      last = true;
    }
    double hh = h;
    double tt = t;
    if (ctl.try_step(sys, x, tt, hh) == ode::success) {
      ++st.accepted;
      if (proj) {
        Eigen::Map<Tokens> M(x.data(), rows, cols);
        for (Eigen::Index i = 0; i < rows; ++i) M.row(i).normalize();
        // The state moved: an FSAL stepper must not reuse its stored derivative.
        if constexpr (requires { ctl.reset(); }) ctl.reset();
      }
      t = last ? stop : tt;
      if (!last || hh > dt) dt = hh;  // the proposed next step
    } else {
      ++st.rejected;
      dt = hh;
    }
  }
  Z.Z = Eigen::Map<Tokens>(x.data(), rows, cols);
  require_finite(Z, "t =", t);
}

template <class Stepper>
AdaptiveStats run_adaptive(const VectorField& f, Batch& Z, double t0, double t1, const AdaptiveOptions& opt,
                           const std::vector<Observer*>& obs, double every, const ProgressFn& progress) {
  auto ctl = ode::make_controlled(opt.atol, opt.rtol, Stepper());
  AdaptiveStats st;
  for (auto* o : obs) o->observe(t0, Z);
  double t = t0, dt = opt.h0;
  for (double stop : stop_times(f, t0, t1, every)) {
    adaptive_segment(ctl, f, Z, t, stop, dt, opt, st);
    if (stop == t1 || is_output(stop, t0, every))
      for (auto* o : obs) o->observe(t, Z);
    if (progress) progress((t - t0) / (t1 - t0));
  }
  return st;
}

/// Bulirsch-Stoer extrapolation with dense output: the stepper takes its own steps and the
/// output times are interpolated (no step is shortened to land on them). Only for fields that
/// are not retracted (phases, or retract = false) and have no switching times: a dense step may
/// reach past a discontinuity.
AdaptiveStats run_dense_bs(const VectorField& f, Batch& Z, double t0, double t1, const AdaptiveOptions& opt,
                           const std::vector<Observer*>& obs, double every, const ProgressFn& progress) {
  if (opt.retract && f.on_sphere())
    throw std::invalid_argument("integrate_adaptive: bulirsch_stoer interpolates its outputs and cannot retract; use it off the sphere or with retract = false");
  if (!f.switching_times(t0, t1).empty())
    throw std::invalid_argument("integrate_adaptive: bulirsch_stoer cannot stop at switching times; use dopri5, cash_karp54 or fehlberg78");
  const Eigen::Index rows = Z.Z.rows(), cols = Z.Z.cols();
  auto sys = [&](const State& x, State& dxdt, double tt) {
    Batch B{Eigen::Map<const Tokens>(x.data(), rows, cols), Z.runs, Z.len};
    Tokens d;
    f.eval(tt, B, d);
    dxdt.assign(d.data(), d.data() + d.size());
  };
  AdaptiveStats st;
  for (auto* o : obs) o->observe(t0, Z);
  if (!(t1 > t0)) return st;
  ode::bulirsch_stoer_dense_out<State> bs(opt.atol, opt.rtol);
  State x(Z.Z.data(), Z.Z.data() + Z.Z.size()), y(x.size());
  bs.initialize(x, t0, opt.h0);
  for (double stop : stop_times(f, t0, t1, every)) {
    while (bs.current_time() < stop) {
      if (++st.accepted > opt.max_steps) throw std::runtime_error("integrate_adaptive: too many steps");
      bs.do_step(sys);
    }
    bs.calc_state(stop, y);
    Z.Z = Eigen::Map<const Tokens>(y.data(), rows, cols);
    require_finite(Z, "t =", stop);
    if (stop == t1 || is_output(stop, t0, every))
      for (auto* o : obs) o->observe(stop, Z);
    if (progress) progress((stop - t0) / (t1 - t0));
  }
  return st;
}

}  // namespace

AdaptiveStats integrate_adaptive(const VectorField& f, Batch& Z, double t0, double t1, const AdaptiveOptions& opt,
                                 const std::vector<Observer*>& obs, double every, const ProgressFn& progress) {
  if (!(opt.rtol > 0.0) || !(opt.atol > 0.0)) throw std::invalid_argument("integrate_adaptive: tolerances must be > 0");
  if (opt.method == "dopri5")
    return run_adaptive<ode::runge_kutta_dopri5<State>>(f, Z, t0, t1, opt, obs, every, progress);
  if (opt.method == "cash_karp54")
    return run_adaptive<ode::runge_kutta_cash_karp54<State>>(f, Z, t0, t1, opt, obs, every, progress);
  if (opt.method == "fehlberg78")
    return run_adaptive<ode::runge_kutta_fehlberg78<State>>(f, Z, t0, t1, opt, obs, every, progress);
  if (opt.method == "bulirsch_stoer") return run_dense_bs(f, Z, t0, t1, opt, obs, every, progress);
  throw std::invalid_argument("integrate_adaptive: unknown method " + opt.method);
}

}  // namespace tokdyn
