"""Figures of the coupling paper's cocycle presets (cocycle-spectra, coupling-euler,
coupling-looped), drawn from the CSV files of a results directory only."""
from .common import by, num, plt, read_table, save


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
    for i, rs in by(run, "i").items():
        a.plot([num(r["layer"]) for r in rs], [num(r["mu_running"]) for r in rs], lw=1, label="i = %s" % i if int(i) < 8 else None)
    a.axhline(0, color="k", lw=0.8)
    a.set_xlabel("layer l")
    a.set_ylabel(r"running exponent $\mu_i(l)$ (log growth scale)")
    a.set_title("finite-time QR (Lyapunov) exponents")
    a.legend(fontsize=7)
    a = ax[0][1]
    Hs = sorted({int(r["H"]) for r in dich})
    for j, H in enumerate(Hs):
        for r in dich:
            if int(r["H"]) == H:
                lo, hi = num(r["lower"]), num(r["upper"])
                a.plot([lo, hi], [j, j], color="C0", lw=6, solid_capstyle="butt")
                a.plot([lo, hi], [j, j], "|", color="C0", ms=14)
    a.scatter([num(r["gamma"]) for r in ly], [len(Hs)] * len(ly), color="C3", marker="x", zorder=3, label="Lyapunov growth scales")
    a.axvline(1.0, color="k", ls="--", lw=0.8, label="growth scale 1")
    a.set_yticks(list(range(len(Hs))) + [len(Hs)])
    a.set_yticklabels(["H = %d" % H for H in Hs] + ["QR mean"])
    a.set_xlabel(r"growth scale $\gamma$")
    a.set_title("dichotomy spectrum (Bohl intervals, window H)")
    a.legend(fontsize=7)
    a = ax[1][0]
    if bun:
        l = [num(r["l"]) for r in bun]
        a.semilogy(l, [num(r["p_plus_norm"]) for r in bun], label=r"$\|P_+(l)\|$")
        a.semilogy(l, [max(num(r["invariance_residual"]), 1e-17) for r in bun], label="invariance residual", lw=0.8)
        b = a.twinx()
        b.plot(l, [num(r["angle"]) for r in bun], color="C2", lw=1, label="bundle angle (rad)")
        b.set_ylim(0, 1.6)
        b.ticklabel_format(useOffset=False, axis="y")
        b.set_ylabel("angle between $V_\\parallel$ and $V_\\perp$ (rad)", color="C2")
        a.legend(fontsize=7, loc="center left")
    a.set_xlabel("layer l")
    a.set_title("bundles and projectors")
    a = ax[1][1]
    for side, rs in by(trade, "side").items():
        a.plot([num(r["r"]) for r in rs], [num(r["C"]) for r in rs], lw=2, label=r"$C(r_-)$" if side == "minus" else r"$C(r_+)$")
    if trade:
        top = max(num(r["C"]) for r in trade)
        a.set_ylim(0, min(top * 1.1, 50))
    a.axvline(1.0, color="k", ls="--", lw=0.8)
    a.set_xlabel("rate r")
    a.set_ylabel("dichotomy constant C")
    a.set_title("trade-off of the dichotomy constant")
    if trade:
        a.legend(fontsize=8)
    else:
        a.text(0.5, 0.5, "no dichotomy constant:\n1 lies in the estimated spectrum\n(or no bundles)", ha="center", va="center",
               transform=a.transAxes)
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
    a.set_xlabel(r"$\Delta$")
    a.set_title("Thm 4: local Euler deviation")
    a.legend(fontsize=7)
    a = ax[0][1]
    x = [num(r["delta"]) for r in glo]
    y = [num(r["error"]) for r in glo]
    a.loglog(x, y, "o-", label="global Euler error")
    if x:
        a.loglog(x, [y[-1] * xi / x[-1] for xi in x], "k:", label="slope 1")
    a.set_xlabel(r"$\Delta$")
    a.set_title("global Euler error over the depth")
    a.legend(fontsize=8)
    a = ax[1][0]
    a.loglog([num(r["a"]) for r in sca], [num(r["deviation_max"]) for r in sca], "o-", label=r"deviation at $\Delta=1$")
    a.loglog([num(r["a"]) for r in sca], [num(r["bound_max"]) for r in sca], "s--", label="bound")
    a.set_xlabel(r"$a=\sup\|A\|$")
    a.set_title(r"Euler reading at $\Delta = 1$: quantitative only for $a \ll 1$")
    a.legend(fontsize=8)
    a = ax[1][1]
    l = [num(r["l"]) for r in nn]
    a.semilogy(l, [num(r["phi_norm"]) for r in nn], label=r"$\|\Phi(l,0)\|$")
    a.semilogy(l, [num(r["prod_rho"]) for r in nn], label=r"$\prod_r \rho(I+A(r)) = 0.5^l$")
    # The growth scale of the alternating pair, sqrt(rho(B2 B1)), from the scalar summaries.
    summary = {r["quantity"]: num(r["value"]) for r in _rows(d, "summary.csv")}
    g = summary.get("sqrt_rho_B2B1")
    if g is not None and g == g and l:
        a.semilogy(l, [g ** x for x in l], "k:", lw=0.8, label=r"$\sqrt{\rho(B_2B_1)}^{\,l}$")
    a.set_xlabel("layer l")
    a.set_title("non-normal transient growth (alternating B1, B2)")
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
    a.set_xlabel("loop t")
    a.set_title("looped LTI: global attraction")
    a.legend(fontsize=8)
    a = ax[1]
    r = [num(x["rho"]) for x in gr]
    a.semilogy(r, [num(x["G_norm"]) for x in gr], "o", label=r"$\max_l\sum_s\|G(l,s+1)\|$ (computed)")
    a.semilogy(r, [num(x["G_window"]) for x in gr], "-", label=r"$(1-\rho^L)/(1-\rho)$ (window L)")
    a.semilogy(r, [num(x["G_infinite"]) for x in gr], ":", label=r"$1/(1-\rho)$")
    a.set_xlabel(r"$\rho(\bar A)$")
    a.set_ylabel(r"$\|G\|$")
    a.set_title("Green operator norm at the dichotomy boundary")
    a.legend(fontsize=8)
    save(fig, [ax[0], ax[1]], d, "coupling_looped.png")


KINDS = {"cocycle-spectra": plot_spectra, "coupling-euler": plot_euler, "coupling-looped": plot_looped}
