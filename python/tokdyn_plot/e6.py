"""coupling-e6 (coupling paper (A6), E6): e6.png. Left: the mean slow fraction of the top-k
curvature eigenvectors' generator perturbations over training steps, against the random-direction
baseline (bars: the sample standard deviation), and dotted the slow share of the four blocks' sum;
steps without a usable dichotomy are marked on the axis.
Middle: the same for the fast-range fraction (P_- dA, the paper's fast mode). Right: the top-k
curvature eigenvalues per step (and the random directions' Rayleigh quotients)."""
import math

from .common import by, manifest, num, plt, read_table, save, synthetic_note


def plot_e6(d):
    frac = read_table(d, "fractions.csv")
    eig = read_table(d, "eigen.csv")
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.6))
    steps = [int(r["step"]) for r in frac]
    for a, (top, rnd, sdt, sdr, title) in zip(ax[:2], [
            ("slow_top_mean", "slow_random_mean", "slow_top_sd", "slow_random_sd",
             r"slow fraction $\|P_+\,\delta A\,P_+\|^2 / \|\delta A\|^2$"),
            ("fast_range_top_mean", "fast_range_random_mean", None, None,
             r"fast-range fraction $\|P_-\,\delta A\|^2 / \|\delta A\|^2$")]):
        yt = [num(r[top]) for r in frac]
        yr = [num(r[rnd]) for r in frac]
        et = [num(r[sdt]) for r in frac] if sdt else None
        er = [num(r[sdr]) for r in frac] if sdr else None
        if any(not math.isnan(y) for y in yt + yr):
            a.errorbar(steps, yt, yerr=et, marker="o", color="C3", capsize=3, label="top-k curvature eigenvectors")
            a.errorbar(steps, yr, yerr=er, marker="s", color="C0", capsize=3, ls="--", label="random directions")
            if top == "slow_top_mean":  # the shares of the four blocks' sum (in [0, 1] for oblique projectors too)
                a.plot(steps, [num(r["slow_share_top_mean"]) for r in frac], ":", color="C3", label="top-k: slow share")
                a.plot(steps, [num(r["slow_share_random_mean"]) for r in frac], ":", color="C0", label="random: slow share")
        else:
            a.text(0.5, 0.5, "no step has a dichotomy (fractions.csv: why)", ha="center", va="center", transform=a.transAxes)
        und = [s for s, r in zip(steps, frac) if r["dichotomy"] != "found"]
        if und:
            a.plot(und, [0.0] * len(und), "kx", ms=9, label="no dichotomy (undecided)")
        a.set_xlabel("training step")
        a.set_ylabel("mean fraction over directions")
        a.set_title(title, fontsize=10)
        a.set_ylim(bottom=0)
        a.legend(fontsize=8)
    for direction, rows in by(eig, "direction").items():
        xs = [int(r["step"]) for r in rows]
        ys = [num(r["curvature"]) for r in rows]
        ax[2].scatter(xs, ys, s=18, marker="o" if direction == "top" else "x",
                      color="C3" if direction == "top" else "C0",
                      label="top-k eigenvalues" if direction == "top" else r"random $v^\top H v$")
    ys = [num(r["curvature"]) for r in eig if not math.isnan(num(r["curvature"]))]
    if ys and min(ys) > 0:
        ax[2].set_yscale("log")
    ax[2].set_xlabel("training step")
    ax[2].set_ylabel("curvature (eigenvalue / Rayleigh quotient)")
    ax[2].set_title("curvature spectrum per step", fontsize=10)
    ax[2].legend(fontsize=8)
    synthetic_note(fig, manifest(d))
    save(fig, ax, d, "e6.png")


KINDS = {"coupling-e6": plot_e6}
