#!/usr/bin/env bash
# Build the CUDA device and kernels on the host emulation of CUDA
# (-DREMEX_CUDA_EMULATION=ON, kernels/cuda/emulation/README.md) with AddressSanitizer and
# UndefinedBehaviorSanitizer, in <repo>/build-emu, and run every `cuda-emu` test: the
# per-group differential tests, the CUDA device tests, the emulation's own tests, the
# whole-model tests on `remex-server --device cuda:0`, and the kernel coverage check.
# Needs no GPU and no nvcc. The same tree and flags as scripts/test-sanitized.sh (the
# whole suite), built for these tests only.
#
# Usage: scripts/test-emulation.sh [-- CTEST_ARGS ...]
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Every CUDA test executable (scripts/cuda-tests), the emulation's own test, and the
# server and CLI the whole-model tests start.
REMEX_BUILD_TARGETS="cuda_emulation_test $(grep -v '^#' "$repo/scripts/cuda-tests" | tr '\n' ' ') remex-server remex"
export REMEX_BUILD_TARGETS
ctest_args=(-L cuda-emu)
if [[ ${1:-} == -- ]]; then shift; ctest_args+=("$@"); fi
exec "$repo/scripts/test-sanitized.sh" -- "${ctest_args[@]}"
