#!/usr/bin/env bash
# Benchmark of the preset depth-spectra at full size: the top-16 Lyapunov exponents of the depth map
# of mamba2-130m (a make-checkpoint model, seed 0; blocks cycled) to depth 200 on 50 tokens, through
# the exact double-precision forward-mode JVP (mamba2::BlockMap::step_double_tangents: the value of
# the one-run state once, the k = 16 tangents sharing it, one call per layer), against the machine's
# OpenBLAS DGEMM peak
# measured in the same script (the JVP runs in double). Writes bench/results-depth-spectra.md (and
# prints it).
#
# Usage: scripts/bench_depth_spectra.sh [BUILD_DIR]     (default BUILD_DIR: build-bench)
# Environment knobs (defaults in brackets):
#   BENCH_THREADS [2]       threads for tokdyn and the DGEMM peak
#   BENCH_REPS [2]          tokdyn runs; the best (smallest) wall time is reported
#   BENCH_DGEMM_REPS [3]    repetitions of the DGEMM peak (n = 4096 with BENCH_THREADS = 2, else n = 2048)
#   BENCH_IDLE_WAIT [300]   seconds to wait, before each measurement, for the machine to be idle
#   BENCH_DEPTH [200]       a smaller depth, only to check this script quickly
#   BENCH_KEEP              set: keep the raw outputs (work directory under /tmp)
#   BENCH_OUT [bench/results-depth-spectra.md]
# Flop count (per layer, from the shapes; cfg = the checkpoint's config): one fp32 forward step of
# R = k runs of T tokens is BlockMap::flops(R, T) = 2 (R T d d_in_proj + R T d_inner d) [GEMMs]
# + 2 R (G T^2 N + H T^2 P) [SSD]. step_double_tangents computes the value once (R = 1: the
# projections on T rows, C B^T and M X once) and each of the k tangents once (the projections on k T
# rows; in the SSD two products per product of the forward pass: dC B^T + C dB^T, dM X + M dX).
# Counted: (1 + k) x GEMM part + (1 + 2 k) x SSD part, at R = 1 (the flops performed). Plus the
# thin Householder QR of the (T d) x k tangent matrix, 4 (T d) k^2. Pointwise work (norms, conv,
# SiLU, exp) is not counted.
# The machine has 2 cores shared with other engineers: each measurement waits for an idle machine
# (at most BENCH_IDLE_WAIT s), and the load before/after and the share of the machine other processes
# used during each measurement are recorded in the results file.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-bench}
threads=${BENCH_THREADS:-2}
reps=${BENCH_REPS:-2}
dgemm_reps=${BENCH_DGEMM_REPS:-3}
out_md=${BENCH_OUT:-$here/bench/results-depth-spectra.md}
py=/usr/bin/python3
bench_name=bench_depth_spectra
K=16 DEPTH=${BENCH_DEPTH:-200} LEN=50 BURN=20 SEED=0
[ "$BURN" -lt "$DEPTH" ] || BURN=0
if [ "$threads" -ge 2 ]; then dg_n=4096; dg_t=2; else dg_n=2048; dg_t=1; fi

work=$(mktemp -d /tmp/tokdyn-bench-depthspec.XXXXXX)
[ -n "${BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT

# log, cpu_jiffies, wait_idle (appends to $work/load_log.txt), measured (appends to
# $work/other_load.txt), ensure_gnu_time.
# shellcheck source=scripts/bench_lib.sh
source "$here/scripts/bench_lib.sh"
ensure_gnu_time

if [ ! -f "$build/build.ninja" ]; then
  log "configuring (Release, Ninja) in $build"
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOKDYN_BENCH=ON >/dev/null
fi
log "building tokdyn and tokdyn_bench in $build"
cmake --build "$build" -j 2 --target tokdyn tokdyn_bench >/dev/null

uptime >"$work/load_before.txt"
log "load before: $(cat "$work/load_before.txt")"

log "(a) checkpoint: tokdyn make-checkpoint --size 130m --seed 0"
"$build/tokdyn" make-checkpoint --size 130m --seed 0 -o "$work/ck" >/dev/null

log "(b) DGEMM peak (n = $dg_n, $dg_t threads)"
wait_idle dgemm
"$build/tokdyn_bench" --benchmark_filter="^BM_Dgemm/n:$dg_n/threads:$dg_t/" --benchmark_min_time=2 \
  --benchmark_repetitions="$dgemm_reps" --benchmark_out="$work/dgemm.json" --benchmark_out_format=json >"$work/dgemm.txt"

for i in $(seq 1 "$reps"); do
  log "(c) tokdyn run depth-spectra model=mamba2 k=$K tokens=$LEN depth=$DEPTH --threads $threads (run $i of $reps)"
  wait_idle "tokdyn$i"
  measured "tokdyn$i" "$work/time$i.txt" "$build/tokdyn" run depth-spectra --out "$work/run$i" \
    --set model=mamba2 --set checkpoint="$work/ck" --set k="$K" --set tokens="$LEN" --set depth="$DEPTH" \
    --set burn_in="$BURN" --set seed="$SEED" --threads "$threads" --no-figures --quiet >"$work/run$i.log"
  cp "$work/run$i/lyapunov.csv" "$work/lyapunov$i.csv"
  cp "$work/run$i/manifest.json" "$work/manifest$i.json"
  rm -rf "$work/run$i"
done
uptime >"$work/load_after.txt"

"$py" - "$work" "$reps" "$threads" "$K" "$LEN" "$DEPTH" "$BURN" "$dg_n" "$dg_t" "$dgemm_reps" >"$out_md" <<'EOF'
import json, os, re, sys
work, reps, threads, K, T, depth, burn, dg_n, dg_t, dgemm_reps = sys.argv[1], *map(int, sys.argv[2:11])

def gnu_time(path):
    t = open(path).read()
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
    el = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", t).group(1).split(":")
    secs = sum(float(x) * 60 ** (len(el) - 1 - i) for i, x in enumerate(el))
    user = float(re.search(r"User time \(seconds\): (\S+)", t).group(1))
    sysm = float(re.search(r"System time \(seconds\): (\S+)", t).group(1))
    return secs, rss, user + sysm

other = {}
for line in open(f"{work}/other_load.txt"):
    label, a1, b1, t0, t1, tck = line.split()
    other[label] = (float(b1) - float(a1)) / float(tck), float(t1) - float(t0)

cfg = json.load(open(f"{work}/ck/config.json"))
ssm = cfg.get("ssm_cfg", {})
d = cfg["d_model"]; expand = ssm.get("expand", 2); N = ssm.get("d_state", 128); P = ssm.get("headdim", 64)
G = ssm.get("ngroups", 1)
di = expand * d; H = di // P; cd = di + 2 * G * N; din = 2 * di + 2 * G * N + H
gemm1 = 2.0 * (T * d * din + T * di * d)        # the fp32 forward step's GEMMs, one run
ssd1 = 2.0 * (G * T * T * N + H * T * T * P)     # and its SSD products
gemm = (1 + K) * gemm1                           # value once, k tangents
ssd = (1 + 2 * K) * ssd1
qr = 4.0 * (T * d) * K * K
per_layer = gemm + ssd + qr
flops = depth * per_layer

runs = []
for i in range(1, reps + 1):
    secs, rss, cpu = gnu_time(f"{work}/time{i}.txt")
    busy, el = other[f"tokdyn{i}"]
    man = json.load(open(f"{work}/manifest{i}.json"))
    runs.append({"i": i, "secs": secs, "rss": rss, "cpu": cpu, "other": max(busy - cpu, 0.0) / el,
                 "wall_manifest": man.get("wall_time_s")})
best = min(runs, key=lambda r: r["wall_manifest"] if r["wall_manifest"] else r["secs"])
wall = best["wall_manifest"] or best["secs"]
gfs = flops / wall / 1e9

j = json.load(open(f"{work}/dgemm.json"))
peak = max(b["FLOPS"] for b in j["benchmarks"] if b.get("run_type") == "iteration")
mus = [l.strip().split(",") for l in open(f"{work}/lyapunov{best['i']}.csv")][1:]
same = all(open(f"{work}/lyapunov{r['i']}.csv").read() == open(f"{work}/lyapunov1.csv").read() for r in runs)
loads = open(f"{work}/load_log.txt").read().strip().splitlines()
cpu_model = ""
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu_model = line.split(":", 1)[1].strip(); break

P_ = print
P_("# Benchmark: depth-spectra, top-16 Lyapunov exponents of mamba2-130m")
P_()
P_("Produced by `scripts/bench_depth_spectra.sh` (this file is its output). Workload: `tokdyn run depth-spectra "
   f"--set model=mamba2 --set checkpoint=CK --set k={K} --set tokens={T} --set depth={depth} --set burn_in={burn} "
   f"--threads {threads}`, CK = `tokdyn make-checkpoint --size 130m --seed 0` (blocks cycled). Each layer: one "
   f"`BlockMap::step_double_tangents` call: the value of the {T}-token state once and its {K} tangents sharing it "
   "(double forward mode), then a thin Householder QR of the (T d) x k tangent matrix.")
P_()
P_(f"Machine: {cpu_model}, {os.cpu_count()} logical CPUs, shared with other engineers (see the load below).")
P_()
P_("| quantity | value |")
P_("| --- | --- |")
P_(f"| wall time, best of {reps} (manifest wall_time_s; load, JVPs and QR) | **{wall:.1f} s** ({', '.join('%.1f' % (r['wall_manifest'] or r['secs']) for r in runs)}) |")
P_(f"| per layer | {1e3 * wall / depth:.0f} ms |")
P_(f"| flops per layer (counted from the shapes, see below) | {per_layer / 1e9:.2f} GFLOP (GEMMs {gemm / 1e9:.2f}, SSD {ssd / 1e9:.3f}, QR {qr / 1e9:.3f}) |")
P_(f"| total flops | {flops / 1e12:.3f} TFLOP |")
P_(f"| achieved | **{gfs:.1f} GFLOP/s** |")
P_(f"| OpenBLAS DGEMM peak, n = {dg_n}, {dg_t} threads (best of {dgemm_reps}) | {peak / 1e9:.1f} GFLOP/s |")
P_(f"| achieved / DGEMM peak | **{100 * gfs * 1e9 / peak:.0f} %** |")
P_(f"| CPU time of the best run (user + sys) | {best['cpu']:.1f} s ({best['cpu'] / wall:.2f} cores busy) |")
P_(f"| flops per CPU second (independent of the other processes' share) | {flops / best['cpu'] / 1e9:.1f} GFLOP/s per core, "
   f"{100 * flops / best['cpu'] / (peak / dg_t):.0f} % of the DGEMM peak per core ({peak / dg_t / 1e9:.1f}) |")
P_(f"| other processes during the best run | {best['other']:.2f} cores on average |")
P_(f"| peak RSS (GNU time), best run | {best['rss'] / 1024:.0f} MiB |")
P_(f"| same lyapunov.csv bytes in every run | {'yes' if same else 'NO'} |")
P_()
P_("Flop count: one fp32 forward step of R runs of T tokens is `BlockMap::flops(R, T)` = 2 (R T d d_in_proj + "
   "R T d_inner d) [GEMMs] + 2 R (G T^2 N + H T^2 P) [SSD]; `step_double_tangents` computes the value once and "
   "each of the k tangents once (every projection on T + k T rows; in the SSD one product per forward product for "
   "the value and two per tangent: dC B^T + C dB^T, dM X + M dX), so the count is (1 + k) x GEMMs + (1 + 2 k) x SSD "
   f"at R = 1 (the flops performed), plus 4 (T d) k^2 for the QR. Shapes: d = {d}, d_inner = {di}, d_in_proj = {din}, N = {N}, "
   f"H = {H}, P = {P}, G = {G}, T = {T}, k = {K}. Pointwise work is not counted.")
P_()
P_("Exponents of the best run (lyapunov.csv, mu_i = mean log R_ii over layers burn_in+1..depth):")
P_()
P_("| i | mu | gamma |")
P_("| --- | --- | --- |")
for i, mu, g in mus:
    P_(f"| {i} | {float(mu):.5f} | {float(g):.5f} |")
P_()
P_("Load (the machine is shared: other engineers compile and test on the same 2 cores):")
P_()
P_("- before: " + open(f"{work}/load_before.txt").read().strip())
for l in loads:
    P_("- " + l)
P_("- after: " + open(f"{work}/load_after.txt").read().strip())
for r in runs:
    P_(f"- run {r['i']}: {r['secs']:.1f} s elapsed, {r['cpu']:.1f} s CPU, other processes {r['other']:.2f} cores on average")
EOF
cat "$out_md"
