"""bench_all's workloads, their sizes per mode and the issue's baselines."""
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent.parent  # the repository (this file: scripts/bench_all_lib/config.py)
PY = "/usr/bin/python3"  # Debian's, with numpy / scipy / torch (not whatever python3 is first on PATH)
THREADS = 2              # tokdyn_bench's peaks exist for 1 and 2 threads; this machine has 2 cores

WORKLOADS = ["mamba2-fig1", "ssm-random-silu", "cocycle-spectra", "rope-table2", "green", "continuation",
             "depth-spectra", "gpt2-depth", "sweep"]
ALIASES = {"mamba2": "mamba2-fig1", "ssm": "ssm-random-silu", "cocycle": "cocycle-spectra", "rope": "rope-table2",
           "coupling-green": "green", "bvp": "green", "coupling-margin": "continuation",
           "rho-continuation": "continuation", "depth": "depth-spectra", "gpt2": "gpt2-depth"}

# The numbers (issue 21), quoted in the "issue 21 baseline" column; nothing else is hard-coded.
BASELINE = {
    "mamba2-fig1": "83 % of SGEMM peak, 4x PyTorch",
    "ssm-random-silu": "40 % of DGEMM peak (diagnostics 15 %)",
    "cocycle-256": "d = 256, L = 500: QR loop 3.1 s vs NumPy 2.7 s (NumPy 1.1x faster)",
    "cocycle-512": "(no number in the issue)",
    "cocycle-default": "whole default run 29 s",
    "rope-table2": "one core of two",
    "rope-fits": "SciPy / tokdyn = 0.87x",
    "green": "15 % of DGEMM peak, one core",
    "continuation": "10 % of DGEMM peak, one core",
    "depth-spectra": "55 % of DGEMM peak",
    "gpt2-depth": "issue 35 target: >= 70 % of SGEMM peak, >= 1.5x PyTorch",
    "gpt2-tangent": "issue 35 target: >= 50 % of DGEMM peak",
    "sweep": "(no number in the issue)",
}

# Sizes per mode. "scale": (parameter, sizes) of the growth fit; a size equal to the main run's is
# taken from the main run.
SIZES = {
    "full": {
        "reps": 2, "peer_reps": 1, "peak_reps": 3, "peak_min_time": "2", "idle_window": 3.0, "idle_wait": 300.0,
        "idle_budget": 900.0,
        "mamba2-fig1": dict(runs=50, tokens=50, depth=200, np_depth=20, th_depth=20, scale=[50, 100, 200]),
        "ssm-random-silu": dict(runs=50, depth=200, n=768, m=128, np_depth=20, scale=[192, 384, 768]),
        "cocycle-spectra": dict(main=[(256, 500), (512, 500)], default=(256, 500), scale_L=500, scale=[128, 256, 512]),
        "rope-table2": dict(scale=[128, 256, 512], flow=dict(d=64, runs=2, t_end=2, h=0.01, outputs=20)),
        "green": dict(d=64, L=1000, scale=[32, 64, 128]),
        "continuation": dict(d=64, L=500, steps=200, ds=0.002, scale=[125, 250, 500]),
        "depth-spectra": dict(k=16, tokens=50, depth=200, burn_in=20, scale=[4, 8, 16]),
        "gpt2-depth": dict(runs=50, tokens=64, depth=96, k=8, tangent_depth=36, scale=[24, 48, 96]),
        "sweep": dict(run=True),
    },
    "quick": {
        "reps": 1, "peer_reps": 1, "peak_reps": 1, "peak_min_time": "0.5", "idle_window": 1.0, "idle_wait": 10.0,
        "idle_budget": 60.0,
        "mamba2-fig1": dict(runs=50, tokens=50, depth=10, np_depth=4, th_depth=10, scale=[5, 10, 20]),
        "ssm-random-silu": dict(runs=50, depth=10, n=768, m=128, np_depth=4, scale=[192, 384, 768]),
        "cocycle-spectra": dict(main=[(256, 100), (512, 100)], default=(256, 500), scale_L=100, scale=[128, 256, 512]),
        "rope-table2": dict(scale=[64, 128, 256], flow=dict(d=64, runs=2, t_end=2, h=0.01, outputs=20)),
        "green": dict(d=64, L=1000, scale=[32, 64, 128]),
        "continuation": dict(d=64, L=100, steps=20, ds=0.002, scale=[50, 100, 200]),
        "depth-spectra": dict(k=16, tokens=50, depth=10, burn_in=2, scale=[4, 8, 16]),
        "gpt2-depth": dict(runs=50, tokens=64, depth=12, k=8, tangent_depth=12, scale=[6, 12]),
        "sweep": dict(run=False),
    },
}


GENERIC_CORES = ("Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai", "Coppermine", "Northwood", "Banias")
