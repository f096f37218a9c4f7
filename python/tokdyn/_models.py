"""tokdyn's registry models, re-exported by the package: ``model_names``, ``SCHEDULE_KNOBS``, the
class ``Model`` (a registry model built from its knobs: start state, step, jvp, trajectory,
Hugging Face-style hidden states and attentions, taps) and ``models`` (``tokdyn.models.NAME(**knobs)``
for every registered model)."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._errors import InputError
from ._presets import _text


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
                raise InputError(f"schedule: {', '.join(bad)} not a schedule knob of model {self.name}; expected "
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
            raise InputError("hidden_states: give token_ids (embedded as the start) or X0 (a start state), not both")
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
            raise InputError(f"attentions: model {self.name} has no attention tap; expected one of "
                             + ", ".join(n for n in _core.model_names() if "attention" in json.loads(_core.model_schema_json(n))["taps"]))
        m = self
        if token_ids is not None:
            if X0 is not None:
                raise InputError("attentions: give token_ids or X0, not both")
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


# Shown, documented and pickled as the package's own (tokdyn re-exports them).
for _obj in (model_names, Model, _Models):
    _obj.__module__ = "tokdyn"
