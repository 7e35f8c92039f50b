#!/usr/bin/python3
"""`remex shell` against a real remex-server process.

Through a pseudo-terminal (pexpect), as a person types: one session for load, upload,
run (twice, feeding the state back), fetch -o, stats, compare, handles, free, bench,
profile and info; zeros and random made on the server (seeded, checked by stats and
compare); names falling back after free; handles and info accounting for the session's
memory; a long bench's progress line (samples done, time left, polled from the server); errors that leave the shell going; TAB completion of a command, a
file, an input name and a tensor name; Ctrl-C cancelling a benchmark on the server;
the history file kept across two shells. From a script on stdin: no prompt, and the
first failing command ends the shell with its exit status (tooling/exit_code.h).

The model is a recurrent step, hidden_next = tanh(token @ W + hidden), with a symbolic
batch dim, written with onnx.helper; every number the shell prints is checked against
numpy.

Usage: shell_test.py --remex BIN --server BIN [ShellTerminalTest | ShellScriptTest | other unittest
       arguments]  (exit status 1 when a test fails)
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import onnx
import pexpect
from onnx import TensorProto, helper, numpy_helper

REMEX = SERVER = None
PROMPT = r"remex(:\S+)?> "
W = ((np.arange(16, dtype=np.float32).reshape(4, 4) - 7.5) / 10).astype(np.float32)
TOKEN = np.array([[1.0, 0.0, -1.0, 0.5]], dtype=np.float32)
H0 = np.zeros((1, 4), dtype=np.float32)


def step(token, hidden):
    return np.tanh(token @ W + hidden).astype(np.float32)


def write_model(path):
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["token", "W"], ["xw"]),
         helper.make_node("Add", ["xw", "hidden"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["hidden_next"])],
        "rnn_step",
        [helper.make_tensor_value_info("token", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("hidden_next", TensorProto.FLOAT, ["batch", 4])],
        [numpy_helper.from_array(W, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


NUMBER = r"-?[0-9.]+(?:e[-+]?\d+)?"


def assert_summary(test, out, described, expected):
    """`out` has a line "DESCRIBED  [v0, v1, ...]  argmax K" whose values are `expected`'s."""
    m = re.search(re.escape(described) + r"  \[([^\]]*)\]  argmax (\d+)", out)
    test.assertTrue(m, "no summary of '%s' in:\n%s" % (described, out))
    values = np.array([float(v) for v in m.group(1).split(", ")], dtype=np.float32)
    np.testing.assert_allclose(values, expected.reshape(-1), rtol=1e-5, atol=1e-6)
    test.assertEqual(int(m.group(2)), int(np.argmax(expected)))


class ServerFixture(unittest.TestCase):
    """A remex-server on loopback and a folder with the model and its inputs, per class."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="remex-shell-test-")
        write_model(os.path.join(cls.work, "rnn.onnx"))
        np.save(os.path.join(cls.work, "token.npy"), TOKEN)
        np.save(os.path.join(cls.work, "h0.npy"), H0)
        np.save(os.path.join(cls.work, "expected.npy"), step(TOKEN, H0))
        with open(os.path.join(cls.work, "notes.txt"), "w") as f:
            f.write("not a model\n")
        cls.server = subprocess.Popen([SERVER, "--listen", "127.0.0.1:0", "--quiet"], stdout=subprocess.PIPE,
                                      text=True)
        first = cls.server.stdout.readline()
        m = re.search(r"127\.0\.0\.1:(\d+)", first)
        if not m:
            cls.server.kill()
            raise RuntimeError("remex-server did not start: " + first)
        cls.address = "127.0.0.1:" + m.group(1)
        cls.env = dict(os.environ, TERM="xterm", HOME=cls.work)
        cls.env.pop("REMEX_TOKEN", None)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        cls.server.wait()
        shutil.rmtree(cls.work, ignore_errors=True)


class ShellTerminalTest(ServerFixture):
    """The shell through a pseudo-terminal, as a person types."""

    def spawn(self, *extra):
        shell = pexpect.spawn(REMEX, ["shell", "--server", self.address, *extra], cwd=self.work, env=self.env,
                              encoding="utf-8", timeout=20, dimensions=(50, 220))
        self.addCleanup(shell.close, force=True)
        if os.environ.get("SHELL_TEST_LOG"):  # what the terminal shows, on stderr
            shell.logfile_read = sys.stderr
        shell.expect(PROMPT)
        return shell

    def command(self, shell, line):
        """Types `line` and returns what the shell printed before the next prompt."""
        shell.send(line + "\r")
        shell.expect(PROMPT)
        return shell.before.replace("\r\n", "\n")

    def quit(self, shell):
        shell.send("quit\r")
        shell.expect(pexpect.EOF)
        shell.close()
        self.assertEqual(shell.exitstatus, 0)

    def test_one_session_keeps_models_and_tensors_between_commands(self):
        shell = self.spawn("--no-history")
        out = self.command(shell, "load rnn.onnx")
        self.assertIn("loaded rnn from rnn.onnx", out)
        self.assertIn("input   token: float32 [batch, 4]", out)
        self.assertIn("output  hidden_next: float32 [batch, 4]", out)
        self.assertIn("remex:rnn> ", shell.after)  # the prompt names the current model
        out = self.command(shell, "inputs")
        self.assertRegex(out, r"token: float32 \[batch, 4\] +<- none")
        out = self.command(shell, "upload token=token.npy hidden=h0.npy")
        self.assertIn("%1 token: float32 [1, 4] (16 B) from token.npy", out)
        self.assertIn("%2 hidden: float32 [1, 4] (16 B) from h0.npy", out)
        out = self.command(shell, "inputs")
        self.assertRegex(out, r"hidden: float32 \[batch, 4\] +<- %2 hidden: float32 \[1, 4\]")

        h1 = step(TOKEN, H0)
        out = self.command(shell, "run")
        assert_summary(self, out, "%3 hidden_next: float32 [1, 4]", h1)
        # The state goes back in without leaving the server; the name moves to %4.
        h2 = step(TOKEN, h1)
        out = self.command(shell, "run hidden=hidden_next --fetch none")
        self.assertRegex(out, r"%4 hidden_next: float32 \[1, 4\]\n")
        out = self.command(shell, "fetch hidden_next -o h2.npy")
        assert_summary(self, out, "%4 hidden_next: float32 [1, 4]", h2)
        np.testing.assert_allclose(np.load(os.path.join(self.work, "h2.npy")), h2, rtol=1e-6, atol=1e-6)
        out = self.command(shell, "stats %3")
        m = re.search(r"count 4  min (%s)  max (%s)  mean (%s)  std (%s)  nan 0  inf 0" % ((NUMBER,) * 4), out)
        self.assertTrue(m, out)
        np.testing.assert_allclose([float(v) for v in m.groups()], [h1.min(), h1.max(), h1.mean(), h1.std()],
                                   rtol=1e-4, atol=1e-6)

        out = self.command(shell, "upload expected=expected.npy")
        self.assertIn("%5 expected", out)
        out = self.command(shell, "compare %3 expected")
        self.assertIn("match: 4 values", out)
        out = self.command(shell, "compare hidden_next expected --rtol 0 --atol 1e-3")
        self.assertIn("MISMATCH: 4 of 4 values differ, the first at flat index 0", out)

        out = self.command(shell, "handles")
        self.assertRegex(out, r"module .* model rnn")
        self.assertRegex(out, r"vm .* model rnn")
        self.assertRegex(out, r"tensor +16 B +512 B +cpu +float32 \[1, 4\] +%3 \(hidden_next of rnn\)")
        self.assertRegex(out, r"%4 hidden_next \(hidden_next of rnn\)")
        self.assertIn("7 handles", out)
        out = self.command(shell, "free %3 expected")
        self.assertIn("freed %3, %5 expected", out)
        out = self.command(shell, "handles")
        self.assertIn("5 handles", out)
        self.assertNotIn("%3", out)

        out = self.command(shell, "bench --repeat 5 --warmup 2 --min-duration-s 0 --min-samples 0 --max-trials 1")
        self.assertRegex(out, r"bench +main: 5 samples x 1 calls \(warmup 2, timer \S+\), ms per call")
        self.assertRegex(out, r"mean [0-9.]+ +min")
        self.assertIn("median not enough samples for a 95 % interval (6 needed, 5 taken)", out)
        self.assertIn("too few windows (1 of 3)", out)
        # The same rules as `remex bench`: extended to --min-samples, intervals given.
        out = self.command(shell, "bench --min-duration-s 0 --min-samples 40 --window-ms 1 --confidence 0.9")
        self.assertRegex(out, r"bench +main: \d+ samples")
        self.assertRegex(out, r"median [0-9.]+  90 % interval \[[0-9.]+, [0-9.]+\]")
        self.assertRegex(out, r"p90 +[0-9.]+  90 % interval")
        self.assertIn("extended for min_samples", out)
        out = self.command(shell, "profile")
        self.assertRegex(out, r"profile 5 invokes, the median one [0-9.]+ ms on the device")
        self.assertRegex(out, r"MatMul +kernel +1 ")
        self.assertRegex(out, r"slowest nodes: \d+ of \d+")
        out = self.command(shell, "profile --runs 1 --top 0")
        self.assertRegex(out, r"profile one invoke, [0-9.]+ ms on the device")
        self.assertNotIn("slowest nodes", out)
        out = self.command(shell, "info")
        self.assertRegex(out, r"server +%s: remex-server \S+, protocol 1\.\d+, session \d+" % re.escape(self.address))
        self.assertRegex(out, r"device +cpu.*memory, [0-9.]+ (B|KiB) in use by this session")
        self.assertIn("models   rnn (current)", out)
        self.assertIn("tensors  3", out)
        self.quit(shell)

    def stats(self, shell, tensor):
        """`stats TENSOR`'s numbers as a dict (count, min, max, mean, std, nan, inf)."""
        out = self.command(shell, "stats " + tensor)
        m = re.search(r"count (\d+)  min (\S+)  max (\S+)  mean (\S+)  std (\S+)  nan (\d+)  inf (\d+)", out)
        self.assertTrue(m, out)
        keys = ["count", "min", "max", "mean", "std", "nan", "inf"]
        return {k: float(v) for k, v in zip(keys, m.groups())}

    def test_zeros_and_random_make_tensors_on_the_server(self):
        shell = self.spawn("--no-history")
        out = self.command(shell, "zeros z 2x3")
        self.assertIn("%1 z: float32 [2, 3] (24 B), zeros, made on the server", out)
        self.assertEqual(self.stats(shell, "z"), dict(count=6, min=0, max=0, mean=0, std=0, nan=0, inf=0))
        out = self.command(shell, "random u 1000 --seed 5 --low -2 --high 3")
        self.assertIn("%2 u: float32 [1000] (3.9 KiB), uniform in [-2, 3), seed 5, made on the server", out)
        s = self.stats(shell, "u")
        self.assertGreaterEqual(s["min"], -2)
        self.assertLess(s["max"], 3)
        self.assertAlmostEqual(s["mean"], 0.5, delta=0.3)  # standard error 0.05
        # One seed, one tensor; another seed, another.
        self.command(shell, "random same 1000 --seed 5 --low -2 --high 3")
        self.assertIn("match: 1000 values", self.command(shell, "compare u same --rtol 0 --atol 0"))
        self.command(shell, "random other 1000 --seed 6 --low -2 --high 3")
        self.assertIn("MISMATCH", self.command(shell, "compare u other --rtol 0 --atol 0"))
        # Without --seed one is drawn and printed: typing it makes the tensor again.
        out = self.command(shell, "random r 64")
        seed = re.search(r"uniform in \[0, 1\), seed (\d+), made on the server", out).group(1)
        self.command(shell, "random again 64 --seed " + seed)
        self.assertIn("match: 64 values", self.command(shell, "compare r again --rtol 0 --atol 0"))
        self.command(shell, "random n 10000 --normal --mean 1 --scale 2 --seed 3")
        s = self.stats(shell, "n")
        self.assertAlmostEqual(s["mean"], 1, delta=0.1)  # standard error 0.02
        self.assertAlmostEqual(s["std"], 2, delta=0.1)
        out = self.command(shell, "random i 1000 --dtype int8 --low -3 --high 3 --seed 1")
        self.assertIn("int8 [1000] (1000 B), uniform in [-3, 3), seed 1", out)
        s = self.stats(shell, "i")
        self.assertEqual((s["min"], s["max"]), (-3, 2))
        self.command(shell, "random b 2x32 --dtype bool")
        s = self.stats(shell, "b")
        self.assertEqual((s["min"], s["max"], s["count"]), (0, 1, 64))
        # Errors say what is wrong, before anything is made; the shell goes on.
        self.assertIn("INVALID_ARGUMENT: random bad: tensorAlloc: normal fill needs a floating dtype",
                      self.command(shell, "random bad 4 --dtype int32 --normal"))
        self.assertIn("leaves the values of int8", self.command(shell, "random bad 4 --dtype int8 --high 1000"))
        self.assertIn("--mean and --scale need --normal", self.command(shell, "random bad 4 --mean 1"))
        self.assertIn("is no dtype with numbers", self.command(shell, "zeros bad 4 --dtype complex64"))
        self.assertNotIn("bad", self.command(shell, "handles"))
        self.quit(shell)

    def test_names_fall_back_and_handles_account_for_the_sessions_memory(self):
        shell = self.spawn("--no-history")
        session = re.search(r"session (\d+): help lists the commands", shell.before).group(1)
        self.command(shell, "load rnn.onnx")
        self.command(shell, "upload token=token.npy hidden=h0.npy")
        # A newer tensor takes the name; freed, it gives the name back.
        out = self.command(shell, "random token 1x4 --seed 9")
        self.assertIn("%3 token: float32 [1, 4]", out)
        out = self.command(shell, "free token")
        self.assertIn("freed %3 token", out)
        self.assertIn("token names %1 again: %1 token: float32 [1, 4]", out)
        self.assertEqual(self.stats(shell, "token")["min"], -1)  # token.npy's values
        self.command(shell, "run --fetch none")
        out = self.command(shell, "handles")
        self.assertRegex(out, r"\n5 handles hold all [0-9.]+ (B|KiB) this session has in use on the server")
        vm_before = re.search(r"\n +\d+ +vm +- +(\d+(?:\.\d+)?) (B|KiB)", out)
        self.assertTrue(vm_before, out)
        # The VM keeps its last inputs: freeing one moves its block to the VM's row, and
        # the handles still account for every byte in use.
        out = self.command(shell, "free token")
        out = self.command(shell, "handles")
        self.assertRegex(out, r"\n4 handles hold all [0-9.]+ (B|KiB) this session has in use on the server")
        vm_after = re.search(r"\n +\d+ +vm +- +(\d+(?:\.\d+)?) (B|KiB)", out)
        to_bytes = lambda m: float(m.group(1)) * (1024 if m.group(2) == "KiB" else 1)
        self.assertEqual(to_bytes(vm_after) - to_bytes(vm_before), 512)  # token's size class
        out = self.command(shell, "info")
        self.assertRegex(out, r"protocol 1\.\d+, session %s\n" % session)  # the banner's number
        self.assertRegex(out, r"handles  4 handles hold all [0-9.]+ (B|KiB) this session has in use")
        self.quit(shell)

    def test_errors_name_the_problem_and_the_shell_goes_on(self):
        shell = self.spawn("--no-history")
        out = self.command(shell, "run")
        self.assertIn("error: FAILED_PRECONDITION: no model is loaded", out)
        out = self.command(shell, "load missing.onnx")
        self.assertIn("error: NOT_FOUND: cannot open 'missing.onnx'", out)
        out = self.command(shell, "load notes.txt")
        self.assertIn("error: ", out)
        self.assertNotIn("loaded", out)
        self.command(shell, "load rnn.onnx")
        out = self.command(shell, "upload token=missing.npy")
        self.assertRegex(out, r"error: NOT_FOUND: upload token: .*missing\.npy")
        self.command(shell, "upload token=token.npy")
        out = self.command(shell, "run")  # no tensor named hidden yet
        self.assertIn("error: INVALID_ARGUMENT: no tensor for the input(s) hidden of rnn", out)
        out = self.command(shell, "run state=%1 hidden=%1")
        self.assertIn("error: INVALID_ARGUMENT: rnn: 'state' is no input of the model; its inputs are: token, hidden",
                      out)
        out = self.command(shell, "fetch nothing")
        self.assertIn("error: NOT_FOUND: no tensor named 'nothing' (named tensors: token)", out)
        out = self.command(shell, "stats %9")
        self.assertIn("error: NOT_FOUND: no tensor %9", out)
        out = self.command(shell, "lod rnn.onnx")
        self.assertIn("error: INVALID_ARGUMENT: unknown command 'lod' (did you mean load?); type help", out)
        out = self.command(shell, "bench --repeat 0")
        self.assertIn("error: INVALID_ARGUMENT: --repeat must be a whole number >= 1", out)
        out = self.command(shell, "bench --confidence 2")
        self.assertIn("error: INVALID_ARGUMENT: --confidence must be in (0, 1)", out)
        out = self.command(shell, "compare %1")
        self.assertIn("error: INVALID_ARGUMENT: compare takes two tensors", out)
        # Still the same session: the model and the tensor are there.
        out = self.command(shell, "run hidden=%1 --fetch hidden_next")
        assert_summary(self, out, "%2 hidden_next: float32 [1, 4]", step(TOKEN, TOKEN))
        out = self.command(shell, "help fetch")
        self.assertIn("usage: fetch TENSOR [-o FILE.npy]", out)
        self.quit(shell)

    def test_tab_completes_commands_files_inputs_and_tensors(self):
        shell = self.spawn("--no-history")
        # "lo" TAB -> "load ", "rn" TAB -> "rnn.onnx " (notes.txt is no model file).
        out = self.command(shell, "lo\trn\t")
        self.assertIn("loaded rnn from rnn.onnx", out)
        # An input name completes with its "=", then the file name.
        out = self.command(shell, "upload tok\ttoken.n\t hidd\th0\t")
        self.assertIn("%1 token: float32 [1, 4] (16 B) from token.npy", out)
        self.assertIn("%2 hidden: float32 [1, 4] (16 B) from h0.npy", out)
        self.command(shell, "run")
        # A tensor name after INPUT=.
        out = self.command(shell, "run hidden=hidden_n\t --fetch none")
        self.assertIn("%4 hidden_next: float32 [1, 4]", out)
        # Two candidates: the first TAB completes nothing, the second lists them.
        shell.send("f\t\t")
        shell.expect(r"fetch +free")
        shell.expect(PROMPT)  # drawn again under the list, with the "f" typed so far
        shell.send("\x15")  # Ctrl-U clears the line
        out = self.command(shell, "st\t%4")
        self.assertIn("%4 hidden_next: float32 [1, 4]", out)
        self.assertIn("count 4", out)
        self.quit(shell)

    def test_ctrl_c_cancels_the_command_on_the_server(self):
        shell = self.spawn("--no-history")
        self.command(shell, "load rnn.onnx")
        self.command(shell, "upload token=token.npy hidden=h0.npy")
        start = time.monotonic()
        shell.send("bench --repeat 5000 --min-repeat-ms 20\r")  # 100 s unless cancelled
        time.sleep(1.0)
        for _ in range(10):  # again while the request has not reached the server (a loaded machine)
            shell.sendintr()
            if shell.expect([PROMPT, "nothing runs on the server to cancel"], timeout=30) == 0:
                break
            time.sleep(0.5)
        self.assertIn("cancelling the request on the server", shell.before)
        # The samples taken before the cancel, marked partial.
        self.assertIn("partial interrupted by SIGINT after", shell.before)
        self.assertIn("bench   main:", shell.before)
        self.assertLess(time.monotonic() - start, 30)
        shell.sendintr()  # at the prompt: nothing happens
        out = self.command(shell, "run --fetch none")
        self.assertIn("%3 hidden_next", out)
        self.quit(shell)

    def test_a_long_bench_shows_its_samples_and_the_time_left(self):
        shell = self.spawn("--no-history")
        self.command(shell, "load rnn.onnx")
        self.command(shell, "upload token=token.npy hidden=h0.npy")
        # 60 samples of at least 50 ms: about 3 s, polled every second from the server.
        shell.send("bench --repeat 60 --min-repeat-ms 50 --min-duration-s 0 --min-samples 0 --max-trials 1\r")
        shell.expect(r"benchmarking rnn: (\d+) of 60 samples, about (\d+) s left", timeout=30)
        self.assertGreater(int(shell.match.group(1)), 0)
        self.assertLessEqual(int(shell.match.group(2)), 30)
        shell.expect(PROMPT, timeout=60)
        self.assertRegex(shell.before, r"bench +main: 60 samples")
        self.quit(shell)

    def test_history_is_kept_across_shells(self):
        history = os.path.join(self.work, "history")
        if os.path.exists(history):
            os.remove(history)
        shell = self.spawn("--history", history)
        self.command(shell, "help models")
        self.quit(shell)
        self.assertTrue(os.path.exists(history))
        shell = self.spawn("--history", history)
        # Ctrl-P twice: back past "quit" to "help models", read from the file.
        shell.send("\x10\x10\r")
        shell.expect(PROMPT)
        self.assertIn("usage: models", shell.before)
        self.quit(shell)


class ShellScriptTest(ServerFixture):
    """The shell reading a script on stdin."""

    def script(self, text):
        return subprocess.run([REMEX, "shell", "--server", self.address, "--no-history"], input=text, cwd=self.work,
                              env=self.env, capture_output=True, text=True, timeout=60)

    def test_piped_script_runs_without_prompts(self):
        r = self.script("# a comment, then a blank line\n\nload rnn.onnx\nupload token=token.npy hidden=h0.npy\n"
                        "run\nrun hidden=hidden_next\ncompare %3 %3\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        self.assertNotIn("remex>", r.stdout)
        self.assertNotIn("remex shell on", r.stdout)
        self.assertTrue(r.stdout.startswith("loaded rnn from rnn.onnx"), r.stdout)
        assert_summary(self, r.stdout, "%4 hidden_next: float32 [1, 4]", step(TOKEN, step(TOKEN, H0)))
        self.assertIn("match: 4 values", r.stdout)

    def test_piped_script_stops_at_the_first_failing_command(self):
        r = self.script("load rnn.onnx\nupload token=token.npy hidden=h0.npy\nfetch nothing\nrun\ninfo\n")
        self.assertEqual(r.returncode, 3, r.stderr)  # NOT_FOUND: exit 3
        self.assertIn("error: NOT_FOUND: no tensor named 'nothing'", r.stderr)
        self.assertIn("stopped at line 3: fetch nothing", r.stderr)
        self.assertIn("%2 hidden", r.stdout)
        self.assertNotIn("%3", r.stdout)  # run never ran
        self.assertNotIn("server ", r.stdout)  # nor info

        r = self.script("load rnn.onnx\nupload token=token.npy hidden=h0.npy\nrun state=%1\nrun\n")
        self.assertEqual(r.returncode, 2, r.stderr)  # INVALID_ARGUMENT: exit 2
        self.assertIn("'state' is no input of the model", r.stderr)
        self.assertNotIn("%3", r.stdout)

        r = self.script("load rnn.onnx\nupload token=token.npy hidden=h0.npy\nupload e=expected.npy\nrun\n"
                        "compare %4 e\ncompare %2 e\nrun\n")
        self.assertEqual(r.returncode, 1, r.stderr)  # a mismatch: exit 1
        self.assertIn("stopped at line 6: the tensors differ", r.stderr)
        self.assertIn("match: 4 values", r.stdout)
        self.assertNotIn("%5 hidden_next", r.stdout)

        # bench --fail-unstable: a run too short to judge stops the script with status 1.
        r = self.script("load rnn.onnx\nupload token=token.npy hidden=h0.npy\n"
                        "bench --repeat 5 --min-duration-s 0 --min-samples 0 --max-trials 1 --fail-unstable\ninfo\n")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("stopped at line 3: the benchmark is unstable", r.stderr)
        self.assertIn("too few windows (1 of 3)", r.stdout)
        self.assertNotIn("server ", r.stdout)  # info never ran

        r = self.script("help\nquit\nload missing.onnx\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")

    def test_bench_runs_load_scenarios_with_the_flags_of_remex_bench(self):
        r = self.script("load rnn.onnx\nupload token=token.npy hidden=h0.npy\n"
                        "bench --scenario server --target-qps 100 --min-duration-s 0.3\n"
                        "bench --scenario single-stream --concurrency 1:2 --min-duration-s 0.2 --no-audit\n"
                        "bench --scenario multi-stream --samples-per-query 2 --min-duration-s 0.2\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        # The scenario table of `remex bench --scenario` (tooling::BenchText): one row per level.
        self.assertIn("bench   main: scenario server at 100 QPS (Poisson arrivals, seed 0)", out)
        self.assertRegex(out, r"CONCURRENCY +TARGET QPS +QPS +QUERIES +p50 ms \[95% CI\] +p90 ms")
        self.assertRegex(out, r"\n +1 +100 +[0-9.]+ +\d+ +[0-9.]+ \[")
        self.assertRegex(out, r"audit +\d+ timed samples match the untimed reference")  # on for server
        self.assertIn("scenario single-stream, closed-loop streams", out)
        self.assertRegex(out, r"\n +1 +- +[0-9.]+ +\d+ ")
        self.assertRegex(out, r"\n +2 +- +[0-9.]+ +\d+ ")
        # multi-stream: 2 samples per query, and one instance per sample without --concurrency.
        self.assertIn("scenario multi-stream, 2 samples per query", out)
        self.assertRegex(out, r"multi-stream.*\n.*CONCURRENCY.*\n +2 +- ")

        # The mistakes remex bench refuses, with its messages.
        for line, message in (
                ("bench --target-qps 5", "--target-qps needs --scenario"),
                ("bench --concurrency 2 --find-peak", "--concurrency and --find-peak need --scenario"),
                ("bench --scenario server", "--scenario server needs --target-qps Q"),
                ("bench --scenario batch", "--scenario 'batch' is none of single-stream, multi-stream, server, "
                                           "offline"),
                ("bench --scenario offline --concurrency 3:2", "--concurrency '3:2': out of range"),
                ("bench --scenario single-stream --audit --no-audit", "--audit and --no-audit contradict"),
                ("bench --scenario offline --samples-per-query 2", "--samples-per-query is for --scenario "
                                                                    "multi-stream")):
            r = self.script("load rnn.onnx\n" + line + "\n")
            self.assertEqual(r.returncode, 2, line + ": " + r.stderr)
            self.assertIn("error: INVALID_ARGUMENT: " + message, r.stderr)

    def test_without_server_the_shell_embeds_one(self):
        r = subprocess.run([REMEX, "shell", "--no-history"], input="load rnn.onnx\ninfo\n", cwd=self.work,
                           env=self.env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"server +embedded 127\.0\.0\.1:\d+: remex-server")
        self.assertIn("models   rnn (current)", r.stdout)


def main():
    global REMEX, SERVER
    parser = argparse.ArgumentParser()
    parser.add_argument("--remex", required=True)
    parser.add_argument("--server", required=True)
    args, rest = parser.parse_known_args()
    REMEX, SERVER = os.path.abspath(args.remex), os.path.abspath(args.server)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
