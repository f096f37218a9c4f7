"""bench_all's measurement machinery (the idea of scripts/bench_lib.sh: wait_idle, measured), result
rows, the GEMM peaks and the machine's description."""
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .config import BASELINE, HERE, PY, SIZES


class BenchError(Exception):
    pass


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
