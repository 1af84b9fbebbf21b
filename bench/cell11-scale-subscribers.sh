#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 11: subscriber scale (issue 41, item 2). For each scheme in SCHEMES and each K in KS, a
# fresh corestreamd on 127.0.0.1 streams 256 KiB compressible ledgers every 100 ms with zstd on
# (--synthetic-size 262144 --synthetic-compressible --compress=true --synthetic-interval 100ms)
# to K subscribers that all ask for the same explicit range: --start is /healthz latest + LEAD (a
# ledger still in the future, so every subscriber is connected before the first measured ledger)
# and the range is N ledgers long, so they end by themselves.
#
# The clients: ONE process, bench/ws_sink (built with the tests: $BUILD_DIR/tests/ws_sink), whatever
# K is. It reads the K connections on one thread and parses each message's first bytes only (type,
# sequence, END's chunk count and emit-end stamp), never decompressing or hashing the payload, so
# two shared cores can carry 4,096 subscribers and the cell measures the server. Delivery is when
# the sink read END minus END's emitEndUnixNano (one host, one clock). A verifying client costs
# ~0.1-0.2 ms per subscriber-ledger at this shape; benchrunner --subscribers (capped at 1,024) is
# what measures that, not this cell.
#
# Beside the largest K of each scheme, CATCHUPS (8) catch-ups of CATCHUP_LEDGERS (1,000) ledgers:
# before that server starts, a fill server writes ledgers 1..CATCHUP_LEDGERS into its ring unpaced
# and exits; the measured server continues the same ring from --start-ledger CATCHUP_LEDGERS+1, and
# when the live range is half done a second ws_sink asks for 1..CATCHUP_LEDGERS on CATCHUPS
# connections (ring replays, at most --max-replays 8 at once).
#
# Per K (results in bench/results/cell11-scale-subscribers/<scheme>-K<k>/metrics.txt):
#   server CPU per ledger   corestreamd's CPU time (its threads' /proc/<pid>/task/*/schedstat, ns) from the ledger before the
#                           first measured one to the ledger at half the range (before any catch-up
#                           starts), divided by the ledgers published in between
#   CPU per subscriber-ledger   that / K, and the marginal (cpu(K) - cpu(1)) / (K - 1)
#   RSS, descriptors        VmRSS and /proc/<pid>/fd at half the range (all K connected), VmHWM at
#                           the end; RSS per subscriber = (VmRSS(K) - VmRSS(K=1)) / (K - 1)
#   delivery p50/p99        pooled over every subscriber's stamped ledgers (nearest rank); for the
#                           largest K also the half while the catch-ups ran
#   abandons                /healthz live_abandons at the end, plus the sink's discarded partials
# Targets: no abandon to K = 4,096 over ws and K = 1,024 over wss (and every subscriber ended
# well); RSS per subscriber <= 64 KiB; the marginal CPU per subscriber-ledger at the largest K not
# above 1.10 x its value at K = 32 (10 % for run-to-run noise). A plot of cost against K goes to
# bench/results/cell11-scale-subscribers.png (gnuplot).
#
# Wall time: about (LEAD + N) x 0.1 s + connects per K, plus ~10 s to fill the ring and the
# catch-ups for each largest K: 473-483 s (about 8 min) for the default KS and SCHEMES on two cores.
# Environment: BUILD_DIR (default build), KS (default "1 8 32 128 512 1024 4096"), SCHEMES (default
# "ws wss"), WSS_MAX_K (default 1024: wss runs only K up to it), N (default 200 ledgers per
# subscriber), LEAD (default 20 + K/64 for ws, 20 + K/16 for wss), CATCHUPS (default 8; 0: none),
# CATCHUP_LEDGERS (default 1000).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KS=${KS:-1 8 32 128 512 1024 4096}
SCHEMES=${SCHEMES:-ws wss}
WSS_MAX_K=${WSS_MAX_K:-1024}
N=${N:-200}
CATCHUPS=${CATCHUPS:-8}
CATCHUP_LEDGERS=${CATCHUP_LEDGERS:-1000}
SIZE=262144
IVAL_MS=100
SHAPE=(--source synthetic --synthetic-size "$SIZE" --synthetic-compressible --compress=true
  --chunk-size 262144)
ADMIT=(--max-connections -1 --max-connections-per-ip -1 --max-replays 8 --max-replays-per-ip 8)

bench_init cell11-scale-subscribers "subscriber scale: K subscribers of 256 KiB compressible ledgers every 100 ms, zstd, ws:// and wss://" keep
need_tools curl
SINK=$BUILD_DIR/tests/ws_sink
[[ -x $SINK ]] || die "$SINK is missing: build with the tests (cmake --build $BUILD_DIR)"
maxk=0
for K in $KS; do
  [[ $K =~ ^[0-9]+$ ]] && ((K >= 1)) || die "K must be a positive integer, got '$K'"
  ((K > maxk)) && maxk=$K
done
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
(($(ulimit -n) >= maxk + CATCHUPS + 256)) || die "open-file limit $(ulimit -n) is below K + $((CATCHUPS + 256)) = $((maxk + CATCHUPS + 256)): raise it (ulimit -n, LimitNOFILE)"
tls_material "$SCRATCH/tls"
note "KS=$KS; SCHEMES=$SCHEMES (wss up to K=$WSS_MAX_K); N=$N ledgers per subscriber; catch-ups beside the largest K: $CATCHUPS x $CATCHUP_LEDGERS ledgers"
note "clients: one ws_sink process for all K subscribers (frames parsed, payload not decompressed); open-file limit $(ulimit -n)"

fd_count() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
# cpu_s PID: the process's CPU seconds to the nanosecond, the sum over its threads of
# /proc/<pid>/task/<tid>/schedstat's time on CPU (/proc/<pid>/stat counts in 10 ms ticks, too coarse
# for a few ms per ledger over 100 ledgers); /proc/<pid>/stat where schedstat is missing.
cpu_s() {
  local f ns=0 v
  for f in /proc/"$1"/task/*/schedstat; do
    read -r v _ <"$f" 2>/dev/null || continue
    ns=$((ns + v))
  done
  if ((ns > 0)); then awk -v n="$ns" 'BEGIN { printf "%.6f\n", n / 1e9 }'; else proc_cpu_s "$1"; fi
}
sink_field() { sed -n "s/.*\\b$2=\\([0-9.]*\\).*/\\1/p" "$1" 2>/dev/null | tail -1; }

run_k() {
  local scheme=$1 K=$2 with_catchups=$3 label=$1-K$2 kdir=$CELL_DIR/$1-K$2
  rm -rf -- "${kdir:?}"
  mkdir -p "$kdir"
  CMD_FILE=$kdir/commands.txt
  local tlsf=() caf=()
  if [[ $scheme == wss ]]; then
    tlsf=(--tls-cert "$TLS_CERT" --tls-key "$TLS_KEY") caf=(--ca "$TLS_CA")
    HEALTHZ_SCHEME=https HEALTHZ_CURL=(--cacert "$TLS_CA")
  else
    HEALTHZ_SCHEME=http HEALTHZ_CURL=()
  fi
  local per_lead=64
  [[ $scheme == wss ]] && per_lead=16
  local lead=${LEAD:-$((20 + K / per_lead))}
  local from=()
  echo | say
  note "--- $scheme K=$K: $K subscribers, $N ledgers each, start = latest + $lead$( ((with_catchups)) && echo ", $CATCHUPS catch-ups of $CATCHUP_LEDGERS ledgers at half the range") ---"
  if ((with_catchups)); then
    SERVER_DATA_DIR=$SCRATCH/$label-data
    mkdir -p "$SERVER_DATA_DIR"
    local hz0=$HEALTHZ_SCHEME
    HEALTHZ_SCHEME=http
    server_start "$label/fill" 900 --retention 8192 "${SHAPE[@]}" --synthetic-interval=-1ms --synthetic-count "$CATCHUP_LEDGERS"
    wait_rc "$SERVER_PID"
    HEALTHZ_SCHEME=$hz0
    ((RC == 0)) || die "the ring fill ($label) exited $RC: see $CELL_DIR/$label/fill.server.log"
    note "  ring filled with ledgers 1..$CATCHUP_LEDGERS ($(du -sm "$SERVER_DATA_DIR" | cut -f1) MB)"
    from=(--start-ledger $((CATCHUP_LEDGERS + 1)))
  fi
  server_start "$label/server" 1800 --retention 8192 "${SHAPE[@]}" --synthetic-interval ${IVAL_MS}ms \
    "${from[@]}" "${ADMIT[@]}" "${tlsf[@]}"
  unset SERVER_DATA_DIR
  local spid=$SERVER_PID addr=$SERVER_ADDR csd=$SERVER_CSD_PID
  local l0 start end mid
  l0=$(wait_latest "$addr" 1 500)
  start=$((l0 + lead)) end=$((l0 + lead + N - 1)) mid=$((l0 + lead + N / 2))
  local climit=$(((lead + N) * IVAL_MS / 1000 + 120))
  local cmd=(timeout -s TERM -k 10 "$climit" "$SINK" "${caf[@]}" "$scheme://$addr" "$K" "$start" "$end" "$kdir/sub.csv" "$climit")
  record_cmd "${cmd[@]}"
  local sink_pid
  bg_start sink_pid "$kdir/sub.out" "${cmd[@]}"
  local hz subs=0 lat=0 i
  for ((i = 0; i < 6000; i++)); do
    hz=$(healthz "$addr")
    subs=$(json_num "$hz" subscribers) lat=$(json_num "$hz" latest)
    subs=${subs:-0} lat=${lat:-0}
    ((subs >= K || lat >= start - 1)) && break
    sleep 0.05
  done
  local in_time=yes
  ((subs >= K && lat < start - 1)) || in_time="no ($subs of $K connected when ledger $lat was the latest; start $start)"
  note "  $subs/$K subscribers connected at latest=$lat; measuring ledgers $start..$end (CPU over $((start - 1))..$mid)"
  lat=$(wait_latest "$addr" $((start - 1)) 6000)
  local c0 lat0=$lat
  c0=$(cpu_s "$csd")
  lat=$(wait_latest "$addr" "$mid" 6000)
  local c1 lat1=$lat rss fds
  c1=$(cpu_s "$csd")
  rss=$(proc_kb "$csd" VmRSS)
  fds=$(fd_count "$csd")
  local cu_pid="" cu_t0=$SECONDS
  if ((with_catchups)); then
    local ccmd=(timeout -s TERM -k 10 600 "$SINK" "${caf[@]}" "$scheme://$addr" "$CATCHUPS" 1 "$CATCHUP_LEDGERS" "$kdir/catchup.csv" 600)
    record_cmd "${ccmd[@]}"
    bg_start cu_pid "$kdir/catchup.out" "${ccmd[@]}"
  fi
  wait_rc "$sink_pid"
  local sink_rc=$RC cu_rc="" cu_s=""
  if [[ -n $cu_pid ]]; then
    wait_rc "$cu_pid"
    cu_rc=$RC cu_s=$((SECONDS - cu_t0))
  fi
  hz=$(healthz "$addr")
  local hwm fds_end
  hwm=$(proc_kb "$csd" VmHWM)
  fds_end=$(fd_count "$csd")
  printf '%s\n' "$hz" >"$kdir/healthz-end.json"
  bg_interrupt "$spid" corestreamd
  unset CMD_FILE

  local n p50 p90 p99 pmax cn c50 c99
  read -r n p50 p90 p99 pmax _ < <(csv_stats 7 0 "$kdir/sub.csv")
  # the live subscribers' ledgers from half the range on (beside the catch-ups, when there are any)
  awk -F, -v m="$mid" 'NR == 1 || $2 >= m' "$kdir/sub.csv" >"$kdir/sub-late.csv"
  read -r cn c50 _ c99 _ _ < <(csv_stats 7 0 "$kdir/sub-late.csv")
  local cpu_per
  cpu_per=$(awk -v a="$c0" -v b="$c1" -v l0="$lat0" -v l1="$lat1" 'BEGIN { if (l1 > l0) printf "%.6f", (b - a) / (l1 - l0); else print "n/a" }')
  {
    echo "scheme=$scheme"
    echo "K=$K"
    echo "n=$n"
    echo "expected_n=$((K * N))"
    echo "p50_ns=$p50"
    echo "p90_ns=$p90"
    echo "p99_ns=$p99"
    echo "max_ns=$pmax"
    echo "late_n=$cn"
    echo "late_p50_ns=$c50"
    echo "late_p99_ns=$c99"
    echo "sink_rc=$sink_rc"
    echo "sink_failed=$(sink_field "$kdir/sub.out" failed)"
    echo "sink_partials=$(sink_field "$kdir/sub.out" partials)"
    echo "sink_stampless=$(sink_field "$kdir/sub.out" stampless)"
    echo "sink_cpu_s=$(sink_field "$kdir/sub.out" cpu_s)"
    echo "first_failure=$(grep -m1 '^ws_sink: subscriber' "$kdir/sub.out" || true)"
    echo "connected_in_time=$in_time"
    echo "server_cpu_s=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.4f", b - a }')"
    echo "server_cpu_ledgers=$((lat1 - lat0))"
    echo "server_cpu_s_per_ledger=$cpu_per"
    echo "server_rss_kb=$rss"
    echo "server_hwm_kb=$hwm"
    echo "server_fds=$fds"
    echo "server_fds_end=$fds_end"
    echo "live_abandons=$(json_num "$hz" live_abandons)"
    echo "raw_fallbacks=$(json_num "$hz" raw_fallbacks)"
    echo "catchups=$( ((with_catchups)) && echo "$CATCHUPS" || echo 0)"
    echo "catchup_rc=$cu_rc"
    echo "catchup_s=$cu_s"
    echo "catchup_ledgers=$(sink_field "$kdir/catchup.out" ledgers)"
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "range=$start..$end"
  } >"$kdir/metrics.txt"
  note "  done: n=$n of $((K * N)), p50 $(ns2ms "$p50") ms, p99 $(ns2ms "$p99") ms, server $(awk -v v="$cpu_per" 'BEGIN { printf "%.2f", v * 1000 }') ms CPU per ledger, RSS $(kb2mb "$rss") MB, $fds descriptors, abandons $(json_num "$hz" live_abandons), sink exit $sink_rc$( [[ -n $cu_rc ]] && echo ", catch-ups exit $cu_rc in $cu_s s")"
}

for scheme in $SCHEMES; do
  [[ $scheme == ws || $scheme == wss ]] || die "SCHEMES takes ws and wss, got '$scheme'"
  top=0
  for K in $KS; do
    [[ $scheme == wss ]] && ((K > WSS_MAX_K)) && continue
    ((K > top)) && top=$K
  done
  for K in $KS; do
    [[ $scheme == wss ]] && ((K > WSS_MAX_K)) && continue
    run_k "$scheme" "$K" $((CATCHUPS > 0 && K == top))
  done
done

# ---- the table, from every scheme and K measured so far ---------------------------------------
m_of() { metric_of "$CELL_DIR/$1-K$2/metrics.txt" "$3"; }
m_num() { # SCHEME K KEY: the metric, 0 when empty
  local v
  v=$(m_of "$@")
  echo "${v:-0}"
}
echo | say
note "scale table (256 KiB compressible every 100 ms, zstd; N=$N per subscriber; delivery pooled over all stamped samples)"
note "srv_ms/ledg: server CPU per published ledger; us/sub-ledg: that / K; marg_us: (cpu(K) - cpu(1)) / (K - 1) per ledger;"
note "RSS_MB at half the range; KiB/sub: (RSS(K) - RSS(1)) / (K - 1); fds: /proc/<pid>/fd at half the range;"
note "stampless: ledgers a subscriber's cursor reached only after the whole flow was published (sent, checked, not timed)"
fmt='%-4s %-5s %-13s %-11s %-10s %-9s %-8s %-9s %-8s %-8s %-8s %-8s %-9s %-9s %s\n'
: >"$CELL_DIR/plot.dat"
for scheme in ws wss; do
  ks=$(for d in "$CELL_DIR"/$scheme-K*/metrics.txt; do [[ -s $d ]] && metric_of "$d" K; done | sort -n)
  [[ -n $ks ]] || continue
  printf "$fmt" sch K stamped/K*N srv_ms/ledg us/sub-ledg marg_us RSS_MB KiB/sub fds p50_ms p99_ms abandons partials stampless ended_well | say
  c1=$(m_of "$scheme" 1 server_cpu_s_per_ledger)
  r1=$(m_of "$scheme" 1 server_rss_kb)
  for K in $ks; do
    g() { m_of "$scheme" "$K" "$1"; }
    cpl=$(g server_cpu_s_per_ledger)
    per=$(awk -v v="$cpl" -v k="$K" 'BEGIN { if (v == "n/a" || v == "") print "n/a"; else printf "%.1f", v * 1e6 / k }')
    marg=$(awk -v v="$cpl" -v b="$c1" -v k="$K" 'BEGIN { if (k < 2 || b == "" || v == "n/a") print "-"; else printf "%.1f", (v - b) * 1e6 / (k - 1) }')
    rps=$(awk -v v="$(g server_rss_kb)" -v b="$r1" -v k="$K" 'BEGIN { if (k < 2 || b == "") print "-"; else printf "%.1f", (v - b) / (k - 1) }')
    printf "$fmt" "$scheme" "$K" "$(g n)/$(g expected_n)" "$(awk -v v="$cpl" 'BEGIN { printf (v == "n/a" ? "%s" : "%.2f"), (v == "n/a" ? v : v * 1000) }')" \
      "$per" "$marg" "$(kb2mb "$(g server_rss_kb)")" "$rps" "$(g server_fds)" "$(ns2ms "$(g p50_ns)")" "$(ns2ms "$(g p99_ns)")" \
      "$(g live_abandons)" "$(g sink_partials)" "$(g sink_stampless)" "$((K - $(m_num "$scheme" "$K" sink_failed)))/$K" | say
    printf '%s %s %s %s %s %s %s\n' "$scheme" "$K" "$(awk -v v="$cpl" 'BEGIN { print (v == "n/a") ? "NaN" : v * 1000 }')" \
      "$([[ $per == n/a ]] && echo NaN || echo "$per")" "$([[ $marg == - ]] && echo NaN || echo "$marg")" \
      "$([[ $rps == - ]] && echo NaN || echo "$rps")" "$(ns2ms "$(g p99_ns)")" >>"$CELL_DIR/plot.dat"
  done
  top=$(echo "$ks" | tail -1)
  if [[ $(m_of "$scheme" "$top" catchups) != 0 ]]; then
    g() { m_of "$scheme" "$top" "$1"; }
    note "  $scheme K=$top beside $(g catchups) catch-ups of $CATCHUP_LEDGERS ledgers: catch-ups exit $(g catchup_rc), $(g catchup_ledgers) ledgers in $(g catchup_s) s; the live subscribers' ledgers from half the range on: p50 $(ns2ms "$(g late_p50_ns)") / p99 $(ns2ms "$(g late_p99_ns)") ms (n=$(g late_n)); server VmHWM $(kb2mb "$(g server_hwm_kb)") MB"
  fi
  echo | say
done

# ---- verdicts --------------------------------------------------------------------------------
table_header
for scheme in ws wss; do
  lim=4096
  [[ $scheme == wss ]] && lim=1024
  ks=$(for d in "$CELL_DIR"/$scheme-K*/metrics.txt; do [[ -s $d ]] && metric_of "$d" K; done | sort -n)
  [[ -n $ks ]] || continue
  bad="" top=0
  for K in $ks; do
    ((K <= lim)) || continue
    top=$K
    g() { m_of "$scheme" "$K" "$1"; }
    a=$(($(m_num "$scheme" "$K" live_abandons) + $(m_num "$scheme" "$K" sink_partials)))
    [[ $(g sink_rc) == 0 && $a == 0 && $(g connected_in_time) == yes ]] || bad+="K=$K (abandons $(g live_abandons), partials $(g sink_partials), sink exit $(g sink_rc), connected in time: $(g connected_in_time)); "
  done
  row "$scheme: no abandon, all ended well, K<=$lim" "${bad:-none up to K=$top}" "K=$lim" "$([[ -z $bad && $top == "$lim" ]] && echo PASS || echo MISS)"
  r1=$(m_of "$scheme" 1 server_rss_kb)
  for K in $ks; do
    ((K > 1)) || continue
    rps=$(awk -v v="$(m_of "$scheme" "$K" server_rss_kb)" -v b="$r1" -v k="$K" 'BEGIN { if (b == "") print ""; else printf "%.1f", (v - b) / (k - 1) }')
    [[ $K == "$(echo "$ks" | tail -1)" ]] && row "$scheme: RSS per subscriber at K=$K" "${rps:-n/a} KiB" "<= 64 KiB" "$(verdict_le "$rps" 64)"
  done
  c1=$(m_of "$scheme" 1 server_cpu_s_per_ledger)
  top=$(echo "$ks" | tail -1)
  if [[ -n $c1 && -f $CELL_DIR/$scheme-K32/metrics.txt && $top -gt 32 ]]; then
    m32=$(awk -v v="$(m_of "$scheme" 32 server_cpu_s_per_ledger)" -v b="$c1" 'BEGIN { printf "%.2f", (v - b) * 1e6 / 31 }')
    mt=$(awk -v v="$(m_of "$scheme" "$top" server_cpu_s_per_ledger)" -v b="$c1" -v k="$top" 'BEGIN { printf "%.2f", (v - b) * 1e6 / (k - 1) }')
    row "$scheme: marginal CPU/sub-ledger K=32 -> K=$top" "$m32 -> $mt us" "<= 1.10 x K=32" "$(verdict_le "$mt" "$(awk -v a="$m32" 'BEGIN { print a * 1.10 }')")"
  fi
done

# ---- the plot: cost against K ------------------------------------------------------------------
if command -v gnuplot >/dev/null && [[ -s $CELL_DIR/plot.dat ]]; then
  png=$RESULTS_ROOT/cell11-scale-subscribers.png
  for s in ws wss; do awk -v s="$s" '$1 == s' "$CELL_DIR/plot.dat" >"$CELL_DIR/plot-$s.dat"; done
  gnuplot <<EOF || note "gnuplot failed: no plot"
set terminal pngcairo size 1100,900 noenhanced font ',10'
set output '$png'
set multiplot layout 2,1 title "cell 11: cost against K (256 KiB compressible / 100 ms, zstd; one host, 2 shared CPUs)"
set logscale x 2
set grid
set key top left
set xlabel 'K subscribers (log scale)'
set ylabel 'server CPU per ledger, ms'
set y2label 'marginal CPU per subscriber-ledger, us'
set y2tics
set ytics nomirror
plot '$CELL_DIR/plot-ws.dat' using 2:3 with linespoints lw 2 title 'ws: ms per ledger', \
     '$CELL_DIR/plot-wss.dat' using 2:3 with linespoints lw 2 title 'wss: ms per ledger', \
     '$CELL_DIR/plot-ws.dat' using 2:5 axes x1y2 with linespoints dt 2 title 'ws: marginal us per subscriber-ledger', \
     '$CELL_DIR/plot-wss.dat' using 2:5 axes x1y2 with linespoints dt 2 title 'wss: marginal us per subscriber-ledger'
set ylabel 'RSS per subscriber, KiB'
set y2label 'delivery p99, ms'
plot '$CELL_DIR/plot-ws.dat' using 2:6 with linespoints lw 2 title 'ws: KiB per subscriber', \
     '$CELL_DIR/plot-wss.dat' using 2:6 with linespoints lw 2 title 'wss: KiB per subscriber', \
     '$CELL_DIR/plot-ws.dat' using 2:7 axes x1y2 with linespoints dt 2 title 'ws: delivery p99', \
     '$CELL_DIR/plot-wss.dat' using 2:7 axes x1y2 with linespoints dt 2 title 'wss: delivery p99'
unset multiplot
EOF
  [[ -s $png ]] && note "plot: $png"
fi
cell_done
