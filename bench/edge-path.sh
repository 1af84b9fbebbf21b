#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Edge path (issue 15): delivery to a subscriber of an edge (core → JetStream → corestreamd
# --source jetstream → subscriber) against delivery straight from the core, the same ledgers in
# the same run, and the core's CPU per ledger with and without the JetStream publisher.
#   small  1048576 B every 100ms over 15ms, uncompressed                 n = COUNT_SMALL (300)
#   gate   15196160 B compressible every 600ms over 7500us, zstd on       n = COUNT_GATE (100)
# For each shape: (1) the core alone, one direct subscriber (CPU without the publisher); (2) the
# core publishing to NATS, an edge following the stream, and two subscribers in one process
# (build/tests/edge_delivery): one on the core, one on the edge. The edge stamps its own END,
# so the edge path's delivery is taken against the core's emit end of the same ledger (one clock).
# The core emits n + LEAD ledgers and ends by itself; the subscribers start at its tip + 2.
# The edge runs at --log-level debug, and bench/edge_stages.py splits the edge path's time per
# ledger into its stages (for ledgers taken live: the hop from the core through the server's
# routing; for ledgers read from the stream: publish and store, the server's push; for all: the
# edge's verify and forward, the last hop), printed as p50/p99/max rows under each shape.
# Targets: the edge adds at most 3 ms p99 over direct at the small shape; publishing costs the
# core at most 10 % more CPU per ledger.
# Environment: BUILD_DIR (default build), COUNT_SMALL, COUNT_GATE, SHAPES (default "small gate"),
# CLUSTER=1 for a 3-node R3 JetStream cluster on loopback instead of one server.
#   --tiny     a few seconds at 65536 B every 100 ms, n = 20: proves the script works, measures
#              nothing.
# Wall time: about 2 × (30 + 60) s for small and 2 × (60 + 60) s for gate, 7 minutes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TINY=0
[[ ${1:-} == --tiny ]] && TINY=1
COUNT_SMALL=${COUNT_SMALL:-300}
COUNT_GATE=${COUNT_GATE:-100}
SHAPES=${SHAPES:-small gate}
CLUSTER=${CLUSTER:-0}
LEAD=40 # slack for the edge and (CLUSTER=1) the R3 stream to come up before the range starts
if ((TINY)); then SHAPES=tiny; fi

plane=$([[ $CLUSTER == 1 ]] && echo "3-node R3 cluster" || echo "one nats-server")
bench_init edge-path "edge path via $plane against direct from the core$( ((TINY)) && echo ' (tiny: a check, not a measurement)')"
need_tools nats-server curl python3
EDGE_DELIVERY=$BUILD_DIR/tests/edge_delivery
[[ -x $EDGE_DELIVERY ]] || die "$EDGE_DELIVERY is missing: build the tests (cmake --build $BUILD_DIR --target edge_delivery)"

source "$(dirname "${BASH_SOURCE[0]}")/natsplane.sh"

tip() { json_num "$(healthz "$1")" latest; }

# core_metric ADDR NAME: a sample of the core's /metrics.
core_metric() {
  curl -s --max-time 2 "http://$1/metrics" | sed -n "s/^$2 \\([0-9]*\\)$/\\1/p" | head -1
}

# wait_for VALUE_CMD MIN SECONDS: polls until the command prints a number >= MIN.
wait_for() {
  local i v
  for ((i = 0; i < $3 * 10; i++)); do
    v=$(eval "$1")
    [[ -n $v && $v -ge $2 ]] && return 0
    sleep 0.1
  done
  return 1
}

nats_start

declare -A R
# shape NAME COUNT LIMIT_S core-flags...
shape() {
  local name=$1 count=$2 limit=$3
  shift 3
  local emitted=$((count + LEAD)) from rc
  local core=(--source synthetic --synthetic-count "$emitted" "$@")

  note "== $name: core alone (no publisher), one direct subscriber"
  server_start "$name-nopub" "$limit" "${core[@]}"
  wait_for "tip $SERVER_ADDR" 1 30 || die "$name-nopub: no ledger within 30 s"
  from=$(($(tip "$SERVER_ADDR") + 2))
  record_cmd "$EDGE_DELIVERY" "ws://$SERVER_ADDR" - "$from" "$count" "$CELL_DIR/$name-nopub.csv" "$limit"
  "$EDGE_DELIVERY" "ws://$SERVER_ADDR" - "$from" "$count" "$CELL_DIR/$name-nopub.csv" "$limit" \
    >"$CELL_DIR/$name-nopub.out" 2>&1 || note "  edge_delivery: $(tail -1 "$CELL_DIR/$name-nopub.out")"
  wait_rc "$SERVER_PID"
  R[${name}_nopub_cpu]=$(timev_cpu_s "$CELL_DIR/$name-nopub.server.time")
  R[${name}_nopub_n]=$emitted
  read -r _ R[${name}_nopub_d50] R[${name}_nopub_d99] _ < <(grep '^direct ' "$CELL_DIR/$name-nopub.out" | cut -d' ' -f2-) || true

  note "== $name: core publishing to JetStream, an edge, a subscriber on each"
  local js=(--jetstream-url "$NATS_URLS" --jetstream-max-bytes 4294967296)
  [[ $CLUSTER == 1 ]] && js+=(--jetstream-replicas 3)
  server_start "$name-core" "$limit" "${core[@]}" "${js[@]}"
  local core_addr=$SERVER_ADDR core_pid=$SERVER_PID
  wait_for "core_metric $core_addr corestreamd_jetstream_ledgers_total" 1 30 || die "$name-core: nothing published within 30 s"
  server_start "$name-edge" "$limit" --source jetstream --jetstream-source-url "$NATS_URLS" --log-level debug
  local edge_addr=$SERVER_ADDR edge_pid=$SERVER_PID
  from=$(($(tip "$core_addr") + 2))
  record_cmd "$EDGE_DELIVERY" "ws://$core_addr" "ws://$edge_addr" "$from" "$count" "$CELL_DIR/$name.csv" "$limit"
  "$EDGE_DELIVERY" "ws://$core_addr" "ws://$edge_addr" "$from" "$count" "$CELL_DIR/$name.csv" "$limit" \
    >"$CELL_DIR/$name.out" 2>&1 || note "  edge_delivery: $(tail -1 "$CELL_DIR/$name.out")"
  R[${name}_js]=$(curl -s --max-time 2 "http://$core_addr/metrics" | grep '^corestreamd_jetstream_' | tr '\n' ' ')
  wait_rc "$core_pid"
  bg_stop "$edge_pid"
  R[${name}_pub_cpu]=$(timev_cpu_s "$CELL_DIR/$name-core.server.time")
  R[${name}_pub_n]=$emitted
  read -r R[${name}_dn] R[${name}_d50] R[${name}_d99] R[${name}_dmax] < <(grep '^direct ' "$CELL_DIR/$name.out" | cut -d' ' -f2-) || true
  read -r R[${name}_en] R[${name}_e50] R[${name}_e99] R[${name}_emax] < <(grep '^edge ' "$CELL_DIR/$name.out" | cut -d' ' -f2-) || true
  R[${name}_count]=$count
  python3 "$(dirname "${BASH_SOURCE[0]}")/edge_stages.py" "$CELL_DIR/$name-edge.server.log" "$CELL_DIR/$name.csv" \
    >"$CELL_DIR/$name.stages" || note "  edge_stages.py failed"
}

for s in $SHAPES; do
  case $s in
  tiny) shape tiny 20 120 --synthetic-size 65536 --synthetic-interval 100ms --emit-window 15ms --compress=false ;;
  small) shape small "$COUNT_SMALL" $((COUNT_SMALL / 10 + 120)) --synthetic-size 1048576 --synthetic-interval 100ms \
    --emit-window 15ms --compress=false ;;
  gate) shape gate "$COUNT_GATE" $((COUNT_GATE * 6 / 10 + 120)) --synthetic-size 15196160 --synthetic-compressible \
    --synthetic-interval 600ms --emit-window 7500us --compress=true ;;
  *) die "unknown shape $s (small, gate)" ;;
  esac
done

echo | say
table_header
for s in $SHAPES; do
  note "shape $s ($plane)"
  n=${R[${s}_count]}
  row "  ledgers: direct / edge subscriber" "${R[${s}_dn]:-0} / ${R[${s}_en]:-0}" "$n / $n" "$(verdict_eq "${R[${s}_dn]:-0}/${R[${s}_en]:-0}" "$n/$n")"
  row "  direct delivery p50/p99/max" "$(ns2ms "${R[${s}_d50]:-}")/$(ns2ms "${R[${s}_d99]:-}")/$(ns2ms "${R[${s}_dmax]:-}") ms" "(information)"
  row "  edge delivery p50/p99/max" "$(ns2ms "${R[${s}_e50]:-}")/$(ns2ms "${R[${s}_e99]:-}")/$(ns2ms "${R[${s}_emax]:-}") ms" "(information)"
  extra=$(awk -v e="${R[${s}_e99]:-0}" -v d="${R[${s}_d99]:-0}" 'BEGIN { printf "%.3f", (e - d) / 1e6 }')
  if [[ $s == small ]]; then
    row "  edge p99 minus direct p99" "$extra ms" "<= 3 ms" "$(verdict_le "$extra" 3)"
  else
    row "  edge p99 minus direct p99" "$extra ms" "(information)"
  fi
  while read -r stage n p50 p99 max; do
    row "  edge stage $stage p50/p99/max" "$(ns2ms "$p50")/$(ns2ms "$p99")/$(ns2ms "$max") ms (n=$n)" "(information)"
    metric "${s}_stage_${stage}_p50_ns" "$p50"
    metric "${s}_stage_${stage}_p99_ns" "$p99"
  done <"$CELL_DIR/$s.stages"
  c0=$(div "${R[${s}_nopub_cpu]}" "${R[${s}_nopub_n]}" %.5f) c1=$(div "${R[${s}_pub_cpu]}" "${R[${s}_pub_n]}" %.5f)
  ratio=$(div "$c1" "$c0" %.3f)
  row "  core CPU s/ledger without / with publisher" "$c0 / $c1" "(information)"
  row "  core CPU with publisher / without" "$ratio" "<= 1.10" "$(verdict_le "$ratio" 1.10)"
  note "  core /metrics at the end: ${R[${s}_js]:-n/a}"
  metric "${s}_direct_p50_ns" "${R[${s}_d50]:-}"
  metric "${s}_direct_p99_ns" "${R[${s}_d99]:-}"
  metric "${s}_edge_p50_ns" "${R[${s}_e50]:-}"
  metric "${s}_edge_p99_ns" "${R[${s}_e99]:-}"
  metric "${s}_core_cpu_s_per_ledger_nopub" "$c0"
  metric "${s}_core_cpu_s_per_ledger_pub" "$c1"
done
cell_done
