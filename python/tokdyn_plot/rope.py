"""Figures of "Self-Attention Dynamics with Rotary Position Embeddings" (presets rope-fig*,
rope-table2, rope-flow), drawn from the CSV files of one results directory."""
import json
import math
import os

import numpy as np

from .common import by, num, plt, read_table, save


def _summary(d):
    try:
        return {r["quantity"]: r["value"] for r in read_table(d, "summary.csv")}
    except OSError:
        return {}


def plot_rope_fig1a(d):
    rows = read_table(d, "spectrum.csv")
    s = _summary(d)
    q = np.array([int(r["q"]) for r in rows])
    lam = np.array([num(r["lambda"]) for r in rows])
    reach = np.array([r["reachable"] in ("1", "true", "True") for r in rows])
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ax.vlines(q[reach], 0, lam[reach], color="C0", lw=1.5)
    ax.plot(q[reach], lam[reach], "o", color="C0", label=r"reachable ($g \mid q$): Bessel aliasing (22)")
    ax.plot(q[~reach], lam[~reach], "x", color="0.5", ms=8, label="structural zeros (gcd mask)")
    ax.set_xlabel("Fourier mode q")
    ax.set_ylabel(r"$\lambda_q(A^\star)$")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xticks(q)
    ax.legend(fontsize=8, loc="upper center")
    ax.set_title("Fig. 1a — resonant ring n=%s, m=%s, β=%s: %s unreachable modes, max error = %.1e" % (
        s.get("n", "?"), s.get("m", "?"), s.get("beta", "?"), s.get("unreachable_modes", "?"),
        num(s.get("max_error_bessel_vs_dft", "nan"))), fontsize=9)
    save(fig, [ax], d, "fig1a_spectrum.png")


def plot_rope_fig1b(d):
    rows = read_table(d, "gaps.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (L, rs) in enumerate(by(rows, "L").items()):
        b = [num(r["beta"]) for r in rs]
        g = [num(r["gap"]) for r in rs]
        if L == "continuum":
            ax.plot(b, g, "k--", lw=1, label=r"continuum $1-I_1(\beta)/I_0(\beta)$ (reference only)")
        else:
            ax.plot(b, g, color="C%d" % i, label="L = %s" % L)
    ax.set_yscale("log")
    ax.set_ylim(1e-14, 1.5)
    ax.set_xlabel(r"$\beta$")
    ax.set_ylabel(r"gap $\gamma_L(\beta)$ (B-3)")
    ax.legend(fontsize=8)
    ax.set_title("Fig. 1b — cancellation-free finite-ring gaps", fontsize=10)
    save(fig, [ax], d, "fig1b_gaps.png")


def plot_rope_fig1c(d):
    rows = read_table(d, "ratio.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (L, rs) in enumerate(by(rows, "L").items()):
        ax.plot([num(r["x"]) for r in rs], [num(r["ratio"]) for r in rs], color="C%d" % i, label="L = %s" % L)
    ax.axhline(1.0, color="k", ls="--", lw=1, label="limit 1")
    ax.set_xlabel(r"$x = \beta\Delta_L$")
    ax.set_ylabel(r"$\gamma / [2\Delta_L e^{-x}]$")
    ax.set_ylim(0.5, 1.02)
    ax.legend(fontsize=8)
    ax.set_title("Fig. 1c — large-β asymptotics (27), exact finite-ring values", fontsize=10)
    save(fig, [ax], d, "fig1c_asymptotics.png")


def plot_rope_fig2a(d):
    rows = read_table(d, "trajectories.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    tau_max = 0.0
    for i, (c, rs) in enumerate(by(rows, "case").items()):
        t = [num(r["tau"]) for r in rs]
        tau_max = max(tau_max, max(t))
        ax.plot(t, [num(r["q_ratio"]) for r in rs], color="C%d" % i, label=c)
    tt = np.linspace(0, tau_max or 5, 200)
    ax.plot(tt, np.exp(-tt), "k--", lw=1, label=r"envelope $e^{-\tau}$")
    ax.set_yscale("log")
    ax.set_xlabel(r"floor-scaled time $\tau = 2a_{\beta,n}t$")
    ax.set_ylabel(r"$q(t)/q_0$, $q = \tan(D/2)$")
    ax.legend(fontsize=8)
    ax.set_title("Fig. 2a — open-semicircle contraction (Theorem 6.3)", fontsize=10)
    save(fig, [ax], d, "fig2a_semicircle.png")


def plot_rope_fig2b(d):
    rows = read_table(d, "trajectories.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    drawn_bound = False
    for i, (c, rs) in enumerate(by(rows, "case").items()):
        t = [num(r["tau"]) for r in rs]
        ax.plot(t, [num(r["c"]) for r in rs], color="C%d" % i, label=c)
        if not drawn_bound:
            ax.plot(t, [num(r["bound"]) for r in rs], "k--", lw=1, label=r"lower bound $\tanh\tau$")
            drawn_bound = True
    ax.set_xlabel(r"$\tau = 2a_{\beta,n}t$")
    ax.set_ylabel(r"$c(t) = \min_{i<j}\langle x_i, x_j\rangle$")
    ax.legend(fontsize=8)
    ax.set_title("Fig. 2b — pairwise non-obtuse contraction (Theorem 6.2), n=5, d=6, β=1", fontsize=10)
    save(fig, [ax], d, "fig2b_nonobtuse.png")


def plot_rope_fig2c(d):
    rows = read_table(d, "trajectories.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (c, rs) in enumerate(by(rows, "case").items()):
        t = [num(r["tau"]) for r in rs]
        ax.plot(t, [num(r["D_over_pi"]) for r in rs], color="C%d" % i, label=c)
        b = [num(r["bound_over_pi"]) for r in rs]
        if not all(math.isnan(x) for x in b):
            ax.plot(t, b, color="C%d" % i, ls="--", lw=1, label=c + ": comparison solution")
    ax.set_xlabel(r"$\tau = 2a_{\beta,n}t$")
    ax.set_ylabel(r"$D(t)/\pi$")
    ax.legend(fontsize=8)
    ax.set_title("Fig. 2c — bipodal boundary (Prop. 6.4): D0 = π stays, D0 = π − 0.05 contracts", fontsize=10)
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
    fig, ax = plt.subplots(figsize=(5.6, 4.8))
    m = ax.pcolormesh(t1, t2, F, cmap="RdBu_r", vmin=-3, vmax=3, shading="auto")
    ax.contour(t1, t2, F, levels=[0.0], colors="k", linewidths=1)
    fig.colorbar(m, ax=ax, label=r"$\dot E_+$")
    for r in read_table(d, "witnesses.csv"):
        x, y, v = num(r["theta1"]), num(r["theta2"]), num(r["dE"])
        ax.plot([x], [y], "o", color="k")
        ax.annotate(r"$\dot E_+=%+.6f$" % v, (x, y), xytext=(6, 6), textcoords="offset points", fontsize=8)
    ax.set_xlabel(r"$\theta_1$")
    ax.set_ylabel(r"$\theta_2$")
    ax.set_title("Fig. 3a — energy derivative, n=3, β=1, ω=π, θ0=0", fontsize=10)
    save(fig, [ax], d, "fig3a_energy.png")


def plot_rope_fig3b(d):
    rows = read_table(d, "spectra.csv")
    fig, axs = plt.subplots(1, 2, figsize=(8.0, 3.6))
    for ax, (c, rs) in zip(axs, by(rows, "case").items()):
        ev = [num(r["eigenvalue"]) for r in rs]
        mult = [int(r["multiplicity"]) for r in rs]
        ax.bar(range(len(ev)), mult, color="C0")
        ax.set_xticks(range(len(ev)))
        exact = [r.get("exact", "").split(" x")[0].replace("0/1", "0").replace("1/1", "1") for r in rs]
        ax.set_xticklabels([x if x else "%.4g" % e for x, e in zip(exact, ev)], fontsize=9)
        for k, mm in enumerate(mult):
            ax.annotate("×%d" % mm, (k, mm), ha="center", va="bottom", fontsize=8)
        ax.set_xlabel("eigenvalue of J")
        ax.set_ylabel("multiplicity")
        ax.set_title(c, fontsize=9)
    fig.suptitle("Fig. 3b — twisted-state spectra", fontsize=10)
    save(fig, list(axs), d, "fig3b_twisted_spectra.png")


def plot_rope_fig3c(d):
    rows = read_table(d, "drift.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    err = 0.0
    for i, (w, rs) in enumerate(by(rows, "omega").items()):
        n = [num(r["n"]) for r in rs]
        ax.plot(n, [num(r["max_direct"]) for r in rs], "o", mfc="none", color="C%d" % i, label="ω = %.5g direct" % num(w))
        ax.plot(n, [num(r["sharp_bound"]) for r in rs], "-", color="C%d" % i, lw=1)
        ax.plot(n, [num(r["coarse_bound"]) for r in rs], ":", color="C%d" % i, lw=1)
        err = max(err, max(num(r["formula_error"]) for r in rs))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("token count n")
    ax.set_ylabel(r"$\max_i |\dot\theta_i|$")
    ax.legend(fontsize=7)
    ax.set_title("Fig. 3c — nonresonant drift: direct (o), sharp bound (—), 1/[n|sin(ω/2)|] (···)\n"
                 "direct/formula error ≤ %.1e" % err, fontsize=9)
    save(fig, [ax], d, "fig3c_drift.png")


def plot_rope_fig4a(d):
    rows = read_table(d, "gap_curve.csv")
    a = [num(r["a"]) for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(a, [num(r["gamma"]) for r in rows], color="0.5", lw=6, alpha=0.35, label=r"$\gamma = \min$")
    ax.plot(a, [num(r["one_minus_lambda_minus"]) for r in rows], color="C0", lw=1.2, label=r"$1-\lambda_-$")
    ax.plot(a, [num(r["one_minus_lambda_plus"]) for r in rows], color="C1", lw=1.2, label=r"$1-\lambda_+$")
    ax.plot([2 / 3], [0.75], "o", color="C3")
    ax.annotate(r"$\gamma(2/3) = 3/4$", (2 / 3, 0.75), xytext=(6, 6), textcoords="offset points")
    ax.set_xlabel(r"$a$ (energy in the $\omega_1=\pi/2$ plane)")
    ax.set_ylabel("gap")
    ax.legend(fontsize=8)
    ax.set_title("Fig. 4a — non-monotone gap in plane energy (Prop. 7.4)", fontsize=10)
    save(fig, [ax], d, "fig4a_nonmonotone.png")


def plot_rope_fig4b(d):
    rows = read_table(d, "gap_curve.csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (n, rs) in enumerate(by(rows, "n").items()):
        muted = n == "128"
        ax.plot([num(r["a1"]) for r in rs], [num(r["gamma"]) for r in rs], color="0.6" if muted else "C%d" % i,
                lw=1 if muted else 1.8, label="n = %s" % n)
    ax.set_xlabel(r"$a_1$ (energy in the $\omega=1$ plane)")
    ax.set_ylabel(r"$\gamma$")
    ax.legend(fontsize=8)
    ax.set_title("Fig. 4b — finite-context gaps, frequencies (1, 0.01), β = 4", fontsize=10)
    save(fig, [ax], d, "fig4b_finite_context.png")


def plot_rope_fig4c(d):
    rows = read_table(d, "two_token.csv")
    fig, ax = plt.subplots(figsize=(5.6, 4.0))
    for i, (w, rs) in enumerate(by(rows, "label").items()):
        ax.plot([num(r["delta"]) for r in rs], [num(r["gamma"]) for r in rs], "o-", color="C%d" % i, label=w)
    ax.set_xticks([1, 2])
    ax.set_xlabel(r"position gap $\Delta$")
    ax.set_ylabel(r"$\gamma_\omega(\Delta) = 2q/(1+q)$")
    ax.legend(fontsize=8)
    ax.set_title("Fig. 4c — frequency-order reversal (Prop. 7.5)", fontsize=10)
    save(fig, [ax], d, "fig4c_reversal.png")


def plot_rope_fig4d(d):
    rows = read_table(d, "rates.csv")
    g = [num(r["gamma"]) for r in rows]
    f = [num(r["gamma_fit"]) for r in rows]
    err = max(num(r["rel_error"]) for r in rows)
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    lo, hi = min(g + f) * 0.95, max(g + f) * 1.05
    ax.plot([lo, hi], [lo, hi], "k--", lw=1)
    for r in rows:
        ax.plot([num(r["gamma"])], [num(r["gamma_fit"])], "o", color="C0")
        ax.annotate(r["a_high"], (num(r["gamma"]), num(r["gamma_fit"])), xytext=(5, -10), textcoords="offset points",
                    fontsize=8)
    ax.set_xlabel(r"theory gap $\gamma$")
    ax.set_ylabel(r"fitted nonlinear rate")
    ax.set_title("Fig. 4d — rate parity, n=16, β=4: max rel. error = %.2e" % err, fontsize=10)
    save(fig, [ax], d, "fig4d_rate_parity.png")


def plot_rope_table2(d):
    """Table 2 as a figure: paper's discrepancy vs tokdyn's, per quantity (log scale)."""
    rows = [r for r in read_table(d, "table2.csv") if r["paper"] not in ("", None)]
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    y = np.arange(len(rows))
    pv = [abs(num(r["paper"])) for r in rows]
    tv = [abs(num(r["tokdyn"])) for r in rows]
    ax.barh(y - 0.2, pv, height=0.4, color="0.6", label="paper")
    ax.barh(y + 0.2, [max(v, 1e-18) for v in tv], height=0.4, color="C0", label="tokdyn")
    ax.set_yticks(y)
    short = {"Resonant spectrum and local rate": "resonant", "Geometric contraction bounds": "geometric",
             "Twisted states and drift": "twisted", "Multi-frequency gap": "multi-freq"}
    ax.set_yticklabels(["%s: %s (n=%s)" % (short.get(r["row"], r["row"]), r["quantity"], r["count"]) for r in rows], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("|discrepancy| (log)")
    ax.legend(fontsize=8)
    ax.set_title("Table 2 — independent cross-checks, paper vs tokdyn", fontsize=10)
    save(fig, [ax], d, "table2.png")


def plot_rope_flow(d):
    """rope-flow: lambda_bar_1 and r (mean over runs) and the minimum pairwise inner product c of
    every run, against floor-scaled time tau = 2 a t."""
    with open(os.path.join(d, "manifest.json")) as f:
        man = json.load(f)
    p = man.get("params", {})
    geo = read_table(d, "geometry.csv")
    met = read_table(d, "metrics.csv")
    fig, ax = plt.subplots(3, 1, figsize=(6.4, 7.0), sharex=True)
    t = [num(r["t"]) for r in met]
    ax[0].plot(t, [num(r["lambda1_mean"]) for r in met], color="C0")
    ax[0].set_ylabel(r"$\bar\lambda_1$ (mean over runs)")
    ax[1].plot(t, [num(r["pr_mean"]) for r in met], color="C1")
    ax[1].set_ylabel("participation ratio r")
    for i, (run, rs) in enumerate(by(geo, "run").items()):
        ax[2].plot([num(r["t"]) for r in rs], [num(r["min_inner_c"]) for r in rs], color="C%d" % (i % 10), lw=1)
    ax[2].set_ylabel(r"$c(t) = \min_{i<j}\langle x_i,x_j\rangle$")
    ax[2].set_xlabel("t")
    ax[0].set_title("RoPE attention flow: n=%s, d=%s, β=%s, heads=%s, %s, %s" % (
        p.get("n"), p.get("d"), p.get("beta"), p.get("heads"), "causal" if p.get("causal") else "bidirectional",
        p.get("integrator")), fontsize=9)
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
