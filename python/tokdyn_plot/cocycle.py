"""Figures of the coupling paper's cocycle presets (cocycle-spectra, coupling-euler,
coupling-looped), drawn from the CSV files of a results directory only."""
from .common import GREEN, VERMILLION, by, compact, num, plt, read_table, save, series


def _rows(d, name):
    return read_table(d, name, missing_ok=True)


def plot_spectra(d):
    """Running QR exponents, dichotomy intervals per Steklov window H (with the Lyapunov growth
    scales), bundle angle / ||P+|| / invariance residual, and the trade-off curves C(r-), C(r+)."""
    run = _rows(d, "running.csv")
    ly = _rows(d, "lyapunov.csv")
    dich = _rows(d, "dichotomy.csv")
    bun = _rows(d, "bundles.csv")
    trade = _rows(d, "tradeoff.csv")
    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    a = ax[0][0]
    for k, (i, rs) in enumerate(sorted(by(run, "i").items(), key=lambda kv: int(kv[0]))):
        a.plot([num(r["layer"]) for r in rs], [num(r["mu_running"]) for r in rs], **series(k, ms=4, lw=1.2),
               label=r"$\mu_{%d}$" % (int(i) + 1) if int(i) < 8 else None)
    a.axhline(0, color="k", lw=0.8)
    a.set_xlabel("layer $l$")
    a.set_ylabel(r"running exponent $\mu_i(l)$ (per layer)")
    a.set_title("finite-time QR (Lyapunov) exponents", fontsize=10)
    a.legend(fontsize=7)
    a = ax[0][1]
    Hs = sorted({int(r["H"]) for r in dich})
    first = True
    for j, H in enumerate(Hs):
        for r in dich:
            if int(r["H"]) == H:
                lo, hi = num(r["lower"]), num(r["upper"])
                a.plot([lo, hi], [j, j], color=series(0)["color"], lw=6, solid_capstyle="butt",
                       label="Bohl interval" if first else None)
                first = False
                a.plot([lo, hi], [j, j], "|", color=series(0)["color"], ms=14)
    a.scatter([num(r["gamma"]) for r in ly], [len(Hs)] * len(ly), color=VERMILLION, marker="x", s=40, zorder=3,
              label="Lyapunov growth scales (QR mean)")
    a.axvline(1.0, color="k", ls="--", lw=0.8, label="growth scale 1")
    a.set_yticks(list(range(len(Hs))) + [len(Hs)])
    a.set_yticklabels(["$H = %d$" % H for H in Hs] + ["QR mean"])
    a.set_ylim(-0.6, len(Hs) + 0.9)
    a.set_xlabel(r"growth scale $\gamma$ (per layer)")
    a.set_ylabel("Steklov window $H$ (layers)")
    a.set_title("dichotomy spectrum (Bohl intervals, window $H$)", fontsize=10)
    a.legend(fontsize=7, loc="upper center", ncol=3)
    a = ax[1][0]
    if bun:
        l = [num(r["l"]) for r in bun]
        a.semilogy(l, [num(r["p_plus_norm"]) for r in bun], **series(0, ms=4), label=r"$\|P_+(l)\|$")
        a.semilogy(l, [max(num(r["invariance_residual"]), 1e-17) for r in bun], **series(1, ms=4, lw=0.8),
                   label="invariance residual (floor $10^{-17}$)")
        b = a.twinx()
        b.plot(l, [num(r["angle"]) for r in bun], color=GREEN, ls="-.", lw=1.2, label="bundle angle (right axis)")
        b.set_ylim(0, 1.6)
        b.set_ylabel("angle between $V_\\parallel$ and $V_\\perp$ (rad)", color=GREEN)
        h1, l1 = a.get_legend_handles_labels()
        h2, l2 = b.get_legend_handles_labels()
        a.legend(h1 + h2, l1 + l2, fontsize=7, loc="center left")
    a.set_xlabel("layer $l$")
    a.set_ylabel("norm / residual")
    a.set_title("bundles and projectors", fontsize=10)
    a = ax[1][1]
    for k, (side, rs) in enumerate(by(trade, "side").items()):
        a.plot([num(r["r"]) for r in rs], [num(r["C"]) for r in rs], **series(k, ms=4, lw=2),
               label=r"$C(r_-)$" if side == "minus" else r"$C(r_+)$")
    if trade:
        top = max(num(r["C"]) for r in trade)
        a.set_ylim(0, min(top * 1.1, 50))
    a.axvline(1.0, color="k", ls="--", lw=0.8)
    a.set_xlabel("rate $r$ (growth scale per layer)")
    a.set_ylabel("dichotomy constant $C$")
    a.set_title("trade-off of the dichotomy constant", fontsize=10)
    if trade:
        a.legend(fontsize=8)
    compact(fig, ax, {ax[1][0]: "no bundles and projectors (bundles.csv is empty)",
                      ax[1][1]: "no dichotomy constant: 1 lies in the estimated spectrum, or no bundles"})
    save(fig, [ax[0][0], ax[0][1], ax[1][0], ax[1][1]], d, "cocycle_spectra.png")


def plot_euler(d):
    """Thm 4: per-layer deviation of the Euler step from the time-ordered exponential against the
    bound, the global Euler error (slope 1), the deviation at Delta = 1 against a; §2.4: ||Phi(l,0)||
    of the non-normal pair against prod rho and its growth scale sqrt(rho(B2 B1))^l (summary.csv)."""
    loc = _rows(d, "euler_local.csv")
    glo = _rows(d, "euler_global.csv")
    sca = _rows(d, "euler_scale.csv")
    nn = _rows(d, "nonnormal.csv")
    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    a = ax[0][0]
    D, dev, bnd = [], [], []
    for delta, rs in by(loc, "delta").items():
        D.append(num(delta))
        dev.append(max(num(r["deviation"]) for r in rs))
        bnd.append(num(rs[0]["bound"]))
    a.loglog(D, dev, "o-", label=r"max$_l\ \|\Phi_c(l+\Delta,l)-(I+\Delta A(l))\|$")
    a.loglog(D, bnd, "s--", label=r"bound $\omega_A(\Delta)\Delta+\frac{1}{2} a^2\Delta^2e^{a\Delta}$")
    a.set_xlabel(r"step $\Delta$ (layers)")
    a.set_ylabel("deviation (operator norm)")
    a.set_title("Thm 4: local Euler deviation", fontsize=10)
    a.legend(fontsize=7)
    a = ax[0][1]
    x = [num(r["delta"]) for r in glo]
    y = [num(r["error"]) for r in glo]
    a.loglog(x, y, "o-", label="global Euler error")
    a.set_ylabel("error at the end of the depth (norm)")
    if x:
        a.loglog(x, [y[-1] * xi / x[-1] for xi in x], "k:", label="slope 1")
    a.set_xlabel(r"step $\Delta$ (layers)")
    a.set_title("global Euler error over the depth", fontsize=10)
    a.legend(fontsize=8)
    a = ax[1][0]
    a.loglog([num(r["a"]) for r in sca], [num(r["deviation_max"]) for r in sca], "o-", label=r"deviation at $\Delta=1$")
    a.loglog([num(r["a"]) for r in sca], [num(r["bound_max"]) for r in sca], "s--", label="bound")
    a.set_xlabel(r"generator size $a=\sup_l\|A(l)\|$")
    a.set_ylabel(r"deviation at $\Delta = 1$ (operator norm)")
    a.set_title(r"Euler reading at $\Delta = 1$: quantitative only for $a \ll 1$", fontsize=10)
    a.legend(fontsize=8)
    a = ax[1][1]
    l = [num(r["l"]) for r in nn]
    a.semilogy(l, [num(r["phi_norm"]) for r in nn], label=r"$\|\Phi(l,0)\|$")
    a.semilogy(l, [num(r["prod_rho"]) for r in nn], "--", label=r"$\prod_r \rho(I+A(r)) = 0.5^l$")
    # The growth scale of the alternating pair, sqrt(rho(B2 B1)), from the scalar summaries.
    summary = {r["quantity"]: num(r["value"]) for r in _rows(d, "summary.csv")}
    g = summary.get("sqrt_rho_B2B1")
    if g is not None and g == g and l:
        a.semilogy(l, [g ** x for x in l], "k:", lw=0.8, label=r"$\sqrt{\rho(B_2B_1)}^{\,l}$")
    a.set_xlabel("layer $l$")
    a.set_ylabel("norm / spectral radius product")
    a.set_title("non-normal transient growth (alternating $B_1$, $B_2$)", fontsize=10)
    a.legend(fontsize=8)
    save(fig, [ax[0][0], ax[0][1], ax[1][0], ax[1][1]], d, "coupling_euler.png")


def plot_looped(d):
    """Looped LTI: distance to h* against loops with the bound rho^t, and ||G|| against rho."""
    lo = _rows(d, "looped.csv")
    gr = _rows(d, "green.csv")
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    a = ax[0]
    t = [num(r["t"]) for r in lo]
    a.semilogy(t, [num(r["dist"]) for r in lo], label=r"$\|h_t-h^*\|$")
    a.semilogy(t, [num(r["bound"]) for r in lo], "--", label=r"$\rho(\bar A)^t\|h_0-h^*\|$")
    a.set_xlabel("loop $t$")
    a.set_ylabel(r"distance to the fixed point $h^*$")
    a.set_title("looped LTI: global attraction", fontsize=10)
    a.legend(fontsize=8)
    a = ax[1]
    r = [num(x["rho"]) for x in gr]
    a.semilogy(r, [num(x["G_norm"]) for x in gr], "o", label=r"$\max_l\sum_s\|G(l,s+1)\|$ (computed)")
    a.semilogy(r, [num(x["G_window"]) for x in gr], "-", label=r"$(1-\rho^L)/(1-\rho)$ (window $L$)")
    a.semilogy(r, [num(x["G_infinite"]) for x in gr], ":", label=r"$1/(1-\rho)$")
    a.set_xlabel(r"spectral radius $\rho(\bar A)$")
    a.set_ylabel(r"Green operator norm $\|G\|$")
    a.set_title("Green operator norm at the dichotomy boundary", fontsize=10)
    a.legend(fontsize=8)
    save(fig, [ax[0], ax[1]], d, "coupling_looped.png")


KINDS = {"cocycle-spectra": plot_spectra, "coupling-euler": plot_euler, "coupling-looped": plot_looped}
