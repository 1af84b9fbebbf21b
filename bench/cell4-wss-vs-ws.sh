#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 4, wss:// beside ws://: the fan-out cell (cell4-fanout.sh: 1 MiB every 100 ms over 15 ms,
# uncompressed, K subscribers in one benchrunner process) run ROUNDS times for each K in KS,
# ws:// and wss:// alternated within each round so both meet the same machine. Reported per K and
# scheme: the median over the rounds of delivery p99 (of the whole run, and of the steady state:
# each subscriber's first WARM = 10 ledgers left out, which pay for the connections' start), of
# server CPU per ledger and of client CPU per subscriber-ledger, the worst abandons, and the
# wss/ws ratios.
# Targets (issue 39): at K = 32, wss:// p99 <= 2 x ws:// p99 (medians; both readings get a
# verdict); at K = 128, wss:// is
# sustained in one client process (every subscriber ends well, every ledger delivered live, no
# abandon).
# Environment: BUILD_DIR (default build), KS (default "32 128"), ROUNDS (default 3), N (default
# 150 ledgers per subscriber). Each run's details stay in bench/results/cell4-wss-vs-ws/r<round>-<scheme>/.
# Wall time: about 25 s per K per scheme per round (~5 min at the defaults).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KS=${KS:-32 128}
ROUNDS=${ROUNDS:-3}
N=${N:-150}
bench_init cell4-wss-vs-ws "wss:// beside ws://: K subscribers in one process, 1 MiB every 100 ms over 15 ms, $ROUNDS rounds alternated"
export BUILD_DIR
note "K values: $KS; rounds: $ROUNDS; N=$N ledgers per subscriber; ws:// then wss:// in each round"

for ((r = 1; r <= ROUNDS; r++)); do
  for tls in 0 1; do
    scheme=$([[ $tls == 1 ]] && echo wss || echo ws)
    out=$CELL_DIR/r$r-$scheme
    note "round $r: $scheme:// K=$KS"
    RESULTS_DIR=$out TLS=$tls KS=$KS N=$N "$BENCH_DIR/cell4-fanout.sh" >"$out.log" 2>&1 ||
      note "  (cell4-fanout.sh exited $?: $out.log)"
  done
done

# m K SCHEME KEY: the per-round values of KEY, one per line.
m() {
  local r sub=cell4-fanout
  [[ $2 == wss ]] && sub=cell4-fanout-tls
  for ((r = 1; r <= ROUNDS; r++)); do
    metric_of "$CELL_DIR/r$r-$2/$sub/K$1/metrics.txt" "$3"
  done
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
maxof() { sort -g | tail -1; }

echo | say
fmt='%-5s %-6s %-22s %-10s %-11s %-12s %-12s %-9s %-8s\n'
printf "$fmt" K scheme "p99_ms (rounds)" p99_med steady_p99 srv_ms/ledg cli_ms/s-l abandons failed | say
for K in $KS; do
  for s in ws wss; do
    p99s=$(m "$K" $s p99_ns | awk '{ printf "%s%.1f", (NR > 1 ? "/" : ""), $1 / 1e6 }')
    printf "$fmt" "$K" "$s" "$p99s" "$(m "$K" $s p99_ns | median | awk '{ printf "%.2f", $1 / 1e6 }')" \
      "$(m "$K" $s p99_steady_ns | median | awk '{ printf "%.2f", $1 / 1e6 }')" \
      "$(m "$K" $s server_cpu_s_per_ledger | median | awk '{ printf "%.2f", $1 * 1000 }')" \
      "$(m "$K" $s clients_cpu_s_per_ledger | median | awk '{ printf "%.3f", $1 * 1000 }')" \
      "$(m "$K" $s live_abandons | maxof)" "$(m "$K" $s failed_subscribers | maxof)" | say
  done
done

echo | say
table_header
for K in $KS; do
  ws=$(m "$K" ws p99_ns | median)
  wss=$(m "$K" wss p99_ns | median)
  ratio=$(awk -v a="$wss" -v b="$ws" 'BEGIN { if (b > 0) printf "%.2f", a / b }')
  steady=$(awk -v a="$(m "$K" wss p99_steady_ns | median)" -v b="$(m "$K" ws p99_steady_ns | median)" \
    'BEGIN { if (b > 0) printf "%.2f", a / b }')
  cpu=$(awk -v a="$(m "$K" wss server_cpu_s_per_ledger | median)" -v b="$(m "$K" ws server_cpu_s_per_ledger | median)" \
    'BEGIN { if (b > 0) printf "%.2f", a / b }')
  metric "k${K}_wss_ws_p99_ratio" "$ratio"
  metric "k${K}_wss_ws_p99_steady_ratio" "$steady"
  metric "k${K}_wss_ws_server_cpu_ratio" "$cpu"
  if [[ $K == 32 ]]; then
    row "K=32 wss/ws delivery p99 (medians)" "${ratio}x" "<= 2x" "$(verdict_le "$ratio" 2)"
    row "K=32 wss/ws steady p99 (medians)" "${steady}x" "<= 2x" "$(verdict_le "$steady" 2)"
  else
    row "K=$K wss/ws delivery p99 (medians)" "${ratio}x" "-"
    row "K=$K wss/ws steady p99 (medians)" "${steady}x" "-"
  fi
  row "K=$K wss/ws server CPU per ledger" "${cpu}x" "-"
  if [[ $K == 128 ]]; then
    bad=$(($(m 128 wss failed_subscribers | maxof) + $(m 128 wss live_abandons | maxof)))
    short=$(for ((r = 1; r <= ROUNDS; r++)); do
      f=$CELL_DIR/r$r-wss/cell4-fanout-tls/K128/metrics.txt
      [[ $(metric_of "$f" n) == "$(metric_of "$f" expected_n)" ]] || echo x
    done | wc -l)
    row "K=128 wss sustained (failed + abandons; rounds short of samples)" "$bad; $short" "0; 0" "$(verdict_eq "$bad;$short" "0;0")"
  fi
done
cell_done
