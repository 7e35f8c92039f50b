#!/usr/bin/python3
"""The Docker image's runtime stage installs every shared library the binaries need.

docker/Dockerfile.server builds remex-server and remex in a debian:12 stage and copies
them into a debian:12-slim stage that installs the runtime libraries by package name. No
Docker engine runs in CI, so this test checks that list without one: every library that
`ldd` resolves for the built binaries must belong to a Debian package that the runtime
stage installs, depends on (transitively), or that every Debian image has (the Essential
packages and apt, with their dependencies). Package data comes from this machine's dpkg
database, which holds the same Debian 12 packages the image build installs.

Libraries under the CUDA toolkit are skipped: the image builds with -DREMEX_CUDA=OFF.

Usage: docker_runtime_test.py DOCKERFILE BINARY...   (exit status 1 on a failure)
"""

import functools
import os
import re
import subprocess
import sys
import unittest

CUDA_PREFIXES = ("/usr/local/cuda",)


def runtime_packages(dockerfile_text):
    """Package names of `apt-get install` in the last stage (after the last FROM)."""
    text = dockerfile_text.replace("\\\n", " ")
    stages = re.split(r"(?m)^FROM\s", text)
    last = stages[-1]
    packages = []
    for m in re.finditer(r"apt-get\s+install\s+([^&;\n]*)", last):
        packages += [w for w in m.group(1).split() if not w.startswith("-")]
    return packages


@functools.lru_cache(maxsize=None)
def installed_packages():
    """{package: (depends as [[alternative, ...], ...], essential)} from dpkg, plus provides."""
    out = subprocess.run(
        ["dpkg-query", "-W", "-f",
         "${Package}\t${db:Status-Status}\t${Essential}\t${Pre-Depends}, ${Depends}\t${Provides}\n"],
        check=True, capture_output=True, text=True).stdout
    packages, provides = {}, {}
    for line in out.splitlines():
        name, status, essential, depends, provided = line.split("\t")
        if status != "installed":
            continue
        groups = []
        for group in depends.split(","):
            alternatives = [re.split(r"[\s(:]", a.strip())[0] for a in group.split("|")]
            alternatives = [a for a in alternatives if a]
            if alternatives:
                groups.append(alternatives)
        packages[name] = (groups, essential == "yes")
        for p in provided.split(","):
            p = re.split(r"[\s(:]", p.strip())[0]
            if p:
                provides.setdefault(p, []).append(name)
    return packages, provides


def closure(roots, packages, provides):
    """Every installed package reachable from roots through Pre-Depends and Depends."""
    seen, stack = set(), list(roots)
    while stack:
        name = stack.pop()
        if name in seen or name not in packages:
            continue
        seen.add(name)
        for alternatives in packages[name][0]:
            for a in alternatives:
                real = [a] if a in packages else provides.get(a, [])
                real = [r for r in real if r in packages]
                if real:
                    stack.extend(real)
                    break
    return seen


@functools.lru_cache(maxsize=None)
def needed_libraries(binary):
    """Resolved paths of the shared libraries `ldd` lists for binary; raises on 'not found'."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    paths = []
    for line in out.splitlines():
        if "not found" in line:
            raise AssertionError(f"{binary}: {line.strip()}")
        m = re.search(r"=>\s+(/\S+)", line)
        if m:
            paths.append(m.group(1))
    return paths


@functools.lru_cache(maxsize=None)
def owner(path):
    """The Debian package that ships path (tries the /usr-merged spellings), or None."""
    candidates = [path, os.path.realpath(path)]
    for c in list(candidates):
        if c.startswith("/usr/"):
            candidates.append(c[4:])
        else:
            candidates.append("/usr" + c)
    for c in candidates:
        r = subprocess.run(["dpkg", "-S", c], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    return None


def missing_libraries(dockerfile_text, binaries):
    """[(binary, library, package or None)] for each library the runtime stage lacks."""
    packages, provides = installed_packages()
    listed = runtime_packages(dockerfile_text)
    unknown = [p for p in listed if p not in packages]
    if unknown:
        raise AssertionError(
            f"runtime stage installs {unknown}: not Debian packages installed here (a typo?)")
    base = [p for p, (_, essential) in packages.items() if essential] + ["apt"]
    available = closure(listed + base, packages, provides)
    missing = []
    for binary in binaries:
        for lib in needed_libraries(binary):
            if lib.startswith(CUDA_PREFIXES):
                continue
            pkg = owner(lib)
            if pkg is None or pkg not in available:
                missing.append((os.path.basename(binary), lib, pkg))
    return missing


class DockerRuntimeTest(unittest.TestCase):
    dockerfile = None
    binaries = []

    def test_runtime_stage_lists_every_library(self):
        with open(self.dockerfile) as f:
            text = f.read()
        missing = missing_libraries(text, self.binaries)
        self.assertEqual(missing, [], "\n".join(
            f"{b} needs {lib}, from package {pkg or '(none)'}, which the runtime stage of "
            f"{self.dockerfile} does not install" for b, lib, pkg in missing))

    def test_a_dropped_package_is_reported(self):
        # The check can fail: take each listed package out in turn; at least one removal
        # must be reported, naming that package.
        with open(self.dockerfile) as f:
            text = f.read()
        reported = []
        for pkg in runtime_packages(text):
            dropped = re.sub(rf"(?<=\s){re.escape(pkg)}(?=\s|\\|$)", "", text)
            if any(p == pkg for _, _, p in missing_libraries(dropped, self.binaries)):
                reported.append(pkg)
        self.assertTrue(reported, "no package removal was detected")

    def test_parses_the_last_stage_only(self):
        text = ("FROM a AS build\nRUN apt-get install -y gcc\n"
                "FROM b\nRUN apt-get update && apt-get install -y --no-install-recommends \\\n"
                "      libfoo1 libbar2 && \\\n    rm -rf x\n")
        self.assertEqual(runtime_packages(text), ["libfoo1", "libbar2"])


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    DockerRuntimeTest.dockerfile = sys.argv[1]
    DockerRuntimeTest.binaries = sys.argv[2:]
    unittest.main(argv=[sys.argv[0], "-v"])
