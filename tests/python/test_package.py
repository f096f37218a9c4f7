"""The Python package tokdyn (issue 19): presets and results, registry models, analyses, callbacks,
errors, the GIL and copies. Run by CTest (test `python`) with PYTHONPATH=build/python and TOKDYN_BIN
= the CLI, so that results can be compared with the CLI's bytes."""
import os
import shutil
import subprocess
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import tokdyn

CLI = os.environ.get("TOKDYN_BIN", "tokdyn")


def cli(*args, cwd=None):
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True)


# ---- presets and results ----------------------------------------------------------------------


def test_presets_and_show():
    names = [p["name"] for p in tokdyn.presets()]
    assert "rope-flow" in names and "depth-spectra" in names
    s = tokdyn.show("rope-flow")
    keys = [p["key"] for p in s["params"]]
    assert "beta" in keys and "n" in keys
    files = [t["file"] for t in s["outputs"]["tables"]]
    assert "geometry.csv" in files


def test_run_equals_the_cli_bytes(tmp_path):
    sets = {"n": 6, "runs": 2, "t_end": 2.0, "outputs": 20, "beta": 1.5}
    r = tokdyn.run("rope-flow", tmp_path / "py", **sets)
    args = ["run", "rope-flow", "--out", str(tmp_path / "cli"), "--no-figures", "--quiet"]
    for k, v in sets.items():
        args += ["--set", f"{k}={v}"]
    c = cli(*args)
    assert c.returncode == 0, c.stderr
    for name in ("metrics.csv", "metrics_runs.csv", "geometry.csv", "summary.csv"):
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    assert r.preset == "rope-flow"
    assert set(["metrics", "geometry", "summary"]) <= set(r.table_names)
    g = r.geometry  # a declared table, as a DataFrame
    assert list(g.columns) == ["t", "tau", "run", "min_inner_c", "hemisphere_min_e1"]
    assert len(g) == 2 * 21
    assert r.summaries.set_index("quantity").loc["softmax_floor_a", "value"] > 0
    # Tables are read with round-trip float parsing: the DataFrame holds the bits the CLI computed.
    assert r.geometry["min_inner_c"].iloc[-1] == float((tmp_path / "cli" / "geometry.csv").read_text().splitlines()[-1].split(",")[3])
    assert r.describe("geometry")["description"].startswith("one run")


def test_run_default_folder_and_taps(tmp_path):
    r = tokdyn.run("rope-flow", integrator="discrete", h=0.1, t_end=1.0, n=5, runs=3, taps="0,5:10:5")
    assert r.dir.is_dir()
    t = r.taps()
    assert t.layers == [0, 5, 10]
    assert t.array.shape == (3, 3, 5, 4) and t.axes == ("layer", "run", "row", "d")
    np.testing.assert_allclose(np.linalg.norm(t.at(10), axis=-1), 1.0, atol=1e-14)


def test_load_a_cli_result(tmp_path):
    c = cli("run", "ssm-random-silu", "--out", str(tmp_path / "s"), "--no-figures", "--quiet", "--set", "runs=2", "--set",
            "depth=6", "--set", "tokens=4", "--set", "n=8", "--set", "m=4", "--set", "taps=all")
    assert c.returncode == 0, c.stderr
    r = tokdyn.load(tmp_path / "s")
    assert r.variants() == ["no_silu", "silu"]
    t = r.taps("silu")
    assert t.layers == list(range(7)) and t.array.shape == (7, 2, 4, 8)
    m = r.metrics
    assert set(m["variant"]) == {"silu", "no_silu"}
    with pytest.raises(KeyError):
        r.taps()  # two variants: name one
    with pytest.raises(ValueError):
        tokdyn.load(tmp_path)  # not a results folder


# ---- errors ------------------------------------------------------------------------------------


def test_errors_are_value_and_runtime_errors(tmp_path):
    with pytest.raises(ValueError, match="preset 'nope'"):
        tokdyn.run("nope")
    with pytest.raises(ValueError, match="beta"):
        tokdyn.run("rope-flow", tmp_path / "a", beta=-1)
    with pytest.raises(ValueError, match="does not apply"):
        tokdyn.run("rope-flow", tmp_path / "b", taps="all")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    m = tokdyn.models.rope(d=4, tokens=3)
    with pytest.raises(ValueError, match="shape"):
        m.step(np.zeros((2, 4)), 1)
    with pytest.raises(ValueError, match="tap 'mixing'"):
        m.tap("mixing", m.x0, 1)
    # A callback that returns NaN: non-finite state is a RuntimeError (the CLI's exit 4).
    with pytest.raises(RuntimeError, match="non-finite|NaN"):
        tokdyn.depth_spectrum(lambda X, l: X * np.nan, lambda X, V, l: V, np.ones((2, 2)), 5, 1)
    # Options that do not apply are refused, never ignored.
    with pytest.raises(ValueError, match="on_sphere"):
        tokdyn.depth_spectrum(m, depth=5, k=1, on_sphere=True)
    with pytest.raises(ValueError, match="jvp"):
        tokdyn.depth_spectrum(m, m.jvp, depth=5, k=1)
    with pytest.raises(ValueError, match="slack"):
        tokdyn.cocycle_spectra(np.tile(np.eye(2) * 2, (4, 1, 1)), bundles=False, slack=0.2)
    with pytest.raises(ValueError, match="not both"):
        m.hidden_states([1, 2, 3], depth=2, X0=m.x0)
    # Typed errors (issue 38): one class per exit code under tokdyn.Error, still ValueError / RuntimeError.
    with pytest.raises(tokdyn.InputError) as bad:
        tokdyn.run("rope-flow", tmp_path / "c", beta=-1)
    assert isinstance(bad.value, tokdyn.Error) and isinstance(bad.value, ValueError) and bad.value.exit_code == 2
    with pytest.raises(tokdyn.InputError, match=r"unknown \(did you mean 'rope-flow'\?\)"):
        tokdyn.run("rope-flw")
    with pytest.raises(tokdyn.InputError):
        tokdyn.depth_spectrum(m, m.jvp, depth=5, k=1)  # raised by the package's Python
    with pytest.raises(tokdyn.NonFiniteError) as nf:
        tokdyn.depth_spectrum(lambda X, l: X * np.nan, lambda X, V, l: V, np.ones((2, 2)), 5, 1)
    assert isinstance(nf.value, RuntimeError) and nf.value.exit_code == 4
    assert {c.exit_code for c in (tokdyn.InternalError, tokdyn.InputError, tokdyn.ResourceError, tokdyn.NonFiniteError,
                                  tokdyn.FiguresError, tokdyn.BusyError, tokdyn.ConvergenceError)} == {1, 2, 3, 4, 5, 6, 7}
    for name in ("Error", "InputError", "NonFiniteError", "ConvergenceError"):
        assert name in tokdyn.__all__
    # A callback's own exception reaches the caller as itself.
    def boom(X, l):
        raise KeyError("from the callback")
    with pytest.raises(KeyError, match="from the callback"):
        tokdyn.depth_spectrum(boom, lambda X, V, l: V, np.ones((2, 2)), 5, 1)


def test_unknown_model_is_attribute_error():
    with pytest.raises(AttributeError):
        tokdyn.models.gpt5


# ---- models -------------------------------------------------------------------------------------


def test_model_trajectory_equals_depth_spectra_trajectory(tmp_path):
    knobs = dict(d=4, tokens=5, beta=2.0, h=0.2, seed=3)
    c = cli("run", "depth-spectra", "--out", str(tmp_path / "d"), "--no-figures", "--quiet", "--set", "model=rope",
            *sum([["--set", f"{k}={v}"] for k, v in knobs.items()], []), "--set", "depth=12", "--set", "burn_in=2", "--set",
            "k=2", "--set", "trajectory=true")
    assert c.returncode == 0, c.stderr
    traj = np.load(tmp_path / "d" / "trajectory.npy")  # [depth + 1, rows, d]
    m = tokdyn.models.rope(**knobs)
    np.testing.assert_array_equal(m.x0, traj[0])
    t = m.trajectory(depth=12, taps="all")
    for k in range(13):
        np.testing.assert_array_equal(t[k], traj[k])
    np.testing.assert_array_equal(m.step(traj[4], 5), traj[5])
    hs = m.hidden_states(depth=12, taps=[0, 6, 12])
    assert hs.shape == (3, 1, 5, 4)
    # The spectrum of the registry model equals the CLI's lyapunov.csv.
    s = tokdyn.depth_spectrum(m, depth=12, k=2, burn_in=2)
    import pandas as pd
    mu_cli = pd.read_csv(tmp_path / "d" / "lyapunov.csv", float_precision="round_trip")["mu"].to_numpy()
    np.testing.assert_array_equal(s["mu"], mu_cli)


def test_model_jvp_against_central_differences():
    m = tokdyn.models.transformer(d=4, tokens=3, heads=2, seed=1)
    X = m.x0
    rng = np.random.default_rng(0)
    V = rng.standard_normal((2, 3, 4))
    W = m.jvp(X, V, 1)
    eps = 1e-6
    for i in range(2):
        fd = (m.step(X + eps * V[i], 1) - m.step(X - eps * V[i], 1)) / (2 * eps)
        np.testing.assert_allclose(W[i], fd, rtol=1e-6, atol=1e-7)


def test_attention_and_residual_taps():
    m = tokdyn.models.transformer(d=4, tokens=5, heads=2, seed=2)
    X = np.stack([m.x0, m.x0[::-1].copy()])  # two runs
    A = m.tap("attention", X, 1)
    assert A.shape == (2, 2, 5, 5)
    np.testing.assert_allclose(A.sum(axis=-1), 1.0, atol=1e-14)
    mid = m.tap("residual_mid", X, 1)
    assert mid.shape == (2, 5, 4)
    assert "attention" in m.tap_names[0] and "residual_mid" in m.tap_names[1]
    r = tokdyn.models.rope(d=4, tokens=4, heads=2)
    np.testing.assert_allclose(r.tap("attention", r.x0, 3).sum(axis=-1), 1.0, atol=1e-14)


def test_models_list_and_describe():
    assert tokdyn.model_names() == ["ssm", "rope", "mamba2", "transformer", "hierarchical", "gpt2", "llama", "neox"]
    d = tokdyn.models.describe("ssm")
    assert "q" in d["taps"] and any(p["key"] == "redraw" for p in d["params"])
    with pytest.raises(ValueError, match="knob|parameter"):
        tokdyn.models.ssm(nonsense=1)


def test_trajectory_under_another_schedule():
    # Every schedule knob is a knob of its model.
    for name, keys in tokdyn.SCHEDULE_KNOBS.items():
        params = {p["key"] for p in tokdyn.models.describe(name)["params"]}
        assert set(keys) <= params, (name, keys)
    m = tokdyn.models.ssm(n=4, m=3, tokens=5, seed=2)
    tied = m.trajectory(depth=6, taps=[6], schedule={"redraw": 100})[6]
    np.testing.assert_array_equal(tied, tokdyn.models.ssm(n=4, m=3, tokens=5, seed=2, redraw=100).trajectory(depth=6, taps=[6])[6])
    # One weight-tied layer is the same map at every depth step; redraw=1 is not.
    one = tokdyn.models.ssm(n=4, m=3, tokens=5, seed=2, redraw=100)
    X = one.x0
    for layer in range(1, 7):
        X = one.step(X, 1)
    np.testing.assert_allclose(tied, X, rtol=0, atol=1e-15)
    assert np.abs(m.trajectory(depth=6, taps=[6])[6] - tied).max() > 1e-6
    with pytest.raises(ValueError, match="not a schedule knob of model ssm; expected redraw"):
        m.trajectory(depth=3, schedule={"beta": 2})
    with pytest.raises(ValueError, match="expected none"):
        tokdyn.models.rope(d=4, tokens=3).trajectory(depth=3, schedule={"redraw": 2})


def test_mamba2_hidden_states_of_given_token_ids(tmp_path):
    assert cli("make-checkpoint", "--size", "tiny", "--seed", "1", "--out", str(tmp_path / "ck")).returncode == 0
    ids = np.array([3, 1, 4, 1, 5], dtype=np.int64)
    m = tokdyn.models.mamba2(checkpoint=str(tmp_path / "ck"), token_ids=ids)
    hs = m.hidden_states(depth=4, taps="all")
    assert hs.shape == (5, 1, 5, m.x0.shape[1])
    assert np.isfinite(hs).all()
    # The same ids through the mamba2 preset's taps: the same fp32 states.
    np.save(tmp_path / "ids.npy", ids[None, :])
    c = cli("run", "mamba2-fig1", "--out", str(tmp_path / "m"), "--no-figures", "--quiet", "--set",
            f"checkpoint={tmp_path / 'ck'}", "--set", "runs=1", "--set", "tokens=5", "--set", "depth=4", "--set",
            f"token_ids={tmp_path / 'ids.npy'}", "--set", "taps=all", "--set", "variants=gate")
    assert c.returncode == 0, c.stderr
    t = tokdyn.load(tmp_path / "m").taps()
    np.testing.assert_array_equal(t.array.astype(np.float64), hs)
    # A switch off (the output gate) through hidden_states equals the preset's no_gate variant.
    hs_ng = m.hidden_states(ids, depth=4, gate=False)
    c = cli("run", "mamba2-fig1", "--out", str(tmp_path / "n"), "--no-figures", "--quiet", "--set",
            f"checkpoint={tmp_path / 'ck'}", "--set", "runs=1", "--set", "tokens=5", "--set", "depth=4", "--set",
            f"token_ids={tmp_path / 'ids.npy'}", "--set", "taps=all", "--set", "variants=no_gate")
    assert c.returncode == 0, c.stderr
    np.testing.assert_array_equal(tokdyn.load(tmp_path / "n").taps().array.astype(np.float64), hs_ng)
    assert not np.array_equal(hs_ng, hs)


# ---- analyses -----------------------------------------------------------------------------------


def test_gram_metrics_closed_forms():
    same = np.tile(np.array([[0.6, 0.8, 0.0]]), (4, 1))
    orth = np.eye(3)
    g = tokdyn.gram_metrics(np.stack([same, np.vstack([orth, orth[:1]])]))
    assert g["lambda1"][0] == pytest.approx(1.0, abs=1e-15)
    assert g["participation"][0] == pytest.approx(1.0, abs=1e-14)
    assert g["consensus_dist_diagonal"][0] == pytest.approx(0.0, abs=1e-7)
    # e1, e2, e3, e1: G has eigenvalues 2, 1, 1 -> lambda1 = 2/4, r = 16 / (4 + 1 + 1 + 2 * 1) ... = n^2 / |G|_F^2
    assert g["lambda1"][1] == pytest.approx(0.5, abs=1e-15)
    assert g["participation"][1] == pytest.approx(16 / 6, abs=1e-14)
    assert g["min_cosine"][1] == pytest.approx(0.0, abs=1e-15)


def test_pe_window_and_readings_closed_forms():
    # q = -1, -1, +3, +3: W(1) = -1, W(2) = -1, W(3) = 1/3 (windows -1-1+3, -1+3+3), W(4) = 1 -> T* = 3.
    p = tokdyn.pe_window([-1.0, -1.0, 3.0, 3.0])
    np.testing.assert_allclose(p["W"], [-1.0, -1.0, 1.0 / 3.0, 1.0], atol=1e-15)
    assert p["t_star"] == 3
    assert tokdyn.pe_window([-1.0, -2.0])["t_star"] is None
    q = np.array([[[-1.0, -1.0, 3.0, 3.0], [1.0, 1.0, 1.0, 1.0]]])  # one run, two tokens
    r = tokdyn.pe_readings(q)
    assert r["t_star"] == [[3, 1]]
    assert r["text"]["t_star"] == 3 and r["caption"]["t_star"] == 3
    with pytest.raises(ValueError, match="q"):
        tokdyn.pe_window(np.zeros((2, 2)))


def test_consensus_spectrum_three_formulations_and_beta_zero():
    # beta = 0: W = all ones, A = J/n: eigenvalues 1 and 0 (n-1 times), gap 1.
    z = tokdyn.consensus_spectrum(range(5), [1.0], beta=0.0)
    np.testing.assert_allclose(z["eigenvalues"], [1, 0, 0, 0, 0], atol=1e-15)
    assert z["gap"] == pytest.approx(1.0, abs=1e-15)
    # A resonant ring: the three formulations of Thm 7.3 agree.
    gaps = [tokdyn.consensus_spectrum(range(8), [2 * np.pi / 8], beta=2.0, method=m)["gap"]
            for m in ("similarity", "laplacian", "generalized")]
    np.testing.assert_allclose(gaps, gaps[0], rtol=1e-12)
    with pytest.raises(ValueError, match="method"):
        tokdyn.consensus_spectrum(range(3), [1.0], beta=1.0, method="qr")


def test_green_solve_closed_form_and_no_dichotomy():
    # u(l+1) = 2 u(l) + h with h constant: the bounded solution is the fixed point u = -h.
    B = np.tile(np.diag([2.0, 0.5]), (20, 1, 1))
    h = np.tile([1.0, -2.0], (20, 1))
    g = tokdyn.green_solve(B, h)
    np.testing.assert_allclose(g["u"], np.tile([-1.0, -4.0], (21, 1)), atol=1e-13)  # 0.5 u + h = u -> u = 2 h
    assert g["residual"] < 1e-13 and g["why_not"] is None
    n = tokdyn.green_solve(np.tile(np.eye(2), (5, 1, 1)), np.zeros((5, 2)))
    assert n["u"] is None and "unstable_subspace" in n["why_not"]


def test_cocycle_spectra_closed_form_and_cli(tmp_path):
    B = np.tile(np.diag([2.0, 0.5, 1.5]), (50, 1, 1))
    s = tokdyn.cocycle_spectra(B)
    np.testing.assert_allclose(np.sort(s["mu"]), np.log([0.5, 1.5, 2.0]), atol=1e-15)
    assert s["hyperbolic"] == "yes"
    # Constant diagonal maps: V_par = span(e1, e3), V_perp = span(e2), orthogonal (angle pi/2,
    # |P_+| = 1); the envelopes are exact powers, so C_- = C_+ = 1 at any rates inside the gap.
    assert s["bundles"]["k"] == 2
    np.testing.assert_allclose(s["bundles"]["angle"], np.pi / 2, atol=1e-12)
    np.testing.assert_allclose(s["bundles"]["p_plus_norm"], 1.0, atol=1e-12)
    assert s["constants"]["C"] == pytest.approx(1.0, abs=1e-12)
    assert 0.5 < s["constants"]["r_minus"] < 1 < s["constants"]["r_plus"] < 1.5
    # A neutral direction (growth scale exactly 1) is at the boundary: undecided, never "yes".
    neutral = tokdyn.cocycle_spectra(np.tile(np.diag([1.0, 0.5]), (40, 1, 1)))
    assert neutral["hyperbolic"] == "undecided"
    assert neutral["bundles"] is None and "not hyperbolic" in neutral["why_not"]
    inside = tokdyn.cocycle_spectra(np.stack([np.diag([1.2, 0.5]) if l % 2 else np.diag([0.8, 0.5]) for l in range(40)]), H=1)
    assert inside["hyperbolic"] == "no"  # the Bohl interval [0.8, 1.2] contains 1
    # The same bits as the CLI on a generators file.
    rng = np.random.default_rng(5)
    G = np.eye(4) + 0.3 * rng.standard_normal((60, 4, 4))
    np.save(tmp_path / "g.npy", G)
    c = cli("run", "cocycle-spectra", "--out", str(tmp_path / "c"), "--no-figures", "--quiet", "--set",
            f"generators={tmp_path / 'g.npy'}", "--set", "burn_in=6", "--set", "bundles=none", "--set", "rank=false")
    assert c.returncode == 0, c.stderr
    import pandas as pd
    mu_cli = pd.read_csv(tmp_path / "c" / "lyapunov.csv", float_precision="round_trip")["mu"].to_numpy()
    np.testing.assert_array_equal(tokdyn.cocycle_spectra(G, burn_in=6)["mu"], mu_cli)


def test_depth_spectrum_of_python_callbacks_closed_form():
    s_col = np.array([2.0, 0.5, 1.0])  # step X -> X diag(s): exponents log s_j, each `rows` times
    X0 = np.ones((2, 3))
    V0 = np.eye(6).reshape(6, 2, 3)  # the coordinate frame: each tangent stays on its axis
    out = tokdyn.depth_spectrum(lambda X, l: X * s_col, lambda X, V, l: V * s_col, X0, depth=30, k=6, V0=V0)
    np.testing.assert_allclose(out["mu"], np.tile(np.log(s_col), 2), atol=1e-14)
    assert out["mu_running"].shape == (30, 6)
    np.testing.assert_allclose(out["final_state"], X0 * s_col ** 30)


def test_depth_spectrum_callbacks_equal_the_model(tmp_path):
    """The same map through Python callbacks (the registry model's own step and jvp) gives the
    same exponents as the model through the library."""
    m = tokdyn.models.rope(d=4, tokens=4, beta=1.0, h=0.3)
    a = tokdyn.depth_spectrum(m, depth=40, k=3, burn_in=5, seed=7)
    b = tokdyn.depth_spectrum(m.step, m.jvp, m.x0, 40, 3, burn_in=5, on_sphere=True, seed=7)
    np.testing.assert_allclose(a["mu"], b["mu"], rtol=0, atol=1e-13)


# ---- the GIL and copies -------------------------------------------------------------------------


def test_the_gil_is_released_while_computing():
    B = np.eye(120) + 0.05 * np.random.default_rng(1).standard_normal((300, 120, 120))
    done = threading.Event()
    counts = []

    def work():
        tokdyn.cocycle_spectra(B)
        done.set()

    th = threading.Thread(target=work)
    n = 0
    th.start()
    time.sleep(0.02)
    t0 = time.perf_counter()
    while not done.is_set():
        n += 1  # pure Python: runs only while the other thread does not hold the GIL
    counts.append(n)
    th.join()
    elapsed = time.perf_counter() - t0
    assert elapsed > 0.05, "the computation was too short to tell"
    assert counts[0] > 1000, f"the main thread ran {counts[0]} iterations in {elapsed:.2f} s: the GIL was held"


def test_no_copy_of_a_contiguous_float64_input():
    X = np.random.default_rng(2).standard_normal((200, 50, 256))  # 20 MB
    tracemalloc.start()
    tokdyn.gram_metrics(X)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < X.nbytes / 10, f"peak {peak} bytes: the input was copied"
    # A non-contiguous or float32 input is converted (a copy), with the same result.
    np.testing.assert_array_equal(tokdyn.gram_metrics(X[:, :, :].copy(order="F"))["lambda1"], tokdyn.gram_metrics(X)["lambda1"])


def test_the_examples_run(tmp_path):
    """examples/*.py: the torch spectrum example checks itself against autograd + QR (exit 0 when the
    exponents agree to 1e-9); the others run to the end."""
    here = Path(__file__).resolve().parents[2] / "examples"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)
    r = subprocess.run(["/usr/bin/python3", str(here / "load_and_plot.py"), "--out", str(tmp_path / "f.png")], cwd=tmp_path,
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "f.png").stat().st_size > 1000
    r = subprocess.run(["/usr/bin/python3", str(here / "mamba2_hidden_states.py")], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "layer  48" in r.stdout
    pytest.importorskip("torch")
    r = subprocess.run(["/usr/bin/python3", str(here / "spectrum_of_a_torch_model.py")], cwd=tmp_path, env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# ---- sweeps -------------------------------------------------------------------------------------


def test_sweep_returns_sweep_csv_and_points_load(tmp_path):
    import pandas as pd
    tiny = dict(d=4, t_end=0.5, outputs=5, runs=2)
    df = tokdyn.sweep("rope-flow", tmp_path / "s", grid={"beta": [0.5, 1], "n": "4:8:x2"}, **tiny)
    assert list(df["beta"]) == [0.5, 0.5, 1.0, 1.0] and list(df["n"]) == [4, 8, 4, 8]
    assert (df["status"] == "ok").all()
    # The same bits as the CLI's sweep.csv, and each point is a loadable result.
    raw = pd.read_csv(tmp_path / "s" / "sweep.csv", float_precision="round_trip")
    np.testing.assert_array_equal(df["lambda1_final"].to_numpy(), raw["lambda1_final"].to_numpy())
    r = tokdyn.load(Path(df.attrs["dir"]) / "points" / df["hash"][3])
    assert r.manifest["params"]["beta"] == 1.0 and r.manifest["params"]["n"] == 8
    # Points from a DataFrame (an empty cell: the default), and the same call again resumes.
    pts = pd.DataFrame({"beta": [2.0, 3.0], "n": [5, None]})
    p = tokdyn.sweep("rope-flow", tmp_path / "p", points=pts, **tiny)
    assert list(p["beta"]) == [2.0, 3.0] and p["n"].isna().tolist() == [False, True] and (p["status"] == "ok").all()
    p2 = tokdyn.sweep("rope-flow", tmp_path / "p", points=pts, **tiny)
    pd.testing.assert_frame_equal(p, p2)
    with pytest.raises(ValueError, match="not a parameter of preset rope-flow"):
        tokdyn.sweep("rope-flow", tmp_path / "b", grid={"bogus": [1]})
    with pytest.warns(UserWarning, match="1 of 2 points failed"):
        f = tokdyn.sweep("rope-flow", tmp_path / "f", grid={"d": [3, 4]}, t_end=0.5, outputs=5)
    assert list(f["status"]) == ["failed", "ok"] and f["exit_code"][0] == 2 and "error:" in f["error"][0]


def test_cocycle_spectra_rank_cross_check_is_off_by_default_above_d64(tmp_path):
    # The rank function repeats ~50 x 32 QR steps: by default only up to d = 64; above, the run
    # says what it would cost (manifest warnings) and an explicit rank=true computes it.
    big = tokdyn.run("cocycle-spectra", tmp_path / "big", family="G5", d=72, depth=60, bundles="none")
    assert "rank" not in big.tables if hasattr(big, "tables") else True
    assert not (tmp_path / "big" / "rank.csv").exists()
    assert any("rank function (rank.csv) not computed: at d = 72" in w and "--set rank=true" in w for w in big.manifest["warnings"])
    assert big.manifest["notes"]["rank_skipped_estimate_seconds"] > 0
    assert set(big.manifest["notes"]["phase_seconds"]) == {"qr", "bundles", "other"}
    asked = tokdyn.run("cocycle-spectra", tmp_path / "asked", family="G5", d=72, depth=60, bundles="none", rank=True)
    assert (tmp_path / "asked" / "rank.csv").exists() and "rank" in asked.manifest["notes"]["phase_seconds"]
    with pytest.raises(ValueError, match="parameter 'rank' = true: the rank function needs every QR direction"):
        tokdyn.run("cocycle-spectra", tmp_path / "k", family="G5", d=8, depth=60, bundles="none", rank=True, k=3)
    small = tokdyn.run("cocycle-spectra", tmp_path / "small", family="G5", d=8, depth=60, bundles="none")
    assert (tmp_path / "small" / "rank.csv").exists() and "warnings" not in small.manifest


def test_stubs_are_generated_from_the_registry():
    """python/tokdyn/__init__.pyi's model constructors are scripts/gen_pyi.py's rendering of the live
    registry (one typed def per model, every knob with its type and help): a model or knob added
    without regenerating the stubs fails here."""
    import subprocess
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(["/usr/bin/python3", str(root / "scripts" / "gen_pyi.py"), "--check"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(Path(tokdyn.__file__).parent.parent)})
    assert r.returncode == 0, r.stdout + r.stderr
    stub = (root / "python" / "tokdyn" / "__init__.pyi").read_text()
    import ast
    tree = ast.parse(stub)
    models = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_Models")
    defs = {f.name: [a.arg for a in f.args.kwonlyargs] for f in models.body if isinstance(f, ast.FunctionDef)}
    for name in tokdyn.model_names():
        assert defs[name] == [k["key"] for k in tokdyn.models.describe(name)["params"]], name
        assert set(tokdyn.SCHEDULE_KNOBS[name]) <= set(defs[name]), name


def test_hidden_states_of_a_batch_like_hugging_face():
    """hidden_states(ids [batch, tokens]) for every registry model with token ids: [taps, batch, tokens, d],
    each row of the batch the model run on that row alone."""
    ids = np.array([[1, 5, 9, 2], [7, 3, 3, 0], [4, 4, 8, 6]])
    for name, knobs in (("mamba2", {"size": "tiny"}), ("gpt2", {}), ("neox", {}), ("llama", {})):
        m = getattr(tokdyn.models, name)(**knobs)
        hs = m.hidden_states(token_ids=ids, depth=3)
        assert hs.shape[:3] == (4, 3, 4), (name, hs.shape)
        one = m.hidden_states(token_ids=ids[1], depth=3)
        # (to fp32 round-off: the products' tiles depend on the number of rows)
        assert np.allclose(hs[:, 1], one[:, 0], rtol=1e-5, atol=1e-6), name


def test_stepping_past_the_built_depth_is_a_value_error():
    m = tokdyn.models.transformer(d=4, heads=1, tokens=3, depth=5, tying="untied")
    with pytest.raises(ValueError, match="depth"):
        m.step(m.x0, 6)


def test_another_interpreter_is_told_what_to_do():
    """Issue 38: `import tokdyn` from an interpreter this build cannot serve names the problem and
    what to do, instead of NumPy's "No module named 'numpy'" from inside the package."""
    p = tokdyn._interpreter_problem
    core = ["_core.cpython-311-x86_64-linux-gnu.so"]
    assert p(core, ".cpython-311-x86_64-linux-gnu.so", "/usr/bin/python3", "3.11.2", None) is None
    other = p(core, ".cpython-312-x86_64-linux-gnu.so", "/opt/py/bin/python3", "3.12.1", None)
    assert other.startswith("tokdyn: this build is for another Python (.cpython-311-x86_64-linux-gnu.so)")
    assert "/opt/py/bin/python3 3.12.1" in other and "/usr/bin/python3" in other and "docs/python.md" in other
    no_numpy = p(core, ".cpython-311-x86_64-linux-gnu.so", "/venv/bin/python", "3.11.7", "No module named 'numpy'")
    assert "cannot import NumPy (No module named 'numpy')" in no_numpy and "python3-numpy" in no_numpy
    assert "\n" not in other + no_numpy
    # A real other interpreter on PATH without NumPy (this machine has one): the same message, one line.
    for exe in sorted(set(shutil.which(n) or "" for n in ("python3", "python")) - {"", "/usr/bin/python3"}):
        if os.path.realpath(exe) == os.path.realpath("/usr/bin/python3"):
            continue
        works = subprocess.run([exe, "-c", "import sys"], capture_output=True).returncode == 0
        has_numpy = subprocess.run([exe, "-c", "import numpy"], capture_output=True).returncode == 0
        if not works or has_numpy:
            continue
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(tokdyn.__file__)))
        r = subprocess.run([exe, "-c", "import tokdyn"], capture_output=True, text=True, env=env)
        assert r.returncode != 0
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("ImportError: tokdyn: this ") and ("cannot import NumPy" in last or "another Python" in last), last
