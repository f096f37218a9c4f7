"""tokdyn figures: draw(KIND, DIR) draws the figures of one results directory from its CSV files
and manifest.json (figures are always drawn from written results, never from the run's memory).

Layout: `common` holds the shared helpers (CSV reading, grouping, the house style: the Okabe-Ito
palette and per-series line styles and markers, the manifest and the paper's values it records, the
footer with the run's parameters, writing a figure in every format of TOKDYN_FIGURE_FORMATS at
TOKDYN_FIGURE_DPI); every other module draws one family of figures, imports
only from `common` (and numpy/matplotlib), and declares the kinds it draws in a module-level dict
KINDS = {"kind": function(dir)}. This file collects them into the registry KINDS (a kind declared
twice is an error). The kinds are the figure kinds the C++ presets name (Experiment::figure_kind);
tests/scripts/plot_kinds.py holds both sides to the same set.

Entry points: python/plot.py KIND DIR (run by tokdyn, src/runtime/figures.cpp) and python3 -m tokdyn_plot
KIND DIR. Uses Debian's /usr/bin/python3 with python3-numpy and python3-matplotlib."""
import importlib
import os
import pkgutil
import sys

_NOT_FIGURES = ("common", "__main__")


def _collect():
    kinds, where = {}, {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name in _NOT_FIGURES:
            continue
        mod = importlib.import_module("%s.%s" % (__name__, info.name))
        declared = getattr(mod, "KINDS", None)
        if not isinstance(declared, dict):
            raise ImportError("tokdyn_plot.%s declares no KINDS dict" % info.name)
        for kind, fn in declared.items():
            if kind in kinds:
                raise ImportError("figure kind '%s' declared twice: tokdyn_plot.%s and tokdyn_plot.%s"
                                  % (kind, where[kind], info.name))
            kinds[kind], where[kind] = fn, info.name
    return kinds


KINDS = _collect()


def draw(kind, d):
    """Draw the figures of kind `kind` into the results directory `d`; an unknown kind exits with
    status 1 and one line on stderr."""
    fn = KINDS.get(kind)
    if fn is None:
        sys.exit("plot.py: unknown figure kind '%s'" % kind)
    if getattr(fn, "draws_kinds", False):
        fn(d, draw)
    else:
        fn(d)


def main(argv=None, prog="plot.py"):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        sys.exit("usage: %s KIND DIR" % prog)
    from .common import figure_dpi, figure_formats
    figure_formats()  # a bad TOKDYN_FIGURE_FORMATS or TOKDYN_FIGURE_DPI stops here, before any figure
    figure_dpi(100)
    draw(argv[0], argv[1])
    _record_versions()


def _record_versions():
    """The plotting stack's versions, for the run's manifest (versions.plotting): written where
    tokdyn asks (TOKDYN_PLOT_VERSIONS), nothing otherwise."""
    path = os.environ.get("TOKDYN_PLOT_VERSIONS")
    if not path:
        return
    import json
    import platform
    import matplotlib
    import numpy
    with open(path, "w") as f:
        json.dump({"python": platform.python_version(), "numpy": numpy.__version__,
                   "matplotlib": matplotlib.__version__}, f)
