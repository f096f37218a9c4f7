#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test with CTest.
# Usage: scripts/test.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
shift || true
"$here/scripts/setup.sh" "$build" "$@"
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 600
