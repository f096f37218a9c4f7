"""Figures of "The Attention Within" Figs. 1-6 (Gram metrics lambda_bar_1 and r against depth, the
interaction q_i and its window averages): the paper SSM model with random weights (ssm-random-silu)
and the Mamba-2 presets (mamba2-fig1, -fig2, -fig3, -fig45 for Figs. 4 and 5, -fig6), drawn from the
CSV files of one results directory."""
import os

import numpy as np

from .common import STYLE, by, manifest, num, paper_values, plt, read_csv, save, synthetic_note


def metrics_figure(d, out, title, variants=None, paper=None, note=None):
    """Two panels as the paper's Figs. 1-3: lambda_bar_1 (top) and r (bottom) against depth,
    mean over runs with a +-1 std band. `paper` = {variant: (lambda1, r)}: the paper's reported
    end values, drawn as dotted lines for a side-by-side reading."""
    rows = by(read_csv(os.path.join(d, "metrics.csv")), "variant")
    fig, ax = plt.subplots(2, 1, figsize=(6.4, 5.6), sharex=True)
    for v, rs in rows.items():
        if variants and v not in variants:
            continue
        k = [num(r["layer"]) for r in rs]
        st = STYLE.get(v, dict(label=v))
        for a, m, s in ((ax[0], "lambda1_mean", "lambda1_std"), (ax[1], "pr_mean", "pr_std")):
            mu = [num(r[m]) for r in rs]
            sd = [num(r[s]) for r in rs]
            a.plot(k, mu, **st)
            a.fill_between(k, [x - y for x, y in zip(mu, sd)], [x + y for x, y in zip(mu, sd)],
                           color=st.get("color"), alpha=0.15, lw=0)
        if paper and v in paper:
            for a, val in zip(ax, paper[v]):
                a.axhline(val, color=st.get("color"), ls=":", lw=1.2)
    if paper:
        ax[1].plot([], [], color="gray", ls=":", label="paper's reported value")
        ax[1].legend(fontsize=8)
    ax[0].set_ylabel(r"$\bar\lambda_1$")
    ax[1].set_ylabel(r"participation ratio $r$")
    ax[1].set_xlabel("layer")
    ax[0].set_ylim(0, 1.02)
    ax[1].set_ylim(bottom=0.9)
    ax[0].legend()
    ax[0].set_title(title, fontsize=10)
    if note:
        note(fig)
    save(fig, ax, d, out)


def pe_token_figure(d, out, variant, run, token, title, window=None, note=None):
    """Three panels as the paper's Figs. 4-5: sign of q, window average at T = T*, and the
    worst-case window average W(T) against T with T* marked, for one token of one run."""
    raw = read_csv(os.path.join(d, "q.csv"))
    q = [num(r["q"]) for r in raw if r["variant"] == variant and int(r["run"]) == run and int(r["token"]) == token]
    if not q:
        return
    q = np.array(q)
    K = len(q)
    P = np.concatenate([[0.0], np.cumsum(q)])
    W = np.array([min((P[t + T] - P[t]) for t in range(0, K - T + 1)) / T for T in range(1, K + 1)])
    adm = np.nonzero(W > 0)[0]
    tstar = int(adm[0]) + 1 if adm.size else None
    # The window: given, else T*, else 8; never longer than the series (a short run has K < 8).
    Tw = min(window if window else (tstar if tstar else 8), K)
    avg = np.convolve(q, np.ones(Tw) / Tw, mode="valid")
    fig, ax = plt.subplots(3, 1, figsize=(6.4, 6.4))
    s = np.arange(1, K + 1)
    ax[0].step(s, np.sign(q), where="mid", color="C0", lw=0.8)
    ax[0].set_ylabel(r"sign $q_%d$" % token)
    ax[0].set_yticks([-1, 1])
    ax[0].set_xlabel("layer")
    ax[1].plot(np.arange(Tw, K + 1), avg, color="C0", marker="o" if avg.size < 3 else None)  # a lone point shows
    ax[1].axhline(0, color="k", lw=0.6)
    ax[1].set_ylabel(r"window average, $T=%d$" % Tw)
    ax[1].set_xlabel("layer (window end)")
    ax[2].plot(np.arange(1, K + 1), W, color="C0")
    ax[2].axhline(0, color="k", lw=0.6)
    if tstar:
        ax[2].axvline(tstar, color="C3", ls="--", lw=1)
        ax[2].annotate(r"$T^\star=%d$" % tstar, (tstar, 0), xytext=(8, 10), textcoords="offset points", color="C3")
    ax[2].set_ylabel(r"worst window average $W(T)$")
    ax[2].set_xlabel("window length T")
    ax[0].set_title(title, fontsize=10)
    if note:
        note(fig)
    save(fig, ax, d, out)


def pe_envelope_figure(d, out, title, labels=None, note=None, paper=None):
    """One panel as the paper's Fig. 6: worst-case window average against T per configuration
    (envelope over all runs and tokens), with the smallest admissible window marked."""
    rows = read_csv(os.path.join(d, "pe_curve.csv"))
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for i, (v, rs) in enumerate(by(rows, "variant").items()):
        env = {}
        for r in rs:
            T = int(r["T"])
            env[T] = min(env.get(T, float("inf")), num(r["worst_window_avg"]))
        T = np.array(sorted(env))
        W = np.array([env[t] for t in T])
        st = STYLE.get(v, dict(color="C%d" % i, label=v))
        lab = (labels or {}).get(v, st.get("label", v))
        adm = np.nonzero(W > 0)[0]
        ts = int(T[adm[0]]) if adm.size else None
        ax.plot(T, W, color=st.get("color"), label=lab + (r" (envelope $T^\star=%d$)" % ts if ts else " (no admissible T)"))
        if ts:
            ax.plot([ts], [W[adm[0]]], "o", color=st.get("color"))
        if paper and v in paper and paper[v]:
            ax.axvline(paper[v], color=st.get("color"), ls=":", lw=1)
    if paper:
        ax.plot([], [], color="gray", ls=":", label=r"paper's $T^\star$")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel("window length T")
    ax.set_ylabel("worst-case window average")
    ax.set_yscale("symlog", linthresh=1e-2)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    if note:
        note(fig)
    save(fig, [ax], d, out)


def plot_ssm_random_silu(d):
    man = manifest(d)
    p = man.get("params", {})
    sub = "paper SSM model, random weights redrawn per layer, gate off\nn=%s, m=%s, tau=%s, %s tokens, mean ± std over %s runs" % (
        p.get("n", "?"), p.get("m", "?"), p.get("tau", "?"), p.get("tokens", "?"), p.get("runs", "?"))
    metrics_figure(d, "fig3_metrics.png", "Fig. 3 layout — " + sub,
                   paper=paper_values(man, "fig3"))
    notes = man.get("notes", {})
    run = int(notes.get("fig_run", 0))
    tok = int(notes.get("fig_token", 1))
    pe_token_figure(d, "fig5_pe_token.png", "silu", run, tok,
                    "Fig. 5 layout — token %d of run %d, random weights, SiLU on" % (tok, run))
    fig6 = paper_values(man, "fig6")
    pe_envelope_figure(d, "fig6_pe_windows.png", "Fig. 6 layout (random weights) — envelope over runs and tokens",
                       labels={"silu": "random + SiLU", "no_silu": "random, no SiLU"},
                       paper={"silu": fig6.get("random_silu"), "no_silu": fig6.get("random_no_silu")} if fig6 else None)


def mamba2_sub(man):
    p = man.get("params", {})
    ck = p.get("checkpoint") or "fresh %s model (seed %s)" % (p.get("size", "?"), p.get("model_seed", "?"))
    return "%s; %s tokens, %s runs, update=%s" % (os.path.basename(str(ck).rstrip("/")) or ck, p.get("tokens", "?"),
                                                  p.get("runs", "?"), p.get("update", "?"))


def _mamba2(d):
    """The manifest, the synthetic-model note and the subtitle every Mamba-2 figure carries."""
    man = manifest(d)
    return man, (lambda fig: synthetic_note(fig, man)), mamba2_sub(man)


def plot_mamba2_fig1(d):
    man, note, sub = _mamba2(d)
    metrics_figure(d, "fig1_metrics.png", "Fig. 1 — Mamba-2 blocks cycled, SiLU on, gate on vs off\n" + sub,
                   paper=paper_values(man), note=note)


def plot_mamba2_fig2(d):
    man, note, sub = _mamba2(d)
    layer = man.get("params", {}).get("layer", 0)
    metrics_figure(d, "fig2_metrics.png", "Fig. 2 — one block (layer %s) repeated, gate off\n%s" % (layer, sub),
                   paper=paper_values(man), note=note)


def plot_mamba2_fig3(d):
    man, note, sub = _mamba2(d)
    metrics_figure(d, "fig3_metrics.png", "Fig. 3 — random blocks redrawn per layer, gate off\n" + sub,
                   paper=paper_values(man), note=note)


def plot_mamba2_fig45(d):
    """Fig. 4 (cycled blocks) or Fig. 5 (schedule=random): one token's q and its windows."""
    man, note, sub = _mamba2(d)
    notes = man.get("notes", {})
    p = man.get("params", {})
    run, tok, win = int(notes.get("fig_run", 0)), int(notes.get("fig_token", 1)), int(notes.get("window", 8))
    random = p.get("schedule") == "random"
    name = "Fig. 5" if random else "Fig. 4"
    what = "random blocks redrawn per layer" if random else "Mamba-2 blocks cycled"
    variant = p.get("variants", "silu")
    variant = "silu" if variant == "both" else variant
    pe_token_figure(d, "fig5_pe_token.png" if random else "fig4_pe_token.png", variant, run, tok,
                    "%s — q_%d of run %d, %s, gate off, %s (paper: T* = %d)\n%s" % (
                        name, tok, run, what, variant, paper_values(man).get("t_star", 0), sub), window=win, note=note)
    metrics_figure(d, "metrics.png", "%s run — Gram metrics\n%s" % (name, sub), note=note)


def plot_mamba2_fig6(d):
    man, note, sub = _mamba2(d)
    pe_envelope_figure(d, "fig6_pe_windows.png",
                       "Fig. 6 — worst-case window average (envelope over runs and tokens), gate off\n" + sub,
                       note=note, paper=paper_values(man))
    metrics_figure(d, "metrics.png", "Fig. 6 runs — Gram metrics\n" + sub, note=note)


KINDS = {
    "ssm-random-silu": plot_ssm_random_silu,
    "mamba2-fig1": plot_mamba2_fig1,
    "mamba2-fig2": plot_mamba2_fig2,
    "mamba2-fig3": plot_mamba2_fig3,
    "mamba2-fig45": plot_mamba2_fig45,
    "mamba2-fig6": plot_mamba2_fig6,
}
