"""tokdyn_train: training-side PyTorch models of the families tokdyn loads (issue 37,
`tokdyn train`). See families.py for the API.

The names below load their modules (and PyTorch) on first use (PEP 562), so that `python3 -m
tokdyn_train...` refuses a bad argument in a fraction of a second, before torch is imported."""
import importlib

_WHERE = {
    "CONFIG_NAME": "families", "FAMILIES": "families", "WEIGHTS_NAME": "families", "family_of_config": "families",
    "load_pretrained": "families", "make": "families", "named_config": "families", "save_pretrained": "families",
    "sizes": "families", "read_safetensors": "safetensors_io", "write_safetensors": "safetensors_io",
}

__all__ = ["FAMILIES", "CONFIG_NAME", "WEIGHTS_NAME", "make", "named_config", "sizes", "save_pretrained", "load_pretrained",
           "family_of_config", "read_safetensors", "write_safetensors"]


def __getattr__(name):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
