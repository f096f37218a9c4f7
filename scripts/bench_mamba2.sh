#!/usr/bin/env bash
# Benchmark of the preset mamba2-fig1 at full size (Mamba-2 130m checkpoint, runs=50, tokens=50,
# depth=200, both variants gate / no_gate) on this machine, against the machine's OpenBLAS SGEMM
# peak, a straightforward NumPy implementation of the same workload (python/numpy_mamba2_fig1.py) and a
# straightforward batched PyTorch-CPU one (python/torch_mamba2_fig1.py, Debian's python3-torch), all in
# one run. Writes bench/results-mamba2-fig1.md (and prints it).
#
# Usage: scripts/bench_mamba2.sh [BUILD_DIR]     (default BUILD_DIR: build-bench)
# Environment knobs (defaults in brackets):
#   BENCH_THREADS [2]        threads for tokdyn, the SGEMM peak, the micro-benchmarks, NumPy's OpenBLAS and
#                            PyTorch (torch.set_num_threads)
#   BENCH_REPS [3]           tokdyn runs; the best (smallest) wall time is reported
#   BENCH_SGEMM_REPS [3]     repetitions of the SGEMM peak (min time 2 s each); the best is reported
#   BENCH_NUMPY_DEPTH [200]  layers timed for NumPy; below the tokdyn depth the time is scaled linearly
#                            to it (per-layer cost does not depend on depth) and the table says so
#   BENCH_NUMPY_REPS [1]     NumPy timings; the best is reported
#   BENCH_TORCH_DEPTH [200]  layers timed for PyTorch (scaled to the tokdyn depth as BENCH_NUMPY_DEPTH)
#   BENCH_TORCH_REPS [1]     PyTorch timings; the best is reported
#   BENCH_MICRO [1]          0: skip the micro-benchmarks (workload GEMM shapes, one mixer call)
#   BENCH_IDLE_WAIT [300]    seconds to wait, before each measurement, for the machine to be idle
#   BENCH_RUNS, BENCH_DEPTH  smaller tokdyn / NumPy runs, only to check this script quickly
#   BENCH_KEEP               set: keep the raw outputs (work directory under /tmp)
#   BENCH_OUT [bench/results-mamba2-fig1.md]
# tokdyn, NumPy and PyTorch get the same token ids (drawn as the NumPy script draws them, passed to
# tokdyn with --set token_ids=...), so their final lambda1 / pr are comparable: each peer's means over
# runs must equal tokdyn's at the peer's depth within the tolerances of python/check_ref_mamba2.py's
# NumPy check (lambda1: 1e-4 absolute, pr: 1e-4 relative); the table says so, and the script exits 1
# (after writing the table) when they do not.
# The machine has 2 cores: run it on an otherwise idle machine; the load (uptime) before and
# after is recorded in the results file.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-bench}
threads=${BENCH_THREADS:-2}
reps=${BENCH_REPS:-3}
sgemm_reps=${BENCH_SGEMM_REPS:-3}
np_reps=${BENCH_NUMPY_REPS:-1}
th_reps=${BENCH_TORCH_REPS:-1}
micro=${BENCH_MICRO:-1}
out_md=${BENCH_OUT:-$here/bench/results-mamba2-fig1.md}
py=/usr/bin/python3  # Debian's, with numpy and torch (not whatever python3 is first on PATH)
bench_name=bench_mamba2

# Full size of the preset (its defaults). BENCH_RUNS / BENCH_DEPTH shrink the end-to-end runs for a
# quick check of this script only (the micro-benchmarks stay at full size).
RUNS=${BENCH_RUNS:-50} DEPTH=${BENCH_DEPTH:-200} LEN=50 SEED=0
np_depth=${BENCH_NUMPY_DEPTH:-200}
[ "$np_depth" -le "$DEPTH" ] || np_depth=$DEPTH
th_depth=${BENCH_TORCH_DEPTH:-200}
[ "$th_depth" -le "$DEPTH" ] || th_depth=$DEPTH

work=$(mktemp -d /tmp/tokdyn-bench-mamba2.XXXXXX)
[ -n "${BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT

# log, cpu_jiffies, wait_idle (appends to $work/load_log.txt), measured (appends to
# $work/other_load.txt), ensure_gnu_time.
# shellcheck source=scripts/bench_lib.sh
source "$here/scripts/bench_lib.sh"

ensure_gnu_time
[ -x "$py" ] || { echo "bench_mamba2: $py (Debian's python3 with numpy) is missing: run scripts/setup.sh" >&2; exit 1; }
# PyTorch-CPU for the torch peer: Debian's python3-torch, installed as GNU time is.
if ! "$py" -c "import torch" 2>/dev/null; then
  log "installing python3-torch (Debian's PyTorch, for python/torch_mamba2_fig1.py)"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
fi

if [ ! -f "$build/build.ninja" ]; then
  log "configuring (Release, Ninja) in $build"
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOKDYN_BENCH=ON >/dev/null
fi
log "building tokdyn and tokdyn_bench in $build"
cmake --build "$build" -j 2 --target tokdyn tokdyn_bench >/dev/null

uptime >"$work/load_before.txt"
log "load before: $(cat "$work/load_before.txt")"

# (a) SGEMM peak of this machine's OpenBLAS (the library tokdyn links), n = 4096, 1 and $threads
# threads, best of $sgemm_reps repetitions interleaved in random order.
log "(a) SGEMM peak (n = 4096, 1 and $threads threads)"
wait_idle sgemm
"$build/tokdyn_bench" --benchmark_filter="^BM_Sgemm/n:4096/threads:(1|$threads)/" --benchmark_min_time=2 \
  --benchmark_repetitions="$sgemm_reps" --benchmark_enable_random_interleaving=true \
  --benchmark_out="$work/sgemm.json" --benchmark_out_format=json >"$work/sgemm.txt"

# (b) The checkpoint: a freshly initialised 130m model in the reference layout (timed too).
log "(b) tokdyn make-checkpoint --size 130m --seed 0"
measured checkpoint "$work/ck_time.txt" "$build/tokdyn" make-checkpoint --size 130m --seed 0 --out "$work/ck" >"$work/ck.log"

# Token ids exactly as python/numpy_mamba2_fig1.py draws them (default_rng(seed).integers(0,
# vocab_size, (runs, tokens))), for tokdyn's --set token_ids.
"$py" - "$work/ck" "$work/ids.npy" "$RUNS" "$LEN" "$SEED" "$here/python" <<'EOF'
import sys
import numpy as np
ck, out, runs, tokens, seed, pydir = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
sys.path.insert(0, pydir)
from ref_mamba2 import load_config
cfg = load_config(ck)
ids = np.random.default_rng(seed).integers(0, cfg["vocab_size"], size=(runs, tokens))
np.save(out, ids.astype(np.int64))
EOF

# (c) tokdyn at full size, best of $reps, with peak RSS.
for i in $(seq 1 "$reps"); do
  log "(c) tokdyn run mamba2-fig1, runs=$RUNS depth=$DEPTH, --threads $threads (run $i of $reps)"
  wait_idle "tokdyn$i"
  measured "tokdyn$i" "$work/time$i.txt" "$build/tokdyn" run mamba2-fig1 --out "$work/run$i" \
    --set checkpoint="$work/ck" --set token_ids="$work/ids.npy" --set runs="$RUNS" --set tokens="$LEN" \
    --set depth="$DEPTH" --threads "$threads" --no-figures --quiet >"$work/run$i.log"
  cp "$work/run$i/manifest.json" "$work/manifest$i.json"
  cp "$work/run$i/metrics.csv" "$work/metrics$i.csv"
  rm -rf "$work/run$i"
done

# (d) NumPy on the same workload (BLAS threads = $threads; OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE
# unset for this command only, as scripts/bench.sh does).
for i in $(seq 1 "$np_reps"); do
  log "(d) NumPy, runs=$RUNS depth=$np_depth (run $i of $np_reps)"
  wait_idle "numpy$i"
  measured "numpy$i" "$work/np_time$i.txt" env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
    OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads" \
    "$py" "$here/python/numpy_mamba2_fig1.py" --checkpoint "$work/ck" --runs "$RUNS" --tokens "$LEN" \
    --depth "$np_depth" --seed "$SEED" >"$work/numpy$i.json"
done

# (d2) PyTorch-CPU on the same workload (torch.set_num_threads($threads); OpenMP and BLAS threads the
# same; OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset as for NumPy).
for i in $(seq 1 "$th_reps"); do
  log "(d2) PyTorch, runs=$RUNS depth=$th_depth (run $i of $th_reps)"
  wait_idle "torch$i"
  measured "torch$i" "$work/th_time$i.txt" env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
    OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads" \
    "$py" "$here/python/torch_mamba2_fig1.py" --checkpoint "$work/ck" --runs "$RUNS" --tokens "$LEN" \
    --depth "$th_depth" --seed "$SEED" --threads "$threads" >"$work/torch$i.json"
done

# (e) Micro-benchmarks: the workload's GEMM shapes and one mixer call (5 repetitions each,
# interleaved in random order; the best is taken).
if [ "$micro" = 1 ]; then
  log "(e) micro-benchmarks (GEMM shapes, one mixer call)"
  wait_idle micro
  "$build/tokdyn_bench" --benchmark_filter="^(BM_SgemmShape|BM_SgemmShapeUnblocked|BM_Mamba2Mixer)/.*threads:$threads/" \
    --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
    --benchmark_out="$work/micro.json" --benchmark_out_format=json >"$work/micro.txt"
fi
uptime >"$work/load_after.txt"

commit=$(git -C "$here" describe --always --dirty 2>/dev/null || echo unknown)

"$py" - "$work" "$out_md" "$here/python" "$commit" "$threads" "$reps" "$np_reps" "$np_depth" "$RUNS" "$DEPTH" "$LEN" \
  "$th_reps" "$th_depth" <<'EOF'
import csv, datetime, glob, json, os, re, struct, subprocess, sys
work, out_md, pydir, commit = sys.argv[1:5]
threads, reps, np_reps, np_depth, RUNS, DEPTH, LEN, th_reps, th_depth = map(int, sys.argv[5:])
sys.path.insert(0, pydir)
from ref_mamba2 import load_config

def gnu_time(path):
    t = open(path).read()
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
    el = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", t).group(1).split(":")
    secs = sum(float(x) * 60 ** (len(el) - 1 - i) for i, x in enumerate(el))
    user = float(re.search(r"User time \(seconds\): (\S+)", t).group(1))
    sysm = float(re.search(r"System time \(seconds\): (\S+)", t).group(1))
    return secs, rss, user + sysm, sysm

def best_by_name(path):
    """Best (smallest real time) repetition of every benchmark: {name: run}, context."""
    if not os.path.exists(path):
        return {}, {}
    j = json.load(open(path))
    best = {}
    for b in j["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        n = b["run_name"].replace("/real_time", "")
        if n not in best or b["real_time"] < best[n]["real_time"]:
            best[n] = b
    return best, j["context"]

# Share of the machine (cores) that other processes used during each measured command.
other = {}
for line in open(f"{work}/other_load.txt"):
    label, a1, b1, t0, t1, tck = line.split()
    other[label] = (float(b1) - float(a1)) / float(tck), float(t1) - float(t0)
def other_cores(label, own_cpu):
    busy, el = other[label]
    return max(busy - own_cpu, 0.0) / el

to_ms = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
ms = lambda b: b["real_time"] * to_ms[b["time_unit"]]
MiB = 1024.0 * 1024.0

# (a) SGEMM peak.
sg, ctx = best_by_name(f"{work}/sgemm.json")
peak = sg[f"BM_Sgemm/n:4096/threads:{threads}"]["GFLOP/s"] * 1e9
peak1 = sg["BM_Sgemm/n:4096/threads:1"]["GFLOP/s"] * 1e9 if "BM_Sgemm/n:4096/threads:1" in sg else float("nan")

# (b) checkpoint: its weights as float (the model in memory: every tensor widened to fp32).
ck = f"{work}/ck"
cfg = load_config(ck)
n_params = 0
for f in glob.glob(f"{ck}/*.safetensors"):
    with open(f, "rb") as fh:
        (hlen,) = struct.unpack("<Q", fh.read(8))
        hdr = json.loads(fh.read(hlen))
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        n = 1
        for s in v["shape"]:
            n *= s
        n_params += n
weights_bytes = 4 * n_params
ck_secs, ck_rss, ck_cpu, _ = gnu_time(f"{work}/ck_time.txt")
ck_bytes = sum(os.path.getsize(f) for f in glob.glob(f"{ck}/*"))

# FLOPs per layer and variant (2 per multiply-add; = Engine::flops(runs, tokens)):
#   2 RT d cols_in + 2 RT di d + 2 runs (G T^2 N + H T^2 P)
d, di, N, H, P, G = cfg["d_model"], cfg["d_inner"], cfg["d_state"], cfg["nheads"], cfg["headdim"], cfg["ngroups"]
cols_gate = 2 * di + 2 * G * N + H
RT, T = RUNS * LEN, LEN
def layer_flops(cols):
    return {"in_proj  2 RT d cols_in": 2 * RT * d * cols,
            "out_proj  2 RT di d": 2 * RT * di * d,
            "SSD  2 runs (G T^2 N + H T^2 P)": 2 * RUNS * (G * T * T * N + H * T * T * P)}
fl = {"gate": layer_flops(cols_gate), "no_gate": layer_flops(cols_gate - di)}
per_layer = {v: sum(x.values()) for v, x in fl.items()}
total = DEPTH * sum(per_layer.values())

# (c) tokdyn runs.
td = []
for i in range(1, reps + 1):
    secs, rss, cpu, sysm = gnu_time(f"{work}/time{i}.txt")
    man = json.load(open(f"{work}/manifest{i}.json"))
    td.append({"i": i, "elapsed": secs, "rss_kb": rss, "cpu": cpu, "sys": sysm, "wall_manifest": man.get("wall_time_s"),
               "other": other_cores(f"tokdyn{i}", cpu)})
tb = min(td, key=lambda r: r["elapsed"])
t_tok = tb["elapsed"]
gf = total / t_tok

def finals(path, layer):
    """{variant: (lambda1_mean, pr_mean)} at `layer` from a metrics.csv."""
    out = {}
    with open(path) as f:
        rd = csv.reader(f)
        head = next(rd)
        il, i1, ip = head.index("layer"), head.index("lambda1_mean"), head.index("pr_mean")
        for row in rd:
            if int(row[il]) == layer:
                out[row[0]] = (float(row[i1]), float(row[ip]))
    return out
tok_final = finals(f"{work}/metrics{tb['i']}.csv", DEPTH)
tok_at_np = finals(f"{work}/metrics{tb['i']}.csv", np_depth)
tok_at_th = finals(f"{work}/metrics{tb['i']}.csv", th_depth)

# (d) NumPy.
nps = []
for i in range(1, np_reps + 1):
    j = json.load(open(f"{work}/numpy{i}.json"))
    secs, rss, cpu, _ = gnu_time(f"{work}/np_time{i}.txt")
    j["_elapsed"], j["_rss"], j["_other"] = secs, rss, other_cores(f"numpy{i}", cpu)
    nps.append(j)
nb = min(nps, key=lambda j: j["_elapsed"])
scale = DEPTH / np_depth
t_np = nb["_elapsed"] * scale

# (d2) PyTorch.
ths = []
for i in range(1, th_reps + 1):
    j = json.load(open(f"{work}/torch{i}.json"))
    secs, rss, cpu, _ = gnu_time(f"{work}/th_time{i}.txt")
    j["_elapsed"], j["_rss"], j["_other"] = secs, rss, other_cores(f"torch{i}", cpu)
    ths.append(j)
thb = min(ths, key=lambda j: j["_elapsed"])
th_scale = DEPTH / th_depth
t_th = thb["_elapsed"] * th_scale

# Agreement of each peer's final means with tokdyn's at the peer's depth (the tolerances of
# python/check_ref_mamba2.py's NumPy check: lambda1 1e-4 absolute, pr 1e-4 relative).
LAM_ATOL, PR_RTOL = 1e-4, 1e-4
agree = []  # (peer, depth, variant, tok_l1, peer_l1, tok_pr, peer_pr, ok)
for peer, res, dep, tok in (("NumPy", nb, np_depth, tok_at_np), ("PyTorch", thb, th_depth, tok_at_th)):
    for v in ("gate", "no_gate"):
        tl, tp = tok.get(v, (float("nan"), float("nan")))
        pl, pp = res["lambda1_final"][v], res["pr_final"][v]
        ok = abs(pl - tl) <= LAM_ATOL and abs(pp - tp) <= PR_RTOL * abs(tp)
        agree.append((peer, dep, v, tl, pl, tp, pp, ok))
all_agree = all(a[-1] for a in agree)

# (e) micro-benchmarks.
mb, _ = best_by_name(f"{work}/micro.json")

def lscpu(key):
    r = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    m = re.search(r"^%s:\s*(.+)$" % re.escape(key), r, re.M)
    return m.group(1).strip() if m else "?"

lines = []
Pr = lines.append
full = RUNS == 50 and DEPTH == 200
Pr("# Benchmark: `mamba2-fig1` at %s" % ("full size" if full else "REDUCED size (runs = %d, depth = %d: a check of the script, not the benchmark)" % (RUNS, DEPTH)))
Pr("")
Pr("Written by `scripts/bench_mamba2.sh` (Release build) on %s, commit `%s`. Workload: Mamba-2 130m "
   "(`tokdyn make-checkpoint --size 130m --seed 0`), runs = %d, tokens = %d, depth = %d, layers cycled, residual "
   "stream, both variants (gate on / off); `tokdyn run mamba2-fig1 --set checkpoint=... --threads %d --no-figures`. "
   "tokdyn, NumPy and PyTorch get the same token ids (NumPy's `default_rng(0)` draw, passed to tokdyn with "
   "`--set token_ids=`). Wall times on this 2-core machine depend on what else runs: compare within one run "
   "(the load seen before each measurement is listed below)." % (
       datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"), commit, RUNS, LEN, DEPTH, threads))
Pr("")
Pr("Machine: %s, %d cores (%s threads per core); OpenBLAS `%s` (core `%s`); load before: `%s`; after: `%s`." % (
    lscpu("Model name"), os.cpu_count(), lscpu("Thread(s) per core"), ctx.get("openblas_config", "?"),
    ctx.get("openblas_corename", "?"), open(f"{work}/load_before.txt").read().strip(),
    open(f"{work}/load_after.txt").read().strip()))
Pr("")
Pr("Machine load seen before each measurement (each waits up to BENCH_IDLE_WAIT s for < 10 % busy):")
Pr("")
for line in open(f"{work}/load_log.txt"):
    Pr("- " + line.strip())
Pr("")
Pr("| | value |")
Pr("| --- | --- |")
Pr("| tokdyn wall time (best of %d; all: %s s) | **%.1f s** |" % (reps, ", ".join("%.1f" % r["elapsed"] for r in td), t_tok))
Pr("| other processes' load during the best tokdyn run (all runs) | %.2f cores (%s) |" % (
    tb["other"], ", ".join("%.2f" % r["other"] for r in td)))
Pr("| FLOPs of the run (from the shapes, see below) | %.1f GFLOP |" % (total / 1e9))
Pr("| achieved | **%.1f GFLOP/s** |" % (gf / 1e9))
n_sg = sum(1 for b in json.load(open(f"{work}/sgemm.json"))["benchmarks"]
           if b.get("run_type") == "iteration" and b["run_name"].startswith(f"BM_Sgemm/n:4096/threads:{threads}/"))
Pr("| OpenBLAS SGEMM peak, n = 4096, %d threads (best of %d) | %.1f GFLOP/s (1 thread: %.1f) |" % (
    threads, n_sg, peak / 1e9, peak1 / 1e9))
Pr("| achieved / SGEMM peak | **%.0f %%** |" % (100 * gf / peak))
Pr("| peak RSS (GNU time, max resident set size; all runs) | **%.0f MiB** (%s) |" % (
    tb["rss_kb"] / 1024, ", ".join("%.0f" % (r["rss_kb"] / 1024) for r in td)))
Pr("| weights as float (%.1f M parameters x 4 bytes: the model in memory) | %.1f MB (%.0f MiB) |" % (
    n_params / 1e6, weights_bytes / 1e6, weights_bytes / MiB))
Pr("| peak RSS minus the weights, per tokdyn run | %s MiB |" % ", ".join("%.0f" % (r["rss_kb"] / 1024 - weights_bytes / MiB) for r in td))
Pr("| (peak RSS minus the weights) / runs, best run | %.1f MiB per sequence |" % ((tb["rss_kb"] / 1024 - weights_bytes / MiB) / RUNS))
Pr("| CPU time (user + sys) of the best run | %.1f s, of which system %.1f s (%.2f cores busy on average) |" % (
    tb["cpu"], tb["sys"], tb["cpu"] / t_tok))
Pr("| `tokdyn make-checkpoint --size 130m` | %.1f s wall, %.0f MiB peak RSS, checkpoint %.1f MB on disk |" % (
    ck_secs, ck_rss / 1024, ck_bytes / 1e6))
np_note = "" if np_depth == DEPTH else " (measured at depth %d: %.1f s, scaled x%.2f to depth %d)" % (np_depth, nb["_elapsed"], scale, DEPTH)
Pr("| NumPy wall time, same workload%s | **%.1f s** |" % (np_note, t_np))
Pr("| other processes' load during the NumPy run | %.2f cores |" % nb["_other"])
Pr("| NumPy peak RSS | %.0f MiB |" % (nb["_rss"] / 1024))
Pr("| NumPy / tokdyn | **%.1fx** |" % (t_np / t_tok))
th_note = "" if th_depth == DEPTH else " (measured at depth %d: %.1f s, scaled x%.2f to depth %d)" % (th_depth, thb["_elapsed"], th_scale, DEPTH)
Pr("| PyTorch-CPU wall time, same workload%s | **%.1f s** |" % (th_note, t_th))
Pr("| other processes' load during the PyTorch run | %.2f cores |" % thb["_other"])
Pr("| PyTorch peak RSS | %.0f MiB |" % (thb["_rss"] / 1024))
Pr("| PyTorch / tokdyn | **%.1fx** |" % (t_th / t_tok))
Pr("| final lambda1 / pr of NumPy and PyTorch equal tokdyn's (lambda1 within 1e-4, pr within 1e-4 relative) | **%s** |" % (
    "yes" if all_agree else "NO: see below"))
Pr("")
Pr("Final metrics (means over runs; NumPy at its depth %d):" % np_depth)
Pr("")
Pr("| variant | tokdyn lambda1 (layer %d) | tokdyn pr (layer %d) |%s NumPy lambda1 (layer %d) | NumPy pr (layer %d) |" % (
    DEPTH, DEPTH, "" if np_depth == DEPTH else " tokdyn lambda1 (layer %d) | tokdyn pr (layer %d) |" % (np_depth, np_depth),
    np_depth, np_depth))
Pr("| --- | --- | --- |%s --- | --- |" % ("" if np_depth == DEPTH else " --- | --- |"))
for v in ("gate", "no_gate"):
    tf = tok_final.get(v, (float("nan"), float("nan")))
    ta = tok_at_np.get(v, (float("nan"), float("nan")))
    mid = "" if np_depth == DEPTH else " %.6f | %.4f |" % ta
    Pr("| %s | %.6f | %.4f |%s %.6f | %.4f |" % (v, tf[0], tf[1], mid, nb["lambda1_final"][v], nb["pr_final"][v]))
Pr("")
Pr("Agreement at each peer's depth (means over runs; lambda1: |peer - tokdyn| <= %g, pr: |peer - tokdyn| <= %g pr):" % (
    LAM_ATOL, PR_RTOL))
Pr("")
Pr("| peer | layer | variant | tokdyn lambda1 | peer lambda1 | abs. diff | tokdyn pr | peer pr | rel. diff | agree |")
Pr("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for peer, dep, v, tl, pl, tp, pp, ok in agree:
    Pr("| %s | %d | %s | %.6f | %.6f | %.1e | %.4f | %.4f | %.1e | %s |" % (
        peer, dep, v, tl, pl, abs(pl - tl), tp, pp, abs(pp - tp) / abs(tp) if tp else float("nan"), "yes" if ok else "**NO**"))
Pr("")
Pr("FLOPs per layer and variant (2 per multiply-add, counted from the shapes as `Engine::flops`; RT = runs x "
   "tokens = %d, d = %d, di = %d, N = %d, H = %d, P = %d, G = %d, cols_in = %d with the gate, %d without (the z rows "
   "are skipped); the conv, norms, SiLU, softplus, exp and the Gram metrics are not counted):" % (
       RT, d, di, N, H, P, G, cols_gate, cols_gate - di))
Pr("")
Pr("| piece | gate GFLOP | no_gate GFLOP |")
Pr("| --- | --- | --- |")
for k in fl["gate"]:
    Pr("| %s | %.3f | %.3f |" % (k, fl["gate"][k] / 1e9, fl["no_gate"][k] / 1e9))
Pr("| per layer | %.3f | %.3f |" % (per_layer["gate"] / 1e9, per_layer["no_gate"] / 1e9))
Pr("| x %d layers | %.1f | %.1f |" % (DEPTH, DEPTH * per_layer["gate"] / 1e9, DEPTH * per_layer["no_gate"] / 1e9))
Pr("")
Pr("NumPy: %s, run with OPENBLAS_NUM_THREADS=%d (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset)." % (
    subprocess.run(["/usr/bin/python3", "-c", "import numpy, sys; print('numpy %s, Python %s' % (numpy.__version__, sys.version.split()[0]))"],
                   capture_output=True, text=True).stdout.strip(), threads))
Pr("")
Pr("PyTorch: torch %s (Debian's python3-torch), `torch.set_num_threads(%d)`, float32, inference mode; batched over runs: "
   "`F.linear` projections, `F.conv1d` (groups = conv_dim, left padding) for the conv, the SSD in its one-chunk "
   "quadratic form as `einsum` products over runs and heads (`python/torch_mamba2_fig1.py`)." % (thb.get("torch", "?"), threads))
Pr("")

Pr("## Micro-benchmarks (%s)" % ("best of 5 interleaved repetitions" if mb else "skipped: BENCH_MICRO=0"))
Pr("")
Pr("| benchmark | time | GFLOP/s | of SGEMM peak (%d threads) |" % threads)
Pr("| --- | --- | --- | --- |")
rows = [(k, v) for k, v in sorted(sg.items())] + [(k, v) for k, v in mb.items() if k.startswith("BM_SgemmShape")]
rows += [(k, v) for k, v in mb.items() if k.startswith("BM_Mamba2Mixer")]
labels = {f"BM_SgemmShape/m:2500/n:{cols_gate}/k:{d}": "in_proj, gate; fixed tiles as the mixer",
          f"BM_SgemmShape/m:2500/n:{cols_gate - di}/k:{d}": "in_proj, no_gate; fixed tiles as the mixer",
          f"BM_SgemmShape/m:2500/n:{d}/k:{di}": "out_proj; fixed tiles as the mixer",
          f"BM_SgemmShape/m:50/n:{cols_gate}/k:{d}": "in_proj, gate, 50 rows; fixed tiles",
          f"BM_SgemmShape/m:50/n:{d}/k:{di}": "out_proj, 50 rows; fixed tiles",
          f"BM_SgemmShapeUnblocked/m:2500/n:{cols_gate}/k:{d}": "in_proj, gate; one threaded SGEMM",
          f"BM_SgemmShapeUnblocked/m:2500/n:{cols_gate - di}/k:{d}": "in_proj, no_gate; one threaded SGEMM",
          f"BM_SgemmShapeUnblocked/m:2500/n:{d}/k:{di}": "out_proj; one threaded SGEMM",
          f"BM_SgemmShapeUnblocked/m:50/n:{cols_gate}/k:{d}": "in_proj, gate, 50 rows; one threaded SGEMM",
          f"BM_SgemmShapeUnblocked/m:50/n:{d}/k:{di}": "out_proj, 50 rows; one threaded SGEMM",
          "BM_Mamba2Mixer/gate:1": "one mixer call, gate, runs = tokens = 50",
          "BM_Mamba2Mixer/gate:0": "one mixer call, no_gate, runs = tokens = 50"}
for k, b in rows:
    lab = next((v for p, v in labels.items() if k.startswith(p + "/")), "")
    Pr("| `%s`%s | %.1f ms | %.1f | %.0f %% |" % (k, (" (" + lab + ")") if lab else "", ms(b), b["GFLOP/s"], 100 * b["GFLOP/s"] * 1e9 / peak))
Pr("")
mg, mn = mb.get(f"BM_Mamba2Mixer/gate:1/threads:{threads}"), mb.get(f"BM_Mamba2Mixer/gate:0/threads:{threads}")
if mg and mn:
    # Engine::flops from the counter (GFLOP/s x seconds), checked against the formula above at 50 x 50.
    f_g, f_n = mg["GFLOP/s"] * ms(mg) * 1e-3 * 1e9, mn["GFLOP/s"] * ms(mn) * 1e-3 * 1e9
    est = (ms(mg) + ms(mn)) * 1e-3 * DEPTH * (RUNS / 50.0)
    Pr("Mixer calls alone, x %d layers (both variants%s): %.1f s of the %.1f s run (%.0f %%); the rest is the residual "
       "update, the Gram metrics and loading the checkpoint. (Engine::flops per call: %.3f / %.3f GFLOP, gate / no_gate.)" % (
           DEPTH, "" if RUNS == 50 else ", scaled x%.2f to runs = %d" % (RUNS / 50.0, RUNS), est, t_tok, 100 * est / t_tok,
           f_g / 1e9, f_n / 1e9))
    Pr("")

open(out_md, "w").write("\n".join(lines))
print("\n".join(lines))
if not all_agree:
    print("bench_mamba2: the final lambda1 / pr of a peer differ from tokdyn's beyond the tolerance (see the table)", file=sys.stderr)
    sys.exit(1)
EOF
log "wrote $out_md"
