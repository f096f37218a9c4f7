#!/usr/bin/python3
"""A straightforward batched PyTorch-CPU (float32) implementation of the Fig 1 workload, for timing against the C++ engine.

The same workload as python/numpy_mamba2_fig1.py: Mamba-2 weights from a checkpoint directory (read with
ref_mamba2's loader), residual mode x <- x + Mixer(RMSNorm(x)), layers cycled (layer (k-1) mod n_layer at
depth k), SiLU on, two variants: gate on and gate off (v = y, the gated RMSNorm stays). Token ids iid uniform
in [0, vocab_size) from numpy default_rng(seed), shared by both variants (the NumPy peer's draw).

Written as a new user of PyTorch would write it, from the block's equations (include/tokdyn/models/mamba2/mamba2.hpp):
batched over runs; projections are F.linear over [runs, tokens, d]; the causal depthwise conv is F.conv1d with
groups = conv_dim on the left-padded sequence; the SSD is its one-chunk quadratic form
    y_t[h] = sum_{s<=t} (C_t . B_s) exp(A_h (cum_t[h] - cum_s[h])) dt_s[h] x_s[h] + D_h x_t[h],
    cum_t[h] = dt_1[h] + ... + dt_t[h],
as batched matrix products (einsum) over runs and heads. After every layer (and for the embeddings, k = 0),
per run: Zhat = rows of x normalised, G = Zhat Zhat^T, lambda1 = max eig(G) / tokens, r = tokens^2 / ||G||_F^2.

Usage: /usr/bin/python3 python/torch_mamba2_fig1.py --checkpoint DIR [--runs 50] [--tokens 50]
           [--depth 200] [--seed 0] [--threads N]      (N: default $BENCH_THREADS, else 2)
Prints one JSON line: {"seconds", "variants", "depth", "runs", "tokens", "threads", "torch",
                       "lambda1_final": {"gate", "no_gate"}, "pr_final": {"gate", "no_gate"}}
(finals are means over runs at depth = --depth; seconds include loading the checkpoint, as the NumPy peer's).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_mamba2 import load_model  # noqa: E402

DT = torch.float32


def prepare(cfg, W):
    """float32 tensors of every layer's weights, A = -exp(A_log) precomputed, the in_proj rows without z for no_gate."""
    di = cfg["d_inner"]

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))

    layers = []
    for lw in W["layers"]:
        w_in = t(lw["mixer.in_proj.weight"])                       # [d_in_proj, d]
        layers.append({
            "norm": t(lw["norm.weight"]),
            "w_in": w_in,
            "w_in_nz": w_in[di:].contiguous(),                     # rows x, B, C, dt (gate off: z unused)
            "conv_w": t(lw["mixer.conv1d.weight"]),                # [conv_dim, 1, K]
            "conv_b": t(lw["mixer.conv1d.bias"]),
            "dt_bias": t(lw["mixer.dt_bias"]),
            "A": t(-np.exp(lw["mixer.A_log"])),
            "D": t(lw["mixer.D"]),
            "mnorm": t(lw["mixer.norm.weight"]),
            "w_out": t(lw["mixer.out_proj.weight"]),               # [d, di]
        })
    return {"emb": t(W["emb"]), "layers": layers}


def rmsnorm(v, w, eps):
    return v * torch.rsqrt(v.pow(2).mean(dim=-1, keepdim=True) + eps) * w


def layer_forward(x, lw, cfg, gate):
    """x: [R, T, d] float32 residual stream -> mixer output [R, T, d]."""
    R, T, _ = x.shape
    di, N, G, H, P, K = (cfg["d_inner"], cfg["d_state"], cfg["ngroups"], cfg["nheads"],
                         cfg["headdim"], cfg["d_conv"])
    eps = cfg["eps"]
    cd = di + 2 * G * N
    u = rmsnorm(x, lw["norm"], eps)
    if gate:
        proj = F.linear(u, lw["w_in"])                             # [R, T, d_in_proj]
        z, xbc, dtr = proj.split([di, cd, H], dim=-1)
    else:
        proj = F.linear(u, lw["w_in_nz"])
        xbc, dtr = proj.split([cd, H], dim=-1)
    # causal depthwise conv: K-1 zeros on the left, one filter per channel
    c = F.conv1d(F.pad(xbc.transpose(1, 2), (K - 1, 0)), lw["conv_w"], lw["conv_b"], groups=cd)  # [R, cd, T]
    c = F.silu(c).transpose(1, 2)                                  # [R, T, cd]
    xs = c[..., :di].reshape(R, T, H, P)
    B = c[..., di:di + G * N].reshape(R, T, G, N)
    C = c[..., di + G * N:].reshape(R, T, G, N)
    dt = F.softplus(dtr + lw["dt_bias"])                           # [R, T, H] (threshold 20)
    # SSD, one chunk: M[r, h, t, s] = (C_t . B_s) exp(A_h (cum_t - cum_s)) dt_s, s <= t
    cum = torch.cumsum(dt, dim=1).transpose(1, 2)                  # [R, H, T]
    seg = (cum[..., :, None] - cum[..., None, :]) * lw["A"][None, :, None, None]  # [R, H, T, T]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    decay = torch.exp(seg.masked_fill(~causal, float("-inf")))
    CB = torch.einsum("rtgn,rsgn->rgts", C, B)                     # [R, G, T, T]
    CB = CB.repeat_interleave(H // G, dim=1)                       # [R, H, T, T] (head h uses group h // (H/G))
    M = CB * decay * dt.transpose(1, 2)[:, :, None, :]
    y = torch.einsum("rhts,rshp->rthp", M, xs) + lw["D"][:, None] * xs   # [R, T, H, P]
    y = y.reshape(R, T, di)
    v = y * F.silu(z) if gate else y
    o = rmsnorm(v.reshape(R, T, G, di // G), 1.0, eps).reshape(R, T, di) * lw["mnorm"]
    return F.linear(o, lw["w_out"])                                # [R, T, d]


def gram_metrics(x):
    """x [R, T, d] -> (lambda1 [R], r [R]) of the normalised tokens."""
    T = x.shape[1]
    zh = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    Gm = zh @ zh.transpose(1, 2)
    lam1 = torch.linalg.eigvalsh(Gm)[:, -1] / T
    pr = T * T / (Gm * Gm).sum(dim=(1, 2))
    return lam1, pr


def run_variant(M, cfg, ids, depth, gate):
    x = M["emb"][ids]                                              # [R, T, d] float32
    lam, prs = [], []
    l1, pr = gram_metrics(x)
    lam.append(l1)
    prs.append(pr)
    L = cfg["n_layer"]
    for k in range(1, depth + 1):
        x = x + layer_forward(x, M["layers"][(k - 1) % L], cfg, gate)
        l1, pr = gram_metrics(x)
        lam.append(l1)
        prs.append(pr)
    return x, torch.stack(lam), torch.stack(prs)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--tokens", type=int, default=50)
    ap.add_argument("--depth", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("BENCH_THREADS", "2")))
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)

    t0 = time.perf_counter()
    with torch.inference_mode():
        cfg, W = load_model(a.checkpoint)
        M = prepare(cfg, W)
        del W
        rng = np.random.default_rng(a.seed)
        ids = torch.from_numpy(rng.integers(0, cfg["vocab_size"], size=(a.runs, a.tokens)))
        lam_final, pr_final = {}, {}
        for name, gate in (("gate", True), ("no_gate", False)):
            _, lam, prs = run_variant(M, cfg, ids, a.depth, gate)
            lam_final[name] = float(lam[-1].mean())
            pr_final[name] = float(prs[-1].mean())
    secs = time.perf_counter() - t0
    print(json.dumps({"seconds": round(secs, 3), "variants": 2, "depth": a.depth, "runs": a.runs,
                      "tokens": a.tokens, "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "lambda1_final": lam_final, "pr_final": pr_final}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
