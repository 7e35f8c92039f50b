#!/usr/bin/env bash
# Check the README's set-up commands on a fresh minimal Debian 12 system.
#
# Usage: scripts/fresh-check.sh [--dir DIR] [--keep] [--tests 'CTEST ARGS'] [--ccache DIR]
#                              [--targets 'TARGET ...']
#
# Builds a minbase Debian 12 (bookworm) system with debootstrap, adds only git and
# ca-certificates, clones this repository's committed HEAD into it (uncommitted changes
# are not part of the check) and, chrooted there as root, runs:
#   1. the README's first set-up command, exactly as the README writes it;
#   2. a smoke test of the second: the same command with `-- CTEST ARGS` appended
#      (default `-L integration`: the whole suite is built, unless --targets names what
#      to build, and the tests of one label run).
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
#   --targets 'T ...'  build only these targets in the smoke test (REMEX_BUILD_TARGETS of
#                scripts/test.sh) instead of the whole suite
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
smoke_targets=""

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "fresh-check: $*" >&2; exit 2; }

while (($#)); do
  case $1 in
    --dir) (($# >= 2)) || die "--dir needs a folder"; dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --tests) (($# >= 2)) || die "--tests needs ctest arguments"; test_args=$2; shift 2 ;;
    --ccache) (($# >= 2)) || die "--ccache needs a folder"; ccache_dir=$2; shift 2 ;;
    --targets) (($# >= 2)) || die "--targets needs target names"; smoke_targets=$2; shift 2 ;;
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

mounted=()
cleanup() {
  local status=$? i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" 2>/dev/null ||
      echo "fresh-check: could not unmount ${mounted[i]}" >&2
  done
  if findmnt -rn -o TARGET | grep -q "^$root/"; then
    echo "fresh-check: mounts remain under $root; not deleting it" >&2
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

step "debootstrap --variant=minbase $suite from $mirror"
mkdir -p "$root/etc/dpkg/dpkg.cfg.d"
echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/90fresh-check-unsafe-io"
debootstrap --variant=minbase --include=git,ca-certificates "$suite" "$root" "$mirror" \
  >"$dir/debootstrap.log" 2>&1 || { tail -20 "$dir/debootstrap.log" >&2; die "debootstrap failed"; }
step_done "debootstrap"
# Packages' services (redis-server's) are not started inside the throwaway system, as in
# Debian's container images: a daemon left running there would outlive the check.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

# The machine's own configuration, as a user's machine would have it.
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security $suite-security main
EOF
apt-config dump 2>/dev/null |
  grep -E '^Acquire::(https?::Proxy|ftp::Proxy|Check-Valid-Until|Check-Date)[ :]' \
  >"$root/etc/apt/apt.conf.d/90host-acquire" || true
if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
  cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
fi
for f in /etc/npmrc /usr/etc/npmrc "$HOME/.npmrc"; do
  if [[ -f $f ]]; then
    target=$root${f/#$HOME//root}
    mkdir -p "$(dirname "$target")"
    cp "$f" "$target"
  fi
done
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

for m in proc sys dev dev/pts; do
  mkdir -p "$root/$m"
  case $m in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sysfs "$root/sys" ;;
    dev) mount --bind /dev "$root/dev" ;;
    dev/pts) mount --bind /dev/pts "$root/dev/pts" ;;
  esac
  mounted+=("$root/$m")
done
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
in_root() {  # in_root COMMAND: runs COMMAND with bash as root in the fresh system
  chroot "$root" /usr/bin/env -i "${environment[@]}" /bin/bash -c "$1"
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

echo "== fresh-check: passed on Debian $(cat "$root/etc/debian_version") minbase ($commit)"
printf '   %s\n' "${timings[@]}"
exit 0
}
