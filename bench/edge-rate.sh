#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Stream rate (issue 15): the stream's sustained ledger rate before the JetStream publisher falls
# behind. A stepped run: for each rate in RATES (ledgers/s) the core emits SIZE-byte ledgers at
# that rate for STEP_S seconds while publishing to JetStream (a fresh stream per step), and the
# publisher's lag is sampled from the core's /metrics every SAMPLE_S seconds:
#   lag = corestreamd_ledgers_emitted_total - corestreamd_jetstream_ledgers_total (ledgers)
# A step holds when, over the second half of its samples, the lag never exceeds LAG_MAX and
# ends at most one ledger above where it started (bounded, not growing), the publisher drained at
# the end ("jetstream publisher stopped", not "stopped behind") and the source itself kept the
# pace (at least 90 % of the rate over the step; else the step measures the source, and says so).
# The answer is the highest rate of the rising sequence that holds; the steps stop at the first
# that does not.
# Environment: BUILD_DIR (default build), SIZE (default 1048576), RATES (default
# "10 20 40 60 80 120 160 200"), STEP_S (30), SAMPLE_S (0.5), LAG_MAX (4), COMPRESS (false),
# CLUSTER=1 for a 3-node R3 JetStream cluster on loopback instead of one server.
#   --tiny     65536-byte ledgers at 10 and 20 per second for 4 s each: proves the script works,
#              measures nothing.
# Wall time: about STEP_S + 10 s per step (6 minutes with the defaults, all steps holding).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TINY=0
[[ ${1:-} == --tiny ]] && TINY=1
SIZE=${SIZE:-1048576}
RATES=${RATES:-10 20 40 60 80 120 160 200}
STEP_S=${STEP_S:-30}
SAMPLE_S=${SAMPLE_S:-0.5}
LAG_MAX=${LAG_MAX:-4}
COMPRESS=${COMPRESS:-false}
CLUSTER=${CLUSTER:-0}
if ((TINY)); then SIZE=65536 RATES="10 20" STEP_S=4; fi

plane=$([[ $CLUSTER == 1 ]] && echo "3-node R3 cluster" || echo "one nats-server")
bench_init edge-rate "sustained stream rate via $plane, $SIZE-byte ledgers$( ((TINY)) && echo ' (tiny: a check, not a measurement)')"
need_tools nats-server curl python3
source "$(dirname "${BASH_SOURCE[0]}")/natsplane.sh"

# lag_sample ADDR: "emitted published" from one scrape of the core's /metrics (empty when it
# does not answer), so the two counters are read at one moment.
lag_sample() {
  curl -s --max-time 1 "http://$1/metrics" | awk '
    $1 == "corestreamd_ledgers_emitted_total" { e = $2 }
    $1 == "corestreamd_jetstream_ledgers_total" { p = $2 }
    END { if (e != "" && p != "") print e, p }'
}

nats_start

declare -A R
best=0 source_bound=0
for rate in $RATES; do
  interval_us=$((1000000 / rate))
  window_us=$((interval_us / 2 < 15000 ? interval_us / 2 : 15000))
  count=$((rate * STEP_S))
  label=rate-$rate
  note "== $rate ledgers/s: $count ledgers every ${interval_us}us over ${window_us}us"
  js=(--jetstream-url "$NATS_URLS" --jetstream-stream "RATE$rate" --jetstream-max-bytes 536870912)
  [[ $CLUSTER == 1 ]] && js+=(--jetstream-replicas 3)
  server_start "$label" $((STEP_S * 3 + 60)) --source synthetic --synthetic-count "$count" --synthetic-size "$SIZE" \
    --synthetic-interval "${interval_us}us" --emit-window "${window_us}us" --compress="$COMPRESS" "${js[@]}"
  addr=$SERVER_ADDR
  csv=$CELL_DIR/$label.csv
  echo "t_s,emitted,published,lag" >"$csv"
  t0=$(date +%s.%N)
  while pid_alive "$SERVER_PID"; do
    e="" p=""
    read -r e p < <(lag_sample "$addr") || true
    if [[ -n $e && -n $p ]]; then
      echo "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }'),$e,$p,$((e - p))" >>"$csv"
    fi
    sleep "$SAMPLE_S"
  done
  wait_rc "$SERVER_PID"
  log=$CELL_DIR/$label.server.log
  drained=$(grep -c 'msg="jetstream publisher stopped" ' "$log" || true)
  # Over the second half of the samples: the highest lag, and the lag at its start and end. The
  # source's own pace is taken over the samples between the first and the last emitted ledger.
  read -r n max first last pace < <(awk -F, -v rate="$rate" 'NR > 1 { t[++n] = $1; e[n] = $2; l[n] = $4 }
    END {
      if (n < 4) { print n, "", "", "", ""; exit }
      h = int(n / 2) + 1; m = 0
      for (i = h; i <= n; i++) if (l[i] > m) m = l[i]
      a = 1; while (a < n && e[a] == 0) a++
      b = n; while (b > a && e[b - 1] == e[n]) b--
      p = (t[b] > t[a]) ? (e[b] - e[a]) / (t[b] - t[a]) : 0
      printf "%d %d %d %d %.1f\n", n, m, l[h], l[n], p
    }' "$csv")
  R[${rate}_max]=$max R[${rate}_pace]=$pace R[${rate}_drained]=$drained
  holds=0 why="" kind="falls behind"
  if [[ -z $max ]]; then
    R[${rate}_verdict]="no verdict: $n samples (raise STEP_S)"
    note "  $rate/s: ${R[${rate}_verdict]}"
    break
  elif awk -v p="$pace" -v r="$rate" 'BEGIN { exit !(p < 0.9 * r) }'; then
    why="it emitted $pace/s" kind="source-bound, no verdict"
    source_bound=1
  elif ((max > LAG_MAX)); then
    why="lag reached $max ledgers"
  elif ((last > (first > 0 ? first : 0) + 1)); then
    why="lag grew from $first to $last ledgers"
  elif ((drained != 1)); then
    why="the publisher stopped behind"
  else
    holds=1
  fi
  R[${rate}_verdict]=$([[ $holds == 1 ]] && echo holds || echo "$kind: $why")
  note "  $rate/s: max lag $max (second half), source pace $pace/s: ${R[${rate}_verdict]}"
  ((holds)) || break
  best=$rate
done

echo | say
table_header
for rate in $RATES; do
  [[ -n ${R[${rate}_verdict]:-} ]] || break
  row "  $rate ledgers/s: max lag / source pace" "${R[${rate}_max]:-n/a} / ${R[${rate}_pace]:-n/a}/s" "<= $LAG_MAX" "${R[${rate}_verdict]}"
  metric "rate_${rate}_max_lag" "${R[${rate}_max]:-}"
done
mibps=$(awk -v r="$best" -v s="$SIZE" 'BEGIN { printf "%.1f", r * s / 1048576 }')
row "sustained rate ($plane, $SIZE B ledgers)" "$( ((source_bound)) && echo '>= ')$best ledgers/s ($mibps MiB/s)" "(information)"
((source_bound)) && note "  the source, not the publisher, could not keep the next rate: the publisher's limit is above $best/s"
metric sustained_ledgers_per_s "$best"
metric sustained_mib_per_s "$mibps"
cell_done
