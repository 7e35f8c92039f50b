#!/usr/bin/env python3
"""Every repository path a source file or document names exists.

Comments and docs point at other files by their path from the repository root
("kernels/ops/nn/pool.cc", "vm/device/README.md"). When a file moves, such a pointer
goes stale without any build noticing; this check walks every tracked source and
document (git ls-files) and fails, naming file, line and path, for each path that
starts with one of the repository's top-level folders, ends in a source or document
extension and names neither a tracked file nor one in the working tree (a new file not
yet added).

Not checked: docs/benchmarks.md, a dated record of runs that names files as they were
on that date, and this file. Allowed to be absent: build outputs (GENERATED), placeholders whose file
name is in capitals ("tests/NAME.cc", "python/tests/FILE.py") and the paths test
programs invent for the trees they create (INVENTED, each with its file).

Usage: source_paths_test.py [SOURCE_DIR]   (default: the repository holding this file)
Exit status 0 when every path exists, 1 otherwise, 77 (skipped) outside a git checkout.
"""

import pathlib
import re
import subprocess
import sys

# Text files whose paths are checked.
CHECKED = re.compile(r"\.(cc|h|cu|cuh|def|md|py|sh|cmake|txt|capnp|toml)$|(^|/)CMakeLists\.txt$|^scripts/[^/.]+$")
# What a path may end in.
EXTENSIONS = r"(?:cc|h|cu|cuh|def|md|py|sh|cmake|capnp|toml|json|ts|js|html)"
NOT_CHECKED = {"docs/benchmarks.md", "tests/source_paths_test.py"}  # this file lists INVENTED
# Build outputs, written into the build tree.
GENERATED = re.compile(r"\.capnp\.(h|c\+\+)$|^base/version\.cc$")
# A placeholder for any file: the name in capitals.
PLACEHOLDER = re.compile(r"/[A-Z][A-Z0-9_]*\.[a-z]+$")
# Paths a test program invents for a tree of its own: {file: {path, ...}}.
INVENTED = {
    "tests/layering_test.py": {
        "host_client/tooling/x.cc",
        "host_client/client/z.cc",
        "kernels/fine.cc",
        "vm/device/y.h",
    },
}


def tracked_files(root):
    """The files git tracks under `root`; None outside a git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [p for p in out.decode().split("\0") if p]


def stale_paths(root, files):
    """Yields (file, line number, path) for each path named in `files` that is not tracked."""
    tracked = set(files)
    folders = sorted({f.split("/", 1)[0] for f in files if "/" in f and not f.startswith(".")})
    pattern = re.compile(
        r"(?<![A-Za-z0-9_./-])((?:%s)/[A-Za-z0-9_./-]*\.%s)(?![A-Za-z0-9_])" % ("|".join(map(re.escape, folders)), EXTENSIONS)
    )
    for name in files:
        if name in NOT_CHECKED or not CHECKED.search(name):
            continue
        path = root / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        invented = INVENTED.get(name, set())
        for number, line in enumerate(text.splitlines(), 1):
            for match in pattern.finditer(line):
                p = match.group(1).rstrip(".")
                if p in tracked or GENERATED.search(p) or PLACEHOLDER.search(p) or p in invented or (root / p).exists():
                    continue
                yield name, number, p


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    files = tracked_files(root)
    if not files:
        print(f"source_paths: {root} is not a git checkout; skipped")
        return 77
    stale = list(stale_paths(root, files))
    for name, number, p in stale:
        print(f"{name}:{number}: names {p}, which is not in the repository")
    if stale:
        print(f"source_paths: {len(stale)} stale path(s); fix each to the file's current path")
        return 1
    print("source_paths: every repository path named in sources and documents exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
