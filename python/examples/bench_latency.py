#!/usr/bin/python3
"""Benchmark a model on a remote device and plot its latency distribution.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/bench_latency.py MODEL.onnx|MODEL.rmx
        [--server HOST:PORT] [--shape NAME=DIMS ...] [--repeat 200] [--number 1]
        [--plot latency.png]

Without --server (and without REMEX_SERVER) it starts an embedded CPU server. Inputs are
uniform random in [-1, 1) (float) or [0, 10) (integers), shaped by --shape or the
model's static shapes. The samples are timed on the server (`remex bench`'s numbers);
the plot (a histogram of the per-call latency, and the samples in order, which shows
warm-up drift) needs matplotlib (Debian: python3-matplotlib). Without it the example
says so and prints a text histogram instead.
"""
import argparse
import os

import numpy as np

import remex


def random_inputs(model, shapes, rng):
    inputs = {}
    for name, dtype, shape in model.inputs:
        dims = shapes.get(name, shape)
        if any(not isinstance(d, int) for d in dims):
            raise SystemExit(f"input {name} has dynamic dims {shape}: give --shape {name}=DIMS")
        if dtype.startswith("float"):
            inputs[name] = rng.uniform(-1, 1, dims).astype(dtype)
        else:
            inputs[name] = rng.integers(0, 10, dims).astype(dtype)
    return inputs


def text_histogram(samples, bins=12, width=50):
    counts, edges = np.histogram(samples, bins=bins)
    for c, lo, hi in zip(counts, edges[:-1], edges[1:]):
        print(f"  {lo:9.4f} - {hi:9.4f} ms  {'#' * int(round(width * c / max(counts.max(), 1))):<{width}} {c}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--server", default=os.environ.get("REMEX_SERVER", ""))
    ap.add_argument("--shape", action="append", default=[], help="NAME=DIMS, e.g. x=1x3x48x192")
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--number", type=int, default=1)
    ap.add_argument("--plot", default="latency.png")
    args = ap.parse_args()
    shapes = {}
    for spec in args.shape:
        name, dims = spec.split("=", 1)
        shapes[name] = tuple(int(d) for d in dims.split("x"))

    session = remex.connect(args.server) if args.server else remex.embedded()
    with session:
        model = session.load(args.model, shapes=shapes)
        inputs = random_inputs(model, shapes, np.random.default_rng(0))
        result = model.benchmark(inputs, number=args.number, repeat=args.repeat, warmup=5)
        print(f"{model.name} on {session.device} ({session.server})")
        print(result)
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib is not installed (Debian: python3-matplotlib): text histogram instead")
            text_histogram(result.samples_ms)
            return
        fig, (hist, series) = plt.subplots(1, 2, figsize=(11, 4))
        hist.hist(result.samples_ms, bins=30, color="#4477aa")
        for label, value, style in (("median", result.median_ms, "-"), ("p90", result.p90_ms, "--")):
            hist.axvline(value, color="black", linestyle=style, label=f"{label} {value:.3f} ms")
        hist.set_xlabel("ms per call")
        hist.set_ylabel("samples")
        hist.legend()
        series.plot(result.samples_ms, marker=".", linestyle="none", color="#4477aa")
        series.set_xlabel("sample")
        series.set_ylabel("ms per call")
        fig.suptitle(f"{model.name}: {len(result.samples_ms)} samples x {result.number} calls on {session.device}")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
        print(f"plot written to {args.plot}")


if __name__ == "__main__":
    main()
