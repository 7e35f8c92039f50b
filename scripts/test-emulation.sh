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
export REMEX_BUILD_TARGETS="cuda_emulation_test transform_cuda_test nn_cuda_test misc_cuda_test rnn_cuda_test
  libraries_cuda_test fused_cuda_test coverage_cuda_test cuda_device_test cuda_model_test cuda_load_test remex-server remex"
ctest_args=(-L cuda-emu)
if [[ ${1:-} == -- ]]; then shift; ctest_args+=("$@"); fi
exec "$repo/scripts/test-sanitized.sh" -- "${ctest_args[@]}"
