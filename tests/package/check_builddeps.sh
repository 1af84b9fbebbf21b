#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# debian/control's Build-Depends cover what CMake requires (ctest `builddeps_cover_cmake`): for
# every module of a `pkg_check_modules(... REQUIRED ...)` the package build configures (the test
# suite's are not: debian/rules passes -DBUILD_TESTING=OFF), the package that ships its .pc file must
# be in Build-Depends. Run on the build machine, where the modules are installed.
#   check_builddeps.sh SOURCE_DIR
set -euo pipefail
src=$1
command -v dpkg >/dev/null && command -v pkg-config >/dev/null || { echo "SKIP: no dpkg or pkg-config"; exit 77; }
deps=$(sed -n '/^Build-Depends:/,/^[A-Z]/p' "$src/debian/control" | sed 's/^Build-Depends://; s/([^)]*)//g' |
  tr ',' '\n' | sed 's/^[[:space:]]*//; s/[[:space:]]*$//' | grep -v '^$' | grep -v '^[A-Z]')
# The modules named in REQUIRED calls, outside the test suite's block.
modules=$(cat "$src/CMakeLists.txt" "$src"/src/*/CMakeLists.txt "$src"/src/*/*/CMakeLists.txt 2>/dev/null |
  grep -o 'pkg_check_modules([A-Z_]* REQUIRED IMPORTED_TARGET [^)]*)' |
  sed 's/.*IMPORTED_TARGET //; s/)$//' | tr ' ' '\n' | grep -v -x cmocka | sort -u)
missing=()
for m in $modules; do
  pc=$(pkg-config --variable=pcfiledir "$m")/$m.pc
  pkg=$(dpkg -S "$pc" 2>/dev/null | head -n1 | cut -d: -f1) || true
  [[ -n $pkg ]] || { echo "FAIL: $m.pc ($pc) belongs to no installed package"; exit 1; }
  grep -qx -- "$pkg" <<<"$deps" || missing+=("$pkg (for $m)")
done
if ((${#missing[@]})); then
  echo "FAIL: debian/control Build-Depends lacks ${missing[*]}"
  exit 1
fi
echo "PASS: Build-Depends cover $(echo $modules | wc -w) modules: $(echo $modules)"
