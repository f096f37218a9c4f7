# Type stubs of the package tokdyn (the documented interface; see docs/python.md).
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt
import pandas as pd

__version__: str

ArrayF = npt.NDArray[np.float64]
PathLike = Union[str, os.PathLike[str]]

def presets() -> List[Dict[str, str]]:
    """The named experiments (name, description): `tokdyn presets`."""
def show(preset: str) -> Dict[str, Any]:
    """A preset's parameters and declared outputs: `tokdyn show PRESET --json`."""
def run(preset: str, out: Optional[PathLike] = ..., *, threads: int = ..., figures: bool = ..., overwrite: bool = ...,
        inputs: bool = ..., **params: Any) -> Result:
    """Runs a preset in-process (the CLI's validation; the same bytes) and returns its results."""
def load(path: PathLike) -> Result:
    """Opens a results folder."""

class Taps:
    axes: Tuple[str, str, str, str]  # ("layer", "run", "row", "d")
    layers: List[int]
    array: ArrayF  # [layer, run, row, d]
    def at(self, layer: int) -> ArrayF: ...

class Result:
    dir: Path
    manifest: Dict[str, Any]
    preset: str
    @property
    def params(self) -> Dict[str, Any]: ...
    @property
    def table_names(self) -> List[str]: ...
    @property
    def tables(self) -> Dict[str, pd.DataFrame]: ...
    @property
    def summaries(self) -> Optional[pd.DataFrame]: ...
    @property
    def checks(self) -> Optional[pd.DataFrame]: ...
    def table(self, name: str) -> pd.DataFrame: ...
    def describe(self, name: str) -> Optional[Dict[str, Any]]: ...
    def array(self, path: str) -> np.ndarray: ...
    def variants(self) -> List[str]: ...
    def taps(self, variant: Optional[str] = ...) -> Taps: ...
    def __getitem__(self, name: str) -> pd.DataFrame: ...
    def __getattr__(self, name: str) -> pd.DataFrame: ...

def sweep(preset: str, out: Optional[PathLike] = ..., *, grid: Optional[Mapping[str, Any]] = ..., zip: Optional[Mapping[str, Any]] = ...,
          points: Any = ..., jobs: int = ..., threads: int = ..., figures: bool = ..., plot: Union[None, str, Sequence[str]] = ...,
          overwrite: bool = ..., quiet: bool = ..., **params: Any) -> pd.DataFrame:
    """`tokdyn sweep`: the cartesian product of `grid`, the `zip`ped axis and the `points` rows; returns
    sweep.csv (one row per point: parameters, status, exit_code, error, summaries, check verdicts)."""
def load_sweep(path: PathLike) -> pd.DataFrame:
    """A sweep's sweep.csv (exact doubles; attrs["dir"] the folder)."""

def model_names() -> List[str]: ...
SCHEDULE_KNOBS: Dict[str, Tuple[str, ...]]

class Model:
    name: str
    def __init__(self, name: str, **knobs: Any) -> None: ...
    @property
    def knobs(self) -> Dict[str, str]: ...
    @property
    def tap_names(self) -> List[str]: ...
    @property
    def on_sphere(self) -> bool: ...
    @property
    def notes(self) -> Dict[str, Any]: ...
    @property
    def x0(self) -> ArrayF:
        """The start state [rows, d]."""
    def step(self, X: npt.ArrayLike, layer: int) -> ArrayF:
        """X(layer) from X(layer - 1): [rows, d] or [runs, rows, d]."""
    def jvp(self, X: npt.ArrayLike, V: npt.ArrayLike, layer: int) -> ArrayF:
        """D step(X, layer) applied to k tangents V [k, rows, d]."""
    def trajectory(self, X0: Optional[npt.ArrayLike] = ..., depth: int = ..., taps: Union[str, Sequence[int]] = ...,
                   schedule: Optional[Mapping[str, Any]] = ...) -> Dict[int, ArrayF]: ...
    def hidden_states(self, token_ids: Optional[Sequence[int]] = ..., depth: int = ..., taps: Union[str, Sequence[int]] = ...,
                      X0: Optional[npt.ArrayLike] = ..., **switches: Any) -> ArrayF:
        """[taps, runs, tokens, d], like Hugging Face's output_hidden_states."""
    def attentions(self, token_ids: Optional[npt.ArrayLike] = ..., depth: Optional[int] = ..., X0: Optional[npt.ArrayLike] = ...,
                   heads: Optional[Sequence[int]] = ...) -> ArrayF:
        """[depth, runs, heads, tokens, tokens], like Hugging Face's output_attentions."""
    def tap(self, name: str, X: npt.ArrayLike, layer: int, heads: Sequence[int] = ...) -> ArrayF:
        """An internal quantity of layer `layer` at the state X entering it (tap_names)."""

class _Models:
    def __getattr__(self, name: str) -> Callable[..., Model]: ...
    def describe(self, name: str) -> Dict[str, Any]: ...
    def ssm(self, **knobs: Any) -> Model: ...
    def rope(self, **knobs: Any) -> Model: ...
    def mamba2(self, **knobs: Any) -> Model: ...
    def transformer(self, **knobs: Any) -> Model: ...
    def hierarchical(self, **knobs: Any) -> Model: ...
    def gpt2(self, **knobs: Any) -> Model: ...
    def llama(self, **knobs: Any) -> Model: ...
    def neox(self, **knobs: Any) -> Model: ...

models: _Models

def gram_metrics(X: npt.ArrayLike) -> Dict[str, ArrayF]:
    """lambda1, participation, min_cosine, consensus_dist_axes, consensus_dist_diagonal per run."""
def pe_window(q: npt.ArrayLike) -> Dict[str, Any]:
    """W(T) of eq. (23) for T = 1..kappa and T* = min{T : W(T) > 0} (None: no admissible window)."""
def pe_readings(q: npt.ArrayLike) -> Dict[str, Any]:
    """T* per (run, token) of q [runs, tokens, depth] and the text / caption / envelope readings."""
def consensus_spectrum(positions: Sequence[float], freqs: Sequence[float], beta: float,
                       energies: Optional[Sequence[float]] = ..., method: str = ...) -> Dict[str, Any]:
    """Eigenvalues and gap of the consensus kernel (RoPE eqs. (13)-(14), Thm 7.3)."""
def green_solve(B: npt.ArrayLike, h: npt.ArrayLike, tails: str = ...) -> Dict[str, Any]:
    """The bounded solution u [L+1, d] of u(l+1) = B(l) u(l) + h(l) (Lemma 17), or why_not."""
def cocycle_spectra(B: npt.ArrayLike, k: int = ..., H: int = ..., burn_in: int = ..., *, bundles: bool = ...,
                    slack: float = ...) -> Dict[str, Any]:
    """Lyapunov exponents (discrete QR), Bohl intervals, dichotomy spectrum, hyperbolicity of B [L, d, d]."""
def depth_spectrum(model_or_step: Union[Model, Callable[[ArrayF, int], npt.ArrayLike]],
                   jvp: Optional[Callable[[ArrayF, ArrayF, int], npt.ArrayLike]] = ..., X0: Optional[npt.ArrayLike] = ...,
                   depth: int = ..., k: int = ..., *, burn_in: int = ..., on_sphere: bool = ..., seed: int = ...,
                   H: int = ..., V0: Optional[npt.ArrayLike] = ...) -> Dict[str, Any]:
    """Top-k Lyapunov exponents and dichotomy intervals of a registry model or of Python callables."""
