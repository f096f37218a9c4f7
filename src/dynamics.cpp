#include "tokdyn/dynamics.hpp"

#include <cmath>

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

}  // namespace tokdyn
