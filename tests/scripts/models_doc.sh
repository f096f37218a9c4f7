#!/usr/bin/env bash
# docs/models.md is generated from the model registry (`tokdyn models --markdown`): this test fails
# when it is stale. Regenerate with:  build/tokdyn models --markdown > docs/models.md
set -euo pipefail
tokdyn=$1; doc=$2
if ! diff -u "$doc" <("$tokdyn" models --markdown) > /tmp/models_doc.$$.diff; then
  head -40 /tmp/models_doc.$$.diff
  rm -f /tmp/models_doc.$$.diff
  echo "docs/models.md is stale: regenerate it with \`build/tokdyn models --markdown > docs/models.md\`" >&2
  exit 1
fi
rm -f /tmp/models_doc.$$.diff
echo "docs/models.md matches the registry"
