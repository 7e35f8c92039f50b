#!/usr/bin/env python3
"""Records what a passing ctest run covered, and reads such a record back.

scripts/test.sh calls it; CI uses it so that its plain suite runs, and builds, only what
its sanitized suite did not (.ci/run, REMEX_SKIP_TESTS_IN of scripts/test.sh).

  tests_passed.py record BUILD [CTEST_ARGS ...]
      After a run of ctest in BUILD with CTEST_ARGS that passed: writes
      BUILD/tests-passed.txt, the names of the tests that run selected (one a line), and
      BUILD/test-executables-passed.txt, the GoogleTest executables of BUILD (file
      names, which are their CMake targets) all of whose tests are among them, but
      those of the CUDA emulation (label cuda-emu), whose twins in a real CUDA build
      have other tests; and BUILD/test-suites-passed.txt, where a test of the run was a
      whole GoogleTest suite (`Suite.*`, REMEX_GTEST_PER_SUITE of cmake/RemexGTest.cmake),
      the tests it ran ("EXECUTABLE Suite.Test" a line, GoogleTest's names as
      --gtest_filter takes them, from the EXECUTABLE_suite_tests.txt its discovery wrote beside the program).
  tests_passed.py executables FILE
      Prints the executables recorded beside FILE (a tests-passed.txt), separated by ';'
      (a CMake list), or nothing when there is no such record.
  tests_passed.py select BUILD FILE
      Prints the ctest numbers (comma separated, for `ctest -I 0,0,0,NUMBERS`) of BUILD's
      tests that FILE does not name, leaving out also the placeholders that CTest adds
      for a test executable that was not built (NAME_NOT_BUILT) where NAME is one of the
      executables recorded beside FILE, and the tests the suites recorded beside FILE ran
      (the same executable and GoogleTest name: a test that the other tree's program
      does not have, as a real CUDA build's beside the emulation's, still runs).

Test names and executables come from `ctest --show-only=json-v1` (CMake 3.14 and later);
ctest numbers its tests in that list's order, from 1.
"""
import json
import os
import subprocess
import sys

EXECUTABLES = "test-executables-passed.txt"
SUITES = "test-suites-passed.txt"


def ctest_tests(build, args=()):
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1", *args],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out).get("tests", [])


def executable(test, build):
    """The file name of the test's program when it is a GoogleTest executable built in
    BUILD (one of gtest_discover_tests), else None."""
    command = test.get("command") or []
    if not command or gtest_filter(test) is None:
        return None
    path = os.path.realpath(command[0])
    root = os.path.realpath(build) + os.sep
    return os.path.basename(path) if path.startswith(root) else None


def gtest_filter(test):
    """The test's --gtest_filter value, or None."""
    for a in (test.get("command") or [])[1:]:
        if a.startswith("--gtest_filter="):
            return a[len("--gtest_filter="):]
    return None


def suite_tests(test, build):
    """(executable, [GoogleTest names]) when the test runs a whole GoogleTest suite
    (--gtest_filter=Suite.*, REMEX_GTEST_PER_SUITE): the suite's tests as its discovery
    listed them (EXECUTABLE_suite_tests.txt beside the program). Else None."""
    exe, pattern = executable(test, build), gtest_filter(test)
    if not exe or not pattern or not pattern.endswith(".*"):
        return None
    listed = test["command"][0] + "_suite_tests.txt"
    prefix = pattern[:-1]
    return exe, [n for n in read_lines(listed) if n.startswith(prefix)]


def labels(test):
    for p in test.get("properties", []):
        if p.get("name") == "LABELS":
            return p.get("value") or []
    return []


def record(build, args):
    selected = ctest_tests(build, args)
    names = {t["name"] for t in selected}
    by_executable, emulated = {}, set()
    for t in ctest_tests(build):
        exe = executable(t, build)
        if exe:
            by_executable.setdefault(exe, []).append(t["name"])
            if "cuda-emu" in labels(t):
                emulated.add(exe)
    # An executable of the CUDA emulation has other tests in a real CUDA build (NVRTC's,
    # for one) and is built there anyway (the GPU bundle): never recorded.
    covered = sorted(e for e, tests in by_executable.items()
                     if e not in emulated and all(n in names for n in tests))
    with open(os.path.join(build, "tests-passed.txt"), "w") as f:
        f.writelines(t["name"] + "\n" for t in selected)
    with open(os.path.join(build, EXECUTABLES), "w") as f:
        f.writelines(e + "\n" for e in covered)
    ran = sorted({(exe, name) for exe, names in filter(None, (suite_tests(t, build) for t in selected))
                  for name in names})
    with open(os.path.join(build, SUITES), "w") as f:
        f.writelines(f"{exe} {name}\n" for exe, name in ran)


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def main(argv):
    if len(argv) >= 3 and argv[1] == "record":
        record(argv[2], argv[3:])
    elif len(argv) == 3 and argv[1] == "executables":
        print(";".join(read_lines(os.path.join(os.path.dirname(argv[2]), EXECUTABLES))))
    elif len(argv) == 4 and argv[1] == "select":
        build, skip_file = argv[2], argv[3]
        skip = set(read_lines(skip_file))
        skip.update(e + "_NOT_BUILT" for e in read_lines(os.path.join(os.path.dirname(skip_file), EXECUTABLES)))
        ran = {tuple(line.split(" ", 1)) for line in read_lines(os.path.join(os.path.dirname(skip_file), SUITES))}

        def covered(t):
            return t["name"] in skip or (executable(t, build), gtest_filter(t)) in ran

        numbers = [str(i) for i, t in enumerate(ctest_tests(build), start=1) if not covered(t)]
        print(",".join(numbers))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
