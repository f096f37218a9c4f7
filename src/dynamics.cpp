#include "tokdyn/dynamics.hpp"

#include <cmath>
#include <stdexcept>

namespace tokdyn {

void VectorField::jvp(double t, const Batch& Z, const Tokens& V, Tokens& out) const {
  // Central difference; the step is scaled to the direction's size.
  const double vn = V.norm();
  if (vn == 0.0) {
    out.setZero(Z.Z.rows(), Z.Z.cols());
    return;
  }
  const double h = 1e-6 / vn;
  Batch Zp = Z, Zm = Z;
  Zp.Z += h * V;
  Zm.Z -= h * V;
  Tokens fp, fm;
  eval(t, Zp, fp);
  eval(t, Zm, fm);
  out = (fp - fm) / (2.0 * h);
}

void LayerMap::jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const {
  // Central difference of the layer map; the step is scaled to the direction's size.
  const double vn = V.norm();
  if (vn == 0.0) {
    out.setZero(Z.Z.rows(), Z.Z.cols());
    return;
  }
  const double h = 1e-6 / vn;
  Batch Zp = Z, Zm = Z;
  Zp.Z += h * V;
  Zm.Z -= h * V;
  apply(k, Zp);
  apply(k, Zm);
  out = (Zp.Z - Zm.Z) / (2.0 * h);
}

void LayerMap::vjp(long, const Batch&, const Tokens&, Tokens&) const {
  throw std::logic_error("LayerMap::vjp: this model provides no transpose product (has_vjp() is false)");
}

}  // namespace tokdyn
