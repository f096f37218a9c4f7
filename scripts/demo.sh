#!/usr/bin/env bash
# The main job: installs what is missing, builds the tokdyn binary (not the tests), and reproduces
# The Attention Within's Fig. 3 (random weights, SiLU on vs off) at reduced size (10 runs instead
# of 50), writing its figures to results/demo/. Extra arguments go to `tokdyn run` (e.g. --set runs=50 for the full size).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# Only the binary: the figures are drawn by python/plot.py from the source tree (no build step).
"$here/scripts/setup.sh" --target tokdyn "$here/build" >&2
"$here/build/tokdyn" run ssm-random-silu --out "$here/results/demo" --overwrite --set runs=10 "$@"
echo "figures: $here/results/demo/fig3_metrics.png fig5_pe_token.png fig6_pe_windows.png"
