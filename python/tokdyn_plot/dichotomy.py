"""Figure of the preset coupling-dichotomy (coupling paper Thm 5, checks R10 and R11, flags F17,
F19), drawn from the written CSV files only: dichotomy.png with four panels
  (1) the reference trajectory of the random Pre-LN stack: |x*(l)|, |A(l)| and |A|_F |x*| (F17);
  (2) R11 per depth window: r_-, r_+^min, r_+^max (F11) and r_f against depth, with 1 marked;
  (3) R10(c): Steklov/Bohl estimate of the switching sequence's spectrum against H, [lo, hi] marked;
  (4) R10(d): the Green operator norm of gamma^-1 B (family G1) against gamma, windows L and 2L,
      with the spectrum {|1 + sigma_i|} marked: bounded in the resolvent, divergent at the spectrum."""
import os

from .common import BLUE, GREY, VERMILLION, by, manifest, num, plt, read_csv, save, series


def plot_coupling_dichotomy(d):
    man = manifest(d)
    notes = man.get("notes", {})
    fig, ax = plt.subplots(2, 2, figsize=(12, 8.5))
    ax = ax.ravel()

    ref = read_csv(os.path.join(d, "reference.csv"))
    l = [num(r["l"]) for r in ref]
    ax[0].semilogy(l, [num(r["norm_x"]) for r in ref], **series(0, ls="-", ms=4), label=r"$|x^*(l)|$")
    ax[0].semilogy(l, [num(r["norm_A"]) for r in ref], **series(1, ls="-", ms=4), label=r"$|A(l)|_2$")
    ax[0].semilogy(l, [num(r["norm_A_F_times_norm_x"]) for r in ref], **series(2, ls="-", ms=4), label=r"$|A(l)|_F\,|x^*(l)|$")
    ax[0].set_xlabel("layer $l$")
    ax[0].set_ylabel("norm")
    ax[0].set_title(r"(F17) Pre-LN reference: the stream grows, $|A| \sim 1/|x^*|$")
    ax[0].legend(fontsize=8)

    win = read_csv(os.path.join(d, "windows.csv"))
    mid = [(num(r["first"]) + num(r["last"])) / 2 for r in win]
    for key, style, lab in (("r_minus", "v-", r"$r_-$ (top decaying)"), ("r_plus_min", "^-", r"$r_+^{\min}$ (lowest growing)"),
                            ("r_plus_max", "s-.", r"$r_+^{\max}$"), ("r_f", "o--", r"$r_f$ (sectors $j \geq 2$)")):
        ax[1].plot(mid, [num(r[key]) for r in win], style, label=lab)
    ax[1].axhline(1.0, color="k", lw=0.8)
    ax[1].set_xlabel("depth window (centre layer)")
    ax[1].set_ylabel("growth scale")
    ax[1].set_title("(R11) window diagnostics: margins shrink with depth (F17)")
    ax[1].legend(fontsize=8)

    iv = [r for r in read_csv(os.path.join(d, "intervals.csv")) if r["part"] == "switching"]
    sw = notes.get("switching", {})
    for r in iv:
        H = num(r["H"])
        ax[2].plot([H, H], [num(r["lower"]), num(r["upper"])], color=BLUE, lw=4, solid_capstyle="butt",
                   label="Bohl interval" if r is iv[0] else None)
    if sw:
        ax[2].axhline(sw["lo"], color=VERMILLION, ls="--", lw=0.8, label="true spectrum $[lo, hi]$")
        ax[2].axhline(sw["hi"], color=VERMILLION, ls="--", lw=0.8)
        if sw.get("longest_run_of_both_levels"):
            ax[2].axvline(sw["longest_run_of_both_levels"], color=GREY, ls=":", label="longest run of both levels")
    ax[2].axhline(1.0, color="k", lw=0.8)
    ax[2].set_xscale("log")
    ax[2].set_xlabel("Steklov window $H$ (layers)")
    ax[2].set_ylabel("Bohl interval (growth scale per layer)")
    ax[2].set_title("(R10c) switching $a(l)$: 1 in the spectrum, not hyperbolic")
    ax[2].legend(fontsize=8)

    green = read_csv(os.path.join(d, "green.csv"))
    for k, (w, rows) in enumerate(sorted(by(green, "window").items(), key=lambda kv: int(kv[0]))):
        rows = sorted(rows, key=lambda r: num(r["gamma"]))
        g = [num(r["gamma"]) for r in rows]
        v = [num(r["green_norm"]) for r in rows]
        ax[3].semilogy(g, v, **series(k, ms=3), label="window $L = %s$" % w)
    sig = notes.get("G1", {}).get("sigma", [])
    for s in sig:
        ax[3].axvline(abs(1 + s), color=VERMILLION, ls=":", lw=1.0, label=r"spectrum $|1 + \sigma_i|$" if s == sig[0] else None)
    ax[3].axvline(1.0, color="k", lw=0.8)
    ax[3].set_xlabel(r"growth scale $\gamma$")
    ax[3].set_ylabel(r"$\max_l \sum_s |G(l, s+1)|$")
    ax[3].set_title(r"(R10d) Green norm of $\gamma^{-1} B$ (G1)")
    ax[3].legend(fontsize=8)

    failed = notes.get("checks_failed")
    if failed is not None:
        fig.suptitle("coupling-dichotomy: Thm 5 and (A4)/(A5) diagnostics — %s" %
                     ("all checks pass" if failed == 0 else "%d check(s) FAILED (checks.csv)" % failed))
    save(fig, ax, d, "dichotomy.png")


KINDS = {"coupling-dichotomy": plot_coupling_dichotomy}
