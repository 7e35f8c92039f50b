#!/usr/bin/env bash
# The whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer, with the
# CUDA device built on the host emulation of CUDA (-DREMEX_CUDA_EMULATION=ON,
# kernels/cuda/emulation/README.md), in <repo>/build-emu: the tests of scripts/test.sh
# but the packaging checks, the conformance and whole-model tests and the host tooling's
# own tests (below),
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

# Scope: the tests of what runs untrusted input and the device, which is what the
# sanitizers are for: the VM, the kernels, the wire, the server and the client, the
# compiler, the CLI and shell against real servers. Not built here: bench/
# (-DREMEX_BENCH=OFF) and the host tooling's own tests (-DREMEX_TOOLING_TESTS=OFF:
# reports, the results store, the dashboard, the shell through a terminal, the pages in
# Chromium, the docs' examples), which run in the plain suite (scripts/test.sh); each
# takes minutes to build or run under the sanitizers, and the VM, wire and server paths
# they reach are those the tests here run.
# The packaging tests (label `packaging`) check what the Docker image installs for a
# Release build's libraries; a sanitizer build links libasan and libubsan, which the
# image does not ship. The ONNX conformance cases and the whole models against ONNX
# Runtime (labels `conformance`, `model`, `model-large`) check numbers, which the
# sanitizers do not; the kernels they run are run sanitized by the kernels' own tests,
# and executables compiled from conformance models, as fuzz_executable seeds, by the
# fuzz tree.
# All of them run in the plain suite (scripts/test.sh). (The `cuda-emu` whole-model
# tests run here: this tree is their only one.)
ctest_args=(-LE 'packaging|conformance|model')
if [[ ${1:-} == -- ]]; then shift; ctest_args+=("$@"); fi
# Not the Python client: its module would load the sanitizers' runtime into an
# uninstrumented python3 (scripts/test.sh runs its tests).
exec "$repo/scripts/test.sh" -DREMEX_CUDA_EMULATION=ON -DCMAKE_BUILD_TYPE=Debug -DREMEX_PYTHON=OFF \
  -DREMEX_BENCH=OFF -DREMEX_TOOLING_TESTS=OFF \
  "-DCMAKE_CXX_FLAGS=-O1 -g $sanitize" "-DCMAKE_C_FLAGS=-O1 -g $sanitize" \
  "-DCMAKE_EXE_LINKER_FLAGS=$sanitize" "-DCMAKE_SHARED_LINKER_FLAGS=$sanitize" -- "${ctest_args[@]}"
