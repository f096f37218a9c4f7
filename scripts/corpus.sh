#!/usr/bin/env bash
# The training corpus of docs/training.md: the King James Bible (public domain), from Debian's
# bible-kjv-text package (installed by scripts/setup.sh), as plain text, one verse per line, the
# verse references removed: 31102 lines, 4.1 MB, 790k words. Written once to
# BUILD/corpus/kjv.txt (default BUILD: build/); prints the path.
# Usage: scripts/corpus.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out="$build/corpus/kjv.txt"
if [ ! -s "$out" ]; then
  if ! command -v bible >/dev/null; then
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends bible-kjv bible-kjv-text >/dev/null
  fi
  mkdir -p "$build/corpus"
  # `bible -f` prints "Ge1:1 In the beginning ..." per verse; the reference goes.
  bible -f "Gen1:1-Rev22:21" | sed -E 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //' > "$out.tmp"
  lines=$(wc -l < "$out.tmp")
  [ "$lines" -eq 31102 ] || { echo "scripts/corpus.sh: expected 31102 verses from bible-kjv, got $lines" >&2; exit 3; }
  mv "$out.tmp" "$out"
fi
echo "$out"
