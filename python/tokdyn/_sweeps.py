"""tokdyn's sweeps, re-exported by the package: ``sweep`` runs ``tokdyn sweep`` (the binary: a
grid, zipped axes or points of one preset) and returns its ``sweep.csv`` as a pandas DataFrame;
``load_sweep`` reads one; ``_binary`` finds the tokdyn binary (tokdyn.training uses it too)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from ._errors import BY_EXIT_CODE, InternalError
from ._presets import _text


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
        raise InternalError("tokdyn.sweep: the tokdyn binary was not found; set TOKDYN_BIN or put tokdyn on PATH")
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
    if r.returncode not in (0, 8):
        raise BY_EXIT_CODE.get(r.returncode, InternalError)(line or f"tokdyn sweep exited with {r.returncode}")
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


# Shown, documented and pickled as the package's own (tokdyn re-exports them).
for _obj in (_binary, _axis_text, sweep, load_sweep):
    _obj.__module__ = "tokdyn"
