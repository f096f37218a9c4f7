#!/usr/bin/env bash
# Installs tokdyn's build and run dependencies from Debian's packages (once), then configures
# and builds. Usage: scripts/setup.sh [--target T]... [BUILD_DIR] [extra cmake args...]
# By default it builds everything (scripts/test.sh: the binary, the tests, the benchmarks, the
# Python package); each --target T (or the environment's TOKDYN_TARGETS="T1 T2") builds only those
# CMake targets, e.g. --target tokdyn for the binary alone (scripts/demo.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
targets=()
if [ -n "${TOKDYN_TARGETS:-}" ]; then read -r -a targets <<<"$TOKDYN_TARGETS"; fi
while [ $# -gt 0 ]; do
  case $1 in
    --target) [ $# -ge 2 ] && [ -n "$2" ] || { echo "setup.sh: --target needs a CMake target name" >&2; exit 2; }
              targets+=("$2"); shift 2 ;;
    --target=*) [ -n "${1#--target=}" ] || { echo "setup.sh: --target needs a CMake target name" >&2; exit 2; }
                targets+=("${1#--target=}"); shift ;;
    *) break ;;
  esac
done
build=${1:-$here/build}
shift || true

pkgs=(build-essential cmake ninja-build pkg-config
      libeigen3-dev libopenblas-dev libopenblas-openmp-dev libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libfmt-dev
      libboost-dev libonig-dev libicu-dev libgtest-dev libgmock-dev libbenchmark-dev
      python3-numpy python3-matplotlib python3-scipy clang libclang-rt-14-dev
      python3-dev pybind11-dev python3-pandas python3-pytest python3-torch
      libopenmpi-dev openmpi-bin bible-kjv bible-kjv-text chromium mkdocs ccache)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "tokdyn setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ccache (CMakeLists.txt and scripts/fuzz.sh use it when installed): paths relative to the source
# tree, so that another checkout of the same sources (a CI clone) finds what this one compiled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$here}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}

# Configure a new build folder; reconfigure an existing one when options are given (so that e.g.
# -DTOKDYN_WERROR=ON also reaches a folder configured without it).
if [ ! -f "$build/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
if [ ${#targets[@]} -gt 0 ]; then
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
else
  cmake --build "$build" -j "$(nproc)"
fi

# `import tokdyn` from any folder with Debian's /usr/bin/python3: a .pth file in the user's site
# folder names the build's package folder (as `pip install --user -e` would; remove the file to undo).
# Only for the default build folder, so that a CI or sanitizer build elsewhere does not move it.
if [ "$build" = "$here/build" ] && [ -f "$build/python/tokdyn/__init__.py" ]; then
  site=$(/usr/bin/python3 -c 'import site; print(site.getusersitepackages())' 2>/dev/null || true)
  if [ -n "$site" ] && mkdir -p "$site" 2>/dev/null; then
    printf '%s\n' "$(cd "$build" && pwd)/python" > "$site/tokdyn.pth.tmp" && mv "$site/tokdyn.pth.tmp" "$site/tokdyn.pth"
  fi
fi
