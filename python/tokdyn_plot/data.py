"""Figure of the preset coupling-data (coupling paper §5.3, Props 13-14; checks R22, R23, flags F13,
F14), drawn from the written CSV files only: data.png with four panels
  (1) R22(c) Monte Carlo: next-token risk gap R_predictor - R_full against the latent persistence q
      (symmetric chain), +-2 stderr; the gap closes at the i.i.d. point q = (S-1)/S;
  (2) the same gaps by exact enumeration on the tiny categorical model;
  (3) the profile risk R*(rho): flat under independence; under persistence decreasing as |rho| opens
      with a bounded read-in |W_r| <= c, a step at rho = 0 with a free read-in (F14);
  (4) R23: risk gap of each block summary against R_full per emission family (Pi_mean = 0 exactly;
      the mean of x loses in the latent-variance control)."""
import os

from .common import BLACK, BLUE, GREEN, GREY, ORANGE, PURPLE, SKY, VERMILLION, by, manifest, num, plt, read_csv, save

STYLE = {"local": (VERMILLION, "o", "local (within-block prefix)"), "stride": (ORANGE, "s", r"$\Pi_{\rm stride}$ (last token)"),
         "head": (PURPLE, "^", r"$\Pi_{\rm head}$ (first token)"), "prev_block": (GREEN, "D", "previous block only"),
         "mean_T": (BLUE, "x", r"$\Pi_{\rm mean}$ (block mean of $T$)"), "mean_x": (SKY, "v", "mean of $x$")}
HATCH = ["", "//", "..", "xx", "\\\\", "--"]
LS = {"local": "-", "stride": "--", "head": "-.", "prev_block": ":", "mean_T": "-", "mean_x": "--"}


def gap_panel(ax, rows, title, errors):
    for pred, rs in by(rows, "predictor").items():
        if pred == "full" or pred not in STYLE:
            continue
        c, m, lab = STYLE[pred]
        rs = sorted(rs, key=lambda r: num(r["q"]))
        q = [num(r["q"]) for r in rs]
        g = [num(r["gap"]) for r in rs]
        if errors:
            ax.errorbar(q, g, yerr=[2 * num(r["gap_stderr"]) for r in rs], color=c, marker=m, ms=4, ls=LS[pred], capsize=2, label=lab)
        else:
            ax.plot(q, g, color=c, marker=m, ms=4, ls=LS[pred], label=lab)
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("latent persistence $q$ (switch probability per block)")
    ax.set_ylabel(r"$R_{\rm predictor} - R_{\rm full}$ (nats / token)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)


def plot_coupling_data(d):
    notes = manifest(d).get("notes", {})
    cfg = manifest(d).get("params", {})
    fig, ax = plt.subplots(2, 2, figsize=(12, 9))
    ax = ax.ravel()

    risks = read_csv(os.path.join(d, "risks.csv"))
    mc = [r for r in risks if r["method"] == "monte_carlo"]
    ex = [r for r in risks if r["method"] == "exact"]
    em = mc[0]["emission"] if mc else "?"
    gap_panel(ax[0], mc, "(R22c) Monte Carlo, %s emission: the gap closes at the i.i.d. point" % em, True)
    qi = notes.get("i_i_d_point_q")
    if qi is not None:
        ax[0].axvline(qi, color=GREY, ls=":", label="i.i.d. latents")
        ax[0].legend(fontsize=7)
    gap_panel(ax[1], ex, "(R22c) exact enumeration, tiny categorical model (V = %s, P = %s, %s blocks)"
              % (cfg.get("exact_V", "?"), cfg.get("exact_block", "?"), cfg.get("exact_blocks", "?")), False)
    ax[1].axvline(0.5, color=GREY, ls=":")

    prof = read_csv(os.path.join(d, "profile.csv"))
    styles = {("independent", "free"): (GREY, "-", "o"), ("independent", "bounded"): (GREEN, "--", "x"),
              ("persistent", "free"): (VERMILLION, "-.", "s"), ("persistent", "bounded"): (BLUE, "-", "^")}
    pers_bayes = None
    for (setting, ri), (c, ls, m) in styles.items():
        rs = sorted([r for r in prof if r["setting"] == setting and r["read_in"] == ri], key=lambda r: num(r["rho"]))
        if not rs:
            continue
        lab = "%s ($q = %.3g$), %s read-in" % (setting, num(rs[0]["q"]),
                                                "free" if ri == "free" else r"$|W_r| \leq %s$" % cfg.get("readin_norm", "c"))
        ax[2].plot([num(r["rho"]) for r in rs], [num(r["risk"]) for r in rs], color=c, ls=ls, marker=m, ms=5, label=lab)
        if setting == "persistent":
            pers_bayes = (num(rs[0]["R_full"]), num(rs[0]["R_local"]))
    if pers_bayes:
        ax[2].axhline(pers_bayes[0], color=BLACK, lw=0.8, ls=":", label=r"persistent: Bayes $R_{\rm full}$")
    ax[2].set_xlabel(r"gate amplitude $\rho$")
    ax[2].set_ylabel(r"profile risk $R^*(\rho)$ (nats / token)")
    ax[2].set_title("(R22, F14) profile risk: flat if independent; bounded read-in opens gradually,\n"
                    r"free read-in: a step at 0 ($\rho$ confounded with $|W_r|$)", fontsize=10)
    ax[2].legend(fontsize=7)

    suff = read_csv(os.path.join(d, "sufficiency.csv"))
    fams = list(dict.fromkeys(r["family"] for r in suff))
    stats = ["mean_T", "mean_x", "stride", "head", "prev_block", "local"]
    width = 0.8 / len(stats)
    for j, st in enumerate(stats):
        xs, ys, es = [], [], []
        for i, f in enumerate(fams):
            for r in suff:
                if r["family"] == f and r["statistic"] == st:
                    xs.append(i + (j - len(stats) / 2 + 0.5) * width)
                    ys.append(num(r["gap"]))
                    es.append(2 * num(r["gap_stderr"]))
        if xs:
            c, _, lab = STYLE[st]
            if all(abs(v) <= 1e-12 for v in ys):  # a gap of exactly 0 draws no bar: a marker on the axis says it
                ax[3].errorbar(xs, ys, yerr=es, fmt="D", color=c, ms=5, capsize=2, label=lab + ": 0 exactly")
            else:
                ax[3].bar(xs, ys, width, yerr=es, color=c, hatch=HATCH[j % len(HATCH)], edgecolor="white", label=lab, capsize=2)
    ax[3].set_xticks(range(len(fams)))
    ax[3].set_xticklabels(fams, fontsize=8)
    ax[3].set_xlabel("emission family")
    ax[3].set_ylabel(r"$R_{\rm summary} - R_{\rm full}$ (nats / token), $\pm 2$ s.e.")
    ax[3].set_title("(R23) Prop 14: $\\Pi_{\\rm mean}$ of $T$ loses nothing (gap 0);\nthe mean of $x$ loses under a variance latent",
                    fontsize=10)
    ax[3].legend(fontsize=7)
    save(fig, ax, d, "data.png")


KINDS = {"coupling-data": plot_coupling_data}
