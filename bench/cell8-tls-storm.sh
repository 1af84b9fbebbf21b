#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 8: a TLS connect storm. corestreamd serves wss:// (a certificate made for the run) with
# 1 MiB ledgers every 100 ms over 15 ms; 8 benchrunner --mode remote subscribers stream N ledgers
# from the tip, twice: alone, then while bench/tls_storm.py opens STORM TLS WebSocket connections
# at once. Reported: the 8 subscribers' pooled delivery p50/p99 in each phase, and how long the
# storm took until every one of its connections had its first live message.
# Target (issue 10): live p99 during the storm within 2x of without it.
# Each storm connection closes once it has its first message (a storm of connects); HOLD=1 keeps
# them all open until the storm ends, which adds up to STORM unread subscribers to the fan-out.
# Environment: BUILD_DIR (default build), N (default 100), STORM (default 256), HOLD (default 0).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${N:-100}
STORM=${STORM:-256}
HOLD=${HOLD:-0}
storm_args=()
((HOLD)) && storm_args=(--hold)
bench_init cell8-tls-storm "TLS connect storm: $STORM wss connects while 8 subscribers stream 1 MiB every 100 ms"
need_tools curl python3
tls_material "$SCRATCH/tls"
HEALTHZ_SCHEME=https HEALTHZ_CURL=(--cacert "$TLS_CA")

phase() { # NAME WITH_STORM
  local name=$1 storm=$2 i lat=0 hz
  mkdir -p "$CELL_DIR/$name"
  server_start "$name/server" 300 --source synthetic --synthetic-size 1048576 --synthetic-interval 100ms \
    --emit-window 15ms --compress=false --retention 256 --tls-cert "$TLS_CERT" --tls-key "$TLS_KEY" \
    --max-connections-per-ip -1
  local spid=$SERVER_PID addr=$SERVER_ADDR
  for ((i = 0; i < 500; i++)); do
    hz=$(healthz "$addr"); lat=$(json_num "$hz" latest); lat=${lat:-0}
    ((lat >= 1)) && break
    sleep 0.02
  done
  local start=$((lat + 20)) end=$((lat + 20 + N - 1)) pids=()
  for ((i = 1; i <= 8; i++)); do
    bg_benchrunner "p$i" "$name/sub-$i" $((N / 10 + 60)) --mode remote --url "wss://$addr" -tls-ca "$TLS_CA" \
      --start "$start" --end "$end"
    eval "pids+=(\"\$p$i\")"
  done
  for ((i = 0; i < 1000; i++)); do
    hz=$(healthz "$addr"); lat=$(json_num "$hz" latest); lat=${lat:-0}
    ((lat >= start)) && break
    sleep 0.02
  done
  local storm_line="none"
  if ((storm)); then
    record_cmd python3 "$BENCH_DIR/tls_storm.py" "$addr" --ca "$TLS_CA" -n "$STORM" "${storm_args[@]}"
    storm_line=$(python3 "$BENCH_DIR/tls_storm.py" "$addr" --ca "$TLS_CA" -n "$STORM" "${storm_args[@]}" \
      2>"$CELL_DIR/$name/storm.err")
  fi
  for p in "${pids[@]}"; do wait_rc "$p"; done
  bg_interrupt "$spid" corestreamd
  local n p50 p90 p99 pmax
  read -r n p50 p90 p99 pmax _ < <(csv_stats 7 0 "$CELL_DIR/$name"/sub-*.csv)
  note "$name: n=$n p50 $(ns2ms "$p50") ms p99 $(ns2ms "$p99") ms max $(ns2ms "$pmax") ms; storm: $storm_line"
  metric "${name}_p99_ns" "$p99"
  metric "${name}_storm" "$storm_line"
  eval "P99_$name=$p99"
}

phase calm 0
phase storm 1
lim=$(awk -v b="$P99_calm" 'BEGIN { printf "%.3f", 2 * b / 1e6 }')
table_header
row "live p99 without the storm" "$(ns2ms "$P99_calm") ms" "(baseline)"
row "live p99 during $STORM TLS connects" "$(ns2ms "$P99_storm") ms" "<= $lim ms (2x)" "$(verdict_le "$(ns2ms "$P99_storm")" "$lim")"
cell_done
