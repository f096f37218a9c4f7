"""Figures of the presets ssm-theorem-pe and ssm-theorem-pd ("The Attention Within",
Theorems IV.1 and V.1), drawn from the written CSV files only.

plot_ssm_theorem_pe(dir): theorem_pe_metrics.png (lambda_bar_1 and r against t per design),
    theorem_pe_convergence.png (1 - b_i = V_i against t, log scale, per design and token, with
    the predicted linearised rate and the certified rate of Theorem IV.1's proof).
plot_ssm_theorem_pd(dir): theorem_pd_metrics.png, theorem_pd_convergence.png and
    theorem_pd_doa.png (converged fraction against c_star and against 1 - c_eff, with the exact
    fraction of the reduced equation when the run wrote it: doa.csv column fraction_exact)."""
import math

import numpy as np

from .common import BLACK, by, footer, num, plt, read_table, save, series

TINY = 1e-300
FLOOR = 1e-30  # the bottom of the V axes


def _read(d, name):
    return read_table(d, name, missing_ok=True)


def _metrics_figure(d, out, title):
    rows = by(_read(d, "metrics.csv"), "variant")
    if not rows:
        return
    fig, ax = plt.subplots(2, 1, figsize=(6.4, 5.8), sharex=True)
    r_all = []
    for i, (v, rs) in enumerate(rows.items()):
        t = np.array([num(r.get("t", r["layer"])) for r in rs])
        st = series(i, ms=4)
        for a, m, s in ((ax[0], "lambda1_mean", "lambda1_std"), (ax[1], "pr_mean", "pr_std")):
            mu = np.array([num(r[m]) for r in rs])
            sd = np.array([num(r[s]) for r in rs])
            a.plot(t, mu, **st, label=v)
            a.fill_between(t, mu - sd, mu + sd, color=st["color"], alpha=0.15, lw=0)
            if m == "pr_mean":
                r_all += [x for x in mu + sd if np.isfinite(x)]
    ax[0].set_ylabel(r"$\bar\lambda_1$ (1: consensus)")
    ax[1].set_ylabel(r"participation ratio $r$")
    ax[1].set_xlabel("time $t$")
    ax[0].set_ylim(0, 1.04)
    if r_all:
        ax[1].set_ylim(0.9, max(r_all) * 1.08 + 0.1)
    ax[0].legend(fontsize=8)
    ax[0].set_title(title, fontsize=9)
    footer(fig, "Lines: mean over runs; bands: ±1 standard deviation over runs.")
    save(fig, ax, d, out, dpi=120)


def _median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _convergence_figure(d, out, title, rates=None, max_runs=8):
    rows = _read(d, "convergence.csv")
    if not rows:
        return
    by_var = by(rows, "variant")
    nv = len(by_var)
    ncol = min(3, nv)
    nrow = (nv + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.4 * ncol, 3.7 * nrow), squeeze=False)
    flat = [a for row in axes for a in row]
    for a in flat[nv:]:
        fig.delaxes(a)  # no empty panels
    at_rest = []
    for ax, (v, rs) in zip(flat, by_var.items()):
        by_tok = by(rs, "token")
        for ti, (tok, trs) in enumerate(sorted(by_tok.items(), key=lambda kv: int(kv[0]))):
            if all(num(r["V"]) <= FLOOR for r in trs):  # started at the equilibrium: nothing to draw
                at_rest.append((v, tok))
                continue
            st = series(ti, ls="-", ms=4)  # solid: dashed is the predicted rate
            col = st["color"]
            series_ = {}
            for run, prs in by(trs, "run").items():
                t = [num(r["t"]) for r in prs]
                y = [max(num(r["V"]), TINY) for r in prs]
                series_[run] = (t, y)
                if int(run) < max_runs:
                    ax.semilogy(t, y, color=col, lw=0.5, alpha=0.35)
            ts = next(iter(series_.values()))[0]
            med = [_median([s[1][k] for s in series_.values() if k < len(s[1])]) for k in range(len(ts))]
            ax.semilogy(ts, med, **dict(st, lw=1.6), label="token %s (median)" % tok)
            if rates and (v, tok) in rates:
                pred, cert = rates[(v, tok)]
                k0 = len(ts) // 2
                t0, y0 = ts[k0], med[k0]
                if math.isfinite(pred) and y0 > TINY:
                    ax.semilogy([t0, ts[-1]], [y0, y0 * math.exp(-pred * (ts[-1] - t0))], color=col, ls="--", lw=1)
                if math.isfinite(cert) and tok == "1":
                    ax.semilogy(ts, [med[0] * math.exp(-cert * t) for t in ts], color=BLACK, ls=":", lw=1.2,
                                label=r"certified $e^{-\rho_1 t}$ (token 1)")
        ax.set_title(v, fontsize=9)
        ax.set_xlabel("time $t$")
        ax.set_ylabel(r"$V_i = 1 - b_i$")
        ax.set_ylim(FLOOR, 10.0)
        ax.legend(fontsize=6.5, loc="lower left")
    fig.suptitle(title, fontsize=9)
    if rates:
        footer(fig, "Thin lines: single runs (the first %d); dashed: the predicted linearised rate from mid-run." % max_runs)
    else:
        footer(fig, "Thin lines: single runs (the first %d)." % max_runs)
    if at_rest:
        toks = sorted({t for _, t in at_rest})
        footer(fig, "Not drawn: token%s %s of %s, which start%s at the equilibrium ($V \\leq 10^{-30}$ throughout)." % (
            "s" if len(toks) > 1 else "", ", ".join(toks), ", ".join(sorted({v for v, _ in at_rest})), "" if len(toks) > 1 else "s"))
    save(fig, [a for a in flat[:nv]], d, out, dpi=120)


def plot_ssm_theorem_pe(d):
    _metrics_figure(d, "theorem_pe_metrics.png",
                    "Thm IV.1 / Cor IV.1 designs (G1): Gram metrics, mean ± std over runs")
    rates = {}
    for r in _read(d, "rates.csv"):
        rates[(r["variant"], r["token"])] = (num(r["predicted_rate"]), num(r["certified_rho"]))
    _convergence_figure(d, "theorem_pe_convergence.png",
                        r"$V_i(t)$ from the caps: median over runs (thick), predicted rate (dashed), "
                        r"certified rate of Thm IV.1 (dotted)", rates)


def _doa_panel(ax, x, rows, fr, lo, hi, exact, log=False):
    ax.errorbar(x, fr, yerr=[lo, hi], **series(0, line=False, ms=6), capsize=3, label="converged fraction (runs)")
    if exact is not None and any(math.isfinite(v) for v in exact):
        ax.plot(x, exact, "D", color=series(1)["color"], mfc="none", ms=9, mew=1.5, label="exact (reduced equation)")
    for r, xi, yi in zip(rows, x, fr):
        ax.annotate(r["variant"], (xi, yi), fontsize=6.5, xytext=(4, 5), textcoords="offset points")
    ax.set_ylim(-0.05, 1.12)
    ax.set_ylabel("fraction of starts converged")


def plot_ssm_theorem_pd(d):
    _metrics_figure(d, "theorem_pd_metrics.png",
                    "Thm V.1 designs: Gram metrics, mean ± std over runs")
    _convergence_figure(d, "theorem_pd_convergence.png",
                        r"$V_i(t)$ with the signs of the final state: median over runs (thick)")
    rows = _read(d, "doa.csv")
    if not rows:
        return
    rows = sorted(rows, key=lambda r: (num(r["c_star"]) if r["c_star"] else float("inf")))
    cs = [num(r["c_star"]) for r in rows]
    ce = [num(r["c_eff"]) for r in rows]
    fr = [num(r["fraction"]) for r in rows]
    n = [num(r["runs"]) for r in rows]
    # Binomial standard error, the bars kept inside [0, 1].
    se = [math.sqrt(max(f * (1 - f), 0.0) / k) for f, k in zip(fr, n)]
    lo = [min(s, f) for s, f in zip(se, fr)]
    hi = [min(s, 1 - f) for s, f in zip(se, fr)]
    exact = [num(r["fraction_exact"]) for r in rows] if rows and "fraction_exact" in rows[0] else None
    fig, ax = plt.subplots(1, 2, figsize=(9.6, 4.0))
    _doa_panel(ax[0], cs, rows, fr, lo, hi, exact)
    ax[0].set_xscale("symlog", linthresh=1.0)
    ax[0].set_xlim(-0.2, max([c for c in cs if math.isfinite(c)] + [1.0]) * 3)
    ax[0].set_xlabel(r"anisotropy $c_\star$ (Theorem V.1)")
    one_minus = [max(1.0 - x, 1e-16) for x in ce]
    _doa_panel(ax[1], one_minus, rows, fr, lo, hi, exact)
    ax[1].set_xscale("log")
    ax[1].set_xlim(max(one_minus) * 4, min(one_minus) / 4)  # inverted: c_eff grows to the right
    ax[1].set_xlabel(r"$1 - c_{\rm eff}$ (effective threshold $c_{\rm eff}$ grows to the right)")
    ax[0].legend(fontsize=7, loc="best")
    fig.suptitle("Domain of attraction of consensus shrinks as the kernel grows anisotropic (Thm V.1)", fontsize=9)
    note = "Error bars: ±1 binomial standard error over the runs of each design (runs: %s)." % ", ".join(
        "%d" % k for k in sorted(set(n)))
    if exact is None:
        note += " The exact fraction of the reduced equation is not in doa.csv (no column fraction_exact)."
    footer(fig, note)
    save(fig, list(ax), d, "theorem_pd_doa.png", dpi=120)


KINDS = {"ssm-theorem-pe": plot_ssm_theorem_pe, "ssm-theorem-pd": plot_ssm_theorem_pd}
