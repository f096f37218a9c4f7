"""The peer of scripts/bench_decoder.sh: a straightforward batched PyTorch-CPU forward of a GPT-2
checkpoint (Hugging Face layout, float32) through its blocks cycled to `depth`, on token ids
[runs, tokens], as a researcher would write it (torch.matmul, torch.softmax with a causal mask,
F.layer_norm, F.gelu(approximate="tanh")). Prints one JSON line: the seconds of the depth loop
(best of `reps`), and lambda_bar_1 / participation ratio of the final tokens (mean over runs) to
compare with tokdyn's.

Usage: torch_gpt2_depth.py CHECKPOINT_DIR IDS.npy DEPTH THREADS [REPS]"""
import json
import math
import struct
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F


def read_safetensors(path):
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(raw[8 + n + b:8 + n + e], dtype="<f4").reshape(t["shape"]).copy())
    return out


def main():
    ck, ids_file, depth, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    reps = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    torch.set_num_threads(threads)
    cfg = json.loads((Path(ck) / "config.json").read_text())
    W = read_safetensors(Path(ck) / "model.safetensors")
    g = lambda k: W[k if k in W else k.replace("transformer.", "", 1)]  # noqa: E731
    d, H, L, eps = cfg["n_embd"], cfg["n_head"], cfg["n_layer"], cfg.get("layer_norm_epsilon", 1e-5)
    hd = d // H
    ids = torch.from_numpy(np.load(ids_file))
    R, T = ids.shape
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    layers = []
    for l in range(L):
        p = f"transformer.h.{l}."
        layers.append([g(p + s) for s in ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                                          "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                                          "mlp.c_proj.weight", "mlp.c_proj.bias")])

    def block(x, w):
        l1w, l1b, aw, ab, pw, pb, l2w, l2b, fw, fb, cw, cb = w
        h = F.layer_norm(x, (d,), l1w, l1b, eps)
        qkv = torch.addmm(ab, h.reshape(R * T, d), aw).reshape(R, T, 3, H, hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
        s = s.masked_fill(mask, float("-inf"))
        o = torch.matmul(torch.softmax(s, dim=-1), v).transpose(1, 2).reshape(R * T, d)
        x = x + torch.addmm(pb, o, pw).reshape(R, T, d)
        h2 = F.layer_norm(x, (d,), l2w, l2b, eps).reshape(R * T, d)
        m = torch.addmm(cb, F.gelu(torch.addmm(fb, h2, fw), approximate="tanh"), cw)
        return x + m.reshape(R, T, d)

    with torch.no_grad():
        x0 = g("transformer.wte.weight")[ids] + g("transformer.wpe.weight")[:T][None]
        best = float("inf")
        for _ in range(reps):
            x = x0.clone()
            t0 = time.perf_counter()
            for l in range(depth):
                x = block(x, layers[l % L])
            best = min(best, time.perf_counter() - t0)
        z = (x / x.norm(dim=-1, keepdim=True)).double()
        G = z @ z.transpose(1, 2)
        ev = torch.linalg.eigvalsh(G)
        lam1 = (ev[:, -1] / T).mean().item()
        pr = ((T * T) / (G * G).sum(dim=(1, 2))).mean().item()
    print(json.dumps({"seconds": best, "lambda1_final": lam1, "pr_final": pr, "threads": threads, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
