#!/usr/bin/env bash
# Build the CUDA device and kernels on the host emulation of CUDA
# (-DREMEX_CUDA_EMULATION=ON, kernels/cuda/emulation/README.md) with AddressSanitizer and
# UndefinedBehaviorSanitizer, in <repo>/build-emu, and run every `cuda-emu` test: the
# per-group differential tests, the CUDA device tests, the emulation's own tests, the
# whole-model tests on `remex-server --device cuda:0`, and the kernel coverage check.
# Needs no GPU and no nvcc.
#
# Usage: scripts/test-emulation.sh [-- CTEST_ARGS ...]
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
export REMEX_BUILD_DIR=${REMEX_BUILD_DIR:-$repo/build-emu}
export REMEX_BUILD_TARGETS="cuda_emulation_test transform_cuda_test nn_cuda_test misc_cuda_test rnn_cuda_test
  libraries_cuda_test fused_cuda_test coverage_cuda_test cuda_device_test cuda_model_test remex-server remex"
# Leaks, heap and stack errors and undefined behaviour all fail the test that hits them.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

ctest_args=(-L cuda-emu)
if [[ ${1:-} == -- ]]; then shift; ctest_args+=("$@"); fi
exec "$repo/scripts/test.sh" -DREMEX_CUDA_EMULATION=ON -DCMAKE_BUILD_TYPE=Debug \
  "-DCMAKE_CXX_FLAGS=-O1 -g $sanitize" "-DCMAKE_C_FLAGS=-O1 -g $sanitize" \
  "-DCMAKE_EXE_LINKER_FLAGS=$sanitize" "-DCMAKE_SHARED_LINKER_FLAGS=$sanitize" -- "${ctest_args[@]}"
