"""Ctrl-C in a Python script: SIGINT sent to a real Python process whose call runs on a
real remex-server. The request is cancelled on the server (its log says how soon the
run stopped), the benchmark's samples so far (a load sweep's levels completed) come back
marked partial with remex.Interrupted (a KeyboardInterrupt), and the session goes on."""
import contextlib
import json
import re
import signal
import sqlite3
import subprocess
import sys
import time

from conftest import Server

SCRIPT = r'''
import json, sys, time
import numpy as np, remex

address, model = sys.argv[1:]
with remex.connect(address) as s:
    m = s.load(model)
    x = s.upload(np.ones((2, 3), np.float32))
    m.run({"x": x})
    print("benchmarking", flush=True)
    try:
        m.benchmark({"x": x}, number=20000, repeat=5000, warmup=50)  # minutes unless cancelled
        print(json.dumps({"finished": True}), flush=True)
    except remex.Interrupted as e:
        t = time.monotonic()
        y = m.run({"x": x})["y"]
        print(json.dumps({"keyboard_interrupt": isinstance(e, KeyboardInterrupt), "message": str(e),
                          "partial": e.result.partial, "report_partial": e.result.report.get("partial"),
                          "samples": len(e.result.samples_ms), "median_ms": e.result.median_ms,
                          "next_call_s": time.monotonic() - t, "y": y.tolist()}), flush=True)
    # Ctrl-C at any point of a loop of calls: a KeyboardInterrupt, and the session goes on.
    print("invoking", flush=True)
    calls = 0
    try:
        while True:
            m.invoke({"x": x})
            calls += 1
    except KeyboardInterrupt as e:
        print(json.dumps({"interrupt": type(e).__name__, "calls": calls, "y": m.run({"x": x})["y"].tolist()}),
              flush=True)
'''


@contextlib.contextmanager
def script_child(path, text, *args):
    """A Python process running `text` (written to `path`) with `args`, its stdout and
    stderr piped; killed on leaving when still running."""
    path.write_text(text)
    child = subprocess.Popen([sys.executable, str(path), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def read_json(child):
    line = child.stdout.readline()
    assert line, child.stderr.read()
    return json.loads(line)


def test_ctrl_c_cancels_a_python_benchmark_on_the_server_and_keeps_its_samples(models, tmp_path):
    server = Server("--threads", "1", "--benchmark-time-limit-s", "3600", quiet=False)
    try:
        with script_child(tmp_path / "bench.py", SCRIPT, server.address, models["add_relu"]) as child:
            assert child.stdout.readline().strip() == "benchmarking", child.stderr.read()
            time.sleep(2.0)  # samples of 20000 calls: some taken, thousands to go
            sent = time.monotonic()
            child.send_signal(signal.SIGINT)
            after = read_json(child)
            took = time.monotonic() - sent
            assert "finished" not in after
            assert after["keyboard_interrupt"]
            assert after["partial"] == "interrupted by SIGINT"
            assert after["report_partial"] == {"reason": "interrupted by SIGINT"}
            assert 1 <= after["samples"] < 5000 and after["median_ms"] > 0
            assert f"interrupted after {after['samples']} samples" in after["message"]
            assert after["y"] == [[1.5, 0.0, 3.0], [1.5, 0.0, 3.0]]  # the next call ran at once
            assert took < 20, "the run was not cut short"

            # The server: the run stopped within 100 ms of the cancel, with those samples.
            pattern = re.compile(r"session \d+: benchmark stopped ([0-9.]+) ms after its cancel, (\d+) of 5000 "
                                 r"samples kept \(cancelled by a cancel request for session \d+\)")
            deadline = time.monotonic() + 10
            while not any(pattern.search(line) for line in server.log) and time.monotonic() < deadline:
                time.sleep(0.05)
            found = [m for m in map(pattern.search, server.log) if m]
            assert len(found) == 1, "".join(server.log)
            assert float(found[0].group(1)) < 100, found[0].group(0)
            assert int(found[0].group(2)) == after["samples"]

            assert child.stdout.readline().strip() == "invoking"
            time.sleep(0.5)
            child.send_signal(signal.SIGINT)
            done = read_json(child)
            assert done["interrupt"] == "KeyboardInterrupt" and done["calls"] > 0
            assert done["y"] == [[1.5, 0.0, 3.0], [1.5, 0.0, 3.0]]
            assert child.wait(30) == 0, child.stderr.read()
    finally:
        server.stop()


SWEEP_SCRIPT = r'''
import json, sys
import numpy as np, remex

address, model, store = sys.argv[1:]
with remex.connect(address) as s:
    m = s.load(model)
    x = s.upload(np.ones((2, 3), np.float32))
    print("benchmarking", flush=True)
    try:
        # 64 levels of a second each: over a minute unless interrupted.
        m.benchmark({"x": x}, scenario="single-stream", concurrency="1:64", min_duration_s=1, min_samples=0,
                    max_trials=1)
        print(json.dumps({"finished": True}), flush=True)
    except remex.Interrupted as e:
        r = e.result
        run_id = r.record(store)
        print(json.dumps({"keyboard_interrupt": isinstance(e, KeyboardInterrupt), "message": str(e),
                          "partial": r.partial, "report_partial": r.report.get("partial"),
                          "levels": [level["concurrency"] for level in r.levels],
                          "durations": [level["duration_s"] for level in r.levels],
                          "text": str(r), "run_id": run_id, "y": m.run({"x": x})["y"].tolist()}), flush=True)
'''


def test_ctrl_c_keeps_the_load_levels_completed_before_it(models, tmp_path):
    """A sweep interrupted after its first level: remex.Interrupted whose .result holds
    the levels the server completed (the one in progress dropped), marked partial, and
    recorded as an error; the session goes on."""
    server = Server("--threads", "1", "--benchmark-time-limit-s", "3600", quiet=False)
    completed = re.compile(r"loadTest single-stream at concurrency (\d+): \d+ of \d+ queries completed")
    try:
        store = tmp_path / "results.sqlite"
        with script_child(tmp_path / "sweep.py", SWEEP_SCRIPT, server.address, models["add_relu"],
                          f"sqlite://{store}") as child:
            assert child.stdout.readline().strip() == "benchmarking", child.stderr.read()
            deadline = time.monotonic() + 60
            while not any(completed.search(line) for line in server.log):  # level 1 is done
                assert time.monotonic() < deadline, "".join(server.log)
                time.sleep(0.02)
            child.send_signal(signal.SIGINT)
            after = read_json(child)
            assert "finished" not in after
            assert after["keyboard_interrupt"]
            assert after["partial"] == "interrupted by SIGINT"
            assert after["report_partial"] == {"reason": "interrupted by SIGINT"}
            # The levels kept are those the server completed, in order.
            levels = after["levels"]
            done = [int(m.group(1)) for m in map(completed.search, server.log) if m]
            assert 1 <= len(levels) < 64
            assert levels == list(range(1, len(levels) + 1)) == done, "".join(server.log)
            assert all(d >= 0.9 for d in after["durations"])  # whole levels, none cut short
            n = len(levels)
            assert f"interrupted after {n} level{'' if n == 1 else 's'}" in after["message"]
            assert after["text"].startswith(f"partial interrupted by SIGINT after {n} level"), after["text"]
            assert after["y"] == [[1.5, 0.0, 3.0], [1.5, 0.0, 3.0]]  # the session goes on
            with sqlite3.connect(store) as db:
                rows = db.execute("SELECT verdict, error FROM runs WHERE id = ?", (after["run_id"],)).fetchall()
            assert rows == [("error", "partial: interrupted by SIGINT")]
            assert child.wait(30) == 0, child.stderr.read()
    finally:
        server.stop()
