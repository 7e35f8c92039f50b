#!/usr/bin/env bash
# scripts/setup-deps.sh --tests --check passes on this machine (which runs the tests), and fails with a message naming
# the gap when the build needs a library that no listed package provides (simulated by
# a copy of the scripts whose cmake/RemexDependencies.cmake asks for one more package).
# Usage: tests/setup_deps_test.sh REPO
set -euo pipefail
repo=$1
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$repo/scripts/setup-deps.sh" --tests --check 2>&1) || fail "setup-deps --tests --check failed here: $out"
grep -q "and the tests' tools and libraries are all found" <<<"$out" || fail "no success line: $out"

copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r "$repo/scripts" "$repo/cmake" "$copy/"
echo 'find_package(RemexNoSuchLibrary REQUIRED)' >>"$copy/cmake/RemexDependencies.cmake"
if out=$("$copy/scripts/setup-deps.sh" --check 2>&1); then
  fail "setup-deps --check passed although the build needs RemexNoSuchLibrary"
fi
grep -q "RemexNoSuchLibrary" <<<"$out" || fail "the message does not name the missing library: $out"
grep -q "its list misses" <<<"$out" || fail "the message does not say the list misses a package: $out"
echo "setup_deps_test: passed"
