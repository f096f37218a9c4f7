#!/usr/bin/env bash
# One command per trained model of docs/training.md: installs what is missing, builds, writes the
# corpus (scripts/corpus.sh), and trains MODEL's small size on it into results/train/MODEL-small
# (a checkpoint every preset takes as checkpoint=). Rerunning resumes an interrupted training.
# Usage: scripts/train.sh mamba2|gpt2|neox|llama [extra tokdyn train flags, e.g. --threads 1]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
model=${1:?usage: scripts/train.sh mamba2|gpt2|neox|llama [tokdyn train flags]}
shift
case "$model" in
  mamba2) steps=1500 ;;   # 3.07M tokens (about 3.1 epochs of the corpus)
  gpt2|neox|llama) steps=1000 ;;   # 2.05M tokens (about 2.1 epochs)
  *) echo "scripts/train.sh: expected mamba2, gpt2, neox or llama, got '$model'" >&2; exit 2 ;;
esac
"$here/scripts/setup.sh" "$here/build" >&2
corpus=$("$here/scripts/corpus.sh" "$here/build")
mkdir -p "$here/results/train"
exec "$here/build/tokdyn" train "$model" --size small --corpus "$corpus" --steps "$steps" \
  --out "$here/results/train/$model-small" "$@"
