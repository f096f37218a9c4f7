"""The PyTorch hierarchical model (python/tokdyn_train/hierarchical.py) against tokdyn's model
``hierarchical``, and the E1 training run (python/tokdyn_train/e1.py).

    cd /work/wt-hier && PYTHONPATH=/work/main/build/python:$PWD/python /usr/bin/python3 -m pytest -q tests/train/test_hierarchical.py

Needs a built tokdyn (``import tokdyn``) and Debian's torch; about half a minute on one core.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tokdyn
from tokdyn_train import hierarchical as H

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-12  # max |torch - tokdyn| / max(1, max |tokdyn|) per layer, float64


def rel_err(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


# ---- tokdyn's generator (psi is drawn, not written) ----------------------------------------------


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A fresh tokdyn run (preset depth-spectra, model hierarchical): it draws its Transformer
    weights and writes them (inputs/tf_weights.safetensors), its start (x0.npy) and its trajectory
    (trajectory.npy, [depth + 1, T + K, d])."""
    out = tmp_path_factory.mktemp("tokdyn") / "run"
    tokdyn.run("depth-spectra", str(out), model="hierarchical", d=8, d_ff=16, tokens=10, block=4, depth=8, burn_in=0, k=2,
               trajectory=True, rho=0.7, sigma_b=0.3, psi_hidden=6, seed=3)
    return out


@pytest.fixture(scope="module")
def fma(run_dir):
    """Which of the two roundings of the polar method's u*u + v*v this tokdyn build makes: the one
    whose redraw of the Transformer weights equals, bit for bit, the tf_weights.safetensors tokdyn
    wrote. psi (which tokdyn does not write) is then redrawn the same way."""
    ts = H.read_safetensors(str(run_dir / "inputs" / "tf_weights.safetensors"))
    c = H.config_from_knobs(tokdyn.load(str(run_dir)).params)
    exact = [f for f in (True, False)
             if all(np.array_equal(ts[f"layers.{r}.{k}"], v)
                    for r in range(c.depth) for k, v in H.tokdyn_random_weights(c, r, 1.0, 0.3, 3, fma=f).items())]
    assert exact, "the port of tokdyn's Rng does not reproduce the weights tokdyn wrote"
    # the start tokens, stream (seed, 0x7f), too
    x0 = np.load(run_dir / "x0.npy")
    assert np.array_equal(H.TokdynRng(3, (0x7F,), exact[0]).normal_array((c.tokens, c.d)), x0[:c.tokens])
    return exact[0]


def test_rng_port_redraws_tokdyn_draws(fma):
    assert fma in (True, False)


# ---- the core equals tokdyn's map, layer by layer -------------------------------------------------


def core_for(c: H.HierarchicalConfig, rho: float, weights: str, psi_scale: float, seed: int, fma: bool) -> H.HierarchicalCore:
    core = H.HierarchicalCore(c, rho=rho)
    H.load_tf_weights(core, weights)
    H.load_psi(core, H.tokdyn_injection(c.injection, c.d, c.psi_hidden, psi_scale, seed, fma=fma))
    return core


def test_core_equals_tokdyn_run_outputs(run_dir, fma):
    """The core with the weights the run wrote (psi redrawn from its seed) reproduces every layer
    of its trajectory from its start."""
    p = tokdyn.load(str(run_dir)).params
    c = H.config_from_knobs(p)
    core = core_for(c, p["rho"], str(run_dir / "inputs" / "tf_weights.safetensors"), p["psi_scale"], p["seed"], fma)
    traj = np.load(run_dir / "trajectory.npy")
    x0 = np.load(run_dir / "x0.npy")
    assert traj.shape == (9, c.rows, 8) and np.array_equal(traj[0], x0)
    with torch.no_grad():
        states = core(torch.from_numpy(x0), return_all=True)
        for l in range(9):
            assert rel_err(states[l], traj[l]) <= TOL, l
        # the slow path is exercised: without psi the states leave tokdyn's
        for q in core.psi.parameters():
            q.zero_()
        off = core(torch.from_numpy(x0), return_all=True)
    assert rel_err(off[8], traj[8]) > 1e-3


VARIANTS = [
    dict(d=8, d_ff=16, tokens=8, block=4, depth=6, rho=0.7),
    dict(d=8, d_ff=12, tokens=10, block=4, depth=6, rho=-0.9, norm="layer", placement="post", activation="silu",
         compression="stride", refresh="relax", refresh_every=3, pooled="raw", slow_loop="self", injection="affine"),
    dict(d=8, d_ff=12, heads=2, tokens=11, block=3, depth=5, rho=1.3, positional="rope", compression="head", refresh_every=0,
         site="inside", injection="linear", psi_scale=2.0, activation="gelu-tanh"),
    dict(d=6, d_ff=10, heads=3, tokens=12, block=4, depth=7, rho=0.5, positional="alibi", compression="topk", topk=2,
         tying="looped", loop=3, refresh_every=2, psi_hidden=5, activation="tanh", norm="none", temperature=0.7),
    dict(d=4, d_ff=8, tokens=9, block=9, depth=3, rho=0.5, tying="tied", injection="identity", activation="relu",
         refresh_every=2, refresh="relax", site="inside", norm="layer"),
]


def tokdyn_knobs(c: H.HierarchicalConfig, **extra):
    """The tokdyn knobs of a config, only those that apply (tokdyn refuses the others)."""
    k = {f: getattr(c, f) for f in ("d", "d_ff", "heads", "tokens", "block", "depth", "norm", "placement", "activation",
                                   "positional", "temperature", "tying", "compression", "injection", "refresh_every",
                                   "pooled", "slow_loop", "site")}
    if c.norm != "none":
        k["eps"] = c.eps
    if c.compression == "topk":
        k["topk"] = c.topk
    if c.injection == "tanh-mlp":
        k["psi_hidden"] = c.psi_hidden
    if c.refresh_every != 0:
        k["refresh"] = c.refresh
    k.update(extra)
    return k


@pytest.mark.parametrize("v", VARIANTS, ids=[f"variant{i}" for i in range(len(VARIANTS))])
def test_core_equals_tokdyn_model_with_given_weights(tmp_path, fma, v):
    """Weights drawn here (gains and LayerNorm biases too), written in tokdyn's layout and given to
    tokdyn (--set tf_weights=FILE); psi redrawn from the seed. Every knob of the slow path and of the
    block: norms, placements, activations, heads, RoPE / ALiBi, temperature, tying, compressions,
    injections, refresh (hold / relax, every L_r, held), pooled raw / normalised, chain / self loop,
    additive / inside site, a partial last block."""
    v = dict(v)
    rho, psi_scale, seed = v.pop("rho"), v.pop("psi_scale", 1.0), 11
    c = H.HierarchicalConfig(**v)
    core = H.HierarchicalCore(c, rho=rho)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for blk in core.layers:
            for name, t in list(blk.named_parameters()) + list(blk.named_buffers()):
                base = 1.0 if name.startswith("g_") else 0.0
                scale = 0.3 if name.startswith(("g_", "beta_", "b_")) else 1.0 / np.sqrt(t.shape[-1])
                t.copy_(base + scale * torch.randn(t.shape, generator=g, dtype=torch.float64))
    f = str(tmp_path / "w.safetensors")
    H.save_tf_weights(core, f)
    extra = {"psi_scale": psi_scale} if c.injection != "identity" else {}
    m = tokdyn.models.hierarchical(**tokdyn_knobs(c, rho=rho, tf_weights=f, seed=seed, **extra))
    H.load_psi(core, H.tokdyn_injection(c.injection, c.d, c.psi_hidden, psi_scale, seed, fma=fma))
    check = H.HierarchicalCore(c, rho=rho)  # the file read back gives the same module
    H.load_tf_weights(check, f)
    for a, b in zip(check.layers.parameters(), core.layers.parameters()):
        assert torch.equal(a, b)
    traj = m.trajectory(depth=c.depth, taps="all")
    with torch.no_grad():
        states = core(torch.from_numpy(m.x0), return_all=True)
    errs = [rel_err(states[l], traj[l]) for l in range(c.depth + 1)]
    assert max(errs) <= TOL, errs
    assert np.array_equal(states[0].numpy(), m.x0)


# ---- rho fixed at 0: the slow path is dead weight ---------------------------------------------------


def test_rho_off_slow_path_parameters_change_nothing():
    T, P, V = 16, 4, 8
    lm = H.HierarchicalLM(V, 16, T, P, 3, learn_rho=False, dtype=torch.float64)
    lm.init_weights(torch.Generator().manual_seed(0))
    ids = torch.randint(0, V, (5, T), generator=torch.Generator().manual_seed(1))
    fast, slow = lm.path_parameters()
    assert slow == list(lm.core.psi.parameters()) and "rho" not in dict(lm.named_parameters())
    logits = lm(ids)
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
    loss.backward()
    for p in slow:
        assert p.grad is not None and torch.count_nonzero(p.grad) == 0
    with torch.no_grad():
        for p in slow:
            p.copy_(10.0 * torch.randn(p.shape, generator=torch.Generator().manual_seed(2), dtype=p.dtype))
        assert torch.equal(lm(ids), logits.detach())
    # learned rho (at 0): the same outputs, but the gate has a gradient
    lr = H.HierarchicalLM(V, 16, T, P, 3, learn_rho=True, dtype=torch.float64)
    lr.load_state_dict(lm.state_dict(), strict=False)
    out = lr(ids)
    assert torch.equal(out, logits.detach())
    torch.nn.functional.cross_entropy(out[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1)).backward()
    assert lr.core.rho.grad is not None and float(lr.core.rho.grad) != 0.0


def test_language_model_is_causal():
    """Logits at positions < t do not move (exactly) when token t changes, for every t; the self
    loop (which would read a block's later tokens) is refused."""
    T, P, V = 14, 4, 8
    lm = H.HierarchicalLM(V, 8, T, P, 3, learn_rho=True, rho_init=0.8, dtype=torch.float64)
    lm.init_weights(torch.Generator().manual_seed(3))
    ids = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        base = lm(ids)
        for t in range(T):
            other = ids.clone()
            other[:, t] = (other[:, t] + 3) % V
            out = lm(other)
            assert torch.equal(out[:, :t], base[:, :t]), t
            assert not torch.equal(out[:, t:], base[:, t:]), t
    with pytest.raises(ValueError, match="slow_loop"):
        H.HierarchicalLM(V, 8, T, P, 3, learn_rho=True, slow_loop="self")


# ---- the training run ----------------------------------------------------------------------------


def block_hmm(n, K, P, V, q, S=2, seed=0):
    """n sequences of K blocks: a symmetric latent chain of S states with persistence q (jump with
    probability q), tokens i.i.d. given the block's latent from Dirichlet(0.3) emissions."""
    rng = np.random.default_rng(seed)
    E = rng.dirichlet(np.full(V, 0.3), size=S)
    z = np.empty((n, K), dtype=np.int64)
    z[:, 0] = rng.integers(0, S, n)
    for k in range(1, K):
        jump = rng.random(n) < q
        z[:, k] = np.where(jump, (z[:, k - 1] + rng.integers(1, S, n)) % S, z[:, k - 1])
    cum = np.cumsum(E, axis=1)
    u = rng.random((n, K, P))
    x = np.minimum((u[..., None] >= cum[z][:, :, None, :]).sum(-1), V - 1)
    return x.reshape(n, K * P).astype(np.int64)


def e1(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return subprocess.run([sys.executable, "-m", "tokdyn_train.e1", *map(str, args)], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("e1data")
    x = block_hmm(1600, 8, 4, 8, 0.05, seed=3)
    np.save(d / "train.npy", x[:1200])
    np.save(d / "heldout.npy", x[1200:])
    return d


def test_training_beats_unigram_and_is_deterministic(data, tmp_path):
    args = ["--train", data / "train.npy", "--heldout", data / "heldout.npy", "--vocab", 8, "--block", 4, "--size", "s",
            "--rho", "learn", "--seed", 4, "--steps", 150, "--batch", 32, "--lr", 3e-3]
    a, b = e1(*args, "--out", tmp_path / "a"), e1(*args, "--out", tmp_path / "b")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    la, lb = (tmp_path / "a" / "loss.csv").read_bytes(), (tmp_path / "b" / "loss.csv").read_bytes()
    assert la == lb
    rows = la.decode().splitlines()
    assert rows[0] == "step,train_loss,heldout_loss,heldout_sequences" and rows[1].startswith("0,,")
    assert rows[-1].startswith("150,") and rows[-1].endswith(",400")
    res = json.loads((tmp_path / "a" / "result.json").read_text())
    held = np.load(data / "heldout.npy")[:, 4:]
    p = np.bincount(held.ravel(), minlength=8) / held.size
    unigram = float(-(p[p > 0] * np.log(p[p > 0])).sum())
    assert res["unigram_entropy"] == pytest.approx(unigram, rel=1e-12)
    assert res["heldout_tokens"] == held.size
    assert res["heldout_loss"] == float(rows[-1].split(",")[2])
    assert res["heldout_loss"] < unigram - 0.1, (res["heldout_loss"], unigram)
    assert float(rows[1].split(",")[2]) > res["heldout_loss"]
    assert res["learn_rho"] is True and res["abs_rho"] == abs(res["rho"])
    assert res["params"]["slow"] == res["params"]["psi"] + 1
    assert res["params"]["fast"] + res["params"]["slow"] == res["params"]["total"]
    assert res["steps"] == 150 and res["tokens_seen"] == 150 * 32 * 32


def test_rho_off_run_reports_a_closed_gate(data, tmp_path):
    r = e1("--train", data / "train.npy", "--heldout", data / "heldout.npy", "--vocab", 8, "--block", 4, "--size", "s",
           "--rho", "off", "--seed", 1, "--steps", 20, "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "o" / "result.json").read_text())
    assert res["rho"] == 0.0 and res["injection_norm"] == 0.0 and res["params"]["slow"] == res["params"]["psi"]


def test_non_finite_loss_exits_4(data, tmp_path):
    r = e1("--train", data / "train.npy", "--heldout", data / "heldout.npy", "--vocab", 8, "--block", 4, "--size", "s",
           "--rho", "learn", "--seed", 1, "--steps", 30, "--lr", 1e30, "--warmup", 0, "--out", tmp_path / "x")
    assert r.returncode == 4, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "non-finite" in lines[0] and "at step" in lines[0]
    assert not (tmp_path / "x" / "result.json").exists()


def test_bad_arguments_exit_2_one_line(data, tmp_path):
    tr, ho = data / "train.npy", data / "heldout.npy"
    np.save(tmp_path / "float.npy", np.zeros((3, 8)))
    np.save(tmp_path / "short.npy", np.zeros((3, 12), dtype=np.int64))
    np.save(tmp_path / "oned.npy", np.zeros(8, dtype=np.int64))
    (tmp_path / "junk.npy").write_text("not npy")
    ok = {"--train": tr, "--heldout": ho, "--vocab": 8, "--block": 4, "--size": "s", "--rho": "learn", "--seed": 0,
          "--steps": 5, "--out": tmp_path / "o"}
    cases = [
        ({"--size": "xl"}, "--size"),
        ({"--rho": "maybe"}, "--rho"),
        ({"--steps": 0}, "--steps"),
        ({"--steps": "ten"}, "--steps"),
        ({"--lr": -1}, "--lr"),
        ({"--lr": "nan"}, "--lr"),
        ({"--batch": 0}, "--batch"),
        ({"--block": 0}, "--block"),
        ({"--block": 32}, "--block"),
        ({"--vocab": 4}, "--vocab"),
        ({"--train": tmp_path / "missing.npy"}, "--train"),
        ({"--train": tmp_path / "junk.npy"}, "--train"),
        ({"--train": tmp_path / "float.npy"}, "--train"),
        ({"--heldout": tmp_path / "oned.npy"}, "--heldout"),
        ({"--heldout": tmp_path / "short.npy"}, "--heldout"),
        ({"--out": tr}, "--out"),
        ({"--seed": None}, "--seed"),
        ({"--threads": 0}, "--threads"),
        ({"--warmup": 5}, "--warmup"),
    ]
    for change, name in cases:
        a = {**ok, **change}
        argv = [x for k, v in a.items() if v is not None for x in (k, v)]
        r = e1(*argv)
        lines = r.stderr.splitlines()
        assert r.returncode == 2 and len(lines) == 1 and name in lines[0] and lines[0].startswith("e1: "), (change, r.stderr)
        assert not (tmp_path / "o" / "result.json").exists()
