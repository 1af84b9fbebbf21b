#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 7: cost. For the shapes of cells 1-3, corestreamd and benchrunner --mode remote run as two
# processes over 127.0.0.1, each under /usr/bin/time -v, so each one's whole-process CPU seconds
# per ledger (user+sys, start-up included) and peak RSS are its own. (Loopback mode runs both in
# one process; cells 1-3 report that combined figure.) The remote delivery of these runs is shown
# beside the loopback delivery that cells 1-3 recorded in bench/results/.
#   shape 1  15196160 B every 600ms over 15ms, uncompressed               n >= COUNT1 (100)
#   shape 2  15196160 B compressible every 600ms over 7500us, zstd on      n >= COUNT2 (100)
#   shape 3  204800 B every 10ms over 5ms, uncompressed                    n >= COUNT3 (1000)
# The server emits n + LEAD ledgers (LEAD 8 at 600 ms, 200 at 10 ms) and ends by itself; the client
# joins at the tip and ends by itself 2 ledgers (1.2 s; at 10 ms: 100 ledgers, 1 s) before the
# server does, so /healthz can still be read.
# Targets: peak RSS <= 64 MB for shapes 1 and 2, for the server and the client separately.
# Wall time: about 2 x 65 s + 15 s, 2.5 minutes.
# Environment: BUILD_DIR (default build), COUNT1, COUNT2, COUNT3, CLIENT_VERIFY (default 0: the
# client does what an RPC does, reassemble and check XXH64, without regenerating the synthetic
# payload; 1 adds --verify).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

COUNT1=${COUNT1:-100}
COUNT2=${COUNT2:-100}
COUNT3=${COUNT3:-1000}
CLIENT_VERIFY=${CLIENT_VERIFY:-0}

bench_init cell7-cost "cost: server and client as separate processes on 127.0.0.1, shapes of cells 1-3"
need_tools curl

v1=() v2=()
if ((CLIENT_VERIFY)); then v1=(--verify) v2=(--verify --remote-compressible); fi

remote_pair shape1 "$COUNT1" 8 600 --source synthetic --synthetic-size 15196160 --synthetic-interval 600ms \
  --emit-window 15ms --chunk-size 262144 --compress=false -- "${v1[@]}"
declare -A S
S[shape1_count]=$PAIR_COUNT S[shape1_rc]=$PAIR_SERVER_RC S[shape1_hz]=$PAIR_HEALTHZ

remote_pair shape2 "$COUNT2" 8 600 --source synthetic --synthetic-compressible --synthetic-size 15196160 \
  --synthetic-interval 600ms --emit-window 7500us --chunk-size 262144 --compress=true -- "${v2[@]}"
S[shape2_count]=$PAIR_COUNT S[shape2_rc]=$PAIR_SERVER_RC S[shape2_hz]=$PAIR_HEALTHZ

PAIR_TAIL=100 remote_pair shape3 "$COUNT3" 200 10 --source synthetic --synthetic-size 204800 --synthetic-interval 10ms \
  --emit-window 5ms --chunk-size 262144 --compress=false -- "${v1[@]}"
S[shape3_count]=$PAIR_COUNT S[shape3_rc]=$PAIR_SERVER_RC S[shape3_hz]=$PAIR_HEALTHZ

echo | say
table_header
for i in 1 2 3; do
  sh=shape$i
  case $i in
  1) lb=cell1-acceptance nmin=$COUNT1 desc="15196160 B/600ms/15ms raw" ;;
  2) lb=cell2-gate nmin=$COUNT2 desc="15196160 B/600ms/7.5ms zstd" ;;
  3) lb=cell3-small nmin=$COUNT3 desc="204800 B/10ms/5ms raw" ;;
  esac
  st=$CELL_DIR/$sh.server.time ct=$CELL_DIR/$sh.client.time co=$CELL_DIR/$sh.client.out
  scpu=$(timev_cpu_s "$st") ccpu=$(timev_cpu_s "$ct")
  srss=$(timev_rss_kb "$st") crss=$(timev_rss_kb "$ct")
  cnt=${S[${sh}_count]}
  got=$(sum_ledgers "$co")
  got=${got:-0}
  read -r dn d50 d90 d99 dmax _ < <(csv_stats 7 0 "$CELL_DIR/$sh.client.csv")
  hz=${S[${sh}_hz]}
  note "shape $i ($desc)"
  row "  ledgers: server emitted / client measured" "$cnt / $got ($(sum_range "$co"))" ">= $nmin" "$(verdict_ge "$got" "$nmin")"
  row "  exit status: server / client" "${S[${sh}_rc]} / $(timev_exit "$ct")" "0 / 0" "$(verdict_eq "${S[${sh}_rc]}/$(timev_exit "$ct")" 0/0)"
  row "  server CPU s per ledger" "$(div "$scpu" "$cnt" %.4f) s ($scpu s)" "(information)"
  row "  client CPU s per ledger" "$(div "$ccpu" "$got" %.4f) s ($ccpu s)" "(information)"
  if ((i < 3)); then
    row "  server peak RSS" "$(kb2mb "$srss") MB" "<= 64 MB" "$(verdict_le "$(kb2mb "$srss")" 64)"
    row "  client peak RSS" "$(kb2mb "$crss") MB" "<= 64 MB" "$(verdict_le "$(kb2mb "$crss")" 64)"
  else
    row "  server peak RSS" "$(kb2mb "$srss") MB" "(information)"
    row "  client peak RSS" "$(kb2mb "$crss") MB" "(information)"
  fi
  row "  remote delivery p50/p99/max (this run)" "$(ns2ms "$d50")/$(ns2ms "$d99")/$(ns2ms "$dmax") ms" "(information)"
  lm=$RESULTS_ROOT/$lb/metrics.txt
  if [[ -f $lm ]]; then
    row "  loopback delivery p50/p99/max ($lb)" "$(ns2ms "$(metric_of "$lm" delivery_p50_ns)")/$(ns2ms "$(metric_of "$lm" delivery_p99_ns)")/$(ns2ms "$(metric_of "$lm" delivery_max_ns)") ms" "(information)"
    row "  loopback one-process CPU s/ledger, peak RSS" "$(div "$(metric_of "$lm" cpu_s)" "$(metric_of "$lm" n)" %.4f) s, $(kb2mb "$(metric_of "$lm" rss_kb)") MB" "(information)"
  else
    row "  loopback delivery ($lb)" "not run yet" "(run bench/$lb.sh)"
  fi
  if [[ -n $(json_num "$hz" latest) ]]; then
    row "  server /healthz raw_fallbacks, live_abandons" "$(json_num "$hz" raw_fallbacks), $(json_num "$hz" live_abandons)" "(information)"
  else
    row "  server /healthz raw_fallbacks, live_abandons" "n/a (server had ended)" "(information)"
  fi
  metric "${sh}_server_cpu_s" "$scpu"
  metric "${sh}_server_ledgers" "$cnt"
  metric "${sh}_server_rss_kb" "$srss"
  metric "${sh}_client_cpu_s" "$ccpu"
  metric "${sh}_client_ledgers" "$got"
  metric "${sh}_client_rss_kb" "$crss"
  metric "${sh}_delivery_p50_ns" "$d50"
  metric "${sh}_delivery_p99_ns" "$d99"
done
cell_done
