#!/usr/bin/python3
"""Write a tiny random Mamba-2 checkpoint in the state-spaces layout (for testing the Python references).

Sizes: d_model 32, n_layer 3, d_state 8, headdim 8, expand 2 (d_inner 64, 8 heads), d_conv 4,
ngroups 1 or 2 (--ngroups), vocab 100 padded to 112 (pad_vocab_size_multiple 16).
Tensor names as in the state-spaces/mamba checkpoints; mixed dtypes (F16 for embedding, in_proj, conv1d.weight, out_proj;
F32 for the small vectors; --bf16 stores in_proj as BF16 instead); tied embedding, no lm_head.
config.json is state-spaces style with the non-default sizes in ssm_cfg.
Weights follow the reference Mamba-2 initialisation (uniform fan-in linears, dt init, A_log = ln U(1,16)),
with D and the norm weights jittered so they are exercised.

Usage: make_tiny_checkpoint.py --out DIR [--ngroups 1|2] [--seed 0] [--shards 1|2] [--bf16]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np


def to_bf16_bits(a):
    """float -> BF16 bit pattern (round to nearest even of the float32 value)."""
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return b.astype(np.uint16)


def encode(arr, dtype):
    if dtype == "F16":
        return np.ascontiguousarray(arr, dtype="<f2").tobytes()
    if dtype == "BF16":
        return to_bf16_bits(arr).astype("<u2").tobytes()
    if dtype == "F32":
        return np.ascontiguousarray(arr, dtype="<f4").tobytes()
    if dtype == "F64":
        return np.ascontiguousarray(arr, dtype="<f8").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors, metadata=None):
    """tensors: dict name -> (np.ndarray, dtype string). Header padded with spaces to a multiple of 8."""
    align = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}
    order = sorted(tensors, key=lambda n: (-align[tensors[n][1]], n))
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    pos = 0
    for name in order:
        arr, dt = tensors[name]
        raw = encode(arr, dt)
        header[name] = {"dtype": dt, "shape": list(np.shape(arr)), "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((-len(hj)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for raw in blobs:
            f.write(raw)


def make_tensors(rng, d=32, L=3, N=8, P=8, E=2, G=1, K=4, V=100, mult=16, bf16=False):
    di = E * d
    H = di // P
    Vp = -(-V // mult) * mult
    conv_dim = di + 2 * G * N
    lin = "BF16" if bf16 else "F16"
    t = {"backbone.embedding.weight": (rng.standard_normal((Vp, d)) * 0.5, "F16")}
    for l in range(L):
        p = "backbone.layers.%d." % l
        dt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), H))
        dt = np.maximum(dt, 1e-4)
        t[p + "norm.weight"] = (1.0 + 0.1 * rng.standard_normal(d), "F32")
        t[p + "mixer.in_proj.weight"] = (rng.uniform(-1, 1, (2 * di + 2 * G * N + H, d)) / np.sqrt(d), lin)
        t[p + "mixer.conv1d.weight"] = (rng.uniform(-0.5, 0.5, (conv_dim, 1, K)), "F16")
        t[p + "mixer.conv1d.bias"] = (rng.uniform(-0.5, 0.5, conv_dim), "F32")
        # mix in one large dt_bias so the softplus threshold branch (> 20) is exercised
        dtb = dt + np.log(-np.expm1(-dt))
        if l == 1:
            dtb[0] = 21.0
        t[p + "mixer.dt_bias"] = (dtb, "F32")
        t[p + "mixer.A_log"] = (np.log(rng.uniform(1, 16, H)), "F32")
        t[p + "mixer.D"] = (rng.uniform(0.5, 1.5, H), "F32")
        t[p + "mixer.norm.weight"] = (1.0 + 0.1 * rng.standard_normal(di), "F32")
        t[p + "mixer.out_proj.weight"] = (rng.uniform(-1, 1, (d, di)) / np.sqrt(di), "F16")
    t["backbone.norm_f.weight"] = (1.0 + 0.1 * rng.standard_normal(d), "F32")
    cfg = {"d_model": d, "d_intermediate": 0, "n_layer": L, "vocab_size": V,
           "ssm_cfg": {"layer": "Mamba2", "d_state": N, "d_conv": K, "expand": E, "headdim": P,
                       "ngroups": G},
           "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": True, "residual_in_fp32": True,
           "fused_add_norm": True, "pad_vocab_size_multiple": mult, "tie_embeddings": True}
    return t, cfg


def write_checkpoint(out, ngroups=1, seed=0, shards=1, bf16=False):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed)
    tensors, cfg = make_tensors(rng, G=ngroups, bf16=bf16)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f)
    meta = {"format": "pt", "lm_head.weight": "backbone.embedding.weight"}
    for fn in ("model.safetensors", "model.safetensors.index.json"):
        if os.path.exists(os.path.join(out, fn)):
            os.remove(os.path.join(out, fn))
    if shards <= 1:
        write_safetensors(os.path.join(out, "model.safetensors"), tensors, meta)
    else:
        names = sorted(tensors)
        wmap = {}
        for s in range(shards):
            fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
            part = {n: tensors[n] for n in names[s::shards]}
            write_safetensors(os.path.join(out, fn), part, {"format": "pt"})
            for n in part:
                wmap[n] = fn
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": wmap}, f, indent=1)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--ngroups", type=int, default=1, choices=[1, 2])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--bf16", action="store_true")
    a = ap.parse_args(argv)
    write_checkpoint(a.out, a.ngroups, a.seed, a.shards, a.bf16)
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
