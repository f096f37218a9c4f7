#!/usr/bin/env bash
# Builds the documentation site (mkdocs.yml, the pages in docs/) with Debian's mkdocs into OUT
# (default build/site), installing the package once when missing (with sudo when not root).
# --strict: a broken link between pages, a page outside the nav or a missing image fails the build.
# Usage: scripts/docs.sh [OUT]      then open OUT/index.html in a browser (no server needed)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/build/site}
case "$out" in /*) ;; *) out=$PWD/$out ;; esac
# mkdocs empties OUT first: only a new or empty folder, or a site this script built, is accepted.
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -f "$out/sitemap.xml" ]; then
  echo "tokdyn docs: $out is neither empty nor a previous site (no sitemap.xml): refusing to empty it" >&2
  exit 2
fi

if ! dpkg-query -W -f='${Status}' mkdocs 2>/dev/null | grep -q "install ok installed"; then
  echo "tokdyn docs: installing mkdocs" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends mkdocs >/dev/null
fi

# Debian's interpreter and package, whatever python3 or mkdocs comes first on PATH.
cd "$here"
if ! /usr/bin/python3 -m mkdocs build --strict --clean --config-file "$here/mkdocs.yml" --site-dir "$out" 2>&1 |
     { grep -v '^INFO' >&2 || true; }; then
  echo "tokdyn docs: the mkdocs build failed (above)" >&2
  exit 1
fi
echo "site: $out/index.html"
