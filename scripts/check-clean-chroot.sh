#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian packages in a fresh Debian 12 chroot that holds only what a buildd starts with
# (debootstrap --variant=buildd: essential packages and build-essential) and debian/control's
# Build-Depends, installed by `apt-get build-dep`: `dpkg-checkbuilddeps` must pass there and
# `dpkg-buildpackage -b` must succeed, so a missing Build-Depends fails here rather than on a
# builder. Root only; needs debootstrap; the chroot comes from the mirror this machine already
# uses (scripts/debian-mirror.sh). Builds the committed tree (git archive HEAD).
#   scripts/check-clean-chroot.sh [WORK_DIR]      (default /var/tmp/corestream-chroot; the
#                                                  bootstrap is kept there for the next run)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/var/tmp/corestream-chroot}
root=$work/root
[[ $(id -u) -eq 0 ]] || { echo "check-clean-chroot: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "check-clean-chroot: needs debootstrap: apt-get install debootstrap" >&2; exit 1; }
mirror=$("$src/scripts/debian-mirror.sh")
[[ -n $mirror ]] || { echo "check-clean-chroot: no apt source names a bookworm mirror" >&2; exit 1; }

# The bootstrap is kept in $work/base and copied afresh for every run, so that what one run
# installed never makes the next one pass.
base=$work/base
if [[ ! -x $base/usr/bin/dpkg-buildpackage ]]; then
  echo "check-clean-chroot: bootstrapping bookworm (buildd variant) into $base" >&2
  rm -rf "$base"
  mkdir -p "$work"
  debootstrap --variant=buildd bookworm "$base" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; echo "check-clean-chroot: debootstrap failed" >&2; exit 1; }
fi
rm -rf "$root"
cp -a "$base" "$root"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
trap 'umount "$root/proc"' EXIT

rm -rf "$root/build"
mkdir -p "$root/build/corestream"
git -C "$src" archive HEAD | tar -x -C "$root/build/corestream"
commit=$(git -C "$src" rev-parse --short=12 HEAD)

in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  DEBIAN_FRONTEND=noninteractive "$@"; }
in_root apt-get update -q >/dev/null
# Fails when a build dependency is missing, before anything is installed.
if in_root sh -c 'cd /build/corestream && dpkg-checkbuilddeps' 2>"$work/before.txt"; then
  echo "check-clean-chroot: FAIL: the chroot is not clean: dpkg-checkbuilddeps passed before build-dep" >&2
  exit 1
else
  echo "check-clean-chroot: before build-dep: $(cat "$work/before.txt")" >&2
fi
in_root apt-get build-dep -y -q --no-install-recommends /build/corestream >"$work/build-dep.log" 2>&1 ||
  { tail -20 "$work/build-dep.log"; echo "check-clean-chroot: apt-get build-dep failed" >&2; exit 1; }
in_root sh -c 'cd /build/corestream && dpkg-checkbuilddeps' ||
  { echo "check-clean-chroot: FAIL: dpkg-checkbuilddeps after build-dep" >&2; exit 1; }
in_root sh -c "cd /build/corestream && CS_GIT_COMMIT=$commit dpkg-buildpackage -b -us -uc" >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; echo "check-clean-chroot: FAIL: dpkg-buildpackage in the clean chroot" >&2; exit 1; }
ls "$root/build/"*.deb
echo "check-clean-chroot: PASS: $commit builds in a clean bookworm chroot with exactly its Build-Depends"
