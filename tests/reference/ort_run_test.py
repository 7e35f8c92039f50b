"""The reference runtime's integer products are exact on every CPU (ort_run.js).

A reference run asks ONNX Runtime for exact u8 x s8 products (session.x64quantprecision):
on x86-64 CPUs without VNNI its default plan adds pairs of products in saturating 16-bit
lanes. Here 255 * 127 pairs saturate such a lane, so on those CPUs (CI's among them) the
default plan gives other numbers than the ONNX definition of MatMulInteger (int32 sums
of exact products), which this test demands of ort_run.js's outputs.

Usage: ort_run_test.py   (env: REMEX_ORT_RUN, the script; REMEX_ORT_MODULES, the
node_modules folder holding onnxruntime-node: scripts/test.sh sets both; exit 77 to
skip without them unless REMEX_REQUIRE_MODELS=1)
"""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

K = 64


def write_model(path, b):
    from onnx import TensorProto, checker, helper, numpy_helper, save
    graph = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "matmul_integer",
                              [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, K])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [2, 3])],
                              [numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    checker.check_model(model)
    save(model, path)


class OrtRunTest(unittest.TestCase):
    def test_matmul_integer_is_exact_where_pairs_saturate_16_bits(self):
        b = (np.full((K, 3), 127, np.int64) * np.array([1, -1, 1])).astype(np.int8)
        a = np.full((2, K), 255, np.uint8)
        a[1, ::2] = 3
        expected = a.astype(np.int64) @ b.astype(np.int64)  # [[2072640, -2072640, ...], ...]
        with tempfile.TemporaryDirectory(prefix="remex-ort-run-") as d:
            write_model(os.path.join(d, "m.onnx"), b)
            np.save(os.path.join(d, "a.npy"), a)
            r = subprocess.run(["node", os.environ["REMEX_ORT_RUN"], "--modules", os.environ["REMEX_ORT_MODULES"],
                                os.path.join(d, "m.onnx"), d, "a=" + os.path.join(d, "a.npy")],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            y = np.load(os.path.join(d, "y.npy"))
        self.assertEqual(y.dtype, np.int32)
        self.assertEqual(y.tolist(), expected.tolist())


if __name__ == "__main__":
    if not os.environ.get("REMEX_ORT_RUN") or not os.environ.get("REMEX_ORT_MODULES"):
        print("ort_run_test: REMEX_ORT_RUN and REMEX_ORT_MODULES are not set (scripts/test.sh sets them)")
        sys.exit(1 if os.environ.get("REMEX_REQUIRE_MODELS") == "1" else 77)
    unittest.main(verbosity=2)
