#!/usr/bin/env bash
# Regenerates docs/conformance.md: runs the conformance runner over ONNX's backend node
# cases and writes the per-op table and every failure and skip with its reason, then
# appends the list of real models (tests/data/real_models.md).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
cmake --build build --target conformance_test >/dev/null
REMEX_CONFORMANCE_DIR=$(scripts/conformance-dir.sh) REMEX_CONFORMANCE_REPORT="$repo/docs/conformance.md" \
  build/tests/conformance_test
cat tests/data/real_models.md >>docs/conformance.md
