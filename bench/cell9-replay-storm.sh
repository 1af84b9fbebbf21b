#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 9: replay amplification. A ring of RING ledgers (SIZE bytes, compressible) is filled
# unpaced, then a live corestreamd of the same run continues it (the ring keeps only ledgers of
# the run that continues it) at one SIZE ledger every 100 ms over 15 ms (zstd on) and one
# `benchrunner --mode remote` subscriber follows the tip for N ledgers, in four phases, each on a
# fresh live server over the same ring:
#   calm      the tip subscriber alone;
#   capped    plus bench/replay_storm.py: ATTACKERS plain connections from 127.0.0.1 asking
#             /stream?start=1&end=10000 at once, reading and discarding (defaults: --max-replays 8,
#             --max-replays-per-ip 2, so two run and the rest wait);
#   spread    the same with --max-replays-per-ip -1, as if the attackers came from many addresses
#             (the total cap of 8 is what holds);
#   uncapped  the same with --max-replays -1 --max-replays-per-ip -1 (the prototype's behaviour).
# Reported per phase: the tip's delivery p50/p99/max and the server's CPU (utime+stime from /proc)
# over the tip's run, and what the attackers read.
# Target (issue 10): an unauthenticated stranger cannot push a live subscriber's p99 past 2x.
# Environment: BUILD_DIR (default build), RING (1000), SIZE (1048576), N (100), ATTACKERS (50).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RING=${RING:-1000}
SIZE=${SIZE:-1048576}
N=${N:-100}
ATTACKERS=${ATTACKERS:-50}
bench_init cell9-replay-storm "replay amplification: $ATTACKERS x start=1&end=10000 against a ring of $RING x $SIZE B while a tip subscriber streams one every 100 ms"
need_tools curl python3

SERVER_DATA_DIR=$SCRATCH/ring
mkdir -p "$SERVER_DATA_DIR"
server_start fill 600 --retention $((RING + 1000)) --source synthetic --synthetic-compressible \
  --synthetic-size "$SIZE" --synthetic-interval=-1ns --emit-window 0 --compress=false --synthetic-count "$RING"
wait_rc "$SERVER_PID"
((RC == 0)) || die "the ring fill failed (see $CELL_DIR/fill.server.log)"
note "ring filled: $(find "$SERVER_DATA_DIR/ledgers" -name 'ledger-*.xdr' | wc -l) ledgers"

phase() { # NAME ATTACK corestreamd-flags...
  local name=$1 attack=$2 i lat=0 hz
  shift 2
  # Each phase continues the ring from where it stands, so its ledger numbers carry on.
  local next
  next=$(find "$SERVER_DATA_DIR/ledgers" -name 'ledger-*.xdr' | sed 's/.*ledger-\([0-9]*\)\.xdr/\1/' | sort -n | tail -1)
  server_start "$name" 300 --retention $((RING + 1000)) --start-ledger $((next + 1)) --source synthetic \
    --synthetic-compressible --synthetic-size "$SIZE" --synthetic-interval 100ms --emit-window 15ms "$@"
  local spid=$SERVER_PID addr=$SERVER_ADDR csd=$SERVER_CSD_PID
  for ((i = 0; i < 500; i++)); do
    hz=$(healthz "$addr"); lat=$(json_num "$hz" latest); lat=${lat:-0}
    ((lat > next)) && break
    sleep 0.02
  done
  local start=$((lat + 5)) end=$((lat + 5 + N - 1)) tip
  bg_benchrunner tip "$name-tip" $((N / 10 + 60)) --mode remote --url "ws://$addr" --start "$start" --end "$end"
  for ((i = 0; i < 1000; i++)); do
    hz=$(healthz "$addr"); lat=$(json_num "$hz" latest); lat=${lat:-0}
    ((lat >= start)) && break
    sleep 0.02
  done
  local cpu0 cpu1 atk="none"
  cpu0=$(proc_cpu_s "$csd")
  if ((attack)); then
    record_cmd python3 "$BENCH_DIR/replay_storm.py" "$addr" -n "$ATTACKERS" --seconds $((N / 10))
    atk=$(python3 "$BENCH_DIR/replay_storm.py" "$addr" -n "$ATTACKERS" --seconds $((N / 10)) 2>"$CELL_DIR/$name.storm.err")
  fi
  wait_rc "$tip"
  cpu1=$(proc_cpu_s "$csd")
  bg_interrupt "$spid" corestreamd
  local n p50 p90 p99 pmax cpu
  read -r n p50 p90 p99 pmax _ < <(csv_stats 7 0 "$CELL_DIR/$name-tip.csv")
  cpu=$(awk -v a="$cpu0" -v b="$cpu1" -v n="$N" 'BEGIN { printf "%.1f", (b - a) * 1000 / n }')
  note "$name: tip n=$n p50 $(ns2ms "$p50") ms p99 $(ns2ms "$p99") ms max $(ns2ms "$pmax") ms; server CPU $cpu ms per live ledger; attackers: $atk"
  metric "${name}_p99_ns" "$p99"
  metric "${name}_cpu_ms_per_ledger" "$cpu"
  metric "${name}_attack" "$atk"
  eval "P99_$name=$p99 CPU_$name=$cpu"
}

phase calm 0
phase capped 1
phase spread 1 --max-replays-per-ip -1
phase uncapped 1 --max-replays -1 --max-replays-per-ip -1
lim=$(awk -v b="$P99_calm" 'BEGIN { printf "%.3f", 2 * b / 1e6 }')
table_header
row "tip p99, no attack" "$(ns2ms "$P99_calm") ms, CPU $CPU_calm ms/ledger" "(baseline)"
row "tip p99, $ATTACKERS replays from one address" "$(ns2ms "$P99_capped") ms, CPU $CPU_capped ms/ledger" "<= $lim ms (2x)" "$(verdict_le "$(ns2ms "$P99_capped")" "$lim")"
row "tip p99, $ATTACKERS replays, no per-address cap" "$(ns2ms "$P99_spread") ms, CPU $CPU_spread ms/ledger" "<= $lim ms (2x)" "$(verdict_le "$(ns2ms "$P99_spread")" "$lim")"
row "tip p99, no replay caps (prototype)" "$(ns2ms "$P99_uncapped") ms, CPU $CPU_uncapped ms/ledger" "(comparison)"
cell_done
