#!/usr/bin/env python3
"""Tests of scripts/tests_passed.py, which lets CI's plain suite run and build only what
its sanitized suite did not (.ci/run): on two small CMake projects configured here, as a
sanitized and a plain tree would be, with a real cmake and ctest.

Usage: tests_passed_test.py [unittest arguments]
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "tests_passed.py")

# Stands in for a GoogleTest executable: ctest passes --gtest_filter as
# gtest_discover_tests does, and the program passes.
PROJECT = textwrap.dedent("""\
    cmake_minimum_required(VERSION 3.20)
    project(t NONE)
    enable_testing()
    # add_gtest(EXE NAME [LABEL]): the test NAME running the program EXE of this tree.
    function(add_gtest exe name)
      configure_file(${CMAKE_SOURCE_DIR}/program ${CMAKE_BINARY_DIR}/${exe} COPYONLY)
      add_test(NAME ${name} COMMAND ${CMAKE_BINARY_DIR}/${exe} --gtest_filter=${name})
      if(ARGN)
        set_tests_properties(${name} PROPERTIES LABELS ${ARGN})
      endif()
    endfunction()
    add_gtest(vm_test Vm.A)
    add_gtest(vm_test Vm.B)
    add_gtest(rpc_test Rpc.A)
    add_gtest(rpc_test Rpc.Slow slow)
    add_gtest(nn_cuda_test NnCuda.A cuda-emu)
    if(PLAIN)
      add_gtest(nn_cuda_test NnCuda.Nvrtc)
      add_test(NAME python_client COMMAND true)
    endif()
    add_test(NAME lint COMMAND true)
    """)

# The same programs, the sanitized tree with one test per GoogleTest suite
# (REMEX_GTEST_PER_SUITE, cmake/RemexGTest.cmake; the suites' tests listed in
# PROGRAM_suite_tests.txt, SUITE_TESTS); two executables have a suite `Rpc`; the plain
# tree's rpc_test has a test the sanitized one lacks (as a real CUDA build's program has
# NVRTC's tests beside the emulation's), a value-parameterized test named by its value (as
# gtest_discover_tests names it) and a test named with a prefix (TEST_PREFIX).
SUITES_PROJECT = textwrap.dedent("""\
    cmake_minimum_required(VERSION 3.20)
    project(t NONE)
    enable_testing()
    function(add_gtest exe name filter)
      configure_file(${CMAKE_SOURCE_DIR}/program ${CMAKE_BINARY_DIR}/${exe} COPYONLY)
      add_test(NAME ${name} COMMAND ${CMAKE_BINARY_DIR}/${exe} --gtest_filter=${filter})
    endfunction()
    if(PLAIN)
      add_gtest(vm_test Vm.A Vm.A)
      add_gtest(vm_test Large/Param.A/Pretty Large/Param.A/0)
      add_gtest(rpc_test Rpc.A Rpc.A)
      add_gtest(rpc_test Rpc.B Rpc.B)
      add_gtest(rpc_test Rpc.Extra Rpc.Extra)
      add_gtest(rpc_test RpcSlow.A RpcSlow.A)
      add_gtest(auth_test Rpc.Auth Rpc.Auth)
      add_gtest(shell_test shell.Unit.A Unit.A)
    else()
      add_gtest(vm_test vm_test:Vm.* Vm.*)
      add_gtest(vm_test vm_test:Large/Param.* Large/Param.*)
      add_gtest(rpc_test rpc_test:Rpc.* Rpc.*)
      add_gtest(rpc_test rpc_test:RpcSlow.* RpcSlow.*)
      add_gtest(shell_test shell_test:shell.Unit.* Unit.*)
    endif()
    """)
SUITE_TESTS = {"vm_test": ["Vm.A", "Large/Param.A/0"], "rpc_test": ["Rpc.A", "Rpc.B", "RpcSlow.A"],
               "shell_test": ["Unit.A"]}


def run(*args, **kwargs):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kwargs).stdout


def configure(case, project):
    """Writes `project` and its program into a temporary folder and configures it twice:
    case.sanitized, and case.plain with -DPLAIN=ON."""
    case.dir = tempfile.TemporaryDirectory()
    case.addCleanup(case.dir.cleanup)
    src = os.path.join(case.dir.name, "src")
    os.makedirs(src)
    with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
        f.write(project)
    with open(os.path.join(src, "program"), "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(os.path.join(src, "program"), 0o755)
    case.sanitized = os.path.join(case.dir.name, "sanitized")
    case.plain = os.path.join(case.dir.name, "plain")
    run("cmake", "-S", src, "-B", case.sanitized)
    run("cmake", "-S", src, "-B", case.plain, "-DPLAIN=ON")


def selected(plain, passed):
    """The names of the tests of `plain` that `select` leaves to run after `passed`."""
    numbers = run(sys.executable, SCRIPT, "select", plain, passed).strip()
    if not numbers:
        return []
    listing = run("ctest", "--test-dir", plain, "-N", "-I", "0,0,0," + numbers)
    return [line.split(": ", 1)[1] for line in listing.splitlines() if " Test " in line and "#" in line]


class TestsPassedTest(unittest.TestCase):
    def setUp(self):
        configure(self, PROJECT)

    def lines(self, path):
        with open(path) as f:
            return f.read().split()

    def record(self, *ctest_args):
        run("ctest", "--test-dir", self.sanitized, *ctest_args)
        run(sys.executable, SCRIPT, "record", self.sanitized, *ctest_args)
        return os.path.join(self.sanitized, "tests-passed.txt")

    def selected(self, passed):
        return selected(self.plain, passed)

    def test_records_the_tests_that_ran_and_the_executables_they_cover(self):
        passed = self.record("-LE", "slow")
        self.assertEqual(sorted(self.lines(passed)), ["NnCuda.A", "Rpc.A", "Vm.A", "Vm.B", "lint"])
        # rpc_test had a test left out (Rpc.Slow); nn_cuda_test is the CUDA emulation's,
        # whose real-CUDA twin has other tests; `lint` runs no executable of the tree.
        executables = os.path.join(self.sanitized, "test-executables-passed.txt")
        self.assertEqual(self.lines(executables), ["vm_test"])
        self.assertEqual(run(sys.executable, SCRIPT, "executables", passed).strip(), "vm_test")

    def test_selects_in_the_other_tree_only_what_did_not_run(self):
        passed = self.record("-LE", "slow")
        self.assertEqual(self.selected(passed), ["Rpc.Slow", "NnCuda.Nvrtc", "python_client"])

    def test_an_executable_left_unbuilt_is_not_selected_as_its_placeholder(self):
        passed = self.record()
        # What CTest lists for a GoogleTest executable that was not built.
        with open(os.path.join(self.plain, "CTestTestfile.cmake"), "a") as f:
            f.write("add_test(vm_test_NOT_BUILT vm_test_NOT_BUILT)\n"
                    "add_test(other_test_NOT_BUILT other_test_NOT_BUILT)\n")
        selected = self.selected(passed)
        self.assertNotIn("vm_test_NOT_BUILT", selected)
        self.assertIn("other_test_NOT_BUILT", selected)  # Not recorded: still fails there.

    def test_nothing_recorded_beside_a_list_means_no_executable_left_out(self):
        passed = os.path.join(self.dir.name, "names.txt")
        with open(passed, "w") as f:
            f.write("Vm.A\n")
        self.assertEqual(run(sys.executable, SCRIPT, "executables", passed).strip(), "")
        self.assertIn("Vm.B", self.selected(passed))
        self.assertNotIn("Vm.A", self.selected(passed))


class SuitesPassedTest(unittest.TestCase):
    """A sanitized tree of one test per suite against a plain tree of one per test."""

    def setUp(self):
        configure(self, SUITES_PROJECT)
        for program, names in SUITE_TESTS.items():
            with open(os.path.join(self.sanitized, program + "_suite_tests.txt"), "w") as f:
                f.writelines(n + "\n" for n in names)

    def test_a_suite_that_passed_covers_the_tests_it_ran_only(self):
        args = ("-E", "RpcSlow")
        run("ctest", "--test-dir", self.sanitized, *args)
        run(sys.executable, SCRIPT, "record", self.sanitized, *args)
        with open(os.path.join(self.sanitized, "test-suites-passed.txt")) as f:
            self.assertEqual(f.read().splitlines(),
                             ["rpc_test Rpc.A", "rpc_test Rpc.B", "shell_test Unit.A", "vm_test Large/Param.A/0",
                              "vm_test Vm.A"])
        passed = os.path.join(self.sanitized, "tests-passed.txt")
        # Rpc.Extra is not in the sanitized program; RpcSlow did not run; auth_test's suite
        # Rpc is another executable's.
        self.assertEqual(selected(self.plain, passed), ["Rpc.Extra", "RpcSlow.A", "Rpc.Auth"])


if __name__ == "__main__":
    unittest.main()
