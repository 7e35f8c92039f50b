#!/usr/bin/env bash
# Install the Debian packages Remex needs (Debian 12), then check that they are enough:
# by default those that build it and run it (the README's set-up command,
# scripts/quickstart.sh, and the Docker images' build stage); with --tests also those its
# test suite starts or drives (Redis, PostgreSQL, Chromium, zsh, pytest, ...), which
# scripts/test.sh installs so.
#
# Usage: scripts/setup-deps.sh [--tests] [--check] [--upgrade]
#   --tests    the test suite's packages too
#   --check    install nothing, only run the check
#   --upgrade  also bring the build's packages that are already installed up to the
#              versions the package lists offer now (apt-get update, then install
#              --only-upgrade), which is what a fresh system gets: CI (.ci/run) shares
#              the fresh system's compiler cache with its own plain tree, and an object
#              is shared only when every header it includes is the same version
# Idempotent: apt is skipped when every package is already installed. Uses sudo only when
# not running as root. Installs with --no-install-recommends, so every package the build
# needs is named here, recommended ones included (ocl-icd-opencl-dev: oneDNN's CMake
# config looks for OpenCL). nodejs and npm are each added only when its command is
# missing, so a Node.js from elsewhere is kept.
#
# The check, run every time: the tools the build, the model fetch (and with --tests, the
# tests) call are on PATH, /usr/bin/python3 (the one scripts/gen-conformance.sh and
# tests/*.py run) can import onnx, numpy, venv, setuptools and wheel (with --tests also
# pexpect, pytest, jsonschema and selenium), and CMake resolves every library (and
# Chart.js) of the build (cmake/deps-check, which reads the build's own
# cmake/RemexDependencies.cmake). When the check fails with every listed package
# installed, this list misses a package: the message says so and names what is missing.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
check_only=0 tests=0 upgrade=0
for arg in "$@"; do
  case $arg in
    --check) check_only=1 ;;
    --tests) tests=1 ;;
    --upgrade) upgrade=1 ;;
    *) echo "usage: scripts/setup-deps.sh [--tests] [--check] [--upgrade]" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  capnproto libcapnp-dev
  libboost-dev libboost-program-options-dev libboost-context-dev
  libzstd-dev libssl-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  libdnnl-dev ocl-icd-opencl-dev
  libgtest-dev libgmock-dev googletest   # the build configures its tests too
  nlohmann-json3-dev libcli11-dev libspdlog-dev libxxhash-dev
  libhiredis-dev                # the device farm's Redis client
  libtomlplusplus-dev           # remex suite's TOML
  libedit-dev                   # remex shell's line editing, history and completion
  libsoci-dev libsqlite3-dev libpq-dev   # the results store (--record): SOCI over SQLite and PostgreSQL
  python3 python3-onnx python3-numpy   # ONNX conformance case generation
  python3-dev pybind11-dev      # the Python client (python/: import remex)
  python3-venv python3-setuptools python3-wheel   # pip install . of it, its wheel
  libjs-chart.js                # Chart.js, embedded into remex bench --html pages at build time
)
test_packages=(
  redis-server                  # Redis for the farm's tests
  postgresql sqlite3            # a real PostgreSQL (initdb, pg_ctl, psql) and the sqlite3 shell for the store's tests
  python3-pexpect               # remex shell's terminal test (tests/shell_test.py)
  python3-pytest                # the Python client's tests
  python3-jsonschema            # bench JSON against docs/schema/bench.schema.json (tests/bench_report_test.py)
  chromium                      # draws the --html pages, headless, in tests/bench_report_test.py
  chromium-driver python3-selenium   # drive it: remex dashboard's pages in tests/dashboard_test.py
  curl                          # the docs' dashboard examples fetch its pages
  zsh                           # remex completion zsh, run in a real zsh (host_client/cli/completion_test.py)
)
build_packages=("${packages[@]}")
((tests)) && packages+=("${test_packages[@]}")
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

sudo=()
((EUID == 0)) || sudo=(sudo)
updated=0
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup-deps: all ${#packages[@]} packages already installed"
elif ((check_only)); then
  echo "setup-deps: not installed: ${missing[*]} (run scripts/setup-deps.sh$( ((tests)) && echo " --tests") to install them)" >&2
  exit 1
else
  echo "setup-deps: installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  updated=1
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
fi
if ((upgrade && !check_only)); then
  echo "setup-deps: upgrading the build's packages to the versions the package lists offer"
  ((updated)) || "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends --only-upgrade "${build_packages[@]}"
fi

# The check.
gap() {
  echo "setup-deps: $1" >&2
  echo "setup-deps: every package of scripts/setup-deps.sh is installed, so its list misses" \
    "what provides this; please report it" >&2
  exit 1
}
tools=(c++ cc cmake ninja pkg-config capnp capnpc-c++ protoc git node npm python3)
modules=onnx,numpy,venv,setuptools,wheel
if ((tests)); then
  tools+=(redis-server chromium chromedriver psql sqlite3 curl zsh)
  modules+=,pexpect,pytest,jsonschema,selenium
fi
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || gap "command '$tool' not found"
done
if ((tests)); then
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null ||
    gap "PostgreSQL's server binaries (/usr/lib/postgresql/*/bin/initdb) not found"
fi
/usr/bin/python3 -c "import $modules" 2>/dev/null ||
  gap "/usr/bin/python3 cannot import ${modules//,/, }"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
if ! cmake -S "$repo/cmake/deps-check" -B "$probe/build" >"$probe/log" 2>&1; then
  grep -v -e '^--' -e '^See also' "$probe/log" >&2 || true
  gap "CMake cannot find a library of the build (above)"
fi
echo "setup-deps: the build's$( ((tests)) && echo " and the tests'") tools and libraries are all found"
