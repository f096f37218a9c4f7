#!/usr/bin/python3
"""A straightforward NumPy (float32) implementation of the Fig 1 workload, for timing against the C++ engine.

Mamba-2 weights from a checkpoint directory (safetensors + config.json, read with ref_mamba2's loader),
residual mode x <- x + Mixer(RMSNorm(x)), layers cycled (layer (k-1) mod n_layer at depth k), SiLU on,
two variants: gate on and gate off (v = y, the gated RMSNorm stays). Token ids iid uniform in
[0, vocab_size) from numpy default_rng(seed), shared by both variants.

Batched over runs: projections are one matmul over [runs*tokens, d]; the causal conv is a sum over taps;
the SSD recurrence is sequential over tokens and vectorised over runs, heads, channels and state.
After every layer (and for the embeddings, k = 0), per run: Zhat = rows of x normalised,
G = Zhat Zhat^T, lambda1 = max eig(G) / tokens, r = tokens^2 / ||G||_F^2.

Usage: /usr/bin/python3 python/numpy_mamba2_fig1.py --checkpoint DIR [--runs 50] [--tokens 50]
           [--depth 200] [--seed 0]
Prints one JSON line: {"seconds", "variants", "depth", "runs", "tokens",
                       "lambda1_final": {"gate", "no_gate"}, "pr_final": {"gate", "no_gate"}}
(finals are means over runs at depth = --depth).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_mamba2 import load_model  # noqa: E402

F = np.float32


def silu(v):
    return v / (F(1) + np.exp(-v))


def softplus(v):
    return np.where(v > F(20), v, np.log1p(np.exp(np.minimum(v, F(20)))))


def prepare(cfg, W):
    """float32 copies of every layer's weights, with A = -exp(A_log) precomputed."""
    layers = []
    for lw in W["layers"]:
        layers.append({
            "norm": lw["norm.weight"].astype(F),
            "w_in": np.ascontiguousarray(lw["mixer.in_proj.weight"].astype(F).T),   # [d, d_in_proj]
            "conv_w": np.ascontiguousarray(lw["mixer.conv1d.weight"][:, 0, :].astype(F).T),  # [K, C]
            "conv_b": lw["mixer.conv1d.bias"].astype(F),
            "dt_bias": lw["mixer.dt_bias"].astype(F),
            "A": (-np.exp(lw["mixer.A_log"])).astype(F),
            "D": lw["mixer.D"].astype(F),
            "mnorm": lw["mixer.norm.weight"].astype(F),
            "w_out": np.ascontiguousarray(lw["mixer.out_proj.weight"].astype(F).T),  # [di, d]
        })
    return {"emb": W["emb"].astype(F), "layers": layers}


def layer_forward(x, lw, cfg, gate):
    """x: [R, T, d] float32 residual stream -> mixer output [R, T, d]."""
    R, T, d = x.shape
    di, N, G, H, P, K = (cfg["d_inner"], cfg["d_state"], cfg["ngroups"], cfg["nheads"],
                         cfg["headdim"], cfg["d_conv"])
    eps = F(cfg["eps"])
    cd = di + 2 * G * N
    X = x.reshape(R * T, d)
    u = X * (F(1) / np.sqrt(np.mean(X * X, axis=1, keepdims=True) + eps)) * lw["norm"]
    if gate:
        proj = u @ lw["w_in"]
        z = proj[:, :di]
        xbc = proj[:, di:di + cd]
        dtr = proj[:, di + cd:]
    else:  # z rows unused: skip them
        proj = u @ lw["w_in"][:, di:]
        xbc = proj[:, :cd]
        dtr = proj[:, cd:]
    xbc = xbc.reshape(R, T, cd)
    # causal depthwise conv, left zero padding
    pad = np.zeros((R, T + K - 1, cd), dtype=F)
    pad[:, K - 1:] = xbc
    c = np.broadcast_to(lw["conv_b"], (R, T, cd)).copy()
    for k in range(K):
        c += lw["conv_w"][k] * pad[:, k:k + T]
    c = silu(c)
    xs = c[:, :, :di].reshape(R, T, H, P)
    B = c[:, :, di:di + G * N].reshape(R, T, G, N)
    C = c[:, :, di + G * N:].reshape(R, T, G, N)
    dt = softplus(dtr.reshape(R, T, H) + lw["dt_bias"])
    dA = np.exp(dt * lw["A"])                          # [R, T, H]
    dtx = dt[..., None] * xs                           # [R, T, H, P]
    hpg = H // G
    # recurrence: S [R, G, H/G, P, N]
    S = np.zeros((R, G, hpg, P, N), dtype=F)
    tmp = np.empty_like(S)
    y = np.empty((R, T, H, P), dtype=F)
    for t in range(T):
        S *= dA[:, t].reshape(R, G, hpg, 1, 1)
        np.multiply(dtx[:, t].reshape(R, G, hpg, P, 1), B[:, t].reshape(R, G, 1, 1, N), out=tmp)
        S += tmp
        y[:, t] = np.matmul(S, C[:, t].reshape(R, G, 1, N, 1)).reshape(R, H, P)
    y += lw["D"][:, None] * xs
    y = y.reshape(R * T, di)
    v = y * silu(z) if gate else y
    vg = v.reshape(R * T, G, di // G)
    o = (vg * (F(1) / np.sqrt(np.mean(vg * vg, axis=-1, keepdims=True) + eps))).reshape(R * T, di)
    o *= lw["mnorm"]
    return (o @ lw["w_out"]).reshape(R, T, d)


def gram_metrics(x):
    """x [R, T, d] -> (lambda1 [R], r [R]) of the normalised tokens."""
    T = x.shape[1]
    zh = x / np.linalg.norm(x, axis=-1, keepdims=True)
    Gm = zh @ np.transpose(zh, (0, 2, 1))
    lam1 = np.linalg.eigvalsh(Gm)[:, -1] / T
    pr = T * T / np.sum(Gm * Gm, axis=(1, 2))
    return lam1, pr


def run_variant(M, cfg, ids, depth, gate):
    x = M["emb"][ids]                                  # [R, T, d] float32
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
    return x, np.array(lam), np.array(prs)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--tokens", type=int, default=50)
    ap.add_argument("--depth", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)

    t0 = time.perf_counter()
    cfg, W = load_model(a.checkpoint)
    M = prepare(cfg, W)
    del W
    rng = np.random.default_rng(a.seed)
    ids = rng.integers(0, cfg["vocab_size"], size=(a.runs, a.tokens))
    lam_final, pr_final = {}, {}
    for name, gate in (("gate", True), ("no_gate", False)):
        _, lam, prs = run_variant(M, cfg, ids, a.depth, gate)
        lam_final[name] = float(np.mean(lam[-1]))
        pr_final[name] = float(np.mean(prs[-1]))
    secs = time.perf_counter() - t0
    print(json.dumps({"seconds": round(secs, 3), "variants": 2, "depth": a.depth, "runs": a.runs,
                      "tokens": a.tokens, "lambda1_final": lam_final, "pr_final": pr_final}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
