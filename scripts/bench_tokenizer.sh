#!/usr/bin/env bash
# Tokenizer throughput: tokdyn against Hugging Face's tokenizers (Rust crate 0.22.2 through its Node
# binding @anush008/tokenizers 0.6.0), one thread each, on the same corpus in the same run, for the
# published GPT-2, Llama 2 and Llama 3 tokenizer.json files (tests/scripts/tokenizer_refs.sh installs
# them, once). Prints a Markdown table: tokenizer, corpus MB, tokdyn MB/s, HF tokenizers MB/s, ratio.
#
# The corpus is built deterministically: every paragraph of /usr/share/common-licenses/* (English
# prose; each file once, symlinks resolved), then the strings of tests/reference/tokenizer/gen_strings.py
# (seed 7: mixed scripts, emoji, code, numbers, whitespace runs, long words) until BENCH_MB of UTF-8.
# Each side encodes every text once with special tokens (tokdyn: `tokenize --throughput`; HF:
# tests/reference/tokenizer/ref.js throughput); loading tokenizer.json is not timed; MB = 1e6 bytes.
# HF is timed two ways, both one thread: one awaited encode() per text (each call hops to libuv's
# pool and back, as an application calling the binding per text does), and encodeBatch() of 1000
# texts (the library's serial loop with TOKENIZERS_PARALLELISM=false, which spares most of the
# binding's per-call cost); the ratio is against the faster of the two. Best of BENCH_REPS runs.
#
# Usage: scripts/bench_tokenizer.sh [--tokdyn BIN] [--out FILE]
#   --tokdyn BIN  the CLI (default build/tokdyn); the references go to BIN's folder/npm (or TOKDYN_NPM)
#   --out FILE    also write the table (with the machine line) to FILE
# Environment: BENCH_MB [8] (corpus size), BENCH_REPS [2], BENCH_IDLE_WAIT [60] (seconds to wait for
#   an idle machine before each measurement), BENCH_KEEP (keep the work folder).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tokdyn=$here/build/tokdyn
out_md=
while [ $# -gt 0 ]; do
  case $1 in
    --tokdyn) tokdyn=$2; shift 2 ;;
    --out) out_md=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_tokenizer: unknown argument $1 (usage: scripts/bench_tokenizer.sh [--tokdyn BIN] [--out FILE])" >&2; exit 2 ;;
  esac
done
[ -x "$tokdyn" ] || { echo "bench_tokenizer: no tokdyn at $tokdyn (build it, or give --tokdyn BIN)" >&2; exit 1; }
tokdyn=$(cd "$(dirname "$tokdyn")" && pwd)/$(basename "$tokdyn")
npm_dir=${TOKDYN_NPM:-$(dirname "$tokdyn")/npm}
mb=${BENCH_MB:-8}
reps=${BENCH_REPS:-2}
export BENCH_IDLE_WAIT=${BENCH_IDLE_WAIT:-60}
py=/usr/bin/python3
bench_name=bench_tokenizer
work=$(mktemp -d /tmp/tokdyn-bench-tokenizer.XXXXXX)
[ -n "${BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
# shellcheck source=scripts/bench_lib.sh
source "$here/scripts/bench_lib.sh"

"$here/tests/scripts/tokenizer_refs.sh" "$npm_dir"
export TOKDYN_NPM=$npm_dir
ref_js=$here/tests/reference/tokenizer/ref.js

log "corpus: licences + generated strings, $mb MB"
"$py" - "$here/tests/reference/tokenizer" "$mb" "$work/corpus.jsonl" <<'EOF'
import glob, os, sys
sys.path.insert(0, sys.argv[1])
import gen_strings
target = float(sys.argv[2]) * 1e6
texts, seen = [], set()
for f in sorted(glob.glob("/usr/share/common-licenses/*")):
    real = os.path.realpath(f)
    if real in seen or not os.path.isfile(real):
        continue
    seen.add(real)
    with open(real, encoding="utf-8", errors="replace") as fh:
        texts += [p.strip("\n") + "\n" for p in fh.read().split("\n\n") if p.strip()]
size = sum(len(t.encode()) for t in texts)
n_lic, lic = len(texts), size
gen = gen_strings.generate(200000, seed=7)
for s in gen:
    if size >= target:
        break
    texts.append(s)
    size += len(s.encode())
gen_strings.write_jsonl(texts, sys.argv[3])
print(f"{len(texts)} texts, {size / 1e6:.2f} MB: {n_lic} licence paragraphs ({lic / 1e6:.2f} MB), "
      f"{len(texts) - n_lic} generated strings", file=sys.stderr)
EOF

for m in gpt2 llama2 llama3; do
  tj=$npm_dir/node_modules/@lenml/tokenizer-$m/models/tokenizer.json
  for r in $(seq 1 "$reps"); do
    log "$m run $r of $reps: tokdyn"
    wait_idle "$m-tokdyn$r"
    "$tokdyn" tokenize "$tj" --jsonl "$work/corpus.jsonl" --throughput >"$work/$m.tokdyn.$r"
    log "$m run $r of $reps: HF tokenizers, one encode per text"
    wait_idle "$m-hf$r"
    node "$ref_js" throughput "$tj" "$work/corpus.jsonl" >"$work/$m.hf.$r"
    log "$m run $r of $reps: HF tokenizers, encodeBatch"
    wait_idle "$m-hfb$r"
    node "$ref_js" throughput "$tj" "$work/corpus.jsonl" --batch 1000 >"$work/$m.hfb.$r"
  done
done

"$py" - "$work" "$reps" "$out_md" <<'EOF'
import os, re, sys
work, reps, out_md = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown CPU")
pat = re.compile(r"encoded (\d+) texts, (\d+) bytes, (\d+) tokens in ([0-9.eE+-]+) s")
def best(m, side):
    runs = []
    for r in range(1, reps + 1):
        line = open(f"{work}/{m}.{side}.{r}").read().strip()
        g = pat.search(line)
        if not g:
            sys.exit(f"bench_tokenizer: cannot read {side} line: {line!r}")
        n, b, k, s = int(g[1]), int(g[2]), int(g[3]), float(g[4])
        runs.append((b / 1e6 / s, n, b, k, line))
    return max(runs)
names = {"gpt2": "GPT-2", "llama2": "Llama 2 (Mistral-7B vocabulary)", "llama3": "Llama 3"}
rows, notes = [], []
for m in ("gpt2", "llama2", "llama3"):
    t, h, hb = best(m, "tokdyn"), best(m, "hf"), best(m, "hfb")
    if (t[1], t[2]) != (h[1], h[2]):
        notes.append(f"{m}: tokdyn and HF counted different texts/bytes: {t[4]} / {h[4]}")
    if t[3] != h[3]:
        notes.append(f"{m}: token counts differ: tokdyn {t[3]}, HF {h[3]}")
    hf = max(h[0], hb[0])
    rows.append(f"| {names[m]} | {t[2] / 1e6:.2f} | {t[0]:.2f} | {hf:.2f} ({h[0]:.2f} per call, {hb[0]:.2f} batched) "
                f"| {t[0] / hf:.2f}x |")
ncpu = os.cpu_count()
busy = [int(b) for b in re.findall(r"machine (\d+)% busy", open(f"{work}/load_log.txt").read())]
load = (f"; the machine was up to {max(busy)} % busy with other work just before a measurement "
        f"({sum(b >= 10 for b in busy)} of {len(busy)})" if busy and max(busy) >= 10 else "")
text = ("# Tokenizer throughput (scripts/bench_tokenizer.sh)\n\n"
        f"Machine: {cpu}, {ncpu} cores; one thread each; best of {reps} runs{load}.\n\n"
        "| tokenizer | corpus MB | tokdyn MB/s | HF tokenizers MB/s | ratio |\n| --- | ---: | ---: | ---: | ---: |\n"
        + "\n".join(rows) + "\n\n"
        "HF tokenizers 0.22.2 (Node binding @anush008/tokenizers 0.6.0): the faster of one awaited encode() "
        "per text and encodeBatch() of 1000 texts with TOKENIZERS_PARALLELISM=false; ratio = tokdyn / that.\n")
if notes:
    text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
print(text)
if out_md:
    open(out_md, "w").write(text)
sys.exit(1 if any("differ" in n for n in notes) else 0)
EOF
