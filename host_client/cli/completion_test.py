#!/usr/bin/python3
"""`remex completion bash|zsh` in real shells.

bash: the script is sourced into bash, COMP_WORDS and COMP_CWORD are set as bash sets
them for a command line (split at '=' too, COMP_WORDBREAKS), _remex is called and
COMPREPLY is checked: subcommands (nested ones too), a subcommand's flags, the values of
a choice flag, files and folders in a scratch folder, a command after `farm lease --`.
Then an interactive bash in a pseudo-terminal completes a line with TAB, as a person
would.

zsh: an interactive `zsh -f` in a pseudo-terminal (pexpect) with the script in a folder
of $fpath, compinit run, and compadd wrapped so that every candidate the script offers is
also written to a file: TAB on a line, then the candidates are read back. A unique
candidate is checked on the line itself, and the script sourced (the one-off form) too.
Without zsh, CompletionZshTest exits 77 (skipped).

Usage: completion_test.py --remex BIN [CompletionBashTest | CompletionZshTest | other
       unittest arguments]  (exit status 1 when a test fails)
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import pexpect

REMEX = None
SCENARIOS = ["single-stream", "multi-stream", "server", "offline"]
FARM = ["status", "lease", "install-functions", "drain", "undrain"]


def script(shell):
    return subprocess.run([REMEX, "completion", shell], check=True, capture_output=True, text=True).stdout


def scratch(test):
    """A folder with model.onnx, readme.txt and refs/, removed after the test."""
    d = tempfile.mkdtemp(prefix="remex_completion_")
    test.addCleanup(shutil.rmtree, d)
    for name in ("model.onnx", "readme.txt"):
        open(os.path.join(d, name), "w").close()
    os.mkdir(os.path.join(d, "refs"))
    return d


class CompletionBashTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="remex_completion_bash_")
        cls.script = os.path.join(cls.dir, "remex")
        with open(cls.script, "w") as f:
            f.write(script("bash"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def complete(self, *words, cwd=None, wordbreaks=None):
        """COMPREPLY of _remex for the command line `words`, the cursor at the end of the last."""
        setup = 'COMP_WORDBREAKS="$1"; ' if wordbreaks is not None else ""
        program = (setup + 'source "$0"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); '
                   'COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; _remex; '
                   'printf "%s\\n" "${COMPREPLY[@]}"')
        result = subprocess.run(["bash", "--norc", "--noprofile", "-c", program, self.script,
                                 wordbreaks or "", *words], cwd=cwd, capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "")
        return [line for line in result.stdout.split("\n") if line]

    def test_subcommands(self):
        top = self.complete("remex", "")
        for name in ("compile", "run", "bench", "check", "farm", "completion"):
            self.assertIn(name, top)
        self.assertNotIn("status", top)  # farm's
        self.assertEqual(self.complete("remex", "fa"), ["farm"])
        self.assertEqual(self.complete("remex", "farm", ""), FARM)
        self.assertEqual(self.complete("remex", "farm", "st"), ["status"])
        self.assertEqual(self.complete("remex", "completion", ""), ["bash", "zsh"])

    def test_flags_of_the_subcommand(self):
        flags = self.complete("remex", "bench", "model.onnx", "--")
        for flag in ("--scenario", "--csv", "--profile", "--json", "--record", "--layout", "--help"):
            self.assertIn(flag, flags)
        self.assertNotIn("--stats", flags)  # compile's
        self.assertNotIn("--record-to-default-store", flags)  # hidden
        self.assertEqual(self.complete("remex", "bench", "--sce"), ["--scenario"])
        self.assertEqual(self.complete("remex", "farm", "status", "--j"), ["--json"])
        # Nothing positional left: the flags.
        self.assertIn("--limit", self.complete("remex", "history", ""))

    def test_values_of_a_choice_flag(self):
        self.assertEqual(self.complete("remex", "bench", "--scenario", ""), SCENARIOS)
        self.assertEqual(self.complete("remex", "bench", "m.onnx", "--scenario", "mu"), ["multi-stream"])
        # --scenario=mu, split by bash at '=', and as one word when '=' breaks no words.
        self.assertEqual(self.complete("remex", "bench", "--scenario", "=", "mu"), ["multi-stream"])
        self.assertEqual(self.complete("remex", "bench", "--scenario", "="), SCENARIOS)
        self.assertEqual(self.complete("remex", "bench", "--scenario=mu", wordbreaks=" \t\n\"'"),
                         ["--scenario=multi-stream"])
        self.assertEqual(self.complete("remex", "compile", "m.onnx", "--dtype", "f"), ["float32", "float16"])
        self.assertEqual(self.complete("remex", "bench", "--layout", "nh"), ["NHWC"])  # ignore_case
        self.assertEqual(self.complete("remex", "suite", "s.toml", "--regressions", ""), ["fail", "warn"])
        # A value, not a file, and the word after it is the model again.
        self.assertEqual(self.complete("remex", "bench", "--seed", ""), [])

    def test_files_and_folders(self):
        d = scratch(self)
        self.assertEqual(self.complete("remex", "bench", "mo", cwd=d), ["model.onnx"])
        self.assertEqual(self.complete("remex", "bench", "--seed", "3", "mo", cwd=d), ["model.onnx"])
        self.assertEqual(sorted(self.complete("remex", "compile", "model.onnx", "-o", "", cwd=d)),
                         ["model.onnx", "readme.txt", "refs"])
        self.assertEqual(self.complete("remex", "check", "model.onnx", "--reference", "r", cwd=d), ["refs"])
        self.assertEqual(self.complete("remex", "bench", "model.onnx", "--csv", d + "/re"),
                         [d + "/readme.txt", d + "/refs"])
        self.assertEqual(self.complete("remex", "farm", "drain", "", cwd=d), [])  # HOST:PORT
        # farm lease -- CMD ARGS: a command, then its files.
        self.assertIn("echo", self.complete("remex", "farm", "lease", "--ttl", "5", "--", "ech"))
        self.assertEqual(self.complete("remex", "farm", "lease", "--", "ls", "mo", cwd=d), ["model.onnx"])

    def test_tab_in_an_interactive_bash(self):
        d = scratch(self)
        env = dict(os.environ, TERM="dumb", HOME=d, INPUTRC="/dev/null")
        bash = pexpect.spawn("bash", ["--norc", "--noprofile", "-i"], cwd=d, env=env, encoding="utf-8",
                             timeout=20, dimensions=(40, 200))
        self.addCleanup(bash.close, force=True)
        bash.sendline(f"PS1='$ '; source {self.script}; echo ready-$((40 + 2))")
        bash.expect("ready-42")
        bash.expect(r"\$ ")
        for typed, line in [("remex bench --scen\t", "remex bench --scenario "),
                            ("remex farm st\t", "remex farm status "),
                            ("remex bench mod\t", "remex bench model.onnx "),
                            ("remex check model.onnx --reference re\t", "remex check model.onnx --reference refs/")]:
            # TAB, then the line as completed is printed: Ctrl-A, `echo "[`, Ctrl-E, `]"`.
            bash.send(typed)
            bash.send('\x01echo "[\x05]"\r')
            bash.expect(r"\r\n\[(.*)\]\r\n")
            self.assertEqual(bash.match.group(1), line)
            bash.expect(r"\$ ")


class ZshSession:
    """An interactive zsh -f in a pseudo-terminal with the completion of remex loaded."""

    def __init__(self, test, cwd, load):
        self.capture = os.path.join(cwd, ".candidates")
        self.counter = 0
        env = dict(os.environ, TERM="dumb", HOME=cwd, EDITOR="", VISUAL="")
        self.zsh = pexpect.spawn("zsh", ["-f", "-i"], cwd=cwd, env=env, encoding="utf-8", timeout=20,
                                 dimensions=(40, 200))
        test.addCleanup(self.zsh.close, force=True)
        # compadd, as the completion functions call it, also writes the candidates it
        # adds (those matching the word) to the capture file; calls that only query
        # (-O, -A, -D) are passed on.
        self.run("PS1='%% '; LISTMAX=100000; " + load)  # LISTMAX: long lists without asking
        self.run("compadd() { if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\\ * ]]; then builtin compadd \"$@\"; return; fi; "
                 "local -a m; builtin compadd -O m \"$@\"; print -rl -- $m >> " + self.capture + "; "
                 "builtin compadd \"$@\" }")

    def run(self, command):
        self.counter += 1
        self.zsh.sendline(f"{command}; print ok-$(({self.counter} * 1000 + 1))")
        self.zsh.expect(f"ok-{self.counter * 1000 + 1}")
        self.zsh.expect("% ")

    def candidates(self, line):
        """What TAB offers at the end of `line` (sorted, each once), and the screen after it."""
        open(self.capture, "w").close()
        self.zsh.send(line + "\t")
        # Ctrl-U clears the line; the printed number shows the TAB was handled.
        self.counter += 1
        self.zsh.send(f"\x15print done-$(({self.counter} * 1000 + 2))\r")
        self.zsh.expect(f"done-{self.counter * 1000 + 2}\r\n")
        screen = self.zsh.before
        self.zsh.expect("% ")
        with open(self.capture) as f:
            return sorted(set(f.read().split("\n")) - {""}), screen

    def line_after_tab(self, line):
        """The line as TAB completed it."""
        self.zsh.send(line + "\t")
        self.zsh.send("\x01print -r -- '[' \x05 ']'\r")
        self.zsh.expect(r"\[ (.*) \]\r\n")
        completed = self.zsh.match.group(1)
        self.zsh.expect("% ")
        return completed


class CompletionZshTest(unittest.TestCase):
    def setUp(self):
        self.dir = scratch(self)
        functions = os.path.join(self.dir, "functions")
        os.mkdir(functions)
        with open(os.path.join(functions, "_remex"), "w") as f:
            f.write(script("zsh"))
        self.zsh = ZshSession(self, self.dir, f"fpath=({functions} $fpath); autoload -Uz compinit; compinit -u -D")

    def test_subcommands(self):
        top, _ = self.zsh.candidates("remex ")
        for name in ("compile", "run", "bench", "check", "farm", "completion"):
            self.assertIn(name, top)
        self.assertNotIn("status", top)
        farm, screen = self.zsh.candidates("remex farm ")
        self.assertEqual(farm, sorted(FARM))
        self.assertIn("list the registered devices and pools", screen)  # descriptions listed
        self.assertEqual(self.zsh.line_after_tab("remex farm st"), "remex farm status")
        self.assertEqual(self.zsh.candidates("remex completion ")[0], ["bash", "zsh"])

    def test_flags_of_the_subcommand(self):
        flags, _ = self.zsh.candidates("remex bench model.onnx --")
        for flag in ("--scenario", "--csv", "--profile", "--json", "--record", "--layout", "--help"):
            self.assertIn(flag, flags)
        self.assertNotIn("--stats", flags)
        self.assertNotIn("--record-to-default-store", flags)
        # An option given once is not offered again; a repeatable one is.
        again, _ = self.zsh.candidates("remex bench model.onnx --json --input x=a.npy --")
        self.assertNotIn("--json", again)
        self.assertIn("--input", again)
        self.assertEqual(self.zsh.candidates("remex farm status --j")[0], ["--json"])

    def test_values_of_a_choice_flag(self):
        self.assertEqual(self.zsh.candidates("remex bench model.onnx --scenario ")[0], sorted(SCENARIOS))
        self.assertEqual(self.zsh.candidates("remex bench model.onnx --scenario=")[0], sorted(SCENARIOS))
        self.assertEqual(self.zsh.line_after_tab("remex bench --scenario mu"), "remex bench --scenario multi-stream")
        self.assertEqual(self.zsh.candidates("remex compile model.onnx --dtype ")[0], ["float16", "float32"])
        self.assertEqual(self.zsh.candidates("remex bench --seed ")[0], [])

    def test_files_and_folders(self):
        self.assertEqual(self.zsh.line_after_tab("remex bench mo"), "remex bench model.onnx")
        files, _ = self.zsh.candidates("remex compile model.onnx -o ")
        self.assertTrue({"model.onnx", "readme.txt"} <= set(files), files)
        folders, _ = self.zsh.candidates("remex check model.onnx --reference ")
        self.assertIn("refs/", [f if f.endswith("/") else f + "/" for f in folders])
        self.assertNotIn("readme.txt", folders)
        self.assertNotIn("model.onnx", folders)
        self.assertEqual(self.zsh.candidates("remex farm drain ")[0], [])  # HOST:PORT
        commands, _ = self.zsh.candidates("remex farm lease --ttl 5 -- ech")
        self.assertIn("echo", commands)
        self.assertEqual(self.zsh.line_after_tab("remex farm lease -- ls mo"), "remex farm lease -- ls model.onnx")

    def test_sourced_after_compinit(self):
        with open(os.path.join(self.dir, "remex.zsh"), "w") as f:
            f.write(script("zsh"))
        zsh = ZshSession(self, self.dir, "autoload -Uz compinit; compinit -u -D; source remex.zsh")
        self.assertEqual(zsh.candidates("remex bench --scenario ")[0], sorted(SCENARIOS))


def main():
    global REMEX
    parser = argparse.ArgumentParser()
    parser.add_argument("--remex", required=True)
    args, rest = parser.parse_known_args()
    REMEX = os.path.abspath(args.remex)
    if "CompletionZshTest" in rest and shutil.which("zsh") is None:
        print("completion_test: skipped: no zsh (scripts/setup-deps.sh --tests installs it)")
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
