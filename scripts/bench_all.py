#!/usr/bin/python3
"""One benchmark run of every tokdyn workload against its Python peer (issue 21, item 6).

Run by scripts/bench_all.sh (which builds Release with the benchmarks first) with Debian's
/usr/bin/python3 (numpy; the peers also need scipy and torch). In one run it

  1. records the machine (CPU, cores, avx2 / avx512f, OpenBLAS config and core, date, commit,
     `tokdyn --version`);
  2. measures the OpenBLAS DGEMM and SGEMM peaks, 1 and 2 threads (build/tokdyn_bench: BM_Dgemm,
     BM_Sgemm);
  3. times every workload with tokdyn and its peer, each measurement started on an idle machine
     (as scripts/bench_lib.sh's wait_idle: < 10 % busy over a short window, or the wait's limit):
     wall time, GFLOP/s (the flop counts of the per-workload scripts), % of the relevant peak,
     peer time / tokdyn time, peak RSS (GNU time %M) and tokdyn's manifest notes.phase_seconds;
     with --before REF, each row's tokdyn command once more with the build of commit REF (built by
     bench_all.sh), the same OpenBLAS kernels, for a before/after column from the same run;
  4. times tokdyn at 2-3 sizes of each workload's main size parameter and fits the growth exponent;
  5. writes bench/results.md (bench/results-quick.md with --quick) and, in full mode, the generated
     table between <!-- bench_all:begin --> and <!-- bench_all:end --> under README.md's ## Speed.

Usage: bench_all.py [--quick] [--only NAME[,NAME...]] [--build DIR] [--out FILE] [--no-readme]
                    [--readme] [--idle-wait SECONDS] [--keep] [--openblas-coretype NAME] [--before REF]
Workload names (--only): mamba2-fig1, ssm-random-silu, cocycle-spectra, rope-table2, green, gpt2-depth,
continuation, depth-spectra, sweep.
Exit status: 0; 1 when a workload failed or a peer's results disagree with tokdyn's (the results
file is written all the same and says which); 2 for a bad option.
"""
import argparse
import csv
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent.parent
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


class BenchError(Exception):
    pass


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(f"bench_all: {message} (see --help)\n")
        sys.exit(2)


def parse_args(argv):
    ap = OneLineParser(prog="bench_all", description=__doc__.split("\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="Workloads: " + ", ".join(WORKLOADS))
    ap.add_argument("--quick", action="store_true", help="about 5 minutes: small sizes, one repetition, peers at reduced "
                                                         "depth (scaled), writes bench/results-quick.md, README untouched")
    ap.add_argument("--only", metavar="NAME[,NAME]", help="run only these workloads (the peaks are always measured)")
    ap.add_argument("--build", metavar="DIR", default=str(HERE / "build-bench"), help="build directory (tokdyn, tokdyn_bench)")
    ap.add_argument("--out", metavar="FILE", help="results file (default bench/results.md; bench/results-quick.md with --quick; "
                                                  "bench/results-subset.md with --only)")
    ap.add_argument("--no-readme", action="store_true", help="do not update README.md's generated Speed table")
    ap.add_argument("--readme", action="store_true", help="update README.md even with --quick or --only")
    ap.add_argument("--idle-wait", metavar="SECONDS", type=float,
                    help="longest wait for an idle machine before each measurement (default: $BENCH_IDLE_WAIT, "
                         "else 300 s, 10 s with --quick)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (raw outputs) under /tmp")
    ap.add_argument("--openblas-coretype", metavar="NAME",
                    help="export OPENBLAS_CORETYPE=NAME to every command (peaks, tokdyn, peers), e.g. when OpenBLAS "
                         "does not recognise the CPU and falls back to its generic Prescott kernels")
    ap.add_argument("--before", metavar="REF",
                    help="also time the same tokdyn commands with the build of git commit REF (bench_all.sh builds it in "
                         "BUILD-before), one run each, with the same OpenBLAS kernels: a before/after column from this run")
    ap.add_argument("--before-tokdyn", metavar="PATH", help=argparse.SUPPRESS)  # bench_all.sh: the REF build's tokdyn
    ap.add_argument("--check-args", action="store_true", help=argparse.SUPPRESS)  # used by bench_all.sh
    a = ap.parse_args(argv)
    if a.only is not None:
        names = []
        for n in a.only.split(","):
            n = ALIASES.get(n.strip(), n.strip())
            if n not in WORKLOADS:
                ap.error(f"--only: unknown workload '{n}' (known: {', '.join(WORKLOADS)})")
            names.append(n)
        a.only = names
    if a.readme and a.no_readme:
        ap.error("--readme and --no-readme exclude each other")
    if a.idle_wait is not None and (a.idle_wait < 0 or not math.isfinite(a.idle_wait)):
        ap.error("--idle-wait: expected seconds >= 0")
    return a


# ---------------------------------------------------------------------------------------------
# Measurement machinery (the idea of scripts/bench_lib.sh: wait_idle, measured)

CLK_TCK = os.sysconf("SC_CLK_TCK")


def jiffies():
    """(busy, total) jiffies of the whole machine, as bench_lib.sh's cpu_jiffies."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    return busy, busy + v[3] + v[4]


class Bench:
    def __init__(self, args, mode, work):
        self.a, self.mode, self.S = args, mode, SIZES[mode]
        self.work = work
        self.build = Path(args.build).resolve()
        self.tok = str(self.build / "tokdyn")
        self.tok_bench = str(self.build / "tokdyn_bench")
        env_wait = os.environ.get("BENCH_IDLE_WAIT")
        self.idle_limit = args.idle_wait if args.idle_wait is not None else (
            float(env_wait) if env_wait and mode == "full" else self.S["idle_wait"])
        self.waited_total = 0.0  # seconds spent waiting for an idle machine (at most S["idle_budget"] in all)
        self.load_log = []   # lines: what the machine did before / during every measurement
        self.other = {}      # label -> cores other processes used during that measurement
        self.n_meas = 0
        self.failures = []   # (workload, message)
        self.disagree = []   # (workload, message)
        self.ck = None
        self.blas_core = None  # tokdyn_bench's OpenBLAS kernels, from the peaks' context
        self.core_mismatch = []
        self.before_tok = args.before_tokdyn  # --before: the REF build's tokdyn

    def log(self, msg):
        print(f"bench_all: {msg}", file=sys.stderr, flush=True)

    def wait_idle(self):
        """Waits (at most idle_limit s, and at most idle_budget s over the whole run, so that a machine
        that stays busy does not multiply the run's time) until the machine is < 10 % busy over the
        sampling window."""
        limit = min(self.idle_limit, max(0.0, self.S["idle_budget"] - self.waited_total))
        t0 = time.monotonic()
        while True:
            b1, t1 = jiffies()
            time.sleep(self.S["idle_window"])
            b2, t2 = jiffies()
            busy = 100.0 * (b2 - b1) / max(t2 - t1, 1)
            waited = time.monotonic() - t0
            if busy < 10.0 or waited >= limit:
                self.waited_total += max(0.0, waited - self.S["idle_window"])  # the first sample is not waiting
                return busy, waited

    def measured(self, label, cmd, env=None):
        """Runs cmd under GNU time after waiting for an idle machine. Returns elapsed (s, wall clock of
        this process), rss_kb, cpu (user + sys, s), other (cores other processes used meanwhile),
        stdout. Raises BenchError when the command fails."""
        busy, waited = self.wait_idle()
        self.n_meas += 1
        tf = self.work / f"gnutime-{self.n_meas}.txt"
        self.log(f"{label}: {' '.join(self.show(c) for c in cmd)}")
        b1, _ = jiffies()
        t0 = time.perf_counter()
        r = subprocess.run(["/usr/bin/time", "-f", "%e %M %U %S", "-o", str(tf), *map(str, cmd)],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        el = time.perf_counter() - t0
        b2, _ = jiffies()
        if r.returncode != 0:
            tail = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise BenchError(f"{label}: exit status {r.returncode}: {tail[:300]}")
        _, rss, user, sysm = open(tf).read().split()[-4:]
        cpu = float(user) + float(sysm)
        other = max((b2 - b1) / CLK_TCK - cpu, 0.0) / el if el > 0 else 0.0
        la = os.getloadavg()
        self.other[label] = other
        self.load_log.append(f"{label}: machine {busy:.0f} % busy before (waited {waited:.0f} s); other processes "
                             f"{other:.2f} cores during it; load average {la[0]:.2f}, {la[1]:.2f}, {la[2]:.2f}")
        return {"elapsed": el, "rss_kb": int(rss), "cpu": cpu, "other": other, "stdout": r.stdout, "label": label}

    def show(self, s):
        """A path or argument as shown in the results: the work directory as $W, the build as BUILD."""
        s = str(s)
        s = s.replace(str(self.work), "$W").replace(str(self.build), "BUILD").replace(str(HERE) + "/", "")
        return s

    # Environments. tokdyn sets its own OpenBLAS / OpenMP threads from --threads; one-thread
    # workloads pin them as bench_lib.sh's bench_start does. The peers get THREADS BLAS threads,
    # OPENBLAS_L2_SIZE unset (as scripts/bench.sh runs NumPy) and OPENBLAS_CORETYPE set to the kernels
    # tokdyn's OpenBLAS uses (tokdyn_bench's openblas_corename; --openblas-coretype when given): the
    # same library with the same kernels, also where tokdyn replaces OpenBLAS's generic choice on a
    # CPU that OpenBLAS does not know.
    def tok_env(self, threads):
        env = dict(os.environ)
        if threads == 1:
            env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        return env

    def peer_env(self, threads):
        env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
        core = self.a.openblas_coretype or self.blas_core
        if core and core != "?":
            env["OPENBLAS_CORETYPE"] = core
        env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), BENCH_THREADS=str(threads))
        return env

    def tokdyn_run(self, label, preset, sets, threads, out):
        if out.exists():
            shutil.rmtree(out)
        cmd = [self.tok, "run", preset, "--out", out, "--threads", threads, "--no-figures", "--quiet"]
        for k, v in sets:
            cmd += ["--set", f"{k}={v}"]
        m = self.measured(label, cmd, env=self.tok_env(threads))
        m["manifest"] = json.load(open(out / "manifest.json"))
        m["out"] = out
        m["cmd"] = cmd
        core = m["manifest"].get("blas_core")
        if core and self.blas_core and core != self.blas_core:
            self.core_mismatch.append(f"{label}: tokdyn's manifest says blas_core {core}, tokdyn_bench used {self.blas_core}")
        return m

    def before_run(self, row, label, preset, sets, threads, out, metric, what):
        """--before: the row's tokdyn command once more with REF's build, the same OpenBLAS kernels as the
        current build (a build from before the kernel fix would otherwise pick OpenBLAS's own choice), and
        metric(manifest) as its time (None: REF's manifest lacks it, and the wall time is quoted instead)."""
        if not self.before_tok:
            return
        if out.exists():
            shutil.rmtree(out)
        cmd = [self.before_tok, "run", preset, "--out", out, "--threads", threads, "--no-figures"]
        for k, v in sets:
            cmd += ["--set", f"{k}={v}"]
        env = self.tok_env(threads)
        if "OPENBLAS_CORETYPE" not in env and self.blas_core and self.blas_core != "?":
            env["OPENBLAS_CORETYPE"] = self.blas_core
        try:
            m = self.measured(f"{label} (before: {self.a.before})", cmd, env=env)
        except BenchError as e:
            row["before"] = {"time": None, "what": f"REF's build failed: {e}"}
            return None
        try:
            man = json.load(open(out / "manifest.json"))
        except (OSError, ValueError):
            man = {}
        t = m["elapsed"] if what == "wall" else None
        if t is None:
            try:
                t = metric(man)
            except (ValueError, KeyError, TypeError):
                t = None
        row["before"] = ({"time": t, "what": what, "same": True} if t is not None else
                         {"time": m["elapsed"], "what": f"wall; REF's manifest has no {what}", "same": False})
        load(row, "before", m)
        shutil.rmtree(out, ignore_errors=True)
        return man

    def peer_run(self, label, cmd, threads):
        m = self.measured(label, [PY, *cmd], env=self.peer_env(threads))
        try:
            m["json"] = json.loads(m["stdout"])
        except ValueError as e:
            raise BenchError(f"{label}: its output is not JSON ({e})")
        return m

    def prep(self, cmd, env=None):
        """An untimed preparation step (writing the input files)."""
        r = subprocess.run([*map(str, cmd)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            tail = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise BenchError(f"{' '.join(self.show(c) for c in cmd)}: exit status {r.returncode}: {tail[:300]}")
        return r.stdout

    def checkpoint(self):
        """The Mamba-2 130m checkpoint (tokdyn make-checkpoint --size 130m --seed 0), made once."""
        if self.ck is None:
            ck = self.work / "ck"
            m = self.measured("make-checkpoint 130m", [self.tok, "make-checkpoint", "--size", "130m", "--seed", "0", "--out", ck])
            self.ck = ck
            self.ck_time = m
        return self.ck


def best(runs, key):
    return min(runs, key=key)


def fit_exponent(sizes, times):
    """Least-squares slope of log(time) against log(size)."""
    x, y = np.log(np.asarray(sizes, float)), np.log(np.asarray(times, float))
    return float(np.polyfit(x, y, 1)[0])


def phase_seconds(man):
    """notes.phase_seconds of a manifest (dict name -> s), else rope-table2's notes.part_times_s, else None."""
    n = man.get("notes", {})
    ps = n.get("phase_seconds")
    if isinstance(ps, dict) and ps:
        return {k: float(v) for k, v in ps.items()}, "notes.phase_seconds"
    pt = n.get("part_times_s")
    if isinstance(pt, list) and pt:
        return {r["part"]: float(r["seconds"]) for r in pt}, "notes.part_times_s (this build writes no notes.phase_seconds)"
    return None, "this build's manifest.json has no notes.phase_seconds"


def fmt_s(t):
    if t is None:
        return "n/a"
    if t >= 100:
        return f"{t:.0f} s"
    if t >= 10:
        return f"{t:.1f} s"
    if t >= 1:
        return f"{t:.2f} s"
    if t >= 0.1:
        return f"{t:.3f} s"
    return f"{t * 1e3:.1f} ms"


def mib(kb):
    return f"{kb / 1024:.0f} MiB"


# ---------------------------------------------------------------------------------------------
# A result row

def new_row(key, workload, baseline_key):
    return {"key": key, "workload": workload, "command": "", "time": None, "time_what": "", "gflop": None,
            "gflop_na": "", "peak": None, "peers": [], "rss_tok": None, "check": "", "baseline": BASELINE[baseline_key],
            "phases": None, "phase_src": "", "notes": [], "error": None, "threads": None, "load": [], "before": None}


PEAKS_LABEL = "peaks (BM_Dgemm, BM_Sgemm)"
LOADED = 0.2  # cores of other processes during a measurement above which the row says so


def load(row, what, m):
    """Records the share of the machine other processes used during measurement m of the row."""
    row["load"].append((what, m["other"]))


def add_peer(row, name, t, rss_kb, note="", ratio_note=""):
    row["peers"].append({"name": name, "time": t, "rss_kb": rss_kb, "note": note, "ratio_note": ratio_note})


# ---------------------------------------------------------------------------------------------
# The peaks

def measure_peaks(B):
    reps, mt = B.S["peak_reps"], B.S["peak_min_time"]
    out = B.work / "peaks.json"
    B.measured(PEAKS_LABEL, [
        B.tok_bench, "--benchmark_filter=^BM_(Dgemm/n:(2048|4096)|Sgemm/n:4096)/threads:[12]/",
        f"--benchmark_min_time={mt}", f"--benchmark_repetitions={reps}", "--benchmark_enable_random_interleaving=true",
        f"--benchmark_out={out}", "--benchmark_out_format=json"])
    j = json.load(open(out))
    best_rate = {}
    for b in j["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        name = b["run_name"].replace("/real_time", "")
        rate = b["FLOPS"] if "FLOPS" in b else b["GFLOP/s"] * 1e9
        best_rate[name] = max(best_rate.get(name, 0.0), rate)
    peaks, rows = {}, []
    for name, rate in sorted(best_rate.items()):
        m = re.match(r"BM_(Dgemm|Sgemm)/n:(\d+)/threads:(\d+)", name)
        kind, n, t = ("dgemm" if m.group(1) == "Dgemm" else "sgemm"), int(m.group(2)), int(m.group(3))
        rows.append((kind, t, n, name, rate))
        if rate > peaks.get((kind, t), (0.0, ""))[0]:
            peaks[(kind, t)] = (rate, name)
    return peaks, rows, j.get("context", {}), reps


def pct(row, peaks):
    if row["gflop"] is None or row["time"] is None or row["peak"] is None:
        return None
    p = peaks.get(row["peak"])
    return None if p is None else 100.0 * row["gflop"] * 1e9 / row["time"] / p[0]


# ---------------------------------------------------------------------------------------------
# Flop counts (the per-workload scripts' counts)

def mamba2_shapes(ck):
    raw = json.load(open(Path(ck) / "config.json"))
    ssm = raw.get("ssm_cfg", {}) or {}
    d = int(raw["d_model"])
    expand, N, P, G = int(ssm.get("expand", 2)), int(ssm.get("d_state", 128)), int(ssm.get("headdim", 64)), int(ssm.get("ngroups", 1))
    di = expand * d
    H = di // P
    return dict(d=d, di=di, N=N, P=P, G=G, H=H, vocab=int(raw["vocab_size"]), cols=2 * di + 2 * G * N + H)


def mamba2_flops(sh, runs, tokens, depth):
    """scripts/bench_mamba2.sh's count: in_proj, out_proj, SSD, both variants (no_gate skips the z rows)."""
    RT, T = runs * tokens, tokens
    def layer(cols):
        return 2 * RT * sh["d"] * cols + 2 * RT * sh["di"] * sh["d"] + 2 * runs * (sh["G"] * T * T * sh["N"] + sh["H"] * T * T * sh["P"])
    return depth * (layer(sh["cols"]) + layer(sh["cols"] - sh["di"]))


def ssm_flops(runs, depth, ell, n, m, nvar=2):
    """scripts/bench.sh's count per layer and variant: Delta GEMM, branch GEMMs, kernels, IO readout, Gram."""
    Nr = runs * ell
    per = 2 * Nr * n * n + 4 * Nr * n * m + runs * 2 * ell * ell * m + runs * 4 * n * ell * (ell + 1) // 2 + runs * 2 * ell * ell * n
    return per * depth * nvar


def cocycle_flops(d, L):
    """scripts/bench_cocycle.sh's count: GEMM 2 d^3 + Householder QR 4/3 d^3 per layer."""
    return L * (2 + 4 / 3) * d ** 3


def green_flops(d, L):
    """scripts/bench_green.sh's count (tokdyn's block algorithm)."""
    k = (d + 1) // 2
    m = d - k
    n = m + d
    return L * (n * d * d + 2 * m * d * d) + 2 / 3 * d ** 3  # dgetrf n d^2 - d^3/3, unit-lower inverse d^3/3, Schur 2 m d^2


def depth_spectra_flops(sh, k, T, depth):
    """scripts/bench_depth_spectra.sh's count: (1 + k) GEMMs + (1 + 2k) SSD at R = 1, plus the thin QR."""
    din = 2 * sh["di"] + 2 * sh["G"] * sh["N"] + sh["H"]
    gemm1 = 2.0 * (T * sh["d"] * din + T * sh["di"] * sh["d"])
    ssd1 = 2.0 * (sh["G"] * T * T * sh["N"] + sh["H"] * T * T * sh["P"])
    return depth * ((1 + k) * gemm1 + (1 + 2 * k) * ssd1 + 4.0 * (T * sh["d"]) * k * k)


def rope_flow_flops(n, d, runs, t_end, h):
    """rope-flow's own estimate: 4 field evaluations per RK4 step, R (4 n^2 d + 30 n^2) each."""
    return 4 * (t_end / h) * runs * (4.0 * n * n * d + 30.0 * n * n)


# ---------------------------------------------------------------------------------------------
# Workloads. Each returns (rows, scaling entries); a scaling entry is a dict with workload,
# parameter, sizes, times, what, expected (text), flop_model (list of flops per size or None).

def read_metrics_final(path, layer):
    out = {}
    with open(path) as f:
        rd = csv.reader(f)
        head = next(rd)
        il, i1, ip = head.index("layer"), head.index("lambda1_mean"), head.index("pr_mean")
        for r in rd:
            if int(r[il]) == layer:
                out[r[0]] = (float(r[i1]), float(r[ip]))
    return out


def w_mamba2(B):
    P = B.S["mamba2-fig1"]
    runs, tokens, depth = P["runs"], P["tokens"], P["depth"]
    ck = B.checkpoint()
    sh = mamba2_shapes(ck)
    ids = B.work / "ids.npy"
    np.save(ids, np.random.default_rng(0).integers(0, sh["vocab"], size=(runs, tokens)).astype(np.int64))

    def run(dep, label):
        return B.tokdyn_run(label, "mamba2-fig1", [("checkpoint", ck), ("token_ids", ids), ("runs", runs), ("tokens", tokens),
                                                   ("depth", dep)], THREADS, B.work / f"m2-{dep}-{label[-1]}")

    td = [run(depth, f"mamba2-fig1 tokdyn depth {depth} #{i}") for i in range(1, B.S["reps"] + 1)]
    tb = best(td, key=lambda r: r["elapsed"])
    row = new_row("mamba2-fig1", f"mamba2-fig1 (130m, runs {runs}, tokens {tokens}, depth {depth}, gate + no_gate)", "mamba2-fig1")
    row["command"] = (f"tokdyn run mamba2-fig1 --set checkpoint=CK --set token_ids=IDS --set runs={runs} --set tokens={tokens} "
                      f"--set depth={depth} --threads {THREADS} --no-figures")
    row.update(time=tb["elapsed"], time_what=f"wall, best of {len(td)}", gflop=mamba2_flops(sh, runs, tokens, depth) / 1e9,
               peak=("sgemm", THREADS), rss_tok=tb["rss_kb"], threads=THREADS)
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    load(row, "tokdyn", tb)
    B.before_run(row, "mamba2-fig1 tokdyn", "mamba2-fig1", [("checkpoint", ck), ("token_ids", ids), ("runs", runs), ("tokens", tokens),
                                                          ("depth", depth)], THREADS, B.work / "m2-before", lambda man: None, "wall")
    checks = []
    for name, script, pdepth, extra in (("NumPy", "python/numpy_mamba2_fig1.py", P["np_depth"], []),
                                        ("PyTorch", "python/torch_mamba2_fig1.py", P["th_depth"], ["--threads", THREADS])):
        pdepth = min(pdepth, depth)
        pr = [B.peer_run(f"mamba2-fig1 {name} depth {pdepth} #{i}",
                         [HERE / script, "--checkpoint", ck, "--runs", runs, "--tokens", tokens, "--depth", pdepth, "--seed", 0, *extra],
                         THREADS) for i in range(1, B.S["peer_reps"] + 1)]
        pb = best(pr, key=lambda r: r["elapsed"])
        scale = depth / pdepth
        note = "" if pdepth == depth else f"measured at depth {pdepth}: {fmt_s(pb['elapsed'])}, scaled x{scale:g} (incl. loading)"
        add_peer(row, f"{name} ({THREADS} thr.)", pb["elapsed"] * scale, pb["rss_kb"], note)
        load(row, name, pb)
        tok = read_metrics_final(tb["out"] / "metrics.csv", pdepth)
        worst_l = worst_p = 0.0
        for v in ("gate", "no_gate"):
            tl, tp = tok.get(v, (float("nan"), float("nan")))
            worst_l = max(worst_l, abs(pb["json"]["lambda1_final"][v] - tl))
            worst_p = max(worst_p, abs(pb["json"]["pr_final"][v] - tp) / abs(tp))
        ok = worst_l <= 1e-4 and worst_p <= 1e-4
        checks.append(f"{name} at layer {pdepth}: d(lambda1) {worst_l:.1e}, d(r)/r {worst_p:.1e} {'ok' if ok else 'DIFFER'}")
        if not ok:
            B.disagree.append(("mamba2-fig1", checks[-1]))
    row["check"] = "; ".join(checks)
    row["notes"].append(f"checkpoint: `tokdyn make-checkpoint --size 130m --seed 0` took {fmt_s(B.ck_time['elapsed'])}")

    # Growth with depth (runs, tokens fixed): the same ids.
    times = []
    for dep in P["scale"]:
        times.append(tb["elapsed"] if dep == depth else run(dep, f"mamba2-fig1 scaling depth {dep} #1")["elapsed"])
    sc = dict(workload="mamba2-fig1", parameter="depth", sizes=P["scale"], times=times, what="wall, incl. loading the checkpoint",
              expected="1 (work per layer fixed; the fixed cost of loading the checkpoint lowers the fitted slope)",
              flop_model=[mamba2_flops(sh, runs, tokens, s) for s in P["scale"]])
    return [row], [sc]


def w_ssm(B):
    P = B.S["ssm-random-silu"]
    runs, depth, n, m, ell = P["runs"], P["depth"], P["n"], P["m"], 50

    def run(nn, label):
        return B.tokdyn_run(label, "ssm-random-silu", [("runs", runs), ("depth", depth), ("tokens", ell), ("n", nn), ("m", m)],
                            THREADS, B.work / f"ssm-{nn}-{label[-1]}")

    td = [run(n, f"ssm-random-silu tokdyn n {n} #{i}") for i in range(1, B.S["reps"] + 1)]
    tb = best(td, key=lambda r: r["elapsed"])
    row = new_row("ssm-random-silu", f"ssm-random-silu (runs {runs}, depth {depth}, n {n}, m {m}, both variants, diagnostics on)",
                  "ssm-random-silu")
    row["command"] = f"tokdyn run ssm-random-silu --set runs={runs} --set depth={depth} --threads {THREADS} --no-figures"
    row.update(time=tb["elapsed"], time_what=f"wall, best of {len(td)}", gflop=ssm_flops(runs, depth, ell, n, m) / 1e9,
               peak=("dgemm", THREADS), rss_tok=tb["rss_kb"], threads=THREADS)
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    np_depth = min(P["np_depth"], depth)
    pr = [B.peer_run(f"ssm-random-silu NumPy depth {np_depth} #{i}",
                     [HERE / "python/numpy_ssm_random_silu.py", "--runs", runs, "--depth", np_depth, "--tokens", ell, "--n", n,
                      "--m", m, "--variants", "both"], THREADS) for i in range(1, B.S["peer_reps"] + 1)]
    pb = best(pr, key=lambda r: r["elapsed"])
    scale = depth / np_depth
    add_peer(row, f"NumPy ({THREADS} thr.)", pb["elapsed"] * scale, pb["rss_kb"],
             "" if np_depth == depth else f"measured at depth {np_depth}: {fmt_s(pb['elapsed'])}, scaled x{scale:g}")
    load(row, "tokdyn", tb)
    load(row, "NumPy", pb)
    B.before_run(row, "ssm-random-silu tokdyn", "ssm-random-silu", [("runs", runs), ("depth", depth), ("tokens", ell), ("n", n), ("m", m)],
                 THREADS, B.work / "ssm-before", lambda man: None, "wall")
    row["check"] = "n/a (NumPy draws other random bits; same distributions)"
    row["notes"].append("NumPy does not compute the Assumption III.1 diagnostics that tokdyn's default run does")
    times = [tb["elapsed"] if s == n else run(s, f"ssm-random-silu scaling n {s} #1")["elapsed"] for s in P["scale"]]
    sc = dict(workload="ssm-random-silu", parameter="n (m = 128)", sizes=P["scale"], times=times, what="wall",
              expected="2 from the counted flops' n^2 GEMM (lower: terms linear in n); the uncounted n^3 "
                       "diagnostics eigenvalues push it up",
              flop_model=[ssm_flops(runs, depth, ell, s, m) for s in P["scale"]])
    return [row], [sc]


def w_cocycle(B):
    P = B.S["cocycle-spectra"]
    rows, qr_by_d = [], {}
    for d, L in P["main"]:
        gen = B.work / f"gen{d}.npy"
        B.prep([PY, HERE / "python/numpy_cocycle_qr.py", "--write", gen, d, L, 0])
        td, pr = [], []
        for i in range(1, B.S["reps"] + 1):  # interleaved, as bench_cocycle.sh
            td.append(B.tokdyn_run(f"cocycle-spectra tokdyn d {d} #{i}", "cocycle-spectra",
                                   [("generators", gen), ("burn_in", 0), ("bundles", "none"), ("rank", "false"), ("H", L)],
                                   THREADS, B.work / f"coc-{d}-{i}"))
            pr.append(B.peer_run(f"cocycle-spectra NumPy d {d} #{i}", [HERE / "python/numpy_cocycle_qr.py", "--generators", gen], THREADS))
        qr = lambda r: float(r["manifest"]["notes"]["qr_seconds"])
        tb = best(td, key=qr)
        pb = best(pr, key=lambda r: r["json"]["seconds"])
        row = new_row(f"cocycle-{d}", f"cocycle-spectra QR loop (G5-like, d {d}, L {L}, k = d)", f"cocycle-{d}")
        row["command"] = (f"tokdyn run cocycle-spectra --set generators=GEN.npy --set burn_in=0 --set bundles=none --set rank=false "
                          f"--set H={L} --threads {THREADS} --no-figures")
        row.update(time=qr(tb), time_what=f"notes.qr_seconds, best of {len(td)}", gflop=cocycle_flops(d, L) / 1e9,
                   peak=("dgemm", THREADS), rss_tok=tb["rss_kb"], threads=THREADS)
        row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
        add_peer(row, f"NumPy QR loop ({THREADS} thr.)", pb["json"]["seconds"], pb["rss_kb"])
        load(row, "tokdyn", tb)
        load(row, "NumPy", pb)
        mu_tok = [float(r["mu"]) for r in csv.DictReader(open(tb["out"] / "lyapunov.csv"))]
        mu_np = pb["json"]["mu"]
        diff = max(abs(x - y) for x, y in zip(mu_tok, mu_np)) if len(mu_tok) == len(mu_np) else float("inf")
        row["check"] = f"max abs(mu_tokdyn - mu_NumPy) = {diff:.1e} ({'ok' if diff <= 1e-9 else 'DIFFER'})"
        if not diff <= 1e-9:
            B.disagree.append((row["workload"], row["check"]))
        row["notes"].append(f"tokdyn --threads {THREADS} (manifest threads: {tb['manifest'].get('threads', '?')}); NumPy "
                            f"OPENBLAS_NUM_THREADS={THREADS}; the generators file ({gen.stat().st_size / 1e6:.0f} MB) is read by both, "
                            "only the QR loop is timed")
        B.before_run(row, f"cocycle-spectra tokdyn d {d}", "cocycle-spectra",
                     [("generators", gen), ("burn_in", 0), ("bundles", "none"), ("rank", "false"), ("H", L)], THREADS,
                     B.work / f"coc-{d}-before", lambda man: float(man["notes"]["qr_seconds"]), "notes.qr_seconds")
        rows.append(row)
        qr_by_d[(d, L)] = qr(tb)
        gen.unlink()
    # The default run of the issue: family G5, d = 256, L = 500, everything on (rank as the preset decides).
    d, L = P["default"]
    td = [B.tokdyn_run(f"cocycle-spectra default run #{i}", "cocycle-spectra", [("family", "G5"), ("d", d), ("depth", L)],
                       THREADS, B.work / f"coc-default-{i}") for i in range(1, B.S["reps"] + 1)]
    tb = best(td, key=lambda r: r["elapsed"])
    row = new_row("cocycle-default", f"cocycle-spectra default run (G5, d {d}, L {L})", "cocycle-default")
    row["command"] = f"tokdyn run cocycle-spectra --set family=G5 --set d={d} --set depth={L} --threads {THREADS} --no-figures"
    row.update(time=tb["elapsed"], time_what=f"wall, best of {len(td)}", gflop_na="n/a (QR, rank check, bundles: no single count)",
               rss_tok=tb["rss_kb"], threads=THREADS)
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    row["check"] = "n/a (no peer)"
    load(row, "tokdyn", tb)
    B.before_run(row, "cocycle-spectra default run", "cocycle-spectra", [("family", "G5"), ("d", d), ("depth", L)], THREADS,
                 B.work / "coc-default-before", lambda man: None, "wall")
    rows.append(row)
    # Growth with d at fixed L (family G5 drawn by tokdyn; the QR loop's own timer).
    Ls = P["scale_L"]
    times = []
    for s in P["scale"]:
        if (s, Ls) in qr_by_d:
            times.append(qr_by_d[(s, Ls)])
        else:
            r = B.tokdyn_run(f"cocycle-spectra scaling d {s} #1", "cocycle-spectra",
                             [("family", "G5"), ("d", s), ("depth", Ls), ("burn_in", 0), ("bundles", "none"), ("rank", "false"), ("H", Ls)],
                             THREADS, B.work / f"coc-scale-{s}")
            times.append(float(r["manifest"]["notes"]["qr_seconds"]))
    sc = dict(workload="cocycle-spectra", parameter=f"d (L = {Ls}, k = d)", sizes=P["scale"], times=times, what="notes.qr_seconds",
              expected="3 (2 d^3 GEMM + 4/3 d^3 QR per layer)", flop_model=[cocycle_flops(s, Ls) for s in P["scale"]])
    return rows, [sc]


def w_rope(B):
    P = B.S["rope-table2"]
    FITS = "resonant rate fits (12)"
    td = [B.tokdyn_run(f"rope-table2 tokdyn #{i}", "rope-table2", [], THREADS, B.work / f"rope-{i}") for i in range(1, B.S["reps"] + 1)]
    tb = best(td, key=lambda r: r["elapsed"])
    reps = max(B.S["reps"], 2) if B.mode == "full" else 1
    pr = [B.peer_run(f"rope-table2 SciPy fits #{i}", [HERE / "python/scipy_rope_rate_fits.py"], THREADS) for i in range(1, reps + 1)]
    pb = best(pr, key=lambda r: r["json"]["seconds"])
    t_sc = pb["json"]["seconds"]
    phases, src = phase_seconds(tb["manifest"])

    def fit_time(r):
        ph, _ = phase_seconds(r["manifest"])
        return ph.get(FITS) if ph else None
    fits = [fit_time(r) for r in td]
    t_fits = min(f for f in fits if f is not None) if any(f is not None for f in fits) else None

    whole = new_row("rope-table2", "rope-table2 (all of Table 2)", "rope-table2")
    whole["command"] = f"tokdyn run rope-table2 --threads {THREADS} --no-figures"
    whole.update(time=tb["elapsed"], time_what=f"wall, best of {len(td)}", gflop_na="n/a (ODE integrations, eigenproblems)",
                 rss_tok=tb["rss_kb"], threads=THREADS, phases=phases, phase_src=src)
    add_peer(whole, "SciPy, the 12 fits only", t_sc, pb["rss_kb"], "the peer covers only the rate fits",
             "SciPy's fits / tokdyn's whole run")
    whole["notes"].append(f"cores busy on average: {tb['cpu'] / tb['elapsed']:.2f} of {os.cpu_count()} (CPU time / wall)")
    whole["check"] = "see the fits row"
    load(whole, "tokdyn", tb)
    load(whole, "SciPy", pb)
    fitrow = new_row("rope-fits", f"rope-table2 phase \"{FITS}\"", "rope-fits")
    fitrow["command"] = "(the phase of the run above; SciPy: python/scipy_rope_rate_fits.py)"
    fitrow.update(time=t_fits, time_what=f"phase time, best of {len(td)}", gflop_na="n/a (ODE integration)", threads=THREADS)
    add_peer(fitrow, f"SciPy solve_ivp DOP853 ({THREADS} thr.)", t_sc, pb["rss_kb"], "in-script time of the 12 fits, imports excluded")
    load(fitrow, "tokdyn", tb)
    load(fitrow, "SciPy", pb)
    if t_fits is None:
        fitrow["error"] = f"the manifest has no phase \"{FITS}\""
    man_before = B.before_run(whole, "rope-table2 tokdyn", "rope-table2", [], THREADS, B.work / "rope-before", lambda man: None, "wall")
    if man_before is not None:  # the fits' time from the same REF run: its phase, or the older notes.part_times_s
        notes = man_before.get("notes") or {}
        ph = notes.get("phase_seconds") or notes.get("part_times_s") or {}
        fitrow["before"] = ({"time": float(ph[FITS]), "what": f"phase \"{FITS}\"", "same": True} if FITS in ph else
                            {"time": None, "what": "n/a (REF's manifest does not time the fits)"})
    # Agreement of the fitted rates.
    tok_fits = {(int(r["n"]), int(r["m"]), float(r["beta"])): r for r in csv.DictReader(open(tb["out"] / "rate_fits.csv"))}
    dfit = 0.0
    for f in pb["json"]["fits"]:
        t = tok_fits.get((f["n"], f["m"], float(f["beta"])))
        if t is None:
            dfit = float("inf")
            continue
        dfit = max(dfit, abs(f["gamma_fit"] - float(t["gamma_fit"])) / float(t["gamma"]))
    fitrow["check"] = f"max abs(gamma_fit SciPy - tokdyn) / gamma = {dfit:.1e} ({'ok' if dfit <= 1e-6 else 'DIFFER'}, bound 1e-6)"
    if not dfit <= 1e-6:
        B.disagree.append((fitrow["workload"], fitrow["check"]))
    # Growth: the fits have no size knob; rope-flow's attention field grows with the tokens n.
    F = P["flow"]
    times = []
    for n in P["scale"]:
        r = B.tokdyn_run(f"rope-flow scaling n {n} #1", "rope-flow",
                         [("n", n), ("d", F["d"]), ("runs", F["runs"]), ("t_end", F["t_end"]), ("h", F["h"]), ("outputs", F["outputs"])],
                         THREADS, B.work / f"rope-flow-{n}")
        times.append(float(r["manifest"].get("wall_time_s") or r["elapsed"]))
    sc = dict(workload="rope-table2 -> rope-flow",
              parameter=f"rope-flow n (d = {F['d']}, runs = {F['runs']}, RK4 h = {F['h']}, t_end = {F['t_end']})",
              sizes=P["scale"], times=times, what="manifest wall_time_s",
              expected="2 (attention field 4 n^2 d per evaluation); the 12 rate fits have no size knob",
              flop_model=[rope_flow_flops(n, F["d"], F["runs"], F["t_end"], F["h"]) for n in P["scale"]])
    return [whole, fitrow], [sc]


def w_green(B):
    P = B.S["green"]
    d, L = P["d"], P["L"]
    thr = 1

    def files(dd):
        g = B.work / f"green-{dd}"
        g.mkdir(exist_ok=True)
        B.prep([PY, HERE / "bench/green_peer.py", "--write", g, dd, L, 0])
        return g

    def run(g, label, i):
        return B.tokdyn_run(label, "coupling-green", [("generators", g / "gen.npy"), ("forcing", g / "h.npy"), ("validate", "false"),
                                                      ("write_u", "true")], thr, g / f"res-{i}")
    t_of = lambda r: float(r["manifest"]["notes"]["factor_seconds"]) + float(r["manifest"]["notes"]["solve_seconds"])
    g = files(d)
    td, pr = [], []
    for i in range(1, B.S["reps"] + 1):
        td.append(run(g, f"green tokdyn d {d} #{i}", i))
        pr.append(B.peer_run(f"green SciPy d {d} #{i}", [HERE / "bench/green_peer.py", "--solve", g / "gen.npy", g / "h.npy", g / "u_np.npy"], thr))
    tb = best(td, key=t_of)
    pb = best(pr, key=lambda r: r["json"]["solve_seconds"])
    row = new_row("green", f"coupling part 2: Green BVP u = G h (d {d}, L {L}, k {(d + 1) // 2})", "green")
    row["command"] = ("tokdyn run coupling-green --set generators=GEN.npy --set forcing=H.npy --set validate=false --set write_u=true "
                      f"--threads {thr} --no-figures")
    row.update(time=t_of(tb), time_what=f"notes factor_seconds + solve_seconds, best of {len(td)}", gflop=green_flops(d, L) / 1e9,
               peak=("dgemm", thr), rss_tok=tb["rss_kb"], threads=thr)
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    add_peer(row, "SciPy solve_banded (1 thr.)", pb["json"]["solve_seconds"], pb["rss_kb"],
             f"factorise + solve only; its band assembly took {fmt_s(pb['json']['assemble_seconds'])} more")
    load(row, "tokdyn", tb)
    load(row, "SciPy", pb)
    B.before_run(row, f"green tokdyn d {d}", "coupling-green", [("generators", g / "gen.npy"), ("forcing", g / "h.npy"),
                                                                ("validate", "false"), ("write_u", "true")], thr,
                 B.work / "green-before", t_of, "notes factor_seconds + solve_seconds")
    u_t, u_n = np.load(tb["out"] / "u.npy"), np.load(g / "u_np.npy")
    diff = float(np.abs(u_t - u_n).max() / np.abs(u_n).max()) if u_t.shape == u_n.shape else float("inf")
    row["check"] = f"max abs(u_tokdyn - u_SciPy) / max abs(u) = {diff:.1e} ({'ok' if diff <= 1e-9 else 'DIFFER'})"
    if not diff <= 1e-9:
        B.disagree.append((row["workload"], row["check"]))
    shutil.rmtree(g)
    times = []
    for s in P["scale"]:
        if s == d:
            times.append(t_of(tb))
            continue
        gs = files(s)
        times.append(t_of(run(gs, f"green scaling d {s} #1", 1)))
        shutil.rmtree(gs)
    sc = dict(workload="green (coupling part 2)", parameter=f"d (L = {L}, k = ceil(d/2))", sizes=P["scale"], times=times,
              what="factor + solve", expected="3 (d x d blocks: panel LU and Schur update per layer)",
              flop_model=[green_flops(s, L) for s in P["scale"]])
    return [row], [sc]


def w_continuation(B):
    P = B.S["continuation"]
    d, L, steps, ds = P["d"], P["L"], P["steps"], P["ds"]
    thr = 1

    def files(LL):
        g = B.work / f"cont-{LL}"
        g.mkdir(exist_ok=True)
        B.prep([PY, HERE / "bench/continuation_peer.py", "--write", g / "gen.npy", g / "psi.npy", d, LL, 0])
        return g

    def run(g, label, i):
        return B.tokdyn_run(label, "coupling-margin", [("bench_generators", g / "gen.npy"), ("bench_psi", g / "psi.npy"),
                                                       ("bench_steps", steps), ("bench_ds", ds)], thr, g / f"res-{i}")
    t_of = lambda r: float(r["manifest"]["notes"]["bench"]["continuation_seconds"])
    g = files(L)
    td, pr = [], []
    for i in range(1, B.S["reps"] + 1):
        td.append(run(g, f"continuation tokdyn L {L} #{i}", i))
        if i <= B.S["peer_reps"]:
            pr.append(B.peer_run(f"continuation NumPy/SciPy L {L} #{i}",
                                 [HERE / "bench/continuation_peer.py", "--run", g / "gen.npy", g / "psi.npy", steps, ds, g / "u_np.npy"], thr))
    tb = best(td, key=t_of)
    pb = best(pr, key=lambda r: r["json"]["seconds"])
    bn = tb["manifest"]["notes"]["bench"]
    row = new_row("continuation", f"coupling part 2: rho-continuation ({steps} steps, d {d}, L {L}, tanh-MLP psi)", "continuation")
    row["command"] = (f"tokdyn run coupling-margin --set bench_generators=GEN.npy --set bench_psi=PSI.npy --set bench_steps={steps} "
                      f"--set bench_ds={ds} --threads {thr} --no-figures")
    row.update(time=t_of(tb), time_what=f"notes.bench.continuation_seconds, best of {len(td)}",
               gflop=float(bn["factorizations"]) * float(bn["factor_gflop_each"]), peak=("dgemm", thr), rss_tok=tb["rss_kb"], threads=thr)
    row["notes"].append(f"GFLOP/s counts only the {bn['factorizations']} BVP factorisations ({float(bn['factor_gflop_each']):.3f} GFLOP each), "
                        "as scripts/bench_continuation.sh does")
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    add_peer(row, "NumPy/SciPy (1 thr.)", pb["json"]["seconds"], pb["rss_kb"])
    load(row, "tokdyn", tb)
    load(row, "peer", pb)
    B.before_run(row, f"continuation tokdyn L {L}", "coupling-margin", [("bench_generators", g / "gen.npy"), ("bench_psi", g / "psi.npy"),
                                                                        ("bench_steps", steps), ("bench_ds", ds)], thr,
                 B.work / "cont-before", t_of, "notes.bench.continuation_seconds")
    rows_c = list(csv.DictReader(open(tb["out"] / "continuation.csv")))
    drho = abs(float(rows_c[-1]["rho"]) - pb["json"]["rho"])
    u_np = np.load(g / "u_np.npy")
    u_tok = np.zeros_like(u_np)
    for r in csv.DictReader(open(tb["out"] / "final_u.csv")):
        u_tok[int(r["i"]), int(r["l"])] = float(r["u"])
    du = float(np.sqrt(((u_tok - u_np) ** 2).sum(axis=0)).max() / np.sqrt((u_np ** 2).sum(axis=0)).max())
    ok = drho <= 1e-9 and du <= 1e-8
    row["check"] = f"final rho differs by {drho:.1e}, u* by {du:.1e} relative ({'ok' if ok else 'DIFFER'})"
    if not ok:
        B.disagree.append((row["workload"], row["check"]))
    shutil.rmtree(g)
    times, fl = [], []
    for s in P["scale"]:
        if s == L:
            times.append(t_of(tb))
            fl.append(float(bn["factorizations"]) * float(bn["factor_gflop_each"]) * 1e9)
            continue
        gs = files(s)
        r = run(gs, f"continuation scaling L {s} #1", 1)
        times.append(t_of(r))
        b = r["manifest"]["notes"]["bench"]
        fl.append(float(b["factorizations"]) * float(b["factor_gflop_each"]) * 1e9)
        shutil.rmtree(gs)
    sc = dict(workload="continuation (coupling part 2)", parameter=f"L (d = {d}, {steps} steps)", sizes=P["scale"], times=times,
              what="notes.bench.continuation_seconds", expected="1 (block-banded LU: O(L d^3) per factorisation)", flop_model=fl)
    return [row], [sc]


def w_depth_spectra(B):
    P = B.S["depth-spectra"]
    k, T, depth, burn = P["k"], P["tokens"], P["depth"], P["burn_in"]
    ck = B.checkpoint()
    sh = mamba2_shapes(ck)

    def run(kk, label, i):
        return B.tokdyn_run(label, "depth-spectra", [("model", "mamba2"), ("checkpoint", ck), ("k", kk), ("tokens", T), ("depth", depth),
                                                     ("burn_in", burn), ("seed", 0)], THREADS, B.work / f"ds-{kk}-{i}")
    t_of = lambda r: float(r["manifest"].get("wall_time_s") or r["elapsed"])
    td = [run(k, f"depth-spectra tokdyn k {k} #{i}", i) for i in range(1, B.S["reps"] + 1)]
    tb = best(td, key=t_of)
    row = new_row("depth-spectra", f"depth-spectra (mamba2-130m JVP, k {k}, tokens {T}, depth {depth})", "depth-spectra")
    row["command"] = (f"tokdyn run depth-spectra --set model=mamba2 --set checkpoint=CK --set k={k} --set tokens={T} --set depth={depth} "
                      f"--set burn_in={burn} --threads {THREADS} --no-figures")
    row.update(time=t_of(tb), time_what=f"manifest wall_time_s, best of {len(td)}", gflop=depth_spectra_flops(sh, k, T, depth) / 1e9,
               peak=("dgemm", THREADS), rss_tok=tb["rss_kb"], threads=THREADS)
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    row["check"] = "n/a (no peer)"
    load(row, "tokdyn", tb)
    B.before_run(row, f"depth-spectra tokdyn k {k}", "depth-spectra", [("model", "mamba2"), ("checkpoint", ck), ("k", k), ("tokens", T),
                                                                       ("depth", depth), ("burn_in", burn), ("seed", 0)], THREADS,
                 B.work / "ds-before", lambda man: float(man["wall_time_s"]), "manifest wall_time_s")
    row["peer_none"] = "none: no Python library computes Lyapunov spectra of a Mamba-2 depth map"
    times = [t_of(tb) if s == k else t_of(run(s, f"depth-spectra scaling k {s} #1", 1)) for s in P["scale"]]
    sc = dict(workload="depth-spectra", parameter=f"k (tokens = {T}, depth = {depth})", sizes=P["scale"], times=times,
              what="manifest wall_time_s, incl. loading the checkpoint",
              expected="about 1 ((1 + k) GEMM passes: the value once, k tangents sharing it; the fixed cost of loading lowers it)",
              flop_model=[depth_spectra_flops(sh, s, T, depth) for s in P["scale"]])
    return [row], [sc]


def gpt2_flops(cfg, runs, tokens, depth):
    """The forward's flops as tokdyn computes it: QKV, full T x T attention products per head, the
    output projection, the MLP (2 flops per multiply-add)."""
    d, H = cfg["n_embd"], cfg["n_head"]
    RT = runs * tokens
    return 2.0 * depth * (RT * d * 4 * d + 2 * runs * H * tokens * tokens * (d // H) + RT * d * 4 * d * 2)


def gpt2_tangent_flops(cfg, k, tokens, depth):
    d, H = cfg["n_embd"], cfg["n_head"]
    return 2.0 * depth * (tokens * d * (4 * d + 2 * 4 * d) * (1 + k) + H * tokens * tokens * (d // H) * (2 + 4 * k))


def w_gpt2(B):
    """GPT-2-small (124M, make-checkpoint) cycled to depth 96 on 50 runs x 64 tokens (transformer-clustering,
    positions on) against a batched PyTorch-CPU forward on the same ids (bench/torch_gpt2_depth.py); the
    depth-spectra tangent step on the same model."""
    P = B.S["gpt2-depth"]
    R, T, depth = P["runs"], P["tokens"], P["depth"]
    ck = B.work / "gpt2-ck"
    if not ck.exists():
        B.measured("make-checkpoint gpt2 124m", [B.tok, "make-checkpoint", "--model", "gpt2", "--size", "124m", "--seed", "0", "--out", ck])
    cfg = json.load(open(ck / "config.json"))
    ids = B.work / "gpt2-ids.npy"
    np.save(ids, np.random.default_rng(0).integers(0, cfg["vocab_size"], size=(R, T)).astype(np.int64))

    def run(dd, label, i):
        return B.tokdyn_run(label, "transformer-clustering", [("model", "gpt2"), ("checkpoint", ck), ("token_ids", ids), ("tokens", T),
                                                              ("depth", dd), ("variants", "on")], THREADS, B.work / f"gpt2-{dd}-{i}")
    t_of = lambda r: float(r["manifest"]["notes"]["phase_seconds"]["positions_on"])  # noqa: E731
    td = [run(depth, f"gpt2 tokdyn #{i}", i) for i in range(1, B.S["reps"] + 1)]
    tb = best(td, key=t_of)
    row = new_row("gpt2-depth", f"GPT-2 124M depth map (12 layers cycled to depth {depth}, {R} runs x {T} tokens, fp32)", "gpt2-depth")
    row["command"] = (f"tokdyn run transformer-clustering --set model=gpt2 --set checkpoint=CK --set token_ids=IDS --set tokens={T} "
                      f"--set depth={depth} --set variants=on --threads {THREADS} --no-figures")
    row.update(time=t_of(tb), time_what=f"notes.phase_seconds.positions_on (the depth loop), best of {len(td)}",
               gflop=gpt2_flops(cfg, R, T, depth) / 1e9, peak=("sgemm", THREADS), rss_tok=tb["rss_kb"], threads=THREADS)
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    load(row, "tokdyn", tb)
    peer = []
    for i in range(1, B.S["peer_reps"] + 1):
        m = B.measured(f"gpt2 PyTorch #{i}", [PY, HERE / "bench/torch_gpt2_depth.py", ck, ids, depth, THREADS], env=B.peer_env(THREADS))
        peer.append((json.loads(m["stdout"].strip().splitlines()[-1]), m))
    pj, pm = min(peer, key=lambda x: x[0]["seconds"])
    add_peer(row, f"PyTorch {pj['torch']} batched forward ({THREADS} thr.)", pj["seconds"], pm["rss_kb"], note="the depth loop")
    lam = tb["manifest"]["summaries"]["lambda1_final_positions_on"]
    row["check"] = (f"final lambda_bar_1 {lam:.6f} vs PyTorch {pj['lambda1_final']:.6f}: "
                    f"{'agree' if abs(lam - pj['lambda1_final']) < 1e-3 else 'DISAGREE'} within 1e-3")
    if abs(lam - pj["lambda1_final"]) >= 1e-3:
        row["error"] = "tokdyn and PyTorch disagree on the final lambda_bar_1"
    times = [t_of(tb) if s == depth else t_of(run(s, f"gpt2 scaling depth {s}", 1)) for s in P["scale"]]
    sc = dict(workload="gpt2-depth", parameter=f"depth (runs = {R}, tokens = {T})", sizes=P["scale"], times=times,
              what="notes.phase_seconds.positions_on", expected="1 (each layer the same work)",
              flop_model=[gpt2_flops(cfg, R, T, s) for s in P["scale"]])
    # The tangent step of depth-spectra on the same model (double, k tangents sharing the value).
    k, tdep = P["k"], P["tangent_depth"]
    ds = B.tokdyn_run("gpt2 depth-spectra", "depth-spectra", [("model", "gpt2"), ("checkpoint", ck), ("tokens", T), ("depth", tdep), ("k", k),
                                                               ("burn_in", 0)], THREADS, B.work / "gpt2-ds")
    row2 = new_row("gpt2-tangent", f"depth-spectra on GPT-2 124M (k {k}, tokens {T}, depth {tdep}, double)", "gpt2-tangent")
    row2["command"] = f"tokdyn run depth-spectra --set model=gpt2 --set checkpoint=CK --set tokens={T} --set depth={tdep} --set k={k} --set burn_in=0"
    row2.update(time=float(ds["manifest"]["notes"]["phase_seconds"]["spectrum"]), time_what="notes.phase_seconds.spectrum",
                gflop=gpt2_tangent_flops(cfg, k, T, tdep) / 1e9, peak=("dgemm", THREADS), rss_tok=ds["rss_kb"], threads=THREADS)
    row2["phases"], row2["phase_src"] = phase_seconds(ds["manifest"])
    row2["check"] = "n/a (no peer)"
    row2["peer_none"] = "none: no Python library computes Lyapunov spectra of a GPT-2 depth map"
    load(row2, "tokdyn", ds)
    return [row, row2], [sc]


def w_sweep(B):
    row = new_row("sweep", "sweep overhead per point (64 tiny rope-flow points)", "sweep")
    if not B.S["sweep"]["run"]:
        row["error"] = "skipped in --quick (scripts/bench_sweep.sh measures it; bench/results-sweep.md)"
        return [row], []
    out = B.work / "sweep.md"
    m = B.measured("sweep (scripts/bench_sweep.py --quick)", [PY, HERE / "scripts/bench_sweep.py", "--tokdyn", B.tok, "--quick", "--out", out],
                   env=B.peer_env(THREADS))
    modes = {}
    for line in m["stdout"].splitlines():
        mm = re.match(r"tiny\s+(serial|--jobs 2|mpirun -np 2)\s+(\d+) points\s+wall\s+([\d.]+) s.*overhead/point\s+(-?[\d.]+) ms", line)
        if mm:
            modes[mm.group(1)] = (int(mm.group(2)), float(mm.group(3)), float(mm.group(4)))
    if "serial" not in modes:
        raise BenchError("sweep: no 'serial' line in scripts/bench_sweep.py's output")
    row["command"] = "scripts/bench_sweep.py --tokdyn BUILD/tokdyn --quick (serial, --jobs 2, mpirun -np 2)"
    row.update(time=modes["serial"][2] / 1e3, time_what="overhead per point, serial", gflop_na="n/a")
    row["notes"].append("overhead per point: " + ", ".join(f"{k} {v[2]:.1f} ms" for k, v in modes.items()) +
                        "; see scripts/bench_sweep.sh for the >= 1 s points")
    row["check"] = "n/a"
    load(row, "sweep", m)
    row["peer_none"] = "none (tokdyn's own sweep runner)"
    return [row], []


RUNNERS = {"mamba2-fig1": w_mamba2, "ssm-random-silu": w_ssm, "cocycle-spectra": w_cocycle, "rope-table2": w_rope,
           "green": w_green, "continuation": w_continuation, "depth-spectra": w_depth_spectra, "gpt2-depth": w_gpt2, "sweep": w_sweep}


# ---------------------------------------------------------------------------------------------
# The machine

def machine_info(build):
    info = {"cpu": "unknown", "flags": set()}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and info["cpu"] == "unknown":
                info["cpu"] = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not info["flags"]:
                info["flags"] = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    if info["cpu"] == "unknown":
        r = subprocess.run(["lscpu"], capture_output=True, text=True)
        mm = re.search(r"^Model name:\s*(.+)$", r.stdout, re.M)
        if mm:
            info["cpu"] = mm.group(1).strip()
    info["cores"] = os.cpu_count()
    try:
        info["mem_gib"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    except (ValueError, OSError):
        info["mem_gib"] = float("nan")
    r = subprocess.run([str(build / "tokdyn"), "--version"], capture_output=True, text=True)
    info["version"] = (r.stdout.strip() or r.stderr.strip() or "?").splitlines()[-1]
    # The commit of the sources the build was configured from (CMakeCache's home directory).
    src = HERE
    cache = build / "CMakeCache.txt"
    if cache.exists():
        mm = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.+)$", cache.read_text(errors="replace"), re.M)
        if mm:
            src = Path(mm.group(1).strip())
        bt = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", cache.read_text(errors="replace"), re.M)
        info["build_type"] = bt.group(1).strip() if bt else "?"
    r = subprocess.run(["git", "-C", str(src), "describe", "--always", "--dirty"], capture_output=True, text=True)
    info["commit"] = r.stdout.strip() or "unknown"
    info["src"] = str(src)
    info["date"] = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return info


# ---------------------------------------------------------------------------------------------
# Output

def peer_cells(row):
    if not row["peers"]:
        return row.get("peer_none", "none"), "n/a", "n/a"
    names, ratios = [], []
    for p in row["peers"]:
        note = f" ({p['note']})" if p["note"] else ""
        names.append(f"{p['name']}: {fmt_s(p['time'])}{note}")
        if row["time"]:
            tag = p["ratio_note"] or (p["name"].split(" ")[0] if len(row["peers"]) > 1 else "")
            ratios.append(f"{p['time'] / row['time']:.2f}x" + (f" ({tag})" if tag else ""))
        else:
            ratios.append("n/a")
    return "; ".join(names), "; ".join(ratios), None


def before_cell(row):
    """--before: REF's time for the row and the speed-up (REF's time / the current one) when both are
    the same measure."""
    b = row.get("before")
    if not b:
        return "n/a"
    if b["time"] is None:
        return b["what"]
    cell = f"{fmt_s(b['time'])} ({b['what']})"
    if b.get("same") and row["time"]:
        cell += f"; **{b['time'] / row['time']:.2f}x**"
    return cell


def rss_cell(row):
    t = mib(row["rss_tok"]) if row["rss_tok"] else "n/a"
    ps = [mib(p["rss_kb"]) for p in row["peers"] if p.get("rss_kb")]
    return t + " / " + (", ".join(ps) if ps else "n/a")


def peak_label(key):
    return f"{key[0].upper()} {key[1]} thr." if key else ""


def render(B, info, peaks, peak_rows, ctx, peak_reps, rows, scaling, selected, started, elapsed_total):
    quick = B.mode == "quick"
    L = []
    P = L.append
    P("# tokdyn benchmarks: every workload against its peer" + (" (QUICK run: small sizes, one repetition)" if quick else ""))
    P("")
    P(f"Generated by `scripts/bench_all.sh{' --quick' if quick else ''}` (driver `scripts/bench_all.py`) on {info['date']}; "
      f"the whole run took {elapsed_total / 60:.1f} min. Every number below was measured in this run, except the "
      "\"issue 21 baseline\" column, which quotes the issue." + (
          " **Quick mode**: reduced sizes and depths, one repetition, peers at reduced depth scaled linearly "
          "(their fixed costs, e.g. loading a checkpoint, are scaled too): a check that everything runs, not the "
          "benchmark. `scripts/bench_all.sh` without `--quick` gives the real numbers." if quick else ""))
    if selected != WORKLOADS:
        P("")
        P(f"Subset run (`--only`): {', '.join(selected)}.")
    P("")
    P("| machine | |")
    P("| --- | --- |")
    P(f"| CPU | {info['cpu']} |")
    P(f"| cores | {info['cores']} (memory {info['mem_gib']:.0f} GiB) |")
    P(f"| ISA flags | avx2: {'yes' if 'avx2' in info['flags'] else 'no'}, avx512f: {'yes' if 'avx512f' in info['flags'] else 'no'}, "
      f"fma: {'yes' if 'fma' in info['flags'] else 'no'} |")
    P(f"| OpenBLAS | `{ctx.get('openblas_config', '?')}`, core `{ctx.get('openblas_corename', '?')}`; OPENBLAS_CORETYPE "
      f"{'= ' + B.a.openblas_coretype + ' (--openblas-coretype, for every command)' if B.a.openblas_coretype else 'unset'} |")
    P(f"| peers' OpenBLAS | OPENBLAS_CORETYPE={B.a.openblas_coretype or B.blas_core} (the kernels tokdyn's OpenBLAS uses), "
      "OPENBLAS_L2_SIZE unset |")
    P(f"| tokdyn | `{info['version']}` ({info.get('build_type', '?')} build `{B.show(B.build)}`) |")
    P(f"| commit | `{info['commit']}` (`git describe --always --dirty` of {info['src']}) |")
    P(f"| date | {info['date']} |")
    P(f"| threads | tokdyn `--threads {THREADS}` and the peers' BLAS {THREADS} threads, except the coupling part 2 workloads "
      "(one thread both, as scripts/bench_green.sh and scripts/bench_continuation.sh) |")
    P(f"| idle wait | before every measurement up to {B.idle_limit:g} s for < 10 % busy over {B.S['idle_window']:g} s, "
      f"at most {B.S['idle_budget']:g} s of waiting in all, beyond the one sample per measurement; waited {B.waited_total:.0f} s "
      "in this run (the load seen is listed at the end) |")
    core = ctx.get("openblas_corename", "")
    if core in GENERIC_CORES and "avx2" in info["flags"]:
        P("")
        P(f"**Warning: OpenBLAS chose its generic `{core}` kernels on a CPU with AVX2"
          f"{' and AVX-512' if 'avx512f' in info['flags'] else ''} (it does not recognise this CPU model): every BLAS "
          "number below, tokdyn's, the peers' and the peaks, is far below what the hardware does. Rerun with "
          "`--openblas-coretype SkylakeX` (or Cooperlake / Haswell, whichever the CPU supports) to compare with "
          "results from other machines.**")
    P("")
    P(f"## GEMM peaks (OpenBLAS through `tokdyn_bench`, best of {peak_reps}, same run)")
    P("")
    P("| kernel | threads | benchmark | GFLOP/s | used as the peak |")
    P("| --- | --- | --- | --- | --- |")
    for kind, t, n, name, rate in sorted(peak_rows, key=lambda r: (r[0], r[1], r[2])):
        used = "yes" if peaks.get((kind, t), (0, ""))[1] == name else ""
        P(f"| {kind.upper()} | {t} | `{name}` | {rate / 1e9:.1f} | {used} |")
    po = B.other.get(PEAKS_LABEL, 0.0)
    if po > LOADED:
        P("")
        P(f"**The peaks were measured under load** (other processes used {po:.2f} cores meanwhile): they are low, "
          "and the % of peak below correspondingly high.")
    P("")
    P("## Workloads")
    P("")
    P("Ratio = peer time / tokdyn time (> 1: tokdyn faster). GFLOP/s from the flop counts of the per-workload scripts "
      "(`scripts/bench*.sh`), over tokdyn's time in the column before. Peak RSS: GNU time's maximum resident set size "
      "of the whole process.")
    P("")
    bcol = f" before: `{B.a.before}` (same run) |" if B.before_tok else ""
    bsep = " --- |" if B.before_tok else ""
    if B.before_tok:
        P(f"Before: the same tokdyn command with the build of `{B.a.before}` (`{B.before_commit}`), one run, the same "
          "OpenBLAS kernels (OPENBLAS_CORETYPE as the current build uses), measured in this run; speed-up = before / now.")
        P("")
    P("| workload | command | tokdyn time | GFLOP/s | % of peak | peer: time | ratio | peak RSS tokdyn / peer | check |" + bcol +
      " issue 21 baseline |")
    P("| --- | --- | --- | --- | --- | --- | --- | --- | --- |" + bsep + " --- |")
    for r in rows:
        bc = f" {before_cell(r)} |" if B.before_tok else ""
        if r["error"] and r["time"] is None:
            P(f"| {r['workload']} | {r['command'] or ''} | {r['error']} | | | | | | |{bc} {r['baseline']} |")
            continue
        gf = f"{r['gflop'] / r['time']:.1f}" if (r["gflop"] is not None and r["time"]) else (r["gflop_na"] or "n/a")
        p = pct(r, peaks)
        pc = f"{p:.0f} % of {peak_label(r['peak'])}" if p is not None else "n/a"
        peer, ratio, _ = peer_cells(r)
        nl = list(r["notes"])
        busy = [(w, o) for w, o in r["load"] if o > LOADED]
        if busy:
            nl.append("**measured under load**: other processes used " + ", ".join(f"{o:.2f} cores during the {w} run" for w, o in busy))
        notes = ("<br>" + "; ".join(nl)) if nl else ""
        tt = f"**{fmt_s(r['time'])}** ({r['time_what']})" if r["time"] is not None else (r["error"] or "n/a")
        P(f"| {r['workload']} | `{r['command']}`{notes} | {tt} | {gf} | {pc} | {peer} | {ratio} | {rss_cell(r)} | {r['check']} |{bc} "
          f"{r['baseline']} |")
    P("")
    P("## How the cost grows")
    P("")
    P("tokdyn alone, one run per size (the main run's time where the size is the same). Fitted exponent: least-squares "
      "slope of log(time) against log(size). Expected: from the algorithm; \"flop model\" is the same slope of the counted "
      "flops at these sizes.")
    P("")
    if not scaling:
        P("(No scaling runs in this selection.)")
    else:
        P("| workload | parameter | sizes | times | fitted exponent | expected exponent (flop model) |")
        P("| --- | --- | --- | --- | --- | --- |")
    for s in scaling:
        fit = fit_exponent(s["sizes"], s["times"]) if len(s["sizes"]) >= 2 and all(t > 0 for t in s["times"]) else float("nan")
        fm = f"; flop model {fit_exponent(s['sizes'], s['flop_model']):.2f}" if s.get("flop_model") else ""
        P(f"| {s['workload']} | {s['parameter']} | {', '.join(str(x) for x in s['sizes'])} | "
          f"{', '.join(fmt_s(t) for t in s['times'])} ({s['what']}) | **{fit:.2f}** | {s['expected']}{fm} |")
    busy = [f"{lab} ({o:.2f} cores)" for lab, o in B.other.items() if "scaling" in lab and o > LOADED]
    if busy:
        P("")
        P("**Scaling runs measured under load** (other processes' cores meanwhile): " + ", ".join(busy) + ".")
    if "rope-table2" in selected:
        P("")
        P("rope-table2's 12 rate fits have no size knob (fixed n, m, beta of Table 2), so rope-flow's token count n stands in.")
    P("")
    P("## tokdyn's phases (`manifest.json` notes.phase_seconds of the best run)")
    P("")
    for r in rows:
        if r["key"] in ("rope-fits", "sweep"):
            continue
        if r["phases"] is None:
            if r["time"] is not None:
                P(f"- {r['workload']}: {r['phase_src'] or 'no manifest'}.")
            continue
        tot = sum(r["phases"].values())
        P(f"- {r['workload']} ({r['phase_src']}; sum {fmt_s(tot)}): " +
          ", ".join(f"{k} {fmt_s(v)} ({100 * v / tot:.0f} %)" if tot > 0 else f"{k} {fmt_s(v)}" for k, v in r["phases"].items()) + ".")
    P("")
    if B.failures or B.disagree or B.core_mismatch:
        P("## Problems")
        P("")
        for msg in B.core_mismatch:
            P(f"- OpenBLAS kernels differ: {msg}")
        for w, msg in B.failures:
            P(f"- {w}: failed: {msg}")
        for w, msg in B.disagree:
            P(f"- {w}: results disagree: {msg}")
        P("")
    P("## Load seen before and during every measurement")
    P("")
    P("The machine is shared (2 cores); a measurement during which other processes used a sizeable share of the cores "
      "is slower than on an idle machine.")
    P("")
    for line in B.load_log:
        P("- " + line)
    P("")
    return "\n".join(L)


def readme_block(B, info, peaks, rows, out_path):
    L = []
    P = L.append
    quick = " **Quick run** (`--quick`: reduced sizes, one repetition; not the benchmark)." if B.mode == "quick" else ""
    P(f"Generated by `scripts/bench_all.sh{' --quick' if B.mode == 'quick' else ''}` on {info['date']} ({info['cpu']}, {info['cores']} cores, commit `{info['commit']}`; "
      f"full table, growth exponents and phases: `{out_path}`). Peaks in the same run: DGEMM "
      + ", ".join(f"{peaks[('dgemm', t)][0] / 1e9:.1f}" for t in (1, 2) if ("dgemm", t) in peaks)
      + " GFLOP/s, SGEMM " + ", ".join(f"{peaks[('sgemm', t)][0] / 1e9:.1f}" for t in (1, 2) if ("sgemm", t) in peaks)
      + " GFLOP/s (1, 2 threads), OpenBLAS core `" + B.blas_core + "`. Ratio = peer time / tokdyn time." + quick)
    P("")
    if B.other.get(PEAKS_LABEL, 0.0) > LOADED:
        L[0] += " The peaks were measured under load (other processes on the machine), so the % of peak is high."
    bh = f" before (`{B.a.before}`, same run) |" if B.before_tok else ""
    P("| workload | tokdyn | GFLOP/s (% of peak) | peer | ratio |" + bh + " issue 21 baseline |")
    P("| --- | --- | --- | --- | --- |" + (" --- |" if B.before_tok else "") + " --- |")
    for r in rows:
        bc = f" {before_cell(r)} |" if B.before_tok else ""
        if r["time"] is None:
            P(f"| {r['workload']} | {r['error'] or 'n/a'} | | | |{bc} {r['baseline']} |")
            continue
        if any(o > LOADED for _, o in r["load"]):
            r = dict(r, workload=r["workload"] + " (measured under load)")
        p = pct(r, peaks)
        gf = (f"{r['gflop'] / r['time']:.1f} ({p:.0f} % of {peak_label(r['peak'])})" if r["gflop"] is not None and p is not None
              else "n/a")
        if r["peers"]:
            peer = "; ".join(f"{p['name']} {fmt_s(p['time'])}" + (" (scaled)" if "scaled" in p["note"] else "") for p in r["peers"])
        else:
            peer = "none"
        _, ratio, _ = peer_cells(r)
        P(f"| {r['workload']} | {fmt_s(r['time'])} | {gf} | {peer} | {ratio} |{bc} {r['baseline']} |")
    return "\n".join(L)


def update_readme(block):
    path = HERE / "README.md"
    text = path.read_text()
    begin, end = "<!-- bench_all:begin -->", "<!-- bench_all:end -->"
    new = f"{begin}\n{block}\n{end}"
    if begin in text and end in text and text.index(begin) < text.index(end):
        text = text[:text.index(begin)] + new + text[text.index(end) + len(end):]
    else:
        mm = re.search(r"^## Speed[ \t]*\n", text, re.M)
        if not mm:
            raise BenchError("README.md has no '## Speed' heading")
        text = text[:mm.end()] + "\n" + new + "\n" + text[mm.end():]
    path.write_text(text)


# ---------------------------------------------------------------------------------------------

def main(argv):
    a = parse_args(argv)
    if a.check_args:  # bench_all.sh: the options are valid; print the workloads selected
        print(" ".join(w for w in WORKLOADS if a.only is None or w in a.only))
        return 0
    mode = "quick" if a.quick else "full"
    selected = [w for w in WORKLOADS if a.only is None or w in a.only]
    # A full subset run does not overwrite the full results: bench/results-subset.md.
    default = "results-quick.md" if a.quick else ("results.md" if a.only is None else "results-subset.md")
    out = Path(a.out) if a.out else HERE / "bench" / default
    build = Path(a.build).resolve()
    for exe in ("tokdyn", "tokdyn_bench"):
        if not os.access(build / exe, os.X_OK):
            sys.stderr.write(f"bench_all: {build / exe} missing: build it (scripts/bench_all.sh builds it)\n")
            return 1
    if not os.access("/usr/bin/time", os.X_OK):
        sys.stderr.write("bench_all: /usr/bin/time (GNU time) missing: scripts/bench_all.sh installs it\n")
        return 1
    if a.openblas_coretype:
        os.environ["OPENBLAS_CORETYPE"] = a.openblas_coretype
    work = Path(tempfile.mkdtemp(prefix="tokdyn-bench-all."))
    B = Bench(a, mode, work)
    B.before_commit = None
    if a.before:
        if not a.before_tokdyn or not os.access(a.before_tokdyn, os.X_OK):
            sys.stderr.write("bench_all: --before needs REF's build: run scripts/bench_all.sh, which builds it\n")
            return 1
        r = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", f"{a.before}^{{commit}}"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        B.before_commit = r.stdout.strip() or "?"
    started = time.monotonic()
    try:
        info = machine_info(build)
        B.log(f"{mode} run of {', '.join(selected)}; work directory {work}")
        peaks, peak_rows, ctx, peak_reps = measure_peaks(B)
        B.blas_core = ctx.get("openblas_corename", "?")
        rows, scaling = [], []
        for w in selected:
            B.log(f"== {w}")
            t0 = time.monotonic()
            try:
                r, s = RUNNERS[w](B)
                rows += r
                scaling += s
            except Exception as e:  # noqa: BLE001 -- one workload's failure must not lose the others' results
                msg = f"{type(e).__name__}: {e}" if not isinstance(e, BenchError) else str(e)
                if not isinstance(e, BenchError):
                    traceback.print_exc()
                B.failures.append((w, msg))
                row = new_row(w, w, {"mamba2-fig1": "mamba2-fig1", "ssm-random-silu": "ssm-random-silu",
                                     "cocycle-spectra": "cocycle-256", "rope-table2": "rope-table2"}.get(w, w))
                row["error"] = f"failed: {msg}"
                rows.append(row)
                B.log(f"{w} failed: {msg}")
            B.log(f"{w} took {time.monotonic() - t0:.0f} s")
        total = time.monotonic() - started
        md = render(B, info, peaks, peak_rows, ctx, peak_reps, rows, scaling, selected, started, total)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(md)
        B.log(f"wrote {out} ({total / 60:.1f} min)")
        do_readme = a.readme or (mode == "full" and a.only is None and not a.no_readme)
        if do_readme:
            try:
                rel = os.path.relpath(out, HERE)
            except ValueError:
                rel = str(out)
            update_readme(readme_block(B, info, peaks, rows, rel))
            B.log(f"updated the generated table in {HERE / 'README.md'}")
        print(md)
    finally:
        if a.keep:
            B.log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if B.failures or B.disagree:
        for w, msg in B.failures:
            sys.stderr.write(f"bench_all: {w} failed: {msg}\n")
        for w, msg in B.disagree:
            sys.stderr.write(f"bench_all: {w}: results disagree: {msg}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
