"""remex.__version__, remex.compile, and the HTML that Jupyter displays for tensors,
benchmark results and profiles (parsed with html.parser), against a real remex-server."""
import html.parser
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import remex
from conftest import CLI_BIN

QUICK = dict(min_duration_s=0, min_samples=0, max_trials=1)  # the first request's samples, not extended


class Page(html.parser.HTMLParser):
    """The parsed HTML: every tag with its attributes, the text, the tables (rows of
    cell texts, header row first) and the SVG bars' counts."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.tags, self.text, self.tables, self.bars = [], [], [], []
        self._cell = None
        self.feed(text)
        self.close()
        self.all_text = "".join(self.text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "rect" and "data-count" in attrs:
            self.bars.append(int(attrs["data-count"]))

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def self_contained(self):
        """No script, style sheet, image or frame, and nothing loaded from elsewhere."""
        for tag, attrs in self.tags:
            assert tag not in ("script", "link", "img", "iframe", "object", "embed", "style"), tag
            for name, value in attrs.items():
                assert name not in ("src", "href") and not name.startswith("on"), (tag, name, value)
        return True


def table_dict(table):
    """{header: value} of a table with one header row and one data row."""
    assert len(table) == 2, table
    return dict(zip(table[0], table[1]))


@pytest.fixture
def session(server):
    with remex.connect(server.address, timeout=60) as s:
        yield s


def test_version_is_cmakes_and_the_clis():
    assert remex.__version__ == remex._native.version and remex.__version__.count(".") == 2
    cli = subprocess.run([CLI_BIN, "--version"], capture_output=True, text=True, check=True)
    assert cli.stdout.split() == ["remex", remex.__version__]


def test_tensor_html_shows_dtype_shape_and_stats(session):
    t = session.upload(np.array([[1.0, -2.0, np.nan], [4.0, np.inf, 0.5]], np.float32))
    page = Page(t._repr_html_())
    assert page.self_contained()
    assert "remex.Tensor" in page.all_text and "float32 [2, 3], 24 bytes" in page.all_text
    stats = table_dict(page.tables[0])
    assert stats["count"] == "6" and stats["nan_count"] == "1" and stats["inf_count"] == "1"
    assert float(stats["min"]) == -2.0 and float(stats["max"]) == 4.0  # over the finite values
    assert float(stats["mean"]) == pytest.approx(t.stats()["mean"], rel=1e-5)

    ints = Page(session.upload(np.arange(10, dtype=np.int64).reshape(2, 5))._repr_html_())
    assert "int64 [2, 5], 80 bytes" in ints.all_text
    assert float(table_dict(ints.tables[0])["max"]) == 9


def test_tensor_html_skips_stats_over_the_bound_and_of_freed_tensors(session, monkeypatch):
    t = session.upload(np.zeros((4, 4), np.float32))
    monkeypatch.setattr(remex, "REPR_STATS_MAX_BYTES", 63)
    page = Page(t._repr_html_())
    assert page.tables == [] and "stats not computed: 64 bytes is over remex.REPR_STATS_MAX_BYTES" in page.all_text
    monkeypatch.setattr(remex, "REPR_STATS_MAX_BYTES", 64)
    assert Page(t._repr_html_()).tables != []
    t.free()
    page = Page(t._repr_html_())
    assert page.tables == [] and "freed" in page.all_text
    # A closed session's tensor: the display says why, and does not raise.
    u = session.upload(np.zeros(3, np.float32))
    session.close()
    assert "stats unavailable: the session is closed" in Page(u._repr_html_()).all_text


def test_benchmark_html_has_the_summary_and_a_histogram(session, models):
    m = session.load(models["add_relu"])
    r = m.benchmark({"x": np.ones((2, 3), np.float32)}, number=2, repeat=40, **QUICK)
    page = Page(r._repr_html_())
    assert page.self_contained()
    assert f"main: {len(r.samples_ms)} samples \u00d7 2 calls" in page.all_text
    assert page.tables[0][0] == ["", "ms [interval at 0.95]"]
    summary = {row[0]: row[1] for row in page.tables[0][1:]}
    assert float(summary["median"].split()[0]) == pytest.approx(r.median_ms, rel=1e-3)
    assert float(summary["min"]) == pytest.approx(r.min_ms, rel=1e-3)
    assert float(summary["max"]) == pytest.approx(r.max_ms, rel=1e-3)
    assert float(summary["first call (cold)"]) == pytest.approx(r.phases_ms["first_invoke"], rel=1e-3)
    assert r.stability["verdict"] in page.all_text
    # Under 100 samples every sample is drawn: the bars' counts add up to them.
    svg = [tag for tag, _ in page.tags if tag == "svg"]
    assert len(svg) == 1 and 5 <= len(page.bars) <= 30 and sum(page.bars) == len(r.samples_ms)
    assert f"{len(r.samples_ms)} samples (ms)" in page.all_text


def test_histogram_leaves_outliers_out_and_says_so():
    samples = [1.0 + 0.001 * i for i in range(200)] + [500.0, 900.0]
    page = Page(remex._html.histogram_svg(samples))
    drawn = sum(page.bars)
    assert drawn + 3 == len(samples)  # above the 99th percentile: the two outliers and the largest regular one
    assert "3 above" in page.all_text and "not drawn" in page.all_text
    assert "900 ms" not in page.all_text


def test_load_scenario_html_has_one_row_per_level(session, models):
    m = session.load(models["add_relu"])
    r = m.benchmark({"x": np.ones((2, 3), np.float32)}, scenario="single-stream", concurrency="1:2",
                    min_duration_s=0.1, max_trials=1)
    page = Page(r._repr_html_())
    assert page.self_contained() and "scenario single-stream: 2 levels" in page.all_text
    header, *rows = page.tables[0]
    assert header[:3] == ["concurrency", "target QPS", "throughput QPS"]
    assert [row[0] for row in rows] == ["1", "2"]
    for row, level in zip(rows, r.levels):
        cells = dict(zip(header, row))
        assert float(cells["p99 ms"]) == pytest.approx(level["latency_ms"]["p99"], rel=1e-3)
        assert cells["queries"] == str(level["queries"])


def test_profile_html_is_a_table_of_ops_and_nodes(session, tmp_path):
    # A node whose name is markup: shown as text, escaped.
    name = "<script>alert('x')</script> & co"
    b = numpy_helper.from_array(np.array([[0.5, -1.0, 2.0]], np.float32), "b")
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["s"], name=name), helper.make_node("Tanh", ["s"], ["y"], name="tanh")],
        "named", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [b])
    path = str(tmp_path / "named.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    m = session.load(path)
    p = m.profile({"x": np.ones((2, 3), np.float32)}, runs=3)
    text = p._repr_html_()
    page = Page(text)
    assert page.self_contained() and "<script>" not in text
    assert f"ms per call on the device (median of {p.runs} runs)" in page.all_text
    ops, nodes = page.tables
    assert ops[0][:4] == ["op / instruction", "kind", "calls", "total ms"]
    assert [row[0] for row in ops[1:]] == [r["name"] for r in p.records]
    assert [row[0] for row in nodes[1:]] == [n["name"] for n in p.nodes]
    assert any(n["name"].startswith(name) for n in p.nodes) and name in page.all_text  # Add+Tanh fused: "NAME+tanh"


def test_compile_writes_the_rmx_that_remex_compile_writes(session, models, tmp_path):
    out = tmp_path / "dynamic.rmx"
    c = remex.compile(models["dynamic"], out, shapes={"x": (3, 4)})
    assert c.path == str(out) and os.path.getsize(out) == c.executable_bytes
    assert c.inputs == [remex.ValueInfo("x", "float32", (3, 4))] and c.outputs[0].shape == (3, 4)
    assert c.report["options"]["layout"] == "NCHW" and c.stats["kernels"] >= 1
    # The CLI's compile with the same options writes the same bytes.
    cli_out = tmp_path / "cli.rmx"
    subprocess.run([CLI_BIN, "compile", models["dynamic"], "-o", str(cli_out), "--shape", "x=3x4"], check=True,
                   capture_output=True)
    assert cli_out.read_bytes() == out.read_bytes()
    m = session.load(str(out))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(m.run({"x": x})["y"], x * 2)

    symbolic = remex.compile(models["dynamic"], tmp_path / "bounded.rmx", bounds={"N": (1, 8)})
    assert symbolic.inputs[0].shape == ("N", 4)
    assert symbolic.report["symbols"] == [{"name": "N", "min": 1, "max": 8}]


def test_compile_errors_name_the_keyword_or_file(models, tmp_path):
    with pytest.raises(remex.InvalidArgument, match="layout"):
        remex.compile(models["add_relu"], tmp_path / "a.rmx", layout="NCWH")
    with pytest.raises(remex.InvalidArgument, match="^shapes"):
        remex.compile(models["add_relu"], tmp_path / "a.rmx", shapes={"x": (-1, 3)})
    with pytest.raises(remex.NotFound, match="missing.onnx"):
        remex.compile(tmp_path / "missing.onnx", tmp_path / "a.rmx")
    with pytest.raises(remex.NotFound, match="cannot write"):
        remex.compile(models["add_relu"], tmp_path / "no" / "a.rmx")
    assert not (tmp_path / "a.rmx").exists()
