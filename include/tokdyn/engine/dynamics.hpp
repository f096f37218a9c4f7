#pragma once
// The two ways a model moves tokens with depth:
//  LayerMap:    Z_{k+1} = F_k(Z_k), one discrete layer at a time;
//  VectorField: dZ/dt = f(t, Z), with its tangent map (Jacobian-vector product).
// Both act on a Batch: a stack of equally long sequences processed together.
#include <cstddef>
#include <string>
#include <vector>

#include "tokdyn/core/tokens.hpp"

namespace tokdyn {

/// Internal quantities of a layer ("taps"): what a model computes inside layer k that is not a
/// function of the state alone without recomputing the layer, e.g. "q" (q_i = C_i . B_i of the
/// state entering layer k: the SSM and Mamba-2) or "mixing" (Mamba-2's mixing matrices per head).
/// A model names the taps it offers (LayerMap::tap_names) and hands each to the observers that ask,
/// as an array with its shape (row-major); models never write files, observers decide where the
/// arrays go (observers.hpp ArrayTapObserver: an ArraySink; analysis/pe_window.hpp PeObserver: the
/// PE windows of q).
class TapObserver {
 public:
  virtual ~TapObserver() = default;
  /// Whether tap `name` of the state entering layer k is wanted.
  virtual bool wants(const std::string& name, long k) const = 0;
  /// For taps with a head axis ("mixing"): the heads wanted at layer k.
  virtual std::vector<int> heads(const std::string&, long) const { return {}; }
  /// The quantity, row-major with `shape` (each tap documents its axes). The float overload
  /// defaults to widening the array and calling the double one.
  virtual void tap(const std::string& name, long k, const double* data, const std::vector<std::size_t>& shape) = 0;
  virtual void tap(const std::string& name, long k, const float* data, const std::vector<std::size_t>& shape);
};

class LayerMap {
 public:
  virtual ~LayerMap() = default;
  /// Applies layer k (k >= 1) to every sequence of the batch, in place.
  virtual void apply(long k, Batch& Z) const = 0;
  /// True when every layer maps unit tokens to unit tokens.
  virtual bool on_sphere() const { return true; }

  // ---- Linearisation (docs/design.md, "Linearisation") ----
  // V has the shape of Z.Z (one tangent vector per run, stacked as Z is); runs are independent,
  // so the tangent of run r depends only on rows of run r of Z and V.
  /// out = D F_k(Z)[V], the Jacobian of layer k at Z applied to V (out is resized).
  /// Default: central finite difference (F_k(Z + hV) - F_k(Z - hV)) / 2h with h = 1e-6 / |V|_F
  /// (about 1e-6 relative error for smooth maps), so every LayerMap has one; models with an exact
  /// (analytic or forward-mode) tangent override it and report has_exact_jvp().
  virtual void jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const;
  /// True when jvp() is exact (not the finite-difference default).
  virtual bool has_exact_jvp() const { return false; }
  /// out = D F_k(Z)^T [W], the transpose product (W and out of the shape of Z.Z). Only where a
  /// model provides it (has_vjp()); the default throws std::logic_error.
  virtual void vjp(long k, const Batch& Z, const Tokens& W, Tokens& out) const;
  virtual bool has_vjp() const { return false; }

  // ---- Float state (models computed in fp32: Mamba-2) ----
  /// True when the model's own state is float: drivers then keep the batch in float (a BatchF)
  /// and apply() on a double batch rounds it to float on entry.
  virtual bool float_state() const { return false; }
  /// Applies layer k to a float batch, in place. Default: widen to double, apply(), round back.
  virtual void apply_float(long k, BatchF& Z) const;
  /// What the message of a non-finite state suggests (drivers name the layer, run and token).
  virtual std::string overflow_hint() const { return "the dynamics overflowed; check the weights and the step size"; }

  // ---- Taps (internal quantities, see TapObserver) ----
  /// The taps this model offers, with their shapes (e.g. "q [runs, tokens]"); empty: none.
  virtual std::vector<std::string> tap_names() const { return {}; }
  /// Registers an observer of the model's taps (not owned; called during apply). A model without
  /// taps refuses it (std::invalid_argument), so that a tap asked for is never silently ignored.
  void watch(TapObserver* o);

 protected:
  std::vector<TapObserver*> watchers_;
};

class VectorField {
 public:
  virtual ~VectorField() = default;
  /// dZ = f(t, Z) for every sequence of the batch (dZ is resized as needed).
  virtual void eval(double t, const Batch& Z, Tokens& dZ) const = 0;
  /// Tangent map: out = Df(t, Z)[V]. Default: central finite difference with step
  /// h = 1e-6 / |V|_F; exact overrides report has_exact_jvp().
  virtual void jvp(double t, const Batch& Z, const Tokens& V, Tokens& out) const;
  /// True when jvp() is exact (not the finite-difference default).
  virtual bool has_exact_jvp() const { return false; }
  /// True when f is tangent to the spheres (integrators then retract onto them).
  virtual bool on_sphere() const { return true; }
  /// Times in (t0, t1) where f jumps in t; integrators stop exactly there.
  virtual std::vector<double> switching_times(double t0, double t1) const { return {}; }
};

}  // namespace tokdyn
