"""The Python habits (issue 38 §5): Ctrl-C in a long in-process call, the temporary folder of run()
without out=, the depth spectrum's result (order, scales, manifest, save) and Gram metrics of hidden
states. The interrupt tests run the call in a subprocess and send SIGINT once a state shows that the
call is under way (its lock file and temporary folder exist; its frame is inside the core)."""
import gc
import json
import os
import signal
import subprocess
import tempfile
import textwrap
import threading
import time
import tracemalloc

import numpy as np
import pytest

import tokdyn

PY = "/usr/bin/python3"
# A depth-spectra run of about a minute on 2 cores (a few microseconds per layer): far longer than
# the few seconds an interrupted one may take.
LONG = dict(model="rope", depth=5_000_000, k=1, tokens=4, d=4, burn_in=0)


def start(tmp_path, code, *args, env=None):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    e = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(tokdyn.__file__)), **(env or {}))
    return subprocess.Popen([PY, str(script), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=e)


def wait_for(proc, what, seen, limit=60.0):
    """Polls until seen() (a state of the run), or fails when the process ended or `limit` passed."""
    t0 = time.monotonic()
    while not seen():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the process ended (exit {proc.returncode}) before {what}:\n{out}\n{err}")
        if time.monotonic() - t0 > limit:
            proc.kill()
            pytest.fail(f"no {what} within {limit} s")
        time.sleep(0.005)


def interrupt(proc, within=5.0):
    """SIGINT, then the process must end within `within` seconds with KeyboardInterrupt (its
    uncaught traceback's last line), not a tokdyn error. Returns (stdout, seconds)."""
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"still running {within} s after SIGINT:\n{out}\n{err}")
    dt = time.monotonic() - t0
    assert proc.returncode != 0, out + err
    assert err.strip().splitlines()[-1] == "KeyboardInterrupt", err
    return out, dt


# ---- Ctrl-C ------------------------------------------------------------------------------------


def test_ctrl_c_stops_a_run_into_a_folder_and_leaves_nothing(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    out = work / "new" / "r"  # its parent "new" is created by the run, and removed again
    p = start(tmp_path, f"""
        import sys, tokdyn
        tokdyn.run("depth-spectra", sys.argv[1], threads=2, **{LONG!r})
        print("finished")
        """, out)
    lock, tmp = work / "new" / ".r.tokdyn-lock", work / "new" / f"r.tmp-{p.pid}"
    wait_for(p, "the run's lock file and temporary folder", lambda: lock.exists() and tmp.is_dir())
    stdout, dt = interrupt(p)
    assert "finished" not in stdout
    assert list(work.iterdir()) == [], f"left behind after {dt:.2f} s: {list(work.rglob('*'))}"


def test_ctrl_c_stops_a_run_without_out_and_removes_its_temporary_folder(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = start(tmp_path, f"""
        import tokdyn
        tokdyn.run("depth-spectra", **{LONG!r})
        """, env={"TMPDIR": str(tmp)})
    wait_for(p, "the run's temporary folder", lambda: any(tmp.glob(f"tokdyn-depth-spectra-*/result.tmp-{p.pid}")))
    interrupt(p)
    assert list(tmp.iterdir()) == [], list(tmp.rglob("*"))


# The computation is under way once the main thread's innermost Python frame is the package's
# function that called into the core (the core's functions have no Python frame) and a second
# thread runs Python meanwhile (the core released the GIL).
INSIDE = """
    import os, signal, sys, threading, time, numpy as np, tokdyn
    main = threading.main_thread().ident
    def interrupt_inside(name):
        def watch():
            while sys._current_frames()[main].f_code.co_name != name:
                time.sleep(0.002)
            print("inside", name, flush=True)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=watch, daemon=True).start()
"""


@pytest.mark.parametrize("call", ["depth_spectrum", "trajectory"])
def test_ctrl_c_stops_a_long_call_into_the_core(tmp_path, call):
    body = {
        "depth_spectrum": "tokdyn.depth_spectrum(tokdyn.models.rope(d=4, tokens=4), depth=5_000_000, k=1)",
        "trajectory": "tokdyn.models.rope(d=4, tokens=4).trajectory(depth=10_000_000, taps='0')",
    }[call]
    p = start(tmp_path, INSIDE + f"""
    interrupt_inside({call!r})
    t0 = time.monotonic()
    {body}
    print("finished after", time.monotonic() - t0)
    """)
    out, _ = interrupt_when_printed(p, f"inside {call}")
    assert "finished" not in out


def interrupt_when_printed(p, line):
    """Waits for the child's own SIGINT (sent once it printed `line`) to end it with KeyboardInterrupt."""
    guard = threading.Timer(120, p.kill)  # a child that never prints: killed, and the test fails below
    guard.start()
    try:
        first = p.stdout.readline()
    finally:
        guard.cancel()
    assert first.strip() == line, first + p.communicate()[1]
    t0 = time.monotonic()
    try:
        out, err = p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("still running 5 s after SIGINT: the core ignored it")
    assert err.strip().splitlines()[-1] == "KeyboardInterrupt", err
    return out, time.monotonic() - t0


def test_ctrl_c_between_python_callbacks(tmp_path):
    # The step callback raises the signal at layer 100; Python's handler then raises inside the
    # callbacks or the core's next check, and the call ends with KeyboardInterrupt at once.
    p = start(tmp_path, """
        import os, signal, numpy as np, tokdyn
        def step(X, l):
            if l == 100:
                print("inside depth_spectrum", flush=True)
                os.kill(os.getpid(), signal.SIGINT)
            return X
        tokdyn.depth_spectrum(step, lambda X, V, l: V, np.ones((2, 2)), depth=5_000_000, k=1)
        print("finished")
        """)
    out, _ = interrupt_when_printed(p, "inside depth_spectrum")
    assert "finished" not in out


def test_a_handler_that_does_not_raise_lets_the_run_finish(tmp_path):
    # SIGINT with a handler of the user's that only counts: the run goes on and publishes its result.
    p = start(tmp_path, """
        import os, signal, sys, threading, time, tokdyn
        seen = []
        signal.signal(signal.SIGINT, lambda s, f: seen.append(s))
        main = threading.main_thread().ident
        def watch():
            while sys._current_frames()[main].f_code.co_name != "run":
                time.sleep(0.002)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=watch, daemon=True).start()
        r = tokdyn.run("depth-spectra", sys.argv[1], model="rope", depth=200_000, k=1, tokens=4, d=4, burn_in=0)
        print("published", r.dir.is_dir(), "handled", len(seen))
        """, tmp_path / "r")
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert out.strip() == "published True handled 1", out + err


# ---- run() without out= ----------------------------------------------------------------------------


def test_run_without_out_removes_its_folder_with_the_result(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # mkdtemp's folder
    r = tokdyn.run("rope-flow", n=4, runs=1, t_end=0.5, outputs=5)
    folder = r.dir.parent
    assert folder.parent == tmp_path and (r.dir / "manifest.json").is_file() and r.temporary
    del r
    gc.collect()
    assert not folder.exists() and list(tmp_path.iterdir()) == []
    kept = tokdyn.run("rope-flow", n=4, runs=1, t_end=0.5, outputs=5)
    path = kept.keep()
    assert not kept.temporary
    del kept
    gc.collect()
    assert (path / "manifest.json").is_file()
    # With out=, the folder is the caller's: never removed.
    r = tokdyn.run("rope-flow", tmp_path / "mine", n=4, runs=1, t_end=0.5, outputs=5)
    assert not r.temporary
    del r
    gc.collect()
    assert (tmp_path / "mine" / "manifest.json").is_file()


def test_a_failed_run_without_out_leaves_no_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(tokdyn.InputError, match="beta"):
        tokdyn.run("rope-flow", beta=-1)  # refused by the parameter check
    with pytest.raises(tokdyn.InputError, match="does not apply"):
        tokdyn.run("rope-flow", taps="all")
    with pytest.raises(tokdyn.InputError, match="x0"):  # refused while running, its folder made
        tokdyn.run("depth-spectra", model="rope", tokens=4, d=4, depth=5, k=1, burn_in=0, x0=_wrong_x0(tmp_path / "in"))
    assert [p.name for p in tmp_path.iterdir()] == ["in"]


def _wrong_x0(d):
    d.mkdir()
    np.save(d / "x0.npy", np.ones((3, 5)))  # [tokens, d] = [4, 4] expected
    return d / "x0.npy"


# ---- the depth spectrum's result -------------------------------------------------------------------


def test_depth_spectrum_is_sorted_with_its_qr_columns_and_scales_named():
    # X -> X diag(s) with the coordinate frame: QR order log s tiled over the rows (2, 0.5, 1, 2, 0.5, 1).
    s_col = np.array([2.0, 0.5, 1.0])
    V0 = np.eye(6).reshape(6, 2, 3)
    r = tokdyn.depth_spectrum(lambda X, l: X * s_col, lambda X, V, l: V * s_col, np.ones((2, 3)), depth=30, k=6, V0=V0)
    assert isinstance(r, tokdyn.DepthSpectrum)
    np.testing.assert_allclose(r.exponents_log, np.log([2, 2, 1, 1, 0.5, 0.5]), atol=1e-14)
    assert list(r.qr_column) == [0, 3, 2, 5, 1, 4]  # descending; equal exponents keep the QR order
    np.testing.assert_allclose(r.exponents_growth, [2, 2, 1, 1, 0.5, 0.5], rtol=1e-14)
    np.testing.assert_allclose(r.bohl_growth, np.repeat([[2.0], [2], [1], [1], [0.5], [0.5]], 2, axis=1), rtol=1e-14)
    np.testing.assert_allclose(r.dichotomy_growth, [[0.5, 0.5], [1, 1], [2, 2]], rtol=1e-14)  # ascending
    assert r.hyperbolic != "yes" and r.margin_log <= 0  # 1 is in the spectrum
    assert r.running_log.shape == r.per_layer_log.shape == (30, 6) and list(r.unresolved_from_layer) == [-1] * 6
    np.testing.assert_allclose(r.per_layer_log, np.tile(r.exponents_log, (30, 1)), atol=1e-14)
    # The dict's keys from before the class: the old values, in QR order.
    np.testing.assert_allclose(r["mu"], np.tile(np.log(s_col), 2), atol=1e-14)
    np.testing.assert_array_equal(r["mu"][r.qr_column], r.exponents_log)
    np.testing.assert_array_equal(np.asarray(r["mu_running"])[:, r.qr_column], r.running_log)
    assert r["dichotomy_spectrum"] and "bohl_intervals" in r and "mu" not in r.keys()
    for name in r.keys():
        assert r[name] is getattr(r, name)
    with pytest.raises(KeyError, match="exponents_log"):
        r["nope"]


def test_depth_spectrum_of_a_model_sorts_the_clis_exponents(tmp_path):
    knobs = dict(d=4, tokens=5, beta=2.0, h=0.2, seed=3)
    c = subprocess.run([os.environ.get("TOKDYN_BIN", "tokdyn"), "run", "depth-spectra", "--out", str(tmp_path / "d"), "--no-figures",
                        "--quiet", "--set", "model=rope", *sum([["--set", f"{k}={v}"] for k, v in knobs.items()], []),
                        "--set", "depth=60", "--set", "burn_in=6", "--set", "k=4"], capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
    import pandas as pd
    cli = pd.read_csv(tmp_path / "d" / "lyapunov.csv", float_precision="round_trip")
    r = tokdyn.depth_spectrum(tokdyn.models.rope(**knobs), depth=60, k=4, burn_in=6)
    np.testing.assert_array_equal(r.exponents_log, cli["mu"].to_numpy()[r.qr_column])  # the same bits, sorted
    np.testing.assert_array_equal(r.exponents_growth, cli["gamma"].to_numpy()[r.qr_column])
    assert np.all(np.diff(r.exponents_log) <= 0) and sorted(r.qr_column) == [0, 1, 2, 3]
    m = r.manifest
    assert m["analysis"] == "depth_spectrum" and m["version"] == tokdyn.__version__ and m["seed"] == 0
    assert m["params"] == {"depth": 60, "k": 4, "burn_in": 6, "seed": 0, "H": 13, "V0": "Gaussian (stream seed 0)",
                           "X0": "the model's start state"}
    assert m["model"]["name"] == "rope" and m["model"]["knobs"]["beta"] == "2" and m["model"]["on_sphere"] is True
    assert 0 <= m["wall_time_s"] < 60 and time.strptime(m["started_utc"], "%Y-%m-%dT%H:%M:%SZ")
    json.dumps(m)  # plain JSON
    cb = tokdyn.depth_spectrum(np.maximum, lambda X, V, l: V, np.ones((1, 2)), depth=3, k=1).manifest["model"]
    assert cb == {"step": "maximum", "jvp": f"{__name__}.test_depth_spectrum_of_a_model_sorts_the_clis_exponents.<locals>.<lambda>",
                  "on_sphere": False}


def test_depth_spectrum_save_writes_a_results_folder(tmp_path):
    r = tokdyn.depth_spectrum(tokdyn.models.rope(d=4, tokens=4, h=0.3), depth=40, k=3, burn_in=4)
    out = r.save(tmp_path / "a" / "s")
    assert out == tmp_path / "a" / "s"
    assert sorted(p.name for p in out.iterdir()) == ["dichotomy.csv", "exponents.csv", "final_state.npy", "manifest.json",
                                                     "running.csv"]
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["s"]  # no temporary folder beside it
    back = tokdyn.load(out)
    e = back.exponents
    assert list(e.columns) == ["rank", "qr_column", "exponent_log", "exponent_growth", "bohl_lower_growth", "bohl_upper_growth",
                               "resolved", "unresolved_from_layer"]
    np.testing.assert_array_equal(e["exponent_log"].to_numpy(), r.exponents_log)  # round-trip exact
    np.testing.assert_array_equal(e["exponent_growth"].to_numpy(), r.exponents_growth)
    np.testing.assert_array_equal(e[["bohl_lower_growth", "bohl_upper_growth"]].to_numpy(), r.bohl_growth)
    np.testing.assert_array_equal(e["qr_column"].to_numpy(), r.qr_column)
    run = back.running
    assert len(run) == 36 * 3 and run["layer"].iloc[0] == 5 and run["layer"].iloc[-1] == 40
    np.testing.assert_array_equal(run["running_log"].to_numpy().reshape(36, 3), r.running_log)
    np.testing.assert_array_equal(run["per_layer_log"].to_numpy().reshape(36, 3), r.per_layer_log)
    np.testing.assert_array_equal(back.dichotomy[["lower_growth", "upper_growth"]].to_numpy(), r.dichotomy_growth)
    np.testing.assert_array_equal(back.array("final_state"), r.final_state)
    assert back.manifest["files"] == ["dichotomy.csv", "exponents.csv", "final_state.npy", "running.csv"]
    assert back.manifest["params"] == r.manifest["params"] and back.manifest["hyperbolic"] == r.hyperbolic
    # The folder rules: a previous result only with overwrite=True; a user's folder never.
    with pytest.raises(tokdyn.InputError, match="previous tokdyn result; pass overwrite=True"):
        r.save(out)
    r2 = tokdyn.depth_spectrum(tokdyn.models.rope(d=4, tokens=4, h=0.3), depth=20, k=2)
    r2.save(out, overwrite=True)
    assert tokdyn.load(out).manifest["params"]["depth"] == 20 and len(tokdyn.load(out).exponents) == 2
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("mine")
    with pytest.raises(tokdyn.InputError, match="holds 'thesis.tex'; tokdyn only replaces its own results"):
        r.save(mine, overwrite=True)
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    (out / "extra.txt").write_text("not listed")  # no longer exactly a result
    with pytest.raises(tokdyn.InputError, match="holds"):
        r.save(out, overwrite=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (r.save(empty) / "manifest.json").is_file()


def test_a_failed_save_leaves_nothing_and_the_previous_result_intact(tmp_path, monkeypatch):
    r = tokdyn.depth_spectrum(tokdyn.models.rope(d=4, tokens=4), depth=20, k=2)
    out = r.save(tmp_path / "s")
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def fail(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(np, "save", fail)
    with pytest.raises(OSError, match="No space"):
        r.save(out, overwrite=True)
    with pytest.raises(OSError, match="No space"):
        r.save(tmp_path / "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


# ---- Gram metrics of hidden states ---------------------------------------------------------------


def test_gram_metrics_of_hidden_states_per_tap_and_run():
    m = tokdyn.models.transformer(d=6, heads=2, tokens=5, seed=4)
    ids_states = np.stack([m.x0, m.x0[::-1].copy(), np.roll(m.x0, 1, axis=1)])  # three runs
    H = m.hidden_states(X0=ids_states, depth=6, taps=[0, 2, 4, 6])
    assert H.shape == (4, 3, 5, 6)  # [taps, runs, tokens, d]
    g = tokdyn.gram_metrics(H)
    assert set(g) == {"lambda1", "participation", "min_cosine", "consensus_dist_axes", "consensus_dist_diagonal"}
    for name, v in g.items():
        assert v.shape == (4, 3), name
        for t in range(4):
            np.testing.assert_array_equal(v[t], tokdyn.gram_metrics(H[t])[name])  # the same bits as tap by tap
            for run in range(3):
                assert v[t, run] == tokdyn.gram_metrics(H[t, run])[name][0]
    assert not np.array_equal(g["lambda1"][0], g["lambda1"][3])  # the taps differ
    # Any leading axes; a [tokens, d] alone stays shape (1,); too few axes is bad input.
    five = tokdyn.gram_metrics(H[None])
    assert five["lambda1"].shape == (1, 4, 3)
    np.testing.assert_array_equal(five["lambda1"][0], g["lambda1"])
    assert tokdyn.gram_metrics(H[0, 0])["lambda1"].shape == (1,)
    assert tokdyn.gram_metrics(np.zeros((0, 2, 5, 6)))["participation"].shape == (0, 2)
    with pytest.raises(tokdyn.InputError, match=r"expected \[\.\.\., tokens, d\]"):
        tokdyn.gram_metrics(np.ones(5))


def test_gram_metrics_of_a_4d_array_is_not_copied():
    X = np.random.default_rng(3).standard_normal((20, 10, 50, 256))  # 20 MB
    tracemalloc.start()
    tokdyn.gram_metrics(X)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < X.nbytes / 10, f"peak {peak} bytes: the input was copied"
