#!/usr/bin/env bash
# Fuzzes the safetensors header parser with libFuzzer (+ ASan + UBSan).
# Usage: scripts/fuzz.sh [--seconds S] [--build-dir DIR] [--cxx CLANGXX]
#   --seconds S     fuzzing time (default 10)
#   --build-dir D   where the binary, seed corpus and crash artifacts go (default <repo>/build-fuzz)
#   --cxx C         clang++ to use (default: $TOKDYN_FUZZ_CXX, else clang++ / clang++-14 on PATH)
# Exits non-zero if the build fails or the fuzzer finds a crash, a sanitizer error or a leak.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=10
build_dir=$repo/build-fuzz
cxx=${TOKDYN_FUZZ_CXX:-}
while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --cxx) cxx=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1'; expected --seconds S, --build-dir DIR or --cxx CLANGXX" >&2; exit 2 ;;
  esac
done
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --seconds '$seconds' is not a whole number" >&2; exit 2; }
mkdir -p "$build_dir"
build_dir=$(cd "$build_dir" && pwd)   # relative to the caller's cwd, before we cd to the repo
if [[ -z $cxx ]]; then
  cxx=$(command -v clang++ || command -v clang++-14 || true)
fi
[[ -n $cxx ]] || { echo "fuzz.sh: clang++ not found; expected clang++ with libFuzzer (apt-get install clang)" >&2; exit 2; }
cd "$repo"

bin=$build_dir/fuzz_safetensors_header
sources=(src/io/safetensors.cpp fuzz/fuzz_safetensors_header.cpp)
headers=(include/tokdyn/io/safetensors.hpp include/tokdyn/error.hpp)
rebuild=0
if [[ ! -x $bin ]]; then rebuild=1; fi
for f in "${sources[@]}" "${headers[@]}" scripts/fuzz.sh; do
  if [[ $f -nt $bin ]]; then rebuild=1; fi
done
if [[ $rebuild == 1 ]]; then
  echo "fuzz.sh: building $bin with $cxx"
  "$cxx" -std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=all -I include "${sources[@]}" -o "$bin.new"
  mv "$bin.new" "$bin"
fi

# Seed corpus: a few valid files and a few broken ones, written with printf.
corpus=$build_dir/corpus
mkdir -p "$corpus"
seed() {  # seed NAME HEADER DATA_BYTES
  local name=$1 header=$2 nbytes=$3 n i
  n=${#header}
  {
    for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(( (n >> (8 * i)) & 255 )))"; done
    printf '%s' "$header"
    head -c "$nbytes" /dev/zero
  } > "$corpus/$name"
}
seed valid-f32 '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' 8
seed valid-meta '{"__metadata__":{"format":"pt"},"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]},"b":{"dtype":"BF16","shape":[],"data_offsets":[12,14]}}' 14
seed valid-padded '{"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}      ' 8
seed valid-sub-byte '{"q":{"dtype":"F4","shape":[4],"data_offsets":[0,2]},"r":{"dtype":"F8_E4M3","shape":[3,0],"data_offsets":[2,2]}}' 2
seed valid-empty '{}' 0
seed bad-hole '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}' 12
seed bad-dup '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}' 2
seed bad-size '{"a":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}}' 4
seed bad-shape '{"a":{"dtype":"I64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}' 8
seed bad-meta '{"__metadata__":{"k":[1]}}' 0
printf 'PK\003\004\024\000\000\000\010\000zipzipzip' > "$corpus/bad-zip"
printf '\200\002\212\012\154\374\234\106\371\040\152\250\120\031.' > "$corpus/bad-pickle"

dict=$build_dir/safetensors.dict
cat > "$dict" <<'EOF'
"{"
"}"
"["
"]"
":"
","
"\"dtype\""
"\"shape\""
"\"data_offsets\""
"\"__metadata__\""
"\"F16\""
"\"BF16\""
"\"F32\""
"\"F64\""
"\"F4\""
"\"F6_E2M3\""
"\"F8_E4M3\""
"\"C64\""
"\"BOOL\""
"18446744073709551615"
"4294967296"
"\\ud800"
EOF

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:halt_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}
echo "fuzz.sh: fuzzing for ${seconds}s (corpus $corpus, artifacts in $build_dir)"
"$bin" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -dict="$dict" -artifact_prefix="$build_dir/" "$corpus"
