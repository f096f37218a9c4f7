#!/usr/bin/env bash
# Benchmark of the decoder families at GPT-2-small size (124M parameters, 12 layers, d = 768):
#  (1) the depth map cycled to depth 96 on 50 runs x 64 tokens (transformer-clustering, positions on),
#      against the SGEMM peak of this machine's OpenBLAS and a straightforward batched PyTorch-CPU
#      forward of the same checkpoint on the same token ids (bench/torch_gpt2_depth.py), timed in the
#      same run; the final lambda_bar_1 of both must agree (else exit 1 after writing the table);
#  (2) the tangent step of depth-spectra on the same model (k tangents, double), against the DGEMM peak.
# Writes bench/results-decoder.md (and prints it).
#
# Usage: scripts/bench_decoder.sh [BUILD_DIR]   (default: build)
# Environment: BENCH_THREADS [2], BENCH_REPS [2] (tokdyn and torch runs; best reported),
#   BENCH_RUNS [50], BENCH_TOKENS [64], BENCH_DEPTH [96], BENCH_K [8] (tangents of (2)),
#   BENCH_TANGENT_DEPTH [36], BENCH_OUT [bench/results-decoder.md], BENCH_KEEP (keep the work folder).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
threads=${BENCH_THREADS:-2}
reps=${BENCH_REPS:-2}
RUNS=${BENCH_RUNS:-50} LEN=${BENCH_TOKENS:-64} DEPTH=${BENCH_DEPTH:-96} K=${BENCH_K:-8} TDEPTH=${BENCH_TANGENT_DEPTH:-36}
out_md=${BENCH_OUT:-$here/bench/results-decoder.md}
py=/usr/bin/python3
bench_name=bench_decoder
work=$(mktemp -d /tmp/tokdyn-bench-decoder.XXXXXX)
[ -n "${BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
# shellcheck source=scripts/bench_lib.sh
source "$here/scripts/bench_lib.sh"
ensure_gnu_time
"$py" -c "import torch" 2>/dev/null || { echo "bench_decoder: $py cannot import torch: run scripts/setup.sh" >&2; exit 1; }
[ -x "$build/tokdyn" ] && [ -x "$build/tokdyn_bench" ] || { echo "bench_decoder: build $build first (scripts/setup.sh)" >&2; exit 1; }
export OMP_NUM_THREADS=$threads

log "GEMM peaks (n = 4096, $threads threads)"
wait_idle peaks
"$build/tokdyn_bench" --benchmark_filter="^BM_(S|D)gemm/n:4096/threads:$threads/" --benchmark_min_time=2 \
  --benchmark_repetitions=2 --benchmark_out="$work/peaks.json" --benchmark_out_format=json >"$work/peaks.txt"

log "make-checkpoint gpt2 124m"
"$build/tokdyn" make-checkpoint --model gpt2 --size 124m --seed 0 --out "$work/ck" >/dev/null
"$py" -c "
import numpy as np, json, sys
cfg = json.load(open('$work/ck/config.json'))
np.save('$work/ids.npy', np.random.default_rng(0).integers(0, cfg['vocab_size'], size=($RUNS, $LEN)).astype(np.int64))"

for r in $(seq 1 "$reps"); do
  log "(1) tokdyn transformer-clustering, run $r of $reps"
  wait_idle "tokdyn$r"
  measured "tokdyn$r" "$work/time$r.txt" "$build/tokdyn" run transformer-clustering --out "$work/tc$r" --no-figures --quiet \
    --threads "$threads" --set model=gpt2 --set checkpoint="$work/ck" --set token_ids="$work/ids.npy" --set tokens="$LEN" \
    --set depth="$DEPTH" --set variants=on
  log "(1) PyTorch peer, run $r of $reps"
  wait_idle "torch$r"
  "$py" "$here/bench/torch_gpt2_depth.py" "$work/ck" "$work/ids.npy" "$DEPTH" "$threads" 1 >"$work/torch$r.json"
done

log "(2) depth-spectra tangent step, k = $K, depth $TDEPTH"
wait_idle tangent
measured tangent "$work/time_t.txt" "$build/tokdyn" run depth-spectra --out "$work/ds" --no-figures --quiet --threads "$threads" \
  --set model=gpt2 --set checkpoint="$work/ck" --set tokens="$LEN" --set depth="$TDEPTH" --set k="$K" --set burn_in=0

"$py" - "$work" "$reps" "$RUNS" "$LEN" "$DEPTH" "$K" "$TDEPTH" "$threads" "$out_md" <<'EOF'
import json, re, sys, platform
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
work, reps, R, T, depth, K, tdepth, threads, out_md = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
    int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), sys.argv[9]
peaks = {b["run_name"]: b for b in json.load(open(f"{work}/peaks.json"))["benchmarks"] if b.get("run_type") == "iteration"}
def best(prefix):  # GFLOP/s (BM_Sgemm reports "GFLOP/s", BM_Dgemm "FLOPS" in flop/s)
    return max(b["GFLOP/s"] if "GFLOP/s" in b else b["FLOPS"] / 1e9 for n, b in peaks.items() if n.startswith(prefix))
sg, dg = best(f"BM_Sgemm/n:4096/threads:{threads}"), best(f"BM_Dgemm/n:4096/threads:{threads}")
cfg = json.load(open(f"{work}/ck/config.json"))
d, H, F, L = cfg["n_embd"], cfg["n_head"], 4 * cfg["n_embd"], cfg["n_layer"]
RT = R * T
# Multiply-adds of one layer as tokdyn computes it (QKV, attention scores and values in full T x T
# products per head, output projection, MLP); flops = 2 x multiply-adds.
mac_layer = RT * d * (3 * d + d) + 2 * R * H * T * T * (d // H) + RT * d * F * 2
gflop = 2 * mac_layer * depth / 1e9
def rss(f):
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f).read()).group(1)) / 1024
tk = []
for r in range(1, reps + 1):
    man = json.load(open(f"{work}/tc{r}/manifest.json"))
    tk.append((man["notes"]["phase_seconds"]["positions_on"], rss(f"{work}/time{r}.txt"), man))
t_tok, mem, man = min(tk)
lam_tok = [x for x in man["summaries"].items() if x[0] == "lambda1_final_positions_on"][0][1] if isinstance(man["summaries"], dict) else None
th = [json.load(open(f"{work}/torch{r}.json")) for r in range(1, reps + 1)]
t_th = min(x["seconds"] for x in th)
lam_th = th[0]["lambda1_final"]
ok = lam_tok is not None and abs(lam_tok - lam_th) < 1e-3
dsman = json.load(open(f"{work}/ds/manifest.json"))
t_spec = dsman["notes"]["phase_seconds"].get("spectrum", float("nan"))
# The tangent step: one double forward for the value, K for the tangents (products only; the
# attention's tangent costs two T x T products per head per tangent).
mac_t = T * d * (4 * d + 2 * F) * (1 + K) + H * T * T * (d // H) * (2 + 4 * K)
gf_t = 2 * mac_t * tdepth / t_spec / 1e9
rows = [
    ("machine", f"{cpu}, {threads} threads"),
    ("OpenBLAS SGEMM / DGEMM peak (n = 4096)", f"{sg:.1f} / {dg:.1f} GFLOP/s"),
    ("workload (1)", f"GPT-2 124M (make-checkpoint, fp32), 12 layers cycled to depth {depth}, {R} runs x {T} tokens"),
    ("tokdyn depth loop (best of %d)" % reps, f"{t_tok:.2f} s, {gflop / t_tok:.1f} GFLOP/s = **{100 * gflop / t_tok / sg:.0f} % of the SGEMM peak**"),
    ("tokdyn peak memory (RSS)", f"{mem:.0f} MiB"),
    ("PyTorch-CPU %s batched forward (best of %d)" % (th[0]["torch"], reps), f"{t_th:.2f} s, {gflop / t_th:.1f} GFLOP/s"),
    ("tokdyn / PyTorch speed", f"**{t_th / t_tok:.2f}x**"),
    ("final lambda_bar_1: tokdyn / PyTorch", f"{lam_tok:.6f} / {lam_th:.6f} ({'agree' if ok else 'DISAGREE'} within 1e-3)"),
    ("workload (2)", f"depth-spectra tangent step, k = {K}, {T} tokens, depth {tdepth}, double"),
    ("tangent steps", f"{t_spec:.2f} s, {gf_t:.1f} GFLOP/s = **{100 * gf_t / dg:.0f} % of the DGEMM peak**"),
]
text = "# Decoder families: GPT-2-small depth map (scripts/bench_decoder.sh)\n\n| quantity | value |\n| --- | --- |\n"
text += "".join(f"| {a} | {b} |\n" for a, b in rows)
text += f"\nGFLOP counts: {gflop:.1f} GFLOP for workload (1) (full T x T attention products per head; 2 flops per multiply-add).\n"
open(out_md, "w").write(text)
print(text)
sys.exit(0 if ok else 1)
EOF
