#!/usr/bin/python3
"""python_overhead: what the Python client adds to a small invoke over the C++ client.

    PYTHONPATH=build/python bench/python_overhead.py [--build build] [--iterations 5000]
        [--rounds 5] [--elements 16] [--no-pin] [--json]

Starts one remex-server (--threads 1) on loopback, pinned to CPU 1 with both clients on
CPU 0 (unless --no-pin or the machine has one CPU), and, in --rounds interleaved rounds,
measures the median round trip of an invoke of a one-op model (Relu on float32
[--elements]) whose input is bound and whose output is bound with set_output, so each
call is one request and one reply that allocates nothing:
  cpp     bench/latency_bench --server ... (Session::Invoke of the C++ client)
  python  Model.invoke({"x": tensor}) of the remex package, timed with perf_counter_ns
Prints each round's medians and the median of the per-round differences (python - cpp)
in microseconds.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from onnx import TensorProto, helper, save

import remex


def relu_model(path, elements):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [elements])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [elements])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def python_median_us(address, model_path, elements, iterations):
    with remex.connect(address) as s:
        m = s.load(model_path)
        x = s.upload(np.linspace(-1, 1, elements, dtype=np.float32))
        m.set_output("y", s.empty((elements,), "float32"))
        inputs = {"x": x}
        for _ in range(200):  # warm-up
            m.invoke(inputs)
        samples = []
        clock = time.perf_counter_ns
        for _ in range(iterations):
            t = clock()
            m.invoke(inputs)
            samples.append(clock() - t)
        return statistics.median(samples) / 1e3


def cpp_median_us(build, address, elements, iterations, pin):
    out = subprocess.run([os.path.join(build, "bench", "latency_bench"), "--server", address, "--iterations",
                          str(iterations), "--elements", str(elements), "--series", "invoke", "--json"],
                         capture_output=True, text=True, check=True, preexec_fn=pin(0))
    return json.loads(out.stdout)["median_us"]["invoke"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--iterations", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--elements", type=int, default=16)
    ap.add_argument("--no-pin", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pinned = not args.no_pin and len(os.sched_getaffinity(0)) >= 2

    def pin(cpu):
        return (lambda: os.sched_setaffinity(0, {cpu})) if pinned else None

    server = subprocess.Popen([os.path.join(args.build, "device_server", "remex-server"), "--listen", "127.0.0.1:0",
                               "--quiet", "--threads", "1"], stdout=subprocess.PIPE, text=True, preexec_fn=pin(1))
    if pinned:
        os.sched_setaffinity(0, {0})
    try:
        m = re.search(r"127\.0\.0\.1:(\d+)", server.stdout.readline())
        if not m:
            sys.exit("python_overhead: remex-server did not start")
        address = "127.0.0.1:" + m.group(1)
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "relu.onnx")
            relu_model(model, args.elements)
            rounds = []
            for r in range(args.rounds):
                cpp = cpp_median_us(args.build, address, args.elements, args.iterations, pin)
                py = python_median_us(address, model, args.elements, args.iterations)
                rounds.append({"cpp_us": cpp, "python_us": py, "overhead_us": py - cpp})
                if not args.json:
                    print(f"round {r + 1}: cpp {cpp:.1f} us  python {py:.1f} us  overhead {py - cpp:+.1f} us")
    finally:
        server.terminate()
        server.wait()
    overhead = statistics.median(r["overhead_us"] for r in rounds)
    if args.json:
        print(json.dumps({"elements": args.elements, "iterations": args.iterations, "pinned": pinned, "rounds": rounds,
                          "median_overhead_us": overhead}, indent=2))
    else:
        print(f"median overhead of the Python client per invoke: {overhead:+.1f} us "
              f"({args.rounds} rounds of {args.iterations} calls each)")


if __name__ == "__main__":
    main()
