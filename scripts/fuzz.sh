#!/usr/bin/env bash
# Fuzz one Remex target with libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer.
#
# Usage: scripts/fuzz.sh [--install-deps] TARGET SECONDS [LIBFUZZER_ARGS ...]
#        scripts/fuzz.sh [--install-deps] all SECONDS [LIBFUZZER_ARGS ...]   (every target)
# TARGET: fuzz_frame, fuzz_server, fuzz_executable or fuzz_onnx_import (tests/fuzz/).
#
# Builds the fuzz targets and `remex`, `remex-server` in the sanitized tree (<repo>/build-emu,
# configured by scripts/sanitized-tree.sh: clang 14, -fsanitize=fuzzer-no-link,address,
# undefined, REMEX_FUZZ=ON, the CUDA device on its host emulation), the tree whose tests
# scripts/test-sanitized.sh runs, so CI compiles it once; makes the seed corpus once
# (scripts/fuzz_seeds.py: real client sessions recorded on loopback with that tree's
# remex and remex-server, executables compiled by `remex compile`, ONNX models of the
# conformance cases) in BUILD/fuzz/seeds; then fuzzes for SECONDS. Inputs that reach new code are kept in
# BUILD/fuzz/corpus/TARGET; a crash, leak, sanitizer report, timeout (30 s) or
# out-of-memory (4 GiB) is written to BUILD/fuzz/findings/TARGET/ and ends the run with
# status 1. The last line printed per target: "fuzz: TARGET: N executions in S s, K
# corpus inputs, F findings".
# Needs clang 14 with libFuzzer (Debian 12: clang-14, libclang-rt-14-dev, lld-14) besides what
# scripts/setup-deps.sh installs; --install-deps installs them with apt-get when missing.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/sanitized-tree.sh
source "$repo/scripts/sanitized-tree.sh"
install=()
if [[ ${1:-} == --install-deps ]]; then install=(--install); shift; fi
sanitized_check_deps "${install[@]}"
targets_all=(fuzz_frame fuzz_server fuzz_executable fuzz_onnx_import)
if (($# < 2)); then
  echo "usage: scripts/fuzz.sh [--install-deps] TARGET|all SECONDS [LIBFUZZER_ARGS ...]" >&2
  echo "targets: ${targets_all[*]}" >&2
  exit 2
fi
target=$1 seconds=$2
shift 2
if [[ $target == all ]]; then
  targets=("${targets_all[@]}")
elif [[ " ${targets_all[*]} " == *" $target "* ]]; then
  targets=("$target")
else
  echo "fuzz: unknown target '$target' (targets: ${targets_all[*]})" >&2
  exit 2
fi
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz: SECONDS must be a whole number" >&2; exit 2; }

build=$sanitized_build
cmake -S "$repo" -B "$build" -G Ninja "${sanitized_cmake_args[@]}" >/dev/null
ninja -C "$build" "${targets[@]}" remex remex-server

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
seeds=$build/fuzz/seeds
if [[ ! -f $seeds/done ]]; then
  rm -rf "$seeds"
  /usr/bin/python3 "$repo/scripts/fuzz_seeds.py" --build "$build" --out "$seeds"
  touch "$seeds/done"
fi

# The targets run side by side, as many at a time as there are cores (REMEX_FUZZ_JOBS
# overrides; each libFuzzer process is single-threaded), so `all` takes about
# SECONDS x targets / cores; each gets the same SECONDS of its own.
jobs=${REMEX_FUZZ_JOBS:-$(nproc)}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: REMEX_FUZZ_JOBS must be a positive whole number" >&2; exit 2; }

# fuzz_one TARGET: fuzzes it, prints its summary line (and its report on a finding) and
# returns libFuzzer's status.
fuzz_one() {
  local t=$1 corpus=$build/fuzz/corpus/$1 findings=$build/fuzz/findings/$1 log=$build/fuzz/$1.log
  local start=$SECONDS rc execs found
  mkdir -p "$corpus" "$findings"
  set +e
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$findings/" "${fuzz_args[@]}" \
    "$corpus" "$seeds/$t" "$repo/tests/fuzz/regressions/$t" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  found=$(find "$findings" -type f | wc -l)
  echo "fuzz: $t: ${execs:-0} executions in $((SECONDS - start)) s, $(find "$corpus" -type f | wc -l) corpus inputs, $found findings (log: $log)"
  if ((rc != 0)); then
    grep -E "ERROR|SUMMARY|runtime error|fuzz_server:|verifier refuses|Test unit written" "$log" | head -20 >&2 || true
  fi
  return $rc
}

fuzz_args=("$@")
status=0
pids=()
for t in "${targets[@]}"; do
  if ((${#pids[@]} >= jobs)); then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
  fuzz_one "$t" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
