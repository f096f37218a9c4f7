"""E6 (coupling paper (A6)): the PyTorch helper tokdyn_train.e6 and the preset coupling-e6.

Helper: the Hessian-vector product against central differences of gradients, the Gauss-Newton
product's J v against central differences of the logits and its symmetry and positivity, the
Lanczos eigenpairs of the real model's curvature against a dense eigendecomposition, the layer
Jacobian's perturbation dA against central differences of Jacobians (total and direct), and
LayerNorm's neutral directions. Preset: the smoke run end to end (tables, checks, figure) and a bad
parameter (exit 2, one line, nothing written)."""
import csv
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tokdyn_train import e6  # noqa: E402
from tokdyn_train.families import make, named_config  # noqa: E402
from tokdyn_train.lanczos import lanczos_top  # noqa: E402

TOKDYN = os.environ.get("TOKDYN_BIN", "build/tokdyn")


@pytest.fixture(scope="module")
def model_and_ids():
    torch.set_num_threads(1)
    m = make("gpt2", named_config("gpt2", "tiny", 32), seed=3).double()
    # move away from the initialisation (its LayerNorm gains are all 1)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g, dtype=torch.float64))
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 32, size=(2, 9)))
    return m, ids


def test_hessian_product_against_gradients(model_and_ids):
    m, ids = model_and_ids
    op = e6.Curvature(m, ids, "hessian")
    c = e6.product_checks(op, seed=1)
    assert c["symmetry"] <= 1e-12
    assert c["fd_rel_error"] <= 1e-7


def test_gauss_newton_product(model_and_ids):
    m, ids = model_and_ids
    op = e6.Curvature(m, ids, "gauss-newton")
    c = e6.product_checks(op, seed=2)
    assert c["symmetry"] <= 1e-12
    assert c["fd_rel_error"] <= 1e-7
    rng = np.random.default_rng(3)
    for _ in range(3):
        v = rng.standard_normal(op.n)
        assert float(v @ op.matvec(v)) >= -1e-12 * float(v @ v)  # positive semi-definite


@pytest.mark.parametrize("kind", ["hessian", "gauss-newton"])
def test_lanczos_on_the_model_against_dense(model_and_ids, kind):
    m, ids = model_and_ids
    op = e6.Curvature(m, ids, kind)
    d = e6.lanczos_vs_dense(op, k=3, m=24, seed=0)
    assert d["max_rel_eig_error"] <= 1e-10
    assert d["asymmetry"] <= 1e-10
    r = lanczos_top(op.matvec, op.n, 3, tol=1e-10, seed=0)
    assert r.converged and np.max(r.residuals) <= 1e-8


@pytest.mark.parametrize("delta", ["total", "direct"])
def test_dA_against_finite_differences(model_and_ids, delta):
    m, ids = model_and_ids
    coc = e6.Cocycle(m, ids[:1, :3], 0, 2, delta)
    op = e6.Curvature(m, ids, "hessian")
    v = np.random.default_rng(7).standard_normal(op.n)
    v /= np.linalg.norm(v)
    parts = op.split(v)
    dA = coc.dA(parts)
    h = 1e-4
    fd = (coc.A_at(parts, h) - coc.A_at(parts, -h)) / (2 * h)
    assert np.linalg.norm(fd - dA) / np.linalg.norm(dA) <= 1e-6
    if delta == "direct":
        # x_l held against x_l moving with W: the total derivative has the extra term through x_l
        tot = e6.Cocycle(m, ids[:1, :3], 0, 2, "total").dA(parts)
        assert np.linalg.norm(tot[1] - dA[1]) > 1e-8 * np.linalg.norm(dA[1])


def test_layernorm_neutral_directions(model_and_ids):
    m, ids = model_and_ids
    coc = e6.Cocycle(m, ids[:1, :4], 0, 2, "total")
    J = coc.A()
    T, d = coc.T, coc.d
    for l in range(J.shape[0]):
        for t in range(T):
            u = np.zeros(T * d)
            u[t * d:(t + 1) * d] = 1.0
            assert np.linalg.norm(J[l] @ u - u) <= 1e-12 * np.linalg.norm(J[l])


def _run(args, out):
    env = dict(os.environ)
    return subprocess.run([TOKDYN, "run", "coupling-e6", *args, "--out", out], capture_output=True, text=True, env=env, timeout=600)


SMOKE = ["--set", "smoke_steps=4", "--set", "smoke_every=2", "--set", "k=2", "--set", "random=2", "--set", "tokens=3",
         "--set", "batch=2", "--set", "context=9", "--set", "lanczos_max=60"]


@pytest.mark.skipif(not os.path.exists(TOKDYN), reason="no tokdyn binary (TOKDYN_BIN)")
def test_preset_smoke_end_to_end():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "e6")
        r = _run(SMOKE, out)
        assert r.returncode == 0, r.stderr
        for f in ("eigen.csv", "fractions.csv", "projectors.csv", "checks.csv", "summary.csv", "manifest.json", "e6.png"):
            assert os.path.exists(os.path.join(out, f)), f
        with open(os.path.join(out, "fractions.csv")) as f:
            frac = list(csv.DictReader(f))
        assert [int(x["step"]) for x in frac] == [0, 2, 4]
        for x in frac:
            assert x["dichotomy"] in ("found", "undecided")
            assert (x["why"] == "") == (x["dichotomy"] == "found")
        with open(os.path.join(out, "eigen.csv")) as f:
            eig = list(csv.DictReader(f))
        assert len(eig) == 3 * (2 + 2)
        for x in eig:
            if x["dichotomy"] == "found":
                assert 0.0 <= float(x["slow_fraction"]) <= 1.0 + 1e-12
            else:
                assert x["slow_fraction"] == ""
        with open(os.path.join(out, "checks.csv")) as f:
            checks = list(csv.DictReader(f))
        assert not [c for c in checks if c["pass"] == "false"], checks
        ids = {c["check"] for c in checks}
        assert {"E6 Lanczos", "E6 curvature", "E6 dA", "E6 J", "F19", "E6 P", "A6 last step", "A6 trend"} <= ids
        # PyTorch's layer Jacobians against tokdyn's own C++ GPT-2 (an independent implementation)
        assert [c for c in checks if c["check"] == "E6 J"][0]["pass"] == "true"
        f19 = [c for c in checks if c["check"] == "F19"][0]
        assert f19["pass"] == "true"  # gpt2: LayerNorm, so the quotient is taken
        man = json.load(open(os.path.join(out, "manifest.json")))
        assert man["notes"]["model"]["quotient_dim"] == 3 * 63


@pytest.mark.skipif(not os.path.exists(TOKDYN), reason="no tokdyn binary (TOKDYN_BIN)")
@pytest.mark.parametrize("bad", [["--set", "k=0"], ["--set", "curvature=fisher"], ["--set", "tokens=20", "--set", "context=9"],
                                 ["--set", "first=5"], ["--set", "corpus=/nonexistent"]])
def test_preset_bad_parameter(bad):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "e6")
        r = _run(SMOKE + bad, out)
        assert r.returncode == 2, (r.returncode, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not os.path.exists(out)
        assert os.listdir(tmp) == []
