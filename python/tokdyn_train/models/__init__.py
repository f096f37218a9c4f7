"""The model families (one module each) and what they share (common)."""
from . import gpt2, llama, mamba2, neox  # noqa: F401

__all__ = ["gpt2", "llama", "mamba2", "neox"]
