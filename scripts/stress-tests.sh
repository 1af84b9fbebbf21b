#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the end-to-end and concurrency tests (ctest labels e2e and concurrency) ROUNDS times in a
# row, plain and under ThreadSanitizer, beside two busy loops that keep both cores of a 2-vCPU
# machine contended, and fails on the first failing round. A test that fails here is a bug to fix,
# never to retry.
#
#   scripts/stress-tests.sh                 10 rounds of each build (plain: build/, TSan: build-tsan/)
#   ROUNDS=3 BUILDS=plain scripts/stress-tests.sh
#
# ROUNDS (default 10), BUILDS ("plain tsan"), BUSY (busy loops, default 2), LOG_DIR (where each
# round's ctest output goes, default a new temporary directory). The builds are configured and
# built as `make test-plain` and `make test-tsan` do. Prints one line per round and a tally:
# `N passed, M failed`. Exit 0 only when every round passed.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-10}
BUILDS=${BUILDS:-plain tsan}
BUSY=${BUSY:-2}
LOG_DIR=${LOG_DIR:-$(mktemp -d -t cs-stress.XXXXXX)}
JOBS=$(nproc 2>/dev/null || echo 2)
mkdir -p "$LOG_DIR"

busy_pids=()
stop_busy() {
  for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${busy_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  busy_pids=()
}
trap stop_busy EXIT INT TERM

build() { # name dir cmake-flags...
  local dir=$2
  shift 2
  cmake -S . -B "$dir" -DCS_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS" >/dev/null
}

passed=0
failed=0
for b in $BUILDS; do
  case $b in
    plain) dir=build; build plain "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCS_ASAN=OFF -DCS_TSAN=OFF ;;
    tsan) dir=build-tsan; build tsan "$dir" -DCMAKE_BUILD_TYPE=Debug -DCS_ASAN=OFF -DCS_TSAN=ON ;;
    *) echo "stress-tests: unknown build '$b' (plain, tsan)" >&2; exit 2 ;;
  esac
  # TSan runs only the tests labelled concurrency, as `make test-tsan` does.
  labels='e2e|concurrency'
  [ "$b" = tsan ] && labels='concurrency'
  for i in $(seq 1 "$BUSY"); do
    (while :; do :; done) &
    busy_pids+=($!)
  done
  for r in $(seq 1 "$ROUNDS"); do
    log="$LOG_DIR/$b-$r.log"
    start=$(date +%s)
    if (cd "$dir" && ctest -j "$JOBS" -L "$labels" --output-on-failure --timeout 900) >"$log" 2>&1; then
      passed=$((passed + 1))
      echo "stress-tests: $b round $r/$ROUNDS passed ($(($(date +%s) - start)) s)"
    else
      failed=$((failed + 1))
      echo "stress-tests: $b round $r/$ROUNDS FAILED ($(($(date +%s) - start)) s): $log"
      grep -E '^\s*[0-9]+ - |\*\*\*Failed|Exception' "$log" || true
    fi
  done
  stop_busy
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
