#pragma once
// The two ways a model moves tokens with depth:
//  LayerMap:    Z_{k+1} = F_k(Z_k), one discrete layer at a time;
//  VectorField: dZ/dt = f(t, Z), with its tangent map (Jacobian-vector product).
// Both act on a Batch: a stack of equally long sequences processed together.
#include <string>
#include <vector>

#include "tokdyn/tokens.hpp"

namespace tokdyn {

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
