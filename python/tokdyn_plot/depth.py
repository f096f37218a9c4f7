"""Figure of the preset depth-spectra (coupling paper eq. (10): Lyapunov exponents of a model's
depth map), drawn from the written files only.

plot_depth_spectra(dir): depth_spectra.png, two panels:
  left:  the running finite-time exponents mu_i(l) (running.csv, mu_running) against depth l,
         one line per exponent i, with the burn-in shaded;
  right: the final spectrum mu_i (lyapunov.csv) against i, with mu = 0 (growth scale 1) marked."""
import json
import math
import os

from .common import LINESTYLES, MARKERS, VERMILLION, manifest, plt, read_table, save


def _title(d):
    try:
        with open(os.path.join(d, "manifest.json")) as f:
            m = json.load(f)
        c = m.get("config", m.get("params", {}))
        model = c.get("model", "?")
        return "depth-spectra, model=%s: top-%s exponents, depth %s, burn-in %s, T = %s" % (
            model, c.get("k", "?"), c.get("depth", "?"), c.get("burn_in", "?"), c.get("tokens", "?"))
    except (OSError, ValueError, AttributeError):
        return "depth-spectra"


def plot_depth_spectra(d):
    ly = read_table(d, "lyapunov.csv")
    gr = read_table(d, "running.csv")
    k = len(ly)
    series = {}
    burn = 0
    for r in gr:
        layer, i = int(r["layer"]), int(r["i"])
        if r["mu_running"] == "":
            burn = max(burn, layer)
            continue
        series.setdefault(i, ([], []))
        series[i][0].append(layer)
        series[i][1].append(float(r["mu_running"]))
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [1.6, 1]})
    cmap = plt.get_cmap("viridis")
    for i in sorted(series):
        x, y = series[i]
        y = [v if math.isfinite(v) else float("nan") for v in y]
        a.plot(x, y, color=cmap(i / max(1, k - 1)), lw=1.2, ls=LINESTYLES[i % len(LINESTYLES)],
               marker=MARKERS[i % len(MARKERS)], ms=3.5, label=r"$\mu_{%d}$" % (i + 1) if k <= 12 else None)
    if burn > 0:
        a.axvspan(0, burn, color="0.9", label="burn-in")
    a.axhline(0.0, color="k", lw=0.6, ls=":")
    a.set_xlabel("depth $l$ (layer)")
    a.set_ylabel(r"running exponent $\mu_i(l) = \frac{1}{l-l_0}\sum \log R_{ii}$")
    a.set_title("finite-time Lyapunov exponents against depth", fontsize=10)
    a.legend(fontsize=7, ncol=2 if k > 6 else 1, loc="best")
    # The spectrum sorted (mu_1 >= mu_2 >= ...): the QR columns' exponents need not come out ordered,
    # and a line joins them only in that order. -inf (a rank-deficient direction) sorts last.
    mu = sorted((float(r["mu"]) for r in ly), key=lambda m: -m if not math.isnan(m) else math.inf)
    idx = list(range(1, len(mu) + 1))
    fin = [(i, m) for i, m in zip(idx, mu) if math.isfinite(m)]
    b.plot([i for i, _ in fin], [m for _, m in fin], "o-", color=VERMILLION, ms=5, label=r"$\mu_i$, sorted")
    for i, m in zip(idx, mu):
        if not math.isfinite(m):
            b.annotate(r"$-\infty$", (i, min((m2 for _, m2 in fin), default=0.0)), ha="center", fontsize=8)
    if len(fin) <= 16:
        b.set_xticks(idx)
    b.axhline(0.0, color="k", lw=0.6, ls=":", label=r"$\mu = 0$ ($\gamma = 1$)")
    b.set_xlabel("index $i$ (largest first)")
    b.set_ylabel(r"exponent $\mu_i$ per layer ($\gamma_i = e^{\mu_i}$)")
    b.set_title("Lyapunov spectrum of the depth map", fontsize=10)
    b.legend(fontsize=8)
    fig.suptitle(_title(d), fontsize=10)
    p = manifest(d).get("params", {})
    keys = [k for k in ("model", "checkpoint", "size", "model_seed", "n", "m", "d", "tokens", "k", "depth", "burn_in", "seed",
                        "tangent_seed") if p.get(k) not in (None, "", [])]
    save(fig, [a, b], d, "depth_spectra.png", dpi=120, keys=keys)


KINDS = {"depth-spectra": plot_depth_spectra}
