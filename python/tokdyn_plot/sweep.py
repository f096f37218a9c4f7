"""The figures of `tokdyn sweep --plot y=SUMMARY,x=PARAM[,hue=PARAM]`: one figure per --plot, drawn
from the sweep's sweep.csv and manifest.json ("plots"). y against x, one line per value of `hue`
(colours) and of every other swept parameter (line styles); points that failed are left out and
counted in the title. Logarithmic axes when the values are positive and span two decades or more."""
import math
import os

from .common import manifest, num, plt, read_csv, save

LINESTYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]


def _numeric(values):
    try:
        [float(v) for v in values]
        return True
    except ValueError:
        return False


def _log_axis(values):
    v = [x for x in values if math.isfinite(x)]
    return bool(v) and min(v) > 0 and max(v) / min(v) >= 100


def _plot_one(d, rows, keys, spec, preset, fixed):
    y, x, hue = spec["y"], spec["x"], spec.get("hue")
    ok = [r for r in rows if r["status"] == "ok" and r.get(y, "") not in ("", None)]
    failed = len(rows) - len([r for r in rows if r["status"] == "ok"])
    others = [k for k in keys if k not in (x, hue)]
    x_numeric = _numeric([r[x] for r in ok])
    groups = {}
    for r in ok:
        groups.setdefault((r[hue] if hue else "", tuple(r[k] for k in others)), []).append(r)
    hues = sorted({g[0] for g in groups}, key=lambda v: (float(v) if _numeric([v]) else 0.0, v))
    rest = sorted({g[1] for g in groups})
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    xs_all, ys_all = [], []
    for (h, o), rs in sorted(groups.items(), key=lambda kv: (hues.index(kv[0][0]), rest.index(kv[0][1]))):
        if x_numeric:
            rs = sorted(rs, key=lambda r: float(r[x]))
            xs = [float(r[x]) for r in rs]
        else:
            xs = [r[x] for r in rs]
        ys = [num(r[y]) for r in rs]
        xs_all += xs if x_numeric else []
        ys_all += ys
        label = ", ".join(([f"{hue}={h}"] if hue else []) + [f"{k}={v}" for k, v in zip(others, o)])
        ax.plot(xs, ys, color=f"C{hues.index(h) % 10}", linestyle=LINESTYLES[rest.index(o) % len(LINESTYLES)],
                marker=MARKERS[rest.index(o) % len(MARKERS)], markersize=4, label=label or None)
    if x_numeric and _log_axis(xs_all):
        ax.set_xscale("log")
    if _log_axis(ys_all):
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    title = f"{preset}: {y} against {x}"
    if failed:
        title += f" ({failed} point{'s' if failed != 1 else ''} failed or missing, not shown)"
    if fixed:
        title += "\n" + ", ".join(f"{k}={v}" for k, v in sorted(fixed.items()))
    ax.set_title(title, fontsize=9)
    if len(groups) > 1:
        ax.legend(fontsize=7, ncol=1 if len(groups) <= 8 else 2)
    out = f"sweep_{y}_vs_{x}" + (f"_by_{hue}" if hue else "") + ".png"
    save(fig, [ax], d, out)
    return out


def plot_sweep(d):
    m = manifest(d)
    rows = read_csv(os.path.join(d, "sweep.csv"))
    keys = m["definition"]["keys"]
    for spec in m.get("plots", []):
        _plot_one(d, rows, keys, spec, m["definition"]["preset"], m["definition"].get("sets", {}))


KINDS = {"sweep": plot_sweep}
