"""tokdyn's presets and their results, re-exported by the package: ``presets``, ``show``, ``run``
(a preset in-process, through the C++ core), ``load``, ``Result`` (a results folder: manifest,
tables as pandas DataFrames, summaries, checks, arrays, state taps) and ``Taps``; and ``_text``, a
parameter value as ``--set`` text, which the sweeps and the models use too."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from . import _core
from ._errors import InputError


def _text(value: Any) -> str:
    """A parameter value as `--set` text: bools lower case, lists comma-joined."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, np.ndarray)):
        return ",".join(_text(v) for v in value)
    if isinstance(value, (os.PathLike,)):
        return os.fspath(value)
    return str(value)


# ---------------------------------------------------------------------------------------------
# Presets and results


def presets() -> List[Dict[str, str]]:
    """The named experiments: ``[{"name": ..., "description": ...}, ...]`` (``tokdyn presets``)."""
    return [{"name": n, "description": d} for n, d in _core.presets()]


def show(preset: str) -> Dict[str, Any]:
    """A preset's parameters (key, type, default, bounds, choices, conditions, help) and its declared
    outputs (tables with their columns, arrays, summaries, figures), as ``tokdyn show PRESET --json``."""
    return json.loads(_core.show_json(preset))


def run(preset: str, out: Optional[Union[str, os.PathLike]] = None, *, threads: int = 0, figures: bool = False,
        overwrite: bool = False, inputs: bool = False, **params: Any) -> "Result":
    """Runs a preset in-process with the CLI's validation, and returns its results.

    ``params`` are the preset's parameters (``tokdyn show PRESET``), as Python values: numbers,
    strings, bools, lists (``freqs=[1, 0.01]``). ``out`` is the results folder (a new one, or a
    previous tokdyn result with ``overwrite=True``). Without ``out`` the results go to a fresh
    temporary folder (``Result.dir``), removed when the Result is garbage-collected or the
    interpreter exits, unless ``Result.keep()`` is called. ``threads=0`` uses every core; the bits
    do not depend on it. Figures are off by default (``figures=True`` draws them as the CLI does).

    Ctrl-C (SIGINT) stops the run at its next progress point (a layer, an integration step; within
    about a second) and raises ``KeyboardInterrupt``; as after a failed run, nothing of it is left:
    no lock file, no temporary folder, no result.
    """
    own = None
    if out is None:
        own = Path(tempfile.mkdtemp(prefix=f"tokdyn-{preset}-"))
        out = own / "result"
    try:
        sets = {k: _text(v) for k, v in params.items()}
        _core.run(preset, os.fspath(out), sets, int(threads), bool(figures), bool(overwrite), bool(inputs))
        result = load(out)
    except BaseException:  # an error or an interrupt: the temporary folder goes too
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)
        raise
    if own is not None:
        result._finalizer = weakref.finalize(result, shutil.rmtree, os.fspath(own), True)
    return result


class Taps:
    """State taps of one variant stacked into one array ``array[layer_index, run, row, d]``;
    ``layers`` lists the layer of each index (layer 0: the start state)."""

    axes = ("layer", "run", "row", "d")

    def __init__(self, layers: Sequence[int], array: np.ndarray):
        self.layers = list(layers)
        self.array = array

    def at(self, layer: int) -> np.ndarray:
        """The state after ``layer`` ([runs, rows, d])."""
        return self.array[self.layers.index(layer)]

    def __repr__(self) -> str:
        return f"Taps(layers={self.layers}, shape={self.array.shape}, axes={self.axes})"


class Result:
    """A tokdyn results folder.

    - ``manifest``: manifest.json as a dict (parameters, seed, version, times, notes, warnings);
    - ``tables``: every CSV table by name (``metrics`` for metrics.csv; a sub-run's as
      ``"coupling-green/checks"``), each a pandas DataFrame, read when first used; also reachable
      as attributes (``r.metrics``) and items (``r["metrics"]``);
    - ``summaries``: summary.csv (quantity, value, paper); ``checks``: checks.csv or None;
    - ``taps(variant)``: the state taps of a variant stacked with named axes;
    - ``array(path)``: any .npy file of the folder;
    - ``temporary`` / ``keep()``: the folder of ``run()`` without ``out=`` is removed when the
      Result is garbage-collected (or at exit) unless kept.

    The declaration of each table (what a row is, every column's meaning and unit) is in
    ``describe(name)``, from ``tokdyn.show(preset)``.
    """

    def __init__(self, path: Union[str, os.PathLike]):
        self.dir = Path(path)
        self._finalizer: Optional[weakref.finalize] = None  # run() without out=: removes its temporary folder
        manifest = self.dir / "manifest.json"
        if not manifest.is_file():
            raise InputError(f"{self.dir}: no manifest.json; expected a tokdyn results folder")
        with open(manifest) as f:
            self.manifest: Dict[str, Any] = json.load(f)
        self.preset: str = self.manifest.get("preset", "")
        self._tables: Dict[str, Any] = {}
        self._names = sorted(str(p.relative_to(self.dir).with_suffix("")) for p in self.dir.rglob("*.csv")
                             if "inputs" not in p.relative_to(self.dir).parts)

    @property
    def temporary(self) -> bool:
        """True for the temporary folder of ``run()`` without ``out=``, removed with the Result."""
        return self._finalizer is not None and self._finalizer.alive

    def keep(self) -> Path:
        """Keeps the temporary folder of ``run()`` without ``out=`` after the Result is gone; returns ``dir``."""
        if self._finalizer is not None:
            self._finalizer.detach()
        return self.dir

    @property
    def params(self) -> Dict[str, Any]:
        return dict(self.manifest.get("params", self.manifest.get("parameters", {})))

    @property
    def table_names(self) -> List[str]:
        return list(self._names)

    def table(self, name: str):
        """The table ``name`` (file name without .csv) as a pandas DataFrame."""
        import pandas as pd

        if name not in self._names:
            raise KeyError(f"{self.dir}: no table '{name}'; the folder has {', '.join(self._names)}")
        if name not in self._tables:
            # An empty cell is NaN (keep_default_na=False: a text cell "NA" stays text); numbers are parsed
            # round-trip exactly (pandas' default parser may be off by one ulp), so a DataFrame holds the
            # bits tokdyn computed.
            self._tables[name] = pd.read_csv(self.dir / f"{name}.csv", keep_default_na=False, na_values=[""],
                                             float_precision="round_trip")
        return self._tables[name]

    @property
    def tables(self) -> Dict[str, Any]:
        return {n: self.table(n) for n in self._names}

    @property
    def summaries(self):
        return self.table("summary") if "summary" in self._names else None

    @property
    def checks(self):
        return self.table("checks") if "checks" in self._names else None

    def describe(self, name: str) -> Optional[Dict[str, Any]]:
        """The declaration of table ``name``: file, what a row is, its columns (meaning, unit, kind)."""
        if not self.preset:
            return None
        for t in show(self.preset).get("outputs", {}).get("tables", []):
            if t.get("file") == f"{name}.csv":
                return t
        return None

    def array(self, path: str) -> np.ndarray:
        """An .npy file of the folder by its relative path (with or without .npy)."""
        p = self.dir / (path if path.endswith(".npy") else path + ".npy")
        return np.load(p)

    def variants(self) -> List[str]:
        """The variants with state taps (taps/<variant>/)."""
        d = self.dir / "taps"
        return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []

    def taps(self, variant: Optional[str] = None) -> Taps:
        """The state taps of ``variant`` (the only one when None) stacked: [layer, run, row, d]."""
        vs = self.variants()
        if not vs:
            raise KeyError(f"{self.dir}: no taps/ (run with taps=...)")
        if variant is None:
            if len(vs) != 1:
                raise KeyError(f"{self.dir}: taps of several variants ({', '.join(vs)}); name one")
            variant = vs[0]
        if variant not in vs:
            raise KeyError(f"{self.dir}: no taps of variant '{variant}'; there are {', '.join(vs)}")
        files = sorted((self.dir / "taps" / variant).glob("layer_*.npy"), key=lambda p: int(p.stem.split("_")[1]))
        layers = [int(p.stem.split("_")[1]) for p in files]
        return Taps(layers, np.stack([np.load(p) for p in files]))

    def __getitem__(self, name: str):
        return self.table(name)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        names = self.__dict__.get("_names", [])
        if name in names:
            return self.table(name)
        raise AttributeError(f"'Result' has no attribute or table '{name}' (tables: {', '.join(names)})")

    def __repr__(self) -> str:
        return f"Result({str(self.dir)!r}, preset={self.preset!r}, tables={self._names})"


def load(path: Union[str, os.PathLike]) -> Result:
    """Opens a results folder written by ``tokdyn run`` or ``tokdyn.run``."""
    return Result(path)


# Shown, documented and pickled as the package's own (tokdyn re-exports them).
for _obj in (_text, presets, show, run, Taps, Result, load):
    _obj.__module__ = "tokdyn"
