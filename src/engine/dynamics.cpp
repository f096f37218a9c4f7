#include "tokdyn/engine/dynamics.hpp"

#include <cmath>
#include <stdexcept>

namespace tokdyn {

void TapObserver::tap(const std::string& name, long k, const float* data, const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (std::size_t s : shape) n *= s;
  const std::vector<double> wide(data, data + n);
  tap(name, k, wide.data(), shape);
}

void LayerMap::watch(TapObserver* o) {
  if (tap_names().empty()) throw std::invalid_argument("this model offers no taps (internal quantities) to watch");
  watchers_.push_back(o);
}

namespace {

/// Central difference (f(Z + hV) - f(Z - hV)) / 2h of a map `f` (Batch in, value out), the step
/// scaled to the direction's size: h = 1e-6 / |V|_F.
template <class F>
void central_difference(const Batch& Z, const Tokens& V, Tokens& out, F&& f) {
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
  f(Zp, fp);
  f(Zm, fm);
  out = (fp - fm) / (2.0 * h);
}

}  // namespace

void VectorField::jvp(double t, const Batch& Z, const Tokens& V, Tokens& out) const {
  central_difference(Z, V, out, [&](const Batch& X, Tokens& y) { eval(t, X, y); });
}

void LayerMap::jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const {
  central_difference(Z, V, out, [&](const Batch& X, Tokens& y) {
    Batch Y = X;
    apply(k, Y);
    y = std::move(Y.Z);
  });
}

void LayerMap::apply_float(long k, BatchF& Z) const {
  Batch D{Z.Z.cast<double>(), Z.runs, Z.len};
  apply(k, D);
  Z.Z = D.Z.cast<float>();
}

void LayerMap::vjp(long, const Batch&, const Tokens&, Tokens&) const {
  throw std::logic_error("LayerMap::vjp: this model provides no transpose product (has_vjp() is false)");
}

}  // namespace tokdyn
