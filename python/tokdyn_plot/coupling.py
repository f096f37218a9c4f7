"""Figures of the coupling-paper presets (part 1: the Transformer depth flow), drawn from the
written CSV files only:

coupling-frozen-kernel   frozen_kernel.png: |J - J_exact| (analytic, FD) and |J - J_paper| (flag F1)
                         per layer; kappa_alpha against n with 0.2 3^n; mixing |alpha*^m - 1 e_1^T|
                         against m with its 2^-m asymptote; RoPE/ALiBi negative control.
coupling-bounded-step    bounded_step.png: max |N_t| / C_N against the input scale (and adversarial);
                         stream norms against the Prop 1 bound, Post-LN control; |DF| near the
                         singular sets (eps_S = 0).
coupling-rank-collapse   rank_collapse.png: |S(X) - 1 mean^T| / |S(X)| against depth.
coupling-qk-specificity  qk_specificity.png: |alpha^(l) - alpha*| against depth, base and perturbed."""
import math

from .common import VERMILLION, manifest, num, plt, read_table, save, series, synthetic_note

TINY = 1e-18


def _pos(v):
    return max(num(v), TINY)


def plot_frozen_kernel(d):
    jac = read_table(d, "jacobian.csv")
    kap = read_table(d, "kappa.csv")
    mix = read_table(d, "mixing.csv")
    neg = read_table(d, "negative_control.csv")
    fig, ax = plt.subplots(2, 2, figsize=(12, 9))
    a = ax[0][0]
    layers = [int(r["layer"]) for r in jac]
    for k, (key, lab) in enumerate((("J_analytic_vs_exact", r"analytic JVP vs $J_{\rm exact}$"),
                                    ("J_fd_vs_exact", r"central FD vs $J_{\rm exact}$"),
                                    ("J_vs_paper_maxabs", "$J$ vs paper eq. (8) (F1)"),
                                    ("sector_residual", "sector factorisation residual"))):
        ys = [_pos(r[key]) for r in jac]
        if not all(math.isnan(num(r[key])) for r in jac):
            a.semilogy(layers, ys, **series(k, ms=5), label=lab)
    a.set_xlabel("layer $l$")
    a.set_ylabel("max-abs difference (floor $10^{-18}$)")
    a.set_title(r"Thm 3: exact Kronecker Jacobian $I\otimes(I+\tilde M) + \alpha^\star\otimes(I+\tilde M)V$", fontsize=10)
    a.legend(fontsize=8)
    a = ax[0][1]
    ns = [int(r["n"]) for r in kap]
    a.semilogy(ns, [num(r["kappa_alpha"]) for r in kap], "o-", label=r"$\kappa_\alpha$ (Pascal basis, exact inverse)")
    a.semilogy(ns, [num(r["approx_0.2_3^n"]) for r in kap], "--", label=r"$0.2\cdot 3^n$")
    a.set_xlabel("size $n$ ($= T$ or $P$)")
    a.set_ylabel(r"condition number $\kappa_\alpha$")
    a.set_title(r"Eigenbasis condition number of $\alpha^\star$ (F16)", fontsize=10)
    a.legend(fontsize=8)
    a = ax[1][0]
    by = {}
    for r in mix:
        by.setdefault(int(r["n"]), []).append(r)
    for k, (n, rows) in enumerate(sorted(by.items())):
        ms = [int(r["m"]) for r in rows]
        st = series(k, ls="-", ms=4)
        a.semilogy(ms, [_pos(r["distance"]) for r in rows], **st, label="$n = %d$" % n)
        a.semilogy(ms, [_pos(r["asymptote"]) for r in rows], ":", color=st["color"])
    a.plot([], [], ":", color="0.4", label=r"asymptote $2^{-m}\sqrt{n(n-1)(2n-1)/3}$")
    a.set_xlabel("power $m$")
    a.set_ylabel(r"$\|\alpha^{\star m} - \mathbf{1} e_1^\top\|_2$")
    a.set_title("Mixing to the head token", fontsize=10)
    a.legend(fontsize=8)
    a = ax[1][1]
    byp = {}
    for r in neg:
        byp.setdefault(r["positional"], []).append(r)
    for k, (pos, rows) in enumerate(byp.items()):
        a.semilogy([int(r["layer"]) for r in rows], [_pos(r["max_dev_alpha_star"]) for r in rows], **series(k, ms=5),
                   label="positions: %s" % pos)
    a.set_xlabel("layer $l$")
    a.set_ylabel(r"$\max|\alpha(X^\star) - \alpha^\star|$ (floor $10^{-18}$)")
    a.set_title("Frozen kernel at $X^\\star$: no positions exact, RoPE/ALiBi the negative control", fontsize=10)
    a.legend(fontsize=8)
    save(fig, list(ax.ravel()), d, "frozen_kernel.png", dpi=110)


def plot_bounded_step(d):
    bs = read_table(d, "bounded_step.csv")
    st = read_table(d, "stream.csv")
    sg = read_table(d, "singular.csv")
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.8))
    a = ax[0]
    by = {}
    for r in bs:
        if r["kind"] == "sampled":
            by.setdefault(int(r["layer"]), []).append(r)
    for l, rows in sorted(by.items()):
        a.semilogx([num(r["scale"]) for r in rows], [num(r["ratio"]) for r in rows], **series(l, ms=4), label="layer %d" % l)
    adv = [r for r in bs if r["kind"] == "adversarial"]
    if adv:
        a.semilogx([num(r["scale"]) for r in adv], [num(r["ratio"]) for r in adv], "k*", ms=10, label="adversarial ascent")
    a.axhline(1.0, color=VERMILLION, ls="--", label="$C_N$ (Prop 1)")
    a.set_xlabel("input scale $|X|$")
    a.set_ylabel(r"$\max_t |N_t(X)| / C_N$")
    a.set_title("Prop 1: bounded step", fontsize=10)
    a.set_ylim(0, 1.1)
    a.legend(fontsize=7)
    a = ax[1]
    pre = [r for r in st if r["placement"] == "pre"]
    post = [r for r in st if r["placement"] == "post"]
    a.plot([int(r["layer"]) for r in pre], [num(r["max_norm"]) for r in pre], "o-", ms=3, label=r"Pre-LN $\max_t |x_t|$")
    a.plot([int(r["layer"]) for r in pre], [num(r["bound"]) for r in pre], "--", label=r"$|x(0)| + \sum C_N$")
    a.plot([int(r["layer"]) for r in post], [num(r["max_norm"]) for r in post], "s-.", ms=3, label=r"Post-LN $\max_t |x_t|$")
    a.set_yscale("log")
    a.set_xlabel("layer $l$")
    a.set_ylabel(r"stream norm $\max_t |x_t|$")
    a.set_title("Linearly growing stream (Pre-LN) vs bounded (Post-LN)", fontsize=10)
    a.legend(fontsize=7)
    a = ax[2]
    by = {}
    for r in sg:
        by.setdefault((r["placement"], r["draw"]), []).append(r)
    for (pl, dr), rows in sorted(by.items()):
        where = r"$|h - h_0|$ (root $|h_0| = %.2f$)" % num(rows[0]["point_norm"]) if pl == "post" else "$|x|$"
        name = {"pre": r"Pre-LN $\epsilon_S=0$", "pre-eps": r"Pre-LN $\epsilon_S>0$", "post": r"Post-LN $\epsilon_S=0$"}.get(pl, pl)
        a.loglog([num(r["distance"]) for r in rows], [num(r["jacobian_norm"]) for r in rows],
                 {"pre": "o-", "pre-eps": "d:", "post": "s--"}.get(pl, "x-"), ms=3, label="%s draw %s vs %s" % (name, dr, where))
    a.set_xlabel("distance to the singular point")
    a.set_ylabel(r"Jacobian norm $\|DF\|_2$")
    a.set_title(r"Lemmas 15/16: singular sets ($\epsilon_S = 0$) vs $\epsilon_S > 0$", fontsize=10)
    a.legend(fontsize=7)
    save(fig, list(ax), d, "bounded_step.png", dpi=110)


def plot_rank_collapse(d):
    rows = read_table(d, "rank_collapse.csv")
    rate = read_table(d, "rate.csv")
    fig, ax = plt.subplots(figsize=(7, 5))
    by = {}
    for r in rows:
        by.setdefault(int(r["run"]), []).append(r)
    for run, rs in sorted(by.items()):
        ax.semilogy([int(r["layer"]) for r in rs], [_pos(r["ratio"]) for r in rs], "-", color="0.5", lw=0.8, alpha=0.6)
    layers = sorted({int(r["layer"]) for r in rows})
    mean = []
    for l in layers:
        vals = [math.log(_pos(r["ratio"])) for r in rows if int(r["layer"]) == l]
        mean.append(math.exp(sum(vals) / len(vals)))
    ax.semilogy(layers, mean, "k-", lw=2, label="geometric mean over runs")
    ax.plot([], [], "-", color="0.5", lw=0.8, alpha=0.6, label="single runs")
    if rate:
        r = rate[0]
        ax.set_title("Rank collapse: $r_f$ estimate %.4f per layer (layers %s to %s)" % (num(r["r_f_estimate"]), r["from_layer"], r["to_layer"]),
                     fontsize=10)
    ax.set_xlabel("layer $l$")
    ax.set_ylabel(r"$\|S(X) - \mathbf{1}\,\bar s^\top\|_F \,/\, \|S(X)\|_F$")
    ax.legend()
    synthetic_note(fig, manifest(d))
    save(fig, [ax], d, "rank_collapse.png", dpi=110)


def plot_qk_specificity(d):
    rows = read_table(d, "qk_specificity.csv")
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.8))
    amps = sorted({r["amplitude"] for r in rows}, key=float, reverse=True)
    for k, amp in enumerate(amps):
        col = series(k)["color"]
        for v, st in (("base", "o-"), ("perturbed", "s--")):
            rs = [r for r in rows if r["variant"] == v and r["amplitude"] == amp]
            ax[0].semilogy([int(r["layer"]) for r in rs], [_pos(r["alpha_dist_mean"]) for r in rs], st, ms=3, color=col,
                           label="%s, $s = %.3g$" % (v, float(amp)))
        rs = [r for r in rows if r["variant"] == "perturbed" and r["amplitude"] == amp]
        ax[1].semilogy([int(r["layer"]) for r in rs], [_pos(r["state_diff"]) for r in rs], "s-", ms=3, color=col,
                       label="state difference, $s = %.3g$" % float(amp))
        ax[1].semilogy([int(r["layer"]) for r in rs], [_pos(r["fluct_ratio"]) for r in rs], "^:", ms=3, color=col,
                       label=r"fluctuation $|X - \mathbf{1} x_1^\top| / |X|$, $s = %.3g$" % float(amp))
    ax[0].set_xlabel("layer $l$")
    ax[0].set_ylabel(r"$\|\alpha^{(l)} - \alpha^\star\|_F$, mean over runs")
    ax[0].set_title("Distance of the attention from the frozen kernel", fontsize=10)
    ax[0].legend(fontsize=8)
    ax[1].set_xlabel("layer $l$")
    ax[1].set_ylabel("relative size (floor $10^{-18}$)")
    ax[1].set_title("Late $W_Q$, $W_K$ perturbation (Prop 8: $O(s^2)$ without positions)", fontsize=10)
    ax[1].legend(fontsize=7)
    synthetic_note(fig, manifest(d))
    save(fig, list(ax), d, "qk_specificity.png", dpi=110)


KINDS = {
    "coupling-frozen-kernel": plot_frozen_kernel,
    "coupling-bounded-step": plot_bounded_step,
    "coupling-rank-collapse": plot_rank_collapse,
    "coupling-qk-specificity": plot_qk_specificity,
}
