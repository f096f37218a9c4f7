"""Figures of the hierarchical slow path presets of the coupling paper, drawn from the written CSV
files only:
  coupling-duality -> duality.png: Thm 6 (R12) per family — the off-manifold error |E_l| / |dX^perp|
      against the bound kappa_alpha C_f r_f^l and the sharp constant C_sharp(l) (F16), with eps_tol and
      tau_sat; Remark 6 (R13) — block-mean error after mixing (l0 = ceil(l/2)) against the one-shot
      formula (l0 = 0), for every compression.
  coupling-thm9 -> thm9.png: Thm 9 (R16) — the discrepancy |psi(zeta) - psi(P_+ zeta)|, L_psi |P_- zeta|
      and the printed and corrected (F12) right-hand sides against depth.
  coupling-gate-intervention -> gate.png: E3 — the shift of the late-depth state along V_par against
      rho, measured and linear prediction (log-log, slope 1)."""
import os

from .common import BLACK, BLUE, GREEN, VERMILLION, by, manifest, num, plt, read_csv, save, series


def _envelope(rows, key, xkey="l", agg=max):
    out = {}
    for r in rows:
        x = num(r[xkey])
        v = num(r[key])
        out[x] = v if x not in out else agg(out[x], v)
    xs = sorted(out)
    return xs, [out[x] for x in xs]


def plot_duality(d):
    notes = manifest(d).get("notes", {})
    dual = by(read_csv(os.path.join(d, "duality.csv")), "family")
    r6 = by(read_csv(os.path.join(d, "remark6.csv")), "family")
    fams = list(dual.keys())
    fig, ax = plt.subplots(2, len(fams), figsize=(6.5 * len(fams), 9), squeeze=False)
    eps_tol = None
    try:
        eps_tol = float(manifest(d)["params"]["eps_tol"])
    except (KeyError, TypeError, ValueError):
        pass
    for j, fam in enumerate(fams):
        rows = dual[fam]
        l = [num(r["l"]) for r in rows]
        a = ax[0][j]
        a.semilogy(l, [num(r["error_rel"]) for r in rows], "o-", ms=3, color=BLUE, label=r"$|E_l| / |\delta X^\perp|$ (max over probes)")
        a.semilogy(l, [num(r["C_sharp"]) for r in rows], "-.", color=GREEN, label=r"$C_{\rm sharp}(l)$ (F16)")
        a.semilogy(l, [num(r["bound"]) for r in rows], "--", color=VERMILLION, label=r"$\kappa_\alpha C_f r_f^l$ (Thm 6(2), $C' = 1$)")
        n = notes.get(fam, {})
        if eps_tol:
            a.axhline(eps_tol, color=BLACK, lw=0.8, ls=":", label=r"$\epsilon_{\rm tol}$")
        ts = n.get("tau_sat")
        if n.get("A5_holds") and ts is not None and 0 < ts <= max(l):
            a.axvline(ts, color=VERMILLION, lw=0.8, label=r"$\tau_{\rm sat}$ (formula) = %.1f" % ts)
        te = n.get("tau_sat_empirical")
        if n.get("A5_holds") and te is not None and te >= 0:
            a.axvline(te, color=BLUE, lw=0.8, ls="--", label=r"first $l$ with error $\leq \epsilon_{\rm tol}$: %d" % te)
        hyp = "" if n.get("A5_holds", True) else r"  [(A5) fails: $r_f = %.3g \geq 1$, F17]" % n.get("r_f", float("nan"))
        a.set_title("(R12) %s: off-manifold error and bounds%s" % (fam, hyp), fontsize=10)
        a.set_xlabel("layer $l$")
        a.set_ylabel("relative error / bound")
        a.legend(fontsize=7)
        b = ax[1][j]
        sub = by(r6.get(fam, []), "compression")
        for i, (comp, rr) in enumerate(sub.items()):
            st = series(i)
            for rule, ls in (("half", "-"), ("zero", "--")):
                pts = [r for r in rr if r["l0_rule"] == rule]
                b.semilogy([num(r["l"]) for r in pts], [max(num(r["error"]), 1e-300) for r in pts], ls, color=st["color"],
                           marker=st["marker"], ms=3, mfc=st["color"] if rule == "half" else "none",
                           label="%s, %s" % (comp, r"$l_0 = \lceil l/2\rceil$" if rule == "half" else "$l_0 = 0$ (one-shot)"))
        b.set_title("(R13) %s: Remark 6, measure after mixing vs one-shot" % fam, fontsize=10)
        b.set_xlabel("layer $l$")
        b.set_ylabel(r"$|\Phi^{\rm full}_l - \iota\,\Phi(l, l_0)\,\Pi\,\Phi^{\rm full}_{l_0}|$")
        b.legend(fontsize=7, ncol=2)
    save(fig, [x for row in ax for x in row], d, "duality.png")


def plot_thm9(d):
    rows = read_csv(os.path.join(d, "thm9.csv"))
    fig, ax = plt.subplots(1, 1, figsize=(8, 5.5))
    for key, agg, style, lab in (("lhs", max, "o-", r"$|\psi(\zeta) - \psi(P_+ \zeta)|$ (max over probes, blocks)"),
                                 ("lpsi_pminus", max, "s-.", r"$L_\psi\,|P_-(l)\,\zeta|$ (max)"),
                                 ("rhs_corrected", min, "-", "corrected right-hand side (F12) (min)"),
                                 ("rhs_literal", min, "--", "printed right-hand side, $C' = 1$ (min)")):
        x, y = _envelope(rows, key, agg=agg)
        y = [v if v > 0 else float("nan") for v in y]
        ax.semilogy(x, y, style, ms=3, label=lab)
    n = manifest(d).get("notes", {}).get("thm9", {})
    ax.set_title("(R16) Thm 9 on G4: decaying content does not reach the injection\n"
                 r"(the left-hand side collapses once $\tanh$ saturates along $V_\parallel$)" "\n"
                 r"$r_- = %.3g$, $r_f = %.3g$, $C = %.3g$, $L_\psi = %.3g$" % (n.get("r_minus", float("nan")), n.get("r_f", float("nan")),
                                                                          n.get("C", float("nan")), n.get("L_psi", float("nan"))), fontsize=10)
    ax.set_xlabel("layer $l$")
    ax.set_ylabel("size (envelope over probes and blocks)")
    ax.legend(fontsize=8)
    save(fig, [ax], d, "thm9.png")


def plot_gate(d):
    rows = read_csv(os.path.join(d, "gate.csv"))
    fig, ax = plt.subplots(1, 2, figsize=(13, 5.2))
    for i, (lvl, rr) in enumerate(by(rows, "level").items()):
        rho = [abs(num(r["rho"])) for r in rr]
        mode = rr[0]["mode"]
        what = r"along $V_\parallel$" if mode == "V_par" else r"total (no $V_\parallel$, F17)"
        st = series(i)
        ax[0].loglog(rho, [num(r["shift_par"]) for r in rr], "-", marker=st["marker"], color=st["color"], label="%s: measured shift, %s" % (lvl, what))
        ax[0].loglog(rho, [num(r["prediction"]) for r in rr], "--", color=st["color"], label="%s: linear prediction" % lvl)
        ax[1].semilogx(rho, [num(r["shift_par"]) / num(r["prediction"]) for r in rr], **series(i), label=lvl)
    ax[0].set_xlabel(r"gate amplitude $|\rho|$")
    ax[0].set_ylabel(r"late-depth shift $\sup_l |P_+(l)\,(x_\rho(l) - x_0(l))|$" "\n" r"($|x_\rho - x_0|$ where $V_\parallel$ does not exist)")
    ax[0].set_title(r"(E3) gate intervention $\rho \to 0$: shift along $V_\parallel$", fontsize=10)
    ax[0].legend(fontsize=7)
    ax[1].axhline(1.0, color="k", lw=0.8)
    ax[1].set_xlabel(r"gate amplitude $|\rho|$")
    ax[1].set_ylabel("measured / predicted shift")
    ax[1].set_title(r"ratio $\to 1$ as $\rho \to 0$ (deviation $O(\rho)$)", fontsize=10)
    ax[1].legend(fontsize=7)
    save(fig, ax, d, "gate.png")


KINDS = {"coupling-duality": plot_duality, "coupling-thm9": plot_thm9, "coupling-gate-intervention": plot_gate}
