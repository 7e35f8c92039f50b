#!/usr/bin/python3
"""decode_loop: a greedy decode loop from Python on Remex against the same loop on ONNX
Runtime in process, side by side, in one run.

    bench/decode_loop.py [--build build] [--rounds 3] [--steps 32] [--threads N]
        [--model MODEL.onnx] [--json] [--remex-worker [--loops N]]

The model: bench/decoder_step.py's two-layer decoder step (written to a temporary
folder unless --model names one with its inputs and outputs). The loop, as a user
writes it: the first step from an empty cache (past_sequence 0, no --bound), each
step's present_* outputs fed to the next step as past_* inputs, the next token the
argmax of the step's logits; only the logits are fetched.
  remex  the Python client on an embedded server (`remex.embedded()`, --threads compute
         threads): `m.run({"input_ids": array, **past}, fetch=["logits"])`, the cache
         kept on the server as Tensors; each step timed around `m.run`, with the
         server's own time of the call (`m.last_call["server_run_ms"]`);
  ort    bench/ort_decode_loop.js: onnxruntime-node (CPU execution provider, all graph
         optimisations, --threads intra-op threads), each step timed around session.run.
With --remex-worker (and --model), only one Remex loop runs, in this process, and its
per-step figures are printed as JSON: what the rounds below are made of. --loops N runs N
loops one after another on that session, each from an empty cache (the JSON's "loops").
Each round runs each runtime once in a new process (the first step's costs included),
alternating which goes first. Per runtime it prints the median over rounds of the
per-step median (ms), the largest step after the first, the first step, and for Remex
the server's share; then the ratio remex / ort of the medians. Both must produce the
same tokens (exit 1 otherwise).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = os.path.join(REPO, ".cache", "npm", "node_modules")


def remex_worker(model, steps, threads, loops=1):
    """One Remex loop in this process: prints a JSON object like ort_decode_loop.js's. With
    loops > 1, that many loops one after another on the same session and model, each from
    an empty cache: the object has the first loop's figures, and "loops" a list of every
    loop's (steps_ms, server_ms)."""
    import numpy as np
    import remex
    runs = []
    with remex.embedded(threads=threads) as s:
        m = s.load(model)
        presents = [o.name for o in m.outputs if o.name.startswith("present_")]
        for _ in range(loops):
            past = {}
            for info in m.inputs:
                if info.name.startswith("past_"):
                    # batch 1, the other symbolic dim (past_sequence) 0: the empty cache.
                    past[info.name] = np.zeros([1 if d == "batch" else 0 if isinstance(d, str) else d
                                                for d in info.shape], np.float32)
            token, tokens, steps_ms, server_ms = 1, [1], [], []
            for _ in range(steps):
                t = time.perf_counter()
                out = m.run({"input_ids": np.array([[token]], np.int64), **past}, fetch=["logits"])
                steps_ms.append((time.perf_counter() - t) * 1e3)
                server_ms.append(m.last_call["server_run_ms"])
                token = int(out["logits"][0, -1].argmax())
                tokens.append(token)
                past = {"past_" + n[len("present_"):]: out[n] for n in presents}
            runs.append({"steps_ms": steps_ms, "server_ms": server_ms, "tokens": tokens})
    result = dict(runs[0])
    if loops > 1:
        result["loops"] = [{"steps_ms": r["steps_ms"], "server_ms": r["server_ms"]} for r in runs]
    print(json.dumps(result))


def run_json(cmd, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ...: exit {r.returncode}: {r.stderr.strip()[-800:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def summary(results):
    """Medians over rounds of each round's per-step median, largest later step, first step."""
    out = {
        "median_ms": statistics.median(statistics.median(r["steps_ms"]) for r in results),
        "max_after_first_ms": max(max(r["steps_ms"][1:]) for r in results),
        "first_ms": statistics.median(r["steps_ms"][0] for r in results),
        "rounds_median_ms": [statistics.median(r["steps_ms"]) for r in results],
    }
    if "server_ms" in results[0]:
        out["server_median_ms"] = statistics.median(statistics.median(r["server_ms"]) for r in results)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--model", help="a decoder step with bench/decoder_step.py's inputs and outputs")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--remex-worker", action="store_true",
                    help="run only the Remex loop on --model, once, in this process, and print its JSON "
                         "(steps_ms, server_ms, tokens): each step's figures, the first included")
    ap.add_argument("--loops", type=int, default=1,
                    help="with --remex-worker: loops one after another on one session, each from an empty "
                         "cache (the JSON's \"loops\" has each one's figures): what the first loop's first "
                         "steps pay once")
    args = ap.parse_args()
    if not 1 <= args.steps <= 4096 or not 1 <= args.rounds <= 100 or not 1 <= args.loops <= 100:
        ap.error("--steps must be 1 to 4096, --rounds and --loops 1 to 100")
    if args.loops > 1 and not args.remex_worker:
        ap.error("--loops is for --remex-worker")
    if args.remex_worker:
        if not args.model:
            ap.error("--remex-worker needs --model (bench/decoder_step.py writes one)")
        remex_worker(args.model, args.steps, args.threads, args.loops)
        return 0
    if not os.path.isdir(os.path.join(MODULES, "onnxruntime-node")):
        sys.exit(f"decode_loop: no onnxruntime-node under {MODULES} (run scripts/fetch-models.sh)")
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if not model:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            import decoder_step
            import onnx
            model = os.path.join(tmp, "decoder_step.onnx")
            onnx.save(decoder_step.build(), model)
        import onnx
        shape = None
        for i in onnx.load(model, load_external_data=False).graph.input:
            if i.name.startswith("past_"):
                dims = [d.dim_value if d.HasField("dim_value") else (1 if d.dim_param == "batch" else 0)
                        for d in i.type.tensor_type.shape.dim]
                shape = "x".join(map(str, dims))
                break
        if shape is None:
            sys.exit("decode_loop: the model has no past_* input")
        env = dict(os.environ, PYTHONPATH=os.path.join(args.build, "python"))
        remex_cmd = [sys.executable, os.path.abspath(__file__), "--remex-worker", "--model", model,
                     "--steps", str(args.steps), "--threads", str(args.threads)]
        ort_cmd = ["node", os.path.join(REPO, "bench", "ort_decode_loop.js"), "--modules", MODULES,
                   "--steps", str(args.steps), "--threads", str(args.threads), "--past-shape", shape, model]
        results = {"remex": [], "ort": []}
        for r in range(args.rounds):
            order = ["remex", "ort"] if r % 2 == 0 else ["ort", "remex"]
            for name in order:
                results[name].append(run_json(remex_cmd if name == "remex" else ort_cmd, env))
        tokens = {name: {tuple(x["tokens"]) for x in rs} for name, rs in results.items()}
        if len(tokens["remex"] | tokens["ort"]) != 1:
            print("decode_loop: the runtimes decoded different tokens:", tokens, file=sys.stderr)
            return 1
    report = {name: summary(rs) for name, rs in results.items()}
    report["ratio"] = report["remex"]["median_ms"] / report["ort"]["median_ms"]
    report.update(steps=args.steps, rounds=args.rounds, threads=args.threads)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"decode loop, {args.steps} steps from an empty cache, {args.rounds} rounds, {args.threads} threads")
    print(f"{'runtime':8} {'median ms/step':>15} {'max later step':>15} {'first step':>11} {'server':>8}")
    for name in ("remex", "ort"):
        s = report[name]
        server = f"{s['server_median_ms']:8.3f}" if "server_median_ms" in s else f"{'':8}"
        print(f"{name:8} {s['median_ms']:15.3f} {s['max_after_first_ms']:15.3f} {s['first_ms']:11.3f} {server}")
    print(f"remex / ort: {report['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
