"""`pip install --no-build-isolation .` from the checkout installs a working package: into
a fresh virtual environment (with the system's NumPy), imported from elsewhere."""
import os
import subprocess
import sys
import venv

from conftest import BUILD

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_pip_install_from_the_checkout(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    python = str(env_dir / "bin" / "python")
    env = dict(os.environ, REMEX_BUILD_DIR=os.path.abspath(BUILD))
    env.pop("PYTHONPATH", None)  # the installed package, not the build tree's
    subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", "-q", "."], cwd=ROOT,
                   env=env, check=True)
    code = ("import numpy as np, remex\n"
            "print(remex.__file__)\n"
            "with remex.embedded(threads=1) as s:\n"
            "    print(s.upload(np.arange(3, dtype=np.int64)).numpy().tolist())\n")
    out = subprocess.run([python, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    lines = out.stdout.split("\n")
    assert lines[0].startswith(str(env_dir)) and lines[0].endswith(os.path.join("remex", "__init__.py"))
    assert lines[1] == "[0, 1, 2]"
    # The type stubs and the PEP 561 marker are installed with the package.
    package = os.path.dirname(lines[0])
    assert os.path.exists(os.path.join(package, "py.typed")) and os.path.exists(os.path.join(package, "_native.pyi"))
