"""GPT-NeoX / Pythia (the GPTNeoXForCausalLM layout): rotary positions on int(head_dim *
rotary_pct) dimensions of each head (half-split pairs, base rotary_emb_base or rope_theta,
rope_scaling linear), LayerNorm with bias, the fused per-head query_key_value rows ([heads, 3,
head_dim]: row h 3 hd + c hd + j, c = q, k, v), a GELU MLP with biases, the parallel residual
x + attn(ln1 x) + mlp(ln2 x) or the sequential one, embed_out untied unless tie_word_embeddings.
Tensor names and shapes are those of tokdyn's reader (src/models/decoder/neox.cpp, neox_tensors)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Tuple

import torch
import torch.nn as nn

from .common import (ACTIVATIONS, ConfigReader, DecoderLM, Init, LayerNorm, apply_rotary, causal_attention,
                     read_rope_scaling, rotary_cos_sin, rotary_frequencies)

NAME = "neox"
SIZES = ("tiny", "tiny-sequential", "small")


@dataclass(frozen=True)
class Arch:
    vocab: int
    d: int
    n_layer: int
    n_head: int
    d_ff: int
    positions: int
    act: str
    rotary_dims: int
    freqs: Tuple[float, ...]
    eps: float
    parallel: bool
    tied: bool
    bias: bool
    init_std: float


def parse_config(cfg: Mapping[str, Any]) -> Arch:
    """The fields tokdyn's neox reader reads, with its defaults and refusals."""
    r = ConfigReader(cfg, NAME)
    r.identity("gpt_neox", ("GPTNeoXForCausalLM", "GPTNeoXModel"))
    vocab = r.get_int("vocab_size", 1, 1 << 24)
    d = r.get_int("hidden_size", 1, 1 << 16)
    n_layer = r.get_int("num_hidden_layers", 1, 4096)
    n_head = r.get_int("num_attention_heads", 1, 4096)
    if d % n_head:
        raise r.fail("num_attention_heads", f"a divisor of hidden_size = {d}")
    hd = d // n_head
    d_ff = r.get_int("intermediate_size", 1, 1 << 20)
    positions = r.get_int("max_position_embeddings", 1, 1 << 24)
    act = r.get_str("hidden_act", ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "silu"), "gelu")
    act = {"gelu": "gelu", "relu": "relu", "silu": "silu"}.get(act, "gelu_tanh")
    pct = r.get_num("rotary_pct", 0.0, 1.0, 0.25)
    rot = int(hd * pct)  # as the reference: int(head_size * rotary_pct)
    if rot < 2:
        raise r.fail("rotary_pct", f"a fraction giving at least 2 rotary dimensions of head_dim = {hd}")
    if rot % 2:
        raise r.fail("rotary_pct", f"a fraction giving an even number of rotary dimensions (got {rot})")
    theta = r.get_num("rotary_emb_base", 1.0 + 1e-9, 1e12, 10000.0)
    if r.has("rope_theta"):
        t = r.get_num("rope_theta", 1.0 + 1e-9, 1e12)
        if r.has("rotary_emb_base") and t != theta:
            raise r.fail("rope_theta", "equal to rotary_emb_base when both are given")
        theta = t
    r.use("rope_theta")
    scaling = read_rope_scaling(r, allow_llama3=False)
    eps = r.get_num("layer_norm_eps", 1e-12, 0.1, 1e-5)
    parallel = r.get_bool("use_parallel_residual", True)
    tied = r.get_bool("tie_word_embeddings", False)
    bias = r.get_bool("attention_bias", True)
    init_std = r.get_num("initializer_range", 1e-6, 1.0, 0.02)
    r.finish()
    return Arch(vocab, d, n_layer, n_head, d_ff, positions, act, rot, tuple(rotary_frequencies(rot, theta, scaling)), eps,
                parallel, tied, bias, init_std)


def named_config(size: str) -> Dict[str, Any]:
    """tokdyn's neox_named (src/models/decoder/neox.cpp) for tiny, tiny-sequential and small."""
    j: Dict[str, Any] = {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "hidden_act": "gelu",
                         "layer_norm_eps": 1e-5, "initializer_range": 0.02, "rotary_emb_base": 10000,
                         "tie_word_embeddings": False, "use_parallel_residual": True, "bos_token_id": 0, "eos_token_id": 0}
    if size == "small":
        j.update(vocab_size=4096, hidden_size=256, num_hidden_layers=4, num_attention_heads=8, intermediate_size=1024,
                 max_position_embeddings=256, rotary_pct=0.25)
    elif size in ("tiny", "tiny-sequential"):
        j.update(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                 max_position_embeddings=64, rotary_pct=0.5)
        if size == "tiny-sequential":
            j["use_parallel_residual"] = False
    else:
        raise ValueError(f"neox size '{size}': expected one of {', '.join(SIZES)}")
    return j


class Attention(nn.Module):
    def __init__(self, a: Arch):
        super().__init__()
        self.n_head, self.hd, self.freqs = a.n_head, a.d // a.n_head, a.freqs
        self.query_key_value = nn.Linear(a.d, 3 * a.d, bias=a.bias)
        self.dense = nn.Linear(a.d, a.d, bias=a.bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        B, T, d = h.shape
        qkv = self.query_key_value(h).reshape(B, T, self.n_head, 3, self.hd)
        q, k, v = (qkv[:, :, :, c, :].transpose(1, 2) for c in range(3))  # [B, H, T, hd]
        cos, sin = rotary_cos_sin(self.freqs, T, h.dtype, h.device)
        o = causal_attention(apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v, 1.0 / math.sqrt(self.hd))
        return self.dense(o.transpose(1, 2).reshape(B, T, d))


class MLP(nn.Module):
    def __init__(self, a: Arch):
        super().__init__()
        self.act = ACTIVATIONS[a.act]
        self.dense_h_to_4h = nn.Linear(a.d, a.d_ff)
        self.dense_4h_to_h = nn.Linear(a.d_ff, a.d)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.dense_4h_to_h(self.act(self.dense_h_to_4h(h)))


class Layer(nn.Module):
    """parallel: x + attn(ln1 x) + mlp(ln2 x); sequential: x' = x + attn(ln1 x), x' + mlp(ln2 x')."""

    def __init__(self, a: Arch):
        super().__init__()
        self.parallel = a.parallel
        self.input_layernorm = LayerNorm(a.d, a.eps)
        self.post_attention_layernorm = LayerNorm(a.d, a.eps)
        self.attention = Attention(a)
        self.mlp = MLP(a)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        att = self.attention(self.input_layernorm(x))
        if self.parallel:
            return x + (att + self.mlp(self.post_attention_layernorm(x)))
        x = x + att
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, a: Arch):
        super().__init__()
        self.embed_in = nn.Embedding(a.vocab, a.d)
        self.layers = nn.ModuleList(Layer(a) for _ in range(a.n_layer))
        self.final_layer_norm = LayerNorm(a.d, a.eps)


class NeoX(DecoderLM):
    family = NAME
    BODY, EMBED, LAYERS, NORM, HEAD = "gpt_neox", "embed_in", "layers", "final_layer_norm", "embed_out"

    def __init__(self, config: Mapping[str, Any]):
        super().__init__(config)
        a = parse_config(config)
        self.attach(a, Body(a), a.tied)

    def init_weights(self, init: Init) -> None:
        """As GPTNeoXForCausalLM initialises: weights and embeddings N(0, initializer_range^2),
        biases 0, LayerNorm weights 1 (parameters in registration order)."""
        self.init_normal(init, lambda n: "layernorm" in n or "layer_norm" in n, lambda n: self.arch.init_std)
