#!/usr/bin/python3
"""`remex dashboard` in a real browser.

A temporary SQLite results store is filled by real `remex bench --record` runs of a
small model on the embedded server (time evaluator, one with --profile, a server
scenario and a concurrency sweep), by seven copies of the profiled run of which the two
newest are 50 % slower (a regression, tests/dashboard_seed.cc), and by the self-tests
the farm's two servers record in it (--results, every second). A real Redis holds a farm
of two real `remex-server --farm` processes: one leased by a real `remex farm lease` (a second one
waits in the pool's queue), one quarantined (--inject-self-test-failure). A real
`remex dashboard` process serves all of it on a loopback port.

Headless Chromium (Debian's chromium and chromium-driver, driven by python3-selenium)
loads each page at a desktop size and at 375x812 (a phone), checks its content, that
every chart drew (each canvas[data-chart] has data-rendered="true" and #render-status
says "N of N charts rendered"), that the page is no wider than the screen, and that the
browser's console has no error; screenshots go to --out (printed). Further dashboard
processes check the token's login form, HTTPS with mutual TLS, the refusal of a
non-loopback address without authentication, and a clean stop on SIGINT and SIGTERM.

Usage: dashboard_test.py --remex BIN --server BIN --seed BIN --out DIR [unittest arguments]
Exit status 1 when a test fails, 77 when chromium, chromedriver or selenium is missing.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REMEX = SERVER = SEED = OUT = None
CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    webdriver = None

SIZES = {"desktop": (1280, 900), "phone": (375, 812)}


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


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_address(proc, pattern, what):
    """The first match of `pattern` in `proc`'s first stdout line."""
    line = proc.stdout.readline()
    m = re.search(pattern, line)
    if not m:
        proc.kill()
        raise RuntimeError("%s did not start: %r" % (what, line))
    return m.group(1)


def fetch(url, data=None, headers=None):
    """(status, headers, body) of one HTTP request; errors too."""
    request = urllib.request.Request(url, data=data, headers=headers or {})
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=30) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class DashboardTest(unittest.TestCase):
    """One store, one farm, one dashboard; every page in Chromium at two sizes."""

    procs = []

    @classmethod
    def start(cls, args, **kwargs):
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=cls.env, **kwargs)
        cls.procs.append(proc)
        return proc

    @classmethod
    def remex(cls, *args):
        r = subprocess.run([REMEX, *args], cwd=cls.work, env=cls.env, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("remex %s failed (%d):\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    @classmethod
    def bench(cls, *extra):
        """A real `remex bench --record` run on the embedded server: its run id."""
        quick = () if "--scenario" in extra else ("--repeat", "12", "--min-duration-s", "0", "--min-samples", "0",
                                                  "--max-trials", "1")
        r = cls.remex("bench", cls.model, *quick, "--record", cls.store, *extra)
        m = re.search(r"recorded as run (\d+)", r.stderr)
        assert m, r.stderr
        return int(m.group(1))

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="remex-dashboard-test-")
        cls.env = dict(os.environ)
        for name in ("REMEX_TOKEN", "REMEX_RESULTS", "REMEX_FARM", "REMEX_SERVER"):
            cls.env.pop(name, None)
        cls.env["REMEX_GIT_COMMIT"] = "0123456789abcdef"
        cls.env["REMEX_GIT_BRANCH"] = "main"
        cls.model = os.path.join(cls.work, "dense.onnx")
        write_model(cls.model)
        cls.store = "sqlite://" + os.path.join(cls.work, "results.sqlite")
        try:
            cls.fill_store()
            cls.start_farm()
            cls.dashboard = cls.start([REMEX, "dashboard", "--results", cls.store, "--farm", cls.redis,
                                       "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE)
            cls.url = read_address(cls.dashboard, r"^remex dashboard: serving (http://127\.0\.0\.1:\d+/)$",
                                   "remex dashboard").rstrip("/")
            options = webdriver.ChromeOptions()
            options.binary_location = CHROMIUM
            for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--no-first-run", "--user-data-dir=" + os.path.join(cls.work, "chromium")):
                options.add_argument(arg)
            options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
            cls.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
            cls.driver.set_page_load_timeout(60)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def fill_store(cls):
        cls.plain = [cls.bench() for _ in range(3)]
        cls.profiled = cls.bench("--profile")
        cls.server_run = cls.bench("--scenario", "server", "--target-qps", "100", "--min-duration-s", "0.3")
        cls.sweep = cls.bench("--scenario", "single-stream", "--concurrency", "1:3", "--min-duration-s", "0.2")
        seeded = subprocess.run([SEED, cls.store, "regression", str(cls.profiled)], capture_output=True, text=True,
                                check=True)
        cls.seeded = [int(i) for i in seeded.stdout.split()]
        assert len(cls.seeded) == 7, seeded.stdout

    @classmethod
    def start_farm(cls):
        port = free_port()
        cls.redis_proc = cls.start(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                    "--appendonly", "no"], stderr=subprocess.DEVNULL)
        cls.redis = "redis://127.0.0.1:%d" % port
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode != 0:
            assert time.monotonic() < deadline and cls.redis_proc.poll() is None, "redis-server did not start"
            time.sleep(0.05)
        cls.devices = []
        for extra in ([], ["--inject-self-test-failure"]):
            # Each server records its self-tests in the store, at start and every second (no
            # latency judgement: a loaded machine must not quarantine the healthy one).
            proc = cls.start([SERVER, "--listen", "127.0.0.1:0", "--quiet", "--farm", cls.redis, "--pool", "dash",
                              "--labels", "rack=b7,kind=test", "--results", cls.store, "--self-test-interval", "1s",
                              "--self-test-drift", "0", *extra], stderr=subprocess.DEVNULL)
            cls.devices.append(read_address(proc, r"(127\.0\.0\.1:\d+)", "remex-server --farm"))
        cls.healthy, cls.quarantined = cls.devices
        # One client holds the healthy device; another waits in the pool's queue.
        cls.holder = cls.start([REMEX, "farm", "lease", "--farm", cls.redis, "--pool", "dash", "--lease-wait", "10",
                                "--", "sleep", "600"], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while "leased " not in (line := cls.holder.stderr.readline()):
            assert time.monotonic() < deadline and line, "remex farm lease did not lease: " + line
        cls.waiter = cls.start([REMEX, "farm", "lease", "--farm", cls.redis, "--pool", "dash", "--lease-wait", "600",
                                "--", "true"], stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            status = json.loads(cls.remex("farm", "status", "--farm", cls.redis, "--json").stdout)
            pools = {p["name"]: p for p in status["pools"]}
            if pools.get("dash", {}).get("waiting") == 1:
                break
            assert time.monotonic() < deadline, "the second lease is not waiting: %s" % status
            time.sleep(0.1)
        # Three self-tests of each device in the store: a line to draw.
        deadline = time.monotonic() + 30
        while True:
            history = json.loads(cls.remex("history", "--results", cls.store, "--model", "self-test", "--json").stdout)
            counts = {s["device_class"]: s["run_count"] for s in history["series"]}
            if all(counts.get("dash/" + d, 0) >= 3 for d in cls.devices):
                break
            assert time.monotonic() < deadline, "the servers' self-tests were not recorded: %s" % counts
            time.sleep(0.2)

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "driver", None):
            cls.driver.quit()
        for proc in reversed(cls.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        shutil.rmtree(cls.work, ignore_errors=True)

    # ---- the browser -------------------------------------------------------------------

    def load(self, path, size, name, console=True):
        """Loads `path` at `size`, waits for its charts, checks what every page must hold
        and saves a screenshot as OUT/NAME-SIZE.png; returns the number of charts."""
        d = self.driver
        d.set_window_size(*SIZES[size])
        d.get_log("browser")  # what earlier pages logged
        d.get(self.url + path)
        canvases = d.find_elements(By.CSS_SELECTOR, "canvas[data-chart]")
        expected = "%d of %d charts rendered" % (len(canvases), len(canvases))
        status = d.find_element(By.ID, "render-status")
        try:
            WebDriverWait(d, 30).until(lambda _: status.text.strip() == expected or "failed" in status.text)
        except Exception:
            pass
        self.assertEqual(status.text.strip(), expected, "%s at %s" % (path, size))
        for c in canvases:
            self.assertEqual(c.get_attribute("data-rendered"), "true", "%s: chart %s" % (path, c.get_attribute("id")))
            box = d.execute_script("var r = arguments[0].getBoundingClientRect(); return [r.width, r.height];", c)
            self.assertGreater(box[0], 100, "%s: chart %s has no width" % (path, c.get_attribute("id")))
            self.assertGreater(box[1], 100)
        if console:
            errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
            self.assertEqual(errors, [], "%s at %s: the console has errors" % (path, size))
        # No wider than the screen: wide tables scroll inside their own box.
        width, inner = d.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth];")
        self.assertLessEqual(width, inner, "%s is wider than a %s screen" % (path, size))
        self.screenshot("%s-%s.png" % (name, size))
        return len(canvases)

    def screenshot(self, name):
        path = os.path.join(OUT, name)
        d = self.driver
        try:  # the whole page, not only the window
            height = d.execute_script("return document.documentElement.scrollHeight;")
            width = d.execute_script("return document.documentElement.clientWidth;")
            shot = d.execute_cdp_cmd("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": min(height, 12000), "scale": 1}})
            import base64
            with open(path, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
        except Exception:
            d.save_screenshot(path)
        self.assertTrue(os.path.getsize(path) > 1000, path)

    def text(self):
        return self.driver.find_element(By.TAG_NAME, "main").text

    def series_key(self, device_class, scenario="time-evaluator"):
        _, _, body = fetch(self.url + "/api/overview")
        for s in json.loads(body)["series"]:
            if s["device_class"] == device_class and s["scenario"] == scenario:
                return s["series_key"]
        self.fail("no series of device class %s" % device_class)

    # ---- the pages ---------------------------------------------------------------------

    def test_overview(self):
        for size in SIZES:
            self.assertEqual(self.load("/", size, "overview"), 0)
            main = self.text()
            self.assertIn("dense.onnx", main)
            self.assertIn("time-evaluator", main)
            self.assertIn("seeded:regression", main)
            self.assertIn("server samples_per_query=1 target_qps=100", main)
            row = self.driver.find_element(By.CSS_SELECTOR, "tr[data-series='%s']" % self.series_key("seeded:regression"))
            self.assertEqual(row.find_element(By.CSS_SELECTOR, ".state").text, "regression")
            self.assertIn(str(self.seeded[-1]), row.text)  # the latest run
            farm = self.driver.find_element(By.ID, "farm-summary").text
            self.assertRegex(farm, r"dash\s+2\s+0\s+1\s+0\s+1\s+1")  # devices idle leased draining quarantined waiting
            self.assertIn("2 self-test series", main)

    def test_series_marks_the_regression_and_links_each_point(self):
        key = self.series_key("seeded:regression")
        for size in SIZES:
            self.assertEqual(self.load("/series/" + key, size, "series-regression"), 1)
            banner = self.driver.find_element(By.ID, "finding").text
            self.assertTrue(banner.startswith("regression"), banner)
            self.assertRegex(banner, r"median \+[45]\d\.\d %")
            for run in self.seeded:
                self.driver.find_element(By.CSS_SELECTOR, "tr[data-run='%d'] a[href='/run/%d']" % (run, run))
            slow = self.driver.find_element(By.CSS_SELECTOR, "tr[data-run='%d']" % self.seeded[-1]).text
            self.assertIn("regression", slow)
        # A point of the chart is a link to its run: click the newest one.
        self.driver.set_window_size(*SIZES["desktop"])
        self.driver.get(self.url + "/series/" + key)
        canvas = self.driver.find_element(By.ID, "chart-series")
        WebDriverWait(self.driver, 30).until(lambda _: canvas.get_attribute("data-rendered") == "true")
        # Wholly in view, so that the pointer's offset from its centre is from the canvas's centre.
        x, y, w, h, run = self.driver.execute_script("""
            arguments[0].scrollIntoView({block: 'center'});
            var c = arguments[0], chart = Chart.getChart(c), meta = chart.getDatasetMeta(2);
            var p = meta.data[meta.data.length - 1], r = c.getBoundingClientRect();
            return [p.x, p.y, r.width, r.height, chart.data.datasets[2].data[meta.data.length - 1].id];""", canvas)
        self.assertEqual(run, self.seeded[-1])
        ActionChains(self.driver).move_to_element_with_offset(canvas, int(x - w / 2), int(y - h / 2)).click().perform()
        WebDriverWait(self.driver, 20).until(lambda d: d.current_url.endswith("/run/%d" % run))

    def test_real_series_draws_its_band(self):
        key = self.series_key(self.real_class())
        data = json.loads(fetch(self.url + "/api/series/" + key)[2])
        self.assertEqual(len(data["runs"]), 4)  # three plain runs and the profiled one
        self.assertTrue(all(r["ci_low_ms"] <= r["median_ms"] <= r["ci_high_ms"] for r in data["runs"]))
        for size in SIZES:
            self.assertEqual(self.load("/series/" + key, size, "series"), 1)
            self.assertIn("insufficient data", self.driver.find_element(By.ID, "finding").text)

    def real_class(self):
        _, _, body = fetch(self.url + "/api/overview")
        for s in json.loads(body)["series"]:
            if s["scenario"] == "time-evaluator" and s["device_class"] != "seeded:regression":
                return s["device_class"]
        self.fail("no real time-evaluator series")

    def test_run_pages_draw_the_report(self):
        for size in SIZES:
            self.assertEqual(self.load("/run/%d" % self.profiled, size, "run-profile"), 3)
            ids = {c.get_attribute("id") for c in self.driver.find_elements(By.CSS_SELECTOR, "canvas[data-chart]")}
            self.assertEqual(ids, {"chart-histogram", "chart-timeline", "chart-profile"})
            main = self.text()
            self.assertIn("0123456789abcdef", main)  # the commit
            self.assertIn("Environment", main)
            ops = self.driver.find_elements(By.CSS_SELECTOR, "#profile tr")
            self.assertGreater(len(ops), 1)
            self.assertEqual(self.load("/run/%d" % self.sweep, size, "run-sweep"), 3)
            ids = {c.get_attribute("id") for c in self.driver.find_elements(By.CSS_SELECTOR, "canvas[data-chart]")}
            self.assertIn("chart-throughput-latency", ids)
            levels = self.driver.find_elements(By.CSS_SELECTOR, "table.levels tr")
            self.assertEqual(len(levels), 4)  # the header and three concurrency levels
            self.assertGreaterEqual(self.load("/run/%d" % self.server_run, size, "run-server"), 1)

    def test_compare_lists_per_op_differences_largest_first(self):
        a, b = self.seeded[0], self.seeded[-1]
        for size in SIZES:
            self.assertEqual(self.load("/compare?a=%d&b=%d" % (a, b), size, "compare"), 2)
            rows = self.driver.find_elements(By.CSS_SELECTOR, "#ops tr")[1:]
            self.assertGreater(len(rows), 1)
            diffs = [abs(float(r.find_elements(By.TAG_NAME, "td")[4].text)) for r in rows]
            self.assertEqual(diffs, sorted(diffs, reverse=True))
            self.assertGreater(diffs[0], 0)
            summary = self.driver.find_element(By.ID, "summary").text
            self.assertRegex(summary, r"median_ms .* \+5\d\.\d %")
        # A run without a profile says so, and the page still draws.
        self.load("/compare?a=%d&b=%d" % (self.plain[0], self.profiled), "desktop", "compare-no-profile")
        self.assertIn("has a per-op profile", self.driver.find_element(By.ID, "no-profile").text)

    def test_farm(self):
        for size in SIZES:
            self.assertEqual(self.load("/farm", size, "farm"), 2)
            healthy = self.driver.find_element(By.CSS_SELECTOR, "tr[data-device='%s']" % self.healthy)
            cells = [td.text for td in healthy.find_elements(By.TAG_NAME, "td")]
            self.assertEqual(cells[2], "leased")
            self.assertIn("rack=b7", cells[3])
            self.assertTrue(cells[4], "no holder named")
            self.assertRegex(cells[5], r"^\d+(\.\d)? s$")  # the lease's age
            self.assertEqual(cells[6], "ok")
            sick = self.driver.find_element(By.CSS_SELECTOR, "tr[data-device='%s']" % self.quarantined)
            cells = [td.text for td in sick.find_elements(By.TAG_NAME, "td")]
            self.assertEqual(cells[2], "quarantined")
            self.assertNotEqual(cells[6], "ok")  # why
            pools = self.driver.find_element(By.ID, "pools").text
            self.assertRegex(pools, r"dash\s+2\s+0\s+1\s+0\s+1\s+1")
            tests = self.driver.find_element(By.ID, "self-tests").text
            self.assertIn("dash/" + self.healthy, tests)
            self.assertIn("unlike the CPU", tests)  # the failing server's own self-test error

    def test_errors_are_pages(self):
        status, _, body = fetch(self.url + "/run/99999999")
        self.assertEqual(status, 404)
        self.assertIn("no run 99999999", body)
        status, _, body = fetch(self.url + "/run/12abc")
        self.assertEqual(status, 400)
        self.assertIn("run id", body)
        status, _, body = fetch(self.url + "/series/NOT-A-KEY")
        self.assertEqual(status, 400)
        status, _, _ = fetch(self.url + "/nothing")
        self.assertEqual(status, 404)
        status, headers, body = fetch(self.url + "/api/run/%d" % self.profiled)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["run"]["id"], self.profiled)
        self.assertIn("default-src 'none'", headers["Content-Security-Policy"])
        status, _, _ = fetch(self.url + "/", data=b"x=1")
        self.assertEqual(status, 405)
        self.load("/run/99999999", "phone", "not-found", console=False)  # the 404 itself is logged
        self.assertIn("no run 99999999", self.driver.find_element(By.ID, "error").text)

    def test_a_token_guards_the_pages_and_the_form_logs_in(self):
        token = os.path.join(self.work, "dashboard.token")
        with open(token, "w") as f:
            f.write("a-dashboard-token-of-32-bytes-00\n")
        os.chmod(token, 0o600)
        proc = self.start([REMEX, "dashboard", "--results", self.store, "--listen", "127.0.0.1:0", "--token-file",
                           token], stderr=subprocess.PIPE)
        url = read_address(proc, r"(http://127\.0\.0\.1:\d+)/$", "remex dashboard --token-file")
        status, headers, _ = fetch(url + "/api/overview")
        self.assertEqual(status, 401)
        self.assertIn("Bearer", headers["WWW-Authenticate"])
        status, _, body = fetch(url + "/api/overview", headers={"Authorization": "Bearer a-dashboard-token-of-32-bytes-00"})
        self.assertEqual(status, 200)
        self.assertIn("seeded:regression", body)
        d = self.driver
        d.delete_all_cookies()
        d.set_window_size(*SIZES["phone"])
        d.get(url + "/farm")
        self.assertIn("needs its token", self.text())
        d.find_element(By.NAME, "token").send_keys("a-dashboard-token-of-32-bytes-00")
        d.find_element(By.CSS_SELECTOR, "form button").click()
        # The form's page may still be there when the URL changes: wait for the new one.
        WebDriverWait(d, 20, ignored_exceptions=[StaleElementReferenceException]).until(
            lambda _: d.current_url == url + "/farm" and "Self-test latency" in self.text())
        self.screenshot("login-phone.png")
        proc.send_signal(signal.SIGINT)
        self.assertEqual(proc.wait(timeout=15), 0)
        self.assertIn("stopped (SIGINT)", proc.stderr.read())

    def test_https_with_mutual_tls_may_serve_every_address(self):
        import ssl
        pki = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tls")
        proc = self.start([REMEX, "dashboard", "--results", self.store, "--listen", "0.0.0.0:0",
                           "--tls-cert", os.path.join(pki, "server.pem"), "--tls-key", os.path.join(pki, "server.key"),
                           "--tls-client-ca", os.path.join(pki, "ca.pem")], stderr=subprocess.PIPE)
        port = read_address(proc, r"^remex dashboard: serving https://0\.0\.0\.0:(\d+)/$", "remex dashboard (TLS)")
        url = "https://127.0.0.1:%s/api/overview" % port
        context = ssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
        with self.assertRaises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(url, context=context, timeout=30).read()  # no client certificate
        context.load_cert_chain(os.path.join(pki, "client.pem"), os.path.join(pki, "client.key"))
        with urllib.request.urlopen(url, context=context, timeout=30) as r:
            self.assertEqual(r.status, 200)
            self.assertIn("seeded:regression", r.read().decode())
        proc.terminate()
        self.assertEqual(proc.wait(timeout=15), 0)

    def test_non_loopback_needs_a_token_and_sigterm_stops(self):
        r = subprocess.run([REMEX, "dashboard", "--results", self.store, "--listen", "0.0.0.0:0"], env=self.env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("refusing to serve 0.0.0.0 without authentication", r.stderr)
        r = subprocess.run([REMEX, "dashboard", "--results", "sqlite://" + os.path.join(self.work, "none.sqlite")],
                           env=self.env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 3)
        self.assertIn("no results store", r.stderr)
        proc = self.start([REMEX, "dashboard", "--results", self.store, "--listen", "127.0.0.1:0"],
                          stderr=subprocess.PIPE)
        read_address(proc, r"(http://127\.0\.0\.1:\d+)/$", "remex dashboard")
        proc.terminate()
        self.assertEqual(proc.wait(timeout=15), 0)
        self.assertIn("stopped (SIGTERM)", proc.stderr.read())


def main():
    global REMEX, SERVER, SEED, OUT
    parser = argparse.ArgumentParser()
    parser.add_argument("--remex", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--seed", required=True)
    parser.add_argument("--out", required=True)
    args, rest = parser.parse_known_args()
    missing = [name for name, found in (("chromium", CHROMIUM), ("chromedriver (chromium-driver)", CHROMEDRIVER),
                                        ("selenium (python3-selenium)", webdriver)) if not found]
    if missing:
        print("dashboard_test: skipped: %s not installed (scripts/setup-deps.sh installs them)" % ", ".join(missing))
        return 77
    REMEX, SERVER, SEED = (os.path.abspath(p) for p in (args.remex, args.server, args.seed))
    OUT = os.path.abspath(args.out)
    os.makedirs(OUT, exist_ok=True)
    print("dashboard_test: screenshots in " + OUT, flush=True)
    result = unittest.main(argv=[sys.argv[0]] + rest, verbosity=2, exit=False).result
    print("dashboard_test: screenshots in " + OUT, flush=True)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
