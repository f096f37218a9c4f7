"""GPT-2, GPT-NeoX (both residual layouts) and Llama (grouped-query, tied and untied, Llama 3
RoPE scaling) against an independent float64 PyTorch implementation written here from the
models' equations (it shares no code with tokdyn): checkpoints are written by this file in the
Hugging Face layout (its own safetensors writer), tokdyn loads them, and every layer's hidden
state agrees to about 1e-5 relative (tokdyn computes in fp32), its exact JVP with torch's
forward-mode JVP of the same block in float64. tokdyn's make-checkpoint layout (names, shapes,
dtypes, initialisation statistics) is checked against the published layout. Run by CTest
(test `decoder_reference`) with PYTHONPATH=build/python and TOKDYN_BIN = the CLI."""
import json
import math
import os
import struct
import zlib
import subprocess
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tokdyn  # noqa: E402

CLI = os.environ.get("TOKDYN_BIN", "tokdyn")
torch.set_default_dtype(torch.float64)


# ---- safetensors, written and read here ---------------------------------------------------


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", t
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + b:8 + n + e], dtype="<f4").reshape(t["shape"])
    return out, meta


# ---- the three families, from their equations -------------------------------------------------


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + (0 if b is None else b)


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def gelu_tanh(u):
    return 0.5 * u * (1 + torch.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))


def gelu_erf(u):
    return 0.5 * u * (1 + torch.erf(u / math.sqrt(2)))


def silu(u):
    return u * torch.sigmoid(u)


def rotate(x, inv_freq):
    """Half-split rotary on the last dimension of x [.., T, r] with frequencies inv_freq [r/2]."""
    T, r = x.shape[-2], x.shape[-1]
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., : r // 2], x[..., r // 2:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def attention(q, k, v):
    """q [H, T, hd], k, v [H, T, hd]: causal softmax attention, [H, T, hd]."""
    T, hd = q.shape[-2], q.shape[-1]
    s = q @ k.transpose(-1, -2) / math.sqrt(hd)
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


class Ref:
    """The reference model on one sequence x [T, d] (float64)."""

    def __init__(self, family, cfg, W):
        self.f, self.c = family, cfg
        self.W = {k: torch.tensor(v, dtype=torch.float64) for k, v in W.items()}

    def g(self, name):
        return self.W[name]

    def embed(self, ids):
        if self.f == "gpt2":
            return self.g("transformer.wte.weight")[ids] + self.g("transformer.wpe.weight")[: len(ids)]
        if self.f == "neox":
            return self.g("gpt_neox.embed_in.weight")[ids]
        return self.g("model.embed_tokens.weight")[ids]

    def block(self, l, x):
        c, g, T = self.c, self.g, x.shape[0]
        if self.f == "gpt2":
            p, d, H = f"transformer.h.{l}.", c["n_embd"], c["n_head"]
            hd = d // H
            h = layer_norm(x, g(p + "ln_1.weight"), g(p + "ln_1.bias"), c["layer_norm_epsilon"])
            qkv = h @ g(p + "attn.c_attn.weight") + g(p + "attn.c_attn.bias")
            q, k, v = (qkv[:, i * d:(i + 1) * d].reshape(T, H, hd).transpose(0, 1) for i in range(3))
            o = attention(q, k, v).transpose(0, 1).reshape(T, d)
            x = x + o @ g(p + "attn.c_proj.weight") + g(p + "attn.c_proj.bias")
            h2 = layer_norm(x, g(p + "ln_2.weight"), g(p + "ln_2.bias"), c["layer_norm_epsilon"])
            m = gelu_tanh(h2 @ g(p + "mlp.c_fc.weight") + g(p + "mlp.c_fc.bias")) @ g(p + "mlp.c_proj.weight") + g(p + "mlp.c_proj.bias")
            return x + m
        if self.f == "neox":
            p, d, H = f"gpt_neox.layers.{l}.", c["hidden_size"], c["num_attention_heads"]
            hd = d // H
            r = int(hd * c["rotary_pct"])
            inv = 1.0 / (c["rotary_emb_base"] ** (torch.arange(0, r, 2, dtype=torch.float64) / r))
            eps = c["layer_norm_eps"]
            h = layer_norm(x, g(p + "input_layernorm.weight"), g(p + "input_layernorm.bias"), eps)
            qkv = (h @ g(p + "attention.query_key_value.weight").T + g(p + "attention.query_key_value.bias")).reshape(T, H, 3 * hd)
            q, k, v = (qkv[..., i * hd:(i + 1) * hd].transpose(0, 1) for i in range(3))
            q = torch.cat([rotate(q[..., :r], inv), q[..., r:]], dim=-1)
            k = torch.cat([rotate(k[..., :r], inv), k[..., r:]], dim=-1)
            o = attention(q, k, v).transpose(0, 1).reshape(T, d)
            a = o @ g(p + "attention.dense.weight").T + g(p + "attention.dense.bias")

            def mlp(z):
                u = layer_norm(z, g(p + "post_attention_layernorm.weight"), g(p + "post_attention_layernorm.bias"), eps)
                return gelu_erf(u @ g(p + "mlp.dense_h_to_4h.weight").T + g(p + "mlp.dense_h_to_4h.bias")) @ \
                    g(p + "mlp.dense_4h_to_h.weight").T + g(p + "mlp.dense_4h_to_h.bias")
            if c["use_parallel_residual"]:
                return x + a + mlp(x)
            x = x + a
            return x + mlp(x)
        # llama
        p, d, H, Hk = f"model.layers.{l}.", c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        hd = d // H
        inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        rs = c.get("rope_scaling")
        if rs:  # Llama 3.1: long wavelengths / factor, short kept, smooth between
            fac, lo, hi, om = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
            wl = 2 * math.pi / inv
            smooth = (om / wl - lo) / (hi - lo)
            mid = (1 - smooth) * inv / fac + smooth * inv
            inv = torch.where(wl < om / hi, inv, torch.where(wl > om / lo, inv / fac, mid))
        eps = c["rms_norm_eps"]
        h = rms_norm(x, g(p + "input_layernorm.weight"), eps)
        q = (h @ g(p + "self_attn.q_proj.weight").T).reshape(T, H, hd).transpose(0, 1)
        k = (h @ g(p + "self_attn.k_proj.weight").T).reshape(T, Hk, hd).transpose(0, 1)
        v = (h @ g(p + "self_attn.v_proj.weight").T).reshape(T, Hk, hd).transpose(0, 1)
        q, k = rotate(q, inv), rotate(k, inv)
        k, v = k.repeat_interleave(H // Hk, dim=0), v.repeat_interleave(H // Hk, dim=0)
        o = attention(q, k, v).transpose(0, 1).reshape(T, d)
        x = x + o @ g(p + "self_attn.o_proj.weight").T
        u = rms_norm(x, g(p + "post_attention_layernorm.weight"), eps)
        m = (silu(u @ g(p + "mlp.gate_proj.weight").T) * (u @ g(p + "mlp.up_proj.weight").T)) @ g(p + "mlp.down_proj.weight").T
        return x + m


# ---- checkpoints in the published layouts, written here ---------------------------------------


def configs():
    gpt2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 97, "n_positions": 32, "n_embd": 48,
            "n_layer": 3, "n_head": 4, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
            "resid_pdrop": 0.1, "attn_pdrop": 0.1, "embd_pdrop": 0.1, "initializer_range": 0.02, "use_cache": True}
    neox = {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "vocab_size": 101, "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 96, "hidden_act": "gelu",
            "rotary_pct": 0.25, "rotary_emb_base": 10000, "max_position_embeddings": 64, "layer_norm_eps": 1e-5,
            "use_parallel_residual": True, "tie_word_embeddings": False, "initializer_range": 0.02}
    neox_seq = dict(neox, use_parallel_residual=False, rotary_pct=0.5)
    llama = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 89, "hidden_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 120,
             "hidden_act": "silu", "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
             "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False}
    llama3 = dict(llama, tie_word_embeddings=False, num_key_value_heads=4, rope_theta=500000.0,
                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 16})
    return {"gpt2": ("gpt2", gpt2), "neox-parallel": ("neox", neox), "neox-sequential": ("neox", neox_seq),
            "llama-gqa-tied": ("llama", llama), "llama3-scaled": ("llama", llama3)}


def random_weights(family, c, rng):
    W = {}

    def n(name, *shape, s=0.15):
        W[name] = (s * rng.standard_normal(shape)).astype(np.float32)

    def one(name, d):
        W[name] = (1 + 0.2 * rng.standard_normal(d)).astype(np.float32)

    if family == "gpt2":
        d, F = c["n_embd"], 4 * c["n_embd"]
        n("transformer.wte.weight", c["vocab_size"], d, s=1.0)
        n("transformer.wpe.weight", c["n_positions"], d, s=0.5)
        for l in range(c["n_layer"]):
            p = f"transformer.h.{l}."
            one(p + "ln_1.weight", d), n(p + "ln_1.bias", d, s=0.1)
            n(p + "attn.c_attn.weight", d, 3 * d), n(p + "attn.c_attn.bias", 3 * d, s=0.1)
            n(p + "attn.c_proj.weight", d, d), n(p + "attn.c_proj.bias", d, s=0.1)
            one(p + "ln_2.weight", d), n(p + "ln_2.bias", d, s=0.1)
            n(p + "mlp.c_fc.weight", d, F), n(p + "mlp.c_fc.bias", F, s=0.1)
            n(p + "mlp.c_proj.weight", F, d), n(p + "mlp.c_proj.bias", d, s=0.1)
            W[p + "attn.bias"] = np.tril(np.ones((c["n_positions"], c["n_positions"]), np.float32))[None, None]  # old buffer
        one("transformer.ln_f.weight", d), n("transformer.ln_f.bias", d, s=0.1)
    elif family == "neox":
        d, F = c["hidden_size"], c["intermediate_size"]
        n("gpt_neox.embed_in.weight", c["vocab_size"], d, s=1.0)
        for l in range(c["num_hidden_layers"]):
            p = f"gpt_neox.layers.{l}."
            for ln in ("input_layernorm", "post_attention_layernorm"):
                one(p + ln + ".weight", d), n(p + ln + ".bias", d, s=0.1)
            n(p + "attention.query_key_value.weight", 3 * d, d), n(p + "attention.query_key_value.bias", 3 * d, s=0.1)
            n(p + "attention.dense.weight", d, d), n(p + "attention.dense.bias", d, s=0.1)
            n(p + "mlp.dense_h_to_4h.weight", F, d), n(p + "mlp.dense_h_to_4h.bias", F, s=0.1)
            n(p + "mlp.dense_4h_to_h.weight", d, F), n(p + "mlp.dense_4h_to_h.bias", d, s=0.1)
        one("gpt_neox.final_layer_norm.weight", d), n("gpt_neox.final_layer_norm.bias", d, s=0.1)
        n("embed_out.weight", c["vocab_size"], d)
    else:
        d, F, H, Hk = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"], c["num_key_value_heads"]
        hd = d // H
        n("model.embed_tokens.weight", c["vocab_size"], d, s=1.0)
        for l in range(c["num_hidden_layers"]):
            p = f"model.layers.{l}."
            one(p + "input_layernorm.weight", d), one(p + "post_attention_layernorm.weight", d)
            n(p + "self_attn.q_proj.weight", H * hd, d), n(p + "self_attn.k_proj.weight", Hk * hd, d)
            n(p + "self_attn.v_proj.weight", Hk * hd, d), n(p + "self_attn.o_proj.weight", d, H * hd)
            n(p + "mlp.gate_proj.weight", F, d), n(p + "mlp.up_proj.weight", F, d), n(p + "mlp.down_proj.weight", d, F)
        one("model.norm.weight", d)
        if not c["tie_word_embeddings"]:
            n("lm_head.weight", c["vocab_size"], d)
    return W


CASES = list(configs())


@pytest.fixture(scope="module", params=CASES)
def case(request, tmp_path_factory):
    family, cfg = configs()[request.param]
    W = random_weights(family, cfg, np.random.default_rng(zlib.crc32(request.param.encode())))
    d = tmp_path_factory.mktemp(request.param)
    (d / "config.json").write_text(json.dumps(cfg))
    write_safetensors(d / "model.safetensors", W)
    return request.param, family, cfg, W, d


def n_layer(cfg):
    return cfg.get("n_layer", cfg.get("num_hidden_layers"))


def test_hidden_states_agree_layer_by_layer(case):
    name, family, cfg, W, d = case
    T, B = 13, 3
    ids = np.random.default_rng(7).integers(0, cfg["vocab_size"], size=(B, T))
    m = getattr(tokdyn.models, family)(checkpoint=str(d), token_ids=ids)
    L = n_layer(cfg)
    hs = m.hidden_states(depth=L)  # [L + 1, B, T, d]
    assert hs.shape == (L + 1, B, T, cfg.get("n_embd", cfg.get("hidden_size")))
    ref = Ref(family, cfg, W)
    worst = 0.0
    for b in range(B):
        x = ref.embed(torch.tensor(ids[b]))
        for l in range(L + 1):
            if l > 0:
                x = ref.block(l - 1, x)
            err = np.abs(hs[l, b] - x.numpy()).max() / np.abs(x.numpy()).max()
            worst = max(worst, err)
            assert err < 1e-5, f"{name}: layer {l}, run {b}: relative error {err:.2e}"
    print(f"{name}: worst relative error over layers and runs {worst:.2e}")


def test_exact_jvp_equals_torch_forward_mode(case):
    name, family, cfg, W, d = case
    T = 9
    ids = np.random.default_rng(8).integers(0, cfg["vocab_size"], size=T)
    m = getattr(tokdyn.models, family)(checkpoint=str(d), token_ids=ids)
    ref = Ref(family, cfg, W)
    X = m.x0  # [T, d], float32 values widened
    V = np.random.default_rng(9).standard_normal((2,) + X.shape)
    for layer in range(1, n_layer(cfg) + 1):
        got = m.jvp(X, V, layer)
        for j in range(2):
            _, want = torch.autograd.functional.jvp(lambda z: ref.block(layer - 1, z), torch.tensor(X), torch.tensor(V[j]))
            err = np.abs(got[j] - want.numpy()).max() / np.abs(want.numpy()).max()
            assert err < 1e-10, f"{name}: layer {layer}: JVP relative error {err:.2e}"
        X = m.step(X, layer)


def test_attentions_are_causal_probabilities(case):
    name, family, cfg, W, d = case
    ids = np.arange(6) % cfg["vocab_size"]
    m = getattr(tokdyn.models, family)(checkpoint=str(d), token_ids=ids)
    A = m.attentions(depth=2)
    H = cfg.get("n_head", cfg.get("num_attention_heads"))
    assert A.shape == (2, 1, H, 6, 6)
    assert np.allclose(A.sum(-1), 1, atol=1e-5)
    assert np.all(np.triu(A[..., :, :], 1) == 0)


# ---- make-checkpoint: the published layouts and initialisation ---------------------------------

PUBLISHED = {
    # family: (size, names expected beside the per-layer ones, per-layer names of layer 0)
    "gpt2": ("tiny", {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"},
             {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
              "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"},
             "transformer.h.0."),
    "neox": ("tiny", {"gpt_neox.embed_in.weight", "gpt_neox.final_layer_norm.weight", "gpt_neox.final_layer_norm.bias",
                      "embed_out.weight"},
             {"input_layernorm.weight", "input_layernorm.bias", "post_attention_layernorm.weight", "post_attention_layernorm.bias",
              "attention.query_key_value.weight", "attention.query_key_value.bias", "attention.dense.weight",
              "attention.dense.bias", "mlp.dense_h_to_4h.weight", "mlp.dense_h_to_4h.bias", "mlp.dense_4h_to_h.weight",
              "mlp.dense_4h_to_h.bias"},
             "gpt_neox.layers.0."),
    "llama": ("small", {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"},
              {"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
               "self_attn.v_proj.weight", "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
               "mlp.down_proj.weight"},
              "model.layers.0."),
}


@pytest.mark.parametrize("family", sorted(PUBLISHED))
def test_make_checkpoint_writes_the_published_layout(family, tmp_path):
    size, top, per_layer, p0 = PUBLISHED[family]
    out = tmp_path / "ck"
    r = subprocess.run([CLI, "make-checkpoint", "--model", family, "--size", size, "--seed", "3", "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cfg = json.loads((out / "config.json").read_text())
    W, meta = read_safetensors(out / "model.safetensors")
    L = n_layer(cfg)
    want = set(top) | {p0.replace(".0.", f".{l}.") + s for l in range(L) for s in per_layer}
    assert set(W) == want
    d = cfg.get("n_embd", cfg.get("hidden_size"))
    assert W[sorted(n for n in W if "embed" in n or "wte" in n)[0]].shape == (cfg["vocab_size"], d)
    # Initialisation as the reference implementations: N(0, 0.02^2) weights (GPT-2's c_proj
    # 0.02 / sqrt(2 n_layer)), zero biases, unit norm weights.
    for n_, a in W.items():
        if n_.endswith("bias"):
            assert np.all(a == 0), n_
        elif "norm" in n_ or "ln_" in n_:
            assert np.all(a == 1), n_
        elif a.size > 4000:
            want_sd = 0.02 / math.sqrt(2 * L) if (family == "gpt2" and n_.endswith("c_proj.weight")) else 0.02
            assert abs(a.std() / want_sd - 1) < 0.1 and abs(a.mean()) < 0.1 * want_sd, (n_, a.std(), want_sd)
    assert "tokdyn" in meta and meta["format"] == "pt"
    # And tokdyn reads it back as that family.
    m = getattr(tokdyn.models, family)(checkpoint=str(out), tokens=4)
    assert m.notes["synthetic_model"] is True
