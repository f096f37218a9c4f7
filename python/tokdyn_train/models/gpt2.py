"""GPT-2 (the GPT2LMHeadModel layout): learned absolute positions, Pre-LN LayerNorm with bias, the
fused c_attn Conv1D (weights stored [in, out]: y = x W + b), biases on every linear map, a GELU-tanh
MLP of width n_inner (default 4 d), final ln_f, output head tied to wte unless
tie_word_embeddings is false (then lm_head.weight). Tensor names and shapes are those of
tokdyn's reader (src/models/decoder/gpt2.cpp, gpt2_tensors)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Mapping

import torch
import torch.nn as nn

from .common import ACTIVATIONS, ConfigReader, DecoderLM, Init, LayerNorm, causal_attention

NAME = "gpt2"
SIZES = ("tiny", "small")


@dataclass(frozen=True)
class Arch:
    vocab: int
    positions: int
    d: int
    n_layer: int
    n_head: int
    d_ff: int
    act: str
    eps: float
    init_std: float
    tied: bool


def parse_config(cfg: Mapping[str, Any]) -> Arch:
    """The fields tokdyn's gpt2 reader reads, with its defaults and refusals."""
    r = ConfigReader(cfg, NAME)
    r.identity("gpt2", ("GPT2LMHeadModel", "GPT2Model"))
    vocab = r.get_int("vocab_size", 1, 1 << 24)
    positions = r.get_int("n_positions", 1, 1 << 24)
    if r.has("n_ctx") and r.get_int("n_ctx", 1, 1 << 24) != positions:
        raise r.fail("n_ctx", "equal to n_positions")
    d = r.get_int("n_embd", 1, 1 << 16)
    n_layer = r.get_int("n_layer", 1, 4096)
    n_head = r.get_int("n_head", 1, 4096)
    if d % n_head:
        raise r.fail("n_head", f"a divisor of n_embd = {d}")
    d_ff = r.get_int("n_inner", 1, 1 << 20) if r.has("n_inner") else 4 * d
    r.use("n_inner")
    act = r.get_str("activation_function", ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu", "relu", "silu", "swish"),
                    "gelu_new")
    act = {"gelu": "gelu", "relu": "relu", "silu": "silu", "swish": "silu"}.get(act, "gelu_tanh")
    eps = r.get_num("layer_norm_epsilon", 1e-12, 0.1, 1e-5)
    init_std = r.get_num("initializer_range", 1e-6, 1.0, 0.02)
    if not r.get_bool("scale_attn_weights", True):
        raise r.fail("scale_attn_weights", "true (unscaled attention is not implemented)")
    if r.get_bool("scale_attn_by_inverse_layer_idx", False):
        raise r.fail("scale_attn_by_inverse_layer_idx", "false (per-layer attention scaling is not implemented)")
    r.get_bool("reorder_and_upcast_attn", False)  # the same attention computed in fp32: no change here
    if r.get_bool("add_cross_attention", False):
        raise r.fail("add_cross_attention", "false (a decoder-only model)")
    tied = r.get_bool("tie_word_embeddings", True)
    r.finish()
    return Arch(vocab, positions, d, n_layer, n_head, d_ff, act, eps, init_std, tied)


def named_config(size: str) -> Dict[str, Any]:
    """tokdyn's gpt2_named (src/models/decoder/gpt2.cpp) for tiny and small."""
    j: Dict[str, Any] = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "activation_function": "gelu_new",
                         "layer_norm_epsilon": 1e-5, "initializer_range": 0.02, "scale_attn_weights": True,
                         "tie_word_embeddings": True, "bos_token_id": 50256, "eos_token_id": 50256}
    if size == "small":
        j.update(vocab_size=4096, n_positions=256, n_embd=256, n_layer=4, n_head=8)
    elif size == "tiny":
        j.update(vocab_size=512, n_positions=64, n_embd=64, n_layer=2, n_head=4, bos_token_id=511, eos_token_id=511)
    else:
        raise ValueError(f"gpt2 size '{size}': expected one of {', '.join(SIZES)}")
    return j


class Conv1D(nn.Module):
    """GPT-2's linear map with the weight stored [in, out]: y = x W + b."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x, self.weight) + self.bias


class Attention(nn.Module):
    def __init__(self, a: Arch):
        super().__init__()
        self.n_head, self.hd = a.n_head, a.d // a.n_head
        self.c_attn = Conv1D(a.d, 3 * a.d)
        self.c_proj = Conv1D(a.d, a.d)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        B, T, d = h.shape
        q, k, v = self.c_attn(h).split(d, dim=-1)
        heads = lambda t: t.reshape(B, T, self.n_head, self.hd).transpose(1, 2)  # noqa: E731
        o = causal_attention(heads(q), heads(k), heads(v), 1.0 / math.sqrt(self.hd))
        return self.c_proj(o.transpose(1, 2).reshape(B, T, d))


class MLP(nn.Module):
    def __init__(self, a: Arch):
        super().__init__()
        self.act = ACTIVATIONS[a.act]
        self.c_fc = Conv1D(a.d, a.d_ff)
        self.c_proj = Conv1D(a.d_ff, a.d)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.act(self.c_fc(h)))


class Block(nn.Module):
    """x' = x + attn(ln_1 x); x'' = x' + mlp(ln_2 x')."""

    def __init__(self, a: Arch):
        super().__init__()
        self.ln_1 = LayerNorm(a.d, a.eps)
        self.attn = Attention(a)
        self.ln_2 = LayerNorm(a.d, a.eps)
        self.mlp = MLP(a)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Body(nn.Module):
    def __init__(self, a: Arch):
        super().__init__()
        self.wte = nn.Embedding(a.vocab, a.d)
        self.wpe = nn.Embedding(a.positions, a.d)
        self.h = nn.ModuleList(Block(a) for _ in range(a.n_layer))
        self.ln_f = LayerNorm(a.d, a.eps)


class GPT2(DecoderLM):
    family = NAME
    BODY, EMBED, LAYERS, NORM, HEAD = "transformer", "wte", "h", "ln_f", "lm_head"

    def __init__(self, config: Mapping[str, Any]):
        super().__init__(config)
        a = parse_config(config)
        self.attach(a, Body(a), a.tied)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.transformer.wte(ids) + self.transformer.wpe(pos)[None]

    def init_weights(self, init: Init) -> None:
        """As GPT2LMHeadModel initialises: every weight N(0, initializer_range^2), the residual
        projections (attn.c_proj, mlp.c_proj) N(0, (initializer_range / sqrt(2 n_layer))^2),
        biases 0, LayerNorm weights 1 (parameters in registration order)."""
        std = self.arch.init_std
        proj = std / math.sqrt(2.0 * self.arch.n_layer)
        self.init_normal(init, lambda n: ".ln_" in n or n.startswith("transformer.ln_f"),
                         lambda n: proj if n.endswith("c_proj.weight") else std)
