#!/usr/bin/env bash
# Benchmark of the preset ssm-random-silu at full size (runs=50, depth=200, ell=50, n=768, m=128,
# both variants) on this machine, against the machine's OpenBLAS DGEMM peak and a straightforward
# NumPy implementation of the same experiment, all in one run. Writes
# bench/results-ssm-random-silu.md (and prints it).
#
# Usage: scripts/bench.sh [BUILD_DIR]            (default BUILD_DIR: build-bench)
# Environment knobs (defaults in brackets):
#   BENCH_THREADS [2]       threads for tokdyn, the DGEMM peak and NumPy's OpenBLAS
#   BENCH_REPS [3]          full tokdyn runs; the best (smallest) wall time is reported
#   BENCH_NUMPY_DEPTH [200] layers timed for NumPy; below 200 the time is scaled linearly to 200
#                           layers (per-layer cost does not depend on depth) and the table says so
#   BENCH_NUMPY_REPS [1]    NumPy timings; the best is reported
#   BENCH_MICRO [1]         0: skip the per-layer micro-benchmarks
#   BENCH_IDLE_WAIT [300]   seconds to wait, before each measurement, for the machine to be idle
#   BENCH_RUNS, BENCH_DEPTH smaller end-to-end runs, only to check this script quickly
#   BENCH_KEEP              set: keep the raw outputs (work directory under /tmp)
#   BENCH_OUT [bench/results-ssm-random-silu.md]
# The machine has 2 cores: run it on an otherwise idle machine; the load (uptime) before and
# after is recorded in the results file.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-bench}
threads=${BENCH_THREADS:-2}
reps=${BENCH_REPS:-3}
np_depth=${BENCH_NUMPY_DEPTH:-${BENCH_DEPTH:-200}}
np_reps=${BENCH_NUMPY_REPS:-1}
micro=${BENCH_MICRO:-1}
out_md=${BENCH_OUT:-$here/bench/results-ssm-random-silu.md}
py=/usr/bin/python3  # Debian's, with numpy (not whatever python3 is first on PATH)

# Full size of the preset (its defaults). BENCH_RUNS / BENCH_DEPTH shrink the end-to-end runs for a
# quick check of this script only (the micro-benchmarks stay at full size).
RUNS=${BENCH_RUNS:-50} DEPTH=${BENCH_DEPTH:-200} LEN=50 N=768 M=128 NVAR=2

work=$(mktemp -d /tmp/tokdyn-bench.XXXXXX)
[ -n "${BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
# log, cpu_jiffies, wait_idle (appends to $work/load_log.txt), measured (appends to
# $work/other_load.txt), ensure_gnu_time.
# shellcheck source=scripts/bench_lib.sh
source "$here/scripts/bench_lib.sh"

# GNU time for the peak RSS (as scripts/setup.sh installs packages).
ensure_gnu_time
[ -x "$py" ] || { echo "bench: $py (Debian's python3 with numpy) is missing: run scripts/setup.sh" >&2; exit 1; }

log "building (Release) in $build"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOKDYN_BENCH=ON >/dev/null
cmake --build "$build" -j 2 --target tokdyn tokdyn_bench >/dev/null

uptime >"$work/load_before.txt"
log "load before: $(cat "$work/load_before.txt")"

# (a) DGEMM peak of this machine's OpenBLAS (the library tokdyn links), best of 5 repetitions.
log "(a) DGEMM peak"
wait_idle dgemm
"$build/tokdyn_bench" --benchmark_filter='^BM_Dgemm/' --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
  --benchmark_out="$work/dgemm.json" --benchmark_out_format=json >"$work/dgemm.txt"

# (b) tokdyn at full size, best of $reps, with peak RSS.
for i in $(seq 1 "$reps"); do
  log "(b) tokdyn run ssm-random-silu, full size, --threads $threads (run $i of $reps)"
  wait_idle "tokdyn$i"
  measured "tokdyn$i" "$work/time$i.txt" "$build/tokdyn" run ssm-random-silu --out "$work/run$i" \
    --set runs="$RUNS" --set depth="$DEPTH" --threads "$threads" --no-figures --quiet >"$work/run$i.log"
  cp "$work/run$i/manifest.json" "$work/manifest$i.json"
  rm -rf "$work/run$i"
done

# (b') The same without the preset's Assumption III.1 diagnostics (parameter diagnostics, when the
# preset has it): the like-for-like workload of the NumPy implementation, which does not do them.
has_diag=0
if "$build/tokdyn" show ssm-random-silu 2>/dev/null | grep -q '^ *diagnostics'; then has_diag=1; fi
if [ "$has_diag" = 1 ]; then
  for i in $(seq 1 "$reps"); do
    log "(b') tokdyn run ssm-random-silu --set diagnostics=false (run $i of $reps)"
    wait_idle "tokdyn_nodiag$i"
    measured "tokdyn_nodiag$i" "$work/time_nodiag$i.txt" "$build/tokdyn" run ssm-random-silu --out "$work/nd$i" \
      --set runs="$RUNS" --set depth="$DEPTH" --set diagnostics=false --threads "$threads" --no-figures --quiet \
      >"$work/nd$i.log"
    rm -rf "$work/nd$i"
  done
fi

# (c) NumPy on the same workload (BLAS threads = $threads; OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE
# unset for this command only: they slow a current OpenBLAS, see the env notes).
for i in $(seq 1 "$np_reps"); do
  log "(c) NumPy, runs=$RUNS depth=$np_depth (run $i of $np_reps)"
  wait_idle "numpy$i"
  measured "numpy$i" "$work/np_time$i.txt" env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
    OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads" \
    "$py" "$here/python/numpy_ssm_random_silu.py" --runs $RUNS --depth "$np_depth" --tokens $LEN --n $N --m $M \
    --variants both >"$work/numpy$i.json"
done

# (d) Per-layer micro-benchmarks (5 repetitions each, interleaved in random order so that a burst
# of load from elsewhere does not spoil every repetition of one benchmark; the best is taken).
if [ "$micro" = 1 ]; then
  log "(d) per-layer micro-benchmarks"
  wait_idle micro
  "$build/tokdyn_bench" --benchmark_filter='-BM_Dgemm/|BM_Sgemm|BM_Mamba2' --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
    --benchmark_out="$work/micro.json" --benchmark_out_format=json >"$work/micro.txt"
fi
uptime >"$work/load_after.txt"

"$py" - "$work" "$out_md" "$threads" "$reps" "$np_reps" "$np_depth" "$RUNS" "$DEPTH" "$LEN" "$N" "$M" "$NVAR" <<'EOF'
import glob, json, os, re, subprocess, sys
work, out_md = sys.argv[1], sys.argv[2]
threads, reps, np_reps, np_depth, RUNS, DEPTH, LEN, N, M, NVAR = map(int, sys.argv[3:])

def gnu_time(path):
    t = open(path).read()
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
    el = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", t).group(1).split(":")
    secs = sum(float(x) * 60 ** (len(el) - 1 - i) for i, x in enumerate(el))
    user = float(re.search(r"User time \(seconds\): (\S+)", t).group(1))
    sysm = float(re.search(r"System time \(seconds\): (\S+)", t).group(1))
    return secs, rss, user + sysm, sysm

def best_by_name(path):
    """Best (smallest real time) repetition of every benchmark: {name: run}."""
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

# (a) peak: the best DGEMM rate at $threads threads over the shapes measured.
dg, ctx = best_by_name(f"{work}/dgemm.json")
dg_t = {k: v for k, v in dg.items() if k.endswith(f"threads:{threads}")}
peak_name = max(dg_t, key=lambda k: dg_t[k]["FLOPS"])
peak = dg_t[peak_name]["FLOPS"]
peak1 = max((v["FLOPS"] for k, v in dg.items() if k.endswith("threads:1")), default=float("nan"))

# FLOPs of the experiment from the shapes, per layer and variant (N = runs * ell rows):
Nr = RUNS * LEN
flop = {
    "Delta GEMM  Z W_Delta^T     2 N n^2": 2 * Nr * N * N,
    "branch GEMMs Z S_B^T, Z S_C^T  4 N n m": 4 * Nr * N * M,
    "kernels K = C B^T per run  2 ell^2 m": RUNS * 2 * LEN * LEN * M,
    "IO readout loop per run  4 n ell(ell+1)/2": RUNS * 4 * N * LEN * (LEN + 1) // 2,
    "Gram G = Zh Zh^T per run  2 ell^2 n": RUNS * 2 * LEN * LEN * N,
}
per_layer = sum(flop.values())
total = per_layer * DEPTH * NVAR
gemm_total = (flop["Delta GEMM  Z W_Delta^T     2 N n^2"] + flop["branch GEMMs Z S_B^T, Z S_C^T  4 N n m"]) * DEPTH * NVAR

# (b) tokdyn runs.
td = []
for i in range(1, reps + 1):
    secs, rss, cpu, sysm = gnu_time(f"{work}/time{i}.txt")
    man = json.load(open(f"{work}/manifest{i}.json"))  # (the last one is used below for the params)
    td.append({"elapsed": secs, "rss_kb": rss, "cpu": cpu, "sys": sysm, "wall_manifest": man["wall_time_s"],
               "other": other_cores(f"tokdyn{i}", cpu)})
tb = min(td, key=lambda r: r["elapsed"])
t_tok = tb["elapsed"]
gf = total / t_tok
# Time bound if the GEMMs ran at the measured peak and nothing else took time.
t_gemm_peak = gemm_total / peak

# (b') without diagnostics, if run.
tnd = []
for i in range(1, reps + 1):
    if os.path.exists(f"{work}/time_nodiag{i}.txt"):
        secs, rss, cpu, sysm = gnu_time(f"{work}/time_nodiag{i}.txt")
        tnd.append({"elapsed": secs, "other": other_cores(f"tokdyn_nodiag{i}", cpu)})
t_nd = min(r["elapsed"] for r in tnd) if tnd else None

# (c) NumPy.
nps = []
for i in range(1, np_reps + 1):
    j = json.load(open(f"{work}/numpy{i}.json"))
    secs, rss, cpu, _ = gnu_time(f"{work}/np_time{i}.txt")
    j["_elapsed"], j["_rss"], j["_other"] = secs, rss, other_cores(f"numpy{i}", cpu)
    nps.append(j)
nb = min(nps, key=lambda j: j["wall_time_s"])
scale = DEPTH / np_depth
t_np = nb["_elapsed"] * scale
blas = nb["blas"]

# (d) micro-benchmarks.
mb, mctx = best_by_name(f"{work}/micro.json")
def g(name):
    return mb.get(name)

lines = []
P = lines.append
P("# Benchmark: `ssm-random-silu` at full size")
P("")
P("Written by `scripts/bench.sh` (Release build). Workload: the preset's defaults, runs = %d, depth = %d, "
  "ell = %d tokens, n = %d, m = %d, both variants (SiLU on/off), IO form, tau = 1; "
  "`tokdyn run ssm-random-silu --threads %d --no-figures`." % (RUNS, DEPTH, LEN, N, M, threads))
P("")
P("Machine: %s, %d cores; OpenBLAS `%s` (core `%s`); load before: `%s`; after: `%s`." % (
    subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip(),
    os.cpu_count(), ctx.get("openblas_config", "?"), ctx.get("openblas_corename", "?"),
    open(f"{work}/load_before.txt").read().strip(), open(f"{work}/load_after.txt").read().strip()))
P("")
P("Machine load seen before each measurement (each waits up to BENCH_IDLE_WAIT s for < 10 % busy):")
P("")
for line in open(f"{work}/load_log.txt"):
    P("- " + line.strip())
P("")
P("| | value |")
P("| --- | --- |")
P("| tokdyn wall time (best of %d; all: %s s) | **%.1f s** |" % (reps, ", ".join("%.1f" % r["elapsed"] for r in td), t_tok))
P("| other processes' load during the best tokdyn run (all runs) | %.2f cores (%s) |" % (tb["other"], ", ".join("%.2f" % r["other"] for r in td)))
P("| FLOPs of the experiment (from the shapes, see below) | %.3f TFLOP |" % (total / 1e12))
P("| achieved | **%.1f GFLOP/s** |" % (gf / 1e9))
P("| OpenBLAS DGEMM peak, %d threads (`%s`) | %.1f GFLOP/s (1 thread: %.1f) |" % (threads, peak_name, peak / 1e9, peak1 / 1e9))
P("| achieved / DGEMM peak | **%.0f %%** |" % (100 * gf / peak))
P("| time if the GEMMs (%.0f %% of the FLOPs) ran at peak and all else were free | %.1f s (tokdyn at %.0f %% of this bound) |" % (
    100 * gemm_total / total, t_gemm_peak, 100 * t_gemm_peak / t_tok))
P("| peak RSS (GNU time, max resident set size) | **%.0f MiB** |" % (tb["rss_kb"] / 1024))
P("| CPU time (user + sys) of the best run | %.1f s, of which system %.1f s (%.2f cores busy on average; idle OpenMP/OpenBLAS threads spin) |" % (tb["cpu"], tb["sys"], tb["cpu"] / t_tok))
np_note = "" if np_depth == DEPTH else " (measured at depth %d: %.1f s, scaled x%.2f to depth %d)" % (np_depth, nb["_elapsed"], scale, DEPTH)
P("| NumPy wall time, same workload%s | **%.1f s** |" % (np_note, t_np))
P("| other processes' load during the NumPy run | %.2f cores |" % nb["_other"])
P("| NumPy peak RSS | %.0f MiB |" % (nb["_rss"] / 1024))
P("| NumPy / tokdyn | **%.1fx** |" % (t_np / t_tok))
if t_nd is not None:
    P("| tokdyn without the preset's Assumption III.1 diagnostics (`--set diagnostics=false`, which NumPy does not do either; best of %d: %s s) | %.1f s |" % (
        len(tnd), ", ".join("%.1f" % r["elapsed"] for r in tnd), t_nd))
    P("| NumPy / tokdyn, like for like (no diagnostics) | **%.1fx** |" % (t_np / t_nd))
P("")
P("FLOPs per layer and variant (counted from the shapes; elementwise work, transcendentals and "
  "the 50x50 eigensolvers are not counted):")
P("")
P("| piece | GFLOP per layer |")
P("| --- | --- |")
for k, v in flop.items():
    P("| %s | %.3f |" % (k, v / 1e9))
P("| total per layer (x %d layers x %d variants = %.3f TFLOP) | %.3f |" % (DEPTH, NVAR, total / 1e12, per_layer / 1e9))
P("")
P("NumPy: numpy %s, Python %s, BLAS `%s` (core `%s`, %s threads), run with OPENBLAS_CORETYPE and "
  "OPENBLAS_L2_SIZE unset; libraries: %s. Its own phase times (s, at depth %d): %s." % (
    nb["numpy"], nb["python"], blas.get("openblas_config", "?"), blas.get("openblas_corename", "?"),
    blas.get("openblas_threads", "?"), ", ".join("`%s`" % l for l in blas.get("libraries", [])), np_depth,
    ", ".join("%s %.1f" % (k, v) for k, v in sorted(nb["phases_s"].items(), key=lambda kv: -kv[1]))))
P("")

if mb:
    # Per-layer breakdown at $threads threads: one layer of one variant, SiLU on.
    T = threads
    parts = []
    def add(label, t, kind):
        if t is not None:
            parts.append((label, t, kind))
    def t_of(name, mult=1.0):
        b = g(name)
        return None if b is None else ms(b) * mult
    add("draw one layer's weights (draw_ssm_layer, 1 thread)", t_of("BM_DrawLayer"), "random draws")
    t_delta, t_bc = t_of(f"BM_DgemmDelta/threads:{T}"), t_of(f"BM_DgemmBC/threads:{T}")
    add("GEMM Z W_Delta^T (2500x768x768, OpenBLAS)", t_delta, "matrix products")
    add("GEMMs Z S_B^T, Z S_C^T (2 x 2500x768x128, OpenBLAS)", t_bc, "matrix products")
    t_br = t_of(f"BM_Branches/silu:1/threads:{T}")
    if t_br is not None and t_delta is not None and t_bc is not None:
        add("elementwise transcendentals of ssm_branches: softplus, A = exp(-alpha Delta), SiLU (ssm_branches minus its GEMMs)",
            max(t_br - t_delta - t_bc, 0.0), "transcendentals")
    add("readout: K = C B^T and the O(ell^2 n) IO sums, 50 runs (OpenMP over runs)", t_of(f"BM_ReadoutBatch/rec:0/threads:{T}"), "readout (IO sums)")
    add("update z <- pi(z + tau r) (1 thread, incl. allocating R)", t_of("BM_Update"), "elementwise")
    add("metrics: gram_metrics + consensus_distance of 50 runs", t_of(f"BM_GramObserve/threads:{T}"), "eigenvalues / metrics")
    diag_on = bool(man.get("params", {}).get("diagnostics", False))
    dg_b = g(f"BM_Diagnostics/threads:{T}")
    t_diag = (1e3 / dg_b["layers"]) if dg_b is not None and "layers" in dg_b else None
    # The diagnostics' share: BM_Diagnostics in isolation (steadier than the difference of the
    # full runs with and without them, which is shown alongside).
    t_diag_e2e = (t_tok - t_nd) * 1e3 / DEPTH if (diag_on and t_nd is not None) else None
    if diag_on and t_diag is not None:
        e2e = (", full runs with minus without: %.1f ms per layer" % t_diag_e2e) if t_diag_e2e is not None else ""
        add("Assumption III.1 diagnostics (assumption_diagnostics: S_BC, 768x768 eigenvalues), once per layer for both variants (BM_Diagnostics: %.1f ms per layer%s): per layer and variant" % (
            t_diag, e2e), t_diag / NVAR, "diagnostics (S_BC, eigenvalues)")
    whole = t_of(f"BM_PresetLayer/silu:1/threads:{T}")
    s = sum(p[1] for p in parts)
    P("## Per-layer breakdown (%d threads, SiLU on; best of 5 interleaved repetitions of each micro-benchmark)" % T)
    P("")
    P("| piece | ms per layer | share of the sum |")
    P("| --- | --- | --- |")
    for label, t, kind in parts:
        P("| %s | %.2f | %.0f %% |" % (label, t, 100 * t / s))
    P("| sum of the pieces | %.1f | |" % s)
    if whole is not None:
        extra = (t_diag / NVAR) if diag_on and t_diag is not None else 0.0
        P("| one whole preset layer measured (BM_PresetLayer: draw + apply + q sink + GramObserver)%s | %.1f | |" % (
            " + diagnostics share" if extra else "", whole + extra))
        P("| whole layer minus the pieces (page faults of the buffers apply() allocates afresh every layer, q sink, thread hand-offs) | %.1f | |" % (whole + extra - s))
        P("| x %d layers x %d variants | %.1f s (the full run took %.1f s) | |" % (DEPTH, NVAR, (whole + extra) * DEPTH * NVAR / 1e3, t_tok))
    P("")
    kinds = {}
    for label, t, kind in parts:
        kinds[kind] = kinds.get(kind, 0.0) + t
    P("By kind: " + ", ".join("%s %.0f %%" % (k, 100 * v / s) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])) + ".")
    P("")
    P("## All micro-benchmarks (best of 5 interleaved repetitions)")
    P("")
    P("Counters: FLOPS (from the shapes), exps (transcendental evaluations), draws (random numbers), layers (diagnosed layers), all per second of wall time.")
    P("")
    P("| benchmark | time | FLOP/s | exps/s | draws/s | layers/s |")
    P("| --- | --- | --- | --- | --- | --- |")
    allb = dict(dg)
    allb.update(mb)
    for name, b in sorted(allb.items()):
        f = lambda key, sc, unit: ("%.2f %s" % (b[key] / sc, unit)) if key in b else ""
        P("| `%s` | %.3f ms | %s | %s | %s | %s |" % (name, ms(b), f("FLOPS", 1e9, "G"), f("exps", 1e9, "G"),
                                                  f("draws", 1e9, "G"), f("layers", 1.0, "")))
    P("")

open(out_md, "w").write("\n".join(lines))
print("\n".join(lines))
EOF
log "wrote $out_md"
