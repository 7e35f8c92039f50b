#!/usr/bin/env python3
"""Runs the command blocks of Markdown files that are marked runnable, as pasted.

A fenced block is runnable when the line before its opening fence (blank lines aside)
is one of
    <!-- runnable -->          run the block
    <!-- runnable: server -->  first start a remex-server on loopback with a token in
                               ./remex.token (and REMEX_TOKEN set), and read the
                               block's "gpu-box:9190" as that server's address
    <!-- runnable: pycon -->   a Python session transcript (>>> and ... prompts, then
                               the expected output), checked by doctest with
                               ELLIPSIS and NORMALIZE_WHITESPACE, PYTHONPATH=build/python
    <!-- runnable: console --> a terminal transcript: `$ CMD` lines run by bash, the one
                               that starts `remex shell` in a pseudo-terminal (pexpect),
                               `remex> CMD` lines typed at its prompt; each command's
                               output is checked as doctest checks (ELLIPSIS: `...`
                               stands for any text)
Each block runs on its own under `bash -e -o pipefail`, in a fresh folder holding
`build` (the build tree), `scripts`, `python`, `tests`, `.cache` (links into the repository) and a link to
each test model by its file name, with build/host_client/cli and build/device_server
on PATH. A block passes when bash exits 0 (a transcript: when doctest finds every
output as written).

Usage: doc_examples.py --build BUILD_DIR [--models MODELS_DIR] [--timeout S] [--without-python] FILE.md...
--without-python: the build has no Python client (REMEX_PYTHON=OFF, as in the sanitized
tree): the blocks that use it (pycon transcripts, and blocks naming build/python) are
listed as skipped, with that reason, and the rest run.
MODELS_DIR defaults to $REMEX_MODELS_DIR. Exit status: 0 when every runnable block
passes, 1 otherwise; 77 (skipped) when MODELS_DIR has no models, unless
REMEX_REQUIRE_MODELS=1 (then 1).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

MARK = re.compile(r"^<!--\s*runnable(?::\s*(\w+))?\s*-->\s*$")
FENCE = re.compile(r"^(```+|~~~+)")


def blocks(path):
    """Yields (line number, mode, text) of every runnable block of `path`."""
    lines = open(path, encoding="utf-8").read().split("\n")
    mode = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = MARK.match(line.strip())
        if m:
            mode = m.group(1) or "plain"
        elif FENCE.match(line):
            fence = FENCE.match(line).group(1)
            start = i + 1
            j = start
            while j < len(lines) and not lines[j].startswith(fence):
                j += 1
            if mode:
                yield start, mode, "\n".join(lines[start:j])
            mode = None
            i = j
        elif line.strip():
            mode = None
        i += 1


# Checks a transcript read from stdin with doctest; exit status 1 on a difference.
PYCON_RUNNER = r"""
import doctest, sys
test = doctest.DocTestParser().get_doctest(sys.stdin.read(), {}, "transcript", "transcript", 0)
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
runner.run(test)
sys.exit(1 if runner.failures or not test.examples else 0)
"""


SHELL_PROMPT = re.compile(r"^(remex(?::\S+)?> )(.*)$")
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\x07")


def run_console(text, work, env, timeout):
    """Checks a terminal transcript (see the module's doc); returns (ok, report)."""
    import doctest
    import pexpect
    steps = []
    for line in text.split("\n"):
        prompt = SHELL_PROMPT.match(line)
        if line.startswith("$ "):
            steps.append(("sh", line[2:], []))
        elif prompt:
            steps.append(("typed", prompt.group(2), []))
        elif steps:
            steps[-1][2].append(line)
    checker = doctest.OutputChecker()
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    env = dict(env, TERM="xterm", HOME=work)
    shell = None
    report = []
    try:
        for kind, command, lines in steps:
            expected = "\n".join(lines).strip("\n") + "\n"
            if kind == "sh" and re.search(r"\bremex shell\b", command):
                shell = pexpect.spawn("bash", ["-c", command], cwd=work, env=env, encoding="utf-8", timeout=timeout,
                                      dimensions=(50, 250))
                shell.expect(r"remex(:\S+)?> ")
                got = shell.before
            elif kind == "sh":
                got = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=work, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     timeout=timeout).stdout
            else:
                if shell is None:
                    return False, f"'{command}' typed before a `$ ... remex shell` line"
                shell.send(command + "\r")
                shell.expect(pexpect.EOF if command in ("quit", "exit") else r"remex(:\S+)?> ")
                got = shell.before.split("\n", 1)[1] if "\n" in shell.before else ""  # past the echo
            got = ESCAPES.sub("", got).replace("\r\n", "\n").replace("\r", "")
            if not got.endswith("\n"):
                got += "\n"
            if expected.strip() == "" and got.strip() == "":
                continue
            if not checker.check_output(expected, got, flags):
                report.append(f"--- {command}\nexpected:\n{expected}got:\n{got}")
    except pexpect.ExceptionPexpect as e:
        report.append(f"the shell did not answer: {type(e).__name__}: {str(e).splitlines()[0]}")
    finally:
        if shell is not None:
            shell.close(force=True)
    return not report, "\n".join(report)


def start_server(build, work):
    token = os.path.join(work, "remex.token")
    with open(token, "w") as f:
        f.write(os.urandom(24).hex() + "\n")
    server = subprocess.Popen(
        [os.path.join(build, "device_server", "remex-server"), "--listen", "127.0.0.1:0", "--quiet",
         "--token-file", token], stdout=subprocess.PIPE, text=True)
    first = server.stdout.readline()
    m = re.search(r"127\.0\.0\.1:(\d+)", first)
    if not m:
        server.kill()
        raise RuntimeError("remex-server did not start: " + first)
    return server, "127.0.0.1:" + m.group(1), open(token).read().strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--models", default=os.environ.get("REMEX_MODELS_DIR", ""))
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--without-python", action="store_true")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    models = [m for m in (os.listdir(args.models) if os.path.isdir(args.models) else []) if m.endswith(".onnx")]
    if not models:
        print(f"doc_examples: no models in '{args.models}' (scripts/fetch-models.sh)")
        return 1 if os.environ.get("REMEX_REQUIRE_MODELS") == "1" else 77
    failures = 0
    ran = 0
    skipped = 0
    for path in args.files:
        for line, mode, text in blocks(path):
            where = f"{os.path.relpath(path, repo)}:{line}"
            if args.without_python and (mode == "pycon" or "build/python" in text):
                skipped += 1
                print(f"skip {where}: this build has no Python client (REMEX_PYTHON=OFF)")
                continue
            ran += 1
            work = tempfile.mkdtemp(prefix="remex_doc_")
            for name, target in (("build", build), ("scripts", os.path.join(repo, "scripts")),
                                 ("python", os.path.join(repo, "python")), ("tests", os.path.join(repo, "tests")),
                                 (".cache", os.path.join(repo, ".cache"))):
                os.symlink(target, os.path.join(work, name))
            for m in models:
                os.symlink(os.path.join(os.path.abspath(args.models), m), os.path.join(work, m))
            env = dict(os.environ)
            env["PATH"] = os.pathsep.join([os.path.join(build, "host_client", "cli"),
                                           os.path.join(build, "device_server"), env.get("PATH", "")])
            server = None
            script = text
            try:
                if mode == "server":
                    server, address, token = start_server(build, work)
                    env["REMEX_TOKEN"] = token
                    script = text.replace("gpu-box:9190", address)
                t = time.monotonic()
                if mode == "console":
                    ok, report = run_console(script, work, env, args.timeout)
                    r = subprocess.CompletedProcess([], 0 if ok else 1, stdout=report)
                elif mode == "pycon":
                    env["PYTHONPATH"] = os.path.join(work, "build", "python")
                    r = subprocess.run(["/usr/bin/python3", "-c", PYCON_RUNNER], input=script, cwd=work, env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                       timeout=args.timeout)
                else:
                    r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=work, env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                       timeout=args.timeout)
                seconds = time.monotonic() - t
                if r.returncode != 0:
                    failures += 1
                    print(f"FAIL {where} (exit {r.returncode}, {seconds:.1f} s)\n{text}\n--- output ---\n{r.stdout}")
                else:
                    print(f"ok   {where} ({seconds:.1f} s)")
            except subprocess.TimeoutExpired:
                failures += 1
                print(f"FAIL {where}: timed out after {args.timeout} s")
            finally:
                if server:
                    server.terminate()
                    server.wait()
                shutil.rmtree(work, ignore_errors=True)
    print(f"doc_examples: {ran - failures} of {ran} runnable blocks passed" +
          (f", {skipped} skipped (no Python client in this build)" if skipped else ""))
    return 1 if failures or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
