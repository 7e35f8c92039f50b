"""Remex's Python client: run, check and benchmark models on a Remex device server.

    import numpy as np, remex

    with remex.connect("gpu-box:9190") as s:         # or remex.embedded(), remex.farm(...)
        m = s.load("cls.onnx", shapes={"x": (1, 3, 48, 192)})
        x = s.upload(np.zeros((1, 3, 48, 192), np.float32))   # a tensor on the server
        y = m.run({"x": x})["softmax_0.tmp_0"]                # fetched as a NumPy array
        print(m.benchmark(repeat=20))                         # timed on the server

A session keeps its models and tensors on the server until their Python objects go
away, they are closed or freed, or the session closes; outputs not fetched stay on the
device as Tensor handles that the next call can take as inputs. Errors are exceptions
by status code (remex.NotFound, remex.InvalidArgument, ...) carrying the server's
message, in this package's terms (keyword arguments where the CLI has flags). Ctrl-C
during a call cancels its request on the server and raises KeyboardInterrupt; the
session stays usable. Times are in milliseconds, sizes in bytes, dtypes NumPy's.

The client runs on the same tooling layer as the `remex` CLI and `remex shell`
(docs/python.md). In Jupyter, tensors, benchmark results and profiles display as HTML
(tables, and a histogram of a benchmark's samples).
"""

import inspect as _inspect
import json as _json
import os as _os
import re as _re
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as _np

from . import _html, _native
from ._native import Tensor

# Remex's version: the CMake project's (base/version.h), as `remex --version` prints it.
__version__: str = _native.version

__all__ = [
    "connect", "embedded", "farm", "compile", "tune", "submit_job", "job_status", "wait_job", "job_logs", "cancel_job",
    "jobs",
    "Session", "Model", "Tensor", "ValueInfo", "BenchmarkResult",
    "Profile", "CompileResult", "REPR_STATS_MAX_BYTES",
    "Error", "Cancelled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
    "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange", "Unimplemented",
    "Internal", "Unavailable", "DataLoss", "Unstable", "AuditMismatch", "Interrupted",
]


# ---- Errors ---------------------------------------------------------------------------

class Error(Exception):
    """A Remex call failed. `code` is the status code's name (e.g. "NOT_FOUND"); the
    message is the server's or the client's, naming what was wrong."""
    code = "UNKNOWN"


class Cancelled(Error):
    code = "CANCELLED"


class Unknown(Error):
    code = "UNKNOWN"


class InvalidArgument(Error, ValueError):
    code = "INVALID_ARGUMENT"


class DeadlineExceeded(Error, TimeoutError):
    code = "DEADLINE_EXCEEDED"


class NotFound(Error, LookupError):
    code = "NOT_FOUND"


class AlreadyExists(Error):
    code = "ALREADY_EXISTS"


class PermissionDenied(Error, PermissionError):
    code = "PERMISSION_DENIED"


class ResourceExhausted(Error):
    code = "RESOURCE_EXHAUSTED"


class FailedPrecondition(Error):
    code = "FAILED_PRECONDITION"


class Aborted(Error):
    code = "ABORTED"


class OutOfRange(Error, IndexError):
    code = "OUT_OF_RANGE"


class Unimplemented(Error, NotImplementedError):
    code = "UNIMPLEMENTED"


class Internal(Error):
    code = "INTERNAL"


class Unavailable(Error, ConnectionError):
    code = "UNAVAILABLE"


class DataLoss(Error):
    code = "DATA_LOSS"


class Unstable(FailedPrecondition):
    """Model.benchmark(fail_unstable=True) whose run stayed unstable after max_trials
    requests; `result` is its BenchmarkResult."""

    def __init__(self, message: str, result: "BenchmarkResult"):
        super().__init__(message)
        self.result = result


class AuditMismatch(DataLoss):
    """Model.benchmark with a load scenario whose audit found timed samples whose outputs
    differ from the untimed reference call (remex bench exits 1 for it); `result` is its
    BenchmarkResult (each level's "audit": checked, mismatches, first_mismatch)."""

    def __init__(self, message: str, result: "BenchmarkResult"):
        super().__init__(message)
        self.result = result


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (a KeyboardInterrupt) during Model.benchmark: the run was cancelled on the
    server, and `result` is the BenchmarkResult of the samples taken before (a load
    scenario: of the levels completed before; its `partial` says why). A KeyboardInterrupt, so that a script stops as on any Ctrl-C;
    `except remex.Interrupted as e: r = e.result` keeps the samples."""

    def __init__(self, message: str, result: "BenchmarkResult"):
        super().__init__(message)
        self.result = result


_native.error_classes.update({cls.code: cls for cls in (
    Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists, PermissionDenied,
    ResourceExhausted, FailedPrecondition, Aborted, OutOfRange, Unimplemented, Internal, Unavailable, DataLoss)})


# ---- Results --------------------------------------------------------------------------

class ValueInfo(NamedTuple):
    """An input or output of a model: its name, dtype name ("float32") and shape, where
    a dynamic dim is its symbol's name (str), or None when it has none."""
    name: str
    dtype: str
    shape: Tuple[Union[int, str, None], ...]


class BenchmarkResult:
    """A benchmark as `remex bench --json` reports it, timed on the server; `report` is
    the whole JSON object (dict; docs/schema/bench.schema.json), str() the text
    `remex bench` prints.

    Every report: phases_ms (cold start against warm: module_load, vm_create,
    first_invoke, warm_median, ms or None), memory (bytes: weights_bytes,
    invoke_peak_bytes, run_peak_bytes, ...), environment (the fingerprint of the server,
    its host and GPUs, this host and the executable) and warnings ([{code, message, fix}]
    of what likely skewed the measurement; docs/cli.md, "Environment"). failure: why
    `remex bench` would exit 1 ("" when it would not: an audit mismatch, or with
    fail_unstable a run still unstable). partial: why the run stopped before it was
    complete (Ctrl-C: "interrupted by SIGINT"; the numbers are those of the samples
    taken, or of the load levels completed), None for a complete run.

    The time evaluator (no scenario; `scenario` is None): samples_ms, mean milliseconds
    per call, one per sample, in run order, each sample being `number` calls;
    sample_end_s: when each ended, in seconds of samples since the run's start.
    mean_ms, median_ms, p90_ms, min_ms, max_ms, std_ms (population) summarize them;
    p99_ms is None when the samples cannot bound it at `confidence` (299 at 0.95).
    percentiles: one dict per percentile (q 50, 90, 99) with value_ms, bounded and, when
    bounded, lower_ms and upper_ms: the distribution-free interval at `confidence`.
    extended: why and how far the run was extended (reasons, unmet, requests,
    duration_s). stable and stability: the measurement-window verdict (with its
    windows). These are None for a load scenario.

    A load scenario (MLPerf LoadGen's; docs/cli.md, "Load scenarios"): scenario
    ("single-stream", "multi-stream", "server", "offline"), load (the report's "load"
    dict), levels (its list, one dict per concurrency level in the order run:
    concurrency, target_qps, queries, completed, late, dropped, duration_s,
    throughput_qps, samples_per_s, latency_ms {p50, p90, p99, mean, min, max},
    percentiles (as above), stable, stability, audit {checked, mismatches,
    first_mismatch, passed}, ...) and peak_qps (find_peak: the highest target QPS whose
    p99 kept the bound, None when none did or without find_peak); levels is [] and
    load None for the time evaluator.

    to_dataframe(): the same numbers as a pandas DataFrame."""

    def __init__(self, report_json: str, text: str, failure: str = "", model_path: str = ""):
        self.report: Dict[str, Any] = _json.loads(report_json)
        self._model_path = model_path
        self.failure: str = failure
        self.load: Optional[Dict[str, Any]] = self.report.get("load")
        self.scenario: Optional[str] = self.load["scenario"] if self.load else None
        self.levels: List[Dict[str, Any]] = self.load["levels"] if self.load else []
        peak = (self.load or {}).get("peak")
        self.peak_qps: Optional[float] = peak["qps"] if peak else None
        # Why the run stopped before it was complete ("interrupted by SIGINT", "cancelled
        # on the server"); None for a complete run.
        self.partial: Optional[str] = (self.report.get("partial") or {}).get("reason")
        self.phases_ms: Dict[str, Optional[float]] = self.report.get("phases_ms", {})
        self.memory: Dict[str, int] = self.report.get("memory", {})
        b = self.report.get("benchmark")
        get = (lambda key: b[key]) if b is not None else (lambda key: None)
        self.function: Optional[str] = get("function")
        self.number: Optional[int] = get("number")
        self.timer: Optional[str] = get("timer")
        self.samples_ms: Optional[List[float]] = get("samples_ms")
        self.mean_ms: Optional[float] = get("mean_ms")
        self.median_ms: Optional[float] = get("median_ms")
        self.p90_ms: Optional[float] = get("p90_ms")
        self.p99_ms: Optional[float] = get("p99_ms")
        self.min_ms: Optional[float] = get("min_ms")
        self.max_ms: Optional[float] = get("max_ms")
        self.std_ms: Optional[float] = get("std_ms")
        self.sample_end_s: Optional[List[float]] = get("sample_end_s")
        self.confidence: Optional[float] = get("confidence") if b is not None else self.load["confidence"]
        self.percentiles: Optional[List[Dict[str, Any]]] = get("percentiles")
        self.extended: Optional[Dict[str, Any]] = get("extended")
        self.stable: Optional[bool] = get("stable")
        self.stability: Optional[Dict[str, Any]] = get("stability")
        self.profile: Optional[Dict[str, Any]] = self.report.get("profile")
        # The environment fingerprint and the warnings of what skewed the measurement
        # (docs/cli.md, "Environment").
        self.environment: Dict[str, Any] = self.report.get("environment", {})
        self.warnings: List[Dict[str, str]] = self.report.get("warnings", [])
        self._text = text

    def record(self, url: Optional[str] = None, *, tags: Optional[Mapping[str, str]] = None) -> int:
        """Writes this result to a results store, as `remex bench --record` does
        (docs/cli.md, "Recording results"): the model's name and content hash, the
        environment, the raw samples, the summary and the verdict ("fail" with the
        failure of an unstable or mismatching run), who ran it (user, CI job, git commit
        and branch from the environment) and `tags` (as --tag KEY=VALUE: keys of
        A-Z a-z 0-9 _ . -, 1-64 characters; values up to 256). url: "sqlite:///PATH" or
        "postgresql://..."; default $REMEX_RESULTS, else the SQLite file under
        $XDG_DATA_HOME/remex/. Returns the run's id in the store (`remex history` lists
        it). InvalidArgument for a bad URL or tag, NotFound when the model's file is
        gone, Unavailable when the database cannot be reached or written. A partial
        result is kept as an error ("partial: interrupted by SIGINT"), as remex bench
        --record keeps it: no measurement to judge or compare."""
        if self.partial is not None:
            verdict, error = "error", f"partial: {self.partial}"
        else:
            verdict, error = ("fail" if self.failure else "pass"), self.failure
        run_id, _ = _native.record_report(url or "", "bench", self._model_path, _json.dumps(self.report),
                                          dict(tags or {}), verdict, error)
        return run_id

    def to_dataframe(self) -> "Any":
        """A pandas DataFrame. The time evaluator: one row per sample, in run order, with
        columns sample (0-based), end_s (seconds since the run's start) and latency_ms
        (mean ms per call). A load scenario: one row per level, in the order run, with
        concurrency, target_qps (NaN without one), throughput_qps, p50_ms, p90_ms,
        p99_ms and each one's interval p50_lower_ms, p50_upper_ms, ... (NaN when the
        level's queries cannot bound it), queries, late and dropped. ImportError naming
        pandas when pandas is not installed."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("BenchmarkResult.to_dataframe needs pandas (pip install pandas, or apt install "
                              "python3-pandas); the numbers are also in .report") from e
        if self.load is None:
            return pd.DataFrame({"sample": range(len(self.samples_ms)), "end_s": self.sample_end_s,
                                 "latency_ms": self.samples_ms})
        nan = float("nan")
        rows = []
        for level in self.levels:
            row = {"concurrency": level["concurrency"],
                   "target_qps": nan if level["target_qps"] is None else level["target_qps"],
                   "throughput_qps": level["throughput_qps"]}
            by_q = {p["q"]: p for p in level["percentiles"]}
            for q in (50, 90, 99):
                p = by_q.get(q)
                row[f"p{q}_ms"] = nan if p is None or p["value_ms"] is None else p["value_ms"]
                for end in ("lower", "upper"):
                    v = None if p is None else p.get(end + "_ms")
                    row[f"p{q}_{end}_ms"] = nan if v is None else v
            row.update(queries=level["queries"], late=level["late"], dropped=level["dropped"])
            rows.append(row)
        columns = ["concurrency", "target_qps", "throughput_qps"]
        for q in (50, 90, 99):
            columns += [f"p{q}_ms", f"p{q}_lower_ms", f"p{q}_upper_ms"]
        return pd.DataFrame(rows, columns=columns + ["queries", "late", "dropped"])

    def __str__(self) -> str:
        return self._text

    def _repr_html_(self) -> str:
        """Jupyter's display: a table of the summary (median, p90 and p99 with their
        intervals, mean, min, max, std, the stability verdict; a load scenario: one row
        per level), the warnings, and an inline SVG histogram of samples_ms."""
        return _html.benchmark(self)

    def __repr__(self) -> str:
        if self.load is not None:
            return (f"<remex.BenchmarkResult scenario {self.scenario}: {len(self.levels)} levels"
                    + (f", peak {self.peak_qps:g} QPS" if self.peak_qps is not None else "") + ">")
        return (f"<remex.BenchmarkResult {self.function}: median {self.median_ms:.4f} ms over "
                f"{len(self.samples_ms)} samples x {self.number} calls>")


class Profile:
    """Profiled calls: `records`, one dict per op (kind "kernel") and instruction kind
    ("instruction") with calls, total_ms, mean_us, share_percent, copies and copy_bytes,
    largest total first, of the median call; `total_ms` of that whole call on the
    device; `runs` the calls profiled; `nodes`, one dict per node of the model (name,
    op, calls, median_ms, min_ms, max_ms, share_percent, run_ms, inputs and outputs as
    {"dtype", "shape"} or None), slowest median first; `table` (and str()) the text
    `remex bench --profile` prints."""

    def __init__(self, profile_json: str, table: str):
        profile = _json.loads(profile_json)  # the "profile" object of `remex bench --json`
        self.records: List[Dict[str, Any]] = profile["rows"]
        self.total_ms: float = profile["total_ms"]
        self.runs: int = profile.get("runs", 1)
        self.nodes: List[Dict[str, Any]] = profile.get("nodes", [])
        self.table = table

    def __str__(self) -> str:
        return self.table

    def _repr_html_(self) -> str:
        """Jupyter's display: `records` as a table, and the 20 slowest `nodes`."""
        return _html.profile(self)

    def __repr__(self) -> str:
        return f"<remex.Profile {len(self.records)} rows, {self.total_ms:.3f} ms>"


# Tensor's HTML in Jupyter (Tensor._repr_html_) shows dtype, shape and size, and the
# server's stats (count, min, max, mean, std, NaNs, infinities: computed on the device,
# no data crosses the wire) of tensors of at most this many bytes; a larger tensor's
# display says so instead, so that showing one never starts a long pass over the
# device's memory. Tensor.stats() computes them for any size.
REPR_STATS_MAX_BYTES: int = 64 << 20


def _tensor_repr_html(self: Tensor) -> str:
    return _html.tensor(self, REPR_STATS_MAX_BYTES)


Tensor._repr_html_ = _tensor_repr_html


Inputs = Optional[Mapping[str, Union[Tensor, "_np.ndarray", Any]]]


# ---- Models and sessions --------------------------------------------------------------

class Model:
    """A model loaded in a session: its executable and a VM on the server. Calls take
    inputs by name, each a Tensor (already on the server) or an array (uploaded for the
    call, straight from its memory when C-contiguous, and freed after)."""

    def __init__(self, native):
        self._m = native

    @property
    def name(self) -> str:
        """The session's name for the model: its file's stem, made unique."""
        return self._m.name

    @property
    def path(self) -> str:
        return self._m.path

    @property
    def inputs(self) -> List[ValueInfo]:
        """The main function's inputs, in order."""
        return [ValueInfo(*v) for v in self._m.inputs]

    @property
    def outputs(self) -> List[ValueInfo]:
        """The main function's outputs, in order."""
        return [ValueInfo(*v) for v in self._m.outputs]

    @property
    def last_call(self) -> Dict[str, Any]:
        """The last run or invoke: run_ms (round trip on the host), server_run_ms (the
        VM's time on the server), function (the one that served it: a shape bucket
        such as "main[W=257..512]" with dispatch) and graph (True when the call
        launched a device graph: a server started with --cuda-graphs)."""
        return self._m.last_call

    def run(self, inputs: Inputs = None, fetch: Union[str, Iterable[str], None] = "all") -> Dict[str, Any]:
        """Runs the main function once. fetch: "all" (default), "none"/None, or output
        names. Returns {output name: numpy.ndarray for a fetched output, Tensor for one
        left on the server}. An output bound with set_output comes back as the Tensor
        it is bound to. Raises InvalidArgument for an unknown input or output name, a
        missing input, or an input whose dtype or shape the model does not take;
        NotFound for a freed tensor."""
        if fetch == "all":
            names = None
        elif fetch is None or fetch == "none":
            names = []
        elif isinstance(fetch, str):
            names = [n for n in fetch.split(",") if n]
        else:
            names = list(fetch)
        return self._m.run(inputs if type(inputs) is dict else dict(inputs or {}), names)

    def invoke(self, inputs: Inputs = None) -> Dict[str, Tensor]:
        """Runs the main function once and fetches nothing: {output name: Tensor}. With
        every output bound (set_output) and the same input tensors as the last call, one
        round trip that allocates nothing on the server (invoke_with_outputs)."""
        return self._m.run(inputs if type(inputs) is dict else dict(inputs or {}), [])

    def set_output(self, output: str, tensor: Optional[Tensor]) -> None:
        """Binds `output` to a tensor of this session (Session.empty or an earlier
        output): later calls write it there, and the model keeps the tensor alive while
        bound. None unbinds. InvalidArgument for an unknown output or a tensor whose
        dtype or static shape does not fit."""
        self._m.set_output(output, tensor)

    def benchmark(self, inputs: Inputs = None, *, number: int = 1, repeat: int = 10, min_repeat_ms: int = 0,
                  warmup: int = 1, cooldown_ms: int = 0, l2_flush_bytes: int = 0,
                  profile: bool = False, min_duration_s: float = 1.0, min_samples: int = 30,
                  confidence: float = 0.95, window_ms: float = 250, stable_window: int = 3,
                  stable_threshold: float = 0.10, stable_percentile: float = 50, max_trials: int = 10,
                  fail_unstable: bool = False, scenario: Optional[str] = None,
                  concurrency: Union[int, str, None] = None, samples_per_query: Optional[int] = None,
                  target_qps: float = 0, latency_bound_ms: float = 0, find_peak: bool = False,
                  audit: Optional[bool] = None, audit_samples: int = 32, audit_rtol: float = 0,
                  audit_atol: float = 0, seed: int = 0) -> BenchmarkResult:
        """Times the main function on the server as `remex bench` does, with its options
        and defaults (docs/cli.md; each keyword is the flag of the same name). The first
        request: `warmup` untimed calls, then `repeat` samples of `number` calls each
        (grown until a sample takes min_repeat_ms; TVM's time_evaluator). A run whose
        samples cover less than min_duration_s seconds, number fewer than min_samples, or
        are not stable over the last `stable_window` windows of window_ms (throughput and
        the stable_percentile latency within +-stable_threshold of their mean, as Triton's
        perf_analyzer judges) is extended with more requests, at most max_trials in all.
        Median, p90 and p99 come with distribution-free intervals at `confidence`
        (BenchmarkResult.percentiles). No output crosses the wire. Without inputs, those
        of the last call.

        scenario ("single-stream", "multi-stream", "server", "offline"; MLPerf LoadGen's
        scenarios) runs a load scenario on the server instead of the time evaluator
        (docs/cli.md, "Load scenarios"), one level per concurrency: concurrency, the
        instances of the model running at once, an int or a sweep "A:B[:STEP]" (1 to 64;
        default 1, multi-stream: one per sample); samples_per_query (multi-stream,
        default 8); target_qps (server: the Poisson arrival rate, queries/s);
        latency_bound_ms and find_peak (server: the highest QPS whose p99 stays under
        the bound); audit (None: on for server and offline) checks audit_samples timed
        samples' outputs against an untimed reference call with audit_rtol/audit_atol
        (0 and 0: equal values); seed seeds the arrivals and the audit's choice.
        min_duration_s, min_samples (queries), confidence, window_ms, stable_threshold,
        stable_percentile and max_trials apply per level. The result has `levels`.

        InvalidArgument for an option out of range or options that contradict, naming
        the keyword; DeadlineExceeded when the run would outlast the server's limit (the
        message gives the projected time and the limit: lower repeat or number); with
        fail_unstable, Unstable (its .result the BenchmarkResult) when the run (a
        single-stream or multi-stream level) stayed unstable; AuditMismatch (its .result
        too) when the audit found a mismatch. Ctrl-C cancels the run on the server and
        raises Interrupted (a KeyboardInterrupt) whose .result holds the samples taken
        (a load scenario: the levels completed; the level in progress is dropped),
        marked partial; interrupted before the first sample or level completed, a plain
        KeyboardInterrupt."""
        if isinstance(concurrency, bool) or not isinstance(concurrency, (int, str, type(None))):
            raise InvalidArgument(f"concurrency must be an int or 'A:B[:STEP]', got {concurrency!r}")
        report, text, failure, interrupted = self._m.benchmark(
            dict(inputs or {}), number, repeat, min_repeat_ms, warmup, cooldown_ms, l2_flush_bytes, profile,
            min_duration_s, min_samples, confidence, window_ms, stable_window, stable_threshold, stable_percentile,
            max_trials, fail_unstable, scenario or "", "" if concurrency is None else str(concurrency),
            samples_per_query, target_qps, latency_bound_ms, find_peak, audit, audit_samples, audit_rtol,
            audit_atol, seed)
        result = BenchmarkResult(report, text, failure, self.path)
        if interrupted:
            if result.load is not None:
                n, unit = len(result.levels), "probe" if result.load.get("peak") is not None else "level"
                taken = f"{n} {unit}{'' if n == 1 else 's'} (the one in progress dropped)"
            else:
                taken = f"{len(result.samples_ms or [])} samples"
            raise Interrupted(f"benchmark interrupted after {taken}, cancelled on the server; the "
                              "partial result is this exception's .result", result)
        if result.partial is not None:
            return result  # cancelled on the server by another client: the samples taken
        if any(not level["audit"]["passed"] for level in result.levels):
            raise AuditMismatch(failure, result)
        if failure:  # only fail_unstable makes an unstable run a failure
            raise Unstable(failure if result.load is not None else
                           f"the benchmark is unstable: {result.stability['verdict']}", result)
        return result

    def profile(self, inputs: Inputs = None, runs: int = 5) -> Profile:
        """Profiles `runs` calls (1 to 100, after one warm-up call) per op and
        instruction kind, and per node with its median over the calls (without inputs:
        those of the last call)."""
        return Profile(*self._m.profile(dict(inputs or {}), runs))

    def close(self) -> None:
        """Frees the model's VM and executable on the server (also done when the object
        goes away)."""
        self._m.close()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<remex.Model {self.name}: {len(self.inputs)} inputs, {len(self.outputs)} outputs>"


def _shape_specs(shapes: Optional[Mapping[str, Sequence[int]]]) -> List[str]:
    specs = []
    for name, dims in (shapes or {}).items():
        specs.append(f"{name}=" + ("x".join(str(int(d)) for d in dims) if len(dims) else "scalar"))
    return specs


def _bound_specs(bounds: Optional[Mapping[str, Tuple[int, Optional[int]]]]) -> List[str]:
    specs = []
    for name, (lo, hi) in (bounds or {}).items():
        specs.append(f"{name}={int(lo)}:{'' if hi is None else int(hi)}")
    return specs


class CompileResult:
    """What remex.compile wrote: `path` (the .rmx), `model` (the .onnx), `inputs` and
    `outputs` (ValueInfo), `executable_bytes`, `kernels_by_op` ({"Conv": 3,
    "Shape (host)": 1, ...}), `stats` (the compiler's counts: nodes_in, nodes_folded,
    kernels, constant_bytes, ...) and `report`, the whole object `remex compile --json`
    prints."""

    def __init__(self, report_json: str):
        self.report: Dict[str, Any] = _json.loads(report_json)
        self.path: str = self.report["output"]
        self.model: str = self.report["model"]
        self.inputs = [ValueInfo(v["name"], v["dtype"], tuple(None if d == "?" else d for d in v["shape"]))
                       for v in self.report["inputs"]]
        self.outputs = [ValueInfo(v["name"], v["dtype"], tuple(None if d == "?" else d for d in v["shape"]))
                        for v in self.report["outputs"]]
        self.executable_bytes: int = self.report["executable_bytes"]
        self.kernels_by_op: Dict[str, int] = self.report["kernels_by_op"]
        self.stats: Dict[str, Any] = self.report["stats"]

    def __repr__(self) -> str:
        return (f"<remex.CompileResult {self.path}: {len(self.inputs)} inputs, {len(self.outputs)} outputs, "
                f"{self.executable_bytes} bytes>")


def compile(model: Union[str, "_os.PathLike[str]"], output: Union[str, "_os.PathLike[str]"],
            shapes: Optional[Mapping[str, Sequence[int]]] = None, *,
            bounds: Optional[Mapping[str, Tuple[int, Optional[int]]]] = None,
            dispatch: Union[str, Sequence[str], None] = None, strict: bool = False, layout: Optional[str] = None,
            dtype: Optional[str] = None, fuse_epilogues: bool = True, fold_batchnorm: bool = True) -> CompileResult:
    """Compiles MODEL.onnx and writes the executable to `output` (MODEL.rmx), as
    `remex compile MODEL.onnx -o OUTPUT` does with the same options (those of
    Session.load: shapes, bounds, dispatch, strict, layout, dtype, fuse_epilogues,
    fold_batchnorm). Here, on this host; no server is needed. Session.load takes the
    .rmx, as do `remex run` and `remex bench`.

    Raises InvalidArgument for a bad option (naming the keyword) or a model the
    compiler refuses, NotFound when the model cannot be read, Unimplemented for an op
    Remex lacks (naming the node), and the error of writing `output` (NotFound for a
    missing folder, PermissionDenied)."""
    if isinstance(dispatch, str):
        dispatch = [dispatch]
    return CompileResult(_native.compile(_os.fspath(model), _os.fspath(output), _shape_specs(shapes),
                                         _bound_specs(bounds), list(dispatch or []), strict, layout or "", dtype or "",
                                         fuse_epilogues, fold_batchnorm))


class Session:
    """A session with a device server (see connect, embedded and farm). Closing it (or
    leaving its `with` block) ends the connection, and the server frees everything the
    session held; its models and tensors can no longer be used."""

    def __init__(self, native):
        self._s = native

    @property
    def server(self) -> str:
        """"HOST:PORT", "embedded 127.0.0.1:PORT", or "HOST:PORT (leased from pool P)"."""
        return self._s.server

    @property
    def device(self) -> str:
        return self._s.device

    @property
    def closed(self) -> bool:
        return self._s.closed

    def load(self, path: str, shapes: Optional[Mapping[str, Sequence[int]]] = None, *,
             bounds: Optional[Mapping[str, Tuple[int, Optional[int]]]] = None,
             dispatch: Union[str, Sequence[str], None] = None, strict: bool = False, layout: Optional[str] = None,
             dtype: Optional[str] = None, fuse_epilogues: bool = True, fold_batchnorm: bool = True) -> Model:
        """Loads MODEL.onnx (compiled here first, as `remex compile` would with the same
        options) or MODEL.rmx; the executable is uploaded unless the server's module
        cache has it.

        shapes: {input: dims} fixing input shapes, e.g. {"x": (1, 3, 48, 192)}.
        bounds: {symbol or "input:axis": (min, max or None)} of dynamic dims.
        dispatch: shape bucket specs ("x:3=log:2:32:2048"; docs/dispatch.md); strict:
        refuse shapes outside the buckets. layout: "NCHW" or "NHWC" between
        convolutions (None: NHWC for a model with int8 convolutions, QLinearConv or
        ConvInteger, on a CPU server with int8 dot products, where oneDNN's int8
        convolutions are channels-last; NCHW otherwise); dtype: "float32" or
        "float16" activations and weights (None: the model's own, except a float16 model on a CPU server, which runs in float32 as
        CPUs without float16 arithmetic want; inputs and outputs keep their dtype);
        fuse_epilogues: Conv/MatMul + bias + activation as one kernel, and on a CPU server
        attention (MatMul, scale, mask, Softmax, MatMul) as one; fold_batchnorm:
        BatchNormalization folded into the Conv before it.
        Only `shapes` applies to an .rmx. Raises InvalidArgument for a bad option,
        NotFound for a missing file, Unimplemented for an op Remex lacks."""
        if isinstance(dispatch, str):
            dispatch = [dispatch]
        return Model(self._s.load(path, _shape_specs(shapes), _bound_specs(bounds), list(dispatch or []), strict,
                                  layout or "", dtype or "", fuse_epilogues, fold_batchnorm))

    def upload(self, array: Any) -> Tensor:
        """Copies an array (anything numpy.asarray takes) to a new tensor on the server,
        straight from its memory when it is C-contiguous. Its dtype must be float16/32/
        64, (u)int8-64 or bool, in native byte order (InvalidArgument otherwise)."""
        return self._s.upload(array)

    def empty(self, shape: Sequence[int], dtype: Any = "float32") -> Tensor:
        """A new tensor on the server, zero-filled, e.g. to bind with Model.set_output."""
        return self._s.empty([int(d) for d in shape], dtype)

    def zeros(self, shape: Sequence[int], dtype: Any = "float32") -> Tensor:
        """A new tensor of `shape` and `dtype` (any numeric dtype) filled with 0 on the
        server: no bytes are uploaded. The shell's `zeros`."""
        return self._s.fill([int(d) for d in shape], dtype, "zeros", None, None, 0.0, 1.0, 0)

    def random(self, shape: Sequence[int], dtype: Any = "float32", *, seed: int,
               low: Optional[float] = None, high: Optional[float] = None,
               normal: bool = False, mean: float = 0.0, scale: float = 1.0) -> Tensor:
        """A new tensor of `shape` and `dtype` filled on the server from `seed`, no bytes
        uploaded (the shell's `random`; docs/cli.md). Uniform in [low, high) (ONNX
        RandomUniform; default [0, 1) for floating dtypes, [0, 10) for integers, which
        take the floor of the draw, [0, 2) for bool), or with normal=True,
        mean + scale * a standard normal draw (ONNX RandomNormal; floating dtypes only).
        Element i depends on (seed, i) alone: one seed gives one tensor on every server
        and device. Raises InvalidArgument when the fill does not suit the dtype (a range
        outside an integer dtype's values, normal on integers, low >= high, scale < 0),
        Unimplemented on a server older than protocol 1.6."""
        if normal and (low is not None or high is not None):
            raise InvalidArgument("low and high are a uniform fill's; normal takes mean and scale")
        if not isinstance(seed, int) or seed < 0:
            raise InvalidArgument("seed must be an int >= 0, got %r" % (seed,))
        return self._s.fill([int(d) for d in shape], dtype, "normal" if normal else "uniform", low, high,
                            float(mean), float(scale), seed)

    def info(self) -> Dict[str, Any]:
        """The server's name, version, protocol and session id, and its devices
        (name, description, memory_bytes, bytes_in_use: this session's, and
        int8_channels_last: whether its int8 convolutions run fastest channels-last,
        and float_channels_last: whether its float convolutions do and its pooling
        takes NHWC; a load with layout=None follows both)."""
        return self._s.info()

    def handles(self) -> List[Dict[str, Any]]:
        """What this session holds on the server, by handle: kind ("module", "vm",
        "tensor"), dtype and shape of tensors, bytes (a tensor's size, a module's
        weights), held_bytes (what it keeps alive of the session's memory, in the
        allocator's size classes: a tensor its block, a VM its weights' copy, planned
        memory and last inputs; their sum is info()'s bytes_in_use; None from a server
        older than protocol 1.6) and device."""
        return self._s.handles()

    def traffic(self) -> Dict[str, int]:
        """Bytes on the session's connection: bytes_sent and bytes_received (frames
        included), and attachment_bytes_sent and attachment_bytes_received (tensor data
        only, before compression); and round_trips, the times the client waited for the
        server's reply (a run: one, uploads and downloads included)."""
        return self._s.traffic()

    def close(self) -> None:
        self._s.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<remex.Session {self.device} on {self.server}{' (closed)' if self.closed else ''}>"


_PathArg = Union[str, "_os.PathLike[str]", None]


def connect(address: Optional[str] = None, *, token: Optional[str] = None, token_file: _PathArg = None,
            tls_ca: _PathArg = None, tls_cert: _PathArg = None, tls_key: _PathArg = None,
            tls_server_name: Optional[str] = None, timeout: float = 600.0, connect_timeout: float = 10.0,
            compression: str = "auto") -> Session:
    """Connects to a remex-server at "HOST:PORT" (default: $REMEX_SERVER, as `remex farm
    lease` sets it). token: the server's token (default: token_file's, else
    $REMEX_TOKEN). timeout: seconds one request may take (a whole benchmark);
    connect_timeout: seconds to connect, TLS handshake included. compression: "auto"
    (byte-shuffled zstd where it saves 10 %; none to a loopback address), "none" or
    "zstd[:LEVEL]".

    TLS (the CLI's --tls-ca, --tls-cert, --tls-key, --tls-server-name; docs/security.md):
    tls_ca: PEM file of the CA(s) the server's certificate must chain to; set, the
    connection speaks TLS 1.2 or later, and the certificate must name the host
    connected to (or tls_server_name). tls_cert and tls_key: this client's PEM
    certificate and key for mutual TLS (remex-server --tls-client-ca), both or neither.
    tls_server_name: the name the server's certificate must carry (and SNI sends) when
    the host connected to is not it (a tunnel, a raw IP).

    Raises Unavailable when the server cannot be reached, or the TLS handshake fails (a
    certificate of another CA or for another host, a client certificate the server
    refuses; under TLS 1.3 the last may surface at the first request instead);
    FailedPrecondition for a plaintext connection to a TLS server; PermissionDenied
    for a missing or wrong token; InvalidArgument for a bad address, tls_* arguments
    that do not go together, or a TLS file that cannot be read or used (the message
    names it)."""
    if address is None:
        address = _os.environ.get("REMEX_SERVER", "")
        if not address:
            raise InvalidArgument("connect: give the server's HOST:PORT or set REMEX_SERVER")

    def path(p: _PathArg) -> str:
        return _os.fspath(p) if p is not None else ""

    return Session(_native.connect(address, token or "", path(token_file), timeout, connect_timeout, compression,
                                   path(tls_ca), path(tls_cert), path(tls_key), tls_server_name or ""))


def embedded(threads: int = 0, *, timeout: float = 600.0) -> Session:
    """Starts a CPU device server in this process (on a loopback port, spoken to over
    the same protocol) and connects to it. threads: its compute threads (0: one per
    CPU, or OMP_NUM_THREADS)."""
    return Session(_native.embedded(threads, timeout))


def farm(url: Optional[str] = None, *, pool: str = "default", labels: str = "", wait: float = 0.0,
         timeout: float = 600.0) -> Session:
    """Leases a device of the farm at redis://HOST:PORT[/DB] (default: $REMEX_FARM) and
    connects to it; the lease is held until the session closes (docs/farm.md).
    labels: a selector such as "gpu=h100,cuda>=12.4"; wait: seconds to wait in the
    pool's queue. Raises NotFound when no device matches, DeadlineExceeded when none
    became free in time, Unavailable when Redis cannot be reached."""
    if url is None:
        url = _os.environ.get("REMEX_FARM", "")
        if not url:
            raise InvalidArgument("farm: give the farm's redis://HOST:PORT or set REMEX_FARM")
    return Session(_native.farm(url, pool, labels, wait, timeout))


# ---- Tuning: each bucket compiled with what measured fastest (docs/tuning.md) ----------

def tune(model: _PathArg, log: _PathArg, output: Optional[_PathArg] = None,
         shapes: Optional[Mapping[str, Sequence[int]]] = None, *,
         bounds: Optional[Mapping[str, Tuple[int, Optional[int]]]] = None,
         dispatch: Union[str, Sequence[str], None] = None, strict: bool = False, layout: Optional[str] = None,
         dtype: Optional[str] = None, fuse_epilogues: bool = True, fold_batchnorm: bool = True,
         server: Optional[str] = None, token: Optional[str] = None, token_file: Optional[_PathArg] = None,
         farm: Optional[str] = None, pool: str = "default", labels: str = "", wait: float = 0.0,
         timeout: float = 600.0, space: Optional[Mapping[str, Sequence[Any]]] = None, budget_s: float = 0.0,
         min_duration_s: float = 1.0, min_samples: int = 30, confidence: float = 0.95, rtol: float = 1e-3,
         atol: float = 1e-4, float16_rtol: float = 1e-2, float16_atol: float = 1e-2, devices: int = 0,
         seed: int = 0) -> Dict[str, Any]:
    """Tunes MODEL.onnx as `remex tune` does (docs/tuning.md) and returns its report (the
    dict `remex tune --json` prints: per bucket the start, the choice, its ratio to the
    start with the interval, rounds and candidates measured).

    The model's compile options (shapes, bounds, dispatch, strict, layout, dtype,
    fuse_epilogues, fold_batchnorm, as remex.compile takes them) are the start of the
    search. The device: server "HOST:PORT" (with token or token_file), or farm
    "redis://HOST:PORT[/DB]" with pool, labels and wait (every matching device measures
    a share of the buckets, at most `devices`), or neither for an embedded CPU server.
    log: the tuning log (JSON Lines), read first so that a tune resumes, appended after
    every round; output: where the tuned executable (.rmx) goes, if anywhere.
    space: {axis: values}, e.g. {"layout": ["NCHW", "NHWC"], "cudnn-algo": range(8)}
    (default: the device's). budget_s: seconds of measurement at most (0: none).
    min_duration_s, min_samples, confidence: each choice's samples per round and the
    confidence a winner's ratio interval must exclude 1 with. rtol, atol (float32) and
    float16_rtol, float16_atol: the accuracy check against the float32 CPU reference.

    Runs for as long as the tune does (Ctrl-C is seen when it returns: use budget_s).
    Raises InvalidArgument for a bad option or space, NotFound for a missing model,
    and the connection's errors when no device could be reached."""
    if isinstance(dispatch, str):
        dispatch = [dispatch]
    specs = [f"{key}={','.join(str(v) for v in values)}" for key, values in (space or {}).items()]
    return _json.loads(_native.tune(
        _os.fspath(model), _os.fspath(log), _os.fspath(output) if output is not None else "", _shape_specs(shapes),
        _bound_specs(bounds), list(dispatch or []), strict, layout or "", dtype or "", fuse_epilogues, fold_batchnorm,
        server or "", token or "", _os.fspath(token_file) if token_file is not None else "", farm or "", pool,
        labels, wait, timeout, specs, budget_s, min_duration_s, min_samples, confidence, rtol, atol, float16_rtol,
        float16_atol, devices, seed))


# ---- Jobs: work in a farm's queue that outlives this process (docs/farm.md, "Jobs") ----

def _farm_url(url: Optional[str], what: str) -> str:
    url = url or _os.environ.get("REMEX_FARM", "")
    if not url:
        raise InvalidArgument(f"{what}: give the farm's redis://HOST:PORT or set REMEX_FARM")
    return url


def submit_job(target: str, *, farm: Optional[str] = None, pool: str = "default", command: Optional[str] = None,
               args: Sequence[str] = (), labels: str = "", priority: int = 0, retries: int = 2) -> str:
    """Queues a job in the farm at redis://HOST:PORT[/DB] (default: $REMEX_FARM) and returns
    its id ("POOL/N") at once; `remex worker` processes of the pool run it. target: a
    model (command "bench", the default, "check" or "run") or a SUITE.toml (command
    "suite"); its files travel with the job. args: the command's further arguments, as
    the CLI takes them (e.g. ["--shape", "x=1x3x48x320"]). labels: the selector its
    device must match; priority: -1000..1000, higher first; retries: further attempts
    when a worker is lost mid-job. Raises InvalidArgument for a bad target, pool,
    selector or bound, NotFound for a missing file, Unavailable when Redis fails."""
    return _native.job_submit(_farm_url(farm, "submit_job"), str(target), command or "", list(args), pool, labels,
                              priority, retries)


def job_status(job_id: str, *, farm: Optional[str] = None) -> Dict[str, Any]:
    """The job as `remex job status --json` prints it: state (queued, running, succeeded,
    failed, cancelled), queue_ms and run_ms (-1: not applicable), attempts, worker,
    exit_code, error, and result (the command's JSON report) once it has them. Raises
    NotFound for an unknown job."""
    return _json.loads(_native.job_status(_farm_url(farm, "job_status"), job_id, False, 0.0))


def wait_job(job_id: str, *, farm: Optional[str] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
    """Waits for the job to end and returns it as job_status does (whatever its end: check
    its "state"). Raises DeadlineExceeded when timeout seconds pass first."""
    return _json.loads(_native.job_status(_farm_url(farm, "wait_job"), job_id, True, float(timeout or 0.0)))


def job_logs(job_id: str, *, farm: Optional[str] = None) -> List[str]:
    """The job's log so far: what the farm did ("remex: ..." lines) and its command's
    standard error, line by line."""
    return [("remex: " + line) if stream == "farm" else line
            for stream, line in _native.job_logs(_farm_url(farm, "job_logs"), job_id)]


def cancel_job(job_id: str, *, farm: Optional[str] = None) -> None:
    """Cancels the job: a queued one ends at once, a running one is stopped by its worker.
    Raises FailedPrecondition when it has ended already."""
    _native.job_cancel(_farm_url(farm, "cancel_job"), job_id)


def jobs(*, farm: Optional[str] = None, pool: str = "default", limit: int = 100) -> List[Dict[str, Any]]:
    """The pool's jobs, newest first, each as job_status returns it."""
    return _json.loads(_native.job_list(_farm_url(farm, "jobs"), pool, limit))


# ---- Messages in this package's terms ------------------------------------------------

# The tooling's messages, shared with the CLI, name its flags ("--repeat must be at
# least 1") and the protocol's requests ("setInput: input 'x' must be float32, got
# float64"). Errors raised here name the keyword arguments instead ("repeat must be at
# least 1") and drop the request's name. Flags of remex-server, and flags no call of
# this package takes, stay as they are.
_FLAG_ARGUMENTS = {"--shape": "shapes", "--bound": "bounds", "--input": "inputs", "--tag": "tags",
                   "--record": "url", "--no-fuse-epilogues": "fuse_epilogues=False",
                   "--no-fold-batchnorm": "fold_batchnorm=False", "--no-audit": "audit=False"}
_KEYWORDS = {name for f in (Model.benchmark, Model.run, Session.load, BenchmarkResult.record, compile, connect,
                             embedded, farm, submit_job, wait_job, tune)
             for name in _inspect.signature(f).parameters if name != "self"}
_FLAG = _re.compile(r"(remex-server )?(?<![\w-])--([a-z][a-z0-9-]*)")
_REQUEST_PREFIX = _re.compile(r"^(?:setInput|setOutput|invoke|tensorWrite|tensorRead|tensorAlloc|vmCreate|moduleLoad|"
                              r"moduleHas|free): ")


def _flag_to_argument(m: "_re.Match[str]") -> str:
    if m.group(1):  # the server's flag
        return m.group(0)
    flag = "--" + m.group(2)
    if flag in _FLAG_ARGUMENTS:
        return _FLAG_ARGUMENTS[flag]
    name = m.group(2).replace("-", "_")
    return name if name in _KEYWORDS else flag


def _python_terms(message: str) -> str:
    """An error message in this package's terms (see above)."""
    return _FLAG.sub(_flag_to_argument, _REQUEST_PREFIX.sub("", message))


_native.set_message_translator(_python_terms)
