#!/usr/bin/env bash
# Output identity across a code change: runs every preset at a small size and records the SHA-256
# of each result file (CSV, NPY; manifest.json and figures excluded: they hold times and versions).
#
#   scripts/output_identity.sh save  FILE   # before the change: write the hashes to FILE (and the
#                                           # result files themselves to FILE.d/)
#   scripts/output_identity.sh check FILE   # after: recompute and compare; lists every file that differs
#
# A CSV file whose bytes differ is compared column by column against the saved copy (when FILE.d/
# exists): when every saved column is still there, by name, with the same cells in the same rows,
# it is reported as "same values, columns added: ..." and is not a difference (a change may add a
# column). New files are listed and are not a difference; missing or changed ones are.
#
# Options (after the command): --build DIR (default build/), --threads N (default 2).
# Uses the tokdyn of the build folder; builds nothing itself (run scripts/setup.sh first).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}; file=${2:-}
shift 2 || { echo "usage: $0 save|check FILE [--build DIR] [--threads N]" >&2; exit 2; }
build=$here/build; threads=2
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
# `save` replaces FILE and FILE.d only when they are a previous save of this script: FILE holds
# nothing but hash lines, FILE.d carries the marker .tokdyn-identity. Anything else is refused
# before any work, and left untouched.
if [ "$cmd" = save ]; then
  if [ -e "$file" ] || [ -L "$file" ]; then
    if [ -L "$file" ] || [ ! -f "$file" ] || grep -qvE '^[0-9a-f]{64}  ' "$file"; then
      echo "$0: $file exists and is not a previous hash list of this script; expected a new path" >&2; exit 2
    fi
  fi
  if [ -e "$file.d" ] || [ -L "$file.d" ]; then
    if [ -L "$file.d" ] || [ ! -d "$file.d" ] || [ ! -f "$file.d/.tokdyn-identity" ]; then
      echo "$0: $file.d exists and is not a previous save of this script (no .tokdyn-identity marker); expected a new path" >&2; exit 2
    fi
  fi
fi
tokdyn=$build/tokdyn
[ -x "$tokdyn" ] || { echo "no $tokdyn: run scripts/setup.sh first" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/tokdyn-identity-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$tokdyn" make-checkpoint --size tiny --seed 5 --out "$work/ck" >/dev/null

# Small sizes: every preset, every code path it has, in seconds.
m2s="--set runs=3 --set tokens=6 --set depth=12"
m2="--set checkpoint=$work/ck $m2s"
runs=(
  "ssm-random-silu --set runs=3 --set depth=6 --set tokens=5 --set n=16 --set m=4"
  "ssm-random-silu --set runs=2 --set depth=4 --set tokens=4 --set n=8 --set m=3 --set form=recurrence --set weights=gaussian"
  "ssm-theorem-pe --set runs=2 --set t_end=2"
  "ssm-theorem-pd --set runs=3 --set doa_runs=4 --set t_end=4"
  "ssm-lemma-silu-bias --set draws=2000"
  "mamba2-fig1 $m2 --set taps=0,5 --set mixing=3"
  "mamba2-fig2 $m2 --set layer=1"
  "mamba2-fig3 $m2s --set size=tiny"
  "mamba2-fig4 $m2 --set window=4"
  "mamba2-fig5 $m2s --set size=tiny --set window=4"
  "mamba2-fig6 $m2"
  "rope-flow --set n=8 --set d=4 --set runs=2 --set t_end=2"
  "rope-flow --set n=8 --set d=4 --set runs=2 --set t_end=2 --set integrator=fehlberg78 --set causal=true"
  "rope-flow --set n=6 --set d=4 --set runs=2 --set t_end=2 --set integrator=discrete --set heads=2"
  "rope-fig1a" "rope-fig1b --set points=21" "rope-fig1c --set points=21" "rope-fig2a --set samples=51"
  "rope-fig2b" "rope-fig2c --set samples=51" "rope-fig3a --set points=31" "rope-fig3b" "rope-fig3c --set fd_max_n=12"
  "rope-fig4a --set points=31" "rope-fig4b --set ns=32,48 --set points=9" "rope-fig4c" "rope-fig4d"
  # The coupling paper: every coupling preset at its defaults (~25 s), the cocycle families, and the
  # depth spectra of every model.
  "coupling-all"
  "cocycle-spectra --set family=G1 --set depth=200"
  "cocycle-spectra --set family=G2 --set depth=150 --set d=6"
  "cocycle-spectra --set family=G3 --set depth=150"
  "cocycle-spectra --set family=G4 --set depth=150"
  "cocycle-spectra --set family=G5 --set depth=150 --set d=5 --set bundles=clv"
  "depth-spectra --set model=ssm --set depth=30 --set burn_in=5 --set k=4 --set tokens=6 --set n=8 --set m=4"
  "depth-spectra --set model=rope --set depth=30 --set burn_in=5 --set k=4 --set tokens=6 --set attention=3"
  "depth-spectra --set model=transformer --set depth=20 --set burn_in=4 --set k=4 --set tokens=5"
  "depth-spectra --set model=mamba2 --set checkpoint=$work/ck --set depth=12 --set burn_in=2 --set k=3 --set tokens=4"
)
out=$work/hashes.txt
: > "$out"
i=0
for r in "${runs[@]}"; do
  i=$((i + 1))
  dir=$work/run$i
  # shellcheck disable=SC2086
  "$tokdyn" run $r --out "$dir" --no-figures --quiet --threads "$threads" >/dev/null
  (cd "$dir" && find . -type f \( -name '*.csv' -o -name '*.npy' \) | LC_ALL=C sort | while read -r f; do
     printf '%s  %s  %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "${r//$work/WORK}" "${f#./}"
   done) >> "$out"
done
# rope-table2 at its own (fixed) size: ~1 s
"$tokdyn" run rope-table2 --out "$work/t2" --no-figures --quiet --threads "$threads" >/dev/null
(cd "$work/t2" && find . -type f \( -name '*.csv' -o -name '*.npy' \) | LC_ALL=C sort | while read -r f; do
   printf '%s  %s  %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "rope-table2" "${f#./}"
 done) >> "$out"

# Map "preset args  file" -> folder of this run (for the column comparison).
i=0; : > "$work/dirs.txt"
for r in "${runs[@]}"; do i=$((i + 1)); printf '%s\t%s\n' "${r//$work/WORK}" "run$i" >> "$work/dirs.txt"; done
printf '%s\t%s\n' "rope-table2" "t2" >> "$work/dirs.txt"

case $cmd in
  save)
    cp "$out" "$file"
    # Checked above: $file.d is absent or a previous save (marker present).
    if [ -d "$file.d" ] && [ -f "$file.d/.tokdyn-identity" ] && [ ! -L "$file.d" ]; then rm -rf -- "$file.d"; fi
    mkdir -p "$file.d"; : > "$file.d/.tokdyn-identity"
    (cd "$work" && find . -type f \( -name '*.csv' -o -name '*.npy' \) -print0 | xargs -0 -r cp --parents -t "$file.d")
    cp "$work/dirs.txt" "$file.d/dirs.txt"
    echo "saved $(wc -l < "$file") file hashes to $file (files in $file.d)" ;;
  check)
    if diff <(sort "$file") <(sort "$out") > "$work/diff.txt"; then
      echo "identical: $(wc -l < "$out") result files"
    else
      /usr/bin/python3 - "$file" "$out" "$work" <<'PY'
import csv, sys, os
saved_file, now_file, work = sys.argv[1:4]
def load(f):
    d = {}
    for line in open(f):
        h, rest = line.rstrip('\n').split('  ', 1)
        args, name = rest.rsplit('  ', 1)
        d[(args, name)] = h
    return d
old, new = load(saved_file), load(now_file)
dirs = dict(l.rstrip('\n').split('\t') for l in open(os.path.join(work, 'dirs.txt')))
saved_dirs = os.path.join(saved_file + '.d')
bad = 0
for key in sorted(set(old) | set(new)):
    args, name = key
    if key not in new:
        print(f"MISSING  {args}  {name}"); bad += 1; continue
    if key not in old:
        print(f"new      {args}  {name}"); continue
    if old[key] == new[key]:
        continue
    a = os.path.join(saved_dirs, dirs[args], name); b = os.path.join(work, dirs[args], name)
    if name.endswith('.csv') and os.path.exists(a):
        ra, rb = list(csv.reader(open(a))), list(csv.reader(open(b)))
        ha, hb = ra[0], rb[0]
        if set(ha) <= set(hb) and len(ra) == len(rb):
            ib = [hb.index(c) for c in ha]
            if all([row[i] for i in ib] == rowa for rowa, row in zip(ra[1:], rb[1:])):
                print(f"same values, columns added {[c for c in hb if c not in ha]}:  {args}  {name}")
                continue
            # Timing columns (wall_time_s, *_seconds) differ from run to run: compared without them.
            timing = {c for c in ha if "wall_time" in c or c.endswith("_seconds")}
            keep = [i for i, c in enumerate(ha) if c not in timing]
            if timing and all([row[ib[i]] for i in keep] == [rowa[i] for i in keep] for rowa, row in zip(ra[1:], rb[1:])):
                print(f"same values but the timing columns {sorted(timing)}:  {args}  {name}")
                continue
    print(f"DIFFERENT  {args}  {name}"); bad += 1
sys.exit(1 if bad else 0)
PY
    fi ;;
  *) echo "usage: $0 save|check FILE" >&2; exit 2 ;;
esac
