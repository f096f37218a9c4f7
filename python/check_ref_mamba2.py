#!/usr/bin/python3
"""Self-checks of ref_mamba2.py (and cross-checks of numpy_mamba2_fig1.py and torch_mamba2_fig1.py) on tiny random checkpoints.

Exits non-zero if any check fails; prints one line per check. Usage: /usr/bin/python3 python/check_ref_mamba2.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tiny_checkpoint as mk  # noqa: E402
import numpy_mamba2_fig1 as fig1  # noqa: E402
import ref_mamba2 as ref  # noqa: E402

FAILS = []


def check(name, ok, detail=""):
    print("[%s] %s%s" % ("ok" if ok else "FAIL", name, (" -- " + detail) if detail else ""))
    if not ok:
        FAILS.append(name)


def silu(v):
    return v / (1.0 + np.exp(-v))


def quadratic_form(tp, cfg):
    """y_t[h] = sum_{s<=t} (C_t.B_s) exp(A_h sum_{r=s+1..t} dt_r) dt_s x_s[h] + D_h x_t[h], per run."""
    x, B, C, dt, A, D = tp["x"], tp["B"], tp["C"], tp["dt"], tp["A"], tp["D"]
    R, T, H, P = x.shape
    G = B.shape[2]
    y = np.zeros((R, T, H, P))
    for r in range(R):
        for h in range(H):
            g = h // (H // G)
            for t in range(T):
                acc = D[h] * x[r, t, h]
                for s in range(t + 1):
                    decay = np.exp(A[h] * np.sum(dt[r, s + 1:t + 1, h]))
                    acc = acc + np.dot(C[r, t, g], B[r, s, g]) * decay * dt[r, s, h] * x[r, s, h]
                y[r, t, h] = acc
    return y.reshape(R, T, H * P)


def main():
    tmp = tempfile.mkdtemp(prefix="ref_mamba2_check_")
    ck1 = mk.write_checkpoint(os.path.join(tmp, "g1"), ngroups=1, seed=1)
    ck2 = mk.write_checkpoint(os.path.join(tmp, "g2"), ngroups=2, seed=2)
    cfg1, W1 = ref.load_model(ck1)
    cfg2, W2 = ref.load_model(ck2)
    check("config: ssm_cfg overrides read", (cfg1["d_state"], cfg1["headdim"], cfg1["nheads"],
          cfg1["d_inner"], cfg1["vocab_padded"], cfg2["ngroups"]) == (8, 8, 8, 64, 112, 2))
    check("loader: tied embedding, 112 rows, no lm_head", W1["emb"].shape == (112, 32))

    rng = np.random.default_rng(7)
    ids = rng.integers(0, 100, size=(3, 12))

    # (a) recurrence == quadratic attention form, one layer, both group counts, also with silu_bc off
    for nm, cfg, W in (("ngroups=1", cfg1, W1), ("ngroups=2", cfg2, W2)):
        for l in range(cfg["n_layer"]):
            for sbc in (True, False):
                x0 = W["emb"][ids]
                u = ref.rmsnorm(x0 + 0.3 * l, W["layers"][l]["norm.weight"], cfg["eps"])
                _, _, tp = ref.mixer(u, W["layers"][l], cfg, silu_bc=sbc, taps=True)
                yq = quadratic_form(tp, cfg)
                err = np.max(np.abs(tp["y"] - yq)) / max(1.0, np.max(np.abs(yq)))
                check("(a) recurrence == quadratic form, %s layer %d silu_bc=%d" % (nm, l, sbc),
                      err <= 1e-12, "max rel err %.2e" % err)
    # the softplus threshold branch was exercised (layer 1 has dt_bias 21)
    u = ref.rmsnorm(W1["emb"][ids], W1["layers"][1]["norm.weight"], cfg1["eps"])
    _, _, tp = ref.mixer(u, W1["layers"][1], cfg1, taps=True)
    v = tp["dt_raw"] + W1["layers"][1]["mixer.dt_bias"]
    check("softplus: identity above 20, log1p(exp) below",
          np.all(tp["dt"][v > 20] == v[v > 20]) and np.allclose(tp["dt"][v <= 20],
                                                                np.log(1 + np.exp(v[v <= 20])), rtol=1e-14)
          and (v > 20).any() and (v <= 20).any())

    # independent check of one whole block against explicit per-token formulas (gate on)
    lw = W1["layers"][0]
    x0 = W1["emb"][ids[0]]
    u = x0 / np.sqrt((x0 ** 2).mean(1, keepdims=True) + 1e-5) * lw["norm.weight"]
    zx = u @ lw["mixer.in_proj.weight"].T
    di, GN, K = 64, 8, 4
    z, xbc, dtr = zx[:, :di], zx[:, di:2 * di + 2 * GN], zx[:, 2 * di + 2 * GN:]
    cw = lw["mixer.conv1d.weight"][:, 0, :]
    conv_np = np.stack([np.convolve(xbc[:, ch], cw[ch, ::-1])[:xbc.shape[0]] for ch in range(xbc.shape[1])],
                       axis=1) + lw["mixer.conv1d.bias"]
    _, _, tp = ref.mixer(u[None], lw, cfg1, taps=True)
    check("conv == np.convolve (causal cross-correlation, left zero pad)",
          np.max(np.abs(tp["conv"][0] - conv_np)) < 1e-13)

    # (b) gate off: z rows irrelevant (exact)
    W1p = {"emb": W1["emb"], "layers": [dict(lw) for lw in W1["layers"]]}
    for lw in W1p["layers"]:
        w = lw["mixer.in_proj.weight"].copy()
        w[:64] = rng.standard_normal(w[:64].shape) * 10
        lw["mixer.in_proj.weight"] = w
    sa, _ = ref.run(cfg1, W1, ids, [0, 1, 2, 0], gate=False)
    sb, _ = ref.run(cfg1, W1p, ids, [0, 1, 2, 0], gate=False)
    sc, _ = ref.run(cfg1, W1p, ids, [0, 1, 2, 0], gate=True)
    sd, _ = ref.run(cfg1, W1, ids, [0, 1, 2, 0], gate=True)
    check("(b) gate off: perturbing in_proj z rows changes nothing (bitwise)",
          all(np.array_equal(a, b) for a, b in zip(sa, sb)))
    check("(b) control: with gate on the same perturbation does change the output",
          not np.allclose(sc[-1], sd[-1]))
    # gate off keeps the gated RMSNorm: o = y / rms(y) * w
    _, _, tp = ref.mixer(u[None], W1["layers"][0], cfg1, gate=False, taps=True)
    y = tp["y"][0]
    o_exp = y / np.sqrt((y ** 2).mean(1, keepdims=True) + 1e-5) * W1["layers"][0]["mixer.norm.weight"]
    check("(b) gate off: v = y and the norm stays", np.max(np.abs(tp["o"][0] - o_exp)) < 1e-13)
    _, _, tp = ref.mixer(u[None], W1["layers"][0], cfg1, gate=True, taps=True)
    check("gate on: v = y * silu(z)", np.max(np.abs(tp["v"][0] - tp["y"][0] * silu(z))) < 1e-13)

    # (c) silu_bc off: B, C = conv output; x still SiLU'd
    _, _, tp = ref.mixer(u[None], W1["layers"][0], cfg1, silu_bc=False, taps=True)
    check("(c) silu_bc off: B, C == conv output exactly (and conv == np.convolve)",
          np.array_equal(tp["B"][0].reshape(-1, 8), tp["conv"][0, :, 64:72])
          and np.array_equal(tp["C"][0].reshape(-1, 8), tp["conv"][0, :, 72:80])
          and np.max(np.abs(tp["B"][0].reshape(-1, 8) - conv_np[:, 64:72])) < 1e-13
          and np.max(np.abs(tp["C"][0].reshape(-1, 8) - conv_np[:, 72:80])) < 1e-13)
    check("(c) silu_bc off: x channels still SiLU(conv)",
          np.max(np.abs(tp["x"][0].reshape(-1, 64) - silu(conv_np[:, :64]))) < 1e-13)
    _, _, tp = ref.mixer(u[None], W1["layers"][0], cfg1, silu_bc=True, taps=True)
    check("silu_bc on: B == SiLU(conv)", np.max(np.abs(tp["B"][0].reshape(-1, 8) - silu(conv_np[:, 64:72]))) < 1e-13)
    # conv off: identity
    _, _, tp = ref.mixer(u[None], W1["layers"][0], cfg1, conv=False, silu_bc=False, taps=True)
    check("conv off: conv output == pre-conv xBC (identity, no bias)", np.array_equal(tp["conv"], tp["xbc"]))
    _, _, tp = ref.mixer(u[None], W1["layers"][0], cfg1, conv=False, taps=True)
    check("conv off, SiLU still applied", np.array_equal(tp["B"].reshape(12, 8), silu(tp["xbc"][0, :, 64:72])))

    # (d) causality: changing token j changes no state of tokens i < j (all layers), and does change token j
    ok = True
    for cfg, W in ((cfg1, W1), (cfg2, W2)):
        s0, q0 = ref.run(cfg, W, ids, [0, 1, 2, 1, 0, 2])
        for j in (0, 5, 11):
            ids2 = ids.copy()
            ids2[:, j] = (ids2[:, j] + 37) % 100
            s1, q1 = ref.run(cfg, W, ids2, [0, 1, 2, 1, 0, 2])
            for a, b in zip(s0, s1):
                ok &= np.array_equal(a[:, :j], b[:, :j]) and not np.allclose(a[:, j], b[:, j])
            for a, b in zip(q0, q1):
                ok &= np.array_equal(a[:, :j], b[:, :j])
        for mode in ("sphere",):
            s0, _ = ref.run(cfg, W, ids, [0, 1, 2], mode=mode, tau=0.5)
            s1, _ = ref.run(cfg, W, ids2, [0, 1, 2], mode=mode, tau=0.5)
            for a, b in zip(s0, s1):
                ok &= np.array_equal(a[:, :11], b[:, :11])
    check("(d) causality: token j perturbation leaves tokens i<j bitwise unchanged (states and q)", ok)

    # (e) ngroups = 2 runs; group map and group-wise norm
    s2, q2 = ref.run(cfg2, W2, ids, ref.layer_schedule(3, depth=7))
    check("(e) ngroups=2: runs, depth 7, finite", len(s2) == 8 and all(np.isfinite(s).all() for s in s2)
          and q2[0].shape == (3, 12))
    u2 = ref.rmsnorm(W2["emb"][ids], W2["layers"][0]["norm.weight"], 1e-5)
    _, q, tp = ref.mixer(u2, W2["layers"][0], cfg2, taps=True)
    v = tp["v"]
    w = W2["layers"][0]["mixer.norm.weight"]
    o_exp = np.concatenate([v[..., :32] / np.sqrt((v[..., :32] ** 2).mean(-1, keepdims=True) + 1e-5),
                            v[..., 32:] / np.sqrt((v[..., 32:] ** 2).mean(-1, keepdims=True) + 1e-5)], -1) * w
    check("(e) ngroups=2: gated RMSNorm over groups of di/G = 32", np.max(np.abs(tp["o"] - o_exp)) < 1e-13)
    check("(e) ngroups=2: q = C.B of group 0", np.max(np.abs(q - np.einsum("rtn,rtn->rt", tp["C"][:, :, 0],
                                                                             tp["B"][:, :, 0]))) < 1e-13)

    # (f) dtype decoding
    a = rng.standard_normal((5, 7)) * 3
    a[0, :4] = [np.inf, -np.inf, 6e-8, 65504]
    bfsrc = rng.standard_normal(40).astype(np.float32) * 1e3
    p = os.path.join(tmp, "dtypes.safetensors")
    mk.write_safetensors(p, {"h": (a, "F16"), "b": (bfsrc, "BF16"), "f": (a, "F32"), "d": (a, "F64")})
    t = ref.load_safetensors(p)
    bf_bits = mk.to_bf16_bits(bfsrc).astype(np.uint32) << 16
    check("(f) F16 == numpy float16 widened", np.array_equal(t["h"], a.astype(np.float16).astype(np.float64)))
    check("(f) BF16 == (bits<<16) as float32", np.array_equal(t["b"], bf_bits.view(np.float32).astype(np.float64))
          and np.max(np.abs(t["b"] - bfsrc) / np.abs(bfsrc)) < 2 ** -8)
    check("(f) F32, F64 exact", np.array_equal(t["f"], a.astype(np.float32).astype(np.float64))
          and np.array_equal(t["d"], a))
    with open(p, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
    check("writer pads header to a multiple of 8", n % 8 == 0)
    # sharded and BF16 checkpoints load to the same model
    cks = mk.write_checkpoint(os.path.join(tmp, "g1s"), ngroups=1, seed=1, shards=2)
    _, Ws = ref.load_model(cks)
    check("sharded (index.json) checkpoint == single file", all(
        np.array_equal(Ws["layers"][l][k], W1["layers"][l][k]) for l in range(3) for k in W1["layers"][l])
        and np.array_equal(Ws["emb"], W1["emb"]))
    ckb = mk.write_checkpoint(os.path.join(tmp, "g1b"), ngroups=1, seed=1, bf16=True)
    _, Wb = ref.load_model(ckb)
    check("BF16 in_proj loads close to F16 one", np.max(np.abs(Wb["layers"][0]["mixer.in_proj.weight"]
                                                               - W1["layers"][0]["mixer.in_proj.weight"])) < 2e-3)
    # corrupt files are rejected
    bad = os.path.join(tmp, "bad.safetensors")
    with open(p, "rb") as fh:
        raw = fh.read()
    rejected = 0
    for blob in (b"PK\x03\x04" + raw[4:], raw[:-2], raw + b"\0\0"):
        with open(bad, "wb") as fh:
            fh.write(blob)
        try:
            ref.load_safetensors(bad)
        except ValueError:
            rejected += 1
    check("loader rejects zip, truncated and over-long files", rejected == 3)

    # HF-style config with bare Infinity and embeddings name
    hf = os.path.join(tmp, "hf")
    os.makedirs(hf)
    tens = ref.load_safetensors(ck1)
    tens["backbone.embeddings.weight"] = tens.pop("backbone.embedding.weight")
    mk.write_safetensors(os.path.join(hf, "model.safetensors"), {k: (v, "F32") for k, v in tens.items()})
    with open(os.path.join(hf, "config.json"), "w") as fh:
        fh.write('{"hidden_size": 32, "num_hidden_layers": 3, "state_size": 8, "conv_kernel": 4, '
                 '"expand": 2, "head_dim": 8, "n_groups": 1, "num_heads": 8, "vocab_size": 112, '
                 '"layer_norm_epsilon": 1e-05, "time_step_limit": [0.0, Infinity], "model_type": "mamba2"}')
    cfgh, Wh = ref.load_model(hf)
    sh, _ = ref.run(cfgh, Wh, ids, [0, 1, 2])
    s1, _ = ref.run(cfg1, W1, ids, [0, 1, 2])
    check("HF config (bare Infinity) + embeddings name: same output as state-spaces layout",
          all(np.array_equal(a, b) for a, b in zip(sh, s1)))

    # sphere mode keeps unit rows
    ss, _ = ref.run(cfg1, W1, ids, [0, 1, 2, 0], mode="sphere", tau=0.7)
    check("sphere mode: unit rows at every depth incl. K=0",
          all(np.max(np.abs(np.linalg.norm(s, axis=-1) - 1)) < 1e-14 for s in ss))
    # residual with layer schedule given explicitly == depth cycling
    sdep, _ = ref.run(cfg1, W1, ids, ref.layer_schedule(3, depth=5))
    check("depth 5 == layers 0,1,2,0,1", ref.layer_schedule(3, depth=5) == [0, 1, 2, 0, 1])

    # CLI end to end
    idp = os.path.join(tmp, "ids.npy")
    np.save(idp, ids.astype(np.int64))
    outd = os.path.join(tmp, "out")
    r = subprocess.run([sys.executable, os.path.join(HERE, "ref_mamba2.py"), "--checkpoint", ck1, "--ids", idp,
                        "--out", outd, "--depth", "5"], capture_output=True, text=True)
    ok = r.returncode == 0
    if ok:
        ok = all(np.array_equal(np.load(os.path.join(outd, "state_%d.npy" % k)), sdep[k]) for k in range(6))
        ok &= all(np.load(os.path.join(outd, "q_%d.npy" % k)).shape == (3, 12) for k in range(1, 6))
        ok &= np.load(os.path.join(outd, "state_0.npy")).dtype == np.float64
        ok &= not os.path.exists(os.path.join(outd, "q_0.npy"))
    check("CLI: state_0..5.npy [3,12,32] float64 and q_1..5.npy [3,12] match the API", ok, r.stderr[-300:])

    # numpy_mamba2_fig1 (float32) agrees with the float64 reference
    M = fig1.prepare(cfg1, W1)
    ok = True
    worst = 0.0
    for gate in (True, False):
        xf, lam, prs = fig1.run_variant(M, cfg1, ids, 7, gate)
        sr, _ = ref.run(cfg1, W1, ids, ref.layer_schedule(3, depth=7), gate=gate)
        err = np.max(np.abs(xf - sr[-1])) / np.max(np.abs(sr[-1]))
        worst = max(worst, err)
        zh = sr[-1] / np.linalg.norm(sr[-1], axis=-1, keepdims=True)
        G = zh @ zh.transpose(0, 2, 1)
        l1 = np.linalg.eigvalsh(G)[:, -1] / 12
        pr = 144 / np.sum(G * G, axis=(1, 2))
        ok &= err < 1e-4 and np.allclose(lam[-1], l1, atol=1e-4) and np.allclose(prs[-1], pr, rtol=1e-4)
        ok &= np.all(1 / lam[-1] <= prs[-1] * (1 + 1e-5)) and np.all(prs[-1] <= 1 / lam[-1] ** 2 * (1 + 1e-5))
    M2 = fig1.prepare(cfg2, W2)
    xf, _, _ = fig1.run_variant(M2, cfg2, ids, 4, True)
    sr, _ = ref.run(cfg2, W2, ids, [0, 1, 2, 0])
    e2 = np.max(np.abs(xf - sr[-1])) / np.max(np.abs(sr[-1]))
    check("numpy_mamba2_fig1 float32 == float64 reference (depth 7, both gates; ngroups=2 depth 4); metrics",
          ok and e2 < 1e-4, "max rel err %.1e / %.1e" % (worst, e2))
    r = subprocess.run([sys.executable, os.path.join(HERE, "numpy_mamba2_fig1.py"), "--checkpoint", ck1,
                        "--runs", "4", "--tokens", "6", "--depth", "5"], capture_output=True, text=True)
    ok = r.returncode == 0
    if ok:
        js = json.loads(r.stdout.strip().splitlines()[-1])
        ok = set(js) == {"seconds", "variants", "depth", "runs", "tokens", "lambda1_final", "pr_final"}
        ok &= set(js["lambda1_final"]) == {"gate", "no_gate"}
    check("numpy_mamba2_fig1 CLI prints the JSON line", ok, r.stderr[-300:])

    # torch_mamba2_fig1 (float32, PyTorch-CPU, quadratic SSD) agrees with the float64 reference too
    # (skipped where Debian's python3-torch is not installed)
    try:
        import torch
        import torch_mamba2_fig1 as tfig1
    except ImportError:
        tfig1 = None
    if tfig1 is None:
        print("[skip] torch_mamba2_fig1: no torch (Debian's python3-torch)")
    else:
        tids = torch.from_numpy(ids)
        M = tfig1.prepare(cfg1, W1)
        ok = True
        worst = 0.0
        with torch.inference_mode():
            for gate in (True, False):
                xt, lam, prs = tfig1.run_variant(M, cfg1, tids, 7, gate)
                xf, lam, prs = xt.double().numpy(), lam.double().numpy(), prs.double().numpy()
                sr, _ = ref.run(cfg1, W1, ids, ref.layer_schedule(3, depth=7), gate=gate)
                err = np.max(np.abs(xf - sr[-1])) / np.max(np.abs(sr[-1]))
                worst = max(worst, err)
                zh = sr[-1] / np.linalg.norm(sr[-1], axis=-1, keepdims=True)
                G = zh @ zh.transpose(0, 2, 1)
                l1 = np.linalg.eigvalsh(G)[:, -1] / 12
                pr = 144 / np.sum(G * G, axis=(1, 2))
                ok &= err < 1e-4 and np.allclose(lam[-1], l1, atol=1e-4) and np.allclose(prs[-1], pr, rtol=1e-4)
            M2 = tfig1.prepare(cfg2, W2)
            xt, _, _ = tfig1.run_variant(M2, cfg2, tids, 4, True)
        sr, _ = ref.run(cfg2, W2, ids, [0, 1, 2, 0])
        e2 = np.max(np.abs(xt.double().numpy() - sr[-1])) / np.max(np.abs(sr[-1]))
        check("torch_mamba2_fig1 float32 == float64 reference (depth 7, both gates; ngroups=2 depth 4); metrics",
              ok and e2 < 1e-4, "max rel err %.1e / %.1e" % (worst, e2))
        r = subprocess.run([sys.executable, os.path.join(HERE, "torch_mamba2_fig1.py"), "--checkpoint", ck1,
                            "--runs", "4", "--tokens", "6", "--depth", "5", "--threads", "1"], capture_output=True, text=True)
        ok = r.returncode == 0
        if ok:
            js = json.loads(r.stdout.strip().splitlines()[-1])
            ok = {"seconds", "variants", "depth", "runs", "tokens", "lambda1_final", "pr_final"} <= set(js)
            ok &= set(js["lambda1_final"]) == {"gate", "no_gate"}
        check("torch_mamba2_fig1 CLI prints the JSON line", ok, r.stderr[-300:])

    shutil.rmtree(tmp, ignore_errors=True)
    print("%d check(s) failed" % len(FAILS) if FAILS else "all checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
