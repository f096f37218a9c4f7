"""PyTorch modules of the model families tokdyn loads, with checkpoints in tokdyn's layout.

    make(family, config, seed) -> model          a fresh float32 model from a config.json dict
    named_config(family, size, vocab_size)       the config.json dict of a named size
    save_pretrained(model, dir)                  config.json + model.safetensors (float32)
    load_pretrained(dir) -> (family, model)

Families: gpt2 (GPT2LMHeadModel), neox (GPTNeoXForCausalLM), llama (LlamaForCausalLM), mamba2
(state-spaces layout). A model's state_dict names and shapes are exactly the tensor names
tokdyn's loader reads; model(ids [B, T]) gives logits [B, T, V]; model.hidden_states(ids) the
n_layer + 1 residual-stream states [B, T, d] tokdyn's hidden_states gives (entry 0 the embedding,
entry l after block l, before the final norm). Every config make() accepts is one tokdyn's reader
accepts (the same fields, defaults and refusals), so every config save_pretrained writes loads in
tokdyn. The modules are dropout-free (tokdyn's forward; dropout fields of a config are ignored, as
tokdyn ignores them) and support double backward.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Mapping, Tuple

import torch

from .models import gpt2, llama, mamba2, neox
from .models.common import CausalLM, Init
from .safetensors_io import atomic_write_bytes, read_safetensors, write_safetensors

_MODULES = {"gpt2": gpt2, "neox": neox, "llama": llama, "mamba2": mamba2}
_CLASSES = {"gpt2": gpt2.GPT2, "neox": neox.NeoX, "llama": llama.Llama, "mamba2": mamba2.Mamba2}
FAMILIES = tuple(_MODULES)

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"


def _module(family: str):
    if family not in _MODULES:
        raise ValueError(f"family '{family}': expected one of {', '.join(FAMILIES)}")
    return _MODULES[family]


def sizes(family: str) -> Tuple[str, ...]:
    """The named sizes of `family` (tiny and small; variants tokdyn also names: neox
    tiny-sequential, llama tiny-llama3)."""
    return _module(family).SIZES


def named_config(family: str, size: str, vocab_size: int) -> Dict[str, Any]:
    """The config.json dict of a named size: tokdyn's own (gpt2_named, neox_named, llama_named;
    Mamba-2: tokdyn's tiny, and small = d_model 256, 4 layers, d_state 32, headdim 32) with
    vocab_size set, and bos / eos ids set to vocab_size - 1 where the config has them."""
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or not 1 <= vocab_size <= (1 << 24):
        raise ValueError(f"vocab_size: expected an integer in [1, {1 << 24}], got {vocab_size!r}")
    j = _module(family).named_config(size)
    j["vocab_size"] = vocab_size
    for k in ("bos_token_id", "eos_token_id"):
        if k in j:
            j[k] = vocab_size - 1
    _module(family).parse_config(j)  # every named config is one the reader accepts
    return j


def family_of_config(config: Mapping[str, Any]) -> str:
    """The family a config.json dict describes: model_type (gpt2, gpt_neox, llama) or the
    architectures list, else the state-spaces Mamba-2 layout (d_model + ssm_cfg)."""
    mt = config.get("model_type")
    by_type = {"gpt2": "gpt2", "gpt_neox": "neox", "llama": "llama", "mamba2": "mamba2"}
    if isinstance(mt, str) and mt in by_type:
        return by_type[mt]
    archs = config.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        for prefix, fam in (("GPT2", "gpt2"), ("GPTNeoX", "neox"), ("Llama", "llama")):
            if archs[0].startswith(prefix):
                return fam
    if "d_model" in config and "ssm_cfg" in config:
        return "mamba2"
    if "n_embd" in config:
        return "gpt2"
    raise ValueError("config.json: cannot tell the family (no model_type gpt2 / gpt_neox / llama, no architectures, "
                     "not a state-spaces Mamba-2 config)")


def make(family: str, config: Mapping[str, Any], seed: int) -> CausalLM:
    """A freshly initialised float32 model of `family` from a config.json dict, drawn from a
    torch.Generator seeded with `seed`, parameter by parameter in registration order (the same
    seed gives the same bits). ValueError for a config tokdyn's reader would refuse."""
    cls = _CLASSES[_module(family).NAME]
    model = cls(config)
    model.init_weights(Init(seed))
    return model.float()


def _tensors_of(model: CausalLM) -> Dict[str, torch.Tensor]:
    sd = model.state_dict()
    return {k: v.detach().to(device="cpu", dtype=torch.float32).contiguous() for k, v in sd.items()}


def save_pretrained(model: CausalLM, directory: "os.PathLike[str] | str") -> None:
    """Writes `directory`/config.json (the model's config dict) and `directory`/model.safetensors
    (every state_dict tensor as float32; tied embeddings stored once), each atomically (temporary
    file + os.replace), the weights first. The folder is created when missing."""
    if not isinstance(model, CausalLM):
        raise TypeError(f"save_pretrained: expected a tokdyn_train model, got {type(model).__name__}")
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    if os.path.exists(os.path.join(directory, "model.safetensors.index.json")):
        raise ValueError(f"{directory}: holds a sharded checkpoint (model.safetensors.index.json); expected a new or "
                         "single-file checkpoint folder")
    if _module(model.family).parse_config(model.config) != model.arch:
        raise ValueError("save_pretrained: model.config was changed and no longer describes the model's weights")
    text = json.dumps(model.config, indent=2, sort_keys=True, allow_nan=(model.family == "mamba2")) + "\n"
    write_safetensors(os.path.join(directory, WEIGHTS_NAME), _tensors_of(model), {"format": "pt"})
    atomic_write_bytes(os.path.join(directory, CONFIG_NAME), [text.encode("utf-8")])


def load_pretrained(directory: "os.PathLike[str] | str") -> Tuple[str, CausalLM]:
    """(family, float32 model) from a folder save_pretrained wrote (or any single-file checkpoint
    of a family in its layout whose tensors are exactly the model's). ValueError for a missing,
    unexpected or misshapen tensor."""
    directory = os.fspath(directory)
    with open(os.path.join(directory, CONFIG_NAME), "rb") as f:
        config = json.loads(f.read().decode("utf-8"))
    family = family_of_config(config)
    model = _CLASSES[family](config)
    tensors, _ = read_safetensors(os.path.join(directory, WEIGHTS_NAME))
    sd = model.state_dict()
    missing = sorted(set(sd) - set(tensors))
    extra = sorted(set(tensors) - set(sd))
    if missing or extra:
        raise ValueError(f"{directory}: tensors do not match a {family} model of config.json"
                         + (f"; missing {', '.join(missing)}" if missing else "")
                         + (f"; unexpected {', '.join(extra)}" if extra else ""))
    for k, v in tensors.items():
        if tuple(v.shape) != tuple(sd[k].shape):
            raise ValueError(f"{directory}: tensor '{k}' has shape {list(v.shape)}; config.json implies {list(sd[k].shape)}")
        if v.is_floating_point() and not torch.isfinite(v).all():
            raise ValueError(f"{directory}: tensor '{k}' holds a non-finite value")
    model.load_state_dict({k: v.to(sd[k].dtype) for k, v in tensors.items()}, strict=True)
    return family, model.float()
