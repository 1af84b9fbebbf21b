#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 4: fan-out. For each K in KS, a fresh corestreamd on 127.0.0.1 streams 1 MiB ledgers every
# 100 ms (emitted over 15 ms, uncompressed) and K subscribers subscribe at once: by default one
# `benchrunner --mode remote --subscribers K` process serving all K on one thread (so the cell
# measures the server, not K client processes fighting for two cores); FANOUT_PROCS=1 runs K
# separate single-subscriber benchrunner processes instead (the shape measured before). Every subscriber gets the same explicit range: --start is /healthz latest +
# LEAD (a ledger still in the future, so all K are connected and waiting when it is emitted, and
# every measured ledger is delivered live) and --end is start + N - 1, so they exit by themselves.
# Reported per K: delivery p50/p99/max pooled over all K x N samples and the worst subscriber's p99,
# server CPU seconds per ledger (from /proc/<pid>/stat utime+stime between the first and last
# measured ledger), server RSS (VmRSS at the end and VmHWM), /healthz live_abandons and
# raw_fallbacks, and the subscribers' discarded partials and stampless rows.
# Target: at K=128, delivery p99 <= 2 x the K=1 p99, and zero abandons.
# Results of each K stay in bench/results/cell4-fanout/K<k>/; the table is rebuilt from every K
# present, so K=32 and K=128 can be run later (KS="32 128") and compared with an earlier K=1.
# Wall time per K: about (LEAD + N) x 0.1 s + start-up: ~33 s for K=1 and 8, ~35 s for 32, ~40 s
# for 128 at N=300; the whole default cell took 143 s.
# Environment: BUILD_DIR (default build), KS (default "1 8 32 128"), N (default 300 ledgers per
# subscriber), LEAD (default 20 + K/2 ledgers), FANOUT_COMPRESS (default false), VERIFY (default
# 0; 1 makes every subscriber regenerate and compare the payload too), TLS (default 0; 1 serves
# wss:// with a certificate made for the run, results in bench/results/cell4-fanout-tls/),
# FANOUT_PROCS (default 0: one process; 1: K processes), WARM (default 10: the ledgers per
# subscriber left out of p99_steady_ns, the steady state's p99 reported beside the whole run's).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KS=${KS:-1 8 32 128}
N=${N:-300}
FANOUT_COMPRESS=${FANOUT_COMPRESS:-false}
VERIFY=${VERIFY:-0}
FANOUT_PROCS=${FANOUT_PROCS:-0}
WARM=${WARM:-10}
SIZE=1048576
IVAL_MS=100

TLS=${TLS:-0}
if ((TLS)); then
  bench_init cell4-fanout-tls "fan-out over wss://: one corestreamd, K remote subscribers from the tip, 1 MiB every 100ms over 15ms" keep
  tls_material "$SCRATCH/tls"
  SRV_TLS=(--tls-cert "$TLS_CERT" --tls-key "$TLS_KEY")
  CLI_TLS=(-tls-ca "$TLS_CA")
  SCHEME=wss HEALTHZ_SCHEME=https HEALTHZ_CURL=(--cacert "$TLS_CA")
else
  bench_init cell4-fanout "fan-out: one corestreamd, K remote subscribers from the tip, 1 MiB every 100ms over 15ms" keep
  SRV_TLS=() CLI_TLS=() SCHEME=ws
fi
need_tools curl
if ((FANOUT_PROCS)); then CLIENTS="K benchrunner processes"; else CLIENTS="one benchrunner process, --subscribers K"; fi
note "K values this run: $KS; N=$N ledgers per subscriber; compress=$FANOUT_COMPRESS; verify=$VERIFY; clients: $CLIENTS"
note "open-file limit $(ulimit -n); per-K details in $CELL_DIR/K<k>/"

run_k() {
  local K=$1 kdir=$CELL_DIR/K$1
  rm -rf -- "${kdir:?}"
  mkdir -p "$kdir"
  CMD_FILE=$kdir/commands.txt
  local lead=${LEAD:-$((20 + K / 2))}
  local cap=$((lead + N + 600))
  local km=$kdir/metrics.txt
  : >"$km"
  echo | say
  note "--- K=$K: $K subscribers, $N ledgers each, start = latest + $lead ---"
  server_start "K$K/server" $((cap * IVAL_MS / 1000 + 120)) --retention 256 --source synthetic \
    --synthetic-size "$SIZE" --synthetic-interval ${IVAL_MS}ms --emit-window 15ms --chunk-size 262144 \
    --compress="$FANOUT_COMPRESS" --synthetic-count "$cap" "${SRV_TLS[@]}"
  local spid=$SERVER_PID addr=$SERVER_ADDR csd=$SERVER_CSD_PID
  local l0 start end
  l0=$(wait_latest "$addr" 1 500)
  start=$((l0 + lead))
  end=$((start + N - 1))
  local climit=$(((lead + N) * IVAL_MS / 1000 + 90))
  local vflags=()
  ((VERIFY)) && vflags=(--verify --synthetic-size "$SIZE")
  local pids=() i name
  if ((FANOUT_PROCS)); then
    for ((i = 1; i <= K; i++)); do
      printf -v name 'K%d/sub-%03d' "$K" "$i"
      bg_benchrunner "pid_$i" "$name" "$climit" --mode remote --url "$SCHEME://$addr" --start "$start" --end "$end" "${vflags[@]}" "${CLI_TLS[@]}"
      eval "pids+=(\"\$pid_$i\")"
    done
  else
    # One process: its CSV sub.csv becomes sub-001.csv .. sub-<K>.csv (just sub.csv for K=1).
    bg_benchrunner pid_1 "K$K/sub" "$climit" --mode remote --url "$SCHEME://$addr" --start "$start" --end "$end" --subscribers "$K" "${vflags[@]}" "${CLI_TLS[@]}"
    pids=("$pid_1")
  fi
  # All K should be connected before ledger $start begins.
  local hz subs=0 lat=0
  for ((i = 0; i < 1000; i++)); do
    hz=$(healthz "$addr")
    subs=$(json_num "$hz" subscribers)
    lat=$(json_num "$hz" latest)
    subs=${subs:-0} lat=${lat:-0}
    ((subs >= K || lat >= start - 1)) && break
    sleep 0.02
  done
  local connected_in_time=yes
  ((subs >= K && lat < start - 1)) || connected_in_time="no ($subs of $K connected when ledger $lat was the latest; start $start)"
  note "  $subs/$K subscribers connected at latest=$lat; measuring ledgers $start..$end"
  # Server CPU from the ledger before the first measured one to the end.
  lat=$(wait_latest "$addr" $((start - 1)) 3000)
  local c0 lat0=$lat t0=$SECONDS
  c0=$(proc_cpu_s "$csd")
  local rc fails=0 failmsg=""
  for ((i = 1; i <= ${#pids[@]}; i++)); do
    wait_rc "${pids[i - 1]}"
    rc=$RC
    if ((FANOUT_PROCS)); then printf -v name 'K%d/sub-%03d' "$K" "$i"; else name="K$K/sub"; fi
    if ((!FANOUT_PROCS)); then
      # the summary says how many of the K failed; a process that died before it, all K
      local said
      said=$(sed -n 's/^subscribers  [0-9]* on one thread: [0-9]* ended well, \([0-9]*\) failed$/\1/p' "$CELL_DIR/$name.out")
      ((K == 1)) && ((rc != 0)) && said=1
      ((K == 1)) && ((rc == 0)) && said=0
      fails=${said:-$K}
    elif ((rc != 0)); then
      fails=$((fails + 1))
    fi
    if ((rc != 0)); then
      [[ -n $failmsg ]] || failmsg="$name exit $rc: $(grep -m1 'benchrunner:' "$CELL_DIR/$name.out" || tail -1 "$CELL_DIR/$name.out")"
    fi
  done
  hz=$(healthz "$addr")
  local c1 lat1 rss hwm dt=$((SECONDS - t0))
  c1=$(proc_cpu_s "$csd")
  lat1=$(json_num "$hz" latest)
  rss=$(proc_kb "$csd" VmRSS)
  hwm=$(proc_kb "$csd" VmHWM)
  printf '%s\n' "$hz" >"$kdir/healthz-end.json"
  bg_interrupt "$spid" corestreamd
  unset CMD_FILE

  local csvs=("$kdir"/sub*.csv)
  [[ -e ${csvs[0]} ]] || csvs=()
  local n p50 p90 p99 pmax worst=0 f s
  read -r n p50 p90 p99 pmax _ < <(csv_stats 7 0 "${csvs[@]}")
  # The same without each subscriber's first WARM ledgers: the stream's steady state, past the
  # connections' start (their first ledgers pay for TCP windows and buffers growing).
  local p99_steady
  read -r _ _ _ p99_steady _ _ < <(csv_stats 7 "$WARM" "${csvs[@]}")
  for f in "${csvs[@]}"; do
    read -r _ _ _ s _ _ < <(csv_stats 7 0 "$f")
    ((s > worst)) && worst=$s
  done
  local ccpu=0
  for f in "$kdir"/sub*.time; do
    [[ -s $f ]] && ccpu=$(awk -v a="$ccpu" -v b="$(timev_cpu_s "$f")" 'BEGIN { printf "%.2f", a + b }')
  done
  local cpu_per
  cpu_per=$(awk -v a="$c0" -v b="$c1" -v l0="$lat0" -v l1="${lat1:-0}" 'BEGIN { if (l1 > l0) printf "%.5f", (b - a) / (l1 - l0); else print "n/a" }')
  {
    echo "K=$K"
    echo "n=$n"
    echo "expected_n=$((K * N))"
    echo "p50_ns=$p50"
    echo "p90_ns=$p90"
    echo "p99_ns=$p99"
    echo "p99_steady_ns=$p99_steady"
    echo "warm=$WARM"
    echo "max_ns=$pmax"
    echo "worst_sub_p99_ns=$worst"
    echo "failed_subscribers=$fails"
    echo "first_failure=$failmsg"
    echo "connected_in_time=$connected_in_time"
    echo "server_cpu_s=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')"
    echo "server_cpu_ledgers=$((${lat1:-0} - lat0))"
    echo "server_cpu_s_per_ledger=$cpu_per"
    echo "server_cpu_pct=$(div "$(awk -v a="$c0" -v b="$c1" 'BEGIN { print (b - a) * 100 }')" "$dt" %.0f)"
    echo "clients_cpu_s=$ccpu"
    echo "clients_cpu_s_per_ledger=$(div "$ccpu" $((K * N)) %.5f)"
    echo "server_rss_kb=$rss"
    echo "server_hwm_kb=$hwm"
    echo "live_abandons=$(json_num "$hz" live_abandons)"
    echo "raw_fallbacks=$(json_num "$hz" raw_fallbacks)"
    echo "discarded_partials=$(csv_sum 9 "${csvs[@]}")"
    echo "stampless=$(csv_count_empty 7 "${csvs[@]}")"
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "range=$start..$end"
    echo "clients=$((FANOUT_PROCS ? K : 1))"
  } >"$km"
  note "  done: n=$n of $((K * N)), p50 $(ns2ms "$p50") ms, p99 $(ns2ms "$p99") ms, max $(ns2ms "$pmax") ms, failed subscribers $fails"
  [[ -z $failmsg ]] || note "  first failure: $failmsg"
}

for K in $KS; do
  [[ $K =~ ^[0-9]+$ ]] && ((K >= 1 && K <= 1024)) || die "K must be 1..1024, got '$K'"
  run_k "$K"
done

# The table, from every K measured so far (this run or an earlier one).
echo | say
note "fan-out table (1 MiB every 100 ms, N=$N per subscriber; delivery pooled over all subscribers' stamped samples;"
note "srv_ms/ledg: server CPU per published ledger; srv_%: of one CPU; cli_ms/ledg: client CPU per ledger per subscriber, whichever the client processes (clients= in each metrics.txt))"
fmt='%-5s %-8s %-12s %-8s %-8s %-8s %-9s %-11s %-6s %-14s %-11s %-8s %-6s %-9s %s\n'
printf "$fmt" K subs n p50_ms p99_ms max_ms worst_p99 srv_ms/ledg srv_% srv_RSS/HWM_MB cli_ms/ledg abandons raw_fb discarded stampless | say
base_p99=""
[[ -f $CELL_DIR/K1/metrics.txt ]] && base_p99=$(metric_of "$CELL_DIR/K1/metrics.txt" p99_ns)
ks=$(for d in "$CELL_DIR"/K*/metrics.txt; do [[ -s $d ]] && metric_of "$d" K; done | sort -n)
for K in $ks; do
  m=$CELL_DIR/K$K/metrics.txt
  g() { metric_of "$m" "$1"; }
  printf "$fmt" "$K" "$((K - $(g failed_subscribers)))/$K" "$(g n)/$(g expected_n)" "$(ns2ms "$(g p50_ns)")" "$(ns2ms "$(g p99_ns)")" \
    "$(ns2ms "$(g max_ns)")" "$(ns2ms "$(g worst_sub_p99_ns)")" "$(awk -v v="$(g server_cpu_s_per_ledger)" 'BEGIN { if (v == "n/a") print v; else printf "%.2f", v * 1000 }')" \
    "$(g server_cpu_pct)" "$(kb2mb "$(g server_rss_kb)")/$(kb2mb "$(g server_hwm_kb)")" \
    "$(awk -v v="$(g clients_cpu_s_per_ledger)" 'BEGIN { if (v == "" || v == "n/a") print "n/a"; else printf "%.2f", v * 1000 }')" "$(g live_abandons)" "$(g raw_fallbacks)" "$(g discarded_partials)" "$(g stampless)" | say
done
echo | say
table_header
for K in $ks; do
  m=$CELL_DIR/K$K/metrics.txt
  g() { metric_of "$m" "$1"; }
  p99=$(ns2ms "$(g p99_ns)")
  if [[ $K == 1 ]]; then
    row "K=1 delivery p99 (measured $(g date))" "$p99 ms" "(the baseline)"
  elif [[ -n $base_p99 ]]; then
    lim=$(awk -v b="$base_p99" 'BEGIN { printf "%.3f", 2 * b / 1e6 }')
    row "K=$K delivery p99 (measured $(g date))" "$p99 ms" "<= $lim ms (2x K=1)" "$(verdict_le "$p99" "$lim")"
  else
    row "K=$K delivery p99 (measured $(g date))" "$p99 ms" "2x K=1 (K=1 not run)"
  fi
  row "K=$K live_abandons + discarded partials" "$(g live_abandons) + $(g discarded_partials)" "0" "$(verdict_eq "$(g live_abandons)+$(g discarded_partials)" 0+0)"
  # Feasibility: say so when this K was not sustained at 1 MiB / 100 ms.
  why=()
  (($(g failed_subscribers) == 0)) || why+=("$(g failed_subscribers) subscriber(s) failed: $(g first_failure)")
  [[ $(g n) == "$(g expected_n)" ]] || why+=("only $(g n) of $(g expected_n) samples")
  [[ $(g connected_in_time) == yes ]] || why+=("not all connected before the first measured ledger: $(g connected_in_time)")
  (($(g stampless) == 0)) || why+=("$(g stampless) ledgers arrived stampless (replayed from the ring)")
  (($(g live_abandons) == 0)) || why+=("$(g live_abandons) live abandons")
  awk -v v="$(g p99_ns)" -v i=$IVAL_MS 'BEGIN { exit !(v / 1e6 > i) }' && why+=("p99 above the 100 ms interval: subscribers fell behind")
  if ((${#why[@]})); then
    printf -v whys '%s; ' "${why[@]}"
    note "  K=$K at 1 MiB/100 ms was NOT sustained cleanly on this machine ($(nproc) CPUs shared by the server and $(g clients || echo "$K") client process(es) for $K subscribers): ${whys%; }. The numbers above are what was measured at that shape; delivery percentiles cover only the stamped (live) samples."
  fi
done
if [[ -z $(for K in $ks; do [[ $K == 128 ]] && echo y; done) ]]; then
  note "K=128 (the target row) has not been measured yet: KS=128 bench/cell4-fanout.sh"
fi

metric ks_measured "$(echo $ks)"
echo | say
note "commands: $CELL_DIR/K<k>/commands.txt (first of each K shown)"
for K in $KS; do
  note "  K=$K: $(head -1 "$CELL_DIR/K$K/commands.txt")"
  if ((FANOUT_PROCS)); then
    note "        $(sed -n 2p "$CELL_DIR/K$K/commands.txt")   (x $K, sub-001..)"
  else
    note "        $(sed -n 2p "$CELL_DIR/K$K/commands.txt")   (one process, $K subscribers)"
  fi
done
cell_done
