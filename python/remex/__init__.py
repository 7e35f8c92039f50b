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
message. Times are in milliseconds, sizes in bytes, dtypes NumPy's.

The client runs on the same tooling layer as the `remex` CLI and `remex shell`
(docs/python.md).
"""

import json as _json
import os as _os
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as _np

from . import _native
from ._native import Tensor

__all__ = [
    "connect", "embedded", "farm", "Session", "Model", "Tensor", "ValueInfo", "BenchmarkResult", "Profile",
    "Error", "Cancelled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
    "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange", "Unimplemented",
    "Internal", "Unavailable", "DataLoss", "Unstable",
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
    """A benchmark as `remex bench --json` reports it, timed on the server.

    samples_ms: mean milliseconds per call, one per sample, in run order, each sample
    being `number` calls; sample_end_s: when each ended, in seconds of samples since the
    run's start. mean_ms, median_ms, p90_ms, min_ms, max_ms, std_ms (population)
    summarize them; p99_ms is None when the samples cannot bound it at `confidence`
    (299 at 0.95). percentiles: one dict per percentile (q 50, 90, 99) with value_ms,
    bounded and, when bounded, lower_ms and upper_ms: the distribution-free interval
    at `confidence`. extended: why and how far the run was extended (reasons,
    unmet, requests, duration_s). stable and stability: the measurement-window verdict
    (with its windows). environment: the fingerprint of the server, its host and GPUs,
    this host and the executable; warnings: [{code, message, fix}] of what likely skewed
    the measurement (docs/cli.md, "Environment"). report: the whole JSON object (dict).
    str(): the text `remex bench` prints."""

    def __init__(self, report_json: str, text: str):
        self.report: Dict[str, Any] = _json.loads(report_json)
        b = self.report["benchmark"]
        self.function: str = b["function"]
        self.number: int = b["number"]
        self.timer: str = b["timer"]
        self.samples_ms: List[float] = b["samples_ms"]
        self.mean_ms: float = b["mean_ms"]
        self.median_ms: float = b["median_ms"]
        self.p90_ms: float = b["p90_ms"]
        self.p99_ms: Optional[float] = b["p99_ms"]
        self.min_ms: float = b["min_ms"]
        self.max_ms: float = b["max_ms"]
        self.std_ms: float = b["std_ms"]
        self.sample_end_s: List[float] = b["sample_end_s"]
        self.confidence: float = b["confidence"]
        self.percentiles: List[Dict[str, Any]] = b["percentiles"]
        self.extended: Dict[str, Any] = b["extended"]
        self.stable: bool = b["stable"]
        self.stability: Dict[str, Any] = b["stability"]
        self.profile: Optional[Dict[str, Any]] = self.report.get("profile")
        # The environment fingerprint and the warnings of what skewed the measurement
        # (docs/cli.md, "Environment").
        self.environment: Dict[str, Any] = self.report.get("environment", {})
        self.warnings: List[Dict[str, str]] = self.report.get("warnings", [])
        self._text = text

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return (f"<remex.BenchmarkResult {self.function}: median {self.median_ms:.4f} ms over "
                f"{len(self.samples_ms)} samples x {self.number} calls>")


class Profile:
    """One profiled call: `records`, one dict per op (kind "kernel") and instruction
    kind ("instruction") with calls, total_ms, mean_us, share_percent, copies and
    copy_bytes, largest total first; `total_ms` of the whole call on the device;
    `table` (and str()) the text `remex bench --profile` prints."""

    def __init__(self, profile_json: str, table: str):
        profile = _json.loads(profile_json)  # the "profile" object of `remex bench --json`
        self.records: List[Dict[str, Any]] = profile["rows"]
        self.total_ms: float = profile["total_ms"]
        self.table = table

    def __str__(self) -> str:
        return self.table

    def __repr__(self) -> str:
        return f"<remex.Profile {len(self.records)} rows, {self.total_ms:.3f} ms>"


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
        VM's time on the server) and function (the one that served it: a shape bucket
        such as "main[W=257..512]" with dispatch)."""
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
                  fail_unstable: bool = False) -> BenchmarkResult:
        """Times the main function on the server as `remex bench` does, with its options
        and defaults (docs/cli.md). The first request: `warmup` untimed calls, then
        `repeat` samples of `number` calls each (grown until a sample takes
        min_repeat_ms; TVM's time_evaluator). A run whose samples cover less than
        min_duration_s seconds, number fewer than min_samples, or are not stable over
        the last `stable_window` windows of window_ms (throughput and the
        stable_percentile latency within +-stable_threshold of their mean, as Triton's
        perf_analyzer judges) is extended with more requests, at most max_trials in all.
        Median, p90 and p99 come with distribution-free intervals at `confidence`
        (BenchmarkResult.percentiles). No output crosses the wire. Without inputs, those
        of the last call. InvalidArgument for an option out of range; with
        fail_unstable, Unstable (its .result the BenchmarkResult) when the run stayed
        unstable."""
        report, text = self._m.benchmark(dict(inputs or {}), number, repeat, min_repeat_ms, warmup, cooldown_ms,
                                         l2_flush_bytes, profile, min_duration_s, min_samples, confidence, window_ms,
                                         stable_window, stable_threshold, stable_percentile, max_trials,
                                         fail_unstable)
        result = BenchmarkResult(report, text)
        if fail_unstable and not result.stable:
            raise Unstable(f"the benchmark is unstable: {result.stability['verdict']}", result)
        return result

    def profile(self, inputs: Inputs = None) -> Profile:
        """Profiles one call per op and instruction kind (without inputs: those of the
        last call)."""
        return Profile(*self._m.profile(dict(inputs or {})))

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
             dispatch: Union[str, Sequence[str], None] = None, strict: bool = False, layout: str = "NCHW",
             dtype: str = "float32", fuse_epilogues: bool = True, fold_batchnorm: bool = True) -> Model:
        """Loads MODEL.onnx (compiled here first, as `remex compile` would with the same
        options) or MODEL.rmx; the executable is uploaded unless the server's module
        cache has it.

        shapes: {input: dims} fixing input shapes, e.g. {"x": (1, 3, 48, 192)}.
        bounds: {symbol or "input:axis": (min, max or None)} of dynamic dims.
        dispatch: shape bucket specs ("x:3=log:2:32:2048"; docs/dispatch.md); strict:
        refuse shapes outside the buckets. layout: "NCHW" or "NHWC" between
        convolutions; dtype: "float32" or "float16" activations and weights;
        fuse_epilogues: Conv/MatMul + bias + activation as one kernel; fold_batchnorm:
        BatchNormalization folded into the Conv before it.
        Only `shapes` applies to an .rmx. Raises InvalidArgument for a bad option,
        NotFound for a missing file, Unimplemented for an op Remex lacks."""
        if isinstance(dispatch, str):
            dispatch = [dispatch]
        return Model(self._s.load(path, _shape_specs(shapes), _bound_specs(bounds), list(dispatch or []), strict,
                                  layout, dtype, fuse_epilogues, fold_batchnorm))

    def upload(self, array: Any) -> Tensor:
        """Copies an array (anything numpy.asarray takes) to a new tensor on the server,
        straight from its memory when it is C-contiguous. Its dtype must be float16/32/
        64, (u)int8-64 or bool, in native byte order (InvalidArgument otherwise)."""
        return self._s.upload(array)

    def empty(self, shape: Sequence[int], dtype: Any = "float32") -> Tensor:
        """A new tensor on the server, zero-filled, e.g. to bind with Model.set_output."""
        return self._s.empty([int(d) for d in shape], dtype)

    def info(self) -> Dict[str, Any]:
        """The server's name, version, protocol and session id, and its devices
        (name, description, memory_bytes, and bytes_in_use: this session's)."""
        return self._s.info()

    def handles(self) -> List[Dict[str, Any]]:
        """What this session holds on the server, by handle: kind ("module", "vm",
        "tensor"), dtype and shape of tensors, bytes and device."""
        return self._s.handles()

    def traffic(self) -> Dict[str, int]:
        """Bytes on the session's connection: bytes_sent and bytes_received (frames
        included), and attachment_bytes_sent and attachment_bytes_received (tensor data
        only, before compression)."""
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
    connect_timeout: seconds to connect, TLS handshake included. compression: "auto",
    "none" or "zstd[:LEVEL]".

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
