"""The Python client against a real remex-server process: every call of the API, its
errors, handle lifetimes, isolation of sessions, and recurrent state kept on the
device."""
import gc
import json
import os
import re
import subprocess
import threading
import urllib.request

import numpy as np
import pytest

import remex
from conftest import CLI_BIN, Server, free_port


@pytest.fixture
def session(server):
    with remex.connect(server.address, timeout=60) as s:
        yield s


def tensor_handles(s):
    return [h for h in s.handles() if h["kind"] == "tensor"]


def test_info_names_the_server_and_protocol(session):
    info = session.info()
    assert info["name"] == "remex-server"
    assert info["protocol"] == "1.6"
    assert info["devices"][0]["name"] == "cpu"
    # The CPU device's int8 convolutions are channels-last where oneDNN uses VNNI, its
    # float convolutions where it uses AVX2 or later: the CPU's flags, under the cap
    # ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) may put on oneDNN's instruction set.
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    cap = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "ALL").upper()
    vnni512, vnni256 = "avx512_vnni" in flags, "avx_vnni" in flags
    # oneDNN's ISAs are no single ladder (avx2_vnni is not below avx512_core): what each cap
    # leaves of VNNI, None where it depends on more than the flags say.
    int8 = {"SSE41": False, "AVX": False, "AVX2": False, "AVX512_CORE": False,
            "AVX2_VNNI": vnni256, "ALL": vnni512 or vnni256}.get(cap, vnni512 or (None if vnni256 else False))
    if int8 is not None:
        assert info["devices"][0]["int8_channels_last"] is int8
    float_capped = cap in ("SSE41", "AVX")
    assert info["devices"][0]["float_channels_last"] is ("avx2" in flags and not float_capped)
    assert session.device.startswith("cpu")
    assert session.server.startswith("127.0.0.1:")


def test_connect_errors_are_exceptions_by_code(token_server, monkeypatch):
    port = free_port()
    with pytest.raises(remex.Unavailable) as e:
        remex.connect(f"127.0.0.1:{port}", connect_timeout=2)
    assert isinstance(e.value, ConnectionError)
    # One prefix: where, then why.
    assert str(e.value) == f"connecting to 127.0.0.1:{port}: Connection refused"
    monkeypatch.delenv("REMEX_TOKEN", raising=False)
    with pytest.raises(remex.PermissionDenied):
        remex.connect(token_server.address)
    with remex.connect(token_server.address, token_file=token_server.token_file) as s:
        assert s.info()["name"] == "remex-server"
    with pytest.raises(remex.InvalidArgument):
        remex.connect("no-port-here")
    monkeypatch.delenv("REMEX_SERVER", raising=False)
    with pytest.raises(remex.InvalidArgument):
        remex.connect()


def test_load_reports_the_signature_with_symbols(session, models):
    m = session.load(models["dynamic"])
    assert m.name == "dynamic"
    assert m.inputs == [remex.ValueInfo("x", "float32", ("N", 4))]
    assert m.outputs[0].name == "y"
    # A second load of the same file gets a name of its own.
    assert session.load(models["dynamic"]).name == "dynamic-2"
    fixed = session.load(models["dynamic"], shapes={"x": (3, 4)})
    assert fixed.inputs[0].shape == (3, 4)
    with pytest.raises(remex.InvalidArgument, match="layout"):
        session.load(models["dynamic"], layout="NCWH")
    with pytest.raises(remex.NotFound):
        session.load("/nonexistent/model.onnx")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int64, np.int32, np.uint8, np.bool_])
def test_upload_and_download_keep_dtype_shape_and_values(session, dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 7).astype(dtype)
    t = session.upload(a)
    assert t.shape == (2, 3, 4) and t.dtype == np.dtype(dtype) and t.nbytes == a.nbytes
    np.testing.assert_array_equal(t.numpy(), a)


def test_non_contiguous_arrays_and_download_into_a_given_array(session):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = session.upload(a.T)  # Fortran order: copied to C order first
    np.testing.assert_array_equal(t.numpy(), a.T)
    out = np.empty((4, 3), np.float32)
    assert t.numpy(out=out) is out
    np.testing.assert_array_equal(out, a.T)
    with pytest.raises(remex.InvalidArgument):
        t.numpy(out=np.empty((4, 3), np.float64))
    with pytest.raises(remex.InvalidArgument):
        t.numpy(out=np.empty((4, 3), np.float32).T)
    with pytest.raises(remex.InvalidArgument):
        session.upload(np.array([1, 2], dtype=">f4"))  # not native byte order


def test_stats_and_compare_run_on_the_device(session):
    a = np.array([1.0, 2.0, np.nan, np.inf], np.float32)
    s = session.upload(a).stats()
    assert s["count"] == 4 and s["nan_count"] == 1 and s["inf_count"] == 1
    assert s["min"] == 1.0
    x = session.upload(np.array([1.0, 2.0, 3.0], np.float32))
    y = session.upload(np.array([1.0, 2.0001, 4.0], np.float32))
    c = x.compare(y, rtol=1e-3, atol=0)
    assert not c["ok"] and c["mismatches"] == 1 and c["first_mismatch"] == 2
    assert c["max_abs_error"] == pytest.approx(1.0)
    assert x.compare(x)["ok"]
    with pytest.raises(remex.InvalidArgument):
        x.compare(session.upload(np.zeros(4, np.float32)))


def test_run_fetches_what_is_asked_and_keeps_the_rest_on_the_server(session, models):
    m = session.load(models["add_relu"])
    x = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    expected = np.maximum(x + np.array([[0.5, -1.0, 2.0]], np.float32), 0)
    out = m.run({"x": x})
    np.testing.assert_allclose(out["y"], expected)
    before = len(tensor_handles(session))
    kept = m.run({"x": x}, fetch="none")["y"]
    assert isinstance(kept, remex.Tensor)
    assert len(tensor_handles(session)) == before + 1  # the output, not the uploaded input
    np.testing.assert_allclose(kept.numpy(), expected)
    # A tensor on the server is an input like an array.
    xt = session.upload(x)
    np.testing.assert_allclose(m.run({"x": xt}, fetch=["y"])["y"], expected)
    assert m.last_call["run_ms"] > 0 and m.last_call["function"] == "main"
    assert m.last_call["graph"] is False  # the CPU device records no device graphs


def test_run_errors_name_the_problem(session, models):
    m = session.load(models["add_relu"])
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(remex.InvalidArgument, match="'z' is no input"):
        m.run({"x": x, "z": x})
    with pytest.raises(remex.InvalidArgument, match="no tensor given for the input"):
        m.run({})
    with pytest.raises(remex.InvalidArgument, match="no output"):
        m.run({"x": x}, fetch=["nope"])
    with pytest.raises(remex.InvalidArgument):
        m.run({"x": np.zeros((3, 3), np.float32)})  # wrong shape: the server says so
    # In Python's terms: no request names or positions, dtypes as NumPy names them.
    with pytest.raises(remex.InvalidArgument, match="^input 'x' must be float32, got float64$"):
        m.run({"x": np.zeros((2, 3), np.float64)})
    with pytest.raises(remex.InvalidArgument, match="shapes names 'q'") as e:
        session.load(models["add_relu"], shapes={"q": (2, 3)})
    assert "--" not in str(e.value)
    t = session.upload(x)
    t.free()
    with pytest.raises(remex.FailedPrecondition, match="freed"):
        m.run({"x": t})
    # The session goes on after every error, and nothing was left behind.
    np.testing.assert_allclose(m.run({"x": x})["y"].shape, (2, 3))
    assert tensor_handles(session) == []


def test_set_output_and_invoke_write_into_a_bound_tensor(session, models):
    m = session.load(models["add_relu"])
    y = session.empty((2, 3), "float32")
    m.set_output("y", y)
    x = session.upload(np.ones((2, 3), np.float32))
    outs = m.invoke({"x": x})
    assert outs["y"] is y
    np.testing.assert_allclose(y.numpy(), [[1.5, 0, 3], [1.5, 0, 3]])
    outs = m.invoke({"x": session.upload(np.full((2, 3), 2, np.float32))})
    assert outs["y"] is y
    np.testing.assert_allclose(y.numpy(), [[2.5, 1, 4], [2.5, 1, 4]])
    # Bound tensors live while bound, even without a Python reference of the caller.
    handle = y.handle
    del y, outs
    gc.collect()
    assert handle in [h["handle"] for h in tensor_handles(session)]
    m.set_output("y", None)
    gc.collect()
    assert handle not in [h["handle"] for h in tensor_handles(session)]
    with pytest.raises(remex.InvalidArgument):
        m.set_output("y", session.empty((3, 3), "float32"))
    with pytest.raises(remex.InvalidArgument):
        m.set_output("nope", session.empty((2, 3), "float32"))


QUICK = dict(min_duration_s=0, min_samples=0, max_trials=1)  # the first request's samples, not extended


def test_benchmark_reports_what_remex_bench_json_reports(session, models):
    m = session.load(models["add_relu"])
    r = m.benchmark({"x": np.ones((2, 3), np.float32)}, number=5, repeat=12, warmup=2, **QUICK)
    assert len(r.samples_ms) == 12 and r.number == 5
    assert r.min_ms <= r.median_ms <= r.max_ms
    assert r.median_ms == pytest.approx(float(np.median(r.samples_ms)))
    assert r.std_ms == pytest.approx(float(np.std(r.samples_ms)))
    assert r.p99_ms is None  # 299 samples bound it at 95 %
    assert [p["q"] for p in r.percentiles] == [50, 90, 99]
    median = r.percentiles[0]
    assert median["bounded"] and median["lower_ms"] <= median["value_ms"] <= median["upper_ms"]
    assert not r.percentiles[1]["bounded"] and r.percentiles[1]["min_samples"] == 29
    assert r.extended == {"reasons": [], "unmet": ["stability"], "stopped": "max trials reached", "requests": 1, "duration_s": r.sample_end_s[-1]}
    assert not r.stable and r.stability["verdict"] == "too few windows (1 of 3)"
    assert "median" in str(r)
    cli = subprocess.run([CLI_BIN, "bench", models["add_relu"], "--server", session.server, "--repeat", "3",
                          "--min-duration-s", "0", "--max-trials", "1", "--json"],
                         capture_output=True, text=True, check=True)
    assert set(json.loads(cli.stdout)["benchmark"]) == set(r.report["benchmark"])
    # The environment fingerprint, as the CLI's: the server's build and host, this host.
    assert set(r.environment) == set(json.loads(cli.stdout)["environment"])
    assert r.environment["server"]["remex_version"] == r.environment["host"]["remex_version"]
    assert r.environment["server"]["remex_commit"] and r.environment["host"]["remex_commit"]
    assert r.environment["device"]["logical_cpus"] >= 1
    assert r.environment["device"]["load_average_1m_after_benchmark"] >= 0
    assert isinstance(r.warnings, list) and all({"code", "message", "fix"} <= set(w) for w in r.warnings)
    # Without inputs, those of the last call; with profile, the rows too.
    r = m.benchmark(repeat=3, profile=True, **QUICK)
    assert r.profile and r.profile["rows"]
    # Errors in Python's terms: the keyword arguments, not the CLI's flags.
    with pytest.raises(remex.InvalidArgument, match="^number and repeat must be at least 1$"):
        m.benchmark(number=0)
    with pytest.raises(remex.InvalidArgument, match=r"^confidence must be in \(0, 1\)"):
        m.benchmark(confidence=1.0)


def test_benchmark_result_records_as_remex_bench_record_does(session, models, tmp_path, monkeypatch):
    m = session.load(models["add_relu"])
    r = m.benchmark({"x": np.ones((2, 3), np.float32)}, repeat=7, **QUICK)
    url = f"sqlite://{tmp_path}/results.sqlite"
    with pytest.raises(remex.InvalidArgument, match="url|results") as e:
        r.record("mysql://nowhere")
    assert "--" not in str(e.value)
    with pytest.raises(remex.InvalidArgument, match="tag"):
        r.record(url, tags={"bad key": "x"})
    assert not (tmp_path / "results.sqlite").exists()
    assert r.record(url, tags={"from": "python"}) == 1
    monkeypatch.setenv("REMEX_RESULTS", url)
    assert r.record() == 2  # $REMEX_RESULTS when no URL is given
    history = json.loads(subprocess.run([CLI_BIN, "history", "--results", url, "--json"], capture_output=True,
                                        text=True, check=True).stdout)
    (series,) = history["series"]
    assert series["model_name"] == "add_relu.onnx" and series["run_count"] == 2
    first = series["runs"][0]
    assert first["kind"] == "bench" and first["verdict"] == "pass" and first["tags"] == {"from": "python"}
    assert first["samples"] == 7 and first["recorded_at"] == r.report["date"]
    assert first["summary"]["median_ms"] == pytest.approx(r.median_ms)


def test_benchmark_extends_the_run_like_remex_bench(session, models):
    m = session.load(models["add_relu"])
    m.run({"x": np.ones((2, 3), np.float32)})
    r = m.benchmark(min_duration_s=0, min_samples=300, window_ms=1, confidence=0.9)
    assert len(r.samples_ms) >= 300 and r.extended["requests"] >= 2
    assert r.extended["reasons"][0] == "min_samples"
    assert r.confidence == 0.9 and all(p["bounded"] for p in r.percentiles)
    assert r.p99_ms == r.percentiles[2]["value_ms"]
    # fail_unstable: a run too short to judge raises Unstable, which carries the result.
    with pytest.raises(remex.Unstable) as e:
        m.benchmark(repeat=5, fail_unstable=True, **QUICK)
    assert isinstance(e.value, remex.FailedPrecondition)
    assert e.value.result.stability["verdict"] == "too few windows (1 of 3)"


def test_benchmark_runs_load_scenarios_as_remex_bench(session, models):
    m = session.load(models["add_relu"])
    m.run({"x": np.ones((2, 3), np.float32)})
    # max_trials=1: a level is not run again while unstable (runs of a tenth of a second).
    r = m.benchmark(scenario="single-stream", concurrency="1:2", min_duration_s=0.2, max_trials=1)
    assert r.scenario == "single-stream" and "benchmark" not in r.report and r.report["load"] is r.load
    assert [lv["concurrency"] for lv in r.levels] == [1, 2]
    for lv in r.levels:
        assert lv["throughput_qps"] > 0 and lv["completed"] > 0
        lat = lv["latency_ms"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"]
        assert [p["q"] for p in lv["percentiles"]] == [50, 90, 99]
        assert lv["audit"]["checked"] == 0  # off by default for single-stream
    assert r.peak_qps is None and r.median_ms is None and r.samples_ms is None
    assert r.phases_ms["warm_median"] > 0 and r.phases_ms["instances_create"] is not None
    assert r.memory["weights_bytes"] > 0
    assert "CONCURRENCY" in str(r) and "scenario single-stream" in str(r)
    # The CLI's report has the same structure.
    cli = subprocess.run([CLI_BIN, "bench", models["add_relu"], "--server", session.server, "--scenario",
                          "single-stream", "--concurrency", "1:2", "--min-duration-s", "0.2", "--max-trials", "1", "--json"],
                         capture_output=True, text=True, check=True)
    j = json.loads(cli.stdout)
    assert set(j) - {"command"} == set(r.report) and set(j["load"]) == set(r.load)
    assert set(j["load"]["levels"][0]) == set(r.levels[0])

    # server: the arrival rate; the audit is on by default (server and offline).
    r = m.benchmark(scenario="server", target_qps=200, min_duration_s=0.2, max_trials=1, seed=3)
    assert r.load["target_qps"] == 200 and r.load["seed"] == 3 and r.levels[0]["target_qps"] == 200
    assert r.load["audit"]["samples"] == 32 and r.levels[0]["audit"]["passed"] and r.failure == ""
    r = m.benchmark(scenario="offline", min_duration_s=0.2, max_trials=1)
    assert r.levels[0]["audit"]["checked"] > 0 and r.levels[0]["audit"]["passed"]
    r = m.benchmark(scenario="offline", min_duration_s=0.1, max_trials=1, audit=False)
    assert r.load["audit"]["samples"] == 0 and r.levels[0]["audit"]["checked"] == 0
    r = m.benchmark(scenario="single-stream", min_duration_s=0.1, max_trials=1, audit=True, audit_samples=5,
                    audit_atol=1e-6)
    assert r.load["audit"] == {"samples": 5, "rtol": 0, "atol": 1e-6} and r.levels[0]["audit"]["checked"] == 5
    # multi-stream: 8 samples per query and one instance per sample unless told.
    r = m.benchmark(scenario="multi-stream", min_duration_s=0.1, max_trials=1)
    assert r.load["samples_per_query"] == 8 and r.levels[0]["concurrency"] == 8
    r = m.benchmark(scenario="multi-stream", samples_per_query=2, concurrency=1, min_duration_s=0.1, max_trials=1)
    assert r.load["samples_per_query"] == 2 and r.levels[0]["concurrency"] == 1
    # fail_unstable judges each single-stream level: one too short to judge raises Unstable.
    with pytest.raises(remex.Unstable, match="unstable at concurrency 1") as e:
        m.benchmark(scenario="single-stream", min_duration_s=0.05, max_trials=1, fail_unstable=True)
    assert e.value.result.levels and not e.value.result.levels[0]["stable"]
    # find_peak's answer (a search of up to 16 probes, run by the CLI's tests): the
    # report's load.peak.qps.
    report = dict(r.report, load=dict(r.load, peak={"qps": 1250.0, "latency_bound_ms": 5, "probes": []}))
    assert remex.BenchmarkResult(json.dumps(report), "").peak_qps == 1250.0


@pytest.mark.parametrize("kwargs, message, cli_message", [
    (dict(target_qps=5), "target_qps needs scenario", "--target-qps needs --scenario"),
    (dict(concurrency=2, find_peak=True), "concurrency and find_peak need scenario",
     "--concurrency and --find-peak need --scenario"),
    (dict(scenario="batch"), "scenario 'batch' is none of single-stream, multi-stream, server, offline",
     "--scenario 'batch' is none of single-stream, multi-stream, server, offline"),
    (dict(scenario="server"), "scenario server needs target_qps Q", "--scenario server needs --target-qps Q"),
    (dict(scenario="offline", concurrency="3:2"), "concurrency '3:2': out of range", "--concurrency '3:2': out of range"),
    (dict(scenario="offline", concurrency=0), "concurrency '0': out of range", "--concurrency '0': out of range"),
    (dict(scenario="offline", samples_per_query=2), "samples_per_query is for scenario multi-stream",
     "--samples-per-query is for --scenario multi-stream"),
    (dict(scenario="server", find_peak=True), "find_peak needs latency_bound_ms L",
     "--find-peak needs --latency-bound-ms L"),
    (dict(scenario="single-stream", target_qps=10), "target_qps is for scenario server",
     "--target-qps is for --scenario server"),
    (dict(scenario="offline", audit_rtol=-1), "audit_rtol and audit_atol must be finite and >= 0",
     "--audit-rtol and --audit-atol must be finite and >= 0"),
    (dict(scenario="offline", concurrency=1.5), "concurrency must be an int or 'A:B[:STEP]'", None),
])
def test_benchmark_refuses_bad_load_options_in_python_terms(session, models, kwargs, message, cli_message):
    m = session.load(models["add_relu"])
    with pytest.raises(remex.InvalidArgument) as e:
        m.benchmark({"x": np.ones((2, 3), np.float32)}, **kwargs)
    # The keyword arguments named, never the CLI's flags.
    assert message in str(e.value) and "--" not in str(e.value), str(e.value)
    if cli_message is None:
        return  # a Python type error, no flag
    # The CLI refuses the same flags naming them (exit 2).
    flags = []
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        flags += [flag] if value is True else [flag, str(value)]
    cli = subprocess.run([CLI_BIN, "bench", models["add_relu"], "--server", session.server, *flags],
                         capture_output=True, text=True)
    assert cli.returncode == 2 and cli_message in cli.stderr, cli.stderr


def test_benchmark_to_dataframe(session, models):
    m = session.load(models["add_relu"])
    m.run({"x": np.ones((2, 3), np.float32)})
    plain = m.benchmark(repeat=4, **QUICK)
    load = m.benchmark(scenario="offline", concurrency="1:2", min_duration_s=0.1, max_trials=1, audit=False)
    try:
        import pandas  # noqa: F401
    except ImportError:
        for r in (plain, load):
            with pytest.raises(ImportError, match="pandas"):
                r.to_dataframe()
        return
    df = plain.to_dataframe()
    assert list(df.columns) == ["sample", "end_s", "latency_ms"]
    assert list(df["latency_ms"]) == plain.samples_ms and list(df["sample"]) == [0, 1, 2, 3]
    df = load.to_dataframe()
    assert list(df["concurrency"]) == [1, 2]
    assert list(df["throughput_qps"]) == [lv["throughput_qps"] for lv in load.levels]
    assert list(df["p99_ms"]) == [lv["latency_ms"]["p99"] for lv in load.levels]
    assert {"p50_lower_ms", "p50_upper_ms", "queries", "late", "dropped", "target_qps"} <= set(df.columns)


def test_profile_as_records_and_table(session, models):
    m = session.load(models["add_relu"])
    p = m.profile({"x": np.ones((2, 3), np.float32)})
    kernels = {r["name"] for r in p.records if r["kind"] == "kernel"}
    assert kernels and kernels <= {"Add", "Relu", "FusedElementwise"}  # the model's ops, fused or not
    assert "InvokeKernel" in {r["name"] for r in p.records if r["kind"] == "instruction"}
    assert all(r["calls"] >= 1 for r in p.records)
    assert m.profile().records  # without inputs: those of the last call
    assert p.total_ms > 0
    assert str(p).startswith("profile 5 invokes") and "share %" in p.table
    # Per node: the model's node names, run-time shapes and the median over the runs.
    assert p.runs == 5 and p.nodes
    assert all(len(n["run_ms"]) == 5 and n["min_ms"] <= n["median_ms"] <= n["max_ms"] for n in p.nodes)
    assert p.nodes[0]["inputs"][0] == {"dtype": "float32", "shape": [2, 3]}
    one = m.profile(runs=1)
    assert one.runs == 1 and str(one).startswith("profile one invoke")


def test_zeros_and_random_are_made_on_the_server_from_a_seed(session):
    sent = session.traffic()["attachment_bytes_sent"]
    z = session.zeros((2, 3), "float16")
    assert z.dtype == np.float16 and z.shape == (2, 3)
    assert not z.numpy().any()
    u = session.random((4096,), seed=7, low=-2, high=3)
    v = u.numpy()
    assert v.dtype == np.float32 and v.min() >= -2 and v.max() < 3 and abs(v.mean() - 0.5) < 0.2
    np.testing.assert_array_equal(session.random((4096,), seed=7, low=-2, high=3).numpy(), v)
    assert (session.random((4096,), seed=8, low=-2, high=3).numpy() != v).any()
    n = session.random((20000,), "float64", seed=3, normal=True, mean=1, scale=2).numpy()
    assert abs(n.mean() - 1) < 0.1 and abs(n.std() - 2) < 0.1
    i = session.random((1000,), np.int8, seed=1, low=-3, high=3).numpy()
    assert sorted(set(i.tolist())) == [-3, -2, -1, 0, 1, 2]
    assert session.traffic()["attachment_bytes_sent"] == sent  # no tensor's bytes went up
    with pytest.raises(remex.InvalidArgument, match="normal fill needs a floating dtype"):
        session.random((4,), "int32", seed=1, normal=True)
    with pytest.raises(remex.InvalidArgument, match="leaves the values of int8"):
        session.random((4,), "int8", seed=1, high=1000)
    with pytest.raises(remex.InvalidArgument, match="seed must be an int >= 0"):
        session.random((4,), seed=-1)


def test_held_bytes_of_the_handles_sum_to_the_bytes_in_use(session, models):
    m = session.load(models["add_relu"])
    kept = [session.upload(np.ones((16, 16), np.float32)) for _ in range(2)]
    handles = session.handles()
    assert all(h["held_bytes"] is not None for h in handles)
    assert [h["held_bytes"] for h in handles if h["kind"] == "tensor"] == [1024, 1024]
    assert sum(h["held_bytes"] for h in handles) == session.info()["devices"][0]["bytes_in_use"]
    del kept, m


def test_handles_are_freed_with_their_objects_no_leak_after_10000(session, models):
    m = session.load(models["add_relu"])
    base = session.handles()
    assert [h["kind"] for h in base] == ["module", "vm"]
    base_bytes = session.info()["devices"][0]["bytes_in_use"]  # the module's constants
    a = np.ones((16, 16), np.float32)
    for _ in range(10000):
        t = session.upload(a)
        del t
    assert session.handles() == base
    assert session.info()["devices"][0]["bytes_in_use"] == base_bytes
    kept = [session.upload(a) for _ in range(3)]
    assert len(tensor_handles(session)) == 3
    assert all(h["bytes"] == 1024 and h["shape"] == (16, 16) for h in tensor_handles(session))
    del kept
    m.close()
    assert session.handles() == []
    assert session.info()["devices"][0]["bytes_in_use"] == 0


def test_tensors_dropped_together_are_freed_by_one_request(models):
    """A decode loop drops its step's cache tensors one by one: the next call frees them
    with one free request (the server's /metrics counts requests by kind)."""
    port = free_port()
    server = Server("--threads", "1", "--metrics", f"127.0.0.1:{port}")
    try:
        def frees():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                text = r.read().decode()
            return sum(float(v) for v in re.findall(r'^remex_requests_total\{kind="free",code="[A-Z_]+"\} (\S+)$',
                                                      text, re.M))
        s = remex.connect(server.address)
        kept = [s.upload(np.full((4,), i, np.float32)) for i in range(8)]
        handles = {t.handle for t in kept}
        before = frees()
        del kept
        gc.collect()
        left = {h["handle"] for h in s.handles()}  # the next call: the frees go with it
        assert not handles & left
        assert frees() - before == 1
        # At 1024 handles waiting they are handed on at once (one request stays small):
        # 2500 dropped tensors, three free requests.
        kept = [s.upload(np.zeros((1,), np.float32)) for _ in range(2500)]
        before = frees()
        del kept
        gc.collect()
        assert len(s.handles()) == 0
        assert frees() - before == 3
        s.close()
    finally:
        server.stop()


def test_closing_the_session_ends_its_objects(server, models):
    s = remex.connect(server.address)
    m = s.load(models["add_relu"])
    t = s.upload(np.zeros((2, 3), np.float32))
    s.close()
    assert s.closed
    with pytest.raises(remex.FailedPrecondition, match="closed"):
        t.numpy()
    with pytest.raises(remex.FailedPrecondition):
        m.run({"x": t})
    del t, m  # nothing to free, nothing raised


def test_two_sessions_are_isolated(server, models):
    with remex.connect(server.address) as a, remex.connect(server.address) as b:
        ta = a.upload(np.ones(4, np.float32))
        tb = b.upload(np.ones(8, np.float32))
        assert [h["shape"] for h in tensor_handles(a)] == [(4,)]
        assert [h["shape"] for h in tensor_handles(b)] == [(8,)]
        mb = b.load(models["add_relu"])
        with pytest.raises(remex.InvalidArgument, match="another session"):
            mb.run({"x": ta})
        with pytest.raises(remex.InvalidArgument):
            ta.compare(tb)


def test_recurrent_state_stays_on_the_device_between_calls(session, models):
    W, U = models["recurrent_weights"]
    m = session.load(models["recurrent"])
    h = session.upload(np.zeros((1, 4), np.float32))
    h_ref = np.zeros((1, 4), np.float32)
    rng = np.random.default_rng(3)
    received = session.traffic()["attachment_bytes_received"]
    ys = []
    for step in range(8):
        x = rng.standard_normal((1, 4)).astype(np.float32)
        out = m.run({"x": x, "h": h}, fetch=["y"])
        h = out["h_next"]  # a Tensor: the state never crosses the wire
        assert isinstance(h, remex.Tensor)
        h_ref = np.tanh(x @ W + h_ref @ U)
        ys.append(out["y"])
        np.testing.assert_allclose(out["y"], h_ref.sum(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h.numpy(), h_ref, rtol=1e-5, atol=1e-6)
    # Only the 8 fetched y (4 bytes each) and the final state (16 bytes) came back as
    # tensor data.
    assert session.traffic()["attachment_bytes_received"] - received == 8 * 4 + 16
    assert len(tensor_handles(session)) == 1  # the last state; earlier ones were freed


def test_concurrent_threads_share_a_session_safely(session, models):
    m = session.load(models["add_relu"])
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(50):
                x = rng.standard_normal((2, 3)).astype(np.float32)
                y = m.run({"x": session.upload(x)})["y"]
                np.testing.assert_allclose(y, np.maximum(x + np.array([[0.5, -1.0, 2.0]], np.float32), 0),
                                           rtol=1e-6)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    gc.collect()
    session.info()  # a call: anything dropped while busy is freed by now
    assert tensor_handles(session) == []


def test_embedded_session_runs_in_process(models):
    with remex.embedded(threads=1) as s:
        assert s.server.startswith("embedded 127.0.0.1:")
        m = s.load(models["dynamic"])
        np.testing.assert_allclose(m.run({"x": np.ones((5, 4), np.float32)})["y"], np.full((5, 4), 2))


def test_a_benchmark_over_the_servers_limit_is_refused_in_python_terms(models):
    server = Server("--threads", "1", "--benchmark-time-limit-s", "1")
    try:
        with remex.connect(server.address) as s:
            m = s.load(models["add_relu"])
            with pytest.raises(remex.DeadlineExceeded) as e:
                m.benchmark({"x": np.ones((2, 3), np.float32)}, repeat=100000, number=10000, warmup=4)
            message = str(e.value)
            # The projection, the limit and what to change: keyword arguments, and the
            # server's own flag as it is.
            assert re.match(r"benchmark: the run would take about [0-9.]+ s \(100000 samples of 10000 calls at a "
                            r"median of [0-9.e+-]+ ms per call\), over the server's limit of 1 s "
                            r"\(remex-server --benchmark-time-limit-s\); lower repeat or number$", message), message
            assert m.run({"x": np.ones((2, 3), np.float32)})["y"].shape == (2, 3)  # the session goes on
    finally:
        server.stop()


def test_tune_chooses_per_bucket_and_resumes_from_its_log(server, tmp_path):
    # y = Tanh(Sigmoid(x * x)), x [1, 16, 64, W]: started in float16, which the CPU device
    # computes by widening every kernel's inputs, the tune must find dtype=model faster.
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["m"]), helper.make_node("Sigmoid", ["m"], ["s"]),
         helper.make_node("Tanh", ["s"], ["y"])], "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 64, "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 64, "W"])])
    model = str(tmp_path / "chain.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), model)
    log, out = str(tmp_path / "tune.jsonl"), str(tmp_path / "tuned.rmx")
    kwargs = dict(bounds={"W": (1, 256)}, dispatch="W=edges:128,256", dtype="float16", server=server.address,
                  space={"dtype": ["model", "float16"]}, min_duration_s=0.2, min_samples=10)
    r = remex.tune(model, log, out, **kwargs)
    assert r["schema"] == "remex.tune"
    assert [b["bucket"] for b in r["buckets"]] == ["main[W=1..128]", "main[W=129..256]"]
    for b in r["buckets"]:
        assert b["choice"]["dtype"] == "model" and b["ratio"] < 1 and b["beyond_noise"], b
    assert r["output_hash"]
    again = remex.tune(model, log, str(tmp_path / "again.rmx"), **kwargs)
    assert again["measured"] == 0 and again["output_hash"] == r["output_hash"]
    with open(out, "rb") as a, open(tmp_path / "again.rmx", "rb") as b:
        assert a.read() == b.read()
    with pytest.raises(remex.InvalidArgument, match="space 'threads=1': unknown choice 'threads'"):
        remex.tune(model, log, space={"threads": [1]}, server=server.address)
