"""Figure of the preset coupling-e7 (coupling paper §6, experiment E7: dichotomy spectra and the
dichotomy constant C estimated from activation trajectories alone), drawn from the written CSV
files only: e7.png with six panels
  (1) the error of the top-k exponents against the ensemble size E, one line per noise level
      (log-log; an error of exactly 0 is drawn at 1e-17);
  (2) exact and estimated top-k exponents per QR column at the largest E, one marker per noise level;
  (3) the Bohl intervals (Steklov window H) of the top-k QR columns: exact and the estimate at the
      smallest noise and the largest E, growth scale 1 marked;
  (4) the same for all n directions of the full cocycle (dichotomy.csv), with the split at which the
      dichotomy and C are taken; C exact and estimated in the title;
  (5) the error of all n intervals against E (full-rank fits only) and, where both exist, the relative
      error of C;
  (6) the linear check: closed-form exponents log |1 + sigma_i| and the estimate."""

from .common import BLUE, VERMILLION, by, compact, manifest, num, plt, read_table, save, series

FLOOR = 1e-17  # errors of exactly 0 are drawn here (log axes)


def _pos(v):
    return v if (v == v and v > 0) else FLOOR


def _sizes_axis(a, sizes):
    a.set_xscale("log")
    a.set_xticks(sizes)
    a.set_xticklabels([str(int(s)) for s in sizes])
    a.minorticks_off()


def _intervals(a, rows, off, color, label):
    for j, r in enumerate(rows):
        i = num(r["index"]) + off
        a.plot([i, i], [num(r["lower"]), num(r["upper"])], color=color, lw=4, solid_capstyle="butt",
               label=label if j == 0 else None)


def plot_coupling_e7(d):
    man = manifest(d)
    notes = man.get("notes", {})
    params = man.get("params", {})
    err = read_table(d, "error.csv")
    spec = read_table(d, "spectra.csv")
    ivs = read_table(d, "intervals.csv")
    full = read_table(d, "dichotomy.csv", missing_ok=True)
    lin = read_table(d, "linear.csv", missing_ok=True)
    fig, ax = plt.subplots(2, 3, figsize=(17, 9.5))
    ax = ax.ravel()
    noises = sorted({num(r["noise"]) for r in err})
    sizes = sorted({num(r["ensemble"]) for r in err})
    colors = {s: series(i)["color"] for i, s in enumerate(noises)}
    marks = {s: series(i)["marker"] for i, s in enumerate(noises)}
    styles = {s: series(i)["ls"] for i, s in enumerate(noises)}
    E_max, s0 = (sizes[-1], noises[0]) if err else (None, None)
    groups = sorted(by(err, "noise").items(), key=lambda kv: num(kv[0]))

    # (1) top-k error against E
    for s, rows in groups:
        rows = sorted(rows, key=lambda r: num(r["ensemble"]))
        ax[0].plot([num(r["ensemble"]) for r in rows], [_pos(num(r["error"])) for r in rows], ls=styles[num(s)],
                   marker=marks[num(s)], ms=5, color=colors[num(s)], label="noise %g" % num(s))
    ax[0].set_yscale("log")
    _sizes_axis(ax[0], sizes)
    n = notes.get("n")
    if n:
        ax[0].axvline(n, color="0.4", ls=":", lw=0.9, label="$E = n = %d$" % n)
    ax[0].set_xlabel("ensemble size $E$")
    ax[0].set_ylabel(r"$\max_i |\hat\mu_i - \mu_i|$ over the top $k$ (per layer)")
    ax[0].set_title(r"(E7) top-%s exponent error against $E$ ($\epsilon = %g$)" % (params.get("k", "k"), params.get("amplitude", float("nan"))))
    ys = [num(r["error"]) for r in err if r["error"] != ""]
    if ys:  # headroom above the curves for the legend
        ax[0].set_ylim(top=max(ys) * 40)
    ax[0].legend(fontsize=8, loc="upper left", ncol=2)

    # (2) exponents at the largest E
    if spec:
        top = [r for r in spec if num(r["ensemble"]) == E_max]
        exact = {int(num(r["index"])): num(r["mu_exact"]) for r in top}
        idx = sorted(exact)
        ax[1].plot(idx, [exact[i] for i in idx], "s", ms=12, mfc="none", mec="k", label="exact (JVP)")
        for j, (s, rows) in enumerate(sorted(by(top, "noise").items(), key=lambda kv: num(kv[0]))):
            off = (j - (len(noises) - 1) / 2) * 0.08
            ax[1].plot([num(r["index"]) + off for r in rows], [num(r["mu_estimate"]) for r in rows], marks[num(s)], ms=5,
                       color=colors[num(s)], label="estimate, noise %g" % num(s))
        ax[1].axhline(0.0, color="k", lw=0.8)
        ax[1].set_xticks(idx)
    ax[1].set_xlabel("QR column $i$")
    ax[1].set_ylabel(r"exponent $\mu_i$ (per layer)")
    ax[1].set_title("exact and estimated exponents, $E = %s$" % (int(E_max) if E_max else "?"))
    ax[1].legend(fontsize=8)

    # (3) top-k Bohl intervals
    ex = [r for r in ivs if r["source"] == "exact"]
    est = [r for r in ivs if r["source"] == "estimate" and num(r["ensemble"]) == E_max and num(r["noise"]) == s0]
    _intervals(ax[2], ex, -0.1, "k", "exact")
    _intervals(ax[2], est, 0.1, BLUE, "estimate ($E = %s$, noise %g)" % (int(E_max) if E_max else "?", s0 if s0 is not None else 0))
    ax[2].axhline(1.0, color="k", lw=0.8, ls="--", label="growth scale 1")
    cols = sorted({int(num(r["index"])) for r in ex + est})
    if cols:
        ax[2].set_xticks(cols)
    ax[2].set_xlabel("QR column $i$")
    ax[2].set_ylabel("Bohl interval (growth scale per layer)")
    ax[2].set_title("top-$k$ Sacker-Sell (Bohl) intervals, $H = %s$" % notes.get("H", "?"))
    lo = [num(r["lower"]) for r in ex + est]
    if lo:  # room below the bars for the legend
        hi = max(num(r["upper"]) for r in ex + est)
        ax[2].set_ylim(bottom=min(lo) - 0.45 * (hi - min(lo)))
    ax[2].legend(fontsize=8, loc="lower right")

    # (4) all n directions, the split and C
    ed = notes.get("exact_dichotomy", {})
    split = params.get("split", 1.0)
    if full:
        fx = [r for r in full if r["source"] == "exact"]
        fe = [r for r in full if r["source"] == "estimate" and num(r["ensemble"]) == E_max and num(r["noise"]) == s0]
        _intervals(ax[3], fx, -0.15, "k", "exact (dense Jacobians)")
        _intervals(ax[3], fe, 0.15, BLUE, "estimate ($E = %d$, noise %g)" % (E_max, s0))
        ax[3].axhline(split, color=VERMILLION, lw=0.9, ls="--", label="split = %g" % split)
        Ce = next((num(r["C_estimate"]) for r in err if num(r["ensemble"]) == E_max and num(r["noise"]) == s0), float("nan"))
        Cx = ed.get("C")
        ctext = ("$C$ exact %.4g, estimate %.4g" % (Cx, Ce)) if Cx is not None else "no dichotomy at the split: no $C$"
        ax[3].set_title("all $n = %s$ directions: %s" % (n, ctext), fontsize=10)
        ax[3].legend(fontsize=8)
    ax[3].set_xlabel("QR column (full QR from the identity)")
    ax[3].set_ylabel("Bohl interval (growth scale per layer)")

    # (5) all-n interval error and C error against E
    drawn = False
    for s, rows in groups:
        rows = sorted(rows, key=lambda r: num(r["ensemble"]))
        pts = [(num(r["ensemble"]), num(r["error_full_intervals"])) for r in rows if r["error_full_intervals"] != ""]
        if pts:
            ax[4].plot([p[0] for p in pts], [_pos(p[1]) for p in pts], ls="-", marker=marks[num(s)], ms=5, color=colors[num(s)],
                       label="all-$n$ intervals, noise %g" % num(s))
            drawn = True
        cs = [(num(r["ensemble"]), num(r["C_error"])) for r in rows if r["C_error"] != ""]
        if cs:
            ax[4].plot([p[0] for p in cs], [_pos(p[1]) for p in cs], ls="--", marker=marks[num(s)], ms=5, color=colors[num(s)],
                       mfc="none", label="$C$, noise %g" % num(s))
            drawn = True
    if drawn:
        ax[4].set_yscale("log")
        ax[4].legend(fontsize=8)
    if sizes:
        _sizes_axis(ax[4], sizes)
    ax[4].set_xlabel("ensemble size $E$")
    ax[4].set_ylabel(r"$\max|\log \widehat{\rm end} - \log {\rm end}|$ (per layer); $|\hat C - C| / C$")
    ax[4].set_title("all $n$ directions: interval error (solid), $C$ error (dashed)")

    # (6) the linear check
    if lin:
        li = [num(r["index"]) for r in lin]
        ax[5].plot(li, [num(r["mu_closed_form"]) for r in lin], "s", ms=12, mfc="none", mec="k", label=r"$\log |1 + \sigma_i|$")
        ax[5].plot(li, [num(r["mu_estimate"]) for r in lin], "o", ms=5, color=BLUE, label="estimate (noise 0)")
        worst = max(abs(num(r["error"])) for r in lin)
        ln = notes.get("linear", {})
        ax[5].set_title("linear check (G1, $\\kappa(S) = %s$): max error %.2g\n$C$ estimate %.4g, $C$ of the generator $B$ %.4g"
                        % (params.get("linear_kappa", "?"), worst, ln.get("C") or float("nan"), ln.get("C_from_B") or float("nan")),
                        fontsize=10)
        ax[5].axhline(0.0, color="k", lw=0.8)
        ax[5].set_xticks(li)
        ax[5].legend(fontsize=8)
    ax[5].set_xlabel(r"QR column $i$ (eigenvectors by decreasing $|1 + \sigma_i|$)")
    ax[5].set_ylabel("exponent (per layer)")

    failed = notes.get("checks_failed")
    title = "coupling-e7 (model = %s, depth %s): Lyapunov / Sacker-Sell spectra and C from trajectories alone" % (
        params.get("model", "?"), params.get("depth", "?"))
    if failed is not None:
        title += " — %s" % ("all checks pass" if failed == 0 else "%d check(s) FAILED (checks.csv)" % failed)
    fig.suptitle(title, fontsize=11)
    compact(fig, ax.reshape(2, 3), {ax[3]: "all $n$ directions: no dense reference (%s)" % notes.get("dense_reference", ""),
                                    ax[4]: "the all-$n$ interval and $C$ errors: no full-rank fit or no dense reference",
                                    ax[5]: "the linear check: the largest $E$ is below its $n$"})
    save(fig, ax, d, "e7.png")


KINDS = {"coupling-e7": plot_coupling_e7}
