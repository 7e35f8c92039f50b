#!/usr/bin/python3
"""The reports of `remex bench` against a real remex-server process.

BenchReportSchemaTest: the JSON of `remex bench --json` (with and without --profile) and
the fixtures with a "load" object (tests/data/bench_reports/) validate against
docs/schema/bench.schema.json (JSON Schema 2020-12, python3-jsonschema), and reports the
schema must refuse are refused.

BenchReportHtmlTest: the pages of `remex bench --html` and `remex report --html` open in
Debian's chromium, headless; every chart the page carries was drawn by Chart.js (its
canvas has data-rendered="true"), and the page asks nothing of the network. The CSV of
--csv holds the samples (or the load levels) of the same report.

Usage: bench_report_test.py --remex BIN --server BIN --source-dir DIR [BenchReportSchemaTest |
       BenchReportHtmlTest | other unittest arguments]  (exit status 1 when a test fails)
"""

import argparse
import csv
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import jsonschema
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REMEX = SERVER = SOURCE_DIR = None


def schema_path():
    return os.path.join(SOURCE_DIR, "docs", "schema", "bench.schema.json")


def fixture(name):
    return os.path.join(SOURCE_DIR, "tests", "data", "bench_reports", name)


def write_model(path):
    """z = Relu(x @ W + b): x float32 [4, 32]."""
    w = (np.arange(32 * 32, dtype=np.float32).reshape(32, 32) % 7 - 3) / 10
    b = np.linspace(-1, 1, 32, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["y"]),
         helper.make_node("Relu", ["y"], ["z"])],
        "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 32])],
        [numpy_helper.from_array(w.astype(np.float32), "W"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


class ServerFixture(unittest.TestCase):
    """A remex-server on loopback and a folder with the model, per class."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="remex-bench-report-test-")
        cls.model = os.path.join(cls.work, "dense.onnx")
        write_model(cls.model)
        cls.server = subprocess.Popen([SERVER, "--listen", "127.0.0.1:0", "--quiet"], stdout=subprocess.PIPE,
                                      text=True)
        first = cls.server.stdout.readline()
        m = re.search(r"127\.0\.0\.1:(\d+)", first)
        if not m:
            cls.server.kill()
            raise RuntimeError("remex-server did not start: " + first)
        cls.address = "127.0.0.1:" + m.group(1)
        cls.env = dict(os.environ)
        cls.env.pop("REMEX_TOKEN", None)
        with open(schema_path()) as f:
            cls.schema = json.load(f)
        cls.validator = jsonschema.Draft202012Validator(cls.schema, format_checker=jsonschema.FormatChecker())

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        cls.server.wait()
        shutil.rmtree(cls.work, ignore_errors=True)

    def remex(self, *args, expect=0):
        r = subprocess.run([REMEX, *args], cwd=self.work, env=self.env, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, expect, "remex %s:\n%s%s" % (" ".join(args), r.stdout, r.stderr))
        return r

    def bench(self, *extra):
        """`remex bench --json` of the model on the server, as a dict."""
        # A fixed run of 12 samples (no extension to a valid run's duration).
        quick = () if "--scenario" in extra else ("--repeat", "12", "--min-duration-s", "0", "--min-samples", "0",
                                                  "--max-trials", "1")
        r = self.remex("bench", self.model, "--server", self.address, *quick, "--json", *extra)
        return json.loads(r.stdout)

    def assertValid(self, report, what):
        errors = sorted(self.validator.iter_errors(report), key=lambda e: list(e.path))
        self.assertEqual([], ["%s: %s" % ("/".join(map(str, e.path)), e.message) for e in errors],
                         "%s does not follow %s" % (what, schema_path()))

    def assertInvalid(self, report, what):
        self.assertFalse(self.validator.is_valid(report), "the schema accepts " + what)


class BenchReportSchemaTest(ServerFixture):
    """The bench JSON against docs/schema/bench.schema.json."""

    def test_the_schema_is_a_2020_12_schema(self):
        jsonschema.Draft202012Validator.check_schema(self.schema)
        self.assertEqual(self.schema["$schema"], "https://json-schema.org/draft/2020-12/schema")
        self.assertEqual(self.schema["properties"]["schema_version"]["const"], 2)

    def test_load_scenario_json_follows_the_schema(self):
        for args in (("--scenario", "single-stream", "--concurrency", "1:2", "--min-duration-s", "0.2"),
                     ("--scenario", "server", "--target-qps", "100", "--min-duration-s", "0.3"),
                     ("--scenario", "server", "--find-peak", "--latency-bound-ms", "50", "--target-qps", "200",
                      "--min-duration-s", "0.2"),
                     ("--scenario", "offline", "--min-duration-s", "0.2")):
            report = self.bench(*args)
            self.assertIn("load", report)
            self.assertValid(report, "remex bench --json " + " ".join(args))

    def test_bench_json_follows_the_schema(self):
        plain = self.bench()
        self.assertEqual((plain["schema"], plain["schema_version"]), ("remex.bench", 2))
        self.assertEqual(len(plain["benchmark"]["samples_ms"]), 12)
        self.assertNotIn("profile", plain)
        self.assertValid(plain, "remex bench --json")
        profiled = self.bench("--profile")
        self.assertGreater(len(profiled["profile"]["rows"]), 0)
        self.assertEqual(profiled["profile"]["runs"], 5)
        self.assertGreater(len(profiled["profile"]["nodes"]), 0)
        self.assertValid(profiled, "remex bench --profile --json")
        self.assertRegex(profiled["date"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertIn(" bench ", profiled["command"])

    def test_load_fixtures_follow_the_schema(self):
        for name in ("server_sweep_profile.json", "offline.json"):
            with open(fixture(name)) as f:
                report = json.load(f)
            self.assertIn("load", report)
            self.assertValid(report, name)

    def test_the_schema_refuses_what_breaks_a_reader(self):
        plain = self.bench()
        with open(fixture("server_sweep_profile.json")) as f:
            load = json.load(f)
        broken = []

        def case(report, path, value, what):
            r = json.loads(json.dumps(report))
            node = r
            for key in path[:-1]:
                node = node[key]
            if value is KeyError:
                del node[path[-1]]
            else:
                node[path[-1]] = value
            broken.append((r, what))

        case(plain, ["schema_version"], 3, "a newer schema_version")
        case(plain, ["schema"], "remex.run", "another kind of report")
        case(plain, ["benchmark", "samples_ms"], KeyError, "a benchmark without samples_ms")
        case(plain, ["benchmark", "p99_ms"], "12", "a percentile as a string")
        case(plain, ["benchmark", "median_ms"], -1.0, "a negative time")
        case(plain, ["benchmark"], KeyError, "neither benchmark nor load")
        case(load, ["load", "levels", 0, "throughput_qps"], KeyError, "a level without throughput_qps")
        case(load, ["load", "scenario"], "burst", "an unknown scenario")
        case(load, ["load", "levels", 1, "percentiles", 0, "bounded"], "yes", "bounded as a string")
        case(load, ["profile", "rows", 0, "calls"], 1.5, "a fractional call count")
        profiled = self.bench("--profile", "--profile-runs", "2")
        case(profiled, ["profile", "nodes", 0, "median_ms"], KeyError, "a node without its median")
        case(profiled, ["profile", "nodes", 0, "inputs", 0], {"dtype": "float32", "shape": [-1]},
             "an operand of a negative dimension")
        case(profiled, ["profile", "runs"], 0, "no runs")
        for report, what in broken:
            self.assertInvalid(report, what)
        # Keys the schema does not name are welcome (additive changes keep the version).
        plain["benchmark"]["new_statistic_ms"] = 1.0
        plain["new_section"] = {"anything": [1, 2]}
        self.assertValid(plain, "a report with keys the schema does not name")

    def test_run_and_check_name_their_schema(self):
        r = self.remex("run", self.model, "--server", self.address, "--fetch", "none", "--json")
        report = json.loads(r.stdout)
        self.assertEqual((report["schema"], report["schema_version"]), ("remex.run", 1))


class DomCanvases(html.parser.HTMLParser):
    """The canvases of a page, the text of #render-status and its attributes, and the <title>."""

    def __init__(self):
        super().__init__()
        self.canvases, self.status, self.status_attrs, self.title = {}, "", {}, ""
        self._in = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "canvas":
            self.canvases[attrs.get("id")] = attrs
        elif attrs.get("id") == "render-status":
            self._in, self.status_attrs = "status", attrs
        elif tag == "title":
            self._in = "title"

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in == "status":
            self.status += data
        elif self._in == "title":
            self.title += data


class BenchReportHtmlTest(ServerFixture):
    """The HTML pages in a real headless browser, and the CSV beside them."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.chromium = shutil.which("chromium")

    def render(self, page):
        """The DOM of `page` after its scripts ran in headless chromium."""
        self.assertIsNotNone(self.chromium, "chromium is not installed: scripts/setup-deps.sh installs it")
        profile = tempfile.mkdtemp(prefix="chromium-", dir=self.work)
        r = subprocess.run([self.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            "--user-data-dir=" + profile, "--virtual-time-budget=10000", "--dump-dom",
                            "file://" + os.path.abspath(page)],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr[-4000:])
        dom = DomCanvases()
        dom.feed(r.stdout)
        return dom

    def assertRendered(self, page, expected_ids):
        with open(page, encoding="utf-8") as f:
            text = f.read()
        # Nothing from the network, nothing from beside the file.
        self.assertIsNone(re.search(r"""(src|href|action)\s*=\s*["']?\s*[a-z]*:?//""", text, re.I))
        self.assertIn("default-src 'none'", text)
        dom = self.render(page)
        self.assertEqual(sorted(dom.canvases), sorted(expected_ids), dom.status)
        for cid in expected_ids:
            self.assertEqual(dom.canvases[cid].get("data-rendered"), "true",
                             "chart %s of %s was not drawn: %s" % (cid, page, dom.status))
        self.assertEqual(dom.status_attrs.get("data-rendered"), str(len(expected_ids)), dom.status)
        self.assertEqual(dom.status.strip(), "%d of %d charts rendered" % (len(expected_ids), len(expected_ids)))
        return dom

    def test_bench_page_draws_its_charts_and_the_csv_holds_the_samples(self):
        page, table = os.path.join(self.work, "bench.html"), os.path.join(self.work, "bench.csv")
        report = self.bench("--profile", "--html", page, "--csv", table)
        self.assertRendered(page, ["chart-histogram", "chart-timeline", "chart-profile"])
        with open(table, newline="") as f:
            rows = list(csv.reader(f))
        self.assertEqual(rows[0], ["sample", "latency_ms"])
        self.assertEqual([int(r[0]) for r in rows[1:]], list(range(12)))
        self.assertEqual([float(r[1]) for r in rows[1:]], report["benchmark"]["samples_ms"])
        # The saved JSON makes the same page again.
        saved, again = os.path.join(self.work, "bench.json"), os.path.join(self.work, "again.html")
        with open(saved, "w") as f:
            json.dump(report, f)
        self.remex("report", saved, "--html", again)
        with open(page, "rb") as a, open(again, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_load_pages_draw_the_throughput_latency_curve(self):
        page = os.path.join(self.work, "sweep.html")
        self.remex("report", fixture("server_sweep_profile.json"), "--html", page, "--csv", page + ".csv")
        dom = self.assertRendered(page, ["chart-histogram", "chart-timeline", "chart-throughput-latency",
                                         "chart-profile"])
        # The model's name, "</script><script>document.title='injected'...", stayed text.
        self.assertNotEqual(dom.title, "injected")
        self.assertIn("</script><script>", dom.title)
        with open(page + ".csv", newline="") as f:
            rows = list(csv.DictReader(f))
        with open(fixture("server_sweep_profile.json")) as f:
            levels = json.load(f)["load"]["levels"]
        self.assertEqual([int(r["concurrency"]) for r in rows], [lv["concurrency"] for lv in levels])
        self.assertEqual([float(r["p99_ms"]) for r in rows], [lv["latency_ms"]["p99"] for lv in levels])
        self.assertEqual({r["p99_lower_ms"] for r in rows}, {""})  # not bounded in the fixture
        # A level without a timeline or percentiles: the curve alone.
        page = os.path.join(self.work, "offline.html")
        self.remex("report", fixture("offline.json"), "--html", page)
        self.assertRendered(page, ["chart-throughput-latency"])

    def test_a_real_sweep_draws_its_curve(self):
        # A concurrency sweep generated on the server, drawn: the curve from its levels,
        # the histogram and timeline from its last level's queries.
        page, table = os.path.join(self.work, "real_sweep.html"), os.path.join(self.work, "real_sweep.csv")
        report = self.bench("--scenario", "single-stream", "--concurrency", "1:3", "--min-duration-s", "0.2",
                            "--html", page, "--csv", table)
        self.assertEqual(len(report["load"]["levels"]), 3)
        self.assertRendered(page, ["chart-histogram", "chart-timeline", "chart-throughput-latency"])
        with open(table, newline="") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([int(r["concurrency"]) for r in rows], [1, 2, 3])

    def test_unwritable_files_fail_before_the_work(self):
        r = self.remex("bench", self.model, "--server", self.address, "--html",
                       os.path.join(self.work, "missing", "r.html"), expect=3)
        self.assertIn("cannot write the HTML report", r.stderr)
        self.assertEqual(r.stdout, "")
        r = self.remex("bench", self.model, "--server", self.address, "--csv", self.work, expect=3)
        self.assertIn("cannot write the CSV report", r.stderr)
        r = self.remex("report", fixture("offline.json"), "--csv", "same", "--html", "same", expect=2)
        self.assertIn("--csv and --html name the same file", r.stderr)
        r = self.remex("report", self.model, "--html", "x.html", expect=2)
        self.assertIn("is no JSON object", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.work, "x.html")))


def main():
    global REMEX, SERVER, SOURCE_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--remex", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--source-dir", required=True)
    args, rest = parser.parse_known_args()
    REMEX, SERVER = os.path.abspath(args.remex), os.path.abspath(args.server)
    SOURCE_DIR = os.path.abspath(args.source_dir)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
