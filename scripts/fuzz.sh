#!/usr/bin/env bash
# Fuzzes tokdyn's input parsers with libFuzzer (+ ASan + UBSan):
#   safetensors_header  the safetensors header parser (fuzz/fuzz_safetensors_header.cpp)
#   npy_header          the .npy header parser and integer decoder (fuzz/fuzz_npy_header.cpp)
#   mamba2_config       the Mamba-2 config.json reader (fuzz/fuzz_mamba2_config.cpp)
#   decoder_config      the GPT-2 / GPT-NeoX / Llama config.json readers (fuzz/fuzz_decoder_config.cpp)
#   params              the parameter layer: TOML text + `--set` strings against every preset's schema
#                       (fuzz/fuzz_params.cpp; the schemas come from `tokdyn show P --json`, so this
#                       target needs --tokdyn)
#   tokenizer_json      the tokenizer.json parser, then the encoder and decoder on fixed texts and on
#                       the input's own text after "\n\001\n" (fuzz/fuzz_tokenizer_json.cpp)
# Usage: scripts/fuzz.sh [--target T] [--seconds S] [--build-dir DIR] [--cxx CLANGXX] [--tokdyn BIN] [--build-only]
#   --target T      one of the targets above, or all (default: all, one after the other)
#   --seconds S     fuzzing time per target (default 10)
#   --build-dir D   where the binaries, seed corpora and crash artifacts go (default <repo>/build-fuzz)
#   --cxx C         clang++ to use (default: $TOKDYN_FUZZ_CXX, else clang++ / clang++-14 on PATH)
#   --tokdyn BIN    the tokdyn binary whose schemas the params target fuzzes (default: <repo>/build/tokdyn)
#   --build-only    build (or bring up to date) the targets' binaries and stop (CMake's `fuzzers` target)
# Exits non-zero if a build fails or a fuzzer finds a crash, a sanitizer error or a leak.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=10
build_dir=$repo/build-fuzz
cxx=${TOKDYN_FUZZ_CXX:-}
target=all
tokdyn_bin=$repo/build/tokdyn
build_only=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --target) target=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --cxx) cxx=$2; shift 2 ;;
    --tokdyn) tokdyn_bin=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1'; expected --target T, --seconds S, --build-dir DIR, --cxx CLANGXX, --tokdyn BIN or --build-only" >&2; exit 2 ;;
  esac
done
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --seconds '$seconds' is not a whole number" >&2; exit 2; }
case $target in
  safetensors_header|npy_header|mamba2_config|decoder_config|params|tokenizer_json) targets=("$target") ;;
  all) targets=(safetensors_header npy_header mamba2_config decoder_config params tokenizer_json) ;;
  *) echo "fuzz.sh: --target '$target'; expected safetensors_header, npy_header, mamba2_config, decoder_config, params, tokenizer_json or all" >&2; exit 2 ;;
esac
mkdir -p "$build_dir"
build_dir=$(cd "$build_dir" && pwd)   # relative to the caller's cwd, before we cd to the repo
if [[ -z $cxx ]]; then
  cxx=$(command -v clang++ || command -v clang++-14 || true)
fi
[[ -n $cxx ]] || { echo "fuzz.sh: clang++ not found; expected clang++ with libFuzzer (apt-get install clang)" >&2; exit 2; }
cd "$repo"

sources_of() {  # the translation units of one target
  case $1 in
    safetensors_header) echo src/io/safetensors.cpp src/io/json_strict.cpp src/io/file.cpp fuzz/fuzz_safetensors_header.cpp ;;
    npy_header) echo src/io/npy.cpp src/io/json_strict.cpp src/io/file.cpp fuzz/fuzz_npy_header.cpp ;;
    mamba2_config) echo src/models/mamba2/config.cpp src/models/mamba2/config_json.cpp src/io/json_strict.cpp src/io/file.cpp fuzz/fuzz_mamba2_config.cpp ;;
    decoder_config) echo src/models/decoder/decoder.cpp src/models/parts/parts.cpp src/models/decoder/gpt2.cpp \
      src/models/decoder/neox.cpp src/models/decoder/llama.cpp src/models/decoder/checkpoint.cpp src/io/safetensors.cpp \
      src/io/safetensors_writer.cpp src/io/json_strict.cpp src/io/file.cpp src/core/linalg.cpp src/core/rng.cpp src/core/error.cpp src/engine/dynamics.cpp \
      fuzz/fuzz_decoder_config.cpp ;;
    params) echo src/runtime/params.cpp src/runtime/params_values.cpp src/runtime/params_resolve.cpp src/io/outputs.cpp src/runtime/registry.cpp src/core/error.cpp src/core/suggest.cpp src/io/file.cpp src/io/json_strict.cpp fuzz/fuzz_params.cpp ;;
    tokenizer_json) echo src/io/tokenizer/parse.cpp src/io/tokenizer/pipeline.cpp src/io/tokenizer/bpe.cpp src/io/tokenizer/unicode.cpp \
      src/io/json_strict.cpp src/io/file.cpp src/core/error.cpp src/core/sha256.cpp fuzz/fuzz_tokenizer_json.cpp ;;
  esac
}

build() {  # build TARGET: rebuilds when a source, a header or this script is newer than the binary
  local t=$1 bin=$build_dir/fuzz_$1 rebuild=0 f
  local -a sources
  read -r -a sources <<< "$(sources_of "$t")"
  [[ -x $bin ]] || rebuild=1
  for f in "${sources[@]}" include/tokdyn/core/error.hpp include/tokdyn/runtime/experiment.hpp include/tokdyn/io/*.hpp include/tokdyn/models/mamba2/config.hpp include/tokdyn/models/mamba2/mamba2.hpp include/tokdyn/models/decoder/*.hpp src/models/decoder/*.hpp src/io/tokenizer/*.hpp src/runtime/*.hpp scripts/fuzz.sh; do
    if [[ $f -nt $bin ]]; then rebuild=1; fi
  done
  if [[ $rebuild == 1 ]]; then
    echo "fuzz.sh: building $bin with $cxx"
    # params: -DNDEBUG as in tokdyn's own builds (toml++ 3.3.0 asserts on some malformed keys, e.g.
    # "[ \v", where its release build reports a parse error; ASan/UBSan still watch that path).
    local -a defs=(-DFMT_HEADER_ONLY) libs=()
    [[ $t == params ]] && defs+=(-DNDEBUG)
    # decoder_config links the families' files whole (they register themselves), with their BLAS.
    [[ $t == decoder_config ]] && { defs+=(-DEIGEN_DONT_PARALLELIZE -fopenmp -isystem /usr/include/x86_64-linux-gnu/openblas-openmp);
      libs+=(-L/usr/lib/x86_64-linux-gnu/openblas-openmp -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas); }
    # tokenizer_json: Oniguruma (the regular expressions) and ICU (normalisation, character properties).
    [[ $t == tokenizer_json ]] && libs+=(-lonig -licuuc)
    # One object per source (through ccache when installed: a rebuild after a change, or in another
    # checkout of the same sources, recompiles only what changed), then the link.
    local -a flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
                    "${defs[@]}" -I include -I /usr/include/eigen3)
    local -a objs=() launcher=()
    command -v ccache >/dev/null && launcher=(ccache)
    local src obj
    for src in "${sources[@]}"; do
      obj=$build_dir/obj-$t/${src%.cpp}.o
      mkdir -p "$(dirname "$obj")"
      CCACHE_BASEDIR=$repo CCACHE_NOHASHDIR=true "${launcher[@]}" "$cxx" "${flags[@]}" -c "$src" -o "$obj.new.$$"
      mv "$obj.new.$$" "$obj"
      objs+=("$obj")
    done
    "$cxx" -fsanitize=fuzzer,address,undefined "${defs[@]}" "${objs[@]}" "${libs[@]}" -o "$bin.new.$$"
    mv "$bin.new.$$" "$bin"
  fi
}

u8() { printf "\\x$(printf %02x $(( $1 & 255 )))"; }

# --- safetensors seeds: 8-byte little-endian header length, JSON header, data bytes
seed_safetensors() {  # NAME HEADER DATA_BYTES
  local name=$1 header=$2 nbytes=$3 n i
  n=${#header}
  {
    for i in 0 1 2 3 4 5 6 7; do u8 $(( n >> (8 * i) )); done
    printf '%s' "$header"
    head -c "$nbytes" /dev/zero
  } > "$corpus/$name"
}
corpus_safetensors_header() {
  seed_safetensors valid-f32 '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' 8
  seed_safetensors valid-meta '{"__metadata__":{"format":"pt"},"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]},"b":{"dtype":"BF16","shape":[],"data_offsets":[12,14]}}' 14
  seed_safetensors valid-padded '{"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}      ' 8
  seed_safetensors valid-sub-byte '{"q":{"dtype":"F4","shape":[4],"data_offsets":[0,2]},"r":{"dtype":"F8_E4M3","shape":[3,0],"data_offsets":[2,2]}}' 2
  seed_safetensors valid-empty '{}' 0
  seed_safetensors bad-hole '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}' 12
  seed_safetensors bad-dup '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}' 2
  seed_safetensors bad-size '{"a":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}}' 4
  seed_safetensors bad-shape '{"a":{"dtype":"I64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}' 8
  seed_safetensors bad-meta '{"__metadata__":{"k":[1]}}' 0
  printf 'PK\003\004\024\000\000\000\010\000zipzipzip' > "$corpus/bad-zip"
  printf '\200\002\212\012\154\374\234\106\371\040\152\250\120\031.' > "$corpus/bad-pickle"
  cat > "$dict" <<'DICT'
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
DICT
}

# --- .npy seeds: magic, version, header length (2 or 4 bytes), header dict, data
seed_npy() {  # NAME MAJOR HEADER DATA_BYTES [DATA_PRINTF]
  local name=$1 major=$2 header=$3 nbytes=$4 data=${5:-}
  local n=${#header}
  {
    printf '\223NUMPY'; u8 "$major"; u8 0
    u8 $n; u8 $(( n >> 8 ))
    if [[ $major != 1 ]]; then u8 $(( n >> 16 )); u8 $(( n >> 24 )); fi
    printf '%s' "$header"
    if [[ -n $data ]]; then printf "$data"; else head -c "$nbytes" /dev/zero; fi
  } > "$corpus/$name"
}
corpus_npy_header() {
  seed_npy valid-i8 1 "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }          "$'\n' 48
  seed_npy valid-u1 1 "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }"$'\n' 5 '\001\002\003\377\200'
  seed_npy valid-be-fortran 2 "{'shape': (2, 2), 'fortran_order': True, 'descr': '>i4'}"$'\n' 16 '\000\000\000\001\377\377\377\376\000\000\000\003\200\000\000\000'
  seed_npy valid-scalar-v3 3 '{"descr": "<u8", "fortran_order": False, "shape": ()}'$'\n' 8 '\377\377\377\377\377\377\377\177'
  seed_npy valid-3d-fortran 1 "{'descr': '<i2', 'fortran_order': True, 'shape': (2, 3, 2), }"$'\n' 24 '\001\000\002\000\003\000\004\000\005\000\006\000\007\000\010\000\011\000\012\000\013\000\014\000'
  seed_npy valid-long 1 "{'descr':'<i4','fortran_order':False,'shape':(3L,)}"$'\n' 12
  seed_npy valid-zero 1 "{'descr': '<i8', 'fortran_order': False, 'shape': (0, 18446744073709551615), }"$'\n' 0
  seed_npy bad-lying-shape 1 "{'descr': '<i8', 'fortran_order': False, 'shape': (1048576, 1048576), }"$'\n' 0
  seed_npy bad-float 1 "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }"$'\n' 16
  seed_npy bad-dup 1 "{'descr': '<i8', 'descr': '<i8', 'fortran_order': False, 'shape': (1,), }"$'\n' 8
  seed_npy bad-u8 1 "{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }"$'\n' 8 '\377\377\377\377\377\377\377\377'
  cat > "$dict" <<'DICT'
"\x93NUMPY\x01\x00"
"\x93NUMPY\x02\x00"
"\x93NUMPY\x03\x00"
"'descr'"
"'fortran_order'"
"'shape'"
"True"
"False"
"'<i8'"
"'>u2'"
"'|u1'"
"'<u8'"
"'>i4'"
"'<f4'"
"(1,)"
"()"
"L"
", "
": "
"18446744073709551615"
DICT
}

# --- config.json seeds
corpus_mamba2_config() {
  printf '%s' '{"d_model": 768, "d_intermediate": 0, "n_layer": 24, "vocab_size": 50277, "ssm_cfg": {"layer": "Mamba2"}, "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": true, "residual_in_fp32": true, "fused_add_norm": true, "pad_vocab_size_multiple": 16, "tie_embeddings": true}' > "$corpus/ss-130m"
  printf '%s' '{"hidden_size": 768, "num_heads": 24, "head_dim": 64, "n_groups": 1, "state_size": 128, "conv_kernel": 4, "expand": 2, "chunk_size": 256, "layer_norm_epsilon": 1e-05, "num_hidden_layers": 24, "residual_in_fp32": true, "rms_norm": true, "tie_word_embeddings": true, "use_bias": false, "use_conv_bias": true, "hidden_act": "silu", "time_step_limit": [0.0, Infinity], "time_step_min": 0.001, "vocab_size": 50288, "model_type": "mamba2"}' > "$corpus/hf-130m"
  printf '%s' '{"d_model": 64, "n_layer": 4, "vocab_size": 1000, "ssm_cfg": {"layer": "Mamba2", "d_state": 16, "headdim": 16, "ngroups": 2, "dt_limit": [0.0, Infinity], "d_ssm": null, "chunk_size": 256}, "pad_vocab_size_multiple": 16}' > "$corpus/ss-tiny"
  printf '%s' '{"hidden_size": 64, "num_heads": 8, "head_dim": 16, "n_groups": 2, "state_size": 16, "num_hidden_layers": 2, "vocab_size": 1008, "time_step_limit": [0.001, 0.1]}' > "$corpus/hf-clamp"
  printf '%s' '{"d_model": 64, "n_layer": 4, "vocab_size": 1000, "ssm_cfg": {"layer": "Mamba2", "d_state": 16, "d_state": 32}}' > "$corpus/dup-nested"
  printf '%s' '{"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 10, "n_groups": 1, "layer_norm_epsilon": NaN}' > "$corpus/nan"
  cat > "$dict" <<'DICT'
"Infinity"
"-Infinity"
"NaN"
"\"d_model\""
"\"n_layer\""
"\"vocab_size\""
"\"ssm_cfg\""
"\"layer\""
"\"Mamba2\""
"\"d_state\""
"\"headdim\""
"\"ngroups\""
"\"dt_limit\""
"\"d_ssm\""
"\"hidden_size\""
"\"num_hidden_layers\""
"\"num_heads\""
"\"head_dim\""
"\"n_groups\""
"\"state_size\""
"\"time_step_limit\""
"\"layer_norm_epsilon\""
"\"hidden_act\""
"\"pad_vocab_size_multiple\""
"50288"
"2147483648"
"true"
"false"
"null"
DICT
}

corpus_decoder_config() {  # byte 0 picks the family (families in name order: gpt2, llama, neox)
  { printf '\000'; printf '%s' '{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "resid_pdrop": 0.1}'; } > "$corpus/gpt2-124m"
  { printf '\001'; printf '%s' '{"model_type": "llama", "vocab_size": 128256, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 172, "rope_theta": 500000.0, "rms_norm_eps": 1e-05, "tie_word_embeddings": true, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}'; } > "$corpus/llama3"
  { printf '\002'; printf '%s' '{"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "vocab_size": 50304, "hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8, "intermediate_size": 2048, "rotary_pct": 0.25, "rotary_emb_base": 10000, "max_position_embeddings": 2048, "use_parallel_residual": true, "hidden_act": "gelu"}'; } > "$corpus/pythia-70m"
  { printf '\001'; printf '%s' '{"model_type": "llama", "vocab_size": 10, "hidden_size": 6, "num_hidden_layers": 1, "num_attention_heads": 3, "intermediate_size": 4, "rope_scaling": {"type": "dynamic", "factor": 2.0}}'; } > "$corpus/llama-dynamic"
  cat > "$dict" <<'DICT'
"\"model_type\""
"\"architectures\""
"\"vocab_size\""
"\"hidden_size\""
"\"n_embd\""
"\"n_head\""
"\"n_layer\""
"\"n_inner\""
"\"num_hidden_layers\""
"\"num_attention_heads\""
"\"num_key_value_heads\""
"\"head_dim\""
"\"intermediate_size\""
"\"rotary_pct\""
"\"rope_theta\""
"\"rope_scaling\""
"\"rope_type\""
"\"llama3\""
"\"linear\""
"\"factor\""
"\"use_parallel_residual\""
"\"tie_word_embeddings\""
"\"max_position_embeddings\""
"1e308"
"-1"
"0"
"true"
"null"
DICT
}

# --- parameter seeds: byte 0 picks the preset, then TOML text, then `--set` strings after "\n\001\n"
seed_params() {  # NAME PRESET_BYTE TOML [SET...]
  local name=$1 pick=$2 toml=$3 s
  shift 3
  { u8 "$pick"; printf '%s' "$toml"; for s in "$@"; do printf '\n\001\n%s' "$s"; done; } > "$corpus/$name"
}
corpus_params() {
  local i
  for i in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42; do
    seed_params "defaults-$i" "$i" ""
  done
  seed_params toml-list 5 'sigma = [0.2, 0.1, -0.3]' 'H=10,25'
  seed_params toml-string-list 7 'g4_m = "-0.8,-0.8,-0.5,-0.5"' 'rho=1e-3,2e-3'
  seed_params set-twice 3 '' 'runs=2' 'runs=3'
  seed_params not-applicable 11 '' 'psi=identity' 'psi_scale=0.5'
  seed_params bad-float 2 'tau = nan' 'beta=inf'
  seed_params empty-list 4 'H = []' 'levels='
  seed_params trailing 6 '' 'etas=0.1,0.2,' 'q_grid=0.5,0.1'
  seed_params denormal 1 'kappa = 5e-324' 'sigma=4.9e-324'
  cat > "$dict" <<'DICT'
"="
","
"["
"]"
"\""
"nan"
"inf"
"-inf"
"1e308"
"1e-320"
"9007199254740993"
"true"
"false"
"\x0a\x01\x0a"
"sigma"
"rho"
"H"
"depth"
"tokens"
"block"
"refresh_every"
"d"
"psi"
"family"
"generators"
"weights"
"tf_weights"
"mask"
"tying"
"model"
"integrator"
DICT
  "$tokdyn_bin" presets >/dev/null
  { printf '['; local first=1 p
    for p in $("$tokdyn_bin" presets | awk '{print $1}'); do
      [[ $first == 1 ]] || printf ','
      first=0
      "$tokdyn_bin" show "$p" --json
    done
    printf ']'; } > "$build_dir/schemas.json"
  export TOKDYN_FUZZ_SCHEMAS=$build_dir/schemas.json
}

# --- tokenizer.json seeds: the file, then (optionally) "\n\001\n" and a text to encode
seed_tok() {  # NAME [TEXT]: the file from standard input
  cat > "$corpus/$1"
  if [[ $# -gt 1 ]]; then printf '\n\001\n%s' "$2" >> "$corpus/$1"; fi
}
corpus_tokenizer_json() {
  local bl_vocab='"h": 0, "e": 1, "l": 2, "o": 3, "\u0120": 4, "w": 5, "r": 6, "d": 7, "he": 8, "ll": 9, "hell": 10, "hello": 11, "\u0120w": 12, "a": 13, "c": 14, "t": 15, "!": 16, "1": 17, "2": 18'
  local bl_merges='"l l", "h e", "he ll", "hell o", "\u0120 w"'
  seed_tok bytelevel-bpe 'hello world!' <<JSON
{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
 "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
 "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
 "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "", "end_of_word_suffix": "",
  "fuse_unk": false, "byte_fallback": false, "vocab": {$bl_vocab}, "merges": [$bl_merges]}}
JSON
  seed_tok bytelevel-pairs-ignore-merges 'hello hello' <<JSON
{"added_tokens": [], "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true, "use_regex": true},
 "decoder": {"type": "ByteLevel"},
 "model": {"type": "BPE", "ignore_merges": true, "vocab": {$bl_vocab}, "merges": [["l", "l"], ["h", "e"], ["he", "ll"]]}}
JSON
  seed_tok added-tokens 'a  [M]  cat cats <|endoftext|>dog' <<JSON
{"added_tokens": [
  {"id": 19, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 20, "content": "[M]", "lstrip": true, "rstrip": true, "special": true, "normalized": false},
  {"id": 21, "content": "cat", "single_word": true, "special": false, "normalized": false},
  {"id": 22, "content": "dog", "special": false, "normalized": true}],
 "normalizer": {"type": "NFC"},
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
 "decoder": {"type": "ByteLevel"},
 "model": {"type": "BPE", "vocab": {$bl_vocab}, "merges": [$bl_merges]}}
JSON
  seed_tok sentencepiece-byte-fallback 'ab abé zz 你' <<'JSON'
{"version": "1.0", "truncation": null, "padding": null,
 "added_tokens": [{"id": 0, "content": "<unk>", "special": true, "normalized": false},
                  {"id": 1, "content": "<s>", "special": true, "normalized": false},
                  {"id": 2, "content": "</s>", "special": true, "normalized": false}],
 "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
 "pre_tokenizer": null,
 "post_processor": {"type": "TemplateProcessing",
   "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
   "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
            {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
   "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
 "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
   {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
 "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null, "end_of_word_suffix": null,
   "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
   "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "a": 3, "b": 4, "ab": 5, "<0xC3>": 6, "<0xA9>": 7, "<0xE4>": 8, "<0xBD>": 9,
             "<0xA0>": 10, "\u2581": 11, "\u2581ab": 12, "\u00e9": 13},
   "merges": ["a b", "\u2581 ab"]}}
JSON
  seed_tok split-digits-metaspace 'Hello  world 2024, élan' <<'JSON'
{"added_tokens": [{"id": 0, "content": "<unk>", "special": true}],
 "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Strip", "strip_left": true, "strip_right": true},
   {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
   {"type": "Split", "pattern": {"Regex": "\\p{N}+|[^\\s\\p{L}\\p{N}]+"}, "behavior": "Isolated", "invert": false},
   {"type": "Digits", "individual_digits": true},
   {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": true}]},
 "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": true},
 "model": {"type": "BPE", "unk_token": "<unk>", "vocab": {"<unk>": 0, "\u2581": 1, "H": 2, "e": 3, "l": 4, "o": 5, "w": 6, "r": 7,
   "d": 8, "2": 9, "0": 10, "4": 11, ",": 12, "\u2581H": 13, "ll": 14}, "merges": ["\u2581 H", "l l"]}}
JSON
  seed_tok llama3-split 'Hello world, it'"'"'s 12345 spaces   end' <<'JSON'
{"added_tokens": [{"id": 20, "content": "<|begin_of_text|>", "special": true, "normalized": false}],
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
   {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    "behavior": "Isolated", "invert": false},
   {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
 "post_processor": {"type": "Sequence", "processors": [
   {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
   {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [20], "tokens": ["<|begin_of_text|>"]}}}]},
 "decoder": {"type": "ByteLevel"},
 "model": {"type": "BPE", "ignore_merges": true, "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "\u0120": 4, "w": 5, "H": 6, "ll": 7, "\u0120w": 8},
   "merges": ["l l", "\u0120 w"]}}
JSON
  seed_tok whitespace-bert-suffix 'hello world [CLS]' <<'JSON'
{"added_tokens": [{"id": 7, "content": "[CLS]", "special": true}, {"id": 8, "content": "[SEP]", "special": true}],
 "normalizer": {"type": "NFD"},
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}, {"type": "WhitespaceSplit"},
   {"type": "Split", "pattern": {"String": "o"}, "behavior": "MergedWithPrevious", "invert": true}]},
 "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 7], "sep": ["[SEP]", 8]},
 "decoder": {"type": "BPEDecoder", "suffix": "</w>"},
 "model": {"type": "BPE", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "end_of_word_suffix": "</w>",
   "vocab": {"[UNK]": 0, "h": 1, "##e": 2, "##l": 3, "##o</w>": 4, "he": 5, "w": 6}, "merges": ["h ##e"]}}
JSON
  seed_tok roberta-nfkd-strip ' x ' <<'JSON'
{"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "Strip", "strip_left": false, "strip_right": true}]},
 "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Contiguous", "invert": false},
 "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": true, "add_prefix_space": true},
 "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "Fuse"}]},
 "model": {"merges": [], "vocab": {"<s>": 0, "x": 1, "</s>": 2, " ": 3}}}
JSON
  seed_tok mergedwithnext-removed 'a-b--c' <<'JSON'
{"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
   {"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithNext", "invert": false},
   {"type": "Split", "pattern": {"Regex": "b"}, "behavior": "Removed", "invert": false}]},
 "model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0, "-": 1, "c": 2, "<0x62>": 3}, "merges": []}}
JSON
  # Broken files: each refused with InputError.
  printf '%s' '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}}' > "$corpus/bad-regex"
  printf '%s' '{"model": {"type": "BPE", "vocab": {"a": 0, "a": 1}, "merges": []}}' > "$corpus/bad-dup-key"
  printf '%s' '{"truncation": {"max_length": 8}, "model": {"type": "BPE", "vocab": {}, "merges": []}}' > "$corpus/bad-truncation"
  printf '%s' '{"model": {"type": "WordPiece", "vocab": {"a": 0}}}' > "$corpus/bad-wordpiece"
  printf '%s' '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}}' > "$corpus/bad-merge"
  printf '%s' '{"model": {"type": "BPE", "vocab": {"a": 4294967296}, "merges": []}}' > "$corpus/bad-id"
  printf '%s' '{"model": {"type": "BPE", "dropout": 0.1, "vocab": {"a": 0}, "merges": []}}' > "$corpus/bad-dropout"
  printf '%s' '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "decoder": {"type": "Strip", "content": "ab"}}' > "$corpus/bad-strip"
  printf '%s' '{"model": {"type": "BPE", "unk_token": "<unk>", "vocab": {"a": 0}, "merges": []}}' > "$corpus/unk-missing"
  printf '%s' '{"model": ' > "$corpus/bad-truncated"
  printf '%s' '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]' > "$corpus/bad-deep"
  cat > "$dict" <<'DICT'
"\x0a\x01\x0a"
"{"
"}"
"["
"]"
":"
","
"null"
"true"
"false"
"\"type\""
"\"BPE\""
"\"model\""
"\"vocab\""
"\"merges\""
"\"added_tokens\""
"\"normalizer\""
"\"pre_tokenizer\""
"\"post_processor\""
"\"decoder\""
"\"truncation\""
"\"padding\""
"\"Sequence\""
"\"normalizers\""
"\"pretokenizers\""
"\"processors\""
"\"decoders\""
"\"NFC\""
"\"NFD\""
"\"NFKC\""
"\"NFKD\""
"\"Strip\""
"\"Prepend\""
"\"prepend\""
"\"Replace\""
"\"ByteLevel\""
"\"Split\""
"\"Metaspace\""
"\"Whitespace\""
"\"WhitespaceSplit\""
"\"Digits\""
"\"TemplateProcessing\""
"\"BertProcessing\""
"\"RobertaProcessing\""
"\"ByteFallback\""
"\"Fuse\""
"\"BPEDecoder\""
"\"pattern\""
"\"String\""
"\"Regex\""
"\"content\""
"\"behavior\""
"\"Isolated\""
"\"Removed\""
"\"MergedWithPrevious\""
"\"MergedWithNext\""
"\"Contiguous\""
"\"invert\""
"\"replacement\""
"\"prepend_scheme\""
"\"always\""
"\"first\""
"\"never\""
"\"split\""
"\"add_prefix_space\""
"\"use_regex\""
"\"individual_digits\""
"\"strip_left\""
"\"strip_right\""
"\"start\""
"\"stop\""
"\"suffix\""
"\"single\""
"\"pair\""
"\"special_tokens\""
"\"SpecialToken\""
"\"ids\""
"\"tokens\""
"\"id\""
"\"type_id\""
"\"A\""
"\"cls\""
"\"sep\""
"\"unk_token\""
"\"byte_fallback\""
"\"fuse_unk\""
"\"ignore_merges\""
"\"continuing_subword_prefix\""
"\"end_of_word_suffix\""
"\"dropout\""
"\"special\""
"\"single_word\""
"\"lstrip\""
"\"rstrip\""
"\"normalized\""
"\"<unk>\""
"\"<s>\""
"\"<0xC3>\""
"\"<0x20>\""
"\"\\u2581\""
"\"\\u0120\""
"\"\\ud83d\\ude42\""
"\\\\p{L}"
"\\\\p{N}"
"\\\\s"
"(?!\\\\S)"
"(?i:"
"{1,3}"
"[^"
"+"
"*"
"|"
"2147483646"
"\xe2\x96\x81"
"\xc4\xa0"
"\xf0\x9f\x99\x82"
DICT
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:halt_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}
for t in "${targets[@]}"; do
  build "$t"
  [[ $build_only == 1 ]] && continue
  corpus=$build_dir/corpus-$t
  dict=$build_dir/$t.dict
  mkdir -p "$corpus"
  "corpus_$t"
  echo "fuzz.sh: fuzzing $t for ${seconds}s (corpus $corpus, artifacts in $build_dir)"
  "$build_dir/fuzz_$t" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -dict="$dict" -artifact_prefix="$build_dir/$t-" "$corpus"
done
