"""tokdyn_train: training-side PyTorch models of the families tokdyn loads (issue 37,
`tokdyn train`). See families.py for the API."""
from .families import (CONFIG_NAME, FAMILIES, WEIGHTS_NAME, family_of_config, load_pretrained, make, named_config,
                       save_pretrained, sizes)
from .safetensors_io import read_safetensors, write_safetensors

__all__ = ["FAMILIES", "CONFIG_NAME", "WEIGHTS_NAME", "make", "named_config", "sizes", "save_pretrained", "load_pretrained",
           "family_of_config", "read_safetensors", "write_safetensors"]
