#!/usr/bin/env bash
# The papers' trained-versus-random comparisons on a model made by `tokdyn train` (docs/training.md):
# every preset below runs on the trained weights (checkpoint=DIR) and on the same model at its
# initialisation (DIR/checkpoints/step-0000000, the weights training started from), each into
# OUT/<preset>-trained and OUT/<preset>-init; then OUT/comparison.md tabulates every summary and
# verdict side by side (scripts/compare_runs.py).
#   Mamba-2:      mamba2-fig1, mamba2-fig2, mamba2-fig4, mamba2-fig6 (The Attention Within)
#   transformers: transformer-clustering, coupling-rank-collapse (E2), coupling-qk-specificity (E4)
# Usage: scripts/trained_vs_init.sh TRAINED_DIR OUT [extra --set k=v for every run]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: scripts/trained_vs_init.sh TRAINED_DIR OUT [--set k=v ...]}
out=${2:?usage: scripts/trained_vs_init.sh TRAINED_DIR OUT [--set k=v ...]}
shift 2
tokdyn="$here/build/tokdyn"
model=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['model'])" "$dir/manifest.json")
init="$dir/checkpoints/step-0000000"
[ -f "$init/model.safetensors" ] || { echo "scripts/trained_vs_init.sh: $init is missing; expected a tokdyn train results folder" >&2; exit 2; }
case "$model" in
  mamba2) presets=(mamba2-fig1 mamba2-fig2 mamba2-fig4 mamba2-fig6); knobs=() ;;
  gpt2|neox|llama) presets=(transformer-clustering coupling-rank-collapse coupling-qk-specificity); knobs=(--set "model=$model") ;;
  *) echo "scripts/trained_vs_init.sh: unknown model '$model'" >&2; exit 2 ;;
esac
mkdir -p "$out"
for p in "${presets[@]}"; do
  for which in trained init; do
    ck=$dir; [ "$which" = init ] && ck=$init
    "$tokdyn" run "$p" "${knobs[@]}" --set "checkpoint=$ck" --out "$out/$p-$which" --overwrite "$@"
  done
done
/usr/bin/python3 "$here/scripts/compare_runs.py" "$out" "${presets[@]}" > "$out/comparison.md"
echo "comparison: $out/comparison.md"
