"""tokdyn from Python: the presets and their results, the registry's models, and the analyses.

Everything runs in tokdyn's C++ core (the module ``tokdyn._core``), with NumPy arrays in and out and
the GIL released while it computes; the results are the same bits the CLI writes.

Errors: ``ValueError`` for bad input (what the CLI reports with exit code 2), ``RuntimeError`` for
the rest (resources, non-finite state, no convergence), each with the CLI's one-line message.

Quick tour::

    import tokdyn
    tokdyn.presets()                                  # the named experiments
    r = tokdyn.run("rope-flow", n=8, runs=2, t_end=5) # run one in-process -> Result
    r.metrics                                         # a declared table as a pandas DataFrame
    r.summaries                                       # summary.csv: quantity, value, paper
    m = tokdyn.models.rope(d=4, tokens=6, beta=1.0)   # a registry model
    X1 = m.step(m.x0, 1)                              # one layer
    s = tokdyn.depth_spectrum(m, depth=200, k=4)      # Lyapunov exponents of its depth map
    s = tokdyn.depth_spectrum(step, jvp, X0, 200, 4)  # ... of your own model (Python callables)
    tokdyn.cocycle_spectra(B)                         # spectra of a [L, d, d] cocycle
    tok = tokdyn.Tokenizer.from_checkpoint("ck")      # a checkpoint's tokenizer.json
    e = tok.encode("Hello world"); e.ids, e.pieces    # ids (NumPy int64) and their vocabulary strings

docs/python.md has the whole interface.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np


def _use_the_clis_blas_kernels() -> None:
    """OpenBLAS picks its kernels when it is loaded; on a CPU it does not know it falls back to
    generic ones, and the tokdyn binary then sets OPENBLAS_CORETYPE and starts again
    (include/tokdyn/core/blas_core.hpp). A module cannot start again: ask the binary which kernels it
    runs, and set the variable before ``_core`` loads OpenBLAS, so that in-process results have the
    CLI's speed and bits. A user's OPENBLAS_CORETYPE, or TOKDYN_BLAS_CORE=keep, is left alone."""
    keep = os.environ.get("TOKDYN_BLAS_CORE")
    if keep is not None and keep != "keep":
        raise ImportError(f"tokdyn: environment variable TOKDYN_BLAS_CORE={keep!r}: expected 'keep' "
                          "(OpenBLAS's own kernel choice) or unset")
    if "OPENBLAS_CORETYPE" in os.environ or keep is not None:
        return
    try:
        binary = os.environ.get("TOKDYN_BIN")
        if not binary:
            from ._paths import TOKDYN_BINARY as binary  # written by CMake (build) or cmake --install
        out = subprocess.run([binary, "machine", "--json"], capture_output=True, text=True, timeout=60, check=True)
        info = json.loads(out.stdout)
    except Exception:  # no binary: OpenBLAS's own choice
        return
    if info.get("blas_core_replaced"):
        os.environ["OPENBLAS_CORETYPE"] = info["blas_core"]
        os.environ["TOKDYN_BLAS_CORE_DETECTED"] = info["blas_core_detected"]


_use_the_clis_blas_kernels()

from . import _core  # noqa: E402  (after the BLAS kernels are chosen)

__version__ = _core.__version__
__all__ = ["presets", "show", "run", "load", "sweep", "load_sweep", "Result", "Taps", "models", "Model", "gram_metrics", "cocycle_spectra",
           "depth_spectrum", "model_names", "pe_window", "pe_readings", "green_solve", "consensus_spectrum", "Tokenizer", "Encoding",
           "train", "train_tokenizer"]


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
    previous tokdyn result with ``overwrite=True``); by default a fresh temporary folder, kept (its
    path is ``Result.dir``). ``threads=0`` uses every core; the bits do not depend on it.
    Figures are off by default (``figures=True`` draws them as the CLI does).
    """
    if out is None:
        out = Path(tempfile.mkdtemp(prefix=f"tokdyn-{preset}-")) / "result"
    sets = {k: _text(v) for k, v in params.items()}
    _core.run(preset, os.fspath(out), sets, int(threads), bool(figures), bool(overwrite), bool(inputs))
    return load(out)


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
    - ``array(path)``: any .npy file of the folder.

    The declaration of each table (what a row is, every column's meaning and unit) is in
    ``describe(name)``, from ``tokdyn.show(preset)``.
    """

    def __init__(self, path: Union[str, os.PathLike]):
        self.dir = Path(path)
        manifest = self.dir / "manifest.json"
        if not manifest.is_file():
            raise ValueError(f"{self.dir}: no manifest.json; expected a tokdyn results folder")
        with open(manifest) as f:
            self.manifest: Dict[str, Any] = json.load(f)
        self.preset: str = self.manifest.get("preset", "")
        self._tables: Dict[str, Any] = {}
        self._names = sorted(str(p.relative_to(self.dir).with_suffix("")) for p in self.dir.rglob("*.csv")
                             if "inputs" not in p.relative_to(self.dir).parts)

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


# ---------------------------------------------------------------------------------------------
# Sweeps


def _binary() -> str:
    """The tokdyn binary: $TOKDYN_BIN, else this build's (or installation's), else `tokdyn` on PATH."""
    env = os.environ.get("TOKDYN_BIN")
    if env:
        return env
    try:
        from ._paths import TOKDYN_BINARY  # written by CMake (build) or cmake --install
        if os.path.exists(TOKDYN_BINARY):
            return TOKDYN_BINARY
    except ImportError:
        pass
    found = shutil.which("tokdyn")
    if not found:
        raise RuntimeError("tokdyn.sweep: the tokdyn binary was not found; set TOKDYN_BIN or put tokdyn on PATH")
    return found


def _axis_text(values: Any) -> str:
    """A --grid / --zip value: a spec string as is, else the values joined (list parameters: ';')."""
    if isinstance(values, str):
        return values
    vals = list(values)
    if any(isinstance(v, (list, tuple, np.ndarray)) for v in vals):
        return ";".join(_text(v) for v in vals)
    return ",".join(_text(v) for v in vals)


def sweep(preset: str, out: Optional[Union[str, os.PathLike]] = None, *, grid: Optional[Mapping[str, Any]] = None,
          zip: Optional[Mapping[str, Any]] = None, points: Any = None, jobs: int = 1, threads: int = 0, figures: bool = False,
          plot: Union[None, str, Sequence[str]] = None, overwrite: bool = False, quiet: bool = True, **params: Any) -> "pd.DataFrame":
    """Runs ``tokdyn sweep`` and returns its ``sweep.csv`` as a pandas DataFrame (one row per point:
    the swept parameters, ``status``, ``exit_code``, ``error``, every declared scalar summary and
    check verdict); ``df.attrs["dir"]`` is the sweep's folder (``points/<hash>/``: each point's
    result, ``tokdyn.load``-able).

    ``grid``: {key: values}, the cartesian product (values: a list, or a spec string such as
    ``"8:64:x2"`` or ``"logspace(-2,1,7)"``); ``zip``: {key: values} moved together; ``points``: a
    DataFrame, a list of dicts or a CSV path, one point per row; ``params``: fixed for every point.
    ``out``: the sweep's folder (default: results/<preset>-sweep); the same call again resumes it.
    Failed points are rows (a ``UserWarning`` counts them); bad input raises ``ValueError``.
    """
    import warnings

    import pandas as pd

    args = [_binary(), "sweep", preset]
    for k, v in (grid or {}).items():
        args += ["--grid", f"{k}={_axis_text(v)}"]
    for k, v in (zip or {}).items():
        args += ["--zip", f"{k}={_axis_text(v)}"]
    for k, v in params.items():
        args += ["--set", f"{k}={_text(v)}"]
    tmp = None
    if points is not None:
        if isinstance(points, (str, os.PathLike)):
            args += ["--points", os.fspath(points)]
        else:
            df = points if isinstance(points, pd.DataFrame) else pd.DataFrame(list(points))
            tmp = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
            def cell(v: Any) -> str:
                # A missing cell: the default. pandas widens an int column with a gap to float: 5.0 -> "5".
                if v is None or (isinstance(v, float) and np.isnan(v)):
                    return ""
                if isinstance(v, (float, np.floating)) and float(v).is_integer() and abs(v) < 2 ** 53:
                    return str(int(v))
                return _text(v)

            df.applymap(cell).to_csv(tmp, index=False)
            tmp.close()
            args += ["--points", tmp.name]
    out = Path(out) if out is not None else Path("results") / f"{preset}-sweep"
    args += ["--out", os.fspath(out), "--jobs", str(int(jobs))]
    if threads:
        args += ["--threads", str(int(threads))]
    if figures:
        args.append("--figures")
    for p in ([plot] if isinstance(plot, str) else list(plot or [])):
        args += ["--plot", p]
    if overwrite:
        args.append("--overwrite")
    if quiet:
        args.append("--quiet")
    try:
        r = subprocess.run(args, stdout=None if not quiet else subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    finally:
        if tmp is not None:
            os.unlink(tmp.name)
    line = (r.stderr.strip().splitlines() or [""])[-1].removeprefix("tokdyn: ")
    if r.returncode == 2:
        raise ValueError(line)
    if r.returncode not in (0, 8):
        raise RuntimeError(line or f"tokdyn sweep exited with {r.returncode}")
    df = load_sweep(out)
    if r.returncode == 8:
        bad = int((df["status"] != "ok").sum())
        warnings.warn(f"tokdyn.sweep: {bad} of {len(df)} points failed (see the status, exit_code and error columns)", stacklevel=2)
    return df


def load_sweep(path: Union[str, os.PathLike]) -> "pd.DataFrame":
    """A sweep's ``sweep.csv`` as a DataFrame (exact doubles), ``attrs["dir"]`` its folder."""
    import pandas as pd

    # Only an empty cell is missing (a check's "n/a" is a verdict): numbers exact, text kept.
    df = pd.read_csv(Path(path) / "sweep.csv", float_precision="round_trip", keep_default_na=False, na_values=[""],
                     dtype={"hash": str, "status": str, "error": str})
    for c in df.columns:
        if df[c].dtype == object:
            df[c] = df[c].fillna("")
    df.attrs["dir"] = str(Path(path))
    return df


# ---------------------------------------------------------------------------------------------
# Models


def model_names() -> List[str]:
    """The registered models (``tokdyn models``)."""
    return list(_core.model_names())


#: The knobs of each registry model that decide which weights act at each depth step
#: (``Model.trajectory(schedule=...)``); the RoPE step has one weight-tied layer.
SCHEDULE_KNOBS: Dict[str, Tuple[str, ...]] = {
    n: tuple(json.loads(_core.model_schema_json(n)).get("schedule_knobs", ())) for n in _core.model_names()
}  # from the registry (each model's descriptor declares its schedule knobs)


class Model:
    """A model of tokdyn's registry, built from its knobs (``tokdyn models NAME`` lists them), plus
    ``tokens``, ``seed`` and ``depth``.

    - ``x0``: its start state [rows, d] (rows: the tokens; hierarchical: then the block summaries);
    - ``step(X, layer)``: the state after layer ``layer`` (>= 1) from X [rows, d] or [runs, rows, d];
    - ``jvp(X, V, layer)``: its tangent map at X [rows, d] on k tangents V [k, rows, d];
    - ``trajectory(X0=None, depth=..., taps="all", schedule=None)``: {layer: state} of the selected
      layers, optionally under another weight schedule (``SCHEDULE_KNOBS``);
    - ``tap(name, X, layer)``: an internal quantity (``tap_names``), e.g. ``attention``
      [runs, heads, tokens, tokens] at the state X entering the layer.

    Mamba-2 runs in fp32 as the presets do (``step`` and ``trajectory``); its ``jvp`` is the exact
    double-precision forward mode.
    """

    def __init__(self, name: str, **knobs: Any):
        self._dir = tempfile.TemporaryDirectory(prefix=f"tokdyn-model-{name}-")
        sets = {k: _text(v) for k, v in knobs.items()}
        if "token_ids" in knobs and not isinstance(knobs["token_ids"], (str, os.PathLike)):
            ids = np.asarray(knobs["token_ids"], dtype=np.int64)
            if ids.ndim == 1:
                ids = ids[None, :]
            f = Path(self._dir.name) / "given_token_ids.npy"
            np.save(f, ids)
            sets["token_ids"] = str(f)
            sets.setdefault("tokens", str(ids.shape[1]))
        self._m = _core.Model(name, sets, self._dir.name)
        self.name = name
        self._given = dict(knobs)

    @property
    def knobs(self) -> Dict[str, str]:
        return dict(self._m.knobs)

    @property
    def tap_names(self) -> List[str]:
        return list(self._m.tap_names)

    @property
    def on_sphere(self) -> bool:
        return self._m.on_sphere

    @property
    def notes(self) -> Dict[str, Any]:
        return json.loads(self._m.notes_json)

    @property
    def x0(self) -> np.ndarray:
        return self._m.x0()

    def step(self, X: np.ndarray, layer: int) -> np.ndarray:
        """x(l) = F_l(x(l-1)) for l = ``layer`` (>= 1; the schedule decides which weights layer l uses):
        X [rows, d] or [runs, rows, d], the same shape back. On spheres (ssm, rope) each token stays
        on S^{d-1}; the Transformer and Mamba-2 move the residual stream."""
        return self._m.step(X, int(layer))

    def jvp(self, X: np.ndarray, V: np.ndarray, layer: int) -> np.ndarray:
        """DF_l(X)[V]: the exact tangent map of layer ``layer`` at X [rows, d] applied to k tangents
        V [k, rows, d] (one call for all k), [k, rows, d] back. The cocycle of depth_spectrum."""
        return self._m.jvp(X, V, int(layer))

    def trajectory(self, X0: Optional[np.ndarray] = None, depth: int = 100, taps: Union[str, Sequence[int]] = "all",
                   schedule: Optional[Mapping[str, Any]] = None) -> Dict[int, np.ndarray]:
        """x(0..depth) from X0 (default: the model's start state) by the drivers the presets use;
        returns {layer: state} for the layers ``taps`` selects ("all", "0:200:10", a list), each
        [rows, d] for a [rows, d] start or [runs, rows, d] for a batch, in the model's precision
        widened to float64 (Mamba-2: fp32 values).

        ``schedule``: which weights act at each depth step, for this trajectory only, as the
        model's schedule knobs (``SCHEDULE_KNOBS``): ``{"redraw": 10}`` (SSM: weights redrawn every
        10 layers; >= depth: one weight-tied layer), ``{"layers": "single", "layer": 3}`` (Mamba-2:
        block 3 repeated), ``{"tying": "looped", "loop": 4}`` (Transformer, hierarchical; the
        latter also ``refresh_every``). The same seed draws the same weights as the model built
        with those knobs."""
        m = self
        if schedule is not None:
            allowed = SCHEDULE_KNOBS.get(self.name, ())
            bad = sorted(set(schedule) - set(allowed))
            if bad:
                raise ValueError(f"schedule: {', '.join(bad)} not a schedule knob of model {self.name}; expected "
                                 + (", ".join(allowed) if allowed else "none (one weight-tied layer at every depth step)"))
            m = Model(self.name, **{**self._given, **schedule})
        X = m.x0 if X0 is None else np.asarray(X0, dtype=np.float64)
        sel = taps if isinstance(taps, str) else ",".join(str(int(t)) for t in taps)
        out = dict(m._m.trajectory(X, int(depth), sel))
        if X.ndim == 2:  # one state in, one state per layer out ([rows, d])
            out = {k: v[0] for k, v in out.items()}
        return out

    def hidden_states(self, token_ids: Optional[Sequence[int]] = None, depth: int = 100, taps: Union[str, Sequence[int]] = "all",
                      X0: Optional[np.ndarray] = None, **switches: Any) -> np.ndarray:
        """The states of the selected layers stacked like Hugging Face's ``output_hidden_states``:
        [taps, runs, tokens, d] (layer 0: the embedding / start state).

        ``token_ids`` ([tokens] or [batch, tokens], as Hugging Face takes a batch: one run per row;
        Mamba-2, GPT-2, NeoX, Llama) and ``switches`` (Mamba-2's ``gate``, ``silu_bc``, ``silu_x``,
        ``conv``, ``d_skip``, ``mixer_norm``; the decoder families' ``use_positions``, ``sublayers``,
        ``beta``, ``qk``) build the same model with those knobs changed; ``X0`` [rows, d] or
        [runs, rows, d] starts from a given state. The last entry is the residual stream after the
        last layer, without the final norm (Hugging Face's last hidden state has it applied)."""
        if token_ids is not None and X0 is not None:
            raise ValueError("hidden_states: give token_ids (embedded as the start) or X0 (a start state), not both")
        m = self
        if token_ids is not None or switches:
            knobs = {**self._given, **switches}
            if token_ids is not None:
                knobs["token_ids"] = np.asarray(token_ids, dtype=np.int64)
                knobs.pop("tokens", None)
            m = Model(self.name, **knobs)
        X = m.x0 if X0 is None else np.asarray(X0, dtype=np.float64)
        sel = taps if isinstance(taps, str) else ",".join(str(int(t)) for t in taps)
        t = dict(m._m.trajectory(X, int(depth), sel))  # {layer: [runs, rows, d]}
        return np.stack([t[k] for k in sorted(t)])

    def attentions(self, token_ids: Optional[Sequence[int]] = None, depth: Optional[int] = None,
                   X0: Optional[np.ndarray] = None, heads: Optional[Sequence[int]] = None) -> np.ndarray:
        """The attention probabilities of every layer 1..``depth`` along the trajectory, like Hugging Face's
        ``output_attentions``: [depth, runs, heads, tokens, tokens] (layer l's at the state entering it).
        ``depth`` defaults to the model's number of layers (``notes["model_config"]``) or 1; ``token_ids``
        [tokens] or [batch, tokens]; ``heads`` default all."""
        if "attention" not in " ".join(self.tap_names):
            raise ValueError(f"attentions: model {self.name} has no attention tap; expected one of "
                             + ", ".join(n for n in _core.model_names() if "attention" in json.loads(_core.model_schema_json(n))["taps"]))
        m = self
        if token_ids is not None:
            if X0 is not None:
                raise ValueError("attentions: give token_ids or X0, not both")
            knobs = {**self._given, "token_ids": np.asarray(token_ids, dtype=np.int64)}
            knobs.pop("tokens", None)
            m = Model(self.name, **knobs)
        if depth is None:
            cfg = m.notes.get("model_config", {})
            depth = int(cfg.get("n_layer", cfg.get("num_hidden_layers", 1))) if isinstance(cfg, dict) else 1
        X = m.x0 if X0 is None else np.asarray(X0, dtype=np.float64)
        batch = X if X.ndim == 3 else X[None]
        if heads is None:
            cfg = m.notes.get("model_config", {})
            nh = int(cfg.get("n_head", cfg.get("num_attention_heads", 1))) if isinstance(cfg, dict) else 1
            heads = range(nh)
        traj = dict(m._m.trajectory(batch, int(depth) - 1, "all")) if depth > 1 else {0: batch}
        return np.stack([m.tap("attention", traj[l - 1], l, heads=list(heads)) for l in range(1, int(depth) + 1)])

    def tap(self, name: str, X: np.ndarray, layer: int, heads: Sequence[int] = (0,)) -> np.ndarray:
        """The internal quantity ``name`` (``tap_names``) that layer ``layer`` computes at the state X
        entering it: ``attention`` [runs, heads, tokens, tokens] (row t: the weights token t gives
        the tokens, rows sum to 1), ``residual_mid`` [runs, tokens, d] (the Transformer's stream
        between its sublayers), ``q`` [runs, tokens] (the SSM / Mamba-2 interaction term of eq. (23)),
        ``mixing`` [runs, heads, tokens, tokens] (Mamba-2's SSD matrices of ``heads``)."""
        return self._m.tap(name, X, int(layer), [int(h) for h in heads])

    def __repr__(self) -> str:
        return f"tokdyn.models.{self.name}({', '.join(f'{k}={v}' for k, v in sorted(self.knobs.items()))})"


class _Models:
    """``tokdyn.models.NAME(**knobs)`` for every registered model; ``tokdyn.models.describe(NAME)``
    gives its knobs (types, defaults, ranges, help) and taps."""

    def __getattr__(self, name: str) -> Callable[..., Model]:
        if name.startswith("_") or name not in _core.model_names():
            raise AttributeError(f"tokdyn.models has no model '{name}'; expected one of {', '.join(_core.model_names())}")

        def make(**knobs: Any) -> Model:
            return Model(name, **knobs)

        make.__name__ = name
        make.__doc__ = self.describe(name).get("description", "")
        return make

    def describe(self, name: str) -> Dict[str, Any]:
        return json.loads(_core.model_schema_json(name))

    def __dir__(self) -> List[str]:
        return list(_core.model_names()) + ["describe"]


models = _Models()


# ---------------------------------------------------------------------------------------------
# Tokenizers (the C++ classes themselves: io/tokenizer.hpp)

Tokenizer = _core.Tokenizer
Encoding = _core.Encoding
for _cls in (Tokenizer, Encoding):
    _cls.__module__ = "tokdyn"
Tokenizer.__doc__ = """A checkpoint's own tokenizer, read from its Hugging Face ``tokenizer.json`` and encoding and
decoding exactly as Hugging Face's ``tokenizers`` does (BPE models: GPT-2-style byte-level,
SentencePiece-style with byte fallback; added tokens, normalizers, pre-tokenizers, templates,
decoders). Anything tokdyn does not implement is refused by name (``ValueError``), never approximated.

- ``Tokenizer.from_file(path)``: a tokenizer.json, or a folder holding one;
  ``Tokenizer.from_checkpoint(dir)``: a checkpoint folder's tokenizer.json;
  ``Tokenizer.from_json(text, name)``: the text of one.
- ``encode(text, add_special_tokens=True)`` -> ``Encoding`` (``ids``, ``pieces``, ``special``,
  ``unknown``, ``texts``); ``encode_batch(texts, add_special_tokens=True, threads=0)`` -> a list of
  them, encoded without the GIL on ``threads`` threads (0: every core), the same as one by one.
- ``decode(ids, skip_special_tokens=False)`` (a list or a 1-D NumPy integer array) -> str.
- ``token_to_id(token)`` (None when absent), ``id_to_token(id)``, ``piece_text(id)``, ``is_special(id)``;
  the properties ``vocab_size``, ``source``, ``summary``, ``sha256``.
"""
Encoding.__doc__ = """One encoded text (``Tokenizer.encode``):

- ``ids``: the token ids, a NumPy int64 array;
- ``pieces``: their vocabulary strings (Hugging Face's tokens: "Ġworld" for GPT-2);
- ``special``: per token, whether it is an added special token or one the template added (BOS / EOS);
- ``unknown``: the spans of the text the vocabulary could not produce (each became the unknown
  token, or was dropped when the model has neither an unknown token nor byte fallback);
- ``texts``: each token decoded alone (``Tokenizer.piece_text``: " world"), for labels.

``len(e)`` is the number of tokens; two Encodings are equal when their ids, pieces, special flags
and unknown spans are.
"""


# ---------------------------------------------------------------------------------------------
# Analyses


def gram_metrics(X: np.ndarray) -> Dict[str, np.ndarray]:
    """Per run of X [runs, tokens, d] (or [tokens, d]), tokens normalised first:

    - ``lambda1``: the largest eigenvalue of G = Ẑ Ẑᵀ divided by the number of tokens (1: consensus);
    - ``participation``: r = (Σ_k λ̄_k²)⁻¹ = n² / ‖G‖_F² (1: rank one);
    - ``min_cosine``: min_{i<j} ⟨ẑ_i, ẑ_j⟩;
    - ``consensus_dist_axes``: distance to the SSM paper's consensus sets (s_i e_μ) (Def. III.1);
    - ``consensus_dist_diagonal``: distance to {(x, …, x)}: √(2n − 2 |Σ ẑ_i|) (RoPE §1.9).
    """
    return dict(_core.gram_metrics(np.asarray(X, dtype=np.float64)))


def pe_window(q: np.ndarray) -> Dict[str, Any]:
    """Persistency-of-excitation windows of a series q(1..κ) (The Attention Within eq. (23)):
    ``W[T-1]`` = min_t (1/T) Σ_{s=t+1}^{t+T} q(s) for T = 1..κ, and ``t_star`` = min{T : W(T) > 0}
    (None when no window is admissible)."""
    return dict(_core.pe_window(np.asarray(q, dtype=np.float64)))


def pe_readings(q: np.ndarray) -> Dict[str, Any]:
    """T* of eq. (23) for every (run, token) of q [runs, tokens, depth] and its four readings
    (text: max over all; caption: max over runs for token 1; envelope: the smallest T with
    min over runs and tokens of W(T) > 0; envelope_first_token), as the Mamba-2 presets report them."""
    return dict(_core.pe_readings(np.asarray(q, dtype=np.float64)))


def consensus_spectrum(positions: Sequence[float], freqs: Sequence[float], beta: float,
                       energies: Optional[Sequence[float]] = None, method: str = "similarity") -> Dict[str, Any]:
    """Spectrum of the linearised RoPE attention flow at consensus (RoPE paper eqs. (13)-(14)):
    K_ij = Σ_l a_l cos(ω_l (p_i − p_j)), W = exp(β (K − 1)), A = D⁻¹ W. ``eigenvalues`` of A
    (descending) and the consensus ``gap`` 1 − λ₂, by one of Thm 7.3's three formulations
    (``similarity``: S = D^-1/2 W D^-1/2; ``laplacian``: I − S; ``generalized``: W v = λ D v).
    ``energies`` a_l (default: equal, summing to 1). A resonant ring (positions 0..n−1, one
    frequency 2π q/n) shows the Bessel aliasing of eq. (22)."""
    f = [float(x) for x in freqs]
    a = [1.0 / len(f)] * len(f) if energies is None else [float(x) for x in energies]
    return dict(_core.consensus_spectrum([float(p) for p in positions], f, a, float(beta), str(method)))


def green_solve(B: np.ndarray, h: np.ndarray, tails: str = "constant") -> Dict[str, Any]:
    """The Green operator of a dichotomy (coupling paper Lemma 17): the bounded solution u [L+1, d]
    of u(l+1) = B(l) u(l) + h(l), l = 0..L-1, of B [L, d, d] extended two-sidedly by its end maps
    (``tails``: the forcing continues constant or is zero outside the window), by the block-banded
    BVP. ``residual`` = max_l |u(l+1) - B(l) u(l) - h(l)|. When the end maps are not hyperbolic with
    equal unstable dimensions, or the BVP is singular, ``u`` is None and ``why_not`` says why."""
    return dict(_core.green_solve(np.asarray(B, dtype=np.float64), np.asarray(h, dtype=np.float64), str(tails)))


def cocycle_spectra(B: np.ndarray, k: int = 0, H: int = 0, burn_in: int = 0, *, bundles: bool = True,
                    slack: float = 0.1) -> Dict[str, Any]:
    """Spectra of the cocycle Φ(l, 0) = B(l-1)…B(0) of B [L, d, d] (coupling paper Thm 5):

    discrete QR (Benettin): B(l) Q_l = Q_{l+1} R_l, diag R_l > 0; ``mu[i]`` = (1/N) Σ_l log R_l[i,i]
    over layers burn_in..L-1 (the k top Lyapunov exponents, k = 0: all d); ``bohl_intervals``: per
    exponent [exp(min m), exp(max m)] of its Steklov averages over windows of ``H`` layers (H = 0:
    N/4); ``dichotomy_spectrum``: their union; ``hyperbolic``: "yes" / "no" / "undecided" whether 1
    lies outside it, with ``margin`` and ``tolerance`` (the estimate's own error); ``log_diag``
    [N, k]: log R_l[i, i]; ``unresolved_at``: per exponent the first layer where R_ii fell to
    round-off (-1: resolved).

    With ``bundles`` (when hyperbolic): the two-sided bundles V_par / V_perp of the constant
    extension (``bundles``: k = dim V_par, per layer the minimal ``angle`` between them and
    ‖P_+(l)‖) and the dichotomy ``constants`` C_-, C_+, C = max at rates r_- = (top of the decaying
    spectrum)^(1 - slack), r_+ = (bottom of the growing spectrum)^(1 - slack), the rule of
    ``cocycle-spectra`` applied to the spectrum at window ``H`` (the preset takes the widest of its
    windows' spectra); otherwise both are None and ``why_not`` says why.
    """
    if not bundles and slack != 0.1:
        raise ValueError("cocycle_spectra: slack sets the constants' rates; it applies only with bundles=True")
    return dict(_core.cocycle_spectra(np.asarray(B, dtype=np.float64), int(k), int(H), int(burn_in), bool(bundles),
                                      float(slack)))


def depth_spectrum(model_or_step: Union[Model, Callable], jvp: Optional[Callable] = None, X0: Optional[np.ndarray] = None,
                   depth: int = 100, k: int = 4, *, burn_in: int = 0, on_sphere: bool = False, seed: int = 0,
                   H: int = 0, V0: Optional[np.ndarray] = None) -> Dict[str, Any]:
    """Top-k Lyapunov exponents and dichotomy intervals of a depth map (coupling paper eq. (10)).

    Two forms:

    - ``depth_spectrum(model, depth=..., k=..., X0=None)`` for a registry model (``tokdyn.models``),
      through its exact JVP (as ``tokdyn run depth-spectra``);
    - ``depth_spectrum(step, jvp, X0, depth, k, on_sphere=False)`` for any model: ``step(X, l)``
      returns the state after layer l (>= 1) from X [rows, d]; ``jvp(X, V, l)`` returns the tangent
      map of layer l at X applied to k tangents V [k, rows, d] (e.g. a PyTorch block through
      ``torch.func.jvp`` with ``vmap``). ``on_sphere``: every token lives on the unit sphere (the
      tangents are projected onto its tangent space).

    The Benettin QR is tokdyn's: X_l = step(X_{l-1}, l), V_l = jvp(X_{l-1}, Q_{l-1}, l) = Q_l R_l;
    ``mu[i]`` = mean over layers burn_in+1..depth of log R_l[i, i]; ``mu_running`` the running
    means; ``bohl_intervals`` / ``dichotomy_spectrum`` / ``hyperbolic`` as in ``cocycle_spectra``
    (window H, 0: (depth - burn_in) / 4); ``final_state`` X_depth. The initial frame is Gaussian
    (stream ``seed``), or ``V0`` [k, rows, d] (projected onto the tangent space and orthonormalised).
    """
    V = None if V0 is None else np.asarray(V0, dtype=np.float64)
    if isinstance(model_or_step, Model):
        if jvp is not None:
            raise ValueError("depth_spectrum(model, ...): a registry model brings its own exact jvp; give jvp only with a step callable")
        if on_sphere:
            raise ValueError("depth_spectrum(model, ...): on_sphere is the model's own (Model.on_sphere); give it only with callables")
        X = None if X0 is None else np.asarray(X0, dtype=np.float64)
        return dict(_core.depth_spectrum_model(model_or_step._m, int(depth), int(k), int(burn_in), int(seed), int(H), X, V))
    if jvp is None or X0 is None:
        raise ValueError("depth_spectrum(step, jvp, X0, depth, k): give the step and jvp callables and the start state X0 [rows, d]")
    return dict(_core.depth_spectrum_callbacks(model_or_step, jvp, np.asarray(X0, dtype=np.float64), int(depth), int(k),
                                               int(burn_in), bool(on_sphere), int(seed), int(H), V))


from .training import train, train_tokenizer  # noqa: E402  (docs/training.md)
