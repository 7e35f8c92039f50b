#!/usr/bin/python3
"""Generate ONNX's backend test cases (node and simple) into OUT_DIR.

Run with Debian's python3 (python3-onnx 1.12, python3-numpy):
    /usr/bin/python3 scripts/gen_conformance.py OUT_DIR
ONNX's generator writes OUT_DIR/node/<case>/{model.onnx,test_data_set_N/}, OUT_DIR/simple/
and OUT_DIR/real/ (download stubs); scripts/gen-conformance.sh renames what Remex uses.
ONNX 1.12's case definitions still use numpy aliases (np.float, np.int, ...) that current
numpy removed, so they are mapped back to the Python builtins before the generator loads.
"""
import sys

import numpy

for _name, _builtin in (("bool", bool), ("int", int), ("float", float),
                        ("complex", complex), ("object", object)):
    if _name not in vars(numpy):  # hasattr() would trip numpy's deprecation warnings
        setattr(numpy, _name, _builtin)

from onnx.backend.test import cmd_tools  # noqa: E402  (needs the aliases above)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: gen_conformance.py OUT_DIR")
    sys.argv = [sys.argv[0], "generate-data", "-o", sys.argv[1]]
    cmd_tools.main()


if __name__ == "__main__":
    main()
