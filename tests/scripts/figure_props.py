#!/usr/bin/python3
"""Properties of the figures python/tokdyn_plot draws (issue 38 §3: figures fit for a paper).

    figure_props.py TOKDYN_BIN OUTDIR [--keep]

Runs a handful of fast presets (tokdyn run at small settings, figures drawn by tokdyn), a small
sweep with --plot, and a few more presets at their smoke settings without figures (coverage of the
other figure modules) into OUTDIR, then opens every PNG's figure again by re-drawing it with the
package in this process (tokdyn_plot.draw with a save hook, tokdyn_plot.common.add_save_hook) and
checks on each:

  * every panel that holds data has an x label and a y label (a panel stacked under a shared x
    axis may take its x label from the panel that shows the tick labels; a colour bar is no panel);
  * no panel without data (no empty or text-only axes);
  * every text drawn (titles, labels, tick labels, legends, annotations, footer) lies inside the
    figure canvas (Text.get_window_extent with fig.canvas.get_renderer());
  * a legend only with handles that draw something, each for an artist that shows at least one
    finite point inside its panel (style-only proxies with no data are allowed);
  * no ASCII mathematics in titles, axis labels and legends (an underscore or a caret outside
    $...$, a Greek letter spelled out);
  * every PNG tokdyn drew in a folder is a figure the package draws, and the other way round; a
    footer with the run's parameters on every figure;
and that TOKDYN_FIGURE_FORMATS=png,svg,pdf writes the three files with the same base name (in
process and through python/plot.py as tokdyn runs it), and TOKDYN_FIGURE_DPI sets the PNG's size.
Exit status 0 when every property holds, 1 otherwise (the problems listed)."""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
PYTHON_DIR = os.path.join(SOURCE, "python")

# (folder, preset, settings, smoke): each a few seconds or less at these sizes; together they reach
# every figure module whose data a run makes quickly (not the PyTorch ones, coupling-e1 and -e6) and
# the figures of issue 38 §3 item 4. The first ones tokdyn runs with its figures (the PNGs the package
# then draws again here must be the same set); smoke: a run at the preset's own smoke settings
# (`tokdyn show --json`) without figures, whose figures only this process draws (for coverage, and
# to spare a Python start per folder).
RUNS = [
    ("rope-fig1a", "rope-fig1a", {}, False),
    ("rope-fig3b", "rope-fig3b", {}, False),
    ("rope-fig3c", "rope-fig3c", {}, False),
    ("rope-fig4c", "rope-fig4c", {}, False),
    ("rope-flow", "rope-flow", {"n": "6", "runs": "3", "t_end": "4", "outputs": "40"}, False),
    ("ssm-random-silu", "ssm-random-silu", {"runs": "3", "depth": "30", "tokens": "6", "n": "16", "m": "4"}, False),
    ("ssm-theorem-pd", "ssm-theorem-pd", {"runs": "4", "doa_runs": "8", "t_end": "4", "ani2_d": "25,100", "ani2_k": "11,30"}, False),
    ("mamba2-fig3", "mamba2-fig3", {"size": "tiny", "runs": "2", "depth": "12", "tokens": "4"}, False),
    ("cocycle-spectra", "cocycle-spectra", {"depth": "120"}, False),
    ("coupling-all", "coupling-all", {}, True),  # coupling-euler and coupling-looped inside, and the summary
    ("coupling-data", "coupling-data", {}, True),
    ("coupling-dichotomy", "coupling-dichotomy", {}, True),
    ("coupling-green", "coupling-green", {}, True),
    ("coupling-trajectory", "coupling-trajectory", {}, True),
    ("coupling-frozen-kernel", "coupling-frozen-kernel", {}, True),
    ("coupling-thm9", "coupling-thm9", {}, True),
    ("coupling-e7", "coupling-e7", {}, True),
    ("depth-spectra", "depth-spectra", {}, True),
    ("transformer-clustering", "transformer-clustering", {}, True),
]
SWEEP = ("sweep-rope-flow", "rope-flow", ["--grid", "beta=0.5,1,2", "--grid", "seed=0,1,2"],
         {"n": "4", "runs": "1", "t_end": "2", "outputs": "10"}, ["y=lambda1_final,x=beta", "y=lambda1_final,x=seed,hue=beta"])

# --- the checks on one figure ----------------------------------------------------------------------

GREEK = ("alpha", "beta", "gamma", "delta", "epsilon", "eps", "zeta", "theta", "kappa", "lambda", "mu", "sigma",
         "tau", "phi", "psi", "omega", "rho", "Delta", "Phi", "Psi", "Omega", "Lambda", "Sigma", "Gamma")
ASCII_GREEK = re.compile(r"(?<![A-Za-z\\])(%s)(?![A-Za-z])" % "|".join(GREEK))


def outside_math(text):
    """The parts of `text` outside $...$ (mathtext), joined by spaces."""
    parts = text.replace(r"\$", "").split("$")
    return " ".join(parts[0::2])


def ascii_math(text):
    """Why `text` reads as ASCII mathematics, or None."""
    plain = outside_math(text)
    if re.search(r"[A-Za-z0-9)\]|]_[A-Za-z0-9{+\-]", plain):
        return "an underscore outside $...$"
    if re.search(r"[A-Za-z0-9)\]]\^[A-Za-z0-9{\-]", plain):
        return "a caret outside $...$"
    m = ASCII_GREEK.search(plain)
    if m:
        return "'%s' spelled out" % m.group(1)
    return None


def has_data(ax):
    """Lines, collections, patches (not the background) or images: what a reader sees as data."""
    return bool(ax.lines or ax.collections or ax.images or [p for p in ax.patches if p is not ax.patch] or ax.tables)


def is_colorbar(ax):
    return ax.get_label() == "<colorbar>" or hasattr(ax, "_colorbar")


def labelled(ax, which):
    """Whether `ax` has its `which` ('x'/'y') label, or shows no tick labels on that axis and
    shares it with a panel that has one (stacked panels, twins)."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    if axis.get_label().get_text().strip():
        return True
    shows = axis.get_visible() and any(t.label1.get_visible() or t.label2.get_visible() for t in axis.get_major_ticks()
                                       if t.get_visible())
    if shows and axis.get_visible():
        return False
    group = ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes()
    for other in group.get_siblings(ax):
        if other is not ax and (other.xaxis if which == "x" else other.yaxis).get_label().get_text().strip():
            return True
    return False


def draws_something(h):
    """A legend handle that shows a line, a marker or a filled patch."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.collections import Collection
    if not h.get_visible() or (h.get_alpha() is not None and h.get_alpha() == 0):
        return False
    if isinstance(h, Line2D):
        line = h.get_linestyle() not in ("None", "", " ", "none") and h.get_linewidth() > 0
        mark = h.get_marker() not in (None, "None", "", " ", "none") and h.get_markersize() > 0
        return line or mark
    if isinstance(h, Patch):
        fc, ec = h.get_facecolor(), h.get_edgecolor()
        return (fc is not None and fc[3] > 0) or (ec is not None and ec[3] > 0 and h.get_linewidth() > 0)
    if isinstance(h, Collection):
        fc, ec = h.get_facecolors(), h.get_edgecolors()
        return (len(fc) and max(c[3] for c in fc) > 0) or (len(ec) and max(c[3] for c in ec) > 0)
    return True


def shows_in(artist, ax):
    """An original legend artist with data: at least one finite point inside the panel's view."""
    import numpy as np
    from matplotlib.container import Container
    from matplotlib.lines import Line2D
    from matplotlib.collections import Collection
    from matplotlib.patches import Rectangle
    if isinstance(artist, Container):
        bars = [a for a in artist.get_children() if isinstance(a, Rectangle)]
        if bars:  # a bar chart: some bar with a size
            return any(b.get_width() != 0 and b.get_height() != 0 for b in bars)
        parts = [a for a in artist.get_children() if isinstance(a, Line2D)]
        return not parts or any(shows_in(a, ax) for a in parts)
    if isinstance(artist, Line2D):
        x = np.asarray(artist.get_xdata(orig=False), dtype=float)
        y = np.asarray(artist.get_ydata(orig=False), dtype=float)
        if x.size == 0:
            return True  # a proxy that only names a style
        if artist.get_transform() != ax.transData:
            return True  # axhline/axvline and friends: drawn across the panel
        x0, x1 = sorted(ax.get_xlim())
        y0, y1 = sorted(ax.get_ylim())
        ok = np.isfinite(x) & np.isfinite(y) & (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
        return bool(ok.any())
    if isinstance(artist, Collection):
        return len(artist.get_paths()) > 0 or len(artist.get_offsets()) > 0
    return True


def drawn_texts(fig):
    """Every Text artist the renderer actually draws (ticks outside the view are never drawn)."""
    from matplotlib.text import Text
    seen = []
    orig = Text.draw

    def record(self, renderer):
        orig(self, renderer)
        if self.get_visible() and self.get_text().strip():
            seen.append(self)

    Text.draw = record
    try:
        fig.canvas.draw()
    finally:
        Text.draw = orig
    return seen


def check_figure(fig, name):
    """The problems of one figure, as messages."""
    problems = []
    saved = getattr(fig, "tokdyn_saved_dpi", None)
    if saved:  # look at it at the resolution it was written (text extents depend a little on it)
        fig.set_dpi(saved)
    renderer = fig.canvas.get_renderer()
    W, H = fig.bbox.width, fig.bbox.height
    texts = drawn_texts(fig)
    for t in texts:
        bb = t.get_window_extent(renderer)
        if bb.x0 < -1 or bb.y0 < -1 or bb.x1 > W + 1 or bb.y1 > H + 1:
            problems.append("%s: text %r reaches outside the canvas (%.0f..%.0f x %.0f..%.0f px of %.0f x %.0f)"
                            % (name, t.get_text()[:50], bb.x0, bb.x1, bb.y0, bb.y1, W, H))
    panels = [a for a in fig.axes if not is_colorbar(a)]
    for i, ax in enumerate(panels):
        where = "%s panel %d (%r)" % (name, i, ax.get_title()[:40])
        if not has_data(ax):
            problems.append("%s: holds no data (an empty panel)" % where)
            continue
        for which in "xy":
            if not labelled(ax, which):
                problems.append("%s: no %s label" % (where, which))
        strings = [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        leg = ax.get_legend()
        if leg is not None:
            for h in leg.legendHandles:
                if not draws_something(h):
                    problems.append("%s: a legend handle draws nothing (%s)" % (where, type(h).__name__))
            handles, labels = ax.get_legend_handles_labels()
            shown = [t.get_text() for t in leg.get_texts()]
            for h, lab in zip(handles, labels):
                if lab in shown and not shows_in(h, ax):
                    problems.append("%s: legend entry %r has no visible line or point in the panel" % (where, lab))
            strings += shown
        for s in strings:
            why = ascii_math(s) if s else None
            if why:
                problems.append("%s: ASCII mathematics in %r: %s" % (where, s[:60], why))
    for leg in fig.legends:
        for h in leg.legendHandles:
            if not draws_something(h):
                problems.append("%s: a figure legend handle draws nothing" % name)
    sup = getattr(fig, "_suptitle", None)
    if sup is not None and ascii_math(sup.get_text()):
        problems.append("%s: ASCII mathematics in the figure title %r: %s" % (name, sup.get_text()[:60], ascii_math(sup.get_text())))
    if not any(t.get_text().startswith("tokdyn") for t in fig.texts):
        problems.append("%s: no footer with the run's parameters" % name)
    return problems


# --- running ---------------------------------------------------------------------------------------

def run(cmd, env=None, timeout=300):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    return r


def tokdyn(binary, args, env=None):
    return run([binary] + args, env=env)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("%s is no PNG" % path)
    return struct.unpack(">II", head[16:24])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tokdyn")
    ap.add_argument("outdir")
    ap.add_argument("--keep", action="store_true", help="keep OUTDIR's earlier contents (default: start empty)")
    a = ap.parse_args()
    t0 = time.time()
    out = os.path.abspath(a.outdir)
    mark = os.path.join(out, ".figure_props")
    if os.path.isdir(out) and os.listdir(out) and not os.path.exists(mark):
        sys.exit("figure_props: %s is not empty and not an earlier output of this test; give a new folder" % out)
    if os.path.isdir(out) and not a.keep:
        shutil.rmtree(out)
    os.makedirs(out, exist_ok=True)
    open(mark, "w").close()
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", MPLCONFIGDIR=os.path.join(out, ".mpl"))
    env.pop("TOKDYN_FIGURE_FORMATS", None)
    env.pop("TOKDYN_FIGURE_DPI", None)
    os.environ.update(MPLBACKEND="Agg", MPLCONFIGDIR=env["MPLCONFIGDIR"])
    os.environ.pop("TOKDYN_FIGURE_FORMATS", None)
    os.environ.pop("TOKDYN_FIGURE_DPI", None)
    problems = []

    def one(run_):
        folder, preset, sets, smoke = run_
        show = json.loads(tokdyn(a.tokdyn, ["show", preset, "--json"], env).stdout)
        args = ["run", preset, "--out", os.path.join(out, folder), "--overwrite", "-q", "-j", "1"] + (["--no-figures"] if smoke else [])
        for k, v in dict(show.get("smoke") or {} if smoke else {}, **sets).items():
            args += ["--set", "%s=%s" % (k, v)]
        tokdyn(a.tokdyn, args, env)
        return folder, show["figure_kind"]

    def sweep():
        folder, preset, grid, sets, plots = SWEEP
        args = ["sweep", preset, "--out", os.path.join(out, folder), "-j", "1"] + grid
        for k, v in sets.items():
            args += ["--set", "%s=%s" % (k, v)]
        for p in plots:
            args += ["--plot", p]
        tokdyn(a.tokdyn, args + ["-q"], env)
        return folder, "sweep"

    with ThreadPoolExecutor(max_workers=2) as pool:  # two at a time: the test's share of 2 cores
        jobs = [pool.submit(one, r) for r in RUNS] + [pool.submit(sweep)]
        kinds = dict(j.result() for j in jobs)
    t_runs = time.time() - t0

    sys.path.insert(0, PYTHON_DIR)
    import tokdyn_plot
    from tokdyn_plot import common

    smoke_only = {r[0] for r in RUNS if r[3]}
    drawn = []
    common.add_save_hook(lambda fig, paths: drawn.append((paths, check_figure(fig, os.path.relpath(paths[0], out)))))
    nfig = 0
    for folder, kind in kinds.items():
        d = os.path.join(out, folder)
        by_tokdyn = folder not in smoke_only
        before = sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs if f.endswith(".png"))
        if by_tokdyn and not before:
            problems.append("%s: tokdyn drew no figure" % folder)
        drawn.clear()
        tokdyn_plot.draw(kind, d)
        redrawn = sorted(os.path.relpath(p, d) for paths, _ in drawn for p in paths)
        for paths, probs in drawn:
            problems += probs
        nfig += len(drawn)
        if not redrawn:
            problems.append("%s: the package drew no figure" % folder)
        if by_tokdyn and redrawn != before:
            problems.append("%s: the PNGs in the folder %s are not those the package draws %s" % (folder, before, redrawn))

    # Formats and resolution, in process ...
    d = os.path.join(out, "rope-fig4c")
    for f in os.listdir(d):
        if f.endswith((".png", ".svg", ".pdf")):
            os.remove(os.path.join(d, f))
    os.environ["TOKDYN_FIGURE_FORMATS"] = "png,svg,pdf"
    try:
        tokdyn_plot.draw("rope-fig4c", d)
    finally:
        del os.environ["TOKDYN_FIGURE_FORMATS"]
    magic = {"png": b"\x89PNG", "svg": b"<?xml", "pdf": b"%PDF"}
    for ext, m in magic.items():
        path = os.path.join(d, "fig4c_reversal." + ext)
        if not os.path.exists(path):
            problems.append("TOKDYN_FIGURE_FORMATS=png,svg,pdf: no %s" % path)
        elif not open(path, "rb").read(8).startswith(m):
            problems.append("%s does not start as a %s file" % (path, ext))
    w100 = png_size(os.path.join(d, "fig4c_reversal.png"))
    # ... and through the entry script tokdyn runs (its environment variables), at another resolution.
    for f in os.listdir(d):
        if f.startswith("fig4c_reversal."):
            os.remove(os.path.join(d, f))
    run(["/usr/bin/python3", os.path.join(PYTHON_DIR, "plot.py"), "rope-fig4c", d],
        env=dict(env, TOKDYN_FIGURE_FORMATS="svg,pdf,png", TOKDYN_FIGURE_DPI="65"))
    got = sorted(f for f in os.listdir(d) if f.startswith("fig4c_reversal."))
    if got != ["fig4c_reversal.pdf", "fig4c_reversal.png", "fig4c_reversal.svg"]:
        problems.append("plot.py with TOKDYN_FIGURE_FORMATS=svg,pdf,png wrote %s" % got)
    else:
        w65 = png_size(os.path.join(d, "fig4c_reversal.png"))
        if abs(w65[0] - w100[0] * 65 / common.figure_dpi(130)) > 2:
            problems.append("TOKDYN_FIGURE_DPI=65: PNG %dx%d, default %dx%d" % (w65 + w100))
    r = subprocess.run(["/usr/bin/python3", os.path.join(PYTHON_DIR, "plot.py"), "rope-fig4c", d], capture_output=True, text=True,
                       env=dict(env, TOKDYN_FIGURE_FORMATS="png,eps"))
    if r.returncode == 0 or "TOKDYN_FIGURE_FORMATS" not in r.stderr:
        problems.append("TOKDYN_FIGURE_FORMATS=png,eps: exit %d, stderr %r (expected a refusal)" % (r.returncode, r.stderr[-200:]))

    took = time.time() - t0
    if problems:
        print("figure_props: %d problem(s) in %d figures:" % (len(problems), nfig))
        for p in problems:
            print("  " + p)
        return 1
    print("figure_props: %d figures of %d folders hold every property; formats and resolution honoured "
          "(%.1f s, of which runs %.1f s)" % (nfig, len(kinds), took, t_runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
