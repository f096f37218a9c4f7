#include "tokdyn/engine/drivers.hpp"

#include "tokdyn/core/parallel.hpp"

#include <algorithm>
#include <boost/numeric/odeint.hpp>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <stdexcept>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/core/sphere.hpp"

namespace tokdyn {

namespace {

/// Whether every entry is finite: x - x is 0 for finite x and NaN otherwise, so one pass of
/// subtractions summed per row (vectorised) decides it; rows are scanned on the thread team for
/// large states (a boolean: no bits depend on it).
template <class M>
bool all_finite(const M& Z) {
  const Eigen::Index rows = Z.rows(), cols = Z.cols();
  bool ok = true;
#pragma omp parallel for schedule(static) reduction(&& : ok) if (rows * cols >= (1L << 18))
  for (Eigen::Index i = 0; i < rows; ++i) {
    typename M::Scalar acc = 0;
    const auto* r = Z.data() + i * cols;
    for (Eigen::Index j = 0; j < cols; ++j) acc += r[j] - r[j];
    ok = ok && acc == 0;
  }
  return ok;
}

template <class B>
void require_finite_impl(const B& Z, const char* clock, double t, const std::string& lane, const std::string& hint) {
  if (all_finite(Z.Z)) return;
  Eigen::Index row = 0;
  for (; row < Z.Z.rows(); ++row)
    if (!Z.Z.row(row).allFinite()) break;
  const long len = std::max(1L, static_cast<long>(Z.len));
  throw NonFiniteError(fmt::format("the state became non-finite (NaN or Inf) at {} {} ({}run {}, token {}): {}. No result was written",
                                   clock, t, lane.empty() ? std::string() : "variant " + lane + ", ",
                                   static_cast<long>(row) / len, static_cast<long>(row) % len + 1,
                                   hint.empty() ? "the dynamics overflowed; check the weights and the step size" : hint));
}

void apply_layer(const LayerMap& F, long k, Batch& Z) { F.apply(k, Z); }
void apply_layer(const LayerMap& F, long k, BatchF& Z) { F.apply_float(k, Z); }
void see(Observer* o, double t, const Batch& Z) { o->observe(t, Z); }
void see(Observer* o, double t, const BatchF& Z) { o->observe_float(t, Z); }

template <class B>
void iterate_lanes_impl(const std::vector<Lane<B>>& lanes, long depth, const ProgressFn& progress) {
  for (const Lane<B>& l : lanes) {
    if (!l.map || !l.state) throw std::invalid_argument("iterate_lanes: a lane has no model or no state");
    for (Observer* o : l.post) see(o, 0.0, *l.state);
  }
  for (long k = 1; k <= depth; ++k) {
    for (const Lane<B>& l : lanes) {
      for (Observer* o : l.pre) see(o, static_cast<double>(k - 1), *l.state);
      apply_layer(*l.map, k, *l.state);
      require_finite_impl(*l.state, "layer", static_cast<double>(k), l.name, l.map->overflow_hint());
      for (Observer* o : l.post) see(o, static_cast<double>(k), *l.state);
    }
    if (progress) progress(static_cast<double>(k) / static_cast<double>(depth));
  }
}

}  // namespace

void require_finite(const Batch& Z, const char* clock, double t, const std::string& lane, const std::string& hint) {
  require_finite_impl(Z, clock, t, lane, hint);
}
void require_finite(const BatchF& Z, const char* clock, double t, const std::string& lane, const std::string& hint) {
  require_finite_impl(Z, clock, t, lane, hint);
}

void iterate_lanes(const std::vector<Lane<Batch>>& lanes, long depth, const ProgressFn& progress) {
  iterate_lanes_impl(lanes, depth, progress);
}
void iterate_lanes(const std::vector<Lane<BatchF>>& lanes, long depth, const ProgressFn& progress) {
  iterate_lanes_impl(lanes, depth, progress);
}

void for_each_chunk(Batch& Z, int chunk, const std::function<void(int c, Batch& part)>& job) {
  if (chunk < 1) throw std::invalid_argument("for_each_chunk: chunk must be >= 1");
  const int chunks = (Z.runs + chunk - 1) / chunk;
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic)
  for (int c = 0; c < chunks; ++c) {
    if (errors.failed()) continue;
    try {
      const int r0 = c * chunk, nr = std::min(chunk, Z.runs - r0);
      const Eigen::Index row0 = static_cast<Eigen::Index>(r0) * Z.len, rows = static_cast<Eigen::Index>(nr) * Z.len;
      Batch part{Z.Z.middleRows(row0, rows), nr, Z.len};
      job(c, part);
      Z.Z.middleRows(row0, rows) = part.Z;
    } catch (...) {
      errors.capture();
    }
  }
  errors.rethrow();
}

void iterate(const LayerMap& F, Batch& Z, long depth, const std::vector<Observer*>& post, const std::vector<Observer*>& pre,
             const ProgressFn& progress) {
  iterate_lanes_impl(std::vector<Lane<Batch>>{{"", &F, &Z, post, pre}}, depth, progress);
}
void iterate(const LayerMap& F, BatchF& Z, long depth, const std::vector<Observer*>& post, const std::vector<Observer*>& pre,
             const ProgressFn& progress) {
  iterate_lanes_impl(std::vector<Lane<BatchF>>{{"", &F, &Z, post, pre}}, depth, progress);
}

namespace {

/// One RK4 step. With `stage_rate`, also the free stiffness estimate of the step (as in Hairer's
/// DOPRI5): |k3 - k2| / |Y3 - Y2| with Y3 - Y2 = (h/2)(k2 - k1) before retraction, the field's
/// Jacobian along the direction the stages moved in (0 when they moved by round-off only). It
/// grows as soon as a stiff component is excited, which the periodic rate checks could miss.
void rk4_step_impl(const VectorField& f, double t, double h, Batch& Z, bool retract, double t_last, double* stage_rate) {
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
  if (stage_rate) {
    const double dy = 0.5 * std::abs(h) * (k2 - k1).norm();
    *stage_rate = dy > 1e-12 * Z.Z.norm() ? (k3 - k2).norm() / dy : 0.0;
  }
  S.Z = Z.Z + h * k3;
  if (proj) project_rows(S.Z);
  f.eval(t_last, S, k4);
  Z.Z += (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
  if (proj) project_rows(Z.Z);
}

}  // namespace

void rk4_step(const VectorField& f, double t, double h, Batch& Z, bool retract) {
  rk4_step_impl(f, t, h, Z, retract, t + h, nullptr);
}

void rk4_step_until(const VectorField& f, double t, double h, Batch& Z, bool retract, double t_last) {
  rk4_step_impl(f, t, h, Z, retract, t_last, nullptr);
}

namespace {

/// Sorted stop times in (t0, t1]: switching times of the field, output times, and t1.
std::vector<double> stop_times(const VectorField& f, double t0, double t1, double every) {
  std::vector<double> s = f.switching_times(t0, t1);
  if (every > 0.0 && !((t1 - t0) / every <= kMaxOutputTimes))
    throw std::invalid_argument(fmt::format("output interval {} over [{}, {}] gives {:.3g} output times; at most {:.0e} are allowed "
                                 "(expected an interval >= {:.3g})",
                                 every, t0, t1, (t1 - t0) / every, kMaxOutputTimes, (t1 - t0) / kMaxOutputTimes));
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

// ---------------------------------------------------------------------------------------------
// Local rate and step guard

namespace {

/// Rows [first, first + count) of run r (one block for batches whose shape is not runs x len).
struct RunBlocks {
  Eigen::Index count, rows;
  RunBlocks(const Batch& Z) {
    const Eigen::Index total = Z.Z.rows();
    const bool ok = Z.runs >= 1 && Z.len >= 1 && static_cast<Eigen::Index>(Z.runs) * Z.len == total;
    count = ok ? Z.runs : 1;
    rows = ok ? Z.len : total;
  }
};

/// Deterministic pseudo-random start for run block r (attempt k), tangent when asked, unit norm.
void seed_block(Tokens& v, const Batch& Z, const RunBlocks& rb, Eigen::Index r, std::uint64_t k, bool tangent) {
  Mat blk(rb.rows, Z.Z.cols());
  Rng rng(0x5a7e9a4dULL, {static_cast<std::uint64_t>(r), k});
  rng.fill_normal(blk);
  if (tangent) {
    const Tokens zb = Z.Z.middleRows(r * rb.rows, rb.rows);
    tangent_project_rows(zb, blk);
  }
  const double nb = blk.norm();
  v.middleRows(r * rb.rows, rb.rows) = nb > 0.0 ? Mat(blk / nb) : blk;
}

}  // namespace

double local_rate(const VectorField& f, double t, const Batch& Z, bool tangent, int iterations, Tokens& v) {
  if (Z.Z.size() == 0) return 0.0;
  iterations = std::max(iterations, 1);
  const RunBlocks rb(Z);
  if (v.rows() != Z.Z.rows() || v.cols() != Z.Z.cols() || !v.allFinite()) {
    v.resize(Z.Z.rows(), Z.Z.cols());
    for (Eigen::Index r = 0; r < rb.count; ++r) seed_block(v, Z, rb, r, 0, tangent);
  } else {
    if (tangent) tangent_project_rows(Z.Z, v);
    for (Eigen::Index r = 0; r < rb.count; ++r) {
      auto blk = v.middleRows(r * rb.rows, rb.rows);
      const double nb = blk.norm();
      if (nb > 0.0) blk /= nb; else seed_block(v, Z, rb, r, 0, tangent);
    }
  }
  const int keep = std::max(1, iterations / 2);
  std::vector<double> logsum(static_cast<std::size_t>(rb.count), 0.0);
  std::vector<int> used(static_cast<std::size_t>(rb.count), 0);
  Tokens w;
  for (int k = 0; k < iterations; ++k) {
    f.jvp(t, Z, v, w);
    if (tangent) tangent_project_rows(Z.Z, w);
    for (Eigen::Index r = 0; r < rb.count; ++r) {
      auto wb = w.middleRows(r * rb.rows, rb.rows);
      const double ratio = wb.norm();  // |J v| for the unit block v
      const auto ru = static_cast<std::size_t>(r);
      if (k >= iterations - keep && ratio > 0.0 && std::isfinite(ratio)) {
        logsum[ru] += std::log(ratio);
        ++used[ru];
      }
      if (ratio > 0.0 && std::isfinite(ratio))
        v.middleRows(r * rb.rows, rb.rows) = wb / ratio;
      else  // v fell into the kernel (or the field is not finite here): restart this block
        seed_block(v, Z, rb, r, static_cast<std::uint64_t>(k) + 1, tangent);
    }
  }
  double rate = 0.0;
  for (std::size_t r = 0; r < logsum.size(); ++r)
    if (used[r] > 0) rate = std::max(rate, std::exp(logsum[r] / used[r]));
  return rate;
}

void StepReport::merge(const StepReport& o) {
  if (o.steps == 0 && o.checks == 0) return;
  if (steps == 0 && checks == 0) {
    *this = o;
    return;
  }
  h_requested = std::max(h_requested, o.h_requested);
  if (o.steps > 0) h_min = steps > 0 ? std::min(h_min, o.h_min) : o.h_min;
  h_max = std::max(h_max, o.h_max);
  max_rate = std::max(max_rate, o.max_rate);
  max_h_rate = std::max(max_h_rate, o.max_h_rate);
  max_stage_h_rate = std::max(max_stage_h_rate, o.max_stage_h_rate);
  limit = std::min(limit, o.limit);
  checks += o.checks;
  steps += o.steps;
  refined_steps += o.refined_steps;
}

namespace {

/// x rounded down to two significant digits (a step that is safe to suggest).
double round_down_2(double x) {
  if (!(x > 0.0) || !std::isfinite(x)) return x;
  const double e = std::pow(10.0, std::floor(std::log10(x)) - 1.0);
  const double r = std::floor(x / e * (1.0 + 1e-12)) * e;  // 0.02 stays 0.02 despite rounding
  return r > 0.0 ? r : x;
}

}  // namespace

std::string step_refusal(const std::string& method, const std::string& param, double h, double rate, double t,
                         double max_h_rate, const std::string& fix) {
  const double safe = max_h_rate / rate;
  return fmt::format(
      "parameter '{}' = {}: the {} step is outside its stability region: the local rate (largest |eigenvalue| of the "
      "field's Jacobian, estimated at t = {:.4g}) is {:.4g}, so step x rate = {:.3g} > {} (tokdyn's bound, with a margin "
      "inside the method's region). The largest safe step is about {:.3g}: use --set {}={:.2g}{}",
      param, h, method, t, rate, h * rate, max_h_rate, safe, param, round_down_2(safe), fix.empty() ? "" : " or " + fix);
}

double checked_step_count(const std::string& param, double h, double t0, double t1, const std::string& method) {
  const double n = (t1 - t0) / h;
  if (!(h > 0.0) || !(n <= kMaxFixedSteps))
    throw std::invalid_argument(fmt::format("parameter '{}' = {}: {} would take {:.3g} steps over [{}, {}]; more than {:.0e} steps are "
                                 "refused (expected a step >= {:.3g})",
                                 param, h, method, n, t0, t1, kMaxFixedSteps, (t1 - t0) / kMaxFixedSteps));
  return n;
}

StepGuard::StepGuard(const VectorField& f, bool tangent, StepGuardOptions opt, double h_requested, double t_end)
    : f_(f), tangent_(tangent), opt_(std::move(opt)), t_end_(t_end) {
  rep_.method = opt_.method;
  rep_.h_requested = h_requested;
  rep_.limit = opt_.max_h_rate;
}

bool StepGuard::before_step(double t, const Batch& Z, double h) {
  if (opt_.policy != StepPolicy::Off && until_check_ <= 0) {
    const bool first = last_rate_ < 0.0;
    const double rate = local_rate(f_, t, Z, tangent_, first ? opt_.first_iterations : opt_.iterations, v_);
    ++rep_.checks;
    rep_.max_rate = std::max(rep_.max_rate, rate);
    double hr = h * rate;
    bool replan = false;
    if (!(hr <= opt_.max_h_rate)) {
      if (opt_.policy == StepPolicy::Refuse || !std::isfinite(rate))
        throw std::invalid_argument(step_refusal(rep_.method, opt_.param, rep_.h_requested, rate, t, opt_.max_h_rate, opt_.fix));
      int k = 0;
      while (!(std::ldexp(h, -k) * rate <= opt_.max_h_rate)) ++k;
      shrink_ = std::ldexp(shrink_, -k);
      checked_step_count(opt_.param + " (refined)", target(), t, t_end_, rep_.method);
      hr = std::ldexp(h, -k) * rate;
      replan = true;
    }
    rep_.max_h_rate = std::max(rep_.max_h_rate, hr);
    // Next check: before the rate, growing as it did since the last check, could carry
    // step x rate past the region's radius.
    long m = first ? 4 : opt_.max_interval;
    if (!first && last_rate_ > 0.0 && rate > last_rate_ && since_check_ > 0 && hr > 0.0) {
      const double q = std::log(rate / last_rate_) / static_cast<double>(since_check_);  // log growth per step
      const double room = std::log(opt_.region_radius / hr);
      m = room > 0.0 ? static_cast<long>(std::min(static_cast<double>(opt_.max_interval), std::floor(room / q))) : 1;
    }
    until_check_ = std::clamp<long>(m, 1, opt_.max_interval);
    since_check_ = 0;
    last_rate_ = rate;
    if (replan) return false;
  }
  --until_check_;
  ++since_check_;
  if (rep_.steps == 0 || h < rep_.h_min) rep_.h_min = h;
  rep_.h_max = std::max(rep_.h_max, h);
  ++rep_.steps;
  if (shrink_ < 1.0) ++rep_.refined_steps;
  return true;
}

void StepGuard::after_step(double h, double stage_rate) {
  if (opt_.policy == StepPolicy::Off || !(stage_rate > 0.0)) return;
  rep_.max_stage_h_rate = std::max(rep_.max_stage_h_rate, h * stage_rate);
  // Check at the next step when the stages saw a rate that matters (h x rate above a quarter of
  // the bound) and that exceeds the last measured one by 25%, or the bound itself.
  const bool relevant = h * stage_rate > 0.25 * opt_.max_h_rate;
  if (h * stage_rate > opt_.max_h_rate || (relevant && stage_rate > 1.25 * std::max(last_rate_, 0.0))) until_check_ = 0;
}

long integrate_rk4(const VectorField& f, Batch& Z, double t0, double t1, const Rk4Options& opt,
                   const std::vector<Observer*>& obs, double observe_every, const ProgressFn& progress) {
  if (!(opt.h > 0.0)) throw std::invalid_argument("integrate_rk4: step must be > 0");
  checked_step_count(opt.guard.param, opt.h, t0, t1, opt.guard.method);
  const std::vector<double> stops = stop_times(f, t0, t1, observe_every);
  StepGuard guard(f, opt.retract && f.on_sphere(), opt.guard, opt.h, t1);
  auto pieces = [](double span, double h) {
    return std::max(1L, static_cast<long>(std::ceil(span / h - 1e-9)));  // span / h <= kMaxFixedSteps (checked)
  };
  for (auto* o : obs) o->observe(t0, Z);
  long steps = 0;
  double t = t0;
  for (double stop : stops) {
    double ta = t;  // start of the current plan of this segment
    long n = pieces(stop - ta, guard.target());
    double h = (stop - ta) / static_cast<double>(n);
    // The segment [t, stop) belongs to one piece of a piecewise-constant schedule: the last
    // stage of its last step is evaluated one ulp before `stop`, never on the next piece.
    const double inside = std::nextafter(stop, t);
    for (long s = 0; s < n; ++s) {
      const double ts = ta + s * h;
      if (!guard.before_step(ts, Z, h)) {  // refined: plan the rest of the segment again
        ta = ts;
        n = pieces(stop - ta, guard.target());
        h = (stop - ta) / static_cast<double>(n);
        s = -1;
        continue;
      }
      double stage_rate = 0.0;
      rk4_step_impl(f, ts, h, Z, opt.retract, s + 1 == n ? inside : ts + h, &stage_rate);
      guard.after_step(h, stage_rate);
      ++steps;
    }
    t = stop;
    require_finite(Z, "t =", t);
    if (stop == t1 || is_output(stop, t0, observe_every))
      for (auto* o : obs) o->observe(t, Z);
    if (progress) progress((t - t0) / (t1 - t0));
  }
  if (opt.report) opt.report->merge(guard.report());
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
