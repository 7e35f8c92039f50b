#!/usr/bin/env python3
"""REMEX_TEST_COMPILE_OPTIONS (CMakeLists.txt) reaches the objects of the test
executables and nothing else, REMEX_HOST_TOOLING_COMPILE_OPTIONS those of the host
tooling that no fuzz target links and nothing else: the sanitized tree
(scripts/sanitized-tree.sh) compiles those at -O0 without libFuzzer's coverage, and a
library or fuzz target object that caught the options would lose its optimisation or
the fuzzer's coverage. REMEX_PROGRAM_LINK_OPTIONS reaches the link lines of remex and
remex-server and no other: the sanitized tree links those two -no-pie, and a test program
or fuzz target so linked reports OpenMP's thread data as leaked.

Configures the real tree (no build) in a temporary folder with a probe definition as
each option and reads its compile_commands.json: every object of a `*_test` executable
has the test probe, every object of the libraries (`remex*`) and of the fuzz targets
(`fuzz_*`) has not, and no other object has it; the tooling probe is in the objects of
the host tooling targets only, and no fuzz target's link line names one of them; the
link probe is on the link lines of the two programs and not on those of a test program,
a fuzz target or the embedded server's library.

No object names the folder of the tree or of the build, so that a clone in another
folder (each CI run's) hits the compiler cache: no compile definition holds either path
(but REMEX_EMBEDDED_BUILD_PATH, on its one-line file), and the test batch files
(CMakeLists.txt's remex_unity_batches) include their sources by relative paths. The tree
is configured with REMEX_CUDA=AUTO, so the CUDA tests are checked where CUDA is
installed.

Usage: test_compile_options_test.py [unittest arguments]
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = "-DREMEX_TEST_OBJECT_PROBE=1"
TOOLING_PROBE = "-DREMEX_HOST_TOOLING_PROBE=1"
LINK_PROBE = "-Wl,--defsym=remex_program_link_probe=0"
# CMakeLists.txt's remex_host_tooling: their libraries' files as a link line names them.
TOOLING = {"remex": None, "remex_tooling": "libremex_tooling.a", "remex_results": "libremex_results.a",
           "remex_client": "libremex_client.a", "remex_farm": "libremex_farm.a", "remex-server": None,
           "remex_embedded": None}
FUZZ_TARGETS = ("fuzz_frame", "fuzz_server", "fuzz_executable", "fuzz_onnx_import")
TARGET_DIR = re.compile(r"CMakeFiles/([^/]+)\.dir/")
# A -DNAME=VALUE of a compile command, its value up to the next space.
DEFINITION = re.compile(r"-D(\w+)=(\S+)")


class TestCompileOptionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        build = os.path.join(cls.tmp.name, "build")
        subprocess.run(
            ["cmake", "-G", "Ninja", "-S", REPO, "-B", build, "-DREMEX_CUDA=AUTO",
             "-DREMEX_PYTHON=OFF", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
             f"-DREMEX_TEST_COMPILE_OPTIONS={PROBE}", f"-DREMEX_HOST_TOOLING_COMPILE_OPTIONS={TOOLING_PROBE}",
             f"-DREMEX_PROGRAM_LINK_OPTIONS={LINK_PROBE}"],
            check=True, stdout=subprocess.DEVNULL)
        cls.build = build
        with open(os.path.join(build, "compile_commands.json")) as f:
            cls.entries = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def by_target(self, probe=PROBE):
        targets = {}
        for entry in self.entries:
            match = TARGET_DIR.search(entry["output"] if "output" in entry else entry["command"])
            self.assertIsNotNone(match, entry["command"][:200])
            has_probe = probe in entry["command"]
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

    def test_host_tooling_objects_and_no_others_have_the_tooling_options(self):
        targets = self.by_target(TOOLING_PROBE)
        for target in TOOLING:
            self.assertIn(target, targets)
        for target, probes in targets.items():
            self.assertEqual(probes, {target in TOOLING}, target)

    def link_line(self, output):
        out = subprocess.run(["ninja", "-C", self.build, "-t", "commands", output],
                             check=True, capture_output=True, text=True).stdout
        link = out.strip().splitlines()[-1]
        self.assertIn(f"-o {output}", link)
        return link

    def test_program_link_options_reach_the_two_programs_only(self):
        for program in ("host_client/cli/remex", "device_server/remex-server"):
            self.assertIn(LINK_PROBE, self.link_line(program), program)
        for other in ("kernels/kernels_test", "tests/farm_test", "tests/fuzz/fuzz_server",
                      "host_client/cli/libremex_embedded.so"):
            self.assertNotIn(LINK_PROBE, self.link_line(other), other)

    def test_no_compile_definition_names_the_tree_or_the_build(self):
        folders = (os.path.realpath(REPO), os.path.realpath(self.build), REPO, self.build)
        checked = 0
        for entry in self.entries:
            for name, value in DEFINITION.findall(entry["command"]):
                checked += 1
                if name == "REMEX_EMBEDDED_BUILD_PATH":
                    self.assertTrue(entry["file"].endswith("host_client/tooling/embedded_build_path.cc"),
                                    entry["file"])
                    continue
                path = value.replace("\\", "").strip('"')
                for folder in folders:
                    self.assertFalse(path == folder or path.startswith(folder + os.sep),
                                     f"{entry['file']}: -D{name}={value}")
        self.assertGreater(checked, 100)

    def test_test_batches_include_relative_paths(self):
        batches = glob.glob(os.path.join(self.build, "**", "CMakeFiles", "*", "batches", "batch_*.cc"),
                            recursive=True)
        self.assertGreater(len(batches), 10)
        for batch in batches:
            with open(batch) as f:
                includes = re.findall(r'^#include "([^"]+)"', f.read(), re.M)
            self.assertTrue(includes, batch)
            for path in includes:
                self.assertFalse(os.path.isabs(path), f"{batch}: #include \"{path}\"")
                self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(batch), path)), f"{batch}: {path}")

    def test_no_fuzz_target_links_the_host_tooling(self):
        for fuzz in FUZZ_TARGETS:
            link = self.link_line(f"tests/fuzz/{fuzz}")
            self.assertIn("libremex_base.a", link)
            for target, library in TOOLING.items():
                if library:
                    self.assertNotIn(library, link, f"{fuzz} links {target}")


if __name__ == "__main__":
    unittest.main(argv=sys.argv, verbosity=2)
