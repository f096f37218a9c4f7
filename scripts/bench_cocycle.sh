#!/usr/bin/env bash
# Benchmark of the discrete QR (Benettin) spectrum of analysis/cocycle.hpp: full spectrum (k = d)
# of a d = 256, L = 1000 G5-like cocycle B(l) = I + A_0 + delta E(l), written once to a .npy file
# that both read: tokdyn (`tokdyn run cocycle-spectra --set generators=FILE`, the QR loop timed
# inside the run: manifest.json notes.qr_seconds) and a straightforward NumPy implementation
# (python/numpy_cocycle_qr.py: loop over l, numpy.linalg.qr, sign fix), so their exponents must
# agree to round-off (checked: exit 1 otherwise); plus the machine's 1-thread DGEMM peak (NumPy's
# OpenBLAS, 2048^2 double), all in the same run.
# Writes bench/results-cocycle.md (and prints it).
#
# Usage: scripts/bench_cocycle.sh [BUILD_DIR]     (default BUILD_DIR: build; Release)
# Environment knobs: BENCH_D [256], BENCH_L [1000], BENCH_REPS [3] (best of), BENCH_IDLE_WAIT [60],
#   BENCH_OUT [bench/results-cocycle.md].
# tokdyn's QR runs on one thread (Eigen products and Householder QR, EIGEN_DONT_PARALLELIZE), so
# NumPy's OpenBLAS and the DGEMM peak are pinned to one thread too (OPENBLAS_NUM_THREADS=1).
# Flops per layer: GEMM 2 d^3 + Householder QR 4/3 d^3 (forming Q explicitly, another 4/3 d^3, is
# not counted, as the spec's count says).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
d=${BENCH_D:-256}
L=${BENCH_L:-1000}
reps=${BENCH_REPS:-3}
out_md=${BENCH_OUT:-$here/bench/results-cocycle.md}
# shellcheck source=scripts/bench_lib.sh
source "$here/scripts/bench_lib.sh"
bench_start bench_cocycle "numpy"

"$py" "$here/python/numpy_cocycle_qr.py" --write "$work/gen.npy" "$d" "$L" 0
best_tok="" best_np="" mu_tok="" mu_np="" agree=""
for r in $(seq 1 "$reps"); do
  wait_idle "tokdyn rep $r"
  rm -rf "$work/res"
  "$build/tokdyn" run cocycle-spectra --threads 1 --no-figures --out "$work/res" --set generators="$work/gen.npy" \
    --set burn_in=0 --set bundles=none --set rank=false --set H="$L" >/dev/null 2>&1
  t=$("$py" -c "import json;print(json.load(open('$work/res/manifest.json'))['notes']['qr_seconds'])")
  mu_tok=$("$py" -c "import csv;r=list(csv.DictReader(open('$work/res/lyapunov.csv')));print(max(float(x['mu']) for x in r), min(float(x['mu']) for x in r))")
  best_tok=$("$py" -c "print(min(float(x) for x in '$best_tok $t'.split()))")
  wait_idle "numpy rep $r"
  js=$("$py" "$here/python/numpy_cocycle_qr.py" --generators "$work/gen.npy")
  echo "$js" >"$work/np.json"
  t=$(echo "$js" | "$py" -c "import json,sys;print(json.load(sys.stdin)['seconds'])")
  mu_np=$(echo "$js" | "$py" -c "import json,sys;j=json.load(sys.stdin);print(j['mu_max'], j['mu_min'])")
  best_np=$("$py" -c "print(min(float(x) for x in '$best_np $t'.split()))")
done
# Same cocycle, same algorithm: every exponent must agree to round-off (QR order: i = 0..d-1).
agree=$("$py" - "$work/res/lyapunov.csv" "$work/np.json" <<'PY'
import csv, json, sys
tok = [float(r["mu"]) for r in csv.DictReader(open(sys.argv[1]))]
npy = json.load(open(sys.argv[2]))["mu"]
print(max(abs(a - b) for a, b in zip(tok, npy)) if len(tok) == len(npy) else float("inf"))
PY
)
"$py" -c "import sys; sys.exit(0 if $agree <= 1e-9 else 1)" || { echo "bench_cocycle: exponents differ from NumPy's by $agree" >&2; exit 1; }
wait_idle "dgemm peak"
peak=$("$py" - <<'PY'
import time, numpy as np
n = 2048
a = np.random.default_rng(0).standard_normal((n, n)); b = a.copy()
a @ b
best = 1e9
for _ in range(3):
    t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)
print(2 * n ** 3 / best / 1e9)
PY
)
flops=$("$py" -c "print(($L) * (2 + 4/3) * $d**3)")
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
mkdir -p "$(dirname "$out_md")"
"$py" - "$out_md" <<PY
import sys
tok, npy, peak, flops = $best_tok, $best_np, $peak, $flops
gt, gn = flops / tok / 1e9, flops / npy / 1e9
load = open("$work/load_log.txt").read().strip().splitlines()
md = f"""# Cocycle QR spectrum benchmark (scripts/bench_cocycle.sh)

Full discrete-QR Lyapunov spectrum (k = d) of a family-G5 cocycle, d = $d, L = $L layers, one
thread ({'$cpu'}). Work counted per layer: GEMM 2 d^3 + Householder QR 4/3 d^3 =
{flops/1e9:.1f} GFLOP in all (forming Q explicitly, another 4/3 d^3 per layer, is not counted).
Best of $reps runs each, interleaved; the DGEMM peak is NumPy's OpenBLAS (1 thread) on 2048^2
doubles, measured in the same run.

| implementation | QR loop time (s) | GFLOP/s | share of DGEMM peak |
| --- | ---: | ---: | ---: |
| tokdyn (OpenBLAS dgemm + LAPACK dgeqrf/dorgqr, 1 thread) | {tok:.3f} | {gt:.2f} | {gt/peak*100:.0f} % |
| NumPy (numpy.linalg.qr per layer) | {npy:.3f} | {gn:.2f} | {gn/peak*100:.0f} % |
| DGEMM peak (1 thread) | | {peak:.2f} | 100 % |

tokdyn / NumPy speed ratio: {npy/tok:.2f}x. Both read the same generators file (written once by
\`python/numpy_cocycle_qr.py --write\`): every exponent agrees, max |mu_tokdyn - mu_NumPy| = $agree
(largest, smallest: tokdyn $mu_tok, NumPy $mu_np).

The load seen before each measurement (the script waits up to BENCH_IDLE_WAIT s for an idle machine):

~~~
""" + "\n".join(load) + """
~~~
"""
open(sys.argv[1], "w").write(md)
print(md)
PY
