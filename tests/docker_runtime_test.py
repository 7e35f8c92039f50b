#!/usr/bin/python3
"""A Docker image's runtime stage installs every shared library the binaries need.

docker/Dockerfile.server builds remex-server and remex in a debian:12 stage and copies
them into a debian:12-slim stage that installs the runtime libraries by package name. No
Docker engine runs in CI, so this test checks that list without one: every library that
`ldd` resolves for the built binaries must belong to a Debian package that the runtime
stage installs, depends on (transitively), or that every Debian image has (the Essential
packages and apt, with their dependencies). Package data comes from this machine's dpkg
database, which holds the same Debian 12 packages the image build installs. The runtime
stage's COPY --from=build sources must be where the build puts the binaries.

The same list is what a machine needs to run the Python client's wheel (docs/python.md,
"A wheel"): each --module (the wheel's remex/_native) is checked against it like the
binaries, without being copied into the image; --runtime-packages prints the list, for
scripts/fresh-check.sh --wheel to install on its second fresh system.

Without --cuda, libraries under the CUDA toolkit are skipped: the image builds with
-DREMEX_CUDA=OFF. With --cuda (docker/Dockerfile.server-cuda, checked against a CUDA
build), each of them must be one that NVIDIA_PACKAGES knows, and the runtime stage must
install its package from NVIDIA's CUDA repository; every such package listed must be
needed.

Usage: docker_runtime_test.py [--cuda] --build-dir DIR [--module SO]... DOCKERFILE BINARY...
       (DIR: the build tree of the binaries; exit status 1 on a failure)
       docker_runtime_test.py --runtime-packages DOCKERFILE
       (prints the runtime stage's packages, one per line)
"""

import functools
import os
import re
import subprocess
import sys
import unittest

CUDA_PREFIXES = ("/usr/local/cuda",)

# The CUDA libraries a CUDA build links (by soname; the CUDA runtime is linked
# statically) and the package of NVIDIA's CUDA repository for Debian 12 that ships each:
# CUDA 13.0, cuBLAS 13, cuDNN 9 built for CUDA 13. A library missing here (a new one, or
# a new major version) fails the test until it is added with its package.
NVIDIA_PACKAGES = {
    "libcudart.so.13": "cuda-cudart-13-0",
    "libcublas.so.13": "libcublas-13-0",
    "libcublasLt.so.13": "libcublas-13-0",
    "libnvrtc.so.13": "cuda-nvrtc-13-0",
    "libnvJitLink.so.13": "libnvjitlink-13-0",
    "libcudnn.so.9": "libcudnn9-cuda-13",
}


def stages(dockerfile_text):
    """The text of each stage (from one FROM to the next), line continuations joined."""
    text = dockerfile_text.replace("\\\n", " ")
    return re.split(r"(?m)^FROM\s", text)[1:]


def runtime_packages(dockerfile_text):
    """Package names of `apt-get install` in the last stage (after the last FROM)."""
    last = stages(dockerfile_text)[-1]
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


def spellings(path):
    """path, its real path and their /usr-merged spellings, in the order they are tried."""
    candidates = [path, os.path.realpath(path)]
    for c in list(candidates):
        candidates.append(c[4:] if c.startswith("/usr/") else "/usr" + c)
    return candidates


_owners = {}  # path -> the package that ships it, or None: what `dpkg -S` said


def find_owners(paths):
    """Asks dpkg once which package ships each spelling of each path not asked before
    (one `dpkg -S` reads the whole file database, so it is asked for all at once)."""
    todo = sorted({c for p in paths for c in spellings(p)} - _owners.keys())
    if not todo:
        return
    out = subprocess.run(["dpkg", "-S", *todo], capture_output=True, text=True).stdout
    for c in todo:
        _owners[c] = None
    for line in out.splitlines():
        # "libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6" (several owners: "a, b: PATH").
        if line.startswith("diversion ") or ": /" not in line:
            continue
        packages, path = line.rsplit(": /", 1)
        path = "/" + path
        if path in _owners and _owners[path] is None:
            _owners[path] = packages.split(",")[0].split(":")[0].strip()


def owner(path):
    """The Debian package that ships path (tries the /usr-merged spellings), or None."""
    find_owners([path])
    for c in spellings(path):
        if _owners.get(c):
            return _owners[c]
    return None


def is_cuda_library(path):
    return path.startswith(CUDA_PREFIXES) or os.path.realpath(path).startswith(CUDA_PREFIXES)


def missing_libraries(dockerfile_text, binaries, cuda=False):
    """[(binary, library, package or None)] for each library the runtime stage lacks.

    With `cuda`, libraries of the CUDA toolkit count too: each needs its package of
    NVIDIA_PACKAGES (None: a library the table does not know)."""
    packages, provides = installed_packages()
    listed = runtime_packages(dockerfile_text)
    nvidia = set(NVIDIA_PACKAGES.values()) if cuda else set()
    unknown = [p for p in listed if p not in packages and p not in nvidia]
    if unknown:
        raise AssertionError(
            f"runtime stage installs {unknown}: not Debian packages installed here (a typo?)")
    base = [p for p, (_, essential) in packages.items() if essential] + ["apt"]
    available = closure(listed + base, packages, provides)
    missing = []
    find_owners([lib for b in binaries for lib in needed_libraries(b) if not is_cuda_library(lib)])
    for binary in binaries:
        for lib in needed_libraries(binary):
            if is_cuda_library(lib):
                if not cuda:
                    continue
                pkg = NVIDIA_PACKAGES.get(os.path.basename(lib))
                if pkg is None or pkg not in listed:
                    missing.append((os.path.basename(binary), lib, pkg))
                continue
            pkg = owner(lib)
            if pkg is None or pkg not in available:
                missing.append((os.path.basename(binary), lib, pkg))
    return missing


def copied_build_outputs(dockerfile_text):
    """Paths, relative to the build stage's build tree, that the last stage copies from it.

    The build tree is the build stage's WORKDIR joined with the `-B DIR` of its cmake
    configure command."""
    all_stages = stages(dockerfile_text)
    build = next((s for s in all_stages if re.match(r"\S+\s+AS\s+build\b", s)), None)
    if build is None:
        raise AssertionError("no stage named build")
    workdir = re.search(r"(?m)^WORKDIR\s+(\S+)", build)
    tree = re.search(r"cmake\s[^&;]*?-B\s*(\S+)", build)
    if not workdir or not tree:
        raise AssertionError("the build stage names no WORKDIR or no cmake -B build tree")
    root = os.path.join(workdir.group(1), tree.group(1)).rstrip("/") + "/"
    copied = []
    for m in re.finditer(r"(?m)^COPY\s+--from=build\s+(.+)$", all_stages[-1]):
        sources = m.group(1).split()[:-1]
        for source in sources:
            if not source.startswith(root):
                raise AssertionError(f"COPY --from=build {source}: not under the build tree {root}")
            copied.append(source[len(root):])
    return copied


class DockerRuntimeTest(unittest.TestCase):
    dockerfile = None
    binaries = []
    modules = []  # shared objects checked for their libraries, not copied into the image
    build_dir = None
    cuda = False

    def test_runtime_stage_lists_every_library(self):
        with open(self.dockerfile) as f:
            text = f.read()
        missing = missing_libraries(text, self.binaries + self.modules, self.cuda)
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
            if any(p == pkg for _, _, p in missing_libraries(dropped, self.binaries + self.modules, self.cuda)):
                reported.append(pkg)
        self.assertTrue(reported, "no package removal was detected")

    def test_cuda_libraries_come_from_nvidia_packages(self):
        # A CUDA image checked against a CUDA build: the build links CUDA libraries, and
        # each NVIDIA package the stage installs is needed by one of them.
        if not self.cuda:
            self.skipTest("the image has no CUDA device (no --cuda)")
        cuda_libs = [lib for b in self.binaries for lib in needed_libraries(b) if is_cuda_library(lib)]
        self.assertTrue(cuda_libs, "the binaries link no CUDA library: not a CUDA build")
        with open(self.dockerfile) as f:
            text = f.read()
        nvidia = set(NVIDIA_PACKAGES.values())
        for pkg in [p for p in runtime_packages(text) if p in nvidia]:
            dropped = re.sub(rf"(?<=\s){re.escape(pkg)}(?=\s|\\|$)", "", text)
            self.assertTrue(any(p == pkg for _, _, p in missing_libraries(dropped, self.binaries, True)),
                            f"{pkg} is installed but no library of the binaries comes from it")

    def test_copies_the_built_binaries(self):
        # The runtime stage copies each binary from where the build puts it, and only them.
        with open(self.dockerfile) as f:
            text = f.read()
        built = sorted(os.path.relpath(os.path.realpath(b), os.path.realpath(self.build_dir))
                       for b in self.binaries)
        self.assertEqual(sorted(copied_build_outputs(text)), built)

    def test_parses_the_last_stage_only(self):
        text = ("FROM a AS build\nRUN apt-get install -y gcc\n"
                "FROM b\nRUN apt-get update && apt-get install -y --no-install-recommends \\\n"
                "      libfoo1 libbar2 && \\\n    rm -rf x\n")
        self.assertEqual(runtime_packages(text), ["libfoo1", "libbar2"])

    def test_finds_the_copied_build_outputs(self):
        text = ("FROM a AS build\nWORKDIR /src\nRUN cmake -G Ninja -S . -B build && cmake --build build\n"
                "FROM b\nCOPY --from=build /src/build/x/one /src/build/two /usr/local/bin/\n"
                "COPY other /etc/\n")
        self.assertEqual(copied_build_outputs(text), ["x/one", "two"])
        with self.assertRaises(AssertionError):
            copied_build_outputs(text.replace("/src/build/two", "/elsewhere/two"))


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--runtime-packages":
        with open(args[1]) as f:
            print("\n".join(runtime_packages(f.read())))
        sys.exit(0)
    cuda = "--cuda" in args
    args = [a for a in args if a != "--cuda"]
    modules = []
    while "--module" in args:
        i = args.index("--module")
        if i + 1 >= len(args):
            sys.exit(__doc__)
        modules.append(args[i + 1])
        del args[i:i + 2]
    if len(args) < 4 or args[0] != "--build-dir":
        sys.exit(__doc__)
    DockerRuntimeTest.build_dir = args[1]
    DockerRuntimeTest.cuda = cuda
    DockerRuntimeTest.modules = modules
    DockerRuntimeTest.dockerfile = args[2]
    DockerRuntimeTest.binaries = args[3:]
    unittest.main(argv=[sys.argv[0], "-v"])
