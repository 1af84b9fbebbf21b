#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Go module (go/remoteledger) against this build tree: go vet of the module and of the
# example program, then go test -race (cgocheck on, the default) against the corestreamd built
# here. libremoteledger comes from the build tree through a generated remoteledger.pc whose
# libraries carry an rpath, so neither an install nor LD_LIBRARY_PATH is needed. Everything Go
# writes (build cache, GOPATH) stays under the work dir: CI runs as root with HOME possibly
# unset, and there is no network (GOPROXY=off; the module has no dependencies).
# The real-ledger test reads the realmeta dir (../shared/realmeta by default) in place through
# CS_REALMETA_DIR, and skips, naming it, where it is absent.
# Usage: go_module.sh <go binary or empty> <source dir> <work dir> <pkg-config dir> <corestreamd>
#                     [<realmeta dir>]
set -eu
go=$1 src=$2 work=$3 pcdir=$4 corestreamd=$5 realmeta=${6:-}
if [ -z "$go" ] || [ ! -x "$go" ]; then
  echo "go_module: SKIP: no Go 1.23 toolchain was found at configure time (scripts/setup.sh installs golang-1.23-go from bookworm-backports; re-run cmake after)"
  exit 77
fi
mkdir -p "$work/cache" "$work/path" "$work/tmp"
export PKG_CONFIG_PATH="$pcdir" GOCACHE="$work/cache" GOPATH="$work/path" GOTMPDIR="$work/tmp" \
  GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local GOTELEMETRY=off CGO_ENABLED=1 \
  CORESTREAMD="$corestreamd" CS_REALMETA_DIR="$realmeta"
unset GOROOT GODEBUG
"$go" version
cd "$src/go/remoteledger"
"$go" vet ./...
(cd ../example && "$go" vet ./...)
"$go" test -race -count=1 -v ./...
