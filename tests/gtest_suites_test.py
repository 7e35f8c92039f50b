#!/usr/bin/env python3
"""Tests of cmake/RemexGTest.cmake's one CTest test per GoogleTest suite
(REMEX_GTEST_PER_SUITE, the sanitized tree's mode): a small CMake project configured and
built here with the real cmake, a C program standing in for a GoogleTest executable
(it prints a `--gtest_list_tests` listing as GoogleTest writes it, and fails the suite
`Fails`), and the real ctest.

Usage: gtest_suites_test.py [unittest arguments]
"""
import json
import os
import subprocess
import tempfile
import textwrap
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# GoogleTest's listing: plain, parameterized (Prefix/Suite, Test/N with a comment), typed
# (Suite/N with a comment), a disabled test, a disabled suite, one with only disabled tests.
LISTING = "\\n".join([
    "Big.", *[f"  Test{i}" for i in range(20)],
    "Small.", "  One", "  DISABLED_Off",
    "Large/Param.", "  Runs/0  # GetParam() = 1", "  Runs/1  # GetParam() = 2",
    "Typed/0.  # TypeParam = int", "  Works",
    "DISABLED_Suite.", "  A",
    "AllOff.", "  DISABLED_A",
    "Fails.", "  Always",
]) + "\\n"

PROGRAM = textwrap.dedent("""\
    #include <stdio.h>
    #include <string.h>
    int main(int argc, char** argv) {
      for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--gtest_list_tests") == 0) { fputs("%s", stdout); return 0; }
        if (strcmp(argv[i], "--gtest_filter=Fails.*") == 0) { puts("[  FAILED  ] Fails.Always"); return 1; }
      }
      puts("[  PASSED  ] 1 test.");
      return 0;
    }
    """) % LISTING

PROJECT = textwrap.dedent("""\
    cmake_minimum_required(VERSION 3.20)
    project(t C)
    enable_testing()
    include(GoogleTest)
    include(%s/cmake/RemexGTest.cmake)
    add_executable(fake_test fake.c)
    remex_discover_tests(fake_test DISCOVERY_TIMEOUT 10 TEST_PREFIX pre.
                         PROPERTIES TIMEOUT 60 LABELS unit ENVIRONMENT "X=1")
    """) % REPO


def run(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


class GTestSuitesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        src = os.path.join(self.dir.name, "src")
        os.makedirs(src)
        with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
            f.write(PROJECT)
        with open(os.path.join(src, "fake.c"), "w") as f:
            f.write(PROGRAM)
        self.build = os.path.join(self.dir.name, "build")
        run("cmake", "-S", src, "-B", self.build, "-DREMEX_GTEST_PER_SUITE=ON")

    def listed(self):
        out = run("ctest", "--test-dir", self.build, "--show-only=json-v1").stdout
        return {t["name"]: t for t in json.loads(out)["tests"]}

    def test_before_the_build_the_program_is_a_placeholder_that_fails(self):
        self.assertEqual(list(self.listed()), ["fake_test_NOT_BUILT"])

    def test_one_test_per_suite_with_an_enabled_test(self):
        run("cmake", "--build", self.build)
        tests = self.listed()
        self.assertEqual(sorted(tests), ["fake_test:pre.Big.*", "fake_test:pre.Fails.*", "fake_test:pre.Large/Param.*", "fake_test:pre.Small.*",
                                         "fake_test:pre.Typed/0.*"])
        program = os.path.join(self.build, "fake_test")
        self.assertEqual(tests["fake_test:pre.Large/Param.*"]["command"], [program, "--gtest_filter=Large/Param.*"])
        props = {name: {p["name"]: p["value"] for p in t["properties"]} for name, t in tests.items()}
        # The per-test timeout times the count, at most 900 s; the count as the cost.
        self.assertEqual(props["fake_test:pre.Big.*"]["TIMEOUT"], 900)
        self.assertEqual(props["fake_test:pre.Large/Param.*"]["TIMEOUT"], 120)
        self.assertEqual(props["fake_test:pre.Small.*"]["TIMEOUT"], 60)
        self.assertEqual(props["fake_test:pre.Big.*"]["COST"], 20)
        self.assertEqual(props["fake_test:pre.Small.*"]["COST"], 1)
        # The names of the tests each suite runs, for scripts/tests_passed.py.
        with open(os.path.join(self.build, "fake_test_suite_tests.txt")) as f:
            self.assertEqual(f.read().splitlines(),
                             [*[f"Big.Test{i}" for i in range(20)], "Small.One", "Large/Param.Runs/0",
                              "Large/Param.Runs/1", "Typed/0.Works", "Fails.Always"])
        for p in props.values():
            self.assertEqual(p["LABELS"], ["unit"])
            self.assertEqual(p["ENVIRONMENT"], ["X=1"])
            self.assertEqual(p["WORKING_DIRECTORY"], self.build)

    def test_a_failing_suite_fails_and_the_others_pass(self):
        run("cmake", "--build", self.build)
        r = run("ctest", "--test-dir", self.build, "--output-on-failure", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("1 tests failed out of 5", r.stdout)
        self.assertIn("pre.Fails.* (Failed)", r.stdout)
        self.assertIn("[  FAILED  ] Fails.Always", r.stdout)

    def test_changed_properties_relink_the_program_and_list_it_again(self):
        run("cmake", "--build", self.build)
        src = os.path.join(self.dir.name, "src", "CMakeLists.txt")
        with open(src) as f:
            text = f.read()
        with open(src, "w") as f:
            f.write(text.replace("LABELS unit", "LABELS slow"))
        run("cmake", "--build", self.build)
        labels = {p["value"][0] for t in self.listed().values() for p in t["properties"] if p["name"] == "LABELS"}
        self.assertEqual(labels, {"slow"})


if __name__ == "__main__":
    unittest.main()
