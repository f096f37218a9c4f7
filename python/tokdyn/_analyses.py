"""tokdyn's analyses as functions of NumPy arrays, re-exported by the package: Gram metrics,
persistency of excitation, RoPE consensus spectra, the Green operator of a dichotomy, the spectra of
a cocycle and the depth spectrum of a registry model or of Python callables (a ``DepthSpectrum``,
python/tokdyn/_spectrum.py)."""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional, Sequence, Union

import numpy as np

from . import _core
from ._errors import InputError
from ._models import Model
from ._spectrum import DepthSpectrum


# ---------------------------------------------------------------------------------------------
# Analyses


def gram_metrics(X: np.ndarray) -> Dict[str, np.ndarray]:
    """Gram metrics of token configurations X [..., tokens, d], tokens normalised first; every axis
    before the last two indexes a configuration: [runs, tokens, d], ``Model.hidden_states``'
    [taps, runs, tokens, d], ``Result.taps(...).array`` [layer, run, row, d]. Each metric is an
    array of the shape of those leading axes (``X.shape[:-2]``: [taps, runs] for hidden states);
    a single [tokens, d] gives arrays of shape (1,).

    - ``lambda1``: the largest eigenvalue of G = Ẑ Ẑᵀ divided by the number of tokens (1: consensus);
    - ``participation``: r = (Σ_k λ̄_k²)⁻¹ = n² / ‖G‖_F² (1: rank one);
    - ``min_cosine``: min_{i<j} ⟨ẑ_i, ẑ_j⟩;
    - ``consensus_dist_axes``: distance to the SSM paper's consensus sets (s_i e_μ) (Def. III.1);
    - ``consensus_dist_diagonal``: distance to {(x, …, x)}: √(2n − 2 |Σ ẑ_i|) (RoPE §1.9).

    A C-contiguous float64 input is read in place (no copy), whatever its number of axes.
    """
    A = np.asarray(X, dtype=np.float64)
    if A.ndim < 2:
        raise InputError(f"X: shape [{', '.join(map(str, A.shape))}]; expected [..., tokens, d] (e.g. [runs, tokens, d], "
                         "or hidden states [taps, runs, tokens, d])")
    if A.ndim <= 3:
        return dict(_core.gram_metrics(A))
    lead = A.shape[:-2]
    if 0 in lead:  # no configuration: empty arrays of that shape
        return {k: np.zeros(lead) for k in dict(_core.gram_metrics(np.zeros((1,) + A.shape[-2:])))}
    flat = A.reshape((-1,) + A.shape[-2:])  # a view of a C-contiguous array
    return {k: v.reshape(lead) for k, v in dict(_core.gram_metrics(flat)).items()}


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
        raise InputError("cocycle_spectra: slack sets the constants' rates; it applies only with bundles=True")
    return dict(_core.cocycle_spectra(np.asarray(B, dtype=np.float64), int(k), int(H), int(burn_in), bool(bundles),
                                      float(slack)))


def depth_spectrum(model_or_step: Union[Model, Callable], jvp: Optional[Callable] = None, X0: Optional[np.ndarray] = None,
                   depth: int = 100, k: int = 4, *, burn_in: int = 0, on_sphere: bool = False, seed: int = 0,
                   H: int = 0, V0: Optional[np.ndarray] = None) -> DepthSpectrum:
    """Top-k Lyapunov exponents and dichotomy intervals of a depth map (coupling paper eq. (10)), as a
    ``DepthSpectrum``: exponents sorted largest first (``qr_column``: the QR order), fields named by
    their scale (``exponents_log``, ``exponents_growth``, ``bohl_growth``, ``dichotomy_growth``, ...),
    a ``manifest`` and ``save(dir)``.

    Two forms:

    - ``depth_spectrum(model, depth=..., k=..., X0=None)`` for a registry model (``tokdyn.models``),
      through its exact JVP (as ``tokdyn run depth-spectra``);
    - ``depth_spectrum(step, jvp, X0, depth, k, on_sphere=False)`` for any model: ``step(X, l)``
      returns the state after layer l (>= 1) from X [rows, d]; ``jvp(X, V, l)`` returns the tangent
      map of layer l at X applied to k tangents V [k, rows, d] (e.g. a PyTorch block through
      ``jvp`` under ``vmap``: docs/python.md). ``on_sphere``: every token lives on the unit sphere
      (the tangents are projected onto its tangent space).

    The Benettin QR is tokdyn's: X_l = step(X_{l-1}, l), V_l = jvp(X_{l-1}, Q_{l-1}, l) = Q_l R_l;
    exponent i is the mean over layers burn_in+1..depth of log R_l[i, i]; the Bohl intervals, the
    dichotomy spectrum and ``hyperbolic`` as in ``cocycle_spectra`` (window H, 0: (depth - burn_in) / 4);
    ``final_state`` X_depth. The initial frame is Gaussian (stream ``seed``), or ``V0`` [k, rows, d]
    (projected onto the tangent space and orthonormalised). Ctrl-C stops it within a layer
    (KeyboardInterrupt).
    """
    V = None if V0 is None else np.asarray(V0, dtype=np.float64)
    params: Dict[str, Any] = {"depth": int(depth), "k": int(k), "burn_in": int(burn_in), "seed": int(seed), "H": int(H),
                              "V0": "given" if V is not None else f"Gaussian (stream seed {int(seed)})"}
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.perf_counter()
    if isinstance(model_or_step, Model):
        if jvp is not None:
            raise InputError("depth_spectrum(model, ...): a registry model brings its own exact jvp; give jvp only with a step callable")
        if on_sphere:
            raise InputError("depth_spectrum(model, ...): on_sphere is the model's own (Model.on_sphere); give it only with callables")
        X = None if X0 is None else np.asarray(X0, dtype=np.float64)
        raw = dict(_core.depth_spectrum_model(model_or_step._m, int(depth), int(k), int(burn_in), int(seed), int(H), X, V))
        model = {"name": model_or_step.name, "knobs": model_or_step.knobs, "on_sphere": model_or_step.on_sphere}
        params["X0"] = "the model's start state" if X is None else f"given {list(X.shape)}"
    else:
        if jvp is None or X0 is None:
            raise InputError("depth_spectrum(step, jvp, X0, depth, k): give the step and jvp callables and the start state X0 [rows, d]")
        X = np.asarray(X0, dtype=np.float64)
        raw = dict(_core.depth_spectrum_callbacks(model_or_step, jvp, X, int(depth), int(k), int(burn_in), bool(on_sphere),
                                                  int(seed), int(H), V))
        model = {"step": _callable_name(model_or_step), "jvp": _callable_name(jvp), "on_sphere": bool(on_sphere)}
        params["X0"] = f"given {list(X.shape)}"
    wall = time.perf_counter() - t0
    params["H"] = int(raw["H"])  # the window used (0 asked: (depth - burn_in) / 4)
    manifest = {"analysis": "depth_spectrum", "version": _core.__version__, "params": params, "seed": int(seed),
                "model": model, "started_utc": started, "wall_time_s": wall, "tangent_dimension": int(raw["dim"]),
                "order": "exponents sorted largest first; qr_column: each one's QR column (the CLI's lyapunov.csv i)"}
    return DepthSpectrum(raw, manifest)


def _callable_name(f: Callable) -> str:
    """module.qualname of a callable for the manifest (a ufunc or a callable object: its name or type)."""
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or type(f).__name__
    return f"{getattr(f, '__module__', None) or ''}.{name}".lstrip(".")


# Shown, documented and pickled as the package's own (tokdyn re-exports them).
for _obj in (gram_metrics, pe_window, pe_readings, consensus_spectrum, green_solve, cocycle_spectra, depth_spectrum):
    _obj.__module__ = "tokdyn"
