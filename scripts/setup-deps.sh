#!/usr/bin/env bash
# Install the Debian packages Remex needs to build and test (Debian 12).
#
# Usage: scripts/setup-deps.sh
# Idempotent: apt is skipped entirely when every package is already installed.
# Uses sudo only when not running as root. nodejs/npm are added only if `node` is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  capnproto libcapnp-dev
  libboost-dev libboost-program-options-dev
  libzstd-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  libdnnl-dev
  libgtest-dev libgmock-dev googletest
  nlohmann-json3-dev libcli11-dev libspdlog-dev libxxhash-dev
  python3-onnx python3-numpy   # ONNX conformance case generation
)
command -v node >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo=()
((EUID == 0)) || sudo=(sudo)
echo "setup-deps: installing ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
