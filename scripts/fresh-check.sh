#!/usr/bin/env bash
# Check the README's set-up commands on a fresh minimal Debian 12 system.
#
# Usage: scripts/fresh-check.sh [--dir DIR] [--keep] [--tests 'CTEST ARGS'] [--ccache DIR]
#                              [--package-cache DIR] [--targets 'TARGET ...'] [--wheel]
#
# Builds a minbase Debian 12 (bookworm) system with debootstrap, adds only git and
# ca-certificates, clones this repository's committed HEAD into it (uncommitted changes
# are not part of the check) and, chrooted there as root, runs:
#   1. the README's first set-up command, exactly as the README writes it;
#   2. a smoke test of the second: the same command with `-- CTEST ARGS` appended
#      (default `-L integration`: the whole suite is built, unless --targets names what
#      to build, and the tests of one label run).
#   3. with --wheel, the Python client's wheel on a machine that has only the runtime
#      libraries: the wheel is built in the fresh system (`pip wheel
#      --no-build-isolation --no-deps .`, from the build tree of steps 1 and 2); a second
#      minbase Debian 12 system gets only python3, python3-venv, python3-numpy and the
#      runtime packages of docker/Dockerfile.server (its one list, printed by
#      tests/docker_runtime_test.py --runtime-packages), installed with apt as the image
#      installs them; there the wheel goes into a fresh venv (--system-site-packages for
#      NumPy, nothing from an index), compiles a small ONNX model (written with the first
#      system's onnx package), and runs it on a remex-server of the first system's build
#      listening on loopback (both systems share this host's network), checking the output.
# Prints the wall time of each step and exits non-zero on the first failure.
#
# The fresh system takes what a user's own machine would have of its own: this host's
# Debian package sources (main, updates and security, as `apt-get indextargets` lists
# them), apt's proxy and validity settings, the CA certificates added under
# /usr/local/share/ca-certificates, the npm configuration (/etc/npmrc, /usr/etc/npmrc,
# ~/.npmrc), /etc/resolv.conf and the proxy variables (http_proxy, https_proxy,
# no_proxy) where set. Nothing else of this host is visible inside.
#
# Options:
#   --dir DIR    build the system in DIR (must not exist; default: a new folder under
#                ${TMPDIR:-/var/tmp}); about 4 GB are needed
#   --keep       keep the system afterwards (its bind mounts are always removed)
#   --tests ARGS ctest arguments of the smoke test (quoted as one word), or 'none' to skip
#   --ccache DIR keep the fresh system's compiler cache in DIR (created if missing) so
#                that a later check compiles only what changed. Off by default. The cache
#                holds object files only: CMake's configure, the package checks and every
#                link still run from scratch, and a missing header still fails the build.
#                Objects are keyed by the compiler's content and paths relative to the
#                clone, so a build of the same sources by the same Debian compiler
#                elsewhere (CI's own build, with CCACHE_DIR=DIR) can reuse them.
#   --package-cache DIR  keep the Debian packages that debootstrap and apt download in DIR
#                (created if missing) so that a later check downloads only what changed.
#                Off by default. Each package is still checked against the fresh system's
#                package lists (a changed one is downloaded again) and installed from
#                scratch; only the download is saved. Packages downloaded over 30 days ago
#                are dropped from DIR first (by the time they arrived there) (a later check downloads them again if needed).
#   --targets 'T ...'  build only these targets in the smoke test (REMEX_BUILD_TARGETS of
#                scripts/test.sh) instead of the whole suite
#   --wheel      check the Python client's wheel on a second fresh system (step 3; it
#                needs remex-server and the Python module built: the first set-up command
#                builds both)
#
# The throwaway system's dpkg, debootstrap's included, runs with force-unsafe-io (no
# fsync per unpacked file, as Debian's own build chroots do); what gets installed is the
# same. Installed services are not started there (policy-rc.d, as Debian's container
# images have).
#
# Needs root (debootstrap, chroot and mount) and debootstrap (apt-get install debootstrap).
set -euo pipefail

# The whole script is one block, read before any of it runs, so that a change to this
# file (a checkout, an edit) during a run cannot change the running check.
{
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
suite=bookworm
dir=""
keep=0
test_args="-L integration"
ccache_dir=""
package_cache=""
smoke_targets=""
wheel=0

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "fresh-check: $*" >&2; exit 2; }

while (($#)); do
  case $1 in
    --dir) (($# >= 2)) || die "--dir needs a folder"; dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --tests) (($# >= 2)) || die "--tests needs ctest arguments"; test_args=$2; shift 2 ;;
    --ccache) (($# >= 2)) || die "--ccache needs a folder"; ccache_dir=$2; shift 2 ;;
    --package-cache) (($# >= 2)) || die "--package-cache needs a folder"; package_cache=$2; shift 2 ;;
    --targets) (($# >= 2)) || die "--targets needs target names"; smoke_targets=$2; shift 2 ;;
    --wheel) wheel=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

((EUID == 0)) || die "must run as root: debootstrap, chroot and mount need it (try: sudo $0)"
command -v debootstrap >/dev/null 2>&1 ||
  die "debootstrap is not installed (install it with: apt-get install debootstrap)"
for tool in chroot mount umount findmnt git; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed"
done

# The two commands, as the README's "Set up" block writes them (comments dropped).
mapfile -t readme_commands < <(
  awk '/^## Set up/ {s = 1; next} s && /^## / {exit} s && /^```sh/ {b = 1; next}
       b && /^```/ {exit} b {sub(/[ \t]*#.*/, ""); if ($0 != "") print}' "$repo/README.md")
((${#readme_commands[@]} == 2)) ||
  die "README.md's Set up block should hold exactly two commands, found ${#readme_commands[@]}"
install_command=${readme_commands[0]}
test_command=${readme_commands[1]}

commit=$(git -C "$repo" rev-parse HEAD)
if [[ -n $(git -C "$repo" status --porcelain --untracked-files=no) ]]; then
  echo "fresh-check: the working tree has uncommitted changes; checking the committed HEAD only" >&2
fi

# Package sources: the host's Debian archives for this suite, its updates and security.
mirror="" security=""
while IFS='|' read -r uri release; do
  case $release in
    "$suite") mirror=${mirror:-$uri} ;;
    "$suite-security") security=${security:-$uri} ;;
  esac
done < <(apt-get indextargets --format '$(REPO_URI)|$(RELEASE)' 'Identifier: Packages' 2>/dev/null | sort -u)
mirror=${mirror:-http://deb.debian.org/debian/}
security=${security:-http://deb.debian.org/debian-security/}

if [[ -z $dir ]]; then
  dir=$(mktemp -d "${TMPDIR:-/var/tmp}/remex-fresh.XXXXXX")
else
  [[ ! -e $dir ]] || die "$dir already exists"
  mkdir -p "$dir"
fi
dir=$(cd "$dir" && pwd)
root=$dir/root
wheel_root=$dir/wheel-root  # --wheel's second system

mounted=()
server_pid=""  # --wheel's remex-server
wheel_debootstrap_pid=""  # --wheel's second debootstrap, run beside the build
cleanup() {
  local status=$? i
  if [[ -n $wheel_debootstrap_pid ]]; then
    kill "$wheel_debootstrap_pid" 2>/dev/null || true
    wait "$wheel_debootstrap_pid" 2>/dev/null || true
  fi
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" 2>/dev/null ||
      echo "fresh-check: could not unmount ${mounted[i]}" >&2
  done
  if findmnt -rn -o TARGET | grep -q "^$dir/"; then
    echo "fresh-check: mounts remain under $dir; not deleting it" >&2
  elif ((keep)); then
    echo "fresh-check: kept the system in $root"
  else
    rm -rf "$dir"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step_start=0
step() { step_start=$SECONDS; echo "== fresh-check: $*"; }
step_done() { echo "== fresh-check: $1: $((SECONDS - step_start)) s"; timings+=("$1: $((SECONDS - step_start)) s"); }
timings=()

# debootstrap's own download cache (--cache-dir), when --package-cache names one.
debootstrap_cache=()
if [[ -n $package_cache ]]; then
  package_cache=$(mkdir -p "$package_cache/debootstrap" "$package_cache/apt/partial" && cd "$package_cache" && pwd)
  find "$package_cache" -name '*.deb' -ctime +30 -delete
  debootstrap_cache=(--cache-dir="$package_cache/debootstrap")
fi
step "debootstrap --variant=minbase $suite from $mirror"
mkdir -p "$root/etc/dpkg/dpkg.cfg.d"
echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/90fresh-check-unsafe-io"
debootstrap --variant=minbase --include=git,ca-certificates "${debootstrap_cache[@]}" "$suite" "$root" "$mirror" \
  >"$dir/debootstrap.log" 2>&1 || { tail -20 "$dir/debootstrap.log" >&2; die "debootstrap failed"; }
step_done "debootstrap"
if ((wheel)); then
  # The wheel's system (step 3) is made while the first one installs and builds: its
  # debootstrap waits on the network and the disk, the build on the processors.
  mkdir -p "$wheel_root/etc/dpkg/dpkg.cfg.d"
  echo force-unsafe-io >"$wheel_root/etc/dpkg/dpkg.cfg.d/90fresh-check-unsafe-io"
  debootstrap --variant=minbase "${debootstrap_cache[@]}" "$suite" "$wheel_root" "$mirror" \
    >"$dir/debootstrap-wheel.log" 2>&1 &
  wheel_debootstrap_pid=$!
fi
# configure_system ROOT: a system debootstrap made in ROOT (under $dir) gets the
# machine's own configuration, as a user's machine would have it, and proc, sys and dev
# mounted. Packages' services (redis-server's) are not started inside the throwaway
# systems, as in Debian's container images: a daemon left running there would outlive
# the check.
configure_system() {
  local r=$1 f target m
  [[ $r == "$dir"/* ]] || die "configure_system: $r is not under $dir"
  printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
  chmod 755 "$r/usr/sbin/policy-rc.d"
  printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
    "$mirror" "$suite" "$mirror" "$suite" "$security" "$suite" >"$r/etc/apt/sources.list"
  apt-config dump 2>/dev/null |
    grep -E '^Acquire::(https?::Proxy|ftp::Proxy|Check-Valid-Until|Check-Date)[ :]' \
    >"$r/etc/apt/apt.conf.d/90host-acquire" || true
  if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
    cp -a /usr/local/share/ca-certificates/. "$r/usr/local/share/ca-certificates/"
  fi
  for f in /etc/npmrc /usr/etc/npmrc "$HOME/.npmrc"; do
    if [[ -f $f ]]; then
      target=$r${f/#$HOME//root}
      mkdir -p "$(dirname "$target")"
      cp "$f" "$target"
    fi
  done
  cp -L /etc/resolv.conf "$r/etc/resolv.conf"

  for m in proc sys dev dev/pts; do
    mkdir -p "$r/$m"
    case $m in
      proc) mount -t proc proc "$r/proc" ;;
      sys) mount -t sysfs sysfs "$r/sys" ;;
      dev) mount --bind /dev "$r/dev" ;;
      dev/pts) mount --bind /dev/pts "$r/dev/pts" ;;
    esac
    mounted+=("$r/$m")
  done
  # apt's downloads, when --package-cache names a folder (apt-get keeps them there).
  if [[ -n $package_cache ]]; then
    mount --bind "$package_cache/apt" "$r/var/cache/apt/archives"
    mounted+=("$r/var/cache/apt/archives")
  fi
}
configure_system "$root"
if [[ -n $ccache_dir ]]; then
  mkdir -p "$ccache_dir" "$root/root/.cache/ccache"
  mount --bind "$ccache_dir" "$root/root/.cache/ccache"
  mounted+=("$root/root/.cache/ccache")
fi

# A clean environment, with the host's proxy variables where it has them.
environment=(HOME=/root USER=root LOGNAME=root SHELL=/bin/bash LANG=C.UTF-8 TERM=dumb
             PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [[ -z ${!v:-} ]] || environment+=("$v=${!v}")
done
if [[ -n $ccache_dir ]]; then
  environment+=(CCACHE_BASEDIR=/root/remex CCACHE_NOHASHDIR=true CCACHE_COMPILERCHECK=content)
fi
in_root() {  # in_root COMMAND [ROOT]: runs COMMAND with bash as root in the fresh system (or ROOT)
  chroot "${2:-$root}" /usr/bin/env -i "${environment[@]}" /bin/bash -c "$1"
}
in_root update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the fresh system"

step "clone $commit"
git clone --quiet --no-hardlinks "$repo" "$root/root/remex"
git -C "$root/root/remex" checkout --quiet --detach "$commit"
step_done "clone"

step "$install_command"
in_root "cd /root/remex && $install_command"
step_done "$install_command"

if [[ $test_args != none ]]; then
  step "$test_command -- $test_args"
  targets_env=""
  [[ -z $smoke_targets ]] || targets_env="REMEX_BUILD_TARGETS='$smoke_targets' "
  in_root "cd /root/remex && $targets_env$test_command -- $test_args"
  step_done "$test_command -- $test_args"
fi

if ((wheel)); then
  step "the Python client's wheel, on a second system with only the runtime libraries"
  # In the first system: the wheel, from the set-up command's build tree, and a model.
  in_root "set -e
    python3 -m venv --system-site-packages /root/wheel-venv
    cd /root/remex
    /root/wheel-venv/bin/pip wheel -q --no-build-isolation --no-deps --no-index -w /root/wheels .
    python3 scripts/fresh-check-wheel.py model /root/add_relu.onnx"
  wheels=("$root"/root/wheels/remex-*.whl)
  ((${#wheels[@]} == 1)) && [[ -f ${wheels[0]} ]] || die "pip wheel did not leave one remex-*.whl: ${wheels[*]}"
  wheel_file=$(basename "${wheels[0]}")
  echo "   $wheel_file: $(($(stat -c %s "${wheels[0]}") / 1024)) KiB"
  # The second system: minbase, then Python and the runtime image's packages, installed
  # as the image installs them.
  runtime_packages=$(python3 "$repo/tests/docker_runtime_test.py" --runtime-packages "$repo/docker/Dockerfile.server")
  [[ -n $runtime_packages ]] || die "docker/Dockerfile.server's runtime stage lists no packages"
  wait "$wheel_debootstrap_pid" ||
    { wheel_debootstrap_pid=""; tail -20 "$dir/debootstrap-wheel.log" >&2; die "debootstrap of the wheel's system failed"; }
  wheel_debootstrap_pid=""
  configure_system "$wheel_root"
  in_root "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends python3 python3-venv python3-numpy $(echo $runtime_packages) >/dev/null" \
    "$wheel_root" || die "installing Python and the runtime packages in the wheel's system failed"
  cp "${wheels[0]}" "$root/root/add_relu.onnx" "$repo/scripts/fresh-check-wheel.py" "$wheel_root/root/"
  # A server of the first system's build, on loopback.
  chroot "$root" /usr/bin/env -i "${environment[@]}" /root/remex/build/device_server/remex-server \
    --listen 127.0.0.1:0 --threads 1 >"$dir/wheel-server.log" 2>&1 &
  server_pid=$!
  address=""
  for _ in $(seq 100); do
    address=$(grep -oE -m1 '127\.0\.0\.1:[0-9]+' "$dir/wheel-server.log" || true)
    [[ -z $address ]] && kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $address ]] || { cat "$dir/wheel-server.log" >&2; die "remex-server did not start"; }
  in_root "set -e
    python3 -m venv --system-site-packages /root/venv
    /root/venv/bin/pip install -q --no-index /root/$wheel_file
    cd / && /root/venv/bin/python /root/fresh-check-wheel.py run $address /root/add_relu.onnx" "$wheel_root" ||
    die "the wheel failed in its system"
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
  step_done "wheel: built, a second system, installed, run"
fi

echo "== fresh-check: passed on Debian $(cat "$root/etc/debian_version") minbase ($commit)"
printf '   %s\n' "${timings[@]}"
exit 0
}
