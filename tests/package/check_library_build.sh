#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A library-only build (ctest `library_only_build`): configures the tree with -DCS_BUILD_DAEMON=OFF
# where pkg-config knows only the library's modules (libssl, libcrypto, libzstd, libxxhash, and
# cmocka for its tests; a wrapper refuses every other module, as on a machine with only those
# -dev packages), builds it and runs its tests.
#   check_library_build.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
real=$(command -v pkg-config) || { echo "SKIP: no pkg-config"; exit 77; }
rm -rf "$work"
mkdir -p "$work/bin"
cat >"$work/bin/pkg-config" <<WRAP
#!/bin/sh
# Only the client library's modules exist here.
for a in "\$@"; do
  case \$a in
    -*|'>='*|'<='*|'='*|[0-9]*) ;;
    libssl|libcrypto|libzstd|libxxhash|cmocka) ;;
    *) echo "pkg-config (library-only machine): no module \$a" >&2; exit 1 ;;
  esac
done
exec "$real" "\$@"
WRAP
chmod +x "$work/bin/pkg-config"
cmake -S "$src" -B "$work/build" -DCS_BUILD_DAEMON=OFF -DCS_WERROR=ON \
  -DPKG_CONFIG_EXECUTABLE="$work/bin/pkg-config" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; echo "FAIL: the library-only build does not configure"; exit 1; }
cmake --build "$work/build" -j "$(nproc)" >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; echo "FAIL: the library-only build does not build"; exit 1; }
[[ ! -e $work/build/src/corestreamd ]] || { echo "FAIL: the daemon was configured"; exit 1; }
(cd "$work/build" && ctest -j "$(nproc)" --output-on-failure) || { echo "FAIL: its tests"; exit 1; }
echo "PASS: libremoteledger builds and passes its tests with only its own dependencies"
