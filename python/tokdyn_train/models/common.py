"""What the model families share: config.json reading (strict, as tokdyn's readers: every field
is applied, held to the one value tokdyn computes, or known to be harmless; anything else is a
ValueError naming it), the normalisations, the activations, rotary positions, causal softmax
attention with grouped-query heads, seeded initialisation, and the base class of every model.

Everything is written with out-of-place tensor operations only (no in-place update of a tensor
that autograd needs), so that the modules support double backward (Hessian-vector products with
torch.autograd.grad(..., create_graph=True)).
"""
from __future__ import annotations

import copy
import math
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import torch
import torch.nn as nn

# Fields of a decoder config.json that never change the forward pass and that tokdyn accepts and
# ignores in every family (src/models/decoder/family_util.hpp, harmless_fields).
HARMLESS_FIELDS = frozenset({
    "_name_or_path", "transformers_version", "torch_dtype", "dtype", "use_cache", "bos_token_id", "eos_token_id",
    "pad_token_id", "sep_token_id", "decoder_start_token_id", "tokenizer_class", "task_specific_params",
    "output_attentions", "output_hidden_states", "return_dict", "id2label", "label2id", "problem_type", "max_length",
    "min_length", "do_sample", "num_beams", "temperature", "top_k", "top_p", "repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "early_stopping", "prefix", "finetuning_task", "chunk_size_feed_forward", "is_decoder",
    "is_encoder_decoder", "tie_encoder_decoder", "pruned_heads", "torchscript", "use_bfloat16", "output_scores",
    "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", "cross_attention_hidden_size",
    "typical_p", "num_return_sequences", "bad_words_ids", "diversity_penalty", "num_beam_groups",
    "encoder_no_repeat_ngram_size", "attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop",
    "classifier_dropout", "hidden_dropout_prob", "attention_dropout_prob", "summary_type", "summary_use_proj",
    "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "gradient_checkpointing", "output_past",
    "n_ctx", "pretraining_tp", "initializer_range", "use_return_dict", "quantization_config_absent"})


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


class ConfigReader:
    """Typed reads of one config dict that remember which fields were read; finish() refuses
    every other field that is not harmless (it may change the forward pass)."""

    def __init__(self, cfg: Mapping[str, Any], family: str, harmless: Iterable[str] = HARMLESS_FIELDS):
        if not isinstance(cfg, Mapping):
            raise ValueError(f"{family} config: expected a dict (config.json), got {type(cfg).__name__}")
        self.cfg, self.family, self.used, self.harmless = cfg, family, set(), frozenset(harmless)

    def fail(self, field: str, expected: str) -> "ValueError":
        got = repr(self.cfg[field]) if field in self.cfg else "missing"
        return ValueError(f"{self.family} config: field '{field}' = {got}; expected {expected}")

    def has(self, f: str) -> bool:
        return f in self.cfg and self.cfg[f] is not None

    def use(self, f: str) -> None:
        self.used.add(f)

    def get_int(self, f: str, lo: int, hi: int, default: Optional[int] = None) -> int:
        self.used.add(f)
        if not self.has(f):
            if default is None:
                raise self.fail(f, f"an integer in [{lo}, {hi}] (required)")
            return default
        v = self.cfg[f]
        if not _is_int(v) or not lo <= v <= hi:
            raise self.fail(f, f"an integer in [{lo}, {hi}]")
        return v

    def get_num(self, f: str, lo: float, hi: float, default: Optional[float] = None) -> float:
        self.used.add(f)
        if not self.has(f):
            if default is None:
                raise self.fail(f, f"a number in [{lo}, {hi}] (required)")
            return default
        v = self.cfg[f]
        if not _is_num(v) or not lo <= v <= hi:
            raise self.fail(f, f"a number in [{lo}, {hi}]")
        return float(v)

    def get_bool(self, f: str, default: bool) -> bool:
        self.used.add(f)
        if not self.has(f):
            return default
        v = self.cfg[f]
        if not isinstance(v, bool):
            raise self.fail(f, "true or false")
        return v

    def get_str(self, f: str, allowed: Sequence[str], default: Optional[str]) -> str:
        self.used.add(f)
        if not self.has(f):
            if default is None:
                raise self.fail(f, f"one of {', '.join(allowed)} (required)")
            return default
        v = self.cfg[f]
        if not isinstance(v, str) or v not in allowed:
            raise self.fail(f, f"one of {', '.join(allowed)} (others are not implemented)")
        return v

    def identity(self, model_type: str, classes: Sequence[str]) -> None:
        """model_type and architectures, when present, name this family."""
        self.used.update(("model_type", "architectures"))
        if self.has("model_type") and self.cfg["model_type"] != model_type:
            raise self.fail("model_type", f'"{model_type}"')
        if self.has("architectures"):
            a = self.cfg["architectures"]
            if not (isinstance(a, list) and a and all(isinstance(x, str) and x in classes for x in a)):
                raise self.fail("architectures", "[" + " or ".join(classes) + "]")

    def finish(self) -> None:
        for k in self.cfg:
            if k not in self.used and k not in self.harmless:
                raise ValueError(f"{self.family} config: field '{k}' is not implemented by tokdyn's {self.family} "
                                 "reader (it may change the forward pass, so it is refused rather than ignored)")


def read_rope_scaling(r: ConfigReader, allow_llama3: bool) -> Dict[str, Any]:
    """The rope_scaling field: None / absent / type default -> {"type": "none"}; linear -> factor;
    llama3 (when allowed) -> factor, low_freq_factor, high_freq_factor, original_max_position_embeddings.
    Every other type or field refused, as tokdyn's reader does."""
    r.use("rope_scaling")
    if not r.has("rope_scaling"):
        return {"type": "none"}
    s = r.cfg["rope_scaling"]
    if not isinstance(s, Mapping):
        raise r.fail("rope_scaling", "null or an object")
    typ = ""
    for k in ("rope_type", "type"):
        if isinstance(s.get(k), str):
            typ = s[k]
    kinds = "linear" + (" or llama3" if allow_llama3 else "")
    if typ in ("", "default"):
        if len(s) > ("rope_type" in s) + ("type" in s):
            raise r.fail("rope_scaling", f"a type tokdyn implements: {kinds}")
        return {"type": "none"}
    if typ != "linear" and not (allow_llama3 and typ == "llama3"):
        raise r.fail("rope_scaling", f"type {kinds} (rope_scaling type '{typ}' is not implemented)")
    extra = {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"} if typ == "llama3" else set()
    for k in s:
        if k not in ("rope_type", "type", "factor") and k not in extra:
            raise r.fail("rope_scaling", f"no field '{k}' for type {typ} (not implemented)")

    def num(k: str) -> float:
        if k not in s or not _is_num(s[k]):
            raise r.fail("rope_scaling", f"a number '{k}'")
        return float(s[k])

    out = {"type": typ, "factor": num("factor")}
    if not out["factor"] >= 1:
        raise r.fail("rope_scaling", "a factor >= 1")
    if typ == "llama3":
        out.update(low=num("low_freq_factor"), high=num("high_freq_factor"), original_max=num("original_max_position_embeddings"))
        if not (out["high"] > out["low"] > 0 and out["original_max"] >= 1):
            raise r.fail("rope_scaling", "high_freq_factor > low_freq_factor > 0 and original_max_position_embeddings >= 1")
    return out


# ---------------------------------------------------------------- rotary positions


def rotary_frequencies(rot_dims: int, theta: float, scaling: Mapping[str, Any]) -> List[float]:
    """Frequencies of the rotary pairs (i, i + rot_dims/2): theta^(-2i/rot_dims), in double, then
    rope_scaling: linear divides all by factor; llama3 divides the long wavelengths (> original /
    low_freq_factor) by factor, keeps the short ones (< original / high_freq_factor) and
    interpolates in between, smooth = (original / wavelength - low) / (high - low),
    f <- (1 - smooth) f / factor + smooth f."""
    f = [theta ** (-2.0 * i / rot_dims) for i in range(rot_dims // 2)]
    typ = scaling.get("type", "none")
    if typ == "linear":
        f = [x / scaling["factor"] for x in f]
    elif typ == "llama3":
        fac, lo, hi, orig = scaling["factor"], scaling["low"], scaling["high"], scaling["original_max"]
        low_wl, high_wl = orig / lo, orig / hi
        g = []
        for x in f:
            wl = 2 * math.pi / x
            if wl < high_wl:
                g.append(x)
            elif wl > low_wl:
                g.append(x / fac)
            else:
                sm = (orig / wl - lo) / (hi - lo)
                g.append((1 - sm) * x / fac + sm * x)
        f = g
    return f


def rotary_cos_sin(freqs: Sequence[float], T: int, dtype: torch.dtype, device) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of p f_i for positions p = 0..T-1, [T, len(freqs)], angles in float64 then
    rounded to `dtype` (as tokdyn's rotary table)."""
    p = torch.arange(T, dtype=torch.float64, device=device)
    f = torch.tensor(list(freqs), dtype=torch.float64, device=device)
    a = p[:, None] * f[None, :]
    return torch.cos(a).to(dtype), torch.sin(a).to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [..., T, head_dim]: the first 2 len(freqs) dimensions rotated in half-split pairs
    (i, i + r/2) by the angle p f_i; the rest unchanged."""
    half = cos.shape[-1]
    r = 2 * half
    x1, x2, rest = x[..., :half], x[..., half:r], x[..., r:]
    y1 = x1 * cos - x2 * sin
    y2 = x2 * cos + x1 * sin
    return torch.cat([y1, y2, rest], dim=-1) if rest.shape[-1] else torch.cat([y1, y2], dim=-1)


# ---------------------------------------------------------------- attention, norms, activations


class _ContiguousMatmul(torch.autograd.Function):
    """a @ b over leading batch dimensions with both operands made contiguous, in the forward pass
    and in the backward pass (written with itself, so double backward works). Debian's CPU torch
    (1.13, OpenBLAS) takes a batched product whose operand is a transposed view through a slow
    generic path: 50x slower at attention shapes ([128, 128, 32] x [128, 32, 128]: 410 ms against
    9 ms), and autograd's backward of a plain matmul multiplies by exactly such views."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.matmul(a.contiguous(), b.contiguous())

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = cmm(g, b.transpose(-1, -2)) if ctx.needs_input_grad[0] else None
        gb = cmm(a.transpose(-1, -2), g) if ctx.needs_input_grad[1] else None
        return ga, gb


def cmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Batched a @ b, fast on CPU whatever the operands' strides (_ContiguousMatmul). Under a
    functorch transform (jacfwd, jvp, vmap: coupling-e6's Hessian-vector products), which cannot
    trace an autograd.Function in torch 1.13, the plain product: the same value."""
    if _functorch_active():
        return torch.matmul(a, b)
    return _ContiguousMatmul.apply(a, b)


def _functorch_active() -> bool:
    probe = getattr(torch._C, "_are_functorch_transforms_active", None)
    return bool(probe()) if probe is not None else False


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal softmax attention. q [B, H, T, hd], k and v [B, Hkv, T, hd] (H a multiple of Hkv:
    query head h reads key-value head h // (H / Hkv)). Returns [B, H, T, hd]."""
    H, Hkv, T = q.shape[1], k.shape[1], q.shape[2]
    if H != Hkv:
        k = k.repeat_interleave(H // Hkv, dim=1)
        v = v.repeat_interleave(H // Hkv, dim=1)
    s = cmm(q, k.transpose(-1, -2)) * scale
    keep = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    s = s.masked_fill(~keep, float("-inf"))  # out of place: masked entries get probability 0 and no gradient
    return cmm(torch.softmax(s, dim=-1), v)


class LayerNorm(nn.Module):
    """y = (x - mean x) / sqrt(var x + eps) * weight (+ bias); population variance."""

    def __init__(self, d: int, eps: float, bias: bool = True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x - x.mean(dim=-1, keepdim=True)
        y = xc * torch.rsqrt((xc * xc).mean(dim=-1, keepdim=True) + self.eps) * self.weight
        return y + self.bias if self.bias is not None else y


def rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    """y = x / sqrt(mean x^2 + eps) * weight."""

    def __init__(self, d: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_normalize(x, self.eps) * self.weight


def gelu_tanh(u: torch.Tensor) -> torch.Tensor:
    return 0.5 * u * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * u * u * u)))


def gelu_erf(u: torch.Tensor) -> torch.Tensor:
    return 0.5 * u * (1.0 + torch.erf(u * (1.0 / math.sqrt(2.0))))


def silu(u: torch.Tensor) -> torch.Tensor:
    return u * torch.sigmoid(u)


# tokdyn's activation kinds (parts.hpp Act), written from their formulas (every one twice differentiable
# by autograd's elementary ops; relu's second derivative is 0 almost everywhere).
ACTIVATIONS: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": gelu_erf, "gelu_tanh": gelu_tanh, "silu": silu, "relu": torch.relu}


# ---------------------------------------------------------------- initialisation


class Init:
    """Draws in place (under no_grad) from one seeded torch.Generator, in the caller's order."""

    def __init__(self, seed: int):
        if not _is_int(seed) or seed < 0:
            raise ValueError(f"seed: expected a non-negative integer, got {seed!r}")
        self.g = torch.Generator(device="cpu")
        self.g.manual_seed(int(seed))

    @torch.no_grad()
    def normal(self, p: torch.Tensor, std: float) -> None:
        p.copy_(torch.randn(p.shape, generator=self.g, dtype=torch.float64).mul(std).to(p.dtype))

    @torch.no_grad()
    def uniform(self, p: torch.Tensor, lo: float, hi: float) -> None:
        p.copy_((torch.rand(p.shape, generator=self.g, dtype=torch.float64) * (hi - lo) + lo).to(p.dtype))

    def uniform_values(self, n: int, lo: float, hi: float) -> torch.Tensor:
        return torch.rand(n, generator=self.g, dtype=torch.float64) * (hi - lo) + lo

    @staticmethod
    @torch.no_grad()
    def const(p: torch.Tensor, value: float) -> None:
        p.fill_(value)


# ---------------------------------------------------------------- the base class


class CausalLM(nn.Module):
    """A model of one family. Subclasses set `family`, build their modules in __init__ (the
    state_dict names are the checkpoint's tensor names), and implement embed, blocks,
    final_norm, head and init_weights.

    forward(ids [B, T]) -> logits [B, T, V]; hidden_states(ids) -> [n_layer + 1] states [B, T, d]:
    entry 0 the input of the first block, entry l the residual stream after block l (before the
    final norm), as tokdyn's hidden_states."""

    family = ""

    def __init__(self, config: Mapping[str, Any]):
        super().__init__()
        self.config: Dict[str, Any] = copy.deepcopy(dict(config))

    # -- to implement
    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def blocks(self) -> Sequence[nn.Module]:
        raise NotImplementedError

    def final_norm(self, h: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def head(self, h: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def init_weights(self, init: Init) -> None:
        raise NotImplementedError

    # -- shared
    @property
    def n_layer(self) -> int:
        return len(self.blocks())

    def max_tokens(self) -> Optional[int]:
        return None

    def check_ids(self, ids: torch.Tensor) -> None:
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.dtype not in (torch.int64, torch.int32):
            raise ValueError("token ids: expected a LongTensor [batch, tokens]")
        m = self.max_tokens()
        if m is not None and ids.shape[1] > m:
            raise ValueError(f"token ids: {ids.shape[1]} tokens, longer than the model's context of {m} positions")

    def hidden_states(self, ids: torch.Tensor) -> List[torch.Tensor]:
        self.check_ids(ids)
        hs = [self.embed(ids)]
        for b in self.blocks():
            hs.append(b(hs[-1]))
        return hs

    def logits_from_hidden(self, h: torch.Tensor) -> torch.Tensor:
        """Logits from a last hidden state (final norm, then the output head)."""
        return self.head(self.final_norm(h))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        self.check_ids(ids)
        h = self.embed(ids)
        for b in self.blocks():
            h = b(h)
        return self.logits_from_hidden(h)


class DecoderLM(CausalLM):
    """A decoder-only transformer (GPT-2, GPT-NeoX, Llama): their layouts differ only by Hugging
    Face's attribute names, which a subclass names here: BODY (the module holding the token
    embedding EMBED, the block list LAYERS and the final norm NORM) and HEAD (the untied output
    head; the embedding's transpose when tied). The subclass's arch has d, vocab and positions."""

    BODY = EMBED = LAYERS = NORM = HEAD = ""

    def attach(self, arch: Any, body: nn.Module, tied: bool) -> None:
        """Registers the body, then the head (the parameter order initialisation draws in)."""
        self.arch = arch
        setattr(self, self.BODY, body)
        setattr(self, self.HEAD, None if tied else nn.Linear(arch.d, arch.vocab, bias=False))

    def body(self) -> nn.Module:
        return getattr(self, self.BODY)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return getattr(self.body(), self.EMBED)(ids)

    def blocks(self) -> Sequence[nn.Module]:
        return getattr(self.body(), self.LAYERS)

    def max_tokens(self) -> Optional[int]:
        return self.arch.positions

    def final_norm(self, h: torch.Tensor) -> torch.Tensor:
        return getattr(self.body(), self.NORM)(h)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        out = getattr(self, self.HEAD)
        w = getattr(self.body(), self.EMBED).weight if out is None else out.weight
        return torch.matmul(h, w.t())

    def init_normal(self, init: Init, is_norm: Callable[[str], bool], std_of: Callable[[str], float]) -> None:
        """The Hugging Face initialisation of the three families, in registration order: norm
        weights 1 and norm biases 0 (is_norm(name)), other biases 0, every other tensor
        N(0, std_of(name)^2)."""
        for name, p in self.named_parameters():
            if is_norm(name):
                init.const(p, 1.0 if name.endswith("weight") else 0.0)
            elif name.endswith(".bias"):
                init.const(p, 0.0)
            else:
                init.normal(p, std_of(name))
