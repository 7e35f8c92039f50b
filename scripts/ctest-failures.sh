#!/usr/bin/env bash
# Prints the last lines of each failed test's output from ctest's log of its last run.
#
# Usage: scripts/ctest-failures.sh BUILD_DIR [LINES]
#   BUILD_DIR  the build tree that ctest ran in (its Testing/Temporary/LastTest.log and
#              LastTestsFailed.log); LINES  how many lines of each test's output (default 60).
# Exit status 0, or 1 when the build tree holds no record of failed tests.
set -euo pipefail

build=${1:?usage: scripts/ctest-failures.sh BUILD_DIR [LINES]}
lines=${2:-60}
failed=$build/Testing/Temporary/LastTestsFailed.log
log=$build/Testing/Temporary/LastTest.log
if [[ ! -s $failed || ! -f $log ]]; then
  echo "ctest-failures: no failed tests recorded in $build" >&2
  exit 1
fi
# LastTestsFailed.log: one "NUMBER:NAME" a line. LastTest.log: each test's block holds
# "NUMBER/TOTAL Test: NAME", then its output between "Output:" and "<end of output>".
while IFS=: read -r _ name; do
  [[ -n $name ]] || continue
  echo "==== the last $lines lines of $name's output ===="
  awk -v name="$name" '
    $0 ~ /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); mine = ($0 == name); next }
    mine && /^Output:$/ { inside = 1; getline; next }   # the line of dashes after it
    mine && /^<end of output>$/ { inside = 0; mine = 0; next }
    inside { print }
  ' "$log" | tail -n "$lines"
done <"$failed"
