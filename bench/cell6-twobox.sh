#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 6: an emulated two-box link. The script creates two network namespaces joined by a veth
# pair (10.251.0.1/30 in the server namespace, 10.251.0.2/30 in the client namespace; nothing is
# addressed or routed outside them), shapes both directions with tc tbf to LINK_RATE (5gbit, the
# EC2 single-flow cap outside a placement group) and, where the kernel has sch_netem, adds
# LINK_DELAY (50us) one-way in each direction under the tbf. It prints the single-flow rate
# iperf3 actually measures across the link, then runs the shapes of cells 1 and 2 across it:
# corestreamd in the server namespace, `benchrunner --mode remote` in the client namespace (both
# under /usr/bin/time -v). The server emits n + 8 ledgers and ends by itself; the client joins at
# the tip and ends by itself two ledgers earlier.
#   link-c1  15196160 B every 600ms over 15ms, uncompressed, --verify
#   link-c2  15196160 B compressible every 600ms over 7500us, zstd on, --verify --remote-compressible
# Targets (cells 1 and 2): delivery p99 <= 2 ms and max <= 5 ms; for link-c2 zero raw fallbacks and
# t_emit within 10% of 7.5 ms. The prototype's readings at 5 Gbit/s are printed beside them
# (uncompressed 18.60/19.32 ms p50/p99: uncompressed cannot fit a 14.5 MiB ledger in the window at
# this rate; compressed 1.25/2.32 ms).
# Needs root (ip netns, tc); removes the namespaces (and so the veth pair) on exit, however it ends.
# Wall time: about 2 x 65 s + 15 s of iperf3, 2.5 minutes.
# Environment: BUILD_DIR (default build), COUNT (100), LINK_RATE (5gbit), LINK_DELAY (50us),
# TBF_BURST (256kb), TBF_LATENCY (10ms), IPERF_SECONDS (5), VERIFY (1).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

COUNT=${COUNT:-100}
LINK_RATE=${LINK_RATE:-5gbit}
LINK_DELAY=${LINK_DELAY:-50us}
TBF_BURST=${TBF_BURST:-256kb}
TBF_LATENCY=${TBF_LATENCY:-10ms}
IPERF_SECONDS=${IPERF_SECONDS:-5}
VERIFY=${VERIFY:-1}

[[ $(id -u) -eq 0 ]] || die "cell 6 needs root: it creates network namespaces and a veth pair and shapes them with tc"
bench_init cell6-twobox "emulated two-box link: netns + veth, tbf $LINK_RATE, cells 1 and 2 across it"
need_tools ip tc iperf3 curl

NS_S=csbench-srv-$$
NS_C=csbench-cli-$$
VS=csbs$$
VC=csbc$$
ADDR_S=10.251.0.1
ADDR_C=10.251.0.2
for ns in "$NS_S" "$NS_C"; do
  [[ ! -e /run/netns/$ns ]] || die "network namespace $ns already exists"
done
# Namespaces left by a run that was killed with SIGKILL (its trap could not run): say so.
for ns in $(ip netns list 2>/dev/null | awk '/^csbench-(srv|cli)-[0-9]+/ { print $1 }'); do
  pid=${ns##*-}
  pid_alive "$pid" || note "warning: $ns is left over from an earlier run that did not clean up; remove it with: ip netns del $ns"
done
CLEANUP_HOOKS+=("ip link del $VS 2>/dev/null; ip netns del $NS_S 2>/dev/null; ip netns del $NS_C 2>/dev/null")

sh_log() { # run and record a set-up command
  record_cmd "$@"
  "$@"
}
sh_log ip netns add "$NS_S"
sh_log ip netns add "$NS_C"
sh_log ip link add "$VS" type veth peer name "$VC"
sh_log ip link set "$VS" netns "$NS_S"
sh_log ip link set "$VC" netns "$NS_C"
sh_log ip -n "$NS_S" addr add "$ADDR_S/30" dev "$VS"
sh_log ip -n "$NS_C" addr add "$ADDR_C/30" dev "$VC"
for pair in "$NS_S:$VS" "$NS_C:$VC"; do
  ns=${pair%%:*} dev=${pair#*:}
  sh_log ip -n "$ns" link set lo up
  sh_log ip -n "$ns" link set "$dev" up
done

# Shape both directions: tbf at the root of each end's egress, netem (if present) under it.
netem_note="not added: this kernel has no sch_netem ('tc qdisc add ... netem' fails)"
netem_ok=1
for pair in "$NS_S:$VS" "$NS_C:$VC"; do
  ns=${pair%%:*} dev=${pair#*:}
  sh_log ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: tbf rate "$LINK_RATE" burst "$TBF_BURST" latency "$TBF_LATENCY" ||
    die "tc tbf failed in namespace $ns: this kernel cannot shape the link"
  if ((netem_ok)) && ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$LINK_DELAY" 2>/dev/null; then
    record_cmd ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$LINK_DELAY"
    netem_note="$LINK_DELAY one-way in each direction (netem under tbf)"
  else
    netem_ok=0
  fi
done
if ((!netem_ok)); then
  # Never leave half a delay: remove a netem that went in on the first end only.
  for pair in "$NS_S:$VS" "$NS_C:$VC"; do
    ip netns exec "${pair%%:*}" tc qdisc del dev "${pair#*:}" parent 1:1 handle 10: 2>/dev/null || true
  done
  netem_note="not added: this kernel has no sch_netem ('tc qdisc add ... netem' fails)"
fi
note "link        $ADDR_S ($NS_S) <-> $ADDR_C ($NS_C), tbf $LINK_RATE burst $TBF_BURST latency $TBF_LATENCY both ways"
note "delay       $netem_note"
ip netns exec "$NS_S" tc qdisc show dev "$VS" | sed "s/^/qdisc $NS_S: /" | say
ip netns exec "$NS_C" tc qdisc show dev "$VC" | sed "s/^/qdisc $NS_C: /" | say

# The single-flow rate actually measured across the link, both directions.
iperf_rate() { # FLAGS... -> "X Gbits/sec" of the receiver
  local out i
  for ((i = 0; i < 3; i++)); do
    record_cmd ip netns exec "$NS_S" timeout 60 iperf3 -s -1 -B "$ADDR_S" -p 5201
    bg_start IPERF_PID "$CELL_DIR/iperf3-server.log" ip netns exec "$NS_S" timeout 60 iperf3 -s -1 -B "$ADDR_S" -p 5201
    sleep 0.5
    record_cmd ip netns exec "$NS_C" timeout 60 iperf3 -c "$ADDR_S" -p 5201 -t "$IPERF_SECONDS" "$@"
    out=$(ip netns exec "$NS_C" timeout 60 iperf3 -c "$ADDR_S" -p 5201 -t "$IPERF_SECONDS" "$@" 2>&1) || true
    bg_stop "$IPERF_PID"
    printf '%s\n' "$out" >>"$CELL_DIR/iperf3.txt"
    if grep -q receiver <<<"$out"; then
      awk '/receiver/ { for (i = 2; i <= NF; i++) if ($i ~ /bits\/sec$/) { print $(i - 1), $i; exit } }' <<<"$out"
      return 0
    fi
  done
  echo "failed"
}
rate_sc=$(iperf_rate -R)
rate_cs=$(iperf_rate)
note "iperf3     single flow server->client: $rate_sc; client->server: $rate_cs (goodput; tbf counts L2 bytes)"
metric iperf3_server_to_client "$rate_sc"
metric iperf3_client_to_server "$rate_cs"
echo | say

# The two cells across the link.
SRV_PREFIX=(ip netns exec "$NS_S")
CLI_PREFIX=(ip netns exec "$NS_C")
LISTEN=$ADDR_S:0
v1=() v2=()
((VERIFY)) && v1=(--verify --synthetic-size 15196160) v2=(--verify --remote-compressible --synthetic-size 15196160)

ns_tx_bytes() { ip netns exec "$NS_S" cat "/sys/class/net/$VS/statistics/tx_bytes"; }
ns_retrans() { ip netns exec "$NS_S" awk '/^Tcp:/ { if (h) { for (i = 1; i <= NF; i++) if (k[i] == "RetransSegs") print $i } else { h = 1; for (i = 1; i <= NF; i++) k[i] = $i } }' /proc/net/snmp; }

declare -A R
for c in 1 2; do
  tx0=$(ns_tx_bytes) re0=$(ns_retrans)
  if ((c == 1)); then
    remote_pair link-c1 "$COUNT" 8 600 --source synthetic --synthetic-size 15196160 --synthetic-interval 600ms \
      --emit-window 15ms --chunk-size 262144 --compress=false -- "${v1[@]}"
  else
    remote_pair link-c2 "$COUNT" 8 600 --source synthetic --synthetic-compressible --synthetic-size 15196160 \
      --synthetic-interval 600ms --emit-window 7500us --chunk-size 262144 --compress=true -- "${v2[@]}"
  fi
  R[c${c}_tx]=$(($(ns_tx_bytes) - tx0))
  R[c${c}_re]=$(($(ns_retrans) - re0))
  R[c${c}_count]=$PAIR_COUNT R[c${c}_rc]=$PAIR_SERVER_RC R[c${c}_hz]=$PAIR_HEALTHZ
done

echo | say
table_header
for c in 1 2; do
  lbl=link-c$c
  co=$CELL_DIR/$lbl.client.out csv=$CELL_DIR/$lbl.client.csv ct=$CELL_DIR/$lbl.client.time st=$CELL_DIR/$lbl.server.time
  got=$(sum_ledgers "$co")
  got=${got:-0}
  if ((c == 1)); then
    note "cell 1 across the link (uncompressed; prototype at 5 Gbit/s: p50 18.60 ms, p99 19.32 ms)"
  else
    note "cell 2 across the link (zstd, compressible; prototype at 5 Gbit/s: p50 1.25 ms, p99 2.32 ms; runbook gate p99 <= 4 ms)"
  fi
  row "  ledgers measured (n)" "$got ($(sum_range "$co"))" ">= $COUNT" "$(verdict_ge "$got" "$COUNT")"
  row "  exit status: server / client" "${R[c${c}_rc]} / $(timev_exit "$ct")" "0 / 0" "$(verdict_eq "${R[c${c}_rc]}/$(timev_exit "$ct")" 0/0)"
  P99_TARGET_MS=2 MAX_TARGET_MS=5 delivery_rows " " "$csv"
  read -r _ t50 _ t99 tmax _ < <(csv_stats 6 0 "$csv")
  if ((c == 2)); then
    row "  t_emit p50" "$(ns2ms "$t50") ms" "6.750..8.250 ms" "$(verdict_between "$(ns2ms "$t50")" 6.75 8.25)"
    row "  t_emit p99" "$(ns2ms "$t99") ms" "6.750..8.250 ms" "$(verdict_between "$(ns2ms "$t99")" 6.75 8.25)"
    rf=$(json_num "${R[c2_hz]}" raw_fallbacks)
    row "  raw fallbacks (server /healthz)" "${rf:-?}" "0" "$(verdict_eq "${rf:-?}" 0)"
  else
    row "  t_emit p50/p99/max (window 15 ms)" "$(ns2ms "$t50")/$(ns2ms "$t99")/$(ns2ms "$tmax") ms" "(information)"
  fi
  row "  discarded partials / live_abandons" "$(sum_fallbacks "$co") / $(json_num "${R[c${c}_hz]}" live_abandons)" "0 / 0" "$(verdict_eq "$(sum_fallbacks "$co")/$(json_num "${R[c${c}_hz]}" live_abandons)" 0/0)"
  row "  bytes on the wire per ledger (server veth tx)" "$(div "${R[c${c}_tx]}" "${R[c${c}_count]}" %.0f) B" "(information)"
  row "  TCP retransmitted segments (server netns)" "${R[c${c}_re]}" "(information)"
  row "  server / client CPU s per ledger" "$(div "$(timev_cpu_s "$st")" "${R[c${c}_count]}" %.4f) / $(div "$(timev_cpu_s "$ct")" "$got" %.4f) s" "(information)"
  row "  server / client peak RSS" "$(kb2mb "$(timev_rss_kb "$st")") / $(kb2mb "$(timev_rss_kb "$ct")") MB" "<= 64 MB each" "$(verdict_le "$(awk -v a="$(kb2mb "$(timev_rss_kb "$st")")" -v b="$(kb2mb "$(timev_rss_kb "$ct")")" 'BEGIN { print (a > b) ? a : b }')" 64)"
  metric "c${c}_n" "$got"
  metric "c${c}_delivery_p50_ns" "$D_P50"
  metric "c${c}_delivery_p99_ns" "$D_P99"
  metric "c${c}_delivery_max_ns" "$D_MAX"
  metric "c${c}_wire_bytes" "${R[c${c}_tx]}"
done
cell_done
