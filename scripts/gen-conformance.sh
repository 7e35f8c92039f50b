#!/usr/bin/env bash
# Generate ONNX's backend node test cases with ONNX 1.12's own generator (Debian's
# python3-onnx), unless OUT_DIR/onnx-node already exists.
#
# Usage: scripts/gen-conformance.sh [OUT_DIR]     (default <repo>/.cache/conformance)
# Output: OUT_DIR/onnx-node/<case>/ and OUT_DIR/onnx-simple/<case>/ (model.onnx plus
# test_data_set_N/{input,output}_K.pb). Progress goes to stderr.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$repo/.cache/conformance}

if [[ -d $out/onnx-node ]]; then
  exit 0
fi
echo "gen-conformance: generating ONNX backend cases into $out" >&2
# Generate next to the target and rename, so an interrupted run leaves no half-made onnx-node.
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d "${out%/}.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$repo/scripts/gen_conformance.py" "$tmp" >&2
mkdir -p "$out"
rm -rf "$out/onnx-simple"
mv "$tmp/simple" "$out/onnx-simple"
mv "$tmp/node" "$out/onnx-node"
echo "gen-conformance: $(find "$out/onnx-node" -mindepth 1 -maxdepth 1 -type d | wc -l) node cases" >&2
