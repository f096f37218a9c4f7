"""Llama (the LlamaForCausalLM layout): RMSNorm, rotary positions on the whole head (half-split
pairs, rope_theta; rope_scaling linear or llama3), grouped-query attention
(num_key_value_heads), SwiGLU MLP down(act(gate h) * up h), no biases unless attention_bias /
mlp_bias, output head tied to embed_tokens or untied (lm_head.weight). Tensor names and shapes are
those of tokdyn's reader (src/models/decoder/llama.cpp, llama_tensors)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Tuple

import torch
import torch.nn as nn

from .common import (ACTIVATIONS, ConfigReader, DecoderLM, Init, RMSNorm, apply_rotary, causal_attention,
                     read_rope_scaling, rotary_cos_sin, rotary_frequencies)

NAME = "llama"
SIZES = ("tiny", "tiny-llama3", "small")


@dataclass(frozen=True)
class Arch:
    vocab: int
    d: int
    n_layer: int
    n_head: int
    n_kv_head: int
    head_dim: int
    d_ff: int
    positions: int
    act: str
    freqs: Tuple[float, ...]
    eps: float
    tied: bool
    attn_bias: bool
    mlp_bias: bool
    init_std: float


def parse_config(cfg: Mapping[str, Any]) -> Arch:
    """The fields tokdyn's llama reader reads, with its defaults and refusals."""
    r = ConfigReader(cfg, NAME)
    r.identity("llama", ("LlamaForCausalLM", "LlamaModel"))
    vocab = r.get_int("vocab_size", 1, 1 << 24)
    d = r.get_int("hidden_size", 1, 1 << 16)
    n_layer = r.get_int("num_hidden_layers", 1, 4096)
    n_head = r.get_int("num_attention_heads", 1, 4096)
    n_kv = r.get_int("num_key_value_heads", 1, 4096, n_head)
    if n_head % n_kv:
        raise r.fail("num_key_value_heads", f"a divisor of num_attention_heads = {n_head}")
    if not r.has("head_dim") and d % n_head:
        raise r.fail("num_attention_heads", f"a divisor of hidden_size = {d}")
    hd = r.get_int("head_dim", 1, 4096, d // n_head)
    if hd % 2:
        raise r.fail("head_dim", "an even head dimension (rotary pairs)")
    d_ff = r.get_int("intermediate_size", 1, 1 << 20)
    positions = r.get_int("max_position_embeddings", 1, 1 << 24, 2048)
    act = r.get_str("hidden_act", ("silu", "swish", "gelu", "gelu_new", "gelu_pytorch_tanh", "relu"), "silu")
    act = {"silu": "silu", "swish": "silu", "gelu": "gelu", "relu": "relu"}.get(act, "gelu_tanh")
    theta = r.get_num("rope_theta", 1.0 + 1e-9, 1e12, 10000.0)
    scaling = read_rope_scaling(r, allow_llama3=True)
    eps = r.get_num("rms_norm_eps", 1e-12, 0.1, 1e-6)
    tied = r.get_bool("tie_word_embeddings", False)
    attn_bias = r.get_bool("attention_bias", False)
    mlp_bias = r.get_bool("mlp_bias", False)
    init_std = r.get_num("initializer_range", 1e-6, 1.0, 0.02)
    r.finish()
    return Arch(vocab, d, n_layer, n_head, n_kv, hd, d_ff, positions, act, tuple(rotary_frequencies(hd, theta, scaling)), eps,
                tied, attn_bias, mlp_bias, init_std)


def named_config(size: str) -> Dict[str, Any]:
    """tokdyn's llama_named (src/models/decoder/llama.cpp) for tiny, tiny-llama3 and small."""
    j: Dict[str, Any] = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
                         "rms_norm_eps": 1e-6, "initializer_range": 0.02, "rope_theta": 10000.0, "attention_bias": False,
                         "mlp_bias": False, "bos_token_id": 1, "eos_token_id": 2}
    if size == "small":
        j.update(vocab_size=4096, hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                 intermediate_size=688, max_position_embeddings=256, tie_word_embeddings=False)
    elif size == "tiny-llama3":
        j.update(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=172, max_position_embeddings=64, tie_word_embeddings=False, rope_theta=500000.0,
                 rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 16})
    elif size == "tiny":  # tied embeddings, grouped-query attention
        j.update(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=172, max_position_embeddings=64, tie_word_embeddings=True)
    else:
        raise ValueError(f"llama size '{size}': expected one of {', '.join(SIZES)}")
    return j


class Attention(nn.Module):
    def __init__(self, a: Arch):
        super().__init__()
        self.n_head, self.n_kv, self.hd, self.freqs = a.n_head, a.n_kv_head, a.head_dim, a.freqs
        self.q_proj = nn.Linear(a.d, a.n_head * a.head_dim, bias=a.attn_bias)
        self.k_proj = nn.Linear(a.d, a.n_kv_head * a.head_dim, bias=a.attn_bias)
        self.v_proj = nn.Linear(a.d, a.n_kv_head * a.head_dim, bias=a.attn_bias)
        self.o_proj = nn.Linear(a.n_head * a.head_dim, a.d, bias=a.attn_bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        B, T, _ = h.shape
        q = self.q_proj(h).reshape(B, T, self.n_head, self.hd).transpose(1, 2)
        k = self.k_proj(h).reshape(B, T, self.n_kv, self.hd).transpose(1, 2)
        v = self.v_proj(h).reshape(B, T, self.n_kv, self.hd).transpose(1, 2)
        cos, sin = rotary_cos_sin(self.freqs, T, h.dtype, h.device)
        o = causal_attention(apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v, 1.0 / math.sqrt(self.hd))
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.n_head * self.hd))


class MLP(nn.Module):
    def __init__(self, a: Arch):
        super().__init__()
        self.act = ACTIVATIONS[a.act]
        self.gate_proj = nn.Linear(a.d, a.d_ff, bias=a.mlp_bias)
        self.up_proj = nn.Linear(a.d, a.d_ff, bias=a.mlp_bias)
        self.down_proj = nn.Linear(a.d_ff, a.d, bias=a.mlp_bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_proj(h)) * self.up_proj(h))


class Layer(nn.Module):
    """x' = x + attn(norm1 x); x'' = x' + mlp(norm2 x')."""

    def __init__(self, a: Arch):
        super().__init__()
        self.input_layernorm = RMSNorm(a.d, a.eps)
        self.self_attn = Attention(a)
        self.post_attention_layernorm = RMSNorm(a.d, a.eps)
        self.mlp = MLP(a)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, a: Arch):
        super().__init__()
        self.embed_tokens = nn.Embedding(a.vocab, a.d)
        self.layers = nn.ModuleList(Layer(a) for _ in range(a.n_layer))
        self.norm = RMSNorm(a.d, a.eps)


class Llama(DecoderLM):
    family = NAME
    BODY, EMBED, LAYERS, NORM, HEAD = "model", "embed_tokens", "layers", "norm", "lm_head"

    def __init__(self, config: Mapping[str, Any]):
        super().__init__(config)
        a = parse_config(config)
        self.attach(a, Body(a), a.tied)

    def init_weights(self, init: Init) -> None:
        """As LlamaForCausalLM initialises: weights and embeddings N(0, initializer_range^2),
        biases 0, RMSNorm weights 1 (parameters in registration order)."""
        self.init_normal(init, lambda n: "layernorm" in n or n == "model.norm.weight", lambda n: self.arch.init_std)
