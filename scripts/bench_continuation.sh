#!/usr/bin/env bash
# Benchmark of the rho-continuation of the closed loop (coupling paper (15), Thm 10 / Thm 12;
# analysis/closed_loop.hpp): BENCH_STEPS fixed-size pseudo-arclength steps from rho = 0 of u*_rho
# for a d = 64 rotating-sector cocycle with a tanh-MLP psi (every corrector step one block-banded
# O(L d^3) BVP factorisation with generator A + rho Dpsi(u) and two solves). The cocycle and psi are
# written once to .npy files (bench/continuation_peer.py --write) that both read: tokdyn
# (`tokdyn run coupling-margin --set bench_generators=... --set bench_psi=...`, the continuation
# timed inside the run: manifest.json notes.bench.continuation_seconds) and the NumPy/SciPy peer
# (bench/continuation_peer.py --run: the same formulation and algorithm, band LU by
# scipy.linalg.solve_banded), so the final rho and u must agree (checked: exit 1 otherwise); plus the
# machine's 1-thread DGEMM peak (NumPy's OpenBLAS, 2048^2 double), all in the same run.
# Writes bench/results-continuation.md (and prints it).
#
# Usage: scripts/bench_continuation.sh [BUILD_DIR]     (default BUILD_DIR: build; Release)
# Environment knobs: BENCH_D [64], BENCH_L [500], BENCH_STEPS [200], BENCH_DS [0.002],
#   BENCH_REPS [1] (best of), BENCH_IDLE_WAIT [60], BENCH_OUT [bench/results-continuation.md].
# L = 500, not 1000: tokdyn's 200 steps take ~0.4 s each at L = 1000 (~85 s, over the ~60 s target;
# the work is linear in L), and the peer is ~5x slower still.
# Everything runs on one thread (EIGEN_DONT_PARALLELIZE; OPENBLAS_NUM_THREADS=1).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
d=${BENCH_D:-64}
L=${BENCH_L:-500}
steps=${BENCH_STEPS:-200}
ds=${BENCH_DS:-0.002}
reps=${BENCH_REPS:-1}
out_md=${BENCH_OUT:-$here/bench/results-continuation.md}
# shellcheck source=scripts/bench_lib.sh
source "$here/scripts/bench_lib.sh"
bench_start bench_continuation "numpy scipy"

"$py" "$here/bench/continuation_peer.py" --write "$work/gen.npy" "$work/psi.npy" "$d" "$L" 0
best_tok="" best_np="" facts="" gflop_each=""
for r in $(seq 1 "$reps"); do
  wait_idle "tokdyn rep $r"
  rm -rf "$work/res"
  "$build/tokdyn" run coupling-margin --threads 1 --no-figures --quiet --out "$work/res" --set bench_generators="$work/gen.npy" \
    --set bench_psi="$work/psi.npy" --set bench_steps="$steps" --set bench_ds="$ds"
  t=$("$py" -c "import json;print(json.load(open('$work/res/manifest.json'))['notes']['bench']['continuation_seconds'])")
  facts=$("$py" -c "import json;print(json.load(open('$work/res/manifest.json'))['notes']['bench']['factorizations'])")
  gflop_each=$("$py" -c "import json;print(json.load(open('$work/res/manifest.json'))['notes']['bench']['factor_gflop_each'])")
  best_tok=$("$py" -c "print(min(float(x) for x in '$best_tok $t'.split()))")
  wait_idle "peer rep $r"
  "$py" "$here/bench/continuation_peer.py" --run "$work/gen.npy" "$work/psi.npy" "$steps" "$ds" "$work/u_np.npy" >"$work/np.json"
  t=$("$py" -c "import json;print(json.load(open('$work/np.json'))['seconds'])")
  best_np=$("$py" -c "print(min(float(x) for x in '$best_np $t'.split()))")
done
# Same input, same algorithm: the final rho and the final u*_rho must agree.
read -r drho du rho_tok rho_np < <("$py" - "$work" <<'PY'
import csv, json, sys
import numpy as np
w = sys.argv[1]
rows = list(csv.DictReader(open(w + "/res/continuation.csv")))
rho_tok = float(rows[-1]["rho"])
j = json.load(open(w + "/np.json"))
u_np = np.load(w + "/u_np.npy")
u_tok = np.zeros_like(u_np)
for r in csv.DictReader(open(w + "/res/final_u.csv")):
    u_tok[int(r["i"]), int(r["l"])] = float(r["u"])
du = np.sqrt(((u_tok - u_np) ** 2).sum(axis=0)).max() / np.sqrt((u_np ** 2).sum(axis=0)).max()
print(abs(rho_tok - j["rho"]), du, rho_tok, j["rho"])
PY
)
"$py" -c "import sys; sys.exit(0 if $drho <= 1e-9 and $du <= 1e-8 else 1)" || { echo "bench_continuation: results differ (|drho| = $drho, rel |du| = $du)" >&2; exit 1; }
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
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
mkdir -p "$(dirname "$out_md")"
"$py" - "$out_md" <<PY
import sys
tok, npy, peak, facts, ge = $best_tok, $best_np, $peak, $facts, $gflop_each
gt = facts * ge / tok
load = open("$work/load_log.txt").read().strip().splitlines()
md = f"""# Closed-loop rho-continuation benchmark (scripts/bench_continuation.sh)

$steps fixed-size (ds = $ds) pseudo-arclength steps of u*_rho from rho = 0 (coupling paper (15),
Thm 10 / Thm 12), d = $d, L = $L layers (rotating-sector cocycle, tanh-MLP psi of width d), one
thread ({'$cpu'}). Every corrector step: the closed-loop generator B(l) + rho Dpsi(u(l)) (2 d^3 per
layer), one block-banded LU of the BVP (green::Bvp, {ge:.3f} GFLOP each) and two solves.
tokdyn factorised {facts} times ({facts / $steps:.2f} per step). Best of $reps run(s) each,
interleaved; the DGEMM peak is NumPy's OpenBLAS (1 thread) on 2048^2 doubles, measured in the same run.

| implementation | continuation time (s) | per step (s) | BVP-factorisation GFLOP/s | share of DGEMM peak |
| --- | ---: | ---: | ---: | ---: |
| tokdyn (green::Bvp block-banded LU, Eigen) | {tok:.2f} | {tok/$steps:.3f} | {gt:.2f} | {gt/peak*100:.0f} % |
| NumPy/SciPy peer (scipy.linalg.solve_banded, dgbsv) | {npy:.2f} | {npy/$steps:.3f} | | |
| DGEMM peak (1 thread) | | | {peak:.2f} | 100 % |

tokdyn / peer speed ratio: {npy/tok:.2f}x. ("GFLOP/s" counts only the factorisations' flops over
the whole continuation time, so it understates the rate of the LU itself.) Both read the same .npy
files and run the same algorithm; they agree: final rho tokdyn $rho_tok, peer $rho_np
(|difference| = $drho), max_l |u_tokdyn(l) - u_peer(l)| / |u|_inf = $du.

Why L = $L: at L = 1000 tokdyn's step costs ~0.4 s (200 steps ~85 s, over the ~60 s budget); the work
is linear in L, so L = 500 keeps the d = 64 blocks (the d^3 part) and halves the time.

The load seen before each measurement (the script waits up to BENCH_IDLE_WAIT s for an idle machine):

~~~
""" + "\n".join(load) + """
~~~
"""
open(sys.argv[1], "w").write(md)
print(md)
PY
