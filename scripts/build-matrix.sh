#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the tree with warnings as errors in every configuration a user or packager might pick:
# each CMake build type and the Debian packaging flags (dpkg-buildflags, CMAKE_BUILD_TYPE=None),
# with GCC and with clang. Optimisation levels change what the compilers warn about (GCC's
# -Wformat-truncation and -Wstringop-* at -O3, for instance), so each needs its own build.
#
#   scripts/build-matrix.sh [compiler...]     compilers default to "gcc clang"
#
# Environment: BUILD_ROOT (default /tmp/corestream-matrix) holds one build dir per combination,
# JOBS (default 2) is the parallelism of each build, TYPES overrides the list of configurations.
# Exits non-zero if any combination fails; the summary lists which.
set -uo pipefail
cd "$(dirname "$0")/.."

build_root=${BUILD_ROOT:-/tmp/corestream-matrix}
jobs=${JOBS:-2}
read -r -a types <<<"${TYPES:-Release RelWithDebInfo Debug MinSizeRel dpkg}"
compilers=("$@")
((${#compilers[@]})) || compilers=(gcc clang)

failed=()
for cc in "${compilers[@]}"; do
  for type in "${types[@]}"; do
    dir=$build_root/$cc-$type
    log=$dir.log
    mkdir -p "$build_root"
    echo "build-matrix: $cc $type ($dir)" >&2
    (
      set -e
      if [[ $type == dpkg ]]; then
        # What debhelper's cmake build system does: the flags in the environment, CPPFLAGS folded
        # into CFLAGS since CMake reads no CPPFLAGS, and no build type of our own.
        CFLAGS="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)"
        LDFLAGS=$(dpkg-buildflags --get LDFLAGS)
        export CFLAGS LDFLAGS
        cmake_type=None
      else
        unset CFLAGS LDFLAGS
        cmake_type=$type
      fi
      CC=$cc cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$cmake_type" -DCS_WERROR=ON
      cmake --build "$dir" -j "$jobs"
    ) >"$log" 2>&1 || failed+=("$cc-$type")
  done
done

if ((${#failed[@]})); then
  echo "build-matrix: FAILED: ${failed[*]} (logs: $build_root/<combination>.log)" >&2
  exit 1
fi
echo "build-matrix: all ${#compilers[@]}x${#types[@]} combinations built" >&2
