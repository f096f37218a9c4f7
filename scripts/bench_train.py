#!/usr/bin/python3
"""Training throughput of tokdyn's PyTorch families (python/tokdyn_train) at size small against the
plain PyTorch model a researcher would otherwise write, timed in the same run: the overhead of
writing the model in tokdyn's layout, tested equal to tokdyn's forward.

Peers (same shapes: d 256, 4 layers, vocab 4096, context 128, batch 16; AdamW step included):
  gpt2    nn.TransformerEncoderLayer (Pre-LN, GELU, causal mask, batch_first) + embeddings + tied head
  mamba2  a minimal Mamba-2 with the SSD as the token-by-token recurrence h_t = a_t h_{t-1} + dt_t B_t x_t
          (the loop people write first), same projections, conv and gated norm
  neox, llama: no plain peer in torch 1.13 (no rotary module); their throughput alone.

Usage: /usr/bin/python3 scripts/bench_train.py [--threads N] [--steps S] [--json FILE]
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from tokdyn_train import make, named_config  # noqa: E402

V, T, B = 4096, 128, 16


class PlainGPT(nn.Module):
    def __init__(self, d=256, layers=4, heads=8):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(T, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(d)
        self.register_buffer("mask", torch.triu(torch.full((T, T), float("-inf")), 1))

    def forward(self, ids):
        h = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        h = self.blocks(h, mask=self.mask[:ids.shape[1], :ids.shape[1]])
        return self.ln(h) @ self.wte.weight.T


class PlainMamba2Block(nn.Module):
    def __init__(self, d=256, N=32, P=32, expand=2, K=4):
        super().__init__()
        di = expand * d
        self.H, self.P, self.N, self.di = di // P, P, N, di
        self.norm = nn.RMSNorm(d) if hasattr(nn, "RMSNorm") else nn.LayerNorm(d)
        self.in_proj = nn.Linear(d, 2 * di + 2 * N + self.H, bias=False)
        self.conv = nn.Conv1d(di + 2 * N, di + 2 * N, K, groups=di + 2 * N, padding=K - 1)
        self.A_log = nn.Parameter(torch.zeros(self.H))
        self.dt_bias = nn.Parameter(torch.zeros(self.H))
        self.D = nn.Parameter(torch.ones(self.H))
        self.gn = nn.Parameter(torch.ones(di))
        self.out_proj = nn.Linear(di, d, bias=False)

    def forward(self, u):
        b, L, _ = u.shape
        z, xBC, dt = self.in_proj(self.norm(u)).split([self.di, self.di + 2 * self.N, self.H], -1)
        xBC = F.silu(self.conv(xBC.transpose(1, 2))[..., :L].transpose(1, 2))
        x, Bm, Cm = xBC.split([self.di, self.N, self.N], -1)
        x = x.reshape(b, L, self.H, self.P)
        dt = F.softplus(dt + self.dt_bias)
        a = torch.exp(dt * -torch.exp(self.A_log))  # [b, L, H]
        h = torch.zeros(b, self.H, self.P, self.N)
        ys = []
        for t in range(L):  # the recurrence, token by token
            h = a[:, t, :, None, None] * h + (dt[:, t, :, None] * x[:, t])[..., None] * Bm[:, t, None, None, :]
            ys.append((h * Cm[:, t, None, None, :]).sum(-1))
        y = torch.stack(ys, 1) + x * self.D[:, None]
        y = y.reshape(b, L, self.di) * F.silu(z)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5) * self.gn
        return u + self.out_proj(y)


class PlainMamba2(nn.Module):
    def __init__(self, d=256, layers=4):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.layers = nn.ModuleList(PlainMamba2Block(d) for _ in range(layers))
        self.norm = nn.LayerNorm(d)

    def forward(self, ids):
        h = self.emb(ids)
        for blk in self.layers:
            h = blk(h)
        return self.norm(h) @ self.emb.weight.T


def time_steps(model, steps):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, V, (B, T + 1), generator=g)

    def step():
        loss = F.cross_entropy(model(x[:, :-1]).reshape(-1, V), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()  # warm-up
    best = float("inf")
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    return B * T / best, sum(p.numel() for p in model.parameters())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rows = []
    for fam in ("gpt2", "mamba2", "neox", "llama"):
        ours, n = time_steps(make(fam, named_config(fam, "small", V), 0), a.steps)
        peer = {"gpt2": PlainGPT, "mamba2": PlainMamba2}.get(fam)
        pt, pn = time_steps(peer(), a.steps) if peer else (None, None)
        rows.append({"family": fam, "params": n, "tokdyn_tok_s": ours, "plain_tok_s": pt, "plain_params": pn,
                     "ratio": ours / pt if pt else None})
        print(f"{fam:7s} tokdyn_train {ours:8.0f} tok/s ({n / 1e6:.2f}M)"
              + (f"   plain {pt:8.0f} tok/s ({pn / 1e6:.2f}M)   ratio {ours / pt:.2f}x" if pt else "   (no plain peer)"),
              flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"threads": a.threads, "batch": B, "context": T, "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
