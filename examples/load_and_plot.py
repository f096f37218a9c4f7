#!/usr/bin/python3
"""Run a preset from Python (or load a results folder) and plot one of its tables.

    PYTHONPATH=build/python /usr/bin/python3 examples/load_and_plot.py [RESULTS_DIR] [--out fig.png]

Without RESULTS_DIR it runs rope-flow (8 tokens on S^3, 4 runs) in-process. The figure shows lambda1
(the consensus order parameter) of every run against time, and the smallest pairwise inner product c.
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import tokdyn  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("results", nargs="?")
ap.add_argument("--out", default="rope_flow_lambda1.png")
a = ap.parse_args()

r = tokdyn.load(a.results) if a.results else tokdyn.run("rope-flow", n=8, runs=4, t_end=10.0, beta=1.0)
print(r)
print(r.summaries.to_string(index=False))
runs = r.metrics_runs  # one row per (variant, layer/time, run)
geo = r.geometry
fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
for run, g in runs.groupby("run"):
    ax[0].plot(g["t"], g["lambda1"], lw=1, label=f"run {run}")
for run, g in geo.groupby("run"):
    ax[1].plot(g["t"], g["min_inner_c"], lw=1)
ax[0].set(xlabel="t", ylabel=r"$\bar\lambda_1$", title=r"consensus order $\bar\lambda_1$")
ax[1].set(xlabel="t", ylabel="c = min <x_i, x_j>", title="smallest pairwise inner product")
ax[0].legend(fontsize=7)
fig.tight_layout()
fig.savefig(a.out, dpi=120)
print("wrote", a.out)
