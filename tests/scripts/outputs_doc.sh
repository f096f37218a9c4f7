#!/usr/bin/env bash
# docs/outputs.md is generated from the presets' output declarations (`tokdyn outputs`): this test
# fails when it is stale. Regenerate with:  build/tokdyn outputs > docs/outputs.md
set -euo pipefail
tokdyn=$1; doc=$2
if ! diff -u "$doc" <("$tokdyn" outputs) > /tmp/outputs_doc.$$.diff; then
  head -40 /tmp/outputs_doc.$$.diff
  rm -f /tmp/outputs_doc.$$.diff
  echo "docs/outputs.md is stale: regenerate it with \`build/tokdyn outputs > docs/outputs.md\`" >&2
  exit 1
fi
rm -f /tmp/outputs_doc.$$.diff
echo "docs/outputs.md matches the declarations"
