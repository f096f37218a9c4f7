#!/usr/bin/env bash
# The whole schema-driven edge grid: every parameter of every preset at every edge its schema
# implies (tests/scripts/param_edges.py --mode full). Builds first (scripts/setup.sh).
# Usage: scripts/param_edges.sh [BUILD_DIR] [extra param_edges.py arguments, e.g. --presets rope-flow --report r.csv]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build
if [[ $# -gt 0 && $1 != --* ]]; then build=$1; shift; fi
"$here/scripts/setup.sh" "$build"
exec /usr/bin/python3 "$here/tests/scripts/param_edges.py" --tokdyn "$build/tokdyn" --mode full --jobs "$(nproc)" --timeout 30 "$@"
