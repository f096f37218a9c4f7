#!/usr/bin/python3
"""Hidden states of a Mamba-2 model into NumPy, like Hugging Face's output_hidden_states, and their
consensus metrics layer by layer.

    build/tokdyn make-checkpoint --size tiny --seed 0 --out ck
    PYTHONPATH=build/python /usr/bin/python3 examples/mamba2_hidden_states.py ck

The model runs in fp32 (as the mamba2 presets do) on the residual stream; hidden_states returns
[layers, runs, tokens, d_model] for the layers selected (0: the embedding).
"""
import sys

import numpy as np

import tokdyn

ck = sys.argv[1] if len(sys.argv) > 1 else ""
ids = np.random.default_rng(0).integers(0, 1000, size=32)
m = tokdyn.models.mamba2(checkpoint=ck, token_ids=ids) if ck else tokdyn.models.mamba2(size="tiny", token_ids=ids)
H = m.hidden_states(depth=48, taps="0:48:8")  # [7, 1, 32, d_model]
print("hidden states", H.shape, H.dtype)
for layer, X in zip(range(0, 49, 8), H):
    g = tokdyn.gram_metrics(X)  # tokens normalised first
    print(f"layer {layer:3d}: lambda1 = {g['lambda1'][0]:.4f}, participation = {g['participation'][0]:.3f}")
