#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian packages (corestreamd, corestream-tools, libremoteledger1, libremoteledger-dev) from this tree
# into OUTDIR (default: ./deb), with debian/ and dpkg-buildpackage. The tree is copied first
# (tracked and untracked files, without what .gitignore drops, such as build dirs), because
# dpkg-buildpackage writes its results next to the source directory and builds inside it.
#   scripts/build-deb.sh [OUTDIR]
# Needs the Build-Depends of debian/control (scripts/setup.sh installs them). JOBS (default 2)
# is the build's parallelism.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$PWD/deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/corestream-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The copy has no .git: the commit --version reports is passed in (debian/rules).
commit=unknown
if git -C "$src" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  commit=$(git -C "$src" rev-parse HEAD)
  git -C "$src" diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
  mkdir "$work/corestream"
  (cd "$src" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do if [[ -e $f ]]; then printf '%s\0' "$f"; fi; done |
    tar --null -T - -cf -) | tar -xf - -C "$work/corestream"
else
  cp -a "$src" "$work/corestream"
  rm -rf "$work/corestream"/build*
fi

cd "$work/corestream"
export DEB_BUILD_OPTIONS="nocheck parallel=${JOBS:-2}"
CS_GIT_COMMIT=$commit dpkg-buildpackage -b -uc -us >"$work/build.log" 2>&1 || {
  tail -n 60 "$work/build.log" >&2
  echo "build-deb: dpkg-buildpackage failed (the last 60 lines are above)" >&2
  exit 1
}
cp "$work"/*.deb "$work"/*.buildinfo "$work"/*.changes "$out"/
ls "$out"/*.deb
