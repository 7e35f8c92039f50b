# Type stubs of remex._native, the compiled half of the Remex Python client. Only Tensor
# is used directly; the package (remex/__init__.py) wraps the rest.
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy

error_classes: Dict[str, type]
version: str  # the CMake project's version (base/version.h)
commit: str  # the git commit built ("unknown" outside a checkout)

def compile(model: str, output: str, shapes: List[str], bounds: List[str], dispatch: List[str], strict: bool,
            layout: str, dtype: str, fuse_epilogues: bool, fold_batchnorm: bool) -> str:
    """Compiles `model` and writes the executable to `output`, as `remex compile`;
    returns the JSON report of `remex compile --json`."""

def tune(model: str, log: str, output: str, shapes: List[str], bounds: List[str], dispatch: List[str], strict: bool,
         layout: str, dtype: str, fuse_epilogues: bool, fold_batchnorm: bool, address: str, token: str,
         token_file: str, farm: str, pool: str, labels: str, wait: float, timeout: float, space: List[str],
         budget_s: float, min_duration_s: float, min_samples: int, confidence: float, rtol: float, atol: float,
         float16_rtol: float, float16_atol: float, devices: int, seed: int) -> str:
    """Tunes `model` as `remex tune` (docs/tuning.md); returns the JSON report of
    `remex tune --json`."""

def set_message_translator(f: Optional[Callable[[str], str]]) -> None:
    """Every error's message passes through f (the package's terms for the CLI's)."""

class Tensor:
    """A tensor on the server, referred to by handle. Freed on the server when the
    object goes away (at once when the session is idle, else with its next call), by
    free(), or when the session closes."""

    @property
    def handle(self) -> int:
        """The server's handle. FailedPrecondition once freed."""
    @property
    def dtype(self) -> numpy.dtype: ...
    @property
    def dtype_name(self) -> str:
        """"float32", "int64", ... (also "bfloat16", which has no NumPy dtype)."""
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def freed(self) -> bool: ...
    def numpy(self, out: Optional[numpy.ndarray] = None) -> numpy.ndarray:
        """Downloads the tensor: a new array, or into `out` (C-contiguous, writable, the
        tensor's dtype and size; InvalidArgument otherwise) with no copy on the host."""
    def stats(self) -> Dict[str, Any]:
        """count, min, max, mean, std (population), nan_count, inf_count: computed on the
        device; only the numbers cross the wire."""
    def compare(self, reference: "Tensor", rtol: float = 1e-4, atol: float = 1e-5,
                equal_nan: bool = True) -> Dict[str, Any]:
        """numpy.allclose's rule on the device, |self - reference| <= atol + rtol *
        |reference|: ok, count, mismatches, max_abs_error, max_rel_error and
        first_mismatch (flat index or None). InvalidArgument for different dtypes or
        shapes, or tensors of two sessions."""
    def free(self) -> None:
        """Frees the tensor on the server now."""

class Model:
    name: str
    path: str
    inputs: List[Tuple[str, str, Tuple[Any, ...]]]
    outputs: List[Tuple[str, str, Tuple[Any, ...]]]
    last_call: Dict[str, Any]
    def run(self, inputs: Dict[str, Any], fetch: Optional[List[str]] = None) -> Dict[str, Any]: ...
    def set_output(self, output: str, tensor: Optional[Tensor]) -> None: ...
    def benchmark(self, inputs: Dict[str, Any], number: int, repeat: int, min_repeat_ms: int, warmup: int,
                  cooldown_ms: int, l2_flush_bytes: int, profile: bool, min_duration_s: float, min_samples: int,
                  confidence: float, window_ms: float, stable_window: int, stable_threshold: float,
                  stable_percentile: float, max_trials: int, fail_unstable: bool, scenario: str, concurrency: str,
                  samples_per_query: Optional[int], target_qps: float, latency_bound_ms: float, find_peak: bool,
                  audit: Optional[bool], audit_samples: int, audit_rtol: float, audit_atol: float,
                  seed: int) -> Tuple[str, str, str, bool]:
        """The report's JSON, its text, why remex bench would exit 1 ("" for none), and
        whether Ctrl-C interrupted the run (the report is then partial; the
        KeyboardInterrupt was taken for the caller to raise).
        scenario and concurrency "" for not given; the load options are mapped as
        remex bench's flags (tooling::MakeLoadOptions), InvalidArgument naming the flag."""
    def profile(self, inputs: Dict[str, Any]) -> Tuple[str, str]: ...
    def close(self) -> None: ...

class Session:
    server: str
    device: str
    closed: bool
    def load(self, path: str, shapes: List[str], bounds: List[str], dispatch: List[str], strict: bool,
             layout: str, dtype: str, fuse_epilogues: bool, fold_batchnorm: bool) -> Model: ...
    def upload(self, array: Any) -> Tensor: ...
    def empty(self, shape: List[int], dtype: Any) -> Tensor: ...
    def fill(self, shape: List[int], dtype: Any, kind: str, low: Optional[float], high: Optional[float],
             mean: float, scale: float, seed: int) -> Tensor: ...
    def info(self) -> Dict[str, Any]: ...
    def handles(self) -> List[Dict[str, Any]]: ...
    def traffic(self) -> Dict[str, int]: ...
    def close(self) -> None: ...

def connect(address: str, token: str, token_file: str, timeout: float, connect_timeout: float,
            compression: str, tls_ca: str = "", tls_cert: str = "", tls_key: str = "",
            tls_server_name: str = "") -> Session:
    """TLS when tls_ca is set (a PEM CA file); tls_cert and tls_key (mutual TLS) both or
    neither; tls_server_name the name the server's certificate must carry. "" for none.
    InvalidArgument for arguments that do not go together or a file that cannot be
    used (naming it)."""
def embedded(threads: int, timeout: float) -> Session: ...
def farm(url: str, pool: str, labels: str, wait: float, timeout: float) -> Session: ...
def record_report(url: str, kind: str, model_path: str, report_json: str, tags: Dict[str, str], verdict: str,
                  error: str) -> Tuple[int, str]: ...
