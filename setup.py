"""Builds the Python client's compiled module (remex._native) with the project's CMake
build, for `pip install --no-build-isolation .` and `pip wheel --no-build-isolation .`
(metadata: pyproject.toml; docs/python.md, "A wheel").

The build tree is $REMEX_BUILD_DIR, else ./build (the one scripts/quickstart.sh and
scripts/test.sh make); it is configured first when it has no CMakeCache.txt. Only the
module's target is built, for the Python that runs pip (with it, the embedded server's
library, libremex_embedded.so, which remex.embedded() loads from beside the module:
host_client/tooling/embedded_server.h). Both are copied into the package without their
debug information (`strip --strip-debug`; a RelWithDebInfo build's
carries tens of MB of it), so that the wheel stays small; its symbols stay, for
backtraces.

The version is the CMake project's (project(remex VERSION ...) in CMakeLists.txt), the
one remex.__version__ and `remex --version` give.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def cmake_project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"^project\(remex\s+VERSION\s+([0-9.]+)", f.read(), re.MULTILINE)
    if not m:
        raise RuntimeError("CMakeLists.txt has no project(remex VERSION ...)")
    return m.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.path.abspath(os.environ.get("REMEX_BUILD_DIR", os.path.join(ROOT, "build")))
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                                   "-DREMEX_PYTHON=ON", f"-DPython3_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", build, "--target", "remex_python"])
        built = glob.glob(os.path.join(build, "python", "remex", "_native*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one remex/_native module in {build}/python, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        strip = shutil.which("strip")
        if strip is None:
            raise RuntimeError("strip (binutils) is needed to copy remex/_native without its debug information")
        subprocess.check_call([strip, "--strip-debug", "-o", target, built[0]])
        embedded = os.path.join(build, "host_client", "cli", "libremex_embedded.so")
        if not os.path.exists(embedded):
            raise RuntimeError(f"the embedded server's library {embedded} was not built with remex_python")
        subprocess.check_call([strip, "--strip-debug", "-o", os.path.join(os.path.dirname(target),
                                                                          "libremex_embedded.so"), embedded])


setup(version=cmake_project_version(), ext_modules=[Extension("remex._native", sources=[])],
      cmdclass={"build_ext": CMakeBuild}, options={"build": {"build_base": os.path.join("build", "python-setuptools")}})
