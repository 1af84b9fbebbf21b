#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Server memory with K subscribers: `read` ones (benchrunner --mode remote) or `stall` ones that
# connect and never read. 1 MiB ledgers every 100 ms; samples RssAnon/RssFile after 8 s.
#   bench/memory.sh 1 read; bench/memory.sh 64 read; bench/memory.sh 64 stall
set -euo pipefail
K=${1:?K}; KIND=${2:?read|stall}
B=${BUILD_DIR:-build}
here=$(cd "$(dirname "$0")" && pwd)
D=$(mktemp -d)
PIDS=()
cleanup() { kill -INT "${PIDS[@]}" 2>/dev/null || true; kill -TERM "$SP" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$D"; }
"$B/src/corestreamd/corestreamd" --listen 127.0.0.1:0 --data-dir "$D" --synthetic-size 1048576 \
  --synthetic-interval 100ms --emit-window 15ms > "$D/log" 2>&1 &
SP=$!
trap cleanup EXIT
for _ in $(seq 100); do grep -q listening "$D/log" && break; sleep 0.1; done
PORT=$(grep -o 'addr=127.0.0.1:[0-9]*' "$D/log" | cut -d: -f2)
for _ in $(seq "$K"); do
  if [[ $KIND == read ]]; then
    "$B/src/benchrunner/benchrunner" --mode remote --url "ws://127.0.0.1:$PORT" >/dev/null 2>&1 &
  else
    python3 "$here/stall_subscriber.py" "$PORT" 30 >/dev/null 2>&1 &
  fi
  PIDS+=($!)
done
sleep 8
mem=$(grep -E 'RssAnon|RssFile|VmHWM' "/proc/$SP/status" | tr -s ' \t' ' ' | tr '\n' ' ')
echo "K=$K $KIND: $mem healthz $(curl -s "127.0.0.1:$PORT/healthz")"
