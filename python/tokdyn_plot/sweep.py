"""The figures of `tokdyn sweep --plot y=SUMMARY,x=PARAM[,hue=PARAM]`: one figure per --plot, drawn
from the sweep's sweep.csv and manifest.json ("plots").

y against x, one series per value of `hue` (colours) and of every other swept parameter (line
styles), except the seeds: a swept parameter whose name holds "seed" is a repetition, so the points
that share x over the seeds are summarised as their mean (the line) and a band (mean ± 1 standard
deviation with 3 or more points, min–max with 2), which the legend states. Series that coincide stay
apart: every series has its own marker shape and size (open markers, the first largest) and line
style. Points that failed are left out and counted in the title. Logarithmic axes when the values
are positive and span two decades or more. When the sweep's manifest carries the preset's schema
(schema.outputs.summaries / schema.params: meaning, unit, help) the axes say what the names mean."""
import math
import os

import numpy as np

from .common import OKABE_ITO, LINESTYLES, MARKERS, footer, manifest, num, plt, read_csv, save, tex_label
from matplotlib.patches import Patch


def _numeric(values):
    try:
        [float(v) for v in values]
        return True
    except ValueError:
        return False


def _log_axis(values):
    v = [x for x in values if math.isfinite(x)]
    return bool(v) and min(v) > 0 and max(v) / min(v) >= 100


def _schema(m):
    """{name: (meaning, unit)} of the summaries and {key: (help, unit)} of the parameters, from the
    preset's schema when the sweep recorded it."""
    sch = m.get("schema") or {}
    outs = sch.get("outputs", {}) if isinstance(sch, dict) else {}
    summ = {s.get("name"): (s.get("meaning", ""), s.get("unit", "")) for s in outs.get("summaries", []) if isinstance(s, dict)}
    pars = {p.get("key"): (p.get("help", ""), p.get("unit", "")) for p in sch.get("params", []) if isinstance(p, dict)}
    return summ, pars


def _name(s):
    """A summary's or parameter's name: a Greek name as its symbol, anything else as code."""
    t = tex_label(s)
    if t != s and "$" in t and "_" not in s:
        return t
    return r"$\mathtt{%s}$" % s.replace("_", r"\_")


def _axis_label(name, info):
    meaning, unit = info if info else ("", "")
    lab = _name(name)
    if unit:
        lab += " (%s)" % unit
    return lab, meaning


def _value(k, v):
    t = tex_label("%s=%s" % (k, v))
    return t if "$" in t else "%s = %s" % (k, v)


def _plot_one(d, m, rows, keys, spec, preset, fixed):
    y, x, hue = spec["y"], spec["x"], spec.get("hue")
    summ, pars = _schema(m)
    ok = [r for r in rows if r["status"] == "ok" and r.get(y, "") not in ("", None)]
    failed = len(rows) - len([r for r in rows if r["status"] == "ok"])
    rest = [k for k in keys if k not in (x, hue)]
    seeds = [k for k in rest if "seed" in k]
    others = [k for k in rest if k not in seeds]
    x_numeric = _numeric([r[x] for r in ok])
    groups = {}
    for r in ok:
        groups.setdefault((r[hue] if hue else "", tuple(r[k] for k in others)), []).append(r)
    hues = sorted({g[0] for g in groups}, key=lambda v: (float(v) if _numeric([v]) else 0.0, v))
    rests = sorted({g[1] for g in groups}, key=lambda t: tuple((float(v) if _numeric([v]) else 0.0, v) for v in t))
    cats = [] if x_numeric else list(dict.fromkeys(r[x] for r in ok))
    order = sorted(groups, key=lambda g: (hues.index(g[0]), rests.index(g[1])))
    fig, ax = plt.subplots(figsize=(6.6, 4.6))
    xs_all, ys_all, band_kind = [], [], set()
    for j, g in enumerate(order):
        h, o = g
        at = {}
        for r in groups[g]:
            at.setdefault(float(r[x]) if x_numeric else cats.index(r[x]), []).append(num(r[y]))
        xv = sorted(at)
        vals = [np.array([v for v in at[k] if math.isfinite(v)]) for k in xv]
        mean = np.array([v.mean() if v.size else np.nan for v in vals])
        ci = hues.index(h) if hue else j
        color = OKABE_ITO[ci % len(OKABE_ITO)]
        ls = LINESTYLES[j % len(LINESTYLES)]
        label = ", ".join(([_value(hue, h)] if hue else []) + [_value(k, v) for k, v in zip(others, o)])
        if not label and len(order) == 1 and max(len(v) for v in vals) > 1:
            label = "mean over %s" % (", ".join(seeds) or "repeats")
        ax.plot(xv, mean, color=color, ls=ls, lw=1.4, marker=MARKERS[j % len(MARKERS)], ms=max(3.5, 10.0 - 1.6 * j),
                mfc="none", mew=1.4, zorder=3 + 0.01 * j, label=label or None)
        many = [v.size for v in vals]
        if max(many) > 1:
            lo = np.array([(v.mean() - v.std(ddof=1)) if v.size >= 3 else (v.min() if v.size else np.nan) for v in vals])
            hi = np.array([(v.mean() + v.std(ddof=1)) if v.size >= 3 else (v.max() if v.size else np.nan) for v in vals])
            ax.fill_between(xv, lo, hi, color=color, alpha=0.15, lw=0, zorder=1)
            band_kind |= {"std" if v.size >= 3 else "range" for v in vals if v.size > 1}
            ys_all += [v for v in list(lo) + list(hi) if math.isfinite(v)]
        xs_all += xv if x_numeric else []
        ys_all += [v for v in mean if math.isfinite(v)]
    if x_numeric and _log_axis(xs_all):
        ax.set_xscale("log")
    distinct = sorted(set(xs_all))
    if x_numeric and 1 < len(distinct) <= 8:  # the swept values themselves as ticks
        ax.set_xticks(distinct, ["%g" % v for v in distinct])
        ax.minorticks_off()
    if not x_numeric:
        ax.set_xticks(range(len(cats)), cats)
        ax.set_xlim(-0.5, len(cats) - 0.5)
    if _log_axis(ys_all):
        ax.set_yscale("log")
    xl, x_meaning = _axis_label(x, pars.get(x))
    yl, y_meaning = _axis_label(y, summ.get(y))
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    title = "%s: %s against %s" % (preset, _name(y), _name(x))
    if failed:
        title += " (%d point%s failed or missing, not shown)" % (failed, "s" if failed != 1 else "")
    ax.set_title(title, fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    if band_kind:
        what = {"std": "mean ± 1 std", "range": "min–max"}
        n_per = sorted({len(v) for g in groups.values() for v in _by_x(g, x, x_numeric, cats).values()})
        handles.append(Patch(color="0.6", alpha=0.35))
        labels.append("band: %s over %s (%s points per x)" % (
            " or ".join(what[k] for k in sorted(band_kind, reverse=True)), ", ".join(seeds) or "repeats",
            "–".join(str(k) for k in (n_per[0], n_per[-1])) if n_per[0] != n_per[-1] else n_per[0]))
    if len(handles) > 1 or band_kind:
        ax.legend(handles, labels, fontsize=7, ncol=1 if len(handles) <= 8 else 2)
    notes = []
    if fixed:
        notes.append("fixed: " + ", ".join("%s=%s" % (k, v) for k, v in sorted(fixed.items())))
    axes_txt = ["%s=%s" % (a.get("key"), a.get("spec")) for a in m.get("definition", {}).get("axes", [])]
    if axes_txt:
        notes.append("swept: " + "; ".join(axes_txt))
    head = "tokdyn %s sweep of %s (%d of %d points ok)" % (m.get("version", ""), preset, len(ok), len(rows))
    footer(fig, head + (": " + " · ".join(notes) if notes else ""))
    for name, meaning in ((y, y_meaning), (x, x_meaning)):
        if meaning:
            footer(fig, "%s: %s" % (name, meaning))
    fig.tokdyn_run_footer = True  # the sweep's own footer above: no run manifest here
    out = f"sweep_{y}_vs_{x}" + (f"_by_{hue}" if hue else "") + ".png"
    save(fig, [ax], d, out)
    return out


def _by_x(rows, x, x_numeric, cats):
    out = {}
    for r in rows:
        out.setdefault(float(r[x]) if x_numeric else cats.index(r[x]), []).append(r)
    return out


def plot_sweep(d):
    m = manifest(d)
    rows = read_csv(os.path.join(d, "sweep.csv"))
    keys = m["definition"]["keys"]
    for spec in m.get("plots", []):
        _plot_one(d, m, rows, keys, spec, m["definition"]["preset"], m["definition"].get("sets", {}))


KINDS = {"sweep": plot_sweep}
