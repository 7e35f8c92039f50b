"""HTML of the package's results for Jupyter (the _repr_html_ of Tensor, BenchmarkResult
and Profile): self-contained markup, tables and an inline SVG histogram, with no script,
style sheet or image to load. Every text is escaped.
"""
import html
import math
from typing import Any, Dict, Iterable, List, Sequence

import numpy as np

_TABLE = '<table style="border-collapse:collapse;font-size:90%">'
_CELL = 'style="padding:1px 8px;text-align:{align}"'


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _number(value: Any, digits: int = 4) -> str:
    """A number for a table: None as an em dash, floats with `digits` significant digits."""
    if value is None:
        return "\u2014"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.{digits}g}"
    return str(value)


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], numeric_from: int = 1) -> str:
    """A table; columns from `numeric_from` on are numbers, right-aligned."""
    def cell(tag, i, value):
        align = "right" if i >= numeric_from else "left"
        return f"<{tag} {_CELL.format(align=align)}>{_e(value)}</{tag}>"

    out = [_TABLE, "<thead><tr>", *(cell("th", i, h) for i, h in enumerate(header)), "</tr></thead><tbody>"]
    for row in rows:
        out += ["<tr>", *(cell("td", i, v) for i, v in enumerate(row)), "</tr>"]
    out.append("</tbody></table>")
    return "".join(out)


def _title(kind: str, text: str) -> str:
    return f"<div><strong>{_e(kind)}</strong> {_e(text)}</div>"


def _note(text: str) -> str:
    return f'<div style="color:#a33">{_e(text)}</div>'


# ---- Tensors ----------------------------------------------------------------------------

def tensor(t: Any, max_bytes: int) -> str:
    """dtype, shape and size; the server's stats when the tensor holds at most max_bytes."""
    parts = [_title("remex.Tensor", f"{t.dtype_name} {list(t.shape)}, {_bytes(t.nbytes)}")]
    if t.freed:
        parts.append(_note("freed: no stats"))
    elif t.nbytes > max_bytes:
        parts.append(_note(f"stats not computed: {_bytes(t.nbytes)} is over remex.REPR_STATS_MAX_BYTES "
                           f"({_bytes(max_bytes)}); call .stats() for them"))
    else:
        try:
            s = t.stats()
        except Exception as e:  # a closed session, a dtype without stats: say so, not raise
            parts.append(_note(f"stats unavailable: {e}"))
        else:
            keys = ["count", "min", "max", "mean", "std", "nan_count", "inf_count"]
            parts.append(_table(keys, [[_number(s[k], 6) for k in keys]], numeric_from=0))
    return f'<div class="remex-tensor">{"".join(parts)}</div>'


# ---- Benchmarks -------------------------------------------------------------------------

def histogram_svg(samples: Sequence[float], bins: int = 0, width: int = 360, height: int = 120) -> str:
    """An inline SVG histogram of `samples` (ms): `bins` bars (0: about sqrt(n), 5 to
    30), each with a <title> giving its range and count, and the axis's ends labelled.
    From 100 samples on, the bars span the minimum to the 99th percentile, and the
    caption counts the samples beyond (a few outliers would squeeze the rest into one
    bar)."""
    values = np.asarray(samples, dtype=np.float64)
    if bins <= 0:
        bins = int(min(30, max(5, round(math.sqrt(len(values))))))
    lo, hi = float(values.min()), float(values.max())
    if len(values) >= 100:
        hi = float(np.percentile(values, 99))
    beyond = int(np.count_nonzero(values > hi))
    counts, edges = np.histogram(values, bins=bins, range=(lo, hi) if hi > lo else None)
    top = max(int(counts.max()), 1)
    pad, label = 4, 14
    plot_h = height - 2 * label
    bar_w = (width - 2 * pad) / len(counts)
    caption = f"{len(values)} samples (ms)" + (f"; {beyond} above {hi:.4g} ms not drawn" if beyond else "")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="10">',
           f"<title>{_e('histogram of ' + caption)}</title>"]
    for i, c in enumerate(counts):
        h = plot_h * int(c) / top
        x = pad + i * bar_w
        tip = f"{edges[i]:.4g} to {edges[i + 1]:.4g} ms: {int(c)}"
        out.append(f'<rect class="bar" x="{x:.1f}" y="{label + plot_h - h:.1f}" width="{max(bar_w - 1, 1):.1f}" '
                   f'height="{h:.1f}" fill="#4878a8" data-count="{int(c)}"><title>{_e(tip)}</title></rect>')
    out.append(f'<text x="{pad}" y="{label - 3}">{_e(f"highest bar: {top} samples")}</text>')
    out.append(f'<line x1="{pad}" y1="{label + plot_h}" x2="{width - pad}" y2="{label + plot_h}" stroke="#444"/>')
    out.append(f'<text x="{pad}" y="{height - 2}">{_e(f"{edges[0]:.4g} ms")}</text>')
    out.append(f'<text x="{width - pad}" y="{height - 2}" text-anchor="end">{_e(f"{edges[-1]:.4g} ms")}</text>')
    out.append("</svg>")
    return (f'<figure style="margin:4px 0">{"".join(out)}'
            f'<figcaption style="font-size:80%">{_e(caption)}</figcaption></figure>')


def _percentile(r: Any, q: int) -> str:
    p = next((p for p in (r.percentiles or []) if p["q"] == q), None)
    if p is None or p.get("value_ms") is None:
        return "\u2014"
    text = _number(p["value_ms"])
    if p.get("bounded"):
        text += f" [{_number(p['lower_ms'])}, {_number(p['upper_ms'])}]"
    return text


def benchmark(r: Any) -> str:
    """The summary (a table of the time evaluator's statistics, or one row per level of a
    load scenario), the warnings, and the samples' histogram."""
    parts = []
    if r.load is None:
        parts.append(_title("remex.BenchmarkResult",
                            f"{r.function}: {len(r.samples_ms or [])} samples \u00d7 {r.number} calls ({r.timer})"))
        header = "ms" + (f" [interval at {_number(r.confidence)}]" if r.confidence is not None else "")
        rows = [["median", _percentile(r, 50)], ["p90", _percentile(r, 90)], ["p99", _percentile(r, 99)],
                ["mean", _number(r.mean_ms)], ["min", _number(r.min_ms)], ["max", _number(r.max_ms)],
                ["std", _number(r.std_ms)]]
        phases = r.phases_ms or {}
        if phases.get("first_invoke") is not None:
            rows.append(["first call (cold)", _number(phases["first_invoke"])])
        parts.append(_table(["", header], rows))
        if r.stability:
            parts.append(f"<div>{_e(r.stability['verdict'])}</div>" if r.stable else _note(r.stability["verdict"]))
    else:
        title = f"scenario {r.scenario}: {len(r.levels)} levels"
        if r.peak_qps is not None:
            title += f", peak {r.peak_qps:g} QPS"
        parts.append(_title("remex.BenchmarkResult", title))
        header = ["concurrency", "target QPS", "throughput QPS", "p50 ms", "p90 ms", "p99 ms", "queries", "late",
                  "dropped", "stable", "audit"]
        rows = []
        for level in r.levels:
            lat = level.get("latency_ms") or {}
            audit = level.get("audit") or {}
            rows.append([level["concurrency"], _number(level.get("target_qps")), _number(level["throughput_qps"]),
                         _number(lat.get("p50")), _number(lat.get("p90")), _number(lat.get("p99")),
                         level["queries"], level["late"], level["dropped"], _number(level.get("stable")),
                         "\u2014" if not audit.get("checked") else ("passed" if audit.get("passed") else "MISMATCH")])
        parts.append(_table(header, rows, numeric_from=0))
    if r.partial:
        parts.append(_note(f"partial: {r.partial}"))
    if r.failure:
        parts.append(_note(f"failure: {r.failure}"))
    for w in r.warnings:
        parts.append(_note(f"warning {w.get('code', '')}: {w.get('message', '')}"))
    if r.samples_ms:
        parts.append(histogram_svg(r.samples_ms))
    return f'<div class="remex-benchmark">{"".join(parts)}</div>'


# ---- Profiles ---------------------------------------------------------------------------

def profile(p: Any, max_nodes: int = 20) -> str:
    """The per-op table and the slowest `max_nodes` nodes."""
    parts = [_title("remex.Profile", f"{_number(p.total_ms)} ms per call on the device (median of {p.runs} runs)")]
    header = ["op / instruction", "kind", "calls", "total ms", "mean \u00b5s", "share %", "copies", "copy bytes"]
    parts.append(_table(header, ([r["name"], r["kind"], r["calls"], _number(r["total_ms"]), _number(r["mean_us"]),
                                  f"{r['share_percent']:.1f}", r["copies"], r["copy_bytes"]] for r in p.records),
                        numeric_from=2))
    if p.nodes:
        shown: List[Dict[str, Any]] = p.nodes[:max_nodes]
        parts.append(_title("nodes", f"slowest {len(shown)} of {len(p.nodes)}"))
        header = ["node", "op", "calls", "median ms", "min ms", "max ms", "share %"]
        parts.append(_table(header, ([n["name"], n["op"] + (" (host)" if n.get("host") else ""), n["calls"],
                                      _number(n["median_ms"]), _number(n["min_ms"]), _number(n["max_ms"]),
                                      f"{n['share_percent']:.1f}"] for n in shown), numeric_from=2))
    return f'<div class="remex-profile">{"".join(parts)}</div>'
