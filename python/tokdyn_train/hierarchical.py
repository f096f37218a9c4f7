"""The hierarchical model (C1)-(C2) of "Attention is Just Another Name for Coupling?" in PyTorch,
equal to tokdyn's depth map (model ``hierarchical``: src/models/hierarchical/, built on the
Transformer block (4) of src/models/transformer/ and the parts of src/models/parts/).

One layer k >= 1 (weights of index r = k - 1 under the tying schedule, flag F2) maps the state
Z = [x; y_hat] of T + K rows (rows [0, T) the tokens, rows [T, T + K) the held block summaries
y_hat_1..y_hat_K, K = ceil(T / P), the last block possibly partial) to

    y      = Pi(pooled(x))          if the layer refreshes (sample-and-hold: l = k - 1 a multiple
                                    of refresh_every; refresh_every = 0: only l = 0), else y_hat
    a_t    = rho psi(src_{k(t)})    the same vector for every token of a block; src_b = y_{b-1}
                                    (chain; y_0 a fixed vector, 0) or y_b (self loop, eq. (15))
    x'     = F(x) + a               (site additive, eq. (11); F the Transformer block (4), Pre-LN or
                                    Post-LN, block-local causal attention inside blocks of P tokens)
           = F(x + a) - a           (site inside: the norms read x + a, the stream does not carry a)
    y_hat' = y                      (sample-and-hold), or y_hat + (pool(x) - y_hat) / refresh_every
                                    (the relaxation (12); refresh_every = 0: held)

with pooled(x) = S(x) (the model's norm with unit gains and zero bias) or x (raw), and Pi the block
mean, stride (last token), head (first token) or top-k (mean of the k rows of largest pooled norm,
ties to the earlier row). The Transformer block (no W_O, single- or multi-head on coordinate
slices, temperature tau = sqrt(d / heads) by default, RoPE on interleaved planes or ALiBi with
slope 0.5, as tokdyn's Config):

    Pre-LN   z = S_1(x); x_h = x + sum_s alpha_ts W_V z_s; x' = x_h + W_2 phi(W_1 S_2(x_h) + b_1) + b_2
    Post-LN  x_h = S_1(x + sum_s alpha_ts W_V x_s);       x' = S_2(x_h + W_2 phi(W_1 x_h + b_1) + b_2)

Weight layout: tokdyn's (docs/transformer-weights.md): ``layers.{r}.W_Q`` [d, d] (applied as
x W_Q^T), W_K, W_V [d, d], W_1 [d_ff, d], b_1 [d_ff], W_2 [d, d_ff], b_2 [d], g_attn, beta_attn,
g_mlp, beta_mlp [d]; the module's state_dict uses these names, so ``load_tf_weights`` reads the
``inputs/tf_weights.safetensors`` a tokdyn run writes and ``save_tf_weights`` writes a file tokdyn
takes back (``--set tf_weights=FILE``). psi: ``psi.B``, ``psi.c``, ``psi.W1``, ``psi.b1``,
``psi.W2`` (tokdyn's hier::Injection fields). tokdyn does not write the hierarchical model's psi
among its inputs; ``tokdyn_injection`` redraws it from the seed (tokdyn's stream (seed, 0x5103,
tensor) through ``TokdynRng``, a port of src/core/rng.cpp's generator).

``HierarchicalLM`` wraps the core into a next-token language model (embedding, the core, a final
norm and an unembedding) for experiment E1 (python/tokdyn_train/e1.py).
"""
from __future__ import annotations

import json
import math
import struct
from fractions import Fraction
from dataclasses import dataclass, field, fields, replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

__all__ = [
    "HierarchicalConfig", "HierarchicalCore", "HierarchicalLM", "SIZES", "TokdynRng", "tokdyn_injection",
    "tokdyn_random_weights", "read_safetensors", "write_safetensors", "load_tf_weights", "save_tf_weights",
    "config_from_knobs",
]

_CHOICES = {
    "norm": ("rms", "layer", "none"),
    "placement": ("pre", "post"),
    "activation": ("gelu", "gelu-tanh", "silu", "tanh", "relu"),
    "positional": ("none", "rope", "alibi"),
    "tying": ("untied", "tied", "looped"),
    "compression": ("mean", "stride", "head", "topk"),
    "injection": ("identity", "linear", "affine", "tanh-mlp"),
    "refresh": ("hold", "relax"),
    "pooled": ("raw", "normalised"),
    "slow_loop": ("chain", "self"),
    "site": ("additive", "inside"),
}


@dataclass(frozen=True)
class HierarchicalConfig:
    """The knobs of tokdyn's model ``hierarchical`` (``tokdyn models hierarchical``), same names and
    defaults, except ``rho`` (the gate is the module's parameter or buffer) and the seeds (the
    weights are the module's). ``loop``: the number of weight sets of a looped stack."""
    d: int = 4
    d_ff: int = 16
    heads: int = 1
    tokens: int = 16
    block: int = 4
    depth: int = 200
    norm: str = "rms"
    eps: float = 1e-6
    placement: str = "pre"
    activation: str = "gelu"
    positional: str = "none"
    temperature: float = 0.0
    tying: str = "untied"
    loop: int = 4
    compression: str = "mean"
    topk: int = 1
    injection: str = "tanh-mlp"
    psi_hidden: int = 8
    refresh_every: int = 1
    refresh: str = "hold"
    pooled: str = "normalised"
    slow_loop: str = "chain"
    site: str = "additive"
    rope_base: float = 10000.0   # tokdyn's Config default (not a registry knob)
    alibi_slope: float = 0.5     # tokdyn's Config default (not a registry knob)

    def validate(self) -> None:
        """ValueError naming the knob for a value tokdyn refuses."""
        for k, opts in _CHOICES.items():
            if getattr(self, k) not in opts:
                raise ValueError(f"{k} = {getattr(self, k)!r}: expected one of {', '.join(opts)}")
        for k in ("d", "d_ff", "heads", "tokens", "block", "depth", "loop", "topk", "psi_hidden"):
            if int(getattr(self, k)) < 1:
                raise ValueError(f"{k} = {getattr(self, k)}: expected >= 1")
        if self.d % self.heads:
            raise ValueError(f"heads = {self.heads}: expected a divisor of d = {self.d}")
        if self.positional == "rope" and (self.d // self.heads) % 2:
            raise ValueError(f"d = {self.d}: positional = rope needs an even head size d/heads (heads = {self.heads})")
        if self.block > self.tokens:
            raise ValueError(f"block = {self.block}: longer than the sequence (tokens = {self.tokens})")
        if self.refresh_every < 0:
            raise ValueError(f"refresh_every = {self.refresh_every}: expected >= 0 (0: held for the whole pass)")
        if not (self.eps >= 0.0 and math.isfinite(self.eps)):
            raise ValueError(f"eps = {self.eps}: expected a finite value >= 0")
        if not (self.temperature >= 0.0 and math.isfinite(self.temperature)):
            raise ValueError(f"temperature = {self.temperature}: expected a finite value >= 0 (0: sqrt(d/heads))")
        if self.site == "inside" and self.placement != "pre":
            raise ValueError("site = inside: the inside-S injection site is defined for Pre-LN blocks only")

    @property
    def blocks(self) -> int:
        return (self.tokens + self.block - 1) // self.block

    @property
    def rows(self) -> int:
        return self.tokens + self.blocks

    @property
    def tau(self) -> float:
        return self.temperature if self.temperature > 0.0 else math.sqrt(self.d // self.heads)

    @property
    def weight_sets(self) -> int:
        return {"untied": self.depth, "tied": 1, "looped": self.loop}[self.tying]


def config_from_knobs(knobs: Dict[str, str], **override) -> HierarchicalConfig:
    """The config of a tokdyn model's knobs (``tokdyn.models.hierarchical(...).knobs``, strings)."""
    out = {}
    for f in fields(HierarchicalConfig):
        if f.name in knobs:
            v = knobs[f.name]
            out[f.name] = type(f.default)(v) if not isinstance(f.default, str) else v
    out.update(override)
    return HierarchicalConfig(**out)


# ---- norms, activations, masks ------------------------------------------------------------------


def _norm(kind: str, x: torch.Tensor, g: Optional[torch.Tensor], b: Optional[torch.Tensor], eps: float) -> torch.Tensor:
    """tokdyn's norm S on the last axis (parts::norm_rows): RMS w (x / sqrt(mean x^2 + eps)); Layer
    (x - mu) / sqrt(var + eps) w + b; none: x. g, b None: unit gains, zero bias."""
    if kind == "none":
        return x
    if kind == "rms":
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return y if g is None else y * g
    xc = x - x.mean(-1, keepdim=True)
    y = xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + eps)
    if g is not None:
        y = y * g
    return y if b is None else y + b


def _act(kind: str, u: torch.Tensor) -> torch.Tensor:
    """phi: GELU u Phi(u) (erf), GELU-tanh, SiLU u sigma(u), ReLU, tanh (torch's kernels: the same
    functions as tokdyn's parts::act_value up to rounding)."""
    if kind == "gelu":
        return F.gelu(u)
    if kind == "gelu-tanh":
        return F.gelu(u, approximate="tanh")
    if kind == "silu":
        return F.silu(u)
    if kind == "relu":
        return torch.relu(u)
    return torch.tanh(u)


def _score_bias(c: HierarchicalConfig, T: int, dtype, device) -> torch.Tensor:
    """The block-local causal mask (C1) as an additive bias [T, T] (-inf across blocks and above the
    diagonal), minus ALiBi's slope |t - s| on the visible entries."""
    t = torch.arange(T, device=device)
    vis = (t[None, :] <= t[:, None]) & ((t[None, :] // c.block) == (t[:, None] // c.block))
    B = torch.zeros(T, T, dtype=dtype, device=device)
    if c.positional == "alibi" and c.alibi_slope != 0.0:
        B = B - c.alibi_slope * (t[:, None] - t[None, :]).abs().to(dtype)
    return B.masked_fill(~vis, float("-inf"))


def _rope(c: HierarchicalConfig, x: torch.Tensor) -> torch.Tensor:
    """RoPE on [..., H, T, dh]: planes (2i, 2i + 1) of each head rotated by p f_i, f_i = base^(-2i/dh),
    p = 0..T-1 the position in the whole sequence (tokdyn's interleaved RotaryTable)."""
    T, dh = x.shape[-2], x.shape[-1]
    f = torch.tensor([c.rope_base ** (-2.0 * i / dh) for i in range(dh // 2)], dtype=torch.float64)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * f[None, :]
    cs, sn = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    xa, xb = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = xa * cs - xb * sn
    out[..., 1::2] = xb * cs + xa * sn
    return out


# ---- the modules ----------------------------------------------------------------------------------


class TransformerBlock(nn.Module):
    """One weight set of tokdyn's Transformer block (4) (tf::LayerWeights). Gains (LayerNorm biases)
    are parameters only where the norm uses them (norm != none; norm = layer), buffers otherwise."""

    def __init__(self, c: HierarchicalConfig, dtype=torch.float64):
        super().__init__()
        d, f = c.d, c.d_ff
        z = lambda *s: torch.zeros(*s, dtype=dtype)  # noqa: E731
        for n in ("W_Q", "W_K", "W_V"):
            setattr(self, n, nn.Parameter(z(d, d)))
        self.W_1, self.b_1 = nn.Parameter(z(f, d)), nn.Parameter(z(f))
        self.W_2, self.b_2 = nn.Parameter(z(d, f)), nn.Parameter(z(d))
        for n, v, used in (("g_attn", 1.0, c.norm != "none"), ("g_mlp", 1.0, c.norm != "none"),
                           ("beta_attn", 0.0, c.norm == "layer"), ("beta_mlp", 0.0, c.norm == "layer")):
            t = torch.full((d,), v, dtype=dtype)
            if used:
                setattr(self, n, nn.Parameter(t))
            else:
                self.register_buffer(n, t)

    def forward(self, c: HierarchicalConfig, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """The block on x [..., T, d] (tokens only), without the slow path."""
        pre = c.placement == "pre"
        A = _norm(c.norm, x, self.g_attn, self.beta_attn, c.eps) if pre else x
        H, dh = c.heads, c.d // c.heads
        lead, T = x.shape[:-2], x.shape[-2]

        def heads(M):  # [..., T, d] -> [..., H, T, dh]
            return M.reshape(*lead, T, H, dh).transpose(-3, -2)

        Q, K, V = heads(A @ self.W_Q.T), heads(A @ self.W_K.T), heads(A @ self.W_V.T)
        if c.positional == "rope":
            Q, K = _rope(c, Q), _rope(c, K)
        alpha = torch.softmax(Q @ K.transpose(-1, -2) / c.tau + bias, dim=-1)
        R1 = x + (alpha @ V).transpose(-3, -2).reshape(*lead, T, c.d)  # x + sum_s alpha_ts v_s (no W_O)
        if pre:
            Xh = R1
            M = _norm(c.norm, Xh, self.g_mlp, self.beta_mlp, c.eps)
        else:
            Xh = _norm(c.norm, R1, self.g_attn, self.beta_attn, c.eps)
            M = Xh
        Y = _act(c.activation, M @ self.W_1.T + self.b_1) @ self.W_2.T + self.b_2 + Xh
        return Y if pre else _norm(c.norm, Y, self.g_mlp, self.beta_mlp, c.eps)


class Injection(nn.Module):
    """psi: R^d -> R^d (hier::Injection): identity; linear B u; affine c + B u; tanh-MLP
    c + W2 tanh(W1 u + b1)."""

    def __init__(self, kind: str, d: int, hidden: int, dtype=torch.float64):
        super().__init__()
        self.kind = kind
        z = lambda *s: nn.Parameter(torch.zeros(*s, dtype=dtype))  # noqa: E731
        if kind in ("linear", "affine"):
            self.B = z(d, d)
        if kind in ("affine", "tanh-mlp"):
            self.c = z(d)
        if kind == "tanh-mlp":
            self.W1, self.b1, self.W2 = z(hidden, d), z(hidden), z(d, hidden)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        if self.kind == "identity":
            return u
        if self.kind == "linear":
            return u @ self.B.T
        if self.kind == "affine":
            return self.c + u @ self.B.T
        return self.c + torch.tanh(u @ self.W1.T + self.b1) @ self.W2.T


class HierarchicalCore(nn.Module):
    """tokdyn's HierarchicalModel as a module: ``forward(Z)`` maps states Z [rows, d] or
    [runs, rows, d] (rows = T + K: tokens, then held summaries) through layers 1..depth (or
    ``layers``); ``step(Z, k)`` is layer k alone; ``initial_state(X)`` appends y_hat(0) =
    Pi(pooled(X)) to tokens X [..., T, d].

    The gate: ``learn_rho`` True makes rho an ``nn.Parameter`` (initial value ``rho``), else a buffer
    fixed at ``rho`` (default 0: the slow path off, its parameters dead weight, eq. (11) at rho = 0
    is exactly the block-local Transformer)."""

    def __init__(self, c: HierarchicalConfig, *, rho: float = 0.0, learn_rho: bool = False, dtype=torch.float64):
        super().__init__()
        c.validate()
        self.c = c
        self.layers = nn.ModuleList(TransformerBlock(c, dtype) for _ in range(c.weight_sets))
        self.psi = Injection(c.injection, c.d, c.psi_hidden, dtype)
        r = torch.tensor(float(rho), dtype=dtype)
        if learn_rho:
            self.rho = nn.Parameter(r)
        else:
            self.register_buffer("rho", r)
        self.learn_rho = learn_rho
        self.register_buffer("y0", torch.zeros(c.d, dtype=dtype))  # y_hat_0 of the chain's block 1
        self.register_buffer("block_of", torch.arange(c.tokens) // c.block, persistent=False)
        self._bias: Dict[Tuple, torch.Tensor] = {}

    # -- parameters by path
    def slow_parameters(self) -> List[nn.Parameter]:
        """The slow path's parameters: psi's and (when learned) rho."""
        return list(self.psi.parameters()) + ([self.rho] if self.learn_rho else [])

    def fast_parameters(self) -> List[nn.Parameter]:
        return list(self.layers.parameters())

    # -- pieces of one layer
    def weights(self, k: int) -> TransformerBlock:
        c = self.c
        if k < 1:
            raise ValueError(f"layer k = {k}: expected >= 1")
        if c.tying == "tied":
            return self.layers[0]
        if c.tying == "looped":
            return self.layers[(k - 1) % len(self.layers)]
        if k > len(self.layers):
            raise ValueError(f"layer {k}: the model was built with untied weights for depth = {len(self.layers)} layers")
        return self.layers[k - 1]

    def bias(self, dtype, device) -> torch.Tensor:
        key = (dtype, str(device))
        if key not in self._bias:
            self._bias[key] = _score_bias(self.c, self.c.tokens, dtype, device)
        return self._bias[key]

    def pool(self, x: torch.Tensor) -> torch.Tensor:
        """Pi(pooled(block b of x)) for every block: [..., T, d] -> [..., K, d]."""
        c = self.c
        z = _norm(c.norm, x, None, None, c.eps) if c.pooled == "normalised" else x
        T, P, K = c.tokens, c.block, c.blocks
        if T % P == 0 and c.compression != "topk":
            zb = z.reshape(*z.shape[:-2], K, P, z.shape[-1])
            return {"mean": lambda: zb.mean(-2), "stride": lambda: zb[..., -1, :], "head": lambda: zb[..., 0, :]}[c.compression]()
        return torch.stack([self._compress(z[..., b * P:min(T, (b + 1) * P), :]) for b in range(K)], dim=-2)

    def _compress(self, blk: torch.Tensor) -> torch.Tensor:
        kind = self.c.compression
        if kind == "mean":
            return blk.mean(-2)
        if kind == "stride":
            return blk[..., -1, :]
        if kind == "head":
            return blk[..., 0, :]
        # top-k: the k rows of largest norm, ties to the earlier row (a stable descending sort), averaged
        k = min(self.c.topk, blk.shape[-2])
        idx = torch.sort(blk.detach().norm(dim=-1), dim=-1, descending=True, stable=True).indices[..., :k]
        idx = torch.sort(idx, dim=-1).values
        sel = torch.gather(blk, -2, idx.unsqueeze(-1).expand(*idx.shape, blk.shape[-1]))
        return sel.mean(-2)

    def refreshes(self, k: int) -> bool:
        c = self.c
        if c.refresh != "hold":
            return False
        l = k - 1
        return l == 0 if c.refresh_every == 0 else l % c.refresh_every == 0

    def injection(self, y: torch.Tensor) -> torch.Tensor:
        """rho psi(src) per block [..., K, d] -> per token [..., T, d]."""
        if self.c.slow_loop == "self":
            src = y
        else:
            src = torch.cat([self.y0.expand(*y.shape[:-2], 1, y.shape[-1]).to(y.dtype), y[..., :-1, :]], dim=-2)
        return (self.rho * self.psi(src))[..., self.block_of, :]

    def step(self, Z: torch.Tensor, k: int) -> torch.Tensor:
        """Layer k >= 1 on Z [..., T + K, d] (HierarchicalModel::apply)."""
        c = self.c
        T = c.tokens
        if Z.shape[-2] != c.rows or Z.shape[-1] != c.d:
            raise ValueError(f"state of {Z.shape[-2]} rows and dimension {Z.shape[-1]}, expected T + K = {c.rows} rows and d = {c.d}")
        x, yh = Z[..., :T, :], Z[..., T:, :]
        y = self.pool(x) if self.refreshes(k) else yh
        add = self.injection(y)
        if c.refresh == "hold":
            ynew = y
        else:
            ynew = y + (0.0 if c.refresh_every == 0 else 1.0 / c.refresh_every) * (self.pool(x) - y)
        blk, B = self.weights(k), self.bias(Z.dtype, Z.device)
        if c.site == "inside":
            xn = blk(c, x + add, B) - add
        else:
            xn = blk(c, x, B) + add
        return torch.cat([xn, ynew], dim=-2)

    def initial_state(self, X: torch.Tensor) -> torch.Tensor:
        return torch.cat([X, self.pool(X)], dim=-2)

    def forward(self, Z: torch.Tensor, layers: Optional[int] = None, return_all: bool = False):
        """Layers 1..``layers`` (default: depth); ``return_all``: the list of states 0..layers."""
        n = self.c.depth if layers is None else layers
        out = [Z]
        for k in range(1, n + 1):
            Z = self.step(Z, k)
            if return_all:
                out.append(Z)
        return out if return_all else Z


# ---- tokdyn's generator and draws ---------------------------------------------------------------

_M64 = (1 << 64) - 1


def _splitmix64(state: int) -> Tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & _M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return state, z ^ (z >> 31)


class TokdynRng:
    """tokdyn's Rng (src/core/rng.cpp): a stream named by (seed, ids...), xoshiro256++ seeded
    through splitmix64, normals by the polar method (a spare kept). Used to redraw what tokdyn
    draws but does not write (the hierarchical model's psi).

    ``fma``: the polar method's u*u + v*v as one fused multiply-add fma(u, u, v*v), which is what
    the compiler makes of it in a -march=native build on a CPU with FMA (tokdyn's default build;
    then the draws are bit for bit tokdyn's); False: two roundings (a build without FMA)."""

    def __init__(self, seed: int, ids: Sequence[int] = (), fma: bool = True):
        self.fma = fma
        seed &= _M64
        st, h = _splitmix64(seed)
        for i in ids:
            _, h = _splitmix64(h ^ ((int(i) + 0x632BE59BD9B4E019) & _M64))
            st ^= h
        st2 = h ^ seed
        self.s = []
        for _ in range(4):
            st2, v = _splitmix64(st2)
            self.s.append(v)
        self.spare: Optional[float] = None

    def next_u64(self) -> int:
        s = self.s
        rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & _M64  # noqa: E731
        result = (rotl((s[0] + s[3]) & _M64, 23) + s[0]) & _M64
        t = (s[1] << 17) & _M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def uniform(self) -> float:
        return float(self.next_u64() >> 11) * 2.0 ** -53

    def normal(self) -> float:
        if self.spare is not None:
            v, self.spare = self.spare, None
            return v
        while True:
            u = 2.0 * self.uniform() - 1.0
            v = 2.0 * self.uniform() - 1.0
            s = float(Fraction(u) * Fraction(u) + Fraction(v * v)) if self.fma else u * u + v * v
            if 0.0 < s < 1.0:
                break
        f = math.sqrt(-2.0 * math.log(s) / s)
        self.spare = v * f
        return u * f

    def normal_array(self, shape: Sequence[int], scale: float = 1.0) -> np.ndarray:
        """fill_normal: entries in row-major order, each scale * normal()."""
        n = int(np.prod(shape)) if len(shape) else 1
        return np.array([scale * self.normal() for _ in range(n)], dtype=np.float64).reshape(shape)


def tokdyn_injection(kind: str, d: int, hidden: int, scale: float, seed: int, fma: bool = True) -> Dict[str, np.ndarray]:
    """hier::make_injection's draw: B, W1, W2 Gaussian with std scale / sqrt(fan_in), c and b1 with
    std scale / sqrt(d), stream (seed, 0x5103, tensor) with tensors B 1, c 2, W1 3, b1 4, W2 5."""
    sd = scale / math.sqrt(d)
    g = lambda shape, tag, s: TokdynRng(seed, (0x5103, tag), fma).normal_array(shape, s)  # noqa: E731
    if kind == "identity":
        return {}
    if kind == "linear":
        return {"B": g((d, d), 1, sd)}
    if kind == "affine":
        return {"B": g((d, d), 1, sd), "c": g((d,), 2, sd)}
    return {"W1": g((hidden, d), 3, sd), "b1": g((hidden,), 4, sd), "W2": g((d, hidden), 5, scale / math.sqrt(hidden)),
            "c": g((d,), 2, sd)}


def tokdyn_random_weights(c: HierarchicalConfig, r: int, sigma_w: float, sigma_b: float, seed: int,
                          fma: bool = True) -> Dict[str, np.ndarray]:
    """tf::random_weights of weight index r (stream (seed, r, tensor)): a check of TokdynRng against
    the tf_weights.safetensors tokdyn writes."""
    g = lambda shape, tag, s: TokdynRng(seed, (r, tag), fma).normal_array(shape, s)  # noqa: E731
    d, f = c.d, c.d_ff
    return {"W_Q": g((d, d), 1, sigma_w / math.sqrt(d)), "W_K": g((d, d), 2, sigma_w / math.sqrt(d)),
            "W_V": g((d, d), 3, sigma_w / math.sqrt(d)), "W_1": g((f, d), 4, sigma_w / math.sqrt(d)),
            "W_2": g((d, f), 5, sigma_w / math.sqrt(f)), "b_1": g((f,), 6, sigma_b), "b_2": g((d,), 7, sigma_b)}


# ---- safetensors -------------------------------------------------------------------------------

_ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """The tensors of a safetensors file (little-endian F64/F32/F16/I64/I32) as NumPy arrays."""
    with open(path, "rb") as fh:
        raw = fh.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor '{name}' of dtype {info['dtype']}: expected one of {', '.join(_ST_DTYPES)}")
        a, b = info["data_offsets"]
        dt = np.dtype(_ST_DTYPES[info["dtype"]]).newbyteorder("<")
        out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(info["shape"]).astype(_ST_DTYPES[info["dtype"]])
    return out


def write_safetensors(path: str, tensors: Dict[str, np.ndarray]) -> None:
    """F64 (float arrays) safetensors, tensors in the order given."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(np.asarray(a, dtype="<f8")).tobytes()
        header[name] = {"dtype": "F64", "shape": list(np.shape(a)), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load_tf_weights(core: HierarchicalCore, path: str) -> None:
    """Copies tokdyn's Transformer weight sets (``layers.{r}.*``) from a safetensors file into the
    core; the optional gains and LayerNorm biases default to 1 and 0. ValueError for a file whose
    number of sets or shapes do not fit the core, or a tensor that is not a weight."""
    ts = read_safetensors(path)
    n = 0
    while f"layers.{n}.W_Q" in ts:
        n += 1
    if n != len(core.layers):
        raise ValueError(f"{path}: {n} weight sets, the core has {len(core.layers)} (tying = {core.c.tying})")
    used = set()
    with torch.no_grad():
        for r, blk in enumerate(core.layers):
            for name, t in list(blk.named_parameters()) + list(blk.named_buffers()):
                key = f"layers.{r}.{name}"
                if key in ts:
                    a = torch.from_numpy(np.array(ts[key], dtype=np.float64))
                    if tuple(a.shape) != tuple(t.shape):
                        raise ValueError(f"{path}: tensor '{key}' has shape {list(a.shape)}, expected {list(t.shape)}")
                    t.copy_(a)
                    used.add(key)
                elif name.startswith(("g_", "beta_")):
                    t.fill_(1.0 if name.startswith("g_") else 0.0)
                else:
                    raise ValueError(f"{path}: tensor '{key}' is missing")
    extra = sorted(set(ts) - used)
    if extra:
        raise ValueError(f"{path}: tensor '{extra[0]}' is not a weight of this Transformer")


def save_tf_weights(core: HierarchicalCore, path: str) -> None:
    """The core's Transformer weight sets in tokdyn's layout (F64), for ``--set tf_weights=FILE``."""
    t = {}
    for r, blk in enumerate(core.layers):
        for name in ("W_Q", "W_K", "W_V", "W_1", "b_1", "W_2", "b_2", "g_attn", "beta_attn", "g_mlp", "beta_mlp"):
            t[f"layers.{r}.{name}"] = getattr(blk, name).detach().cpu().double().numpy()
    write_safetensors(path, t)


def load_psi(core: HierarchicalCore, weights: Dict[str, np.ndarray]) -> None:
    with torch.no_grad():
        for name, p in core.psi.named_parameters():
            p.copy_(torch.from_numpy(np.asarray(weights[name], dtype=np.float64)).to(p.dtype))


# ---- the language model ---------------------------------------------------------------------------

#: The three sizes of experiment E1: token dimension and depth (d_ff = 4 d, one head, psi_hidden =
#: d). The depth is the same for all three: it is also the reach of the slow chain (block k reads
#: block k - j only through j layers), so a size that changed it would change how far back the
#: model can see, a confound of the loss-versus-size exponent across persistences.
SIZES: Dict[str, Dict[str, int]] = {"s": {"d": 16, "depth": 3}, "m": {"d": 32, "depth": 3}, "l": {"d": 64, "depth": 3}}


class HierarchicalLM(nn.Module):
    """A next-token language model around ``HierarchicalCore``:

        x_t(0) = E[id_t] + p[t mod P]      token embedding (V x d) and a learned within-block position
        Z(0)   = [x(0); Pi(pooled(x(0)))]  the core's initial state; Z(L) = the core's L layers
        logits = U S_out(x(L)) + u          a final norm of the core's kind (learned gain), unembedding

    The logits at position t predict token t + 1 and depend on tokens 1..t only (the block-local
    mask, and the chain: block k reads summaries of block k - 1, which lies wholly before it; the
    self loop, which would read block k's own later tokens, is refused). ``learn_rho``: rho a learned scalar (initial ``rho_init``); else
    fixed at 0 (the slow path off). Fast path: everything but psi and rho."""

    def __init__(self, vocab: int, d: int, tokens: int, block: int, depth: int, *, learn_rho: bool, d_ff: Optional[int] = None,
                 heads: int = 1, psi_hidden: Optional[int] = None, rho_init: float = 0.0, dtype=torch.float32, **knobs):
        super().__init__()
        c = HierarchicalConfig(d=d, d_ff=d_ff or 4 * d, heads=heads, tokens=tokens, block=block, depth=depth,
                               psi_hidden=psi_hidden or d, **knobs)
        if c.slow_loop == "self":
            raise ValueError("slow_loop = self: block k would read its own summary, which pools its later tokens "
                             "(not causal); a language model needs the chain")
        self.vocab = vocab
        self.core = HierarchicalCore(c, rho=rho_init if learn_rho else 0.0, learn_rho=learn_rho, dtype=dtype)
        self.embed = nn.Parameter(torch.zeros(vocab, d, dtype=dtype))
        self.pos = nn.Parameter(torch.zeros(block, d, dtype=dtype))
        self.g_out = nn.Parameter(torch.ones(d, dtype=dtype))
        self.beta_out = nn.Parameter(torch.zeros(d, dtype=dtype)) if c.norm == "layer" else None
        self.unembed = nn.Parameter(torch.zeros(vocab, d, dtype=dtype))
        self.unembed_bias = nn.Parameter(torch.zeros(vocab, dtype=dtype))
        self.register_buffer("pos_of", torch.arange(tokens) % block, persistent=False)

    @property
    def config(self) -> HierarchicalConfig:
        return self.core.c

    def init_weights(self, gen: torch.Generator) -> None:
        """Seeded initialisation: matrices N(0, 1/fan_in) (W_V and W_2, which write the residual
        stream, further / sqrt(2 depth)), biases 0, gains 1; embedding and positions N(0, 1);
        psi as tokdyn draws it (std 1/sqrt(fan_in), biases std 1/sqrt(d)); rho as given."""
        c = self.core.c
        n = lambda t, s: t.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype) * s)  # noqa: E731
        with torch.no_grad():
            res = 1.0 / math.sqrt(2.0 * c.depth)
            for blk in self.core.layers:
                for name in ("W_Q", "W_K", "W_V", "W_1", "W_2"):
                    W = getattr(blk, name)
                    n(W, (res if name in ("W_V", "W_2") else 1.0) / math.sqrt(W.shape[1]))
                blk.b_1.zero_()
                blk.b_2.zero_()
            for name, p in self.core.psi.named_parameters():
                n(p, 1.0 / math.sqrt(p.shape[1] if p.dim() == 2 else c.d))
            n(self.embed, 1.0)
            n(self.pos, 1.0)
            n(self.unembed, 1.0 / math.sqrt(c.d))
            self.unembed_bias.zero_()

    def path_parameters(self) -> Tuple[List[nn.Parameter], List[nn.Parameter]]:
        """(fast, slow): slow = psi's parameters and rho when learned; fast = every other parameter."""
        slow = self.core.slow_parameters()
        ids = {id(p) for p in slow}
        return [p for p in self.parameters() if id(p) not in ids], slow

    def parameter_counts(self) -> Dict[str, int]:
        fast, slow = self.path_parameters()
        psi = sum(p.numel() for p in self.core.psi.parameters())
        return {"fast": sum(p.numel() for p in fast), "slow": sum(p.numel() for p in slow), "psi": psi,
                "total": sum(p.numel() for p in self.parameters())}

    def forward(self, ids: torch.Tensor, return_states: bool = False):
        """ids [batch, T] -> logits [batch, T, V] (``return_states``: also the core's final state)."""
        X = self.embed[ids] + self.pos[self.pos_of]
        Z = self.core(self.core.initial_state(X))
        h = _norm(self.core.c.norm, Z[..., :self.core.c.tokens, :], self.g_out, self.beta_out, self.core.c.eps)
        logits = h @ self.unembed.T + self.unembed_bias
        return (logits, Z) if return_states else logits

    def injection_norm(self, ids: torch.Tensor) -> float:
        """Mean Euclidean norm of the injection rho psi(src) over layers, sequences and the tokens of
        blocks 2.. (those that read a summary of an earlier block): the gate's use, free of the
        rho / psi scale confound (flag F14)."""
        core = self.core
        with torch.no_grad():
            X = self.embed[ids] + self.pos[self.pos_of]
            Z = core.initial_state(X)
            tot = 0.0
            for k in range(1, core.c.depth + 1):
                T = core.c.tokens
                y = core.pool(Z[..., :T, :]) if core.refreshes(k) else Z[..., T:, :]
                tot += core.injection(y)[..., core.c.block:, :].norm(dim=-1).mean().item()
                Z = core.step(Z, k)
        return tot / core.c.depth
