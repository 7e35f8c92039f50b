#!/usr/bin/python3
"""compare_ort: Remex's CPU device against ONNX Runtime's CPU execution provider, side by
side, on the same models and inputs, in one run.

    bench/compare_ort.py [--build build] [--rounds 3] [--threads 2] [--cases NAME,...]
        [--quick] [--json]

Each case is a model at one input shape. Its input is made once (`remex run --seed 0
--save-inputs`, the same .npy for both), then in --rounds interleaved rounds:
  remex  `remex bench MODEL --shape ... --number N --repeat R --warmup W --json` on an
         embedded server with --threads compute threads (its default on this machine);
  ort    tests/reference/ort_run.js --bench R --number N --warmup W --threads T
         --optimization all (onnxruntime-node, the reference runtime of the tests).
Before the rounds, each runtime runs the case once more with its outputs written, and
the largest difference over all outputs, relative to ONNX Runtime's largest magnitude,
is printed with the case (`diff`): a figure of a model computed wrongly is not kept.
Per case it prints each runtime's median of the round medians (ms per call) and the
ratio remex / ort (below 1: Remex is faster), then the median ratio of the non-PP-OCR
cases. Models: the PP-OCR models of scripts/fetch-models.sh, the real models of
scripts/fetch-real-models.sh, the synthetic super-resolution CNN of `remex gen-sr`, and
bench/bench_models.py's (a CNN classifier, a detector, transformer encoders and a decoder
step, int8 and float16 models: its docstring says what each is), written with their
inputs into the run's folder.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name, model (ppocr/FILE | real/FILE | sr | gen/NAME[:SHAPE] of bench/bench_models.py), input
# name and shape (random inputs; None for gen/: its own), number, repeat, warmup, and any
# compile options of remex's (`--dtype float16`: a float16 model kept in float16 on the CPU
# device, where it is computed in float32 by default; `--layout NCHW`: the
# convolutions' activations held channels-first, where the CPU device holds them
# channels-last by default: int8 ones on a CPU with VNNI, float ones on a CPU with AVX2)
CASES = [
    ("ppocr-cls 1x3x48x192", "ppocr/ch_ppocr_mobile_v2.0_cls_infer.onnx", "x", "1x3x48x192", 20, 15, 10),
    ("ppocr-det 1x3x640x640", "ppocr/ch_PP-OCRv4_det_infer.onnx", "x", "1x3x640x640", 1, 15, 3),
    ("ppocr-det 1x3x960x736", "ppocr/ch_PP-OCRv4_det_infer.onnx", "x", "1x3x960x736", 1, 15, 3),
    ("ppocr-rec 1x3x48x320", "ppocr/ch_PP-OCRv4_rec_infer.onnx", "x", "1x3x48x320", 3, 15, 3),
    ("ppocr-rec 8x3x48x320", "ppocr/ch_PP-OCRv4_rec_infer.onnx", "x", "8x3x48x320", 1, 15, 3),
    ("wakeword-mlp 1x25x96", "real/hello_deepa.onnx", "onnx::Flatten_0", "1x25x96", 200, 15, 50),
    ("isnet-int8 1x3x1024x1024", "real/isnet_int8.onnx", "input", "1x3x1024x1024", 1, 5, 1),
    ("isnet-fp16 1x3x1024x1024", "real/isnet_fp16.onnx", "input", "1x3x1024x1024", 1, 5, 1),
    ("isnet-fp16 1x3x1024x1024 --dtype float16", "real/isnet_fp16.onnx", "input", "1x3x1024x1024", 1, 5, 1,
     "--dtype", "float16"),
    ("sr-edsr-x4 1x3x180x320", "sr", "x", "1x3x180x320", 1, 10, 2),
    ("cnn-resnet50 1x3x224x224", "gen/resnet50", None, None, 1, 10, 2),
    ("cnn-densenet121 1x3x224x224", "gen/densenet121", None, None, 1, 10, 2),
    ("cnn-resnet50 1x3x224x224 --layout NCHW", "gen/resnet50", None, None, 1, 10, 2, "--layout", "NCHW"),
    ("cnn-densenet121 1x3x224x224 --layout NCHW", "gen/densenet121", None, None, 1, 10, 2, "--layout", "NCHW"),
    ("detector 1x3x416x416", "gen/detector", None, None, 1, 10, 2),
    ("encoder 1x128", "gen/encoder:1x128", None, None, 5, 15, 5),
    ("encoder 8x128", "gen/encoder:8x128", None, None, 1, 15, 3),
    ("decoder-step past 32", "gen/decoder", None, None, 50, 15, 20),
    ("int8-encoder 1x128 (MatMulInteger)", "gen/encoder-int8:1x128", None, None, 5, 15, 5),
    ("int8-resnet50 (QLinearConv)", "gen/resnet50-int8", None, None, 1, 10, 2),
    ("int8-resnet50 (ConvInteger)", "gen/resnet50-convinteger", None, None, 1, 10, 2),
    ("int8-resnet50 (QLinearConv) --layout NCHW", "gen/resnet50-int8", None, None, 1, 10, 2, "--layout", "NCHW"),
    ("int8-resnet50 (ConvInteger) --layout NCHW", "gen/resnet50-convinteger", None, None, 1, 10, 2,
     "--layout", "NCHW"),
    ("fp16-resnet50 1x3x224x224", "gen/resnet50-fp16", None, None, 1, 10, 2),
    ("fp16-resnet50 1x3x224x224 --dtype float16", "gen/resnet50-fp16", None, None, 1, 10, 2, "--dtype", "float16"),
]


def largest_difference(remex_dir, ort_dir):
    """max |remex - ort| over every output ONNX Runtime wrote, over its max |ort|."""
    worst = 0.0
    for f in sorted(os.listdir(ort_dir)):
        if f.endswith(".npy"):
            o = np.load(os.path.join(ort_dir, f)).astype(np.float64)
            mine = os.path.join(remex_dir, f)
            if not os.path.exists(mine):  # remex writes an output name with other characters as _
                mine = os.path.join(remex_dir, "".join(c if c.isalnum() or c in "_.-" else "_" for c in f))
            if not os.path.exists(mine):
                return float("nan")
            r = np.load(mine).astype(np.float64)
            if o.shape != r.shape:
                return float("inf")
            worst = max(worst, float(np.abs(r - o).max() / max(np.abs(o).max(), 1e-30)) if o.size else 0.0)
    return worst


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ...: exit {r.returncode}: {r.stderr.strip()[-500:]}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--cases", default="", help="comma-separated name prefixes (default: all)")
    ap.add_argument("--quick", action="store_true", help="one round with a third of the samples (a smoke run)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    remex = os.path.join(args.build, "host_client", "cli", "remex")
    ppocr = run([os.path.join(REPO, "scripts", "fetch-models.sh")]).strip().splitlines()[-1]
    real = run([os.path.join(REPO, "scripts", "fetch-real-models.sh")]).strip().splitlines()[-1]
    modules = os.path.abspath(os.path.join(ppocr, "..", "..", ".."))
    ort_run = os.path.join(REPO, "tests", "reference", "ort_run.js")
    wanted = [c for c in CASES if not args.cases or any(c[0].startswith(p) for p in args.cases.split(","))]
    rounds = 1 if args.quick else args.rounds
    rows = []
    with tempfile.TemporaryDirectory(prefix="remex_compare_") as work:
        for name, model, input_name, shape, number, repeat, warmup, *options in wanted:
            if args.quick:
                repeat = max(3, repeat // 3)
            io = os.path.join(work, "".join(c if c.isalnum() or c in "_.-" else "_" for c in name))
            if model.startswith("gen/"):
                gen, _, gen_shape = model[4:].partition(":")
                path = run([sys.executable, os.path.join(REPO, "bench", "bench_models.py"), gen, io,
                            "--shape", gen_shape]).strip()
                inputs = {f[:-4]: os.path.join(path[:-5] + ".inputs", f)
                          for f in sorted(os.listdir(path[:-5] + ".inputs"))}
                shapes = {n: "x".join(map(str, np.load(f, mmap_mode="r").shape)) for n, f in inputs.items()}
            else:
                if model == "sr":
                    h, w = shape.split("x")[2:]
                    path = os.path.join(work, "sr.onnx")
                    run([remex, "gen-sr", "-o", path, "--height", h, "--width", w])
                else:
                    folder, file = model.split("/")
                    path = os.path.join(ppocr if folder == "ppocr" else real, file)
                run([remex, "run", path, "--shape", f"{input_name}={shape}", "--seed", "0", "--fetch", "none",
                     "--output-dir", io, "--save-inputs"])
                safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in input_name)
                inputs, shapes = {input_name: os.path.join(io, "inputs", safe + ".npy")}, {input_name: shape}
            remex_inputs = [a for n in inputs for a in ("--shape", f"{n}={shapes[n]}", "--input", f"{n}={inputs[n]}")]
            remex_inputs += options
            ort_inputs = [f"{n}={f}" for n, f in inputs.items()]
            run([remex, "run", path, *remex_inputs, "--output-dir", os.path.join(io, "remex-out")],
                env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
            run(["node", ort_run, "--modules", modules, path, os.path.join(io, "ort-out"), *ort_inputs])
            diff = largest_difference(os.path.join(io, "remex-out"), os.path.join(io, "ort-out"))
            remex_ms, ort_ms = [], []
            for _ in range(rounds):
                out = run([remex, "bench", path, *remex_inputs, "--number", str(number), "--repeat", str(repeat), "--warmup", str(warmup), "--json",
                           # the same samples as ONNX Runtime's run: not extended
                           "--min-duration-s", "0", "--min-samples", "0", "--max-trials", "1"],
                          env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
                remex_ms.append(json.loads(out)["benchmark"]["median_ms"])
                out = run(["node", ort_run, "--modules", modules, "--bench", str(repeat), "--number", str(number),
                           "--warmup", str(warmup), "--threads", str(args.threads), "--optimization", "all", path, "-",
                           *ort_inputs])
                ort_ms.append(json.loads(out)["median_ms"])
            r, o = statistics.median(remex_ms), statistics.median(ort_ms)
            rows.append({"case": name, "remex_ms": r, "ort_ms": o, "ratio": r / o, "remex_rounds_ms": remex_ms,
                         "ort_rounds_ms": ort_ms, "relative_difference": diff})
            if not args.json:
                print(f"{name:40s} remex {r:10.3f} ms   ort {o:10.3f} ms   remex/ort {r / o:5.2f}   diff {diff:.1e}",
                      flush=True)
    others = [row["ratio"] for row in rows if not row["case"].startswith("ppocr")]
    summary = {"threads": args.threads, "rounds": rounds, "cases": rows,
               "median_ratio_other_models": statistics.median(others) if others else None}
    if args.json:
        print(json.dumps(summary, indent=2))
    elif others:
        print(f"median remex/ort of the {len(others)} other models: {summary['median_ratio_other_models']:.2f}")


if __name__ == "__main__":
    sys.exit(main())
