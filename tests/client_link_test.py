"""The clients carry neither the device server nor CUDA (docs/ARCHITECTURE.md, "Layers").

The remex CLI and the Python module link the client library, the compiler and the
tooling; the device server, the device layer and the CUDA kernels live in
libremex_embedded.so, which they load with dlopen for commands without --server
(host_client/tooling/embedded_server.h). Checked on the built files:

  - `ldd` of the CLI and of the module lists no CUDA library, and their symbol tables
    define nothing of the server (remex::server::) or of the CUDA device;
  - the library does define the server (and, in a CUDA build, links CUDA's libraries):
    the check looks where the code went;
  - the CLI finds the library beside itself, then in ../lib, before its build tree's,
    and says which it could not use; REMEX_EMBEDDED_LIBRARY overrides them all; a
    library that is not Remex's is refused by name.

Usage: client_link_test.py --remex REMEX [--module PYTHON_MODULE] --embedded LIBRARY [--cuda]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

CUDA_LIBRARY = re.compile(r"\b(libcuda|libcudart|libcublas|libcublasLt|libcudnn\w*|libnvrtc|libnvJitLink|libcufft|"
                          r"libcurand|libcusparse|libcusolver|libnvidia-\w+)\.so")
# Symbols that only the server and the device layer define.
SERVER_SYMBOL = re.compile(r"remex::server::DeviceServer::|remex::vm::CudaDevice|remex::vm::CreateCudaDevice")

ARGS = None
MODEL = None  # y = Relu(x), x float32 [2, 3], written by main()


def write_model(path):
    from onnx import TensorProto, checker, helper, save
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    checker.check_model(model)
    save(model, path)


def ldd(path):
    return subprocess.run(["ldd", path], check=True, capture_output=True, text=True).stdout


def defined_symbols(path):
    """The demangled names of what `path` defines, from its symbol table (local ones too)."""
    out = subprocess.run(["nm", "-C", "--defined-only", path], check=True, capture_output=True, text=True).stdout
    return out.splitlines()


def place(src, dst):
    """dst as a hard link to src where the file system allows, else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


class ClientLinkTest(unittest.TestCase):
    def clients(self):
        return [p for p in (ARGS.remex, ARGS.module) if p]

    def test_clients_link_no_cuda_library(self):
        for path in self.clients():
            found = sorted(set(m.group(0) for m in CUDA_LIBRARY.finditer(ldd(path))))
            self.assertEqual(found, [], "%s links %s" % (path, found))

    def test_clients_define_nothing_of_the_server(self):
        for path in self.clients():
            found = [s for s in defined_symbols(path) if SERVER_SYMBOL.search(s)]
            self.assertEqual(found, [], "%s defines %d server symbols, such as %s" % (path, len(found), found[:3]))

    def test_the_library_holds_what_the_clients_do_not(self):
        symbols = defined_symbols(ARGS.embedded)
        self.assertTrue(any("remex::server::DeviceServer::" in s for s in symbols),
                        "%s defines no remex::server::DeviceServer" % ARGS.embedded)
        exported = subprocess.run(["nm", "-D", "--defined-only", ARGS.embedded], check=True, capture_output=True,
                                  text=True).stdout
        functions = sorted(line.split()[-1] for line in exported.splitlines() if " T " in line)
        self.assertEqual(functions, ["remex_embedded_abi_version", "remex_embedded_port",
                                     "remex_embedded_remex_version", "remex_embedded_start", "remex_embedded_stop"])
        if ARGS.cuda:
            self.assertRegex(ldd(ARGS.embedded), CUDA_LIBRARY, "a CUDA build's server links CUDA's libraries")

    def run_remex(self, remex, env_extra=None, cwd=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("REMEX_")}
        env.update(env_extra or {})
        return subprocess.run([remex, "run", MODEL], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=300)

    def test_the_cli_looks_beside_itself_then_in_lib_then_in_its_build_tree(self):
        # A library that is not Remex's (the C library's zlib or any other shared object
        # remex links) placed where the CLI looks: refused by name, so it was looked at
        # before the build tree's real one.
        other = next(line.split("=>")[1].split()[0] for line in ldd(ARGS.remex).splitlines()
                     if "=> /" in line and "libz.so" in line)
        with tempfile.TemporaryDirectory(prefix="remex-client-link-") as d:
            os.makedirs(os.path.join(d, "bin"))
            os.makedirs(os.path.join(d, "lib"))
            remex = os.path.join(d, "bin", "remex")
            place(ARGS.remex, remex)
            for where in ("bin", "lib"):
                lib = os.path.join(d, where, "libremex_embedded.so")
                shutil.copy(other, lib)
                r = self.run_remex(remex, cwd=d)
                self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
                self.assertIn(lib + " has no remex_embedded_abi_version: not a Remex embedded-server library",
                              r.stderr)
                os.remove(lib)
            # Nothing beside it: the build tree's library serves.
            r = self.run_remex(remex, cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(" on embedded 127.0.0.1:", r.stdout)
            # The real library beside it.
            place(ARGS.embedded, os.path.join(d, "bin", "libremex_embedded.so"))
            r = self.run_remex(remex, cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_environment_names_the_library(self):
        r = self.run_remex(ARGS.remex, {"REMEX_EMBEDDED_LIBRARY": "/nonexistent/libremex_embedded.so"})
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("starting the embedded server: cannot load the embedded server's library "
                      "/nonexistent/libremex_embedded.so", r.stderr)
        r = self.run_remex(ARGS.remex, {"REMEX_EMBEDDED_LIBRARY": ARGS.embedded})
        self.assertEqual(r.returncode, 0, r.stderr)


def main():
    global ARGS, MODEL
    parser = argparse.ArgumentParser()
    parser.add_argument("--remex", required=True)
    parser.add_argument("--module", default="")
    parser.add_argument("--embedded", required=True)
    parser.add_argument("--cuda", action="store_true")
    ARGS, rest = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="remex-client-link-model-") as d:
        MODEL = os.path.join(d, "relu.onnx")
        write_model(MODEL)
        result = unittest.main(argv=[sys.argv[0], "-v"] + rest, exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
