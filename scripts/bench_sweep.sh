#!/usr/bin/env bash
# Benchmark of `tokdyn sweep` (scripts/bench_sweep.py): a 64-point rope-flow sweep serial, --jobs 2
# and mpirun -np 2, overhead per point, and the simulated many-rank run of docs/scaling.md.
# Usage: scripts/bench_sweep.sh [BUILD_DIR] [--quick]    -> bench/results-sweep.md
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
shift || true
"$here/scripts/setup.sh" "$build" >/dev/null
exec /usr/bin/python3 "$here/scripts/bench_sweep.py" --tokdyn "$build/tokdyn" "$@"
