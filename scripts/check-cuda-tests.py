#!/usr/bin/env python3
"""Checks that scripts/cuda-tests lists exactly the CUDA test executables of a build.

The executables are those of the build that its CTest tests labelled `cuda` or
`cuda-emu` run (`ctest --show-only=json-v1`; not cmake, which resets the emulation's
trace), less the emulation's own test (cuda_emulation_test, which exists only under
emulation and is not shipped to a GPU). Exit status 1, naming
each executable missing from the list or listed but not built, else 0.

Usage: scripts/check-cuda-tests.py BUILD_DIR [LIST]   (LIST: scripts/cuda-tests)
"""
import json
import os
import subprocess
import sys


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    build = sys.argv[1]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    list_path = sys.argv[2] if len(sys.argv) == 3 else os.path.join(repo, "scripts", "cuda-tests")
    with open(list_path, encoding="utf-8") as f:
        listed = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    shown = subprocess.run(["ctest", "--test-dir", build, "-N", "-L", "^cuda(-emu)?$", "--show-only=json-v1"],
                           check=True, capture_output=True, text=True).stdout
    built = set()
    build_dir = os.path.realpath(build) + os.sep
    for test in json.loads(shown).get("tests", []):
        command = test.get("command") or []
        # Executables of this build only: the emulation's trace fixture runs cmake.
        if command and os.path.realpath(command[0]).startswith(build_dir):
            built.add(os.path.basename(command[0]))
    built.discard("cuda_emulation_test")
    if not built:
        print(f"check-cuda-tests: no CUDA tests in {build} (a build without CUDA?)")
        return 1
    problems = [f"built but not in {list_path}: {name}" for name in sorted(built - listed)]
    problems += [f"in {list_path} but no CUDA test of {build} runs it: {name}" for name in sorted(listed - built)]
    for p in problems:
        print("check-cuda-tests: " + p)
    if not problems:
        print(f"check-cuda-tests: the {len(built)} CUDA test executables are listed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
