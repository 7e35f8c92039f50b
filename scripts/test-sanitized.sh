#!/usr/bin/env bash
# The whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer, with the
# CUDA device built on the host emulation of CUDA (-DREMEX_CUDA_EMULATION=ON,
# kernels/cuda/emulation/README.md), in the sanitized tree <repo>/build-emu (clang 14;
# scripts/sanitized-tree.sh, shared with scripts/fuzz.sh): the tests of scripts/test.sh
# but the packaging checks, the conformance and whole-model tests and the host tooling's
# own tests (below),
# the `cuda-emu` tests (per-group differential tests, CUDA device tests, whole models on
# `remex-server --device cuda:0`, kernel coverage) and the fuzz targets' regression
# inputs included. Needs no GPU and no nvcc; needs clang 14 and libFuzzer (Debian 12:
# clang-14, libclang-rt-14-dev, lld-14; --install-deps installs them). A leak, a heap or stack error or undefined
# behaviour fails the test that hits it.
#
# Usage: scripts/test-sanitized.sh [--install-deps] [--build-only] [-- CTEST_ARGS ...]
# --build-only configures and builds the tree and runs no test (REMEX_BUILD_ONLY of
# scripts/test.sh); a later run without it builds nothing more and runs the tests.
# REMEX_BUILD_TARGETS limits the build as in scripts/test.sh (scripts/test-emulation.sh
# uses it to build and run the `cuda-emu` tests only).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/sanitized-tree.sh
source "$repo/scripts/sanitized-tree.sh"
install=()
if [[ ${1:-} == --install-deps ]]; then install=(--install); shift; fi
if [[ ${1:-} == --build-only ]]; then export REMEX_BUILD_ONLY=1; shift; fi
sanitized_check_deps "${install[@]}"
export REMEX_BUILD_DIR=$sanitized_build
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Tests at a time (REMEX_TEST_JOBS): scripts/test.sh's default, the cores plus one.
# Since remex and remex-server start without relocating themselves
# (REMEX_PROGRAM_LINK_OPTIONS, scripts/sanitized-tree.sh) and OpenMP's threads sleep
# (OMP_WAIT_POLICY), two jobs kept 1.6 of the two cores busy, and a third took the suite
# from 458-479 s to 405 s on them (docs/benchmarks.md, "The CLI and the server not
# position-independent").

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
# This tree does not build those (-DREMEX_MODEL_TESTS=OFF, scripts/sanitized-tree.sh);
# all of them run in the plain suite (scripts/test.sh). (The `cuda-emu` whole-model
# tests run here: this tree is their only one.)
# A passing run leaves the names of its tests in build-emu/tests-passed.txt, which CI's
# plain suite then leaves out (.ci/run, REMEX_SKIP_TESTS_IN of scripts/test.sh).
ctest_args=(-LE 'packaging|conformance|model')
if [[ ${1:-} == -- ]]; then shift; ctest_args+=("$@"); fi
exec "$repo/scripts/test.sh" "${sanitized_cmake_args[@]}" -- "${ctest_args[@]}"
