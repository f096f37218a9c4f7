"""Mamba-2 in the state-spaces layout (backbone.embedding, backbone.layers.N.{norm, mixer.*},
backbone.norm_f; lm_head.weight only when tie_embeddings is false), the pure-SSM model tokdyn
reads (src/models/mamba2/config_json.cpp, checkpoint.cpp). One layer (tokdyn's BlockMap with
update=residual, src/models/mamba2/mamba2.cpp):

    u = RMSNorm(x) * w                                     (eps 1e-5)
    [z | xBC | dt] = in_proj u                             (d_inner | d_inner + 2 G N | H)
    xBC = SiLU(causal depthwise conv1d(xBC) + bias)        (tap K-1 is the current token)
    x | B | C = xBC;  dt = softplus(dt + dt_bias);  A = -exp(A_log)
    y_t[h] = sum_{s<=t} (C_t[g] . B_s[g]) L_h(t, s) x_s[h] + D_h x_t[h],  g = h // (H / G)
    L_h(t, s) = exp(A_h sum_{r=s+1..t} dt_r[h]) dt_s[h]
    o = RMSNorm_groups(y * SiLU(z)) * w_mix                (gate before the norm, groups of d_inner / G)
    x <- x + out_proj o

The SSD is the quadratic ("attention") form, exact, with its exponents formed as segment sums
(every sum_{r=s+1..t} a_r a cumulative sum of the masked column, never a difference of large
prefix sums), masked to 0 above the diagonal BEFORE the exp, so no entry is infinite and no
gradient meets inf * 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Mapping

import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import CausalLM, Init, RMSNorm, _is_int, _is_num, cmm, rms_normalize, silu

NAME = "mamba2"
SIZES = ("tiny", "small")
EPS = 1e-5  # the norm epsilon of the state-spaces model (not a config field of that layout)

_TOP = ("d_model", "d_intermediate", "n_layer", "vocab_size", "ssm_cfg", "attn_layer_idx", "attn_cfg", "rms_norm",
        "residual_in_fp32", "fused_add_norm", "pad_vocab_size_multiple", "tie_embeddings")
_SSM = ("layer", "d_state", "d_conv", "expand", "headdim", "ngroups", "d_ssm", "rmsnorm", "norm_before_gate", "D_has_hdim",
        "bias", "conv_bias", "dt_limit", "conv_init", "A_init_range", "dt_min", "dt_max", "dt_init_floor", "chunk_size",
        "use_mem_eff_path", "sequence_parallel", "process_group", "device", "dtype")


@dataclass(frozen=True)
class Arch:
    d: int
    n_layer: int
    vocab: int
    vocab_rows: int
    d_state: int
    d_conv: int
    expand: int
    headdim: int
    ngroups: int
    tied: bool
    # initialisation only
    dt_min: float
    dt_max: float
    dt_floor: float
    a_lo: float
    a_hi: float
    conv_init: float  # 0: PyTorch's default (uniform +-1/sqrt(d_conv))

    @property
    def d_inner(self) -> int:
        return self.expand * self.d

    @property
    def nheads(self) -> int:
        return self.d_inner // self.headdim

    @property
    def conv_dim(self) -> int:
        return self.d_inner + 2 * self.ngroups * self.d_state

    @property
    def d_in_proj(self) -> int:
        return 2 * self.d_inner + 2 * self.ngroups * self.d_state + self.nheads


def _fail(key: str, v: Any, expected: str) -> ValueError:
    return ValueError(f"mamba2 config: key '{key}' = {v!r}; expected {expected}")


def parse_config(cfg: Mapping[str, Any]) -> Arch:
    """A state-spaces config.json, with tokdyn's rules: unknown keys refused (top level and
    ssm_cfg), every switch at the one value tokdyn computes."""
    if not isinstance(cfg, Mapping):
        raise ValueError("mamba2 config: expected a dict (config.json)")
    if "d_model" not in cfg:
        raise ValueError("mamba2 config: expected the state-spaces layout (d_model, n_layer, vocab_size, ssm_cfg); "
                         "the Hugging Face layout is not written by tokdyn_train")
    for k in cfg:
        if k not in _TOP:
            raise ValueError(f"mamba2 config: unknown key '{k}' (the reference MambaConfig has no such field); "
                             f"expected only {', '.join(_TOP)}")

    def integer(obj: Mapping[str, Any], key: str, default: Any, lo: int, hi: int, prefix: str = "") -> int:
        v = obj.get(key, default)
        if v is None or not _is_int(v) or not lo <= v <= hi:
            raise _fail(prefix + key, v, f"an integer in [{lo}, {hi}]")
        return v

    def boolean(obj: Mapping[str, Any], key: str, default: bool, prefix: str = "") -> bool:
        v = obj.get(key, default)
        if not isinstance(v, bool):
            raise _fail(prefix + key, v, "true or false")
        return v

    d = integer(cfg, "d_model", None, 1, 1 << 16)
    n_layer = integer(cfg, "n_layer", None, 1, 4096)
    vocab = integer(cfg, "vocab_size", None, 1, 1 << 24)
    pad = integer(cfg, "pad_vocab_size_multiple", 8, 1, 1 << 16)
    tied = boolean(cfg, "tie_embeddings", True)
    if not boolean(cfg, "rms_norm", True):
        raise _fail("rms_norm", False, "true (the block uses RMSNorm)")
    boolean(cfg, "residual_in_fp32", True)
    boolean(cfg, "fused_add_norm", True)
    if integer(cfg, "d_intermediate", 0, 0, 0) != 0:
        raise _fail("d_intermediate", cfg["d_intermediate"], "0 (no MLP blocks)")
    if cfg.get("attn_layer_idx", []) != []:
        raise _fail("attn_layer_idx", cfg["attn_layer_idx"], "[] (no attention layers)")
    if not isinstance(cfg.get("attn_cfg", {}), Mapping):
        raise _fail("attn_cfg", cfg["attn_cfg"], "an object")
    s = cfg.get("ssm_cfg")
    if not isinstance(s, Mapping):
        raise _fail("ssm_cfg", s, '{"layer": "Mamba2", ...}')
    for k in s:
        if k not in _SSM:
            raise ValueError(f"mamba2 config: unknown key 'ssm_cfg.{k}' (the reference Mamba2 module has no such field); "
                             f"expected only {', '.join(_SSM)}")
    if s.get("layer") != "Mamba2":
        raise _fail("ssm_cfg.layer", s.get("layer"), '"Mamba2"')
    p = "ssm_cfg."
    d_state = integer(s, "d_state", 128, 1, 1 << 14, p)
    d_conv = integer(s, "d_conv", 4, 1, 64, p)
    expand = integer(s, "expand", 2, 1, 16, p)
    headdim = integer(s, "headdim", 64, 1, 1 << 16, p)
    ngroups = integer(s, "ngroups", 1, 1, 1 << 16, p)
    for key, default, need in (("rmsnorm", True, True), ("norm_before_gate", False, False), ("D_has_hdim", False, False),
                               ("bias", False, False), ("conv_bias", True, True)):
        if boolean(s, key, default, p) != need:
            raise _fail(p + key, s[key], f"{str(need).lower()} (the one value tokdyn computes)")
    if "dt_limit" in s:
        lim = s["dt_limit"]
        if not (isinstance(lim, (list, tuple)) and len(lim) == 2 and lim[0] == 0 and lim[1] == math.inf):
            raise _fail(p + "dt_limit", lim, "[0.0, Infinity] (no dt clamp)")
    if s.get("d_ssm") is not None and s["d_ssm"] != expand * d:
        raise _fail(p + "d_ssm", s["d_ssm"], f"null or d_inner = {expand * d}")
    di = expand * d
    if di % headdim:
        raise _fail(p + "headdim", headdim, f"a divisor of d_inner = expand * d_model = {di}")
    if (di // headdim) % ngroups:
        raise _fail(p + "ngroups", ngroups, f"a divisor of nheads = {di // headdim}")

    def number(key: str, default: float) -> float:
        v = s.get(key, default)
        if not _is_num(v):
            raise _fail(p + key, v, "a finite number")
        return float(v)

    dt_min, dt_max, dt_floor = number("dt_min", 1e-3), number("dt_max", 1e-1), number("dt_init_floor", 1e-4)
    if not 0 < dt_min <= dt_max:
        raise _fail(p + "dt_max", dt_max, f"0 < dt_min <= dt_max (dt_min = {dt_min})")
    rng = s.get("A_init_range", [1, 16])
    if not (isinstance(rng, (list, tuple)) and len(rng) == 2 and all(_is_num(x) for x in rng) and 0 < rng[0] <= rng[1]):
        raise _fail(p + "A_init_range", rng, "[low, high] with 0 < low <= high")
    conv_init = s.get("conv_init")
    if conv_init is not None and not (_is_num(conv_init) and conv_init > 0):
        raise _fail(p + "conv_init", conv_init, "null or a number > 0")
    rows = (vocab + pad - 1) // pad * pad
    return Arch(d, n_layer, vocab, rows, d_state, d_conv, expand, headdim, ngroups, tied, dt_min, dt_max, dt_floor,
                float(rng[0]), float(rng[1]), float(conv_init or 0.0))


def named_config(size: str) -> Dict[str, Any]:
    """tiny: tokdyn's Config::named("tiny") (d_model 64, 4 layers, d_state 16, headdim 16);
    small: d_model 256, 4 layers, d_state 32, headdim 32. expand 2, ngroups 1, d_conv 4; tied
    embeddings; pad_vocab_size_multiple 1 (the embedding has exactly vocab_size rows)."""
    if size == "tiny":
        d, n, N, P = 64, 4, 16, 16
    elif size == "small":
        d, n, N, P = 256, 4, 32, 32
    else:
        raise ValueError(f"mamba2 size '{size}': expected one of {', '.join(SIZES)}")
    return {"d_model": d, "d_intermediate": 0, "n_layer": n, "vocab_size": 1000,
            "ssm_cfg": {"layer": "Mamba2", "d_state": N, "d_conv": 4, "expand": 2, "headdim": P, "ngroups": 1},
            "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": True, "residual_in_fp32": True, "fused_add_norm": True,
            "pad_vocab_size_multiple": 1, "tie_embeddings": True}


def segment_sums(a: torch.Tensor) -> torch.Tensor:
    """a [..., T] -> S [..., T, T] with S[t, s] = a[s+1] + ... + a[t] for s <= t and 0 above the
    diagonal: the column s of a masked to rows r > s, summed cumulatively down the rows (no
    difference of prefix sums, so no cancellation)."""
    T = a.shape[-1]
    below = torch.ones(T, T, dtype=torch.bool, device=a.device).tril(-1)  # r > s
    cols = torch.where(below, a.unsqueeze(-1).expand(*a.shape, T), torch.zeros((), dtype=a.dtype, device=a.device))
    return torch.cumsum(cols, dim=-2)


def ssd(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """The SSD in its quadratic form. x [b, T, H, P], dt [b, T, H] (> 0), A [H] (< 0),
    B and C [b, T, G, N], D [H] -> y [b, T, H, P]."""
    b, T, H, P = x.shape
    G = B.shape[2]
    seg = segment_sums((dt * A).transpose(1, 2))  # [b, H, T, T], <= 0 on and below the diagonal, 0 above
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    decay = torch.where(causal, torch.exp(seg), torch.zeros((), dtype=x.dtype, device=x.device))
    L = decay * dt.transpose(1, 2).unsqueeze(-2)  # times dt_s (column s)
    CB = cmm(C.permute(0, 2, 1, 3), B.permute(0, 2, 3, 1))  # [b, G, T, T]: C_t . B_s
    if G != H:
        CB = CB.repeat_interleave(H // G, dim=1)
    y = cmm(CB * L, x.permute(0, 2, 1, 3)).permute(0, 2, 1, 3)  # [b, T, H, P]
    return y + x * D[:, None]


class Mixer(nn.Module):
    def __init__(self, a: Arch):
        super().__init__()
        self.a = a
        self.in_proj = nn.Linear(a.d, a.d_in_proj, bias=False)
        self.conv1d = nn.Conv1d(a.conv_dim, a.conv_dim, a.d_conv, groups=a.conv_dim, bias=True)
        self.dt_bias = nn.Parameter(torch.zeros(a.nheads))
        self.A_log = nn.Parameter(torch.zeros(a.nheads))
        self.D = nn.Parameter(torch.ones(a.nheads))
        self.norm = RMSNorm(a.d_inner, EPS)  # the gated RMSNorm's weight (mixer.norm.weight)
        self.out_proj = nn.Linear(a.d_inner, a.d, bias=False)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        a = self.a
        b, T, _ = u.shape
        di, GN, H = a.d_inner, a.ngroups * a.d_state, a.nheads
        z, xBC, dt = self.in_proj(u).split([di, di + 2 * GN, H], dim=-1)
        xBC = F.conv1d(xBC.transpose(1, 2), self.conv1d.weight, self.conv1d.bias, padding=a.d_conv - 1, groups=a.conv_dim)
        xBC = silu(xBC[..., :T].transpose(1, 2))
        x, Bm, Cm = xBC.split([di, GN, GN], dim=-1)
        dt = F.softplus(dt + self.dt_bias)
        A = -torch.exp(self.A_log)
        y = ssd(x.reshape(b, T, H, a.headdim), dt, A, Bm.reshape(b, T, a.ngroups, a.d_state),
                Cm.reshape(b, T, a.ngroups, a.d_state), self.D).reshape(b, T, di)
        v = (y * silu(z)).reshape(b, T, a.ngroups, di // a.ngroups)
        o = rms_normalize(v, EPS).reshape(b, T, di) * self.norm.weight
        return self.out_proj(o)


class Block(nn.Module):
    """x <- x + mixer(RMSNorm(x))."""

    def __init__(self, a: Arch):
        super().__init__()
        self.norm = RMSNorm(a.d, EPS)
        self.mixer = Mixer(a)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mixer(self.norm(x))


class Backbone(nn.Module):
    def __init__(self, a: Arch):
        super().__init__()
        self.embedding = nn.Embedding(a.vocab_rows, a.d)
        self.layers = nn.ModuleList(Block(a) for _ in range(a.n_layer))
        self.norm_f = RMSNorm(a.d, EPS)


class Mamba2(CausalLM):
    family = NAME

    def __init__(self, config: Mapping[str, Any]):
        super().__init__(config)
        self.arch = a = parse_config(config)
        self.backbone = Backbone(a)
        self.lm_head = None if a.tied else nn.Linear(a.d, a.vocab_rows, bias=False)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.backbone.embedding(ids)

    def blocks(self):
        return self.backbone.layers

    def final_norm(self, h: torch.Tensor) -> torch.Tensor:
        return self.backbone.norm_f(h)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """Logits over the embedding's rows (vocab_size rounded up to pad_vocab_size_multiple)."""
        w = self.backbone.embedding.weight if self.lm_head is None else self.lm_head.weight
        return torch.matmul(h, w.t())

    def init_weights(self, init: Init) -> None:
        """As the reference MambaLMHeadModel initialises (parameters in registration order):
        embedding N(0, 0.02^2); in_proj (and an untied lm_head) PyTorch's Linear default
        U(+-1/sqrt(fan_in)); conv1d U(+-1/sqrt(d_conv)) (weight: U(+-conv_init) when given);
        dt_bias = softplus^-1(dt), dt log-uniform in [dt_min, dt_max] floored at dt_init_floor;
        A_log = log U(A_init_range); D = 1; norms 1; out_proj U(+-1/sqrt(d_inner)) / sqrt(n_layer)."""
        a = self.arch
        for name, p in self.named_parameters():
            leaf = name.rsplit(".", 1)[-1] if "." in name else name
            if name.endswith("norm.weight") or name.endswith("norm_f.weight"):
                init.const(p, 1.0)
            elif name == "backbone.embedding.weight":
                init.normal(p, 0.02)
            elif name.endswith("in_proj.weight") or name == "lm_head.weight":
                b = 1.0 / math.sqrt(p.shape[1])
                init.uniform(p, -b, b)
            elif name.endswith("conv1d.weight"):
                b = a.conv_init or 1.0 / math.sqrt(a.d_conv)
                init.uniform(p, -b, b)
            elif name.endswith("conv1d.bias"):
                b = 1.0 / math.sqrt(a.d_conv)
                init.uniform(p, -b, b)
            elif leaf == "dt_bias":
                lo, hi = math.log(a.dt_min), math.log(a.dt_max)
                dt = torch.exp(init.uniform_values(p.numel(), lo, hi)).clamp(min=a.dt_floor)
                with torch.no_grad():
                    p.copy_((dt + torch.log(-torch.expm1(-dt))).to(p.dtype))
            elif leaf == "A_log":
                with torch.no_grad():
                    p.copy_(torch.log(init.uniform_values(p.numel(), a.a_lo, a.a_hi)).to(p.dtype))
            elif leaf == "D":
                init.const(p, 1.0)
            elif name.endswith("out_proj.weight"):
                b = 1.0 / math.sqrt(a.d_inner) / math.sqrt(a.n_layer)
                init.uniform(p, -b, b)
            else:
                raise AssertionError(f"mamba2: no initialisation rule for {name}")
