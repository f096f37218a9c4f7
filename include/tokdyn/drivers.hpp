#pragma once
// Drivers move tokens: iterate a LayerMap for K layers, or integrate a VectorField with
// fixed-step RK4 retracted to the spheres at every stage, or with an adaptive embedded
// Runge-Kutta method (Boost.Odeint: Dormand-Prince 5(4), Cash-Karp 5(4), Fehlberg 7(8)) with
// error control, retracted after every accepted step.
#include <functional>
#include <string>
#include <vector>

#include "tokdyn/dynamics.hpp"
#include "tokdyn/observers.hpp"

namespace tokdyn {

/// Throws NonFiniteError (exit code 4) naming the time/layer, run and token when the state holds a
/// NaN or Inf. The drivers call it after every layer and at every stop; models with their own
/// loops call it too. `clock` is "layer" or "t =".
void require_finite(const Batch& Z, const char* clock, double t);

/// Progress callback: fraction done in [0, 1].
using ProgressFn = std::function<void(double)>;

/// Iterates layers 1..depth. `post` observers see (k, Z) for k = 0..depth (after layer k);
/// `pre` observers see (k-1, Z) with the state entering layer k, k = 1..depth.
void iterate(const LayerMap& F, Batch& Z, long depth, const std::vector<Observer*>& post,
             const std::vector<Observer*>& pre = {}, const ProgressFn& progress = {});

struct Rk4Options {
  double h = 1e-2;             ///< step (shortened to land on switching and output times)
  bool retract = true;         ///< project every stage onto the spheres (when the field is)
};

/// Fixed-step classical RK4 from t0 to t1. Observers see the state at t0 and then at every
/// multiple of `observe_every` (> 0) and at t1. Returns the number of steps taken.
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
