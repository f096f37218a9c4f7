"""Figures of "Self-Attention Dynamics with Rotary Position Embeddings" (presets rope-fig*,
rope-table2, rope-flow), drawn from the CSV files of one results directory. Every quantity of this
paper is dimensionless (time in units of the flow's own time, frequencies in radians per position)."""
import math

import numpy as np

from .common import (BLACK, BLUE, GREY, VERMILLION, by, manifest, num, plt, read_table, save, series, tex_label)


def _summary(d):
    try:
        return {r["quantity"]: r["value"] for r in read_table(d, "summary.csv")}
    except OSError:
        return {}


def _g(x):
    """A number as the paper prints it: integers without a point, others with 4 significant digits."""
    v = num(x) if isinstance(x, str) else x
    return "%d" % v if float(v).is_integer() else "%.4g" % v


def plot_rope_fig1a(d):
    """Fig. 1a: blue stems = Bessel aliasing (22), open circles = direct DFT of the attention row,
    grey crosses = the structural zeros of the gcd mask."""
    rows = read_table(d, "spectrum.csv")
    check = read_table(d, "spectrum_check.csv", missing_ok=True)
    s = _summary(d)
    q = np.array([int(r["q"]) for r in rows])
    lam = np.array([num(r["lambda"]) for r in rows])
    reach = np.array([r["reachable"] in ("1", "true", "True") for r in rows])
    fig, ax = plt.subplots(figsize=(6.4, 3.9))
    ax.vlines(q[reach], 0, lam[reach], color=BLUE, lw=1.6)
    ax.plot(q[reach], lam[reach], "o", color=BLUE, ms=4.5, label=r"Bessel aliasing (22), reachable ($g \mid q$)")
    if check:
        qc = np.array([int(r["q"]) for r in check])
        dft = np.array([num(r["lambda_dft"]) for r in check])
        ax.plot(qc, dft, "o", ms=10, mfc="none", mec="#009E73", mew=1.4, zorder=4,
                label="direct DFT of the attention row")
    ax.plot(q[~reach], lam[~reach], "x", color=GREY, ms=8, mew=1.6, zorder=5,
            label="structural zeros (gcd mask): %s modes" % s.get("unreachable_modes", int((~reach).sum())))
    ax.set_xlabel(r"Fourier mode $q$")
    ax.set_ylabel(r"eigenvalue $\lambda_q(A^\star)$")
    ax.set_ylim(-0.06, 1.3)
    ax.set_xlim(q.min() - 0.7, q.max() + 0.7)
    ax.set_xticks(q if len(q) <= 32 else q[:: int(math.ceil(len(q) / 16))])
    ax.legend(fontsize=8, loc="upper center", ncol=1)
    ax.set_title(r"Fig. 1a — resonant ring $n=%s$, $m=%s$, $\beta=%s$: max $|$Bessel $-$ DFT$|$ = %.1e"
                 % (s.get("n", "?"), s.get("m", "?"), _g(s.get("beta", "nan")), num(s.get("max_error_bessel_vs_dft", "nan"))),
                 fontsize=9)
    save(fig, [ax], d, "fig1a_spectrum.png")


def plot_rope_fig1b(d):
    rows = read_table(d, "gaps.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    i = 0
    for L, rs in by(rows, "L").items():
        b = [num(r["beta"]) for r in rs]
        g = [num(r["gap"]) for r in rs]
        if L == "continuum":
            ax.plot(b, g, color=BLACK, ls="--", lw=1, label=r"continuum $1-I_1(\beta)/I_0(\beta)$ (reference only)")
        else:
            ax.plot(b, g, **series(i, ms=4), label=r"$L = %s$" % L)
            i += 1
    ax.set_yscale("log")
    ax.set_ylim(1e-14, 1.5)
    ax.set_xlabel(r"inverse temperature $\beta$")
    ax.set_ylabel(r"finite-ring gap $\gamma_L(\beta)$ (B-3)")
    ax.legend(fontsize=8)
    ax.set_title("Fig. 1b — cancellation-free finite-ring gaps", fontsize=10)
    save(fig, [ax], d, "fig1b_gaps.png")


def plot_rope_fig1c(d):
    rows = read_table(d, "ratio.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (L, rs) in enumerate(by(rows, "L").items()):
        ax.plot([num(r["x"]) for r in rs], [num(r["ratio"]) for r in rs], **series(i, ms=4), label=r"$L = %s$" % L)
    ax.axhline(1.0, color=BLACK, ls="--", lw=1, label="limit 1")
    ax.set_xlabel(r"$x = \beta\Delta_L$")
    ax.set_ylabel(r"ratio $\gamma / [2\Delta_L e^{-x}]$")
    ax.set_ylim(0.5, 1.02)
    ax.legend(fontsize=8)
    ax.set_title(r"Fig. 1c — large-$\beta$ asymptotics (27), exact finite-ring values", fontsize=10)
    save(fig, [ax], d, "fig1c_asymptotics.png")


def plot_rope_fig2a(d):
    rows = read_table(d, "trajectories.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    tau_max = 0.0
    for i, (c, rs) in enumerate(by(rows, "case").items()):
        t = [num(r["tau"]) for r in rs]
        tau_max = max(tau_max, max(t))
        ax.plot(t, [num(r["q_ratio"]) for r in rs], **series(i, ms=4), label=tex_label(c))
    tt = np.linspace(0, tau_max or 5, 200)
    ax.plot(tt, np.exp(-tt), color=BLACK, ls="--", lw=1, label=r"envelope $e^{-\tau}$")
    ax.set_yscale("log")
    ax.set_xlabel(r"floor-scaled time $\tau = 2a_{\beta,n}t$")
    ax.set_ylabel(r"$q(t)/q_0$, $q = \tan(D/2)$")
    ax.legend(fontsize=8)
    ax.set_title("Fig. 2a — open-semicircle contraction (Theorem 6.3)", fontsize=10)
    save(fig, [ax], d, "fig2a_semicircle.png")


def plot_rope_fig2b(d):
    rows = read_table(d, "trajectories.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    bound = None
    for i, (c, rs) in enumerate(by(rows, "case").items()):
        t = [num(r["tau"]) for r in rs]
        ax.plot(t, [num(r["c"]) for r in rs], **series(i, ms=4), label=tex_label(c))
        if bound is None:
            bound = (t, [num(r["bound"]) for r in rs])
    if bound:
        ax.plot(*bound, color=BLACK, ls="--", lw=1, label=r"lower bound $\tanh\tau$")
    p = manifest(d).get("params", {})
    ax.set_xlabel(r"floor-scaled time $\tau = 2a_{\beta,n}t$")
    ax.set_ylabel(r"$c(t) = \min_{i<j}\langle x_i, x_j\rangle$")
    ax.legend(fontsize=8)
    ax.set_title(r"Fig. 2b — pairwise non-obtuse contraction (Theorem 6.2), $n=%s$, $d=%s$, $\beta=%s$"
                 % (p.get("n", 5), p.get("d", 6), _g(p.get("beta", 1))), fontsize=10)
    save(fig, [ax], d, "fig2b_nonobtuse.png")


def plot_rope_fig2c(d):
    rows = read_table(d, "trajectories.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (c, rs) in enumerate(by(rows, "case").items()):
        t = [num(r["tau"]) for r in rs]
        st = series(i, ms=4)
        ax.plot(t, [num(r["D_over_pi"]) for r in rs], **st, label=tex_label(c))
        b = [num(r["bound_over_pi"]) for r in rs]
        if not all(math.isnan(x) for x in b):
            ax.plot(t, b, color=st["color"], ls=":", lw=1.2, label=tex_label(c) + ": comparison solution")
    ax.set_xlabel(r"floor-scaled time $\tau = 2a_{\beta,n}t$")
    ax.set_ylabel(r"diameter $D(t)/\pi$")
    ax.legend(fontsize=8)
    ax.set_title(r"Fig. 2c — bipodal boundary (Prop. 6.4): $D_0 = \pi$ stays, $D_0 = \pi - 0.05$ contracts", fontsize=10)
    save(fig, [ax], d, "fig2c_bipodal.png")


def plot_rope_fig3a(d):
    rows = read_table(d, "field.csv")
    t1 = sorted({num(r["theta1"]) for r in rows})
    t2 = sorted({num(r["theta2"]) for r in rows})
    F = np.full((len(t2), len(t1)), np.nan)
    i1 = {v: i for i, v in enumerate(t1)}
    i2 = {v: i for i, v in enumerate(t2)}
    for r in rows:
        F[i2[num(r["theta2"])], i1[num(r["theta1"])]] = num(r["dE"])
    fig, ax = plt.subplots(figsize=(5.8, 4.8))
    m = ax.pcolormesh(t1, t2, F, cmap="RdBu_r", vmin=-3, vmax=3, shading="auto")
    ax.contour(t1, t2, F, levels=[0.0], colors="k", linewidths=1)
    fig.colorbar(m, ax=ax, label=r"energy derivative $\dot E_+$")
    ax.plot([], [], "-", color="k", lw=1, label=r"zero level $\dot E_+ = 0$")
    for i, r in enumerate(read_table(d, "witnesses.csv")):
        x, y, v = num(r["theta1"]), num(r["theta2"]), num(r["dE"])
        ax.plot([x], [y], "^", color="k", mfc="white", ms=8, label="exact witnesses" if i == 0 else None)
        ax.annotate(r"$\dot E_+=%+.6f$" % v, (x, y), xytext=(7, 5), textcoords="offset points", fontsize=8,
                    bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))
    ticks = [-math.pi, -math.pi / 2, 0, math.pi / 2, math.pi]
    names = [r"$-\pi$", r"$-\pi/2$", "0", r"$\pi/2$", r"$\pi$"]
    ax.set_xticks(ticks, names)
    ax.set_yticks(ticks, names)
    ax.set_xlabel(r"phase $\theta_1$ (rad)")
    ax.set_ylabel(r"phase $\theta_2$ (rad)")
    p = manifest(d).get("params", {})
    ax.legend(fontsize=7, loc="lower left", framealpha=0.9)
    ax.set_title(r"Fig. 3a — energy derivative, $n=3$, $\beta=%s$, $\omega=\pi$, $\theta_0=0$" % _g(p.get("beta", 1)), fontsize=9)
    save(fig, [ax], d, "fig3a_energy.png")


# Fig. 3b's classes of a Jacobian eigenvalue: the paper's blue / grey / red markers.
_MODE = {"stable": (BLUE, "v", r"stable ($\lambda < 0$)"), "centre": (GREY, "o", r"centre ($\lambda = 0$)"),
         "growing": (VERMILLION, "^", r"growing ($\lambda > 0$)")}


def _mode_class(r):
    """stable / centre / growing from the exact eigenvalue when it matched one (its numerator's
    sign), else from the computed one (|lambda| <= 1e-9: centre)."""
    exact = r.get("exact", "").split(" x")[0].strip()
    if exact:
        numer = float(exact.split("/")[0])
        return "centre" if numer == 0 else ("growing" if numer > 0 else "stable")
    v = num(r["eigenvalue"])
    return "centre" if abs(v) <= 1e-9 else ("growing" if v > 0 else "stable")


def _exact_text(r):
    e = r.get("exact", "").split(" x")[0].strip()
    if not e:
        return "%.4g" % num(r["eigenvalue"])
    n, _, den = e.partition("/")
    if den in ("", "1"):
        return n
    return r"$%s%s/%s$" % ("-" if n.startswith("-") else "", n.lstrip("-"), den)


def plot_rope_fig3b(d):
    """Fig. 3b: the eigenvalues of each twisted-state Jacobian on a numeric axis, a stem per distinct
    eigenvalue up to its multiplicity, coloured stable / centre / growing as the paper's markers."""
    rows = read_table(d, "spectra.csv")
    cases = by(rows, "case")
    fig, axs = plt.subplots(1, len(cases), figsize=(4.4 * len(cases), 3.8), squeeze=False)
    axs = axs[0]
    for ax, (c, rs) in zip(axs, cases.items()):
        ev = [num(r["eigenvalue"]) for r in rs]
        top = max(int(r["multiplicity"]) for r in rs)
        seen = set()
        for r, e in zip(rs, ev):
            k = _mode_class(r)
            col, mk, lab = _MODE[k]
            m = int(r["multiplicity"])
            ax.vlines(e, 0, m, color=col, lw=2)
            ax.plot([e], [m], mk, color=col, ms=9, mec="k", mew=0.6, label=lab if k not in seen else None)
            seen.add(k)
            ax.annotate(r"%s  $\times%d$" % (_exact_text(r), m), (e, m), xytext=(0, 7), textcoords="offset points",
                        ha="center", va="bottom", fontsize=8)
        ax.axvline(0.0, color="k", lw=0.6, ls=":")
        lo, hi = min(ev + [0.0]), max(ev + [0.0])
        pad = 0.18 * max(hi - lo, 0.2)
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(0, top * 1.35 + 0.5)
        ax.set_xlabel(r"eigenvalue $\lambda$ of the Jacobian $J$ (B-4)")
        ax.set_ylabel("multiplicity")
        ax.set_title(tex_label(c), fontsize=9)
        handles, labels = ax.get_legend_handles_labels()
        order = [labels.index(_MODE[k][2]) for k in ("stable", "centre", "growing") if _MODE[k][2] in labels]
        ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=7, loc="upper right")
    fig.suptitle("Fig. 3b — twisted-state Jacobian spectra (41)–(43)", fontsize=10)
    save(fig, list(axs), d, "fig3b_twisted_spectra.png")


# The frequencies Fig. 3c draws (the paper's; the run evaluates two more for Table 2).
FIG3C_OMEGAS = (0.37, math.sqrt(2.0), 2.17)


def plot_rope_fig3c(d):
    rows = read_table(d, "drift.csv")
    groups = by(rows, "omega")
    shown = [w for w in groups if any(abs(num(w) - x) < 1e-9 for x in FIG3C_OMEGAS)] or list(groups)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    err = 0.0
    for i, w in enumerate(shown):
        rs = sorted(groups[w], key=lambda r: num(r["n"]))
        n = [num(r["n"]) for r in rs]
        st = series(i)
        wl = r"\sqrt{2}" if abs(num(w) - math.sqrt(2.0)) < 1e-12 else "%.4g" % num(w)
        ax.plot(n, [num(r["max_direct"]) for r in rs], st["marker"], ms=7, mfc="none", mec=st["color"], mew=1.3,
                label=r"$\omega = %s$" % wl)
        ax.plot(n, [num(r["sharp_bound"]) for r in rs], "-", color=st["color"], lw=1.1)
        ax.plot(n, [num(r["coarse_bound"]) for r in rs], ":", color=st["color"], lw=1.3)
        err = max(err, max(num(r["formula_error"]) for r in rs))
    ax.plot([], [], "o", color="0.3", mfc="none", label="direct right-hand side (open markers)")
    ax.plot([], [], "-", color="0.3", label=r"sharp bound $|\sin(n\omega/2)|/(n|\sin(\omega/2)|)$")
    ax.plot([], [], ":", color="0.3", label=r"$1/[n|\sin(\omega/2)|]$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("token count $n$")
    ax.set_ylabel(r"drift $\max_i |\dot\theta_i|$")
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title("Fig. 3c — nonresonant drift against its bounds (17); direct/formula error ≤ %.1e" % err, fontsize=9)
    save(fig, [ax], d, "fig3c_drift.png")


def plot_rope_fig4a(d):
    rows = read_table(d, "gap_curve.csv")
    a = [num(r["a"]) for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(a, [num(r["gamma"]) for r in rows], color=GREY, lw=6, alpha=0.55, label=r"$\gamma = \min(1-\lambda_-, 1-\lambda_+)$")
    ax.plot(a, [num(r["one_minus_lambda_minus"]) for r in rows], color=BLUE, lw=1.2, ls="-", label=r"$1-\lambda_-$")
    ax.plot(a, [num(r["one_minus_lambda_plus"]) for r in rows], color=VERMILLION, lw=1.2, ls="--", label=r"$1-\lambda_+$")
    ax.plot([2 / 3], [0.75], "o", color=BLACK, ms=6)
    ax.annotate(r"$\gamma(2/3) = 3/4$", (2 / 3, 0.75), xytext=(6, 8), textcoords="offset points")
    ax.set_xlabel(r"plane energy $a$ (in the $\omega_1=\pi/2$ plane)")
    ax.set_ylabel(r"spectral gap")
    ax.legend(fontsize=8)
    ax.set_title("Fig. 4a — non-monotone gap in plane energy (Prop. 7.4)", fontsize=10)
    save(fig, [ax], d, "fig4a_nonmonotone.png")


def plot_rope_fig4b(d):
    rows = read_table(d, "gap_curve.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    i = 0
    for n, rs in by(rows, "n").items():
        x = [num(r["a1"]) for r in rs]
        y = [num(r["gamma"]) for r in rs]
        if n == "128":  # the paper's muted reference
            ax.plot(x, y, color=GREY, lw=1, ls=":", label=r"$n = %s$ (reference)" % n)
        else:
            ax.plot(x, y, **series(i, lw=1.8, ms=4), label=r"$n = %s$" % n)
            i += 1
    p = manifest(d).get("params", {})
    ax.set_xlabel(r"plane energy $a_1$ (in the $\omega=1$ plane)")
    ax.set_ylabel(r"spectral gap $\gamma$")
    ax.legend(fontsize=8)
    ax.set_title(r"Fig. 4b — finite-context gaps, frequencies $(1, 0.01)$, $\beta = %s$" % _g(p.get("beta", 4)), fontsize=10)
    save(fig, [ax], d, "fig4b_finite_context.png")


def plot_rope_fig4c(d):
    """Fig. 4c: the two-token gap (47) at the position gaps the formula is evaluated at, markers only
    (a line between Delta = 1 and 2 would suggest values, and a crossing, the data does not give)."""
    rows = read_table(d, "two_token.csv")
    groups = by(rows, "label")
    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    k = len(groups)
    deltas = sorted({num(r["delta"]) for r in rows})
    for i, (w, rs) in enumerate(groups.items()):
        off = (i - (k - 1) / 2) * 0.12
        st = series(i, line=False, ms=9)
        x = [num(r["delta"]) + off for r in rs]
        y = [num(r["gamma"]) for r in rs]
        ax.plot(x, y, **st, label=tex_label(w))
        for xi, yi in zip(x, y):
            ax.annotate("%.3f" % yi, (xi, yi), xytext=(9 if off >= 0 else -9, 0), textcoords="offset points",
                        ha="left" if off >= 0 else "right", va="center", fontsize=8, color=st["color"])
    ax.set_xticks(deltas, [r"$\Delta = %s$" % _g(x) for x in deltas])
    ax.set_xlim(min(deltas) - 0.6, max(deltas) + 0.6)
    ys = [num(r["gamma"]) for r in rows]
    ax.set_ylim(min(ys) - 0.12, max(ys) + 0.12)
    ax.set_xlabel(r"position gap $\Delta$ of the two tokens")
    ax.set_ylabel(r"gap $\gamma_\omega(\Delta) = 2q/(1+q)$ (47)")
    ax.legend(fontsize=8, loc="upper center", ncol=2)
    beta = rows[0]["beta"] if rows else "?"
    ax.set_title(r"Fig. 4c — frequency-order reversal (Prop. 7.5), $\beta = %s$" % _g(beta), fontsize=10)
    save(fig, [ax], d, "fig4c_reversal.png")


def plot_rope_fig4d(d):
    rows = read_table(d, "rates.csv")
    g = [num(r["gamma"]) for r in rows]
    f = [num(r["gamma_fit"]) for r in rows]
    err = max(num(r["rel_error"]) for r in rows)
    fig, ax = plt.subplots(figsize=(5.4, 4.6))
    lo, hi = min(g + f) * 0.75, max(g + f) * 1.08
    ax.plot([lo, hi], [lo, hi], color=BLACK, ls="--", lw=1, label="parity (fitted = theory)")
    ax.plot(g, f, "o", color=BLUE, ms=7, label="slow-mode integration")
    for r in rows:
        ax.annotate(r"$a = %s$" % r["a_high"], (num(r["gamma"]), num(r["gamma_fit"])), xytext=(8, -3),
                    textcoords="offset points", fontsize=8, va="top")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(r"theory gap $\gamma$")
    ax.set_ylabel(r"fitted nonlinear rate $\hat\gamma$")
    ax.legend(fontsize=8, loc="upper left")
    p = manifest(d).get("params", {})
    ax.set_title(r"Fig. 4d — rate parity, $n=%s$, $\beta=%s$: max rel. error %.2e" % (p.get("n", 16), _g(p.get("beta", 4)), err),
                 fontsize=10)
    save(fig, [ax], d, "fig4d_rate_parity.png")


def plot_rope_table2(d):
    """Table 2 as a figure: paper's discrepancy vs tokdyn's, per quantity (log scale)."""
    rows = [r for r in read_table(d, "table2.csv") if r["paper"] not in ("", None)]
    fig, ax = plt.subplots(figsize=(7.6, 4.6))
    y = np.arange(len(rows))
    pv = [abs(num(r["paper"])) for r in rows]
    tv = [abs(num(r["tokdyn"])) for r in rows]
    ax.barh(y - 0.2, pv, height=0.4, color=GREY, label="paper")
    ax.barh(y + 0.2, [max(v, 1e-18) for v in tv], height=0.4, color=BLUE, hatch="//", edgecolor="white", label="tokdyn")
    ax.set_yticks(y)
    short = {"Resonant spectrum and local rate": "resonant", "Geometric contraction bounds": "geometric",
             "Twisted states and drift": "twisted", "Multi-frequency gap": "multi-freq"}
    ax.set_yticklabels(["%s: %s (%s configs)" % (short.get(r["row"], r["row"]), tex_label(r["quantity"]), r["count"]) for r in rows],
                       fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("|discrepancy| (absolute, or relative for rate errors)")
    ax.set_ylabel("Table 2 row: quantity")
    ax.legend(fontsize=8)
    ax.set_title("Table 2 — independent cross-checks, paper vs tokdyn", fontsize=10)
    save(fig, [ax], d, "table2.png")


def plot_rope_flow(d):
    """rope-flow: lambda_bar_1 and r (mean +- std over runs) and the minimum pairwise inner product c
    of every run, against time t."""
    p = manifest(d).get("params", {})
    geo = read_table(d, "geometry.csv")
    met = read_table(d, "metrics.csv")
    fig, ax = plt.subplots(3, 1, figsize=(6.4, 7.0), sharex=True)
    t = np.array([num(r["t"]) for r in met])
    for a, m, s, st in ((ax[0], "lambda1_mean", "lambda1_std", series(0)), (ax[1], "pr_mean", "pr_std", series(1))):
        mu = np.array([num(r[m]) for r in met])
        sd = np.array([num(r[s]) for r in met])
        a.plot(t, mu, **st, label="mean over runs")
        a.fill_between(t, mu - sd, mu + sd, color=st["color"], alpha=0.18, lw=0, label=r"$\pm$1 std over runs")
    ax[0].set_ylabel(r"$\bar\lambda_1$ (1: consensus)")
    ax[1].set_ylabel(r"participation ratio $r$")
    ax[0].legend(fontsize=8)
    for i, (run, rs) in enumerate(by(geo, "run").items()):
        ax[2].plot([num(r["t"]) for r in rs], [num(r["min_inner_c"]) for r in rs], **series(i, marker=False, lw=1),
                   label="run %s" % run if i < 8 else None)
    ax[2].set_ylabel(r"$c(t) = \min_{i<j}\langle x_i,x_j\rangle$")
    ax[2].set_xlabel("time $t$")
    if len(by(geo, "run")) <= 8:
        ax[2].legend(fontsize=7, ncol=2)
    ax[0].set_title(r"RoPE attention flow: $n=%s$, $d=%s$, $\beta=%s$, %s head%s, %s" % (
        p.get("n"), p.get("d"), _g(p.get("beta", float("nan"))), p.get("heads"), "" if p.get("heads") == 1 else "s",
        "causal" if p.get("causal") else "bidirectional"), fontsize=9)
    save(fig, list(ax), d, "flow_metrics.png")


KINDS = {
    "rope-fig1a": plot_rope_fig1a,
    "rope-fig1b": plot_rope_fig1b,
    "rope-fig1c": plot_rope_fig1c,
    "rope-fig2a": plot_rope_fig2a,
    "rope-fig2b": plot_rope_fig2b,
    "rope-fig2c": plot_rope_fig2c,
    "rope-fig3a": plot_rope_fig3a,
    "rope-fig3b": plot_rope_fig3b,
    "rope-fig3c": plot_rope_fig3c,
    "rope-fig4a": plot_rope_fig4a,
    "rope-fig4b": plot_rope_fig4b,
    "rope-fig4c": plot_rope_fig4c,
    "rope-fig4d": plot_rope_fig4d,
    "rope-table2": plot_rope_table2,
    "rope-flow": plot_rope_flow,
}
