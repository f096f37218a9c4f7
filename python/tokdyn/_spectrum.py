"""The result of ``tokdyn.depth_spectrum``: ``DepthSpectrum`` (the exponents sorted, every field named
by its scale, a manifest, ``save(dir)`` as a results folder), and ``_publish``, which puts a folder
written beside its target in place atomically under the CLI's rules for an output folder."""
from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Union

import numpy as np

from ._errors import InputError

_FIELDS = ("exponents_log", "exponents_growth", "qr_column", "running_log", "per_layer_log", "bohl_growth",
           "dichotomy_growth", "hyperbolic", "margin_log", "tolerance_log", "unresolved_from_layer", "H", "depth",
           "burn_in", "k", "dim", "final_state", "manifest")


class DepthSpectrum:
    """The top-k Lyapunov spectrum of a depth map (``tokdyn.depth_spectrum``).

    **Order.** Every per-exponent field is sorted by exponent, largest first (descending; equal
    exponents keep the QR order). ``qr_column[i]`` is the QR column entry i came from: the order the
    Benettin QR produced, which is the CLI's order (``lyapunov.csv``'s ``i`` of ``tokdyn run
    depth-spectra``).

    **Scales.** A name ending in ``_log`` is on the log scale, per layer (a Lyapunov exponent μ, a
    mean of log R_ii: < 0 decays); one ending in ``_growth`` is a growth scale γ = e^μ per layer
    (< 1 decays; 1 on the log scale is 0).

    - ``exponents_log`` [k]: the exponents μ_i (mean of log R_l[i, i] over layers burn_in+1..depth);
    - ``exponents_growth`` [k]: γ_i = e^{μ_i} (0 where some R_ii was exactly 0);
    - ``running_log`` [N, k]: running means, row j over layers burn_in+1..burn_in+1+j (N = depth - burn_in);
    - ``per_layer_log`` [N, k]: log R_l[i, i] of each measured layer l = burn_in+1..depth;
    - ``bohl_growth`` [k, 2]: each exponent's Bohl interval [lower, upper] for the Steklov window ``H``;
    - ``dichotomy_growth`` [m, 2]: the merged Bohl intervals (the dichotomy spectrum), ascending;
    - ``hyperbolic``: "yes" / "no" / "undecided" whether 1 lies outside it; ``margin_log`` the signed
      distance of log 1 = 0 from it (> 0: outside), ``tolerance_log`` the estimate's own error;
    - ``unresolved_from_layer`` [k]: the first layer at which R_ii fell to round-off (-1: resolved);
    - ``H``, ``depth``, ``burn_in``, ``k``, ``dim`` (the tangent dimension), ``final_state`` [rows, d];
    - ``manifest``: what was computed and how (parameters, model, version, seed, start time, wall time).

    ``r["exponents_log"]`` is ``r.exponents_log``; the keys of the dict this function returned
    before (``mu``, ``mu_running``, ``log_diag``, ``bohl_intervals``, ``dichotomy_spectrum``,
    ``margin``, ``tolerance``, ``unresolved_at``, ...) still give their old values, in QR order.
    ``save(dir)`` writes the result as a results folder (``tokdyn.load`` reads it).
    """

    def __init__(self, raw: Dict[str, Any], manifest: Dict[str, Any]):
        self._raw = raw
        mu = np.asarray(raw["mu"], dtype=np.float64)
        order = np.argsort(-mu, kind="stable")
        self.qr_column: np.ndarray = order.astype(np.int64)
        self.exponents_log: np.ndarray = mu[order]
        self.exponents_growth: np.ndarray = np.asarray(raw["gamma"], dtype=np.float64)[order]
        self.running_log: np.ndarray = np.asarray(raw["mu_running"])[:, order]
        self.per_layer_log: np.ndarray = np.asarray(raw["log_diag"])[:, order]
        self.bohl_growth: np.ndarray = np.asarray(raw["bohl_intervals"], dtype=np.float64).reshape(-1, 2)[order]
        spec = np.asarray(raw["dichotomy_spectrum"], dtype=np.float64).reshape(-1, 2)
        self.dichotomy_growth: np.ndarray = spec[np.argsort(spec[:, 0], kind="stable")]
        self.hyperbolic: str = raw["hyperbolic"]
        self.margin_log: float = float(raw["margin"])
        self.tolerance_log: float = float(raw["tolerance"])
        self.unresolved_from_layer: np.ndarray = np.asarray(raw["unresolved_at"], dtype=np.int64).reshape(-1)[order]
        self.H: int = int(raw["H"])
        self.depth: int = int(raw["depth"])
        self.burn_in: int = int(raw["burn_in"])
        self.k: int = int(mu.size)
        self.dim: int = int(raw["dim"])
        self.final_state: np.ndarray = raw["final_state"]
        self.manifest: Dict[str, Any] = manifest

    def keys(self) -> List[str]:
        return list(_FIELDS)

    def __getitem__(self, name: str) -> Any:
        if name in _FIELDS:
            return getattr(self, name)
        if name in self._raw:  # the dict's keys before the result had a class (QR order)
            return self._raw[name]
        raise KeyError(f"DepthSpectrum has no field '{name}'; expected one of {', '.join(_FIELDS)}")

    def __contains__(self, name: object) -> bool:
        return name in _FIELDS or name in self._raw

    def to_dict(self) -> Dict[str, Any]:
        return {n: getattr(self, n) for n in _FIELDS}

    def save(self, dir: Union[str, os.PathLike], overwrite: bool = False) -> Path:
        """Writes the result as a results folder and returns its path:

        - ``exponents.csv``: one exponent per row, descending: ``rank`` (0: the largest),
          ``qr_column``, ``exponent_log``, ``exponent_growth``, ``bohl_lower_growth``,
          ``bohl_upper_growth``, ``resolved``, ``unresolved_from_layer`` (empty when resolved);
        - ``running.csv``: one exponent at one measured layer: ``layer``, ``rank``,
          ``per_layer_log``, ``running_log``;
        - ``dichotomy.csv``: one merged interval: ``H``, ``interval`` (ascending), ``lower_growth``, ``upper_growth``;
        - ``final_state.npy``; ``manifest.json``: the manifest, its ``files`` and ``hyperbolic``.

        Numbers are written round-trip exact. The folder is written beside ``dir`` and renamed into
        place (an interrupted save leaves nothing). ``dir`` may be new or an empty folder; a folder
        holding a previous tokdyn result is replaced with ``overwrite=True``; anything else is
        refused (``InputError``) and left untouched."""
        def write(tmp: Path) -> List[str]:
            rows = [[i, int(self.qr_column[i]), _num(self.exponents_log[i]), _num(self.exponents_growth[i]),
                     _num(self.bohl_growth[i, 0]), _num(self.bohl_growth[i, 1]),
                     "true" if self.unresolved_from_layer[i] < 0 else "false",
                     "" if self.unresolved_from_layer[i] < 0 else int(self.unresolved_from_layer[i])] for i in range(self.k)]
            _csv(tmp / "exponents.csv", ["rank", "qr_column", "exponent_log", "exponent_growth", "bohl_lower_growth",
                                         "bohl_upper_growth", "resolved", "unresolved_from_layer"], rows)
            _csv(tmp / "running.csv", ["layer", "rank", "per_layer_log", "running_log"],
                 ([self.burn_in + 1 + j, i, _num(self.per_layer_log[j, i]), _num(self.running_log[j, i])]
                  for j in range(self.per_layer_log.shape[0]) for i in range(self.k)))
            _csv(tmp / "dichotomy.csv", ["H", "interval", "lower_growth", "upper_growth"],
                 ([self.H, j, _num(lo), _num(hi)] for j, (lo, hi) in enumerate(self.dichotomy_growth)))
            np.save(tmp / "final_state.npy", np.asarray(self.final_state, dtype=np.float64))
            files = ["dichotomy.csv", "exponents.csv", "final_state.npy", "running.csv"]
            m = dict(self.manifest, files=files, hyperbolic=self.hyperbolic)
            (tmp / "manifest.json").write_text(json.dumps(m, indent=2, default=_json_default) + "\n")
            return files

        return _publish(dir, overwrite, write, "DepthSpectrum.save")

    def __repr__(self) -> str:
        mu = np.array2string(self.exponents_log, precision=4, separator=", ")
        return f"DepthSpectrum(exponents_log={mu}, hyperbolic={self.hyperbolic!r}, depth={self.depth}, k={self.k})"


def _num(x: Any) -> str:
    return repr(float(x))  # the shortest text that reads back to the same double ('inf', 'nan' included)


def _csv(path: Path, header: Sequence[str], rows: Any) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def _previous_result(d: Path) -> bool:
    """``d`` holds exactly a tokdyn result: a manifest.json naming a version and its files, and those files."""
    try:
        m = json.loads((d / "manifest.json").read_text())
        listed = {"manifest.json", *m["files"]}
        if not isinstance(m.get("version"), str):
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    found = set()
    for root, dirs, names in os.walk(d):
        for n in names + [x for x in dirs if os.path.islink(os.path.join(root, x))]:
            p = Path(root) / n
            if p.is_symlink() or not p.is_file():
                return False
            found.add(p.relative_to(d).as_posix())
    return found == listed


def _publish(dir: Union[str, os.PathLike], overwrite: bool, write: Callable[[Path], Any], what: str) -> Path:
    """Writes a results folder with ``write(tmp)`` into ``<dir>.tmp-<pid>`` beside ``dir`` and
    renames it into place. ``dir`` may be missing or an empty folder; a previous tokdyn result is
    replaced with ``overwrite``; anything else is refused (InputError) and left untouched. On any
    error or interrupt the temporary folder is removed."""
    target = Path(os.path.abspath(os.fspath(dir)))
    if target == Path(target.anchor) or target.name in ("", ".", ".."):
        raise InputError(f"{what}: '{dir}' is not a usable folder; expected a new folder name")
    replace = False
    if os.path.lexists(target):
        if target.is_symlink() or not target.is_dir():
            raise InputError(f"{what}: '{target}' exists and is not a folder; choose a new folder")
        entries = sorted(os.listdir(target))
        if entries:
            if not _previous_result(target):
                more = f" and {len(entries) - 1} other entries" if len(entries) > 1 else ""
                raise InputError(f"{what}: '{target}' holds '{entries[0]}'{more}; tokdyn only replaces its own results, "
                                 "choose a new folder")
            if not overwrite:
                raise InputError(f"{what}: '{target}' holds a previous tokdyn result; pass overwrite=True to replace it, "
                                 "or choose another folder")
            replace = True
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f"{target.name}.tmp-{os.getpid()}"
    old = target.parent / f"{target.name}.tmp-{os.getpid()}.old"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        write(tmp)
        if replace:
            os.rename(target, old)
            try:
                os.rename(tmp, target)
            except BaseException:
                os.rename(old, target)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, target)  # replaces an empty folder atomically
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


# Shown, documented and pickled as the package's own (tokdyn re-exports it).
DepthSpectrum.__module__ = "tokdyn"
