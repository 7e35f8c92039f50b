"""Fixtures of the Python client's tests: real remex-server processes on loopback and
small ONNX models written with the onnx package (python3-onnx).

REMEX_BUILD_DIR names the build tree (ctest sets it, and PYTHONPATH to BUILD/python).
"""
import os
import re
import shutil
import socket
import subprocess
import threading
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

BUILD = os.environ.get("REMEX_BUILD_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
SERVER_BIN = os.path.join(BUILD, "device_server", "remex-server")
CLI_BIN = os.path.join(BUILD, "host_client", "cli", "remex")
# The test PKI (tests/data/tls/make-certs.sh): ca.pem, server.pem/.key (localhost,
# 127.0.0.1), client.pem/.key (clientAuth), other-ca.pem (an unrelated CA).
TLS_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "tls"))


def pki(name):
    return os.path.join(TLS_DIR, name)


class Server:
    """A remex-server process on a free loopback port. quiet=False: its info log is
    kept, line by line, in `log` (read by a thread, so the pipe never fills)."""

    def __init__(self, *flags, quiet=True):
        self.proc = subprocess.Popen([SERVER_BIN, "--listen", "127.0.0.1:0", *(["--quiet"] if quiet else []), *flags],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        first = self.proc.stdout.readline()
        m = re.search(r"127\.0\.0\.1:(\d+)", first)
        if not m:
            self.proc.kill()
            raise RuntimeError("remex-server did not start: " + first + self.proc.stdout.read())
        self.address = "127.0.0.1:" + m.group(1)
        self.log = []
        if not quiet:
            threading.Thread(target=self._read_log, daemon=True).start()

    def _read_log(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def server():
    s = Server("--threads", "1")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def token_server(tmp_path_factory):
    token_file = tmp_path_factory.mktemp("token") / "remex.token"
    token_file.write_text(os.urandom(24).hex() + "\n")
    s = Server("--token-file", str(token_file))
    s.token_file = str(token_file)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def tls_server():
    """A server speaking TLS with the test PKI's server certificate."""
    s = Server("--tls-cert", pki("server.pem"), "--tls-key", pki("server.key"))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def mtls_server():
    """A server speaking mutual TLS: clients need a certificate of the test CA."""
    s = Server("--tls-cert", pki("server.pem"), "--tls-key", pki("server.key"), "--tls-client-ca", pki("ca.pem"))
    yield s
    s.stop()


def _save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return str(path)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """{name: path} of the test models:
    add_relu:  y = Relu(x + b), x float32 [2, 3], b a constant.
    dynamic:   y = x * 2, x float32 [N, 4] (N symbolic).
    recurrent: h_next = Tanh(x @ W + h @ U), y = ReduceSum(h_next, axis 1);
               x, h float32 [1, 4]; y [1]. W, U seeded constants.
    """
    d = tmp_path_factory.mktemp("models")
    out = {}
    b = numpy_helper.from_array(np.array([[0.5, -1.0, 2.0]], np.float32), "b")
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], "add_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [b])
    out["add_relu"] = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), d / "add_relu.onnx")

    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["y"])], "dynamic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [two])
    out["dynamic"] = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), d / "dynamic.onnx")

    rng = np.random.default_rng(7)
    W = rng.standard_normal((4, 4)).astype(np.float32) * 0.5
    U = rng.standard_normal((4, 4)).astype(np.float32) * 0.5
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("MatMul", ["h", "U"], ["hu"]),
         helper.make_node("Add", ["xw", "hu"], ["pre"]), helper.make_node("Tanh", ["pre"], ["h_next"]),
         helper.make_node("ReduceSum", ["h_next", "axes"], ["y"], keepdims=0)], "recurrent",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
         helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1]),
         helper.make_tensor_value_info("h_next", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(U, "U"),
         numpy_helper.from_array(np.array([1], np.int64), "axes")])
    out["recurrent"] = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), d / "recurrent.onnx")
    out["recurrent_weights"] = (W, U)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
