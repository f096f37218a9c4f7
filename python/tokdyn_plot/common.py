"""Helpers shared by every figure module of tokdyn_plot: reading a results folder (CSV files,
manifest.json, the paper's values the run recorded), grouping rows, the variant styles and writing
a figure. Imports matplotlib with the Agg backend (no display) before pyplot; every figure module
takes `plt` from here. Uses Debian's /usr/bin/python3 with python3-numpy and python3-matplotlib."""
import csv
import json
import os
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402,F401  (re-exported: `from .common import plt`)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_table(d, name, missing_ok=False):
    """The rows of d/name; [] for a missing file when missing_ok (the figure then leaves its panel
    empty), else the error of opening it."""
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


def save(fig, axes, d, out, dpi=130):
    """Grid on every panel of `axes` (none: no grid), tight layout, write d/out as PNG, free the figure."""
    for a in axes:
        a.grid(alpha=0.3)
    fig.tight_layout()
    lines = getattr(fig, "tokdyn_footer_lines", 0)
    if lines:  # tight_layout leaves fig.text out: make room for the footer below the x labels
        fig.subplots_adjust(bottom=fig.subplotpars.bottom + lines * FOOTER_PT * 1.3 / 72 / fig.get_size_inches()[1])
    fig.savefig(os.path.join(d, out), dpi=dpi)
    plt.close(fig)


STYLE = {"silu": dict(color="C0", label="with SiLU"), "no_silu": dict(color="C3", label="without SiLU"),
         "gate": dict(color="C2", label="with gate"), "no_gate": dict(color="C1", label="without gate"),
         "mamba2_silu": dict(color="C0", label="mamba2 + SiLU"), "mamba2_no_silu": dict(color="C9", label="mamba2, no SiLU"),
         "random_silu": dict(color="C3", label="random + SiLU"), "random_no_silu": dict(color="C1", label="random, no SiLU")}


def manifest(d):
    """d/manifest.json, or {} when the folder has none."""
    try:
        with open(os.path.join(d, "manifest.json")) as f:
            return json.load(f)
    except OSError:
        return {}


FOOTER_PT = 7


def footer(fig, text, color="0.3"):
    """`text` at the bottom of the figure, wrapped to its width (every character inside the canvas);
    save() makes room for it."""
    width = max(40, int(fig.get_size_inches()[0] * 72 / (FOOTER_PT * 0.55)))
    lines = textwrap.wrap(text, width)
    fig.text(0.5, 0.005, "\n".join(lines), ha="center", va="bottom", fontsize=FOOTER_PT, color=color)
    fig.tokdyn_footer_lines = len(lines)


def synthetic_note(fig, man):
    """Say on the figure when no checkpoint was given (a freshly initialised model ran)."""
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
        footer(fig, "untrained model: " + text, color="C3")


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


def draws_kinds(fn):
    """Mark a figure function that draws other kinds too (coupling-all): the package calls it as
    fn(dir, draw), with draw(kind, dir) its registry's, instead of fn(dir)."""
    fn.draws_kinds = True
    return fn
