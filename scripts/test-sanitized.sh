#!/usr/bin/env bash
# The whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer, with the
# CUDA device built on the host emulation of CUDA (-DREMEX_CUDA_EMULATION=ON,
# kernels/cuda/emulation/README.md), in <repo>/build-emu: every test of scripts/test.sh
# but the packaging checks,
# the `cuda-emu` tests (per-group differential tests, CUDA device tests, whole models on
# `remex-server --device cuda:0`, kernel coverage) and the fuzz targets' regression
# inputs included. Needs no GPU and no nvcc. A leak, a heap or stack error or undefined
# behaviour fails the test that hits it.
#
# Usage: scripts/test-sanitized.sh [-- CTEST_ARGS ...]
# REMEX_BUILD_TARGETS limits the build as in scripts/test.sh (scripts/test-emulation.sh
# uses it to build and run the `cuda-emu` tests only).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
export REMEX_BUILD_DIR=${REMEX_BUILD_DIR:-$repo/build-emu}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The packaging tests (label `packaging`) check what the Docker image installs for a
# Release build's libraries; a sanitizer build links libasan and libubsan, which the
# image does not ship. The two 1024 x 1024 real models (label `model-large`) take
# minutes under the sanitizers. Both run in the plain suite (scripts/test.sh).
ctest_args=(-LE 'packaging|model-large')
if [[ ${1:-} == -- ]]; then shift; ctest_args+=("$@"); fi
# Not the Python client: its module would load the sanitizers' runtime into an
# uninstrumented python3 (scripts/test.sh runs its tests).
exec "$repo/scripts/test.sh" -DREMEX_CUDA_EMULATION=ON -DCMAKE_BUILD_TYPE=Debug -DREMEX_PYTHON=OFF \
  "-DCMAKE_CXX_FLAGS=-O1 -g $sanitize" "-DCMAKE_C_FLAGS=-O1 -g $sanitize" \
  "-DCMAKE_EXE_LINKER_FLAGS=$sanitize" "-DCMAKE_SHARED_LINKER_FLAGS=$sanitize" -- "${ctest_args[@]}"
