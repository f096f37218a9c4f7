#!/usr/bin/python3
"""Benchmark of the Python package (issue 19), in one run, on an otherwise idle machine:

1. The call overhead of `Model.hidden_states` against the CLI on the same work: a freshly initialised
   Mamba-2 130m, one sequence of TOKENS token ids, DEPTH layers cycled, every state kept. The CLI runs
   `mamba2-fig1 --set variants=gate --set taps=all` (the same fp32 states, plus its cheap metrics);
   Python builds the same model and calls hidden_states. Both include building the model.
2. `tokdyn.depth_spectrum` with PyTorch callbacks (step; jvp through torch.func.jvp under vmap) against
   a straightforward PyTorch implementation (autograd Jacobian of every layer + torch.linalg.qr) on the
   same Pre-LN stack, the same start state and frame; the exponents must agree.

    PYTHONPATH=build/python /usr/bin/python3 scripts/bench_python.py [--out bench/results-python.md]
"""
import argparse
import os
import platform
import subprocess
import tempfile
import time

import numpy as np
import torch

import tokdyn

ap = argparse.ArgumentParser()
ap.add_argument("--out", default="bench/results-python.md")
ap.add_argument("--tokdyn", default="build/tokdyn")
ap.add_argument("--tokens", type=int, default=64)
ap.add_argument("--depth", type=int, default=48)
ap.add_argument("--reps", type=int, default=2)
ap.add_argument("--T", type=int, default=16)
ap.add_argument("--d", type=int, default=32)
ap.add_argument("--L", type=int, default=60)
ap.add_argument("--k", type=int, default=16)
a = ap.parse_args()
threads = os.cpu_count() or 1
torch.set_num_threads(threads)
torch.set_default_dtype(torch.float64)


def best(f, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = f()
        ts.append(time.perf_counter() - t0)
    return min(ts), ts, out


# ---- 1. hidden_states vs the CLI ----
ids = np.random.default_rng(0).integers(0, 50277, size=(1, a.tokens)).astype(np.int64)
work = tempfile.mkdtemp(prefix="tokdyn-bench-py-")
np.save(os.path.join(work, "ids.npy"), ids)


def cli_run():
    out = os.path.join(work, f"cli{time.monotonic_ns()}")
    r = subprocess.run([a.tokdyn, "run", "mamba2-fig1", "--out", out, "--no-figures", "--quiet", "--threads", str(threads),
                        "--set", "size=130m", "--set", "runs=1", "--set", f"tokens={a.tokens}", "--set", f"depth={a.depth}",
                        "--set", f"token_ids={os.path.join(work, 'ids.npy')}", "--set", "variants=gate", "--set", "taps=all"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def py_run():
    m = tokdyn.models.mamba2(size="130m", token_ids=ids[0])
    return m.hidden_states(depth=a.depth, taps="all")


t_cli, ts_cli, cli_out = best(cli_run, a.reps)
t_py, ts_py, H = best(py_run, a.reps)
taps = tokdyn.load(cli_out).taps("gate")
same = np.array_equal(taps.array.astype(np.float64), H)

# ---- 2. depth_spectrum with PyTorch callbacks vs straightforward PyTorch ----
# The stack and the reference loop are the example's (examples/spectrum_of_a_torch_model.py).
import importlib.util  # noqa: E402

spec = importlib.util.spec_from_file_location("torch_example", os.path.join(os.path.dirname(__file__), "..", "examples",
                                                                             "spectrum_of_a_torch_model.py"))
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)
T, d, L, k = a.T, a.d, a.L, a.k
block, step, jvp, X0, V0 = ex.make_stack(T, d, 2 * d, k)


def tokdyn_spectrum():
    return tokdyn.depth_spectrum(step, jvp, X0, depth=L, k=k, V0=V0)["mu"]


def torch_spectrum():
    return ex.torch_spectrum(block, X0, V0, L)


t_tk, ts_tk, mu_tk = best(tokdyn_spectrum, a.reps)
t_pt, ts_pt, mu_pt = best(torch_spectrum, a.reps)
err = float(np.max(np.abs(mu_tk - mu_pt)))

cpu = "unknown"
try:
    with open("/proc/cpuinfo") as f:
        cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
except (OSError, StopIteration):
    pass
rows = [
    ("hidden_states: CLI `mamba2-fig1 ... taps=all` (best of {})".format(a.reps), f"{t_cli:.2f} s", ", ".join(f"{t:.2f}" for t in ts_cli)),
    ("hidden_states: `tokdyn.models.mamba2(...).hidden_states` (best of {})".format(a.reps), f"{t_py:.2f} s", ", ".join(f"{t:.2f}" for t in ts_py)),
    ("Python / CLI", f"{t_py / t_cli:.3f}", "target <= 1.05"),
    ("same fp32 states (Python vs the CLI's taps)", "yes" if same else "NO", ""),
    (f"depth_spectrum, PyTorch callbacks (T={T}, d={d}, L={L}, k={k})", f"{t_tk:.2f} s", ", ".join(f"{t:.2f}" for t in ts_tk)),
    ("straightforward PyTorch: autograd Jacobian + torch.linalg.qr per layer", f"{t_pt:.2f} s", ", ".join(f"{t:.2f}" for t in ts_pt)),
    ("PyTorch / tokdyn callbacks", f"{t_pt / t_tk:.1f}x", ""),
    ("max |mu_tokdyn - mu_torch| (same start state and frame)", f"{err:.2e}", ""),
]
text = ["# Benchmark: the Python package", "",
        f"Written by `scripts/bench_python.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {cpu}, "
        f"{threads} threads (tokdyn and torch.set_num_threads); PyTorch {torch.__version__}, NumPy {np.__version__}, "
        f"Python {platform.python_version()}. Workload 1: Mamba-2 130m (fresh initialisation), 1 sequence of {a.tokens} "
        f"token ids, {a.depth} layers cycled, every state kept; both sides build the model. Workload 2: a Pre-LN "
        f"attention + tanh-MLP block (written in the script) on {T} tokens of dimension {d}, {L} layers, {k} tangents.",
        "", "| | value | all runs |", "| --- | ---: | --- |"]
text += [f"| {r[0]} | {r[1]} | {r[2]} |" for r in rows]
with open(a.out, "w") as f:
    f.write("\n".join(text) + "\n")
print("\n".join(text))
