// Pseudo-arclength continuation in rho of the closed loop (15) of the coupling paper (Thm 12,
// App. C.2): the bordered Keller solve, fold and end-singularity events. Split from
// closed_loop.cpp (the injection family, Picard / Newton and the bounds).
#include "tokdyn/analysis/closed_loop.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "tokdyn/analysis/green.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/norms.hpp"

namespace tokdyn::closed_loop {

// ------------------------------------------------------------------------------------------------
// Pseudo-arclength continuation on (w, rho), u = ubar_rho(l) + w (the end profile carries the
// inhomogeneous boundary data, so w has homogeneous boundary rows and every linear solve is the
// closed-loop BVP with zero tails). Keller's bordered solve:
//   R_w a = -R,  R_w b = R_rho,  delta_rho = (g + <t_w, a>) / (<t_w, b> - t_rho),  delta_w = a - delta_rho b,
// with g the arclength constraint <t_w, w - w_pred> + t_rho (rho - rho_pred) and the inner product
// <w, w'> = sum w w' / (L+1) (+ rho rho'). R_rho(l) = ubar'(l+1) - B~(l) ubar'(l) - psi_l(u(l)).

namespace continuation_detail {

/// <w, w'> = sum w w' / (L+1): the continuation's inner product on sequences.
double scaled_dot(const Seq& a, const Seq& b) { return (a.array() * b.array()).sum() / static_cast<double>(a.cols()); }

struct Linearised {
  Seq a, b;  // R_w a = -R, R_w b = R_rho
};

/// The two bordered solves at (w, rho), or nothing when the closed-loop BVP is singular there.
std::optional<Linearised> linearise(const Problem& p, double rho, const Seq& w, const EndPoints& e, long& factorizations) {
  const Seq ub = end_profile(p, e.minus, e.plus), dub = end_profile(p, e.dminus, e.dplus);
  const Seq u = ub + w;
  const std::vector<Matrix> maps = closed_loop_maps(p, rho, u);
  Seq Rrho(p.d, p.L);
  for (long l = 0; l < p.L; ++l)
    Rrho.col(l) = dub.col(l + 1) - maps[static_cast<std::size_t>(l)] * dub.col(l) - p.psi->value(l, u.col(l));
  const Seq R = residual(p, rho, u);
  const green::BvpOutcome bvp = green::Bvp::factor(maps, p.ends);
  ++factorizations;
  if (!bvp) return std::nullopt;
  return Linearised{bvp.bvp->solve(-R, green::Tails::Zero), bvp.bvp->solve(Rrho, green::Tails::Zero)};
}

/// Signs of det(A_± + rho Dpsi(ubar_±)) (as a pair packed in an int).
int end_det_sign(const Problem& p, double rho, const EndPoints& e) {
  int out = 0;
  for (int side = 0; side < 2; ++side) {
    const long l = side == 0 ? 0 : p.L - 1;
    const Matrix J = p.B[static_cast<std::size_t>(l)] - Matrix::Identity(p.d, p.d) + rho * p.psi->jacobian(l, side == 0 ? e.minus : e.plus);
    out |= (J.partialPivLu().determinant() > 0 ? 1 : 0) << side;
  }
  return out;
}

/// Whether e continues `ref` (the branch of the end equilibria) to first order: the guard of the
/// continuation's corrector.
bool continues(const EndPoints& ref, double rho_ref, const EndPoints& e, double rho) {
  const double dr = rho - rho_ref;
  return (e.minus - ref.minus - dr * ref.dminus).norm() <= 0.5 * std::abs(dr) * ref.dminus.norm() + 1e-10 * (1.0 + ref.minus.norm()) &&
         (e.plus - ref.plus - dr * ref.dplus).norm() <= 0.5 * std::abs(dr) * ref.dplus.norm() + 1e-10 * (1.0 + ref.plus.norm());
}

/// Bisection for the end of the branch of end equilibria beyond rho_good (in opt.direction): a
/// point is good when its end equilibria continue the last good ones, keep the unstable dimension
/// and stay off the unit circle. Returns (first bad rho, "fold" | "end spectrum" | "step").
std::pair<double, std::string> refine_end_singularity(const Problem& p, double rho_good, EndPoints good_e,
                                                      const ContinuationOptions& opt, double& bracket) {
  // Good: the branch continues from the last good point to rho in 16 guarded sub-steps (the guard's
  // first-order test needs sub-steps small against the distance to the singular point).
  const int det0 = end_det_sign(p, rho_good, good_e);
  auto good_at = [&](double rho, EndPoints& e) {
    EndPoints ref = good_e;
    double r_ref = rho_good;
    for (int j = 1; j <= 16; ++j) {
      const double r = rho_good + (rho - rho_good) * j / 16.0;
      EndOutcome found = find_end_equilibria(p, r, &ref);
      if (!found) return false;
      e = std::move(*found.ends);
      if (!continues(ref, r_ref, e, r) || end_det_sign(p, r, e) != det0) return false;
      ref = e;
      r_ref = r;
    }
    const Diagnostics g = diagnose_ends(p, rho, e);
    return g.end_gap >= opt.gap_tol && g.k_minus == p.ends.k && g.k_plus == p.ends.k;
  };
  double bad = rho_good + opt.direction * opt.ds_max;
  EndPoints e;
  for (int i = 0; i < 40 && good_at(bad, e); ++i) bad = rho_good + 2.0 * (bad - rho_good);
  for (int i = 0; i < opt.refine_steps && std::abs(bad - rho_good) > 1e-14 * (1.0 + std::abs(bad)); ++i) {
    const double mid = 0.5 * (rho_good + bad);
    if (good_at(mid, e)) {
      rho_good = mid;
      good_e = e;
    } else {
      bad = mid;
    }
  }
  bracket = std::abs(bad - rho_good);
  // Singular end Jacobian at the end of the branch? Then classify by what lies just beyond.
  double rel = std::numeric_limits<double>::infinity();
  for (int side = 0; side < 2; ++side) {
    const long l = side == 0 ? 0 : p.L - 1;
    const Matrix A = p.B[static_cast<std::size_t>(l)] - Matrix::Identity(p.d, p.d);
    const Matrix J = A + rho_good * p.psi->jacobian(l, side == 0 ? good_e.minus : good_e.plus);
    rel = std::min(rel, Eigen::JacobiSVD<Matrix>(J).singularValues().minCoeff() / Eigen::JacobiSVD<Matrix>(A).singularValues().minCoeff());
  }
  if (!(rel < 0.05)) return {bad, "step"};
  // Beyond a pole the branch continues with the other sign of det(A_± + rho Dpsi); beyond a turning
  // point only other branches exist (the sign of the far branch is the near branch's).
  for (double f = 1e-8; f <= 1e-2; f *= 10) {
    const double r = bad + opt.direction * f * (1.0 + std::abs(bad));
    const EndOutcome beyond = find_end_equilibria(p, r, &good_e);
    if (beyond && end_det_sign(p, r, *beyond.ends) != det0) return {bad, "end spectrum"};
  }
  return {bad, "fold"};
}

struct Tangent {
  Seq w;
  double rho = 0;
};
Tangent tangent_from(const Seq& b, double orient_rho, const Tangent* prev) {
  Tangent t{-b, 1.0};
  const double n = std::sqrt(scaled_dot(b, b) + 1.0);
  t.w /= n;
  t.rho /= n;
  const double s = prev ? scaled_dot(t.w, prev->w) + t.rho * prev->rho : t.rho * orient_rho;
  if (s < 0) {
    t.w = -t.w;
    t.rho = -t.rho;
  }
  return t;
}

ContinuationResult continue_in_rho_impl(const Problem& p, const ContinuationOptions& opt) {
  if (!(opt.direction == 1.0 || opt.direction == -1.0)) throw std::invalid_argument("closed_loop: direction must be +1 or -1");
  if (!(opt.ds0 > 0 && opt.ds_min > 0 && opt.ds_max >= opt.ds_min && std::isfinite(opt.ds_max) && std::isfinite(opt.rho_end)))
    throw std::invalid_argument("closed_loop: continuation steps must be positive and finite (ds_min <= ds_max)");
  ContinuationResult res;
  const long k0 = p.ends.k;

  auto event_of = [&](const ContinuationPoint& pt) -> std::string {
    if (pt.t_rho * opt.direction < 0) return "fold";
    const Diagnostics& g = pt.diag;
    if (g.end_gap < opt.gap_tol) return "end spectrum";
    if (g.k_minus != k0 || g.k_plus != k0) return "dimension";
    if (opt.with_bundles && !g.bundles_ok) return "bundles";
    if (opt.with_bundles && g.k_bundles != k0) return "dimension";
    if (g.sigma_min < opt.sigma_min_tol) return "green";
    return "";
  };

  // The start rho = 0: u*_0 = 0, ends 0 (exact).
  ContinuationPoint cur;
  cur.rho = 0.0;
  cur.ends = end_equilibria(p, 0.0);
  Seq w = Seq::Zero(p.d, p.L + 1);
  cur.u = w;
  const std::optional<Linearised> lin0 = linearise(p, 0.0, w, cur.ends, res.factorizations);
  if (!lin0) throw std::domain_error("closed_loop: the open-loop boundary-value problem is singular at rho = 0 (no dichotomy)");
  Tangent t = tangent_from(lin0->b, opt.direction, nullptr);
  cur.t_rho = t.rho;
  if (opt.diagnose) cur.diag = diagnose(p, 0.0, cur.u, cur.ends, opt.open, opt.exclude, opt.with_bundles);
  res.points.push_back(cur);
  double ds = opt.ds0;
  int steps = 0;
  while (steps < opt.max_steps) {
    const ContinuationPoint& last = res.points.back();
    const Seq w_last = last.u - end_profile(p, last.ends.minus, last.ends.plus);
    const Seq w_pred = w_last + ds * t.w;
    const double rho_pred = last.rho + ds * t.rho;
    Seq wc = w_pred;
    double rho = rho_pred;
    EndPoints e = last.ends;
    Seq b_last;
    bool ok = false;
    int it = 0;
    // A corrector step that meets no end equilibria, leaves their branch or a singular BVP is
    // rejected (ok = false: the step is halved); these are outcomes of the continuation, not errors.
    {
      for (it = 1; it <= opt.newton_max; ++it) {
        EndOutcome found = find_end_equilibria(p, rho, &e);
        if (!found) break;
        e = std::move(*found.ends);
        // The end equilibria are parametrised by rho: past a turning point of the ends their Newton
        // lands on another branch. A jump away from the first-order prediction is refused (step
        // halving) unless det(A_± + rho Dpsi(ubar_±)) changed sign: then the step crossed a pole of
        // the branch (1 entered the end spectrum), which the event check reports.
        if (!continues(last.ends, last.rho, e, rho) && end_det_sign(p, rho, e) == end_det_sign(p, last.rho, last.ends)) break;
        const std::optional<Linearised> solved = linearise(p, rho, wc, e, res.factorizations);
        if (!solved) break;
        const Linearised& lin = *solved;
        const double g = scaled_dot(t.w, wc - w_pred) + t.rho * (rho - rho_pred);
        const double drho = (g + scaled_dot(t.w, lin.a)) / (scaled_dot(t.w, lin.b) - t.rho);
        const Seq dw = lin.a - drho * lin.b;
        wc += dw;
        rho += drho;
        b_last = lin.b;
        if (!wc.allFinite() || !std::isfinite(rho)) break;
        if (green::sup_norm(dw) + std::abs(drho) <= opt.tol * (1.0 + green::sup_norm(wc))) {
          ok = true;
          break;
        }
      }
      if (ok) {
        EndOutcome found = find_end_equilibria(p, rho, &e);
        ok = static_cast<bool>(found);
        if (ok) e = std::move(*found.ends);
      }
    }
    if (!ok) {
      ++res.steps_rejected;
      ds *= 0.5;
      if (ds < opt.ds_min) {
        // No continuation at any step size: the end equilibria reach a point where
        // A_± + rho Dpsi(ubar_±) is singular (1 enters the end spectrum): a turning point ("fold",
        // no branch beyond) or a pole of the branch ("end spectrum", the branch continues on the
        // other side with another unstable dimension), or a breakdown elsewhere ("step").
        const std::pair<double, std::string> sing = refine_end_singularity(p, last.rho, last.ends, opt, res.rho_crit_bracket);
        res.stop_reason = sing.second;
        res.rho_crit = sing.first;
        return res;
      }
      continue;
    }
    ++steps;
    ContinuationPoint pt;
    pt.rho = rho;
    pt.ends = e;
    pt.u = end_profile(p, e.minus, e.plus) + wc;
    pt.ds = ds;
    pt.newton_iterations = it;
    const Tangent tn = tangent_from(b_last, opt.direction, &t);
    pt.t_rho = tn.rho;
    std::string ev;
    if (opt.diagnose) {
      pt.diag = diagnose(p, rho, pt.u, e, opt.open, opt.exclude, opt.with_bundles);
      ev = event_of(pt);
    }
    const double rho_prev = last.rho;
    const Seq u_prev = last.u;
    res.points.push_back(std::move(pt));
    if (!ev.empty()) {
      res.stop_reason = ev;
      double good = rho_prev, bad = rho;
      if (ev != "fold" && opt.refine) {
        // Bisection with direct Newton solves from the last good point: the first rho of the event.
        Seq guess = u_prev;
        for (int r = 0; r < opt.refine_steps && std::abs(bad - good) > 1e-14 * (1.0 + std::abs(bad)); ++r) {
          const double mid = 0.5 * (good + bad);
          // Bad: no converged solution (newton reports why as a value), no end equilibria, or an event.
          bool is_bad = true;
          const Solution s = newton(p, mid, guess, {opt.newton_max * 2, opt.tol});
          const EndOutcome ends = s.converged ? find_end_equilibria(p, mid) : EndOutcome{};
          if (s.converged && ends) {
            ContinuationPoint q;
            q.rho = mid;
            q.t_rho = opt.direction;
            q.ends = *ends.ends;
            q.u = s.u;
            q.diag = diagnose(p, mid, s.u, q.ends, opt.open, opt.exclude, opt.with_bundles);
            is_bad = !event_of(q).empty();
            if (!is_bad) guess = s.u;
          }
          (is_bad ? bad : good) = mid;
        }
      }
      res.rho_crit = ev == "fold" ? rho_prev : bad;
      res.rho_crit_bracket = std::abs(bad - good);
      return res;
    }
    t = tn;
    if ((rho - opt.rho_end) * opt.direction >= 0) {
      res.stop_reason = "rho_end";
      return res;
    }
    if (it <= 3) ds = std::min(opt.ds_max, ds * 1.5);
  }
  res.stop_reason = "max_steps";
  return res;
}

}  // namespace continuation_detail

ContinuationResult continue_in_rho(const Problem& p, const ContinuationOptions& opt) {
  return continuation_detail::continue_in_rho_impl(p, opt);
}

}  // namespace tokdyn::closed_loop
