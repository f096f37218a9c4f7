#!/usr/bin/python3
"""Benchmark of `tokdyn sweep` (not a timed test): a 64-point rope-flow beta x n sweep run serially,
with --jobs 2 and under `mpirun -np 2`, for tiny points (milliseconds) and for points of >= 1 s;
the overhead per point against the points' own compute, and the simulated many-rank run of
docs/scaling.md (many ranks on one machine, tiny points: rank 0's hand-out rate and the
collection time). Writes bench/results-sweep.md.

    scripts/bench_sweep.py --tokdyn build/tokdyn [--quick] [--out bench/results-sweep.md]

Overhead per point = (slots x sweep wall time - sum of the points' own run times) / points, where
slots is the number of points run at once (1, 2, 2) and a point's own time is its manifest's
wall_time_s (the preset's computation). It includes starting the point's process, checking its
parameters and resources, writing its manifest and publishing its folder, the sweep's bookkeeping
and idle slots at the end."""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run_sweep(cmd, out, env=None):
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"bench_sweep: {' '.join(map(str, cmd))} failed ({r.returncode}): {r.stderr[-500:]}")
    m = json.load(open(Path(out) / "manifest.json"))
    own = [p["seconds"] for p in m["points"]]
    return wall, own, (Path(out) / "sweep.csv").read_bytes(), m.get("mpi", {})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokdyn", default=str(HERE / "build" / "tokdyn"))
    ap.add_argument("--out", default=str(HERE / "bench" / "results-sweep.md"))
    ap.add_argument("--quick", action="store_true", help="tiny points only, and a smaller simulated run")
    a = ap.parse_args()
    tok = a.tokdyn
    mpirun = shutil.which("mpirun")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    work = Path(tempfile.mkdtemp(prefix="tokdyn-bench-sweep-"))
    cores = os.cpu_count() or 1
    grid = ["--grid", "beta=logspace(-1,1,8)"]
    sizes = {
        "tiny": grid + ["--grid", "n=4:32:4", "--set", "d=4", "--set", "t_end=0.5", "--set", "outputs=5", "--set", "runs=2"],
        ">= 1 s": grid + ["--grid", "n=56:112:8", "--set", "d=8", "--set", "t_end=50", "--set", "outputs=20", "--set", "runs=2"],
    }
    if a.quick:
        sizes.pop(">= 1 s")
    rows = []
    for size, args in sizes.items():
        ref = None
        for mode, prefix, extra, slots in [("serial", [], [], 1), ("--jobs 2", [], ["--jobs", "2"], 2),
                                           ("mpirun -np 2", [mpirun, "-np", "2"] if mpirun else None, [], 2)]:
            if prefix is None:
                rows.append((size, mode, None))
                continue
            out = work / f"{size.replace(' ', '').replace('>=', 'ge')}-{mode.replace(' ', '')}"
            wall, own, csv, mpi = run_sweep([*prefix, tok, "sweep", "rope-flow", *args, "--out", str(out), "-q", *extra], out, env)
            same = ref is None or csv == ref
            ref = ref or csv
            n = len(own)
            overhead = (slots * wall - sum(own)) / n
            init = mpi.get("init_seconds", 0.0)
            overhead_run = (slots * (wall - init) - sum(own)) / n  # without MPI's start-up
            rows.append((size, mode, dict(points=n, wall=wall, own=sum(own), mean_own=sum(own) / n, overhead=overhead,
                                          overhead_run=overhead_run, init=init, ratio=overhead / (sum(own) / n), same=same)))
            print(f"{size:7s} {mode:13s} {n} points  wall {wall:7.2f} s  own {sum(own):7.2f} s  overhead/point {overhead * 1e3:7.2f} ms"
                  f" ({overhead_run * 1e3:.2f} ms without MPI_Init {init:.2f} s)"
                  f"  ({100 * overhead / (sum(own) / n):.1f} % of a point)  same sweep.csv: {same}", flush=True)

    # The simulated cluster (docs/scaling.md): many ranks on this machine, tiny points.
    sim = []
    if mpirun:
        npts = 512 if a.quick else 2000
        for ranks in ([4, 8] if a.quick else [2, 4, 8, 16]):
            out = work / f"sim{ranks}"
            cmd = [mpirun, "--oversubscribe", "-np", str(ranks), tok, "sweep", "rope-flow", "--grid", f"seed=0:{npts - 1}", "--set", "n=2",
                   "--set", "d=2", "--set", "t_end=0.01", "--set", "outputs=1", "--set", "runs=1", "--threads", "1", "--out", str(out), "-q"]
            wall, own, _, mpi = run_sweep(cmd, out, env)
            per_request = mpi["dispatch_seconds"] / max(1, mpi["requests"])
            sim.append(dict(ranks=ranks, points=npts, wall=wall, rate=npts / wall, own=sum(own), requests=mpi["requests"],
                            per_request=per_request, init=mpi["init_seconds"]))
            print(f"simulated: {ranks:3d} ranks, {npts} tiny points: {wall:6.2f} s, {npts / wall:7.1f} points/s; rank 0 answered "
                  f"{mpi['requests']} requests, {per_request * 1e6:.1f} us each; MPI_Init {mpi['init_seconds']:.2f} s", flush=True)
        # Collecting: sweep.csv of the largest simulated sweep, again.
        t0 = time.perf_counter()
        subprocess.run([tok, "sweep", "--collect", str(work / f"sim{sim[-1]['ranks']}")], check=True, capture_output=True)
        collect_s = time.perf_counter() - t0
        print(f"collect of {npts} points: {collect_s:.3f} s", flush=True)
    shutil.rmtree(work, ignore_errors=True)

    lines = ["# `tokdyn sweep`: overhead per point and the simulated cluster", "",
             f"Measured by `scripts/bench_sweep.py` on {time.strftime('%Y-%m-%d')}, CPU: {cpu_model()} ({cores} cores), "
             f"tokdyn {subprocess.run([tok, '--version'], capture_output=True, text=True).stdout.strip()}.", "",
             "A 64-point `rope-flow` sweep: β = logspace(-1, 1, 8) × 8 values of n. Overhead per point = (slots × sweep wall − Σ the "
             "points' own run times) / points (slots: points run at once); it covers the point's process start, its parameter and "
             "resource checks, its manifest and publication, the sweep's bookkeeping and idle slots at the end. Targets: < 20 ms "
             "for tiny points, < 5 % for points of ≥ 1 s.", "",
             "| points | mode | sweep wall | Σ points' own time | mean point | overhead per point (without MPI_Init) | overhead / point | sweep.csv = serial |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for size, mode, r in rows:
        if r is None:
            lines.append(f"| {size} | {mode} | (no mpirun) | | | | | |")
            continue
        extra = f" ({r['overhead_run'] * 1e3:.1f} ms; MPI_Init {r['init']:.2f} s)" if r["init"] else ""
        lines.append(f"| {size} | {mode} | {r['wall']:.2f} s | {r['own']:.2f} s | {r['mean_own'] * 1e3:.1f} ms | {r['overhead'] * 1e3:.1f} ms{extra} | "
                     f"{100 * r['ratio']:.1f} % | {'yes' if r['same'] else 'NO'} |")
    if sim:
        lines += ["", "## Simulated many-rank run (docs/scaling.md)", "",
                  f"`mpirun --oversubscribe -np R` on this {cores}-core machine, {sim[0]['points']} tiny points (≈ 1 ms of compute each): "
                  "the rate at which rank 0 hands out points and the ranks start them, an upper bound on the dispatch cost.", "",
                  "| ranks | points | wall | points / s | rank 0: requests answered | time per request | MPI_Init |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for s in sim:
            lines.append(f"| {s['ranks']} | {s['points']} | {s['wall']:.2f} s | {s['rate']:.0f} | {s['requests']} | "
                         f"{s['per_request'] * 1e6:.1f} µs | {s['init']:.2f} s |")
        lines += ["", f"`tokdyn sweep --collect` of those {sim[-1]['points']} points: {collect_s:.3f} s "
                  f"({1e3 * collect_s / sim[-1]['points']:.2f} ms per point)."]
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
