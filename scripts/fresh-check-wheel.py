"""The two ends of scripts/fresh-check.sh --wheel (run inside its fresh systems).

  fresh-check-wheel.py model OUT.onnx
      in the first system (python3-onnx): writes y = Relu(x + b), x float32 [N, 3]
  fresh-check-wheel.py run HOST:PORT MODEL.onnx
      in the wheel's system (the venv's python): compiles the model with remex.compile,
      runs it on the server, then on the embedded server (remex.embedded(): the wheel's
      own libremex_embedded.so), and checks y; prints the version and where remex came
      from

Exit status 1 with the reason on a wrong output.
"""
import os
import sys

import numpy as np

B = np.array([0.5, -1.0, 2.0], np.float32)


def write_model(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], "add_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [numpy_helper.from_array(B, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def run(address, model):
    import remex
    rmx = os.path.splitext(model)[0] + ".rmx"
    remex.compile(model, rmx, bounds={"N": (1, 8)})
    x = np.array([[1, 2, -3], [0, 1, -4]], np.float32)
    expected = np.maximum(x + B, 0)
    for session in (lambda: remex.connect(address), lambda: remex.embedded(threads=1)):
        with session() as s:
            y = s.load(rmx).run({"x": x})["y"]
            server = s.server
        if not np.array_equal(y, expected):
            sys.exit(f"fresh-check-wheel: on {server}: y = {y.tolist()}, expected {expected.tolist()}")
        print(f"   remex {remex.__version__} from {os.path.dirname(remex.__file__)} ran {os.path.basename(rmx)} on "
              f"{server}: y = {y.tolist()}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "model":
        write_model(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
