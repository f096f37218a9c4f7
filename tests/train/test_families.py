"""tokdyn_train's PyTorch families against tokdyn itself.

Every family (gpt2 tied and untied; neox parallel and sequential; llama tied, untied with Llama 3
RoPE scaling, and with linear scaling and biases; mamba2 tiny, and with 2 groups and an untied
head) is made from its named config, its weights perturbed so that every tensor matters (biases
and norm weights too), written with save_pretrained and loaded by tokdyn; the same token ids go
through both, and the hidden states agree layer by layer. Also: logits = final norm and head of
the last hidden state, written by hand; save -> load round trip bit for bit; the safetensors
layout; the tensor names and shapes of tokdyn's own make-checkpoint; double backward (a
Hessian-vector product against central differences of gradients); every config written loads in
tokdyn (CLI exit 0) and a config key tokdyn does not know is never accepted.

Run: PYTHONPATH=<build>/python:python TOKDYN_BIN=<build>/tokdyn /usr/bin/python3 -m pytest -q tests/train
(-s prints the measured relative differences per layer.)
"""
import copy
import json
import math
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tokdyn
import tokdyn_train as tt
from tokdyn_train.safetensors_io import read_safetensors, write_safetensors

torch.set_num_threads(1)

CLI = os.environ.get("TOKDYN_BIN") or shutil.which("tokdyn")
VOCAB = 300

# Agreement with tokdyn. tokdyn computes in fp32 (unit roundoff 6e-8); the torch side runs in float64
# on the same (fp32) weights, so the difference is tokdyn's rounding, accumulated over the products
# and the layers: measured <= 1.1e-6 (max |a - b| / max |b| per layer; Mamba-2 small). 1e-5 leaves a
# margin of 10 over that, while a real difference of semantics is far above it (Llama 3 RoPE scaling
# left out: 6e-3; linear scaling instead of llama3: 5e-3; NeoX's parallel residual as sequential: 0.9).
REL_TOL = 1e-5

CASES = {
    "gpt2": ("gpt2", "tiny", {}),
    "gpt2-untied-gelu": ("gpt2", "tiny", {"tie_word_embeddings": False, "activation_function": "gelu", "n_inner": 96}),
    "neox-parallel": ("neox", "tiny", {}),
    "neox-sequential": ("neox", "tiny-sequential", {}),
    "neox-fullrot-nobias": ("neox", "tiny", {"rotary_pct": 1.0, "attention_bias": False, "hidden_act": "gelu_new"}),
    "llama-tied": ("llama", "tiny", {}),
    "llama-untied-llama3": ("llama", "tiny-llama3", {}),
    "llama-linear-biases": ("llama", "tiny", {"tie_word_embeddings": False, "attention_bias": True, "mlp_bias": True,
                                              "rope_scaling": {"type": "linear", "factor": 2.0}}),
    "llama-headdim-mqa": ("llama", "tiny", {"head_dim": 32, "num_key_value_heads": 1}),
    "mamba2": ("mamba2", "tiny", {}),
    "mamba2-groups-untied": ("mamba2", "tiny", {"tie_embeddings": False, "ssm_cfg": {"ngroups": 2}}),
    "mamba2-small": ("mamba2", "small", {}),
}


def case_config(case):
    fam, size, over = CASES[case]
    cfg = tt.named_config(fam, size, VOCAB)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(cfg.get(k), dict) and k == "ssm_cfg":
            cfg[k] = {**cfg[k], **v}
        else:
            cfg[k] = copy.deepcopy(v)
    return fam, cfg


def perturbed(fam, cfg, seed=3):
    """A fresh model with N(0, 0.02^2) added to every parameter (biases and norm weights included),
    so that a misplaced or misread tensor shows."""
    m = tt.make(fam, cfg, seed)
    g = torch.Generator().manual_seed(1000 + seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g))
    return m


def token_ids(B=2, T=16, vocab=VOCAB, seed=0):
    return torch.randint(0, vocab, (B, T), generator=torch.Generator().manual_seed(seed))


def rel_per_layer(H_tokdyn, hs_torch):
    return [float(np.abs(H_tokdyn[l] - hs_torch[l]).max() / np.abs(H_tokdyn[l]).max()) for l in range(len(hs_torch))]


def run_cli(*args):
    if not CLI or not os.path.exists(CLI):
        pytest.skip("no tokdyn CLI (set TOKDYN_BIN)")
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------- against tokdyn


@pytest.mark.parametrize("case", list(CASES))
def test_hidden_states_match_tokdyn(case, tmp_path):
    fam, cfg = case_config(case)
    m = perturbed(fam, cfg)
    tt.save_pretrained(m, tmp_path)
    ids = token_ids()
    md = copy.deepcopy(m).double()
    with torch.no_grad():
        hs = [h.numpy() for h in md.hidden_states(ids)]
    assert len(hs) == md.n_layer + 1 and all(h.shape == (2, 16, hs[0].shape[-1]) for h in hs)
    H = tokdyn.Model(fam, checkpoint=str(tmp_path)).hidden_states(ids.numpy(), depth=md.n_layer)
    assert H.shape == (len(hs),) + hs[0].shape
    rel = rel_per_layer(H, hs)
    print(f"\n{case}: max relative difference per layer (0..{len(rel) - 1}): " + " ".join(f"{e:.1e}" for e in rel))
    assert max(rel) < REL_TOL, rel


@pytest.mark.parametrize("fam,size", [("gpt2", "tiny"), ("neox", "tiny"), ("llama", "tiny"), ("llama", "tiny-llama3"),
                                      ("mamba2", "tiny")])
def test_tokdyn_checkpoints_have_our_names_and_load(fam, size, tmp_path):
    """tokdyn make-checkpoint's tensors are exactly our state_dict (names and shapes), for its own
    config.json (Mamba-2: its F16 tensors and padded vocabulary); load_pretrained reads the folder,
    and our forward of it agrees with tokdyn's."""
    d = tmp_path / "ck"
    r = run_cli("make-checkpoint", "--model", fam, "--size", size, "--seed", "5", "-o", str(d))
    assert r.returncode == 0, r.stderr
    theirs, meta = read_safetensors(d / "model.safetensors")
    assert meta.get("format") == "pt"
    config = json.loads((d / "config.json").read_text())
    ours = tt.make(fam, config, 0).state_dict()
    assert {k: tuple(v.shape) for k, v in theirs.items()} == {k: tuple(v.shape) for k, v in ours.items()}
    fam2, m = tt.load_pretrained(d)
    assert fam2 == fam
    for k, v in theirs.items():
        assert torch.equal(m.state_dict()[k], v.float()), k
    ids = token_ids(vocab=300)
    with torch.no_grad():
        hs = [h.numpy() for h in m.double().hidden_states(ids)]
    H = tokdyn.Model(fam, checkpoint=str(d)).hidden_states(ids.numpy(), depth=len(hs) - 1)
    assert max(rel_per_layer(H, hs)) < REL_TOL


def test_named_configs_are_tokdyns():
    """gpt2 / neox / llama: tokdyn's own named configs (its registry's model_config), but for the
    bos / eos ids (vocab_size - 1); mamba2 tiny: tokdyn's dimensions."""
    for fam in ("gpt2", "neox", "llama"):
        for size in tt.sizes(fam):
            theirs = tokdyn.Model(fam, size=size, tokens=4).notes["model_config"]
            ours = tt.named_config(fam, size, theirs["vocab_size"])
            for k in ("bos_token_id", "eos_token_id"):
                assert ours.pop(k) == theirs["vocab_size"] - 1
                theirs.pop(k)
            assert ours == theirs, (fam, size)
    theirs = tokdyn.Model("mamba2", size="tiny", tokens=4).notes["model_config"]
    ours = tt.named_config("mamba2", "tiny", 1000)
    for k in ("d_model", "n_layer", "d_intermediate", "tie_embeddings", "rms_norm", "vocab_size"):
        assert ours[k] == theirs[k], k
    defaults = {"d_state": 128, "d_conv": 4, "expand": 2, "headdim": 64, "ngroups": 1}  # tokdyn writes non-defaults only
    for k, v in ours["ssm_cfg"].items():
        assert theirs["ssm_cfg"].get(k, defaults.get(k)) == v, k
    small = tt.named_config("mamba2", "small", 4096)
    assert (small["d_model"], small["n_layer"], small["ssm_cfg"]["d_state"], small["ssm_cfg"]["headdim"]) == (256, 4, 32, 32)
    assert small["pad_vocab_size_multiple"] == 1 and small["vocab_size"] == 4096


def test_every_written_config_loads_in_tokdyn(tmp_path):
    """Every family and named size, written by save_pretrained, runs in tokdyn's CLI (exit 0) and
    loads through its Python API with the embedding rows = vocab_size (Mamba-2 small included: the
    reader takes any consistent config)."""
    for fam in tt.FAMILIES:
        for size in tt.sizes(fam):
            vocab = 4096 if size == "small" else VOCAB
            d = tmp_path / f"{fam}-{size}"
            tt.save_pretrained(tt.make(fam, tt.named_config(fam, size, vocab), 1), d)
            r = run_cli("run", "depth-spectra", "--set", f"model={fam}", "--set", f"checkpoint={d}", "--set", "depth=2",
                        "--set", "burn_in=0", "--set", "k=1", "--set", "tokens=4", "--threads", "1", "--no-figures", "-q",
                        "--out", str(tmp_path / f"out-{fam}-{size}"))
            assert r.returncode == 0, (fam, size, r.stdout, r.stderr)
            m = tokdyn.Model(fam, checkpoint=str(d), token_ids=[[0, vocab - 1, 7]])
            assert m.x0.shape[0] == 3
            with pytest.raises(ValueError):  # the embedding has exactly vocab_size rows
                tokdyn.Model(fam, checkpoint=str(d), token_ids=[[0, vocab]])


def test_mamba2_dt_limit_without_clamp_is_written_and_loads(tmp_path):
    """ssm_cfg.dt_limit = [0, inf] (no clamp, the reference default) is written as Python's
    Infinity token, which tokdyn's Mamba-2 reader accepts there (and only there)."""
    cfg = tt.named_config("mamba2", "tiny", VOCAB)
    cfg["ssm_cfg"]["dt_limit"] = [0.0, math.inf]
    tt.save_pretrained(tt.make("mamba2", cfg, 0), tmp_path)
    assert "Infinity" in (tmp_path / "config.json").read_text()
    assert tt.load_pretrained(tmp_path)[1].config == cfg
    assert tokdyn.Model("mamba2", checkpoint=str(tmp_path), token_ids=[[1, 2]]).x0.shape == (2, 64)
    with pytest.raises(ValueError, match="dt_limit"):
        tt.make("mamba2", {**cfg, "ssm_cfg": {**cfg["ssm_cfg"], "dt_limit": [0.001, 0.1]}}, 0)


def test_unknown_config_key_is_refused(tmp_path):
    """A key tokdyn's reader does not know is refused by make (so save_pretrained never writes
    one); written by hand into a checkpoint, tokdyn refuses it too (exit 2)."""
    for fam in tt.FAMILIES:
        cfg = tt.named_config(fam, "tiny", VOCAB)
        with pytest.raises(ValueError, match="frobnicate"):
            tt.make(fam, {**cfg, "frobnicate": 1}, 0)
    cfg = tt.named_config("mamba2", "tiny", VOCAB)
    with pytest.raises(ValueError, match="frobnicate"):
        tt.make("mamba2", {**cfg, "ssm_cfg": {**cfg["ssm_cfg"], "frobnicate": 1}}, 0)
    with pytest.raises(ValueError, match="rope_scaling"):
        tt.make("llama", {**tt.named_config("llama", "tiny", VOCAB), "rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, 0)
    with pytest.raises(ValueError, match="rope_scaling"):  # neox: linear only, as tokdyn
        tt.make("neox", {**tt.named_config("neox", "tiny", VOCAB), "rope_scaling": {"rope_type": "llama3", "factor": 2.0}}, 0)
    for fam in ("gpt2", "mamba2"):
        d = tmp_path / fam
        m = tt.make(fam, tt.named_config(fam, "tiny", VOCAB), 0)
        tt.save_pretrained(m, d)
        m.config["frobnicate"] = 1
        with pytest.raises(ValueError, match="frobnicate"):
            tt.save_pretrained(m, tmp_path / "never")
        assert not (tmp_path / "never" / "config.json").exists()
        m.config.pop("frobnicate")
        m.config["n_layer"] += 1
        with pytest.raises(ValueError, match="no longer describes"):
            tt.save_pretrained(m, tmp_path / "never")
        (d / "config.json").write_text(json.dumps({**tt.named_config(fam, "tiny", VOCAB), "frobnicate": 1}))
        r = run_cli("run", "depth-spectra", "--set", f"model={fam}", "--set", f"checkpoint={d}", "--set", "depth=2", "--set",
                    "burn_in=0", "--set", "k=1", "--set", "tokens=4", "--no-figures", "-q", "--out", str(tmp_path / f"out-{fam}"))
        assert r.returncode == 2 and "frobnicate" in r.stderr, (r.returncode, r.stderr)


# ---------------------------------------------------------------- the torch side


LOGIT_PARTS = {  # final norm (kind, weight, bias) and the output matrix (tied, untied)
    "gpt2": ("layer", "transformer.ln_f.weight", "transformer.ln_f.bias", "transformer.wte.weight", "lm_head.weight"),
    "neox": ("layer", "gpt_neox.final_layer_norm.weight", "gpt_neox.final_layer_norm.bias", "gpt_neox.embed_in.weight",
             "embed_out.weight"),
    "llama": ("rms", "model.norm.weight", None, "model.embed_tokens.weight", "lm_head.weight"),
    "mamba2": ("rms", "backbone.norm_f.weight", None, "backbone.embedding.weight", "lm_head.weight"),
}
EPS = {"gpt2": "layer_norm_epsilon", "neox": "layer_norm_eps", "llama": "rms_norm_eps"}


@pytest.mark.parametrize("case", list(CASES))
def test_logits_are_final_norm_and_head_of_last_state(case):
    fam, cfg = case_config(case)
    m = perturbed(fam, cfg).double()
    ids = token_ids()
    with torch.no_grad():
        logits, h = m(ids), m.hidden_states(ids)[-1]
    kind, w, b, tied, untied = LOGIT_PARTS[fam]
    sd = m.state_dict()
    eps = cfg[EPS[fam]] if fam in EPS else 1e-5
    if kind == "layer":
        n = F.layer_norm(h, (h.shape[-1],), sd[w], sd[b], eps)
    else:
        n = h / torch.sqrt((h * h).mean(-1, keepdim=True) + eps) * sd[w]
    W = sd[untied] if untied in sd else sd[tied]
    assert (untied in sd) == (not cfg.get("tie_word_embeddings", cfg.get("tie_embeddings")))
    assert logits.shape == (2, 16, VOCAB)
    torch.testing.assert_close(logits, n @ W.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", list(CASES))
def test_save_load_round_trip_is_bit_exact(case, tmp_path):
    fam, cfg = case_config(case)
    m = perturbed(fam, cfg)
    tt.save_pretrained(m, tmp_path / "a")
    fam2, m2 = tt.load_pretrained(tmp_path / "a")
    assert fam2 == fam and type(m2) is type(m) and m2.config == m.config
    sd, sd2 = m.state_dict(), m2.state_dict()
    assert list(sd) == list(sd2)
    for k in sd:
        assert sd2[k].dtype == torch.float32 and torch.equal(sd[k], sd2[k]), k
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(m(ids), m2(ids))
    tt.save_pretrained(m2, tmp_path / "b")
    for f in ("config.json", "model.safetensors"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert sorted(os.listdir(tmp_path / "a")) == ["config.json", "model.safetensors"]  # no temporary file left


def test_safetensors_layout(tmp_path):
    m = tt.make("llama", tt.named_config("llama", "tiny-llama3", VOCAB), 0)
    tt.save_pretrained(m, tmp_path)
    raw = (tmp_path / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0
    text = raw[8:8 + n].decode()
    header = json.loads(text)
    assert text == text.rstrip() + " " * (len(text) - len(text.rstrip()))  # padded with spaces only
    assert header.pop("__metadata__") == {"format": "pt"}
    names = list(header)
    assert names == sorted(names) == sorted(m.state_dict())
    off = 0
    for k in names:
        t = header[k]
        assert t["dtype"] == "F32" and t["shape"] == list(m.state_dict()[k].shape)
        assert t["data_offsets"][0] == off
        off = t["data_offsets"][1]
        assert off - t["data_offsets"][0] == 4 * math.prod(t["shape"])
        b = t["data_offsets"][0] + 8 + n
        assert np.array_equal(np.frombuffer(raw[b:b + 4 * math.prod(t["shape"])], "<f4"),
                              m.state_dict()[k].numpy().ravel())
    assert len(raw) == 8 + n + off
    # other dtypes through our own reader and writer
    ts = {"a": torch.randn(3, 2, dtype=torch.float64), "b": torch.randn(5).to(torch.bfloat16),
          "c": torch.arange(6, dtype=torch.int64).reshape(2, 3), "d": torch.randn(4).half(), "e": torch.zeros(0, 3)}
    write_safetensors(tmp_path / "x.safetensors", ts, {"k": "v"})
    back, meta = read_safetensors(tmp_path / "x.safetensors")
    assert meta == {"k": "v"} and set(back) == set(ts)
    for k in ts:
        assert back[k].dtype == ts[k].dtype and torch.equal(back[k], ts[k]), k
    bad = bytearray((tmp_path / "x.safetensors").read_bytes())
    (tmp_path / "y.safetensors").write_bytes(bytes(bad[:-1]))
    with pytest.raises(ValueError, match="cover"):
        read_safetensors(tmp_path / "y.safetensors")


@pytest.mark.parametrize("case", ["gpt2", "neox-sequential", "llama-untied-llama3", "mamba2-groups-untied"])
def test_hessian_vector_product_matches_finite_differences(case):
    """Double backward: H v by autograd (create_graph) against (g(theta + e v) - g(theta - e v)) / 2e
    in float64 (v of unit norm). The central difference converges as e^2 (measured 1e-7 at e = 1e-3,
    1e-9 at 1e-4, the roundoff floor 1e-10 below that): at e = 1e-4 the relative difference must
    be < 1e-6, and 100 times smaller than at e = 1e-3."""
    fam, cfg = case_config(case)
    m = perturbed(fam, cfg).double()
    ids = token_ids(T=8)
    ps = list(m.parameters())

    def loss():
        lg = m(ids)
        return F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), ids[:, 1:].reshape(-1))

    g = torch.autograd.grad(loss(), ps, create_graph=True)
    gen = torch.Generator().manual_seed(9)
    v = [torch.randn(p.shape, generator=gen, dtype=p.dtype) for p in ps]
    nv = torch.sqrt(sum((a * a).sum() for a in v))
    v = [a / nv for a in v]
    Hv = torch.autograd.grad(sum((a * b).sum() for a, b in zip(g, v)), ps)

    def grad_at(step):
        with torch.no_grad():
            for p, d in zip(ps, v):
                p.add_(step * d)
        gg = torch.autograd.grad(loss(), ps)
        with torch.no_grad():
            for p, d in zip(ps, v):
                p.sub_(step * d)
        return gg

    def rel(e):
        fd = [(a - b) / (2 * e) for a, b in zip(grad_at(e), grad_at(-e))]
        return float(torch.sqrt(sum(((a - b) ** 2).sum() for a, b in zip(Hv, fd)))
                     / torch.sqrt(sum((a * a).sum() for a in Hv)))

    r3, r4 = rel(1e-3), rel(1e-4)
    print(f"\n{case}: H v vs central differences: {r3:.1e} (e = 1e-3), {r4:.1e} (e = 1e-4)")
    assert r4 < 1e-6 and 50 < r3 / r4 < 200, (r3, r4)


def test_mamba2_ssd_has_no_inf_with_strong_decay():
    """dt large (softplus past its threshold) and A = -16: A sum dt reaches -2500 over 16 tokens. The
    exponents are masked before the exp, so the values, gradients and second derivatives are
    finite (a difference of prefix sums above the diagonal would be +2500: exp overflows, inf * 0)."""
    fam, cfg = case_config("mamba2")
    m = tt.make(fam, cfg, 0).double()
    with torch.no_grad():
        for L in m.backbone.layers:
            L.mixer.dt_bias.fill_(25.0)
            L.mixer.A_log.fill_(math.log(16.0))
    ids = token_ids()
    ps = list(m.parameters())
    loss = m(ids).logsumexp(-1).mean()
    g = torch.autograd.grad(loss, ps, create_graph=True)
    assert all(torch.isfinite(x).all() for x in g)
    hv = torch.autograd.grad(sum(x.sum() for x in g), ps)
    assert all(torch.isfinite(x).all() for x in hv)


def test_make_is_deterministic_and_initialises_as_the_families_do():
    for fam in tt.FAMILIES:
        cfg = tt.named_config(fam, "tiny", VOCAB)
        a, b, c = (tt.make(fam, cfg, s).state_dict() for s in (4, 4, 5))
        assert all(torch.equal(a[k], b[k]) for k in a)
        assert any(not torch.equal(a[k], c[k]) for k in a if a[k].numel() > 8)
        assert all(v.dtype == torch.float32 for v in a.values())
    sd = tt.make("gpt2", tt.named_config("gpt2", "small", 4096), 0).state_dict()
    proj = torch.cat([sd[f"transformer.h.{l}.{p}.c_proj.weight"].ravel() for l in range(4) for p in ("attn", "mlp")])
    assert abs(proj.std().item() / (0.02 / math.sqrt(8)) - 1) < 0.02
    assert abs(sd["transformer.h.0.attn.c_attn.weight"].std().item() / 0.02 - 1) < 0.02
    assert abs(sd["transformer.wpe.weight"].std().item() / 0.02 - 1) < 0.05
    assert torch.equal(sd["transformer.h.1.ln_2.weight"], torch.ones(256))
    assert torch.equal(sd["transformer.h.1.mlp.c_fc.bias"], torch.zeros(1024))
    a = tt.make("mamba2", tt.named_config("mamba2", "small", 4096), 0).arch
    sd = tt.make("mamba2", tt.named_config("mamba2", "small", 4096), 0).state_dict()
    dt_bias = torch.cat([sd[f"backbone.layers.{l}.mixer.dt_bias"] for l in range(4)]).double()
    dt = F.softplus(dt_bias)
    assert dt.min() >= 1e-3 * (1 - 1e-6) and dt.max() <= 1e-1 * (1 + 1e-6)
    assert dt.log().min() < math.log(3e-3) and dt.log().max() > math.log(3e-2)  # log-uniform over the range
    A = torch.cat([sd[f"backbone.layers.{l}.mixer.A_log"] for l in range(4)]).double().exp()
    assert A.min() >= 1 - 1e-6 and A.max() <= 16 + 1e-5 and A.max() - A.min() > 8
    assert torch.equal(sd["backbone.layers.2.mixer.D"], torch.ones(a.nheads))
    conv = sd["backbone.layers.0.mixer.conv1d.weight"]
    assert conv.shape == (a.conv_dim, 1, 4) and conv.abs().max() <= 0.5 and conv.abs().max() > 0.45
    assert sd["backbone.layers.0.mixer.in_proj.weight"].abs().max() <= 1 / 16
    assert sd["backbone.layers.0.mixer.out_proj.weight"].abs().max() <= 1 / math.sqrt(512) / 2
    assert abs(sd["backbone.embedding.weight"].std().item() / 0.02 - 1) < 0.02
    assert sd["backbone.embedding.weight"].shape == (4096, 256)


def test_float32_forward_agrees_with_float64():
    for case in ("gpt2", "llama-untied-llama3", "mamba2"):
        fam, cfg = case_config(case)
        m = perturbed(fam, cfg)
        ids = token_ids()
        with torch.no_grad():
            h32 = m.hidden_states(ids)[-1]
            h64 = copy.deepcopy(m).double().hidden_states(ids)[-1]
        assert h32.dtype == torch.float32
        assert float((h32.double() - h64).abs().max() / h64.abs().max()) < 1e-5, case


def test_refusals():
    with pytest.raises(ValueError, match="family"):
        tt.named_config("mamba1", "tiny", 10)
    with pytest.raises(ValueError, match="size"):
        tt.named_config("gpt2", "124m", 10)
    m = tt.make("gpt2", tt.named_config("gpt2", "tiny", VOCAB), 0)
    with pytest.raises(ValueError, match="context"):
        m(token_ids(T=65))
    with pytest.raises(ValueError, match="LongTensor"):
        m(torch.zeros(3, 4))
