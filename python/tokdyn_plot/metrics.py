"""Figures of "The Attention Within" Figs. 1-6 (Gram metrics lambda_bar_1 and r against depth, the
interaction q_i and its window averages): the paper SSM model with random weights (ssm-random-silu)
and the Mamba-2 presets (mamba2-fig1, -fig2, -fig3, -fig45 for Figs. 4 and 5, -fig6), drawn from the
CSV files of one results directory.

The paper's reported values (manifest notes.paper_values) are drawn beside the runs: a reading
("lambda_bar_1 increases to approximately 0.88") as a dotted line, a one-sided statement ("r grows
past 14 and is still increasing") as a bound: a solid line at the value with the excluded side
shaded, labelled as the paper's bound."""
import os

import numpy as np

from .common import (GREY, log_ticks, STYLE, VERMILLION, by, footer, manifest, num, paper_bounds, paper_values, plt, read_csv, save,
                     series, synthetic_note)

# Which of Fig. 3's values the paper states as one-sided, for runs whose manifest does not say it
# (notes.paper_values.fig3.<variant>.bounds): "without it ... r grows past 14 and is still increasing
# at the end of the run" (§VI, Fig. 3; specs/ssm-consensus.md N16).
FIG3_BOUNDS = {"no_silu": {"r": ">"}}


def _band(a, x, mu, sd, color):
    a.fill_between(x, mu - sd, mu + sd, color=color, alpha=0.15, lw=0)


def metrics_figure(d, out, title, variants=None, paper=None, note=None, bounds=None, r_log=None, keys=None):
    """Two panels as the paper's Figs. 1-3: lambda_bar_1 (top) and r (bottom) against depth, mean
    over runs with a +-1 std band. `paper` = {variant: (lambda1, r)}: the paper's reported end
    values; `bounds` = {variant: {"lambda1" | "r": ">" | "<"}} marks those the paper states as
    bounds. r_log: r on a log axis (None: when r spans a decade or more)."""
    rows = by(read_csv(os.path.join(d, "metrics.csv")), "variant")
    bounds = bounds or {}
    fig, ax = plt.subplots(2, 1, figsize=(6.4, 5.8), sharex=True)
    r_all = []
    for i, (v, rs) in enumerate(rows.items()):
        if variants and v not in variants:
            continue
        k = np.array([num(r["layer"]) for r in rs])
        st = dict(STYLE.get(v, series(i, label=v)))
        st.setdefault("ms", 4)
        for a, m, s in ((ax[0], "lambda1_mean", "lambda1_std"), (ax[1], "pr_mean", "pr_std")):
            mu = np.array([num(r[m]) for r in rs])
            sd = np.array([num(r[s]) for r in rs])
            a.plot(k, mu, **st)
            _band(a, k, mu, sd, st["color"])
            if m == "pr_mean":
                r_all += list(mu - sd) + list(mu + sd)
        if paper and v in paper:
            for a, q, val in zip(ax, ("lambda1", "r"), paper[v]):
                if val is None:
                    continue
                op = bounds.get(v, {}).get(q)
                if op:
                    a.axhline(val, color=st["color"], ls="-", lw=1.4)
                    a.axhspan(val, 1e9 if op == ">" else -1e9, color=st["color"], alpha=0.08, lw=0, zorder=0)
                    a.annotate(r"paper: $%s %s %g$ (%s)" % ("r" if q == "r" else r"\bar\lambda_1", op, val, st["label"]),
                               (0.99, val), xycoords=("axes fraction", "data"), xytext=(-2, 3 if op == ">" else -3),
                               textcoords="offset points", ha="right", va="bottom" if op == ">" else "top", fontsize=7,
                               color=st["color"])
                else:
                    a.axhline(val, color=st["color"], ls=":", lw=1.3)
    ax[0].set_ylabel(r"$\bar\lambda_1$ (1: consensus)")
    ax[1].set_ylabel(r"participation ratio $r$")
    ax[1].set_xlabel("layer $k$")
    ax[0].set_ylim(0, 1.02)
    fin = [x for x in r_all if np.isfinite(x) and x > 0]
    if r_log is None:
        r_log = bool(fin) and max(fin) / min(fin) >= 10
    if r_log:
        ax[1].set_yscale("log")
        if fin:
            lo = min(fin + [p[1] for p in (paper or {}).values() if p[1]])
            hi = max(fin + [p[1] for p in (paper or {}).values() if p[1]])
            ax[1].set_ylim(max(0.8, lo / 1.3), hi * 2.0)
        log_ticks(ax[1].yaxis)
    else:
        ax[1].set_ylim(bottom=0.9 if not fin else min(0.9, min(fin) * 0.95),
                       top=max(fin + [p[1] for p in (paper or {}).values() if p[1]] + [1.0]) * 1.12 if fin else None)
    ax[0].legend(fontsize=8, loc="best")
    if paper:
        if any(q not in bounds.get(v, {}) for v in paper for q in ("lambda1", "r")):
            ax[1].plot([], [], color=GREY, ls=":", label="paper's reported value (at layer 200)")
        if any(bounds.get(v) for v in paper):
            ax[1].plot([], [], color=GREY, ls="-", lw=1.4, label="paper's bound (shaded: the side it states)")
        ax[1].legend(fontsize=7, loc="best")
    ax[0].set_title(title, fontsize=10)
    if note:
        note(fig)
    footer(fig, "Lines: mean over runs; bands: ±1 standard deviation over runs.")
    save(fig, ax, d, out, keys=keys)


def pe_token_figure(d, out, variant, run, token, title, window=None, note=None, keys=None):
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
    fig, ax = plt.subplots(3, 1, figsize=(6.4, 7.4))
    s = np.arange(1, K + 1)
    ax[0].step(s, np.sign(q), where="mid", color=series(0)["color"], lw=0.9)
    ax[0].set_ylabel(r"sign of $q_{%d}$" % token)
    ax[0].set_yticks([-1, 1])
    ax[0].set_ylim(-1.4, 1.4)
    ax[0].set_xlabel("layer $k$")
    ax[1].plot(np.arange(Tw, K + 1), avg, **series(0, ms=4))
    ax[1].axhline(0, color="k", lw=0.6)
    ax[1].set_ylabel(r"mean of $q_{%d}$ over $T=%d$" % (token, Tw))
    ax[1].set_xlabel("layer $k$ (window end)")
    ax[2].plot(np.arange(1, K + 1), W, **series(0, ms=4))
    ax[2].axhline(0, color="k", lw=0.6)
    if tstar:
        ax[2].axvline(tstar, color=VERMILLION, ls="--", lw=1)
        ax[2].annotate(r"$T^\star=%d$" % tstar, (tstar, 0), xytext=(8, 10), textcoords="offset points", color=VERMILLION)
    ax[2].set_ylabel(r"worst window mean $W(T)$")
    ax[2].set_xlabel("window length $T$ (layers)")
    ax[0].set_title(title, fontsize=10)
    if note:
        note(fig)
    save(fig, ax, d, out, keys=keys)


def pe_envelope_figure(d, out, title, labels=None, note=None, paper=None, keys=None):
    """One panel as the paper's Fig. 6: worst-case window average against T per configuration
    (envelope over all runs and tokens), with the smallest admissible window marked."""
    rows = read_csv(os.path.join(d, "pe_curve.csv"))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    any_paper = False
    for i, (v, rs) in enumerate(by(rows, "variant").items()):
        env = {}
        for r in rs:
            T = int(r["T"])
            env[T] = min(env.get(T, float("inf")), num(r["worst_window_avg"]))
        T = np.array(sorted(env))
        W = np.array([env[t] for t in T])
        st = dict(STYLE.get(v, series(i, label=v)))
        lab = (labels or {}).get(v, st.pop("label", v))
        st.pop("label", None)
        adm = np.nonzero(W > 0)[0]
        ts = int(T[adm[0]]) if adm.size else None
        ax.plot(T, W, **st, ms=4, label=lab + (r" (envelope $T^\star=%d$)" % ts if ts else " (no admissible $T$)"))
        if ts:
            ax.plot([ts], [W[adm[0]]], "o", color=st["color"], ms=8, mfc="none", mew=1.5)
        if paper and v in paper and paper[v]:
            ax.axvline(paper[v], color=st["color"], ls=":", lw=1.2)
            any_paper = True
    if any_paper:
        ax.plot([], [], color=GREY, ls=":", label=r"paper's $T^\star$")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel("window length $T$ (layers)")
    ax.set_ylabel(r"worst-case window average $W(T)$")
    ax.set_yscale("symlog", linthresh=1e-2)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=10)
    if note:
        note(fig)
    save(fig, [ax], d, out, keys=keys)


SSM_KEYS = ["runs", "depth", "tokens", "n", "m", "tau", "seed", "form", "variants", "weights"]


def _ssm_keys(p):
    return SSM_KEYS + (["sigma"] if p.get("weights") == "gaussian" else [])


def plot_ssm_random_silu(d):
    man = manifest(d)
    p = man.get("params", {})
    keys = _ssm_keys(p)
    sub = "paper SSM model, random weights redrawn per layer, gate off\n$n=%s$, $m=%s$, $\\tau=%s$, %s tokens, %s runs" % (
        p.get("n", "?"), p.get("m", "?"), p.get("tau", "?"), p.get("tokens", "?"), p.get("runs", "?"))
    metrics_figure(d, "fig3_metrics.png", "Fig. 3 layout — " + sub, paper=paper_values(man, "fig3"),
                   bounds=paper_bounds(man, "fig3", FIG3_BOUNDS), r_log=True, keys=keys)
    notes = man.get("notes", {})
    run = int(notes.get("fig_run", 0))
    tok = int(notes.get("fig_token", 1))
    pe_token_figure(d, "fig5_pe_token.png", "silu", run, tok,
                    "Fig. 5 layout — token %d of run %d, random weights, SiLU on" % (tok, run), keys=keys)
    fig6 = paper_values(man, "fig6")
    pe_envelope_figure(d, "fig6_pe_windows.png", "Fig. 6 layout (random weights) — envelope over runs and tokens",
                       labels={"silu": "random + SiLU", "no_silu": "random, no SiLU"},
                       paper={"silu": fig6.get("random_silu"), "no_silu": fig6.get("random_no_silu")} if fig6 else None,
                       keys=keys)


def mamba2_sub(man):
    p = man.get("params", {})
    ck = p.get("checkpoint") or "fresh %s model (seed %s)" % (p.get("size", "?"), p.get("model_seed", "?"))
    return "%s; %s tokens, %s runs, update=%s" % (os.path.basename(str(ck).rstrip("/")) or ck, p.get("tokens", "?"),
                                                  p.get("runs", "?"), p.get("update", "?"))


def mamba2_keys(p):
    """The parameters of a Mamba-2 run that say what was computed (those the run's options apply)."""
    keys = ["checkpoint"] if p.get("checkpoint") else ["size", "model_seed"]
    keys += ["runs", "tokens", "depth", "seed", "update"] + (["tau"] if p.get("update") == "sphere" else [])
    sched = p.get("schedule")
    keys += ["schedule"] + {"single": ["layer"], "list": ["layers"], "random": ["random_seed"]}.get(sched, [])
    keys += ["variants", "window"]
    keys += [k for k in ("conv", "silu_x", "d_skip", "mixer_norm") if p.get(k) is False]  # the ablations in force
    keys += [k for k in ("prompt", "prompts", "token_ids") if p.get(k)]
    if p.get("vocab") and not any(p.get(k) for k in ("prompt", "prompts", "token_ids")):
        keys.append("vocab")
    return keys


def _mamba2(d):
    """The manifest, the synthetic-model note, the subtitle and footer keys of a Mamba-2 figure."""
    man = manifest(d)
    return man, (lambda fig: synthetic_note(fig, man)), mamba2_sub(man), mamba2_keys(man.get("params", {}))


def plot_mamba2_fig1(d):
    man, note, sub, keys = _mamba2(d)
    metrics_figure(d, "fig1_metrics.png", "Fig. 1 — Mamba-2 blocks cycled, SiLU on, gate on vs off\n" + sub,
                   paper=paper_values(man), bounds=paper_bounds(man), note=note, keys=keys)


def plot_mamba2_fig2(d):
    man, note, sub, keys = _mamba2(d)
    layer = man.get("params", {}).get("layer", 0)
    metrics_figure(d, "fig2_metrics.png", "Fig. 2 — one block (layer %s) repeated, gate off\n%s" % (layer, sub),
                   paper=paper_values(man), bounds=paper_bounds(man), note=note, keys=keys)


def plot_mamba2_fig3(d):
    man, note, sub, keys = _mamba2(d)
    metrics_figure(d, "fig3_metrics.png", "Fig. 3 — random blocks redrawn per layer, gate off\n" + sub,
                   paper=paper_values(man), bounds=paper_bounds(man, None, FIG3_BOUNDS), r_log=True, note=note, keys=keys)


def plot_mamba2_fig45(d):
    """Fig. 4 (cycled blocks) or Fig. 5 (schedule=random): one token's q and its windows."""
    man, note, sub, keys = _mamba2(d)
    notes = man.get("notes", {})
    p = man.get("params", {})
    run, tok, win = int(notes.get("fig_run", 0)), int(notes.get("fig_token", 1)), int(notes.get("window", 8))
    random = p.get("schedule") == "random"
    name = "Fig. 5" if random else "Fig. 4"
    what = "random blocks redrawn per layer" if random else "Mamba-2 blocks cycled"
    variant = p.get("variants", "silu")
    variant = "silu" if variant == "both" else variant
    pe_token_figure(d, "fig5_pe_token.png" if random else "fig4_pe_token.png", variant, run, tok,
                    r"%s — $q_{%d}$ of run %d, %s, gate off, %s (paper: $T^\star = %d$)" % (
                        name, tok, run, what, STYLE.get(variant, {}).get("label", variant),
                        paper_values(man).get("t_star", 0)) + "\n" + sub, window=win, note=note, keys=keys)
    metrics_figure(d, "metrics.png", "%s run — Gram metrics\n%s" % (name, sub), note=note, keys=keys)


def plot_mamba2_fig6(d):
    man, note, sub, keys = _mamba2(d)
    pe_envelope_figure(d, "fig6_pe_windows.png",
                       "Fig. 6 — worst-case window average (envelope over runs and tokens), gate off\n" + sub,
                       note=note, paper=paper_values(man), keys=keys)
    metrics_figure(d, "metrics.png", "Fig. 6 runs — Gram metrics\n" + sub, note=note, keys=keys)


KINDS = {
    "ssm-random-silu": plot_ssm_random_silu,
    "mamba2-fig1": plot_mamba2_fig1,
    "mamba2-fig2": plot_mamba2_fig2,
    "mamba2-fig3": plot_mamba2_fig3,
    "mamba2-fig45": plot_mamba2_fig45,
    "mamba2-fig6": plot_mamba2_fig6,
}
