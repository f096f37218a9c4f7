"""tokdyn from Python: the presets and their results, the registry's models, and the analyses.

Everything runs in tokdyn's C++ core (the module ``tokdyn._core``), with NumPy arrays in and out and
the GIL released while it computes; the results are the same bits the CLI writes.

Errors: ``tokdyn.Error`` and one subclass per exit code of the CLI (``InputError``, also a
``ValueError``, for bad input; ``ResourceError``, ``NonFiniteError``, ``ConvergenceError``, ``BusyError``,
``FiguresError``, ``InternalError``, also ``RuntimeError``), each with the CLI's one-line message.

Quick tour::

    import tokdyn
    tokdyn.presets()                                  # the named experiments
    r = tokdyn.run("rope-flow", n=8, runs=2, t_end=5) # run one in-process -> Result (Ctrl-C: KeyboardInterrupt)
    r.metrics                                         # a declared table as a pandas DataFrame
    r.summaries                                       # summary.csv: quantity, value, paper
    m = tokdyn.models.rope(d=4, tokens=6, beta=1.0)   # a registry model
    X1 = m.step(m.x0, 1)                              # one layer
    s = tokdyn.depth_spectrum(m, depth=200, k=4)      # Lyapunov exponents of its depth map -> DepthSpectrum
    s.exponents_log, s.dichotomy_growth, s.save("sp") # sorted largest first; log / growth scale; a results folder
    s = tokdyn.depth_spectrum(step, jvp, X0, 200, 4)  # ... of your own model (Python callables)
    tokdyn.gram_metrics(m.hidden_states(depth=8))     # each metric [taps, runs]
    tokdyn.cocycle_spectra(B)                         # spectra of a [L, d, d] cocycle
    tok = tokdyn.Tokenizer.from_checkpoint("ck")      # a checkpoint's tokenizer.json
    e = tok.encode("Hello world"); e.ids, e.pieces    # ids (NumPy int64) and their vocabulary strings

docs/python.md has the whole interface.
"""
from __future__ import annotations

# json, os and subprocess serve the BLAS check below; the other imports stay the package's names, as
# they were before its functions moved into modules (dir(tokdyn) is unchanged).
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import sys


def _interpreter_problem(core_files: Sequence[str], ext_suffix: str, executable: str, version: str,
                         numpy_error: Optional[str]) -> Optional[str]:
    """Why this interpreter cannot use this build of tokdyn, in one sentence that says what to do, or
    None. core_files: the package's compiled modules (_core.<tag>.so); ext_suffix: this
    interpreter's EXT_SUFFIX; numpy_error: the message of a failed ``import numpy``, or None."""
    tags = sorted(f[len("_core"):] for f in core_files)
    built = ", ".join(tags) if tags else "no compiled module (_core) in the package"
    if tags and ext_suffix not in tags:
        return (f"tokdyn: this build is for another Python ({built}); this interpreter is {executable} {version} "
                f"({ext_suffix}): run Debian's /usr/bin/python3, or build tokdyn for this interpreter (docs/python.md)")
    if numpy_error is not None:
        return (f"tokdyn: this interpreter ({executable} {version}) cannot import NumPy ({numpy_error}): tokdyn's "
                "set-up provides /usr/bin/python3 with Debian's python3-numpy (run it with that interpreter), or "
                "install numpy, pandas and matplotlib for this one (docs/python.md)")
    return None


def _check_interpreter() -> None:
    import sysconfig
    here = os.path.dirname(os.path.abspath(__file__))
    cores = [f[:-3] if f.endswith(".so") else f for f in os.listdir(here) if f.startswith("_core") and f.endswith(".so")]
    try:
        import numpy  # noqa: F401
        numpy_error = None
    except ImportError as e:
        numpy_error = str(e)
    problem = _interpreter_problem([c + ".so" for c in cores], sysconfig.get_config_var("EXT_SUFFIX") or "",
                                   sys.executable, sys.version.split()[0], numpy_error)
    if problem:
        raise ImportError(problem)


_check_interpreter()

import numpy as np  # noqa: E402


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
           "depth_spectrum", "DepthSpectrum", "model_names", "pe_window", "pe_readings", "green_solve", "consensus_spectrum", "Tokenizer", "Encoding",
           "train", "train_tokenizer", "Error", "InputError", "ResourceError", "NonFiniteError", "ConvergenceError",
           "BusyError", "FiguresError", "InternalError"]

# The package's names by what they hold: presets and results (_presets), sweeps (_sweeps), models
# (_models), analyses (_analyses); the tokenizers below. The private helpers are the package's too
# (tokdyn.training imports _binary).
from ._errors import (BusyError, ConvergenceError, Error, FiguresError, InputError, InternalError,  # noqa: E402,F401
                      NonFiniteError, ResourceError)
from ._presets import Result, Taps, _text, load, presets, run, show  # noqa: E402,F401
from ._sweeps import _axis_text, _binary, load_sweep, sweep  # noqa: E402,F401
from ._models import SCHEDULE_KNOBS, Model, _Models, model_names, models  # noqa: E402,F401
SCHEDULE_KNOBS: Dict[str, Tuple[str, ...]]  # its annotation stays the package's (tokdyn.__annotations__)


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

from ._analyses import (cocycle_spectra, consensus_spectrum, depth_spectrum, gram_metrics, green_solve,  # noqa: E402,F401
                        pe_readings, pe_window)
from ._spectrum import DepthSpectrum  # noqa: E402,F401
from .training import train, train_tokenizer  # noqa: E402  (docs/training.md)
