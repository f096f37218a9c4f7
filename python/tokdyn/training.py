"""Training from Python: `tokdyn.train(...)` and `tokdyn.train_tokenizer(...)`, the same as the
commands `tokdyn train` and `tokdyn train-tokenizer` (docs/training.md). The training path is
PyTorch (the package tokdyn_train beside this one in the source tree, python/tokdyn_train)."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from typing import Any, Dict, Optional, Sequence, Union

PathLike = Union[str, "os.PathLike[str]"]


def _tokdyn_train():
    try:
        return importlib.import_module("tokdyn_train.train")
    except ImportError:
        from ._paths import TOKDYN_PYTHON_SOURCES  # written by CMake
        if TOKDYN_PYTHON_SOURCES not in sys.path:
            sys.path.append(TOKDYN_PYTHON_SOURCES)
        return importlib.import_module("tokdyn_train.train")


def train(model: str, corpus: PathLike, steps: int, out: PathLike, *, size: str = "small", **options: Any) -> Dict[str, Any]:
    """Trains `model` (gpt2, neox, llama, mamba2) of `size` (tiny, small) on `corpus` (a text file
    or folder) for `steps` AdamW steps into the results folder `out`, which becomes a checkpoint
    (config.json, model.safetensors, tokenizer.json) with checkpoints/, loss.csv, loss.png and
    manifest.json; returns the manifest. Options as the command's flags: tokenizer, seed, threads,
    context, batch, lr, warmup, weight_decay, eval_every, checkpoint_every, heldout_every,
    overwrite, quiet. ValueError for bad input; tokdyn_train.train.NonFiniteLoss when the loss
    becomes non-finite. Rerunning an interrupted call with the same arguments resumes it."""
    t = _tokdyn_train()
    return t.train(model, size, os.fspath(corpus), steps, os.fspath(out), **options)


def train_tokenizer(corpus: PathLike, out: PathLike, vocab_size: int = 4096, *, min_frequency: int = 2,
                    special: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """A byte-level BPE tokenizer (GPT-2's pipeline) trained on `corpus`, written to the new file
    `out` (tokdyn train-tokenizer); returns its facts (vocab_size, merges, corpus_sha256, ...).
    ValueError for bad input, with the command's message."""
    from . import _binary  # type: ignore[attr-defined]
    args = [_binary(), "train-tokenizer", "--corpus", os.fspath(corpus), "--out", os.fspath(out), "--vocab-size",
            str(vocab_size), "--min-frequency", str(min_frequency), "--json"]
    for s in special or []:
        args += ["--special", s]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        from ._errors import BY_EXIT_CODE, InternalError
        raise BY_EXIT_CODE.get(r.returncode, InternalError)(r.stderr.strip().removeprefix("tokdyn: error: ").removeprefix("error: "))
    return json.loads(r.stdout)
