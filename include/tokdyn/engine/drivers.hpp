#pragma once
// Drivers move tokens: iterate a LayerMap for K layers, or integrate a VectorField with
// fixed-step RK4 retracted to the spheres at every stage, or with an adaptive embedded
// Runge-Kutta method (Boost.Odeint: Dormand-Prince 5(4), Cash-Karp 5(4), Fehlberg 7(8)) with
// error control, retracted after every accepted step.
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tokdyn/engine/dynamics.hpp"
#include "tokdyn/engine/observers.hpp"

namespace tokdyn {

/// Throws NonFiniteError (exit code 4) naming the time/layer, run and token when the state holds a
/// NaN or Inf. The drivers call it after every layer and at every stop; models with their own
/// loops call it too. `clock` is "layer" or "t =".
/// `lane` (optional) names the lane (variant) in the message; `hint` replaces the default advice.
void require_finite(const Batch& Z, const char* clock, double t, const std::string& lane = "", const std::string& hint = "");
void require_finite(const BatchF& Z, const char* clock, double t, const std::string& lane = "", const std::string& hint = "");

/// Progress callback: fraction done in [0, 1].
using ProgressFn = std::function<void(double)>;

/// Iterates layers 1..depth. `post` observers see (k, Z) for k = 0..depth (after layer k);
/// `pre` observers see (k-1, Z) with the state entering layer k, k = 1..depth.
void iterate(const LayerMap& F, Batch& Z, long depth, const std::vector<Observer*>& post,
             const std::vector<Observer*>& pre = {}, const ProgressFn& progress = {});
/// The same on a float batch (models whose state is float: LayerMap::float_state()); observers
/// see it through Observer::observe_float.
void iterate(const LayerMap& F, BatchF& Z, long depth, const std::vector<Observer*>& post,
             const std::vector<Observer*>& pre = {}, const ProgressFn& progress = {});

/// Runs `job(c, part)` on fixed chunks of `chunk` runs of Z (chunk c holds runs [c*chunk,
/// min((c+1)*chunk, runs)); the last may be shorter), threaded over chunks (dynamic schedule), and
/// writes each part back into Z. The partition depends only on the batch, so results are the same
/// on any thread count (an adaptive integrator's steps depend on the runs it integrates together).
/// After an exception no further chunk starts, and one is rethrown (ParallelErrors).
void for_each_chunk(Batch& Z, int chunk, const std::function<void(int c, Batch& part)>& job);

/// One lane of a lock-step depth run: a model, the batch it moves and its observers.
template <class B>
struct Lane {
  std::string name;               ///< named in messages (e.g. the variant)
  const LayerMap* map = nullptr;
  B* state = nullptr;
  std::vector<Observer*> post;    ///< see (k, Z) after layer k, k = 0..depth
  std::vector<Observer*> pre;     ///< see (k-1, Z), the state entering layer k
};
/// Iterates layers 1..depth on every lane in lock step: layer k is applied to lanes 0, 1, ... before
/// layer k+1, so lanes share each layer of a schedule (paired comparisons of model variants; a
/// layer made on demand is made once). The state is checked for NaN/Inf after every layer.
void iterate_lanes(const std::vector<Lane<Batch>>& lanes, long depth, const ProgressFn& progress = {});
void iterate_lanes(const std::vector<Lane<BatchF>>& lanes, long depth, const ProgressFn& progress = {});

// ---------------------------------------------------------------------------------------------
// Step guard: a fixed step is checked against the field's local rate, the largest |eigenvalue|
// of its Jacobian along the run (the tangential Jacobian for fields on the spheres), estimated by
// power iteration with the field's Jacobian-vector products. Classical RK4 is absolutely stable
// for h*lambda in its region, which contains the half disc {|z| <= 2.6156, Re z <= 0} (its
// boundary is nearest the origin at arg z = 122.7 deg; on the real axis it is 2.7853, on the
// imaginary axis 2 sqrt 2). The guard allows h * rate <= 2 (a 24% margin for the estimate's
// error and for growth of the rate between checks).

inline constexpr double kRk4StabilityRadius = 2.6155876882;  ///< min |z| on RK4's boundary, Re z <= 0
inline constexpr double kRk4MaxHRate = 2.0;                  ///< the guard's bound on h * rate
/// Forward Euler (the normalised residual steps are Euler steps of their flows, retracted):
/// stable for |1 + z| <= 1, i.e. h * rate <= 2 on the real axis and never on the imaginary one.
inline constexpr double kEulerRealAxisLimit = 2.0;
/// Boost.Odeint's runge_kutta_fehlberg78 (do_step advances its 8th-order solution): the region
/// contains {|z| <= 2.366, Re z <= 0} (the imaginary axis is the nearest part; real axis 5.008).
inline constexpr double kRkf78StabilityRadius = 2.366;
inline constexpr double kRkf78MaxHRate = 1.8;
/// Fixed-step loops refuse to take more steps than this (a step count derived from a tiny step
/// would overflow or never finish).
inline constexpr double kMaxFixedSteps = 1e9;
/// Output grids with more points than this are refused.
inline constexpr double kMaxOutputTimes = 1e8;

/// Largest |eigenvalue| of Df(t, Z) by power iteration with f.jvp, per run of the batch (runs
/// are independent, so each run's block is normalised on its own); returns the maximum over
/// runs. On the spheres (tangent = true) the Jacobian is restricted to the tangent spaces:
/// v -> P Df[P v] with P_i = I - z_i z_i^T. `v` is the start vector and receives the last
/// iterate (warm start for the next call); when its shape does not match Z it is replaced by a
/// fixed pseudo-random start. The estimate is the geometric mean of the growth ratios
/// |J v_k| / |v_k| over the last half of the iterations (exact for a dominant real eigenvalue or
/// a dominant complex pair of a normal Jacobian once converged).
double local_rate(const VectorField& f, double t, const Batch& Z, bool tangent, int iterations, Tokens& v);

/// What to do when a fixed step is outside the method's stability region.
enum class StepPolicy {
  Refuse,  ///< throw std::invalid_argument naming the parameter, the rate, the largest safe step and the fix
  Refine,  ///< halve the step until it is inside (reported in StepReport)
  Off,     ///< no check (only for deliberate experiments on the integrator itself)
};

/// What the step guard saw along one or more integrations.
struct StepReport {
  std::string method = "RK4";
  double h_requested = 0.0;  ///< the step asked for
  double h_min = 0.0;        ///< smallest step used (0: none taken)
  double h_max = 0.0;        ///< largest step used
  double max_rate = 0.0;     ///< largest local rate estimated at any check
  double max_h_rate = 0.0;   ///< largest (step used) x (local rate) at any check
  double max_stage_h_rate = 0.0;  ///< largest step x (stage-difference rate), the per-step trigger
  double limit = kRk4MaxHRate;
  long checks = 0;
  long steps = 0;
  long refined_steps = 0;    ///< steps taken with a refined (halved) step
  bool refined() const { return refined_steps > 0; }
  /// Combines reports of several integrations (order independent: max/min/sums).
  void merge(const StepReport& o);
};

struct StepGuardOptions {
  StepPolicy policy = StepPolicy::Refuse;
  std::string method = "RK4";  ///< named in messages and reports
  double max_h_rate = kRk4MaxHRate;
  double region_radius = kRk4StabilityRadius;  ///< the region's radius (spacing of later checks)
  std::string param = "h";   ///< the user parameter that sets the step (named in messages)
  std::string fix;           ///< an alternative fix for the message, e.g. "--set integrator=dopri5"
  int first_iterations = 16; ///< power iterations at the first check (cold start)
  int iterations = 4;        ///< power iterations at later checks (warm start)
  int max_interval = 32;     ///< steps between checks at most
};

/// Checks a fixed-step method's step before steps: at the first step, then again after an
/// interval chosen so that the rate, extrapolated from its growth since the last check, cannot
/// carry h * rate out of the region (kRk4StabilityRadius) before the next check (1..max_interval
/// steps), and at once when a step's own stage differences show a larger rate (after_step).
/// Never changes the state, so a step it accepts gives bit-identical results.
class StepGuard {
 public:
  /// `t_end`: end of the run (refinement refuses to exceed kMaxFixedSteps over what is left).
  StepGuard(const VectorField& f, bool tangent, StepGuardOptions opt, double h_requested, double t_end);
  /// Before a step of size h from (t, Z): true when the step may be taken (it is counted);
  /// false when it was refined (Refine: target() shrank by 2^k; plan again with the new target
  /// and call again). Throws std::invalid_argument when refused (exit 2 in a preset run, error.hpp).
  bool before_step(double t, const Batch& Z, double h);
  /// After a step of size h: `stage_rate` is the step's free stiffness estimate (RK4: stage
  /// differences, 0 when unavailable). When it is large, or grew past the last measured rate,
  /// the next step is checked.
  void after_step(double h, double stage_rate);
  /// The step to plan with: the requested step, halved as often as refinement needed.
  double target() const { return rep_.h_requested * shrink_; }
  const StepReport& report() const { return rep_; }

 private:
  const VectorField& f_;
  bool tangent_;
  StepGuardOptions opt_;
  double t_end_;
  StepReport rep_;
  Tokens v_;
  long until_check_ = 0;
  long since_check_ = 0;
  double last_rate_ = -1.0;
  double shrink_ = 1.0;  ///< refinement factor applied to every later step (Refine)
};

/// The message of a refused step (shared by every fixed-step loop).
std::string step_refusal(const std::string& method, const std::string& param, double h, double rate, double t,
                         double max_h_rate, const std::string& fix);

/// Refuses (std::invalid_argument) a fixed-step run over [t0, t1] with step h that would take more than
/// kMaxFixedSteps steps; returns the step count as a double (never cast before this check).
double checked_step_count(const std::string& param, double h, double t0, double t1, const std::string& method = "RK4");

struct Rk4Options {
  double h = 1e-2;             ///< step (shortened to land on switching and output times)
  bool retract = true;         ///< project every stage onto the spheres (when the field is)
  StepGuardOptions guard = {}; ///< the step is checked against the field's local rate
  StepReport* report = nullptr;  ///< receives the guard's report (optional)
};

/// Fixed-step classical RK4 from t0 to t1. Observers see the state at t0 and then at every
/// multiple of `observe_every` (> 0) and at t1. Returns the number of steps taken. The step is
/// guarded (opt.guard): outside RK4's stability region the run is refused or refined, and more
/// than kMaxFixedSteps steps, or more than kMaxOutputTimes output times, are refused.
long integrate_rk4(const VectorField& f, Batch& Z, double t0, double t1, const Rk4Options& opt,
                   const std::vector<Observer*>& obs = {}, double observe_every = 0.0,
                   const ProgressFn& progress = {});

/// One RK4 step of size h (retracted stages when opt.retract and f.on_sphere()).
void rk4_step(const VectorField& f, double t, double h, Batch& Z, bool retract);
/// As rk4_step, with the last stage evaluated at time t_last (<= t + h) instead of t + h.
void rk4_step_until(const VectorField& f, double t, double h, Batch& Z, bool retract, double t_last);

struct AdaptiveOptions {
  std::string method = "dopri5";  ///< dopri5 | cash_karp54 | fehlberg78 | bulirsch_stoer (dense output; off the sphere only)
  double rtol = 1e-8;
  double atol = 1e-10;
  double h0 = 1e-3;               ///< first trial step
  bool retract = true;
  long max_steps = 100000000;
};

struct AdaptiveStats {
  long accepted = 0;
  long rejected = 0;
};

/// Adaptive embedded Runge-Kutta with error control (Boost.Odeint controlled steppers).
AdaptiveStats integrate_adaptive(const VectorField& f, Batch& Z, double t0, double t1,
                                 const AdaptiveOptions& opt, const std::vector<Observer*>& obs = {},
                                 double observe_every = 0.0, const ProgressFn& progress = {});

}  // namespace tokdyn
