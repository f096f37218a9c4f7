#!/usr/bin/python3
"""Independent float64 NumPy reference of the Mamba-2 forward pass (Mamba-2 SSD block as in state-spaces/mamba; the ablations of The Attention Within §VI).

Written straight from the equations, deliberately plain: every weight is widened to float64, the causal
conv is a loop over taps and the SSD recurrence a loop over tokens (vectorised over runs, heads, channels
and state only). It exists to cross-check the C++ engine, not to be fast.

Per layer l (residual mode, the reference pre-norm network):
    u      = RMSNorm(x; layers.l.norm.weight, eps)
    zxbcdt = u W_in^T                      rows [z | x | B | C | dt] of widths [di, di, G N, G N, H]
    c      = causal depthwise conv(xBC) + bias   (left zero padding, W[ch,0,K-1] hits the current token)
    xBC'   = SiLU(c)  (silu_bc off: SiLU on the x channels only, B and C stay c)
    dt     = softplus(dt_raw + dt_bias)    (softplus(v) = v for v > 20)
    A      = -exp(A_log)
    S_t    = exp(dt_t A) S_{t-1} + dt_t x_t (x) B_t[g(h)],  g(h) = h // (H/G),  S_{-1} = 0
    y_t    = C_t[g(h)] . S_t + D x_t
    v      = y * SiLU(z)   (gate off: v = y)
    o      = v / sqrt(mean_group(v^2) + eps) * mixer.norm.weight   (groups of di/G channels)
    mixer  = o W_out^T
    x     <- x + tau * mixer                (sphere mode: z <- normalise(z + tau * mixer), z_0 normalised)

Usage:
  /usr/bin/python3 python/ref_mamba2.py --checkpoint DIR --ids IDS.npy --out OUTDIR
      [--depth D | --layers L1,L2,...] [--gate 0|1] [--silu-bc 0|1] [--conv 0|1]
      [--mode residual|sphere] [--tau 1.0]
IDS.npy: int64 [runs, tokens]. Writes OUTDIR/state_K.npy (float64 [runs, tokens, d_model], K = 0..depth,
K = 0 the embedded tokens, unit rows in sphere mode) and OUTDIR/q_K.npy (float64 [runs, tokens],
K = 1..depth: q_i = C_i . B_i of group 0 as the block uses them at layer K, for the state entering it).
"""
import argparse
import json
import os
import re
import struct
import sys

import numpy as np

EPS_DEFAULT = 1e-5

# ----------------------------------------------------------------------------------------------------
# safetensors
# ----------------------------------------------------------------------------------------------------

_DTYPE_BYTES = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}
_MAX_HEADER = 100_000_000


def _decode(raw, dtype, shape):
    if dtype == "F16":
        a = np.frombuffer(raw, dtype="<f2").astype(np.float64)
    elif dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << np.uint32(16)
        a = bits.view(np.float32).astype(np.float64)
    elif dtype == "F32":
        a = np.frombuffer(raw, dtype="<f4").astype(np.float64)
    elif dtype == "F64":
        a = np.frombuffer(raw, dtype="<f8").astype(np.float64)
    else:
        raise ValueError("unsupported safetensors dtype %r" % dtype)
    return a.reshape(shape)


def _no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("safetensors header: duplicate key %r" % k)
        d[k] = v
    return d


def load_safetensors_file(path):
    """One .safetensors file -> dict name -> float64 array (with the safetensors format validity checks)."""
    with open(path, "rb") as f:
        data = f.read()
    size = len(data)
    if size < 8:
        raise ValueError("%s: too short for safetensors" % path)
    if data[:4] == b"PK\x03\x04":
        raise ValueError("%s: this is a PyTorch zip/pickle checkpoint (pytorch_model.bin); "
                         "convert it to model.safetensors first" % path)
    if data[0] == 0x80:
        raise ValueError("%s: legacy PyTorch pickle, not safetensors" % path)
    (n,) = struct.unpack("<Q", data[:8])
    if n > _MAX_HEADER or 8 + n > size or data[8:9] != b"{":
        raise ValueError("%s: not a safetensors file" % path)
    header = json.loads(data[8:8 + n].decode("utf-8"), object_pairs_hook=_no_duplicates)
    header.pop("__metadata__", None)
    entries = []
    for name, info in header.items():
        dtype = info["dtype"]
        shape = tuple(int(s) for s in info["shape"])
        b, e = (int(v) for v in info["data_offsets"])
        if dtype not in _DTYPE_BYTES:
            raise ValueError("%s: tensor %s has unsupported dtype %s" % (path, name, dtype))
        nel = 1
        for s in shape:
            nel *= s
        if e - b != nel * _DTYPE_BYTES[dtype]:
            raise ValueError("%s: tensor %s: byte size %d != %d" % (path, name, e - b,
                                                                    nel * _DTYPE_BYTES[dtype]))
        entries.append((b, e, name, dtype, shape))
    entries.sort()
    pos = 0
    for b, e, name, _, _ in entries:
        if b != pos:
            raise ValueError("%s: tensor %s: hole or overlap in data offsets" % (path, name))
        pos = e
    if 8 + n + pos != size:
        raise ValueError("%s: data buffer size mismatch (%d vs %d)" % (path, 8 + n + pos, size))
    base = 8 + n
    out = {}
    for b, e, name, dtype, shape in entries:
        out[name] = _decode(data[base + b:base + e], dtype, shape)
    return out


def load_safetensors(path):
    """A file, or a directory holding model.safetensors or model.safetensors.index.json (shards)."""
    if os.path.isdir(path):
        single = os.path.join(path, "model.safetensors")
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.isfile(single):
            return load_safetensors_file(single)
        if os.path.isfile(index):
            with open(index) as f:
                wmap = json.load(f)["weight_map"]
            out = {}
            for shard in sorted(set(wmap.values())):
                tensors = load_safetensors_file(os.path.join(path, shard))
                for name, file in wmap.items():
                    if file == shard:
                        if name not in tensors:
                            raise ValueError("index names %s in %s, which lacks it" % (name, shard))
                        out[name] = tensors[name]
            return out
        raise ValueError("%s: no model.safetensors or model.safetensors.index.json" % path)
    return load_safetensors_file(path)


# ----------------------------------------------------------------------------------------------------
# config
# ----------------------------------------------------------------------------------------------------

def _parse_json_lenient(text):
    # bare Infinity / -Infinity / NaN (not JSON) -> numbers Python parses as inf / nan
    text = re.sub(r'(?<![\w."])(-?)Infinity(?![\w"])', r"\g<1>1e999", text)
    text = re.sub(r'(?<![\w."])NaN(?![\w"])', "null", text)
    return json.loads(text)


def load_config(ckpt):
    d = ckpt if os.path.isdir(ckpt) else os.path.dirname(os.path.abspath(ckpt))
    with open(os.path.join(d, "config.json")) as f:
        raw = _parse_json_lenient(f.read())
    cfg = {}
    if "d_model" in raw:  # state-spaces format
        ssm = raw.get("ssm_cfg", {}) or {}
        if ssm.get("layer", "Mamba2") != "Mamba2":
            raise ValueError("ssm_cfg.layer = %r, only Mamba2 is supported" % ssm.get("layer"))
        if raw.get("d_intermediate", 0):
            raise ValueError("d_intermediate > 0 (MLP blocks) is not supported")
        if raw.get("attn_layer_idx"):
            raise ValueError("hybrid attention layers are not supported")
        cfg["d_model"] = int(raw["d_model"])
        cfg["n_layer"] = int(raw["n_layer"])
        cfg["vocab_size"] = int(raw["vocab_size"])
        mult = int(raw.get("pad_vocab_size_multiple", 8))
        cfg["vocab_padded"] = -(-cfg["vocab_size"] // mult) * mult
        cfg["d_state"] = int(ssm.get("d_state", 128))
        cfg["d_conv"] = int(ssm.get("d_conv", 4))
        cfg["expand"] = int(ssm.get("expand", 2))
        cfg["headdim"] = int(ssm.get("headdim", 64))
        cfg["ngroups"] = int(ssm.get("ngroups", 1))
        cfg["eps"] = EPS_DEFAULT
        cfg["d_inner"] = cfg["expand"] * cfg["d_model"]
        cfg["nheads"] = cfg["d_inner"] // cfg["headdim"]
    elif "hidden_size" in raw:  # Hugging Face format
        cfg["d_model"] = int(raw["hidden_size"])
        cfg["n_layer"] = int(raw["num_hidden_layers"])
        cfg["vocab_size"] = int(raw["vocab_size"])
        cfg["vocab_padded"] = cfg["vocab_size"]
        cfg["d_state"] = int(raw.get("state_size", 128))
        cfg["d_conv"] = int(raw.get("conv_kernel", 4))
        cfg["expand"] = int(raw.get("expand", 2))
        cfg["headdim"] = int(raw.get("head_dim", 64))
        cfg["ngroups"] = int(raw.get("n_groups", 1))
        cfg["eps"] = float(raw.get("layer_norm_epsilon", EPS_DEFAULT))
        cfg["d_inner"] = cfg["expand"] * cfg["d_model"]
        cfg["nheads"] = int(raw.get("num_heads", cfg["d_inner"] // cfg["headdim"]))
    else:
        raise ValueError("config.json: neither state-spaces (d_model) nor HF (hidden_size) format")
    if cfg["nheads"] * cfg["headdim"] != cfg["d_inner"]:
        raise ValueError("nheads*headdim != d_inner (%d*%d vs %d)"
                         % (cfg["nheads"], cfg["headdim"], cfg["d_inner"]))
    if cfg["nheads"] % cfg["ngroups"] or cfg["d_inner"] % cfg["ngroups"]:
        raise ValueError("ngroups must divide nheads and d_inner")
    return cfg


def load_model(ckpt):
    """-> (cfg, weights) with weights['emb'] [V, d] and weights['layers'][l] a dict of float64 arrays."""
    cfg = load_config(ckpt)
    t = load_safetensors(ckpt)
    if "backbone.embedding.weight" in t:
        emb = t["backbone.embedding.weight"]
    elif "backbone.embeddings.weight" in t:
        emb = t["backbone.embeddings.weight"]
    else:
        raise ValueError("no backbone.embedding(s).weight in checkpoint")
    d, L = cfg["d_model"], cfg["n_layer"]
    di, N, G, H, K = cfg["d_inner"], cfg["d_state"], cfg["ngroups"], cfg["nheads"], cfg["d_conv"]
    conv_dim = di + 2 * G * N
    expect = {
        "norm.weight": (d,),
        "mixer.in_proj.weight": (2 * di + 2 * G * N + H, d),
        "mixer.conv1d.weight": (conv_dim, 1, K),
        "mixer.conv1d.bias": (conv_dim,),
        "mixer.dt_bias": (H,),
        "mixer.A_log": (H,),
        "mixer.D": (H,),
        "mixer.norm.weight": (di,),
        "mixer.out_proj.weight": (d, di),
    }
    if emb.ndim != 2 or emb.shape[1] != d:
        raise ValueError("embedding shape %s, d_model %d" % (emb.shape, d))
    layers = []
    for l in range(L):
        lw = {}
        for key, shape in expect.items():
            name = "backbone.layers.%d.%s" % (l, key)
            if name not in t:
                raise ValueError("missing tensor %s" % name)
            if t[name].shape != shape:
                raise ValueError("%s: shape %s, expected %s" % (name, t[name].shape, shape))
            lw[key] = t[name]
        layers.append(lw)
    return cfg, {"emb": emb, "layers": layers}


# ----------------------------------------------------------------------------------------------------
# the block
# ----------------------------------------------------------------------------------------------------

def silu(v):
    return v / (1.0 + np.exp(-v))


def softplus(v):
    # torch / Triton: v itself above the threshold 20, log(1 + exp(v)) otherwise
    out = np.array(v, dtype=np.float64, copy=True)
    low = out <= 20.0
    out[low] = np.log1p(np.exp(out[low]))
    return out


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def mixer(u, lw, cfg, gate=True, silu_bc=True, conv=True, taps=False):
    """Mamba2 mixer on u [R, T, d] (already pre-normed). Returns (out [R,T,d], q [R,T], taps-dict|None)."""
    R, T, _ = u.shape
    di, N, G, H, P, K = (cfg["d_inner"], cfg["d_state"], cfg["ngroups"], cfg["nheads"],
                         cfg["headdim"], cfg["d_conv"])
    eps = cfg["eps"]
    conv_dim = di + 2 * G * N

    # 1. in_proj, split [z | xBC | dt]
    zxbcdt = np.einsum("rtd,ed->rte", u, lw["mixer.in_proj.weight"])
    z = zxbcdt[:, :, :di]
    xbc = zxbcdt[:, :, di:di + conv_dim]
    dt_raw = zxbcdt[:, :, di + conv_dim:]

    # 2. causal depthwise conv (cross-correlation on left zero-padded input) + bias
    if conv:
        cw = lw["mixer.conv1d.weight"][:, 0, :]          # [conv_dim, K]
        cb = lw["mixer.conv1d.bias"]
    else:
        cw = np.zeros((conv_dim, K))
        cw[:, K - 1] = 1.0
        cb = np.zeros(conv_dim)
    c = np.empty((R, T, conv_dim))
    for t in range(T):
        acc = cb.copy()[None, :].repeat(R, axis=0)
        for k in range(K):
            tau = t - (K - 1) + k
            if tau >= 0:
                acc = acc + cw[:, k][None, :] * xbc[:, tau, :]
        c[:, t, :] = acc
    # SiLU: all of xBC, or x channels only
    act = c.copy()
    if silu_bc:
        act = silu(c)
    else:
        act[:, :, :di] = silu(c[:, :, :di])
    xs = act[:, :, :di].reshape(R, T, H, P)                  # x_t[h, p] = x[t, h*P + p]
    B = act[:, :, di:di + G * N].reshape(R, T, G, N)
    C = act[:, :, di + G * N:].reshape(R, T, G, N)

    # 3./4. dt and A
    dt = softplus(dt_raw + lw["mixer.dt_bias"][None, None, :])  # [R, T, H]
    A = -np.exp(lw["mixer.A_log"])                               # [H]
    D = lw["mixer.D"]

    # 5. SSD recurrence, sequential over t
    gh = np.arange(H) // (H // G)                                # head -> group
    S = np.zeros((R, H, P, N))
    y = np.empty((R, T, H, P))
    for t in range(T):
        dA = np.exp(dt[:, t, :] * A[None, :])                    # [R, H]
        Bh = B[:, t, gh, :]                                      # [R, H, N]
        Ch = C[:, t, gh, :]
        S = dA[:, :, None, None] * S + (dt[:, t, :, None] * xs[:, t])[:, :, :, None] * Bh[:, :, None, :]
        y[:, t] = np.einsum("rhpn,rhn->rhp", S, Ch) + D[None, :, None] * xs[:, t]
    y = y.reshape(R, T, di)

    # 6. gated RMSNorm over groups of di/G channels
    v = y * silu(z) if gate else y
    vg = v.reshape(R, T, G, di // G)
    o = (vg / np.sqrt(np.mean(vg * vg, axis=-1, keepdims=True) + eps)).reshape(R, T, di)
    o = o * lw["mixer.norm.weight"]

    # 7. out_proj
    out = np.einsum("rti,di->rtd", o, lw["mixer.out_proj.weight"])

    q = np.sum(C[:, :, 0, :] * B[:, :, 0, :], axis=-1)          # group 0
    tp = None
    if taps:
        tp = {"z": z, "xbc": xbc, "dt_raw": dt_raw, "conv": c, "x": xs, "B": B, "C": C,
              "dt": dt, "A": A, "D": D, "y": y, "v": v, "o": o}
    return out, q, tp


def layer_schedule(n_layer, depth=None, layers=None):
    if layers is not None:
        for l in layers:
            if not 0 <= l < n_layer:
                raise ValueError("layer %d out of range [0, %d)" % (l, n_layer))
        return list(layers)
    if depth is None:
        depth = n_layer
    return [(k - 1) % n_layer for k in range(1, depth + 1)]


def run(cfg, W, ids, schedule, gate=True, silu_bc=True, conv=True, mode="residual", tau=1.0):
    """ids int [R, T] -> (states list of K+1 arrays [R,T,d], qs list of K arrays [R,T])."""
    ids = np.asarray(ids)
    if ids.ndim == 1:
        ids = ids[None, :]
    V = W["emb"].shape[0]
    if ids.min() < 0 or ids.max() >= V:
        raise ValueError("token id out of range [0, %d)" % V)
    x = W["emb"][ids].astype(np.float64)
    if mode == "sphere":
        x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    elif mode != "residual":
        raise ValueError("mode must be residual or sphere")
    states = [x.copy()]
    qs = []
    for l in schedule:
        lw = W["layers"][l]
        u = rmsnorm(x, lw["norm.weight"], cfg["eps"])
        out, q, _ = mixer(u, lw, cfg, gate=gate, silu_bc=silu_bc, conv=conv)
        x = x + tau * out
        if mode == "sphere":
            x = x / np.linalg.norm(x, axis=-1, keepdims=True)
        states.append(x.copy())
        qs.append(q)
    return states, qs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--ids", required=True, help="int64 .npy [runs, tokens]")
    ap.add_argument("--out", required=True)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--depth", type=int)
    g.add_argument("--layers", type=str)
    ap.add_argument("--gate", type=int, default=1, choices=[0, 1])
    ap.add_argument("--silu-bc", type=int, default=1, choices=[0, 1])
    ap.add_argument("--conv", type=int, default=1, choices=[0, 1])
    ap.add_argument("--mode", default="residual", choices=["residual", "sphere"])
    ap.add_argument("--tau", type=float, default=1.0)
    a = ap.parse_args(argv)

    cfg, W = load_model(a.checkpoint)
    layers = [int(s) for s in a.layers.split(",") if s.strip()] if a.layers else None
    sched = layer_schedule(cfg["n_layer"], a.depth, layers)
    ids = np.load(a.ids)
    if ids.ndim == 1:
        ids = ids[None, :]
    states, qs = run(cfg, W, ids.astype(np.int64), sched, gate=bool(a.gate), silu_bc=bool(a.silu_bc),
                     conv=bool(a.conv), mode=a.mode, tau=a.tau)
    os.makedirs(a.out, exist_ok=True)
    for k, s in enumerate(states):
        np.save(os.path.join(a.out, "state_%d.npy" % k), s.astype(np.float64))
    for k, q in enumerate(qs, start=1):
        np.save(os.path.join(a.out, "q_%d.npy" % k), q.astype(np.float64))
    print(json.dumps({"depth": len(sched), "runs": int(ids.shape[0]), "tokens": int(ids.shape[1]),
                      "d_model": cfg["d_model"], "schedule": sched, "out": a.out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
