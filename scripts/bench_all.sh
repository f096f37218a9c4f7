#!/usr/bin/env bash
# One benchmark command for every workload (issue 21, item 6): builds tokdyn and tokdyn_bench
# (Release, -DTOKDYN_BENCH=ON) in the build directory, then runs scripts/bench_all.py with Debian's
# /usr/bin/python3, which measures the GEMM peaks, times every workload with tokdyn and its
# NumPy / SciPy / PyTorch peer on an idle machine, fits how each workload's cost grows, and writes
# bench/results.md (bench/results-quick.md with --quick) and, in full mode, the generated table
# under README.md's "## Speed" heading.
#
# Usage: scripts/bench_all.sh [--quick] [--only NAME[,NAME]] [--build DIR] [--out FILE] [--no-readme]
#                             [--readme] [--idle-wait SECONDS] [--keep] [--openblas-coretype NAME] [--before REF]
#   --quick      about 5 minutes on 2 cores: small sizes, one repetition, peers at reduced depth
#                (scaled), fewer scaling points; writes bench/results-quick.md; README untouched
#                unless --readme
#   --only       a subset: mamba2-fig1, ssm-random-silu, cocycle-spectra, rope-table2, green,
#                continuation, depth-spectra, sweep (README untouched unless --readme)
#   --build DIR  build directory (default: build-bench); configured here when it has no build.ninja
#   --out FILE   results file (default bench/results.md; bench/results-quick.md with --quick;
#                bench/results-subset.md with --only in full mode)
#   --no-readme  full mode: do not regenerate README.md's Speed table
#   --idle-wait  longest wait for an idle machine before each measurement (default $BENCH_IDLE_WAIT,
#                else 300 s; 10 s with --quick)
#   --keep       keep the raw outputs (work directory under /tmp)
#   --openblas-coretype NAME  export OPENBLAS_CORETYPE=NAME to every command (when OpenBLAS does not
#                recognise the CPU and falls back to its generic Prescott kernels; the results warn)
#   --before REF also time each workload's tokdyn command with the build of git commit REF (checked
#                out in BUILD-before/src, built in BUILD-before/build), once, with the same OpenBLAS
#                kernels: a before/after column measured in the same run
# Full mode: an estimated 30 minutes on the project's 2-core machine (the idle waits are bounded: at most
# 900 s in all, 60 s with --quick). Exit status: 0; 1 when a
# workload failed or a peer disagreed with tokdyn (the results file says which); 2 for a bad option.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3  # Debian's, with numpy, scipy and torch (not whatever python3 is first on PATH)
# shellcheck disable=SC2034 # bench_name: the prefix of bench_lib.sh's log lines
bench_name=bench_all

[ -x "$py" ] || { echo "bench_all: $py (Debian's python3) is missing: run scripts/setup.sh" >&2; exit 1; }
for a in "$@"; do case $a in -h | --help) exec "$py" "$here/scripts/bench_all.py" --help ;; esac; done
# Bad options: one line on stderr, exit 2, before anything is built.
selected=$("$py" "$here/scripts/bench_all.py" --check-args "$@")

build=$here/build-bench
args=("$@")
before=
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --build) build=${args[i + 1]} ;;
    --build=*) build=${args[i]#--build=} ;;
    --before) before=${args[i + 1]} ;;
    --before=*) before=${args[i]#--before=} ;;
  esac
done
before_sha=
if [ -n "$before" ]; then
  before_sha=$(git -C "$here" rev-parse --verify --quiet "$before^{commit}") ||
    { echo "bench_all: --before $before: expected a git commit of $here" >&2; exit 2; }
fi
mkdir -p "$build"
build=$(cd "$build" && pwd)

# log, ensure_gnu_time (GNU time for the peak RSS).
# shellcheck source=scripts/bench_lib.sh
source "$here/scripts/bench_lib.sh"
ensure_gnu_time
"$py" -c "import numpy, scipy" 2>/dev/null || { echo "bench_all: $py has no numpy / scipy: run scripts/setup.sh" >&2; exit 1; }
# PyTorch-CPU for python/torch_mamba2_fig1.py: Debian's python3-torch, installed as scripts/bench_mamba2.sh does.
if [[ " $selected " == *" mamba2-fig1 "* ]] && ! "$py" -c "import torch" 2>/dev/null; then
  log "installing python3-torch (Debian's PyTorch, for python/torch_mamba2_fig1.py)"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
fi

# Configure when the directory has no build yet, or is not a Release build with the benchmarks (an
# existing build keeps the sources it was configured from).
cache=$build/CMakeCache.txt
if [ ! -f "$build/build.ninja" ]; then
  log "configuring (Release, Ninja, TOKDYN_BENCH=ON) in $build"
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOKDYN_BENCH=ON >/dev/null
elif ! grep -q '^CMAKE_BUILD_TYPE:[A-Z]*=Release$' "$cache" || ! grep -q '^TOKDYN_BENCH:[A-Z]*=ON$' "$cache"; then
  log "reconfiguring $build as a Release build with the benchmarks"
  cmake -DCMAKE_BUILD_TYPE=Release -DTOKDYN_BENCH=ON "$build" >/dev/null
fi
log "building tokdyn and tokdyn_bench in $build"
cmake --build "$build" -j 2 --target tokdyn tokdyn_bench >/dev/null

# --before REF: REF's sources in a detached worktree, its tokdyn in a Release build of its own.
before_args=()
if [ -n "$before_sha" ]; then
  bsrc=$build-before/src bbuild=$build-before/build
  if [ ! -e "$bsrc/.git" ]; then
    mkdir -p "$build-before"
    git -C "$here" worktree add --detach "$bsrc" "$before_sha" >/dev/null 2>&1 ||
      { echo "bench_all: could not check out $before into $bsrc (git worktree add)" >&2; exit 1; }
  elif [ "$(git -C "$bsrc" rev-parse HEAD)" != "$before_sha" ]; then
    git -C "$bsrc" checkout --quiet --detach "$before_sha"
  fi
  [ -f "$bbuild/build.ninja" ] ||
    cmake -S "$bsrc" -B "$bbuild" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOKDYN_BENCH=OFF -DTOKDYN_PYTHON=OFF >/dev/null
  log "building tokdyn of $before (${before_sha:0:7}) in $bbuild"
  cmake --build "$bbuild" -j 2 --target tokdyn >/dev/null
  before_args=(--before-tokdyn "$bbuild/tokdyn")
fi

exec "$py" "$here/scripts/bench_all.py" "$@" "${before_args[@]}"
