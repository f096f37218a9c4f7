"""Helpers shared by every figure module of tokdyn_plot: reading a results folder (CSV files,
manifest.json, the paper's values it records), grouping rows, the house style (one colour-blind-safe
palette, line styles and markers per series), the footer and writing a figure. Imports matplotlib
with the Agg backend (no display) before pyplot; every figure module takes `plt` from here. Uses
Debian's /usr/bin/python3 with python3-numpy and python3-matplotlib.

Output (read here, in one place, when a figure is written):
  TOKDYN_FIGURE_FORMATS  comma list of png, svg, pdf (default png): every figure is written once per
                         format with the same base name (x.png, x.svg, x.pdf);
  TOKDYN_FIGURE_DPI      resolution of the raster formats (default: each figure's own, 110 to 130).
The house style is set once, at import: the Okabe-Ito palette (Okabe & Ito 2008, distinguishable
with every common colour-vision deficiency) is the colour cycle, so "C0".."C7" name its colours;
`series(i)` gives series i a colour, a line style and a marker, so series stay apart in greyscale."""
import csv
import json
import logging
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402,F401  (re-exported: `from .common import plt`)
from cycler import cycler  # noqa: E402

# --- the house style -------------------------------------------------------------------------------

# Okabe & Ito (2008), yellow last (faint on white): blue, vermillion, bluish green, reddish purple,
# orange, sky blue, black, yellow. "C0".."C7" are these; "C8", "C9" wrap around.
OKABE_ITO = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]
BLUE, VERMILLION, GREEN, PURPLE, ORANGE, SKY, BLACK, YELLOW = OKABE_ITO
GREY = "#999999"
# Per series: line styles and marker shapes that differ in greyscale (paired with the colours).
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1.5, 1, 1.5, 1, 1.5)), (0, (8, 2.5)), (0, (1, 1)), (0, (3, 1, 1, 1, 1, 1, 1, 1))]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h"]

# fontTools (subsetting the TrueType fonts of a PDF) warns about DejaVu's header timestamps: noise.
logging.getLogger("fontTools").setLevel(logging.ERROR)

matplotlib.rcParams.update({
    "axes.prop_cycle": cycler(color=OKABE_ITO),
    "image.cmap": "viridis",
    "legend.framealpha": 0.85,
    "pdf.fonttype": 42,          # TrueType in PDF (editable text, accepted by publishers)
    "svg.hashsalt": "tokdyn",    # the same SVG for the same figure
    "savefig.facecolor": "white",
    "axes.formatter.useoffset": False,  # tick labels read as the values themselves
})


def series(i, line=True, marker=True, **kw):
    """The style of series i: its colour, line style and marker (greyscale keeps them apart).
    line=False: markers only; marker=False: a line only. kw overrides."""
    st = dict(color=OKABE_ITO[i % len(OKABE_ITO)])
    st["ls"] = LINESTYLES[i % len(LINESTYLES)] if line else "none"
    if marker:
        st["marker"] = MARKERS[i % len(MARKERS)]
    st.update(kw)
    return st


def log_ticks(axis):
    """Plain numbers (1, 2, 5, 10, 20, ...) on a log axis spanning a few decades, not 10^k only."""
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
    lo, hi = sorted(axis.get_view_interval())
    if lo > 0 and hi / lo < 1e4:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        f = ScalarFormatter()
        f.set_scientific(False)
        axis.set_major_formatter(f)
        axis.set_minor_formatter(NullFormatter())


# --- reading a results folder ----------------------------------------------------------------------

def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_table(d, name, missing_ok=False):
    """The rows of d/name; [] for a missing file when missing_ok (the figure then leaves its panel
    out), else the error of opening it."""
    path = os.path.join(d, name)
    if missing_ok and not os.path.exists(path):
        return []
    return read_csv(path)


def num(x):
    """A CSV cell as a float; an empty cell (not applicable) or a missing one is NaN."""
    return float("nan") if x in ("", None) else float(x)


def by(rows, key):
    """Rows grouped by the value of column `key`, in order of first appearance."""
    out = {}
    for r in rows:
        out.setdefault(r[key], []).append(r)
    return out


def manifest(d):
    """d/manifest.json, or {} when the folder has none."""
    try:
        with open(os.path.join(d, "manifest.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


STYLE = {"silu": dict(color=BLUE, ls="-", marker="o", label="with SiLU"),
         "no_silu": dict(color=VERMILLION, ls="--", marker="s", label="without SiLU"),
         "gate": dict(color=GREEN, ls="-", marker="^", label="with gate"),
         "no_gate": dict(color=ORANGE, ls="--", marker="v", label="without gate"),
         "mamba2_silu": dict(color=BLUE, ls="-", marker="o", label="mamba2 + SiLU"),
         "mamba2_no_silu": dict(color=SKY, ls="-.", marker="D", label="mamba2, no SiLU"),
         "random_silu": dict(color=VERMILLION, ls="--", marker="s", label="random + SiLU"),
         "random_no_silu": dict(color=PURPLE, ls=(0, (5, 1.5, 1, 1.5, 1, 1.5)), marker="v", label="random, no SiLU")}


def paper_values(man, key=None):
    """The paper's reported values the run recorded (manifest notes.paper_values, written by the
    preset from the one place tokdyn defines them): {variant: (lambda1, r)} for Figs. 1-3, the
    number itself for T* entries. `key` picks one figure of a preset that has several (fig3 ...)."""
    v = man.get("notes", {}).get("paper_values", {})
    if key is not None:
        v = v.get(key, {})
    out = {}
    for name, val in v.items():
        out[name] = (val["lambda1"], val["r"]) if isinstance(val, dict) else val
    return out


def paper_bounds(man, key=None, fallback=None):
    """Which of the paper's values are one-sided statements ("r grows past 14": r > 14) rather than
    readings: {variant: {"lambda1" | "r": ">" | "<"}}. From the manifest
    (notes.paper_values.<key>.<variant>.bounds = {"r": ">"}, recorded by the preset next to the
    value) when the run recorded it, else `fallback` (the same shape)."""
    v = man.get("notes", {}).get("paper_values", {})
    if key is not None:
        v = v.get(key, {})
    out = {}
    for name, val in v.items():
        if isinstance(val, dict) and isinstance(val.get("bounds"), dict):
            out[name] = {q: op for q, op in val["bounds"].items() if op in ("<", ">")}
    if not out and fallback:
        return {k: dict(b) for k, b in fallback.items() if k in v}
    return out


def draws_kinds(fn):
    """Mark a figure function that draws other kinds too (coupling-all): the package calls it as
    fn(dir, draw), with draw(kind, dir) its registry's, instead of fn(dir)."""
    fn.draws_kinds = True
    return fn


# --- labels as mathematics -------------------------------------------------------------------------

_GREEK = set("alpha beta gamma delta epsilon zeta eta theta kappa lambda mu nu xi pi rho sigma tau phi chi psi omega "
             "Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi Omega".split())
_TOKEN = re.compile(r"\s+|[A-Za-z][A-Za-z0-9]*(?:_\{[^}]*\}|_[A-Za-z0-9]+)?|[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?(?:pi)?|.", re.S)
_NEUTRAL = set(" =,()/-+*<>|[]:.^")


def _tex_ident(tok):
    """One identifier in mathtext: Greek names as symbols, D0 as D_0, a long subscript upright."""
    def greek(w):
        return "\\" + w if w in _GREEK else w
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)pi", tok)
    if m:
        return m.group(1) + r"\pi"
    m = re.fullmatch(r"([A-Za-z][A-Za-z0-9]*)_\{([^}]*)\}", tok)
    if m:
        inner = re.sub(r"[A-Za-z]+", lambda w: greek(w.group(0)), m.group(2))
        return "%s_{%s}" % (greek(m.group(1)), inner)
    m = re.fullmatch(r"([A-Za-z][A-Za-z0-9]*)_([A-Za-z0-9]+)", tok)
    if m:
        sub = m.group(2)
        sub = greek(sub) if sub in _GREEK else (r"{\rm %s}" % sub if len(sub) >= 3 and sub.isalpha() else "{%s}" % sub)
        return "%s_%s" % (greek(m.group(1)), sub)
    m = re.fullmatch(r"([A-Za-z])([0-9]+)", tok)
    if m:
        return "%s_{%s}" % m.groups()
    return greek(tok)


def _tex_number(tok):
    """2e-7 as 2\\times10^{-7}; anything else unchanged."""
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)e([-+]?)0*([0-9]+)", tok)
    if not m:
        return tok
    mant, sign, exp = m.groups()
    p = "10^{%s%s}" % ("-" if sign == "-" else "", exp)
    return p if mant in ("1", "1.0") else r"%s\times%s" % (mant, p)


def _is_math_ident(tok):
    base = tok.split("_")[0]
    return ("_" in tok or base in _GREEK or len(base) == 1 or re.fullmatch(r"[A-Za-z][0-9]+", base) is not None
            or re.fullmatch(r"[0-9.]+pi", tok) is not None)


def tex_label(text):
    """A plain label written by the C++ side ("n=2, beta=0, D0=0.9000pi", "omega_low = pi/2",
    "odd antipodal (n, omega) = (9, pi)") with its mathematics in mathtext; words stay text."""
    if not text or "$" in text:
        return text
    toks = _TOKEN.findall(text)
    kinds = []
    for t in toks:
        if t.isspace() or (len(t) == 1 and t in _NEUTRAL):
            kinds.append("n")
        elif re.fullmatch(r"[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?", t):
            kinds.append("n")
        elif re.fullmatch(r"[A-Za-z0-9_{},.]+", t) and _is_math_ident(t):
            kinds.append("m")
        else:
            kinds.append("p")
    out, i = [], 0
    while i < len(toks):
        if kinds[i] == "p":
            out.append(toks[i])
            i += 1
            continue
        j = i
        while j < len(toks) and kinds[j] != "p":
            j += 1
        run = list(range(i, j))
        if not any(kinds[k] == "m" for k in run):
            out.append("".join(toks[i:j]))
            i = j
            continue
        a, b = i, j  # trim what cannot end a formula: spaces, commas, colons, unbalanced brackets
        while a < b and (toks[a].isspace() or toks[a] in ",:;." or (toks[a] == ")" )):
            a += 1
        while b > a and (toks[b - 1].isspace() or toks[b - 1] in ",:;." or toks[b - 1] == "("):
            b -= 1
        inner = toks[a:b]
        s = "".join(inner)
        if s.count("(") != s.count(")"):
            if inner and inner[0] == "(":
                a += 1
            elif inner and inner[-1] == ")":
                b -= 1
        body = "".join(_tex_ident(toks[k]) if kinds[k] == "m" else _tex_number(toks[k]) for k in range(a, b))
        out.append("".join(toks[i:a]) + ("$%s$" % body if body.strip() else "") + "".join(toks[b:j]))
        i = j
    return "".join(out)


# --- the footer ------------------------------------------------------------------------------------

FOOTER_PT = 7


def footer(fig, text, color="0.3"):
    """Add `text` to the figure's footer (below everything, wrapped to the figure's width; save()
    makes room for it). Several calls stack their texts in order; save() puts the run's key
    parameters first (run_footer)."""
    if text:
        fig.__dict__.setdefault("tokdyn_footers", []).append((text, color))


def _fmt_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "%.6g" % v
    if isinstance(v, list):
        items = [_fmt_value(x) for x in v]
        return ",".join(items) if len(items) <= 6 else ",".join(items[:5]) + ",…(%d)" % len(items)
    s = str(v)
    if os.sep in s:  # a path: its last part
        s = os.path.basename(s.rstrip(os.sep)) or s
    return s


# Parameters that say where output goes, not what was computed.
_NOT_KEY = {"taps", "mixing", "mixing_heads", "diagnostics", "fig_run", "fig_token", "inputs"}


def _applies(p, k):
    """False for a parameter the run's integrator ignores (the step of a fixed-step method under
    an adaptive one, and the other way round)."""
    integ = p.get("integrator")
    if integ is None:
        return True
    fixed = integ in ("rk4", "discrete", "euler")
    return not ((k == "h" and not fixed) or (k in ("rtol", "atol") and fixed))


def run_params_text(man, keys=None):
    """'tokdyn VERSION PRESET: k=v, ...' from a manifest: `keys` (in that order) or every parameter
    that says what was computed (empty strings and lists left out)."""
    p = man.get("params", {}) or {}
    if keys is None:
        keys = [k for k in p if k not in _NOT_KEY and _applies(p, k)]
    parts = []
    for k in keys:
        if k not in p:
            continue
        v = p[k]
        if v in ("", None) or v == []:
            continue
        parts.append("%s=%s" % (k, _fmt_value(v)))
    head = "tokdyn"
    if man.get("version"):
        head += " " + str(man["version"])
    if man.get("preset"):
        head += " " + str(man["preset"])
    return head + (": " + ", ".join(parts) if parts else "")


def run_footer(fig, d, keys=None):
    """Put the run's key parameters (manifest.json of folder d) at the head of the footer."""
    man = manifest(d)
    if man:
        fig.__dict__.setdefault("tokdyn_footers", []).insert(0, (run_params_text(man, keys), "0.3"))
    fig.tokdyn_run_footer = True


def synthetic_note(fig, man):
    """Say on the figure when no checkpoint was given (a freshly initialised model ran) or how the
    checkpoint was trained here."""
    notes = man.get("notes", {})
    tb = notes.get("trained_by")
    if tb:
        where = ("checkpoint at step %d of %d" % (tb["checkpoint_step"], tb.get("steps", 0))
                 if "checkpoint_step" in tb else "%.2fM parameters" % (tb.get("parameters", 0) / 1e6))
        held = tb.get("heldout_loss")
        text = "trained here (tokdyn train): %s %s, %s, %.2fM tokens seen" % (tb.get("model", "?"), tb.get("size", "?"), where,
                                                                             tb.get("tokens_seen", 0) / 1e6)
        if held is not None:
            text += ", held-out loss %.2f nats/token" % held
        if tb.get("unigram_entropy") is not None:
            text += " (unigram entropy %.2f)" % tb["unigram_entropy"]
        footer(fig, text)
        return
    if notes.get("synthetic_model"):
        text = notes.get("synthetic_model_note") or ("no checkpoint given: a freshly initialised Mamba-2 (tokdyn make-checkpoint) "
                                                     "ran, not trained weights")
        footer(fig, "untrained model: " + text, color=VERMILLION)


# --- text that fits --------------------------------------------------------------------------------

def _words(text):
    """The words of one line, a $...$ formula kept whole (never wrapped inside)."""
    out, cur, in_math = [], "", False
    for ch in text:
        if ch == "$":
            in_math = not in_math
        if ch == " " and not in_math:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


def wrap(text, width):
    """`text` wrapped to about `width` characters per line, its line breaks kept, formulas whole."""
    lines = []
    for line in text.split("\n"):
        cur = ""
        for w in _words(line):
            if cur and len(cur) + 1 + len(w) > width:
                lines.append(cur)
                cur = w
            else:
                cur = w if not cur else cur + " " + w
        lines.append(cur)
    return "\n".join(lines)


def _fit(t, avail_px, renderer, vertical=False):
    """Re-wrap text artist t until its extent fits `avail_px` (width, or height for a rotated
    label); True when it changed."""
    changed = False
    for _ in range(6):
        text = t.get_text()
        if not text.strip():
            return changed
        bb = t.get_window_extent(renderer)
        size = bb.height if vertical else bb.width
        if size <= avail_px:
            return changed
        longest = max(len(x) for x in text.split("\n"))
        width = max(12, int(longest * avail_px / size * 0.95))
        new = wrap(text, width)
        if new == text:
            return changed
        t.set_text(new)
        changed = True
    return changed


def _fill(a, text, avail_px, renderer):
    """Set text artist a to `text` flowed into lines that fit `avail_px`."""
    a.set_text(text)
    width = max(len(text), 12)
    for _ in range(8):
        size = a.get_window_extent(renderer).width
        if size <= avail_px:
            return
        longest = max(len(x) for x in a.get_text().split("\n"))
        width = max(12, min(width - 1, int(longest * avail_px / size * 0.98)))
        a.set_text(wrap(text, width))


def fit_texts(fig):
    """Wrap titles and axis labels wider than their room: an axes' title and x label to its width
    (a little more for the title), its y label to its height, the figure's title to the canvas."""
    renderer = fig.canvas.get_renderer()
    changed = False
    W = fig.bbox.width
    for ax in fig.axes:
        pos = ax.get_window_extent(renderer)
        for t in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)):
            if t is not None and t.get_text().strip():
                bb = t.get_window_extent(renderer)
                c = 0.5 * (bb.x0 + bb.x1)  # centred there: room on both sides
                room = {"center": 2 * min(c, W - c), "left": W - bb.x0, "right": bb.x1}.get(t.get_ha(), W)
                changed |= _fit(t, min(room - 4, pos.width * 1.12), renderer)
        changed |= _fit(ax.xaxis.label, min(W * 0.98, pos.width * 1.05), renderer)
        changed |= _fit(ax.yaxis.label, pos.height * 1.05, renderer, vertical=True)
    if getattr(fig, "_suptitle", None) is not None:
        changed |= _fit(fig._suptitle, W * 0.98, renderer)
    return changed


def _space_markers(fig):
    """Lines with markers and many points: a marker every ~8% of the axes' diagonal (each line
    starting at its own offset, so that coinciding lines still show their own markers)."""
    for ax in fig.axes:
        k = 0
        for ln in ax.get_lines():
            m = ln.get_marker()
            ls = ln.get_linestyle()
            if m in (None, "None", "", " ", "none") or ls in (None, "None", "", " ", "none"):
                continue
            if ln.get_markevery() is None and len(ln.get_xdata(orig=False)) > 30:
                ln.set_markevery((0.012 * (k % 6), 0.08))
                k += 1


def has_data(ax):
    """Whether a panel shows data: lines, collections, patches (not its background) or images."""
    return bool(ax.lines or ax.collections or ax.images or [p for p in ax.patches if p is not ax.patch])


def compact(fig, axes, why=None):
    """Leave out the panels of `axes` (a grid from plt.subplots) that show no data: the others move
    up into a grid as wide as the old one (or as wide as they are few), the figure shrinks with it,
    and each left-out panel's reason (why = {panel: text}) goes to the footer. Returns the panels kept."""
    import numpy as np
    from matplotlib.gridspec import GridSpec
    grid = np.atleast_2d(np.asarray(axes, dtype=object))
    nrows, ncols = grid.shape
    flat = list(grid.ravel())
    twins = {a: [t for t in a.get_shared_x_axes().get_siblings(a) if t is not a and t in fig.axes and t not in flat] for a in flat}
    empty = [a for a in flat if not has_data(a) and not any(has_data(t) for t in twins[a])]
    if not empty:
        return flat
    keep = [a for a in flat if a not in empty]
    for a in empty:
        if why and why.get(a):
            footer(fig, "Not drawn: " + why[a] + ".")
        for t in twins[a]:
            fig.delaxes(t)
        fig.delaxes(a)
    if not keep:
        return keep
    nc = min(ncols, len(keep))
    nr = -(-len(keep) // nc)
    W, H = fig.get_size_inches()
    fig.set_size_inches(W * (nc / ncols if nc < ncols else 1.0), H * nr / nrows)
    gs = GridSpec(nr, nc, figure=fig)
    for i, a in enumerate(keep):
        a.set_subplotspec(gs[i])
        for t in twins[a]:
            t.set_subplotspec(gs[i])
    return keep


# --- writing a figure ------------------------------------------------------------------------------

FORMATS = ("png", "svg", "pdf")


def figure_formats():
    """TOKDYN_FIGURE_FORMATS as a list (default ['png']); an unknown format stops the script."""
    raw = os.environ.get("TOKDYN_FIGURE_FORMATS", "").strip()
    if not raw:
        return ["png"]
    out = []
    for f in raw.split(","):
        f = f.strip().lower()
        if f not in FORMATS:
            sys.exit("TOKDYN_FIGURE_FORMATS: expected a comma-separated list of png, svg, pdf; got '%s'" % f)
        if f not in out:
            out.append(f)
    return out


def figure_dpi(default):
    """TOKDYN_FIGURE_DPI (a positive number) or the figure's own default."""
    raw = os.environ.get("TOKDYN_FIGURE_DPI", "").strip()
    if not raw:
        return default
    try:
        v = float(raw)
    except ValueError:
        v = float("nan")
    if not (math.isfinite(v) and 0 < v <= 2400):
        sys.exit("TOKDYN_FIGURE_DPI: expected a positive number of dots per inch (at most 2400); got '%s'" % raw)
    return v


_SAVE_HOOKS = []


def add_save_hook(fn):
    """Call fn(fig, paths) for every figure written (after writing, before it is freed): the
    figure-property test looks at the figures this way."""
    _SAVE_HOOKS.append(fn)


def remove_save_hook(fn):
    _SAVE_HOOKS.remove(fn)


def _layout(fig, footer_in):
    H = fig.get_size_inches()[1]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "not compatible with tight_layout" (colorbars, twins): best effort
        fig.tight_layout(rect=(0, footer_in / H, 1, 1))


def save(fig, axes, d, out, dpi=130, keys=None):
    """Finish and write a figure: a light grid on every panel of `axes`; the footer (the run's key
    parameters from d/manifest.json, `keys` or all of them, then every footer() text); titles and
    labels wrapped to their room; tight layout; dense marker lines thinned; written as d/BASE.FMT
    for every format of TOKDYN_FIGURE_FORMATS at TOKDYN_FIGURE_DPI (default `dpi`); then freed."""
    for a in axes:
        a.grid(alpha=0.3)
    if not getattr(fig, "tokdyn_run_footer", False):
        run_footer(fig, d, keys)
    notes = getattr(fig, "tokdyn_footers", [])
    footer_in = 0.0
    if notes:
        W, H = fig.get_size_inches()
        renderer = fig.canvas.get_renderer()
        texts = []
        for t, c in notes:
            a = fig.text(0.5, 0.0, t, ha="center", va="bottom", fontsize=FOOTER_PT, color=c, linespacing=1.15)
            _fill(a, t, fig.bbox.width * 0.94, renderer)
            texts.append(a)
        heights = [a.get_window_extent(renderer).height / fig.dpi for a in texts]
        footer_in = sum(heights) + 0.04 * len(texts) + 0.04
        fig.set_size_inches(W, H + footer_in)  # the panels keep their size
        H2 = H + footer_in
        y = 0.03 / H2
        for a, h in reversed(list(zip(texts, heights))):  # from the bottom up
            a.set_y(y)
            y += (h + 0.04) / H2
        fig.tokdyn_footer_lines = sum(a.get_text().count("\n") + 1 for a in texts)
    _space_markers(fig)
    _layout(fig, footer_in)
    if fit_texts(fig):
        _layout(fig, footer_in)
        if fit_texts(fig):
            _layout(fig, footer_in)
    base = os.path.splitext(out)[0]
    r = figure_dpi(dpi)
    paths = []
    fig.tokdyn_saved_dpi = r
    for f in figure_formats():
        path = os.path.join(d, base + "." + f)
        meta = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(f)
        fig.savefig(path, dpi=r, format=f, metadata=meta)
        paths.append(path)
    for h in list(_SAVE_HOOKS):
        h(fig, paths)
    plt.close(fig)
    return paths
