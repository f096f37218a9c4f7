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

from .common import manifest, num, plt, read_table, save, synthetic_note

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
    for key, lab, st in (("J_analytic_vs_exact", "analytic JVP vs J_exact", "o-"),
                         ("J_fd_vs_exact", "central FD vs J_exact", "s-"),
                         ("J_vs_paper_maxabs", "J vs paper eq. (8) (F1)", "^-"),
                         ("sector_residual", "sector factorisation residual", "d-")):
        ys = [_pos(r[key]) for r in jac]
        if not all(math.isnan(num(r[key])) for r in jac):
            a.semilogy(layers, ys, st, label=lab)
    a.set_xlabel("layer l")
    a.set_ylabel("max-abs difference")
    a.set_title("Thm 3: exact Kronecker Jacobian I(x)(I+M~) + alpha*(x)(I+M~)V")
    a.legend(fontsize=8)
    a = ax[0][1]
    ns = [int(r["n"]) for r in kap]
    a.semilogy(ns, [num(r["kappa_alpha"]) for r in kap], "o-", label="kappa_alpha (Pascal basis, exact inverse)")
    a.semilogy(ns, [num(r["approx_0.2_3^n"]) for r in kap], "--", label="0.2 * 3^n")
    a.set_xlabel("n (= T or P)")
    a.set_ylabel("kappa_alpha")
    a.set_title("Eigenbasis condition number of alpha* (F16)")
    a.legend(fontsize=8)
    a = ax[1][0]
    by = {}
    for r in mix:
        by.setdefault(int(r["n"]), []).append(r)
    for n, rows in sorted(by.items()):
        ms = [int(r["m"]) for r in rows]
        line, = a.semilogy(ms, [_pos(r["distance"]) for r in rows], "-", label="n = %d" % n)
        a.semilogy(ms, [_pos(r["asymptote"]) for r in rows], ":", color=line.get_color())
    a.set_xlabel("power m")
    a.set_ylabel("||alpha*^m - 1 e_1^T||_2")
    a.set_title("Mixing to the head token (dotted: 2^-m sqrt(n(n-1)(2n-1)/3))")
    a.legend(fontsize=8)
    a = ax[1][1]
    byp = {}
    for r in neg:
        byp.setdefault(r["positional"], []).append(r)
    for pos, rows in byp.items():
        a.semilogy([int(r["layer"]) for r in rows], [_pos(r["max_dev_alpha_star"]) for r in rows], "o-", label=pos)
    a.set_xlabel("layer l")
    a.set_ylabel("max |alpha(X*) - alpha*| (floor 1e-18)")
    a.set_title("Frozen kernel at X*: none = exact, RoPE/ALiBi = negative control")
    a.legend(fontsize=8)
    save(fig, [], d, "frozen_kernel.png", dpi=110)


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
        a.semilogx([num(r["scale"]) for r in rows], [num(r["ratio"]) for r in rows], "o-", ms=3, label="layer %d" % l)
    adv = [r for r in bs if r["kind"] == "adversarial"]
    if adv:
        a.semilogx([num(r["scale"]) for r in adv], [num(r["ratio"]) for r in adv], "k*", ms=10, label="adversarial ascent")
    a.axhline(1.0, color="r", ls="--", label="C_N (Prop 1)")
    a.set_xlabel("input scale |X|")
    a.set_ylabel("max_t |N_t(X)| / C_N")
    a.set_title("Prop 1: bounded step")
    a.set_ylim(0, 1.1)
    a.legend(fontsize=7)
    a = ax[1]
    pre = [r for r in st if r["placement"] == "pre"]
    post = [r for r in st if r["placement"] == "post"]
    a.plot([int(r["layer"]) for r in pre], [num(r["max_norm"]) for r in pre], "o-", ms=3, label="Pre-LN max_t |x_t|")
    a.plot([int(r["layer"]) for r in pre], [num(r["bound"]) for r in pre], "--", label="|x(0)| + sum C_N")
    a.plot([int(r["layer"]) for r in post], [num(r["max_norm"]) for r in post], "s-", ms=3, label="Post-LN max_t |x_t|")
    a.set_yscale("log")
    a.set_xlabel("layer l")
    a.set_ylabel("stream norm")
    a.set_title("Linearly growing stream (Pre-LN) vs bounded (Post-LN)")
    a.legend(fontsize=7)
    a = ax[2]
    by = {}
    for r in sg:
        by.setdefault((r["placement"], r["draw"]), []).append(r)
    for (pl, dr), rows in sorted(by.items()):
        where = "|h - h_0| (root |h_0| = %.2f)" % num(rows[0]["point_norm"]) if pl == "post" else "|x|"
        name = {"pre": "Pre-LN eps=0", "pre-eps": "Pre-LN eps>0", "post": "Post-LN eps=0"}.get(pl, pl)
        a.loglog([num(r["distance"]) for r in rows], [num(r["jacobian_norm"]) for r in rows],
                 {"pre": "o-", "pre-eps": "d:", "post": "s--"}.get(pl, "x-"), ms=3, label="%s draw %s vs %s" % (name, dr, where))
    a.set_xlabel("distance to the singular point")
    a.set_ylabel("||Jacobian||_2")
    a.set_title("Lemmas 15/16: singular sets (eps_S = 0) vs eps_S > 0", fontsize=10)
    a.legend(fontsize=7)
    save(fig, [], d, "bounded_step.png", dpi=110)


def plot_rank_collapse(d):
    rows = read_table(d, "rank_collapse.csv")
    rate = read_table(d, "rate.csv")
    fig, ax = plt.subplots(figsize=(7, 5))
    by = {}
    for r in rows:
        by.setdefault(int(r["run"]), []).append(r)
    for run, rs in sorted(by.items()):
        ax.semilogy([int(r["layer"]) for r in rs], [_pos(r["ratio"]) for r in rs], "-", lw=0.8, alpha=0.6)
    layers = sorted({int(r["layer"]) for r in rows})
    mean = []
    for l in layers:
        vals = [math.log(_pos(r["ratio"])) for r in rows if int(r["layer"]) == l]
        mean.append(math.exp(sum(vals) / len(vals)))
    ax.semilogy(layers, mean, "k-", lw=2, label="geometric mean over runs")
    if rate:
        r = rate[0]
        ax.set_title("Rank collapse: r_f estimate %.4f per layer (layers %s..%s)" % (num(r["r_f_estimate"]), r["from_layer"], r["to_layer"]))
    ax.set_xlabel("layer l")
    ax.set_ylabel("||S(X) - 1 mean^T||_F / ||S(X)||_F")
    ax.legend()
    synthetic_note(fig, manifest(d))
    save(fig, [], d, "rank_collapse.png", dpi=110)


def plot_qk_specificity(d):
    rows = read_table(d, "qk_specificity.csv")
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.8))
    amps = sorted({r["amplitude"] for r in rows}, key=float, reverse=True)
    for amp in amps:
        for v, st in (("base", "o-"), ("perturbed", "s--")):
            rs = [r for r in rows if r["variant"] == v and r["amplitude"] == amp]
            ax[0].semilogy([int(r["layer"]) for r in rs], [_pos(r["alpha_dist_mean"]) for r in rs], st, ms=3,
                           label="%s, s = %.3g" % (v, float(amp)))
        rs = [r for r in rows if r["variant"] == "perturbed" and r["amplitude"] == amp]
        ax[1].semilogy([int(r["layer"]) for r in rs], [_pos(r["state_diff"]) for r in rs], "s-", ms=3,
                       label="state difference, s = %.3g" % float(amp))
        ax[1].semilogy([int(r["layer"]) for r in rs], [_pos(r["fluct_ratio"]) for r in rs], "^:", ms=3,
                       label="fluctuation |X - 1 x_1^T| / |X|, s = %.3g" % float(amp))
    ax[0].set_xlabel("layer l")
    ax[0].set_ylabel("mean_runs ||alpha^(l) - alpha*||_F")
    ax[0].set_title("Distance of the attention from the frozen kernel")
    ax[0].legend(fontsize=8)
    ax[1].set_xlabel("layer l")
    ax[1].set_ylabel("relative size (floor 1e-18)")
    ax[1].set_title("Late W_Q, W_K perturbation (Prop 8: O(s^2) without positions)")
    ax[1].legend(fontsize=7)
    synthetic_note(fig, manifest(d))
    save(fig, [], d, "qk_specificity.png", dpi=110)


KINDS = {
    "coupling-frozen-kernel": plot_frozen_kernel,
    "coupling-bounded-step": plot_bounded_step,
    "coupling-rank-collapse": plot_rank_collapse,
    "coupling-qk-specificity": plot_qk_specificity,
}
