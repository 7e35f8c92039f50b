#!/usr/bin/env python3
"""REMEX_TEST_COMPILE_OPTIONS (CMakeLists.txt) reaches the objects of the test
executables and nothing else: the sanitized tree (scripts/sanitized-tree.sh) compiles
those at -O0 without libFuzzer's coverage, and a library or fuzz target object that
caught the options would lose its optimisation or the fuzzer's coverage.

Configures the real tree (no build) in a temporary folder with a probe definition as the
option and reads its compile_commands.json: every object of a `*_test` executable has
the probe, every object of the libraries (`remex*`) and of the fuzz targets (`fuzz_*`)
has not, and no other object has it.

Usage: test_compile_options_test.py [unittest arguments]
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = "-DREMEX_TEST_OBJECT_PROBE=1"
TARGET_DIR = re.compile(r"CMakeFiles/([^/]+)\.dir/")


class TestCompileOptionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        build = os.path.join(cls.tmp.name, "build")
        subprocess.run(
            ["cmake", "-G", "Ninja", "-S", REPO, "-B", build, "-DREMEX_CUDA=OFF",
             "-DREMEX_PYTHON=OFF", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
             f"-DREMEX_TEST_COMPILE_OPTIONS={PROBE}"],
            check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(build, "compile_commands.json")) as f:
            cls.entries = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def by_target(self):
        targets = {}
        for entry in self.entries:
            match = TARGET_DIR.search(entry["output"] if "output" in entry else entry["command"])
            self.assertIsNotNone(match, entry["command"][:200])
            has_probe = PROBE in entry["command"]
            targets.setdefault(match.group(1), set()).add(has_probe)
        return targets

    def test_test_objects_have_the_options(self):
        targets = self.by_target()
        tests = [t for t in targets if t.endswith("_test")]
        self.assertGreater(len(tests), 10, sorted(targets))
        for target in tests:
            self.assertEqual(targets[target], {True}, f"{target}: an object without the options")

    def test_libraries_and_fuzz_targets_do_not(self):
        targets = self.by_target()
        others = [t for t in targets if t.startswith(("remex", "fuzz_"))]
        self.assertIn("remex_kernels", others)
        self.assertIn("fuzz_frame", others)
        for target in others:
            self.assertEqual(targets[target], {False}, f"{target}: an object with the test options")

    def test_no_other_object_has_them(self):
        for target, probes in self.by_target().items():
            if not target.endswith("_test"):
                self.assertNotIn(True, probes, target)


if __name__ == "__main__":
    unittest.main(argv=sys.argv, verbosity=2)
