#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Client CPU per ledger, for comparing benchrunner (libremoteledger) builds: for each round and each
# benchrunner given, a fresh corestreamd emits COUNT+LEAD synthetic ledgers of SIZE bytes every
# INTERVAL and ends by itself; the benchrunner follows ledgers LEAD-1 .. LEAD+COUNT-2 live (--mode
# remote) under /usr/bin/time, and its user+sys seconds (start-up included) divided by COUNT is the
# figure. Rounds alternate the builds, so drift on a shared box lands on both.
#   bench/client-cpu.sh CORESTREAMD raw|zstd BENCHRUNNER...
# Environment: SIZE (4194304), INTERVAL (50ms), COUNT (50), LEAD (4), ROUNDS (2), EXTRA (more
# benchrunner flags, e.g. "--busy-poll-us 50"). Prints one line per run:
#   <benchrunner> <shape> round=<r> ledgers=<n> user=<s> sys=<s> cpu_ms_per_ledger=<ms>
# CPU seconds are fairly robust to other load on the box (they count this process only); the
# latency it sees is not, and is not reported.
set -euo pipefail
csd=$1 shape=$2
shift 2
SIZE=${SIZE:-4194304} INTERVAL=${INTERVAL:-50ms} COUNT=${COUNT:-50} LEAD=${LEAD:-4} ROUNDS=${ROUNDS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $shape in
raw) sflags=(--compress=false) ;;
zstd) sflags=(--synthetic-compressible --compress=true) ;;
*) echo "shape must be raw or zstd" >&2; exit 2 ;;
esac
total=$((COUNT + LEAD + 2))
for ((r = 1; r <= ROUNDS; r++)); do
  for br in "$@"; do
    rm -rf "$tmp/data" && mkdir -p "$tmp/data"
    timeout -s TERM -k 5 120 "$csd" --listen 127.0.0.1:0 --data-dir "$tmp/data" --source synthetic \
      --synthetic-size "$SIZE" --synthetic-interval "$INTERVAL" --synthetic-count "$total" \
      --emit-window 5ms "${sflags[@]}" >"$tmp/server.log" 2>&1 &
    spid=$!
    addr=""
    for ((i = 0; i < 300; i++)); do
      addr=$(sed -n 's/.*msg="corestreamd listening" pid=[0-9]* addr=\([^ ]*\).*/\1/p' "$tmp/server.log" | head -1)
      [[ -n $addr ]] && break
      sleep 0.05
    done
    [[ -n $addr ]] || { cat "$tmp/server.log" >&2; kill "$spid"; exit 1; }
    # shellcheck disable=SC2086
    timeout -s INT -k 10 120 /usr/bin/time -f "%U %S" -o "$tmp/time" "$br" --mode remote --url "ws://$addr" \
      --start $((LEAD - 1)) --end $((LEAD + COUNT - 2)) ${EXTRA:-} >"$tmp/client.out" 2>"$tmp/client.err" || true
    wait "$spid" || true
    read -r u s <"$tmp/time"
    n=$(grep -o 'ledgers[ =:]*[0-9]*' "$tmp/client.out" | head -1 | grep -o '[0-9]*$' || echo "?")
    awk -v b="$br" -v sh="$shape" -v r="$r" -v n="$n" -v u="$u" -v s="$s" -v c="$COUNT" \
      'BEGIN { printf "%s %s round=%d ledgers=%s user=%s sys=%s cpu_ms_per_ledger=%.2f\n", b, sh, r, n, u, s, (u + s) * 1000 / c }'
  done
done
