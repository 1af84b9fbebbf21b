#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ring writer's CPU per ledger in a live corestreamd: the gate shape (14.5 MiB compressible
# ledgers, zstd, one every 600 ms over 7.5 ms) with no subscriber, COUNT ledgers, then the CPU
# seconds (utime + stime from /proc/<pid>/task/<tid>/stat) of each thread role, per ledger.
# CPU time is the thread's own, so other load on the box moves it far less than wall time; the
# kernel's flusher and block-completion work is not in any of these threads. The last sample is
# taken per thread just before it exits (sampled every 200 ms; each thread's largest sample
# counts), so up to 200 ms of a thread's work may be missing: totals are divided by the ledgers
# the log says were published.
# Environment: BUILD_DIR (default build), COUNT (40), SIZE (15204352), INTERVAL (600ms),
# WINDOW (7500us), EXTRA (more corestreamd flags, e.g. "--ring-cache-ledgers 8").
# Prints one line per thread role: role=<comm> threads=<n> cpu_ms_per_ledger=<x>, then
# process cpu_ms_per_ledger.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN=$BUILD_DIR/src/corestreamd/corestreamd
COUNT=${COUNT:-40}
SIZE=${SIZE:-15204352}
INTERVAL=${INTERVAL:-600ms}
WINDOW=${WINDOW:-7500us}
EXTRA=${EXTRA:-}
[[ -x $BIN ]] || { echo "ring-cpu.sh: $BIN is missing: build first" >&2; exit 1; }
DIR=$(mktemp -d /tmp/ring-cpu.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
TCK=$(getconf CLK_TCK)
# shellcheck disable=SC2086
"$BIN" --listen 127.0.0.1:0 --data-dir "$DIR/data" --source synthetic --synthetic-size "$SIZE" \
  --synthetic-compressible --synthetic-interval "$INTERVAL" --emit-window "$WINDOW" \
  --synthetic-count "$COUNT" --retention 1000 $EXTRA >"$DIR/log" 2>&1 &
PID=$!
LIMIT=$(( COUNT * 2 + 60 )) # seconds: the run takes COUNT x INTERVAL plus start-up
for ((i = 0; i < LIMIT * 5; i++)); do
  snap=""
  for t in /proc/$PID/task/*; do
    st=$(cat "$t/stat" 2>/dev/null) || continue
    comm=${st#*(}; comm=${comm%%)*}
    rest=${st##*) }
    read -r -a f <<<"$rest"
    snap+="$(basename "$t") ${comm// /_} $(( f[11] + f[12] ))"$'\n'
  done
  [[ -n $snap ]] && echo -n "$snap" >>"$DIR/samples"
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.2
done
if kill -0 "$PID" 2>/dev/null; then kill "$PID"; fi
wait "$PID" || true
N=$(grep -o 'source exhausted.*ledgers=[0-9]*' "$DIR/log" | grep -o '[0-9]*$' || echo "$COUNT")
awk -v n="$N" -v tck="$TCK" '{ if ($3 > max[$1]) max[$1] = $3; role[$1] = $2 }
  END { for (t in max) { cpu[role[t]] += max[t]; thr[role[t]]++; all += max[t] }
        for (r in cpu) printf "role=%s threads=%d cpu_ms_per_ledger=%.2f\n", r, thr[r], cpu[r] * 1000 / tck / n;
        printf "process ledgers=%d cpu_ms_per_ledger=%.2f\n", n, all * 1000 / tck / n }' "$DIR/samples" | sort
