"""Figures of the presets ssm-theorem-pe and ssm-theorem-pd ("The Attention Within",
Theorems IV.1 and V.1), drawn from the written CSV files only.

plot_ssm_theorem_pe(dir): theorem_pe_metrics.png (lambda_bar_1 and r against t per design),
    theorem_pe_convergence.png (1 - b_i = V_i against t, log scale, per design and token, with
    the predicted linearised rate and the certified rate of Theorem IV.1's proof).
plot_ssm_theorem_pd(dir): theorem_pd_metrics.png, theorem_pd_convergence.png and
    theorem_pd_doa.png (converged fraction against c_star and against c_eff)."""
import math

from .common import by, num, plt, read_table, save

TINY = 1e-300


def _read(d, name):
    return read_table(d, name, missing_ok=True)


def _metrics_figure(d, out, title):
    rows = by(_read(d, "metrics.csv"), "variant")
    if not rows:
        return
    fig, ax = plt.subplots(2, 1, figsize=(6.4, 5.6), sharex=True)
    for i, (v, rs) in enumerate(rows.items()):
        t = [num(r.get("t", r["layer"])) for r in rs]
        for a, m, s in ((ax[0], "lambda1_mean", "lambda1_std"), (ax[1], "pr_mean", "pr_std")):
            mu = [num(r[m]) for r in rs]
            sd = [num(r[s]) for r in rs]
            a.plot(t, mu, color="C%d" % i, label=v)
            a.fill_between(t, [x - y for x, y in zip(mu, sd)], [x + y for x, y in zip(mu, sd)],
                           color="C%d" % i, alpha=0.15, lw=0)
    ax[0].set_ylabel(r"$\bar\lambda_1$")
    ax[1].set_ylabel("participation ratio r")
    ax[1].set_xlabel("t")
    ax[0].legend(fontsize=8)
    ax[0].set_title(title, fontsize=9)
    save(fig, [], d, out, dpi=120)


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
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.6 * nrow), squeeze=False)
    flat = [a for row in axes for a in row]
    for a in flat[nv:]:
        a.axis("off")
    for ax, (v, rs) in zip(flat, by_var.items()):
        by_tok = by(rs, "token")
        for ti, (tok, trs) in enumerate(sorted(by_tok.items(), key=lambda kv: int(kv[0]))):
            col = "C%d" % ti
            by_run = by(trs, "run")
            series = {}
            for run, prs in by_run.items():
                t = [num(r["t"]) for r in prs]
                y = [max(num(r["V"]), TINY) for r in prs]
                series[run] = (t, y)
                if int(run) < max_runs:
                    ax.semilogy(t, y, color=col, lw=0.5, alpha=0.35)
            ts = next(iter(series.values()))[0]
            med = [_median([s[1][k] for s in series.values()]) for k in range(len(ts))]
            ax.semilogy(ts, med, color=col, lw=1.6, label="token %s" % tok)
            if rates and (v, tok) in rates:
                pred, cert = rates[(v, tok)]
                k0 = len(ts) // 2
                t0, y0 = ts[k0], med[k0]
                if math.isfinite(pred) and y0 > TINY:
                    ax.semilogy([t0, ts[-1]], [y0, y0 * math.exp(-pred * (ts[-1] - t0))], color=col, ls="--", lw=1)
                if math.isfinite(cert) and tok == "1":
                    ax.semilogy(ts, [med[0] * math.exp(-cert * t) for t in ts], color="k", ls=":", lw=1,
                                label=r"certified $e^{-\rho t}$ (token 1)")
        ax.set_title(v, fontsize=9)
        ax.set_xlabel("t")
        ax.set_ylabel(r"$1 - b_i = V_i$")
        ax.set_ylim(1e-30, 10.0)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    save(fig, [], d, out, dpi=120)


def plot_ssm_theorem_pe(d):
    _metrics_figure(d, "theorem_pe_metrics.png",
                    "Thm IV.1 / Cor IV.1 designs (G1): Gram metrics, mean ± std over runs")
    rates = {}
    for r in _read(d, "rates.csv"):
        rates[(r["variant"], r["token"])] = (num(r["predicted_rate"]), num(r["certified_rho"]))
    _convergence_figure(d, "theorem_pe_convergence.png",
                        "V_i(t) from the caps: median (thick), runs (thin), predicted rate (dashed), "
                        "certified rate of Thm IV.1 (dotted)", rates)


def plot_ssm_theorem_pd(d):
    _metrics_figure(d, "theorem_pd_metrics.png",
                    "Thm V.1 designs: Gram metrics, mean ± std over runs")
    _convergence_figure(d, "theorem_pd_convergence.png",
                        "V_i(t) with the signs of the final state: median (thick), runs (thin)")
    rows = _read(d, "doa.csv")
    if not rows:
        return
    cs = [num(r["c_star"]) for r in rows]
    ce = [num(r["c_eff"]) for r in rows]
    fr = [num(r["fraction"]) for r in rows]
    n = [num(r["runs"]) for r in rows]
    se = [math.sqrt(max(f * (1 - f), 1e-12) / k) for f, k in zip(fr, n)]
    fig, ax = plt.subplots(1, 2, figsize=(9.0, 3.8), sharey=True)
    ax[0].errorbar(cs, fr, yerr=se, fmt="o-", capsize=3)
    ax[0].set_xscale("symlog", linthresh=1.0)
    ax[0].set_xlabel(r"anisotropy $c_\star$")
    ax[0].set_ylabel("converged fraction")
    one_minus = [max(1.0 - x, 1e-16) for x in ce]
    ax[1].errorbar(one_minus, fr, yerr=se, fmt="o-", capsize=3)
    ax[1].set_xscale("log")
    ax[1].invert_xaxis()
    ax[1].set_xlabel(r"$1 - c_{\rm eff}$ (effective threshold $c_{\rm eff}$ grows to the right)")
    for r, x, y in zip(rows, cs, fr):
        ax[0].annotate(r["variant"], (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax[0].set_ylim(-0.05, 1.05)
    fig.suptitle("Domain of attraction of consensus shrinks as the kernel grows anisotropic (Thm V.1)", fontsize=9)
    save(fig, [], d, "theorem_pd_doa.png", dpi=120)


KINDS = {"ssm-theorem-pe": plot_ssm_theorem_pe, "ssm-theorem-pd": plot_ssm_theorem_pd}
