#!/usr/bin/env bash
# Configure, build and test Remex.
#
# Usage: scripts/test.sh [-DVAR=VALUE ...] [-- CTEST_ARGS ...]
#   Arguments before `--` go to cmake's configure step, those after it to ctest
#   (for example `scripts/test.sh -- -L rpc` runs one label).
# Builds in <repo>/build (Ninja, RelWithDebInfo; another folder with REMEX_BUILD_DIR, and
# only the targets named in REMEX_BUILD_TARGETS when set), fetches the test models and reference
# runtime (scripts/fetch-models.sh, cache in $REMEX_CACHE or <repo>/.cache), locates the ONNX
# conformance data (scripts/conformance-dir.sh), then runs ctest with these exported:
#   REMEX_MODELS_DIR       folder of PP-OCR .onnx models
#   REMEX_ORT_MODULES      node_modules folder holding onnxruntime-node
#   REMEX_ORT_RUN          tests/reference/ort_run.js (the reference runtime)
#   REMEX_REAL_MODELS_DIR  folder of the real-model test's models (scripts/fetch-real-models.sh)
#   REMEX_CONFORMANCE_DIR  folder holding onnx-node/ (and onnx-simple/)
# A run whose tests all pass writes their names, one a line, to BUILD/tests-passed.txt,
# and the test executables all of whose tests passed to BUILD/test-executables-passed.txt
# (scripts/tests_passed.py). REMEX_SKIP_TESTS_IN=FILE, such a tests-passed.txt of another
# tree, leaves out the tests FILE names and does not build the executables recorded
# beside it (-DREMEX_SKIP_TEST_TARGETS): CI runs here only what its sanitized tree did
# not (.ci/run). The tests left are selected by number (ctest -I), so ctest's own
# arguments still narrow them further.
# REMEX_BUILD_ONLY=1: configure and build, then stop (no model fetch, no tests); CI builds
# the sanitized tree that way while its fresh-system check runs beside (.ci/run).
# OMP_WAIT_POLICY is exported as passive unless set: an OpenMP team's threads then sleep
# as soon as a parallel region ends instead of spinning (LLVM's OpenMP, the sanitized
# tree's, spins up to 200 ms), which took a core from the test beside; the sanitized suite
# used 15 % less CPU (docs/benchmarks.md, "The emulated convolution, and OpenMP's spinning
# in the tests"). The servers and benchmarks users run keep the runtimes' default.
# REMEX_TEST_JOBS: how many tests run at once (default: the cores plus one, as many of
# the tests wait on servers, Redis, browsers or their own timeouts part of the time;
# the sanitized suite too).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

# The packages the tests start or drive (Redis, PostgreSQL, Chromium, ...), beside those
# the README's set-up command installed; only the check when all are there.
scripts/setup-deps.sh --tests

cmake_args=() ctest_args=()
while (($#)); do
  if [[ $1 == -- ]]; then shift; ctest_args=("$@"); break; fi
  cmake_args+=("$1"); shift
done

build=${REMEX_BUILD_DIR:-build}
targets=()
if [[ -n ${REMEX_BUILD_TARGETS:-} ]]; then
  read -r -d '' -a names <<<"$REMEX_BUILD_TARGETS" || true  # Names split on any whitespace.
  targets=(--target "${names[@]}")
fi
skip_targets=""
if [[ -n ${REMEX_SKIP_TESTS_IN:-} ]]; then
  [[ -f $REMEX_SKIP_TESTS_IN ]] || { echo "test: REMEX_SKIP_TESTS_IN: no file $REMEX_SKIP_TESTS_IN" >&2; exit 2; }
  skip_targets=$(python3 scripts/tests_passed.py executables "$REMEX_SKIP_TESTS_IN")
fi
# The Python client is required here: its tests are part of the suite.
cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREMEX_PYTHON=ON \
  "-DREMEX_SKIP_TEST_TARGETS=$skip_targets" "${cmake_args[@]}"
cmake --build "$build" -j"$(nproc)" "${targets[@]}"
if [[ ${REMEX_BUILD_ONLY:-} == 1 ]]; then
  echo "test: $build built (REMEX_BUILD_ONLY=1: no tests run)"
  exit 0
fi

REMEX_MODELS_DIR=$(scripts/fetch-models.sh)
REMEX_ORT_MODULES=$(cd "$REMEX_MODELS_DIR/../../.." && pwd)
REMEX_CONFORMANCE_DIR=$(scripts/conformance-dir.sh)
REMEX_ORT_RUN=$repo/tests/reference/ort_run.js
REMEX_REAL_MODELS_DIR=$(scripts/fetch-real-models.sh)
# The model and conformance tests fail, rather than skip, when their data is missing.
REMEX_REQUIRE_MODELS=1
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export REMEX_MODELS_DIR REMEX_ORT_MODULES REMEX_CONFORMANCE_DIR REMEX_ORT_RUN REMEX_REAL_MODELS_DIR REMEX_REQUIRE_MODELS
export OMP_WAIT_POLICY
echo "test: models=$REMEX_MODELS_DIR conformance=$REMEX_CONFORMANCE_DIR"

selection=()
if [[ -n ${REMEX_SKIP_TESTS_IN:-} ]]; then
  numbers=$(python3 scripts/tests_passed.py select "$build" "$REMEX_SKIP_TESTS_IN")
  skipped=$(wc -l <"$REMEX_SKIP_TESTS_IN")
  if [[ -z $numbers ]]; then
    echo "test: every test of $build is named in $REMEX_SKIP_TESTS_IN ($skipped names): none to run"
    exit 0
  fi
  echo "test: leaving out the $skipped tests named in $REMEX_SKIP_TESTS_IN; $(tr ',' '\n' <<<"$numbers" | wc -l) to run"
  selection=(-I "0,0,0,$numbers")
fi
rm -f "$build/tests-passed.txt" "$build/test-executables-passed.txt"
rc=0
ctest --test-dir "$build" --output-on-failure -j"${REMEX_TEST_JOBS:-$(($(nproc) + 1))}" "${selection[@]}" "${ctest_args[@]}" || rc=$?
if ((rc == 0)); then
  python3 scripts/tests_passed.py record "$build" "${selection[@]}" "${ctest_args[@]}"
fi
if ((rc != 0)); then
  # A log keeps only its tail at hand: each failed test's own last lines again, after ctest's summary.
  scripts/ctest-failures.sh "$build" || true
fi
exit "$rc"
