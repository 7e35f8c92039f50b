"""`pip wheel --no-build-isolation --no-deps .` from the checkout builds a wheel whose
module carries no debug information, and that wheel installed into a fresh virtual
environment (with the system's NumPy, nothing from an index) works from outside the
checkout against a real remex-server: version, compile, load, run.

scripts/fresh-check.sh --wheel installs such a wheel on a second fresh Debian 12 system
that has only the runtime libraries (CI)."""
import glob
import json
import os
import subprocess
import venv
import zipfile

from conftest import BUILD

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

USE = """
import importlib.metadata, json, sys
import numpy as np
import remex
address, model, rmx = sys.argv[1:]
c = remex.compile(model, rmx, shapes={"x": (2, 4)})
with remex.connect(address) as s:
    m = s.load(rmx)
    y = m.run({"x": np.arange(8, dtype=np.float32).reshape(2, 4)})["y"]
print(json.dumps({"file": remex.__file__, "version": remex.__version__,
                  "metadata_version": importlib.metadata.version("remex"), "y": y.tolist(),
                  "inputs": [list(v) for v in c.inputs]}))
"""


def test_wheel_installs_into_a_fresh_venv_and_runs_against_a_server(tmp_path, server, models):
    env = dict(os.environ, REMEX_BUILD_DIR=os.path.abspath(BUILD))
    env.pop("PYTHONPATH", None)  # the installed package, not the build tree's
    builder = tmp_path / "build-venv"
    venv.create(builder, system_site_packages=True, with_pip=True)  # Debian's setuptools and wheel
    wheels = tmp_path / "wheels"
    subprocess.run([str(builder / "bin" / "python"), "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                    "--no-index", "-q", "-w", str(wheels), "."], cwd=ROOT, env=env, check=True)
    built = glob.glob(str(wheels / "remex-*.whl"))
    assert len(built) == 1, built
    wheel = built[0]

    # The module without debug information: no .debug_info section.
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        module = [n for n in names if n.startswith("remex/_native") and n.endswith(".so")]
        assert len(module) == 1 and "remex/_html.py" in names and "remex/py.typed" in names
        z.extract(module[0], tmp_path / "unpacked")
    sections = subprocess.run(["readelf", "-S", "-W", str(tmp_path / "unpacked" / module[0])], capture_output=True,
                              text=True, check=True).stdout
    assert ".text" in sections and ".debug_info" not in sections

    target = tmp_path / "venv"
    venv.create(target, system_site_packages=True, with_pip=True)
    python = str(target / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-deps", "-q", wheel], env=env, check=True)
    away = tmp_path / "elsewhere"
    away.mkdir()
    out = subprocess.run([python, "-c", USE, server.address, models["dynamic"], str(away / "dynamic.rmx")], cwd=away,
                         env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["file"].startswith(str(target)) and result["file"].endswith(os.path.join("remex", "__init__.py"))
    assert result["version"] == result["metadata_version"] == os.path.basename(wheel).split("-")[1]
    assert result["inputs"] == [["x", "float32", [2, 4]]]
    assert result["y"] == [[0, 2, 4, 6], [8, 10, 12, 14]]
