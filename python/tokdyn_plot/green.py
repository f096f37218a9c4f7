"""Figures of the presets coupling-green (Lemma 17, R17) and coupling-fast-slow (Thm 7, R14/R15/R24,
flag F7), drawn from the written CSV files only.
  coupling-green -> green.png:
    (1) the bounded solution u = G h along the window: |u(l)|, |P_+ u(l)|, |P_- u(l)| (interior shaded);
    (2) per layer: BVP residual and |u_BVP - u_explicit sum| (log scale, round-off level);
    (3) ||G|| against the window: lower (sign iteration) <= upper (kernel row sums) <= Lemma 17 bound.
  coupling-fast-slow -> fast_slow.png:
    (1) sup |P_+ du| and sup |P_- du| against eta for the fast, slow and skew modes (log-log), with
        Thm 7's O(eta^2) bound for the fast-mode P_+ change (F7: the measured change is round-off);
    (2) the profiles along the window at the largest eta;
    (3) the identification table (R24): |first-order change| of each row's observable."""
import math
import os

from .common import BLACK, BLUE, GREEN, ORANGE, VERMILLION, by, num, plt, read_csv, save, series, tex_label

FLOOR = 1e-18  # exact zeros drawn at the floor of a log axis


def _pos(v):
    return [max(x, FLOOR) if not math.isnan(x) else float("nan") for x in v]


def plot_coupling_green(d):
    rows = read_csv(os.path.join(d, "green.csv"))
    norms = read_csv(os.path.join(d, "norms.csv"))
    levels = by(rows, "level")
    fig, ax = plt.subplots(len(levels), 3, figsize=(15, 4.3 * len(levels)), squeeze=False)
    for i, (level, rs) in enumerate(levels.items()):
        l = [num(r["l"]) for r in rs]
        a = ax[i][0]
        a.plot(l, [num(r["norm_u"]) for r in rs], color=BLACK, ls="-", label="$|u(l)|$")
        a.plot(l, [num(r["norm_Pplus_u"]) for r in rs], color=VERMILLION, ls="--", label="$|P_+(l)\\,u(l)|$ (persistent)")
        a.plot(l, [num(r["norm_Pminus_u"]) for r in rs], color=BLUE, ls="-.", label="$|P_-(l)\\,u(l)|$ (decaying)")
        inner = [num(r["l"]) for r in rs if r["interior"] == "true"]
        if inner:
            a.axvspan(min(inner), max(inner), color="0.9", label="interior $[l_b, L - l_b]$")
        a.set_xlabel("layer $l$")
        a.set_ylabel("norm")
        a.set_title(f"{level}: bounded solution $u = G h$ (random $|h| \\leq 1$)")
        a.legend(fontsize=8)
        a = ax[i][1]
        a.semilogy(l, _pos([num(r["residual"]) for r in rs]), "o", ms=3, color=GREEN, label="$|u(l+1) - B(l)\\,u(l) - h(l)|$")
        a.semilogy(l, _pos([num(r["explicit_diff"]) for r in rs]), "^", ms=3, color=ORANGE,
                   label=r"$|u_{\rm BVP}(l) - u_{\rm sum}(l)|$ (Lemma 17 kernel)")
        a.axhline(1e-10, color=VERMILLION, ls="--", lw=0.8, label="R17 tolerance $10^{-10}$")
        a.set_xlabel("layer $l$")
        a.set_ylabel("residual / difference (floor $10^{-18}$)")
        a.set_title(f"{level}: BVP residual and explicit-sum agreement")
        a.legend(fontsize=8)
        a = ax[i][2]
        ns = [r for r in norms if r["level"] == level]
        w = [num(r["window"]) for r in ns]
        a.plot(w, [num(r["lower"]) for r in ns], "v-", color=BLUE, label=r"lower: sign iteration $\|G h\|$")
        a.plot(w, [num(r["upper"]) for r in ns], "^-.", color=VERMILLION, label=r"upper: $\max_l \sum_s |G(l,s+1)|$")
        a.plot(w, [num(r["bound"]) for r in ns], "s--", color=BLACK, label=r"Lemma 17: $C\,(1/m_- + 1/m_+)$")
        a.set_xlabel("window $L$ (layers)")
        a.set_ylabel(r"$\|G\|_\infty$")
        a.set_yscale("log")
        a.set_title(f"{level}: Green operator norm")
        a.legend(fontsize=8)
    save(fig, ax.ravel(), d, "green.png")


def plot_coupling_fast_slow(d):
    fs = by(read_csv(os.path.join(d, "fast_slow.csv")), "mode")
    prof = read_csv(os.path.join(d, "profile.csv"))
    ident = read_csv(os.path.join(d, "identification.csv"))
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.8))
    a = ax[0]
    style = {"fast": BLUE, "slow": VERMILLION, "skew": GREEN}
    for mode, c in style.items():
        rs = fs.get(mode, [])
        eta = [num(r["eta"]) for r in rs]
        a.loglog(eta, _pos([num(r["sup_Pplus_du"]) for r in rs]), "^-", color=c, label=mode + r": $\sup_l |P_+ \delta u|$")
        a.loglog(eta, _pos([num(r["sup_Pminus_du"]) for r in rs]), "v--", color=c, label=mode + r": $\sup_l |P_- \delta u|$")
    rs = fs.get("fast", [])
    eta = [num(r["eta"]) for r in rs]
    bnd = [num(r["paper_bound"]) for r in rs]
    a.loglog([e for e, b in zip(eta, bnd) if math.isfinite(b)], [b for b in bnd if math.isfinite(b)], ":", color="k", lw=1.5,
             label=r"Thm 7 bound on the fast $P_+$ change, $O(\eta^2)$")
    a.set_xlabel(r"perturbation size $\eta$")
    a.set_ylabel(r"$\sup_l$ |change| (floor $10^{-18}$)")
    a.set_title("R15: fast mode: $P_+$ change = 0 exactly (F7)\nslow mode: $P_-$ change = 0 exactly", fontsize=10)
    a.legend(fontsize=7)
    a = ax[1]
    l = [num(r["l"]) for r in prof]
    a.semilogy(l, _pos([num(r["norm_ustar"]) for r in prof]), color=BLACK, lw=1.6, label=r"$|u^*(l)|$")
    for k, (mode, c) in enumerate(style.items()):
        mk = series(k)["marker"]
        a.semilogy(l, _pos([num(r[f"{mode}_Pplus_du"]) for r in prof]), color=c, marker=mk, ms=4, label=mode + r": $|P_+ \delta u(l)|$")
        a.semilogy(l, _pos([num(r[f"{mode}_Pminus_du"]) for r in prof]), color=c, ls="--", marker=mk, mfc="none", ms=4,
                   label=mode + r": $|P_- \delta u(l)|$")
    a.set_xlabel("layer $l$")
    a.set_ylabel("norm (floor $10^{-18}$)")
    a.set_title(r"profiles at the largest $\eta$")
    a.legend(fontsize=7)
    a = ax[2]
    labels = [tex_label(r['row']) + ': ' + tex_label(r['observable']) for r in ident]
    vals = [max(abs(num(r["first_order_change"])), FLOOR) for r in ident]
    cols = [VERMILLION if r["visible"] == "true" else "0.6" for r in ident]
    y = list(range(len(ident)))
    a.barh(y, vals, color=cols, left=FLOOR)
    a.set_xscale("log")
    a.set_yticks(y)
    a.set_yticklabels(labels, fontsize=7)
    a.invert_yaxis()
    a.set_xlabel("|first-order change| (grey: invisible, exactly 0)")
    a.set_ylabel("row: observable")
    a.set_title("R24 identification table (§4.2.1)")
    save(fig, ax, d, "fast_slow.png")


KINDS = {"coupling-green": plot_coupling_green, "coupling-fast-slow": plot_coupling_fast_slow}
