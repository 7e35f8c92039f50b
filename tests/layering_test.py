"""The layers of docs/ARCHITECTURE.md ("Layers"), checked on the sources' includes.

Every library's headers sit under the repository root and every target sees that root,
so a wrong #include would compile: this test is what keeps the layering. Each file of
a layer's folder may include Remex headers of its own layer and of the layers ALLOWED
names for it, nothing else; tests (*_test.*, tests/), bench/ and fuzz targets are free
to reach down anywhere. Two narrow doors are named: remex-server (device_server/main.cc,
health_monitor.*) records its self-tests through remex_results, and the tooling loads
the embedded server through its C interface only (device_server/embedded_abi.h).

Usage: layering_test.py [SOURCE_DIR]   (default: the repository holding this file)
"""
import os
import re
import sys
import unittest

# Folder -> layer; the longest prefix wins.
FOLDERS = {
    "base": "base",
    "kernels": "kernels",
    "vm/device": "device",
    "vm": "vm",
    "rpc": "rpc",
    "device_server": "device_server",
    "host_client/compiler": "compiler",
    "host_client/client": "client",
    "host_client/tooling": "tooling",
    "host_client/cli": "cli",
    "python": "python",
}
# remex_results: the tooling folder's results store and statistics (host_client/tooling/
# CMakeLists.txt), a library of its own below the tooling.
RESULTS = {"results_store", "bench_stats", "regression", "history", "self_test_history"}

ALLOWED = {
    "base": set(),
    "kernels": {"base"},
    "device": {"base", "kernels"},
    "vm": {"base", "kernels", "device"},
    "rpc": {"base"},
    "device_server": {"base", "kernels", "device", "vm", "rpc"},
    "compiler": {"base", "kernels", "vm"},
    "client": {"base", "rpc"},
    "results": {"base"},
    "tooling": {"base", "kernels", "vm", "rpc", "client", "compiler", "results"},
    "cli": {"base", "rpc", "client", "tooling", "results"},
    "python": {"base", "rpc", "client", "tooling", "results"},
}
# (including file pattern, included file pattern): allowed beyond ALLOWED.
DOORS = [
    (re.compile(r"^device_server/(main\.cc|health_monitor\.(h|cc))$"), "results"),
    (re.compile(r"^host_client/tooling/embedded_server\.cc$"), re.compile(r"^device_server/embedded_abi\.h$")),
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SOURCES = (".cc", ".h", ".cu", ".cuh", ".def", ".inc")


def layer_of(path):
    """The layer of a repository-relative path, or None outside the layered folders."""
    best = None
    for folder, layer in FOLDERS.items():
        if (path == folder or path.startswith(folder + "/")) and (best is None or len(folder) > len(best[0])):
            best = (folder, layer)
    if best is None:
        return None
    if best[1] == "tooling" and os.path.splitext(os.path.basename(path))[0] in RESULTS:
        return "results"
    return best[1]


def exempt(path):
    name = os.path.basename(path)
    return ("_test" in name or name.startswith("test_util") or path.startswith(("tests/", "bench/"))
            or "/fuzz/" in path)


def violations(root, files=None):
    """(file, included header, file's layer, header's layer) for each include across
    layers that ALLOWED and DOORS do not permit, over `files` (repository-relative;
    default: every source file under the layered folders)."""
    if files is None:
        files = []
        for folder in FOLDERS:
            for d, dirs, names in os.walk(os.path.join(root, folder)):
                dirs[:] = [x for x in dirs if not x.startswith(".")]
                files += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(SOURCES)]
    out = []
    for path in sorted(set(files)):
        source = layer_of(path)
        if source is None or exempt(path):
            continue
        with open(os.path.join(root, path), errors="replace") as f:
            text = f.read()
        for header in INCLUDE.findall(text):
            target = layer_of(header)
            if target is None or target == source or target in ALLOWED[source]:
                continue
            if any(p.match(path) and (d == target if isinstance(d, str) else d.match(header)) for p, d in DOORS):
                continue
            out.append((path, header, source, target))
    return out


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LayeringTest(unittest.TestCase):
    def test_every_include_stays_within_the_layers(self):
        found = violations(ROOT)
        self.assertEqual(found, [], "\n".join("%s includes %s: %s may not depend on %s (docs/ARCHITECTURE.md)" % v
                                              for v in found))

    def test_the_check_sees_every_layer(self):
        # Each layer has files, so a renamed folder cannot empty the check.
        seen = set()
        for folder in FOLDERS:
            for d, _, names in os.walk(os.path.join(ROOT, folder)):
                seen |= {layer_of(os.path.relpath(os.path.join(d, n), ROOT)) for n in names if n.endswith(SOURCES)}
        self.assertEqual(seen - {None}, set(ALLOWED))

    def test_a_wrong_include_is_reported(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            cases = {
                "host_client/tooling/x.cc": '#include "device_server/device_server.h"\n',  # the server, not its door
                "vm/device/y.h": '#include "vm/vm.h"\n',                                     # the device layer under the VM
                "host_client/client/z.cc": '#include "host_client/compiler/compiler.h"\n',
                "device_server/session.cc": '#include "host_client/tooling/results_store.h"\n',  # only main/health
                "kernels/fine.cc": '#include "base/status.h"\n#include "kernels/kernels.h"\n',
                "host_client/tooling/embedded_server.cc": '#include "device_server/embedded_abi.h"\n',
                "device_server/health_monitor.cc": '#include "host_client/tooling/results_store.h"\n',
            }
            for path, text in cases.items():
                os.makedirs(os.path.join(d, os.path.dirname(path)), exist_ok=True)
                with open(os.path.join(d, path), "w") as f:
                    f.write(text)
            found = {v[0] for v in violations(d, cases)}
        self.assertEqual(found, {"host_client/tooling/x.cc", "vm/device/y.h", "host_client/client/z.cc",
                                 "device_server/session.cc"})


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        ROOT = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
