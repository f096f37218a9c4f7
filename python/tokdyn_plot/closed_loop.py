"""Figures of the coupling paper's closed-loop presets (coupling-trajectory: Thm 10 / Prop 11;
coupling-margin: Thm 12 / Remark 5), drawn from the CSV files of a results directory only."""
import math

from .common import BLUE, GREEN, PURPLE, SKY, VERMILLION, by, num, plt, read_table, save, series


def _rows(d, name):
    return read_table(d, name, missing_ok=True)


def plot_trajectory(d):
    """u*_rho(l) against its first order rho G psi(0); Picard / Newton / block-chain convergence;
    the O(rho^2) remainder and central-difference error (slope 2); |u*| against the Thm 10 bounds."""
    tr = _rows(d, "trajectory.csv")
    it = _rows(d, "picard.csv")
    sw = _rows(d, "rho_sweep.csv")
    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    a = ax[0][0]
    for k, (i, rs) in enumerate(by(tr, "component").items()):
        l = [num(r["l"]) for r in rs]
        st = series(k, ls="-", ms=4, lw=1.2)
        a.plot(l, [num(r["u_star"]) for r in rs], **st, label=r"$u^*_{\rho,%s}$" % i)
        a.plot(l, [num(r["first_order"]) for r in rs], "--", lw=1, color=st["color"])
    a.plot([], [], "--", color="0.4", lw=1, label=r"first order $\rho\,G\psi(0)$")
    a.set_xlabel("layer $l$")
    a.set_ylabel(r"component of $u^*_\rho(l)$")
    a.set_title(r"$u^*_\rho$ (solid) and $\rho\,G\psi(0)$ (dashed), $\rho = \rho_{\rm frac}\,\rho_0$", fontsize=10)
    a.legend(fontsize=7)
    a = ax[0][1]
    styles = {"picard_step": ("o-", r"Picard $|u^{n+1}-u^n|_\infty$"), "newton_residual": ("s-", r"Newton $|R(u^n)|_\infty$ ($\rho = 0.95\rho_0$)"),
              "chain_distance": ("^-", r"block chain $|y_k - u^*|_\infty$ (F8)"), "bound_K_rho_Lpsi^n": ("k:", r"$(K|\rho|L_\psi)^n$ bound")}
    for m, rs in by(it, "method").items():
        st, lab = styles.get(m, ("-", m))
        xs = [num(r["iteration"]) for r in rs]
        ys = [max(num(r["value"]), 1e-18) for r in rs]
        a.semilogy(xs, ys, st, ms=3, lw=1, label=lab)
    a.set_xlabel("iteration $n$ / block $k$")
    a.set_ylabel(r"distance or residual ($\infty$-norm)")
    a.set_ylim(1e-18, None)
    a.set_title("R18(a), R19: Picard contraction, Newton, cross-block chain", fontsize=10)
    a.legend(fontsize=7)
    a = ax[1][0]
    rho = [num(r["rho"]) for r in sw]
    rem = [num(r["remainder"]) for r in sw]
    cd = [num(r["central_difference_error"]) for r in sw]
    a.loglog(rho, rem, "o-", label=r"$|u^*_\rho - \rho G\psi(0)|_\infty$")
    a.loglog(rho, cd, "s-", label=r"$|(u^*_\rho - u^*_{-\rho})/2\rho - G\psi(0)|_\infty$")
    if rho:
        ref = [rem[-1] * (x / rho[-1]) ** 2 for x in rho]
        a.loglog(rho, ref, "k:", label="slope 2")
    a.set_xlabel(r"gate amplitude $\rho$")
    a.set_ylabel(r"error ($\infty$-norm over layers)")
    a.set_title("R18(b), (d): second-order remainder of (16)", fontsize=10)
    a.legend(fontsize=7)
    a = ax[1][1]
    a.loglog(rho, [num(r["sup_u"]) for r in sw], "o-", label=r"$|u^*_\rho|_\infty$")
    a.loglog(rho, [num(r["bound_appendix"]) for r in sw], "k--", label=r"$2K|\rho||\psi(0)|$ (C.1)")
    a.loglog(rho, [num(r["bound_main_text"]) for r in sw], "k:", label=r"$C|\rho||\psi(0)|/\min\, m$ (main text, F6)")
    a.loglog(rho, [num(r["d_plus"]) for r in sw], "^-", label=r"$d_+(\rho)$ (Prop 11)")
    a.set_xlabel(r"gate amplitude $\rho$")
    a.set_ylabel(r"$\sup_l$ of the quantity")
    a.set_title("R18(c), R19: sup bounds and the persistent displacement", fontsize=10)
    a.legend(fontsize=7)
    save(fig, [ax[0][0], ax[0][1], ax[1][0], ax[1][1]], d, "trajectory.png")


def plot_margin(d):
    """|u*| and ||G_rho|| along the continuation with rho_crit and the three bounds; projector
    deviation against C^2|rho|L_psi/mu; end-spectrum gap; Remark 5 thresholds (discrete vs continuous)."""
    sw = _rows(d, "rho_sweep.csv")
    th = {r["quantity"]: num(r["value"]) for r in _rows(d, "summary.csv")}  # the thresholds and constants of R20
    r21 = _rows(d, "r21.csv")
    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    a = ax[0][0]
    for dr, rs in by(sw, "direction").items():
        x = [abs(num(r["rho"])) for r in rs if num(r["rho"]) != 0]
        lab = r"$\rho > 0$" if num(dr) > 0 else r"$\rho < 0$"
        a.semilogy(x, [num(r["sup_u"]) for r in rs if num(r["rho"]) != 0], "-", lw=1.2, label=r"$|u^*|_\infty$, " + lab)
        a.semilogy(x, [num(r["green_inverse_sigma_min"]) for r in rs if num(r["rho"]) != 0], "--", lw=1, label=r"$1/\sigma_{min}$ (BVP), " + lab)
    for key, (col, ls), lab in [("rho_max_C2", (SKY, ":"), r"$\rho_{\max}^{C.2}$"), ("rho_max_C2_sharp", (PURPLE, ":"), r"$\rho_{\max}^{C.2}$ sharp"),
                                ("rho_0", (GREEN, "-."), r"$\rho_0$"), ("rho_max_17_c0_1", (BLUE, (0, (5, 2, 1, 2, 1, 2))), r"(17), $c_0=1$"),
                                ("rho_crit", (VERMILLION, "-"), r"$\rho_{\rm crit}$")]:
        if key in th and math.isfinite(th[key]):
            a.axvline(th[key], color=col, ls=ls, lw=1.3, label=lab)
    a.set_xscale("log")
    a.set_xlabel(r"gate amplitude $|\rho|$")
    a.set_ylabel(r"$|u^*|_\infty$ or $1/\sigma_{\min}$")
    a.set_title("R20: continuation of $u^*_\\rho$ (weight-tied G1, affine $\\psi$)", fontsize=10)
    a.legend(fontsize=6, ncol=2)
    a = ax[0][1]
    for dr, rs in by(sw, "direction").items():
        pts = [(abs(num(r["rho"])), num(r["projector_deviation"])) for r in rs if num(r["rho"]) != 0 and math.isfinite(num(r["projector_deviation"]))]
        a.loglog([p[0] for p in pts], [max(p[1], 1e-17) for p in pts], "o" if num(dr) > 0 else "s", ms=4, mfc="none",
                 label=r"$\rho > 0$" if num(dr) > 0 else r"$\rho < 0$")
    if sw and "C" in th:
        xs = sorted({abs(num(r["rho"])) for r in sw if num(r["rho"]) != 0})
        mu = min(th["m_minus"], th["m_plus"])
        a.loglog(xs, [th["C"] ** 2 * x * th["L_psi"] / mu for x in xs], "k--", label=r"$C^2|\rho|L_\psi/\mu$")
    a.set_xlabel(r"gate amplitude $|\rho|$")
    a.set_ylabel(r"$\max_l |\tilde P_+(l) - P_+(l)|$")
    a.set_title("R20: projector deviation (Thm 12)", fontsize=10)
    a.legend(fontsize=7)
    a = ax[1][0]
    for k, (dr, rs) in enumerate(by(sw, "direction").items()):
        a.semilogy([num(r["rho"]) for r in rs], [max(num(r["end_gap"]), 1e-17) for r in rs], **series(k, ms=3),
                   label=r"continuation towards $\rho %s 0$" % (">" if num(dr) > 0 else "<"))
    a.set_xlabel(r"gate amplitude $\rho$")
    a.set_ylabel(r"$\min |\,|\lambda| - 1|$ of $I + A + \rho D\psi$")
    a.set_title("R20: distance of the closed-loop spectrum from 1", fontsize=10)
    a.legend(fontsize=7)
    a = ax[1][1]
    for k, (c, rs) in enumerate(by(r21, "c").items()):
        s = [num(r["sigma"]) for r in rs]
        st = series(k)
        # markers only: the thresholds are known at these sigma only (min(|s|, 2 - |s|) kinks between them)
        a.plot(s, [num(r["expected"]) for r in rs], "o", color=st["color"], ms=10, mfc="none", mew=1.4,
               label=r"$\min(|\sigma|, 2-|\sigma|)/|c|$, $c = %s$" % c)
        a.plot(s, [num(r["found_continuation"]) for r in rs], "x", ms=8, mew=1.6, color=st["color"], label="continuation, $c = %s$" % c)
        a.plot(s, [num(r["continuous_time"]) for r in rs], "^", ms=6, color=st["color"],
               label=r"continuous time $|\sigma|/|c|$ (F18), $c = %s$" % c)
    a.set_xlabel(r"eigenvalue $\sigma$ of the scalar generator")
    a.set_ylabel(r"critical $|\rho|$")
    a.set_title("R21: Remark 5 scalar thresholds", fontsize=10)
    a.legend(fontsize=6)
    save(fig, [ax[0][0], ax[0][1], ax[1][0], ax[1][1]], d, "margin.png")


KINDS = {"coupling-trajectory": plot_trajectory, "coupling-margin": plot_margin}
