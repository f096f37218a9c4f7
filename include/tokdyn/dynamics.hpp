#pragma once
// The two ways a model moves tokens with depth:
//  LayerMap:    Z_{k+1} = F_k(Z_k), one discrete layer at a time;
//  VectorField: dZ/dt = f(t, Z), with its tangent map (Jacobian-vector product).
// Both act on a Batch: a stack of equally long sequences processed together.
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
};

class VectorField {
 public:
  virtual ~VectorField() = default;
  /// dZ = f(t, Z) for every sequence of the batch (dZ is resized as needed).
  virtual void eval(double t, const Batch& Z, Tokens& dZ) const = 0;
  /// Tangent map: out = Df(t, Z)[V]. Default: central finite difference with step h.
  virtual void jvp(double t, const Batch& Z, const Tokens& V, Tokens& out) const;
  /// True when f is tangent to the spheres (integrators then retract onto them).
  virtual bool on_sphere() const { return true; }
  /// Times in (t0, t1) where f jumps in t; integrators stop exactly there.
  virtual std::vector<double> switching_times(double t0, double t1) const { return {}; }
};

}  // namespace tokdyn
