#!/usr/bin/env bash
# The main job. The loopback measurement (benchrunner --mode loopback) lands with the
# libremoteledger/benchrunner work; until then this reports what is built.
set -euo pipefail
builddir=${1:-build}
echo "corestream: built so far in $builddir:"
for f in "$builddir"/src/*.a "$builddir"/src/*/corestreamd "$builddir"/src/*/benchrunner "$builddir"/src/*/libremoteledger*; do
  [[ -e $f ]] && echo "  $f"
done
echo "corestream: the loopback demo needs benchrunner, which is not built yet."
